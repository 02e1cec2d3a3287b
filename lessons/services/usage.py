"""Learning from use (issue 14): what searches returned, and which results agents used.

- `search_record` keeps one search-shaped answer (team, query, mode, result ids in order, time)
  under a new `search_id` and adds 1 to `returned_count` of every row it returned (an earlier
  version of a memory: to its memory, as its verdicts): one SQL
  statement (an INSERT and an `UPDATE ... WHERE id = ANY(...)` in one CTE), whatever the number
  of results. It never touches `updated_at`, and it is the callers' choice (API, MCP, the CLI's
  `search --json`), never the engine's: the engine stays a pure read.
- `feedback_record` stores an agent's verdicts, once per (search, result): the first verdict
  stands, a repeat is reported as already recorded and counts nothing. Counts move in the same
  transaction as the verdicts, by increments in SQL, so concurrent reports cannot lose one. A
  result merged into another row since the search counts for the row that absorbed it (its merge
  record says which), each verdict once, also when several reach one row; an earlier version of
  a memory (a `search-versions` hit) counts for the memory as it stands, the same way; one deleted
  since is reported as gone, and nothing is recorded for it.
- `searches_purge` deletes searches older than the retention (their verdicts with them); the
  counts on the rows stay.
- `usage_reset` zeroes a team's counts and forgets its searches (the simulation starts clean).
"""

import logging
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DatabaseError, connection, transaction
from django.utils import timezone
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random

from lessons.models import FeedbackVerdict, Lesson, LessonMerge, Memory, MemoryMerge, SearchRecord, Team
from lessons.selectors.usage import versions_current_memory

logger = logging.getLogger("lessons.usage")

SOURCES = ("api", "mcp", "cli", "simulation")
TABLES = {"lessons": Lesson._meta.db_table, "memories": Memory._meta.db_table}
# Where a row merged away is now: (merge record, its field holding the merged id, the kept row's id)
MERGES = {"lessons": (LessonMerge, "merged_lesson_id", "lesson_id"),
          "memories": (MemoryMerge, "merged_memory_id", "memory_id")}
MAX_QUERY_RECORD_CHARS = 2_000
DEADLOCK_ATTEMPTS = 3


def _deadlocked(error: BaseException) -> bool:
    return getattr(error.__cause__, "sqlstate", None) == "40P01"


def _attempts() -> Retrying:
    """Tries of a counting transaction: one the database ended in a deadlock (it rolled back,
    nothing of it stays) is run again after a few milliseconds. Locking in id order avoids most;
    a report whose row a merge moved between its lookup and its lock takes a second batch of
    locks, which can still meet another's in the opposite order."""
    return Retrying(retry=retry_if_exception(_deadlocked), stop=stop_after_attempt(DEADLOCK_ATTEMPTS),
                    wait=wait_random(0.005, 0.05), reraise=True)


