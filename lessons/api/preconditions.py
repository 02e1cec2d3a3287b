"""Concurrent edits over HTTP (RFC 9110): ETag and If-Match.

A lesson's or a memory's answer (read, create, change, restore) carries a strong `ETag` made of
its kind, id and `updated_at` in milliseconds since the epoch (`"m170-1767225600123"`), the moment
the body's `updated_at` shows. `PATCH` and `DELETE` of one, and a memory's restore, honour
`If-Match`: when no tag it lists is the row's current one the answer is 412 and nothing is
written; `*` asks only that the row exists. The comparison itself is the services'
(`lessons.services.common.refuse_changed_since_read`), made under the row lock they take, so of
two writes sent with the same tag exactly one lands. `If-None-Match` on a read answers 304 when a
tag it lists is current.
"""

import functools
import re
from datetime import datetime, timedelta, timezone

from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from ninja import Header

from lessons.api import errors
from lessons.models import Lesson, Memory
from lessons.services.common import ChangedSinceRead

IF_MATCH = "If-Match"
_KIND_LETTERS = {Lesson: "l", Memory: "m"}
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ENTITY_TAG = re.compile(r'[ \t]*(W/)?"([\x21\x23-\x7e\x80-\xff]*)"[ \t]*')  # RFC 9110 8.8.3
# No leading zeros: a strong tag matches character for character, and "m03184-..." is not m3184's
# tag (the numbers were compared, so it matched).
_OUR_TAG = re.compile(r"([lm])([1-9][0-9]{0,18})-(0|[1-9][0-9]{0,18})")

DOCUMENTED = (
    "The answer's `ETag` header names the version you read (`GET` sends it too). Send it back as "
    "`If-Match: \"m170-1767225600123\"` (or several, comma-separated, or `*`) and the write happens only "
    "if the row is still that version: otherwise 412 naming `If-Match`, nothing written; GET it again and "
    "re-apply your change. Two writers sending the same tag: exactly one lands. A header that is not a list "
    "of quoted tags or `*` is a 400. Without `If-Match` the write happens whatever changed meanwhile."
)


def if_match_header():
    """The handler parameter that reads `If-Match` (and shows it in the OpenAPI document)."""
    return Header(None, alias=IF_MATCH, description="Write only if the row is still this version (its ETag).")


def etag(row: Lesson | Memory) -> str:
    milliseconds = (row.updated_at - _EPOCH) // timedelta(milliseconds=1)
    return f'"{_KIND_LETTERS[type(row)]}{row.pk}-{milliseconds}"'


def with_etag(response: HttpResponse, row: Lesson | Memory) -> Lesson | Memory:
    """`row`, its answer carrying its ETag (`response`: the handler's temporal response)."""
    response["ETag"] = etag(row)
    return row


class MalformedIfMatch(ValueError):
    """An If-Match that is neither `*` nor a list of quoted entity tags (400)."""


def _entity_tags(value: str) -> list[tuple[bool, str]]:
    """`(weak, opaque)` of each tag in a comma-separated list; empty elements are allowed."""
    tags, position = [], 0
    while position < len(value):
        if value[position] in " \t,":
            position += 1
            continue
        match = _ENTITY_TAG.match(value, position)
        if match is None:
            raise MalformedIfMatch(
                f"not a list of quoted entity tags, such as \"m170-1767225600123\", nor *: {value[:200]!r}"
            )
        tags.append((match.group(1) is not None, match.group(2)))
        position = match.end()
        if position < len(value) and value[position] != ",":
            raise MalformedIfMatch(f"entity tags are separated by commas: {value[:200]!r}")
    if not tags:
        raise MalformedIfMatch("empty; send the ETag of the version you read, or *")
    return tags


def _moment(opaque: str, *, row: Lesson | Memory) -> datetime | None:
    """The `updated_at` a tag of ours names for `row`; None for a tag of another row or not ours."""
    match = _OUR_TAG.fullmatch(opaque)
    if match is None or match.group(1) != _KIND_LETTERS[type(row)] or int(match.group(2)) != row.pk:
        return None
    try:
        return _EPOCH + timedelta(milliseconds=int(match.group(3)))
    except OverflowError:
        return None


def expected_updated_at(header: str | None, *, row: Lesson | Memory) -> list[datetime] | None:
    """What the services check `row` against: None without If-Match or with `*` (the row exists:
    it was just read, and a write racing a delete hears 404); else the moments its tags name
    (empty when none names this row: nothing matches, 412). A weak tag never matches (If-Match
    compares strongly)."""
    if header is None or header.strip() == "*":
        return None
    moments = (_moment(opaque, row=row) for weak, opaque in _entity_tags(header) if not weak)
    return [moment for moment in moments if moment is not None]


def _never_a_version(header: str, *, row: Lesson | Memory) -> str | None:
    """Why no tag sent could name a version of `row`, or None when one does (the row changed since).
    "The lesson was changed since the version you sent" was said of a row that had not changed
    when the tag was weak, another row's, or not one of ours."""
    tags = _entity_tags(header)
    if any(not weak and _moment(opaque, row=row) is not None for weak, opaque in tags):
        return None
    noun = row._meta.verbose_name
    if all(weak for weak, _ in tags):
        return (f"every tag sent is weak (W/...), and If-Match compares strongly; send the {noun}'s ETag "
                "as an answer gave it, without W/")
    return (f"no tag sent names a version of {noun} {row.pk} (its tags look like "
            f'"{_KIND_LETTERS[type(row)]}{row.pk}-<milliseconds>"); GET it for its ETag')


def not_modified(request: HttpRequest, row: Lesson | Memory) -> HttpResponseNotModified | None:
    """The 304 for a read whose If-None-Match lists the row's current tag (weakly compared), else None."""
    header = request.headers.get("If-None-Match")
    if header is None:
        return None
    current = etag(row)
    try:
        listed = header.strip() == "*" or any(f'"{opaque}"' == current for _, opaque in _entity_tags(header))
    except MalformedIfMatch:
        return None  # a header that cannot be read is ignored: the full answer is never wrong
    if not listed:
        return None
    answer = HttpResponseNotModified()
    answer["ETag"] = current
    return answer


def honours_if_match(handler):
    """Decorate a write handler (under the router's decorator): a malformed If-Match is a 400 and a
    row changed since the tag was read a 412, both naming `If-Match`, in the API's error shape."""

    @functools.wraps(handler)
    def checked(request, *args, **kwargs):
        try:
            return handler(request, *args, **kwargs)
        except MalformedIfMatch as malformed:
            return 400, errors.field_error(IF_MATCH, str(malformed))
        except ChangedSinceRead as changed:
            sent = request.headers.get(IF_MATCH, "")
            message = _never_a_version(sent, row=changed.row) or errors.changed_since_read(
                row=changed.row, sent=sent[:200], again="GET it again"
            )
            return 412, errors.field_error(IF_MATCH, message)

    return checked
