"""Fault tests: the database killed during a backfill and under a running server, the task worker
killed mid-task, two clients editing one row at once.

They run against a PostgreSQL of their own (tests/reliability/throwaway.py), killed with SIGKILL
and started again, with the project's commands and server as subprocesses, so the rest of the
suite's database is never touched. Each test gets its own database, copied from one migrated
template.
"""

import json
import threading
import urllib.error
import urllib.request

import numpy as np
import psutil
import pytest

from lessons.embedding import embedding_text
from lessons.embedding.backends import HashingBackend
from lessons.models import Lesson
from tests.reliability.throwaway import (
    MIGRATED_TEMPLATE,
    ThrowawayPostgres,
    free_port,
    manage,
    manage_background,
    project_env,
    stop_process,
    wait_for,
)

LESSONS = 520  # more than one encode window (512 rows), so the kill lands between committed batches
# Meaning plays no part in these faults: the hashing embedder (deterministic, no torch) spares each
# subprocess seconds of loading the model, and its vectors still tie each row to its own text.
HASHING = "lessons.embedding.backends.HashingBackend"
GATED = "tests.embedding_backends.GatedHashingBackend"
EMBEDDED_COUNT = "SELECT count(*) FROM lessons_lesson WHERE embedding IS NOT NULL"
TOPICS = ["retrying uploads", "database migrations", "flaky browser tests", "cache invalidation", "rate limits"]


@pytest.fixture(scope="module")
def pg(tmp_path_factory):
    server = ThrowawayPostgres(tmp_path_factory.mktemp("faults") / "pg")
    url = server.create_database(MIGRATED_TEMPLATE)
    manage("migrate", "--no-input", env=project_env(url))
    yield server
    server.stop()


def _seed_lessons(env: dict, count: int) -> None:
    """`count` lessons not embedded yet, in one statement (the services validate row by row: slow)."""
    code = f"""
from lessons.models import Lesson
from lessons.services.teams import team_get_or_create
team = team_get_or_create(slug="faults")
topics = {TOPICS!r}
Lesson.objects.bulk_create(
    Lesson(team=team, title=f"Lesson {{n}} on {{topics[n % len(topics)]}}",
           description=f"What we learned about {{topics[n % len(topics)]}}, case {{n}}.")
    for n in range({count})
)
"""
    manage("shell", "-c", code, env=env)


def _vector(text: str) -> np.ndarray:
    return np.array(json.loads(text), dtype=np.float32)


# --- the database killed during backfill_embeddings -----------------------------------------------


def test_backfill_survives_the_database_being_killed(pg, tmp_path):
    env = project_env(pg.create_database("faults_backfill", template=MIGRATED_TEMPLATE), EMBEDDING_BACKEND=HASHING)
    _seed_lessons(env, LESSONS)
    gate = tmp_path / "gate"
    gate.mkdir()
    gated = {**env, "EMBEDDING_BACKEND": GATED, "EMBEDDING_GATE_DIR": str(gate), "EMBEDDING_GATE_OPEN_CALLS": "1"}

    # First run: the first window (512 rows) is encoded and committed batch by batch; the second
    # encode waits at the gate. The postmaster is killed there, then the encode goes on and the
    # write meets a dead server.
    log = tmp_path / "backfill.log"
    run = manage_background("backfill_embeddings", "--kind", "lessons", env=gated, log=log)
    try:
        wait_for(lambda: (gate / "encode-2.started").exists() or run.poll() is not None, timeout=300,
                 what="the backfill's second encode")
        assert run.poll() is None, log.read_text()
        written_before_kill = pg.query("faults_backfill", EMBEDDED_COUNT)
        pg.kill()
        (gate / "release").touch()
        exit_code = run.wait(timeout=120)
    finally:
        stop_process(run)
        if not pg.is_up():
            pg.start()
    output = log.read_text()
    assert exit_code == 1, output
    assert written_before_kill == [(512,)]
    assert f"the database connection was lost after 512 of {LESSONS} row(s) were written" in output, output
    assert "run backfill_embeddings again to embed the rest" in output
    assert "Traceback" not in output

    # After the restart (WAL replay): the committed batches are there, nothing is half-written.
    rows = pg.query(
        "faults_backfill",
        """SELECT count(*), count(embedding), count(embedded_at),
                  count(*) FILTER (WHERE content_hash <> ''), count(*) FILTER (WHERE embedding_model <> '')
             FROM lessons_lesson""",
    )
    assert rows == [(LESSONS, 512, 512, 512, 512)]
    first_run = dict(
        pg.query("faults_backfill", "SELECT id, embedded_at FROM lessons_lesson WHERE embedding IS NOT NULL")
    )

    # The re-run embeds only the rest, once; the first run's rows keep their vectors and times.
    result = manage("backfill_embeddings", "--kind", "lessons", env=env)
    assert f"embedded: {LESSONS - 512}, already fresh: 512, failed: 0" in result.stdout
    assert "dry run: 0 to embed, 520 already fresh" in manage("backfill_embeddings", "--dry-run", env=env).stdout
    after = pg.query(
        "faults_backfill",
        "SELECT id, embedded_at, title, description, recommendation, embedding::text FROM lessons_lesson ORDER BY id",
    )
    assert len(after) == LESSONS
    assert all(row[1] == first_run[row[0]] for row in after if row[0] in first_run)

    # Every vector is the embedder's own for its row's text, in both runs.
    texts = [embedding_text(Lesson(title=row[2], description=row[3], recommendation=row[4])) for row in after]
    expected = HashingBackend().embed_documents(texts)
    for row, vector in zip(after, expected):
        assert float(_vector(row[5]) @ vector) > 0.9999, row[0]


