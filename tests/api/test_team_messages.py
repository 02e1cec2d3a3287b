"""What the team selectors' refusals say: the field once (the answer is `field: message`, and the
message does not repeat it), and team names quoted once."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from lessons.services.api_keys import api_key_create
from tests.api.conftest import JsonClient

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(team):
    user = get_user_model().objects.create_user("curator", password="pw-not-used", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename="view_lesson"))
    client = JsonClient()
    client.client.force_login(user)
    return client


@pytest.mark.parametrize("named_by, request_options", [
    ("X-Team", {"HTTP_X_TEAM": "nosuch"}),
    ("?team=", {"params": {"team": "nosuch"}}),
])
def test_an_unknown_team_is_named_once(staff, named_by, request_options):
    response = staff.get("/lessons", **request_options)
    assert response.status_code == 404
    assert response.json() == {
        "detail": f"{named_by}: no team with slug 'nosuch'",  # was "X-Team: X-Team: ..." read as field: message
        "errors": [{"field": named_by, "message": "no team with slug 'nosuch'"}],
    }


def test_no_team_named_is_said_once(staff):
    response = staff.get("/lessons")
    assert response.status_code == 400
    message = "staff using the API must choose a team with the X-Team header or the ?team= query parameter"
    assert response.json() == {"detail": f"X-Team: {message}", "errors": [{"field": "X-Team", "message": message}]}


def test_a_key_of_another_team_names_both_teams_quoted_once(team, other_team):
    agent = JsonClient(api_key_create(team=team, name="agent")[1])
    response = agent.get("/lessons", HTTP_X_TEAM="globex")
    assert response.status_code == 422
    message = ("names team 'globex', but the API key sent is a key of team 'acme' and answers for that team "
               "only; leave X-Team out, or send a key of team 'globex'")  # was "team 'acme''s"
    assert response.json() == {"detail": f"X-Team: {message}", "errors": [{"field": "X-Team", "message": message}]}
