"""Embedding backends for tests of failure handling only (everything else uses the real model).
Chosen through settings.EMBEDDING_BACKEND, the same seam operators use."""

import os
import signal
import time
from pathlib import Path

from lessons.embedding.backends import EmbeddingUnavailable, HashingBackend, SentenceTransformerBackend


class CrashesOnPoisonBackend(HashingBackend):
    """An encoder that is up but crashes on any batch holding the word POISON, as a real model can
    on a pathological input; other batches embed normally."""

    model_name = "test/crashes-on-poison"

    def _encode(self, texts):
        if any("POISON" in text for text in texts):
            raise EmbeddingUnavailable("embedding failed: the encoder crashed")
        return super()._encode(texts)


class _Gated:
    """Makes an encoder stop at a known point so a fault test can strike there.

    The first EMBEDDING_GATE_OPEN_CALLS encode calls (default 1) run at once; before each later
    one it writes `encode-N.started` into EMBEDDING_GATE_DIR and waits (at most two minutes) for
    a file named `release` there. The model name is the wrapped backend's, so what it embeds is
    fresh for that backend.
    """

    def _encode(self, texts):
        gate = Path(os.environ["EMBEDDING_GATE_DIR"])
        self._gated_calls = getattr(self, "_gated_calls", 0) + 1
        if self._gated_calls > int(os.environ.get("EMBEDDING_GATE_OPEN_CALLS", "1")):
            (gate / f"encode-{self._gated_calls}.started").write_text(str(len(texts)))
            deadline = time.monotonic() + 120
            while not (gate / "release").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        return super()._encode(texts)


class GatedBackend(_Gated, SentenceTransformerBackend):
    """The real model, gated."""


class GatedHashingBackend(_Gated, HashingBackend):
    """The hashing embedder, gated: for fault tests where the vectors' meaning plays no part."""


class InterruptedOnMemoriesBackend(HashingBackend):
    """Embeds lessons, then behaves as if the operator pressed Ctrl-C while memories encode."""

    model_name = "test/interrupted-on-memories"

    def _encode(self, texts):
        if any("Sundays" in text for text in texts):
            raise KeyboardInterrupt
        return super()._encode(texts)


class StoppedOnMemoriesBackend(HashingBackend):
    """Embeds lessons, then the process is sent SIGTERM (a process manager's stop) while memories
    encode: a real signal, delivered to this process."""

    model_name = "test/stopped-on-memories"

    def _encode(self, texts):
        if any("Sundays" in text for text in texts):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises before this ends; without one the process is gone
        return super()._encode(texts)


class InterruptedOnMarkerBackend(HashingBackend):
    """Behaves as if the operator pressed Ctrl-C while a batch holding a text that says
    "INTERRUPT HERE" encodes (what an import's embedding step meets in development)."""

    model_name = "test/interrupted-on-marker"

    def _encode(self, texts):
        if any("INTERRUPT HERE" in text for text in texts):
            raise KeyboardInterrupt
        return super()._encode(texts)
