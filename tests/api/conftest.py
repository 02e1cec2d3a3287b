import json

import pytest
from django.test import Client

from lessons.services.api_keys import api_key_create

API = "/api/v1"


class JsonClient:
    """A test client that speaks JSON and sends one team's API key."""

    def __init__(self, raw_key: str | None = None, **client_options):
        headers = {"Authorization": f"Bearer {raw_key}"} if raw_key else {}
        self.client = Client(headers=headers, **client_options)

    def _send(self, method, path, body=None, **extra):
        send = getattr(self.client, method)
        if body is None:
            return send(API + path, **extra)
        data = body if isinstance(body, (str, bytes)) else json.dumps(body)
        return send(API + path, data=data, content_type="application/json", **extra)

    def get(self, path, params=None, **extra):
        return self.client.get(API + path, params or {}, **extra)

    def post(self, path, body=None, **extra):
        return self._send("post", path, body if body is not None else {}, **extra)

    def patch(self, path, body, **extra):
        return self._send("patch", path, body, **extra)

    def delete(self, path, **extra):
        return self._send("delete", path, **extra)


@pytest.fixture
def team_key(team):
    return api_key_create(team=team, name="agent")


@pytest.fixture
def api(team_key):
    return JsonClient(team_key[1])


@pytest.fixture
def other_api(other_team):
    return JsonClient(api_key_create(team=other_team, name="other agent")[1])


@pytest.fixture
def anonymous(db):
    return JsonClient()
