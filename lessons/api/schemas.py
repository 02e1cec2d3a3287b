"""The API's contract: what agents send (`...In`, `...Patch`, `...Query`) and what they get back
(`...Out`). Input and output are separate classes; output schemas list their fields one by one,
and no schema has an embedding field, so vectors never leave the server.

The agent tools (`GET /tools`, MCP) are generated from these same input classes.
"""

import json
import re
import typing
import unicodedata
from datetime import datetime, timezone
from typing import Annotated, Any, Literal
from uuid import UUID

from django.conf import settings
from django.db.models import BooleanField, F, Func, Q, TextField, Value
from django.db.models.expressions import RawSQL
from django.db.models.lookups import GreaterThanOrEqual, IContains, IRegex, LessThan
from ninja import Field, FilterLookup, FilterSchema, ModelSchema, Schema
from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    StringConstraints,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)
from pydantic_core import PydanticCustomError

from lessons.models import MAX_FREQUENCY, MAX_TEXT_CHARS, MEMORY_HAPPENED_AT, Lesson, Memory, short_term_validator
from lessons.search.filters import folded_accents, names_one_of_sql
from lessons.search.kinds import SEARCH_KINDS
from lessons.search.scoring import LABELS as RELEVANCE_LABELS
from lessons.search.types import FUSIONS, KINDS, MAX_CONTEXT_CHARS, MAX_LIMIT, MAX_QUERY_CHARS, MODES
from lessons.selectors.listing import MEMORY_ORDERINGS
from lessons.services.common import normalise_names, normalise_terms, normalise_text
from lessons.text import UNSPACED_SCRIPTS, clean_identifier, clean_name, is_visible, whole_word_pattern

# Bounds on free text, so a runaway agent cannot store a megabyte in one field.
MAX_TERM_CHARS = 64
MAX_TERMS = 50
MAX_ID = 2**63 - 1  # PostgreSQL bigint: a larger id is refused as input, never a database error
# An id in a request body (or a tool's arguments) is a JSON integer, nothing pydantic can read as one:
# `true` was id 1, "5" and 5.0 were 5, and `{"merge_ids": [true]}` merged lesson 1 away.
BodyId = Annotated[int, Field(ge=1, le=MAX_ID, strict=True)]


def _id_in_digits(value: Any) -> Any:
    # Pydantic reads "1.0", "+1", " 1" and "1_000" as whole numbers; in a URL they are typos, not ids.
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise PydanticCustomError("id_digits", "Input should be an id written in digits")
    return value


PathId = Annotated[int, BeforeValidator(_id_in_digits)]


def _stored_at_most(max_length: int):
    def check(text: str) -> str:
        if len(normalise_text(text)) > max_length:  # pydantic's own refusal, as a raw max_length gave it
            raise PydanticCustomError(
                "string_too_long", "String should have at most {max_length} characters", {"max_length": max_length})
        return text

    return check


def stored_text(max_length: int) -> Any:
    """A free text (a title, a description, a memory's content) of at most `max_length` characters
    as it is stored (lessons.text.clean_text: NFC, without invisible characters, trimmed): "e" and a
    combining accent are one character once stored, and a description of 20,000 of them (40,000
    code points) was refused as longer than 20,000 characters, while the text that NFC lengthens
    passed here and was refused by the model. The schema says the same maxLength: a client counting
    what it sends can only refuse more."""
    return Annotated[str, AfterValidator(_stored_at_most(max_length)),
                     Field(json_schema_extra={"maxLength": max_length})]


Title = stored_text(300)
FreeText = stored_text(MAX_TEXT_CHARS)

LessonStatusName = Literal["proposed", "confirmed", "rejected"]


def _ascii_term(term: str) -> str:
    # The model's rule (short_term_validator), checked here so the error names the item (tags.1)
    # and the schema shows the pattern; left to the model it read "Item 2 in the array did not validate".
    if not short_term_validator.regex.match(term):
        raise PydanticCustomError("term", short_term_validator.message)
    return term


# Surrounding blanks go before the length is checked: " secret " is the tag `secret`, and "  "
# is refused naming its field (as a blank it would match nothing, or every row). The pattern is
# the model's regex spelled without its IGNORECASE flag, which JSON Schema has no way to say.
Term = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_TERM_CHARS),
    AfterValidator(_ascii_term),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": MAX_TERM_CHARS,
                    "pattern": "^\\.?[A-Za-z0-9][A-Za-z0-9+#._ -]*$"}),
]
# The raw list a term budget reads at most: 4 x the budget, so spellings of one term sent twice or
# three times pass while a payload of thousands is refused before it is normalised.
MAX_SENT_TERMS = 4 * MAX_TERMS


def _different_at_most(normalise):
    """A list's budget counted on the entries it keeps once stored (`normalise`: the services keep one
    spelling of a term, "Next.js" and "nextjs", and one of a name in any case): 60 entries naming 30 terms
    were refused as over 50 while the stored list held 30. The schema says MAX_TERMS, as stored_text's
    maxLength is the stored length: a client counting what it sends can only refuse more."""
    def check(values: list[str]) -> list[str]:
        if (count := len(normalise(values))) > MAX_TERMS:
            raise PydanticCustomError(
                "too_long", "List should have at most {max_length} different entries, not {actual_length}",
                {"max_length": MAX_TERMS, "actual_length": count})
        return values

    return check


Terms = Annotated[list[Term], Field(max_length=MAX_SENT_TERMS, json_schema_extra={"maxItems": MAX_TERMS}),
                  AfterValidator(_different_at_most(normalise_terms))]


def _something_shows(text: str) -> str:
    """A query or a name of only invisible characters ("\u200b") is as blank as "   " (lessons.text)."""
    if not is_visible(text):  # zero-width spaces and the like are format characters: not visible
        raise ValueError("only invisible characters: as blank as an empty text")
    return text


