"""`python manage.py load_test`: many concurrent agents against a running server, then a read-back.

N clients (threads, one keep-alive connection each) send requests for S seconds: by default 80%
searches (`POST /search`) and 20% writes (new lessons, and edits of lessons the same client wrote).
The command reports throughput, latency percentiles per kind and every error, then reads back
every write the server acknowledged (`GET /lessons/{id}`) and compares it with what was sent.

Traffic only goes to loopback addresses (127.0.0.0/8, ::1, localhost): any other URL is refused
before a request is sent. Without `--url` the command starts a server itself on a free
127.0.0.1 port (gunicorn when it is installed, else `runserver`) against the same database, and
stops it at the end. A team of its own (`--team`, default `load-test`) gets synthetic lessons the
first time and a key that is revoked at the end; the lessons the run wrote are deleted unless
`--keep`. Exits non-zero when a request failed or an acknowledged write did not read back intact.
"""

import http.client
import importlib.util
import ipaddress
import json
import random
import socket
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import numpy as np
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from lessons.embedding import EmbeddingUnavailable
from lessons.evaluation.output_files import write_json_whole
from lessons.management.commands._json_output import checked_json_path
from lessons.management.commands.bench_search import QUERIES, TOPICS
from lessons.models import Lesson
from lessons.services.api_keys import api_key_create, api_key_revoke
from lessons.services.embeddings import embedding_backfill, embeddings_deferred
from lessons.services.lessons import lesson_create
from lessons.services.teams import team_get_or_create

MAX_CLIENTS = 200
MAX_SECONDS = 600
MAX_SEED_LESSONS = 100_000
SERVER_START_TIMEOUT = 180


