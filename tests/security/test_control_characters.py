"""A NUL or another control character in a credential or a team selector: PostgreSQL cannot
store a NUL, and the answer was `422 "query: a value the database cannot store"`, blaming a
query string the request may not even have."""

import pytest
from django.test import Client

from lessons.selectors.teams import TeamError, team_named
from lessons.services.api_keys import api_key_create
from tests.api.conftest import JsonClient

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("key", ["msk_\x00abc", "msk_1a2b\x00c3d_rest", "msk_1a2b3c4d_\x00", "msk_\x1b[2J"])
def test_a_key_with_a_control_character_is_the_wrong_keys_401(team, key):
    api_key_create(team=team, name="agent")
    response = JsonClient(key).get("/lessons")
    assert response.status_code == 401, response.content
    assert response.json() == JsonClient("msk_wrong").get("/lessons").json()


@pytest.fixture
def staff(admin_user):
    browser = Client()
    browser.force_login(admin_user)
    return browser


@pytest.mark.parametrize("selector, field", [
    ({"query": {"team": "\x00"}}, "?team="),
    ({"query": {"team": "ac\x00me"}}, "?team="),
    ({"headers": {"X-Team": "acme\x00"}}, "X-Team"),
])
def test_a_team_selector_with_a_nul_is_refused_naming_the_selector(staff, team, selector, field):
    response = staff.get("/api/v1/lessons", selector.get("query", {}), headers=selector.get("headers", {}))
    assert response.status_code in (400, 404), response.content
    body = response.json()
    assert [error["field"] for error in body["errors"]] == [field]
    assert body["detail"].startswith(f"{field}: ") and "database" not in body["detail"]


def test_team_named_refuses_a_control_character_by_the_option(db):
    with pytest.raises(TeamError, match=r"^--team: .*control character"):
        team_named(slug="ac\x00me")