Name = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200), AfterValidator(_something_shows)
]


def _a_name(text: str) -> str:
    # Left to the services, a "-" is dropped (lessons.text.clean_name), and a filter with no name
    # left was no filter, or matched nothing without saying why.
    if not clean_name(text):
        raise ValueError(f"{text!r} is not a name: a name needs a letter or digit")
    return text


# A person's name, to store or to look up by: refused when nothing of it would be left once
# stored ("," as a memory's people was dropped without a word, and a PATCH emptied them).
PersonName = Annotated[Name, AfterValidator(_a_name)]
# People as stored: a name repeated in another case is one person (normalise_names), as a term is one term.
PersonNames = Annotated[list[PersonName], Field(max_length=MAX_SENT_TERMS, json_schema_extra={"maxItems": MAX_TERMS}),
                        AfterValidator(_different_at_most(normalise_names))]
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, description=f"How many results, 1..{MAX_LIMIT}.")]
# A query is trimmed before its length is checked: "   " is refused like "" (it used to be taken as
# no query at all, and answered the most recent rows).
QueryText = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_QUERY_CHARS),
    AfterValidator(_something_shows),
]
# One optional term (a project type, a phase): "  " is refused naming its field, not taken as a term.
OptionalTerm = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_TERM_CHARS)]

# Literal types spelled from the engine's own constants, so the two cannot disagree.
KindName = Literal[KINDS]  # type: ignore[valid-type]
HitKindName = Literal[tuple(kind.hit_kind for kind in SEARCH_KINDS.values())]  # type: ignore[valid-type]
RelevanceName = Literal[tuple(reversed(RELEVANCE_LABELS))]  # type: ignore[valid-type]  # best first
ModeName = Literal[MODES]  # type: ignore[valid-type]
FusionName = Literal[FUSIONS]  # type: ignore[valid-type]


def _refuse_nul(value: Any) -> Any:
    """PostgreSQL text cannot hold NUL characters: refuse them here, naming the field, rather
    than fail in the database."""
    if isinstance(value, str) and "\x00" in value:
        raise ValueError("text cannot contain NUL characters (code 0)")
    if isinstance(value, list):
        for item in value:
            _refuse_nul(item)
    return value


def _numeric_types(annotation) -> set[type]:
    """int and float among a field's types (through Optional, unions and Annotated)."""
    found = {annotation} & {int, float}
    for argument in typing.get_args(annotation):
        found |= _numeric_types(argument)
    return found


def _refuse_bool_as_number(cls, value: Any, info: ValidationInfo) -> Any:
    """JSON's true and false are not numbers: pydantic reads them as 1 and 0, so `"frequency":
    true` stored a frequency of 1 and `"confidence": false` a confidence of 0."""
    field = cls.model_fields.get(info.field_name) if info.field_name else None
    if isinstance(value, bool) and field is not None and _numeric_types(field.annotation):
        raise PydanticCustomError("number_type", "expected a number, not true or false")
    return value


NUMBER_TEXT = re.compile(r"\s*[+-]?\d+(\.\d*)?\s*")


