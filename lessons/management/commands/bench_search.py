"""`python manage.py bench_search`: search latency over synthetic lessons, per mode and stage.

The lessons live in a throwaway team (`--team`, default `bench-search`) that a later run reuses
and grows; `manage.py delete_team bench-search` removes it (its sampled rows count as stale).
Each mode runs the same few hundred varied queries (single terms, phrases, filters,
editor context) after a warm-up, and the command prints p50 / p95 of the total and of each stage
(embed, sql, fuse) in milliseconds.

By default every lesson is embedded by the model (`embedding_refresh`, about 6 minutes for 10,000
on 2 cores). `--embed-sample N` builds large teams fast: the first N lessons (topics in turn) are
embedded by the model, every later one gets the vector of a model-embedded lesson of the same
topic plus Gaussian noise (`--noise`, per dimension), renormalised, so the vectors are realistic
(clustered like real ones) without running the model 300,000 times. Those rows are written with
COPY through the real table: the generated search vector and the keyword triggers run as for any
insert, and the HNSW index is maintained row by row as in production. They are marked
`embedding_model = "nearby:<model>"` so they are never mistaken for model output.

`--lessons` takes one size or several (`10000,100000,300000`): the team grows to each size in
turn and is measured there, then a summary (size x mode) is printed. `--json PATH` writes
`{"lessons": n, "modes": {mode: {"p50_ms": .., "p95_ms": ..}}}` for one size, and a list of those
(one per size, ascending) for several.
"""

import logging
import os
import random
import statistics
from contextlib import contextmanager
from time import perf_counter

import numpy as np
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.utils import timezone
from tqdm import tqdm

from lessons.embedding import get_embedding_backend
from lessons.evaluation.output_files import write_json_whole
from lessons.management.commands._json_output import checked_json_path
from lessons.management.commands._modes_option import DEFAULT_MODES, modes_from_option
from lessons.models import Lesson
from lessons.search import SearchFilters, SearchRequest, search
from lessons.services.embeddings import embedding_refresh
from lessons.services.teams import team_get_or_create

TOPICS = [
    ("webhook retries", "webhooks", "idempotency keys stop duplicate side effects"),
    ("row level security", "rls", "policies keep tenants apart in the database"),
    ("connection pooling", "pooling", "serverless functions exhaust database connections"),
    ("cache invalidation", "cache", "stale values survive deploys without an owner"),
    ("form state", "forms", "inputs lose what the user typed on remount"),
    ("background jobs", "queues", "long work belongs behind a queue with time limits"),
    ("schema migrations", "migrations", "locking migrations block writes on large tables"),
    ("flaky tests", "flaky-tests", "fixed sleeps make end-to-end tests fail at random"),
    ("secrets handling", "secrets", "keys leak through images, logs and prompts"),
    ("image size", "docker", "multi-stage builds shrink container images"),
    ("query performance", "index", "a covering index turns a hot query into an index-only scan"),
    ("session security", "sessions", "cookies need HttpOnly, Secure and SameSite"),
    ("rate limiting", "rate-limiting", "abuse of reset endpoints is stopped per account and IP"),
    ("observability", "logging", "a request id follows each request through every service"),
    ("feature flags", "feature-flags", "flags evaluated at the edges keep the domain clean"),
    ("api versioning", "api-design", "mobile clients stay on old versions for months"),
    ("payments", "stripe", "money is stored as integer minor units"),
    ("timezones", "timestamps", "timestamps without a zone shift by an hour twice a year"),
    ("hydration errors", "ssr", "dates rendered on the server differ from the client"),
    ("graceful shutdown", "sigterm", "workers need a shutdown window longer than the longest task"),
]
TECH = ["nextjs", "react", "django", "fastapi", "postgresql", "redis", "supabase", "celery", "kubernetes",
        "docker", "aws", "vercel", "stripe", "prisma", "graphql", "nodejs", "typescript", "python", "terraform", "tailwind"]
