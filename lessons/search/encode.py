"""The query encode: the primary query and, with `context`, the contextual query, each on a worker
thread of its own, at once.

The encode runs while PostgreSQL, on the other core, runs statement 1 (the keyword legs). The two
texts are not one batch: a batch pads the short primary query to the contextual query's length
(identifiers cut into many word pieces) and took 20-22 ms p50 here, the two encoded one after the
other 16 ms, and at once on two threads 13 ms (ONNX Runtime releases the GIL; bench_search's
context queries, one thread a session run). In hybrid mode the second encoder thread competes with
statement 1 for the cores; on a 200-lesson team context searches still went from 32.6/43.0 to
29.1/37.4 ms p50/p95, and at 300,000 lessons the difference was inside the noise.

Before any encode, `model_reads` asks the model's own tokenizer whether the query holds a word it
knows (0.08 ms); a query without one is not encoded at all (engine.py).
"""

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from time import perf_counter

import numpy as np

from lessons.embedding import EmbeddingUnavailable, get_embedding_backend
from lessons.embedding.onnx_queries import load_tokenizer

logger = logging.getLogger("lessons.search")

_QUERY_ENCODER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="query-encoder")


class QueryEncoding:
    """The encodes under way for one search; `result()` waits for them."""

    def __init__(self, texts: list[str]):
        self._started = perf_counter()
        self._futures: list[Future] = [_QUERY_ENCODER.submit(_encode_one, text) for text in texts]

    def result(self) -> tuple[list[np.ndarray], str | None, float]:
        """(vectors, the degraded reason or None, milliseconds from the start to the last encode's end).
        The contextual text failing (an encode error, a bad vector) leaves the primary alone; the
        primary failing degrades the search."""
        outcomes, finished = zip(*(future.result() for future in self._futures))
        return (*_vectors(list(outcomes)), (max(finished) - self._started) * 1000.0)


def _encode_one(text: str) -> tuple[np.ndarray | EmbeddingUnavailable, float]:
    """One text's vector (or why it has none), and when the encode ended."""
    try:
        matrix = get_embedding_backend().embed_queries([text])
        # an empty answer is an unusable vector (checked with the others), not an IndexError
        outcome = np.asarray(matrix[0] if len(matrix) else [], dtype=np.float32)
    except EmbeddingUnavailable as error:
        outcome = error
    return outcome, perf_counter()


def encode_in_background(texts: list[str]) -> QueryEncoding:
    """Start encoding [primary] or [primary, contextual]; `.result()` gives (vectors, reason, ms)."""
    return QueryEncoding(texts)


def model_unavailable_reason() -> str | None:
    return get_embedding_backend().unavailable_reason


def model_reads(text: str) -> bool:
    """Whether the model finds a word in `text`: a word piece its tokenizer knows (not [UNK], not
    [CLS] or [SEP]) with a letter or a digit, among the pieces it would encode. Without one ("😀",
    "①" and "∑" are [UNK]; "→→" and "!!!" are punctuation pieces; Thai is [UNK] to
    all-MiniLM-L6-v2) the vector says nothing of the text: every such query gets nearly the same
    one, and its cosines ranked rows by how close they happened to lie to it, the best labelled
    `high` on meaning alone. True when the backend has no tokenizer to ask (a test backend)."""
    tokenizer = _tokenizer(_model_dir())
    if tokenizer is None:
        return True
    unknown = tokenizer.token_to_id("[UNK]")
    with _TOKENIZER_LOCK:
        encoding = tokenizer.encode(text)
    return any(not special and piece_id != unknown and any(ch.isalnum() for ch in piece.removeprefix("##"))
               for piece, piece_id, special in zip(encoding.tokens, encoding.ids, encoding.special_tokens_mask))


_TOKENIZER_LOCK = threading.Lock()  # as OnnxEncoder's: one encode at a time keeps its Rust borrow checks quiet


def _model_dir() -> Path | None:
    """Where the backend's model lies; None for a backend without one (a test backend) or whose
    model package is missing (its encode then says why, as before)."""
    try:
        return get_embedding_backend().model_dir
    except (AttributeError, ImportError):
        return None


@lru_cache(maxsize=4)
def _tokenizer(model_dir: Path | None):
    """The model's own tokenizer (its tokenizer.json, truncated at max_seq_length as the encoder
    is), loaded once; None when the backend has none or it cannot be read."""
    if model_dir is None:
        return None
    try:
        return load_tokenizer(model_dir=model_dir)
    except Exception as error:  # no tokenizer to ask: the query is encoded as before
        logger.warning("the query tokenizer could not be loaded, every query is encoded: %s", error)
        return None


def _vectors(outcomes: list) -> tuple[list[np.ndarray], str | None]:
    dimensions = get_embedding_backend().dimensions
    primary, *contextual = outcomes
    if isinstance(primary, EmbeddingUnavailable):
        return [], str(primary)
    if not _usable(primary, dimensions):
        return [], "the query embedding is unusable (not finite, empty or of the wrong size)"
    if not contextual:
        return [primary], None
    context = contextual[0]
    if isinstance(context, EmbeddingUnavailable):
        logger.warning("contextual query embedding failed, searching with the primary query: %s", context)
        return [primary], None
    if not _usable(context, dimensions):
        logger.warning("contextual query embedding unusable, searching with the primary query")
        return [primary], None
    return [primary, context], None


def _usable(vector: np.ndarray, dimensions: int) -> bool:
    return vector.shape == (dimensions,) and bool(np.all(np.isfinite(vector))) and float(np.linalg.norm(vector)) > 0
