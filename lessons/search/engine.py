"""The hybrid search engine: the one place where lessons and memories are ranked.

    score = w_semantic * semantic * penalty + w_keyword * keyword_or_metadata + w_quality * quality

Weights: settings.SEARCH_WEIGHTS (default 0.5 / 0.3 / 0.2, seed 000) or the request's, renormalised
over the parts a search can use so every score is 0..1 (text mode and a degraded search have no
semantic part; semantic mode has no keyword part unless the caller gave a tech stack or project type).

Each part is 0..1:
- semantic: cosine similarity to the query, clipped to 0..1, over the best among the candidates
  (the best of three normalisations measured on SciFact train and the demo judged set). With
  `context`, 0.6 x that for the primary query + 0.4 x that for the contextual query (query +
  context keywords), seed 001.
- keyword: BM25 of the primary query / the highest BM25 among this search's candidates. When the caller gives a tech stack or project type (lessons), the slot holds
  0.5 x keyword + 0.5 x metadata, metadata being the mean of the share of the caller's tech stack
  the lesson names and 1/0 for naming the caller's project type.
- quality: lessons 0.7 x confidence + 0.3 x min(1, ln(1 + frequency) / ln(11)); memories
  0.7 x importance / 10 + 0.3 x 0.5^(age in days / 180) (occurred_at, else updated_at).
- penalty: a lesson naming tech stacks, none of them the caller's, has its semantic part halved.

`fusion="rrf"`: score = sum over parts of weight / (60 + rank by that part), divided by its maximum
so it stays 0..1; relevance labels still come from the weighted score.

Candidates are the union of a semantic leg (HNSW, top N by cosine distance; with context a second
one for the contextual query), a keyword leg (BM25 of the primary query, top N;
lessons/search/keyword.py) and an exact-term leg (tags, tech stacks, category; GIN), each
with every filter inside its SQL, N = max(3 x limit, 50). Then:
1. semantic-only candidates below the similarity floor (0.3) are dropped;
2. lessons with the same title collapse into one (confidence = max, frequency = sum);
3. ranking: for a short query (<= 3 terms) rows carrying every query term exactly (a tag, tech
   stack, category or title word: `nextjs`, `RLS`) come first, then by score;
4. relevance: score >= 0.6 "high", >= 0.4 "medium", else "low", capped by the hit's own cosine
   when the model ranked it: "high" needs >= 0.25, "medium" >= 0.12; without a model, by the
   share of the query's terms it carries: all for "high", half for "medium" (exact-term hits are
   not capped; settings.SEARCH_RELEVANCE_THRESHOLDS).

Budget: one batched encode (primary and contextual query together) and two SQL statements. The
encode runs on a worker thread while statement 1 (BM25 and exact-term legs: ids and scores) runs,
so PostgreSQL and the model use both cores at once; statement 2 runs the semantic legs, drops the
semantic-only candidates under the floor and fetches the fields and similarities of the rest.
`text` mode (and a search without a model) is statement 1 alone, with the fields. A query encode
failing after statement 1 costs a second statement for the fields. The recency fallback replaces
what found nothing.
Fallbacks: no model -> keyword + quality, `degraded` with the reason; no query or nothing found ->
the most recently updated rows, `fallback="recency"`.
"""

import logging
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from time import perf_counter

import numpy as np
from django.conf import settings
from django.db import connection
from django.utils import timezone

from lessons.embedding import EmbeddingUnavailable, get_embedding_backend
from lessons.search import scoring
from lessons.search.context import STOP_WORDS, contextual_query, extract_keywords
from lessons.search.filters import filter_clause, table_for
from lessons.search.keyword import keyword_leg_sql
from lessons.search.semantic import semantic_leg_sql, session_settings_sql, vector_literal
from lessons.search.types import (
    FUSIONS,
    KINDS,
    MAX_CONTEXT_CHARS,
    MAX_LIMIT,
    MAX_QUERY_CHARS,
    MODES,
    SearchHit,
    SearchRequest,
    SearchRequestError,
    SearchResponse,
)


