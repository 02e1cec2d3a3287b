"""`db_worker` (lessons/management/commands/db_worker.py) across a lost database connection.

An idle worker used to exit at its first poll after a database restart ("the database is
unavailable"), and no saved row was embedded until something restarted it. Now it waits and polls
again, still stops at once on Ctrl-C or SIGTERM while it waits, and a worker that loses the
database in the middle of a task still exits with one line (README, Production).

The worker runs as a subprocess against a PostgreSQL of its own (tests/reliability/throwaway.py),
which these tests kill and start again; each test has its own database.
"""

import signal
import uuid

import pytest

from tests.reliability.throwaway import (
    MIGRATED_TEMPLATE,
    ThrowawayPostgres,
    manage,
    manage_background,
    project_env,
    stop_process,
    wait_for,
)

HASHING = "lessons.embedding.backends.HashingBackend"  # no torch to load: the worker starts in seconds
GATED = "tests.embedding_backends.GatedHashingBackend"
LOST = "database connection lost while waiting for tasks"
BACK = "database connection back after"
TASK_STATUS = "SELECT status FROM django_tasks_database_dbtaskresult ORDER BY enqueued_at"


@pytest.fixture(scope="module")
def pg(tmp_path_factory):
    server = ThrowawayPostgres(tmp_path_factory.mktemp("worker") / "pg")
    manage("migrate", "--no-input", env=project_env(server.create_database(MIGRATED_TEMPLATE)))
    yield server
    server.stop()


@pytest.fixture
def database(pg):
    """A database of the test's own, with the database task queue, as production runs it."""
    name = f"worker_{uuid.uuid4().hex[:12]}"
    env = project_env(pg.create_database(name, template=MIGRATED_TEMPLATE),
                      TASKS_BACKEND="django_tasks_db.backend.DatabaseBackend", EMBEDDING_BACKEND=HASHING)
    return name, env


def _save_a_lesson(env: dict, title: str) -> None:
    """A save through the services, which queues its embedding for the worker."""
    code = ("from lessons.services.lessons import lesson_create; "
            "from lessons.services.teams import team_get_or_create; "
            f"lesson_create(team=team_get_or_create(slug='worker'), title={title!r})")
    manage("shell", "-c", code, env=env)


def _start_worker(env: dict, log):
    # --no-reload: the worker itself, not Django's autoreloader around it, gets the test's signals.
    return manage_background("db_worker", "--no-reload", "--no-startup-delay", "--interval", "0.2", env=env, log=log)


def _worker_backends(pg, name: str) -> list[tuple]:
    return pg.query("postgres", "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                    [name])


def _runs_a_new_task(pg, name: str, env: dict, worker, log) -> None:
    _save_a_lesson(env, "Saved after the outage")
    wait_for(lambda: pg.query(name, TASK_STATUS)[-1:] == [("SUCCESSFUL",)] or worker.poll() is not None,
             timeout=60, what="the worker to run the new task")
    assert worker.poll() is None, log.read_text()
    assert pg.query(name, TASK_STATUS)[-1:] == [("SUCCESSFUL",)], log.read_text()
    assert pg.query(name, "SELECT count(*) FROM lessons_lesson WHERE embedding IS NULL") == [(0,)]


def test_an_idle_worker_survives_its_connection_being_terminated(pg, database, tmp_path):
    name, env = database
    log = tmp_path / "worker.log"
    worker = _start_worker(env, log)
    try:
        wait_for(lambda: _worker_backends(pg, name) or worker.poll() is not None, timeout=60,
                 what="the worker to connect")
        terminated = pg.query("postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                          "WHERE datname = %s AND pid <> pg_backend_pid()", [name])
        assert terminated == [(True,)], terminated
        _runs_a_new_task(pg, name, env, worker, log)
    finally:
        stop_process(worker)
    assert "Traceback" not in log.read_text()


def test_an_idle_worker_survives_a_database_restart(pg, database, tmp_path):
    name, env = database
    log = tmp_path / "worker.log"
    worker = _start_worker(env, log)
    try:
        wait_for(lambda: _worker_backends(pg, name) or worker.poll() is not None, timeout=60,
                 what="the worker to connect")
        pg.kill()
        # It notices at its next poll, then keeps trying, waiting longer each time.
        wait_for(lambda: "database still unavailable" in log.read_text() or worker.poll() is not None, timeout=30,
                 what="the worker to try again")
        assert worker.poll() is None, log.read_text()
        pg.start()
        wait_for(lambda: BACK in log.read_text() or worker.poll() is not None, timeout=60,
                 what="the worker to reconnect")
        _runs_a_new_task(pg, name, env, worker, log)
    finally:
        stop_process(worker)
        if not pg.is_up():
            pg.start()
    output = log.read_text()
    assert "Traceback" not in output
    assert output.count(LOST) == 1, output  # one line for the loss, one a retry ("reconnecting in 1 s", 2 s, ...)
    assert f"{LOST} (" in output and "reconnecting in 1 s" in output, output


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl_c"])
def test_a_stop_signal_ends_a_worker_waiting_for_the_database_at_once(pg, database, tmp_path, stop):
    name, env = database
    log = tmp_path / "worker.log"
    worker = _start_worker(env, log)
    try:
        wait_for(lambda: _worker_backends(pg, name) or worker.poll() is not None, timeout=60,
                 what="the worker to connect")
        pg.kill()
        wait_for(lambda: LOST in log.read_text() or worker.poll() is not None, timeout=30,
                 what="the worker to notice the loss")
        assert worker.poll() is None, log.read_text()
        worker.send_signal(stop)
        status = worker.wait(timeout=5)  # mid-wait: not after the next retry, up to 30 s away
    finally:
        stop_process(worker)
        if not pg.is_up():
            pg.start()
    output = log.read_text()
    assert status == 0, output
    assert "shutting down gracefully" in output
    assert "Traceback" not in output


def test_a_worker_that_loses_the_database_mid_task_still_exits_with_one_line(pg, database, tmp_path):
    """The library cannot record the task's end then: the worker exits (a process manager restarts
    it) and the task stays RUNNING for requeue_stalled_tasks, as the README says."""
    name, env = database
    _save_a_lesson(env, "Embed me in the worker")
    gate = tmp_path / "gate"
    gate.mkdir()
    log = tmp_path / "worker.log"
    worker = _start_worker({**env, "EMBEDDING_BACKEND": GATED, "EMBEDDING_GATE_DIR": str(gate),
                            "EMBEDDING_GATE_OPEN_CALLS": "0"}, log)
    try:
        wait_for(lambda: (gate / "encode-1.started").exists() or worker.poll() is not None, timeout=60,
                 what="the worker to start the task")
        assert worker.poll() is None, log.read_text()
        pg.kill()
        (gate / "release").touch()
        status = worker.wait(timeout=60)
    finally:
        stop_process(worker)
        if not pg.is_up():
            pg.start()
    output = log.read_text()
    assert status == 1, output
    assert "db_worker: the database is unavailable (" in output, output
    assert LOST not in output and "Traceback" not in output, output
    assert pg.query(name, TASK_STATUS) == [("RUNNING",)]
