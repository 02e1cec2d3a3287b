"""The real model through the configured backend."""

import numpy as np
import torch

from lessons.embedding import get_embedding_backend
from lessons.embedding.backends import SentenceTransformerBackend


def test_torch_queries_encode_on_their_own_thread_count_and_restore_torchs():
    backend = SentenceTransformerBackend(query_runtime="torch", query_threads=1)
    assert backend.active_query_runtime == "torch"
    before = torch.get_num_threads()
    seen = []
    original = backend._encode_torch

    def spy(texts):
        seen.append(torch.get_num_threads())
        return original(texts)

    backend._encode_torch = spy
    try:
        queries = backend.embed_queries(["database security", "frontend state management"])
    finally:
        del backend._encode_torch
    assert seen == [min(2 * backend.query_threads, before)]  # one thread per query text, at most torch's
    backend.embed_query("one text")
    assert torch.get_num_threads() == before
    assert torch.get_num_threads() == before
    documents = backend.embed_documents(["database security", "frontend state management"])
    assert queries.shape == (2, 384) and queries.dtype == np.float32
    assert np.allclose(queries, documents, atol=1e-5)  # same vectors, only the threads differ
    assert np.allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-5)
    assert float(queries[0] @ queries[1]) < 0.9


def test_warm_up_loads_the_query_encoder_on_a_background_thread_without_torch(settings):
    from lessons.embedding import warm_up_in_background

    # A configuration of its own, so the backend is a new, unloaded instance.
    settings.EMBEDDING_BACKEND = {**settings.EMBEDDING_BACKEND, "BATCH_SIZE": 17}
    backend = get_embedding_backend()
    assert backend._model is None and not backend.load_settled
    thread = warm_up_in_background()
    assert warm_up_in_background() is thread  # one warm-up however often it is asked for
    thread.join(timeout=120)
    assert not thread.is_alive() and thread.daemon
    assert backend.load_settled and backend.available
    assert backend._onnx is not None and backend._model is None  # queries need no torch


def test_no_warm_up_when_embeddings_are_off(settings):
    from lessons.embedding import warm_up_in_background

    settings.EMBEDDINGS_ENABLED = False
    assert warm_up_in_background() is None