logger = logging.getLogger("lessons.search")

MIN_CANDIDATES = 50

# Issue 14: the usage counts ride along with every candidate (the usage signal in the quality part).
USAGE_FIELDS = ("returned_count", "used_count", "not_helpful_count", "last_returned_at", "last_used_at")

FIELDS = {
    "lessons": (
        "id", "external_id", "title", "description", "context", "recommendation", "category", "confidence",
        "frequency", "project_types", "tech_stacks", "tags", "status", "created_at", "updated_at",
        *USAGE_FIELDS,
    ),
    "memories": (
        "id", "external_id", "content", "details", "categories", "importance", "people", "emotions",
        "occurred_at", "version", "current_version_id", "created_at", "updated_at",
        *USAGE_FIELDS,
    ),
}
HIT_KIND = {"lessons": "lesson", "memories": "memory"}
TIMESTAMPS = frozenset({"created_at", "updated_at", "occurred_at", "last_returned_at", "last_used_at"})


def _field_columns(kind: str) -> list[str]:
    """The SELECT list of a candidate's fields. Timestamps come as fixed-format UTC text, parsed by
    `datetime.fromisoformat` (C): psycopg's timestamptz loader as Django registers it is pure
    Python, and parsing two timestamps for ~500 candidates cost 9 ms of a 50 ms search."""
    return [
        f"to_char(t.{column} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US') AS {column}"
        if column in TIMESTAMPS else f"t.{column}"
        for column in FIELDS[kind]
    ]


@dataclass(frozen=True)
class _Plan:
    """What one search will run, decided before any SQL."""

    query: str
    keyword_query: str
    contextual: str | None
    keywords: list[str]
    weights: dict[str, float]
    floor: float
    candidates_per_leg: int


def validate(request: SearchRequest) -> tuple[dict[str, float], float]:
    """Raise SearchRequestError naming the field; return the weights and floor to use."""
    if request.kind not in KINDS:
        raise SearchRequestError("kind", f"unknown kind {request.kind!r}; use one of: {', '.join(KINDS)}")
    if request.mode not in MODES:
        raise SearchRequestError("mode", f"unknown mode {request.mode!r}; use one of: {', '.join(MODES)}")
    if request.fusion not in FUSIONS:
        raise SearchRequestError("fusion", f"unknown fusion {request.fusion!r}; use one of: {', '.join(FUSIONS)}")
    if isinstance(request.limit, bool) or not isinstance(request.limit, int) or not 1 <= request.limit <= MAX_LIMIT:
        raise SearchRequestError("limit", f"must be a whole number from 1 to {MAX_LIMIT}, got {request.limit!r}")
    if not isinstance(request.query, str):
        raise SearchRequestError("query", "must be text")
    if len(request.query) > MAX_QUERY_CHARS:
        raise SearchRequestError("query", f"is {len(request.query)} characters long; the limit is {MAX_QUERY_CHARS}")
    if len(request.context or "") > MAX_CONTEXT_CHARS:
        raise SearchRequestError(
            "context", f"is {len(request.context)} characters long; the limit is {MAX_CONTEXT_CHARS}"
        )
    weights = dict(settings.SEARCH_WEIGHTS)
    if request.weights is not None:
        if not isinstance(request.weights, dict):
            raise SearchRequestError("weights", "must be an object of semantic, keyword and quality")
        unknown = sorted(set(request.weights) - set(scoring.PART_NAMES))
        if unknown:
            raise SearchRequestError(
                "weights", f"unknown part(s) {', '.join(unknown)}; use {', '.join(scoring.PART_NAMES)}"
            )
        for name, value in request.weights.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise SearchRequestError("weights", f"{name} must be a number >= 0, got {value!r}")
        weights.update({name: float(value) for name, value in request.weights.items()})
        if sum(weights.values()) <= 0:
            raise SearchRequestError("weights", "at least one weight must be above 0")
    floor = settings.SEARCH_SIMILARITY_FLOOR if request.similarity_floor is None else request.similarity_floor
    if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0 <= floor <= 1:
        raise SearchRequestError("similarity_floor", f"must be a number from 0 to 1, got {floor!r}")
    filters = request.filters
    if request.kind == "lessons":
        from lessons.models import LessonStatus

        bad = sorted(set(filters.statuses) - set(LessonStatus.values))
        if bad or not filters.statuses:
            raise SearchRequestError(
                "statuses", f"use one or more of: {', '.join(LessonStatus.values)}" + (f" (got {', '.join(bad)})" if bad else "")
            )
    if filters.min_importance is not None and not (
        isinstance(filters.min_importance, int) and 1 <= filters.min_importance <= 10
    ):
        raise SearchRequestError("min_importance", f"must be a whole number from 1 to 10, got {filters.min_importance!r}")
    if filters.since and filters.until and filters.since >= filters.until:
        raise SearchRequestError("since", "must be before until")
    return weights, float(floor)


