"""Embedding: one module owns the model. Callers use `get_embedding_backend()` and never import
sentence-transformers themselves, so the backend can be swapped in settings (EMBEDDING_BACKEND)."""

from lessons.embedding.backends import (
    EmbeddingBackend,
    EmbeddingUnavailable,
    get_embedding_backend,
    warm_up,
    warm_up_in_background,
)
from lessons.embedding.text import (
    content_hash,
    content_hash_sql,
    embedded_fields,
    embedding_text,
    embedding_text_sql,
)

__all__ = [
    "EmbeddingBackend",
    "EmbeddingUnavailable",
    "content_hash",
    "content_hash_sql",
    "embedded_fields",
    "embedding_text",
    "embedding_text_sql",
    "get_embedding_backend",
    "warm_up",
    "warm_up_in_background",
]
