"""The load test command itself, small: two clients for two seconds against pytest-django's live
server (a threaded server on 127.0.0.1 over the test database). The real run is in the README."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from lessons.models import ApiKey, Lesson

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_short_run_reports_figures_and_reads_back_every_write(live_server, tmp_path):
    out, err = StringIO(), StringIO()
    figures_path = tmp_path / "figures.json"
    call_command(
        "load_test", url=live_server.url, clients=2, seconds=2, write_share=0.5, seed_lessons=10,
        json_path=str(figures_path), stdout=out, stderr=err,
    )
    report = out.getvalue()
    figures = json.loads(figures_path.read_text())
    assert figures["requests"] > 0 and figures["throughput_per_s"] > 0
    assert figures["errors"]["total"] == 0
    assert figures["latency_ms"]["search"]["count"] > 0 and figures["latency_ms"]["search"]["p50"] > 0
    assert figures["writes"]["created"] > 0
    assert figures["read_back"]["lessons"] == figures["writes"]["created"]
    assert figures["read_back"]["missing"] == figures["read_back"]["differing"] == 0
    assert "p95" in report and "read back:" in report and "errors: 0" in report
    # The run cleans up after itself: its lessons are deleted, its key revoked.
    assert Lesson.objects.filter(team__slug="load-test").count() == 10
    assert not ApiKey.objects.filter(name="load test", revoked_at__isnull=True).exists()


@pytest.mark.parametrize("url", ["http://10.0.0.1:8000", "http://192.168.1.2", "http://example.org", "ftp://127.0.0.1"])
def test_only_loopback_urls_are_accepted(url):
    with pytest.raises(CommandError, match="--url"):
        call_command("load_test", url=url, clients=1, seconds=1)
    assert not ApiKey.objects.exists()  # refused before anything was stored or sent


def test_bounds(live_server):
    with pytest.raises(CommandError, match="--clients"):
        call_command("load_test", url=live_server.url, clients=0, seconds=1)
    with pytest.raises(CommandError, match="--seconds"):
        call_command("load_test", url=live_server.url, clients=1, seconds=601)


@pytest.mark.parametrize("option, value", [("timeout", -1), ("timeout", 0), ("max_requests", 0),
                                           ("seed_lessons", -1)])
def test_each_bound_is_checked_before_anything_is_sent_or_stored(live_server, option, value):
    # --timeout -1 failed inside every client thread, and the run reported 0 requests and exited 0
    with pytest.raises(CommandError, match=f"--{option.replace('_', '-')} must be"):
        call_command("load_test", url=live_server.url, clients=1, seconds=1, **{option: value})
    assert not ApiKey.objects.exists() and not Lesson.objects.exists()


def test_the_model_off_while_seeding_is_one_line_naming_the_fix(live_server):
    from django.test import override_settings

    with override_settings(EMBEDDINGS_ENABLED=False), pytest.raises(CommandError, match="model is unavailable"):
        call_command("load_test", url=live_server.url, clients=1, seconds=1, seed_lessons=2)


def test_figures_that_cannot_be_written_leave_the_previous_ones(live_server, tmp_path, monkeypatch):
    # the figures were written in place: a full disk left the last run's file truncated
    import os

    figures_path = tmp_path / "figures.json"
    figures_path.write_text('{"previous": true}\n')

    def disk_full(descriptor):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(CommandError) as raised:
        call_command("load_test", url=live_server.url, clients=1, seconds=1, seed_lessons=2,
                     json_path=str(figures_path), stdout=StringIO(), stderr=StringIO())
    assert str(raised.value) == f"--json: cannot write {figures_path}: No space left on device"
    assert figures_path.read_text() == '{"previous": true}\n'
    assert [path.name for path in tmp_path.iterdir()] == ["figures.json"]  # no temporary file left
