"""Background tasks (django-tasks). Development and tests run them at once after commit
(ImmediateBackend); production queues them in the database for `python manage.py db_worker`."""

import logging
from datetime import datetime

from django.db import DatabaseError
from django_tasks import task

from lessons.embedding import EmbeddingUnavailable
from lessons.models import Team
from lessons.selectors.embeddings import EMBEDDED_KINDS
from lessons.services.embeddings import embedding_backfill, embedding_refresh_pending
from lessons.services.keyword_index import keyword_impacts_upkeep

logger = logging.getLogger(__name__)


@task()
def embed_item(*, kind: str, item_id: int) -> dict:
    """Embed one lesson or memory (kind "lessons" or "memories") if it is missing or stale.

    A model that is off or fails is logged by the service and leaves the row pending for the next
    backfill; the task still ends normally, since retrying at once would fail the same way.

    As the task that follows every write, it then keeps the row's team's keyword impacts current
    (`keyword_impacts_upkeep`: a refresh only when the team's average length has drifted)."""
    report = embedding_refresh_pending(kind=kind, ids=[item_id])
    return {
        "embedded": report.embedded,
        "changed_meanwhile": report.skipped_changed,
        "failed": len(report.failed_ids),
        "reason": report.failure_reason,
        "impacts_refreshed": _keyword_upkeep_after(kind=kind, item_id=item_id),
    }


def _keyword_upkeep_after(*, kind: str, item_id: int) -> int:
    team = Team.objects.filter(pk__in=EMBEDDED_KINDS[kind].objects.filter(pk=item_id).values("team_id")).first()
    if team is None:  # the row was deleted meanwhile: the next write to its team checks
        return 0
    try:
        return keyword_impacts_upkeep(team=team, kind=kind)
    except DatabaseError:  # drift only slows searches; the embedding above is already committed
        logger.exception("keyword impacts upkeep failed for %s of team %s; refresh_keyword_impacts catches up",
                         kind, team.pk)
        return 0


@task()
def embed_pending(*, kind: str, team_id: int, since: str | None = None) -> dict:
    """Embed a team's missing or stale rows of `kind` in batches (queued after an import): those
    written since `since` (ISO time: the import's own rows) first, then the team's older backlog.
    An import into a team with 25,000 stale rows used to embed them all, oldest first, before its own."""
    team = Team.objects.filter(pk=team_id).first()
    if team is None:
        return {"embedded": 0, "failed": 0, "reason": "the team no longer exists"}
    runs = [{"written_since": datetime.fromisoformat(since)}] if since else []
    reports = []
    try:
        for scope in [*runs, {}]:
            reports.append(embedding_backfill(kind=kind, team=team, **scope))
            reports[-1].stop_if_interrupted()
    except EmbeddingUnavailable as error:  # logged; the rows stay pending for the next backfill
        pending = embedding_backfill(kind=kind, team=team, dry_run=True).pending
        return {"embedded": 0, "failed": pending, "reason": str(error)}
    # failed_ids maps each kind to its ids: count the rows, not the kinds (a row that failed in the
    # first run is tried again in the second: counted once)
    failed = {(name, pk) for report in reports for name, ids in report.failed_ids.items() for pk in ids}
    reasons = dict.fromkeys(reason for report in reports for reason in report.failure_reasons)
    return {
        "embedded": sum(report.embedded for report in reports),
        "failed": len(failed),
        "reason": "; ".join(reasons) or None,
    }


@task()
def reembed_items(*, kind: str, ids: list[int]) -> dict:
    """Re-embed the rows `ids` of `kind`, fresh ones too (the admin's "Re-embed selected"), in
    committed batches; the admin reads the progress from the rows (lessons.selectors.embedding_jobs)."""
    try:
        report = embedding_backfill(kind=kind, ids=ids, include_fresh=True)
    except EmbeddingUnavailable as error:  # the rows keep the vectors they had
        logger.warning("re-embedding %s %s of %s skipped: %s", len(ids), kind, ids[:10], error)
        return {"embedded": 0, "failed": len(ids), "changed": 0, "reason": str(error)}
    report.stop_if_interrupted()
    return {
        "embedded": report.embedded,
        "failed": report.failed,
        "changed": report.changed,
        "reason": "; ".join(report.failure_reasons) or None,
    }
