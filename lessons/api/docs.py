"""The API's interactive docs (`/api/v1/docs`) and its OpenAPI document, made usable by staff.

Staff signed in to the admin call the API with their session and must name a team (`X-Team`, see
lessons.api.auth). The stock Swagger page had nowhere to type it and the contract did not say so:
every call from the docs answered 400. Here

- the docs page has a team picker for staff (every team, evaluation teams last; none for an account
  with no permission on lessons or memories, which the API refuses); the page's script sends the
  chosen slug as `X-Team` with each request it makes;
- the OpenAPI document declares `X-Team` as a security scheme that goes with the session cookie,
  and the 400 that asks for it on every operation behind a key;
- the search body has an example that answers 200 (Swagger's own, built from the schema, sent
  `since` equal to `until` and got a 422).
"""

import json
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from ninja import NinjaAPI
from ninja.openapi.docs import Swagger, _csrf_needed

from lessons.api.auth import TEAM_HEADER, TEAM_QUERY_PARAMETER
from lessons.services.api_keys import api_key_permissions
from lessons.selectors.admin_search import admin_teams, evaluation_team_q

STAFF_TEAM_SCHEME = "StaffTeam"
SESSION_SCHEME = "StaffSessionAuth"
TEAM_CHOICE_RESPONSE = {
    "description": (
        f"Staff signed in to the admin named no team: choose one with the `{TEAM_HEADER}` header or the "
        f"`?{TEAM_QUERY_PARAMETER}=` query parameter (the docs page has a picker). Also: a body that is not JSON."
    ),
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}},
}
SEARCH_EXAMPLE = {
    "query": "database security for multi-tenant apps",
    "kind": "lessons",
    "mode": "hybrid",
    "limit": 5,
    "filters": {"statuses": ["confirmed"]},
    "explain": True,
}


def _may_use_the_api(user) -> bool:
    """Whether any route answers this staff account: each needs a permission on lessons or
    memories (lessons.api.permissions); without one, the team picker would only list every
    team's slug to an account the API refuses."""
    return any(user.has_perm(permission) for permission in api_key_permissions())


class StaffSwagger(Swagger):
    """Django-ninja's Swagger page (local static files, no CDN) plus the team picker for staff."""

    template = "api/swagger.html"

    def render_page(self, request: HttpRequest, api: NinjaAPI, **kwargs: Any) -> HttpResponse:
        self.settings["url"] = self.get_openapi_url(api, kwargs)
        user = getattr(request, "user", None)
        teams = []
        if user is not None and user.is_active and user.is_staff and _may_use_the_api(user):
            curated = [team.slug for team in admin_teams(include_evaluation=False)]
            evaluation = [team.slug for team in admin_teams(include_evaluation=True).filter(evaluation_team_q(prefix=""))]
            teams = curated + evaluation
        context = {
            "swagger_settings": json.dumps(self.settings, indent=1),
            "api": api,
            "add_csrf": _csrf_needed(api),
            "staff_teams": teams,
            # Preselected until the curator picks another: the demo team, else the first curated one.
            "initial_team": "demo" if "demo" in teams else (teams[0] if teams and not teams[0].startswith("eval-") else ""),
            "team_header": TEAM_HEADER,
        }
        # Always the local page: ninja's own `render_template` would pick its CDN page, as ninja is
        # not an installed app (settings list its templates and static files instead).
        return render(request, self.template, context)


class MemoryStoreAPI(NinjaAPI):
    """The project's NinjaAPI, whose OpenAPI document tells staff how to name their team.

    The document is built once per path prefix: the routes do not change while the process runs,
    and building it took most of a second on this machine for every load of the docs page."""

    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        cache = self.__dict__.setdefault("_openapi_cache", {})
        key = (path_prefix, tuple(sorted((path_params or {}).items())))
        if key not in cache:
            cache[key] = self._staff_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        return cache[key]

    def _staff_openapi_schema(self, *, path_prefix, path_params):
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        schemes = schema.setdefault("components", {}).setdefault("securitySchemes", {})
        if SESSION_SCHEME not in schemes:
            return schema
        schemes[STAFF_TEAM_SCHEME] = {
            "type": "apiKey",
            "in": "header",
            "name": TEAM_HEADER,
            "description": (
                f"Staff signed in to the admin: the slug of the team to act for (or `?{TEAM_QUERY_PARAMETER}=`). "
                "Goes with the admin's session cookie; ignored with an API key, whose team it is."
            ),
        }
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                security = operation.get("security")
                if not security:
                    continue  # open endpoints (health, tools)
                operation["security"] = [
                    {**requirement, STAFF_TEAM_SCHEME: []} if SESSION_SCHEME in requirement else requirement
                    for requirement in security
                ]
                responses = operation.setdefault("responses", {})
                # One 400 for both causes: a staff session naming no team, and (operations with a
                # body) a body that is not JSON, which ninja declared as a plain "Bad Request".
                responses.pop("400", None)
                responses[400] = TEAM_CHOICE_RESPONSE
        return schema
