"""Every sidebar filter of the lesson and memory lists narrows the engine's search, not its best 50
(lessons.admin.search). The sidebar's link for a plain field is `?category=` / `?importance=` while
the search read `category__exact` / `importance__exact`: "database security" and then "frontend"
under "By category" answered "0 results" where the engine finds 21 frontend lessons, and
`?importance=3` 0 memories for 3.

Each test follows the sidebar's own links (the query strings its filter specs render), so it checks
the spelling Django actually sends, and compares the list with the engine's answer under the same
filter, in the same order."""

from urllib.parse import parse_qs, urlsplit

import pytest
from django.urls import reverse

from lessons.models import EmbeddingStatus, Lesson, Memory
from lessons.search import SearchFilters, SearchRequest, search
from lessons.selectors.admin_search import ALL_LESSON_STATUSES, admin_list_search, admin_teams
from tests.factories import LessonFactory, MemoryFactory, TeamFactory

pytestmark = pytest.mark.django_db

LESSONS = reverse("admin:lessons_lesson_changelist")
MEMORIES = reverse("admin:lessons_memory_changelist")
PLAYGROUND = reverse("admin:lessons_search_playground")
LESSON_QUERY = "database security"
MEMORY_QUERY = "a day with friends"
PER_PAGE = 50

# The sidebar's filters, by the parameter each one's links send. A filter added to a list without
# a row here fails `test_every_sidebar_filter_is_covered`: say here how the engine applies it.
LESSON_SIDEBAR = {"status__exact", "category", "team__id__exact", "embedding_status"}
MEMORY_SIDEBAR = {"version_state", "team__id__exact", "importance", "embedding_status"}


def _listed(response) -> list[int]:
    assert response.status_code == 200, response.status_code
    return [row.pk for row in response.context["cl"].result_list]


def _params(query_string: str) -> dict[str, str]:
    return {name: values[-1] for name, values in parse_qs(query_string.lstrip("?"), keep_blank_values=True).items()}


def _teams(params: dict):
    chosen = params.get("team__id__exact")
    if chosen is None:
        return list(admin_teams(include_evaluation=False))
    if chosen == "all":
        return list(admin_teams(include_evaluation=True))
    return list(admin_teams(include_evaluation=True).filter(pk=int(chosen)))


def _engine_lessons(params: dict) -> list[int]:
    """The engine's best page for the lesson list's query string, its filters spelled out by hand."""
    assert set(params) - {"q"} <= LESSON_SIDEBAR, params
    filters = SearchFilters(
        statuses=(params["status__exact"],) if "status__exact" in params else ALL_LESSON_STATUSES,
        categories=(params["category"],) if "category" in params else (),
        embedding_states=(params["embedding_status"],) if "embedding_status" in params else (),
    )
    return admin_list_search(kind="lessons", query=params["q"], teams=_teams(params), filters=filters,
                             limit=PER_PAGE).ids


def _engine_memories(params: dict) -> list[int]:
    assert set(params) - {"q"} <= MEMORY_SIDEBAR, params
    importance = int(params["importance"]) if "importance" in params else None
    version_state = params.get("version_state", "current")
    filters = SearchFilters(
        min_importance=importance,
        max_importance=importance,
        include_versions=version_state in ("earlier", "all"),
        only_versions=version_state == "earlier",
        embedding_states=(params["embedding_status"],) if "embedding_status" in params else (),
    )
    return admin_list_search(kind="memories", query=params["q"], teams=_teams(params), filters=filters,
                             limit=PER_PAGE).ids


def _sidebar_links(admin_client, path: str, query: str, team) -> dict[str, list[str]]:
    """Each sidebar filter's links on the searched list, by the parameter the filter reads."""
    response = admin_client.get(path, {"q": query, "team__id__exact": team.pk})
    changelist = response.context["cl"]
    links = {}
    for spec in changelist.filter_specs:
        (parameter,) = [name for name in spec.expected_parameters() if not name.endswith("__isnull")]
        links[parameter] = [choice["query_string"] for choice in spec.choices(changelist)]
    return links


@pytest.fixture
def more_teams(demo_team):
    """A second team and an evaluation team, so the team filter offers several teams and "All"."""
    acme = TeamFactory(slug="acme", name="Acme")
    LessonFactory(team=acme, title="Encrypt database backups at rest", category="security", tags=["backups"])
    MemoryFactory(team=acme, content="Spent a day at the lake with friends from school", importance=4)
    evaluation = TeamFactory(slug="eval-tiny", name="Tiny benchmark")
    LessonFactory(team=evaluation, title="Database security in a benchmark corpus", category="security")
    MemoryFactory(team=evaluation, content="A day with friends in a benchmark corpus", importance=3)
    return acme, evaluation


