"""An id in a request body is a JSON integer. The merges and "not a duplicate" read `true` as id 1,
"5" and 5.0 as 5 (feedback refused them already): `{"merge_ids": [true]}` merged lesson 1 away."""

import pydantic
import pytest
from django.core.management.color import no_style
from django.db import connection

from lessons.api.tools import TOOLS_BY_NAME
from lessons.models import DuplicateDismissal, Lesson, Memory
from lessons.services.memories import memory_create
from tests.factories import LessonFactory, MemoryFactory

pytestmark = pytest.mark.django_db

LOOSE = {"true": lambda pk: True, "text": str, "float": float}


def _refused(response, field: str) -> None:
    assert response.status_code == 422, response.content
    assert [error["field"] for error in response.json()["errors"]] == [field]


def _with_id_one(factory, **fields):
    """The row `true` was read as (id 1), made before the test's other rows: the table's sequence
    is moved past it for them."""
    row = factory(id=1, **fields)
    with connection.cursor() as cursor:
        for statement in connection.ops.sequence_reset_sql(no_style(), [type(row)]):
            cursor.execute(statement)
    return row


@pytest.fixture
def lesson_one(team):
    # a merge of [true] deleted it
    return _with_id_one(LessonFactory, team=team, title="Lesson one")


@pytest.mark.parametrize("loose", LOOSE)
def test_a_lesson_merge_takes_only_integers_as_merge_ids(api, team, lesson_one, loose):
    kept = LessonFactory(team=team, title="Kept")
    _refused(api.post(f"/lessons/{kept.pk}/merge", {"merge_ids": [LOOSE[loose](lesson_one.pk)]}), "merge_ids.0")
    assert Lesson.objects.filter(pk__in=[kept.pk, lesson_one.pk]).count() == 2
    assert Lesson.objects.get(pk=kept.pk).title == "Kept"


@pytest.mark.parametrize("loose", LOOSE)
def test_a_lesson_merge_takes_only_an_integer_as_text_from(api, team, lesson_one, loose):
    kept, other = LessonFactory(team=team, title="Kept"), LessonFactory(team=team, title="Other")
    body = {"merge_ids": [other.pk, lesson_one.pk], "text_from": LOOSE[loose](lesson_one.pk)}
    _refused(api.post(f"/lessons/{kept.pk}/merge", body), "text_from")
    assert Lesson.objects.filter(pk__in=[kept.pk, other.pk, lesson_one.pk]).count() == 3


def test_integer_ids_still_merge(api, team, lesson_one):
    kept = LessonFactory(team=team, title="Kept")
    response = api.post(f"/lessons/{kept.pk}/merge", {"merge_ids": [lesson_one.pk], "text_from": lesson_one.pk})
    assert response.status_code == 200, response.content
    assert response.json()["lesson"]["title"] == "Lesson one"
    assert not Lesson.objects.filter(pk=lesson_one.pk).exists()


@pytest.mark.parametrize("loose", LOOSE)
def test_a_memory_merge_takes_only_an_integer_as_merge_id(api, team, loose):
    other = _with_id_one(MemoryFactory, team=team, content="Coffee with Sam again")
    kept = memory_create(team=team, content="Coffee with Sam")
    _refused(api.post(f"/memories/{kept.pk}/merge", {"merge_id": LOOSE[loose](other.pk)}), "merge_id")
    assert Memory.objects.filter(pk__in=[kept.pk, other.pk]).count() == 2


@pytest.mark.parametrize("kind", ["lessons", "memories"])
@pytest.mark.parametrize("loose", LOOSE)
def test_not_a_duplicate_takes_only_integer_ids(api, team, kind, loose):
    if kind == "lessons":
        first, second = _with_id_one(LessonFactory, team=team), LessonFactory(team=team)
    else:
        first, second = _with_id_one(MemoryFactory, team=team), MemoryFactory(team=team)
    loose_id = LOOSE[loose](first.pk)
    _refused(api.post(f"/{kind}/duplicates/dismiss", {"ids": [loose_id, second.pk]}), "ids.0")
    _refused(api.post(f"/{kind}/duplicates/dismiss", {"ids": [second.pk, loose_id]}), "ids.1")
    assert not DuplicateDismissal.objects.exists()
    assert api.post(f"/{kind}/duplicates/dismiss", {"ids": [first.pk, second.pk]}).status_code == 200


@pytest.mark.parametrize("tool", ["get_memory", "update_memory", "delete_memory"])
@pytest.mark.parametrize("loose", LOOSE)
def test_a_memory_tool_takes_only_an_integer_as_memory_id(team, tool, loose):
    memory = _with_id_one(MemoryFactory, team=team, content="Climbing on Tuesdays")
    with pytest.raises(pydantic.ValidationError) as refused:
        TOOLS_BY_NAME[tool].call(team=team, arguments={"memory_id": LOOSE[loose](memory.pk)})
    assert [error["loc"] for error in refused.value.errors()] == [("memory_id",)]
    assert Memory.objects.filter(pk=memory.pk).exists()