# --- the API while the database is down ---------------------------------------------------------


def _request(method: str, url: str, *, key: str | None = None, body: dict | None = None) -> tuple[int, dict | list]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            payload = response.read()
            return response.status, json.loads(payload) if payload else {}
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


@pytest.fixture(scope="module")
def server(pg, tmp_path_factory):
    """`runserver` (threaded) on 127.0.0.1 against the throwaway server (hashing embedder)."""
    env = project_env(pg.create_database("faults_api", template=MIGRATED_TEMPLATE), EMBEDDING_BACKEND=HASHING)
    code = "from lessons.services.teams import team_get_or_create; team_get_or_create(slug='faults')"
    manage("shell", "-c", code, env=env)
    key = manage("create_api_key", "--team", "faults", "--name", "fault tests", env=env).stdout.strip().splitlines()[-1]
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "runserver.log"
    process = manage_background("runserver", f"127.0.0.1:{port}", "--noreload", env=env, log=log)
    base = f"http://127.0.0.1:{port}/api/v1"

    def healthy():
        assert process.poll() is None, log.read_text()
        try:
            return _request("GET", f"{base}/health")[0] == 200
        except OSError:
            return False

    try:
        wait_for(healthy, timeout=120, interval=0.5, what="runserver")
        yield {"base": base, "key": key, "env": env, "process": process, "log": log}
    finally:
        stop_process(process)


def test_api_answers_503_while_the_database_is_down_and_recovers_by_itself(pg, server):
    base, key = server["base"], server["key"]
    assert _request("GET", f"{base}/lessons", key=key)[0] == 200

    pg.kill()
    try:
        status, health = _request("GET", f"{base}/health")
        assert status == 503 and health["status"] == "unavailable"
        assert health["database"]["ok"] is False
        for method, path, body in [
            ("GET", "/lessons", None),
            ("POST", "/lessons", {"title": "Written while the database is down"}),
            ("POST", "/search", {"query": "retry uploads"}),
        ]:
            status, answer = _request(method, f"{base}{path}", key=key, body=body)
            assert status == 503, (method, path, status, answer)
            assert answer["detail"].startswith("the database is unavailable"), answer
    finally:
        pg.start()

    # The same server process, not restarted: the very next requests succeed.
    assert server["process"].poll() is None
    assert _request("GET", f"{base}/health")[0] == 200
    assert _request("GET", f"{base}/lessons", key=key)[0] == 200
    status, created = _request("POST", f"{base}/lessons", key=key, body={"title": "Written after the restart"})
    assert status == 201
    assert _request("GET", f"{base}/lessons/{created['id']}", key=key) == (200, created)
    titles = [row[0] for row in pg.query("faults_api", "SELECT title FROM lessons_lesson")]
    assert "Written while the database is down" not in titles


