"""An endpoint's query string holds only the parameters it takes: a misspelt one (`limt=2`) was
ignored, and the endpoint answered with the default (15 lessons, a recency fallback) where the MCP
tool refused the same argument by name. The query-string schemas cannot forbid extra keys
themselves (a list's `limit` and `offset` belong to its pagination, `team` to the auth), so each
GET endpoint names what it takes here, and every write takes none but `team` (its input is the
JSON body; `PATCH /lessons/1?confidence=0.1` answered 200 and changed nothing).

A parameter that takes one value (`text`, `limit`, `external_id`...) given twice kept the last one
without a word (`text=cache&text=redis` was `text=redis`): it is refused naming it. Parameters
that name a set of values (declared as lists: `status`, `tag`...) take repeats, any of them."""

import functools
import types
import typing

from ninja.errors import ValidationError as NinjaValidationError

from lessons.api.auth import TEAM_QUERY_PARAMETER
from lessons.api.request_body import takes_body


def takes_query(*schemas, body: bool = True):
    """Refuse (422, naming each) query parameters that none of `schemas` declares. `body`: whether
    the endpoint reads a JSON body, where a write's fields belong."""
    taken = [name for schema in schemas for name in schema.model_fields]
    allowed = {TEAM_QUERY_PARAMETER, *taken}
    repeatable = {
        name for schema in schemas for name, field in schema.model_fields.items() if _is_list(field.annotation)
    }

    def decorate(view):
        @functools.wraps(view)
        def checked(request, *args, **kwargs):
            unknown = sorted(set(request.GET) - allowed)
            # "it takes " and nothing after it, where an endpoint takes no parameter
            if taken:
                takes = f"it takes {', '.join(taken)}"
            elif request.method in ("GET", "HEAD") or not body:
                takes = "it takes no query parameters"
            else:  # an agent that put a field in the URL: it was ignored, and a PATCH changed nothing
                takes = "it takes no query parameters; send the fields in the JSON body"
            message = f"not a parameter of {request.path}; {takes}"
            problems = [{"loc": ("query", name), "msg": message, "type": "extra_forbidden"} for name in unknown]
            for name in sorted((set(request.GET) & allowed) - repeatable):
                if (times := len(request.GET.getlist(name))) > 1:
                    problems.append({"loc": ("query", name), "msg": f"given {times} times; it takes one value",
                                     "type": "repeated"})
            if problems:
                raise NinjaValidationError(problems)
            return view(request, *args, **kwargs)

        return checked

    return decorate


def _is_list(annotation) -> bool:
    """A list, also inside Optional or Annotated: the parameter names a set of values."""
    origin = typing.get_origin(annotation)
    if origin is list:
        return True
    if origin is typing.Annotated:
        return _is_list(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_is_list(argument) for argument in typing.get_args(annotation))
    return False


def writes_take_no_query(view):
    """For every operation of the API (`NinjaAPI.add_decorator`): a write (`POST`, `PATCH`, `DELETE`)
    refuses any query parameter but `team`, so a write endpoint added later cannot forget to."""
    checked = takes_query(body=takes_body(view))(view)

    @functools.wraps(view)
    def route(request, *args, **kwargs):
        handler = view if request.method in ("GET", "HEAD") else checked
        return handler(request, *args, **kwargs)

    return route
