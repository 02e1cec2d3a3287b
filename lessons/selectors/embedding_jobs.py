"""How far a re-embedding job (lessons.services.embedding_jobs) has got, read from the rows:
a row counts as done once it was embedded at or after the moment the job was queued; and the job
itself, read back from the task queue."""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max, Q
from django_tasks import TaskResultStatus
from django_tasks.exceptions import TaskResultDoesNotExist, TaskResultMismatch

from lessons.selectors.embeddings import EMBEDDED_KINDS
from lessons.services.embedding_jobs import EmbeddingJob


@dataclass(frozen=True)
class EmbeddingJobProgress:
    total: int  # rows queued
    done: int  # embedded since the job was queued
    gone: int  # deleted since
    last_done_at: datetime | None = None  # when the latest of them was embedded

    @property
    def remaining(self) -> int:
        return self.total - self.done - self.gone

    @property
    def percent(self) -> int:
        return 100 if not self.total else round(100 * (self.done + self.gone) / self.total)

    @property
    def finished(self) -> bool:
        return self.remaining == 0


def embedding_job_progress(*, job) -> EmbeddingJobProgress:
    """One grouped query over the job's rows."""
    model = EMBEDDED_KINDS[job.kind]
    since = Q(embedded_at__gte=job.queued_at)
    counts = model.objects.filter(pk__in=job.ids).aggregate(
        present=Count("pk"), done=Count("pk", filter=since), last_done_at=Max("embedded_at", filter=since)
    )
    return EmbeddingJobProgress(total=len(job.ids), done=counts["done"], gone=len(job.ids) - counts["present"],
                                last_done_at=counts["last_done_at"])


@dataclass(frozen=True)
class QueuedEmbeddingJob:
    job: EmbeddingJob  # what was queued, with the task's state and outcome as the queue has them now
    started_at: datetime | None  # when a worker took the task


def embedding_job_from_queue(*, task_id: str) -> QueuedEmbeddingJob | None:
    """A re-embedding job as the task queue keeps it: the database backend (production) stores each
    task's arguments, state and result, so the job's page opens for any curator, in any session.
    None when the queue keeps no results (the immediate backend: the task has run and is forgotten),
    has no such task, or the id is another task's."""
    from lessons.tasks import reembed_items  # the task module imports the services

    if not reembed_items.get_backend().supports_get_result:
        return None
    try:
        result = reembed_items.get_result(task_id)
    except (TaskResultDoesNotExist, TaskResultMismatch):  # unknown or pruned (a malformed id too), or another task
        return None
    kind, ids = result.kwargs.get("kind"), result.kwargs.get("ids")
    if kind not in EMBEDDED_KINDS or not isinstance(ids, list):
        return None
    job = EmbeddingJob(kind=kind, ids=ids, queued_at=result.enqueued_at, task_id=str(result.id), status=result.status)
    if result.status == TaskResultStatus.SUCCESSFUL:
        job.outcome = dict(result.return_value or {})
    return QueuedEmbeddingJob(job=job, started_at=result.started_at)
