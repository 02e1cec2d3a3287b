"""Background tasks (django-tasks). Development and tests run them at once after commit
(ImmediateBackend); production queues them in the database for `python manage.py db_worker`."""

from django_tasks import task

from lessons.embedding import EmbeddingUnavailable
from lessons.models import Team
from lessons.services.embeddings import embedding_backfill, embedding_refresh_pending


@task()
def embed_item(*, kind: str, item_id: int) -> dict:
    """Embed one lesson or memory (kind "lessons" or "memories") if it is missing or stale.

    A model that is off or fails is logged by the service and leaves the row pending for the next
    backfill; the task still ends normally, since retrying at once would fail the same way."""
    report = embedding_refresh_pending(kind=kind, ids=[item_id])
    return {
        "embedded": report.embedded,
        "changed_meanwhile": report.skipped_changed,
        "failed": len(report.failed_ids),
        "reason": report.failure_reason,
    }


@task()
def embed_pending(*, kind: str, team_id: int) -> dict:
    """Embed a team's missing or stale rows of `kind` in batches (queued after an import)."""
    team = Team.objects.filter(pk=team_id).first()
    if team is None:
        return {"embedded": 0, "failed": 0, "reason": "the team no longer exists"}
    try:
        report = embedding_backfill(kind=kind, team=team)
    except EmbeddingUnavailable as error:  # logged; the rows stay pending for the next backfill
        pending = embedding_backfill(kind=kind, team=team, dry_run=True).pending
        return {"embedded": 0, "failed": pending, "reason": str(error)}
    # failed_ids maps each kind to its ids: count the rows, not the kinds.
    return {
        "embedded": report.embedded,
        "failed": report.failed,
        "reason": "; ".join(report.failure_reasons) or None,
    }


@task()
def reembed_items(*, kind: str, ids: list[int]) -> dict:
    """Re-embed the rows `ids` of `kind`, fresh ones too (the admin's "Re-embed selected"), in
    committed batches; the admin reads the progress from the rows (lessons.selectors.embedding_jobs)."""
    try:
        report = embedding_backfill(kind=kind, ids=ids, include_fresh=True)
    except EmbeddingUnavailable as error:  # logged; the rows keep the vectors they had
        return {"embedded": 0, "failed": len(ids), "changed": 0, "reason": str(error)}
    return {
        "embedded": report.embedded,
        "failed": report.failed,
        "changed": report.changed,
        "reason": "; ".join(report.failure_reasons) or None,
    }