@pytest.fixture
def stale_rows(demo_team):
    """A few rows the query ranks below the best 50 marked stale, so the embedding filter's "stale"
    has rows only a filter applied before the cut finds."""
    stale = {}
    for model, kind, query, filters in ((Lesson, "lessons", LESSON_QUERY, SearchFilters(statuses=ALL_LESSON_STATUSES)),
                                        (Memory, "memories", MEMORY_QUERY, SearchFilters())):
        ranked = [hit.id for hit in search(request=SearchRequest(team=demo_team, query=query, kind=kind, limit=100,
                                                                 filters=filters)).results]
        assert len(ranked) > PER_PAGE
        model.objects.filter(pk__in=ranked[PER_PAGE:PER_PAGE + 5]).update(content_hash="stale")
        stale[model] = set(ranked[PER_PAGE:PER_PAGE + 5])
    return stale


@pytest.mark.parametrize("path, sidebar", [(LESSONS, LESSON_SIDEBAR), (MEMORIES, MEMORY_SIDEBAR)])
def test_every_sidebar_filter_is_covered(admin_client, demo_team, path, sidebar):
    query = LESSON_QUERY if path == LESSONS else MEMORY_QUERY
    assert set(_sidebar_links(admin_client, path, query, demo_team)) == sidebar


@pytest.mark.usefixtures("more_teams", "stale_rows")
@pytest.mark.parametrize("parameter", sorted(LESSON_SIDEBAR))
def test_each_lesson_sidebar_filter_clicked_after_a_search_is_the_engines_answer_with_it(
        admin_client, demo_team, parameter):
    links = _sidebar_links(admin_client, LESSONS, LESSON_QUERY, demo_team)[parameter]
    assert len(links) >= 3
    found = {}
    for link in links:
        params = _params(link)
        assert params["q"] == LESSON_QUERY  # the link keeps the search
        listed = _listed(admin_client.get(LESSONS + link))
        assert listed == _engine_lessons(params), link
        found[params.get(parameter)] = listed
    assert sum(bool(rows) for rows in found.values()) >= 2, {value: len(rows) for value, rows in found.items()}


@pytest.mark.usefixtures("more_teams", "stale_rows")
@pytest.mark.parametrize("parameter", sorted(MEMORY_SIDEBAR))
def test_each_memory_sidebar_filter_clicked_after_a_search_is_the_engines_answer_with_it(
        admin_client, demo_team, parameter):
    links = _sidebar_links(admin_client, MEMORIES, MEMORY_QUERY, demo_team)[parameter]
    assert len(links) >= 3
    found = {}
    for link in links:
        params = _params(link)
        assert params["q"] == MEMORY_QUERY
        listed = _listed(admin_client.get(MEMORIES + link))
        assert listed == _engine_memories(params), link
        found[params.get(parameter)] = listed
    assert sum(bool(rows) for rows in found.values()) >= 2, {value: len(rows) for value, rows in found.items()}


def test_the_testers_category_clicks_find_what_the_engine_finds_in_that_category(admin_client, demo_team):
    # "0 results" for frontend, 2 for testing (of 17), 1 for deployment (of 16), 2 for performance (of 12)
    for category in ("frontend", "testing", "deployment", "performance"):
        clicked = _listed(admin_client.get(LESSONS, {"q": LESSON_QUERY, "team__id__exact": demo_team.pk,
                                                     "category": category}))
        in_category = search(request=SearchRequest(team=demo_team, query=LESSON_QUERY, kind="lessons", limit=PER_PAGE,
                                                   filters=SearchFilters(statuses=ALL_LESSON_STATUSES,
                                                                         categories=(category,))))
        assert len(in_category.results) >= 10, category
        assert set(clicked) == {hit.id for hit in in_category.results}, category
        assert set(Lesson.objects.filter(pk__in=clicked).values_list("category", flat=True)) == {category}


def test_the_testers_importance_click_finds_what_the_engine_finds_at_that_importance(admin_client, demo_team):
    clicked = _listed(admin_client.get(MEMORIES, {"q": MEMORY_QUERY, "team__id__exact": demo_team.pk,
                                                  "importance": 3}))
    at_three = search(request=SearchRequest(team=demo_team, query=MEMORY_QUERY, kind="memories", limit=PER_PAGE,
                                            filters=SearchFilters(min_importance=3, max_importance=3)))
    assert at_three.results
    assert set(clicked) == {hit.id for hit in at_three.results}


