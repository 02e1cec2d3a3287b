"""Hybrid search over lessons and memories. See `lessons.search.types` for the contract."""

from lessons.search.types import (
    FUSIONS,
    KINDS,
    MAX_LIMIT,
    MODES,
    SearchFilters,
    SearchHit,
    SearchRequest,
    SearchRequestError,
    SearchResponse,
)

__all__ = [
    "FUSIONS",
    "KINDS",
    "MAX_LIMIT",
    "MODES",
    "SearchFilters",
    "SearchHit",
    "SearchRequest",
    "SearchRequestError",
    "SearchResponse",
]
