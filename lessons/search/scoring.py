"""Scoring: each candidate's parts normalised to 0..1, fused into one score, labelled for people.

Pure functions over the candidates the SQL returned: no database, no model. The formula is
written out at the top of `lessons/search/engine.py`.
"""

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache

from lessons.search.usage import DEFAULT_HALF_LIFE_DAYS, DEFAULT_PRIOR, usage_signal  # issue 14

# Frequency reaches full marks in the quality part at this many sightings (log-scaled).
FREQUENCY_SATURATION = 10
# Memories: recency halves every this many days.
RECENCY_HALF_LIFE_DAYS = 180
# Exact-term tier only for short queries: a tag, a tech stack, a title word or two.
EXACT_TIER_MAX_TERMS = 3
TECH_MISMATCH_FACTOR = 0.5  # seed 000: the semantic part is halved

PART_NAMES = ("semantic", "keyword", "quality")

_SPLIT = re.compile(r"[\s,;/|]+")
_PARTS = re.compile(r"[-_\s/]+")


_NOT_TERM = re.compile(r"[^a-z0-9+#]")


@lru_cache(maxsize=65_536)  # the same tags and title words come back in every search
def canonical(term: str) -> str:
    """'Next.js' -> 'nextjs', 'RLS' -> 'rls', 'C++' -> 'c++': how exact terms are compared."""
    return _NOT_TERM.sub("", term.lower())


def query_term_forms(query: str, stop_words: frozenset[str]) -> dict[str, list[str]]:
    """The query's content terms, canonical, in order, without stop words or duplicates, each with
    the spellings to look for in stored arrays ('next.js' -> 'nextjs': ['next.js', 'nextjs'])."""
    forms: dict[str, set[str]] = {}
    for raw in _SPLIT.split(query.lower()):
        raw = raw.strip(".,;:!?'\"()[]{}")
        term = canonical(raw)
        if term and raw not in stop_words:
            forms.setdefault(term, {term}).add(raw)
    return {term: sorted(spellings) for term, spellings in forms.items()}


def query_terms(query: str, stop_words: frozenset[str]) -> list[str]:
    return list(query_term_forms(query, stop_words))


def exact_terms_of(*, kind: str, row: dict) -> set[str]:
    """The terms a row carries exactly: tags, tech stacks, category and title words (lessons);
    categories, emotions and people's names (memories). Hyphenated terms count whole and in parts."""
    if kind == "lessons":
        values = [*row.get("tags", []), *row.get("tech_stacks", []), row.get("category", "")]
        words = row.get("title", "").split()
    else:
        values = [*row.get("categories", []), *row.get("emotions", [])]
        words = [word for name in row.get("people", []) for word in name.split()]
    terms = {canonical(value) for value in values}
    terms |= {canonical(part) for value in values for part in _PARTS.split(value)}
    terms |= {canonical(word) for word in words}
    terms.discard("")
    return terms


@dataclass
class Candidate:
    """One row (or, after collapse, one group of same-title lessons) with what the legs found."""

    id: int
    row: dict
    sim_primary: float | None = None
    sim_contextual: float | None = None
    bm25_primary: float = 0.0
    matched_terms: list[str] = field(default_factory=list)
    keyword_coverage: float | None = None  # share of the query's English terms the row carries
    legs: set[str] = field(default_factory=set)  # "semantic", "keyword", "exact"
    found_by: set[str] = field(default_factory=set)  # "primary", "contextual"
    exact: bool = False
    member_ids: list[int] = field(default_factory=list)
    parts: dict = field(default_factory=dict)
    weighted: float = 0.0  # the weighted score (also labels relevance under RRF)
    score: float = 0.0  # the ranking score returned

    @property
    def best_similarity(self) -> float:
        return max((s for s in (self.sim_primary, self.sim_contextual) if s is not None), default=0.0)


@dataclass(frozen=True)
class ScoringPlan:
    """What a search scores with: active parts and their (renormalised) weights, and the caller."""

    kind: str
    weights: dict[str, float]  # over active parts, summing to 1
    has_semantic: bool
    has_keyword: bool
    has_context: bool
    context_weights: dict[str, float]
    tech_stack: tuple[str, ...] = ()
    project_type: str | None = None
    now: datetime | None = None

    @property
    def has_metadata(self) -> bool:
        return self.kind == "lessons" and bool(self.tech_stack or self.project_type)


