"""Pure arithmetic of the fusion: no database, no model."""

from datetime import timedelta

import pytest
from django.utils import timezone

from lessons.search import scoring
from lessons.search.kinds import LESSONS, MEMORIES
from lessons.search.scoring import Candidate, ScoringPlan

CALIBRATION = {"semantic_low": 0.1, "semantic_high": 0.5, "keyword_floor": 0.05, "keyword_full": 0.45}


def plan(**overrides):
    values = dict(
        kind=LESSONS,
        weights=scoring.active_weights({"semantic": 0.5, "keyword": 0.3, "quality": 0.2}, semantic=True, keyword=True),
        has_semantic=True,
        has_keyword=True,
        has_context=False,
        context_weights={"primary": 0.6, "contextual": 0.4},
        calibration=CALIBRATION,
    )
    values.update(overrides)
    return ScoringPlan(**values)


def lesson(id, *, title="T", sim=None, bm25=0.0, bm25_max=10.0, confidence=0.5, frequency=1, tech=(),
           legs=("semantic",), sim_contextual=None, **row):
    return Candidate(
        id=id,
        row={"title": title, "confidence": confidence, "frequency": frequency, "tech_stacks": list(tech), "tags": [],
             "category": "workflow", "project_types": [], **row},
        sim_primary=sim,
        sim_contextual=sim_contextual,
        bm25_primary=bm25,
        bm25_max=bm25_max,
        legs=set(legs),
        found_by={"primary"},
    )


def test_strong_searches_rank_by_their_best_and_weak_ones_stay_small():
    # Best cosine 0.7 (above semantic_high): the best scores 1, the others on the same line.
    a, b = lesson(1, sim=0.7), lesson(2, sim=0.4)
    scoring.score_parts([a, b], plan())
    assert a.parts["semantic"] == 1.0
    assert b.parts["semantic"] == pytest.approx((0.4 - 0.1) / (0.7 - 0.1))
    # Flat, low cosines (best 0.3, under semantic_high): nothing is stretched to 1.
    c, d = lesson(3, sim=0.3), lesson(4, sim=0.28)
    scoring.score_parts([c, d], plan())
    assert c.parts["semantic"] == pytest.approx(0.5) and d.parts["semantic"] == pytest.approx(0.45)
    # Under semantic_low counts as nothing, negative cosines too.
    e, f = lesson(5, sim=0.05), lesson(6, sim=-0.2)
    scoring.score_parts([e, f], plan())
    assert e.parts["semantic"] == 0.0 and f.parts["semantic"] == 0.0


def test_keyword_part_is_bounded_by_the_querys_attainable_maximum():
    # The best row reaches a good share of the maximum: it scores 1, the other relative to it.
    a, b = lesson(1, bm25=4.0, legs=("keyword",)), lesson(2, bm25=1.0, legs=("keyword",))
    scoring.score_parts([a, b], plan())
    assert a.parts["keyword"] == 1.0 and b.parts["keyword"] == pytest.approx(0.25)
    # The best row matches a sliver of a 100-point query: under keyword_floor x max, so absolute.
    c = lesson(3, bm25=2.0, bm25_max=100.0, legs=("keyword",))
    scoring.score_parts([c], plan())
    assert c.parts["keyword"] == pytest.approx(2.0 / 5.0)
    d = lesson(4, bm25=0.0)
    scoring.score_parts([d], plan())
    assert d.parts["keyword"] == 0.0


def test_weighted_score_combines_the_parts():
    a = lesson(1, sim=0.5, bm25=2.0, confidence=1.0, frequency=10)
    scoring.score_parts([a], plan())
    w = plan().weights
    assert a.parts["quality"] == pytest.approx(1.0)
    assert a.weighted == pytest.approx(w["semantic"] * 1.0 + w["keyword"] * 1.0 + w["quality"] * 1.0)
    b = lesson(2, sim=0.3, bm25=8.0, confidence=0.0, frequency=1)
    scoring.score_parts([a, b], plan())
    assert b.parts["quality"] == pytest.approx(0.3 * 0.2890648, abs=1e-4)  # ln 2 / ln 11
    assert 0.0 <= b.weighted <= 1.0


