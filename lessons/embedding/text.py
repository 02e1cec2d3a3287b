"""What text is embedded for each kind of row, and the hash that tells when it went stale.

Each Python function here has an SQL twin (`embedding_text_sql`, `content_hash_sql`) so that the
database can tell a stale row by itself, even one changed by a raw UPDATE behind the ORM's back.
The twins must agree byte for byte; tests/embedding/test_text.py holds them to it.
"""

import hashlib

from django.db import models
from django.db.models import Func, Value
from django.db.models.functions import NullIf

from lessons.models import Lesson, Memory

# Exactly the characters `str.strip()` removes (every code point for which str.isspace() is true).
# PostgreSQL's btrim() gets the same set, so both sides trim alike; plain btrim() trims spaces only.
WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
SEPARATOR = "\n"

# Lessons: title + description + recommendation (context and tags are the keyword leg's job).
# Memories and their versions: content and details.
EMBEDDED_FIELDS: dict[type, tuple[str, ...]] = {
    Lesson: ("title", "description", "recommendation"),
    Memory: ("content", "details"),
}


def embedded_fields(model: type) -> tuple[str, ...]:
    """The columns whose text is embedded for rows of `model`."""
    for known, fields in EMBEDDED_FIELDS.items():
        if issubclass(model, known):
            return fields
    raise TypeError(f"{model.__name__} rows carry no embedding")


def embedding_text(item: Lesson | Memory) -> str:
    """The non-empty parts, each trimmed, joined by newlines."""
    parts = (getattr(item, name) or "" for name in embedded_fields(type(item)))
    return SEPARATOR.join(stripped for stripped in (part.strip(WHITESPACE) for part in parts) if stripped)


def _hash_prefix(model_name: str) -> bytes:
    # The NUL keeps "model a" + "bc" apart from "model ab" + "c".
    return f"{model_name}\x00".encode()


def content_hash(*, model_name: str, text: str) -> str:
    """SHA-256 (hex) of the model name and the text: a row is stale when either changed."""
    return hashlib.sha256(_hash_prefix(model_name) + text.encode("utf-8")).hexdigest()


# --- the SQL twins ------------------------------------------------------------------------------


class _TextFunc(Func):
    output_field = models.TextField()


def embedding_text_sql(model: type) -> Func:
    """SQL for `embedding_text` on rows of `model`: concat_ws skips the NULLs that NULLIF makes of
    empty parts, as the Python join skips empty strings."""
    parts = [
        NullIf(_TextFunc(name, Value(WHITESPACE), function="btrim"), Value(""), output_field=models.TextField())
        for name in embedded_fields(model)
    ]
    return _TextFunc(Value(SEPARATOR), *parts, function="concat_ws")


class _Sha256Hex(Func):
    template = "encode(sha256(%(expressions)s), 'hex')"
    arg_joiner = " || "
    output_field = models.CharField()


def content_hash_sql(*, model: type, model_name: str) -> Func:
    """SQL for `content_hash(model_name=..., text=embedding_text(row))`, computed in the database.
    The prefix travels as bytea because PostgreSQL text cannot hold the NUL byte."""
    text_bytes = Func(
        embedding_text_sql(model), Value("UTF8"), function="convert_to", output_field=models.BinaryField()
    )
    return _Sha256Hex(Value(_hash_prefix(model_name), output_field=models.BinaryField()), text_bytes)
