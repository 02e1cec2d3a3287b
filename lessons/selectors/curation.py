"""Reads for curators: near-duplicate pairs, the proposals queue with each proposal's nearest
confirmed lessons, and a memory's history with word-level diffs.

Nearness is cosine distance (`<=>`, what the HNSW indexes are built for: `vector_cosine_ops`),
always within one team. Duplicates are found in one SQL statement: for each row, a LATERAL
subquery takes its k nearest rows of the same team by `embedding <=> row.embedding`, which
PostgreSQL answers from the HNSW index (one index probe per row, not a comparison of every pair);
the pairs closer than the threshold are then put in (low id, high id) order, deduplicated, those a
curator dismissed are left out, and the closest come first.
"""

import difflib
import re
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Count, Q

from lessons.models import (
    DuplicateDismissal,
    DuplicateKind,
    Lesson,
    LessonMerge,
    LessonStatus,
    Memory,
    MemoryMerge,
    Team,
)
from lessons.selectors.admin_search import admin_teams

# Cosine distance under which two rows count as duplicates by default (similarity >= 0.85); on the
# demo data it finds lessons that restate one another, and no pair that merely shares a topic.
DEFAULT_DUPLICATE_THRESHOLD = 0.15
MAX_DUPLICATE_THRESHOLD = 1.0
DEFAULT_DUPLICATE_LIMIT = 50
MAX_DUPLICATE_LIMIT = 200
# Neighbours looked at per row. A row with more than this many near copies still shows in pairs
# with the closest ones; merging those brings the next ones up.
NEIGHBOURS_PER_ROW = 5
# HNSW candidate list per probe for duplicates. Near copies are what an HNSW graph finds best, so a
# short list suffices: on the demo data 20 finds exactly the pairs an exact scan finds (tested),
# at half the time of 100 (65 against 130 ms for the 185 probes, on a busy 2-core machine).
DUPLICATE_EF_SEARCH = 20
PROPOSAL_NEIGHBOURS = 3
# The rows a page of the admin shows without an embedding column: vectors never leave the database.
_DEFERRED = ("embedding", "search_vector")


def _vector_settings(cursor, *, ef_search: int | None = None) -> None:
    """Settings for this transaction only. An iterative index scan keeps going until the team
    filter has let k rows through, so a small team inside a big table still finds its neighbours.
    `enable_sort = off` makes the planner take the HNSW index for the per-row nearest neighbours:
    on a table of a few hundred rows it otherwise reads all of the team's rows and sorts them once
    per row (290 ms for the demo's 185 lessons, against 50 ms by the index). Sorts the statement
    needs (the final ORDER BY) still run."""
    cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
    ef_search = ef_search or int(getattr(settings, "SEARCH_HNSW_EF_SEARCH", 100))
    cursor.execute(f"SET LOCAL hnsw.ef_search = {int(ef_search)}")
    cursor.execute("SET LOCAL enable_sort = off")
    cursor.execute(f"SET LOCAL hnsw.max_scan_tuples = {int(getattr(settings, 'SEARCH_HNSW_MAX_SCAN_TUPLES', 20000))}")


def _validate_threshold_and_limit(threshold: float, limit: int) -> None:
    if not (0 < threshold <= MAX_DUPLICATE_THRESHOLD):
        raise ValidationError({"threshold": f"Use a cosine distance above 0 and at most {MAX_DUPLICATE_THRESHOLD}."})
    if not (1 <= limit <= MAX_DUPLICATE_LIMIT):
        raise ValidationError({"limit": f"Use 1..{MAX_DUPLICATE_LIMIT}."})


# --- duplicates -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DuplicatePair:
    first: Lesson | Memory  # the lower id
    second: Lesson | Memory
    distance: float

    @property
    def similarity(self) -> float:
        return 1.0 - self.distance

    @property
    def both(self) -> tuple:
        return (self.first, self.second)


