"""What text is embedded for each kind of row, and the hash that tells when it went stale.

Each Python function here has an SQL twin (`embedding_text_sql`, `content_hash_sql`) so that the
database can tell a stale row by itself, even one changed by a raw UPDATE behind the ORM's back.
The twins must agree byte for byte; tests/embedding/test_text.py holds them to it.
"""

import hashlib
import unicodedata

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import F, Func, Value
from django.db.models.functions import NullIf

from lessons.models import Lesson, Memory

# Exactly the characters `str.strip()` removes (every code point for which str.isspace() is true).
# PostgreSQL's btrim() gets the same set, so both sides trim alike; plain btrim() trims spaces only.
WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
SEPARATOR = "\n"
# Every part is read in its compatibility form (NFKC) before it is trimmed, as the query is
# (engine.py) and the keyword leg reads both (migration 0030): the model's vocabulary has no
# full-width Latin or half-width Katakana, so "ＲＥＡＣＴ ｈｏｏｋｓ" stored as typed was "[UNK] [UNK]"
# to it, and no query by meaning could find the row. Only rows whose text changes in that form
# get a new hash, so only they turn stale after an upgrade.
NORMAL_FORM = "NFKC"

# Lessons: title + description + recommendation, then a line of the lesson's tags and tech stacks,
# hyphens as spaces ("multi tenant, rls; postgresql, pgbouncer"). A curator's labels name the topic
# in the words a short query uses ("docker image size", "nextjs caching") where the prose may not:
# the demo set's hybrid went from 0.754 to 0.793 nDCG@10, its semantic leg from 0.675 to 0.751
# (README, Quality). The category is left out: every imported document without one gets the
# default, and it did not move the hybrid on either lesson set. Context stays the keyword leg's job.
# Memories and their versions: content and details.
EMBEDDED_FIELDS: dict[type, tuple[str, ...]] = {
    Lesson: ("title", "description", "recommendation"),
    Memory: ("content", "details"),
}
LABEL_FIELDS: dict[type, tuple[str, ...]] = {
    Lesson: ("tags", "tech_stacks"),
    Memory: (),
}
LABEL_SEPARATOR = "; "
TERM_SEPARATOR = ", "


def _fields_of(table: dict[type, tuple[str, ...]], model: type) -> tuple[str, ...]:
    for known, fields in table.items():
        if issubclass(model, known):
            return fields
    raise TypeError(f"{model.__name__} rows carry no embedding")


def embedded_fields(model: type) -> tuple[str, ...]:
    """The columns whose values are embedded for rows of `model` (the text, then the labels)."""
    return _fields_of(EMBEDDED_FIELDS, model) + _fields_of(LABEL_FIELDS, model)


def _label_line(item: Lesson | Memory) -> str:
    pieces = []
    for name in _fields_of(LABEL_FIELDS, type(item)):
        value = getattr(item, name)
        if isinstance(value, (list, tuple)):  # as array_to_string: NULL elements are left out
            value = TERM_SEPARATOR.join(term for term in value if term is not None)
        pieces.append(_compatible(value or "").strip(WHITESPACE))
    return LABEL_SEPARATOR.join(piece for piece in pieces if piece).replace("-", " ")


def embedding_text(item: Lesson | Memory) -> str:
    """The non-empty parts, each trimmed, joined by newlines; the label line last."""
    parts = [_compatible(getattr(item, name) or "") for name in _fields_of(EMBEDDED_FIELDS, type(item))]
    parts.append(_label_line(item))
    return SEPARATOR.join(stripped for stripped in (part.strip(WHITESPACE) for part in parts) if stripped)


def _compatible(text: str) -> str:
    return unicodedata.normalize(NORMAL_FORM, text)


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
    parts = [_trimmed_or_null(_compatible_sql(F(name))) for name in _fields_of(EMBEDDED_FIELDS, model)]
    if _fields_of(LABEL_FIELDS, model):
        parts.append(_trimmed_or_null(_label_line_sql(model)))
    return _TextFunc(Value(SEPARATOR), *parts, function="concat_ws")


def _compatible_sql(expression) -> Func:
    return _TextFunc(expression, Value(NORMAL_FORM), function="pg_catalog.normalize")


def _trimmed_or_null(expression) -> Func:
    trimmed = _TextFunc(expression, Value(WHITESPACE), function="btrim")
    return NullIf(trimmed, Value(""), output_field=models.TextField())


def _label_line_sql(model: type) -> Func:
    pieces = []
    for name in _fields_of(LABEL_FIELDS, model):
        column = F(name)
        if isinstance(model._meta.get_field(name), ArrayField):
            column = _TextFunc(column, Value(TERM_SEPARATOR), function="array_to_string")
        pieces.append(_trimmed_or_null(_compatible_sql(column)))
    line = _TextFunc(Value(LABEL_SEPARATOR), *pieces, function="concat_ws")
    return _TextFunc(line, Value("-"), Value(" "), function="replace")


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
