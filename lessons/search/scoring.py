"""Scoring: each candidate's parts as absolute evidence on 0..1, fused into one score, labelled.

Pure functions over the candidates the SQL returned: no database, no model. The formula is
written out at the top of `lessons/search/engine.py`.
"""

import re
from dataclasses import dataclass, field
from datetime import datetime

from lessons.models import MAX_FREQUENCY
from lessons.search.kinds import SearchKind, canonical, folded, term_key

TECH_MISMATCH_FACTOR = 0.5  # seed 000: the semantic part is halved
PART_NAMES = ("semantic", "keyword", "quality")

_SPLIT = re.compile(r"[\s,;/|]+")
_QUERY_WORD = re.compile(r"[^\s,;/|]+")  # a word as _SPLIT cuts the query
_TERM_CHARACTER = re.compile(r"[a-z0-9]")

__all__ = ["canonical"]


def query_term_forms(query: str, stop_words: frozenset[str]) -> dict[str, list[str]]:
    """The query's content terms, canonical, in order, without stop words or duplicates, each with
    the spellings to look for in stored arrays ('next.js' -> 'nextjs': ['next.js', 'nextjs'])."""
    return {term: sorted({term, *words}) for term, words in query_written_forms(query, stop_words).items()}


def query_written_forms(query: str, stop_words: frozenset[str]) -> dict[str, set[str]]:
    """The query's content terms, canonical, in order, each with the words the query wrote it as
    (lowercased, without the punctuation around them): 'Next.js' -> 'nextjs': {'next.js'}."""
    written: dict[str, set[str]] = {}
    for raw in _query_words(query):
        term = canonical(raw)
        if term and raw not in stop_words:
            written.setdefault(term, set()).add(raw)
    return written


def respelled_query(query: str, spellings: dict[str, str]) -> str:
    """`query` with each word whose term `spellings` maps written as that spelling instead
    ('vue3 upgrade', {'vue3': 'vue 3'} -> 'vue 3 upgrade'); every other character as it was."""
    return _QUERY_WORD.sub(lambda word: spellings.get(canonical(bare_word(word.group())), word.group()), query)


def unlisted_words(query: str, stop_words: frozenset[str]) -> int:
    """How many of the query's words have letters that no canonical term keeps (a word in another
    script: `canonical` keeps a-z, digits, + and #). They are words all the same: "database
    безопасности" is two words, not the one-word lookup of `database` its terms alone would make
    it; and "React中文", written without a space as Chinese and Japanese are, is more than the
    term `react` (its exact-term tier put 26 rows saying only "React" above the one saying both)."""
    return sum(1 for word in _query_words(query) if word not in stop_words
               and any(ch.isalnum() and not _TERM_CHARACTER.match(ch) for ch in folded(word)))


def _query_words(query: str):
    """The query's words, lowercased, without the punctuation around them."""
    return (bare_word(raw) for raw in _SPLIT.split(query.lower()))


def bare_word(word: str) -> str:
    """A word lowercased, without the punctuation around it, as the query's words are compared."""
    return word.lower().strip(".,;:!?'\"()[]{}")


def query_terms(query: str, stop_words: frozenset[str]) -> list[str]:
    return list(query_term_forms(query, stop_words))


@dataclass
class Candidate:
    """One row (or, after collapse, one group of same-title lessons) with what the legs found."""

    id: int
    row: dict
    sim_primary: float | None = None
    sim_contextual: float | None = None
    sim_feedback: float | None = None  # to the query moved toward its nearest rows (feedback vector)
    bm25_primary: float = 0.0
    bm25_max: float = 0.0  # the query's attainable BM25 (sum of qtf x idf x (k1 + 1))
    matched_terms: list[str] = field(default_factory=list)
    keyword_coverage: float | None = None  # share of the query's English terms the row carries
    keyword_word_share: float | None = None  # share of the query's words it matched, in any form
    legs: set[str] = field(default_factory=set)  # "semantic", "keyword", "exact"
    found_by: set[str] = field(default_factory=set)  # "primary", "contextual"
    exact: bool = False
    says_query: bool = False  # a one-word query's word is in the row's text (exact.TEXT_TIER_MAX_TERMS)
    names_subject: bool = False  # the query names who the row is about (SearchKind.subject_words)
    member_ids: list[int] = field(default_factory=list)
    parts: dict = field(default_factory=dict)
    weighted: float = 0.0  # the weighted score (also labels relevance under RRF)
    score: float = 0.0  # the ranking score returned

    @property
    def best_similarity(self) -> float:
        return max((s for s in (self.sim_primary, self.sim_contextual) if s is not None), default=0.0)