_PAIRS_SQL = """
WITH near AS MATERIALIZED (
    SELECT LEAST(a.id, n.id) AS low_id, GREATEST(a.id, n.id) AS high_id, n.distance
      FROM {table} AS a
     CROSS JOIN LATERAL (
           SELECT b.id, b.embedding <=> a.embedding AS distance
             FROM {table} AS b
            WHERE b.team_id = a.team_id AND b.embedding IS NOT NULL AND b.id <> a.id AND {row_filter_b}
            ORDER BY b.embedding <=> a.embedding
            LIMIT %(neighbours)s
           ) AS n
     WHERE a.team_id = %(team_id)s AND a.embedding IS NOT NULL AND {row_filter_a}
       AND n.distance < %(threshold)s
)
SELECT low_id, high_id, MIN(distance) AS distance
  FROM near
 WHERE NOT EXISTS (
       SELECT 1 FROM {dismissals} AS d
        WHERE d.team_id = %(team_id)s AND d.kind = %(kind)s AND d.low_id = near.low_id AND d.high_id = near.high_id
       )
 GROUP BY low_id, high_id
 ORDER BY distance, low_id, high_id
 LIMIT %(limit)s
"""


def _pair_rows(*, model, kind: str, team: Team, row_filter: str, params: dict, threshold: float, limit: int):
    sql = _PAIRS_SQL.format(
        table=model._meta.db_table,
        dismissals=DuplicateDismissal._meta.db_table,
        row_filter_a=row_filter.format(t="a"),
        row_filter_b=row_filter.format(t="b"),
    )
    with transaction.atomic(), connection.cursor() as cursor:
        _vector_settings(cursor, ef_search=DUPLICATE_EF_SEARCH)
        cursor.execute(
            sql,
            {
                **params,
                "team_id": team.pk,
                "kind": kind,
                "threshold": threshold,
                "limit": limit,
                "neighbours": NEIGHBOURS_PER_ROW,
            },
        )
        return cursor.fetchall()


def _pairs(model, rows, queryset) -> list[DuplicatePair]:
    ids = {pk for low, high, _ in rows for pk in (low, high)}
    found = queryset.filter(pk__in=ids).defer(*_DEFERRED).in_bulk()
    # A row deleted between the two statements drops its pairs.
    return [DuplicatePair(found[low], found[high], float(distance)) for low, high, distance in rows if low in found and high in found]


def lesson_duplicate_pairs(
    *,
    team: Team,
    threshold: float = DEFAULT_DUPLICATE_THRESHOLD,
    limit: int = DEFAULT_DUPLICATE_LIMIT,
    statuses: tuple[str, ...] = (LessonStatus.CONFIRMED, LessonStatus.PROPOSED),
) -> list[DuplicatePair]:
    """Pairs of the team's lessons (of `statuses`; rejected ones are left alone by default) whose
    embeddings are closer than `threshold` (cosine distance), closest first, without the pairs a
    curator marked "not a duplicate". Raises ValidationError for a threshold outside (0, 1] or a
    limit outside 1..200."""
    _validate_threshold_and_limit(threshold, limit)
    rows = _pair_rows(
        model=Lesson,
        kind=DuplicateKind.LESSON,
        team=team,
        row_filter="{t}.status = ANY(%(statuses)s)",
        params={"statuses": [str(status) for status in statuses]},
        threshold=threshold,
        limit=limit,
    )
    return _pairs(Lesson, rows, Lesson.objects.filter(team=team))


def memory_duplicate_pairs(
    *, team: Team, threshold: float = DEFAULT_DUPLICATE_THRESHOLD, limit: int = DEFAULT_DUPLICATE_LIMIT
) -> list[DuplicatePair]:
    """Pairs of the team's current memories (earlier versions are history, not duplicates) whose
    embeddings are closer than `threshold`, closest first, without the dismissed pairs."""
    _validate_threshold_and_limit(threshold, limit)
    rows = _pair_rows(
        model=Memory,
        kind=DuplicateKind.MEMORY,
        team=team,
        row_filter="{t}.current_version_id IS NULL",
        params={},
        threshold=threshold,
        limit=limit,
    )
    return _pairs(Memory, rows, Memory.objects.filter(team=team, current_version__isnull=True))


# --- proposals --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Neighbour:
    lesson: Lesson
    similarity: float


@dataclass(frozen=True)
class ProposalReview:
    proposal: Lesson
    neighbours: list[Neighbour] = field(default_factory=list)


