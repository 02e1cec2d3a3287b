import signal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connections
from django.test import override_settings

from lessons.management.commands.backfill_embeddings import BACKFILL_LOCK
from lessons.models import Lesson
from lessons.selectors.embeddings import embedding_coverage
from lessons.services.embeddings import embeddings_deferred
from lessons.services.lessons import lesson_create
from lessons.services.memories import memory_create

pytestmark = pytest.mark.django_db

POISON_BACKEND = {"BACKEND": "tests.embedding_backends.CrashesOnPoisonBackend", "BATCH_SIZE": 64}


def run(*args, **options) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("backfill_embeddings", *args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def pending(team, other_team):
    with embeddings_deferred():
        lessons = [lesson_create(team=team, title=f"Lesson about topic {n}") for n in range(3)]
        lessons.append(lesson_create(team=other_team, title="Another team's lesson"))
        memories = [memory_create(team=team, content="Ana runs on Sundays")]
    return lessons, memories


def test_backfill_embeds_everything_pending_and_summarises(pending):
    out, err = run("--batch-size", "2")
    assert "embedded: 5, already fresh: 0, failed: 0" in out
    assert "item/s" in err  # the tqdm bar with its rate
    assert embedding_coverage()["lessons"] == {"fresh": 4, "stale": 0, "missing": 0}
    out, _ = run()
    assert "embedded: 0, already fresh: 5, failed: 0" in out


def test_dry_run_team_and_kind(pending, team):
    out, _ = run("--dry-run")
    assert "dry run: 5 to embed, 0 already fresh" in out
    assert embedding_coverage()["lessons"]["missing"] == 4
    out, _ = run("--kind", "lessons", "--team", team.slug)
    assert "embedded: 3" in out
    assert embedding_coverage() == {
        "lessons": {"fresh": 3, "stale": 0, "missing": 1},
        "memories": {"fresh": 0, "stale": 0, "missing": 1},
    }
    out, _ = run("--kind", "memories", "--all")
    assert "embedded: 1, already fresh: 0" in out


def test_failed_rows_are_listed_and_the_command_fails(team):
    with embeddings_deferred():
        good = lesson_create(team=team, title="A normal lesson")
        bad = lesson_create(team=team, title="A POISON lesson")
    with override_settings(EMBEDDING_BACKEND=POISON_BACKEND):
        out = StringIO()
        with pytest.raises(CommandError, match="1 row\\(s\\) could not be embedded.*encoder crashed"):
            call_command("backfill_embeddings", batch_size=1, stdout=out, stderr=StringIO())
    assert "embedded: 1, already fresh: 0, failed: 1" in out.getvalue()
    assert f"failed lessons: {bad.pk}" in out.getvalue()
    assert Lesson.objects.get(pk=good.pk).embedding is not None
    assert Lesson.objects.get(pk=bad.pk).embedding is None


def test_model_off_is_a_clear_error_and_nothing_changes(pending):
    with override_settings(EMBEDDINGS_ENABLED=False), pytest.raises(CommandError, match="unavailable.*turned off"):
        run()
    assert embedding_coverage()["lessons"]["missing"] == 4


@pytest.mark.parametrize(
    "args, message",
    [
        (["--team", "nobody"], "no team with slug 'nobody'"),
        (["--batch-size", "0"], "at least 1"),
        (["--batch-size", "many"], "invalid int value"),
        (["--kind", "notes"], "invalid choice"),
    ],
)
def test_bad_options_are_command_errors(db, args, message):
    with pytest.raises(CommandError, match=message):
        run(*args)


def test_ctrl_c_keeps_the_finished_batches_and_ends_with_a_one_line_summary(pending):
    backend = {"BACKEND": "tests.embedding_backends.InterruptedOnMemoriesBackend", "BATCH_SIZE": 64}
    with override_settings(EMBEDDING_BACKEND=backend):
        with pytest.raises(CommandError) as raised:
            run("--batch-size", "2", verbosity=0)
        assert raised.value.returncode == 130
        assert str(raised.value) == (
            "interrupted: 4 of 5 row(s) embedded and committed, 0 failed, 1 still pending; "
            "run the command again to continue."
        )
        out, _ = run("--dry-run")
    assert "dry run: 1 to embed, 4 already fresh" in out


def test_sigterm_stops_as_ctrl_c_does_with_the_summary(pending):
    # a process manager's stop ended the process at once (status 143), without saying what was kept
    backend = {"BACKEND": "tests.embedding_backends.StoppedOnMemoriesBackend", "BATCH_SIZE": 64}
    with override_settings(EMBEDDING_BACKEND=backend), pytest.raises(CommandError) as raised:
        run("--batch-size", "2", verbosity=0)
    assert raised.value.returncode == 130
    assert str(raised.value).startswith("interrupted: 4 of 5 row(s) embedded and committed")
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is the command's only
    assert embedding_coverage()["memories"]["missing"] == 1


def test_ctrl_c_during_a_re_embed_of_every_row_says_what_a_re_run_does(pending):
    run(verbosity=0)  # every row fresh
    backend = {"BACKEND": "tests.embedding_backends.InterruptedOnMemoriesBackend", "BATCH_SIZE": 64}
    with override_settings(EMBEDDING_BACKEND=backend):
        with pytest.raises(CommandError) as raised:
            run("--all", "--batch-size", "2", verbosity=0)
    assert raised.value.returncode == 130
    # "1 still pending; run again to continue" was untrue: a plain run finds the row fresh
    assert str(raised.value) == (
        "interrupted: 4 of 5 row(s) re-embedded and committed, 0 failed, 1 not re-embedded (they keep the "
        "vectors they had); run the command with --all again to re-embed every row, from the start."
    )


def test_a_second_backfill_while_one_writes_is_refused(pending, transactional_db):
    """Two at once both embedded every row and both reported it; the second now stops before it writes."""
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [BACKFILL_LOCK])  # the first backfill
        with pytest.raises(CommandError, match="another backfill_embeddings is writing to this database"):
            run(verbosity=0)
        out, _ = run("--dry-run")  # counting is not writing
        assert "dry run: 5 to embed" in out
    finally:
        with other.cursor() as cursor:  # the first one ends (closing alone frees it a moment later)
            cursor.execute("SELECT pg_advisory_unlock(%s)", [BACKFILL_LOCK])
        other.close()
    run(verbosity=0)
    assert run("--dry-run")[0].startswith("dry run: 0 to embed")
