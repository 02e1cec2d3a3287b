"""A dead worker's RUNNING tasks go back to the queue (services/task_queue.py), through the
database queue production uses and the real `db_worker`."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from lessons.models import Lesson
from lessons.services.lessons import lesson_create
from lessons.services.task_queue import task_results_requeue_stalled

DATABASE_QUEUE = {"default": {"BACKEND": "django_tasks_db.backend.DatabaseBackend"}}


def claimed(task: DBTaskResult, *, by: str, minutes_ago: float) -> DBTaskResult:
    task.claim(by)
    DBTaskResult.objects.filter(pk=task.pk).update(started_at=timezone.now() - timedelta(minutes=minutes_ago))
    task.refresh_from_db()
    return task


def requeue(*args) -> str:
    out = StringIO()
    call_command("requeue_stalled_tasks", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_a_dead_workers_task_is_requeued_and_the_next_worker_runs_it(team):
    with override_settings(TASKS=DATABASE_QUEUE):
        dead = lesson_create(team=team, title="Claimed by a worker that was killed")
        live = lesson_create(team=team, title="Claimed a minute ago by a live worker")
        by_lesson = {task.args_kwargs["kwargs"]["item_id"]: task for task in DBTaskResult.objects.all()}
        stalled = claimed(by_lesson[dead.pk], by="worker-killed", minutes_ago=90)
        running = claimed(by_lesson[live.pk], by="worker-alive", minutes_ago=1)

        listing = requeue("--dry-run")
        assert "would requeue 1 task(s) running for more than 30 minutes" in listing
        assert str(stalled.id) in listing and "worker-killed" in listing and str(running.id) not in listing
        stalled.refresh_from_db()
        assert stalled.status == "RUNNING"  # a dry run changes nothing

        assert "requeued 1 task(s)" in requeue()
        stalled.refresh_from_db()
        running.refresh_from_db()
        assert (stalled.status, stalled.started_at, stalled.worker_ids) == ("READY", None, ["worker-killed"])
        assert running.status == "RUNNING"  # younger than the threshold: left to its worker

        call_command("db_worker", batch=True, startup_delay=False, reload=False, verbosity=0)
    stalled.refresh_from_db()
    assert stalled.status == "SUCCESSFUL" and stalled.return_value["embedded"] == 1
    assert Lesson.objects.get(pk=dead.pk).embedding is not None
    assert Lesson.objects.get(pk=live.pk).embedding is None  # its task is still the live worker's


@pytest.mark.django_db
def test_nothing_stalled_requeues_nothing(team):
    with override_settings(TASKS=DATABASE_QUEUE):
        assert task_results_requeue_stalled(older_than=timedelta(minutes=30)) == []
        assert "requeued 0 task(s)" in requeue("--older-than", "5")


@pytest.mark.django_db
def test_bad_options_and_other_queues_are_refused():
    for minutes in ("-1", "nan", "inf", "1e12"):  # each once a traceback (date out of range, NaN)
        with override_settings(TASKS=DATABASE_QUEUE), pytest.raises(CommandError, match="--older-than: minutes"):
            requeue("--older-than", minutes)
    with override_settings(TASKS={"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}):
        # development: nothing can be stalled, which is said and is no failure (exit 0)
        assert "not django_tasks_db" in requeue() and "none can be stalled" in requeue()