def _refuse_number_as_moment(value: Any) -> Any:
    """A moment is ISO 8601 text. pydantic reads a number, or a string of digits, as seconds since
    1970: `"occurred_at": 2024` (or "2024", or "20240501") was stored as 1970-01-01T00:33:44, as
    the imports never did."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number or (isinstance(value, str) and NUMBER_TEXT.fullmatch(value)):
        raise PydanticCustomError(
            "datetime_type", "expected an ISO 8601 date-time such as 2024-05-01T09:30:00+02:00 (or a date, "
            "2024-05-01); {value} is a number, which would be read as seconds since 1970",
            {"value": json.dumps(value)})
    return value


# Every moment an input takes: in the type, not a model validator, so a query string's parameters
# (which ninja validates field by field, outside the schema's own validators) are held to it too.
Moment = Annotated[datetime, BeforeValidator(_refuse_number_as_moment)]


def _in_utc(value: datetime | None) -> datetime | None:
    """A date-time in UTC: without a time zone it is taken as UTC (as the imports do); with one, it
    is converted. PostgreSQL refuses offsets beyond 15:59 that pydantic takes (up to 23:59), and
    a moment past year 9999 in UTC cannot be stored or compared; the answer then echoes the
    moment as every read writes it."""
    if value is None:
        return value
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    try:
        return value.astimezone(timezone.utc)
    except OverflowError:
        raise PydanticCustomError("moment_range", "Use a moment between years 1 and 9999 in UTC.") from None


def _after_since(until: datetime | None, info: ValidationInfo) -> datetime | None:
    """`until` of a date range: later than its `since` when both are given."""
    since = info.data.get("since")
    if until is not None and since is not None and since >= until:
        raise ValueError("must be after since")
    return until


class TextIn(Schema):
    """Every input schema: no NUL characters in any text, no NaN or infinity in any number (JSON
    as Python reads it allows both; "less than or equal to 1" was the answer to a NaN)."""

    model_config = ConfigDict(allow_inf_nan=False)

    _no_nul = field_validator("*")(_refuse_nul)
    _no_bool_numbers = field_validator("*", mode="before")(classmethod(_refuse_bool_as_number))


class StrictIn(TextIn):
    """Request bodies: an unknown field is an error naming it (a typo must not be silently ignored).
    Query-string schemas stay lenient, since the query string also carries `team`, `limit`..."""

    model_config = ConfigDict(extra="forbid")


# --- errors --------------------------------------------------------------------------------


class FieldErrorOut(Schema):
    field: str
    message: str


class ErrorOut(Schema):
    detail: str
    errors: list[FieldErrorOut] = []


# --- lessons -------------------------------------------------------------------------------


# What any operation behind a key may answer besides its own responses: 401 (the key is missing,
# unknown or revoked; or staff named no usable team), 503 (the database is unreachable), and 422
# (a parameter or body that does not validate, named in `errors`).
# 403: staff signed in to the admin without the model's permission (lessons.api.permissions)
AUTHENTICATED = {401: ErrorOut, 403: ErrorOut, 503: ErrorOut}
INVALID = {422: ErrorOut}
# Operations that read a JSON body also answer 400 (it is not JSON) and 413 (it is over
# DATA_UPLOAD_MAX_MEMORY_SIZE) and 415 (it is not sent as JSON: lessons.api.parser); the API fuzzer
# (tests/reliability) found the 400 undeclared.
WITH_BODY = {400: ErrorOut, 413: ErrorOut, 415: ErrorOut}
NOT_FOUND = {404: ErrorOut}
CONFLICT = {409: ErrorOut}  # two writers racing for one external_id: the second one
# Writes that honour If-Match (lessons.api.preconditions): 400 for a header that is not a list of
# tags, 412 when the row changed since the tag was read.
PRECONDITION = {400: ErrorOut, 412: ErrorOut}


class LessonOut(ModelSchema):
    id: int  # a stored row's: not nullable, as the model's optional primary key would say
    status: LessonStatusName
    project_types: list[str]
    tech_stacks: list[str]
    tags: list[str]

    class Meta:
        model = Lesson
        fields = [
            "id",
            "external_id",
            "title",
            "description",
            "context",
            "recommendation",
            "category",
            "confidence",
            "frequency",
            "project_types",
            "tech_stacks",
            "tags",
            "status",
            "created_at",
            "updated_at",
            "returned_count",
            "used_count",
            "not_helpful_count",
            "last_returned_at",
            "last_used_at",
        ]


class LessonDecisionOut(LessonOut):
    """The lesson after an accept or reject."""

    changed: bool = Field(description=(
        "false when the lesson was already in the state asked for (decided so before, by you or someone "
        "else): nothing was written"))


class LessonProposeIn(StrictIn):
    """A lesson as an agent proposes it; it waits as `proposed` for a curator."""

    title: Title = Field(min_length=1, description="One line: what was learned.")
    description: FreeText = Field("", description="What happened.")
    context: FreeText = Field("", description="Where it applies.")
    recommendation: FreeText = Field("", description="What to do next time.")
    category: str = Field(
        "workflow", min_length=1, max_length=MAX_TERM_CHARS, description="architecture, security, database, ..."
    )
    confidence: float = Field(0.5, ge=0.0, le=1.0, description="How sure you are it holds, 0..1; ranks it higher.")
    frequency: int = Field(1, ge=1, le=MAX_FREQUENCY, description="How often it was seen.")
    project_types: Terms = Field([], description="Kinds of project it applies to, e.g. saas, api, cli.")
    tech_stacks: Terms = Field([], description="Technologies it is about, e.g. nextjs, postgresql.")
    tags: Terms = Field([], description="Topics, in your team's words, e.g. multi-tenant, caching.")
    external_id: str | None = Field(None, max_length=200, description="Your own id for this lesson, unique per team.")


class LessonIn(LessonProposeIn):
    """A lesson stored as it is (confirmed unless said otherwise)."""

    status: LessonStatusName = Field("confirmed", description="confirmed (agents find it), proposed (for a "
                                                               "curator to decide) or rejected.")


class LessonPatch(StrictIn):
    """Only the fields sent are changed."""

    title: Title = Field(None, min_length=1)
    description: FreeText = None
    context: FreeText = None
    recommendation: FreeText = None
    category: str = Field(None, min_length=1, max_length=MAX_TERM_CHARS)
    confidence: float = Field(None, ge=0.0, le=1.0)
    frequency: int = Field(None, ge=1, le=MAX_FREQUENCY)
    project_types: Terms = None
    tech_stacks: Terms = None
    tags: Terms = None
    status: LessonStatusName = None
    external_id: str | None = Field(None, max_length=200)


def _refuse_blank_items(values: list | None) -> None:
    """A blank query-string value (`?tech_stack=`, `?person= `) would match no row, or be skipped
    and match every one: it is refused, as a blank term is everywhere else."""
    if values is not None and any(not str(value).strip() for value in values):
        raise ValueError("a blank value matches nothing; leave the parameter out instead")


def _words_given(text: str | None) -> str | None:
    """`?text=` or `?text=%20`: every row was listed, as if the filter were left out; so would `?text=?`,
    which holds no word once the punctuation around words is set aside."""
    if text is not None and not is_visible(text):
        raise ValueError("a blank value matches nothing; leave the parameter out instead")
    if text is not None and not _words_to_find(text):
        raise ValueError("no word to look for, only punctuation; leave the parameter out instead")
    if text is not None and len(words := _different_words(text)) > MAX_TEXT_FILTER_WORDS:
        raise ValueError(f"at most {MAX_TEXT_FILTER_WORDS} different words; got {len(words)}")
    return text


def _identifier_as_stored(value: str | None) -> str | None:
    """An external id is stored trimmed (lessons.text.clean_identifier): `?external_id=%20dup-1%20`
    found nothing, and a blank one nothing either, without saying why."""
    if value is None:
        return None
    identifier = clean_identifier(value)
    if identifier is None:
        raise ValueError("a blank value matches nothing; leave the parameter out instead")
    return identifier


def _lowercase(values):
    """Query-string terms as stored ones are: trimmed, lowercase."""
    terms = [values] if isinstance(values, str) else values
    if isinstance(terms, list):
        _refuse_blank_items(terms)
        cleaned = normalise_terms(terms)
        return cleaned[0] if isinstance(values, str) else cleaned
    return values


def _storable_terms(values: list[str] | None) -> list[str] | None:
    """A term no lesson can store (`SaaS!`) matched nothing without a word, where a search refuses it."""
    for value in values or []:
        _ascii_term(value)
    return values


# Punctuation written around a word is not part of it: `?text=rls,` and `?text=heart?` found
# nothing. Inside a word it stays (next.js, J.R.), and so do the marks that end a name (c#, c++).
_AROUND_WORDS = "\"'.,;:!?()[]{}«»“”‘’¿¡…"


# Every word of a list's text filter is a regular expression run over each row's fields, and a row
# must hold them all: "a" written 1,000 times kept the database busy for 44 s on a 2,000-lesson
# team, long after the client had left. A repeat counts once, and past this many different words
# the text is refused: a row rarely holds 32 words someone chose, while each costs one more scan of
# every row (32 words that every one of 2,000 lessons holds: about 1 s a query); ranking rows by a
# long text is what a search (POST /search) is for.
MAX_TEXT_FILTER_WORDS = 32


def _words_to_find(text: str | None) -> list[str]:
    # In the compatibility form (NFKC), as a search reads its query: "ＲＥＡＣＴ，" is "REACT," and its
    # comma is punctuation around a word; the fields are read in that form too (_compatibility_form).
    words = unicodedata.normalize("NFKC", normalise_text(text or "")).split()
    return [word for word in (w.strip(_AROUND_WORDS) for w in words) if word]


def _compatibility_form(name: str) -> Func:
    """The field `name` in its Unicode compatibility form, as the keyword index reads a row
    (lessons_keyword_text, migration 0030): full-width Latin is Latin, half-width Katakana full-width."""
    return Func(F(name), template="pg_catalog.normalize(%(expressions)s, 'NFKC')", output_field=TextField())


def _ascii_lower(text: str) -> str:
    return "".join(character.lower() if character.isascii() else character for character in text)


def _compared_as(word: str) -> str:
    """What tells `word` apart from the filter's other words, as far as Python can say without the
    database (_every_word folds the rest): the marks on a Latin letter set aside, as unaccent()
    removes them ("Café" is "cafe"; a word of an unspaced script is matched as written, marks and
    all), and Latin letters in any case. Other letters keep their case: whether "Σ" is "σ" depends
    on the database's locale, and a repeat read as two words costs a test, never a wrong answer."""
    if UNSPACED_SCRIPTS.search(word):
        return _ascii_lower(word)
    kept, on_latin_letter = [], False
    for character in unicodedata.normalize("NFD", word):
        if unicodedata.combining(character) and on_latin_letter:
            continue
        on_latin_letter = character.isascii() and character.isalpha()
        kept.append(character)
    return _ascii_lower(unicodedata.normalize("NFC", "".join(kept)))


