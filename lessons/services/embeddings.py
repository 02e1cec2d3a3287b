"""Writing embeddings: one batched encode and one bulk write per batch of rows.

A vector is written only if the row still holds the text it was computed from (its current
text hashes to the same value at write time), so an edit made while the model was busy is never
overwritten with an embedding of the old text.
"""

import logging
from dataclasses import dataclass, field

from django.db import connection, transaction
from django.utils import timezone

from lessons.embedding import EmbeddingUnavailable, content_hash, embedding_text, get_embedding_backend
from lessons.models import Lesson, Memory

logger = logging.getLogger(__name__)


@dataclass
class EmbeddingReport:
    embedded: int = 0
    skipped_changed: int = 0  # the text changed while it was being embedded
    failed_ids: list[int] = field(default_factory=list)
    failure_reason: str | None = None


def embedding_refresh(*, items: list[Lesson | Memory]) -> EmbeddingReport:
    """Embed `items` (all of one model) in one batched encode and write them in one statement."""
    report = EmbeddingReport()
    if not items:
        return report
    model = type(items[0])
    backend = get_embedding_backend()
    texts = [embedding_text(item) for item in items]
    try:
        vectors = backend.embed_documents(texts)
    except EmbeddingUnavailable as error:
        report.failed_ids = [item.pk for item in items]
        report.failure_reason = str(error)
        logger.warning("embedding skipped for %s %s: %s", model.__name__, report.failed_ids, error)
        return report

    hashes = [content_hash(model_name=backend.model_name, text=text) for text in texts]
    written = _bulk_write(items=items, vectors=vectors, hashes=hashes, model_name=backend.model_name)
    report.embedded = len(written)
    report.skipped_changed = len(items) - len(written)
    return report


def _source_columns(model) -> tuple[str, ...]:
    return ("title", "description", "recommendation") if model is Lesson else ("content", "details")


def _bulk_write(*, items, vectors, hashes, model_name: str) -> set[int]:
    """One UPDATE ... FROM (VALUES ...), guarded: a row whose source columns no longer hold the
    values that were embedded is left alone (it stays stale for the next run)."""
    model = type(items[0])
    columns = _source_columns(model)
    row_sql = "(%s::bigint, %s::vector, %s::text" + ", %s::text" * len(columns) + ")"
    params: list = []
    for item, vector, digest in zip(items, vectors, hashes):
        params.extend([item.pk, "[" + ",".join(f"{x:.7g}" for x in vector) + "]", digest])
        params.extend(getattr(item, column) for column in columns)
    guard = " AND ".join(f"t.{column} = v.{column}" for column in columns)
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
