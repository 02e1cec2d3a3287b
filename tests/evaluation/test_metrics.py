"""The metrics against rankings computed by hand (the arithmetic is written out in each test)."""

import math

import pytest

from lessons.evaluation.metrics import mrr_at_k, ndcg_at_k, percentile, recall_at_k


def test_ndcg_binary_relevance_one_hit_at_rank_three():
    # Relevant: a, b (score 1). Ranking x, y, a, z: only a (rank 3) gains.
    # DCG  = 1 / log2(3 + 1) = 1 / 2 = 0.5
    # IDCG = 1 / log2(2) + 1 / log2(3) = 1 + 0.6309298 = 1.6309298
    # nDCG = 0.5 / 1.6309298 = 0.3065736
    assert ndcg_at_k(["x", "y", "a", "z"], {"a": 1, "b": 1}, 10) == pytest.approx(0.3065736, abs=1e-7)


def test_ndcg_graded_gains_are_linear():
    # Judgments: a=2, b=1, c=0 (judged not relevant). Ranking b, c, a.
    # DCG  = 1/log2(2) + 0/log2(3) + 2/log2(4) = 1 + 0 + 1 = 2
    # IDCG = 2/log2(2) + 1/log2(3)             = 2 + 0.6309298 = 2.6309298
    # nDCG = 2 / 2.6309298 = 0.7601875  (exponential gain 2^rel - 1 would give 3/3.6309 = 0.826)
    assert ndcg_at_k(["b", "c", "a"], {"a": 2, "b": 1, "c": 0}, 10) == pytest.approx(0.7601875, abs=1e-7)


def test_ndcg_cuts_at_k_and_ideal_is_cut_too():
    # Twelve relevant documents r0..r11; the ranking puts 9 unjudged documents first, then r0.
    # With k=10 only rank 10 counts: DCG = 1/log2(11) = 0.2890648
    # IDCG@10 = sum_{i=1..10} 1/log2(i+1) = 4.5435593 (only ten of the twelve fit)
    # nDCG = 0.2890648 / 4.5435593 = 0.0636208
    judgments = {f"r{i}": 1 for i in range(12)}
    ranking = [f"n{i}" for i in range(9)] + ["r0", "r1"]
    ideal = sum(1 / math.log2(i + 1) for i in range(1, 11))
    assert ideal == pytest.approx(4.5435593, abs=1e-7)
    assert ndcg_at_k(ranking, judgments, 10) == pytest.approx(0.0636208, abs=1e-7)


def test_ndcg_perfect_and_empty():
    assert ndcg_at_k(["a", "b"], {"a": 1, "b": 1}, 10) == pytest.approx(1.0)
    assert ndcg_at_k([], {"a": 1}, 10) == 0.0
    assert ndcg_at_k(["a"], {"a": 0}, 10) == 0.0  # nothing relevant judged: trec_eval gives 0


def test_duplicates_count_once():
    # a twice: the second a is dropped, so b is at rank 2: DCG = 1 + 1/log2(3) = IDCG -> 1.0
    assert ndcg_at_k(["a", "a", "b"], {"a": 1, "b": 1}, 10) == pytest.approx(1.0)


def test_recall_at_k():
    # Relevant a, b, c (d judged 0). Top 3 of the ranking: a, x, c -> 2 of 3 = 0.6666667
    assert recall_at_k(["a", "x", "c", "b"], {"a": 1, "b": 2, "c": 1, "d": 0}, 3) == pytest.approx(2 / 3)
    # With k=4, b comes in: 3/3
    assert recall_at_k(["a", "x", "c", "b"], {"a": 1, "b": 2, "c": 1, "d": 0}, 4) == pytest.approx(1.0)
    assert recall_at_k(["a"], {"a": 0}, 100) == 0.0


def test_mrr_at_k():
    # First relevant at rank 4: 1/4 = 0.25; d is judged 0 and does not count.
    assert mrr_at_k(["d", "x", "y", "a", "b"], {"a": 1, "b": 1, "d": 0}, 10) == pytest.approx(0.25)
    # Beyond the cut-off: 0
    assert mrr_at_k([f"n{i}" for i in range(10)] + ["a"], {"a": 1}, 10) == 0.0


def test_percentile_interpolates_linearly():
    # p50 of 1,2,3,4: position (4-1)*0.5 = 1.5 -> 2 + 0.5*(3-2) = 2.5
    assert percentile([4, 1, 3, 2], 50) == pytest.approx(2.5)
    # p95 of 1..20: position 19*0.95 = 18.05 -> 19 + 0.05*(20-19) = 19.05
    assert percentile(list(range(1, 21)), 95) == pytest.approx(19.05)
    assert percentile([], 95) == 0.0
