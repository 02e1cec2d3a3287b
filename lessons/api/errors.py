"""How every failure is described to an agent: `{"detail": "...", "errors": [{"field", "message"}]}`.

`memory_site/api.py` maps exceptions to these bodies once, with `@api.exception_handler`; the MCP
server uses the same functions, so both speak the same language about bad input.
"""

import json
import logging
from collections.abc import Mapping
from types import MappingProxyType

import pydantic
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.serializers.json import DjangoJSONEncoder

from lessons.error_text import first_line, schema_behind, unreadable_json
from lessons.models import Lesson, Memory
from lessons.selectors.health import forget_migrated

logger = logging.getLogger(__name__)

# Names of handler parameters that hold a whole schema: ninja puts them first in an error's
# location, but they are not part of the field's name.
_PARAMETER_NAMES = {"payload", "params", "filters", "pagination"}


# The path parameter that names a row of each kind (lessons.api.schemas' LessonId, MemoryId).
_PATH_IDS = ((Lesson, "lesson_id"), (Memory, "memory_id"))


class TeamChoiceError(Exception):
    """Staff using the API from the admin session did not name a usable team. `message` does not
    name the field: the answer says `field: message`, as every field error does (it said
    "X-Team: X-Team: no team with slug 'nosuch'")."""

    def __init__(self, message: str, *, status: int = 400, field: str = "X-Team"):
        super().__init__(message)
        self.message = message
        self.status = status
        self.field = field  # the header, or the query parameter the team was named by


def error_body(detail: str, errors: list[dict] | None = None) -> dict:
    return {"detail": detail, "errors": errors or []}


def field_error(field: str, message: str) -> dict:
    """One field at fault: `{"detail": "field: message", "errors": [{"field", "message"}]}`."""
    return error_body(f"{field}: {message}", [{"field": field, "message": message}])


def missing(error: Exception, *, path_ids: Mapping[str, object] = MappingProxyType({})) -> dict:
    """A 404's body: the message, and the field when the missing thing was named by one: a
    `search_id` (the service sets `field` on the exception), or the id in the path of the kind that
    is missing (`path_ids`, the route's parameters: `lesson_id` for a lesson, `memory_id` for a
    memory), as every other error names its field."""
    message = str(error) or "not found"
    field = getattr(error, "field", None)
    if field is None:
        field = next((name for model, name in _PATH_IDS if isinstance(error, model.DoesNotExist) and name in path_ids),
                     None)
    return field_error(field, message) if field else error_body(message)


def _field_name(location, *, drop_parameter: bool = False) -> str:
    parts = [str(part) for part in location]
    if drop_parameter and parts and parts[0] in _PARAMETER_NAMES:
        parts = parts[1:]
    return ".".join(parts) or "body"


def _summary(errors: list[dict]) -> str:
    return "; ".join(f"{error['field']}: {error['message']}" for error in errors)


def _message(error: dict) -> str:
    """pydantic's message, without the "Value error, " it puts before a validator's own words
    ("filters.phase: Value error, unknown phase ..."): the field is named already."""
    message = error["msg"]
    if error.get("type") in ("value_error", "assertion_error"):
        message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if error.get("type") == "int_parsing_size":  # pydantic's words for 1e20, which is no string
        message = "Input should be an integer of a size this field takes; this number is far too large"
    return message


def ninja_validation_errors(errors: list[dict]) -> dict:
    """From ninja's errors, whose `loc` starts with where the value came from (body, query, path)."""
    described = [
        {"field": _field_name(error["loc"][1:], drop_parameter=True), "message": _message(error)} for error in errors
    ]
    return error_body(_summary(described), described)


def pydantic_validation_errors(error: pydantic.ValidationError) -> dict:
    described = [
        {"field": _field_name(item["loc"]), "message": _message(item)} for item in error.errors(include_url=False)
    ]
    return error_body(_summary(described), described)


def django_validation_errors(error: DjangoValidationError) -> dict:
    """The services' model validation: `message_dict` names the fields."""
    if hasattr(error, "error_dict"):
        described = [
            {"field": "body" if name == "__all__" else name, "message": " ".join(messages)}
            for name, messages in error.message_dict.items()
        ]
    else:
        described = [{"field": "body", "message": " ".join(error.messages)}]
    return error_body(_summary(described), described)


def changed_since_read(*, row, sent: str, again: str) -> str:
    """Why a write from an old copy of `row` (as stored now) was refused: `sent`, what the writer said
    it read; `again`, how to read it again. The caller names the field (If-Match, expected_updated_at)."""
    changed_at = DjangoJSONEncoder().default(row.updated_at)  # as every answer writes it
    return (f"the {row._meta.verbose_name} was changed at {changed_at} since the version you sent ({sent}); "
            f"{again} and re-apply your change")


def malformed_json(error: Exception) -> dict:
    if isinstance(error, json.JSONDecodeError):
        message = f"malformed JSON: {error.msg} (line {error.lineno}, column {error.colno})"
    elif plain := unreadable_json(error):
        message = plain
    else:
        message = f"the body could not be read as JSON: {error}"
    return field_error("body", message)


def database_unavailable(error: Exception) -> dict:
    """An outage's answer, to any caller (also one without a key): the driver's words name the
    database's host, port and user, so they go to the log (the handlers write it), as /health does."""
    return error_body("the database is unavailable; try again later (the server's log says why)")


def unstorable_value(error: Exception, *, where: str = "body") -> dict:
    """A DataError: the schemas refuse what they know the database refuses; this is the backstop
    (422). `where`: the input it came from, the body or (a read's) query string."""
    return error_body(f"{where}: a value the database cannot store ({first_line(error)})")


def concurrent_write(error: Exception) -> dict:
    return error_body(
        "the database ended this request to settle a conflict with a concurrent one "
        f"({first_line(error)}); nothing of it was kept: send it again"
    )


def internal(error: Exception) -> dict:
    """A bug's answer: never a traceback to the caller; the log has it."""
    return error_body(f"internal error ({type(error).__name__}); it has been logged")


def not_migrated(error: Exception) -> dict | None:
    """A ProgrammingError from a table or column the code has and the database lacks: the service
    runs before `migrate` did (a deploy's order). The answer is a 503 saying so (the log names the
    relation), not an internal error; None for any other ProgrammingError, which is a bug."""
    if not schema_behind(error):
        return None
    logger.error("the database is not migrated to this version of the code: %s", first_line(error))
    forget_migrated()  # so /api/v1/health says it too, rather than "ready" from an earlier probe
    return error_body("the database is not migrated to this version of the service; an operator must run "
                      "`python manage.py migrate`")


def conflict(error: Exception) -> dict:
    """An IntegrityError: two writers raced past the services' uniqueness check; the second hears
    409, naming `external_id` when that is what they raced for (its constraints say so by name)."""
    constraint = getattr(getattr(error.__cause__, "diag", None), "constraint_name", None) or ""
    if "external_id" in constraint:
        return field_error("external_id", "another request stored a row with this external_id just now")
    # The database's words name constraints and tables, which mean nothing to an agent: they go
    # to the log, and the answer says what happened and what to do.
    logger.warning("write conflict: %s", first_line(error))
    return error_body("conflicts with a change another request made at the same moment; nothing was written, "
                      "try again")