def _different_words(text: str | None) -> list[str]:
    """The words of `text` to look for, each once (the first spelling of it kept)."""
    first_spellings: dict[str, str] = {}
    for word in _words_to_find(text):
        first_spellings.setdefault(_compared_as(word), word)
    return list(first_spellings.values())


def _every_word(text: str | None, *fields: str) -> Q:
    """Each word of `text` in one of `fields`, in any case and with or without its accents ("cafe"
    is café, as a person filter reads a name), as a whole word (no letter or digit touching it):
    "row security" finds "Row-level security" as the words are, not only as the phrase, and "art"
    no longer finds "heart" or "party". Both sides are folded by PostgreSQL's unaccent(), so "soren"
    finds Søren, which Python's Unicode decomposition leaves as it is: the fields in SQL, the words
    before their pattern is built (folded_accents; `__unaccent__` would fold the finished pattern,
    and "×" became a live "*"). Both are read in their compatibility form first, as a search reads
    them: "ＲＥＡＣＴ" finds React and "ｺｰﾋｰ" finds コーヒー. A word written again, in any case or with
    other accents, is tested once (MAX_TEXT_FILTER_WORDS)."""
    words = _different_words(text)
    condition, folded_words = Q(), set()
    for word, unaccented in zip(words, folded_accents(words), strict=True):
        if not UNSPACED_SCRIPTS.search(word):
            # unaccent() folds what Python does not ("Søren" and "Soren"): still one test
            if (folded := _ascii_lower(unaccented)) in folded_words:
                continue
            folded_words.add(folded)
        either = Q()
        for name in fields:
            if UNSPACED_SCRIPTS.search(word):  # without spaces (東京 in 東京タワーに行った) a word is the run
                either |= Q(IContains(_compatibility_form(name), word))
            else:
                field = Func(_compatibility_form(name), function="unaccent", output_field=TextField())
                either |= Q(IRegex(field, Value(whole_word_pattern(unaccented))))
        condition &= either
    return condition


DEFAULT_PAGE_SIZE = 20


def _filters_only(filters: type[FilterSchema], values: Schema) -> FilterSchema:
    """The filter fields of `values` (a list tool's arguments) as `filters`: a FilterSchema turns
    every field it has into a condition, and a page's limit is none."""
    return filters.model_construct(**{name: getattr(values, name) for name in filters.model_fields})


class PageQuery(Schema):
    """A page of a list: `limit` rows from `offset` (the lists' pagination, list_lessons and list_memories)."""

    limit: int = Field(DEFAULT_PAGE_SIZE, ge=1, le=MAX_LIMIT, description=f"Rows per page, 1..{MAX_LIMIT}.")
    offset: int = Field(0, ge=0, le=MAX_ID, description="Rows to skip.")


