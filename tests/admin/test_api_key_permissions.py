"""Creating an API key needs every permission the key carries (lessons.admin.api_keys,
lessons.services.api_keys.api_key_permissions_missing).

Before: a staff user with only view_apikey and add_apikey, whom the session API refused every lesson
route, added a key in the admin and, with it, listed and deleted any team's lessons: a key answers
for its whole team with every action (lessons.api.permissions checks staff sessions only)."""

import html
import re

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from lessons.models import ApiKey, Lesson, Team
from lessons.services.api_keys import api_key_authenticate, api_key_permissions, api_key_permissions_missing
from tests.factories import LessonFactory, TeamFactory

pytestmark = pytest.mark.django_db

ADD = reverse("admin:lessons_apikey_add")
KEY_DATA = [f"{action}_{model}" for model in ("lesson", "memory") for action in ("view", "add", "change", "delete")]


def curator(client, name: str, *codenames: str):
    user = User.objects.create_user(name, password="x", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="lessons", codename__in=codenames))
    client.force_login(user)
    return client


def page_text(response) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def test_a_key_carries_view_add_change_and_delete_on_lessons_and_memories():
    # what the API lets a key do (every route of both kinds; lessons.api.permissions skips keys)
    assert sorted(api_key_permissions()) == sorted(f"lessons.{codename}" for codename in KEY_DATA)


def test_the_refused_curator_of_the_report_gets_no_key(client, team):
    keyman = curator(client, "keyman", "view_apikey", "add_apikey")
    lesson = LessonFactory(team=team)
    # the session API refuses them the lessons ...
    assert keyman.get("/api/v1/lessons", headers={"X-Team": team.slug}).status_code == 403

    page = keyman.get(ADD)
    assert page.status_code == 403
    text = page_text(page)
    assert "may add API keys but lacks 8 of the permissions a key carries" in text
    assert "reads, adds, changes and deletes that team's lessons and memories" in text
    for codename in KEY_DATA:
        assert f"lessons.{codename}" in text
    assert "Can delete lesson" in text and "Can view memory" in text
    assert 'name="name"' not in page.content.decode()  # no form to fill in

    # ... and so may not make a key that would list and delete them
    posted = keyman.post(ADD, {"team": team.pk, "name": "side door"})
    assert posted.status_code == 403
    assert not ApiKey.objects.exists()
    assert not get_messages(posted.wsgi_request)  # no key shown
    assert Lesson.objects.filter(pk=lesson.pk).exists()


def test_the_page_names_only_the_permissions_missing(client, team):
    almost = curator(client, "almost", "view_apikey", "add_apikey", *[c for c in KEY_DATA if c != "delete_memory"])
    page = almost.get(ADD)
    assert page.status_code == 403
    assert [code for code, _ in page.context["missing"]] == ["lessons.delete_memory"]
    assert "lacks 1 of the permissions a key carries" in page_text(page)
    assert almost.post(ADD, {"team": team.pk, "name": "ci"}).status_code == 403
    assert not ApiKey.objects.exists()


def test_a_curator_with_every_data_permission_creates_a_key(client, team):
    keeper = curator(client, "keeper", "view_apikey", "add_apikey", *KEY_DATA)
    assert api_key_permissions_missing(user=User.objects.get(username="keeper")) == []
    assert keeper.get(ADD).status_code == 200
    response = keeper.post(ADD, {"team": team.pk, "name": "ci bot"}, follow=True)
    assert response.status_code == 200
    shown = " ".join(str(message) for message in get_messages(response.wsgi_request))
    raw_key = re.search(r"msk_[0-9a-f]{8}_[\w-]+", shown).group(0)
    assert api_key_authenticate(raw_key=raw_key).team == team


def test_superusers_are_unaffected(admin_client, admin_user, team):
    assert api_key_permissions_missing(user=admin_user) == []
    admin_client.post(ADD, {"team": team.pk, "name": "root's bot"})
    assert ApiKey.objects.get().name == "root's bot"


def test_without_add_permission_the_page_stays_djangos_denial(client):
    viewer = curator(client, "viewer", "view_apikey", *KEY_DATA)
    page = viewer.get(ADD)
    assert page.status_code == 403 and "missing" not in (page.context or {})


def test_the_command_is_for_operators_and_checks_no_account(team, capsys):
    # an operator who runs commands has the database anyway; the command names no account to check
    call_command("create_api_key", "--team", team.slug, "--name", "ops")
    raw_key = capsys.readouterr().out.strip().splitlines()[-1]
    assert Client(headers={"Authorization": f"Bearer {raw_key}"}).get("/api/v1/lessons").status_code == 200


def test_the_add_form_offers_curated_teams_by_name_and_slug(admin_client, team):
    TeamFactory(slug="eval-scifact", name="SciFact benchmark")
    page = admin_client.get(ADD).content.decode()
    select = re.search(r'<select name="team"[^>]*>(.*?)</select>', page, re.S).group(1)
    offered = [html.unescape(text) for text in re.findall(r"<option[^>]*>([^<]*)</option>", select)]
    assert [label for label in offered if label != "---------"] == ["Acme (acme)"]
    evaluation = Team.objects.get(slug="eval-scifact")
    refused = admin_client.post(ADD, {"team": evaluation.pk, "name": "bench"})
    assert refused.status_code == 200 and "team" in refused.context["adminform"].form.errors
    assert not ApiKey.objects.exists()