@dataclass(frozen=True)
class ScoringPlan:
    """What a search scores with: active parts and their (renormalised) weights, the calibration
    of the absolute parts, and the caller."""

    kind: SearchKind
    weights: dict[str, float]  # over active parts, summing to 1
    has_semantic: bool
    has_keyword: bool
    has_context: bool
    context_weights: dict[str, float]
    calibration: dict[str, float]
    tech_stack: tuple[str, ...] = ()
    project_type: str | None = None
    now: datetime | None = None
    # the tuned weights for this query over the same parts: labels judge meaning and words by them
    # when the caller's own weights give both nothing
    default_weights: dict[str, float] = field(default_factory=dict)


def active_weights(weights: dict[str, float], *, semantic: bool, keyword: bool) -> dict[str, float]:
    """Weights of the parts a search can use, renormalised to sum to 1 so scores stay 0..1 in every
    mode. When all active weights are zero, the active parts share equally."""
    active = {"semantic": semantic, "keyword": keyword, "quality": True}
    chosen = {name: float(weights.get(name, 0.0)) for name in PART_NAMES if active[name]}
    total = sum(chosen.values())
    if total <= 0:
        return {name: 1.0 / len(chosen) for name in chosen}
    return {name: value / total for name, value in chosen.items()}


def vector_pending(candidate: "Candidate", *, measured_meaning: bool) -> bool:
    """A row the search would measure by meaning that has no vector yet (its cosine came back NULL):
    written a moment ago, its embedding queued or failed."""
    return measured_meaning and candidate.sim_primary is None


def without_semantic(weights: dict[str, float]) -> dict[str, float]:
    """The weights renormalised over the parts other than meaning (a row without a vector). When
    they give words nothing, the row has none of the evidence asked for: every weight 0 (score 0),
    not quality alone (weights all on meaning ranked an unembedded lesson first on its quality)."""
    rest = {name: value for name, value in weights.items() if name != "semantic"}
    total = sum(rest.values())
    if weights.get("keyword", 0.0) <= 0 or total <= 0:
        return {name: 0.0 for name in weights}
    return {**{name: value / total for name, value in rest.items()}, "semantic": 0.0}


def title_key(title: str) -> str:
    return " ".join(title.lower().split())


def same_title_groups(items: list, *, row_of=lambda item: item) -> list[list]:
    """`items` grouped by (title, status), each group where its first item stood."""
    groups: dict[tuple[str, str | None], list] = {}
    for item in items:
        row = row_of(item)
        groups.setdefault((title_key(row.get("title", "")), row.get("status")), []).append(item)
    return list(groups.values())


_SUMMED_USAGE = ("returned_count", "used_count", "not_helpful_count")
_LATEST_USAGE = ("last_returned_at", "last_used_at")


def folded_row(lead: dict, members: list[dict]) -> dict:
    """The lead's row with confidence = max and frequency = sum (capped) over the members' rows,
    and their usage counts summed (the latest moments kept): a folded lesson is returned and
    can be reported used, and a use reported on it had no say in the group's ranking."""
    row = {**lead, "confidence": max(m.get("confidence", 0.0) for m in members),
           "frequency": min(MAX_FREQUENCY, sum(m.get("frequency", 1) for m in members))}
    for name in _SUMMED_USAGE:
        if name in lead:
            row[name] = sum(m.get(name) or 0 for m in members)
    for name in _LATEST_USAGE:
        if name in lead:
            row[name] = max((m[name] for m in members if m.get(name) is not None), default=None)
    return row


