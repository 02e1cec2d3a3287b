"""`python manage.py bench_embeddings`: is the database the bottleneck of the backfill?

In one run, on the demo lessons and then on N synthetic lessons (each set loaded into a throwaway
team that is deleted afterwards), it measures:
  - raw encode: the model alone, up to 512 texts in one call (the encoder's own best batching);
  - backfill: `embedding_backfill` on the same rows (read, encode, guarded write, commit);
  - write only: the guarded bulk UPDATE of precomputed vectors, i.e. the database's part.
The backfill should reach at least 90% of the raw rate. Other processes on the machine make
timings noisy, so the three are interleaved every 512 rows, and the demo set runs several rounds.
"""

import os
import random
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction

from lessons.embedding import embedded_fields, embedding_text, get_embedding_backend
from lessons.models import Lesson, Team
from lessons.services.embeddings import _bulk_write, embedding_backfill, embeddings_deferred
from lessons.services.imports import import_lessons
from lessons.services.lessons import lesson_create

DEMO_LESSONS = Path(__file__).resolve().parents[2] / "demo_data" / "lessons.jsonl"
TARGET = 0.90
SEGMENT = 512  # rows per interleaved step of the measurement


class Command(BaseCommand):
    help = "Measure raw encode vs backfill throughput (demo lessons and synthetic lessons)."

    def add_arguments(self, parser):
        parser.add_argument("--synthetic", type=int, default=10_000, help="Synthetic lessons (default 10000; 0 skips).")
        parser.add_argument("--batch-size", type=int, default=64, help="Backfill batch size (default 64).")
        parser.add_argument("--rounds", type=int, default=3, help="Interleaved rounds on the demo lessons (3).")
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument("--skip-demo", action="store_true", help="Measure the synthetic lessons only.")

    def handle(self, *args, synthetic, batch_size, rounds, seed, skip_demo, **options):
        for option, value, least in (("--batch-size", batch_size, 1), ("--rounds", rounds, 1),
                                     ("--synthetic", synthetic, 0)):
            if value < least:  # the one at fault, with its value
                raise CommandError(f"{option} must be at least {least}, not {value}")
        backend = get_embedding_backend()
        if backend.unavailable_reason:
            raise CommandError(f"the embedding model is unavailable: {backend.unavailable_reason}")
        backend.embed_documents(["warm up the model"] * 8)
        self.stdout.write(
            f"model {backend.model_name}, torch threads {torch.get_num_threads()}, "
            f"encode batch {backend.batch_size}, backfill batch {batch_size}"
        )

        if skip_demo:
            pass
        elif DEMO_LESSONS.is_file():
            with throwaway_team("bench-demo") as team:
                with embeddings_deferred():
                    import_lessons(lines=DEMO_LESSONS.open(encoding="utf-8"), team_slug=team.slug,
                                   create_team=True).stop_if_interrupted()
                self._measure(f"demo lessons ({DEMO_LESSONS.name})", team, batch_size=batch_size, rounds=rounds)
        else:
            self.stdout.write(f"(no demo data at {DEMO_LESSONS}; skipped)")

        if synthetic:
            with throwaway_team("bench-synthetic") as team:
                started = time.perf_counter()
                with embeddings_deferred(), transaction.atomic():
                    for fields in synthetic_lessons(count=synthetic, seed=seed):
                        lesson_create(team=team, **fields)
                self.stdout.write(f"created {synthetic} synthetic lessons in {time.perf_counter() - started:.1f}s")
                self._measure(f"{synthetic} synthetic lessons", team, batch_size=batch_size, rounds=1)

    def _measure(self, label: str, team: Team, *, batch_size: int, rounds: int) -> None:
        """Raw encode, backfill and write-only, interleaved segment by segment (in alternating
        order) so that a burst of load from other processes hits all three alike."""
        backend = get_embedding_backend()
        clock = Clocks()
        rows = list(Lesson.objects.filter(team=team).only("pk", *embedded_fields(Lesson)).order_by("pk"))
        words = statistics.mean(len(embedding_text(row).split()) for row in rows)
        per_round = []
        for round_number in range(rounds):
            spent = {name: [0.0, 0.0] for name in ("raw", "backfill", "write")}  # wall, cpu seconds
            for number, start in enumerate(range(0, len(rows), SEGMENT)):
                segment = rows[start : start + SEGMENT]
                texts = [embedding_text(row) for row in segment]
                vectors = None

                def raw():
                    nonlocal vectors
                    vectors = backend.embed_documents(texts)  # one call: the model's own best batching

                def backfill():
                    ids = [row.pk for row in segment]
                    report = embedding_backfill(kind="lessons", ids=ids, include_fresh=True, batch_size=batch_size)
                    if report.embedded != len(segment) or report.failed:
                        raise CommandError(f"backfill embedded {report.embedded} of {len(segment)}")

                steps = [("raw", raw), ("backfill", backfill)]
                for name, step in steps if (round_number + number) % 2 == 0 else reversed(steps):
                    clock.add(spent[name], step)

                def write():
                    for first in range(0, len(segment), batch_size):
                        part = slice(first, first + batch_size)
                        hashes = [""] * len(segment[part])  # only the cost counts; the next backfill rewrites
                        _bulk_write(
                            items=segment[part], vectors=vectors[part], hashes=hashes, model_name=backend.model_name
                        )

                clock.add(spent["write"], write)
            per_round.append(spent)

        self.stdout.write(f"\n{label}: {len(rows)} rows, {words:.0f} words a text on average, {rounds} round(s)")
        measures = [("wall clock", 0, "items/s")] + ([("CPU time", 1, "items/CPU-s")] if clock.cpu_available else [])
        for title, index, unit in measures:
            rate = {
                name: [len(rows) / spent[name][index] for spent in per_round] for name in ("raw", "backfill", "write")
            }
            ratios = [b / r for b, r in zip(rate["backfill"], rate["raw"])]
            ratio = statistics.median(ratios)
            verdict = "ok" if ratio >= TARGET else f"below the {TARGET:.0%} target"
            self.stdout.write(f"  {title} ({unit}):")
            self.stdout.write(
                f"    raw encode    {statistics.median(rate['raw']):8.1f}   (rounds: {_rates(rate['raw'])})"
            )
            self.stdout.write(
                f"    backfill      {statistics.median(rate['backfill']):8.1f}   (rounds: {_rates(rate['backfill'])})"
            )
            self.stdout.write(f"    write only    {statistics.median(rate['write']):8.1f}   (the database's part)")
            shown = ", ".join(f"{r:.1%}" for r in ratios)
            self.stdout.write(f"    backfill/raw  {ratio:8.1%}   (rounds: {shown})  {verdict}")