_PROPOSALS_SQL = """
SELECT p.id, n.id, n.distance
  FROM (SELECT id, embedding, created_at
          FROM {table}
         WHERE team_id = %(team_id)s AND status = %(proposed)s
         ORDER BY created_at, id
         LIMIT %(limit)s OFFSET %(offset)s) AS p
  LEFT JOIN LATERAL (
       SELECT c.id, c.embedding <=> p.embedding AS distance
         FROM {table} AS c
        WHERE c.team_id = %(team_id)s AND c.status = %(confirmed)s AND c.embedding IS NOT NULL
          AND p.embedding IS NOT NULL
        ORDER BY c.embedding <=> p.embedding
        LIMIT %(neighbours)s
       ) AS n ON TRUE
 ORDER BY p.created_at, p.id, n.distance
"""


def proposal_count(*, team: Team) -> int:
    return Lesson.objects.filter(team=team, status=LessonStatus.PROPOSED).count()


def proposal_queue_team() -> Team | None:
    """The team the proposals queue opens on when none is asked for: the one with the most proposals
    waiting, the first by slug among equals (and when none waits anywhere); None without teams."""
    waiting = Count("lessons", filter=Q(lessons__status=LessonStatus.PROPOSED))
    return Team.objects.annotate(waiting=waiting).order_by("-waiting", "slug").first()


# The rows each duplicates page pairs, from Team: embedded, lessons not rejected, current memories.
_PAIRABLE = {
    "lessons": Q(lessons__embedding__isnull=False, lessons__status__in=[LessonStatus.CONFIRMED, LessonStatus.PROPOSED]),
    "memories": Q(memories__embedding__isnull=False, memories__current_version__isnull=True),
}


def duplicates_opening_team(*, kind: str) -> Team | None:
    """The team a duplicates page opens on when none is asked for: the curated team (evaluation
    teams are benchmark corpora, left out as on the lists) with the most rows the page pairs, the
    first by slug among equals; None without one. The first by slug was `acme` with one lesson."""
    pairable = Count(kind, filter=_PAIRABLE[kind])
    return admin_teams().annotate(pairable=pairable).order_by("-pairable", "slug").first()


def proposals_waiting_by_team() -> dict[int, int]:
    """How many proposals wait in each team that has any, by team id (one query)."""
    waiting = Lesson.objects.filter(status=LessonStatus.PROPOSED).values("team").annotate(n=Count("id"))
    return {row["team"]: row["n"] for row in waiting}


def proposal_queue(
    *, team: Team, limit: int = 20, offset: int = 0, neighbours: int = PROPOSAL_NEIGHBOURS
) -> list[ProposalReview]:
    """The team's proposed lessons, oldest first (a queue), each with its `neighbours` nearest
    confirmed lessons of the same team by meaning (cosine), closest first. A proposal not embedded
    yet has no neighbours. One statement for the page, plus one to fetch the rows."""
    with transaction.atomic(), connection.cursor() as cursor:
        _vector_settings(cursor)
        cursor.execute(
            _PROPOSALS_SQL.format(table=Lesson._meta.db_table),
            {
                "team_id": team.pk,
                "proposed": LessonStatus.PROPOSED.value,
                "confirmed": LessonStatus.CONFIRMED.value,
                "limit": limit,
                "offset": offset,
                "neighbours": neighbours,
            },
        )
        rows = cursor.fetchall()
    ids = {pk for proposal_id, neighbour_id, _ in rows for pk in (proposal_id, neighbour_id) if pk is not None}
    found = Lesson.objects.filter(team=team, pk__in=ids).defer(*_DEFERRED).in_bulk()
    queue: dict[int, ProposalReview] = {}
    for proposal_id, neighbour_id, distance in rows:
        if proposal_id not in found:
            continue
        review = queue.setdefault(proposal_id, ProposalReview(found[proposal_id]))
        if neighbour_id in found:
            review.neighbours.append(Neighbour(found[neighbour_id], 1.0 - float(distance)))
    return list(queue.values())


def lesson_merge_history(*, lesson: Lesson) -> list[LessonMerge]:
    """The lessons merged into `lesson`, newest merge first."""
    return list(lesson.merges.all())


