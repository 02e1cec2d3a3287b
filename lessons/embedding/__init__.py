"""Embedding: one module owns the model. Callers use `get_embedding_backend()` and never import
sentence-transformers themselves, so the backend can be swapped in settings (EMBEDDING_BACKEND)."""

from lessons.embedding.backends import EmbeddingBackend, EmbeddingUnavailable, get_embedding_backend
from lessons.embedding.text import content_hash, embedding_text

__all__ = ["EmbeddingBackend", "EmbeddingUnavailable", "content_hash", "embedding_text", "get_embedding_backend"]