def collapse_same_title_rows(rows: list[dict]) -> list[tuple[dict, list[int]]]:
    """The recency fallback's fold, as `collapse_same_title` folds candidates: rows newest first,
    each (title, status) kept once as its newest row, with confidence = max and frequency = sum
    over the rows given; the second item lists every member's id (one id: no fold)."""
    return [
        (members[0] if len(members) == 1 else folded_row(members[0], members), sorted(m["id"] for m in members))
        for members in same_title_groups(rows)
    ]


def collapse_same_title(candidates: list[Candidate]) -> tuple[list[Candidate], int]:
    """Lessons with the same title and status become one candidate: the strongest member's row,
    with confidence = max and frequency = sum over the members; legs, terms and signals united.
    A rejected lesson does not fold into a confirmed one of its title (a search asking for both
    statuses showed one "confirmed" hit whose frequency counted the rejected one)."""
    collapsed: list[Candidate] = []
    for members in same_title_groups(candidates, row_of=lambda candidate: candidate.row):
        if len(members) == 1:
            members[0].member_ids = [members[0].id]
            collapsed.append(members[0])
            continue
        lead = max(members, key=lambda c: (c.best_similarity, c.bm25_primary, c.row.get("confidence", 0), -c.id))
        collapsed.append(Candidate(
            id=lead.id,
            row=folded_row(lead.row, [m.row for m in members]),
            sim_primary=_max_or_none(m.sim_primary for m in members),
            sim_contextual=_max_or_none(m.sim_contextual for m in members),
            sim_feedback=_max_or_none(m.sim_feedback for m in members),
            bm25_primary=max(m.bm25_primary for m in members),
            bm25_max=max(m.bm25_max for m in members),
            matched_terms=sorted({t for m in members for t in m.matched_terms}),
            keyword_coverage=_max_or_none(m.keyword_coverage for m in members),
            keyword_word_share=_max_or_none(m.keyword_word_share for m in members),
            legs=set().union(*(m.legs for m in members)),
            found_by=set().union(*(m.found_by for m in members)),
            exact=any(m.exact for m in members),
            says_query=any(m.says_query for m in members),
            names_subject=any(m.names_subject for m in members),
            member_ids=sorted(m.id for m in members),
        ))
    return collapsed, len(candidates) - len(collapsed)


def _max_or_none(values) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _clip(value: float) -> float:
    return 0.0 if value < 0 else 1.0 if value > 1 else float(value)


def semantic_evidence(similarity: float | None, best: float, calibration: dict[str, float]) -> float:
    """A cosine on a fixed scale: `semantic_low` (what unrelated texts score) -> 0 and
    max(`semantic_high`, the search's best cosine) -> 1. A search whose best match is weak keeps
    every part small (flat cosines are not stretched to 1); a strong one ranks by its own best."""
    if similarity is None:
        return 0.0
    low = calibration["semantic_low"]
    return _clip((similarity - low) / (max(best, calibration["semantic_high"]) - low))


def keyword_evidence(bm25: float, best: float, bm25_max: float, calibration: dict[str, float]) -> float:
    """BM25 over max(the search's best BM25, `keyword_floor` x the query's attainable maximum):
    when the best row matches only a sliver of the query (one common word), every keyword part
    stays small; otherwise the best keyword match scores 1."""
    if bm25 <= 0 or bm25_max <= 0:
        return 0.0
    return _clip(bm25 / max(best, calibration["keyword_floor"] * bm25_max))


def absolute_semantic(similarity: float | None, calibration: dict[str, float]) -> float:
    """The cosine alone on the fixed scale (labels: never relative to other hits)."""
    if similarity is None:
        return 0.0
    low, high = calibration["semantic_low"], calibration["semantic_high"]
    return _clip((similarity - low) / (high - low))