def search_record(
    *,
    team: Team,
    kind: str,
    operation: str,
    query: str,
    mode: str,
    result_ids: Sequence[int],
    source: str,
    now: datetime | None = None,
) -> uuid.UUID | None:
    """Keep the search and count its results as returned; its id, or None when the database
    refused (logged): an answer is never lost for want of its record, it only has no search_id."""
    if kind not in TABLES:
        raise ValueError(f"kind: unknown kind {kind!r}")
    if source not in SOURCES:
        raise ValueError(f"source: unknown source {source!r}")
    search_id = uuid.uuid4()
    now = now or timezone.now()
    ids = [int(i) for i in result_ids]
    table = TABLES[kind]
    # The rows are locked in id order before the UPDATE: an UPDATE locks rows in the order it meets
    # them in the heap, which differs between snapshots as rows move, and concurrent searches
    # sharing results deadlocked (most answered without a search_id). An earlier version of a
    # memory (a search-versions hit) is returned for its memory, as its verdicts count for it
    # (feedback_record): on the version row, which no search ranks by its counts, a use came
    # without its return.
    reached = ("SELECT coalesce(r.current_version_id, r.id) AS id, count(*) AS n" if kind == "memories"
               else "SELECT r.id, 1 AS n")
    statement = (
        "WITH record AS ("
        f" INSERT INTO {SearchRecord._meta.db_table}"
        " (id, team_id, kind, operation, query, mode, source, result_ids, created_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s::bigint[], %s) RETURNING id),"
        f" reached AS ({reached} FROM {table} AS r WHERE r.team_id = %s AND r.id = ANY(%s::bigint[]) GROUP BY 1),"
        f" locked AS MATERIALIZED (SELECT t.id, reached.n FROM {table} AS t JOIN reached USING (id)"
        " WHERE t.team_id = %s ORDER BY t.id FOR NO KEY UPDATE OF t)"
        f" UPDATE {table} SET returned_count = returned_count + locked.n, last_returned_at = %s"
        f" FROM locked WHERE {table}.id = locked.id AND EXISTS (SELECT 1 FROM record)"
    )
    params = [
        search_id, team.pk, kind, operation[:64], (query or "")[:MAX_QUERY_RECORD_CHARS], mode, source, ids, now,
        team.pk, sorted(set(ids)), team.pk, now,
    ]
    try:
        for attempt in _attempts():
            with attempt, transaction.atomic(), connection.cursor() as cursor:
                # A record is not worth a disk flush: after a crash the last few may be missing (the
                # database stays consistent), and the search does not wait for the WAL to reach disk.
                cursor.execute("SET LOCAL synchronous_commit TO OFF")
                cursor.execute(statement, params)
    except DatabaseError:
        logger.exception("could not record a search of team %s; answered without a search_id", team.slug)
        return None
    return search_id


@dataclass
class FeedbackResult:
    search_id: uuid.UUID
    used: list[int] = field(default_factory=list)  # newly recorded
    not_helpful: list[int] = field(default_factory=list)  # newly recorded
    already_recorded: list[int] = field(default_factory=list)  # a verdict existed: nothing counted
    merged: dict[int, int] = field(default_factory=dict)  # recorded id -> the row it counted for
    versions: dict[int, int] = field(default_factory=dict)  # recorded earlier version -> its current memory
    gone: list[int] = field(default_factory=list)  # deleted since the search: nothing recorded

    def as_dict(self) -> dict:
        return {
            "search_id": str(self.search_id),
            "recorded": {"used": self.used, "not_helpful": self.not_helpful},
            "already_recorded": self.already_recorded,
            "merged": [{"id": merged, "counted_for": kept} for merged, kept in self.merged.items()],
            "gone": self.gone,
            "versions": [{"id": version, "counted_for": memory} for version, memory in self.versions.items()],
        }


def _unique(values: Iterable[int]) -> list[int]:
    return list(dict.fromkeys(int(v) for v in values))


def feedback_record(
    *, team: Team, search_id: uuid.UUID | str, used: Iterable[int] = (), not_helpful: Iterable[int] = (),
    now: datetime | None = None,
) -> FeedbackResult:
    """Record which results of a search the agent used and which were not helpful.

    Raises SearchRecord.DoesNotExist for an unknown search or another team's (the same answer:
    another team's searches do not exist for you), ValidationError naming `used` or
    `not_helpful` for an id that was not among the search's results or is in both lists."""
    record = SearchRecord.objects.filter(team=team, pk=search_id).only("id", "kind", "result_ids").first()
    if record is None:
        missing = SearchRecord.DoesNotExist(f"search {search_id} does not exist")
        missing.field = "search_id"  # the API's 404 names the field at fault
        raise missing
    used, not_helpful = _unique(used), _unique(not_helpful)
    returned = set(record.result_ids)
    problems = {}
    for name, ids in (("used", used), ("not_helpful", not_helpful)):
        strangers = [i for i in ids if i not in returned]
        if strangers:
            problems[name] = (
                f"not among the results of search {record.pk}: {', '.join(map(str, strangers))}"
            )
    both = sorted(set(used) & set(not_helpful))
    if both and "not_helpful" not in problems:
        problems["not_helpful"] = f"also reported as used: {', '.join(map(str, both))}; give each result one verdict"
    if problems:
        raise ValidationError(problems)

    now = now or timezone.now()
    verdicts = [(i, FeedbackVerdict.USED) for i in used] + [(i, FeedbackVerdict.NOT_HELPFUL) for i in not_helpful]
    if not verdicts:
        return FeedbackResult(search_id=record.pk)
    for attempt in _attempts():
        with attempt:
            result = _count_verdicts(team=team, search_id=record.pk, kind=record.kind, verdicts=verdicts,
                                     used=used, not_helpful=not_helpful, now=now)
    return result