def search(*, request: SearchRequest) -> SearchResponse:
    """Run one search. Raises SearchRequestError for a request it cannot run."""
    started = perf_counter()
    weights, floor = validate(request)
    filter_sql, filter_params = filter_clause(kind=request.kind, team_id=request.team.pk, filters=request.filters)
    timings: dict[str, float] = {"embed": 0.0, "sql": 0.0, "fuse": 0.0}
    query = " ".join(request.query.split())
    if not query:
        return _recency_response(
            request=request, filter_sql=filter_sql, filter_params=filter_params, timings=timings, started=started,
            degraded_reason=None, candidates={},
        )

    keywords = extract_keywords(request.context) if request.context else []
    keyword_query = " ".join((request.keyword_query or "").split()) or query
    plan = _Plan(
        query=query,
        keyword_query=keyword_query,
        contextual=contextual_query(query, keywords) if keywords else None,
        keywords=keywords,
        weights=weights,
        floor=floor,
        candidates_per_leg=max(3 * request.limit, MIN_CANDIDATES),
    )

    # --- encode and query at once: the query encode runs on a worker thread (ONNX Runtime and
    # torch release the GIL) while PostgreSQL, on the other core, runs the keyword legs: statement
    # 1. Statement 2 runs the semantic legs and fetches the kept candidates' fields. -------------
    term_forms = scoring.query_term_forms(plan.keyword_query, STOP_WORDS)
    terms = list(term_forms)
    query_exact_terms = terms if 0 < len(terms) <= scoring.EXACT_TIER_MAX_TERMS else []
    exact_terms = query_exact_terms if request.mode != "semantic" else []
    encoding = _QUERY_ENCODER.submit(_timed_embed_queries, plan) if request.mode != "text" else None
    # Statement 1 carries the fields only when no statement 2 will (text mode, or no model).
    model_off = request.mode != "text" and get_embedding_backend().unavailable_reason is not None
    keyword_legs = dict(
        request=request, plan=plan, term_forms=term_forms, filter_sql=filter_sql, filter_params=filter_params
    )
    tick = perf_counter()
    keyword_rows, leg_counts = [], {}
    if request.mode != "semantic":
        keyword_rows, leg_counts = _run_keyword_legs(
            **keyword_legs, exact_terms=exact_terms, with_fields=request.mode == "text" or model_off
        )
    sql_ms = _ms(tick)

    vectors: list[np.ndarray] = []
    degraded_reason = None
    if encoding is not None:
        vectors, degraded_reason, timings["embed"] = encoding.result()
    use_semantic = bool(vectors)
    # Semantic mode without a model is answered by the keyword leg rather than not at all.
    use_keyword = request.mode != "semantic" or not use_semantic
    tick = perf_counter()
    rows = keyword_rows
    union = None
    if use_semantic:
        rows, semantic_counts, union = _run_semantic_legs(
            request=request, plan=plan, vectors=[vector_literal(v) for v in vectors],
            keyword_rows=keyword_rows, filter_sql=filter_sql, filter_params=filter_params,
        )
        leg_counts = {**semantic_counts, **leg_counts}
    elif request.mode == "semantic":
        degraded_reason = f"{degraded_reason}; semantic mode answered by keywords and quality"
        exact_terms = query_exact_terms
        rows, leg_counts = _run_keyword_legs(**keyword_legs, exact_terms=exact_terms, with_fields=True)
    elif request.mode == "hybrid" and not model_off:
        rows = _rows_with_fields(request=request, keyword_rows=keyword_rows)  # the encode failed
    timings["sql"] = sql_ms + _ms(tick)

    # --- fuse ------------------------------------------------------------------------------------
    tick = perf_counter()
    candidates = [_candidate(kind=request.kind, row=row, exact_terms=exact_terms) for row in rows]
    if union is None:
        union = len(candidates)
    candidates = scoring.drop_below_floor(candidates, floor=plan.floor)
    below_floor = union - len(candidates)
    collapsed = 0
    if request.kind == "lessons":
        candidates, collapsed = scoring.collapse_same_title(candidates)
    scoring_plan = scoring.ScoringPlan(
        kind=request.kind,
        weights=scoring.active_weights(
            plan.weights,
            semantic=use_semantic,
            keyword=use_keyword or (request.kind == "lessons" and bool(request.tech_stack or request.project_type)),
        ),
        has_semantic=use_semantic,
        has_keyword=use_keyword,
        has_context=plan.contextual is not None,
        context_weights=settings.SEARCH_CONTEXT_WEIGHTS,
        tech_stack=tuple(request.tech_stack),
        project_type=request.project_type,
        now=timezone.now(),
    )
    scoring.score_parts(candidates, scoring_plan)
    if request.fusion == "rrf":
        scoring.rrf_scores(candidates, scoring_plan, k=settings.SEARCH_RRF_K)
    ranked = scoring.rank(candidates, exact_tier=bool(exact_terms))[: request.limit]
    counts = {
        **leg_counts,
        "union": union,
        "duplicates_removed": sum(leg_counts.values()) - union,
        "below_floor": below_floor,
        "collapsed": collapsed,
    }
    timings["fuse"] = _ms(tick)

    if not ranked:
        return _recency_response(
            request=request, filter_sql=filter_sql, filter_params=filter_params, timings=timings, started=started,
            degraded_reason=degraded_reason, candidates=counts,
        )
    hits = [_hit(request=request, candidate=c, scoring_plan=scoring_plan) for c in ranked]
    return _respond(
        request=request, hits=hits, timings=timings, started=started, degraded_reason=degraded_reason,
        fallback=None, candidates=counts, keywords=plan.keywords,
    )