def test_the_feedback_similarity_ranks_when_present():
    a = lesson(1, sim=0.3)
    a.sim_feedback = 0.6
    b = lesson(2, sim=0.4)
    b.sim_feedback = 0.3
    scoring.score_parts([a, b], plan())
    assert a.parts["semantic"] > b.parts["semantic"]


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


def test_query_length_moves_the_weights_from_meaning_to_words():
    short, long = {"semantic": 0.6, "keyword": 0.2, "quality": 0.2}, {"semantic": 0.3, "keyword": 0.6, "quality": 0.1}
    weights = scoring.query_length_weights
    assert weights(short, long, terms=1, span=(2, 8)) == pytest.approx(short)
    assert weights(short, long, terms=9, span=(2, 8)) == pytest.approx(long)
    middle = weights(short, long, terms=5, span=(2, 8))
    assert middle == pytest.approx({"semantic": 0.45, "keyword": 0.4, "quality": 0.15})
    assert weights(short, None, terms=9, span=(2, 8)) == short


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


def test_a_rejected_lesson_does_not_fold_into_a_confirmed_one_of_its_title():
    confirmed = lesson(1, title="Use RLS", sim=0.4, frequency=2, status="confirmed")
    rejected = lesson(2, title="use rls", sim=0.7, frequency=3, status="rejected")
    collapsed, removed = scoring.collapse_same_title([confirmed, rejected])
    assert removed == 0 and [(c.id, c.row["frequency"]) for c in collapsed] == [(1, 2), (2, 3)]


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
    # the parts the explanation shows add up to the score
    assert a.parts["rrf"]["ranks"] == {"semantic": 1, "keyword": 2, "quality": 1}
    assert sum(a.parts["rrf"]["terms"].values()) / a.parts["rrf"]["max"] == pytest.approx(a.score)


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
    terms = LESSONS.exact_terms_of(row)
    assert {"nextjs", "rowlevelsecurity", "row", "level", "security", "rls", "always"} <= terms
    assert MEMORIES.exact_terms_of({"categories": ["person"], "emotions": ["joy"], "people": ["Ada Lovelace"]}) == {
        "person", "joy", "ada", "lovelace"}
    assert scoring.query_terms("Next.js and RLS", frozenset({"and"})) == ["nextjs", "rls"]


def test_memory_quality_uses_importance_and_recency():
    now = timezone.now()
    fresh = MEMORIES.quality({"importance": 8, "occurred_at": now}, now)
    old = MEMORIES.quality({"importance": 8, "occurred_at": now - timedelta(days=180)}, now)
    assert fresh == pytest.approx(0.7 * 0.8 + 0.3)
    assert old == pytest.approx(0.7 * 0.8 + 0.15)


THRESHOLDS = {"high": 0.55, "medium": 0.35}


def labelled(candidate, p=None):
    p = p or plan()
    scoring.score_parts([candidate], p)
    return scoring.relevance_label(candidate, p, THRESHOLDS)


def test_labels_come_from_the_hits_own_evidence_on_fixed_scales():
    assert labelled(lesson(1, sim=0.5, bm25=4.5, bm25_max=10.0)) == "high"  # close meaning, every term
    assert labelled(lesson(2, sim=0.3, bm25=0.0)) == "low"  # the best of weak cosines stays weak
    assert labelled(lesson(3, sim=0.3, bm25=2.0)) == "medium"
    # A hit best among unrelated ones is not "high" for being best: same row, same label, whatever
    # else the search found.
    p = plan()
    alone = lesson(4, sim=0.3, bm25=1.0)
    scoring.score_parts([alone], p)
    weak, strong = lesson(4, sim=0.3, bm25=1.0), lesson(5, sim=0.6, bm25=4.5)
    scoring.score_parts([weak, strong], p)
    assert alone.parts["semantic"] > weak.parts["semantic"]  # the rank part is relative to the best ...
    assert scoring.relevance_label(alone, p, THRESHOLDS) == scoring.relevance_label(weak, p, THRESHOLDS)  # ... the label not


def test_quality_does_not_make_a_hit_relevant():
    assert labelled(lesson(1, sim=0.15, confidence=1.0, frequency=50)) == "low"


def test_an_exact_term_hit_is_at_least_medium():
    hit = lesson(1, sim=0.05)
    hit.exact = True
    assert labelled(hit) == "medium"


