"""The model through ONNX Runtime: the real model, exported from the bundled weights once, then
loaded without torch."""

import json
import logging
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command

from lessons.embedding import get_embedding_backend, onnx_queries
from lessons.embedding.backends import SentenceTransformerBackend
from lessons.embedding.onnx_queries import OnnxGraphError, export_graph, load_encoder, manifest_path

TEXTS = [
    "database security",
    "Why does the form lose what I typed when I switch tabs?",
    " ".join(["a very long text about connection pools and tenants"] * 60),  # past 256 word pieces
]
PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def backend():
    backend = get_embedding_backend()
    assert backend.available
    backend._load_model()  # torch, for the comparisons and the exports below
    return backend


@pytest.fixture(scope="module")
def exported(backend, tmp_path_factory):
    path = tmp_path_factory.mktemp("onnx") / "model.onnx"
    return export_graph(model=backend._model, model_dir=backend.model_dir, path=path)


def test_the_configured_backend_encodes_queries_with_onnx_and_the_same_vectors_as_torch(backend):
    assert backend.active_query_runtime == "onnx"
    queries = backend.embed_queries(TEXTS)  # one padded batch, one text truncated
    documents = backend._encode_torch(TEXTS)
    assert queries.shape == (3, 384) and queries.dtype == np.float32
    assert np.max(np.abs(queries - documents)) < 1e-5
    single = backend.embed_queries(TEXTS[1:2])[0]
    assert np.max(np.abs(single - documents[1])) < 1e-5  # padding in a batch changes nothing
    assert np.allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-5)


def test_onnx_document_batches_give_torch_vectors_in_the_callers_order(backend, tmp_path):
    onnx_documents = SentenceTransformerBackend(
        query_runtime="onnx", document_runtime="onnx", onnx_dir=str(backend.onnx_path.parent), batch_size=2
    )
    texts = [TEXTS[2], TEXTS[0], TEXTS[1]]  # sorted by length inside, returned in this order
    vectors = onnx_documents.embed_documents(texts)
    assert np.max(np.abs(vectors - backend._encode_torch(texts))) < 1e-5
    assert onnx_documents._model is None  # torch was never loaded


def test_export_verifies_against_torch_and_stores_a_checksum(backend, exported):
    manifest = json.loads(manifest_path(exported.path).read_text())
    assert manifest["sha256"] == exported.sha256 == onnx_queries.file_sha256(exported.path)
    assert exported.max_difference < 1e-5
    assert not list(exported.path.parent.glob("*.tmp"))  # temporary files renamed, not left behind
    encoder = load_encoder(model_dir=backend.model_dir, path=exported.path, threads=1)
    assert np.max(np.abs(encoder.encode(TEXTS) - backend._encode_torch(TEXTS))) < 1e-5


def test_a_changed_or_missing_graph_is_refused(backend, exported, tmp_path):
    copy = tmp_path / "model.onnx"
    copy.write_bytes(exported.path.read_bytes()[:-10])  # truncated
    manifest_path(copy).write_text(manifest_path(exported.path).read_text())
    with pytest.raises(OnnxGraphError, match="checksum"):
        load_encoder(model_dir=backend.model_dir, path=copy, threads=1)
    manifest_path(copy).unlink()
    with pytest.raises(OnnxGraphError, match="export_onnx"):
        load_encoder(model_dir=backend.model_dir, path=copy, threads=1)
    # A whole copy (new modification time) is hashed and accepted.
    copy.write_bytes(exported.path.read_bytes())
    manifest_path(copy).write_text(manifest_path(exported.path).read_text())
    load_encoder(model_dir=backend.model_dir, path=copy, threads=1)


def test_a_missing_graph_is_exported_by_the_process_that_needs_it(tmp_path, caplog):
    fresh = SentenceTransformerBackend(query_runtime="onnx", onnx_dir=str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="lessons.embedding.backends"):
        assert fresh.active_query_runtime == "onnx"
    assert "exporting it now" in caplog.text
    assert manifest_path(fresh.onnx_path).exists()


def test_queries_fall_back_to_torch_when_the_graph_cannot_be_exported(tmp_path, monkeypatch, caplog):
    def broken(**kwargs):
        raise onnx_queries.OnnxExportError("exporting the model to ONNX failed: no space left")

    monkeypatch.setattr(onnx_queries, "export_graph", broken)
    fallback = SentenceTransformerBackend(query_runtime="onnx", onnx_dir=str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="lessons.embedding.backends"):
        assert fallback.active_query_runtime == "torch"
    assert "search queries use torch" in caplog.text and "no space left" in caplog.text
    assert fallback.available  # slower queries, not a degraded search
    vector = fallback.embed_query("database security")
    assert np.max(np.abs(vector - get_embedding_backend().embed_query("database security"))) < 1e-5


