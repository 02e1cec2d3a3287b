"""Search for curators: the admin lists' search box and the search playground.

Both call the engine's public `search()` exactly as the API does; nothing here ranks. What is
added is what a curator needs around it:

- `admin_list_search`: the lesson and memory lists search every team the curator sees (one
  `search()` per team, since a search belongs to one team) and merge the hits into one ranking:
  rows carrying every query term exactly first (as the engine orders them), then by score.
- `playground_compare`: one query under one or two settings (mode, fusion, weights) side by side,
  each hit with its score taken apart (semantic, keyword/metadata, quality, penalty) and its rank
  under the other setting.
- `admin_teams`: evaluation teams (`eval-*`, loaded by `eval_retrieval`) hold benchmark corpora,
  not curated knowledge; curators' lists leave them out unless asked for.
"""

from dataclasses import dataclass, field, replace
from time import perf_counter

from django.db.models import Q, QuerySet

from lessons.models import LessonStatus, Team
from lessons.search import MAX_LIMIT, SearchFilters, SearchRequest, SearchRequestError, SearchResponse, search
from lessons.search import scoring

EVALUATION_TEAM_PREFIX = "eval-"
ALL_LESSON_STATUSES = tuple(LessonStatus.values)


def admin_teams(*, include_evaluation: bool = False) -> QuerySet[Team]:
    teams = Team.objects.order_by("slug")
    if not include_evaluation:
        teams = teams.exclude(slug__startswith=EVALUATION_TEAM_PREFIX)
    return teams


def evaluation_team_q(prefix: str = "team__") -> Q:
    """Rows of an evaluation team, for querysets of lessons or memories (`prefix` = path to the team)."""
    return Q(**{f"{prefix}slug__startswith": EVALUATION_TEAM_PREFIX})


# --- the lists' search box ---------------------------------------------------------------------


@dataclass(frozen=True)
class RankedRow:
    id: int
    rank: int  # 1 = best
    score: float
    relevance: str
    team_slug: str


@dataclass
class AdminListSearch:
    query: str
    kind: str
    rows: list[RankedRow] = field(default_factory=list)  # best first, across the teams searched
    teams: list[str] = field(default_factory=list)
    mode: str = "hybrid"
    degraded_reason: str | None = None
    took_ms: float = 0.0
    error: SearchRequestError | None = None
    limit: int = 0  # the most rows one search shows (one page of the list)
    filters: SearchFilters = field(default_factory=SearchFilters)  # the list's, as the engine's

    @property
    def at_limit(self) -> bool:
        """The hits fill the page: more rows may match, below the ones shown."""
        return bool(self.rows) and len(self.rows) >= self.limit

    @property
    def ids(self) -> list[int]:
        return [row.id for row in self.rows]


def admin_list_search(
    *, kind: str, query: str, teams, filters: SearchFilters, limit: int = MAX_LIMIT
) -> AdminListSearch:
    """Search `teams` (an iterable of Team) for `query`: the best `limit` rows across them (one
    page of the list), a hit's collapsed duplicates listed after it and counted in the limit.

    A search that found nothing answers with the engine's recency fallback (rows that matched
    nothing); those are not hits, so they are left out. A bad request (a query too long, ...) is
    returned in `error`, not raised, for the admin to show."""
    started = perf_counter()
    result = AdminListSearch(query=query, kind=kind, limit=limit, filters=filters)
    collected = []  # (exact-term tier, -score, order found, hit, team slug)
    for team in teams:
        request = SearchRequest(team=team, query=query, kind=kind, limit=limit, filters=filters, explain=True)
        try:
            response = search(request=request)
        except SearchRequestError as error:
            result.error = error
            return result
        result.teams.append(team.slug)
        result.mode = response.mode
        result.degraded_reason = result.degraded_reason or response.degraded_reason
        if response.fallback:
            continue
        for hit in response.results:
            # the engine's tiers (scoring.tier), kept when teams are merged, then the score
            explanation = hit.explanation or {}
            tier = -scoring.tier(exact=bool(explanation.get("exact_term")),
                                 says_query=bool(explanation.get("says_query")))
            for row_id in [hit.id, *[other for other in hit.collapsed_ids if other != hit.id]]:
                collected.append((tier, -hit.score, len(collected), row_id, hit, team.slug))
    collected.sort(key=lambda item: item[:3])
    seen = set()
    for _, _, _, row_id, hit, team_slug in collected:
        if row_id in seen:
            continue
        if len(result.rows) == limit:
            break
        seen.add(row_id)
        result.rows.append(
            RankedRow(id=row_id, rank=len(result.rows) + 1, score=hit.score, relevance=hit.relevance, team_slug=team_slug)
        )
    result.took_ms = round((perf_counter() - started) * 1000, 1)
    return result