def absolute_keyword(bm25: float, bm25_max: float, calibration: dict[str, float]) -> float:
    """BM25 over the share of the attainable maximum that every query term matched about once in a
    text of average length reaches (1 / (k1 + 1)): 1 then, less for fewer terms."""
    if bm25 <= 0 or bm25_max <= 0:
        return 0.0
    return _clip(bm25 / (calibration["keyword_full"] * bm25_max))


def label_keyword_evidence(candidate: Candidate, plan: "ScoringPlan") -> float:
    """The label's words: BM25 on its fixed scale, at most the share of the query's words the row
    carries. One rare word of "my cat is sick" reached 0.63 of the scale alone, a `high` in text
    mode; half the query's words now read at most 0.5, whatever their rarity. The share is the
    English terms' (keyword_coverage), or the words' (keyword_word_share) when higher: a word
    matched as a tag (unstemmed `security`) is no English match. Each word counts once: counting
    matched terms, `secur` and `security` made one word of "database security" the whole query,
    and a lesson on session cookies read `high` in text mode."""
    evidence = absolute_keyword(candidate.bm25_primary, candidate.bm25_max, plan.calibration)
    shares = [share for share in (candidate.keyword_coverage, candidate.keyword_word_share) if share is not None]
    return min(evidence, max(shares)) if shares else evidence


def query_length_weights(weights: dict[str, float], long_weights: dict[str, float] | None, *, terms: int,
                         span: tuple[int, int]) -> dict[str, float]:
    """Short queries lean on meaning, long ones on words: the weights move linearly from `weights`
    (at span[0] content terms or fewer) to `long_weights` (at span[1] or more). None: fixed."""
    if not long_weights:
        return dict(weights)
    short, long = span
    t = 0.0 if terms <= short else 1.0 if terms >= long else (terms - short) / (long - short)
    return {name: (1 - t) * weights.get(name, 0.0) + t * long_weights.get(name, 0.0) for name in PART_NAMES}


def metadata_of(*, row: dict, tech_stack: tuple[str, ...], project_type: str | None) -> float | None:
    """Overlap with the caller: share of the caller's tech stack the lesson names, and whether it
    names the caller's project type; their mean. None when the caller gave neither."""
    parts = []
    if tech_stack:
        caller = {term_key(t) for t in tech_stack}
        lesson = {term_key(t) for t in row.get("tech_stacks", [])}
        parts.append(len(caller & lesson) / len(caller))
    if project_type:
        parts.append(1.0 if term_key(project_type) in {term_key(p) for p in row.get("project_types", [])} else 0.0)
    return sum(parts) / len(parts) if parts else None


def tech_mismatch(*, row: dict, tech_stack: tuple[str, ...]) -> bool:
    """Seed 000: a lesson naming tech stacks, none of them the caller's."""
    if not tech_stack or not row.get("tech_stacks"):
        return False
    lesson = {term_key(t) for t in row["tech_stacks"]}
    return not (lesson & {term_key(t) for t in tech_stack})


def _semantic_similarity(c: Candidate) -> float | None:
    """The feedback similarity when the search measured one, else the query's own."""
    return c.sim_primary if c.sim_feedback is None else c.sim_feedback


