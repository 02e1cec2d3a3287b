"""What the engine needs to know about each kind of row it searches, said once.

Every other module of the search package asks `SEARCH_KINDS[kind]` instead of branching on
`kind == "lessons"`: the table, the fields a hit carries, which columns hold exact terms, how
quality is computed, and whether same-title rows collapse.
"""

import math
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from django.conf import settings

from lessons.models import Lesson, Memory
from lessons.search.usage import DEFAULT_HALF_LIFE_DAYS, DEFAULT_PRIOR, usage_signal

# Lessons: frequency reaches full marks in the quality part at this many sightings (log-scaled).
FREQUENCY_SATURATION = 10
# Memories: recency halves every this many days.
RECENCY_HALF_LIFE_DAYS = 180

_NOT_TERM = re.compile(r"[^a-z0-9+#]")
# Letters Unicode does not decompose into a base letter and a mark, folded as PostgreSQL's
# unaccent() folds them (the keyword index reads every text so, lessons.models.KeywordText).
_UNDECOMPOSED = str.maketrans({"ø": "o", "æ": "ae", "œ": "oe", "ß": "ss", "đ": "d", "ð": "d", "þ": "th",
                               "ł": "l", "ı": "i", "ħ": "h", "ŧ": "t"})
_PARTS = re.compile(r"[-_\s/]+")


@lru_cache(maxsize=65_536)  # the same tags and title words come back in every search
def canonical(term: str) -> str:
    """'Next.js' -> 'nextjs', 'RLS' -> 'rls', 'C++' -> 'c++', 'Café' -> 'cafe': how exact terms are
    compared. Accents are folded (before, 'Café' was 'caf' and matched no row saying 'cafe')."""
    return _NOT_TERM.sub("", folded(term))


# A dot between digits is a version's ("java 1.8" is not "java 18", "python 3.10" not "python 3.1.0");
# everywhere else a dot, space or hyphen only spells the term.
_VERSION_DOT = re.compile(r"(?<=\d)\.(?=\d)")


def term_key(term: str) -> str:
    """What two spellings of one whole term share: `canonical` with a version's dots kept ('Java 1.8'
    -> 'java1.8', 'java 18' -> 'java18'). Where whole stored terms are compared (storing each once, a
    filter's allowed values, the caller's tech stack); canonical alone read Java 8 as Java 18."""
    return ".".join(canonical(part) for part in _VERSION_DOT.split(term)) or term


def folded(term: str) -> str:
    """`term` lowercased and decomposed, its letters' accents apart as marks: what `canonical`
    keeps a-z, digits, + and # of."""
    return unicodedata.normalize("NFKD", term.lower().translate(_UNDECOMPOSED))


def _clip(value: float) -> float:
    return 0.0 if value < 0 else 1.0 if value > 1 else float(value)


def with_usage(quality: float, *, row: dict, now: datetime | None) -> float:
    """The quality part plus SEARCH_USAGE_WEIGHT x the usage signal (`lessons.search.usage`),
    capped at 1. Exactly `quality` for a row never reported used (or with the weight at 0), so
    without feedback rankings are those of before. The most a use can add to a score is
    w_quality x SEARCH_USAGE_WEIGHT: a hit ahead by more than that cannot be passed by usage alone."""
    if not row.get("used_count"):
        return quality
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


def lesson_quality(row: dict, now: datetime | None) -> float:
    """0.7 x confidence + 0.3 x min(1, ln(1 + frequency) / ln(1 + FREQUENCY_SATURATION)), plus
    the usage signal (issue 14)."""
    frequency = max(1, int(row.get("frequency", 1)))
    frequency_part = min(1.0, math.log1p(frequency) / math.log1p(FREQUENCY_SATURATION))
    return with_usage(_clip(0.7 * float(row.get("confidence", 0.5)) + 0.3 * frequency_part), row=row, now=now)


def memory_quality(row: dict, now: datetime | None) -> float:
    """0.7 x importance / 10 + 0.3 x recency (halving every RECENCY_HALF_LIFE_DAYS from
    occurred_at, else updated_at), plus the usage signal (issue 14)."""
    importance = float(row.get("importance", 5)) / 10.0
    moment = row.get("occurred_at") or row.get("updated_at")
    recency = 0.0
    if moment is not None and now is not None:
        age_days = max(0.0, (now - moment).total_seconds() / 86400.0)
        recency = 0.5 ** (age_days / RECENCY_HALF_LIFE_DAYS)
    return with_usage(_clip(0.7 * importance + 0.3 * recency), row=row, now=now)


