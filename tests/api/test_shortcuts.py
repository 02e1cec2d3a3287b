"""The agents' shortcuts (seed 000's lesson retrieval, seed 004's memory tools), for the caller's
team only: searches answer with the search engine's response shape, listings (friends, panic
attacks, interests, events) with `total` and `results`, without scores or relevance labels."""

from datetime import timedelta

import pytest
from django.utils import timezone

from lessons.services.lessons import lesson_create
from lessons.services.memories import memory_create, memory_update

pytestmark = pytest.mark.django_db


def _ids(response):
    assert response.status_code == 200, response.content
    return [hit["id"] for hit in response.json()["results"]]


@pytest.fixture
def lessons(team, other_team, django_capture_on_commit_callbacks):
    rows = {}
    # Embedding runs after commit, as in production.
    with django_capture_on_commit_callbacks(execute=True):
        for owner, suffix in ((team, "ours"), (other_team, "theirs")):
            rows[f"auth_{suffix}"] = lesson_create(
                team=owner,
                title="Authentication: short-lived JWTs with refresh token rotation",
                description="Login sessions were hijacked because access tokens lived for a week.",
                category="security",
                tech_stacks=["nextjs"],
                project_types=["saas"],
            )
        rows["css"] = lesson_create(team=team, title="Prefer CSS grid for page layout", category="frontend")
    return rows


def test_relevant_lessons(api, lessons):
    ids = _ids(api.get("/lessons/relevant", {"project_type": "saas", "tech_stack": ["nextjs"], "limit": 5}))
    assert lessons["auth_ours"].pk in ids
    assert lessons["auth_theirs"].pk not in ids


def test_patterns_for_a_feature(api, lessons):
    response = api.get("/lessons/patterns", {"feature": "Authentication", "limit": 3})
    ids = _ids(response)
    assert ids[0] == lessons["auth_ours"].pk
    assert lessons["auth_theirs"].pk not in ids
    assert response.json()["fallback"] is None  # found, not the recency fallback


def test_lessons_for_a_session(api, lessons):
    ids = _ids(api.post("/lessons/session", {"project": "shop", "recent_activity": "wiring up the login form"}))
    assert lessons["auth_ours"].pk in ids
    assert lessons["auth_theirs"].pk not in ids


@pytest.fixture
def memories(team, other_team, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        return _memories(team, other_team)


def _memories(team, other_team):
    rows = {}
    for owner, suffix in ((team, "ours"), (other_team, "theirs")):
        rows[f"sam_{suffix}"] = memory_create(
            team=owner, content="Sam is my climbing partner", categories=["person"], people=["Sam"]
        )
        rows[f"panic_{suffix}"] = memory_create(
            team=owner,
            content="Panic attack on the crowded train",
            categories=["emotion"],
            emotions=["panic"],
            occurred_at=timezone.now() - timedelta(days=3),
        )
    rows["guitar"] = memory_create(team=team, content="Learning the guitar", categories=["interest"])
    rows["trip"] = memory_create(
        team=team, content="Trip to Lisbon", categories=["event"], occurred_at=timezone.now() - timedelta(days=5)
    )
    rows["old_trip"] = memory_create(
        team=team, content="School trip to Rome", categories=["event"], occurred_at=timezone.now() - timedelta(days=400)
    )
    return rows


def _listing(response):
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"total", "results"}
    for entry in body["results"]:
        assert "relevance" not in entry and "score" not in entry
    return body


def test_friends_are_people(api, memories):
    body = _listing(api.get("/memories/friends"))
    assert body["total"] == 1
    assert body["results"] == [
        {"name": "Sam", "summary": "Sam is my climbing partner", "importance": 5, "memory_count": 1,
         "memory_ids": [memories["sam_ours"].pk]}
    ]


def test_panic_attacks_list_only_tagged_memories(api, memories):
    body = _listing(api.get("/memories/panic-attacks"))
    assert [m["id"] for m in body["results"]] == [memories["panic_ours"].pk] and body["total"] == 1


def test_interests(api, memories):
    body = _listing(api.get("/memories/interests"))
    assert [m["id"] for m in body["results"]] == [memories["guitar"].pk]


def test_events_within_days(api, memories):
    ids = [m["id"] for m in _listing(api.get("/memories/events", {"days": 30}))["results"]]
    assert memories["trip"].pk in ids and memories["old_trip"].pk not in ids


def test_by_person(api, memories):
    ids = _ids(api.get("/memories/by-person", {"name": "Sam"}))
    assert memories["sam_ours"].pk in ids and memories["sam_theirs"].pk not in ids


def test_by_person_nobody_has_is_empty(api, memories):
    response = api.get("/memories/by-person", {"name": "Bartholomew"})
    assert _ids(response) == [] and response.json()["fallback"] is None