# --- embedding ---------------------------------------------------------------------------------


# Query encodes run here so that PostgreSQL can work on the keyword legs meanwhile.
_QUERY_ENCODER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="query-encoder")


def _timed_embed_queries(plan: _Plan) -> tuple[list[np.ndarray], str | None, float]:
    tick = perf_counter()
    vectors, reason = _embed_queries(plan)
    return vectors, reason, _ms(tick)


def _embed_queries(plan: _Plan) -> tuple[list[np.ndarray], str | None]:
    """[primary] or [primary, contextual] in one encode. The contextual leg failing (a bad vector,
    an encode error with two texts) leaves the primary alone; the model failing degrades."""
    backend = get_embedding_backend()
    reason = backend.unavailable_reason
    if reason is not None:
        return [], reason
    texts = [plan.query] + ([plan.contextual] if plan.contextual else [])
    try:
        matrix = backend.embed_queries(texts)
    except EmbeddingUnavailable as error:
        if len(texts) == 1:
            return [], str(error)
        logger.warning("contextual query embedding failed, searching with the primary query: %s", error)
        try:
            matrix = backend.embed_queries(texts[:1])
        except EmbeddingUnavailable as error_again:
            return [], str(error_again)
    vectors = [np.asarray(v, dtype=np.float32) for v in matrix]
    if not vectors or not _usable(vectors[0], backend.dimensions):
        return [], "the query embedding is unusable (not finite, empty or of the wrong size)"
    if len(vectors) > 1 and not _usable(vectors[1], backend.dimensions):
        logger.warning("contextual query embedding unusable, searching with the primary query")
        return vectors[:1], None
    return vectors, None


