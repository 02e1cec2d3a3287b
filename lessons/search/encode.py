"""The query encode: the primary query and, with `context`, the contextual query, in one batch.

It runs on a worker thread (ONNX Runtime and torch release the GIL) while PostgreSQL, on the
other core, runs statement 1 (the keyword legs).
"""

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from time import perf_counter

import numpy as np

from lessons.embedding import EmbeddingUnavailable, get_embedding_backend

logger = logging.getLogger("lessons.search")

_QUERY_ENCODER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="query-encoder")


def encode_in_background(texts: list[str]) -> Future:
    """Start the encode; the future gives (vectors, degraded reason or None, milliseconds)."""
    return _QUERY_ENCODER.submit(_timed_encode, texts)


def model_unavailable_reason() -> str | None:
    return get_embedding_backend().unavailable_reason


def _timed_encode(texts: list[str]) -> tuple[list[np.ndarray], str | None, float]:
    tick = perf_counter()
    vectors, reason = encode_queries(texts)
    return vectors, reason, (perf_counter() - tick) * 1000.0


def encode_queries(texts: list[str]) -> tuple[list[np.ndarray], str | None]:
    """[primary] or [primary, contextual] in one encode. The contextual text failing (a bad
    vector, an encode error with two texts) leaves the primary alone; the model failing degrades."""
    backend = get_embedding_backend()
    reason = backend.unavailable_reason
    if reason is not None:
        return [], reason
    try:
        matrix = backend.embed_queries(texts)
    except EmbeddingUnavailable as error:
        if len(texts) == 1:
            return [], str(error)
        logger.warning("contextual query embedding failed, searching with the primary query: %s", error)
        try:
            matrix = backend.embed_queries(texts[:1])
        except EmbeddingUnavailable as error_again:
            return [], str(error_again)
    vectors = [np.asarray(v, dtype=np.float32) for v in matrix]
    if not vectors or not _usable(vectors[0], backend.dimensions):
        return [], "the query embedding is unusable (not finite, empty or of the wrong size)"
    if len(vectors) > 1 and not _usable(vectors[1], backend.dimensions):
        logger.warning("contextual query embedding unusable, searching with the primary query")
        return vectors[:1], None
    return vectors, None


def _usable(vector: np.ndarray, dimensions: int) -> bool:
    return vector.shape == (dimensions,) and bool(np.all(np.isfinite(vector))) and float(np.linalg.norm(vector)) > 0
