"""From fused candidates to what callers get: hits with their labels and explanations, and the
response around them (timings, candidate counts, fallbacks). One shape out: `SearchHit`."""

import logging
import re
from time import perf_counter

from django.conf import settings
from django.utils import timezone

from lessons.search import scoring
from lessons.search.exact import TEXT_TIER_MAX_TERMS
from lessons.search.kinds import SearchKind
from lessons.search.types import SearchHit, SearchRequest, SearchResponse

logger = logging.getLogger("lessons.search")

# The text parser reads "C#" and "C++" as the letter `c`, so a row whose text matched them may only
# say `c` ("Cancel stale fetches", quoting 'c', was the C++ lookup, and a C++ lesson read `high`
# for "c#"): such a word is said, and matched for the label, by a row that carries it exactly (a
# tech stack, a tag, a title word).
_PARSER_DROPS = re.compile(r"[+#]")

_LEG_OF_FLAG = {"in_sem_p": ("semantic", "primary"), "in_sem_c": ("semantic", "contextual"),
                "in_kw_p": ("keyword", "primary"), "in_ex": ("exact", "primary")}


def candidate_from_row(*, kind: SearchKind, row: dict, exact_terms: list[str], query_terms: list[str],
                       lookup_lexemes: frozenset[str] = frozenset()) -> scoring.Candidate:
    """`lookup_lexemes`: a one-word lookup's English terms when its query has other words too (see
    says_the_word)."""
    fields = {name: row[name] for name in kind.fields if name in row}  # the long texts come later
    found = [leg for flag, leg in _LEG_OF_FLAG.items() if row.get(flag)]
    cut_terms = {term for term in query_terms if _PARSER_DROPS.search(term)}
    carried = kind.exact_terms_of(fields) if exact_terms or cut_terms else set()
    exact = bool(exact_terms) and set(exact_terms) <= carried
    coverage, word_share = _float_or_none(row.get("coverage_p")), _float_or_none(row.get("word_share_p"))
    # what a row's text matched of a word the parser cuts ("c#", "c++") and the row does not carry
    # exactly was the letter alone
    if cut := len(cut_terms - carried):  # the label reads those words as not matched
        kept = 1.0 - cut / len(query_terms)
        coverage, word_share = (None if share is None else share * kept for share in (coverage, word_share))
    return scoring.Candidate(
        id=row["id"],
        row=fields,
        sim_primary=_float_or_none(row.get("sim_p")),
        sim_contextual=_float_or_none(row.get("sim_c")),
        sim_feedback=_float_or_none(row.get("sim_f")),
        bm25_primary=float(row.get("bm25_p") or 0.0),
        bm25_max=float(row.get("bm25_max") or 0.0),
        matched_terms=row.get("terms_p") or [],
        keyword_coverage=coverage,
        keyword_word_share=word_share,
        legs={leg for leg, _ in found},
        found_by={query for _, query in found},
        exact=exact,
        says_query=0 < len(exact_terms) <= TEXT_TIER_MAX_TERMS and says_the_word(row, lookup_lexemes)
        and (exact or not _PARSER_DROPS.search(exact_terms[0])),
        names_subject=kind.names_subject(fields, query_terms),
    )


def says_the_word(row: dict, lookup_lexemes: frozenset[str]) -> bool:
    """A one-word lookup's word is in the row's text: its BM25 matched every English term of the
    query, or, when the query has filler words besides the word ("using retries", "retries
    please": one content word, but BM25 keeps `use` and `pleas`), the word's own terms. Only every
    term counted, so rows saying "use" came before those saying "retries", and "retries please"
    had no lookup at all."""
    if float(row.get("coverage_p") or 0.0) >= 1.0:
        return True
    return bool(lookup_lexemes) and lookup_lexemes <= set(row.get("terms_p") or [])


def _float_or_none(value) -> float | None:
    return None if value is None else float(value)


