"""Learning from use, measured (issue 14): does reporting used results make search rank better?

On a BEIR-layout dataset with a train and a test split (SciFact):
1. the dataset's team starts clean (`usage_reset`): no search, no count;
2. before: nDCG@10 of the train and test queries (`lessons.evaluation.runner.evaluate`, which
   never records: a measurement does not change what it measures);
3. replay: every train query is searched as an agent would (limit 10), the search recorded
   (`search_record`, source "simulation": its results count as returned) and the judged relevant
   documents found in those 10 reported as used (`feedback_record`);
4. after: train (the same queries, a second pass) and test again, once per usage weight asked
   for (`SEARCH_USAGE_WEIGHT`; 0 is the signal off, which must give the "before" figures exactly);
5. the team's counts are reset again (unless kept), so later `eval_retrieval` runs on the same
   team measure the engine without feedback.

It also times what recording adds to a search (the `search_record` call: one statement).
"""

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.test import override_settings

from lessons.evaluation.beir import Dataset
from lessons.evaluation.loading import ProgressFactory, progress_bar
from lessons.evaluation.metrics import ndcg_at_k, percentile
from lessons.evaluation.runner import evaluate
from lessons.models import Team
from lessons.search import SearchRequest, search
from lessons.search.types import MAX_QUERY_CHARS
from lessons.services.usage import feedback_record, search_record, usage_reset

FEEDBACK_LIMIT = 10  # what the simulated agent reads


@dataclass
class ReplayReport:
    searches: int = 0
    used_reported: int = 0  # relevant documents found in a top 10 and reported used
    queries_with_use: int = 0
    replay_ndcg_at_10: float = 0.0  # nDCG@10 of the replayed (limit 10) searches themselves
    record_ms: list[float] = field(default_factory=list)
    feedback_ms: list[float] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "searches": self.searches,
            "used_reported": self.used_reported,
            "queries_with_use": self.queries_with_use,
            "record_ms_p50": round(percentile(self.record_ms, 50), 2),
            "record_ms_p95": round(percentile(self.record_ms, 95), 2),
            "feedback_ms_p50": round(percentile(self.feedback_ms, 50), 2),
            "feedback_ms_p95": round(percentile(self.feedback_ms, 95), 2),
        }


@dataclass
class UsageSimulation:
    dataset: str
    mode: str
    before: dict[str, float]  # split -> nDCG@10
    after: dict[float, dict[str, float]]  # usage weight -> split -> nDCG@10
    replay: ReplayReport
    search_ms_p50: float = 0.0

    def as_dict(self) -> dict:
        return {
            "dataset": self.dataset,
            "mode": self.mode,
            "before": {split: round(value, 4) for split, value in self.before.items()},
            "after": {
                str(weight): {split: round(value, 4) for split, value in scores.items()}
                for weight, scores in self.after.items()
            },
            "replay": {**self.replay.as_dict(), "replay_ndcg@10": round(self.replay.replay_ndcg_at_10, 4)},
            "search_ms_p50": round(self.search_ms_p50, 1),
        }


def _scores(*, dataset: Dataset, team: Team, kind: str, mode: str, max_queries: int | None, progress):
    evaluation = evaluate(dataset=dataset, teams={None: team}, kind=kind, modes=[mode], max_queries=max_queries,
                          progress=progress)
    return evaluation.results[mode]


def replay_with_feedback(
    *, dataset: Dataset, team: Team, kind: str, mode: str, max_queries: int | None = None,
    progress: ProgressFactory | None = None,
) -> ReplayReport:
    """Search each judged query as an agent would, record it, and report its relevant hits as used."""
    queries = dataset.queries[:max_queries] if max_queries else list(dataset.queries)
    report = ReplayReport()
    ndcg = []
    bar = progress_bar(progress, total=len(queries), desc=f"replaying {dataset.split} with feedback")
    try:
        for query in queries:
            response = search(request=SearchRequest(
                team=team, query=query.text[:MAX_QUERY_CHARS], kind=kind, mode=mode, limit=FEEDBACK_LIMIT
            ))
            started = time.perf_counter()
            search_id = search_record(
                team=team, kind=kind, operation="search", query=query.text, mode=response.mode,
                result_ids=response.returned_ids(), source="simulation",
            )
            report.record_ms.append((time.perf_counter() - started) * 1000)
            report.searches += 1
            judgments = dataset.qrels[query.id]
            ndcg.append(ndcg_at_k([hit.external_id for hit in response.results], judgments, 10))
            used = [hit.id for hit in response.results if judgments.get(hit.external_id, 0) > 0]
            if used and search_id is not None:
                started = time.perf_counter()
                feedback_record(team=team, search_id=search_id, used=used)
                report.feedback_ms.append((time.perf_counter() - started) * 1000)
                report.used_reported += len(used)
                report.queries_with_use += 1
            bar.update(1)
    finally:
        bar.close()
    report.replay_ndcg_at_10 = sum(ndcg) / max(len(ndcg), 1)
    return report


def simulate_usage(
    *,
    train: Dataset,
    test: Dataset,
    team: Team,
    kind: str = "lessons",
    mode: str = "hybrid",
    usage_weights: Iterable[float] = (0.5,),
    max_queries: int | None = None,
    keep: bool = False,
    progress: ProgressFactory | None = None,
) -> UsageSimulation:
    usage_reset(team=team)
    splits = {train.split: train, test.split: test}
    measure = dict(team=team, kind=kind, mode=mode, max_queries=max_queries, progress=progress)
    measured = {name: _scores(dataset=data, **measure) for name, data in splits.items()}
    before = {name: scores.ndcg_at_10 for name, scores in measured.items()}
    try:
        replay = replay_with_feedback(dataset=train, team=team, kind=kind, mode=mode, max_queries=max_queries,
                                      progress=progress)
        after = {}
        for weight in dict.fromkeys(usage_weights):
            with override_settings(SEARCH_USAGE_WEIGHT=weight):
                after[weight] = {name: _scores(dataset=data, **measure).ndcg_at_10 for name, data in splits.items()}
    finally:
        if not keep:
            usage_reset(team=team)
    return UsageSimulation(dataset=train.name, mode=mode, before=before, after=after, replay=replay,
                           search_ms_p50=measured[train.split].p50_ms)