# Issue 14: how often agents got and used a row ride along with every candidate (the usage signal).
USAGE_FIELDS = ("returned_count", "used_count", "not_helpful_count", "last_returned_at", "last_used_at")


@dataclass(frozen=True)
class SearchKind:
    name: str  # "lessons", "memories": the request's `kind`
    hit_kind: str  # "lesson", "memory": a hit's `kind`
    model: type
    keyword_code: str  # the `kind` column of the keyword postings and statistics
    fields: tuple[str, ...]  # what a hit carries (never the embedding)
    # the long texts among them, which no score reads: fetched for the page's hits only
    display_fields: tuple[str, ...]
    exact_arrays: tuple[str, ...]  # array columns whose values are exact terms
    exact_scalars: tuple[str, ...]  # text columns whose value is an exact term
    exact_words: Callable[[dict], list[str]]  # words of a row that count as exact terms
    exact_order: str  # how the exact-term leg orders its rows (SQL over `t`)
    quality: Callable[[dict, datetime | None], float]
    collapse_same_title: bool  # rows with the same title become one hit
    caller_metadata: bool  # scored against the caller's tech stack and project type
    # array columns whose values, shared with a hybrid search's best hits, lift a row (label feedback)
    feedback_labels: tuple[str, ...] = ()
    # words naming who a row is about (memories: its people's names): a query naming one is evidence
    # the row answers it, whatever else the query asks
    subject_words: Callable[[dict], list[str]] = lambda row: []

    @property
    def table(self) -> str:
        return self.model._meta.db_table

    def quality_and_usage(self, row: dict, now: datetime | None) -> tuple[float, float]:
        """The quality part, and how much of it the usage signal added (explanations show it apart,
        so a curator can tell a well-rated row from a much-used one)."""
        quality = self.quality(row, now)
        if not row.get("used_count"):
            return quality, 0.0
        return quality, quality - self.quality({**row, "used_count": 0}, now)

    def exact_terms_of(self, row: dict) -> set[str]:
        """The terms a row carries exactly; hyphenated values count whole and in parts."""
        values = [*(v for column in self.exact_arrays for v in row.get(column, [])),
                  *(row.get(column, "") for column in self.exact_scalars)]
        terms = {canonical(value) for value in values}
        terms |= {canonical(part) for value in values for part in _PARTS.split(value)}
        terms |= {canonical(word) for word in self.exact_words(row)}
        terms.discard("")
        return terms

    def names_subject(self, row: dict, terms: list[str]) -> bool:
        """Whether one of the query's (canonical) terms is a word of a name the row is about."""
        named = {canonical(word) for word in self.subject_words(row)}
        return any(term in named for term in terms)


LESSONS = SearchKind(
    name="lessons",
    hit_kind="lesson",
    model=Lesson,
    keyword_code="l",
    fields=(
        "id", "external_id", "title", "description", "context", "recommendation", "category", "confidence",
        "frequency", "project_types", "tech_stacks", "tags", "status", "created_at", "updated_at", *USAGE_FIELDS,
    ),
    display_fields=("description", "context", "recommendation"),
    exact_arrays=("tags", "tech_stacks"),
    exact_scalars=("category",),
    exact_words=lambda row: row.get("title", "").split(),
    exact_order="t.confidence DESC, t.frequency DESC, t.id",
    quality=lesson_quality,
    collapse_same_title=True,
    caller_metadata=True,
    feedback_labels=("tags",),
)

def _people_words(row: dict) -> list[str]:
    return [word for name in row.get("people", []) for word in name.split()]


MEMORIES = SearchKind(
    name="memories",
    hit_kind="memory",
    model=Memory,
    keyword_code="m",
    fields=(
        "id", "external_id", "content", "details", "categories", "importance", "people", "emotions",
        "occurred_at", "version", "current_version_id", "created_at", "updated_at", *USAGE_FIELDS,
    ),
    display_fields=("content", "details"),
    exact_arrays=("categories", "emotions"),
    exact_scalars=(),
    exact_words=_people_words,
    subject_words=_people_words,
    exact_order="t.importance DESC, t.id",
    quality=memory_quality,
    collapse_same_title=False,
    caller_metadata=False,
    # none: LoCoMo's memories carry no categories to measure it on, and a memory's categories (8
    # kinds in the demo data: "person", "event", ...) are too broad to say two memories answer the
    # same question
    feedback_labels=(),
)

SEARCH_KINDS: dict[str, SearchKind] = {kind.name: kind for kind in (LESSONS, MEMORIES)}
TIMESTAMPS = frozenset({"created_at", "updated_at", "occurred_at", "last_returned_at", "last_used_at"})
