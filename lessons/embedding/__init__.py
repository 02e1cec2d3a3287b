"""Embedding: one module owns the model. Callers use `get_embedding_backend()` and never import
sentence-transformers themselves, so the backend can be swapped in settings (EMBEDDING_BACKEND).

The names below are resolved on first use (PEP 562), so that `lessons.embedding.onnx_queries`
can be imported before Django's apps are ready: `manage.py search` starts loading its query
encoder while Django starts (manage.py); `backends` and `text` import the models."""

from importlib import import_module

_MODULE_OF = {
    "EmbeddingBackend": "backends",
    "EmbeddingUnavailable": "backends",
    "get_embedding_backend": "backends",
    "warm_up": "backends",
    "warm_up_in_background": "backends",
    "content_hash": "text",
    "content_hash_sql": "text",
    "embedded_fields": "text",
    "embedding_text": "text",
    "embedding_text_sql": "text",
}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
