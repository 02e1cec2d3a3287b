"""A term list's budget (MAX_TERMS) counts the entries the row keeps, not the ones sent.

The services keep one spelling of a term ("Next.js" and "nextjs"; normalise_terms) and one of a name in
any case (normalise_names). The API counted the raw list: 60 entries naming 30 terms were a 422 "at most
50 items" while the stored list would hold 30. The raw list is still bounded (MAX_SENT_TERMS), so a huge
payload is refused naming its field."""

import json

import pytest

from lessons.api.schemas import MAX_SENT_TERMS, MAX_TERMS
from lessons.models import Lesson, Memory

pytestmark = pytest.mark.django_db


def _spelled_twice(count: int) -> list[str]:
    """`count` terms, each sent in two spellings ("topic-3x", "Topic 3x")."""
    return [spelling for n in range(count) for spelling in (f"topic-{n}x", f"Topic {n}x")]


def _errors(response) -> list[dict]:
    assert response.status_code == 422, response.content
    return response.json()["errors"]


def test_thirty_terms_spelled_twice_are_stored_as_thirty(api, team):
    response = api.post("/lessons", {"title": "Many spellings", "tags": _spelled_twice(30),
                                     "tech_stacks": ["Next.js", "nextjs", "next-js"] * 20})
    assert response.status_code == 201, response.content
    lesson = Lesson.objects.get(pk=response.json()["id"])
    assert len(lesson.tags) == 30 and lesson.tech_stacks == ["next.js"]
    patched = api.patch(f"/lessons/{lesson.pk}", {"project_types": _spelled_twice(30)})
    assert patched.status_code == 200, patched.content
    assert len(Lesson.objects.get(pk=lesson.pk).project_types) == 30


def test_people_and_memory_terms_count_once_too(api, team):
    people = [name for n in range(30) for name in (f"Person{n}", f"person{n}")]
    response = api.post("/memories", {"content": "A reunion", "people": people, "emotions": _spelled_twice(30)})
    assert response.status_code == 201, response.content
    memory = Memory.objects.get(pk=response.json()["id"])
    assert len(memory.people) == 30 and len(memory.emotions) == 30


def test_more_different_terms_than_the_budget_are_refused_naming_the_field(api, team):
    errors = _errors(api.post("/lessons", {"title": "Too many", "tags": _spelled_twice(MAX_TERMS + 1)}))
    assert errors == [{"field": "tags",
                       "message": f"List should have at most {MAX_TERMS} different entries, not {MAX_TERMS + 1}"}]
    people = [f"Person{n}" for n in range(MAX_TERMS + 1)]
    assert [e["field"] for e in _errors(api.post("/memories", {"content": "A crowd", "people": people}))] == ["people"]
    assert not Lesson.objects.exists() and not Memory.objects.exists()


def test_a_huge_list_is_refused_before_it_is_read(api, team):
    # one term, sent past the raw bound: refused for its length, whatever it would dedupe to
    errors = _errors(api.post("/lessons", {"title": "A flood", "tags": ["caching"] * (MAX_SENT_TERMS + 1)}))
    assert [error["field"] for error in errors] == ["tags"]
    assert str(MAX_SENT_TERMS) in errors[0]["message"]
    errors = _errors(api.post("/search", {"query": "cache", "filters": {"tech_stacks": ["django"] * 10_000}}))
    assert [error["field"] for error in errors] == ["filters.tech_stacks"]


def test_the_schema_still_says_the_stored_budget(api):
    schemas = api.client.get("/api/v1/openapi.json").json()["components"]["schemas"]
    assert schemas["LessonIn"]["properties"]["tags"]["maxItems"] == MAX_TERMS
    assert schemas["MemoryIn"]["properties"]["people"]["maxItems"] == MAX_TERMS
    assert json.dumps(schemas).count(f'"maxItems": {MAX_SENT_TERMS}') == 0
