"""Fresh, stale and missing are decided in the database, from the current text and model."""

import pytest
from django.test import override_settings

from lessons.models import Lesson, Memory
from lessons.selectors.embeddings import (
    embedding_coverage,
    embedding_pending,
    embedding_status_counts,
    with_embedding_status,
)
from lessons.services.embeddings import embedding_backfill, embeddings_deferred
from lessons.services.lessons import lesson_create
from lessons.services.memories import memory_create, memory_update

pytestmark = pytest.mark.django_db

HASHING = {"BACKEND": "lessons.embedding.backends.HashingBackend", "BATCH_SIZE": 64}


def statuses(model, **filters) -> dict[int, str]:
    return dict(with_embedding_status(queryset=model.objects.filter(**filters)).values_list("pk", "embedding_status"))


def test_missing_then_fresh_then_stale_after_a_text_change(team):
    with embeddings_deferred():
        lesson = lesson_create(team=team, title="Index the foreign keys", description="Joins were slow.")
    assert statuses(Lesson) == {lesson.pk: "missing"}
    embedding_backfill(kind="lessons")
    assert statuses(Lesson) == {lesson.pk: "fresh"}
    Lesson.objects.filter(pk=lesson.pk).update(description="Deletes on the parent table were slow.")
    assert statuses(Lesson) == {lesson.pk: "stale"}


def test_a_raw_update_behind_the_orm_is_caught_and_backfilled(team):
    with embeddings_deferred():
        kept = lesson_create(team=team, title="Keep secrets in the vault")
        edited = lesson_create(team=team, title="Use feature flags for risky changes")
    embedding_backfill(kind="lessons")
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("UPDATE lessons_lesson SET recommendation = 'Flags need an owner.' WHERE id = %s", [edited.pk])
    assert list(embedding_pending(queryset=Lesson.objects.all()).values_list("pk", flat=True)) == [edited.pk]
    report = embedding_backfill(kind="lessons")
    assert (report.embedded, report.already_fresh) == (1, 1)
    assert statuses(Lesson) == {kept.pk: "fresh", edited.pk: "fresh"}


def test_a_context_category_or_status_change_keeps_the_row_fresh_a_tag_change_does_not(team):
    """Title, description, recommendation, tags and tech stacks are embedded; nothing else."""
    with embeddings_deferred():
        lesson = lesson_create(team=team, title="Pin base images")
    embedding_backfill(kind="lessons")
    Lesson.objects.filter(pk=lesson.pk).update(
        context="Found in the Docker build", category="deployment", project_types=["cli"], status="rejected"
    )
    assert statuses(Lesson) == {lesson.pk: "fresh"}
    Lesson.objects.filter(pk=lesson.pk).update(tags=["docker"])
    assert statuses(Lesson) == {lesson.pk: "stale"}
    embedding_backfill(kind="lessons")
    Lesson.objects.filter(pk=lesson.pk).update(tech_stacks=["docker"])
    assert statuses(Lesson) == {lesson.pk: "stale"}


def test_a_model_change_makes_every_row_stale(team):
    with embeddings_deferred():
        lesson = lesson_create(team=team, title="Retry with jitter")
        memory = memory_create(team=team, content="Ana runs on Sundays")
    embedding_backfill()
    assert (statuses(Lesson), statuses(Memory)) == ({lesson.pk: "fresh"}, {memory.pk: "fresh"})
    with override_settings(EMBEDDING_BACKEND=HASHING):
        assert (statuses(Lesson), statuses(Memory)) == ({lesson.pk: "stale"}, {memory.pk: "stale"})
        report = embedding_backfill()
        assert report.embedded == 2
        assert Lesson.objects.get(pk=lesson.pk).embedding_model == "test/hashing-bag-of-words"
        assert statuses(Lesson) == {lesson.pk: "fresh"}
    # Back on the real model, the hashing model's vectors are stale in turn.
    assert statuses(Lesson) == {lesson.pk: "stale"}


def test_coverage_counts_per_kind_and_team(team, other_team):
    with embeddings_deferred():
        fresh = lesson_create(team=team, title="Fresh one")
        stale = lesson_create(team=team, title="Stale one")
        lesson_create(team=team, title="Missing one")
        lesson_create(team=other_team, title="Another team's lesson")
        memory = memory_create(team=team, content="Tom plays bass")
    embedding_backfill(ids=[fresh.pk, stale.pk], kind="lessons")
    embedding_backfill(kind="memories")
    Lesson.objects.filter(pk=stale.pk).update(title="Stale one, edited")
    memory_update(memory=memory, content="Tom plays double bass")  # its task waits for a commit that never comes

    assert embedding_coverage(team=team) == {
        "lessons": {"fresh": 1, "stale": 1, "missing": 1},
        # The memory's new text is stale; its earlier version kept its fresh vector.
        "memories": {"fresh": 1, "stale": 1, "missing": 0},
    }
    assert embedding_coverage()["lessons"] == {"fresh": 1, "stale": 1, "missing": 2}
    other_teams = Lesson.objects.filter(team=other_team)
    assert embedding_status_counts(queryset=other_teams) == {"fresh": 0, "stale": 0, "missing": 1}