def _usable(vector: np.ndarray, dimensions: int) -> bool:
    return vector.shape == (dimensions,) and bool(np.all(np.isfinite(vector))) and float(np.linalg.norm(vector)) > 0


# --- SQL ---------------------------------------------------------------------------------------


def _run_keyword_legs(*, request, plan: _Plan, exact_terms: list[str], term_forms, filter_sql, filter_params,
                      with_fields: bool):
    """Statement 1: the BM25 and exact-term legs: each candidate's id, BM25 and matched terms, and
    its fields when no statement 2 will fetch them (text mode, no model)."""
    table = table_for(request.kind)
    n = plan.candidates_per_leg
    ctes: list[tuple[str, str, list]] = []
    leg = keyword_leg_sql(
        kind=request.kind, team_id=request.team.pk, query=plan.keyword_query,
        filter_sql=filter_sql, filter_params=filter_params, limit=n,
    )
    if leg is not None:
        ctes.append(("kw_p", leg[0], leg[1]))
    if exact_terms:
        ctes.append(("ex", *_exact_leg_sql(kind=request.kind, table=table, terms=exact_terms, forms=term_forms,
                                          filter_sql=filter_sql, filter_params=filter_params, limit=n)))
    if not ctes:
        return [], {}
    names = [name for name, _, _ in ctes]
    params = [value for _, _, cte_params in ctes for value in cte_params]
    columns = []
    if "kw_p" in names:
        columns.append("kw_p.score AS bm25_p, kw_p.matched_terms AS terms_p, kw_p.coverage AS coverage_p")
    columns.extend(f"({name}.id IS NOT NULL) AS in_{name}" for name in names)
    union = " UNION ".join(f"SELECT id FROM {name}" for name in names)
    joins = "".join(f" LEFT JOIN {name} ON {name}.id = c.id" for name in names)
    if with_fields:
        columns[:0] = _field_columns(request.kind)
        joins = f" JOIN {table} AS t ON t.id = c.id" + joins
    else:
        columns.insert(0, "c.id")
    statement = (
        "WITH " + ", ".join(f"{name} AS MATERIALIZED ({sql})" for name, sql, _ in ctes)
        + f", candidate_ids AS ({union}) SELECT {', '.join(columns)} FROM candidate_ids AS c{joins}"
    )
    rows = _fetch_dicts(statement, params)
    counts = {_LEG_NAMES[name]: sum(1 for row in rows if row[f"in_{name}"]) for name in names}
    return rows, counts


