"""Concurrent inserts into one team: N writer processes, each with its own database connection,
insert synthetic rows through the services the API calls (`lesson_create`, `memory_create`), while
a sampler in the parent watches what the writers wait on in `pg_stat_activity` and `pg_locks`.

Two paths: "service" is the API's (full_clean, whose constraint checks are queries of their own,
then the INSERT: about 14 statements a row); "insert" saves the same row with one INSERT, so the
database's part (the row, its search vector, the postings and the team's stats row) dominates and
a queue on the stats row is not hidden behind Python time.

Processes, not threads: a service call spends about as long in Python (validation, the ORM) as in
the database, and under one GIL eight threads would queue on the interpreter, which would hide
(or mimic) the database contention being measured. Processes are what serves the API anyway
(gunicorn workers). They are forked, not spawned, so they inherit the configured database (under
pytest, the test database) and do not start the embedded server a second time; the parent closes
its connections before forking so no socket is shared, and each writer closes its own at the end.

Embeddings: inside `embeddings_deferred()` the services schedule nothing, so no model runs and no
task is queued per row; the rows stay pending (a backfill would embed them). The measured write is
the row, its generated search vector and the keyword index triggers, committed.

Every row carries the tag (lessons) or category (memories) MARKER, so a cleanup deletes only rows
a benchmark wrote, whatever else the team holds.
"""

import multiprocessing
import os
import queue
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from django.db import DatabaseError, connection, connections, transaction

from lessons.error_text import first_line
from lessons.management.commands.bench_search import CATEGORIES, OUTCOMES, PLACES, PROJECTS, TECH, TOPICS, VERBS
from lessons.models import Lesson, Memory, Team
from lessons.services.embeddings import embeddings_deferred
from lessons.services.lessons import lesson_create
from lessons.services.memories import memory_create

KINDS = ("lessons", "memories")
MARKER = "bench-writes"
START_TIMEOUT = 120  # seconds for every writer to connect and reach the start line
SAMPLE_INTERVAL = 0.05  # seconds between two looks at pg_stat_activity
# SQLSTATE -> the name a report counts the failure under (psycopg's class name otherwise).
SQLSTATE_NAMES = {
    "40P01": "deadlock",
    "40001": "serialization_failure",
    "55P03": "lock_not_available",
    "57014": "query_canceled",
    "23505": "unique_violation",
}
PEOPLE = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hana", "Ivo", "Jun"]
EMOTIONS = ["proud", "worried", "relieved", "curious", "frustrated", "calm"]
MEMORY_CATEGORIES = ["event", "person", "interest", "work", "travel"]


@dataclass
class WriterResult:
    writer: int
    rows: int = 0
    transactions: int = 0
    started: float = 0.0  # time.monotonic(): one clock for every process of the machine
    finished: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)  # committed transactions only
    errors: Counter = field(default_factory=Counter)
    fatal: str | None = None  # the writer could not run at all

    @property
    def seconds(self) -> float:
        return max(self.finished - self.started, 1e-9)


@dataclass
class LockWaits:
    """What the writers were doing at each sample: the share of samples where one waited on a
    heavyweight lock, on which lock and relation, and every wait event seen."""

    samples: int = 0
    samples_with_lock_wait: int = 0
    waiting_total: int = 0  # writers waiting on a lock, summed over samples
    max_waiting: int = 0
    lock_events: Counter = field(default_factory=Counter)  # transactionid, tuple, extend...
    relations: Counter = field(default_factory=Counter)  # the relation a lock wait was about
    states: Counter = field(default_factory=Counter)  # every writer observation: running, Lock:tuple...
    error: str | None = None

    def as_dict(self) -> dict:
        observations = sum(self.states.values()) or 1
        return {
            "samples": self.samples,
            "interval_s": SAMPLE_INTERVAL,
            "samples_with_lock_wait": self.samples_with_lock_wait,
            "share_of_samples": round(self.samples_with_lock_wait / self.samples, 4) if self.samples else 0.0,
            "mean_waiting": round(self.waiting_total / self.samples, 3) if self.samples else 0.0,
            "max_waiting": self.max_waiting,
            "lock_events": dict(self.lock_events.most_common()),
            "relations": dict(self.relations.most_common()),
            "writer_states": {state: round(count / observations, 4) for state, count in self.states.most_common()},
            "error": self.error,
        }


