"""Hybrid search over lessons and memories. See `lessons.search.types` for the contract."""

from lessons.search.engine import search
from lessons.search.serialise import search_response_as_dict
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
    "search",
    "search_response_as_dict",
]