# --- two clients editing one row at once ----------------------------------------------------------


def _in_parallel(*jobs) -> None:
    errors: list[BaseException] = []

    def run(job):
        try:
            job()
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors


def test_two_clients_editing_one_lesson_end_consistent(pg, server):
    base, key = server["base"], server["key"]
    status, lesson = _request("POST", f"{base}/lessons", key=key, body={"title": "Shared lesson", "confidence": 0.5})
    assert status == 201
    url = f"{base}/lessons/{lesson['id']}"
    edits = 12
    answers: dict[str, list[int]] = {"a": [], "b": []}

    def client_a():  # rewrites the text and the confidence
        for n in range(edits):
            body = {
                "title": f"Title by A {n}",
                "description": f"Description by A {n}",
                "confidence": round(0.01 * (n + 1), 2),
            }
            answers["a"].append(_request("PATCH", url, key=key, body=body)[0])

    def client_b():  # rewrites the text and the tags
        for n in range(edits):
            body = {"title": f"Title by B {n}", "description": f"Description by B {n}", "tags": [f"b{n}"]}
            answers["b"].append(_request("PATCH", url, key=key, body=body)[0])

    _in_parallel(client_a, client_b)
    assert answers == {"a": [200] * edits, "b": [200] * edits}

    status, final = _request("GET", url, key=key)
    assert status == 200
    # Each PATCH lands whole: title and description come from the same edit, the last one.
    writer, number = final["title"].removeprefix("Title by ").split()
    assert final["description"] == f"Description by {writer} {number}"
    assert int(number) == edits - 1
    # Neither client's other field was lost to the other's write.
    assert final["confidence"] == round(0.01 * edits, 2)
    assert final["tags"] == [f"b{edits - 1}"]
    # The stored embedding is the final text's: no task wrote a vector of an older text over it.
    assert "dry run: 0 to embed" in manage("backfill_embeddings", "--dry-run", env=server["env"]).stdout


def test_two_clients_editing_one_memory_keep_every_version(pg, server):
    base, key = server["base"], server["key"]
    status, memory = _request("POST", f"{base}/memories", key=key, body={"content": "Version zero"})
    assert status == 201
    url = f"{base}/memories/{memory['id']}"
    edits = 8

    def client(name):
        def edit():
            for n in range(edits):
                status, _ = _request("PATCH", url, key=key, body={"content": f"Version {n} by {name}"})
                assert status == 200
        return edit

    _in_parallel(client("A"), client("B"))
    status, versions = _request("GET", f"{url}/versions", key=key)
    assert status == 200
    _, final = _request("GET", url, key=key)
    contents = {version["content"] for version in versions} | {final["content"]}
    expected = {"Version zero"} | {f"Version {n} by {name}" for n in range(edits) for name in "AB"}
    assert contents == expected  # no edit's text was lost
    assert len(versions) == 2 * edits + 1  # every earlier text, and the current one


def test_one_client_editing_a_memorys_text_and_others_its_importance_lose_nothing(pg, server):
    """An importance-only PATCH read the memory before the text edit's lock and wrote its stale
    text back (3 of 3 runs of this shape ended on the old text, with a spurious version)."""
    base, key = server["base"], server["key"]
    for attempt in range(3):
        status, memory = _request("POST", f"{base}/memories", key=key, body={"content": f"original {attempt}"})
        assert status == 201
        url = f"{base}/memories/{memory['id']}"

        def importance(value):
            return lambda: [_request("PATCH", url, key=key, body={"importance": value}) for _ in range(3)]

        def text():
            assert _request("PATCH", url, key=key, body={"content": f"new text {attempt}"})[0] == 200

        _in_parallel(importance(7), importance(8), text, importance(9), importance(6))
        _, final = _request("GET", url, key=key)
        _, versions = _request("GET", f"{url}/versions", key=key)
        assert final["content"] == f"new text {attempt}"
        # the current text and the one it replaced: one real edit, one version, none written back
        assert sorted(version["content"] for version in versions) == [f"new text {attempt}", f"original {attempt}"]
        assert final["importance"] in (6, 7, 8, 9)


