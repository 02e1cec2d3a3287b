from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from lessons.models import ApiKey
from lessons.services.api_keys import api_key_authenticate, api_key_digest

pytestmark = pytest.mark.django_db


def test_prints_the_key_once_alone_on_the_last_line(team):
    out = StringIO()
    call_command("create_api_key", "--team", "acme", "--name", "coding assistant", stdout=out)
    lines = out.getvalue().rstrip("\n").split("\n")
    raw_key = lines[-1]
    assert raw_key == raw_key.strip() and " " not in raw_key
    assert raw_key not in "\n".join(lines[:-1])  # shown once
    stored = ApiKey.objects.get()
    assert (stored.team, stored.name) == (team, "coding assistant")
    assert stored.key_hash == api_key_digest(raw_key)
    assert stored.prefix in lines[0]
    assert api_key_authenticate(raw_key=raw_key).team == team


@pytest.mark.parametrize(
    "arguments, message",
    [(["--team", "nope", "--name", "x"], "--team"), (["--team", "acme", "--name", "  "], "--name")],
)
def test_bad_arguments_are_a_command_error(team, arguments, message):
    with pytest.raises(CommandError, match=message):
        call_command("create_api_key", *arguments, stdout=StringIO())
    assert not ApiKey.objects.exists()


def test_mcp_command_needs_exactly_one_way_to_choose_the_team(team, monkeypatch):
    monkeypatch.delenv("MEMORY_STORE_API_KEY", raising=False)
    with pytest.raises(CommandError, match="exactly one"):
        call_command("mcp")
    with pytest.raises(CommandError, match="exactly one"):
        call_command("mcp", "--team", "acme", "--api-key", "msk_x")
    with pytest.raises(CommandError, match="--team: no team"):
        call_command("mcp", "--team", "nope")
    with pytest.raises(CommandError, match="--api-key: unknown or revoked"):
        call_command("mcp", "--api-key", "msk_not_a_real_key")