def _run_semantic_legs(*, request, plan: _Plan, vectors: list[str], keyword_rows: list[dict], filter_sql,
                       filter_params):
    """Statement 2: the semantic legs, then the fields and similarities of every candidate, the
    keyword legs' included (their BM25 signals are carried over from statement 1). Semantic-only
    candidates under the similarity floor are dropped here, so their fields never leave the
    database (measured on SciFact: 0-280 of ~500 candidates a query)."""
    table = table_for(request.kind)
    n = plan.candidates_per_leg
    ctes = [("sem_p", *semantic_leg_sql(table=table, vector=vectors[0], filter_sql=filter_sql,
                                        filter_params=filter_params, limit=n))]
    if len(vectors) > 1:
        ctes.append(("sem_c", *semantic_leg_sql(table=table, vector=vectors[1], filter_sql=filter_sql,
                                                filter_params=filter_params, limit=n)))
    names = [name for name, _, _ in ctes]
    keyword_ids = [row["id"] for row in keyword_rows]
    prefix, params = session_settings_sql()
    similarities = [f"1 - (t.embedding <=> %s::vector) AS sim_{name[-1]}" for name in names]
    params = [*params, *(value for _, _, cte_params in ctes for value in cte_params), *vectors, keyword_ids]
    columns = [
        *_field_columns(request.kind),
        *(f"s.sim_{name[-1]}" for name in names),
        *(f"({name}.id IS NOT NULL) AS in_{name}" for name in names),
    ]
    counts = [
        *(f"(SELECT count(*) FROM {name}) AS leg_{name}" for name in names),
        "(SELECT count(*) FROM similarities) AS union_size",
    ]
    union = " UNION ".join(f"SELECT id FROM {name}" for name in names)
    joins = "".join(f" LEFT JOIN {name} ON {name}.id = s.id" for name in names)
    floor_sql = ""
    if plan.floor > 0:
        best = "s.sim_p" if len(names) == 1 else "greatest(s.sim_p, s.sim_c)"
        floor_sql = f" WHERE s.id = ANY(%s::bigint[]) OR {best} >= %s"
        params.extend([keyword_ids, plan.floor])
    # `similarities` is materialised so that the floor filters the candidates alone: inlined, the
    # planner pushed it into a scan of the whole table (a cosine for every row, 16 ms on SciFact).
    # `id = ANY(ARRAY(...))` reads the candidates by primary key (2.5 ms less than a join there).
    # The leg counts ride on a one-row table, so they arrive even when the floor leaves no row.
    statement = (
        prefix
        + "WITH " + ", ".join(f"{name} AS MATERIALIZED ({sql})" for name, sql, _ in ctes)
        + f", similarities AS MATERIALIZED (SELECT t.id, {', '.join(similarities)}"
        + f" FROM {table} AS t WHERE t.id = ANY(ARRAY({union} UNION SELECT unnest(%s::bigint[]))))"
        + f" SELECT counts.*, kept.* FROM (SELECT {', '.join(counts)}) AS counts LEFT JOIN ("
        + f"SELECT {', '.join(columns)} FROM similarities AS s JOIN {table} AS t ON t.id = s.id{joins}{floor_sql}"
        + ") AS kept ON true"
    )
    rows = _fetch_dicts(statement, params)
    counts = {_LEG_NAMES[name]: rows[0][f"leg_{name}"] for name in names}
    union_size = rows[0]["union_size"]
    rows = _with_keyword_signals([row for row in rows if row["id"] is not None], keyword_rows)
    return rows, counts, union_size


def _rows_with_fields(*, request, keyword_rows: list[dict]) -> list[dict]:
    """The fields of statement 1's candidates, when it ran without them and no model answered."""
    if not keyword_rows:
        return []
    columns = ", ".join(_field_columns(request.kind))
    rows = _fetch_dicts(
        f"SELECT {columns} FROM {table_for(request.kind)} AS t WHERE t.id = ANY(%s::bigint[])",
        [[row["id"] for row in keyword_rows]],
    )
    return _with_keyword_signals(rows, keyword_rows)


KEYWORD_SIGNALS = ("bm25_p", "terms_p", "coverage_p", "in_kw_p", "in_ex")


def _with_keyword_signals(rows: list[dict], keyword_rows: list[dict]) -> list[dict]:
    """Statement 1's findings (BM25, matched terms, coverage, legs) onto rows fetched later; None
    for a row the keyword legs did not find."""
    signals = {row["id"]: row for row in keyword_rows}
    for row in rows:
        found = signals.get(row["id"], {})
        for name in KEYWORD_SIGNALS:
            row[name] = found.get(name)
    return rows


_LEG_NAMES = {"sem_p": "semantic", "sem_c": "contextual_semantic", "kw_p": "keyword", "ex": "exact"}


def _fetch_dicts(statement: str, params: list) -> list[dict]:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        while cursor.description is None and cursor.nextset():  # past the SET LOCAL statements
            pass
        names = [column.name for column in cursor.description]
        rows = [dict(zip(names, values)) for values in cursor.fetchall()]
    timestamps = [name for name in names if name in TIMESTAMPS]  # text from _field_columns
    for row in rows:
        for name in timestamps:
            if row[name] is not None:
                row[name] = datetime.fromisoformat(row[name]).replace(tzinfo=UTC)
    return rows