def active_weights(weights: dict[str, float], *, semantic: bool, keyword: bool) -> dict[str, float]:
    """Weights of the parts a search can use, renormalised to sum to 1 so scores stay 0..1 in every
    mode. When all active weights are zero, the active parts share equally."""
    active = {"semantic": semantic, "keyword": keyword, "quality": True}
    chosen = {name: float(weights.get(name, 0.0)) for name in PART_NAMES if active[name]}
    total = sum(chosen.values())
    if total <= 0:
        return {name: 1.0 / len(chosen) for name in chosen}
    return {name: value / total for name, value in chosen.items()}


def drop_below_floor(candidates: list[Candidate], *, floor: float) -> list[Candidate]:
    """Drop semantic-only candidates weaker than the floor; keyword and exact-term hits stay."""
    if floor <= 0:  # a floor of 0 keeps everything, even rows pointing away from the query
        return list(candidates)
    return [c for c in candidates if c.legs - {"semantic"} or c.best_similarity >= floor]


def title_key(title: str) -> str:
    return " ".join(title.lower().split())


def collapse_same_title(candidates: list[Candidate]) -> tuple[list[Candidate], int]:
    """Lessons with the same title become one candidate: the strongest member's row, with
    confidence = max and frequency = sum over the members; legs, terms and signals united."""
    groups: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        groups.setdefault(title_key(candidate.row.get("title", "")), []).append(candidate)
    collapsed: list[Candidate] = []
    for members in groups.values():
        if len(members) == 1:
            members[0].member_ids = [members[0].id]
            collapsed.append(members[0])
            continue
        lead = max(members, key=lambda c: (c.best_similarity, c.bm25_primary, c.row.get("confidence", 0), -c.id))
        row = dict(lead.row)
        row["confidence"] = max(m.row.get("confidence", 0.0) for m in members)
        row["frequency"] = sum(m.row.get("frequency", 1) for m in members)
        merged = Candidate(
            id=lead.id,
            row=row,
            sim_primary=_max_or_none(m.sim_primary for m in members),
            sim_contextual=_max_or_none(m.sim_contextual for m in members),
            bm25_primary=max(m.bm25_primary for m in members),
            matched_terms=sorted({t for m in members for t in m.matched_terms}),
            keyword_coverage=_max_or_none(m.keyword_coverage for m in members),
            legs=set().union(*(m.legs for m in members)),
            found_by=set().union(*(m.found_by for m in members)),
            exact=any(m.exact for m in members),
            member_ids=sorted(m.id for m in members),
        )
        collapsed.append(merged)
    return collapsed, len(candidates) - len(collapsed)


def _max_or_none(values) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _clip(value: float) -> float:
    return 0.0 if value < 0 else 1.0 if value > 1 else float(value)


def _ratio(value: float, best: float) -> float:
    return value / best if best > 0 else 0.0


def quality_of(*, kind: str, row: dict, now: datetime | None) -> float:
    """Lessons: 0.7 x confidence + 0.3 x log-scaled frequency. Memories: 0.7 x importance / 10 +
    0.3 x recency (halving every RECENCY_HALF_LIFE_DAYS from occurred_at, else updated_at)."""
    if kind == "lessons":
        frequency = max(1, int(row.get("frequency", 1)))
        frequency_part = min(1.0, math.log1p(frequency) / math.log1p(FREQUENCY_SATURATION))
        return _with_usage(_clip(0.7 * float(row.get("confidence", 0.5)) + 0.3 * frequency_part), row=row, now=now)
    importance = float(row.get("importance", 5)) / 10.0
    moment = row.get("occurred_at") or row.get("updated_at")
    recency = 0.0
    if moment is not None and now is not None:
        age_days = max(0.0, (now - moment).total_seconds() / 86400.0)
        recency = 0.5 ** (age_days / RECENCY_HALF_LIFE_DAYS)
    return _with_usage(_clip(0.7 * importance + 0.3 * recency), row=row, now=now)