CATEGORIES = ["architecture", "security", "database", "frontend", "backend", "testing", "deployment", "performance", "workflow"]
PROJECTS = ["saas", "ecommerce", "internal-tool", "mobile-backend", "marketplace", "web-app"]
VERBS = ["Avoid", "Prefer", "Always check", "Never skip", "Measure", "Document", "Automate", "Review", "Isolate", "Limit"]
PLACES = ["in production", "during deploys", "under load", "in CI", "on mobile", "for new tenants", "after upgrades",
          "in the admin", "in background workers", "at the edge"]
OUTCOMES = ["an outage", "duplicate charges", "a data leak", "slow pages", "lost user input", "a failed release",
            "angry customers", "a long incident", "wasted compute", "a security review finding"]

QUERIES = [
    "nextjs", "redis", "RLS", "celery", "stripe", "kubernetes",
    "database security", "frontend state management", "why are my tests flaky", "keep secrets out of docker images",
    "webhooks delivered twice", "slow queries on large tables", "safe schema changes in production",
    "users lose what they typed", "connection limits in serverless", "rate limit password resets",
    "cache keeps stale data after deploy", "how to shut down workers gracefully", "store money correctly",
    "dates differ between server and client", "version the public api", "trace a request across services",
]


NEARBY_PREFIX = "nearby:"  # embedding_model of rows given a sample's vector plus noise, not the model's
COPY_CHUNK = 5_000  # rows per COPY and per transaction: an interrupted build keeps its finished chunks
WARM_UP = 10
HNSW_INDEX = "lesson_embedding_hnsw"
STAGES = ("embed", "sql", "fuse")


