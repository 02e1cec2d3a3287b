"""Search queries through ONNX Runtime: the same model, exported once from the bundled weights.

Why: a search waits for its query embedding. On this 2-core machine sentence-transformers (torch)
took 22 ms (p50) to encode one SciFact claim on one thread; ONNX Runtime running the exported graph
took 9 ms, with vectors equal to torch's within 2e-7. Documents keep the torch path (large batches,
where torch is already efficient).

The graph is exported from the loaded model with `torch.onnx.export` (transformer, mean pooling
over the attention mask, L2 normalisation) into `cache_dir`, named after the model package's
version and this module's export format. `optimum`, the usual route (sentence-transformers'
backend="onnx"), requires transformers 4.x, which sentence-transformers 6 does not accept.
Each load checks the graph against torch on probe texts (one long enough to be truncated, and a
padded batch); a stale or damaged file is exported again, and if that fails too the caller falls
back to torch. Nothing is downloaded.
"""

import logging
import os
import tempfile
import threading
import warnings
from importlib import metadata
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

EXPORT_FORMAT = 1  # bump when the exported graph changes (inputs, pooling, normalisation)
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
# Probe texts: a short one, and one longer than the 256-word-piece window, in one padded batch.
PROBE_TEXTS = (
    "row level security for multi-tenant tables",
    " ".join(["connection pooling keeps the database from running out of slots"] * 40),
)
TOLERANCE = 1e-5


class OnnxExportError(RuntimeError):
    """The model could not be exported to ONNX or its graph gives other vectors than torch."""


class OnnxQueryEncoder:
    """Encodes query texts with ONNX Runtime into L2-normalised float32 vectors."""

    def __init__(self, *, session, tokenizer, max_length: int, path: Path):
        self._session = session
        self._tokenizer = tokenizer
        self._max_length = max_length
        self.path = path
        # A fast tokenizer called with padding/truncation options mutates its own state, and two
        # threads at once fail with "Already borrowed": tokenise one call at a time (~0.4 ms).
        self._tokenizer_lock = threading.Lock()

    def encode(self, texts: list[str]) -> np.ndarray:
        with self._tokenizer_lock:
            encoded = self._tokenizer(
                list(texts), padding=True, truncation=True, max_length=self._max_length, return_tensors="np"
            )
        inputs = {name: np.asarray(encoded[name], dtype=np.int64) for name in INPUT_NAMES}
        (vectors,) = self._session.run(None, inputs)
        return np.asarray(vectors, dtype=np.float32)


def build_query_encoder(*, model, model_package: str, cache_dir: Path, threads: int) -> OnnxQueryEncoder:
    """Load the cached graph for `model` (a SentenceTransformer), exporting it first when it is
    missing or no longer matches torch. Raises OnnxExportError when it cannot be made to match."""
    try:
        version = metadata.version(model_package)
    except metadata.PackageNotFoundError:
        version = "unknown"
    path = Path(cache_dir) / f"{model_package}-{version}-queries-v{EXPORT_FORMAT}.onnx"
    expected = model.encode(list(PROBE_TEXTS), normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    if path.exists():
        try:
            encoder = _load(model=model, path=path, threads=threads)
            _check(encoder, expected)
            return encoder
        except Exception as error:  # damaged or stale: export again below
            logger.warning("cached ONNX query model %s is unusable (%s); exporting it again", path, error)
    _export(model=model, path=path)
    try:
        encoder = _load(model=model, path=path, threads=threads)
    except Exception as error:
        raise OnnxExportError(f"the exported ONNX model does not load: {error}") from error
    _check(encoder, expected)
    logger.info("embedding model exported to ONNX for search queries: %s", path)
    return encoder


def _load(*, model, path: Path, threads: int) -> OnnxQueryEncoder:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = max(1, threads)
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return OnnxQueryEncoder(session=session, tokenizer=model.tokenizer, max_length=model.max_seq_length, path=path)


def _check(encoder: OnnxQueryEncoder, expected: np.ndarray) -> None:
    got = encoder.encode(list(PROBE_TEXTS))
    difference = float(np.max(np.abs(got - expected))) if got.shape == expected.shape else float("inf")
    if not difference <= TOLERANCE:
        raise OnnxExportError(f"the ONNX graph differs from torch by {difference:.2e} (tolerance {TOLERANCE:.0e})")


def _export(*, model, path: Path) -> None:
    """Export to a temporary file beside `path`, then rename it: a concurrent process never reads
    half a file, and two exporting at once both end with a whole one."""
    import torch

    class _PooledEncoder(torch.nn.Module):
        def __init__(self, transformer):
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.transformer(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, dim=1)

    path.parent.mkdir(parents=True, exist_ok=True)
    sample = model.tokenizer(list(PROBE_TEXTS), padding=True, truncation=True, max_length=model.max_seq_length,
                             return_tensors="pt")
    transformer = model[0].auto_model.eval()
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(handle)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the exporter's notes on tracing; the probe check decides
            torch.onnx.export(
                _PooledEncoder(transformer),
                tuple(sample[name] for name in INPUT_NAMES),
                temporary,
                input_names=list(INPUT_NAMES),
                output_names=["embedding"],
                dynamic_axes={**{name: {0: "batch", 1: "tokens"} for name in INPUT_NAMES}, "embedding": {0: "batch"}},
                opset_version=17,
                dynamo=False,
            )
        os.chmod(temporary, 0o644)  # mkstemp makes it private; it is a copy of public weights
        os.replace(temporary, path)
    except Exception as error:
        raise OnnxExportError(f"exporting the model to ONNX failed: {error}") from error
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
