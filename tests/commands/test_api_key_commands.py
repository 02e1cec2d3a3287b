"""`list_api_keys` and `revoke_api_key`: an operator without the admin can see who holds keys
and revoke a leaked one (only the admin could)."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from lessons.models import ApiKey
from lessons.services.api_keys import api_key_authenticate, api_key_create, api_key_digest

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_list_shows_every_key_by_prefix_never_the_key(team, other_team):
    ours, raw = api_key_create(team=team, name="coding assistant")
    theirs, _ = api_key_create(team=other_team, name="nightly import\x1b]0;owned\x07")
    listing = run("list_api_keys")
    assert ours.prefix in listing and theirs.prefix in listing and raw not in listing
    assert "\x1b" not in listing and "nightly import\\x1b]0;owned\\x07" in listing  # a name cannot drive the terminal
    only_ours = run("list_api_keys", "--team", team.slug)
    assert ours.prefix in only_ours and theirs.prefix not in only_ours


def test_revoke_by_prefix_or_whole_key_and_the_key_is_refused_at_once(team):
    key, raw = api_key_create(team=team, name="leaked")
    out = run("revoke_api_key", key.prefix)
    assert f"Revoked API key 'leaked' of team {team.slug} (prefix {key.prefix})" in out
    assert api_key_authenticate(raw_key=raw) is None
    assert ApiKey.objects.get(pk=key.pk).revoked_at is not None
    listed = run("list_api_keys").splitlines()[1]
    assert listed.startswith(key.prefix) and listed.split()[-2] != "-"  # the revoked column is filled
    # revoking it again: no active key by that prefix
    with pytest.raises(CommandError, match=f"PREFIX: no active key {key.prefix}"):
        run("revoke_api_key", key.prefix)
    other, other_raw = api_key_create(team=team, name="pasted whole")
    run("revoke_api_key", other_raw)  # the whole key works as well
    assert api_key_authenticate(raw_key=other_raw) is None


def test_a_prefix_two_teams_share_needs_the_team(team, other_team):
    first, first_raw = api_key_create(team=team, name="one")
    second, _ = api_key_create(team=other_team, name="two")
    ApiKey.objects.filter(pk=second.pk).update(prefix=first.prefix)  # 8 random hex: it can happen
    with pytest.raises(CommandError, match="2 active keys share"):
        run("revoke_api_key", first.prefix)
    run("revoke_api_key", first.prefix, "--team", team.slug)
    assert api_key_authenticate(raw_key=first_raw) is None
    assert ApiKey.objects.get(pk=second.pk).revoked_at is None


@pytest.mark.parametrize("tail", ["x", "_", " msk_00000000_whatever"])
def test_a_whole_key_that_is_not_the_key_revokes_nothing(team, tail):
    """The command kept the first 12 characters of what it was given: the key with a character
    too many, or any string starting with a key's prefix, revoked that key."""
    key, raw = api_key_create(team=team, name="in use")
    with pytest.raises(CommandError, match=r"PREFIX: the key given \(msk_\w{8}\.\.\.\) is not an active key of this "
                                           r"store; nothing was revoked") as refused:
        run("revoke_api_key", raw + tail)
    assert raw not in str(refused.value)  # a secret is not echoed to the terminal
    assert ApiKey.objects.get(pk=key.pk).revoked_at is None
    assert api_key_authenticate(raw_key=raw) == key


def test_a_whole_key_picks_its_own_key_among_keys_sharing_its_prefix(team, other_team):
    first, first_raw = api_key_create(team=team, name="one")
    second, _ = api_key_create(team=other_team, name="two")
    second_raw = first.prefix + first_raw[len(first.prefix):][::-1]  # 8 random hex: it can happen
    ApiKey.objects.filter(pk=second.pk).update(prefix=first.prefix, key_hash=api_key_digest(second_raw))
    out = run("revoke_api_key", second_raw)  # no --team needed: the key says which
    assert f"of team {other_team.slug}" in out
    assert api_key_authenticate(raw_key=second_raw) is None and api_key_authenticate(raw_key=first_raw) == first
    with pytest.raises(CommandError, match="not an active key of this store"):
        run("revoke_api_key", second_raw)  # revoked already


@pytest.mark.parametrize("args, message", [
    (["msk_12"], "PREFIX: 'msk_12' is too short"),
    (["msk_00000000"], "PREFIX: no active key msk_00000000"),
    (["msk_00000000", "--team", "nope"], "--team"),
])
def test_bad_arguments_are_command_errors(team, args, message):
    with pytest.raises(CommandError, match=message):
        run("revoke_api_key", *args)


def test_active_keys_are_listed_first(team):
    revoked, _ = api_key_create(team=team, name="old")
    run("revoke_api_key", revoked.prefix)
    active, _ = api_key_create(team=team, name="new")
    rows = run("list_api_keys").splitlines()[1:]
    assert [row.split()[0] for row in rows] == [active.prefix, revoked.prefix]
