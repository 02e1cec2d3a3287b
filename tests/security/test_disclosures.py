"""What an answer must not tell: where the database is, a new API key in a cookie, and the team
slugs to staff the API refuses anyway."""

import json

import anyio
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.messages.storage.cookie import CookieStorage
from django.db import OperationalError, connection, connections
from django.http import HttpRequest
from django.test import Client
from mcp import Client as McpClient

from lessons.mcp_server import build_server
from lessons.services.api_keys import api_key_create
from tests.api.conftest import JsonClient

REFUSED = 'connection failed: connection to server at "127.0.0.1", port 1 failed: Connection refused'


@pytest.mark.django_db(transaction=True)
def test_a_database_outage_answers_503_without_the_servers_address(team, caplog):
    """The 503 quoted the driver: `connection to server at "127.0.0.1", port 1 failed`, to any
    caller, a key's or none; /health already kept it for the log."""
    _, raw_key = api_key_create(team=team, name="agent")
    real = {name: connection.settings_dict[name] for name in ("HOST", "PORT")}
    connection.close()
    connection.settings_dict.update(HOST="127.0.0.1", PORT="1")  # nothing listens there
    try:
        listing = JsonClient(raw_key).get("/lessons")
    finally:
        connection.close()
        connection.settings_dict.update(real)
    assert listing.status_code == 503
    detail = listing.json()["detail"]
    assert detail.startswith("the database is unavailable") and "log" in detail
    assert "127.0.0.1" not in listing.content.decode() and "port" not in detail
    logged = [record.getMessage() for record in caplog.records if record.name == "lessons.api"]
    assert any("127.0.0.1" in line for line in logged), logged  # the operator still learns where


@pytest.mark.django_db(transaction=True)
def test_an_mcp_tool_call_in_an_outage_does_not_name_the_server_either(team, monkeypatch):
    def refused(**fields):
        raise OperationalError(REFUSED)

    monkeypatch.setattr("lessons.api.operations.memory_services.memory_create", refused)

    async def main():
        try:
            async with McpClient(build_server(team=team), mode="legacy") as client:
                return await client.call_tool("store_memory", {"content": "Met Ana"})
        finally:
            await sync_to_async(connections.close_all, thread_sensitive=True)()

    result = anyio.run(main)
    detail = json.loads(result.content[0].text)["detail"]
    assert result.is_error and detail.startswith("the database is unavailable")
    assert "127.0.0.1" not in detail and "port" not in detail


def _cookie_texts(response) -> list[str]:
    """Every cookie's value, and the messages cookie's messages decoded (it is signed, not encrypted)."""
    texts = [morsel.value for morsel in response.cookies.values()]
    for morsel in response.cookies.values():
        decoded = CookieStorage(HttpRequest())._decode(morsel.value) if morsel.value else None
        texts += [str(message) for message in decoded or []]
    return texts


@pytest.mark.django_db
def test_a_new_api_key_is_shown_once_and_never_sent_in_a_cookie(admin_client, team):
    created = admin_client.post("/admin/lessons/apikey/add/", {"team": team.pk, "name": "ci bot"})
    assert created.status_code == 302
    shown = admin_client.get(created["Location"])
    raw_key = next(str(message).split(" is ")[1].split()[0] for message in shown.context["messages"])
    assert raw_key.startswith("msk_") and raw_key in shown.content.decode()
    for response in (created, shown):
        assert not any(raw_key in text for text in _cookie_texts(response)), response.cookies


def _staff(username: str, *permissions: str) -> Client:
    user = get_user_model().objects.create_user(username=username, password="x", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=permissions))
    browser = Client()
    browser.force_login(user)
    return browser


@pytest.mark.django_db
def test_the_docs_team_picker_lists_teams_only_to_staff_the_api_answers(team, other_team):
    """Staff without a permission on lessons or memories are refused by every route behind the
    session, but the docs page listed them every team's slug."""
    clerk = _staff("clerk")
    assert all(clerk.get(f"/api/v1/{kind}", headers={"X-Team": team.slug}).status_code == 403
               for kind in ("lessons", "memories"))
    page = clerk.get("/api/v1/docs").content.decode()
    assert 'id="staff-team"' not in page and team.slug not in page and other_team.slug not in page
    reader = _staff("reader", "view_memory").get("/api/v1/docs").content.decode()
    assert f'<option value="{team.slug}">' in reader and f'<option value="{other_team.slug}">' in reader