def _count_verdicts(*, team: Team, search_id: uuid.UUID, kind: str, verdicts: list[tuple[int, str]],
                    used: list[int], not_helpful: list[int], now: datetime) -> FeedbackResult:
    """One transaction: insert the verdicts not given yet and move the counts of their rows."""
    table = TABLES[kind]
    result = FeedbackResult(search_id=search_id)
    with transaction.atomic(), connection.cursor() as cursor:
        ids = [i for i, _ in verdicts]
        # An earlier version's counts sat on its own row, which no search ranks and no answer shows:
        # the verdict is on what the memory says, so it counts for the memory.
        current_of = versions_current_memory(team=team, ids=ids) if kind == "memories" else {}
        holders = _rows_holding(team=team, kind=kind, ids=ids, current_of=current_of)
        result.gone = [i for i, _ in verdicts if i not in holders]
        verdicts = [(i, verdict) for i, verdict in verdicts if i in holders]
        # One verdict per (search, result): the unique constraint decides, also between two
        # concurrent reports, and only the rows actually inserted move the counts.
        cursor.execute(
            "INSERT INTO lessons_searchfeedback (search_id, result_id, verdict, created_at)"
            " SELECT %s, v.result_id, v.verdict, %s FROM unnest(%s::bigint[], %s::varchar[]) AS v(result_id, verdict)"
            " ON CONFLICT (search_id, result_id) DO NOTHING RETURNING result_id, verdict",
            [search_id, now, [i for i, _ in verdicts], [str(v) for _, v in verdicts]],
        )
        inserted = {row[0]: row[1] for row in cursor.fetchall()}
        result.used = [i for i in used if inserted.get(i) == FeedbackVerdict.USED]
        result.not_helpful = [i for i in not_helpful if inserted.get(i) == FeedbackVerdict.NOT_HELPFUL]
        result.already_recorded = [i for i, _ in verdicts if i not in inserted]
        recorded = [*result.used, *result.not_helpful]
        result.versions = {i: holders[i] for i in recorded if i in current_of}
        result.merged = {i: holders[i] for i in recorded if holders[i] != i and i not in current_of}
        # Every verdict recorded counts, also two that reach one row (A and B used, B merged into A
        # since; a memory and its earlier version): A counted once, and ended with less than a merge
        # made after the same report sums.
        if result.used:
            holder_ids, times = _per_holder(holders, result.used)
            cursor.execute(
                f"UPDATE {table} SET used_count = used_count + v.times, last_used_at = %s"
                " FROM unnest(%s::bigint[], %s::integer[]) AS v(id, times)"
                f" WHERE {table}.team_id = %s AND {table}.id = v.id",
                [now, holder_ids, times, team.pk],
            )
        if result.not_helpful:
            holder_ids, times = _per_holder(holders, result.not_helpful)
            cursor.execute(
                f"UPDATE {table} SET not_helpful_count = not_helpful_count + v.times"
                " FROM unnest(%s::bigint[], %s::integer[]) AS v(id, times)"
                f" WHERE {table}.team_id = %s AND {table}.id = v.id",
                [holder_ids, times, team.pk],
            )
    return result