@dataclass
class PhaseResult:
    writers: int
    results: list[WriterResult]
    lock_waits: LockWaits

    @property
    def rows(self) -> int:
        return sum(result.rows for result in self.results)

    @property
    def seconds(self) -> float:
        ran = [result for result in self.results if result.fatal is None]
        if not ran:
            return 0.0
        return max(result.finished for result in ran) - min(result.started for result in ran)

    @property
    def inserts_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    @property
    def errors(self) -> Counter:
        total = Counter()
        for result in self.results:
            total.update(result.errors)
            if result.fatal:
                total["writer_failed"] += 1
        return total

    def as_dict(self) -> dict:
        latencies = [ms for result in self.results for ms in result.latencies_ms]
        errors = self.errors
        return {
            "writers": self.writers,
            "rows": self.rows,
            "transactions": sum(result.transactions for result in self.results),
            "seconds": round(self.seconds, 3),
            "inserts_per_s": round(self.inserts_per_s, 1),
            "per_writer": [
                {
                    "writer": result.writer,
                    "rows": result.rows,
                    "transactions": result.transactions,
                    "seconds": round(result.seconds, 3),
                    "inserts_per_s": round(result.rows / result.seconds, 1),
                    "errors": dict(result.errors),
                    "fatal": result.fatal,
                }
                for result in self.results
            ],
            "latency_ms": latency_summary(latencies),
            "errors": {"total": sum(errors.values()), "by_type": dict(errors.most_common())},
            "lock_waits": self.lock_waits.as_dict(),
        }


def latency_summary(values: list[float]) -> dict:
    if not values:
        return {"count": 0, "p50": None, "p95": None, "p99": None, "max": None}
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return {"count": len(values), "p50": round(float(p50), 2), "p95": round(float(p95), 2),
            "p99": round(float(p99), 2), "max": round(float(max(values)), 2)}


def error_name(error: Exception) -> str:
    """Django wraps the driver's exception; its SQLSTATE says what happened."""
    cause = error.__cause__ or error
    sqlstate = getattr(cause, "sqlstate", None)
    return SQLSTATE_NAMES.get(sqlstate, type(cause).__name__)


def run_phase(
    *, writers: int, kind: str, path: str, team: Team, batch: int, seconds: float | None, rows: int | None, seed: str
) -> PhaseResult:
    """Start `writers` processes, release them together, sample their waits until they are done."""
    tag = f"bench_writes {os.getpid()} {seed}"
    connections.close_all()  # before forking: a child must never reuse the parent's socket
    context = multiprocessing.get_context("fork")
    start_line = context.Barrier(writers + 1)
    results = context.Queue()
    processes = [
        context.Process(
            target=_writer_main,
            kwargs={
                "number": number, "kind": kind, "path": path, "team_id": team.pk, "batch": batch, "seconds": seconds,
                "rows": rows, "seed": f"{seed}-{number}", "application_name": f"{tag} w{number}",
                "start_line": start_line, "results": results,
            },
            daemon=True,
        )
        for number in range(1, writers + 1)
    ]
    for process in processes:
        process.start()
    # Started after the fork: a process forked while a thread holds a lock can inherit it held.
    sampler = LockWaitSampler(application_prefix=f"{tag} ")
    sampler.start()
    try:
        try:
            start_line.wait(timeout=START_TIMEOUT)
        except threading.BrokenBarrierError:
            pass  # a writer failed before the start; each one still reports why
        collected = _collect(processes=processes, results=results, expected=writers)
    finally:
        sampler.stop()
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.terminate()
    seen = {result.writer for result in collected}
    collected += [
        WriterResult(writer=number, fatal="exited without a result")
        for number in range(1, writers + 1)
        if number not in seen
    ]
    return PhaseResult(writers=writers, results=sorted(collected, key=lambda r: r.writer), lock_waits=sampler.waits)