def score_parts(candidates: list[Candidate], plan: ScoringPlan) -> None:
    """Fill each candidate's parts (0..1) and its weighted score."""
    w, cw, calibration = plan.weights, plan.context_weights, plan.calibration
    best_semantic = max((_semantic_similarity(c) or 0.0 for c in candidates), default=0.0)
    best_contextual = max((c.sim_contextual or 0.0 for c in candidates), default=0.0)
    best_keyword = max((c.bm25_primary for c in candidates), default=0.0)
    for c in candidates:
        semantic = 0.0
        if plan.has_semantic:
            semantic = semantic_evidence(_semantic_similarity(c), best_semantic, calibration)
            if plan.has_context and c.sim_contextual is not None:
                semantic = cw["primary"] * semantic + cw["contextual"] * semantic_evidence(
                    c.sim_contextual, best_contextual, calibration)
        keyword = keyword_evidence(c.bm25_primary, best_keyword, c.bm25_max, calibration) if plan.has_keyword else 0.0
        metadata = metadata_of(row=c.row, tech_stack=plan.tech_stack, project_type=plan.project_type)
        if metadata is None:
            keyword_part = keyword
        elif plan.has_keyword:
            keyword_part = 0.5 * keyword + 0.5 * metadata
        else:
            keyword_part = metadata
        quality, usage = plan.kind.quality_and_usage(c.row, plan.now)
        factor = TECH_MISMATCH_FACTOR if tech_mismatch(row=c.row, tech_stack=plan.tech_stack) else 1.0
        semantic_used = semantic * factor
        row_weights = w
        if vector_pending(c, measured_meaning=plan.has_semantic):
            # No vector yet (written a moment ago, its embedding queued or failed): its meaning is
            # unknown, not unrelated. Scored on the parts it has, as a search without the model
            # scores every row; a 0 for meaning put a new lesson that says the query's words
            # under unrelated ones.
            row_weights = without_semantic(w)
        # Unrounded: the explanation rounds the parts of the hits it shows.
        c.parts = {
            "semantic": semantic,
            "keyword": keyword,
            "matched_terms": c.matched_terms,
            "metadata": metadata,
            "quality": quality,
            "usage": usage,
            "penalty": w.get("semantic", 0.0) * (semantic - semantic_used),
            "_keyword_part": keyword_part,
            "_semantic_used": semantic_used,
        }
        if row_weights is not w:
            c.parts["weights"] = row_weights  # the explanation's weights, for this row
        c.weighted = _clip(
            row_weights.get("semantic", 0.0) * semantic_used + row_weights.get("keyword", 0.0) * keyword_part
            + row_weights.get("quality", 0.0) * quality
        )
        c.score = c.weighted


def rrf_scores(candidates: list[Candidate], plan: ScoringPlan, *, k: int) -> None:
    """Reciprocal rank fusion over the active parts' rankings: sum of weight / (k + rank), ties
    sharing a rank, divided by its largest possible value so the score stays 0..1."""
    lists = {
        "semantic": lambda c: c.parts["_semantic_used"] + (c.best_similarity if "semantic" in c.legs else -1.0) * 1e-6,
        "keyword": lambda c: c.parts["_keyword_part"],
        "quality": lambda c: c.parts["quality"],
    }
    present = {
        "semantic": lambda c: c.sim_primary is not None,
        "keyword": lambda c: c.parts["_keyword_part"] > 0,
        "quality": lambda c: True,
    }
    ranks: dict[int, dict[str, int]] = {c.id: {} for c in candidates}
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
            ranks[c.id][name] = rank
    for c in candidates:
        terms = {name: plan.weights[name] / (k + rank) for name, rank in ranks[c.id].items()}
        c.score = sum(terms.values()) / best if best > 0 else 0.0
        # the explanation's own arithmetic: score = sum of terms / max (a part the row is absent from adds 0)
        c.parts["rrf"] = {"k": k, "ranks": ranks[c.id], "terms": terms, "max": best}


def label_feedback(ranked: list[Candidate], *, kind: SearchKind, top: int, weight: float) -> None:
    """Lift the rows that share a label (kind.feedback_labels: a lesson's tags) with the search's
    `top` best rows: score = (weighted + weight x L) / (1 + weight), L = 1 for a row sharing one,
    else 0; the best rows themselves count. Curators tag lessons by what they are about, so the
    tags of the best hits name the query's topic in the store's own words; a lesson under that
    topic which neither the model nor the query's words reached ("flaky end to end tests" -> turn
    off animations in the browser suite, tagged intermittent-failures like the best hit) moves up.
    `ranked`: best first (rank()); the weighted score and the labels' evidence stay as they were."""
    if weight <= 0 or top <= 0 or not kind.feedback_labels:
        return
    shared_by_best = set().union(*(_labels_of(c, kind) for c in ranked[:top]))
    for c in ranked:
        # in the row's own spelling, for the explanation; compared canonical ("Next.js" = "nextjs")
        shared = sorted({value for key, value in _labels_of(c, kind).items() if key in shared_by_best})
        lift = 1.0 if shared else 0.0
        c.parts["labels"] = {"value": lift, "shared": shared, "weight": weight, "top": top}
        c.score = (c.weighted + weight * lift) / (1.0 + weight)