def _per_holder(holders: dict[int, int], ids: list[int]) -> tuple[list[int], list[int]]:
    """The rows holding `ids`, in id order, and how many of `ids` each holds."""
    times = Counter(holders[i] for i in ids)
    ordered = sorted(times)
    return ordered, [times[holder] for holder in ordered]


def _rows_holding(*, team: Team, kind: str, ids: list[int], current_of: dict[int, int]) -> dict[int, int]:
    """Each of `ids` (a search's results) -> the row that holds it now: itself, its current memory
    for an earlier version (`current_of`, looked up by the caller), or the row a merge since the
    search folded it into (merge records move to whoever absorbs the kept row, so one lookup is
    enough). An id deleted since is left out. The rows are locked, in id order, until the
    caller's transaction ends: a merge or delete waits for the counts. FOR NO KEY UPDATE, the lock
    the counts' UPDATE takes anyway: two reports that both held FOR SHARE and then both wanted to
    update the rows deadlocked.

    The holders are found first, unlocked, and every row is locked in ONE id-ordered statement, as
    `search_record` locks: the results still present used to be locked first and the merged rows'
    holders in a second statement, so a report held C and waited for A while a search held A and
    waited for C (most reports of searches made before a merge ended in a deadlock). A merge that
    commits between the lookup and the lock moves a row the lock then misses: looked up again. A
    version's memory is locked in that same statement; a version whose memory was deleted or merged
    away meanwhile went with it, and the lock misses it: gone (a merge record names only the memory)."""
    table = TABLES[kind]
    model, merged_field, kept_field = MERGES[kind]

    def absorbed_into(candidates: list[int]) -> dict[int, int]:
        return dict(
            model.objects.filter(team=team, **{f"{merged_field}__in": candidates}).values_list(merged_field, kept_field)
        )

    absorbed = absorbed_into(ids)
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id FROM {table} WHERE team_id = %s AND id = ANY(%s::bigint[]) ORDER BY id FOR NO KEY UPDATE",
                [team.pk, sorted({*ids, *current_of.values(), *absorbed.values()})],
            )
            locked = {row[0] for row in cursor.fetchall()}
        holders = {i: current_of.get(i, i) if i in locked else absorbed.get(i) for i in ids}
        # A locked row cannot be merged away until we commit; only an id whose holder was missed can
        # have moved since the lookup (merged, or its holder merged or deleted).
        unheld = [i for i in ids if holders[i] not in locked]
        now_absorbed = absorbed_into(unheld) if unheld else {}
        if all(now_absorbed.get(i) == absorbed.get(i) for i in unheld):
            return {i: holder for i, holder in holders.items() if holder in locked}
        absorbed = {**{i: kept for i, kept in absorbed.items() if i not in unheld}, **now_absorbed}


def searches_purge(*, older_than_days: int | None = None, now: datetime | None = None, dry_run: bool = False) -> int:
    """Delete searches (and their verdicts) older than the retention; how many."""
    days = settings.SEARCH_RECORD_RETENTION_DAYS if older_than_days is None else older_than_days
    if days < 0:
        raise ValueError("older_than_days: must be 0 or more")
    cutoff = (now or timezone.now()) - timedelta(days=days)
    old = SearchRecord.objects.filter(created_at__lt=cutoff)
    if dry_run:
        return old.count()
    deleted, per_model = old.delete()  # their verdicts with them
    return per_model.get(SearchRecord._meta.label, 0)


@transaction.atomic
def usage_reset(*, team: Team) -> None:
    """Zero the team's usage counts and forget its searches (for a simulation that starts clean)."""
    SearchRecord.objects.filter(team=team).delete()
    for model in (Lesson, Memory):
        model.objects.filter(team=team).exclude(returned_count=0, used_count=0, not_helpful_count=0).update(
            returned_count=0, used_count=0, not_helpful_count=0, last_returned_at=None, last_used_at=None
        )