class Command(BaseCommand):
    help = (
        "Benchmark search latency on synthetic lessons (one size or several, e.g. --lessons 10000,100000): "
        "p50/p95 per mode and per stage."
    )

    def add_arguments(self, parser):
        parser.add_argument("--team", default="bench-search", help="throwaway team (reused and grown by later runs)")
        parser.add_argument(
            "--lessons", default="10000",
            help="team size, or ascending sizes separated by commas (10000,100000,300000): the team grows to "
            "each in turn and is measured there",
        )
        parser.add_argument(
            "--embed-sample", type=int, default=None, metavar="N",
            help="embed only the first N lessons with the model (at least one per topic); every later lesson gets "
            "the vector of a model-embedded lesson of its topic plus Gaussian noise (--noise), renormalised",
        )
        parser.add_argument(
            "--noise", type=float, default=0.02,
            help="standard deviation per dimension of the noise added to a sample vector (default 0.02: about "
            "cosine 0.93 to it on 384 dimensions)",
        )
        parser.add_argument("--queries", type=int, default=300, help="searches per mode")
        parser.add_argument("--limit", type=int, default=10)
        parser.add_argument("--modes", default=DEFAULT_MODES, help="Comma-separated search modes.")
        parser.add_argument("--batch-size", type=int, default=64)
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument(
            "--json", dest="json_path", default=None, metavar="PATH",
            help='write {"lessons": n, "modes": {mode: {"p50_ms", "p95_ms"}}} (a list of them for several sizes)',
        )
        parser.add_argument(
            "--torch-threads", type=int, default=None,
            help="torch intra-op threads for this run, where queries use torch (EMBEDDING_QUERY_RUNTIME=torch): "
            "a one-sentence query gains nothing from more, and loses much when other processes compete",
        )

    def handle(self, *args, **options):
        sizes = _parse_sizes(options["lessons"])
        modes = modes_from_option(options["modes"])
        sample = options["embed_sample"]
        if options["queries"] < 1:
            raise CommandError("--queries must be at least 1")
        if sample is not None:
            if sample < len(TOPICS):
                raise CommandError(
                    f"--embed-sample must be at least {len(TOPICS)} (one lesson per topic), not {sample}"
                )
            if sample > sizes[0]:
                raise CommandError(f"--embed-sample {sample} is larger than the smallest size, {sizes[0]}")
        if not 0 < options["noise"] < 1:  # checked with or without --embed-sample: a typo is a typo
            raise CommandError(f"--noise must be between 0 and 1, not {options['noise']}")
        json_path = checked_json_path(options["json_path"])
        if options["torch_threads"]:
            import torch

            torch.set_num_threads(options["torch_threads"])
        backend = get_embedding_backend()
        if not backend.available:
            raise CommandError(f"the embedding model is unavailable: {backend.unavailable_reason}")

        team = team_get_or_create(slug=options["team"])
        rng = random.Random(options["seed"])
        workload = [self._request(team=team, rng=rng, limit=options["limit"]) for _ in range(options["queries"])]
        results = []
        for size in sizes:
            self._build(team=team, total=size, sample=sample, options=options)
            with _quiet_search_log():
                results.append(self._measure(team=team, workload=workload, modes=modes, limit=options["limit"]))

        if len(results) > 1:
            self._summary(results=results, modes=modes)
        if json_path is not None:
            payload = results[0] if len(results) == 1 else results
            write_json_whole(json_path, payload, stdout=self.stdout)

    # --- building the team ----------------------------------------------------------------------

    def _build(self, *, team, total: int, sample: int | None, options) -> None:
        have = Lesson.objects.filter(team=team).count()
        if have >= total:
            self.stdout.write(f"\n== {total:,} lessons: the team already holds {have:,}, nothing built")
            return
        self.stdout.write(f"\n== {total:,} lessons: building {total - have:,} rows")
        started = perf_counter()
        if sample is None:
            self._ensure_lessons(team=team, total=total, seed=options["seed"])
            self._ensure_embedded(team=team, batch_size=options["batch_size"])
            self._timed("rows written and embedded by the model", total - have, started)
        else:
            self._ensure_lessons(team=team, total=sample, seed=options["seed"], topics_in_turn=True)
            embedded = self._ensure_embedded(team=team, batch_size=options["batch_size"])
            if embedded:
                self._timed("rows embedded by the model (the sample, written and embedded)", embedded, started)
            nearby_start = Lesson.objects.filter(team=team).count()
            started = perf_counter()
            self._grow_nearby(team=team, total=total, seed=options["seed"], noise=options["noise"])
            what = f"rows given a nearby vector (noise {options['noise']} a dimension), written with COPY"
            self._timed(what, total - nearby_start, started)
        # The planner needs statistics at the new size, and index-only scans need the visibility
        # map: what autovacuum would do after a bulk load, done now so it does not run mid-measurement.
        started = perf_counter()
        with connection.cursor() as cursor:
            cursor.execute("VACUUM (ANALYZE)")
        self.stdout.write(f"VACUUM (ANALYZE) of the database: {perf_counter() - started:.1f} s")

    def _timed(self, what: str, rows: int, started: float) -> None:
        seconds = perf_counter() - started
        rate = f" ({rows / seconds:,.0f} rows/s)" if rows and seconds else ""
        self.stdout.write(f"  {rows:,} {what}: {seconds:.1f} s{rate}")

    def _ensure_lessons(self, *, team, total: int, seed: int, topics_in_turn: bool = False) -> None:
        have = Lesson.objects.filter(team=team).count()
        if have >= total:
            return
        rng = random.Random(seed + have)
        batch = []
        for number in tqdm(range(have, total), desc="lessons", unit="lesson"):
            # A sample takes the topics in turn, so that every topic has vectors to lend.
            topic = TOPICS[number % len(TOPICS)] if topics_in_turn else None
            batch.append(_synthetic_lesson(team=team, number=number, rng=rng, topic=topic))
            if len(batch) == 500:
                _write(batch)
                batch = []
        if batch:
            _write(batch)

    def _ensure_embedded(self, *, team, batch_size: int) -> int:
        pending = list(Lesson.objects.filter(team=team, embedding__isnull=True).order_by("pk").values_list("pk", flat=True))
        if not pending:
            return 0
        with tqdm(total=len(pending), desc="embedding", unit="lesson") as bar:
            for start in range(0, len(pending), batch_size):
                items = list(Lesson.objects.filter(pk__in=pending[start : start + batch_size]).order_by("pk"))
                report = embedding_refresh(items=items)
                if report.failure_reason:
                    raise CommandError(f"embedding failed: {report.failure_reason}")
                bar.update(len(items))
        return len(pending)

    def _grow_nearby(self, *, team, total: int, seed: int, noise: float) -> None:
        have = Lesson.objects.filter(team=team).count()
        if have >= total:
            return
        model_name = get_embedding_backend().model_name
        samples = _sample_vectors(team=team, model_name=model_name)
        missing = [tag for _, tag, _ in TOPICS if tag not in samples]
        if missing:
            raise CommandError(f"no model-embedded lesson to lend a vector for the topics {', '.join(missing)}")
        rng = random.Random(seed + have)
        noise_rng = np.random.default_rng(seed + have)
        marker = f"{NEARBY_PREFIX}{model_name}"
        with tqdm(total=total - have, desc="nearby lessons", unit="lesson") as bar:
            for start in range(have, total, COPY_CHUNK):
                numbers = range(start, min(start + COPY_CHUNK, total))
                lessons = [_synthetic_lesson(team=team, number=number, rng=rng) for number in numbers]
                lenders = [samples[lesson.tags[0]] for lesson in lessons]
                bases = np.stack([vectors[rng.randrange(len(vectors))] for vectors in lenders])
                vectors = bases + noise_rng.normal(0.0, noise, size=bases.shape)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                _copy_lessons(lessons=lessons, vectors=vectors, marker=marker)
                bar.update(len(lessons))

    # --- measuring ------------------------------------------------------------------------------

    def _measure(self, *, team, workload: list[SearchRequest], modes: list[str], limit: int) -> dict:
        for request in workload[:WARM_UP]:  # warm-up: model, connection, caches
            search(request=request)

        import torch

        backend = get_embedding_backend()
        runtime = getattr(backend, "active_query_runtime", "torch")
        encoder = (
            f"query encoder onnx ({backend.query_threads} thread(s) a search)" if runtime == "onnx"
            else f"query encoder torch ({torch.get_num_threads()} threads)"
        )
        counts = _embedding_counts(team=team)
        self.stdout.write(
            f"{counts['total']:,} lessons: {counts['model']:,} embedded by the model, {counts['nearby']:,} given a "
            f"nearby vector (a same-topic model vector plus noise), {counts['missing']:,} without one"
        )
        load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
        self.stdout.write(f"{len(workload)} queries per mode, limit {limit}, {encoder}, load average {load}")
        self._print_sizes()
        self.stdout.write(f"{'mode':<10}{'stage':<8}{'p50 ms':>10}{'p95 ms':>10}{'max ms':>10}{'hnsw scans':>12}")
        result = {"lessons": counts["total"], "modes": {}}
        for mode in modes:
            stages: dict[str, list[float]] = {stage: [] for stage in (*STAGES, "total")}
            scans_before = _index_scans(HNSW_INDEX)
            for base in workload:
                request = SearchRequest(**{**base.__dict__, "mode": mode})
                started = perf_counter()
                response = search(request=request)
                wall = (perf_counter() - started) * 1000
                for stage in STAGES:
                    stages[stage].append(response.timings_ms.get(stage, 0.0))
                stages["total"].append(wall)
            scans = _index_scans(HNSW_INDEX) - scans_before
            for stage, values in stages.items():
                scans_column = f"{scans:>12}" if stage == "total" else ""
                self.stdout.write(
                    f"{mode:<10}{stage:<8}{_percentile(values, 50):>10.1f}{_percentile(values, 95):>10.1f}"
                    f"{max(values):>10.1f}{scans_column}"
                )
            result["modes"][mode] = {
                "p50_ms": round(_percentile(stages["total"], 50), 2),
                "p95_ms": round(_percentile(stages["total"], 95), 2),
            }
        self.stdout.write(f"nearest-neighbour plan: {_semantic_plan(team=team)}")
        return result

    def _print_sizes(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                """
                SELECT pg_table_size('lessons_lesson'), pg_indexes_size('lessons_lesson'),
                       coalesce(pg_relation_size(to_regclass(%s)), 0),
                       coalesce(pg_total_relation_size(to_regclass('lessons_keyword_posting')), 0)
                """,
                [HNSW_INDEX],
            )
            table, indexes, hnsw, postings = cursor.fetchone()
        mb = 1024 * 1024
        self.stdout.write(
            f"on disk (all teams): lessons table with TOAST {table / mb:,.0f} MB, its indexes {indexes / mb:,.0f} MB "
            f"(HNSW {hnsw / mb:,.0f} MB), keyword postings with indexes {postings / mb:,.0f} MB"
        )

    def _summary(self, *, results: list[dict], modes: list[str]) -> None:
        self.stdout.write("\nsummary: total ms per search (p50 / p95)")
        self.stdout.write(f"{'lessons':>10}" + "".join(f"{mode:>20}" for mode in modes))
        for result in results:
            cells = "".join(
                f"{result['modes'][mode]['p50_ms']:>11.1f} /{result['modes'][mode]['p95_ms']:>6.1f}" for mode in modes
            )
            self.stdout.write(f"{result['lessons']:>10,}{cells}")

    # --- the workload ---------------------------------------------------------------------------

    def _request(self, *, team, rng: random.Random, limit: int) -> SearchRequest:
        """Varied: single terms, phrases, a filter now and then, editor context now and then."""
        query = rng.choice(QUERIES)
        topic = rng.choice(TOPICS)
        if rng.random() < 0.3:
            query = f"{topic[0]} {rng.choice(PLACES)}"
        filters = SearchFilters()
        roll = rng.random()
        if roll < 0.15:
            filters = SearchFilters(categories=(rng.choice(CATEGORIES),))
        elif roll < 0.25:
            filters = SearchFilters(tech_stacks=(rng.choice(TECH),))
        context = ""
        if rng.random() < 0.2:
            context = f"const result = await {topic[1].replace('-', '_')}Client.fetch('{rng.choice(TECH)}')\n// {topic[2]}"
        tech_stack = tuple(rng.sample(TECH, 2)) if rng.random() < 0.2 else ()
        return SearchRequest(team=team, query=query, limit=limit, filters=filters, context=context, tech_stack=tech_stack)


