"""Checking a search request before anything runs: every error names the field at fault."""

import math

from django.conf import settings

from lessons.models import LessonStatus
from lessons.search.filters import phase_categories
from lessons.search.types import (
    FUSIONS,
    KINDS,
    MAX_CONTEXT_CHARS,
    MAX_LIMIT,
    MAX_QUERY_CHARS,
    MODES,
    SearchRequest,
    SearchRequestError,
)

PART_NAMES = ("semantic", "keyword", "quality")


def query_problem(query: str) -> str | None:
    """What makes a query's text unsearchable, or None: its length, or a NUL, which PostgreSQL
    text cannot hold (it was a DataError from the database). A blank query is searchable: it
    answers the most recent rows."""
    if len(query) > MAX_QUERY_CHARS:
        return f"is {len(query)} characters long; the limit is {MAX_QUERY_CHARS}"
    if "\x00" in query:
        return "cannot contain NUL characters (code 0)"
    return None


def validate(request: SearchRequest) -> tuple[dict[str, float], float | None]:
    """Raise SearchRequestError naming the field; return the weights to use and the request's own
    similarity floor (None: the engine's adaptive floor)."""
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
    if problem := query_problem(request.query):
        raise SearchRequestError("query", problem)
    if len(request.context or "") > MAX_CONTEXT_CHARS:
        raise SearchRequestError(
            "context", f"is {len(request.context)} characters long; the limit is {MAX_CONTEXT_CHARS}"
        )
    weights = dict(settings.SEARCH_WEIGHTS)
    if request.weights is not None:
        if not isinstance(request.weights, dict):
            raise SearchRequestError("weights", "must be an object of semantic, keyword and quality")
        unknown = sorted(set(request.weights) - set(PART_NAMES))
        if unknown:
            raise SearchRequestError("weights", f"unknown part(s) {', '.join(unknown)}; use {', '.join(PART_NAMES)}")
        for name, value in request.weights.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise SearchRequestError("weights", f"{name} must be a number >= 0, got {value!r}")
        weights.update({name: float(value) for name, value in request.weights.items()})
        if sum(weights.values()) <= 0:
            raise SearchRequestError("weights", "at least one weight must be above 0")
        caller_metadata = _caller_metadata(request)
        if refusal := mode_weights_refusal(mode=request.mode, weights=weights, caller_metadata=caller_metadata):
            raise SearchRequestError("weights", refusal)
    floor = request.similarity_floor
    if floor is not None and (isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0 <= floor <= 1):
        raise SearchRequestError("similarity_floor", f"must be a number from 0 to 1, got {floor!r}")
    filters = request.filters
    if request.kind == "memories":
        # Memories have no tech stack, project type or phase: given for them, these changed nothing
        # and the search answered as if they were not there (the API refuses them too, by name).
        for name, value in (("tech_stack", request.tech_stack), ("project_type", request.project_type),
                            ("phase", filters.phase), ("tech_stacks", filters.tech_stacks),
                            ("project_types", filters.project_types), ("tags", filters.tags)):
            if value:
                raise SearchRequestError(name, f"lessons only; this search is of {request.kind}")
    if request.kind == "lessons":
        if filters.phase:
            phase_categories(filters.phase)  # an unknown phase is refused naming `phase`, before any leg runs
        if filters.only_versions or filters.include_versions:
            raise SearchRequestError("include_versions", "memories only; lessons have no versions")
        bad = sorted(set(filters.statuses) - set(LessonStatus.values))
        if bad or not filters.statuses:
            raise SearchRequestError(
                "statuses",
                f"use one or more of: {', '.join(LessonStatus.values)}" + (f" (got {', '.join(bad)})" if bad else ""),
            )
    for name in ("min_importance", "max_importance"):
        value = getattr(filters, name)
        if value is not None and not (isinstance(value, int) and 1 <= value <= 10):
            raise SearchRequestError(name, f"must be a whole number from 1 to 10, got {value!r}")
    if None not in (filters.min_importance, filters.max_importance) and filters.min_importance > filters.max_importance:
        raise SearchRequestError("min_importance", "must not be above max_importance")
    if filters.since and filters.until and filters.since >= filters.until:
        raise SearchRequestError("since", "must be before until")
    return weights, None if floor is None else float(floor)


def _caller_metadata(request: SearchRequest) -> bool:
    return request.kind == "lessons" and bool(request.tech_stack or request.project_type)


def mode_weights_refusal(*, mode: str, weights: dict[str, float], caller_metadata: bool = False) -> str | None:
    """Why `weights` leave a search in `mode` nothing to score by, or None. Renormalised over nothing,
    the parts used to share equally: the ranking came from parts the caller had set to 0."""
    usable = mode_parts(mode=mode, caller_metadata=caller_metadata)
    if any(weights.get(name, 0) > 0 for name in usable):
        return None
    return f"{mode} mode scores by {' and '.join(usable)}: give one of them a weight above 0"


def mode_parts(*, mode: str, caller_metadata: bool = False) -> tuple[str, ...]:
    """The parts a search in this mode can score by (the model permitting): semantic mode has no
    words, but scores a lesson caller's tech stack and project type in the keyword slot."""
    if mode == "text":
        return ("keyword", "quality")
    if mode == "semantic":
        return ("semantic", "keyword", "quality") if caller_metadata else ("semantic", "quality")
    return PART_NAMES
