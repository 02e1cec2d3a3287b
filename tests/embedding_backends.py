"""Embedding backends for tests of failure handling only (everything else uses the real model).
Chosen through settings.EMBEDDING_BACKEND, the same seam operators use."""

from lessons.embedding.backends import EmbeddingUnavailable, HashingBackend


class CrashesOnPoisonBackend(HashingBackend):
    """An encoder that is up but crashes on any batch holding the word POISON, as a real model can
    on a pathological input; other batches embed normally."""

    model_name = "test/crashes-on-poison"

    def _encode(self, texts):
        if any("POISON" in text for text in texts):
            raise EmbeddingUnavailable("embedding failed: the encoder crashed")
        return super()._encode(texts)


class InterruptedOnMemoriesBackend(HashingBackend):
    """Embeds lessons, then behaves as if the operator pressed Ctrl-C while memories encode."""

    model_name = "test/interrupted-on-memories"

    def _encode(self, texts):
        if any("Sundays" in text for text in texts):
            raise KeyboardInterrupt
        return super()._encode(texts)