# --- usage hook (issue 14) ---------------------------------------------------------------------
def _with_usage(quality: float, *, row: dict, now: datetime | None) -> float:
    """The quality part plus SEARCH_USAGE_WEIGHT x the usage signal (`lessons.search.usage`),
    capped at 1. Exactly `quality` for a row never reported used (or with the weight at 0), so
    without feedback rankings are those of before. The most a use can add to a score is
    w_quality x SEARCH_USAGE_WEIGHT (0.2 x 0.5 = 0.1 at the defaults): a hit ahead by more than
    that cannot be passed by usage alone."""
    if not row.get("used_count"):
        return quality
    from django.conf import settings

    weight = float(getattr(settings, "SEARCH_USAGE_WEIGHT", 0.0))
    if weight <= 0:
        return quality
    signal = usage_signal(
        returned=row.get("returned_count") or 0,
        used=row["used_count"],
        not_helpful=row.get("not_helpful_count") or 0,
        last_used_at=row.get("last_used_at"),
        now=now,
        prior=float(getattr(settings, "SEARCH_USAGE_PRIOR", DEFAULT_PRIOR)),
        half_life_days=float(getattr(settings, "SEARCH_USAGE_HALF_LIFE_DAYS", DEFAULT_HALF_LIFE_DAYS)),
    )
    return _clip(quality + weight * signal)
# --- end of usage hook -------------------------------------------------------------------------


def metadata_of(*, row: dict, tech_stack: tuple[str, ...], project_type: str | None) -> float | None:
    """Overlap with the caller: share of the caller's tech stack the lesson names, and whether it
    names the caller's project type; their mean. None when the caller gave neither."""
    parts = []
    if tech_stack:
        caller = {canonical(t) for t in tech_stack}
        lesson = {canonical(t) for t in row.get("tech_stacks", [])}
        parts.append(len(caller & lesson) / len(caller))
    if project_type:
        parts.append(1.0 if canonical(project_type) in {canonical(p) for p in row.get("project_types", [])} else 0.0)
    return sum(parts) / len(parts) if parts else None


def tech_mismatch(*, row: dict, tech_stack: tuple[str, ...]) -> bool:
    """Seed 000: a lesson naming tech stacks, none of them the caller's."""
    if not tech_stack or not row.get("tech_stacks"):
        return False
    lesson = {canonical(t) for t in row["tech_stacks"]}
    return not (lesson & {canonical(t) for t in tech_stack})


def score_parts(candidates: list[Candidate], plan: ScoringPlan) -> None:
    """Fill each candidate's parts (0..1) and its weighted score."""
    max_primary = max((c.bm25_primary for c in candidates), default=0.0)
    best_primary = max((_clip(c.sim_primary or 0.0) for c in candidates), default=0.0)
    best_contextual = max((_clip(c.sim_contextual or 0.0) for c in candidates), default=0.0)
    cw = plan.context_weights
    for c in candidates:
        semantic = 0.0
        if plan.has_semantic:
            # Cosine over the best cosine among the candidates, like the keyword part. Measured
            # at the default weights (nDCG@10, SciFact train / demo judged set): this 0.730 / 0.739,
            # raw cosine 0.734 / 0.681, min-max 0.717 / 0.737.
            primary = _ratio(_clip(c.sim_primary or 0.0), best_primary)
            semantic = (
                cw["primary"] * primary + cw["contextual"] * _ratio(_clip(c.sim_contextual), best_contextual)
                if plan.has_context and c.sim_contextual is not None
                else primary
            )
        keyword = 0.0
        if plan.has_keyword:
            keyword = _ratio(c.bm25_primary, max_primary)
        metadata = metadata_of(row=c.row, tech_stack=plan.tech_stack, project_type=plan.project_type) if plan.kind == "lessons" else None
        if metadata is None:
            keyword_part = keyword
        elif plan.has_keyword:
            keyword_part = 0.5 * keyword + 0.5 * metadata
        else:
            keyword_part = metadata
        quality = quality_of(kind=plan.kind, row=c.row, now=plan.now)

        w = plan.weights
        penalty = 0.0
        factor = 1.0
        if plan.kind == "lessons" and tech_mismatch(row=c.row, tech_stack=plan.tech_stack):
            factor = TECH_MISMATCH_FACTOR
        semantic_used = semantic * factor
        if factor != 1.0:
            penalty = w.get("semantic", 0.0) * (semantic - semantic_used)
        # Unrounded: the explanation rounds the parts of the hits it shows.
        c.parts = {
            "semantic": semantic,
            "keyword": keyword,
            "matched_terms": c.matched_terms,
            "metadata": metadata,
            "quality": quality,
            "penalty": penalty,
        }
        c.weighted = _clip(
            w.get("semantic", 0.0) * semantic_used + w.get("keyword", 0.0) * keyword_part + w.get("quality", 0.0) * quality
        )
        c.score = c.weighted
        c.parts["_keyword_part"] = keyword_part
        c.parts["_semantic_used"] = semantic_used
        # RRF ranks by the raw similarity (min-max would tie the weakest candidate with "none").
        if plan.has_semantic and c.sim_primary is not None:
            raw = _clip(c.sim_primary)
            if plan.has_context and c.sim_contextual is not None:
                raw = cw["primary"] * raw + cw["contextual"] * _clip(c.sim_contextual)
            c.parts["_semantic_raw"] = raw * factor


