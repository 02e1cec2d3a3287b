"""Who is calling, and for which team.

Agents send `Authorization: Bearer <key>`; the key's team is the only team they can see. Staff
signed in to the admin may use the API from the same browser for any team they name with the
`X-Team: <slug>` header or a `?team=<slug>` query parameter. Handlers read `request.auth.team`.

A key that is sent decides: an unknown or revoked one is a 401 also when the browser has a staff
session (the session answered instead, for whatever team it named), and a team selector naming
another team than the key's is refused (the header was ignored without a word). Two selectors
that name different teams are refused too (the header used to win over `?team=` silently).
"""

from dataclasses import dataclass

from django.conf import settings
from django.http import HttpRequest
from ninja.errors import AuthenticationError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.security import APIKeyCookie, HttpBearer

from lessons.api.errors import TeamChoiceError
from lessons.models import ApiKey, Team
from lessons.selectors.teams import TeamError, team_named
from lessons.services.api_keys import api_key_authenticate

TEAM_HEADER = "X-Team"
TEAM_QUERY_PARAMETER = "team"


@dataclass(frozen=True)
class Caller:
    team: Team
    api_key: ApiKey | None = None
    user_id: int | None = None


def _location(option: str) -> tuple[str, str]:
    # as ninja locates a parameter; the 422 names the selector as the team errors do (`X-Team`, `?team=`)
    return ("header" if option == TEAM_HEADER else "query", option)


def team_selectors(request: HttpRequest) -> list[tuple[str, str]]:
    """The teams the request names, as (how: `X-Team` or `?team=`, slug), blank ones left out. Two
    different slugs are a 422 naming each selector: the answer must not pick one of them."""
    header = (request.headers.get(TEAM_HEADER) or "").strip()
    named = [(TEAM_HEADER, header)] if header else []
    named += [(f"?{TEAM_QUERY_PARAMETER}=", value.strip()) for value in request.GET.getlist(TEAM_QUERY_PARAMETER)
              if value.strip()]
    slugs = list(dict.fromkeys(slug for _, slug in named))
    if len(slugs) > 1:
        listed = " and ".join(f"{option} {slug!r}" for option, slug in named)
        message = f"the team is named twice, differently ({listed}); name one team"
        raise NinjaValidationError([
            {"loc": _location(option), "msg": message, "type": "team_conflict"}
            for option in dict.fromkeys(option for option, _ in named)
        ])
    return named


class ApiKeyAuth(HttpBearer):
    """`Authorization: Bearer <key>`: an active key, stored hashed, names the team."""

    def authenticate(self, request: HttpRequest, token: str) -> Caller | None:
        api_key = api_key_authenticate(raw_key=token.strip())
        if api_key is None:
            # Sent but unknown or revoked: a 401, not a fall-through to the browser's staff session.
            raise AuthenticationError()
        own = api_key.team.slug
        other = [(option, slug) for option, slug in team_selectors(request) if slug != own]
        if other:
            raise NinjaValidationError([
                {"loc": _location(option), "type": "team_conflict",
                 "msg": f"names team {slug!r}, but the API key sent is a key of team {own!r} and answers for "
                        f"that team only; leave {option} out, or send a key of team {slug!r}"}
                for option, slug in other
            ])
        return Caller(team=api_key.team, api_key=api_key)


class StaffSessionAuth(APIKeyCookie):
    """The admin's session cookie, for staff only; the team is chosen per request."""

    param_name = settings.SESSION_COOKIE_NAME

    def __call__(self, request: HttpRequest) -> Caller | None:
        user = getattr(request, "user", None)
        if user is None or not (user.is_authenticated and user.is_active and user.is_staff):
            # Not staff: answer "no" before the CSRF check, so an agent with a missing or wrong
            # key hears 401, not a puzzling CSRF failure.
            return None
        return super().__call__(request)  # checks CSRF on unsafe methods, then authenticate()

    def authenticate(self, request: HttpRequest, key: str | None) -> Caller | None:
        named = team_selectors(request)
        named_by, slug = named[0] if named else (TEAM_HEADER, "")  # the error names what was sent
        if not slug:
            raise TeamChoiceError(
                f"staff using the API must choose a team with the {TEAM_HEADER} header "
                f"or the ?{TEAM_QUERY_PARAMETER}= query parameter"
            )
        try:
            team = team_named(slug=slug, option=named_by)
        except TeamError as error:
            # team_named's words start with the option, which the answer names as the field already
            raise TeamChoiceError(str(error).removeprefix(f"{named_by}: "), status=404, field=named_by) from error
        return Caller(team=team, user_id=request.user.pk)


api_auth = [ApiKeyAuth(), StaffSessionAuth()]
