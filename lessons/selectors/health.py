"""How the service is doing: database, embedding model, embedding coverage. Counts only: no team,
key or row is named, so the answer is safe to show without authentication."""

from django.db import DatabaseError, connection

from lessons.embedding import get_embedding_backend
from lessons.selectors.embeddings import embedding_coverage


def database_status() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
    except DatabaseError as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return {"ok": False, "reason": reason}
    return {"ok": True, "pgvector": row[0] if row else None}


def model_status() -> dict:
    backend = get_embedding_backend()
    return {"name": backend.model_name, "available": backend.available, "reason": backend.unavailable_reason}


def system_health() -> dict:
    """`status` is ok, degraded (the model is unavailable: search falls back to words), or
    unavailable (no database: nothing works)."""
    database = database_status()
    model = model_status()
    if not database["ok"]:
        return {"status": "unavailable", "database": database, "model": model, "embeddings": {}}
    return {
        "status": "ok" if model["available"] else "degraded",
        "database": database,
        "model": model,
        "embeddings": embedding_coverage(),
    }
