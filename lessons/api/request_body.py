"""A write that takes no body refuses one: `POST /lessons/5/accept` with `{"status": "rejected"}`
answered 200 and confirmed the lesson, and `DELETE` or a version's restore ignored whatever was
sent, where every other endpoint refuses a field it does not take by name. No body, or `{}` (what
some HTTP clients send on every POST), is what these endpoints take."""

import functools
import inspect

import pydantic
from django.core.exceptions import SuspiciousOperation
from django.http.multipartparser import MultiPartParserError
from ninja.errors import ValidationError as NinjaValidationError

from lessons import strict_json


def takes_body(view) -> bool:
    """Whether ninja reads a JSON body for `view`: a parameter declared as a schema with no
    default (no `Query(...)`, path or header marker) is ninja's body."""
    return any(
        parameter.default is inspect.Parameter.empty
        and inspect.isclass(parameter.annotation)
        and issubclass(parameter.annotation, pydantic.BaseModel)
        for parameter in inspect.signature(view).parameters.values()
    )


def _body_problems(request) -> list[dict]:
    if not request.body.strip() or _empty_form(request):
        return []
    operation = f"{request.method} {request.path}"
    try:
        body = strict_json.loads(request.body)
    except (ValueError, RecursionError):
        body = None  # not JSON, or a key named twice: either way, not a body this operation reads
    else:
        if body == {}:
            return []
        if isinstance(body, dict):
            message = f"not a field of {operation}; it takes no body"
            return [{"loc": ("body", name), "msg": message, "type": "extra_forbidden"} for name in body]
    return [{"loc": ("body",), "msg": f"{operation} takes no body; send none (or {{}})", "type": "extra_forbidden"}]


def _empty_form(request) -> bool:
    """A form with no fields: what some clients (Django's test client among them) send for a POST
    given no data. A form Django cannot read (multipart without a boundary: a 500) is not an empty one."""
    form = request.content_type in ("multipart/form-data", "application/x-www-form-urlencoded")
    try:
        return form and not request.POST and not request.FILES
    except (MultiPartParserError, SuspiciousOperation):
        return False


def writes_without_input_take_no_body(view):
    """For every operation of the API (`NinjaAPI.add_decorator`): a write whose view reads no body
    refuses a non-empty one (422, naming each field sent), so a write endpoint added later cannot
    silently ignore what it is sent."""
    if takes_body(view):
        return view

    @functools.wraps(view)
    def route(request, *args, **kwargs):
        if request.method not in ("GET", "HEAD") and (problems := _body_problems(request)):
            raise NinjaValidationError(problems)
        return view(request, *args, **kwargs)

    return route
