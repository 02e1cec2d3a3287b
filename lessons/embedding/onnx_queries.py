"""The model through ONNX Runtime: exported and verified once, then loaded without torch.

Why: a search waits for its query embedding, and a command (`manage.py search`, the MCP server)
pays for every import before it. On this 2-core machine sentence-transformers (torch) took 22 ms
to encode one SciFact claim; ONNX Runtime running the exported graph took 9 ms, with vectors equal
to torch's within 2e-7. Importing torch and sentence-transformers alone took ~5 s of a 7.6 s CLI
search. So the query path loads only `onnxruntime` and `tokenizers` (the bundled model's
tokenizer.json): see `load_encoder`.

`export_graph` (run by `manage.py export_onnx`, which `make install` runs) is the only place that
needs torch: it exports the loaded SentenceTransformer (transformer, mean pooling over the
attention mask, L2 normalisation) with `torch.onnx.export`, checks the graph -- loaded the way
queries load it -- against torch on probe texts (one longer than the 256-word-piece window, in a
padded batch), and only then moves it into place beside a manifest holding its SHA-256. A load
checks the file against that manifest (a truncated or replaced file is refused), never against torch.
`optimum`, the usual route, requires transformers 4.x, which sentence-transformers 6 does not
accept. Nothing is downloaded.
"""

import atexit
import hashlib
import json
import logging
import os
import tempfile
import threading
import warnings
from concurrent.futures import Future
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

EXPORT_FORMAT = 2  # bump when the exported graph changes (inputs, pooling, normalisation, manifest)
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
# Probe texts: a short one, and one longer than the 256-word-piece window, in one padded batch.
PROBE_TEXTS = (
    "row level security for multi-tenant tables",
    " ".join(["connection pooling keeps the database from running out of slots"] * 40),
)
TOLERANCE = 1e-5


class OnnxGraphError(RuntimeError):
    """The graph is missing, damaged or does not match its checksum (run `manage.py export_onnx`)."""


class OnnxExportError(RuntimeError):
    """The model could not be exported to ONNX or its graph gives other vectors than torch."""


class OnnxEncoder:
    """Encodes texts with ONNX Runtime into L2-normalised float32 vectors. Thread-safe."""

    def __init__(self, *, session, tokenizer, path: Path):
        self._session = session
        self._tokenizer = tokenizer  # a `tokenizers.Tokenizer`, truncation and padding set once
        self.path = path
        self._tokenizer_lock = threading.Lock()  # cheap (~0.2 ms a query); Rust borrow checks stay quiet

    def encode(self, texts: list[str]) -> np.ndarray:
        with self._tokenizer_lock:
            encodings = self._tokenizer.encode_batch(list(texts))
        inputs = {
            "input_ids": np.array([item.ids for item in encodings], dtype=np.int64),
            "attention_mask": np.array([item.attention_mask for item in encodings], dtype=np.int64),
            "token_type_ids": np.array([item.type_ids for item in encodings], dtype=np.int64),
        }
        (vectors,) = self._session.run(None, inputs)
        return np.asarray(vectors, dtype=np.float32)


@dataclass(frozen=True)
class ExportResult:
    path: Path
    sha256: str
    max_difference: float


def model_version(model_package: str) -> str:
    try:
        return metadata.version(model_package)
    except metadata.PackageNotFoundError:
        return "unknown"


def graph_path(*, cache_dir: Path, model_package: str) -> Path:
    """Named after the model package's version and the export format: an upgrade needs a new export."""
    return Path(cache_dir) / f"{model_package}-{model_version(model_package)}-v{EXPORT_FORMAT}.onnx"


def manifest_path(path: Path) -> Path:
    return path.with_suffix(".json")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_tokenizer(*, model_dir: Path):
    """The bundled model's fast tokenizer, set up as sentence-transformers runs it: truncation at
    the model's max_seq_length (256 word pieces), padding to the longest text of a batch."""
    from tokenizers import Tokenizer

    config = json.loads((Path(model_dir) / "sentence_bert_config.json").read_text())
    tokenizer = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=int(config["max_seq_length"]))
    pad_id = tokenizer.token_to_id("[PAD]")
    tokenizer.enable_padding(pad_id=0 if pad_id is None else pad_id, pad_token="[PAD]")
    return tokenizer


def _verify(path: Path) -> None:
    """The file must be the one `export_graph` verified. Hashing 90 MB costs 0.1-0.5 s, a third of
    a CLI search's budget, so a file whose size and modification time are still those recorded at
    export is taken as unchanged; any other file is hashed and compared with the stored SHA-256."""
    manifest = manifest_path(path)
    if not path.exists() or not manifest.exists():
        raise OnnxGraphError(f"no exported graph at {path} (run `python manage.py export_onnx`)")
    try:
        recorded = json.loads(manifest.read_text())
        expected = recorded["sha256"]
    except (ValueError, KeyError) as error:
        raise OnnxGraphError(f"the manifest {manifest} is unreadable: {error}") from error
    status = path.stat()
    if (status.st_size, status.st_mtime_ns) == (recorded.get("size"), recorded.get("mtime_ns")):
        return
    if file_sha256(path) != expected:
        raise OnnxGraphError(f"{path} does not match the checksum stored at export")
    # The same bytes with a new time (a copy, a checkout): stamp the manifest so that the next
    # process trusts them without hashing again. Best effort: a read-only folder only costs a hash.
    try:
        _write_manifest(path=path, manifest={**recorded, "size": status.st_size, "mtime_ns": status.st_mtime_ns})
    except OSError:
        pass


