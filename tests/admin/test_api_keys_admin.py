import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.messages import get_messages

from lessons.models import ApiKey
from lessons.services.api_keys import api_key_authenticate, api_key_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-not-used")
    client.force_login(user)
    return client


def test_adding_a_key_shows_it_once(admin_client, team):
    response = admin_client.post("/admin/lessons/apikey/add/", {"team": team.pk, "name": "ci bot"}, follow=True)
    assert response.status_code == 200
    shown = " ".join(str(message) for message in get_messages(response.wsgi_request))
    raw_key = re.search(r"msk_[0-9a-f]{8}_[\w-]+", shown).group(0)
    api_key = ApiKey.objects.get()
    assert api_key.name == "ci bot"
    assert api_key_authenticate(raw_key=raw_key).pk == api_key.pk
    detail = admin_client.get(f"/admin/lessons/apikey/{api_key.pk}/change/").content.decode()
    assert raw_key not in detail and api_key.key_hash not in detail


def test_revoke_action(admin_client, team):
    api_key, raw_key = api_key_create(team=team, name="old bot")
    admin_client.post(
        "/admin/lessons/apikey/", {"action": "revoke_selected", "_selected_action": [api_key.pk]}, follow=True
    )
    assert api_key_authenticate(raw_key=raw_key) is None


def test_revoking_keys_that_are_revoked_already_says_so(admin_client, team):
    from django.contrib.messages import get_messages as messages_of

    old, _ = api_key_create(team=team, name="old bot")
    live, _ = api_key_create(team=team, name="live bot")
    admin_client.post("/admin/lessons/apikey/", {"action": "revoke_selected", "_selected_action": [old.pk]})
    both = admin_client.post("/admin/lessons/apikey/", {"action": "revoke_selected",
                                                         "_selected_action": [old.pk, live.pk]}, follow=True)
    assert [str(m) for m in messages_of(both.wsgi_request)][-1] == (
        "1 key(s) revoked. 1 selected key(s) were revoked already.")
    again = admin_client.post("/admin/lessons/apikey/", {"action": "revoke_selected",
                                                          "_selected_action": [old.pk, live.pk]}, follow=True)
    assert [str(m) for m in messages_of(again.wsgi_request)][-1] == (
        "Every selected key was revoked already: nothing changed.")
