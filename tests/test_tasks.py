import json
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone

from lessons.models import Lesson
from lessons.selectors.embeddings import with_embedding_status
from lessons.services.embeddings import embeddings_deferred
from lessons.services.keyword_index import keyword_impacts_upkeep, keyword_index_state
from lessons.services.lessons import lesson_create, lesson_delete
from lessons.services.memories import memory_create
from lessons.tasks import embed_item

pytestmark = pytest.mark.django_db


def test_embed_item_embeds_a_pending_row_once(team):
    with embeddings_deferred():
        lesson = lesson_create(team=team, title="Keep migrations reversible")
    assert embed_item.call(kind="lessons", item_id=lesson.pk)["embedded"] == 1
    assert with_embedding_status(queryset=type(lesson).objects.filter(pk=lesson.pk)).get().embedding_status == "fresh"
    # A second task for the same row (two saves in one transaction queue two) costs no encode.
    assert embed_item.call(kind="lessons", item_id=lesson.pk)["embedded"] == 0


def test_embed_item_for_a_row_deleted_meanwhile_does_nothing(team):
    with embeddings_deferred():
        lesson = lesson_create(team=team, title="Short-lived")
    lesson_id = lesson.pk
    lesson_delete(lesson=lesson)
    assert embed_item.call(kind="lessons", item_id=lesson_id) == {
        "embedded": 0,
        "changed_meanwhile": 0,
        "failed": 0,
        "reason": None,
        "impacts_refreshed": 0,
    }


def test_embed_item_refuses_an_unknown_kind():
    with pytest.raises(ValueError, match="kind must be one of lessons, memories"):
        embed_item.call(kind="notes", item_id=1)


def test_embed_pending_counts_failed_rows_and_gives_the_reason(team, settings):
    from lessons.tasks import embed_pending

    settings.EMBEDDING_BACKEND = {**settings.EMBEDDING_BACKEND, "BACKEND": "tests.embedding_backends.CrashesOnPoisonBackend"}
    with embeddings_deferred():
        for title in ("POISON pill", "Index foreign keys", "Keep migrations reversible"):
            lesson_create(team=team, title=title)
    result = embed_pending.call(kind="lessons", team_id=team.pk)
    # The three rows share one batch, which the encoder cannot embed: three rows, not one kind.
    assert result == {"embedded": 0, "failed": 3, "reason": "embedding failed: the encoder crashed"}


def test_embed_pending_with_the_model_off_reports_every_pending_row(team, settings):
    from lessons.tasks import embed_pending

    with embeddings_deferred():
        lesson_create(team=team, title="Index foreign keys")
        lesson_create(team=team, title="Keep migrations reversible")
    settings.EMBEDDINGS_ENABLED = False
    result = embed_pending.call(kind="lessons", team_id=team.pk)
    assert result["embedded"] == 0 and result["failed"] == 2
    assert "EMBEDDINGS_ENABLED=0" in result["reason"]


def test_a_team_growing_one_write_at_a_time_keeps_its_keyword_impacts_current(
    team, other_team, django_capture_on_commit_callbacks
):
    """The task after each write refreshes drifted impacts, so no cron is needed: short lessons
    first, then much longer ones, each through the service and its task as an API write runs
    them; the same writes without their tasks leave the other team drifted."""
    for number in range(12):
        description = " ".join(f"word{n % 17}" for n in range(3 if number < 6 else 60))
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            lesson = lesson_create(team=team, title=f"lesson {number}", description=description)
        assert callbacks  # the task ran, as after an API write
        assert keyword_index_state(team=team, kind="lessons").drift <= 1.2
        with embeddings_deferred():
            lesson_create(team=other_team, title=f"lesson {number}", description=description)
    assert keyword_index_state(team=other_team, kind="lessons").drift > 1.2

    with connection.cursor() as cursor:  # bulk writes bypass the task: this one drifts the team
        cursor.execute("SELECT count(*) FROM lessons_keyword_posting WHERE kind = 'l' AND team_id = %s", [team.pk])
        postings = cursor.fetchone()[0]
    Lesson.objects.bulk_create([Lesson(team=team, title="t", description="x " * 400) for _ in range(8)])
    assert keyword_index_state(team=team, kind="lessons").drift > 1.2
    with django_capture_on_commit_callbacks(execute=True):
        memory_create(team=team, content="a memory: its own kind, its own index")
    assert keyword_index_state(team=team, kind="lessons").drift > 1.2  # a memory's task leaves lessons alone
    assert embed_item.call(kind="lessons", item_id=lesson.pk)["impacts_refreshed"] > postings
    assert keyword_index_state(team=team, kind="lessons").drift == pytest.approx(1.0)


def test_the_upkeep_is_a_no_op_while_another_worker_refreshes_the_team(team):
    with embeddings_deferred():
        lesson_create(team=team, title="short")
    Lesson.objects.bulk_create([Lesson(team=team, title="t", description="x " * 400) for _ in range(4)])
    assert keyword_index_state(team=team, kind="lessons").drift > 1.2
    key = f"lessons_keyword_upkeep:l:{team.pk}"
    other = connections.create_connection("default")  # another worker's session, mid-refresh
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", [key])
        assert keyword_impacts_upkeep(team=team, kind="lessons") == 0
        assert keyword_index_state(team=team, kind="lessons").drift > 1.2  # left to the other worker
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [key])
    finally:
        other.close()
    assert keyword_impacts_upkeep(team=team, kind="lessons") > 0
    assert keyword_index_state(team=team, kind="lessons").drift == pytest.approx(1.0)


def test_an_import_embeds_its_own_rows_before_the_teams_older_backlog(
    team, monkeypatch, django_capture_on_commit_callbacks
):
    # a 300-line import into a team with 25,000 stale rows embedded them for ten minutes, oldest
    # first, before its own
    import lessons.tasks
    from lessons.services.imports import import_lessons

    with embeddings_deferred():
        backlog = [lesson_create(team=team, title=f"Old lesson {n}") for n in range(3)]
    Lesson.objects.filter(pk__in=[lesson.pk for lesson in backlog]).update(
        updated_at=timezone.now() - timedelta(days=30))
    runs = []
    real_backfill = lessons.tasks.embedding_backfill

    def recorded(**options):
        report = real_backfill(**options)
        runs.append((sorted(options), report.pending, report.embedded))
        return report

    monkeypatch.setattr(lessons.tasks, "embedding_backfill", recorded)
    lines = [json.dumps({"title": "Fresh import one"}), json.dumps({"title": "Fresh import two"})]
    with django_capture_on_commit_callbacks(execute=True):  # the backfill is queued after the commit
        assert import_lessons(lines=lines, team_slug=team.slug).created == 2
    assert runs == [(["kind", "team", "written_since"], 2, 2), (["kind", "team"], 3, 3)]
    assert not Lesson.objects.filter(team=team, embedding__isnull=True).exists()