def _exact_leg_sql(*, kind, table, terms, forms, filter_sql, filter_params, limit) -> tuple[str, list]:
    """Rows carrying every query term as an exact term (tags, tech stacks, category; GIN): the rows
    the exact-term tier puts first, made candidates even when neither other leg reached them."""
    conditions, params = [], []
    for term in terms:
        variants = sorted({*forms.get(term, [term]), term.replace("+", "")})
        if kind == "lessons":
            conditions.append("(t.tags && %s::varchar[] OR t.tech_stacks && %s::varchar[] OR t.category = ANY(%s::varchar[]))")
            params.extend([variants, variants, variants])
        else:
            conditions.append("(t.categories && %s::varchar[] OR t.emotions && %s::varchar[])")
            params.extend([variants, variants])
    order = "t.confidence DESC, t.frequency DESC, t.id" if kind == "lessons" else "t.importance DESC, t.id"
    sql = f"SELECT t.id FROM {table} AS t WHERE {filter_sql} AND {' AND '.join(conditions)} ORDER BY {order} LIMIT %s"
    return sql, [*filter_params, *params, limit]


_LEG_OF_FLAG = {"in_sem_p": ("semantic", "primary"), "in_sem_c": ("semantic", "contextual"),
                "in_kw_p": ("keyword", "primary"), "in_ex": ("exact", "primary")}


def _candidate(*, kind: str, row: dict, exact_terms: list[str]) -> scoring.Candidate:
    fields = {name: row[name] for name in FIELDS[kind]}
    found = [leg for flag, leg in _LEG_OF_FLAG.items() if row.get(flag)]
    exact = bool(exact_terms) and set(exact_terms) <= scoring.exact_terms_of(kind=kind, row=fields)
    return scoring.Candidate(
        id=row["id"],
        row=fields,
        sim_primary=_float_or_none(row.get("sim_p")),
        sim_contextual=_float_or_none(row.get("sim_c")),
        bm25_primary=float(row.get("bm25_p") or 0.0),
        matched_terms=row.get("terms_p") or [],
        keyword_coverage=_float_or_none(row.get("coverage_p")),
        legs={leg for leg, _ in found},
        found_by={query for _, query in found},
        exact=exact,
    )


def _float_or_none(value) -> float | None:
    return None if value is None else float(value)


# --- responses ---------------------------------------------------------------------------------


def _hit(*, request: SearchRequest, candidate: scoring.Candidate, scoring_plan: scoring.ScoringPlan) -> SearchHit:
    thresholds = settings.SEARCH_RELEVANCE_THRESHOLDS
    explanation = None
    if request.explain:
        parts = candidate.parts
        explanation = {
            "semantic": round(parts["semantic"], 4),
            "keyword": round(parts["keyword"], 4),
            "matched_terms": sorted(parts["matched_terms"]),
            "metadata": None if parts["metadata"] is None else round(parts["metadata"], 4),
            "quality": round(parts["quality"], 4),
            "penalty": round(parts["penalty"], 4),
            "exact_term": candidate.exact,
            "legs": sorted(candidate.legs),
            "found_by": sorted(candidate.found_by),
            "weights": {name: round(value, 4) for name, value in scoring_plan.weights.items()},
            "weighted_score": round(candidate.weighted, 4),
            "fusion": request.fusion,
        }
        if candidate.sim_primary is not None:
            explanation["similarity"] = round(candidate.sim_primary, 4)
    return SearchHit(
        id=candidate.id,
        external_id=candidate.row.get("external_id"),
        kind=HIT_KIND[request.kind],
        fields=candidate.row,
        score=round(candidate.score, 4),
        relevance=scoring.relevance_label(
            candidate.weighted, thresholds,
            similarity=_own_similarity(candidate) if scoring_plan.has_semantic else None,
            coverage=None if scoring_plan.has_semantic else candidate.keyword_coverage,
            exact=candidate.exact,
        ),
        found_by=sorted(candidate.found_by, key=("primary", "contextual").index),
        explanation=explanation,
        collapsed_ids=candidate.member_ids if len(candidate.member_ids) > 1 else [],
    )