class Clocks:
    """Wall time, and CPU time of this process plus its PostgreSQL server process (read from /proc
    when the database runs on this machine): CPU seconds barely move with other processes' load,
    and they include the database's work, which this process's own CPU time would miss."""

    def __init__(self):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            self.stat_path = Path(f"/proc/{cursor.fetchone()[0]}/stat")
        self.cpu_available = self._server_cpu() is not None

    def _server_cpu(self) -> float | None:
        try:
            fields = self.stat_path.read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime

    def _cpu(self) -> float:
        return time.process_time() + (self._server_cpu() or 0.0)

    def add(self, totals: list[float], step) -> None:
        wall, cpu = time.perf_counter(), self._cpu()
        step()
        totals[0] += time.perf_counter() - wall
        totals[1] += self._cpu() - cpu


@contextmanager
def throwaway_team(prefix: str) -> Iterator[Team]:
    team = Team.objects.create(slug=f"{prefix}-{random.randrange(16**8):08x}", name=f"{prefix} (benchmark)")
    try:
        yield team
    finally:
        team.delete()
        with connection.cursor() as cursor:  # clear the dead rows before the next measurement
            cursor.execute("VACUUM ANALYZE lessons_lesson")


def _rates(rates: list[float]) -> str:
    return ", ".join(f"{rate:.1f}" for rate in rates)


# --- synthetic lessons ----------------------------------------------------------------------------

SYSTEMS = [
    "the checkout service", "our Postgres primary", "the mobile app", "the CI pipeline", "a Next.js page",
    "the billing webhook", "the search index", "the auth gateway", "a Celery worker", "the Redis cache",
    "the Kubernetes cluster", "the data warehouse load", "the GraphQL API", "the image resizer",
    "the email sender", "the feature flag service", "a React form", "the Terraform plan", "the S3 uploads",
    "the nightly report job", "the rate limiter", "the websocket server", "the payment reconciliation",
]
PROBLEMS = [
    "timed out under load", "leaked memory after each deploy", "returned stale data to customers",
    "double-charged a handful of users", "dropped messages during a failover", "locked a hot table for minutes",
    "silently skipped rows with null dates", "ran out of connections at peak", "served the wrong tenant's data",
    "broke when the clock changed for daylight saving", "retried forever and flooded the queue",
    "slowed every page because of an N+1 query", "lost uploads larger than 5 MB", "logged secrets in plain text",
]
CAUSES = [
    "a missing index on a foreign key", "an unbounded retry loop without jitter", "a cache key that ignored the tenant",
    "a default timeout of thirty seconds nobody had set on purpose", "an ORM call inside a template loop",
    "a race between two workers reading the same row", "a migration that rewrote the whole table",
    "an environment variable that differed between staging and production", "a library upgrade with a changed default",
    "a cron job that overlapped with itself", "a connection pool smaller than the worker count",
]
ADVICE = [
    "Add an index for every foreign key you filter or join on.", "Put jitter and a cap on every retry.",
    "Include the tenant id in every cache key.", "Set explicit timeouts on every outgoing call.",
    "Load related rows in one query with select_related or prefetch_related.",
    "Take a row lock or use an idempotency key before the side effect.",
    "Run large migrations in batches and outside peak hours.",
    "Keep staging configuration generated from production's.",
    "Read the changelog before upgrading and pin versions.", "Guard scheduled jobs with an advisory lock.",
    "Size the pool from the number of workers and measure it under load.", "Alert on the symptom, not on the cause.",
]
DETAILS = [
    "It took two days to notice.", "Support found it from a customer ticket.",
    "The dashboards looked green throughout.",
    "Only the largest customers were affected.", "It happened again a week later before the fix landed.",
    "A load test would have shown it.", "The logs had the answer but nobody searched them.",
    "Rolling back did not help because the data was already written.",
]
VERBS = ["Index", "Bound", "Scope", "Time out", "Batch", "Lock", "Split", "Pin", "Guard", "Measure", "Cache", "Retry"]


def synthetic_lessons(*, count: int, seed: int):
    """`count` lessons whose texts vary in words and length, from a seeded generator."""
    rng = random.Random(seed)
    for number in range(count):
        system, problem, cause = rng.choice(SYSTEMS), rng.choice(PROBLEMS), rng.choice(CAUSES)
        details = " ".join(rng.sample(DETAILS, rng.randint(0, 3)))
        yield {
            "title": f"{rng.choice(VERBS)} {system.removeprefix('the ').removeprefix('our ').removeprefix('a ')} "
            f"before it {problem} (#{number})",
            "description": f"{system.capitalize()} {problem}. The cause was {cause}. {details}".strip(),
            "recommendation": " ".join(rng.sample(ADVICE, rng.randint(1, 3))),
            "category": rng.choice(["backend", "database", "deployment", "performance", "security", "workflow"]),
        }