class LessonFilters(FilterSchema):
    text: str | None = Field(
        None, max_length=MAX_QUERY_CHARS,
        description="Words in the title or description (each of them, whole words, any case and order, with or "
                    f"without accents; a repeated word counts once, at most {MAX_TEXT_FILTER_WORDS} different "
                    "words).",
    )
    # A set of values, as tech_stack and tag are: repeated, any of them (`?status=proposed&status=rejected`)
    status: Annotated[list[LessonStatusName] | None, FilterLookup("status__in")] = Field(
        None, description="Any of these statuses (a list; in a query string, repeat the parameter)."
    )
    category: Annotated[list[str] | None, FilterLookup("category__in")] = Field(
        None, description="Any of these categories (a list; in a query string, repeat the parameter)."
    )
    tech_stack: Annotated[list[str] | None, FilterLookup("tech_stacks__overlap")] = Field(
        None, description="Its tech stacks hold one of these, in any spelling the team stores (`nextjs` is "
        "`next.js`; a list; in a query string, repeat the parameter)."
    )
    project_type: Annotated[list[str] | None, FilterLookup("project_types__overlap")] = Field(
        None, description="Its project types hold one of these (a list; in a query string, repeat the parameter)."
    )
    tag: Annotated[list[str] | None, FilterLookup("tags__overlap")] = Field(
        None, description="Its tags hold one of these (a list; in a query string, repeat the parameter)."
    )
    external_id: Annotated[str | None, FilterLookup("external_id")] = Field(
        None, description="The lesson stored under this id of yours."
    )

    _lowercase_terms = field_validator("category", "tech_stack", "project_type", "tag")(_lowercase)
    _storable = field_validator("category", "tech_stack", "project_type", "tag")(_storable_terms)  # after the blanks
    _no_nul = field_validator("*")(_refuse_nul)
    _words = field_validator("text")(_words_given)
    _identifier = field_validator("external_id")(_identifier_as_stored)

    def filter_text(self, value: str | None) -> Q:
        return _every_word(value, "title", "description")


class LessonListIn(TextIn, LessonFilters, PageQuery):
    """`GET /lessons`' query string as one object, for the list_lessons tool: its filters and a
    page. Built from the endpoint's own schemas, so the two cannot drift apart."""

    def filters(self) -> LessonFilters:
        return _filters_only(LessonFilters, self)


class LessonListOut(Schema):
    """A list (not a search): lessons, the most recently changed first; no scores or relevance
    labels. `total` counts every lesson that matches; `results` holds `limit` of them from `offset`."""

    total: int
    results: list[LessonOut]


# --- memories ------------------------------------------------------------------------------


class MemoryOut(ModelSchema):
    id: int
    categories: list[str]
    people: list[str]
    emotions: list[str]

    class Meta:
        model = Memory
        fields = [
            "id",
            "external_id",
            "content",
            "details",
            "categories",
            "importance",
            "people",
            "emotions",
            "occurred_at",
            "version",
            "created_at",
            "updated_at",
            "returned_count",
            "used_count",
            "not_helpful_count",
            "last_returned_at",
            "last_used_at",
        ]


class MemoryVersionOut(ModelSchema):
    is_current: bool
    written_at: datetime = Field(description=(
        "When this text became the memory's (for the current one: the edit that made it current; a "
        "change of people or importance does not move it)."))
    replaced_at: datetime | None = Field(description="When a later text replaced it; null for the current text.")

    class Meta:
        model = Memory
        fields = ["id", "version", "content", "details", "created_at", "updated_at"]


class MemoryIn(StrictIn):
    content: FreeText = Field(min_length=1, description="The short form.")
    details: FreeText = Field("", description="The full form.")
    categories: Terms = Field([], description="person, emotion, interest, event, ...")
    importance: int = Field(5, ge=1, le=10, description="1 (trivial) to 10 (life-changing); ranks it higher.")
    people: PersonNames = Field(
        [], description="The people it is about, by name, e.g. Sam, Maria Lopez.")
    emotions: Terms = Field([], description="What was felt, e.g. happy, anxious, panic.")
    occurred_at: Moment | None = Field(None, description=(
        "When it happened (ISO 8601; without an offset read as UTC). Left null when not given; date filters "
        "and the events listing then read when it was stored."))
    external_id: str | None = Field(None, max_length=200, description="Your own id for this memory, unique per team.")

    _in_utc = field_validator("occurred_at")(_in_utc)


class MemoryPatch(StrictIn):
    """Only the fields sent are changed; a new content or details keeps the old text as a version."""

    content: FreeText = Field(None, min_length=1, description=(
        "The new short form; the text it replaces is kept as a version."))
    details: FreeText = Field(None, description=(
        "The new full form; the text it replaces is kept as a version."))
    categories: Terms = Field(None, description="The whole new list (it replaces the old one): person, event, ...")
    importance: int = Field(None, ge=1, le=10, description="1 (trivial) to 10 (life-changing).")
    people: PersonNames = Field(None, description=(
        "The whole new list of people (it replaces the old one): send every name to keep with the one you add."))
    emotions: Terms = Field(None, description="The whole new list of emotions (it replaces the old one).")
    occurred_at: Moment | None = Field(None, description=(
        "When it happened (ISO 8601; without an offset read as UTC); null: not known."))
    external_id: str | None = Field(None, max_length=200, description="Your own id for this memory; null removes it.")

    _in_utc = field_validator("occurred_at")(_in_utc)


# --- the memory tools (get_memory, update_memory, delete_memory): the endpoints' path id as an
# argument, and If-Match as the `updated_at` the agent read

MEMORY_ID = "The memory's id (its current version)."
ExpectedUpdatedAt = Annotated[Moment | None, Field(description=(
    "The memory's `updated_at` as you read it (get_memory). When the memory changed since, nothing is "
    "written and the error names this argument: read it again and re-apply your change. Left out, the "
    "write happens whatever changed meanwhile."))]


class MemoryIdIn(StrictIn):
    memory_id: BodyId = Field(description=MEMORY_ID)


class MemoryUpdateIn(MemoryPatch):
    """A memory's id, the fields to change (only those sent) and, to refuse a stale write, the
    `updated_at` read."""

    memory_id: BodyId = Field(description=MEMORY_ID)
    expected_updated_at: ExpectedUpdatedAt = None

    _expected_in_utc = field_validator("expected_updated_at")(_in_utc)


class MemoryDeleteIn(MemoryIdIn):
    expected_updated_at: ExpectedUpdatedAt = None

    _expected_in_utc = field_validator("expected_updated_at")(_in_utc)


