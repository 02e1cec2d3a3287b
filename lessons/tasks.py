"""Background tasks (django-tasks). Development and tests run them at once after commit
(ImmediateBackend); production queues them in the database for `python manage.py db_worker`."""

from django_tasks import task

from lessons.services.embeddings import embedding_refresh_pending


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
