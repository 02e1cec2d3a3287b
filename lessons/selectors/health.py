"""How the service is doing: database, embedding model, embedding coverage, and whether it is
ready for traffic. Counts only: no team, key or row is named, so the answer is safe to show
without authentication."""

import logging

from django.db import DatabaseError, connection

from lessons.embedding import get_embedding_backend, warm_up_in_background
from lessons.error_text import one_line
from lessons.selectors.embeddings import embedding_coverage

logger = logging.getLogger(__name__)


def database_status() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
    except DatabaseError as error:
        # The answer is public: it says what kind of fault, the log says where (host, port,
        # socket path and the driver's words, on one line).
        logger.error("health: the database does not answer: %s", one_line(error))
        return {"ok": False, "reason": f"{type(error).__name__}: the database does not answer (the server's log says why)"}
    unapplied = unapplied_migrations()
    if unapplied:
        # New code on an old schema (started before `migrate`): reads and writes of the new columns
        # fail, so it is not fit for traffic, though the database answers.
        return {"ok": False, "pgvector": row[0] if row else None, "migrated": False,
                "reason": f"the database is not migrated to this version of the code ({unapplied} migration(s) "
                          "to apply): run `python manage.py migrate`"}
    return {"ok": True, "pgvector": row[0] if row else None}


_migrated = False  # once every migration is applied, it stays so for this process's code...


def forget_migrated() -> None:
    """... until a request meets a table or column the database lacks (a restored backup, a
    rollback under a running server): the next probe reads the migration table again."""
    global _migrated
    _migrated = False


def unapplied_migrations() -> int:
    """How many of the code's migrations the database lacks; read from the migration table until
    none is missing (about 20 ms a probe while some are), then not again."""
    global _migrated
    if _migrated:
        return 0
    from django.db.migrations.executor import MigrationExecutor  # the migration graph: only for this

    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    _migrated = not plan
    return len(plan)


def model_status() -> dict:
    """Never waits for the model: while it loads, `loading` is true (and a load is started if no
    warm-up did), so a load balancer's probe answers at once."""
    backend = get_embedding_backend()
    if backend.enabled and not backend.load_settled:
        warm_up_in_background()
        return {"name": backend.model_name, "available": False, "loading": True, "reason": "the model is loading"}
    return {
        "name": backend.model_name,
        "available": backend.available,
        "loading": False,
        "reason": backend.unavailable_reason,
    }


def readiness(*, database: dict, model: dict) -> tuple[bool, str | None]:
    """Ready = the database answers and the model is loaded: a search then answers at full
    quality without waiting. Not ready is not down: search still works by keywords."""
    if not database["ok"]:
        if database.get("migrated") is False:  # the database answers; the schema is behind the code
            return False, database["reason"]
        return False, f"database unavailable: {database['reason']}"
    if model["loading"]:
        return False, "the embedding model is still loading"
    if not model["available"]:
        return False, model["reason"]
    return True, None


def system_health() -> dict:
    """`status` is ok, degraded (the model is unavailable or still loading: search falls back to
    words), or unavailable (no database: nothing works)."""
    database = database_status()
    model = model_status()
    ready, reason = readiness(database=database, model=model)
    if not database["ok"]:
        return {"status": "unavailable", "ready": ready, "reason": reason, "database": database, "model": model,
                "embeddings": {}}
    return {
        "status": "ok" if model["available"] else "degraded",
        "ready": ready,
        "reason": reason,
        "database": database,
        "model": model,
        "embeddings": embedding_coverage(),
    }
