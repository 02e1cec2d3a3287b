"""What text is embedded for each kind of row, and the hash that tells when it went stale."""

import hashlib

from lessons.models import Lesson, Memory


def embedding_text(item: Lesson | Memory) -> str:
    """Lessons: title + description + recommendation (not context or tags, which the keyword leg
    covers). Memories and their versions: content and details."""
    if isinstance(item, Lesson):
        parts = [item.title, item.description, item.recommendation]
    else:
        parts = [item.content, item.details]
    return "\n".join(part.strip() for part in parts if part and part.strip())


def content_hash(*, model_name: str, text: str) -> str:
    """SHA-256 of the model name and the text: a row is stale when either changed."""
    return hashlib.sha256(f"{model_name}\x00{text}".encode("utf-8")).hexdigest()
