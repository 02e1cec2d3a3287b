"""Pure arithmetic of the fusion: no database, no model."""

from datetime import timedelta

import pytest
from django.utils import timezone

from lessons.search import scoring
from lessons.search.scoring import Candidate, ScoringPlan


def plan(**overrides):
    values = dict(
        kind="lessons",
        weights=scoring.active_weights({"semantic": 0.5, "keyword": 0.3, "quality": 0.2}, semantic=True, keyword=True),
        has_semantic=True,
        has_keyword=True,
        has_context=False,
        context_weights={"primary": 0.6, "contextual": 0.4},
    )
    values.update(overrides)
    return ScoringPlan(**values)


def lesson(id, *, title="T", sim=None, bm25=0.0, confidence=0.5, frequency=1, tech=(), legs=("semantic",), **row):
    return Candidate(
        id=id,
        row={"title": title, "confidence": confidence, "frequency": frequency, "tech_stacks": list(tech), "tags": [],
             "category": "workflow", "project_types": [], **row},
        sim_primary=sim,
        bm25_primary=bm25,
        legs=set(legs),
        found_by={"primary"},
    )


def test_parts_are_normalised_and_weighted():
    a = lesson(1, sim=0.6, bm25=2.0, confidence=1.0, frequency=10)
    b = lesson(2, sim=0.3, bm25=8.0, confidence=0.0, frequency=1)
    c = lesson(3, sim=0.5, bm25=0.0, confidence=0.5, frequency=1)
    scoring.score_parts([a, b, c], plan())
    # Semantic: cosine over the best cosine; keyword: BM25 over the best BM25 (among the candidates).
    assert (a.parts["semantic"], b.parts["semantic"]) == (1.0, 0.5)
    assert c.parts["semantic"] == pytest.approx(0.5 / 0.6, abs=1e-4)
    assert c.parts["keyword"] == 0.0
    assert a.parts["keyword"] == 0.25 and b.parts["keyword"] == 1.0
    assert a.parts["quality"] == pytest.approx(1.0)
    assert b.parts["quality"] == pytest.approx(0.3 * 0.2890648, abs=1e-4)  # ln 2 / ln 11
    assert a.weighted == pytest.approx(0.5 * 1.0 + 0.3 * 0.25 + 0.2 * 1.0)
    assert 0.0 <= b.weighted <= 1.0


def test_negative_similarity_counts_as_zero():
    a, b = lesson(1, sim=-0.2), lesson(2, sim=0.4)
    scoring.score_parts([a, b], plan())
    assert a.parts["semantic"] == 0.0


def test_tech_stack_mismatch_halves_the_semantic_part_and_is_recorded():
    matching = lesson(1, sim=0.5, tech=["nextjs"])
    other = lesson(2, sim=0.5, tech=["django"])
    untagged = lesson(3, sim=0.5)
    scoring.score_parts([matching, other, untagged], plan(tech_stack=("nextjs",)))
    assert matching.parts["penalty"] == 0.0 and untagged.parts["penalty"] == 0.0
    assert other.parts["penalty"] == pytest.approx(plan().weights["semantic"] * 0.5)
    assert other.weighted < matching.weighted


def test_metadata_blends_into_the_keyword_slot():
    a = lesson(1, sim=0.5, bm25=1.0, tech=["nextjs", "supabase"], project_types=["saas"])
    b = lesson(2, sim=0.5, bm25=1.0, tech=["nextjs"], project_types=[])
    scoring.score_parts([a, b], plan(tech_stack=("nextjs", "supabase"), project_type="saas"))
    assert a.parts["metadata"] == 1.0
    assert b.parts["metadata"] == pytest.approx((0.5 + 0.0) / 2)
    assert a.weighted > b.weighted


def test_active_weights_renormalise_and_share_when_all_zero():
    assert scoring.active_weights({"semantic": 0.5, "keyword": 0.3, "quality": 0.2}, semantic=False, keyword=True) == {
        "keyword": pytest.approx(0.6),
        "quality": pytest.approx(0.4),
    }
    assert scoring.active_weights({"semantic": 1.0, "keyword": 0.0, "quality": 0.0}, semantic=False, keyword=True) == {
        "keyword": 0.5,
        "quality": 0.5,
    }


def test_floor_drops_only_weak_semantic_only_candidates():
    weak = lesson(1, sim=0.1)
    strong = lesson(2, sim=0.5)
    weak_but_keyword = lesson(3, sim=0.1, legs=("semantic", "keyword"))
    weak_but_exact = lesson(4, sim=0.1, legs=("semantic", "exact"))
    kept = scoring.drop_below_floor([weak, strong, weak_but_keyword, weak_but_exact], floor=0.3)
    assert [c.id for c in kept] == [2, 3, 4]