def _collect(*, processes, results, expected: int) -> list[WriterResult]:
    collected: list[WriterResult] = []
    while len(collected) < expected:
        try:
            collected.append(results.get(timeout=0.5))
        except queue.Empty:
            if not any(process.is_alive() for process in processes):
                break  # a writer died without reporting; the caller notes which
    return collected


def _writer_main(
    *, number: int, kind: str, path: str, team_id: int, batch: int, seconds: float | None, rows: int | None, seed: str,
    application_name: str, start_line, results,
) -> None:
    result = WriterResult(writer=number)
    try:
        # The sampler finds this writer by name; OPTIONS survive a reconnect, a SET would not.
        settings_dict = connections["default"].settings_dict
        settings_dict["OPTIONS"] = {**settings_dict.get("OPTIONS", {}), "application_name": application_name}
        rng = random.Random(seed)
        write = WRITERS[kind][path]
        with embeddings_deferred():
            team = Team.objects.get(pk=team_id)  # connects before the start, not on the clock
            start_line.wait(timeout=START_TIMEOUT)
            result.started = time.monotonic()
            deadline = result.started + seconds if seconds else None
            while (rows is None or result.rows < rows) and (deadline is None or time.monotonic() < deadline):
                size = batch if rows is None else min(batch, rows - result.rows)
                began = time.perf_counter()
                try:
                    if size == 1:
                        write(team=team, rng=rng)  # the service's own transaction, as the API runs it
                    else:
                        with transaction.atomic():
                            for _ in range(size):
                                write(team=team, rng=rng)
                except DatabaseError as error:
                    result.errors[error_name(error)] += 1
                    connection.close_if_unusable_or_obsolete()
                    if rows is not None and sum(result.errors.values()) > rows:
                        break  # every attempt fails: stop rather than loop forever
                    continue
                result.latencies_ms.append((time.perf_counter() - began) * 1000)
                result.transactions += 1
                result.rows += size
            result.finished = time.monotonic()
    except Exception as error:  # reported to the parent: a child's traceback would be lost
        result.fatal = f"{type(error).__name__}: {error}"
        result.finished = time.monotonic()
        result.started = result.started or result.finished
    finally:
        connections.close_all()
    results.put(result)


def _lesson_fields(rng: random.Random) -> dict:
    """Already in the services' normal form (trimmed, lowercase terms), so both paths store the same."""
    topic, tag, fact = rng.choice(TOPICS)
    tech = rng.sample(TECH, rng.randint(1, 3))
    place = rng.choice(PLACES)
    return {
        "title": f"{rng.choice(VERBS)} {topic} {place} ({tech[0]})",
        "description": f"On a {rng.choice(PROJECTS)} project using {', '.join(tech)}, {topic} {place} "
        f"led to {rng.choice(OUTCOMES)}: {fact}.",
        "recommendation": f"{rng.choice(VERBS)} {topic} early; {fact}.",
        "category": rng.choice(CATEGORIES),
        "confidence": round(rng.uniform(0.3, 1.0), 2),
        "tech_stacks": tech,
        "project_types": [rng.choice(PROJECTS)],
        "tags": [MARKER, tag],
    }


def _memory_fields(rng: random.Random) -> dict:
    topic, _, fact = rng.choice(TOPICS)
    person = rng.choice(PEOPLE)
    return {
        "content": f"{person} talked about {topic} {rng.choice(PLACES)}",
        "details": f"{person} said that {fact}, after {rng.choice(OUTCOMES)} on a {rng.choice(PROJECTS)} project.",
        "categories": [MARKER, rng.choice(MEMORY_CATEGORIES)],
        "importance": rng.randint(1, 10),
        "people": [person],
        "emotions": [rng.choice(EMOTIONS)],
    }


