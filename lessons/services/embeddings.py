"""Writing embeddings: scheduling after a save, refreshing rows, and the batched backfill.

- A save through the services calls `embedding_schedule`: after the transaction commits, a
  django-tasks task (lessons.tasks.embed_item) embeds the row. The save never waits for the model
  and never fails because of it; a row whose embedding could not be queued or computed stays
  pending (missing or stale) and the next backfill picks it up.
- `embedding_refresh` embeds a batch with one encode and writes it with one statement. A vector is
  written only if the row still holds the text it was computed from, so an edit made while the
  model was busy is never overwritten with an embedding of the old text.
- `embedding_backfill` walks the pending rows in primary-key order (keyset pagination), one
  committed batch at a time: an interrupted run keeps its finished batches, a re-run continues.
  It encodes several batches in one call (ENCODE_WINDOW) and then writes them batch by batch.
"""

import contextvars
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial

import numpy as np
from django.contrib.postgres.fields import ArrayField
from django.db import connection, transaction
from django.utils import timezone

from lessons.embedding import (
    EmbeddingUnavailable,
    content_hash,
    embedded_fields,
    embedding_text,
    get_embedding_backend,
)
from lessons.models import Lesson, Memory, Team
from lessons.selectors.embeddings import EMBEDDED_KINDS, embedding_pending, embedding_status_counts

logger = logging.getLogger(__name__)

BACKFILL_KINDS = ("lessons", "memories", "all")
# The backfill encodes up to this many rows in one call (then writes and commits them a batch at
# a time): the model sorts a call's texts by length, so short texts are not padded to the length
# of long ones. On texts of mixed length, 64 at a time encoded about 25% slower.
ENCODE_WINDOW = 512


# --- scheduling after a save ----------------------------------------------------------------------

_deferred_depth = contextvars.ContextVar("embeddings_deferred_depth", default=0)


@contextmanager
def embeddings_deferred() -> Iterator[None]:
    """Inside this block, saves through the services schedule no embedding: for bulk loads that
    run `embedding_backfill` afterwards, which embeds in batches far faster than row by row."""
    token = _deferred_depth.set(_deferred_depth.get() + 1)
    try:
        yield
    finally:
        _deferred_depth.reset(token)


def embedding_kind(item: Lesson | Memory) -> str:
    for kind, model in EMBEDDED_KINDS.items():
        if isinstance(item, model):
            return kind
    raise TypeError(f"{type(item).__name__} rows carry no embedding")


def embedding_schedule(*, item: Lesson | Memory) -> None:
    """Queue the embedding of `item` once the current transaction commits (at once outside one).
    Nothing is queued when the transaction rolls back, or inside `embeddings_deferred()`."""
    if _deferred_depth.get():
        return
    transaction.on_commit(partial(_enqueue, kind=embedding_kind(item), item_id=item.pk), robust=True)


def embedding_schedule_if_pending(*, item: Lesson | Memory) -> None:
    """Schedule `item` only if the embedding it carries does not match its text and the model:
    an archived memory version usually keeps the (fresh) embedding copied from its memory."""
    expected = content_hash(model_name=get_embedding_backend().model_name, text=embedding_text(item))
    if item.embedding is None or item.content_hash != expected:
        embedding_schedule(item=item)


def embedding_schedule_backfill(*, kind: str, team: Team, written_since: datetime | None = None) -> None:
    """Queue one batched backfill of the team's pending rows of `kind` once the transaction
    commits: what a bulk write (an import) schedules instead of one embedding per row. The rows
    written since `written_since` (the import's own) are embedded before the team's older backlog."""
    if _deferred_depth.get():
        return
    since = written_since.isoformat() if written_since is not None else None
    transaction.on_commit(partial(_enqueue_backfill, kind=kind, team_id=team.pk, since=since), robust=True)


def _enqueue(*, kind: str, item_id: int) -> None:
    try:
        # imported here: the task module imports this one, and importing it resolves TASKS_BACKEND,
        # which fails for a backend that cannot be imported: after the commit, so it must not escape
        from lessons.tasks import embed_item

        embed_item.enqueue(kind=kind, item_id=item_id)
    except Exception:  # a queue that is down must not undo or fail the save that came before
        logger.exception(
            "could not queue the embedding of %s %s; it stays pending for the next backfill", kind, item_id
        )


def _enqueue_backfill(*, kind: str, team_id: int, since: str | None = None) -> None:
    try:
        from lessons.tasks import embed_pending

        embed_pending.enqueue(kind=kind, team_id=team_id, since=since)
    except Exception:  # as above: the rows stay pending for the next backfill
        logger.exception("could not queue the backfill of team %s %s; they stay pending", team_id, kind)


# --- refreshing rows ------------------------------------------------------------------------------