class MemoryWithVersionsOut(MemoryOut):
    versions: list[MemoryVersionOut] = Field(description=(
        "The memory's texts, newest (the current one) first, as GET /memories/{id}/versions lists them."))


class MemoryDeletedOut(Schema):
    id: int
    deleted: bool = Field(description="true: the memory and its earlier versions are gone.")


# What each of GET /memories' orders (selectors.listing.MEMORY_ORDERINGS) lists first.
MEMORY_ORDER_MEANINGS = {
    "-updated_at": "the most recently changed first (the default)",
    "occurred_at": "in the order they happened: a timeline (a memory without a date by when it was stored)",
    "-occurred_at": "the latest to happen first",
    "-importance": "the most important first, then the most recently changed",
}


class MemoryOrderQuery(Schema):
    # spelled from the selector's orderings, so the two cannot disagree (an order without a meaning
    # here fails at import)
    order: Literal[tuple(MEMORY_ORDERINGS)] = Field("-updated_at", description="; ".join(
        f"`{order}`: {MEMORY_ORDER_MEANINGS[order]}" for order in MEMORY_ORDERINGS))


class MemoryFilters(FilterSchema):
    text: str | None = Field(
        None, max_length=MAX_QUERY_CHARS,
        description="Words in the content or details (each of them, whole words, any case and order, with or "
                    f"without accents; a repeated word counts once, at most {MAX_TEXT_FILTER_WORDS} different "
                    "words).",
    )
    category: Annotated[list[str] | None, FilterLookup("categories__overlap")] = Field(
        None, description="Its categories hold one of these (a list; in a query string, repeat the parameter)."
    )
    person: list[str] | None = Field(
        None, description="Its people name one of these (any case, with or without accents)."
    )
    emotion: Annotated[list[str] | None, FilterLookup("emotions__overlap")] = Field(
        None, description="Its emotions hold one of these (a list; in a query string, repeat the parameter)."
    )
    min_importance: Annotated[int | None, FilterLookup("importance__gte")] = Field(
        None, ge=1, le=10, description="Importance at least this, 1..10."
    )
    external_id: Annotated[str | None, FilterLookup("external_id")] = Field(
        None, description="The memory stored under this id of yours."
    )
    since: Moment | None = Field(None, description=(
        "Happened at or after this moment (ISO 8601; a memory without a date by when it was stored), as a "
        "search's `since` reads memories."))
    until: Moment | None = Field(None, description="Happened before this moment, read as `since` is.")

    _lowercase_terms = field_validator("category", "emotion")(_lowercase)
    _storable = field_validator("category", "emotion")(_storable_terms)  # after the blanks
    _dates_in_utc = field_validator("since", "until")(_in_utc)
    _until_after_since = field_validator("until")(_after_since)

    def filter_since(self, value: datetime | None) -> Q:
        # when it happened, else when it was stored, as the search filters; spelled as the timeline's
        # index spells it (MEMORY_HAPPENED_AT), so a date range reads that index
        return Q() if value is None else Q(GreaterThanOrEqual(MEMORY_HAPPENED_AT, value))

    def filter_until(self, value: datetime | None) -> Q:
        return Q() if value is None else Q(LessThan(MEMORY_HAPPENED_AT, value))
    _no_nul = field_validator("*")(_refuse_nul)
    _words = field_validator("text")(_words_given)
    _identifier = field_validator("external_id")(_identifier_as_stored)

    @field_validator("person")
    @classmethod
    def _no_blank_person(cls, names: list[str] | None) -> list[str] | None:
        _refuse_blank_items(names)
        # "-", "," or a zero-width space: the listing answered every memory of the team
        for name in names or []:
            _a_name(name)
        return names

    def filter_text(self, value: str | None) -> Q:
        return _every_word(value, "content", "details")

    def filter_person(self, value: list[str] | None) -> Q:
        # Names keep their case and accents when stored; a filter compares them without either, as
        # the friends listing and a search's `people` filter do ("zoe" is Zoë).
        # Folded by PostgreSQL on both sides: Python lowercases "İlker" to "i̇lker" (two
        # characters), PostgreSQL to "ilker", and the stored name was never found.
        names = normalise_names(value)
        if not names:
            return Q()
        table = Memory._meta.db_table
        return Q(RawSQL(names_one_of_sql(f'"{table}"."people"'), [names], output_field=BooleanField()))


class MemoryListIn(TextIn, MemoryFilters, MemoryOrderQuery, PageQuery):
    """`GET /memories`' query string as one object, for the list_memories tool: its filters, its
    order and a page. Built from the endpoint's own schemas, so the two cannot drift apart."""

    def filters(self) -> MemoryFilters:
        return _filters_only(MemoryFilters, self)


# --- search --------------------------------------------------------------------------------


PER_KIND = "x-per-kind"  # a field's description for a tool fixed to one kind (api/tools.py)


def per_kind(**descriptions: str) -> dict:
    """`json_schema_extra` for a search field that reads differently per kind: POST /search keeps
    the description for both; search_lessons and semantic_search say only their own kind's."""
    return {PER_KIND: descriptions}



