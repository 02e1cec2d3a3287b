"""The curation endpoints: duplicates, merge, not-a-duplicate, restore a version."""

import pytest

from lessons.models import DuplicateDismissal, Lesson, LessonMerge, Memory
from lessons.services.memories import memory_create, memory_update
from tests.curation_data import (
    BASS,
    CHECKOUT_TESTS,
    DOCKER_PIN,
    DOCKER_PIN_AGAIN,
    FOREIGN_KEYS,
    PANIC,
    PANIC_AGAIN,
    embedded_lessons,
    embedded_memories,
    lesson,
)

pytestmark = pytest.mark.django_db


def test_duplicates_lists_the_close_pairs_closest_first(api, team):
    pin, pin_again, *_ = embedded_lessons(team, DOCKER_PIN, DOCKER_PIN_AGAIN, FOREIGN_KEYS, CHECKOUT_TESTS)
    response = api.get("/lessons/duplicates")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["threshold"] == 0.15
    assert [(pair["first"]["id"], pair["second"]["id"]) for pair in body["pairs"]] == [(pin.pk, pin_again.pk)]
    pair = body["pairs"][0]
    assert pair["first"]["title"] == DOCKER_PIN["title"]
    assert pair["similarity"] == pytest.approx(1 - pair["distance"])
    assert "embedding" not in pair["first"]
    loose = api.get("/lessons/duplicates", {"threshold": 1, "limit": 2}).json()
    assert len(loose["pairs"]) == 2


@pytest.mark.parametrize("params, field", [({"threshold": 0}, "threshold"), ({"threshold": 2}, "threshold"),
                                           ({"threshold": "close"}, "threshold"), ({"limit": 500}, "limit")])
def test_duplicates_refuses_bad_parameters_naming_them(api, params, field):
    response = api.get("/lessons/duplicates", params)
    assert response.status_code == 422
    assert [error["field"] for error in response.json()["errors"]] == [field]


def test_duplicates_of_another_team_are_not_seen(api, other_api, team, other_team):
    embedded_lessons(other_team, DOCKER_PIN, DOCKER_PIN_AGAIN)
    assert api.get("/lessons/duplicates").json()["pairs"] == []
    assert len(other_api.get("/lessons/duplicates").json()["pairs"]) == 1


def test_merge_keeps_one_lesson_with_the_chosen_text(api, team):
    kept = lesson(team, DOCKER_PIN, frequency=2, confidence=0.5, tags=["docker"])
    other = lesson(team, DOCKER_PIN_AGAIN, frequency=3, confidence=0.8, tags=["builds"])
    response = api.post(f"/lessons/{kept.pk}/merge", {"merge_ids": [other.pk], "text_from": other.pk})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["merged_ids"] == [other.pk]
    assert body["lesson"]["id"] == kept.pk
    assert body["lesson"]["title"] == DOCKER_PIN_AGAIN["title"]
    assert (body["lesson"]["frequency"], body["lesson"]["confidence"]) == (5, 0.8)
    assert body["lesson"]["tags"] == ["docker", "builds"]
    assert not Lesson.objects.filter(pk=other.pk).exists()
    assert api.get(f"/lessons/{other.pk}").status_code == 404
    assert LessonMerge.objects.get().merged_lesson_id == other.pk


def test_merge_with_another_teams_lesson_changes_nothing(api, team, other_team):
    kept = lesson(team, DOCKER_PIN)
    theirs = lesson(other_team, DOCKER_PIN_AGAIN)
    response = api.post(f"/lessons/{kept.pk}/merge", {"merge_ids": [theirs.pk]})
    assert response.status_code == 422
    assert response.json()["errors"] == [{"field": "merge_ids", "message": f"lesson {theirs.pk} does not exist"}]
    assert Lesson.objects.count() == 2
    # Nor can another team merge into ours.
    assert api.post(f"/lessons/{theirs.pk}/merge", {"merge_ids": [kept.pk]}).status_code == 404


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "merge_ids"),
        ({"merge_ids": []}, "merge_ids"),
        ({"merge_ids": ["x"]}, "merge_ids.0"),
        ({"merge_ids": [0]}, "merge_ids.0"),
        ("SELF_AND_OTHER", "merge_ids"),
        ("TWICE", "merge_ids"),
        ("TEXT_FROM_ELSEWHERE", "text_from"),
        ({"merge_ids": [1], "keep_text": "mine"}, "keep_text"),
    ],
)
def test_merge_refuses_bad_bodies_naming_the_field(api, team, body, field):
    kept, other, bystander = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN), lesson(team, FOREIGN_KEYS)
    if isinstance(body, str):
        body = {
            "SELF_AND_OTHER": {"merge_ids": [kept.pk, other.pk]},
            "TWICE": {"merge_ids": [other.pk, other.pk]},
            "TEXT_FROM_ELSEWHERE": {"merge_ids": [other.pk], "text_from": bystander.pk},
        }[body]
    response = api.post(f"/lessons/{kept.pk}/merge", body)
    assert response.status_code == 422, response.content
    assert [error["field"] for error in response.json()["errors"]] == [field]
    assert Lesson.objects.count() == 3


