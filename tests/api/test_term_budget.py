"""A row's term lists fit the covering index of the filter columns (lessons.models: a btree entry holds
at most 2,704 bytes). Past the budget every writer refuses the row by the field's name; before it, 50
random tags of 64 characters were a 503 "the database is unavailable" and stopped an import halfway."""

import json
import random
import string

import pytest
from django.core.exceptions import ValidationError
from django.db import OperationalError, transaction

from lessons.error_text import over_a_database_limit
from lessons.models import MAX_TERM_BYTES_PER_ROW, MAX_TERMS_PER_ROW, Lesson, Memory
from lessons.services.imports import import_lessons, import_memories
from lessons.services.lessons import lesson_create
from lessons.services.memories import memory_create

pytestmark = pytest.mark.django_db


def _random_terms(count: int, length: int, *, seed: int = 7) -> list[str]:
    """Terms that do not compress, as PostgreSQL would compress repeated letters in an index entry."""
    rng = random.Random(seed)
    return ["".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(length)) for _ in range(count)]


def test_fifty_long_random_tags_are_a_422_naming_tags_not_an_outage(api, team):
    response = api.post("/lessons", {"title": "Many tags", "tags": _random_terms(50, 64)})
    assert response.status_code == 422, response.content
    assert "tags" in json.dumps(response.json()) and "1,500 bytes" in json.dumps(response.json())
    assert not Lesson.objects.filter(team=team).exists()
    crowd = [name.title() for name in _random_terms(50, 100)]
    many_people = api.post("/memories", {"content": "A crowd", "people": crowd})
    assert many_people.status_code == 422 and "people" in json.dumps(many_people.json())
    assert not Memory.objects.filter(team=team).exists()


@pytest.mark.parametrize("length", [13, 15, 64])  # 13: each term padded by 3 bytes in the index entry
def test_a_row_at_the_budget_is_stored_whatever_the_terms_lengths(team, length):
    count = min(MAX_TERMS_PER_ROW, MAX_TERM_BYTES_PER_ROW // length)
    terms = _random_terms(count, length, seed=length)
    thirds = [terms[0::3], terms[1::3], terms[2::3]]
    lesson = lesson_create(team=team, title="At the budget", category="security", status="confirmed",
                           tags=thirds[0], tech_stacks=thirds[1], project_types=thirds[2])
    assert sorted(lesson.tags + lesson.tech_stacks + lesson.project_types) == sorted(terms)
    people = [name.title() for name in _random_terms(MAX_TERM_BYTES_PER_ROW // 200, 200, seed=length)]
    memory = memory_create(team=team, content="At the budget", people=people)
    assert Memory.objects.get(pk=memory.pk).people == people


def test_one_entry_or_one_byte_past_the_budget_is_refused_by_the_largest_fields_name(team):
    with pytest.raises(ValidationError) as error:
        lesson_create(team=team, title="Over by one byte", tags=_random_terms(23, 64),
                      tech_stacks=_random_terms(1, 29))  # 23 x 64 + 29 = 1,501 bytes
    assert list(error.value.message_dict) == ["tags"]
    assert "has 24 and 1,501" in error.value.message_dict["tags"][0]
    with pytest.raises(ValidationError) as error:
        lesson_create(team=team, title="Over by one entry", tags=[f"a{n}" for n in range(50)],
                      tech_stacks=[f"b{n}" for n in range(50)], project_types=["saas"])
    assert "has 101 and" in error.value.message_dict["tags"][0]
    with pytest.raises(ValidationError) as error:
        lesson_create(team=team, title="51 in one field", tech_stacks=[f"b{n}" for n in range(51)])
    assert error.value.message_dict == {"tech_stacks": ["at most 50 entries; got 51"]}
    assert not Lesson.objects.filter(team=team).exists()


def test_an_edit_over_the_budget_names_the_list_it_changed_not_the_largest_stored_one(api, team):
    # the tags are the row's largest list; a PATCH sending only tech stacks was refused naming `tags`
    lesson = lesson_create(team=team, title="Full", tags=_random_terms(40, 30), tech_stacks=["python"])
    response = api.patch(f"/lessons/{lesson.pk}", {"tech_stacks": _random_terms(30, 20, seed=8)})
    assert response.status_code == 422, response.content
    assert [error["field"] for error in response.json()["errors"]] == ["tech_stacks"]
    assert Lesson.objects.get(pk=lesson.pk).tech_stacks == ["python"]
    memory = memory_create(team=team, content="Party", people=[name.title() for name in _random_terms(40, 30)])
    response = api.patch(f"/memories/{memory.pk}", {"emotions": _random_terms(30, 20, seed=9)})
    assert response.status_code == 422, response.content
    assert [error["field"] for error in response.json()["errors"]] == ["emotions"]
    assert Memory.objects.get(pk=memory.pk).emotions == []


def test_an_import_names_the_oversized_lines_and_imports_the_rest(team):
    lines = [
        json.dumps({"external_id": "a", "title": "Fifty-one tags", "tags": _random_terms(51, 3)}),
        json.dumps({"external_id": "b", "title": "Long tags", "tags": _random_terms(40, 64)}),
        json.dumps({"external_id": "c", "title": "A normal lesson", "tags": ["caching"]}),
    ]
    report = import_lessons(lines=lines, team_slug=team.slug)
    assert report.created == 1 and [number for number, _ in report.errors] == [1, 2]
    assert "tags" in report.errors[0][1] and "at most 50" in report.errors[0][1]
    assert "tags" in report.errors[1][1] and "1,500 bytes" in report.errors[1][1]
    assert list(Lesson.objects.filter(team=team).values_list("external_id", flat=True)) == ["c"]
    memories = import_memories(lines=[json.dumps({"content": "A crowd", "people": _random_terms(60, 5)}),
                                      json.dumps({"content": "A quiet day"})], team_slug=team.slug)
    assert memories.created == 1 and "people" in memories.errors[0][1]


def test_what_passes_the_models_checks_past_the_index_is_told_from_an_outage(team):
    # The backstop under the budget: written around the checks, the row fails in PostgreSQL with
    # "program limit exceeded" (SQLSTATE 54000), which the API, MCP and imports answer as a bad value.
    with pytest.raises(OperationalError) as error, transaction.atomic():
        Lesson.objects.create(team=team, title="Around the checks", tags=_random_terms(50, 64))
    assert over_a_database_limit(error.value)
