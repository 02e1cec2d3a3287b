"""Who is calling, and for which team.

Agents send `Authorization: Bearer <key>`; the key's team is the only team they can see. Staff
signed in to the admin may use the API from the same browser for any team they name with the
`X-Team: <slug>` header or a `?team=<slug>` query parameter. Handlers read `request.auth.team`.
"""

from dataclasses import dataclass

from django.conf import settings
from django.http import HttpRequest
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


class ApiKeyAuth(HttpBearer):
    """`Authorization: Bearer <key>`: an active key, stored hashed, names the team."""

    def authenticate(self, request: HttpRequest, token: str) -> Caller | None:
        api_key = api_key_authenticate(raw_key=token.strip())
        if api_key is None:
            return None
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
        header = request.headers.get(TEAM_HEADER)
        slug = (header or request.GET.get(TEAM_QUERY_PARAMETER) or "").strip()
        named_by = TEAM_HEADER if header else f"?{TEAM_QUERY_PARAMETER}="  # the error names what was sent
        if not slug:
            raise TeamChoiceError(
                f"{TEAM_HEADER}: staff using the API must choose a team with the {TEAM_HEADER} header "
                f"or the ?{TEAM_QUERY_PARAMETER}= query parameter"
            )
        try:
            team = team_named(slug=slug, option=named_by)
        except TeamError as error:
            raise TeamChoiceError(str(error), status=404, field=named_by) from error
        return Caller(team=team, user_id=request.user.pk)


api_auth = [ApiKeyAuth(), StaffSessionAuth()]