def test_same_title_lessons_collapse_with_max_confidence_and_summed_frequency():
    a = lesson(1, title="Use RLS", sim=0.4, confidence=0.6, frequency=2)
    b = lesson(2, title="  use   rls ", sim=0.7, confidence=0.9, frequency=3, legs=("keyword",))
    c = lesson(3, title="Something else", sim=0.5)
    collapsed, removed = scoring.collapse_same_title([a, b, c])
    assert removed == 1
    merged = next(x for x in collapsed if x.id == 2)  # the stronger member leads
    assert merged.row["confidence"] == 0.9 and merged.row["frequency"] == 5
    assert merged.member_ids == [1, 2]
    assert merged.legs == {"semantic", "keyword"}


def test_rrf_sums_weight_over_k_plus_rank_and_stays_within_0_1():
    a = lesson(1, sim=0.9, bm25=1.0, confidence=0.5)
    b = lesson(2, sim=0.5, bm25=5.0, confidence=0.5)
    p = plan()
    scoring.score_parts([a, b], p)
    scoring.rrf_scores([a, b], p, k=60)
    w = p.weights
    best = sum(v / 61 for v in w.values())
    # a: semantic rank 1, keyword rank 2, quality tied rank 1
    assert a.score == pytest.approx((w["semantic"] / 61 + w["keyword"] / 62 + w["quality"] / 61) / best)
    assert b.score == pytest.approx((w["semantic"] / 62 + w["keyword"] / 61 + w["quality"] / 61) / best)
    assert a.score > b.score  # semantic weighs more
    assert all(0 <= c.score <= 1 for c in (a, b))


def test_exact_terms_tier_first():
    exact = lesson(1, sim=0.1)
    exact.exact = True
    better = lesson(2, sim=0.9)
    for c, score in ((exact, 0.2), (better, 0.9)):
        c.score = c.weighted = score
    assert [c.id for c in scoring.rank([better, exact], exact_tier=True)] == [1, 2]
    assert [c.id for c in scoring.rank([better, exact], exact_tier=False)] == [2, 1]


def test_exact_terms_and_query_terms_are_canonical():
    row = {"tags": ["row-level-security"], "tech_stacks": ["Next.js"], "category": "security", "title": "Use RLS, always"}
    terms = scoring.exact_terms_of(kind="lessons", row=row)
    assert {"nextjs", "rowlevelsecurity", "row", "level", "security", "rls", "always"} <= terms
    assert scoring.query_terms("Next.js and RLS", frozenset({"and"})) == ["nextjs", "rls"]


def test_memory_quality_uses_importance_and_recency():
    now = timezone.now()
    fresh = scoring.quality_of(kind="memories", row={"importance": 8, "occurred_at": now}, now=now)
    old = scoring.quality_of(kind="memories", row={"importance": 8, "occurred_at": now - timedelta(days=180)}, now=now)
    assert fresh == pytest.approx(0.7 * 0.8 + 0.3)
    assert old == pytest.approx(0.7 * 0.8 + 0.15)


def test_relevance_labels():
    thresholds = {"high": 0.6, "medium": 0.4}
    assert [scoring.relevance_label(s, thresholds) for s in (0.61, 0.6, 0.45, 0.39)] == ["high", "high", "medium", "low"]


def test_relevance_labels_are_capped_by_the_hits_own_similarity():
    thresholds = {"high": 0.6, "medium": 0.4, "high_similarity": 0.3, "medium_similarity": 0.15}
    label = scoring.relevance_label
    assert label(0.9, thresholds, similarity=0.45) == "high"
    assert label(0.9, thresholds, similarity=0.2) == "medium"  # the best of weak candidates
    assert label(0.9, thresholds, similarity=0.05) == "low"
    assert label(0.45, thresholds, similarity=0.9) == "medium"  # the cap never raises a label
    assert label(0.9, thresholds, similarity=0.05, exact=True) == "high"  # an exact tag match stands
    assert label(0.9, thresholds, similarity=None) == "high"  # nothing to cap with


def test_without_a_model_labels_are_capped_by_keyword_coverage():
    thresholds = {"high": 0.6, "medium": 0.4, "high_coverage": 1.0, "medium_coverage": 0.5}
    label = scoring.relevance_label
    assert label(0.9, thresholds, coverage=1.0) == "high"  # every query term
    assert label(0.9, thresholds, coverage=0.5) == "medium"
    assert label(0.9, thresholds, coverage=0.25) == "low"
    assert label(0.9, {**thresholds, "high_similarity": 0.25}, similarity=0.5, coverage=0.25) == "high"  # the model's word first


def test_query_term_forms_keep_the_stored_spellings():
    forms = scoring.query_term_forms("Next.js, supabase-auth and RLS?", frozenset({"and"}))
    assert forms == {"nextjs": ["next.js", "nextjs"], "supabaseauth": ["supabase-auth", "supabaseauth"], "rls": ["rls"]}