_early_loads: dict[tuple[str, str, int], Future] = {}
_early_loads_lock = threading.Lock()
# A process that ended while ONNX Runtime's C++ was still loading on the early thread (`search
# --help`, a bad option) could abort at exit: "terminate called without an active exception",
# status 134, about 1 run in 5 on a busy machine. Its exit waits for the load (~0.3 s) instead.
EARLY_LOAD_EXIT_WAIT_SECONDS = 30.0


def load_encoder_early(*, model_dir: Path, path: Path, threads: int) -> None:
    """Start `load_encoder` on a daemon thread now; the next `load_encoder` call with the same
    arguments takes its result (or its exception). `manage.py search` calls it before Django's
    apps are ready: the load (~0.3 s, mostly ONNX Runtime's C++, which releases the GIL) then runs
    on the other core while Django imports its apps, instead of after them."""
    key = (str(model_dir), str(path), threads)
    future: Future = Future()
    with _early_loads_lock:
        if key in _early_loads:
            return
        _early_loads[key] = future

    def run():
        try:
            future.set_result(_load_encoder(model_dir=Path(model_dir), path=Path(path), threads=threads))
        except BaseException as error:  # handed to the caller of load_encoder, as if it had loaded
            future.set_exception(error)

    thread = threading.Thread(target=run, name="onnx-early-load", daemon=True)
    thread.start()
    atexit.register(thread.join, EARLY_LOAD_EXIT_WAIT_SECONDS)


def load_encoder(*, model_dir: Path, path: Path, threads: int, verify_checksum: bool = True) -> OnnxEncoder:
    """Load the exported graph with ONNX Runtime (no torch). Raises OnnxGraphError when the graph
    or its manifest is missing, or the file's SHA-256 differs from the one stored at export."""
    if verify_checksum:
        with _early_loads_lock:
            early = _early_loads.pop((str(model_dir), str(path), threads), None)
        if early is not None:
            return early.result()
    return _load_encoder(model_dir=Path(model_dir), path=Path(path), threads=threads,
                         verify_checksum=verify_checksum)


def _load_encoder(*, model_dir: Path, path: Path, threads: int, verify_checksum: bool = True) -> OnnxEncoder:
    import onnxruntime

    path = Path(path)
    if verify_checksum:
        _verify(path)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = max(1, threads)
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only
    # "Extended" fusions (attention, GELU, layer norm) give this graph its speed; "all" adds CPU
    # layout rewrites that cost ~0.15 s per session creation here (0.32 s instead of 0.18 s) and
    # make a query no faster (4 ms either way), with the same vectors.
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    try:
        session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as error:
        raise OnnxGraphError(f"ONNX Runtime cannot load {path}: {error}") from error
    return OnnxEncoder(session=session, tokenizer=load_tokenizer(model_dir=model_dir), path=path)


def export_graph(*, model, model_dir: Path, path: Path) -> ExportResult:
    """Export `model` (a SentenceTransformer) to `path`, verify it against torch, store its checksum.

    Written to temporary files beside `path`, then renamed (the graph first, its manifest last): a
    concurrent process never reads half a file, and a graph without a manifest is never trusted."""
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

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sample = model.tokenizer(list(PROBE_TEXTS), padding=True, truncation=True, max_length=model.max_seq_length,
                             return_tensors="pt")
    transformer = model[0].auto_model.eval()
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(handle)
    try:
        try:
            with warnings.catch_warnings(), torch.no_grad():
                warnings.simplefilter("ignore")  # the exporter's notes on tracing; the probe check decides
                torch.onnx.export(
                    _PooledEncoder(transformer),
                    tuple(sample[name] for name in INPUT_NAMES),
                    temporary,
                    input_names=list(INPUT_NAMES),
                    output_names=["embedding"],
                    dynamic_axes={
                        **{name: {0: "batch", 1: "tokens"} for name in INPUT_NAMES}, "embedding": {0: "batch"}
                    },
                    opset_version=17,
                    dynamo=False,
                )
        except Exception as error:
            raise OnnxExportError(f"exporting the model to ONNX failed: {error}") from error
        try:
            encoder = load_encoder(model_dir=model_dir, path=Path(temporary), threads=1, verify_checksum=False)
        except OnnxGraphError as error:
            raise OnnxExportError(f"the exported ONNX model does not load: {error}") from error
        expected = model.encode(list(PROBE_TEXTS), normalize_embeddings=True, convert_to_numpy=True,
                                show_progress_bar=False)
        got = encoder.encode(list(PROBE_TEXTS))
        difference = float(np.max(np.abs(got - expected))) if got.shape == expected.shape else float("inf")
        if not difference <= TOLERANCE:
            raise OnnxExportError(
                f"the ONNX graph differs from torch by {difference:.2e} (tolerance {TOLERANCE:.0e})"
            )
        sha256 = file_sha256(Path(temporary))
        os.chmod(temporary, 0o644)  # mkstemp makes it private; it is a copy of public weights
        manifest_path(path).unlink(missing_ok=True)  # no moment where an old checksum vouches for a new file
        os.replace(temporary, path)
        status = path.stat()
        _write_manifest(path=path, manifest={
            "sha256": sha256, "size": status.st_size, "mtime_ns": status.st_mtime_ns,
            "max_difference_from_torch": difference, "export_format": EXPORT_FORMAT, "probe_texts": len(PROBE_TEXTS),
        })
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    logger.info("embedding model exported to ONNX and verified against torch: %s", path)
    return ExportResult(path=path, sha256=sha256, max_difference=difference)


def _write_manifest(*, path: Path, manifest: dict) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".json.tmp")
    with os.fdopen(handle, "w") as out:
        json.dump(manifest, out, indent=2)
    os.chmod(temporary, 0o644)
    os.replace(temporary, manifest_path(path))
