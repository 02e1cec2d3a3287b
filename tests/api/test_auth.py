import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from lessons.models import ApiKey, Lesson
from lessons.services.api_keys import api_key_create, api_key_revoke
from tests.api.conftest import JsonClient
from tests.factories import LessonFactory

pytestmark = pytest.mark.django_db

PROTECTED = [
    ("get", "/lessons"),
    ("post", "/lessons"),
    ("get", "/memories"),
    ("post", "/search"),
    ("get", "/memories/friends"),
]


def _call(client, method, path):
    return client.post(path, {}) if method == "post" else client.get(path)


@pytest.mark.parametrize("method, path", PROTECTED)
def test_missing_key_is_401(anonymous, method, path):
    response = _call(anonymous, method, path)
    assert response.status_code == 401
    assert "Authorization: Bearer" in response.json()["detail"]
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'  # HTTP asks a 401 to name its scheme


@pytest.mark.parametrize("method, path", PROTECTED)
def test_wrong_key_is_401(team_key, method, path):
    raw_key = team_key[1]
    for wrong in (raw_key[:-1] + ("A" if raw_key[-1] != "A" else "B"), "msk_nothing", "not-a-key"):
        assert _call(JsonClient(wrong), method, path).status_code == 401


def test_revoked_key_is_401(team, team_key):
    api_key, raw_key = team_key
    client = JsonClient(raw_key)
    assert client.get("/lessons").status_code == 200
    api_key_revoke(api_key=api_key)
    assert client.get("/lessons").status_code == 401


def test_other_schemes_are_401(team_key):
    client = JsonClient()
    client.client.defaults["HTTP_AUTHORIZATION"] = f"Token {team_key[1]}"
    assert client.get("/lessons").status_code == 401


def test_key_use_is_recorded_and_only_the_hash_is_stored(team, team_key):
    api_key, raw_key = team_key
    assert api_key.last_used_at is None
    JsonClient(raw_key).get("/lessons")
    stored = ApiKey.objects.get(pk=api_key.pk)
    assert stored.last_used_at is not None
    assert raw_key not in {stored.key_hash, stored.prefix}
    assert raw_key.startswith(stored.prefix)


def test_health_and_tools_need_no_key(anonymous):
    assert anonymous.get("/tools").status_code == 200
    assert anonymous.get("/openapi.json").status_code == 200


def _staff_client(*, staff=True):
    user = get_user_model().objects.create_user("curator", password="pw-not-used", is_staff=staff)
    # what the admin's own curators need for these routes (tests/api/test_staff_permissions.py)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_lesson", "add_lesson"]))
    client = JsonClient()
    client.client.force_login(user)
    return client


def test_staff_session_may_choose_any_team(team, other_team):
    LessonFactory(team=team, title="Acme lesson")
    LessonFactory(team=other_team, title="Globex lesson")
    client = _staff_client()
    by_header = client.get("/lessons", HTTP_X_TEAM="globex").json()
    assert [item["title"] for item in by_header["items"]] == ["Globex lesson"]
    by_query = client.get("/lessons", {"team": "acme"}).json()
    assert [item["title"] for item in by_query["items"]] == ["Acme lesson"]
    created = client.post("/lessons", {"title": "Written by staff"}, HTTP_X_TEAM="globex")
    assert created.status_code == 201


def test_staff_must_name_an_existing_team(team):
    client = _staff_client()
    missing = client.get("/lessons")
    assert missing.status_code == 400
    assert missing.json()["errors"][0]["field"] == "X-Team"
    assert client.get("/lessons", HTTP_X_TEAM="nope").status_code == 404
    other_case = client.get("/lessons", HTTP_X_TEAM="ACME")
    assert other_case.status_code == 404
    assert other_case.json()["detail"] == "X-Team: no team with slug 'ACME'; did you mean 'acme'?"
    by_parameter = client.get("/lessons", {"team": "ACME"})  # named by what the caller sent
    assert by_parameter.json()["detail"] == "?team=: no team with slug 'ACME'; did you mean 'acme'?"
    assert by_parameter.json()["errors"][0]["field"] == "?team="


def test_a_session_without_staff_rights_is_401(team):
    client = _staff_client(staff=False)
    assert client.get("/lessons", HTTP_X_TEAM="acme").status_code == 401


def test_a_key_answers_for_its_own_team_and_refuses_a_selector_naming_another(team, other_team):
    """A key with `X-Team` or `?team=` naming another team answered for the key's team, the
    selector ignored without a word; naming the key's own team is fine."""
    LessonFactory(team=other_team, title="Globex lesson")
    agent = JsonClient(api_key_create(team=team, name="agent")[1])
    refused = agent.get("/lessons", {"team": "globex"}, HTTP_X_TEAM="globex")
    assert refused.status_code == 422
    assert [error["field"] for error in refused.json()["errors"]] == ["X-Team", "?team="]
    assert refused.json()["errors"][0]["message"] == (
        "names team 'globex', but the API key sent is a key of team 'acme' and answers for that team only; "
        "leave X-Team out, or send a key of team 'globex'"
    )
    assert agent.post("/lessons", {"title": "Where?"}, HTTP_X_TEAM="globex").status_code == 422
    assert not Lesson.objects.filter(title="Where?").exists()
    assert agent.get("/lessons", {"team": "acme"}, HTTP_X_TEAM="acme").json()["count"] == 0


def test_an_invalid_key_sent_with_a_staff_session_is_401_not_the_session(team):
    """`Authorization: Bearer msk_bogus` plus a staff session answered 200 for the session's team."""
    client = _staff_client()
    client.client.defaults["HTTP_AUTHORIZATION"] = "Bearer msk_bogus"
    response = client.get("/lessons", HTTP_X_TEAM="acme")
    assert response.status_code == 401
    del client.client.defaults["HTTP_AUTHORIZATION"]
    assert client.get("/lessons", HTTP_X_TEAM="acme").status_code == 200  # the session alone still works


def test_two_team_selectors_that_disagree_are_refused_naming_both(team, other_team):
    client = _staff_client()
    response = client.get("/lessons", {"team": "acme"}, HTTP_X_TEAM="globex")
    assert response.status_code == 422
    body = response.json()
    assert [error["field"] for error in body["errors"]] == ["X-Team", "?team="]
    assert body["errors"][0]["message"] == (
        "the team is named twice, differently (X-Team 'globex' and ?team= 'acme'); name one team"
    )
    twice = client.get("/lessons?team=acme&team=globex")
    assert twice.status_code == 422 and "?team= 'acme' and ?team= 'globex'" in twice.json()["detail"]
    assert client.get("/lessons", {"team": "acme"}, HTTP_X_TEAM="acme").status_code == 200  # the same team


def test_a_session_with_another_teams_key_answers_for_the_key_and_refuses_a_header_naming_another(team, other_team):
    LessonFactory(team=other_team, title="Globex lesson")
    client = _staff_client()
    client.client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {api_key_create(team=other_team, name='agent')[1]}"
    assert client.get("/lessons", HTTP_X_TEAM="acme").status_code == 422
    assert client.get("/lessons").json()["items"][0]["title"] == "Globex lesson"


def test_staff_writes_need_the_csrf_token(team):
    user = get_user_model().objects.create_user("curator", password="pw-not-used", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_lesson", "add_lesson"]))
    client = JsonClient(enforce_csrf_checks=True)
    client.client.force_login(user)
    assert client.get("/lessons", HTTP_X_TEAM="acme").status_code == 200
    assert client.post("/lessons", {"title": "Cross-site"}, HTTP_X_TEAM="acme").status_code == 403
