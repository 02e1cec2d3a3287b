"""How far a re-embedding job (lessons.services.embedding_jobs) has got, read from the rows:
a row counts as done once it was embedded at or after the moment the job was queued."""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max, Q

from lessons.selectors.embeddings import EMBEDDED_KINDS


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