def test_export_onnx_command_exports_once_then_finds_the_graph_up_to_date(settings, tmp_path):
    settings.EMBEDDING_BACKEND = {**settings.EMBEDDING_BACKEND, "ONNX_DIR": str(tmp_path)}
    first, second = StringIO(), StringIO()
    call_command("export_onnx", stdout=first)
    call_command("export_onnx", stdout=second)
    assert "Exported" in first.getvalue() and "largest difference from torch" in first.getvalue()
    assert "up to date" in second.getvalue()


def _in_a_fresh_process(script: str) -> subprocess.CompletedProcess:
    """Run `script` in a new Python process with the project's settings (what loads there is its own)."""
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "memory_site.settings", "DJANGO_DEBUG": "1"}
    return subprocess.run([sys.executable, "-c", script], cwd=PROJECT, env=environment, capture_output=True,
                          text=True, timeout=300)


def test_a_query_encode_never_imports_torch(backend):
    call_command("export_onnx", stdout=StringIO())  # what `make install` does; a no-op when done
    script = (
        "import sys, django; django.setup()\n"
        "from lessons.embedding import get_embedding_backend\n"
        "backend = get_embedding_backend()\n"
        "vector = backend.embed_query('database security')\n"
        "assert backend.active_query_runtime == 'onnx', backend.active_query_runtime\n"
        "heavy = sorted(name for name in ('torch', 'sentence_transformers', 'transformers') if name in sys.modules)\n"
        "print(len(vector), heavy)\n"
    )
    result = _in_a_fresh_process(script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "384 []"


def test_loading_the_query_encoder_freezes_what_is_alive_out_of_the_collectors_sight(backend):
    # A process of its own: freezing is once per process, and this one's encoder loaded long ago.
    call_command("export_onnx", stdout=StringIO())
    script = (
        "import gc, django; django.setup()\n"
        "from lessons.embedding import get_embedding_backend\n"
        "before = gc.get_freeze_count()\n"
        "backend = get_embedding_backend()\n"
        "backend.embed_query('database security')\n"
        "assert backend.active_query_runtime == 'onnx', backend.active_query_runtime\n"
        "print(before, gc.get_freeze_count(), len(gc.get_objects()))\n"
    )
    result = _in_a_fresh_process(script)
    assert result.returncode == 0, result.stderr
    before, frozen, still_tracked = map(int, result.stdout.split())
    assert before == 0
    assert frozen > 20_000  # Django, ONNX Runtime, the tokenizer: a full collection no longer walks them
    assert still_tracked < frozen / 10


def test_an_unknown_runtime_is_a_configuration_error():
    with pytest.raises(ImproperlyConfigured, match="QUERY_RUNTIME"):
        SentenceTransformerBackend(query_runtime="tensorflow")
    with pytest.raises(ImproperlyConfigured, match="DOCUMENT_RUNTIME"):
        SentenceTransformerBackend(document_runtime="tensorflow")


def test_an_early_load_is_taken_by_the_next_load_with_the_same_arguments(backend, exported, monkeypatch):
    loads = []
    real = onnx_queries._load_encoder
    monkeypatch.setattr(onnx_queries, "_load_encoder", lambda **kwargs: loads.append(kwargs) or real(**kwargs))
    onnx_queries.load_encoder_early(model_dir=backend.model_dir, path=exported.path, threads=1)
    encoder = load_encoder(model_dir=backend.model_dir, path=exported.path, threads=1)
    assert len(loads) == 1 and encoder.encode(TEXTS[:1]).shape == (1, 384)
    load_encoder(model_dir=backend.model_dir, path=exported.path, threads=1)  # taken once: this one loads
    assert len(loads) == 2


def test_an_early_load_hands_its_error_to_the_next_load(backend, tmp_path):
    missing = tmp_path / "missing.onnx"
    onnx_queries.load_encoder_early(model_dir=backend.model_dir, path=missing, threads=1)
    with pytest.raises(OnnxGraphError, match="export_onnx"):
        load_encoder(model_dir=backend.model_dir, path=missing, threads=1)


def test_a_process_ending_during_an_early_load_waits_for_it(tmp_path):
    """`manage.py search --help` ended while ONNX Runtime's C++ was still loading on the early thread
    and could abort at exit (status 134). The exit now waits for the load: here a load that takes
    a second still finishes, and the process exits 0."""
    finished = tmp_path / "finished"
    code = (
        "import time\n"
        "from pathlib import Path\n"
        "from lessons.embedding import onnx_queries\n"
        "def slow(**kwargs):\n"
        "    time.sleep(1)\n"
        f"    Path({str(finished)!r}).write_text('loaded')\n"
        "onnx_queries._load_encoder = slow\n"
        "onnx_queries.load_encoder_early(model_dir=Path('m'), path=Path('g.onnx'), threads=1)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=PROJECT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert finished.read_text() == "loaded"