def test_without_a_model_labels_read_the_keyword_evidence():
    p = plan(weights=scoring.active_weights({"semantic": 0.5, "keyword": 0.3, "quality": 0.2}, semantic=False,
                                            keyword=True), has_semantic=False)
    assert labelled(lesson(1, bm25=4.5, bm25_max=10.0, legs=("keyword",)), p) == "high"  # every term matched
    assert labelled(lesson(2, bm25=1.0, bm25_max=10.0, legs=("keyword",)), p) == "low"  # a sliver of the query


def test_query_term_forms_keep_the_stored_spellings():
    forms = scoring.query_term_forms("Next.js, supabase-auth and RLS?", frozenset({"and"}))
    assert forms == {"nextjs": ["next.js", "nextjs"], "supabaseauth": ["supabase-auth", "supabaseauth"], "rls": ["rls"]}


def _scored(*candidates):
    for c in candidates:
        c.score = c.weighted
        c.parts = {}
    return scoring.rank(list(candidates), exact_tier=False)


def test_label_feedback_lifts_rows_sharing_a_tag_with_the_best_hits():
    best = lesson(1, tags=["intermittent-failures", "ci"])
    second = lesson(2, tags=["agents"])
    sharing = lesson(3, tags=["Intermittent-Failures", "playwright"])  # canonical: case does not matter
    unrelated = lesson(4, tags=["caching"])
    untagged = lesson(5)
    for c, weighted in ((best, 0.8), (second, 0.7), (sharing, 0.5), (unrelated, 0.52), (untagged, 0.51)):
        c.weighted = weighted
    ranked = _scored(best, second, sharing, unrelated, untagged)
    scoring.label_feedback(ranked, kind=LESSONS, top=2, weight=0.15)
    assert sharing.score == pytest.approx((0.5 + 0.15) / 1.15)
    assert unrelated.score == pytest.approx(0.52 / 1.15) and untagged.score == pytest.approx(0.51 / 1.15)
    assert best.score == pytest.approx((0.8 + 0.15) / 1.15)  # the best rows share their own tags
    assert sharing.parts["labels"] == {"value": 1.0, "shared": ["Intermittent-Failures"], "weight": 0.15, "top": 2}
    assert unrelated.parts["labels"]["value"] == 0.0 and unrelated.parts["labels"]["shared"] == []
    assert [c.id for c in scoring.rank(ranked, exact_tier=False)] == [1, 2, 3, 4, 5]
    assert all(0.0 <= c.score <= 1.0 for c in ranked)
    assert sharing.weighted == 0.5  # the weighted score (and the labels' evidence) stay as they were


def test_label_feedback_reads_only_the_top_rows_and_can_be_turned_off():
    best = lesson(1, tags=["a"])
    third = lesson(2, tags=["b"])
    sharing_third = lesson(3, tags=["b"])
    for c, weighted in ((best, 0.9), (third, 0.5), (sharing_third, 0.4)):
        c.weighted = weighted
    ranked = _scored(best, third, sharing_third)
    scoring.label_feedback(ranked, kind=LESSONS, top=1, weight=0.15)
    assert sharing_third.parts["labels"]["value"] == 0.0  # "b" is not a tag of the top 1
    for weight, top in ((0.0, 3), (0.15, 0)):
        ranked = _scored(best, third, sharing_third)
        scoring.label_feedback(ranked, kind=LESSONS, top=top, weight=weight)
        assert [c.score for c in ranked] == [0.9, 0.5, 0.4] and "labels" not in sharing_third.parts


def test_label_feedback_leaves_kinds_without_feedback_labels_alone():
    memories = [Candidate(id=i, row={"categories": ["person"]}) for i in (1, 2)]
    for c, weighted in zip(memories, (0.6, 0.3)):
        c.weighted = weighted
    ranked = _scored(*memories)
    scoring.label_feedback(ranked, kind=MEMORIES, top=3, weight=0.15)
    assert [c.score for c in ranked] == [0.6, 0.3]


