"""The project's one NinjaAPI; each concern of the `lessons` app adds its router here, and every
error is mapped to an answer here, once, so all handlers answer bad input the same way:
`{"detail": "field: what is wrong", "errors": [{"field": ..., "message": ...}]}`."""

import json
import logging

import pydantic
from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist, RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError, DataError, IntegrityError, InterfaceError, OperationalError, ProgrammingError
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError

from lessons.api import errors
from lessons.api.auth import api_auth
from lessons.api.feedback import router as feedback_router
from lessons.api.permissions import PermissionRefused
from lessons.api.query_parameters import writes_take_no_query
from lessons.api.request_body import writes_without_input_take_no_body
from lessons.api.curation import router as curation_router
from lessons.api.docs import MemoryStoreAPI, StaffSwagger
from lessons.api.parser import StrictJSONParser
from lessons.api.health import router as health_router
from lessons.api.lessons import router as lessons_router
from lessons.api.memories import router as memories_router
from lessons.api.search import router as search_router
from lessons.api.tools import router as tools_router
from lessons.error_text import lost_to_a_concurrent_write, one_line, over_a_database_limit
from lessons.search.types import SearchRequestError

logger = logging.getLogger("lessons.api")

api = MemoryStoreAPI(
    title="Memory Store API",
    version="1.0.0",
    description=(
        "Lessons learned and personal memories for AI agents, found by hybrid search. "
        "Authenticate with `Authorization: Bearer <key>`; every request sees only the key's team. "
        "Staff signed in to the admin may call the API from the browser for any team, named with the "
        "`X-Team: <slug>` header or the `?team=<slug>` query parameter (the docs page has a team picker)."
    ),
    urls_namespace="api-v1",
    auth=api_auth,
    docs=StaffSwagger(),
    parser=StrictJSONParser(),
)
# A write's input is its JSON body: a query string other than `team` is refused by name ...
api.add_decorator(writes_take_no_query)
# ... and a write that reads no body (a decision, a restore, a delete) refuses one by name.
api.add_decorator(writes_without_input_take_no_body)

api.add_router("", search_router)
api.add_router("", feedback_router)
# Before the lessons and memories routers: `/lessons/duplicates` must not be read as a lesson id.
api.add_router("", curation_router)
api.add_router("", lessons_router)
api.add_router("", memories_router)
api.add_router("", health_router)
api.add_router("", tools_router)


def _answer(request, body: dict, status: int):
    return api.create_response(request, body, status=status)


@api.exception_handler(NinjaValidationError)
def invalid_input(request, exc: NinjaValidationError):
    if not request.body.strip() and any(error["loc"][:1] == ("body",) for error in exc.errors):
        # No body at all is not JSON (400), rather than a JSON object missing its fields (422).
        message = "the body is empty; send a JSON object"
        if "chunked" in request.headers.get("Transfer-Encoding", "").lower():
            # WSGI reads a body by its Content-Length; a chunked one arrives as nothing
            message = "a chunked body (Transfer-Encoding: chunked) is not read here; send it with a Content-Length"
        return _answer(request, errors.field_error("body", message), 400)
    return _answer(request, errors.ninja_validation_errors(exc.errors), 422)


@api.exception_handler(pydantic.ValidationError)
def invalid_value(request, exc: pydantic.ValidationError):
    return _answer(request, errors.pydantic_validation_errors(exc), 422)


@api.exception_handler(DjangoValidationError)
def invalid_row(request, exc: DjangoValidationError):
    return _answer(request, errors.django_validation_errors(exc), 422)


@api.exception_handler(SearchRequestError)
def invalid_search(request, exc: SearchRequestError):
    return _answer(request, errors.field_error(exc.field, exc.message), 422)


@api.exception_handler(ObjectDoesNotExist)
def not_found(request, exc: ObjectDoesNotExist):
    path_ids = request.resolver_match.kwargs if request.resolver_match else {}
    return _answer(request, errors.missing(exc, path_ids=path_ids), 404)


@api.exception_handler(RequestDataTooBig)
def body_too_large(request, exc: RequestDataTooBig):
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    message = f"the body is larger than the limit of {limit:,} bytes"
    return _answer(request, errors.field_error("body", message), 413)


@api.exception_handler(AuthenticationError)
def unauthenticated(request, exc: AuthenticationError):
    detail = "send a valid API key as 'Authorization: Bearer <key>' (it is missing, unknown or revoked)"
    answer = _answer(request, errors.error_body(detail), 401)
    answer["WWW-Authenticate"] = 'Bearer realm="api"'  # HTTP: a 401 says which scheme it wants
    return answer


@api.exception_handler(errors.TeamChoiceError)
def no_team_chosen(request, exc: errors.TeamChoiceError):
    return _answer(request, errors.field_error(exc.field, exc.message), exc.status)


@api.exception_handler(PermissionRefused)
def permission_refused(request, exc: PermissionRefused):
    return _answer(request, errors.error_body(exc.message), 403)


@api.exception_handler(HttpError)
def http_error(request, exc: HttpError):
    if isinstance(exc.__cause__, (json.JSONDecodeError, UnicodeDecodeError, ValueError, RecursionError)):
        return _answer(request, errors.malformed_json(exc.__cause__), 400)
    return _answer(request, errors.error_body(exc.message), exc.status_code)


def _input_of(request) -> str:
    # a read's values come from its query string: "body" sent a GET's caller looking for a body
    return "body" if request.method in ("POST", "PUT", "PATCH") else "query"


@api.exception_handler(DataError)
def unstorable_value(request, exc: DataError):
    return _answer(request, errors.unstorable_value(exc, where=_input_of(request)), 422)


@api.exception_handler(IntegrityError)
def conflict(request, exc: IntegrityError):
    return _answer(request, errors.conflict(exc), 409)


@api.exception_handler(OperationalError)
@api.exception_handler(InterfaceError)
def database_down(request, exc: DatabaseError):
    if over_a_database_limit(exc):
        logger.error("a value past a database limit: %s", one_line(exc))
        return _answer(request, errors.unstorable_value(exc, where=_input_of(request)), 422)
    if lost_to_a_concurrent_write(exc):
        logger.warning("a request lost to a concurrent one: %s", one_line(exc))
        answer = _answer(request, errors.concurrent_write(exc), 503)
        answer["Retry-After"] = "1"
        return answer
    logger.error("database unavailable: %s", one_line(exc))
    return _answer(request, errors.database_unavailable(exc), 503)


@api.exception_handler(ProgrammingError)
def programming_error(request, exc: ProgrammingError):
    body = errors.not_migrated(exc)
    return _answer(request, body, 503) if body else unexpected(request, exc)


@api.exception_handler(Exception)
def unexpected(request, exc: Exception):
    # Never a traceback to the caller; the log has it.
    logger.exception("unexpected error in %s %s", request.method, request.path)
    return _answer(request, errors.internal(exc), 500)