def test_merge_into_an_unknown_lesson_is_404(api, team):
    other = lesson(team, DOCKER_PIN)
    response = api.post("/lessons/999999/merge", {"merge_ids": [other.pk]})
    assert response.status_code == 404
    assert set(response.json()) == {"detail", "errors"}


def test_not_a_duplicate_hides_the_pair(api, team):
    pin, pin_again = embedded_lessons(team, DOCKER_PIN, DOCKER_PIN_AGAIN)
    response = api.post("/lessons/duplicates/dismiss", {"ids": [pin_again.pk, pin.pk]})
    assert response.status_code == 200, response.content
    assert response.json() == {"kind": "lesson", "ids": [pin.pk, pin_again.pk]}
    assert api.get("/lessons/duplicates").json()["pairs"] == []
    assert api.post("/lessons/duplicates/dismiss", {"ids": [pin.pk]}).status_code == 422
    bad = api.post("/lessons/duplicates/dismiss", {"ids": [pin.pk, 999999]})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "ids"
    assert DuplicateDismissal.objects.count() == 1


def test_memory_duplicates_merge_and_dismiss(api, team):
    panic, panic_again, bass = embedded_memories(team, PANIC, PANIC_AGAIN, BASS)
    pairs = api.get("/memories/duplicates", {"threshold": 0.3}).json()["pairs"]
    assert [(pair["first"]["id"], pair["second"]["id"]) for pair in pairs] == [(panic.pk, panic_again.pk)]

    response = api.post(f"/memories/{panic.pk}/merge", {"merge_id": panic_again.pk})
    assert response.status_code == 200, response.content
    assert response.json()["memory"]["content"] == PANIC
    assert not Memory.objects.filter(pk=panic_again.pk).exists()
    assert api.get("/memories/duplicates", {"threshold": 0.3}).json()["pairs"] == []

    missing = api.post(f"/memories/{panic.pk}/merge", {"merge_id": panic_again.pk})
    assert missing.status_code == 422 and missing.json()["errors"][0]["field"] == "merge_id"
    dismissed = api.post("/memories/duplicates/dismiss", {"ids": [panic.pk, bass.pk]})
    assert dismissed.json() == {"kind": "memory", "ids": sorted([panic.pk, bass.pk])}


def test_restore_a_memory_version(api, team, other_api):
    memory = memory_create(team=team, content="Maria works as a nurse")
    memory_update(memory=memory, content="Maria became a midwife")
    first = Memory.objects.get(current_version=memory)
    response = api.post(f"/memories/{memory.pk}/versions/{first.pk}/restore")
    assert response.status_code == 200, response.content
    assert (response.json()["content"], response.json()["version"]) == ("Maria works as a nurse", 3)
    assert api.post(f"/memories/{memory.pk}/versions/{memory.pk}/restore").status_code == 404
    assert other_api.post(f"/memories/{memory.pk}/versions/{first.pk}/restore").status_code == 404