def test_the_labels_words_count_at_most_the_share_of_the_query_they_match():
    text_mode = plan(has_semantic=False, weights=scoring.active_weights(plan().weights, semantic=False, keyword=True))
    # One rare word of two: 0.63 of BM25's scale alone read "high"; half the words read at most 0.5.
    one_of_two = lesson(1, bm25=2.85, bm25_max=10.0, legs=("keyword",))
    assert labelled(one_of_two, text_mode) == "high"  # coverage unknown: BM25's scale alone
    one_of_two.keyword_coverage = 0.5
    assert labelled(one_of_two, text_mode) == "medium"
    every_word = lesson(2, bm25=4.5, bm25_max=10.0, legs=("keyword",))
    every_word.keyword_coverage = 1.0
    assert labelled(every_word, text_mode) == "high"
    # A word matched as a tag (unstemmed) is no English match: the share of the words counts it.
    tag_only = lesson(5, bm25=4.5, bm25_max=10.0, legs=("keyword",))
    tag_only.keyword_coverage, tag_only.keyword_word_share = 0.0, 1.0
    assert labelled(tag_only, text_mode) == "high"
    tag_only.keyword_word_share = 0.5  # one word of two, in either form or in both
    assert labelled(tag_only, text_mode) == "medium"
    # The cap is on the label only: the score's K is unchanged.
    capped, uncapped = lesson(3, bm25=2.85, legs=("keyword",)), lesson(4, bm25=2.85, legs=("keyword",))
    capped.keyword_coverage = 0.5
    scoring.score_parts([capped, uncapped], text_mode)
    assert capped.weighted == uncapped.weighted


def test_with_a_context_the_label_mixes_both_cosines_as_the_score_does():
    with_context = plan(has_context=True)
    # The caller's code is about this row (contextual cosine 0.6), the query is not (-0.1): the
    # better of the two at full weight made it "high"; 0.6 x 0 + 0.4 x 1 of meaning is "medium" at most.
    about_the_code = lesson(1, sim=-0.1, sim_contextual=0.6)
    assert labelled(about_the_code, with_context) != "high"
    semantic_weight = with_context.weights["semantic"] / (with_context.weights["semantic"] +
                                                           with_context.weights["keyword"])
    assert scoring.relevance_label(about_the_code, with_context, {"high": 0.4 * semantic_weight - 1e-9,
                                                                  "medium": 0.1}) == "high"
    # Both agree: high, as without a context.
    assert labelled(lesson(2, sim=0.6, sim_contextual=0.6), with_context) == "high"


def test_weights_all_on_quality_label_by_the_default_weights_not_by_quality():
    all_quality = plan(weights={"semantic": 0.0, "keyword": 0.0, "quality": 1.0},
                       default_weights={"semantic": 0.6, "keyword": 0.2, "quality": 0.2})
    # An excellent lesson nothing in the query is about: quality 0.98 made every such hit "high".
    off_topic = lesson(1, sim=0.05, confidence=1.0, frequency=10)
    assert labelled(off_topic, all_quality) == "low"
    assert labelled(lesson(2, sim=0.6, bm25=4.5), all_quality) == "high"


def test_a_row_without_a_vector_is_scored_on_the_parts_it_has():
    p = plan()  # semantic 0.5, keyword 0.3, quality 0.2
    embedded, pending = lesson(1, sim=0.3, bm25=4.0), lesson(2, sim=None, bm25=4.0, legs=("keyword",))
    scoring.score_parts([embedded, pending], p)
    assert pending.parts["weights"] == pytest.approx({"semantic": 0.0, "keyword": 0.6, "quality": 0.4})
    assert pending.weighted == pytest.approx(0.6 * pending.parts["_keyword_part"] + 0.4 * pending.parts["quality"])
    assert "weights" not in embedded.parts
    # text mode measures no meaning: nothing is pending there
    text = plan(has_semantic=False, weights=scoring.active_weights(p.weights, semantic=False, keyword=True))
    scoring.score_parts([pending], text)
    assert "weights" not in pending.parts
    # weights that give words nothing: none of the evidence asked for, score 0 (quality alone tied it first)
    assert scoring.without_semantic({"semantic": 1.0, "keyword": 0.0, "quality": 0.0}) == {
        "semantic": 0.0, "keyword": 0.0, "quality": 0.0}
    assert scoring.without_semantic({"semantic": 0.5, "quality": 0.5}) == {"semantic": 0.0, "quality": 0.0}
    lone = lesson(3, sim=None, bm25=4.0, legs=("keyword",), confidence=1.0, frequency=80)
    scoring.score_parts([lone], plan(weights={"semantic": 1.0, "keyword": 0.0, "quality": 0.0}))
    assert lone.weighted == 0.0