# --- the playground ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlaygroundSetting:
    """What a curator varies between the two columns."""

    mode: str = "hybrid"
    fusion: str = "weighted"
    weights: dict[str, float] | None = None  # None: the configured defaults


@dataclass
class ScorePart:
    name: str  # semantic, keyword, metadata, quality, penalty
    label: str
    value: float  # the part itself, 0..1 (penalty: what it took off the score)
    weight: float | None  # its weight in this search (None for metadata and penalty)
    contribution: float  # what it added to the weighted score (penalty: negative)


@dataclass
class PlaygroundRow:
    rank: int
    id: int
    kind: str  # "lesson" | "memory"
    title: str
    subtitle: str  # status and category, or importance and categories
    score: float
    weighted_score: float
    relevance: str
    found_by: list[str]
    legs: list[str]
    matched_terms: list[str]
    exact_term: bool
    similarity: float | None
    parts: list[ScorePart]
    collapsed_ids: list[int]
    label_feedback: dict | None = None  # value, shared, weight, top, divisor (engine.py: label feedback)
    other_rank: int | None = None  # rank of the same row under the other setting; None: not there

    @property
    def rank_change(self) -> int | None:
        """Places gained against the other setting (positive: ranked higher here)."""
        return None if self.other_rank is None else self.other_rank - self.rank


@dataclass
class PlaygroundRun:
    setting: PlaygroundSetting
    response: SearchResponse | None = None
    rows: list[PlaygroundRow] = field(default_factory=list)
    error: SearchRequestError | None = None
    weights: dict[str, float] = field(default_factory=dict)  # as the engine applied them

    @property
    def candidate_counts(self) -> list[tuple[str, int]]:
        """The engine's candidate counts, per leg and what was removed, named for people."""
        counts = self.response.candidates if self.response is not None else {}
        return [(name.replace("_", " "), value) for name, value in counts.items()]


def playground_compare(*, request: SearchRequest, settings: list[PlaygroundSetting]) -> list[PlaygroundRun]:
    """Run `request` once per setting (its mode, fusion and weights replaced), with explanations.

    Each run's rows say where the same row ranked in the other run (with two settings)."""
    runs = []
    for setting in settings:
        run = PlaygroundRun(setting=setting)
        varied = replace(request, mode=setting.mode, fusion=setting.fusion, weights=setting.weights, explain=True)
        try:
            run.response = search(request=varied)
        except SearchRequestError as error:
            run.error = error
        else:
            run.rows = [_playground_row(rank=rank, hit=hit) for rank, hit in enumerate(run.response.results, 1)]
            run.weights = _weights_of(run.response)
        runs.append(run)
    if len(runs) == 2 and not any(run.error for run in runs):
        first, second = runs
        _cross_ranks(first, second)
        _cross_ranks(second, first)
    return runs


def _weights_of(response: SearchResponse) -> dict[str, float]:
    """The search's weights, from a hit scored with them (a row without a vector yet has its own)."""
    for hit in response.results:
        if hit.explanation and "weights" in hit.explanation and "embedding" not in hit.explanation:
            return hit.explanation["weights"]
    return {}