def _synthetic_lesson(*, team, number: int, rng: random.Random, topic: tuple | None = None) -> Lesson:
    topic, tag, fact = topic or rng.choice(TOPICS)
    tech = rng.sample(TECH, rng.randint(1, 3))
    place = rng.choice(PLACES)
    outcome = rng.choice(OUTCOMES)
    return Lesson(
        team=team,
        external_id=f"bench-{number:05d}",
        title=f"{rng.choice(VERBS)} {topic} {place} ({tech[0]} #{number})",
        description=f"On a {rng.choice(PROJECTS)} project using {', '.join(tech)}, {topic} {place} led to {outcome}: {fact}.",
        recommendation=f"{rng.choice(VERBS)} {topic} early; {fact}.",
        category=rng.choice(CATEGORIES),
        confidence=round(rng.uniform(0.3, 1.0), 2),
        frequency=rng.randint(1, 12),
        tech_stacks=tech,
        project_types=[rng.choice(PROJECTS)],
        tags=[tag, rng.choice(TOPICS)[1]],
        status="confirmed" if rng.random() < 0.9 else "proposed",
    )


@transaction.atomic
def _write(batch: list[Lesson]) -> None:
    # Synthetic rows, valid by construction: written in bulk (the database keeps the search
    # vector and the BM25 postings current by itself).
    Lesson.objects.bulk_create(batch)