# --- the task worker killed mid-task --------------------------------------------------------------


def test_worker_killed_mid_task_leaves_the_row_pending_for_the_backfill(pg, tmp_path):
    env = project_env(
        pg.create_database("faults_worker", template=MIGRATED_TEMPLATE),
        TASKS_BACKEND="django_tasks_db.backend.DatabaseBackend",
        EMBEDDING_BACKEND=HASHING,
    )
    # A save through the services queues its embedding in the database.
    code = "from lessons.services.lessons import lesson_create; from lessons.services.teams import team_get_or_create; "
    code += "lesson_create(team=team_get_or_create(slug='faults'), title='Embed me in the worker')"
    manage("shell", "-c", code, env=env)
    assert pg.query("faults_worker", "SELECT status FROM django_tasks_database_dbtaskresult") == [("READY",)]

    gate = tmp_path / "gate"
    gate.mkdir()
    worker_env = {
        **env,
        "EMBEDDING_BACKEND": GATED,
        "EMBEDDING_GATE_DIR": str(gate),
        "EMBEDDING_GATE_OPEN_CALLS": "0",
    }
    log = tmp_path / "worker.log"
    # --no-reload: under DEBUG the worker runs in a child of Django's autoreloader, and a SIGKILL of
    # the parent left that child running, orphaned, and the task with it.
    worker = manage_background("db_worker", "--no-reload", "--no-startup-delay", "--interval", "0.2",
                               env=worker_env, log=log)
    try:
        assert not psutil.Process(worker.pid).children(recursive=True)  # the process killed below is the worker
        # The worker has claimed the task, loaded the model and is about to encode: kill it there.
        wait_for(lambda: (gate / "encode-1.started").exists() or worker.poll() is not None, timeout=300,
                 what="the worker to start the task")
        assert worker.poll() is None, log.read_text()
        worker.kill()
        worker.wait(timeout=30)
    finally:
        stop_process(worker)

    assert pg.query("faults_worker", "SELECT status FROM django_tasks_database_dbtaskresult") == [("RUNNING",)]
    assert pg.query("faults_worker", "SELECT count(*) FROM lessons_lesson WHERE embedding IS NULL") == [(1,)]
    assert "dry run: 1 to embed, 0 already fresh" in manage("backfill_embeddings", "--dry-run", env=env).stdout
    assert "embedded: 1, already fresh: 0, failed: 0" in manage("backfill_embeddings", env=env).stdout
    assert pg.query("faults_worker", "SELECT count(*) FROM lessons_lesson WHERE embedding IS NULL") == [(0,)]

    # The dead worker's task goes back to the queue, and the next worker runs it (the row is fresh
    # by now: the task says so and changes nothing).
    assert "would requeue 0 task(s)" in manage("requeue_stalled_tasks", "--dry-run", env=env).stdout  # 30 min
    assert "requeued 1 task(s)" in manage("requeue_stalled_tasks", "--older-than", "0", env=env).stdout
    assert pg.query("faults_worker", "SELECT status FROM django_tasks_database_dbtaskresult") == [("READY",)]
    manage("db_worker", "--batch", "--no-reload", "--no-startup-delay", env=env)
    assert pg.query("faults_worker", "SELECT status FROM django_tasks_database_dbtaskresult") == [("SUCCESSFUL",)]


def test_the_development_server_does_not_pile_up_connections_under_concurrent_clients(pg, server):
    """runserver answers each request on a new thread, and a kept connection (CONN_MAX_AGE) belongs
    to its thread: with 60 s, 20 clients of `make run` left 64 connections open and PostgreSQL
    refused new clients ("too many clients already": 137 of 300 health checks answered 503)."""
    import concurrent.futures

    statuses = []

    def check(_):
        statuses.append(_request("GET", f"{server['base']}/health")[0])

    with concurrent.futures.ThreadPoolExecutor(20) as clients:
        list(clients.map(check, range(200)))
    assert statuses == [200] * 200
    [(held,)] = pg.query("postgres", "SELECT count(*) FROM pg_stat_activity WHERE datname = 'faults_api'")
    assert held <= 3, held  # the server's own few (a search's second leg, the health probe), not one a thread