class SearchFiltersIn(StrictIn):
    """Hard filters: rows that do not match are never candidates."""

    statuses: list[LessonStatusName] = Field(
        ["confirmed"], min_length=1, description="Lessons only.",
        json_schema_extra=per_kind(lessons="Which lessons: confirmed by default; add proposed or rejected to see "
                                           "those."),
    )
    categories: Terms = Field(
        [], description="Lessons: category is one of; memories: shares one.",
        json_schema_extra=per_kind(lessons="The lesson's category is one of these.",
                                   memories="The memory has one of these categories."),
    )
    phase: OptionalTerm | None = Field(
        None, description=f"Lessons: a project phase, one of: {', '.join(settings.SEARCH_PHASE_CATEGORIES)}.",
        json_schema_extra={"enum": [*settings.SEARCH_PHASE_CATEGORIES, None]},  # a client can offer the values
    )
    tech_stacks: Terms = Field([], description="Lessons: shares one.")
    project_types: Terms = Field([], description="Lessons: shares one.")
    tags: Terms = Field([], description="Lessons: shares one.")
    min_importance: int | None = Field(
        None, ge=1, le=10, description="Memories only.",
        json_schema_extra=per_kind(memories="At least this importance (1-10)."),
    )
    people: PersonNames = Field(
        [], description="Memories: its people name one of them (any case, with or without accents)."
    )
    emotions: Terms = Field([], description="Memories: shares one.")
    since: Moment | None = Field(
        None, description="From this moment (ISO 8601): lessons by when they were last updated, memories by when "
                          "they happened.",
        json_schema_extra=per_kind(lessons="From this moment (ISO 8601), by when the lesson was last updated.",
                                   memories="From this moment (ISO 8601), by when the memory happened."),
    )
    until: Moment | None = Field(None, description="Before this moment, read as `since` is.")

    @field_validator("phase")
    @classmethod
    def _known_phase(cls, phase: str | None) -> str | None:
        # Checked here, so the error names filters.phase (the engine's own check names `phase`).
        known = settings.SEARCH_PHASE_CATEGORIES
        if phase is not None and phase.lower() not in known:
            raise ValueError(f"unknown phase {phase!r}; use one of: {', '.join(known)}")
        return phase
    include_versions: bool = Field(False, description="Memories: also search earlier versions.")

    _in_utc = field_validator("since", "until")(_in_utc)
    _until_after_since = field_validator("until")(_after_since)


class SearchWeightsIn(StrictIn):
    semantic: float = Field(ge=0.0, le=1.0, description="Meaning: the cosine to the query, on a fixed scale.")
    keyword: float = Field(ge=0.0, le=1.0, description="Words: BM25 and exact terms (tags, tech stacks, title).")
    quality: float = Field(
        ge=0.0, le=1.0, description="Lessons: confidence and frequency; memories: importance and recency; plus "
                                    "agents' reported use.",
        json_schema_extra=per_kind(lessons="Confidence and frequency, plus agents' reported use.",
                                   memories="Importance and recency, plus agents' reported use."),
    )


class SearchIn(StrictIn):
    query: QueryText = Field(description=f"What to look for, in words (at most {MAX_QUERY_CHARS} characters).")
    kind: KindName = "lessons"
    mode: ModeName = Field("hybrid", description="hybrid (meaning + words + quality), semantic, or text.")
    limit: Limit = 10
    context: str = Field(
        "", max_length=MAX_CONTEXT_CHARS, description="Your situation (file, conversation): searched as a second query."
    )
    filters: SearchFiltersIn = Field(default_factory=SearchFiltersIn)
    tech_stack: Terms = Field(
        [], description="Lessons only: your tech stack; lessons that share it rank higher.",
        json_schema_extra=per_kind(lessons="Your tech stack; lessons that share it rank higher."),
    )
    project_type: Term | None = Field(
        None, description="Lessons only: your project type, e.g. saas.",
        json_schema_extra=per_kind(lessons="Your project type, e.g. saas; lessons for it rank higher."),
    )
    fusion: FusionName = Field("weighted", description="weighted (the tuned formula) or rrf (reciprocal rank "
                                                        "fusion of the parts' rankings).")
    weights: SearchWeightsIn | None = Field(None, description="Leave out for the tuned defaults.")
    explain: bool = Field(False, description="Return how each score was made.")


class SearchHitOut(Schema):
    model_config = ConfigDict(extra="allow")

    # Every field is in every hit: required in the OpenAPI document, with the values it can take.
    id: int
    external_id: str | None
    kind: HitKindName
    fields: dict
    score: float
    relevance: RelevanceName = Field(
        description="high | medium | low: what a curator would call the hit, from its own evidence on fixed "
        "scales, never relative to the other hits: its cosine to the query and its BM25 against the query's "
        "attainable maximum, weighted as the search weighs meaning and words (without the model: words "
        "alone), high from 0.55, medium from 0.3 (SEARCH_RELEVANCE_THRESHOLDS). Quality and label feedback "
        "do not count; with a context, meaning is 0.6 x the query's cosine + 0.4 x the context's. A hit "
        "carrying every query term exactly (a tag, tech stack or title word), or saying a one-word query's "
        "word, is at least medium.",
    )
    found_by: list[Literal["primary", "contextual"]]
    collapsed_ids: list[int] = Field(description="Ids of the same-title lessons folded into this hit.")
    explanation: dict | None = Field(
        description="With explain: how the score was made. The parts on 0..1 (semantic, keyword with "
        "matched_terms: the query's words as the index stores them, stemmed ('flaki' for flaky), metadata, "
        "quality and the usage that is part of it), penalty, weights and "
        "weighted_score; similarity, contextual_similarity, "
        "feedback_similarity, bm25 and bm25_max where measured; legs and found_by; exact_term and says_query "
        "(the tiers a short query ranks by before the score); names_subject (a memory of a person the query "
        "names: labelled at least medium). In a hybrid "
        "lesson search on the default weights, labels {value, shared, weight, top}: score = (weighted_score + "
        "weight x value) / (1 + weight), value 1 when the lesson shares a tag (shared) with the top hits.",
    )


class SearchOut(Schema):
    model_config = ConfigDict(extra="allow")

    mode: ModeName
    degraded: bool
    degraded_reason: str | None
    fallback: Literal["recency"] | None = Field(description="recency: nothing matched (or no query); the most "
                                                            "recently updated rows, labelled low.")
    timings_ms: dict[str, float]
    results: list[SearchHitOut]
    candidates: dict[str, int]
    context_keywords: list[str]
    search_id: UUID | None = Field(
        description="Send it to POST /feedback (MCP: report_usage) with the ids of the results you used; "
        "null only when the search could not be recorded.",
    )


