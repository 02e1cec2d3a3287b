"""Commands of learning from use: `search --json` (recorded, with a search_id), `purge_searches`,
and `simulate_usage` end to end on the tiny BEIR-layout dataset with the real model."""

import json
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from lessons.models import Lesson, SearchRecord, Team
from lessons.services.lessons import lesson_create
from lessons.services.usage import search_record

pytestmark = pytest.mark.django_db

TINY = Path(__file__).resolve().parent.parent / "fixtures" / "beir_tiny"


def run(*args) -> str:
    out = StringIO()
    call_command(*[str(arg) for arg in args], stdout=out, stderr=StringIO(), verbosity=0)
    return out.getvalue()


def test_search_json_is_recorded_as_the_cli_and_counts_returns(team):
    lesson = lesson_create(team=team, title="Index the foreign keys you join on")
    answer = json.loads(run("search", "foreign keys", "--team", team.slug, "--mode", "text", "--json"))
    record = SearchRecord.objects.get(pk=answer["search_id"])
    assert (record.source, record.query, record.result_ids) == ("cli", "foreign keys", [lesson.pk])
    assert Lesson.objects.get(pk=lesson.pk).returned_count == 1
    quiet = json.loads(run("search", "foreign keys", "--team", team.slug, "--mode", "text", "--json", "--no-record"))
    assert quiet["search_id"] is None
    run("search", "foreign keys", "--team", team.slug, "--mode", "text")  # a table: a person reading
    assert SearchRecord.objects.count() == 1
    assert Lesson.objects.get(pk=lesson.pk).returned_count == 1


def test_purge_searches(team):
    old = search_record(team=team, kind="lessons", operation="search", query="q", mode="text", result_ids=[],
                        source="api", now=timezone.now() - timedelta(days=31))
    search_record(team=team, kind="lessons", operation="search", query="q", mode="text", result_ids=[], source="api")
    assert run("purge_searches", "--dry-run") == "would delete 1 search(es) older than 30 day(s)\n"
    assert run("purge_searches") == "deleted 1 search(es) older than 30 day(s)\n"
    assert not SearchRecord.objects.filter(pk=old).exists() and SearchRecord.objects.count() == 1
    for days in ("-1", "1000000", "99999999999"):  # the large ones were a date overflow traceback
        with pytest.raises(CommandError, match="--days: must be 0 to 36,500"):
            run("purge_searches", "--days", days)
    assert SearchRecord.objects.count() == 1
    assert run("purge_searches", "--days", "0").startswith("deleted 1 ")


def test_simulate_usage_reports_before_and_after_and_leaves_no_trace(tmp_path):
    path = tmp_path / "simulation.json"
    output = run("simulate_usage", TINY, "--usage-weights", "0,0.5,1", "--json", path)
    result = json.loads(path.read_text())
    # Train: q5 and q6 find their relevant abstract in the top 10, and report it used.
    assert result["replay"]["searches"] == 2 and result["replay"]["used_reported"] == 2
    assert set(result["after"]) == {"0.0", "0.5", "1.0"}
    # With the signal off after feedback, exactly the figures before it.
    assert result["after"]["0.0"] == result["before"]
    for weight in ("0.5", "1.0"):
        assert result["after"][weight]["train"] >= result["before"]["train"]
    assert "| before feedback |" in output and "usage weight 0.5" in output
    # The evaluation team is left as it was found: no searches, no counts.
    assert not SearchRecord.objects.exists()
    assert not Lesson.objects.filter(team__slug="eval-beir_tiny", returned_count__gt=0).exists()


def test_simulate_usage_refuses_bad_options():
    with pytest.raises(CommandError, match="--usage-weights"):
        run("simulate_usage", TINY, "--usage-weights", "a lot")
    with pytest.raises(CommandError, match="--mode"):
        run("simulate_usage", TINY, "--mode", "psychic")
    with pytest.raises(CommandError, match=r"--usage-weights: one or more finite numbers >= 0, got '0,nan'"):
        run("simulate_usage", TINY, "--usage-weights", "0,nan")
    # A path it cannot write is refused before the simulation runs, not after it.
    with pytest.raises(CommandError, match="--json: cannot write /nonexistent-folder/x.json: its folder"):
        run("simulate_usage", TINY, "--json", "/nonexistent-folder/x.json")
    assert not Team.objects.exists()
