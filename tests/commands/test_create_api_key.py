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
    monkeypatch.setenv("MEMORY_STORE_API_KEY", "msk_not_a_real_key")  # named where it came from
    with pytest.raises(CommandError, match="^MEMORY_STORE_API_KEY: unknown or revoked key$"):
        call_command("mcp")
    # --team passed over the key in the environment without a word, and served the team
    with pytest.raises(CommandError, match="exactly one of --team SLUG or a key: MEMORY_STORE_API_KEY is set too"):
        call_command("mcp", "--team", "acme")


def test_an_unknown_team_says_how_to_create_it(db):
    with pytest.raises(CommandError, match="--create-team"):
        call_command("create_api_key", "--team", "acme", "--name", "curl", stdout=StringIO())
    assert not ApiKey.objects.exists()


def test_create_team_flag_creates_the_team_and_the_key(db):
    from lessons.models import Team

    out = StringIO()
    call_command("create_api_key", "--team", "acme", "--name", "curl", "--create-team", stdout=out)
    raw_key = out.getvalue().rstrip("\n").split("\n")[-1]
    assert api_key_authenticate(raw_key=raw_key).team == Team.objects.get(slug="acme")
    again = StringIO()  # the flag is harmless once the team exists
    call_command("create_api_key", "--team", "acme", "--name", "curl 2", "--create-team", stdout=again)
    assert Team.objects.count() == 1 and ApiKey.objects.count() == 2


def test_create_team_command_validates_before_it_writes(db):
    from lessons.models import Team

    out = StringIO()
    call_command("create_team", "acme", "--name", "Acme Corp", stdout=out)
    assert "Created team 'acme'" in out.getvalue()
    assert Team.objects.get().name == "Acme Corp"
    with pytest.raises(CommandError, match="slug: a team with slug 'acme' already exists"):
        call_command("create_team", "acme", stdout=StringIO())
    with pytest.raises(CommandError, match="slug: Ensure this value has at most 100 characters"):
        call_command("create_team", "a" * 150, stdout=StringIO())
    with pytest.raises(CommandError, match="slug: 'not a slug' is not a usable slug"):
        call_command("create_team", "not a slug", stdout=StringIO())
    # "letters, numbers, underscores or hyphens", Django's words, said that "ünï" was letters
    with pytest.raises(CommandError) as refused:
        call_command("create_team", "ünï", stdout=StringIO())
    assert str(refused.value) == (
        "slug: 'ünï' is not a usable slug; use only lowercase ASCII letters (a-z), digits, hyphens and "
        "underscores, at most 100 characters (e.g. acme)"
    )
    call_command("create_team", "my_team-2", stdout=StringIO())  # what the message allows is allowed
    assert Team.objects.count() == 2
