"""Embeddings stay in the row (migration 0008): a lesson or memory with an abstract's worth of text
keeps its vector inline, so cosines computed from the table do not read TOAST. Each test fails
with the vector type's default storage (EXTERNAL): checked by setting it back."""

import random
import string

import pytest
from django.db import connection

from lessons.services.embeddings import embedding_refresh
from tests.factories import LessonFactory, MemoryFactory

pytestmark = pytest.mark.django_db


def abstract_like_text(words: int = 260) -> str:
    """About an abstract's length of words: compressed, it is smaller than the vector, so with
    the vector type's default storage (EXTERNAL) the toaster moved the vector out of the row."""
    rng = random.Random(4)
    vocabulary = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 11))) for _ in range(400)]
    return " ".join(rng.choice(vocabulary) for _ in range(words))


def toasted(table: str, row_id: int, column: str) -> bool:
    """Whether the column's value lives in the TOAST table (PostgreSQL 17+)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_column_toast_chunk_id({column}) IS NOT NULL FROM {table} WHERE id = %s", [row_id])
        return cursor.fetchone()[0]


@pytest.mark.parametrize("table", ["lessons_lesson", "lessons_memory"])
def test_the_embedding_column_is_stored_main(table):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attstorage FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'embedding'", [table]
        )
        assert cursor.fetchone() == ("m",)


def test_a_long_lesson_keeps_its_vector_in_the_row(team):
    lesson = LessonFactory(team=team, description=abstract_like_text(), recommendation=abstract_like_text(60))
    embedding_refresh(items=[lesson])
    assert not toasted("lessons_lesson", lesson.pk, "embedding")


def test_a_long_memory_keeps_its_vector_in_the_row(team):
    memory = MemoryFactory(team=team, content=abstract_like_text(100), details=abstract_like_text(120))
    embedding_refresh(items=[memory])
    assert not toasted("lessons_memory", memory.pk, "embedding")