def _cross_ranks(run: PlaygroundRun, other: PlaygroundRun) -> None:
    if other.response is not None and other.response.fallback:
        return
    ranks = {row.id: row.rank for row in other.rows}
    for row in run.rows:
        row.other_rank = ranks.get(row.id)


PART_LABELS = {
    "semantic": "semantic",
    "keyword": "keyword / metadata",
    "quality": "quality",
    "penalty": "penalty",
}


def _playground_row(*, rank: int, hit) -> PlaygroundRow:
    explanation = hit.explanation or {}
    fields = hit.fields
    if hit.kind == "lesson":
        title = fields.get("title", "")
        subtitle = " · ".join(part for part in (fields.get("status"), fields.get("category")) if part)
    else:
        title = fields.get("content", "")
        categories = ", ".join(fields.get("categories") or [])
        subtitle = " · ".join(part for part in (f"importance {fields.get('importance')}", categories) if part)
    return PlaygroundRow(
        rank=rank,
        id=hit.id,
        kind=hit.kind,
        title=title,
        subtitle=subtitle,
        score=hit.score,
        weighted_score=float(explanation.get("weighted_score", hit.score)),
        relevance=hit.relevance,
        found_by=list(hit.found_by or explanation.get("found_by", [])),
        legs=list(explanation.get("legs", [])),
        matched_terms=list(explanation.get("matched_terms", [])),
        exact_term=bool(explanation.get("exact_term")),
        similarity=explanation.get("similarity"),
        parts=score_parts(explanation=explanation),
        collapsed_ids=list(hit.collapsed_ids),
        label_feedback=_label_feedback(explanation.get("labels")),
    )


def _label_feedback(labels: dict | None) -> dict | None:
    """The explanation's label feedback with the divisor the score was taken through (1 + weight)."""
    return None if not labels else {**labels, "divisor": 1.0 + float(labels["weight"])}


def score_parts(*, explanation: dict) -> list[ScorePart]:
    """The weighted score taken apart:
    score = w_semantic x semantic - penalty + w_keyword x (keyword or metadata slot) + w_quality x quality.

    The keyword slot's contribution is what the score has left once the others are taken out, so
    the parts always add up to the engine's weighted score, whatever the engine puts in the slot
    (the keyword part, the metadata part, or their mean)."""
    if not explanation or "weights" not in explanation:
        quality = float(explanation.get("quality", 0.0)) if explanation else 0.0
        return [ScorePart("quality", "quality", quality, None, 0.0)]
    weights = explanation["weights"]
    semantic = float(explanation.get("semantic") or 0.0)
    keyword = float(explanation.get("keyword") or 0.0)
    metadata = explanation.get("metadata")
    quality = float(explanation.get("quality") or 0.0)
    penalty = float(explanation.get("penalty") or 0.0)
    weighted = float(explanation.get("weighted_score") or 0.0)
    w_semantic = float(weights.get("semantic", 0.0))
    w_keyword = float(weights.get("keyword", 0.0))
    w_quality = float(weights.get("quality", 0.0))
    semantic_contribution = w_semantic * semantic
    quality_contribution = w_quality * quality
    keyword_contribution = max(0.0, weighted - (semantic_contribution - penalty) - quality_contribution)
    keyword_value = keyword if metadata is None else keyword_contribution / w_keyword if w_keyword else float(metadata)
    label = "keyword" if metadata is None else "keyword + metadata"
    usage = float(explanation.get("usage") or 0.0)
    quality_label = f"quality (usage +{usage:.2f})" if usage >= 0.005 else "quality"
    semantic_label = "semantic (no vector yet)" if explanation.get("embedding") == "pending" else "semantic"
    return [
        ScorePart("semantic", semantic_label, semantic, w_semantic, semantic_contribution),
        ScorePart("keyword", label, min(1.0, keyword_value), w_keyword, keyword_contribution),
        ScorePart("quality", quality_label, quality, w_quality, quality_contribution),
        ScorePart("penalty", "penalty", penalty, None, -penalty),
    ]
