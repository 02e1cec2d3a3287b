"""The ranges hold in the database itself, not only in forms."""

import pytest
from django.db import IntegrityError, connection, transaction

from lessons.models import Lesson, Memory
from tests.factories import LessonFactory, MemoryFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "field, value",
    [("confidence", 1.5), ("confidence", -0.1), ("frequency", 0), ("status", "maybe"), ("title", "")],
)
def test_lesson_ranges_are_database_constraints(team, field, value):
    lesson = LessonFactory(team=team)
    with pytest.raises(IntegrityError), transaction.atomic():
        Lesson.objects.filter(pk=lesson.pk).update(**{field: value})
    lesson.refresh_from_db()
    assert getattr(lesson, field) != value


@pytest.mark.parametrize("value", [0, 11])
def test_memory_importance_is_a_database_constraint(team, value):
    memory = MemoryFactory(team=team)
    with pytest.raises(IntegrityError), transaction.atomic():
        Memory.objects.filter(pk=memory.pk).update(importance=value)


def test_external_id_is_unique_per_team_only(team, other_team):
    LessonFactory(team=team, external_id="x-1")
    LessonFactory(team=other_team, external_id="x-1")  # another team may reuse it
    with pytest.raises(IntegrityError), transaction.atomic():
        LessonFactory(team=team, external_id="x-1")


def test_memory_versions_may_share_the_external_id_of_their_memory(team):
    current = MemoryFactory(team=team, external_id="m-1")
    MemoryFactory(team=team, external_id="m-1", current_version=current)
    with pytest.raises(IntegrityError), transaction.atomic():
        MemoryFactory(team=team, external_id="m-1")


def test_search_vector_is_generated_and_weighted(team):
    lesson = LessonFactory(team=team, title="Enable RLS policies", tags=["supabase-auth"], tech_stacks=["nextjs"])
    vector = Lesson.objects.values_list("search_vector", flat=True).get(pk=lesson.pk)
    assert "'nextjs':" in vector  # exact, unstemmed
    assert "'polici':" in vector  # stemmed English
    # A raw UPDATE behind the ORM's back still refreshes it.
    Lesson.objects.filter(pk=lesson.pk).update(title="Rotate refresh tokens")
    vector = Lesson.objects.values_list("search_vector", flat=True).get(pk=lesson.pk)
    assert "'token':" in vector and "'polici':" not in vector


def test_schema_has_vector_indexes_and_extensions():
    with connection.cursor() as cursor:
        cursor.execute("SELECT extname FROM pg_extension")
        extensions = {row[0] for row in cursor.fetchall()}
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN ('lessons_lesson', 'lessons_memory')")
        indexes = dict(cursor.fetchall())
    assert {"vector", "pg_trgm", "fuzzystrmatch", "unaccent"} <= extensions
    assert "hnsw" in indexes["lesson_embedding_hnsw"] and "vector_cosine_ops" in indexes["lesson_embedding_hnsw"]
    assert "hnsw" in indexes["memory_embedding_hnsw"] and "vector_cosine_ops" in indexes["memory_embedding_hnsw"]
    assert "gin" in indexes["lesson_search_vector_gin"] and "gin" in indexes["memory_search_vector_gin"]
