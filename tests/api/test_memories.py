import pytest

from lessons.models import Memory
from tests.factories import MemoryFactory

pytestmark = pytest.mark.django_db


def test_create_read_update_keeps_versions_and_delete(api, team):
    created = api.post(
        "/memories",
        {"content": "Met Sam at the climbing gym", "categories": ["Person"], "people": ["Sam"], "importance": 7},
    )
    assert created.status_code == 201, created.content
    memory_id = created.json()["id"]
    assert created.json()["categories"] == ["person"]
    assert created.json()["version"] == 1
    assert "embedding" not in created.json()

    updated = api.patch(f"/memories/{memory_id}", {"content": "Met Sam and Alex at the climbing gym"})
    assert updated.status_code == 200, updated.content
    assert updated.json()["version"] == 2
    assert updated.json()["id"] == memory_id

    versions = api.get(f"/memories/{memory_id}/versions").json()
    assert [(v["version"], v["content"], v["is_current"]) for v in versions] == [
        (2, "Met Sam and Alex at the climbing gym", True),
        (1, "Met Sam at the climbing gym", False),
    ]
    assert api.get(f"/memories/{memory_id}").json()["content"] == "Met Sam and Alex at the climbing gym"

    assert api.delete(f"/memories/{memory_id}").status_code == 204
    assert not Memory.objects.filter(team=team).exists()  # with its versions


def test_earlier_versions_are_not_memories_of_their_own(api, team):
    memory = MemoryFactory(team=team, content="First")
    api.patch(f"/memories/{memory.pk}", {"content": "Second"})
    earlier = Memory.objects.get(current_version=memory)
    assert api.get(f"/memories/{earlier.pk}").status_code == 404
    assert api.patch(f"/memories/{earlier.pk}", {"content": "Rewrite history"}).status_code == 404
    assert api.get("/memories").json()["count"] == 1


def test_list_is_paginated_and_filtered(api, team):
    MemoryFactory(team=team, content="Panic on the train", categories=["emotion"], emotions=["panic"], importance=8)
    MemoryFactory(team=team, content="Likes bouldering", categories=["interest"], importance=4)
    MemoryFactory(team=team, content="Dinner with Sam", categories=["person"], people=["Sam"], importance=6)

    page = api.get("/memories", {"limit": 2}).json()
    assert page["count"] == 3 and len(page["items"]) == 2
    assert [m["content"] for m in api.get("/memories", {"emotion": "PANIC"}).json()["items"]] == ["Panic on the train"]
    assert [m["content"] for m in api.get("/memories", {"person": "Sam"}).json()["items"]] == ["Dinner with Sam"]
    assert api.get("/memories", {"min_importance": 6}).json()["count"] == 2
    assert api.get("/memories", {"category": "interest"}).json()["count"] == 1
    assert api.get("/memories", {"text": "bouldering"}).json()["count"] == 1


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "content"),
        ({"content": "x", "importance": 11}, "importance"),
        ({"content": "x", "occurred_at": "soon"}, "occurred_at"),
    ],
)
def test_bad_memories_are_422_naming_the_field(api, body, field):
    response = api.post("/memories", body)
    assert response.status_code == 422
    assert field in [error["field"] for error in response.json()["errors"]]
    assert not Memory.objects.exists()


@pytest.mark.parametrize(
    "params, field",
    [({"limit": -1}, "limit"), ({"limit": 0}, "limit"), ({"limit": 101}, "limit"), ({"offset": -5}, "offset")],
)
def test_bad_pagination_is_422_naming_the_field(api, params, field):
    response = api.get("/memories", params)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == field


def test_another_teams_memory_does_not_exist_for_any_verb(api, other_team):
    theirs = MemoryFactory(team=other_team, content="Their diary")
    path = f"/memories/{theirs.pk}"
    assert api.get(path).status_code == 404
    assert api.get(f"{path}/versions").status_code == 404
    assert api.patch(path, {"content": "Mine"}).status_code == 404
    assert api.delete(path).status_code == 404
    assert api.get("/memories").json()["count"] == 0
    theirs.refresh_from_db()
    assert theirs.content == "Their diary" and theirs.version == 1


def test_a_date_without_time_zone_is_taken_as_utc(api):
    response = api.post("/memories", {"content": "New year", "occurred_at": "2020-01-01T00:00:00"})
    assert response.status_code == 201
    assert response.json()["occurred_at"] == "2020-01-01T00:00:00Z"
    assert Memory.objects.get().occurred_at.isoformat() == "2020-01-01T00:00:00+00:00"
