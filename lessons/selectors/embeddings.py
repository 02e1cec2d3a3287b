"""Reading the embedding state of rows: fresh, stale or missing, decided in the database.

A row is *missing* when it has no vector, *stale* when its stored `content_hash` differs from the
hash of its current text and the configured model (so both an edit, even a raw UPDATE behind the
ORM's back, and a model change show up), and *fresh* otherwise. The current hash is computed in
SQL (`content_hash_sql`), never by loading rows into Python.
"""

from django.db.models import Case, Count, Q, QuerySet, Value, When

from lessons.embedding import content_hash_sql, get_embedding_backend
from lessons.models import EmbeddingStatus, Lesson, Memory, Team

# The names used by the backfill command, the task queue and the coverage report.
EMBEDDED_KINDS: dict[str, type] = {"lessons": Lesson, "memories": Memory}


def current_model_name() -> str:
    """The model name new embeddings are written with (no model is loaded to know it)."""
    return get_embedding_backend().model_name


def _fresh_condition(model: type, model_name: str | None) -> Q:
    expected = content_hash_sql(model=model, model_name=model_name or current_model_name())
    return Q(embedding__isnull=False, content_hash=expected)


def embedding_status_annotation(*, model: type, model_name: str | None = None) -> Case:
    """An expression giving each row's EmbeddingStatus value: annotate a queryset of `model` with it."""
    return Case(
        When(embedding__isnull=True, then=Value(EmbeddingStatus.MISSING.value)),
        When(_fresh_condition(model, model_name), then=Value(EmbeddingStatus.FRESH.value)),
        default=Value(EmbeddingStatus.STALE.value),
    )


def with_embedding_status(queryset: QuerySet, *, model_name: str | None = None) -> QuerySet:
    """`queryset` with an `embedding_status` column ('fresh', 'stale' or 'missing')."""
    return queryset.annotate(embedding_status=embedding_status_annotation(model=queryset.model, model_name=model_name))


def embedding_pending(queryset: QuerySet, *, model_name: str | None = None) -> QuerySet:
    """The rows of `queryset` that need embedding: missing or stale."""
    return queryset.exclude(_fresh_condition(queryset.model, model_name))


def embedding_status_counts(queryset: QuerySet, *, model_name: str | None = None) -> dict[str, int]:
    """{"fresh": n, "stale": n, "missing": n} for `queryset`, in one grouped query."""
    status = embedding_status_annotation(model=queryset.model, model_name=model_name)
    rows = queryset.order_by().annotate(_status=status).values("_status").annotate(n=Count("pk"))
    counts = dict.fromkeys(EmbeddingStatus.values, 0)
    counts.update({row["_status"]: row["n"] for row in rows})
    return counts


def embedding_coverage(*, team: Team | None = None) -> dict[str, dict[str, int]]:
    """How many lessons and memories (earlier versions of memories included: they are searched
    too) are fresh, stale or missing, optionally within one team."""
    model_name = current_model_name()
    coverage = {}
    for kind, model in EMBEDDED_KINDS.items():
        queryset = model.objects.all() if team is None else model.objects.filter(team=team)
        coverage[kind] = embedding_status_counts(queryset, model_name=model_name)
    return coverage