def _percentile(values: list[float], percent: int) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[percent - 1]


@contextmanager
def _quiet_search_log():
    """One log line per search would bury the table (and cost a little time per search)."""
    logger = logging.getLogger("lessons.search")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def _parse_sizes(value) -> list[int]:
    sizes = []
    for part in str(value).split(","):
        try:
            size = int(part.strip())
        except ValueError:
            raise CommandError(f"--lessons takes whole numbers separated by commas, not {value!r}") from None
        if size < 1:
            raise CommandError(f"--lessons must be at least 1, not {size}")
        sizes.append(size)
    if sizes != sorted(set(sizes)):
        raise CommandError(f"--lessons sizes must be ascending and distinct (the team only grows), not {value!r}")
    return sizes


def _sample_vectors(*, team, model_name: str) -> dict[str, np.ndarray]:
    """Model-embedded vectors of the team by topic tag (a synthetic lesson's first tag)."""
    rows = (
        Lesson.objects.filter(team=team, embedding__isnull=False, embedding_model=model_name)
        .order_by("pk")
        .values_list("tags", "embedding")
    )
    by_topic: dict[str, list] = {}
    for tags, vector in rows.iterator(chunk_size=2000):
        by_topic.setdefault(tags[0], []).append(np.asarray(vector, dtype=np.float64))
    return {tag: np.stack(vectors) for tag, vectors in by_topic.items()}


