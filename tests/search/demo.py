"""Load the demo lessons and memories into a team of their own, embedded with the real model.

Module-scoped fixtures call `load_demo_team` and `drop_demo_team` around a module's tests: the
rows are committed outside the tests' transactions (so they are loaded and embedded once per
module) and deleted afterwards, so other modules never see them. The first load embeds through
`embedding_refresh` in batches; later loads in the same test run reuse those vectors (same model,
same text, same hash) instead of encoding the same texts again.
"""

from pathlib import Path

from django.db import connection
from django.utils import timezone

from lessons.embedding import content_hash, embedding_text, get_embedding_backend
from lessons.evaluation.metrics import ndcg_at_k
from lessons.models import Lesson, Memory, Team
from lessons.search import SearchRequest, search
from lessons.services.embeddings import embedding_refresh, embeddings_deferred
from lessons.services.imports import import_lessons, import_memories

DEMO_DIR = Path(__file__).resolve().parents[2] / "lessons" / "demo_data"
BATCH = 64
_VECTORS: dict[str, str] = {}  # content hash -> the vector as pgvector text


def load_demo_team(*, slug: str, memories: bool = True) -> Team:
    # Deferred: the vectors come from the batches below (or this run's cache), not the import's backfill.
    with embeddings_deferred():
        with open(DEMO_DIR / "lessons.jsonl", encoding="utf-8") as lines:
            report = import_lessons(lines=lines, team_slug=slug, create_team=True)
        assert report.ok, report.errors
        if memories:
            with open(DEMO_DIR / "memories.jsonl", encoding="utf-8") as lines:
                report = import_memories(lines=lines, team_slug=slug, create_team=True)
            assert report.ok, report.errors
    team = Team.objects.get(slug=slug)
    model_name = get_embedding_backend().model_name
    for model in (Lesson, Memory):
        rows = list(model.objects.filter(team=team).order_by("pk"))
        hashes = {row.pk: content_hash(model_name=model_name, text=embedding_text(row)) for row in rows}
        known = [row for row in rows if hashes[row.pk] in _VECTORS]
        _write_known(model=model, rows=known, hashes=hashes, model_name=model_name)
        missing = [row for row in rows if hashes[row.pk] not in _VECTORS]
        for start in range(0, len(missing), BATCH):
            result = embedding_refresh(items=missing[start : start + BATCH])
            assert result.failure_reason is None, result.failure_reason
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT content_hash, embedding::text FROM {model._meta.db_table} WHERE team_id = %s AND embedding IS NOT NULL",
                [team.pk],
            )
            _VECTORS.update(dict(cursor.fetchall()))
    return team


def _write_known(*, model, rows, hashes, model_name: str) -> None:
    if not rows:
        return
    values = ", ".join(["(%s::bigint, %s::vector, %s::text)"] * len(rows))
    params = [value for row in rows for value in (row.pk, _VECTORS[hashes[row.pk]], hashes[row.pk])]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {model._meta.db_table} AS t SET embedding = v.embedding, content_hash = v.digest,"
            f" embedding_model = %s, embedded_at = %s FROM (VALUES {values}) AS v(id, embedding, digest) WHERE t.id = v.id",
            [model_name, timezone.now(), *params],
        )


def drop_demo_team(*, slug: str) -> None:
    Team.objects.filter(slug=slug).delete()


# The demo judged set: queries and the numbers of the demo lessons a curator judged relevant.
JUDGED = {
    "database security": {20, 21, 22, 23, 24, 25, 26, 27, 28, 30, 31, 40},
    "stop users from seeing other customers' data": {20, 21, 23, 24, 25, 26, 31},
    "login and session handling": {28, 29, 32, 34, 35, 36, 37, 38},
    "webhooks delivered more than once": {1, 12, 39, 106, 130},
    "keep form input when the user navigates away": {71, 72, 73, 74, 77, 79},
    "speed up slow SQL queries": {22, 59, 60, 66, 155, 161},
    "safe schema changes in production": {50, 51, 52, 64, 127, 135, 145},
    "nextjs caching": {109, 157, 158},
    "flaky end-to-end tests": {115, 119, 125, 129},
    "docker image size": {137, 138, 146, 147},
    "background job retries": {4, 12, 56, 57, 99, 100, 151},
    "secret keys leaking": {27, 42, 147, 150, 187},
}


def judged_mean_ndcg(team: Team, mode: str) -> float:
    """Mean nDCG@10 of `mode` over the demo judged set, by the metric eval_retrieval reports."""
    scores = []
    for query, numbers in JUDGED.items():
        response = search(request=SearchRequest(team=team, query=query, mode=mode, limit=10))
        judgments = {f"lesson-{n:04d}": 1 for n in numbers}
        scores.append(ndcg_at_k([hit.external_id for hit in response.results], judgments, 10))
    return sum(scores) / len(scores)
