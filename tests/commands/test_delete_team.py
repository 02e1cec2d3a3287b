"""`manage.py delete_team`: shows what a team holds, deletes it only when confirmed, and leaves
every other team (and the keyword index's bookkeeping of other teams) as it was."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from lessons.models import ApiKey, Lesson, Memory, SearchFeedback, SearchRecord, Team
from lessons.services.api_keys import api_key_create
from lessons.services.lessons import lesson_create
from lessons.services.memories import memory_create, memory_update
from lessons.services.usage import feedback_record, search_record

pytestmark = pytest.mark.django_db


@pytest.fixture
def full_team(team):
    lesson = lesson_create(team=team, title="Pin the base image digest", tags=["docker"])
    memory = memory_create(team=team, content="Met Ana at the climbing gym", people=["Ana"])
    memory_update(memory=memory, content="Met Ana and Bo at the climbing gym")
    api_key_create(team=team, name="agent")
    search_id = search_record(team=team, kind="lessons", operation="search", query="docker", mode="text",
                              result_ids=[lesson.pk], source="cli")
    feedback_record(team=team, search_id=search_id, used=[lesson.pk], not_helpful=[])
    return team


def _keyword_rows(team_id: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM lessons_keyword_posting WHERE team_id = %(t)s)"
            " + (SELECT count(*) FROM lessons_keyword_df WHERE team_id = %(t)s)"
            " + (SELECT count(*) FROM lessons_keyword_stats WHERE team_id = %(t)s)",
            {"t": team_id},
        )
        return cursor.fetchone()[0]


def _run(*arguments) -> str:
    out = StringIO()
    call_command("delete_team", *arguments, stdout=out)
    return out.getvalue()


def test_dry_run_shows_what_the_team_holds_and_deletes_nothing(full_team):
    output = _run("acme", "--dry-run")
    assert "1 lesson, 1 memory, 1 memory version, 1 API key, 1 recorded search" in output
    assert "nothing deleted" in output
    assert Team.objects.filter(slug="acme").exists() and Lesson.objects.count() == 1


def test_yes_deletes_the_team_with_everything_in_it_and_nothing_of_another_team(full_team, other_team):
    kept_lesson = lesson_create(team=other_team, title="Pin the base image digest", tags=["docker"])
    kept_memory = memory_create(team=other_team, content="Met Ana at the climbing gym")
    team_id, kept_keyword_rows = full_team.pk, _keyword_rows(other_team.pk)
    assert _keyword_rows(team_id) > 0

    output = _run("acme", "--yes")

    assert "Deleted team 'acme' and 1 lesson, 1 memory, 1 memory version, 1 API key, 1 recorded search." in output
    assert not Team.objects.filter(pk=team_id).exists()
    for model in (Lesson, Memory, ApiKey, SearchRecord):
        assert not model.objects.filter(team_id=team_id).exists()
    assert not SearchFeedback.objects.exists()
    assert _keyword_rows(team_id) == 0
    assert list(Lesson.objects.all()) == [kept_lesson] and list(Memory.objects.all()) == [kept_memory]
    assert _keyword_rows(other_team.pk) == kept_keyword_rows


def test_it_asks_for_the_slug_on_a_terminal_and_deletes_only_when_it_is_typed(full_team, monkeypatch):
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "acm")
    with pytest.raises(CommandError, match="you typed 'acm', not 'acme': nothing was deleted"):
        _run("acme")
    assert Team.objects.filter(slug="acme").exists()

    def end_of_input(prompt):
        raise EOFError

    monkeypatch.setattr("builtins.input", end_of_input)
    with pytest.raises(CommandError, match="no answer: nothing was deleted"):
        _run("acme")

    def ctrl_c(prompt):
        raise KeyboardInterrupt

    monkeypatch.setattr("builtins.input", ctrl_c)
    with pytest.raises(CommandError, match=r"^interrupted \(Ctrl-C\) at the question: nothing was deleted$") as raised:
        _run("acme")
    assert raised.value.returncode == 130 and Team.objects.filter(slug="acme").exists()

    monkeypatch.setattr("builtins.input", lambda prompt: " acme\n")
    assert "Deleted team 'acme'" in _run("acme")
    assert not Team.objects.filter(slug="acme").exists()


def test_without_a_terminal_it_needs_yes(full_team, monkeypatch):
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    with pytest.raises(CommandError, match="--yes: not asked on a terminal"):
        _run("acme")
    assert Lesson.objects.filter(team=full_team).count() == 1


def test_an_unknown_slug_is_named_and_one_in_another_case_is_not_taken_for_it(team):
    with pytest.raises(CommandError, match=r"SLUG: no team with slug 'nope'\Z"):
        _run("nope", "--yes")
    with pytest.raises(CommandError, match=r"SLUG: no team with slug 'Acme'; did you mean 'acme'\?"):
        _run("Acme", "--yes")
    assert Team.objects.filter(slug="acme").exists()


def test_a_slug_that_starts_with_a_hyphen_is_reached_after_the_double_dash(db):
    Team.objects.create(slug="-old", name="old")
    assert "Deleted team '-old'" in _run("--yes", "--", "-old")
    assert not Team.objects.exists()


def test_counts_other_than_one_are_plural(db):
    Team.objects.create(slug="empty", name="empty")
    assert "holds 0 lessons, 0 memories, 0 memory versions, 0 API keys, 0 recorded searches." in _run(
        "empty", "--dry-run")


@pytest.mark.parametrize("command, arguments", [
    ("search", ["retries", "--team", "ACME", "--mode", "text"]),
    ("backfill_embeddings", ["--team", "ACME", "--dry-run"]),
    ("refresh_keyword_impacts", ["--team", "ACME"]),
    ("mcp", ["--team", "ACME"]),
])
def test_every_command_that_takes_a_team_suggests_the_slug_in_another_case(team, command, arguments):
    with pytest.raises(CommandError, match=r"^--team: no team with slug 'ACME'; did you mean 'acme'\?$"):
        call_command(command, *arguments, stdout=StringIO(), stderr=StringIO())


def test_a_team_name_a_terminal_would_act_on_is_shown_escaped():
    # a display name is anyone's text: its escape sequences were echoed to the operator's terminal
    out = StringIO()
    call_command("create_team", "inverse", name="\x1b[7mInverse\x1b[0m", stdout=out)
    assert "\x1b" not in out.getvalue() and "\\x1b[7mInverse\\x1b[0m" in out.getvalue()
    shown = StringIO()
    call_command("delete_team", "inverse", dry_run=True, stdout=shown)
    assert "\x1b" not in shown.getvalue() and "\\x1b[7mInverse" in shown.getvalue()