def hit_from_candidate(*, request: SearchRequest, kind: SearchKind, candidate: scoring.Candidate,
                       plan: scoring.ScoringPlan) -> SearchHit:
    explanation = None
    if request.explain:
        parts = candidate.parts
        explanation = {
            "semantic": round(parts["semantic"], 4),
            "keyword": round(parts["keyword"], 4),
            "matched_terms": sorted(parts["matched_terms"]),
            "metadata": None if parts["metadata"] is None else round(parts["metadata"], 4),
            "quality": round(parts["quality"], 4),
            "usage": round(parts["usage"], 4),  # the part of quality that agents' reported use added
            "penalty": round(parts["penalty"], 4),
            "exact_term": candidate.exact,
            "says_query": candidate.says_query,
            "names_subject": candidate.names_subject,
            "legs": sorted(candidate.legs),
            "found_by": sorted(candidate.found_by),
            "weights": {name: round(value, 4) for name, value in parts.get("weights", plan.weights).items()},
            "weighted_score": round(candidate.weighted, 4),
            "fusion": request.fusion,
        }
        if candidate.sim_primary is not None:
            explanation["similarity"] = round(candidate.sim_primary, 4)
        if scoring.vector_pending(candidate, measured_meaning=plan.has_semantic):
            explanation["embedding"] = "pending"  # no vector yet: scored on words and quality
        if candidate.sim_contextual is not None:
            explanation["contextual_similarity"] = round(candidate.sim_contextual, 4)
        if candidate.sim_feedback is not None:
            explanation["feedback_similarity"] = round(candidate.sim_feedback, 4)
        if candidate.bm25_max > 0:
            explanation["bm25"] = round(candidate.bm25_primary, 4)
            explanation["bm25_max"] = round(candidate.bm25_max, 4)
        if "rrf" in parts:  # fusion="rrf": score = sum(terms) / max, each term weight / (k + rank)
            rrf = parts["rrf"]
            explanation["rrf"] = {"k": rrf["k"], "ranks": rrf["ranks"], "max": round(rrf["max"], 6),
                                  "terms": {name: round(value, 6) for name, value in rrf["terms"].items()}}
        if "labels" in parts:  # label feedback: score = (weighted_score + weight x value) / (1 + weight)
            explanation["labels"] = parts["labels"]
    return SearchHit(
        id=candidate.id,
        external_id=candidate.row.get("external_id"),
        kind=kind.hit_kind,
        fields=candidate.row,
        score=round(candidate.score, 4),
        relevance=scoring.relevance_label(candidate, plan, settings.SEARCH_RELEVANCE_THRESHOLDS),
        found_by=sorted(candidate.found_by, key=("primary", "contextual").index),
        explanation=explanation,
        collapsed_ids=candidate.member_ids if len(candidate.member_ids) > 1 else [],
    )


def recency_hits(*, request: SearchRequest, kind: SearchKind,
                 rows: list[tuple[dict, list[int]]]) -> list[SearchHit]:
    """Rows that matched nothing (the recency fallback), newest first, each with the ids of the
    same-title rows folded into it: score 0 and labelled low, since
    they answer nothing; their quality stays in the explanation. Scored by quality, the scores
    stood out of their order (0.84, 0.81, 0.75, 0.74, 0.82), as if the order were wrong."""
    now = timezone.now()
    hits = []
    for row, member_ids in rows:
        quality, usage = kind.quality_and_usage(row, now)
        hits.append(
            SearchHit(
                id=row["id"],
                external_id=row.get("external_id"),
                kind=kind.hit_kind,
                fields=row,
                score=0.0,
                relevance="low",
                found_by=[],
                explanation=(
                    {"quality": round(quality, 4), "usage": round(usage, 4), "fallback": "recency"}
                    if request.explain else None
                ),
                collapsed_ids=member_ids if len(member_ids) > 1 else [],
            )
        )
    return hits


def respond(*, request, hits, timings, started, degraded_reason, fallback, candidates, keywords,
            mode=None) -> SearchResponse:
    timings = {name: round(value, 2) for name, value in timings.items()}
    timings["total"] = round((perf_counter() - started) * 1000.0, 2)
    response = SearchResponse(
        mode=mode or request.mode,
        degraded=degraded_reason is not None,
        degraded_reason=degraded_reason,
        fallback=fallback,
        timings_ms=timings,
        results=hits,
        candidates=candidates,
        context_keywords=keywords,
    )
    logger.info(
        "search kind=%s mode=%s fusion=%s degraded=%s fallback=%s results=%d candidates=%s timings_ms=%s",
        request.kind, response.mode, request.fusion, response.degraded, fallback, len(hits), candidates, timings,
    )
    if degraded_reason:
        logger.warning("search degraded: %s", degraded_reason)
    return response
