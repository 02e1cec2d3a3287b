"""`python manage.py bench_search`: search latency over 10,000 synthetic lessons, per mode and stage.

The lessons live in a throwaway team (`--team`, default `bench-search`) that a second run reuses;
they are embedded through the normal service (`embedding_refresh`) in batches. Each mode runs the
same few hundred varied queries (single terms, phrases, filters, editor context) after a warm-up,
and the command prints p50 / p95 of the total and of each stage (embed, sql, fuse) in milliseconds.
"""

import random
import statistics
from time import perf_counter

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from tqdm import tqdm

from lessons.embedding import get_embedding_backend
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


class Command(BaseCommand):
    help = "Benchmark search latency on 10,000 synthetic lessons: p50/p95 per mode and per stage."

    def add_arguments(self, parser):
        parser.add_argument("--team", default="bench-search", help="throwaway team (reused by later runs)")
        parser.add_argument("--lessons", type=int, default=10_000)
        parser.add_argument("--queries", type=int, default=300, help="searches per mode")
        parser.add_argument("--limit", type=int, default=10)
        parser.add_argument("--modes", default="hybrid,semantic,text")
        parser.add_argument("--batch-size", type=int, default=64)
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument(
            "--torch-threads", type=int, default=None,
            help="torch intra-op threads for this run, where queries use torch (EMBEDDING_QUERY_RUNTIME=torch): "
            "a one-sentence query gains nothing from more, and loses much when other processes compete",
        )

    def handle(self, *args, **options):
        modes = [m.strip() for m in options["modes"].split(",") if m.strip()]
        if options["torch_threads"]:
            import torch

            torch.set_num_threads(options["torch_threads"])
        if options["lessons"] < 1 or options["queries"] < 1:
            raise CommandError("--lessons and --queries must be at least 1")
        if not get_embedding_backend().available:
            raise CommandError(f"the embedding model is unavailable: {get_embedding_backend().unavailable_reason}")
        team = team_get_or_create(slug=options["team"])
        self._ensure_lessons(team=team, total=options["lessons"], seed=options["seed"])
        self._ensure_embedded(team=team, batch_size=options["batch_size"])

        rng = random.Random(options["seed"])
        workload = [self._request(team=team, rng=rng, limit=options["limit"]) for _ in range(options["queries"])]
        for request in workload[:10]:  # warm-up: model, connection, caches
            search(request=request)

        import torch

        backend = get_embedding_backend()
        runtime = getattr(backend, "active_query_runtime", "torch")
        encoder = (
            f"query encoder onnx ({backend.query_threads} thread(s) a search)" if runtime == "onnx"
            else f"query encoder torch ({torch.get_num_threads()} threads)"
        )
        self.stdout.write(
            f"{Lesson.objects.filter(team=team).count()} lessons, {len(workload)} queries per mode, "
            f"limit {options['limit']}, {encoder}"
        )
        self.stdout.write(f"{'mode':<10}{'stage':<8}{'p50 ms':>10}{'p95 ms':>10}{'max ms':>10}")
        for mode in modes:
            stages: dict[str, list[float]] = {"embed": [], "sql": [], "fuse": [], "total": []}
            for base in workload:
                request = SearchRequest(**{**base.__dict__, "mode": mode})
                started = perf_counter()
                response = search(request=request)
                wall = (perf_counter() - started) * 1000
                for stage in ("embed", "sql", "fuse"):
                    stages[stage].append(response.timings_ms.get(stage, 0.0))
                stages["total"].append(wall)
            for stage, values in stages.items():
                self.stdout.write(
                    f"{mode:<10}{stage:<8}{_percentile(values, 50):>10.1f}{_percentile(values, 95):>10.1f}{max(values):>10.1f}"
                )

    def _ensure_lessons(self, *, team, total: int, seed: int) -> None:
        have = Lesson.objects.filter(team=team).count()
        if have >= total:
            return
        rng = random.Random(seed + have)
        batch = []
        for number in tqdm(range(have, total), desc="lessons", unit="lesson"):
            batch.append(_synthetic_lesson(team=team, number=number, rng=rng))
            if len(batch) == 500:
                _write(batch)
                batch = []
        if batch:
            _write(batch)

    def _ensure_embedded(self, *, team, batch_size: int) -> None:
        pending = list(Lesson.objects.filter(team=team, embedding__isnull=True).order_by("pk").values_list("pk", flat=True))
        if not pending:
            return
        with tqdm(total=len(pending), desc="embedding", unit="lesson") as bar:
            for start in range(0, len(pending), batch_size):
                items = list(Lesson.objects.filter(pk__in=pending[start : start + batch_size]).order_by("pk"))
                report = embedding_refresh(items=items)
                if report.failure_reason:
                    raise CommandError(f"embedding failed: {report.failure_reason}")
                bar.update(len(items))

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


def _synthetic_lesson(*, team, number: int, rng: random.Random) -> Lesson:
    topic, tag, fact = rng.choice(TOPICS)
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
