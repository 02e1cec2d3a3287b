"""Running a dataset's judged queries through `lessons.search.search` (the selector the API's
search calls) and scoring the rankings per mode.

Every judged query counts, including those the engine answers with nothing (they score 0), and
the latency is the wall-clock time of the whole `search()` call: query embedding, both legs,
fusion and loading the hits, as an API client would wait for it (HTTP aside). One untimed search
per mode warms the model and the database caches first.
"""

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from lessons.evaluation.beir import Dataset, Query
from lessons.evaluation.hits_log import HitsLog
from lessons.evaluation.loading import ProgressFactory, progress_bar, scope_value
from lessons.evaluation.metrics import mrr_at_k, ndcg_at_k, percentile, recall_at_k
from lessons.models import Lesson, Memory, Team
from lessons.search import MAX_LIMIT, SearchRequest, search
from lessons.search.types import MAX_QUERY_CHARS


@dataclass
class ModeScores:
    ndcg_at_10: float
    recall_at_100: float
    mrr_at_10: float
    p50_ms: float
    p95_ms: float

    def as_dict(self) -> dict[str, float]:
        return {
            "ndcg@10": round(self.ndcg_at_10, 4),
            "recall@100": round(self.recall_at_100, 4),
            "mrr@10": round(self.mrr_at_10, 4),
            "p50_ms": round(self.p50_ms, 1),
            "p95_ms": round(self.p95_ms, 1),
        }


@dataclass
class Evaluation:
    dataset: str
    split: str
    queries: int
    results: dict[str, ModeScores]
    # mode -> query id -> nDCG@10, for finding the queries a mode loses
    per_query_ndcg: dict[str, dict[str, float]] = field(default_factory=dict)
    rankings: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # mode -> query id -> doc ids

    def as_dict(self) -> dict:
        return {
            "dataset": self.dataset,
            "split": self.split,
            "queries": self.queries,
            "results": {mode: scores.as_dict() for mode, scores in self.results.items()},
        }


def _corpus_ids(*, team: Team, kind: str) -> dict[int, str]:
    """Row id -> the document's `_id` (external_id), in one query per team."""
    model = Lesson if kind == "lessons" else Memory
    return dict(model.objects.filter(team=team, external_id__isnull=False).values_list("id", "external_id"))


def _request(*, team: Team, query: Query, kind: str, mode: str, fusion: str, weights, limit: int,
             explain: bool = False) -> SearchRequest:
    return SearchRequest(
        team=team,
        query=query.text[:MAX_QUERY_CHARS],
        kind=kind,
        mode=mode,
        limit=limit,
        fusion=fusion,
        weights=weights,
        explain=explain,
    )


def evaluate(
    *,
    dataset: Dataset,
    teams: dict[str | None, Team],
    kind: str,
    modes: Iterable[str],
    fusion: str = "weighted",
    weights: dict[str, float] | None = None,
    scope_key: str | None = None,
    max_queries: int | None = None,
    limit: int = MAX_LIMIT,
    progress: ProgressFactory | None = None,
    hits_log: HitsLog | None = None,
) -> Evaluation:
    """Every judged query through search() in each mode. With `hits_log`, the searches ask for
    explanations (their latency then includes building them) and each one's hits are written."""
    queries = dataset.queries[:max_queries] if max_queries else list(dataset.queries)
    team_of = {query.id: teams[scope_value(query.metadata, scope_key)] for query in queries}
    corpus_ids = {team.pk: _corpus_ids(team=team, kind=kind) for team in {t.pk: t for t in teams.values()}.values()}
    evaluation = Evaluation(dataset=dataset.name, split=dataset.split, queries=len(queries), results={})

    for mode in modes:
        if queries:  # warm-up, not timed
            first = queries[0]
            search(request=_request(team=team_of[first.id], query=first, kind=kind, mode=mode, fusion=fusion,
                                    weights=weights, limit=limit))
        ndcg, recall, mrr, latencies = {}, [], [], []
        rankings: dict[str, list[str]] = {}
        bar = progress_bar(progress, total=len(queries), desc=f"searching ({mode})")
        try:
            for query in queries:
                team = team_of[query.id]
                request = _request(team=team, query=query, kind=kind, mode=mode, fusion=fusion, weights=weights,
                                   limit=limit, explain=hits_log is not None)
                started = time.perf_counter()
                response = search(request=request)
                latencies.append((time.perf_counter() - started) * 1000)
                ids = corpus_ids[team.pk]
                ranking = [ids[hit.id] for hit in response.results if hit.id in ids]
                judgments = dataset.qrels[query.id]
                if hits_log is not None:
                    hits_log.record(mode=mode, query_id=query.id, query=request.query, team_slug=team.slug,
                                    judgments=judgments, response=response, external_ids=ids)
                rankings[query.id] = ranking
                ndcg[query.id] = ndcg_at_k(ranking, judgments, 10)
                recall.append(recall_at_k(ranking, judgments, 100))
                mrr.append(mrr_at_k(ranking, judgments, 10))
                bar.update(1)
        finally:
            bar.close()
        count = max(len(queries), 1)
        evaluation.results[mode] = ModeScores(
            ndcg_at_10=sum(ndcg.values()) / count,
            recall_at_100=sum(recall) / count,
            mrr_at_10=sum(mrr) / count,
            p50_ms=percentile(latencies, 50),
            p95_ms=percentile(latencies, 95),
        )
        evaluation.per_query_ndcg[mode] = ndcg
        evaluation.rankings[mode] = rankings
    return evaluation
