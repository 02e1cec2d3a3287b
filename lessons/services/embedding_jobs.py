"""Re-embedding chosen rows as a background task, so a curator's request does not wait for the
model (200 lessons took 35 s inside one admin request).

`embedding_job_enqueue` queues `lessons.tasks.reembed_items` and returns an `EmbeddingJob` that
says what was queued and when; `lessons.selectors.embedding_jobs.embedding_job_progress` reads the
progress back from the rows themselves (embedded since the job was queued), so it needs no table
of its own and works with every django-tasks backend. With the immediate backend (development,
tests) the task has already run when this returns.
"""

import logging
from dataclasses import asdict, dataclass, field
from datetime import datetime

from django.utils import timezone
from django_tasks import TaskResultStatus

from lessons.selectors.embeddings import EMBEDDED_KINDS

logger = logging.getLogger(__name__)


@dataclass
class EmbeddingJob:
    kind: str  # "lessons" | "memories"
    ids: list[int]
    queued_at: datetime
    task_id: str | None = None
    status: str = TaskResultStatus.READY  # as the queue last reported it
    outcome: dict = field(default_factory=dict)  # the task's return value once it has run
    error: str | None = None  # the job could not be queued

    def as_dict(self) -> dict:
        """JSON-serialisable (for the session)."""
        data = asdict(self)
        data["queued_at"] = self.queued_at.isoformat()
        data["status"] = str(self.status)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "EmbeddingJob":
        return cls(**{**data, "queued_at": datetime.fromisoformat(data["queued_at"])})


def embedding_job_enqueue(*, kind: str, ids: list[int]) -> EmbeddingJob:
    """Queue the re-embedding of rows `ids` of `kind` (fresh ones too: a curator asked for it)."""
    if kind not in EMBEDDED_KINDS:
        raise ValueError(f"kind must be one of {', '.join(EMBEDDED_KINDS)}, not {kind!r}")
    from lessons.tasks import reembed_items  # the task module imports the services

    job = EmbeddingJob(kind=kind, ids=sorted(set(ids)), queued_at=timezone.now())
    try:
        result = reembed_items.enqueue(kind=kind, ids=job.ids)
    except Exception as error:  # a queue that is down: say so, change nothing
        logger.exception("could not queue the re-embedding of %d %s", len(job.ids), kind)
        job.status = TaskResultStatus.FAILED
        job.error = f"could not be queued: {error}"
        return job
    job.task_id = str(result.id)
    job.status = result.status
    if result.status == TaskResultStatus.SUCCESSFUL:
        job.outcome = dict(result.return_value or {})
    return job
