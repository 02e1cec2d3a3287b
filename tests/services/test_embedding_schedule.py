"""Saves through the services schedule the row's embedding after commit (django-tasks, immediate
backend in tests); the save itself never waits for the model or fails because of it."""

import logging

import numpy as np
import pytest
from django.core.management import call_command
from django.db import transaction
from django.test import override_settings

from lessons.embedding import embedding_text, get_embedding_backend
from lessons.models import Lesson, Memory
from lessons.selectors.embeddings import with_embedding_status
from lessons.services.embeddings import embeddings_deferred
from lessons.services.imports import import_memories
from lessons.services.lessons import lesson_accept, lesson_create, lesson_propose, lesson_update
from lessons.services.memories import memory_create, memory_update

pytestmark = pytest.mark.django_db

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def status_of(item) -> str:
    return with_embedding_status(queryset=type(item).objects.filter(pk=item.pk)).get().embedding_status


def test_create_embeds_after_commit_and_not_before(team, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        lesson = lesson_create(
            team=team,
            title="Rotate leaked API keys at once",
            description="A key pushed to a public repo was abused within minutes.",
            recommendation="Revoke first, then investigate.",
        )
        # Inside the transaction the row is saved without its vector: the save did not wait.
        assert Lesson.objects.get(pk=lesson.pk).embedding is None
    assert len(callbacks) == 1
    lesson.refresh_from_db()
    assert lesson.embedding_model == MINILM
    assert lesson.embedded_at is not None
    assert status_of(lesson) == "fresh"
    expected = get_embedding_backend().embed_documents([embedding_text(lesson)])[0]
    np.testing.assert_allclose(np.asarray(lesson.embedding), expected, atol=1e-6)


def test_text_change_re_embeds_but_other_changes_do_not(team, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        lesson = lesson_create(team=team, title="Cache the session lookup", description="It was slow.")
    lesson.refresh_from_db()
    first_vector, first_hash = np.asarray(lesson.embedding), lesson.content_hash

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        lesson_update(
            lesson=lesson, confidence=0.9, context="A Django app.", project_types=["web-app"], category="performance"
        )
    assert callbacks == []  # neither the embedded text nor the vector changes

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        lesson_update(lesson=lesson, tags=["sessions"], tech_stacks=["redis"])
    assert len(callbacks) == 1  # the label line is embedded: "sessions; redis"
    lesson.refresh_from_db()
    assert status_of(lesson) == "fresh"
    assert lesson.content_hash != first_hash
    first_vector, first_hash = np.asarray(lesson.embedding), lesson.content_hash

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        lesson_update(lesson=lesson, description="Every request hit the database for the session row.")
    assert len(callbacks) == 1
    lesson.refresh_from_db()
    assert status_of(lesson) == "fresh"
    assert lesson.content_hash != first_hash
    assert not np.allclose(np.asarray(lesson.embedding), first_vector)


def test_proposals_are_embedded_too_so_accepting_is_instant(team, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        proposal = lesson_propose(team=team, title="Maybe pin the Node version in CI")
    assert status_of(proposal) == "fresh"
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        lesson_accept(lesson=proposal)
    assert callbacks == []
    assert status_of(proposal) == "fresh"


def test_rolled_back_save_schedules_nothing(team, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with pytest.raises(RuntimeError), transaction.atomic():
            lesson_create(team=team, title="Never committed")
            raise RuntimeError("the request failed later")
    assert callbacks == []
    assert not Lesson.objects.exists()


def test_deferred_block_schedules_nothing(team, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks, embeddings_deferred():
        lesson = lesson_create(team=team, title="Bulk loaded")
        memory = memory_create(team=team, content="Bulk loaded memory")
    assert callbacks == []
    assert (status_of(lesson), status_of(memory)) == ("missing", "missing")
    # Outside the block scheduling is back.
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        lesson_update(lesson=lesson, title="Bulk loaded, then edited")
    assert len(callbacks) == 1
    assert status_of(lesson) == "fresh"


def test_memory_update_embeds_the_memory_and_the_version_keeps_its_vector(team, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        memory = memory_create(team=team, content="Tom plays bass", people=["Tom"])
    memory.refresh_from_db()
    old_vector = np.asarray(memory.embedding)

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        memory = memory_update(memory=memory, content="Tom switched to the double bass")
    assert len(callbacks) == 1  # the memory only: the version copied a fresh embedding
    version = Memory.objects.get(current_version=memory)
    memory.refresh_from_db()
    np.testing.assert_allclose(np.asarray(version.embedding), old_vector)
    assert (status_of(memory), status_of(version)) == ("fresh", "fresh")
    assert not np.allclose(np.asarray(memory.embedding), old_vector)


def test_imported_history_gets_every_version_embedded(team, django_capture_on_commit_callbacks):
    line = (
        '{"external_id": "m1", "content": "Ana lives in Porto", '
        '"history": [{"content": "Ana lives in Lisbon"}, {"content": "Ana lives in Braga"}]}'
    )
    with django_capture_on_commit_callbacks(execute=True):
        report = import_memories(lines=[line], team_slug=team.slug)
    assert report.ok
    rows = with_embedding_status(queryset=Memory.objects.filter(team=team))
    assert sorted((row.version, row.embedding_status) for row in rows) == [(1, "fresh"), (2, "fresh"), (3, "fresh")]


def test_model_turned_off_saves_succeed_and_rows_stay_missing(team, django_capture_on_commit_callbacks, caplog):
    with override_settings(EMBEDDINGS_ENABLED=False), caplog.at_level(logging.WARNING, logger="lessons"):
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            lesson = lesson_create(team=team, title="Saved while the model is off")
            memory = memory_create(team=team, content="Also saved while the model is off")
        assert len(callbacks) == 2
    assert (status_of(lesson), status_of(memory)) == ("missing", "missing")
    assert "turned off" in caplog.text


def test_queue_down_saves_succeed_and_row_stays_pending(team, django_capture_on_commit_callbacks, caplog):
    broken_queue = {"default": {"BACKEND": "lessons.no_such_queue.Backend"}}
    with override_settings(TASKS=broken_queue), caplog.at_level(logging.ERROR, logger="lessons"):
        with django_capture_on_commit_callbacks(execute=True):
            lesson = lesson_create(team=team, title="Saved while the queue is down")
    assert Lesson.objects.filter(pk=lesson.pk).exists()
    assert status_of(lesson) == "missing"
    assert "could not queue the embedding of lessons" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_a_queue_backend_that_cannot_be_imported_does_not_fail_the_committed_save(team, monkeypatch, caplog):
    """A fresh worker imports the task module at its first save, and that import resolves
    TASKS_BACKEND: it raised after the commit, inside Django's on_commit error handling, which then
    failed on the partial's missing __qualname__, so the API answered 500 for a row it had stored."""
    import sys

    monkeypatch.delitem(sys.modules, "lessons.tasks", raising=False)
    broken_queue = {"default": {"BACKEND": "lessons.no_such_queue.Backend"}}
    with override_settings(TASKS=broken_queue), caplog.at_level(logging.ERROR, logger="lessons"):
        lesson = lesson_create(team=team, title="Saved while the queue cannot be imported")
    assert Lesson.objects.filter(pk=lesson.pk).exists()
    assert status_of(lesson) == "missing"
    assert "could not queue the embedding of lessons" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_database_queue_holds_the_task_until_the_worker_runs_it(team):
    """Production's path, really committed: the save commits, the task waits in the database
    queue, and `db_worker` embeds the row."""
    from django_tasks_db.models import DBTaskResult

    with override_settings(TASKS={"default": {"BACKEND": "django_tasks_db.backend.DatabaseBackend"}}):
        lesson = lesson_create(team=team, title="Queued for the worker")
        queued = DBTaskResult.objects.get()
        assert queued.task_path == "lessons.tasks.embed_item"
        assert queued.args_kwargs["kwargs"] == {"kind": "lessons", "item_id": lesson.pk}
        assert status_of(lesson) == "missing"  # committed, but no worker ran yet

        call_command("db_worker", batch=True, startup_delay=False, reload=False, verbosity=0)
    queued.refresh_from_db()
    assert queued.status == "SUCCESSFUL"
    assert queued.return_value["embedded"] == 1
    assert status_of(lesson) == "fresh"