def loopback_only(url: str) -> tuple[str, int]:
    """(host, port) of `url`, or CommandError when it is not plain http on a loopback address."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise CommandError(f"--url: {url!r} is not an http:// URL")
    host = parts.hostname
    if host != "localhost":
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            raise CommandError(f"--url: {host!r} is not a loopback address (127.0.0.1, ::1, localhost)") from None
        if not address.is_loopback:
            raise CommandError(f"--url: {host} is not a loopback address; the load test only targets this machine")
    return host, parts.port or 80


@dataclass
class Sample:
    kind: str  # "search" or "write"
    status: int  # 0: no answer (timeout, connection error)
    ms: float
    error: str | None = None


@dataclass
class ClientLog:
    samples: list[Sample] = field(default_factory=list)
    expected: dict[int, dict] = field(default_factory=dict)  # lesson id -> fields acknowledged last
    uncertain: set[int] = field(default_factory=set)  # an edit whose answer never came
    created: int = 0
    edited: int = 0


class Client:
    """One agent: a keep-alive HTTP connection and a loop of requests until the deadline."""

    def __init__(self, *, number: int, host: str, port: int, key: str, timeout: float, write_share: float, run: str):
        self.number, self.host, self.port, self.timeout = number, host, port, timeout
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        self.write_share = write_share
        self.run = run
        self.random = random.Random(f"{run}-{number}")
        self.log = ClientLog()
        self.connection: http.client.HTTPConnection | None = None

    def send(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict | None, float, str | None]:
        if self.connection is None:
            self.connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        started = time.perf_counter()
        try:
            self.connection.request(method, path, body=json.dumps(body) if body is not None else None,
                                    headers=self.headers)
            response = self.connection.getresponse()
            payload = response.read()
            ms = (time.perf_counter() - started) * 1000
            if response.getheader("Connection", "").lower() == "close":
                self._reset()
            try:
                answer = json.loads(payload) if payload else None
            except ValueError:
                answer = None
            return response.status, answer, ms, None
        except (OSError, http.client.HTTPException) as error:
            self._reset()
            return 0, None, (time.perf_counter() - started) * 1000, f"{type(error).__name__}: {error}"

    def _reset(self) -> None:
        if self.connection is not None:
            self.connection.close()
        self.connection = None

    def loop(self, *, deadline: float, max_requests: int) -> None:
        for _ in range(max_requests):
            if time.monotonic() >= deadline:
                break
            if self.random.random() < self.write_share:
                self.write()
            else:
                self.search()
        self._reset()

    def search(self) -> None:
        body = {"query": self.random.choice(QUERIES), "limit": 10}
        status, _, ms, error = self.send("POST", "/api/v1/search", body)
        self.log.samples.append(Sample("search", status, ms, error))

    def write(self) -> None:
        log = self.log
        n = log.created + log.edited
        editable = [pk for pk in log.expected if pk not in log.uncertain]
        if editable and self.random.random() < 0.3:
            pk = self.random.choice(editable)
            fields = {"description": f"Edited by client {self.number}, write {n} of run {self.run}."}
            status, answer, ms, error = self.send("PATCH", f"/api/v1/lessons/{pk}", fields)
            if status == 200:
                log.expected[pk] = {**log.expected[pk], **fields}
                log.edited += 1
            elif status == 0:
                log.uncertain.add(pk)  # it may or may not have landed
        else:
            topic = self.random.choice(TOPICS)
            fields = {
                "title": f"Load test {self.run}: {topic[0]} ({self.number}-{n})",
                "description": f"Client {self.number} learned that {topic[2]}.",
                "tags": [topic[1], "load-test"],
            }
            status, answer, ms, error = self.send("POST", "/api/v1/lessons", fields)
            if status == 201 and answer and "id" in answer:
                log.expected[answer["id"]] = {"title": fields["title"], "description": fields["description"]}
                log.created += 1
        log.samples.append(Sample("write", status, ms, error))


def _percentiles(values: list[float]) -> dict:
    if not values:
        return {"count": 0, "p50": None, "p95": None, "p99": None, "max": None}
    array = np.asarray(values)
    return {
        "count": len(values),
        **{f"p{q}": round(float(np.percentile(array, q)), 1) for q in (50, 95, 99)},
        "max": round(float(array.max()), 1),
    }


class Command(BaseCommand):
    help = (
        "Concurrent searches and writes against a server on this machine; then every acknowledged write is read back."
    )

    def add_arguments(self, parser):
        parser.add_argument("--url", help="A running server on a loopback address (default: start one).")
        parser.add_argument("--clients", type=int, default=50, help=f"Concurrent clients (1..{MAX_CLIENTS}; 50).")
        parser.add_argument("--seconds", type=float, default=60, help=f"Duration (up to {MAX_SECONDS}; 60).")
        parser.add_argument("--write-share", type=float, default=0.2, help="Share of writes (0..1; 0.2).")
        parser.add_argument("--max-requests", type=int, default=100_000, help="Per client, at most (100000).")
        parser.add_argument("--timeout", type=float, default=30, help="Seconds a request may take (30).")
        parser.add_argument("--team", default="load-test", help="Team to use (created if missing; load-test).")
        parser.add_argument("--seed-lessons", type=int, default=200, help="Lessons the team starts with (200).")
        parser.add_argument("--workers", type=int, default=2, help="gunicorn workers when the command starts it (2).")
        parser.add_argument("--threads", type=int, default=4, help="gunicorn threads per worker (4).")
        parser.add_argument("--keep", action="store_true", help="Keep the lessons the run wrote.")
        parser.add_argument("--json", dest="json_path", help="Also write the figures to this file.")

    def handle(self, *args, **options):
        clients, seconds = options["clients"], options["seconds"]
        if not 1 <= clients <= MAX_CLIENTS:
            raise CommandError(f"--clients must be between 1 and {MAX_CLIENTS}, not {clients}")
        if not 0 < seconds <= MAX_SECONDS:
            raise CommandError(f"--seconds must be more than 0 and at most {MAX_SECONDS}, not {seconds}")
        json_path = checked_json_path(options["json_path"])
        if not 0 <= options["write_share"] <= 1:
            raise CommandError(f"--write-share must be between 0 and 1, not {options['write_share']}")
        # each checked here: a --timeout of -1 failed inside every client thread and the run then
        # reported 0 requests and exited 0, as did --max-requests 0
        if not 0 < options["timeout"] <= MAX_SECONDS:
            raise CommandError(f"--timeout must be more than 0 and at most {MAX_SECONDS}, not {options['timeout']}")
        if options["max_requests"] < 1:
            raise CommandError(f"--max-requests must be at least 1, not {options['max_requests']}")
        if not 0 <= options["seed_lessons"] <= MAX_SEED_LESSONS:
            raise CommandError(
                f"--seed-lessons must be between 0 and {MAX_SEED_LESSONS}, not {options['seed_lessons']}"
            )
        if options["url"]:
            host, port = loopback_only(options["url"])  # before anything is sent or stored

        team = team_get_or_create(slug=options["team"])
        self._seed(team, options["seed_lessons"])
        api_key, raw_key = api_key_create(team=team, name="load test")
        server, server_name = None, "given URL"
        try:
            if not options["url"]:
                server, host, port, server_name = self._start_server(options)
            run = f"{int(time.time()):x}"
            figures, logs = self._run(host=host, port=port, key=raw_key, run=run, options=options)
            figures["server"] = server_name
            figures["read_back"] = self._read_back(host=host, port=port, key=raw_key, logs=logs, options=options)
        finally:
            api_key_revoke(api_key=api_key)
            if server is not None:
                _stop(server)
        written = [pk for log in logs for pk in log.expected]
        if not options["keep"]:
            Lesson.objects.filter(team=team, pk__in=written).delete()

        self.stdout.write(self._report(figures, url=f"http://{host}:{port}", clients=clients))
        if json_path is not None:
            write_json_whole(json_path, figures, stdout=self.stdout)  # a stop or full disk keeps the old
        read_back = figures["read_back"]
        if not figures["requests"]:
            raise CommandError("no request was answered: nothing was measured")
        if figures["errors"]["total"] or read_back["missing"] or read_back["differing"]:
            raise CommandError(
                f"{figures['errors']['total']} request(s) failed; {read_back['missing']} acknowledged write(s) "
                f"missing and {read_back['differing']} differing on read-back"
            )

    def _seed(self, team, count: int) -> None:
        existing = Lesson.objects.filter(team=team).count()
        if existing >= count:
            return
        self.stderr.write(f"seeding {count - existing} lessons into team {team.slug} ...")
        with embeddings_deferred():
            for n in range(existing, count):
                title, tag, insight = TOPICS[n % len(TOPICS)]
                lesson_create(
                    team=team,
                    title=f"{title.capitalize()}: case {n}",
                    description=insight.capitalize() + ".",
                    tags=[tag],
                    confidence=0.5 + (n % 5) / 10,
                )
        try:
            embedding_backfill(kind="lessons", team=team)
        except EmbeddingUnavailable as error:  # the lessons are stored; searches would run on words only
            raise CommandError(f"the embedding model is unavailable, the seeded lessons are not embedded: {error}; "
                               "turn the model on (EMBEDDINGS_ENABLED) or run backfill_embeddings") from error

    def _start_server(self, options):
        port = _free_port()
        if importlib.util.find_spec("gunicorn") is not None:
            command = [sys.executable, "-m", "gunicorn", "memory_site.wsgi:application", "--bind", f"127.0.0.1:{port}",
                       "--workers", str(options["workers"]), "--threads", str(options["threads"]),
                       "--timeout", "120", "--log-level", "warning"]
            name = f"gunicorn, {options['workers']} workers x {options['threads']} threads"
        else:
            command = [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"]
            name = "runserver (threaded; gunicorn is not installed)"
        self.stderr.write(f"starting {name} on 127.0.0.1:{port} ...")
        process = subprocess.Popen(command, cwd=settings.BASE_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise CommandError(f"the server exited with code {process.returncode} before it answered")
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                connection.request("GET", "/api/v1/health")
                if connection.getresponse().status == 200:
                    return process, "127.0.0.1", port, name
            except OSError:
                pass
            time.sleep(0.5)
        _stop(process)
        raise CommandError(f"the server did not answer /api/v1/health within {SERVER_START_TIMEOUT} s")

    def _run(self, *, host, port, key, run, options):
        clients = [
            Client(number=n, host=host, port=port, key=key, timeout=options["timeout"],
                   write_share=options["write_share"], run=run)
            for n in range(options["clients"])
        ]
        self.stderr.write(f"{len(clients)} clients for {options['seconds']:g} s against http://{host}:{port} ...")
        started = time.monotonic()
        deadline = started + options["seconds"]
        threads = [
            threading.Thread(target=client.loop, kwargs={"deadline": deadline, "max_requests": options["max_requests"]},
                             daemon=True)
            for client in clients
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=options["seconds"] + options["timeout"] + 30)
        elapsed = time.monotonic() - started
        logs = [client.log for client in clients]
        samples = [sample for log in logs for sample in log.samples]
        errors = [sample for sample in samples if not 200 <= sample.status < 300]
        by_kind = defaultdict(list)
        for sample in samples:
            if 200 <= sample.status < 300:
                by_kind[sample.kind].append(sample.ms)
        figures = {
            "clients": len(clients),
            "seconds": round(elapsed, 1),
            "requests": len(samples),
            "throughput_per_s": round(len(samples) / elapsed, 1) if elapsed else 0.0,
            "latency_ms": {
                "search": _percentiles(by_kind["search"]),
                "write": _percentiles(by_kind["write"]),
                "all": _percentiles(by_kind["search"] + by_kind["write"]),
            },
            "errors": {
                "total": len(errors),
                "by_status": dict(Counter(str(sample.status) for sample in errors)),
                "examples": sorted({sample.error for sample in errors if sample.error})[:5],
            },
            "writes": {
                "acknowledged": sum(log.created + log.edited for log in logs),
                "created": sum(log.created for log in logs),
                "edited": sum(log.edited for log in logs),
            },
        }
        return figures, logs

    def _read_back(self, *, host, port, key, logs, options) -> dict:
        reader = Client(number=-1, host=host, port=port, key=key, timeout=options["timeout"], write_share=0, run="read")
        checked = missing = differing = unreadable = 0
        for log in logs:
            for pk, fields in log.expected.items():
                if pk in log.uncertain:
                    continue
                status, answer, _, _ = reader.send("GET", f"/api/v1/lessons/{pk}")
                checked += 1
                if status == 404:
                    missing += 1
                elif status != 200 or not answer:
                    unreadable += 1
                elif any(answer.get(name) != value for name, value in fields.items()):
                    differing += 1
        reader._reset()
        skipped = sum(len(log.uncertain) for log in logs)
        return {
            "lessons": checked,
            "missing": missing,
            "differing": differing + unreadable,
            "uncertain_skipped": skipped,
        }

    def _report(self, figures: dict, *, url: str, clients: int) -> str:
        lines = [
            f"load test: {clients} clients for {figures['seconds']} s against {url} ({figures['server']})",
            f"requests: {figures['requests']} ({figures['throughput_per_s']}/s)",
            f"{'latency ms':<12}{'count':>8}{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}",
        ]
        for kind, stats in figures["latency_ms"].items():
            cells = [stats[name] for name in ("p50", "p95", "p99", "max")]
            lines.append(f"{kind:<12}{stats['count']:>8}" + "".join(f"{'-' if c is None else c:>9}" for c in cells))
        errors = figures["errors"]
        by_status = f" by status {errors['by_status']} (0 = no answer)" if errors["total"] else ""
        lines.append(f"errors: {errors['total']}{by_status}")
        lines.extend(f"  {example}" for example in errors["examples"])
        writes, read_back = figures["writes"], figures["read_back"]
        lines.append(
            f"writes acknowledged: {writes['acknowledged']} "
            f"({writes['created']} lessons created, {writes['edited']} edits)"
        )
        skipped = read_back["uncertain_skipped"]
        lines.append(
            f"read back: {read_back['lessons']} lessons, {read_back['missing']} missing, "
            f"{read_back['differing']} differing"
            + (f" ({skipped} with an unanswered edit not checked)" if skipped else "")
        )
        return "\n".join(lines)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)