@pytest.mark.parametrize("path, sidebar, typed", [
    (LESSONS, {"category": "frontend"}, {"category__exact": "frontend"}),
    (LESSONS, {"status__exact": "proposed"}, {"status": "proposed"}),
    (LESSONS, {"team__id__exact": "TEAM"}, {"team": "TEAM"}),
    (LESSONS, {"team__id__exact": "TEAM"}, {"team_id": "TEAM"}),
    (MEMORIES, {"importance": "3"}, {"importance__exact": "3"}),
])
def test_the_sidebars_spelling_and_the_typed_one_search_alike(admin_client, demo_team, path, sidebar, typed):
    query = LESSON_QUERY if path == LESSONS else MEMORY_QUERY
    # a team besides demo whose rows would fill the best 50 of a search across both teams
    other = TeamFactory(slug="acme")
    for number in range(PER_PAGE + 10):
        if path == LESSONS:
            LessonFactory(team=other, title=f"Database security note {number}", category="security")
        else:
            MemoryFactory(team=other, content=f"A day with friends, number {number}", importance=3)

    def spelled(params):
        return {name: demo_team.pk if value == "TEAM" else value for name, value in params.items()}

    by_sidebar = _listed(admin_client.get(path, {"q": query, **spelled(sidebar)}))
    assert by_sidebar
    assert _listed(admin_client.get(path, {"q": query, **spelled(typed)})) == by_sidebar
    # both at once, agreeing, are the same filter (disagreeing: test_two_spellings_that_disagree_list_nothing)
    assert _listed(admin_client.get(path, {"q": query, **spelled(sidebar), **spelled(typed)})) == by_sidebar


def test_two_spellings_that_disagree_list_nothing(admin_client, demo_team):
    both = _listed(admin_client.get(LESSONS, {"q": LESSON_QUERY, "category": "frontend", "category__exact": "testing"}))
    assert both == []


def test_several_importances_typed_are_each_searched_in_full(admin_client, demo_team):
    # the sidebar picks one; `?importance=3&importance=7` lists either, each as the engine ranks it
    listed = set(_listed(admin_client.get(MEMORIES, {"q": MEMORY_QUERY, "team__id__exact": demo_team.pk,
                                                     "importance": ["3", "7"]})))
    by_range = search(request=SearchRequest(team=demo_team, query=MEMORY_QUERY, kind="memories", limit=PER_PAGE,
                                            filters=SearchFilters(min_importance=3, max_importance=7)))
    expected = {hit.id for hit in by_range.results if hit.fields["importance"] in (3, 7)}
    assert expected and listed == expected


def _playground_link(response) -> dict[str, list[str]]:
    url = response.context["cl"].playground_url
    assert url and urlsplit(url).path == PLAYGROUND
    return parse_qs(urlsplit(url).query)


def test_the_playground_link_carries_the_sidebars_category_and_ranks_the_same_rows(admin_client, demo_team):
    response = admin_client.get(LESSONS, {"q": LESSON_QUERY, "team__id__exact": demo_team.pk, "category": "frontend"})
    link = _playground_link(response)
    assert link["category"] == ["frontend"] and link["status"] == list(ALL_LESSON_STATUSES)
    playground = admin_client.get(PLAYGROUND, {**link, "b_mode": ""})
    assert [row.id for row in playground.context["runs"][0].rows] == _listed(response)


def test_the_playground_link_carries_the_sidebars_importance_and_embedding(admin_client, demo_team):
    response = admin_client.get(MEMORIES, {"q": MEMORY_QUERY, "team__id__exact": demo_team.pk, "importance": 3,
                                           "embedding_status": EmbeddingStatus.FRESH})
    link = _playground_link(response)
    assert link["min_importance"] == link["max_importance"] == ["3"] and link["embedding"] == ["fresh"]
    playground = admin_client.get(PLAYGROUND, {**link, "b_mode": ""})
    listed = _listed(response)
    assert listed and [row.id for row in playground.context["runs"][0].rows] == listed


@pytest.mark.parametrize("path, params", [
    (LESSONS, {"category": "x" * 300}),
    (LESSONS, {"category": "Bad category!"}),
    (MEMORIES, {"importance": "abc"}),
    (MEMORIES, {"importance": "99"}),
    (LESSONS, {"team": "abc"}),
])
def test_a_bad_sidebar_value_with_a_search_is_an_answer_not_a_500(admin_client, demo_team, path, params):
    response = admin_client.get(path, {"q": "security", **params})
    assert response.status_code in (200, 302), response.status_code
    if response.status_code == 302:
        assert response["Location"].endswith("?e=1")
    else:
        assert _listed(response) == []
