"""The write benchmark, small: a few writer processes and a few rows each, on the test database.
The writers commit over connections of their own, so the runs need committed data
(`transaction=True`); the real run is in the README."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from lessons.models import Lesson, Memory
from lessons.selectors.keyword_index import keyword_index_check
from lessons.services.embeddings import embeddings_deferred
from lessons.services.lessons import lesson_create
from lessons.services.teams import team_get_or_create


@pytest.mark.django_db(transaction=True)
def test_a_short_run_reports_figures_checks_the_index_and_cleans_up(tmp_path):
    team = team_get_or_create(slug="bench-writes")
    with embeddings_deferred():
        lesson_create(team=team, title="A lesson the team had before the run")
    out, figures_path = StringIO(), tmp_path / "figures.json"

    call_command("bench_writes", writers=4, rows=20, json_path=str(figures_path), stdout=out, stderr=StringIO())

    figures = json.loads(figures_path.read_text())
    [phase] = figures["phases"]
    assert phase["writers"] == 4 and phase["rows"] == 80 and phase["transactions"] == 80
    assert [writer["rows"] for writer in phase["per_writer"]] == [20, 20, 20, 20]
    assert all(writer["inserts_per_s"] > 0 and writer["fatal"] is None for writer in phase["per_writer"])
    assert phase["inserts_per_s"] > 0
    latency = phase["latency_ms"]
    assert latency["count"] == 80 and 0 < latency["p50"] <= latency["p95"] <= latency["p99"] <= latency["max"]
    assert phase["errors"] == {"total": 0, "by_type": {}}
    waits = phase["lock_waits"]
    assert waits["samples"] >= 0 and waits["error"] is None
    assert set(waits) >= {"samples_with_lock_wait", "mean_waiting", "max_waiting", "lock_events", "relations"}
    assert figures["scaling"] is None  # no --compare
    # The team's statistics count every row, the one from before included.
    consistency = figures["consistency"]
    assert consistency["ok"] and consistency["doc_count"] == consistency["rows"] == 81
    assert consistency["postings"] == consistency["lexemes"] > 0
    assert figures["cleanup"]["deleted"] == 80 and figures["cleanup"]["check"]["ok"]
    report = out.getvalue()
    assert "4 writers: 80 rows" in report and "p99" in report and "errors: 0" in report
    assert "keyword index after the run: OK" in report

    # Only the benchmark's rows are gone, and the index agrees with what is left.
    assert list(Lesson.objects.filter(team=team).values_list("title", flat=True)) == [
        "A lesson the team had before the run"
    ]
    after = keyword_index_check(kind="lessons", team=team)
    assert after.ok and after.doc_count == 1


@pytest.mark.django_db(transaction=True)
def test_compare_runs_one_writer_first_and_keep_leaves_the_rows_unembedded(tmp_path):
    figures_path = tmp_path / "figures.json"
    call_command(
        "bench_writes", writers=2, rows=5, kind="memories", batch=2, compare=True, keep=True, team="bench-memories",
        path="insert", json_path=str(figures_path), stdout=StringIO(), stderr=StringIO(),
    )
    figures = json.loads(figures_path.read_text())
    assert [phase["writers"] for phase in figures["phases"]] == [1, 2]
    assert [phase["rows"] for phase in figures["phases"]] == [5, 10]
    # Batches of 2: 5 rows take 3 transactions (the last holds one row).
    assert [phase["transactions"] for phase in figures["phases"]] == [3, 6]
    assert figures["scaling"]["writers"] == 2 and figures["scaling"]["ratio"] > 0
    assert figures["consistency"]["ok"] and figures["consistency"]["rows"] == 15
    assert figures["path"] == "insert" and figures["machine"]["cpus"] >= 1
    assert figures["cleanup"] == {"kept": True, "deleted": 0, "check": None}
    kept = Memory.objects.filter(team__slug="bench-memories")
    assert kept.count() == 15
    assert not kept.filter(embedding__isnull=False).exists()  # no model ran, no task was queued


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"writers": 0}, "--writers must be between 1"),
        ({"seconds": 0}, "--seconds must be more than 0"),
        ({"seconds": -1}, "--seconds must be more than 0"),
        ({"rows": 0}, "--rows must be at least 1"),
        ({"seconds": 1, "rows": 5}, "not both"),
        ({"batch": 0}, "--batch must be at least 1"),
        ({"kind": "notes"}, "--kind must be one of lessons, memories"),
        ({"path": "copy"}, "--path must be one of service, insert"),
        ({"json_path": "/nonexistent-folder/figures.json"}, "--json: .* does not exist"),
    ],
)
def test_bad_input_is_refused_before_anything_is_written(db, options, message):
    with pytest.raises(CommandError, match=message):
        call_command("bench_writes", stdout=StringIO(), **options)
    assert not Lesson.objects.exists()


def test_a_folder_is_not_a_json_file(db, tmp_path):
    with pytest.raises(CommandError, match="--json: .* is a folder"):
        call_command("bench_writes", json_path=str(tmp_path), stdout=StringIO())


def test_refuses_to_run_inside_a_transaction(db):
    """Its writers could not see the team: the plain `db` fixture wraps the test in one."""
    with pytest.raises(CommandError, match="inside a transaction"):
        call_command("bench_writes", rows=1, writers=1, stdout=StringIO())
