"""The API's reader of request bodies: ninja's, but stricter about what it reads as JSON.

- A body is read only when it is sent as JSON: `Content-Type: application/json` or any
  `application/*+json` type (`application/merge-patch+json`), in any case, with any parameters; a
  charset, when one is named, must be UTF-8 (RFC 8259 §8.1: JSON between systems is UTF-8). Anything
  else, or no Content-Type, is refused with 415, naming `Content-Type`: a form (`curl -d`'s default)
  or text/plain that happened to hold JSON was read as JSON, a body labeled latin-1 was read as UTF-8.
- An object naming a key twice is refused (400, `lessons.strict_json`) instead of keeping the last value.

ninja calls the parser only for an endpoint that reads a body, and only when one was sent: a write
that takes no body (`POST /lessons/5/accept`) takes any Content-Type, or none (lessons.api.request_body),
and an empty body stays a 400 saying it is empty.
"""

import codecs

from django.http import HttpRequest
from ninja.parser import Parser

from lessons import strict_json

ACCEPTED = "application/json (or any application/*+json type)"
# A form is what `curl -d` sends unless told otherwise: the commonest way JSON arrives as something else.
CURL_FORM = "application/x-www-form-urlencoded"
CURL_HINT = " (`curl -d` sends a form unless given -H 'Content-Type: application/json')"


class UnsupportedMediaType(Exception):
    """The body's Content-Type is not one read as JSON; `message` says what is (the field is named by
    whoever answers: `Content-Type: message`)."""

    field = "Content-Type"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def _is_json(media_type: str) -> bool:
    kind, _, subtype = media_type.partition("/")
    return kind == "application" and (subtype == "json" or (subtype.endswith("+json") and len(subtype) > 5))


def _is_utf8(charset: str) -> bool:
    try:
        return codecs.lookup(charset).name == "utf-8"
    except LookupError:
        return False


def media_type_refusal(request: HttpRequest) -> str | None:
    """Why the body of `request` is not read as JSON, by its Content-Type; None when it is."""
    media_type = (request.content_type or "").strip().lower()  # Django lowercases it, and the parameters' names
    if not media_type:
        return f"missing; send the body as {ACCEPTED}"
    if not _is_json(media_type):
        hint = CURL_HINT if media_type == CURL_FORM else ""
        return f"'{media_type}' is not read here{hint}; send the body as {ACCEPTED}"
    charset = (request.content_params or {}).get("charset")
    if charset is not None and not _is_utf8(charset):
        return f"charset '{charset}' is not read here; JSON is read as UTF-8: send charset=utf-8, or no charset"
    return None


class StrictJSONParser(Parser):
    def parse_body(self, request: HttpRequest):
        if refusal := media_type_refusal(request):
            error = UnsupportedMediaType(refusal)
            # ninja answers any error of a parser as a 400 "Cannot parse request body"; the API's
            # middleware (lessons.api.middleware) answers this one as the 415 it is.
            request.unsupported_media_type = error
            raise error
        return strict_json.loads(request.body)