@pytest.mark.parametrize("name", ["Zq‖", "Ad∖", "Ad⁅", "P％a", "Sa×"])
def test_a_name_that_unaccent_folds_into_pattern_syntax_finds_nobody(api, team, name):
    """"Zq‖" (unaccent: "Zq||") found every memory, "Ad∖" was a 422 ("invalid regular
    expression"), "P％a" (a LIKE wildcard once folded) found Priya."""
    for person in ("Priya", "Adam", "Sam", "Zqa"):
        memory_create(team=team, content=f"Lunch with {person}", people=[person])
    response = api.get("/memories/by-person", {"name": name})
    assert _ids(response) == [] and response.json()["total"] == 0


def test_by_emotion(api, memories):
    ids = _ids(api.get("/memories/by-emotion", {"emotion": "panic"}))
    assert memories["panic_ours"].pk in ids and memories["panic_theirs"].pk not in ids


def test_search_versions_finds_an_earlier_text(api, team, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        memory = memory_create(team=team, content="Works at a bakery in Porto")
    with django_capture_on_commit_callbacks(execute=True):
        memory_update(memory=memory, content="Works as a nurse in Lisbon")
    response = api.post("/memories/search-versions", {"query": "bakery job"})
    found = response.json()["results"]
    assert response.status_code == 200
    assert any("bakery" in hit["fields"].get("content", "") for hit in found)


@pytest.mark.parametrize(
    "method, path, params, field",
    [
        ("get", "/lessons/patterns", {}, "feature"),
        ("get", "/lessons/relevant", {"limit": -1}, "limit"),
        ("get", "/memories/by-person", {}, "name"),
        ("get", "/memories/by-emotion", {"emotion": ""}, "emotion"),
        ("get", "/memories/events", {"days": 0}, "days"),
        ("get", "/memories/friends", {"limit": 1000}, "limit"),
        ("get", "/memories/panic-attacks", {"limit": 501}, "limit"),
        ("post", "/memories/search-versions", {}, "query"),
        ("post", "/lessons/session", {"recent_activity": "x" * 60_000}, "recent_activity"),
    ],
)
def test_bad_shortcut_input_is_422_naming_the_field(api, method, path, params, field):
    response = api.get(path, params) if method == "get" else api.post(path, params)
    assert response.status_code == 422, response.content
    assert field in [error["field"] for error in response.json()["errors"]]


def test_events_still_to_come_are_not_listed(api, team, memories):
    future = memory_create(
        team=team, content="Concert next year", categories=["event"], occurred_at=timezone.now() + timedelta(days=300)
    )
    ids = [m["id"] for m in _listing(api.get("/memories/events", {"days": 30}))["results"]]
    assert memories["trip"].pk in ids and future.pk not in ids


def test_panic_attacks_whatever_the_separator_of_the_term(api, team, memories):
    spaced = memory_create(team=team, content="Woke up at night", emotions=["panic attack"])
    underscored = memory_create(team=team, content="In the lift", emotions=["Panic_Attack"])
    calm = memory_create(team=team, content="A calm walk", emotions=["calm"])
    ids = {m["id"] for m in _listing(api.get("/memories/panic-attacks"))["results"]}
    assert ids == {memories["panic_ours"].pk, spaced.pk, underscored.pk}
    assert calm.pk not in ids


@pytest.mark.parametrize("path, params, field", [
    ("/memories/by-person", {"name": "   "}, "name"),
    ("/memories/by-emotion", {"emotion": " "}, "emotion"),
])
def test_a_blank_name_or_emotion_is_refused_not_read_as_everyone(api, memories, path, params, field):
    response = api.get(path, params)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == field


def test_one_person_whatever_the_unicode_form_of_their_name(api, team):
    memory_create(team=team, content="Coffee with Zoë", people=["Zo\u00eb"])
    memory_create(team=team, content="Zoë's birthday", people=["Zoe\u0308"])
    body = _listing(api.get("/memories/friends"))
    assert [(person["name"], person["memory_count"]) for person in body["results"]] == [("Zo\u00eb", 2)]


def test_listings_answer_every_row_by_default(api, team):
    # the tools promise "every" interest and "everyone": they once stopped at 50 (at most 100)
    for number in range(120):
        memory_create(team=team, content=f"Hobby number {number}", categories=["interest", "event"],
                      people=[f"Friend {number}"])
    for path in ("/memories/interests", "/memories/events", "/memories/friends"):
        body = _listing(api.get(path))
        assert body["total"] == len(body["results"]) == 120, path
    assert len(_listing(api.get("/memories/interests", {"limit": 101}))["results"]) == 101
    assert api.get("/memories/interests", {"limit": 501}).status_code == 422


def test_by_person_says_how_many_memories_name_them(api, team):
    # not embedded yet (no commit ran), and "Jonah" (one typo from Jonas) is no word of theirs:
    # neither leg finds them, so they come most recent first, as the memories naming the person,
    # not as "nothing matched"
    chess = [memory_create(team=team, content=f"Chess game {number}", people=["Jonas"]) for number in range(3)]
    memory_create(team=team, content="Chess club newsletter")
    body = api.get("/memories/by-person", {"name": "Jonah", "limit": 2}).json()
    assert body["total"] == 3 and body["fallback"] == "recency"
    assert [hit["id"] for hit in body["results"]] == [chess[2].pk, chess[1].pk]
    assert {hit["relevance"] for hit in body["results"]} == {"medium"}  # another name, one typo away
    assert "total" not in api.post("/search", {"query": "chess", "kind": "memories"}).json()


def test_by_person_finds_a_name_without_its_accent_by_its_words(api, team):
    # the keyword index reads "Zoë" as `zoe` (migration 0028): the keyword leg finds them, no fallback
    zoe = [memory_create(team=team, content=f"Chess game {number}", people=["Zoë"]) for number in range(3)]
    memory_create(team=team, content="Chess club newsletter")
    body = api.get("/memories/by-person", {"name": "Zoe"}).json()
    assert body["total"] == 3 and body["fallback"] is None
    assert {hit["id"] for hit in body["results"]} == {memory.pk for memory in zoe}
    assert {hit["relevance"] for hit in body["results"]} == {"high"}  # the friends listing's one person


@pytest.mark.parametrize("asked, stored, label", [
    ("Zoe", "Zoë", "high"), ("SOREN", "Søren", "high"), ("aesa", "Æsa", "high"), ("jose", "José", "high"),
    ("Jon", "Jonas", "medium"), ("Jonah", "Jonas", "medium"),  # another name: a prefix, a typo
])
def test_a_by_person_label_is_high_for_the_name_with_or_without_its_accents(api, team, asked, stored, label):
    memory = memory_create(team=team, content="Chess at the club", people=[stored])
    body = api.get("/memories/by-person", {"name": asked}).json()
    assert [(hit["id"], hit["relevance"]) for hit in body["results"]] == [(memory.pk, label)]


@pytest.mark.parametrize("path, params", [
    ("/lessons/relevant", {"tech_stack": "python"}),
    ("/lessons/patterns", {"feature": "Authentication"}),
    ("/memories/by-person", {"name": "Sam"}),
    ("/memories/by-emotion", {"emotion": "joy"}),
])
def test_a_head_request_records_no_search_and_counts_nothing(api, team, path, params):
    # Django answers HEAD by running the GET view: it recorded a search and counted every hit as
    # returned (lowering its usage signal) for an answer nobody saw
    from lessons.models import SearchRecord
    from lessons.services.lessons import lesson_create
    from lessons.services.memories import memory_create

    lesson = lesson_create(team=team, title="Retry with exponential backoff", description="retries and sign-in",
                           category="security")
    memory = memory_create(team=team, content="A joyful day with Sam", people=["Sam"], emotions=["joy"])
    head = api.client.head(f"/api/v1{path}", params)
    assert head.status_code == 200, head.content
    assert not SearchRecord.objects.exists()
    lesson.refresh_from_db()
    memory.refresh_from_db()
    assert lesson.returned_count == memory.returned_count == 0
    got = api.get(path, params)  # a GET still records, and its hits are counted
    assert got.json()["search_id"] and SearchRecord.objects.count() == 1


def test_a_session_whose_fields_are_each_within_their_limits_is_answered(api, lessons):
    """A Windows directory was read as one path part, so the whole of it joined the project and
    the activity: 2,012 characters, refused as `query`, a field this call does not have."""
    cwd = "C:\\Users\\me\\src\\" + "shop-" * 196 + "app"
    response = api.post("/lessons/session", {"project": "billing-service", "cwd": cwd, "recent_activity": "a " * 640})
    assert response.status_code == 200, response.content


def test_a_session_reads_the_last_two_parts_of_a_windows_directory(team, monkeypatch):
    from lessons.selectors import lessons as selectors

    asked = []
    real_search = selectors.search
    monkeypatch.setattr(selectors, "search", lambda *, request: asked.append(request.query) or real_search(request=request))
    lesson = lesson_create(team=team, title="Retry the frobnicator queue with backoff")
    windows = selectors.lessons_for_session(team=team, cwd="C:\\Users\\me\\frobnicator\\queue")
    selectors.lessons_for_session(team=team, cwd="/home/me/frobnicator/queue")
    assert asked == ["frobnicator queue", "frobnicator queue"]
    assert [hit.id for hit in windows.results] == [lesson.pk]
