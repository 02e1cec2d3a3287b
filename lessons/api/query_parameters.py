"""A GET endpoint's query string holds only the parameters it takes: a misspelt one (`limt=2`) was
ignored, and the endpoint answered with the default (15 lessons, a recency fallback) where the MCP
tool refused the same argument by name. The query-string schemas cannot forbid extra keys
themselves (a list's `limit` and `offset` belong to its pagination, `team` to the auth), so each
GET endpoint names what it takes here."""

import functools

from ninja.errors import ValidationError as NinjaValidationError

from lessons.api.auth import TEAM_QUERY_PARAMETER


def takes_query(*schemas):
    """Refuse (422, naming each) query parameters that none of `schemas` declares."""
    taken = [name for schema in schemas for name in schema.model_fields]
    allowed = {TEAM_QUERY_PARAMETER, *taken}

    def decorate(view):
        @functools.wraps(view)
        def checked(request, *args, **kwargs):
            unknown = sorted(set(request.GET) - allowed)
            if unknown:
                message = f"not a parameter of {request.path}; it takes {', '.join(taken)}"
                raise NinjaValidationError(
                    [{"loc": ("query", name), "msg": message, "type": "extra_forbidden"} for name in unknown]
                )
            return view(request, *args, **kwargs)

        return checked

    return decorate