@dataclass
class EmbeddingReport:
    embedded: int = 0
    skipped_changed: int = 0  # the text changed while it was being embedded
    failed_ids: list[int] = field(default_factory=list)
    failure_reason: str | None = None
    changed_ids: list[int] = field(default_factory=list)


@dataclass
class _Encoded:
    vectors: np.ndarray
    hashes: list[str]
    model_name: str

    def part(self, start: int, stop: int) -> "_Encoded":
        return _Encoded(self.vectors[start:stop], self.hashes[start:stop], self.model_name)


def _encode(items: list[Lesson | Memory]) -> _Encoded:
    """One batched encode; raises EmbeddingUnavailable when the model is off or fails."""
    backend = get_embedding_backend()
    texts = [embedding_text(item) for item in items]
    vectors = backend.embed_documents(texts)
    hashes = [content_hash(model_name=backend.model_name, text=text) for text in texts]
    return _Encoded(vectors, hashes, backend.model_name)


def _write(items: list[Lesson | Memory], encoded: _Encoded) -> EmbeddingReport:
    written = _bulk_write(items=items, vectors=encoded.vectors, hashes=encoded.hashes, model_name=encoded.model_name)
    changed = [item.pk for item in items if item.pk not in written]
    return EmbeddingReport(embedded=len(written), skipped_changed=len(changed), changed_ids=changed)


def embedding_refresh(*, items: list[Lesson | Memory]) -> EmbeddingReport:
    """Embed `items` (all of one model) in one batched encode and write them in one statement."""
    if not items:
        return EmbeddingReport()
    try:
        encoded = _encode(items)
    except EmbeddingUnavailable as error:
        failed_ids = [item.pk for item in items]
        logger.warning("embedding skipped for %s %s: %s", type(items[0]).__name__, failed_ids, error)
        return EmbeddingReport(failed_ids=failed_ids, failure_reason=str(error))
    return _write(items, encoded)


def embedding_refresh_pending(*, kind: str, ids: list[int]) -> EmbeddingReport:
    """Embed those of the rows `ids` (of `kind`) that are missing or stale; fresh ones cost nothing.
    This is what the task queued after a save runs; a row deleted meanwhile is simply not found."""
    if kind not in EMBEDDED_KINDS:
        raise ValueError(f"kind must be one of {', '.join(EMBEDDED_KINDS)}, not {kind!r}")
    model = EMBEDDED_KINDS[kind]
    pending = embedding_pending(queryset=model.objects.filter(pk__in=ids))
    items = list(pending.only("pk", *embedded_fields(model)).order_by("pk"))
    return embedding_refresh(items=items)


def _vector_literal(vector) -> str:
    # 9 significant digits round-trip a float32 exactly.
    return "[" + ",".join(f"{x:.9g}" for x in vector.tolist()) + "]"


def _bulk_write(*, items, vectors, hashes, model_name: str) -> set[int]:
    """One UPDATE ... FROM (VALUES ...), guarded: a row whose source columns no longer hold the
    values that were embedded is left alone (it stays stale for the next run)."""
    model = type(items[0])
    columns = embedded_fields(model)
    # Tags and tech stacks are varchar arrays; both sides of the guard compare as text[].
    types = {
        column: "text[]" if isinstance(model._meta.get_field(column), ArrayField) else "text" for column in columns
    }
    row_sql = "(%s::bigint, %s::vector, %s::text" + "".join(f", %s::{types[column]}" for column in columns) + ")"
    params: list = []
    for item, vector, digest in zip(items, vectors, hashes):
        params.extend([item.pk, _vector_literal(vector), digest])
        params.extend(getattr(item, column) for column in columns)
    guard = " AND ".join(f"t.{column}::{types[column]} = v.{column}" for column in columns)
    sql = f"""
        UPDATE {model._meta.db_table} AS t
           SET embedding = v.embedding, content_hash = v.digest, embedding_model = %s, embedded_at = %s
          FROM (VALUES {", ".join([row_sql] * len(items))}) AS v(id, embedding, digest, {", ".join(columns)})
         WHERE t.id = v.id AND {guard}
     RETURNING t.id
    """
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, [model_name, timezone.now(), *params])
        return {row[0] for row in cursor.fetchall()}


# --- the backfill -------------------------------------------------------------------------------


@dataclass
class BackfillReport:
    pending: int = 0  # rows to embed when the run started (missing or stale; all rows with include_fresh)
    embedded: int = 0
    already_fresh: int = 0
    failed_ids: dict[str, list[int]] = field(default_factory=dict)  # kind -> ids
    changed_ids: dict[str, list[int]] = field(default_factory=dict)  # edited while embedding: left stale
    failure_reasons: list[str] = field(default_factory=list)
    interrupted: bool = False  # Ctrl-C: the finished batches are committed, the rest still pending

    @property
    def failed(self) -> int:
        return sum(len(ids) for ids in self.failed_ids.values())

    @property
    def changed(self) -> int:
        return sum(len(ids) for ids in self.changed_ids.values())

    @property
    def ok(self) -> bool:
        return not self.failed

    def stop_if_interrupted(self) -> None:
        """The backfill keeps its finished batches when Ctrl-C reaches it and reports it, for the
        `backfill_embeddings` command. A caller that goes on (a task run in the process that queued
        it, an evaluation about to measure) passes the interrupt on, instead of reporting success."""
        if self.interrupted:
            raise KeyboardInterrupt