def rrf_scores(candidates: list[Candidate], plan: ScoringPlan, *, k: int) -> None:
    """Reciprocal rank fusion over the active parts' rankings: sum of weight / (k + rank), ties
    sharing a rank, divided by its largest possible value so the score stays 0..1."""
    lists = {
        "semantic": lambda c: c.parts.get("_semantic_raw", -1.0),
        "keyword": lambda c: c.parts["_keyword_part"],
        "quality": lambda c: c.parts["quality"],
    }
    present = {
        "semantic": lambda c: "_semantic_raw" in c.parts,
        "keyword": lambda c: c.parts["_keyword_part"] > 0,
        "quality": lambda c: True,
    }
    totals = {c.id: 0.0 for c in candidates}
    best = 0.0
    for name, weight in plan.weights.items():
        if weight <= 0:
            continue
        best += weight / (k + 1)
        ranked = sorted((c for c in candidates if present[name](c)), key=lists[name], reverse=True)
        rank, previous = 0, None
        for position, c in enumerate(ranked, start=1):
            value = lists[name](c)
            if value != previous:
                rank, previous = position, value
            totals[c.id] += weight / (k + rank)
    for c in candidates:
        c.score = totals[c.id] / best if best > 0 else 0.0


def rank(candidates: list[Candidate], *, exact_tier: bool) -> list[Candidate]:
    """Best first. With an exact-term query, rows carrying every query term come first (seed 000:
    `nextjs` returns every Next.js lesson before unrelated semantic neighbours)."""
    return sorted(candidates, key=lambda c: (exact_tier and c.exact, c.score, c.weighted, -c.id), reverse=True)


LABELS = ("low", "medium", "high")


def relevance_label(
    score: float,
    thresholds: dict[str, float],
    *,
    similarity: float | None = None,
    coverage: float | None = None,
    exact: bool = False,
) -> str:
    """The weighted score's label, capped by an absolute signal of the hit's own: its cosine
    similarity when the model ranked it, else (text mode, no model) the share of the query's terms
    it carries. The score's parts are relative to this search's best candidate, so without a cap
    the best of unrelated rows read "high" (a guitar question got a database-index lesson labelled
    "high"). An exact-term match (a tag, tech stack or title word the query names) is not capped."""
    label = "high" if score >= thresholds["high"] else "medium" if score >= thresholds["medium"] else "low"
    if exact:
        return label
    if similarity is not None:
        signal, high, medium = similarity, thresholds.get("high_similarity", 0.0), thresholds.get("medium_similarity", 0.0)
    elif coverage is not None:
        signal, high, medium = coverage, thresholds.get("high_coverage", 0.0), thresholds.get("medium_coverage", 0.0)
    else:
        return label
    cap = "high" if signal >= high else "medium" if signal >= medium else "low"
    return LABELS[min(LABELS.index(label), LABELS.index(cap))]
