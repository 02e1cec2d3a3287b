"""The admin on a big team: a "select all" of more than Django's default 1,000 fields confirms
(it used to answer the curator's "yes" with a bare 400 and change nothing), and a selection too
big to confirm is refused before the question; counts and summaries say what they count."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings
from django.urls import reverse

from lessons.models import Lesson, LessonStatus, Memory
from lessons.services.memories import memory_create, memory_update

pytestmark = pytest.mark.django_db

LESSONS = reverse("admin:lessons_lesson_changelist")
MEMORIES = reverse("admin:lessons_memory_changelist")


@pytest.fixture
def superuser_client(client):
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "x"))
    return client


def proposals(team, count):
    return Lesson.objects.bulk_create(
        Lesson(team=team, title=f"Proposal {n}", status=LessonStatus.PROPOSED) for n in range(count)
    )


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_accepting_1100_proposals_at_once_goes_through(superuser_client, team):
    ids = [lesson.pk for lesson in proposals(team, 1100)]
    asked = superuser_client.post(LESSONS, {"action": "accept_selected", "_selected_action": ids})
    assert "Yes, accept 1100" in asked.content.decode()
    done = superuser_client.post(
        LESSONS, {"action": "accept_selected", "_selected_action": ids, "confirm": "yes"}, follow=True
    )
    assert done.status_code == 200 and "1100 proposal(s) accepted." in messages_of(done)
    assert not Lesson.objects.filter(status=LessonStatus.PROPOSED).exists()


def test_deleting_1100_lessons_at_once_goes_through(superuser_client, team):
    ids = [lesson.pk for lesson in proposals(team, 1100)]
    done = superuser_client.post(LESSONS, {"action": "delete_selected", "_selected_action": ids, "post": "yes"},
                                 follow=True)
    assert done.status_code == 200 and not Lesson.objects.exists()


@override_settings(DATA_UPLOAD_MAX_NUMBER_FIELDS=105)  # so 5 rows is the most one action confirms
@pytest.mark.parametrize("action", ["accept_selected", "delete_selected"])
def test_a_selection_too_big_to_confirm_is_refused_before_the_question(superuser_client, team, action):
    ids = [lesson.pk for lesson in proposals(team, 6)]
    refused = superuser_client.post(LESSONS, {"action": action, "_selected_action": ids}, follow=True)
    assert messages_of(refused) == [
        "6 rows are selected; one action takes at most 5. Narrow the list with a filter or a search, and run it again."
    ]
    assert Lesson.objects.filter(status=LessonStatus.PROPOSED).count() == 6
    asked = superuser_client.post(LESSONS, {"action": action, "_selected_action": ids[:5]})
    assert asked.status_code == 200 and "Yes" in asked.content.decode()  # five are asked about


@override_settings(DATA_UPLOAD_MAX_NUMBER_FIELDS=105)
def test_accepting_counts_only_the_proposals_a_confirmation_carries(superuser_client, team):
    confirmed = Lesson.objects.bulk_create(Lesson(team=team, title=f"Kept {n}") for n in range(10))
    ids = [lesson.pk for lesson in [*proposals(team, 3), *confirmed]]  # 13 selected, 3 proposals
    asked = superuser_client.post(LESSONS, {"action": "accept_selected", "_selected_action": ids})
    assert "Yes, accept 3" in asked.content.decode()


def test_the_version_filter_counts_every_version_and_both_means_both(superuser_client, team):
    memory = memory_create(team=team, content="First")
    for text in ("Second", "Third", "Fourth"):
        memory = memory_update(memory=memory, content=text)
    memory_create(team=team, content="Another")
    page = superuser_client.get(MEMORIES, {"_facets": "True"}).content.decode()
    assert "Current memories (2)" in page and "Earlier versions (3)" in page and "Both (5)" in page
    default = superuser_client.get(MEMORIES)
    assert default.context["cl"].result_count == 2  # current memories, marked as the choice made
    assert re.search(r'<li class="selected">\s*<a href="\?version_state=current"', default.content.decode())
    assert ">All<" not in default.content.decode().split("By version")[1].split("</ul>")[0]
    both = superuser_client.get(MEMORIES, {"version_state": "all"})
    assert both.context["cl"].result_count == Memory.objects.count() == 5
    # "(N total)" links to the unfiltered list, which shows current memories: it counts those
    assert default.context["cl"].full_result_count == 2
    assert "total)" not in default.content.decode().split('id="changelist-search"')[1].split("</form>")[0]
    unknown = superuser_client.get(MEMORIES, {"version_state": "bogus"}).content.decode()
    assert re.search(r'<li class="selected">\s*<a href="\?version_state=current"', unknown)


def test_earlier_versions_are_searched_alone_when_the_list_shows_them(superuser_client, team):
    memory = memory_create(team=team, content="Booked the Erasmus semester in Lisbon")
    memory_update(memory=memory, content="Moved to Lisbon for a semester abroad")
    for n in range(60):  # current memories that would fill the best 50 of a search of both
        memory_create(team=team, content=f"Lisbon trip note {n}: trams, tiles and a semester of sunshine")
    listing = superuser_client.get(MEMORIES, {"q": "Lisbon semester", "version_state": "earlier"})
    rows = list(listing.context["cl"].result_list)
    assert [row.content for row in rows] == ["Booked the Erasmus semester in Lisbon"]
    assert listing.context["cl"].engine_search.rows[0].id == rows[0].pk  # the summary counts what is shown
    assert len(listing.context["cl"].engine_search.rows) == 1


def test_a_long_memory_is_cut_in_the_list_not_on_its_page(superuser_client, team):
    memory = memory_create(team=team, content="word " * 700)
    listing = superuser_client.get(MEMORIES).content.decode()
    assert ("word " * 50) in listing and ("word " * 100) not in listing and "…" in listing
    assert ("word " * 699).strip() in superuser_client.get(
        reverse("admin:lessons_memory_change", args=[memory.pk])).content.decode()


def test_the_proposals_pager_elides_the_middle(superuser_client, team):
    proposals(team, 400)
    page = superuser_client.get(reverse("admin:lessons_lesson_proposals"), {"team": team.slug, "page": 20}).content
    pager = page.decode().split('<p class="paginator">')[1].split("</p>")[0]
    assert "page=1\"" in pager and "page=40\"" in pager and "…" in pager
    assert "page=10\"" not in pager and "page=19\"" in pager and "page=21\"" in pager


def test_a_duplicates_page_at_its_limit_says_there_may_be_more(superuser_client, team):
    from tests.curation_data import DOCKER_PIN, DOCKER_PIN_AGAIN, embed, lesson

    pin, again = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN)
    embed(pin, again)
    duplicates = reverse("admin:lessons_lesson_duplicates")
    at_limit = superuser_client.get(duplicates, {"team": team.slug, "limit": 1}).content.decode()
    assert "The closest 1 pair (the limit; there may be more)" in at_limit
    under = superuser_client.get(duplicates, {"team": team.slug, "limit": 5}).content.decode()
    assert "1 pair of lessons" in under and "there may be more" not in under


def test_the_playground_says_an_rrf_score_is_not_the_sum_of_its_bars(superuser_client, team):
    from tests.curation_data import DOCKER_PIN, lesson

    lesson(team, DOCKER_PIN)
    page = superuser_client.get(reverse("admin:lessons_search_playground"),
                                {"team": team.slug, "q": "docker", "fusion": "rrf", "b_mode": "text"}).content.decode()
    assert page.count("the score is not the sum of the bars") == 1  # under the RRF column only


def test_an_earlier_versions_page_leads_to_its_memory_and_its_siblings(superuser_client, team):
    memory = memory_create(team=team, content="First")
    for text in ("Second", "Third"):
        memory = memory_update(memory=memory, content=text)
    first = Memory.objects.get(current_version=memory, version=1)
    second = Memory.objects.get(current_version=memory, version=2)
    page = superuser_client.get(reverse("admin:lessons_memory_change", args=[first.pk])).content.decode()
    change = reverse("admin:lessons_memory_change", args=[memory.pk])
    assert f'<a href="{change}">Current memory</a>' in page  # it said nothing of whose version it is
    assert f'href="{reverse("admin:lessons_memory_change", args=[second.pk])}">Version 2</a>' in page
    assert f'href="{change}">Version 3</a>' in page
    earlier = superuser_client.get(MEMORIES, {"version_state": "earlier"}).content.decode()
    assert 'value="delete_selected"' not in earlier  # it always refused there
    assert 'value="delete_selected"' in superuser_client.get(MEMORIES).content.decode()
