"""The database task queue's housekeeping: tasks a dead worker left RUNNING.

django-tasks-db marks a task RUNNING when a worker claims it and nothing ever looks at it again: a
worker killed mid-task (SIGKILL, out of memory, a lost machine) leaves it RUNNING for good, and a
curator's re-embedding job shows "running" in the admin forever. The rows themselves are safe (a
row whose embedding was never written stays pending for the backfill), so what is lost is the
task. Every task of this project is idempotent (it embeds rows, or reports they are fresh), so
running a task twice costs time, never data: a task RUNNING for longer than any task takes can go
back to READY for the next worker.
"""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_tasks import TaskResultStatus
from django_tasks_db.models import DBTaskResult

DATABASE_BACKEND = "django_tasks_db.backend.DatabaseBackend"


def task_queue_is_database(*, alias: str = "default") -> bool:
    return settings.TASKS.get(alias, {}).get("BACKEND") == DATABASE_BACKEND


def task_results_requeue_stalled(*, older_than: timedelta, dry_run: bool = False) -> list[dict]:
    """Put tasks RUNNING since before `older_than` ago back to READY (their start time cleared,
    their worker ids kept as a record). Returns what was (or, dry run, would be) requeued:
    id, task path, started at, worker ids. The rows are locked while they are read and requeued
    (rows another transaction holds are skipped), so a worker cannot finish one in between."""
    cutoff = timezone.now() - older_than
    with transaction.atomic():
        stalled = DBTaskResult.objects.select_for_update(skip_locked=True).filter(
            status=TaskResultStatus.RUNNING, started_at__lt=cutoff
        )
        found = [
            {"id": str(row.id), "task_path": row.task_path, "started_at": row.started_at, "worker_ids": row.worker_ids}
            for row in stalled.order_by("started_at")
        ]
        if found and not dry_run:
            DBTaskResult.objects.filter(id__in=[row["id"] for row in found]).update(
                status=TaskResultStatus.READY, started_at=None
            )
    return found