def _kinds(kind: str) -> list[str]:
    if kind not in BACKFILL_KINDS:
        raise ValueError(f"kind must be one of {', '.join(BACKFILL_KINDS)}, not {kind!r}")
    return list(EMBEDDED_KINDS) if kind == "all" else [kind]


def embedding_backfill(
    *,
    kind: str = "all",
    team: Team | None = None,
    ids: list[int] | None = None,
    written_since: datetime | None = None,
    include_fresh: bool = False,
    batch_size: int = 64,
    dry_run: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> BackfillReport:
    """Embed the missing and stale rows of `kind` ("lessons", "memories" or "all"), optionally of
    one team, only the rows `ids`, or only those written (`updated_at`) since `written_since`;
    `include_fresh` re-embeds fresh rows too.

    Batches of `batch_size` rows in primary-key order, each written with one UPDATE and committed
    on its own; up to ENCODE_WINDOW rows are encoded in one call first (a failing call is retried
    batch by batch, so only the batch that fails fails). `progress(advance, total)` is called
    with (0, total) before the first batch and with the batch's row count after each. `dry_run`
    only counts. Raises ValueError for a bad kind or batch size, and EmbeddingUnavailable (before
    writing anything) when the model is off.
    """
    kinds = _kinds(kind)
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    backend = get_embedding_backend()
    report = BackfillReport()
    scopes = {}
    for name in kinds:
        scope = EMBEDDED_KINDS[name].objects.all()
        if team is not None:
            scope = scope.filter(team=team)
        if ids is not None:
            scope = scope.filter(pk__in=ids)
        if written_since is not None:
            scope = scope.filter(updated_at__gte=written_since)
        counts = embedding_status_counts(queryset=scope, model_name=backend.model_name)
        if include_fresh:
            report.pending += sum(counts.values())
        else:
            report.pending += counts["stale"] + counts["missing"]
            report.already_fresh += counts["fresh"]
            scope = embedding_pending(queryset=scope, model_name=backend.model_name)
        scopes[name] = scope
    if dry_run or not report.pending:
        return report
    reason = backend.unavailable_reason
    if reason is not None:
        raise EmbeddingUnavailable(reason)

    if progress is not None:
        progress(0, report.pending)
    try:
        for name, scope in scopes.items():
            _backfill_kind(kind=name, scope=scope, batch_size=batch_size, report=report, progress=progress)
    except KeyboardInterrupt:
        # Each batch commits on its own (the one being written rolls back whole): the report of
        # what finished is the answer, not a traceback. A re-run continues with the rest.
        report.interrupted = True
    return report


def _backfill_kind(*, kind: str, scope, batch_size: int, report: BackfillReport, progress) -> None:
    model = EMBEDDED_KINDS[kind]
    # Only the columns that are embedded: never the stored vectors or search vectors.
    rows = scope.only("pk", *embedded_fields(model)).order_by("pk")
    window_size = max(batch_size, ENCODE_WINDOW - ENCODE_WINDOW % batch_size)
    last_pk = 0
    while True:
        # Keyset pagination: rows embedded meanwhile drop out of `scope`, failed ones stay, so an
        # OFFSET would skip or repeat rows; "after the last pk seen" does neither.
        window = list(rows.filter(pk__gt=last_pk)[:window_size])
        if not window:
            return
        last_pk = window[-1].pk
        try:
            encoded = _encode(window)
        except EmbeddingUnavailable:
            encoded = None  # encode batch by batch below, so only the failing batch fails
        for start in range(0, len(window), batch_size):
            batch = window[start : start + batch_size]
            if encoded is not None:
                result = _write(batch, encoded.part(start, start + len(batch)))
            else:
                result = embedding_refresh(items=batch)
            _add_to_report(report, kind=kind, result=result)
            if progress is not None:
                progress(len(batch), report.pending)


def _add_to_report(report: BackfillReport, *, kind: str, result: EmbeddingReport) -> None:
    report.embedded += result.embedded
    if result.failed_ids:
        report.failed_ids.setdefault(kind, []).extend(result.failed_ids)
        if result.failure_reason not in report.failure_reasons:
            report.failure_reasons.append(result.failure_reason)
    if result.changed_ids:
        report.changed_ids.setdefault(kind, []).extend(result.changed_ids)
