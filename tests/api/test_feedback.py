"""`POST /feedback` and the search ids of every search-shaped answer (issue 14), over HTTP with
the real model, for the caller's team only."""

import uuid

import pytest

from lessons.models import Lesson, SearchRecord
from lessons.services.lessons import lesson_create
from lessons.services.memories import memory_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def lessons(team, other_team, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        ours = [
            lesson_create(team=team, title="Rotate refresh tokens on every login", category="security",
                          description="Stolen refresh tokens stayed valid for weeks.", tech_stacks=["nextjs"]),
            lesson_create(team=team, title="Index the foreign keys you join on", category="database",
                          description="Joins on unindexed foreign keys scanned whole tables."),
            lesson_create(team=team, title="Prefer CSS grid for page layout", category="frontend"),
        ]
        theirs = lesson_create(team=other_team, title="Rotate refresh tokens on every login", category="security")
    return ours, theirs


def _search(api, query="refresh token security", **extra):
    response = api.post("/search", {"query": query, "limit": 3, **extra})
    assert response.status_code == 200, response.content
    return response.json()


def test_every_search_answer_carries_a_search_id_of_the_callers_team(api, team, lessons):
    answer = _search(api)
    record = SearchRecord.objects.get(pk=answer["search_id"])
    assert record.team == team and record.source == "api" and record.query == "refresh token security"
    assert record.result_ids == [hit["id"] for hit in answer["results"]]
    assert record.operation == "search" and record.mode == "hybrid" and record.kind == "lessons"


@pytest.mark.parametrize("path", ["/memories/friends", "/memories/interests", "/memories/events",
                                  "/memories/panic-attacks"])
def test_listings_are_not_searches_and_carry_no_search_id(api, team, path):
    """Friends, interests, events and panic attacks list rows in a fixed order (issue 10): nothing
    was ranked, so there is nothing to report usage against."""
    response = api.get(path, {})
    assert response.status_code == 200, response.content
    assert "search_id" not in response.json() and SearchRecord.objects.count() == 0


@pytest.mark.parametrize(
    ("method", "path", "params", "kind"),
    [
        ("get", "/lessons/relevant", {"tech_stack": ["nextjs"]}, "lessons"),
        ("get", "/lessons/patterns", {"feature": "Authentication"}, "lessons"),
        ("post", "/lessons/session", {"recent_activity": "login form"}, "lessons"),
        ("get", "/memories/by-person", {"name": "Jonas"}, "memories"),
        ("get", "/memories/by-emotion", {"emotion": "happy"}, "memories"),
        ("post", "/memories/search-versions", {"query": "sailing"}, "memories"),
    ],
)
def test_every_shortcut_carries_a_search_id(api, team, lessons, method, path, params, kind):
    memory_create(team=team, content="Sailing with Jonas on the lake", categories=["person", "event", "interest"],
                  people=["Jonas"], emotions=["happy"])
    response = getattr(api, method)(path, params)
    assert response.status_code == 200, response.content
    answer = response.json()
    record = SearchRecord.objects.get(pk=answer["search_id"])
    assert record.kind == kind and record.team == team
    assert record.result_ids == [hit["id"] for hit in answer["results"]]


def test_feedback_is_recorded_and_counted_once(api, lessons):
    answer = _search(api)
    first = answer["results"][0]["id"]
    others = [hit["id"] for hit in answer["results"][1:]]
    body = {"search_id": answer["search_id"], "used": [first], "not_helpful": others[:1]}
    response = api.post("/feedback", body)
    assert response.status_code == 202, response.content
    assert response.json() == {
        "search_id": answer["search_id"],
        "recorded": {"used": [first], "not_helpful": others[:1]},
        "already_recorded": [],
        "merged": [],
        "gone": [],
        "versions": [],
    }
    again = api.post("/feedback", body)
    assert again.status_code == 202
    assert again.json()["recorded"] == {"used": [], "not_helpful": []}
    assert again.json()["already_recorded"] == [first, *others[:1]]
    lesson = api.get(f"/lessons/{first}").json()
    assert (lesson["returned_count"], lesson["used_count"], lesson["not_helpful_count"]) == (1, 1, 0)
    assert lesson["last_used_at"] is not None and lesson["last_returned_at"] is not None
    # The next search shows the counts in its hits' fields too.
    hit = next(h for h in _search(api)["results"] if h["id"] == first)
    assert (hit["fields"]["returned_count"], hit["fields"]["used_count"]) == (1, 1)


def test_empty_lists_are_a_valid_report(api, lessons):
    response = api.post("/feedback", {"search_id": _search(api)["search_id"]})
    assert response.status_code == 202
    assert response.json()["recorded"] == {"used": [], "not_helpful": []}


def test_another_teams_search_or_an_unknown_id_is_404(api, other_api, lessons):
    theirs = _search(other_api)
    their_hit = theirs["results"][0]["id"]
    response = api.post("/feedback", {"search_id": theirs["search_id"], "used": [their_hit]})
    assert response.status_code == 404
    assert "does not exist" in response.json()["detail"]
    unknown = api.post("/feedback", {"search_id": str(uuid.uuid4()), "used": []})
    assert unknown.status_code == 404
    [error] = unknown.json()["errors"]  # named, as every other refusal is
    assert error["field"] == "search_id" and error["message"].endswith("does not exist")
    assert Lesson.objects.get(pk=their_hit).used_count == 0


def test_bad_ids_are_422_naming_the_field(api, lessons):
    ours, theirs = lessons
    answer = _search(api)
    returned = {hit["id"] for hit in answer["results"]}
    stranger = next(lesson.pk for lesson in [*ours, theirs] if lesson.pk not in returned)
    cases = [
        ({"search_id": answer["search_id"], "used": [stranger]}, "used"),
        ({"search_id": answer["search_id"], "not_helpful": [stranger]}, "not_helpful"),
        ({"search_id": answer["search_id"], "used": [0]}, "used.0"),
        ({"search_id": answer["search_id"], "used": ["seven"]}, "used.0"),
        ({"search_id": answer["search_id"], "used": [True]}, "used.0"),  # was read as id 1
        ({"search_id": answer["search_id"], "used": [str(answer["results"][0]["id"])]}, "used.0"),
        ({"search_id": "not-a-uuid", "used": []}, "search_id"),
        ({"used": []}, "search_id"),
        ({"search_id": answer["search_id"], "used": [], "verdict": "good"}, "verdict"),
    ]
    for body, field in cases:
        response = api.post("/feedback", body)
        assert response.status_code == 422, (body, response.content)
        assert field in [error["field"] for error in response.json()["errors"]], (body, response.json())
    both = answer["results"][0]["id"]
    response = api.post("/feedback", {"search_id": answer["search_id"], "used": [both], "not_helpful": [both]})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "not_helpful"
    assert not Lesson.objects.filter(used_count__gt=0).exists()  # nothing half-written


def test_feedback_needs_a_key(anonymous):
    assert anonymous.post("/feedback", {"search_id": str(uuid.uuid4())}).status_code == 401


def test_the_contract_declares_feedback(anonymous):
    document = anonymous.get("/openapi.json").json()
    operation = document["paths"]["/api/v1/feedback"]["post"]
    assert {"202", "404", "422", "401"} <= set(operation["responses"])
    search_out = document["components"]["schemas"]["SearchOut"]["properties"]
    assert "search_id" in search_out
    lesson_out = document["components"]["schemas"]["LessonOut"]["properties"]
    assert {"returned_count", "used_count", "not_helpful_count", "last_used_at"} <= set(lesson_out)


def test_a_lesson_folded_into_a_hit_can_be_reported(api, team, lessons, django_capture_on_commit_callbacks):
    ours, _ = lessons
    with django_capture_on_commit_callbacks(execute=True):
        twin = lesson_create(team=team, title="Rotate refresh tokens on every login", category="security",
                             description="A second team wrote the same lesson down.")
    answer = _search(api)
    [hit] = [hit for hit in answer["results"] if twin.pk in hit["collapsed_ids"]]
    folded = next(i for i in hit["collapsed_ids"] if i != hit["id"])
    # Both were returned (folded into one hit), so both are counted and the folded one can be reported.
    assert Lesson.objects.get(pk=folded).returned_count == 1
    response = api.post("/feedback", {"search_id": answer["search_id"], "used": [folded]})
    assert response.status_code == 202, response.content
    assert Lesson.objects.get(pk=folded).used_count == 1


def test_feedback_on_a_lesson_merged_or_deleted_since_the_search(api, team, django_capture_on_commit_callbacks):
    """The tester's case: "zebra striping" finds two lessons, one is merged into the other, then
    `used` on the merged one answered "recorded" and no count moved; after a delete, a verdict on
    the deleted lesson was "recorded" too."""
    with django_capture_on_commit_callbacks(execute=True):
        kept = lesson_create(team=team, title="Zebra striping makes long tables readable", category="frontend")
        merged = lesson_create(team=team, title="Use zebra striping on wide data tables", category="design")
    answer = _search(api, query="zebra striping")
    assert {kept.pk, merged.pk} <= {i for hit in answer["results"] for i in [hit["id"], *hit["collapsed_ids"]]}
    assert api.post(f"/lessons/{kept.pk}/merge", {"merge_ids": [merged.pk]}).status_code == 200

    response = api.post("/feedback", {"search_id": answer["search_id"], "used": [merged.pk]})
    assert response.status_code == 202, response.content
    body = response.json()
    assert (body["recorded"]["used"], body["merged"]) == ([merged.pk], [{"id": merged.pk, "counted_for": kept.pk}])
    assert Lesson.objects.get(pk=kept.pk).used_count == 1

    assert api.delete(f"/lessons/{kept.pk}").status_code == 204
    gone = api.post("/feedback", {"search_id": answer["search_id"], "not_helpful": [kept.pk]})
    assert gone.status_code == 202
    assert (gone.json()["recorded"], gone.json()["gone"]) == ({"used": [], "not_helpful": []}, [kept.pk])