def _labels_of(candidate: Candidate, kind: SearchKind) -> dict[str, str]:
    """The row's feedback labels, each term's key (kinds.term_key) -> as stored."""
    return {term_key(value): value for column in kind.feedback_labels for value in candidate.row.get(column) or []}


def tier(*, exact: bool, says_query: bool) -> int:
    """Where a row stands before its score is looked at: rows carrying every query term exactly
    first (seed 000: `nextjs` returns every Next.js lesson before unrelated semantic neighbours),
    and within each part, rows that say a one-word query's word first (a lookup)."""
    return 2 * exact + says_query


def rank(candidates: list[Candidate], *, exact_tier: bool) -> list[Candidate]:
    """Best first: by tier when the query is short enough to form one, then by score."""
    return sorted(
        candidates,
        key=lambda c: (tier(exact=c.exact, says_query=c.says_query) if exact_tier else 0, c.score, c.weighted, -c.id),
        reverse=True,
    )


LABELS = ("low", "medium", "high")


def label_of_score(score: float, thresholds: dict[str, float]) -> str:
    return "high" if score >= thresholds["high"] else "medium" if score >= thresholds["medium"] else "low"


def relevance_label(candidate: Candidate, plan: ScoringPlan, thresholds: dict[str, float]) -> str:
    """What a curator would call the hit, from its own absolute evidence, never relative to the
    other hits: its cosine and its BM25 on their fixed scales (absolute_semantic, absolute_keyword),
    weighted as the search weighs meaning and words. Quality does not count (it says how good a
    lesson is, not whether it answers this query); a lesson of another tech stack keeps its halved
    meaning. With a context, meaning mixes the query's cosine and the context's as the score does
    (0.6 / 0.4): the better of the two at full weight labelled hits `high` that only the caller's
    code was about. An exact-term hit (a tag, tech stack or title word the query names), a row
    that says a one-word query's word, and a memory of a person the query names, is at least
    "medium": "when did I last see Anneliese?" read `low` on the one memory listing her (a third of
    the query's words), under memories of other people that said "last" and "see"."""
    calibration = plan.calibration
    factor = TECH_MISMATCH_FACTOR if tech_mismatch(row=candidate.row, tech_stack=plan.tech_stack) else 1.0
    semantic = absolute_semantic(candidate.sim_primary, calibration)
    if plan.has_context and candidate.sim_contextual is not None:
        cw = plan.context_weights
        contextual = absolute_semantic(candidate.sim_contextual, calibration)
        semantic = cw["primary"] * semantic + cw["contextual"] * contextual
    parts = {"semantic": factor * semantic, "keyword": label_keyword_evidence(candidate, plan)}
    weights = {name: candidate.parts.get("weights", plan.weights).get(name, 0.0) for name in parts}
    if sum(weights.values()) <= 0:
        # The caller's weights give meaning and words nothing (all on quality): the hit is judged as
        # the default weights judge the parts this search measured, never by its quality.
        weights = {name: plan.default_weights.get(name, 0.0) for name in parts}
    total = sum(weights.values())
    if total <= 0:
        return "low"
    label = label_of_score(sum(weights[name] * parts[name] for name in parts) / total, thresholds)
    if (candidate.exact or candidate.says_query or candidate.names_subject) and label == "low":
        return "medium"
    return label