def _copy_lessons(*, lessons: list[Lesson], vectors: np.ndarray, marker: str) -> None:
    """COPY the lessons with their vectors into the real table, in one transaction: the database
    computes the search vector and fires the keyword triggers for each row as for an INSERT."""
    now = timezone.now()
    fields = [f for f in Lesson._meta.concrete_fields if not f.primary_key and not f.generated]
    names = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    overrides = {
        "embedding": None, "embedding_model": marker, "content_hash": "", "embedded_at": now,
        "created_at": now, "updated_at": now,
    }
    with transaction.atomic(), connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY {Lesson._meta.db_table} ({names}) FROM STDIN") as copy:
            for lesson, vector in zip(lessons, vectors):
                overrides["embedding"] = "[" + ",".join(f"{x:.6g}" for x in vector.tolist()) + "]"
                copy.write_row([overrides.get(f.attname, getattr(lesson, f.attname)) for f in fields])


def _embedding_counts(*, team) -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT count(*),
                   count(*) FILTER (WHERE embedding IS NOT NULL AND embedding_model NOT LIKE %s),
                   count(*) FILTER (WHERE embedding IS NOT NULL AND embedding_model LIKE %s),
                   count(*) FILTER (WHERE embedding IS NULL)
              FROM lessons_lesson WHERE team_id = %s
            """,
            [f"{NEARBY_PREFIX}%", f"{NEARBY_PREFIX}%", team.pk],
        )
        total, model, nearby, missing = cursor.fetchone()
    return {"total": total, "model": model, "nearby": nearby, "missing": missing}


def _index_scans(index: str) -> int:
    """Scans of `index` so far (this backend's included: its pending statistics are flushed first)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_indexes WHERE indexrelname = %s", [index]
        )
        return int(cursor.fetchone()[0])


def _semantic_plan(*, team) -> str:
    """The plan of a nearest-neighbour query shaped like the semantic leg (team filter, cosine
    order, limit): whether the HNSW index serves it at this size."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute(
            "SELECT embedding::text FROM lessons_lesson WHERE team_id = %s AND embedding IS NOT NULL LIMIT 1",
            [team.pk],
        )
        row = cursor.fetchone()
        if row is None:
            return "no embedded lesson"
        cursor.execute(
            """
            EXPLAIN SELECT id FROM lessons_lesson
             WHERE team_id = %s AND embedding IS NOT NULL AND status = 'confirmed'
             ORDER BY embedding <=> %s::vector LIMIT 10
            """,
            [team.pk, row[0]],
        )
        lines = [line for (line,) in cursor.fetchall()]
    scans = [line.strip().lstrip("-> ").split("  (")[0] for line in lines if "Scan" in line]
    return "; ".join(scans) or lines[0]