def _insert(model: type, fields_for):
    def write(*, team: Team, rng: random.Random):
        row = model(team=team, **fields_for(rng))
        row.save()  # one INSERT: no validation queries, so the database's own work dominates
        return row

    return write


# kind -> path -> write(team=, rng=). "service" is the API's path; "insert" is the bare row.
WRITERS = {
    "lessons": {
        "service": lambda *, team, rng: lesson_create(team=team, **_lesson_fields(rng)),
        "insert": _insert(Lesson, _lesson_fields),
    },
    "memories": {
        "service": lambda *, team, rng: memory_create(team=team, **_memory_fields(rng)),
        "insert": _insert(Memory, _memory_fields),
    },
}
PATHS = ("service", "insert")


def delete_benchmark_rows(*, kind: str, team: Team) -> int:
    """Delete the rows benchmarks wrote into `team` (their MARKER), and nothing else."""
    if kind == "lessons":
        rows = Lesson.objects.filter(team=team, tags__contains=[MARKER])
    else:
        rows = Memory.objects.filter(team=team, categories__contains=[MARKER])
    deleted, per_model = rows.delete()
    return per_model.get(rows.model._meta.label, 0)


# Writers waiting on a heavyweight lock, and which relation it is about: a row lock waiter holds
# (or waits for) a `tuple` lock on the row's relation while it waits for the holder's
# transactionid; a relation extension waiter waits on an `extend` lock of the relation.
XID_ONLY = "xid only (no relation lock)"
SAMPLE_SQL = """
WITH relation_locks AS MATERIALIZED (
    SELECT pid, relation::regclass::text AS relation
      FROM pg_locks
     WHERE relation IS NOT NULL AND (locktype = 'tuple' OR NOT granted)
)
SELECT a.state, a.wait_event_type, a.wait_event,
       CASE WHEN a.wait_event_type = 'Lock'
            THEN (SELECT string_agg(DISTINCT l.relation, ',') FROM relation_locks AS l WHERE l.pid = a.pid)
       END
  FROM pg_stat_activity AS a
 WHERE starts_with(a.application_name, %s)
"""


class LockWaitSampler(threading.Thread):
    """Looks at the writers' backends every SAMPLE_INTERVAL seconds over its own connection."""

    def __init__(self, *, application_prefix: str):
        super().__init__(name="bench-writes-sampler", daemon=True)
        self.application_prefix = application_prefix
        self.waits = LockWaits()
        self._stopped = threading.Event()

    def stop(self) -> None:
        self._stopped.set()
        self.join(timeout=10)

    def run(self) -> None:
        try:
            with connection.cursor() as cursor:
                while not self._stopped.wait(SAMPLE_INTERVAL):
                    cursor.execute(SAMPLE_SQL, [self.application_prefix])
                    self._record(cursor.fetchall())
        except DatabaseError as error:  # the figures so far stand; the report says sampling stopped
            self.waits.error = first_line(error)
        finally:
            connection.close()  # this thread's own connection

    def _record(self, backends: list[tuple]) -> None:
        waits = self.waits
        waits.samples += 1
        waiting = 0
        for state, event_type, event, relations in backends:
            if event_type is None:
                waits.states["running" if state == "active" else state or "unknown"] += 1
            else:
                waits.states[f"{event_type}:{event}"] += 1
            if event_type == "Lock":
                waiting += 1
                waits.lock_events[event] += 1
                # No relation lock: the unique-index check of INSERT ... ON CONFLICT waits for the
                # updater's transaction directly. Inserts of new rows share no other row, so here it
                # is a writer queued on a team's stats row (8 writers in 8 teams never wait so).
                for relation in (relations or XID_ONLY).split(","):
                    waits.relations[relation] += 1
        if waiting:
            waits.samples_with_lock_wait += 1
            waits.waiting_total += waiting
            waits.max_waiting = max(waits.max_waiting, waiting)