class PersonSearchOut(SearchOut):
    total: int = Field(description="How many memories name the person in all; `results` holds the first "
                                   "`limit` (up to 100) of them, ranked.")


# --- lessons: agent shortcuts ---------------------------------------------------------------


class RelevantLessonsQuery(TextIn):
    project_type: Term | None = Field(None, description="e.g. saas, api, cli")
    tech_stack: Terms = Field([], description="e.g. nextjs, postgresql")
    phase: OptionalTerm | None = Field(
        None, description=f"A project phase, one of: {', '.join(settings.SEARCH_PHASE_CATEGORIES)}.",
        json_schema_extra={"enum": [*settings.SEARCH_PHASE_CATEGORIES, None]},
    )
    limit: Limit = 15


class PatternsQuery(TextIn):
    feature: QueryText = Field(
        description="The feature you are about to build, e.g. Authentication."
    )
    tech_stack: Terms = Field([], description="Your tech stack, e.g. nextjs, postgresql: lessons that share it "
                                              "rank higher.")
    project_type: Term | None = Field(None, description="Your project type, e.g. saas.")
    limit: Limit = 3


class SessionIn(StrictIn):
    project: str | None = Field(None, max_length=200, description="The project's name.")
    cwd: str | None = Field(None, max_length=1_000, description="The working directory.")
    recent_activity: str = Field("", max_length=MAX_CONTEXT_CHARS, description="What you have been doing.")
    limit: Limit = 5


# --- memories: agent shortcuts --------------------------------------------------------------


# A listing answers all its rows by default (up to MEMORY_LISTING_MAX, with `total`): the friends,
# interests and events tools promise "every" one, and once stopped at 50 (100 at most).
ListingLimit = Annotated[
    int,
    Field(
        ge=1,
        le=settings.MEMORY_LISTING_MAX,
        description=f"How many, 1..{settings.MEMORY_LISTING_MAX} (all of them, up to that, by default).",
    ),
]


class MemoryLimitQuery(TextIn):
    limit: ListingLimit = settings.MEMORY_LISTING_MAX


class PanicAttacksQuery(TextIn):
    limit: ListingLimit = settings.MEMORY_LISTING_MAX


class MemoryListOut(Schema):
    """A listing (not a search): every memory that matches, in the listing's documented order;
    no scores or relevance labels. `total` counts them all, `results` holds the first `limit`
    (from `offset`, for list_memories)."""

    total: int
    results: list[MemoryOut]


class PersonOut(Schema):
    name: str = Field(description="The most common spelling of the name in the memories.")
    summary: str = Field(description="The content of a memory about this person: one that says their name and "
                         "names the fewest other people, the most important (then most recent) of those.")
    importance: int = Field(description="The highest importance among this person's memories.")
    memory_count: int
    memory_ids: list[int] = Field(description="Their memories' ids, most important first, then most recent.")


class PeopleOut(Schema):
    """Everyone named in the memories' `people`, most important first, then by name."""

    total: int
    results: list[PersonOut]


class EventsQuery(TextIn):
    days: int = Field(30, ge=1, le=36_500, description="How far back, in days.")
    limit: ListingLimit = settings.MEMORY_LISTING_MAX


class ByPersonQuery(TextIn):
    name: PersonName = Field(description="The person's name.")
    limit: Limit = 20


class ByEmotionQuery(TextIn):
    emotion: Term = Field(description="happy, sad, anxious, panic, excited, ...")
    limit: Limit = 20


class SearchVersionsIn(StrictIn):
    query: QueryText = Field(description="What to look for.")
    limit: Limit = 10


# --- feedback ------------------------------------------------------------------------------

ResultIds = Annotated[list[BodyId], Field(max_length=MAX_LIMIT)]


class FeedbackIn(StrictIn):
    """Which results of a search you used, and which were not helpful (either list may be empty).
    One verdict per result: the first one reported stands."""

    search_id: UUID = Field(description="The search_id of a search answer of your team.")
    used: ResultIds = Field([], description="Ids of the results you used.")
    not_helpful: ResultIds = Field([], description="Ids of the results that were noise.")


class FeedbackRecordedOut(Schema):
    used: list[int]
    not_helpful: list[int]


class FeedbackMergedOut(Schema):
    id: int = Field(description="The result as the search returned it (and as reported).")
    counted_for: int = Field(description="The row it was merged into since the search, whose counts moved.")


class FeedbackVersionOut(Schema):
    id: int = Field(description="The earlier version as the search returned it (and as reported).")
    counted_for: int = Field(description="The memory it is a version of (its current text), whose counts moved.")


class FeedbackOut(Schema):
    search_id: str
    recorded: FeedbackRecordedOut = Field(description="The verdicts counted by this report.")
    already_recorded: list[int] = Field(description="Results that had a verdict already: nothing counted again.")
    merged: list[FeedbackMergedOut] = Field(description=(
        "Recorded results merged into another row since the search: the verdict counted for that row."))
    gone: list[int] = Field(description=(
        "Results deleted since the search: nothing recorded or counted for them (the rest of the report is)."))
    versions: list[FeedbackVersionOut] = Field(description=(
        "Recorded results that are earlier versions of a memory (search-versions hits): the verdict counted "
        "for the memory as it stands, whose answer shows the counts."))


# --- health and tools ----------------------------------------------------------------------


class HealthOut(Schema):
    status: Literal["ok", "degraded", "unavailable"]
    ready: bool = Field(description="true once the database answers and the embedding model is loaded")
    reason: str | None = Field(None, description="why the service is not ready (warming up, model off, no database)")
    database: dict
    model: dict
    embeddings: dict


class ToolFunctionOut(Schema):
    name: str
    description: str
    parameters: dict


class ToolOut(Schema):
    type: Literal["function"] = "function"
    function: ToolFunctionOut
