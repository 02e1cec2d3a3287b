"""Ranking metrics, computed the way trec_eval (and so BEIR, through pytrec_eval) computes them.

For one query, `ranking` is the list of document ids in rank order and `judgments` maps each judged
document id to its graded relevance (the qrels score). A document is relevant when its score is > 0.

- nDCG@k (trec_eval `ndcg_cut_k`), linear gain: DCG@k = sum over ranks i = 1..k of gain(d_i) / log2(i + 1),
  with gain = the qrels score (0 for unjudged documents). The ideal DCG@k takes the judged relevant
  documents of the query, sorted by score, best first. nDCG@k = DCG@k / ideal DCG@k (0 when the ideal is 0).
- recall@k: relevant documents in the top k / relevant documents judged (0 when none are judged).
- MRR@k: 1 / rank of the first relevant document within the top k (0 when there is none).

A document returned twice counts once, at its first rank (trec_eval's run format cannot hold a
duplicate; the engine should never return one anyway).
"""

import math
from collections.abc import Mapping, Sequence


def _distinct(ranking: Sequence[str], k: int) -> list[str]:
    seen: dict[str, None] = {}
    for doc_id in ranking:
        if len(seen) == k:
            break
        seen.setdefault(doc_id, None)
    return list(seen)


def _gain(judgments: Mapping[str, int], doc_id: str) -> float:
    return float(max(judgments.get(doc_id, 0), 0))


def dcg_at_k(gains: Sequence[float], k: int) -> float:
    return sum(gain / math.log2(rank + 1) for rank, gain in enumerate(gains[:k], start=1))


def ndcg_at_k(ranking: Sequence[str], judgments: Mapping[str, int], k: int = 10) -> float:
    ideal = dcg_at_k(sorted((_gain(judgments, d) for d in judgments if _gain(judgments, d) > 0), reverse=True), k)
    if ideal <= 0:
        return 0.0
    return dcg_at_k([_gain(judgments, doc_id) for doc_id in _distinct(ranking, k)], k) / ideal


def recall_at_k(ranking: Sequence[str], judgments: Mapping[str, int], k: int = 100) -> float:
    relevant = {doc_id for doc_id, score in judgments.items() if score > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(_distinct(ranking, k))) / len(relevant)


def mrr_at_k(ranking: Sequence[str], judgments: Mapping[str, int], k: int = 10) -> float:
    for rank, doc_id in enumerate(_distinct(ranking, k), start=1):
        if judgments.get(doc_id, 0) > 0:
            return 1.0 / rank
    return 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between the closest ranks (numpy's
    default), so p50 of [1, 2, 3, 4] is 2.5."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