def memory_merge_history(*, memory: Memory) -> list[MemoryMerge]:
    """The memories merged into `memory` (a current memory), newest merge first."""
    return list(memory.merges.all())


def lesson_merged_into(*, lesson_id: int) -> LessonMerge | None:
    """The record of the merge that took the lesson `lesson_id` away, on the lesson that holds it
    now (records move along when that lesson is merged again); None when it was never merged."""
    return LessonMerge.objects.select_related("lesson").filter(merged_lesson_id=lesson_id).first()


def memory_merged_into(*, memory_id: int) -> MemoryMerge | None:
    """As `lesson_merged_into`, for a memory."""
    return MemoryMerge.objects.select_related("memory").filter(merged_memory_id=memory_id).first()


# --- memory history -----------------------------------------------------------------------------

_TOKENS = re.compile(r"\s+|[\w'’-]+|[^\w\s]")


@dataclass(frozen=True)
class DiffPart:
    op: str  # "equal", "insert", "delete"
    text: str


def word_diff(old: str, new: str) -> list[DiffPart]:
    """What changed from `old` to `new`, word by word, as consecutive parts: "equal" text, then a
    changed run as its "delete" followed by its "insert". Whitespace alone between two changes is
    folded into them, so a rewritten sentence reads as one change, not as words between spaces."""
    before, after = _TOKENS.findall(old or ""), _TOKENS.findall(new or "")
    # Segments: ["equal", text] or ["change", deleted, inserted].
    segments: list[list[str]] = []
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            segments.append(["equal", "".join(before[i1:i2])])
        elif segments and segments[-1][0] == "change":
            segments[-1][1] += "".join(before[i1:i2])
            segments[-1][2] += "".join(after[j1:j2])
        else:
            segments.append(["change", "".join(before[i1:i2]), "".join(after[j1:j2])])
    folded: list[list[str]] = []
    for index, segment in enumerate(segments):
        between_changes = (
            segment[0] == "equal"
            and not segment[1].strip()
            and folded
            and folded[-1][0] == "change"
            and index + 1 < len(segments)
        )
        if between_changes:
            folded[-1][1] += segment[1]
            folded[-1][2] += segment[1]
        elif segment[0] == "change" and folded and folded[-1][0] == "change":
            folded[-1][1] += segment[1]
            folded[-1][2] += segment[2]
        else:
            folded.append(list(segment))
    parts = []
    for segment in folded:
        if segment[0] == "equal":
            parts.append(DiffPart("equal", segment[1]))
            continue
        if segment[1]:
            parts.append(DiffPart("delete", segment[1]))
        if segment[2]:
            parts.append(DiffPart("insert", segment[2]))
    return parts


@dataclass(frozen=True)
class MemoryVersionEntry:
    version: Memory
    is_current: bool
    content_diff: list[DiffPart] | None  # None for the first version: nothing to compare with
    details_diff: list[DiffPart] | None
    # When this text was written: an earlier version's created_at (services.memories); for the
    # current one, when the version before it was replaced. Not updated_at: for an earlier version
    # that is when it was replaced, and a later edit of the people or importance moves the current's.
    written_at: datetime

    @property
    def changed(self) -> bool:
        diffs = (self.content_diff or []) + (self.details_diff or [])
        return any(part.op != "equal" for part in diffs)


def memory_history(*, memory: Memory) -> list[MemoryVersionEntry]:
    """Every version of the memory `memory` belongs to (it may be the current memory or one of its
    earlier versions), oldest to newest, each with a word-level diff of its content and details
    against the version before it."""
    current_id = memory.current_version_id or memory.pk
    versions = list(
        Memory.objects.filter(Q(pk=current_id) | Q(current_version_id=current_id), team_id=memory.team_id)
        .defer(*_DEFERRED)
        .order_by("version", "pk")
    )
    entries = []
    previous = None
    for row in versions:
        entries.append(
            MemoryVersionEntry(
                version=row,
                is_current=row.pk == current_id,
                content_diff=word_diff(previous.content, row.content) if previous else None,
                details_diff=word_diff(previous.details, row.details) if previous else None,
                written_at=previous.updated_at if previous and row.pk == current_id else row.created_at,
            )
        )
        previous = row
    return entries