def _own_similarity(candidate: scoring.Candidate) -> float | None:
    """The hit's best cosine, None for a row not embedded yet (nothing to cap its label with)."""
    if candidate.sim_primary is None and candidate.sim_contextual is None:
        return None
    return candidate.best_similarity


def recent_rows(*, kind: str, filter_sql: str, filter_params: list, limit: int, order: str = "recent") -> list[dict]:
    """Rows passing the filter, most recently updated first (or by importance for memories)."""
    orders = {
        "recent": "t.updated_at DESC, t.id DESC",
        "importance": "t.importance DESC, t.updated_at DESC, t.id DESC",
        "occurred": "coalesce(t.occurred_at, t.created_at) DESC, t.id DESC",
    }
    columns = ", ".join(_field_columns(kind))
    sql = f"SELECT {columns} FROM {table_for(kind)} AS t WHERE {filter_sql} ORDER BY {orders[order]} LIMIT %s"
    return _fetch_dicts(sql, [*filter_params, limit])


def _listed_hits(*, request: SearchRequest, rows: list[dict], label_by_quality: bool) -> list[SearchHit]:
    now = timezone.now()
    hits = []
    thresholds = settings.SEARCH_RELEVANCE_THRESHOLDS
    for row in rows:
        quality = scoring.quality_of(kind=request.kind, row=row, now=now)
        hits.append(
            SearchHit(
                id=row["id"],
                external_id=row.get("external_id"),
                kind=HIT_KIND[request.kind],
                fields=row,
                score=round(quality, 4),
                relevance=scoring.relevance_label(quality, thresholds) if label_by_quality else "low",
                found_by=[],
                explanation={"quality": round(quality, 4), "fallback": "recency"} if request.explain else None,
            )
        )
    return hits


def _recency_response(*, request, filter_sql, filter_params, timings, started, degraded_reason, candidates) -> SearchResponse:
    """No query, or nothing found: the most recently updated rows, labelled low (they matched nothing)."""
    tick = perf_counter()
    rows = recent_rows(kind=request.kind, filter_sql=filter_sql, filter_params=filter_params, limit=request.limit)
    timings["sql"] = timings.get("sql", 0.0) + _ms(tick)
    hits = _listed_hits(request=request, rows=rows, label_by_quality=False)
    return _respond(
        request=request, hits=hits, timings=timings, started=started, degraded_reason=degraded_reason,
        fallback="recency", candidates=candidates, keywords=[],
    )


def list_items(*, request: SearchRequest, order: str) -> SearchResponse:
    """A listing without a query (friends, interests, recent events): the same filters, fields and
    response as a search, ordered by `order` ("recent", "importance", "occurred"); score = quality."""
    started = perf_counter()
    validate(request)
    filter_sql, filter_params = filter_clause(kind=request.kind, team_id=request.team.pk, filters=request.filters)
    tick = perf_counter()
    rows = recent_rows(kind=request.kind, filter_sql=filter_sql, filter_params=filter_params, limit=request.limit, order=order)
    timings = {"embed": 0.0, "sql": _ms(tick), "fuse": 0.0}
    hits = _listed_hits(request=request, rows=rows, label_by_quality=True)
    return _respond(
        request=request, hits=hits, timings=timings, started=started, degraded_reason=None, fallback=None,
        candidates={"listed": len(rows)}, keywords=[], mode="list",
    )


def _respond(*, request, hits, timings, started, degraded_reason, fallback, candidates, keywords, mode=None) -> SearchResponse:
    timings = {name: round(value, 2) for name, value in timings.items()}
    timings["total"] = round(_ms(started), 2)
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


def _ms(since: float) -> float:
    return (perf_counter() - since) * 1000.0
