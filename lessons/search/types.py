"""The search engine's contract: what callers ask (`SearchRequest`) and what they get back
(`SearchResponse`). The API, the admin, the commands and the evaluation build a request and call
`lessons.search.search(request=...)`; nothing else ranks."""

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from lessons.models import Team

Kind = Literal["lessons", "memories"]
Mode = Literal["hybrid", "semantic", "text"]
Fusion = Literal["weighted", "rrf"]

KINDS: tuple[str, ...] = ("lessons", "memories")
MODES: tuple[str, ...] = ("hybrid", "semantic", "text")
FUSIONS: tuple[str, ...] = ("weighted", "rrf")
MAX_LIMIT = 100
MAX_QUERY_CHARS = 2_000
MAX_CONTEXT_CHARS = 50_000


class SearchRequestError(ValueError):
    """A request the engine cannot run; `field` names the culprit for a 4xx answer."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class SearchFilters:
    """Hard filters, applied inside both legs' SQL (never after ranking)."""

    statuses: tuple[str, ...] = ("confirmed",)  # lessons only
    categories: tuple[str, ...] = ()  # lessons: category IN; memories: categories overlap
    phase: str | None = None  # lessons: mapped to categories by settings.SEARCH_PHASE_CATEGORIES
    tech_stacks: tuple[str, ...] = ()  # lessons: overlap
    project_types: tuple[str, ...] = ()  # lessons: overlap
    tags: tuple[str, ...] = ()  # lessons: overlap
    min_importance: int | None = None  # memories
    max_importance: int | None = None  # memories (the admin's exact importance is min = max)
    people: tuple[str, ...] = ()  # memories: overlap (case-insensitive)
    person_like: str | None = None  # memories: a name in people (trigram-tolerant) or in the text
    emotions: tuple[str, ...] = ()  # memories: overlap
    since: datetime | None = None  # memories: occurred_at (else created_at); lessons: updated_at
    until: datetime | None = None
    include_versions: bool = False  # memories: also earlier versions of each memory
    only_versions: bool = False  # memories: earlier versions alone (the admin's "Earlier versions")
    embedding_states: tuple[str, ...] = ()  # the admin's embedding filter: fresh, stale, missing (any of)

    @property
    def narrows(self) -> bool:
        """Whether a filter beyond the team and its default status or versions applies: a set of
        rows the exact-term leg can intersect with a term's index (exact.py)."""
        return self != replace(SearchFilters(), statuses=self.statuses, include_versions=self.include_versions)


@dataclass(frozen=True)
class SearchRequest:
    team: Team
    query: str = ""
    kind: Kind = "lessons"
    mode: Mode = "hybrid"
    limit: int = 10
    context: str = ""  # the caller's situation (editor contents, file, conversation)
    filters: SearchFilters = field(default_factory=SearchFilters)
    # Who is asking: scored as metadata overlap (and the tech-stack penalty), not filtered on.
    tech_stack: tuple[str, ...] = ()
    project_type: str | None = None
    fusion: Fusion = "weighted"
    weights: dict[str, float] | None = None  # {"semantic", "keyword", "quality"}; None: settings
    similarity_floor: float | None = None  # None: settings.SEARCH_SIMILARITY_FLOOR
    explain: bool = False
    # The keyword leg's query when it should differ from `query` (e.g. only the feature's name in
    # "implementation patterns for FEATURE", so the template's words match nothing); None: `query`.
    keyword_query: str | None = None


@dataclass
class SearchHit:
    id: int
    external_id: str | None
    kind: str  # "lesson" | "memory"
    fields: dict  # the row's fields, never the embedding
    score: float  # 0..1
    relevance: str  # "high" | "medium" | "low"
    found_by: list[str]  # "primary" and/or "contextual"
    explanation: dict | None = None  # with explain: semantic, keyword (+ matched terms), metadata, quality, penalty
    collapsed_ids: list[int] = field(default_factory=list)  # same-title lessons merged into this hit


@dataclass
class SearchResponse:
    mode: str
    degraded: bool
    degraded_reason: str | None
    fallback: str | None  # None, or "recency" when no query or nothing was found
    timings_ms: dict[str, float]
    results: list[SearchHit]
    candidates: dict[str, int] = field(default_factory=dict)  # per leg, and duplicates removed
    context_keywords: list[str] = field(default_factory=list)  # what the contextual query added
    total: int | None = None  # a shortcut that counts: how many rows its filter matches in all

    def returned_ids(self) -> list[int]:
        """Every row the answer returned, a same-title lesson folded into a hit included: an agent
        that used the folded lesson can report it (it was refused as "not among the results")."""
        return list(dict.fromkeys(i for hit in self.results for i in (hit.id, *hit.collapsed_ids)))