def test_the_openapi_document_declares_the_curation_endpoints_and_their_errors(anonymous):
    paths = anonymous.get("/openapi.json").json()["paths"]
    expected = {
        "/api/v1/lessons/duplicates": "get",
        "/api/v1/lessons/duplicates/dismiss": "post",
        "/api/v1/lessons/{lesson_id}/merge": "post",
        "/api/v1/memories/duplicates": "get",
        "/api/v1/memories/duplicates/dismiss": "post",
        "/api/v1/memories/{memory_id}/merge": "post",
        "/api/v1/memories/{memory_id}/versions/{version_id}/restore": "post",
    }
    for path, method in expected.items():
        responses = paths[path][method]["responses"]
        statuses = {"401", "422", "503"} | ({"404"} if "{" in path else set())
        assert statuses <= set(responses), path
        for status in statuses:
            assert responses[status]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorOut")


def test_a_memory_merged_into_itself_is_refused_naming_merge_id(api, team):
    memory = memory_create(team=team, content="Met Sam at the gym")
    response = api.post(f"/memories/{memory.pk}/merge", {"merge_id": memory.pk})
    assert response.status_code == 422
    assert response.json()["errors"] == [
        {"field": "merge_id", "message": f"memory {memory.pk} is the one kept; it cannot be merged into itself"}
    ]
    assert Memory.objects.filter(pk=memory.pk).exists()


def test_merged_frequencies_stop_at_the_largest_storable_one(api, team):
    from lessons.models import MAX_FREQUENCY

    keep = Lesson.objects.create(team=team, title="Pin it", frequency=MAX_FREQUENCY)
    other = Lesson.objects.create(team=team, title="Pin it too", frequency=MAX_FREQUENCY)
    response = api.post(f"/lessons/{keep.pk}/merge", {"merge_ids": [other.pk]})
    assert response.status_code == 200, response.content
    assert response.json()["lesson"]["frequency"] == MAX_FREQUENCY
    assert not Lesson.objects.filter(pk=other.pk).exists()
    too_many = api.post("/lessons", {"title": "x", "frequency": MAX_FREQUENCY + 1})
    assert too_many.status_code == 422 and too_many.json()["errors"][0]["field"] == "frequency"


def test_a_merge_refused_under_the_locks_names_the_apis_field(api, team, monkeypatch):
    """The service checks again under the rows' locks (a merge that lost a race); its error named
    the service's `merged` instead of the body's `merge_ids` / `merge_id`."""
    from django.core.exceptions import ValidationError

    from lessons.services import curation as curation_services

    def lost_race(**arguments):
        raise ValidationError({"merged": "Lesson(s) 215 no longer exist."})

    kept, other = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN)
    monkeypatch.setattr(curation_services, "lesson_merge", lost_race)
    response = api.post(f"/lessons/{kept.pk}/merge", {"merge_ids": [other.pk]})
    assert response.status_code == 422
    assert response.json()["errors"] == [{"field": "merge_ids", "message": "Lesson(s) 215 no longer exist."}]

    first, second = memory_create(team=team, content="Tom plays bass"), memory_create(team=team, content="Tom: bass")
    monkeypatch.setattr(curation_services, "memory_merge", lost_race)
    response = api.post(f"/memories/{first.pk}/merge", {"merge_id": second.pk})
    assert [error["field"] for error in response.json()["errors"]] == ["merge_id"]


def test_merging_an_earlier_version_says_what_it_is(api, team):
    kept = memory_create(team=team, content="Ran the canal path with Ana")
    edited = memory_create(team=team, content="Ana hates running in the rain")
    edited = memory_update(memory=edited, content="Ana hates running in the cold rain")
    earlier = Memory.objects.get(current_version=edited)
    response = api.post(f"/memories/{kept.pk}/merge", {"merge_id": earlier.pk})
    assert response.status_code == 422  # it exists: "does not exist" was untrue
    assert response.json()["errors"] == [{"field": "merge_id", "message": (
        f"memory {earlier.pk} is an earlier version of memory {edited.pk}")}]
    # named by the path, or read alone, it is not a memory either, and the answer says whose it is
    for response in (api.post(f"/memories/{earlier.pk}/merge", {"merge_id": kept.pk}),
                     api.get(f"/memories/{earlier.pk}")):
        assert response.status_code == 404
        assert response.json()["errors"] == [{"field": "memory_id", "message": (
            f"memory {earlier.pk} is an earlier version of memory {edited.pk}")}]
    assert api.get("/memories/999999").json()["detail"] == "memory_id: memory 999999 does not exist"
