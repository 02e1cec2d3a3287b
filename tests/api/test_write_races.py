"""Two PATCHes of one lesson at once, each over its own connection: the second read the lesson
before the first committed, and waited for the row lock. lesson_update works from the row as
stored under that lock, not from the copy the request read first."""

import secrets
import threading
import time

import pytest
from django.db import connection

from lessons.models import MAX_TERM_BYTES_PER_ROW, MAX_TERMS_PER_ROW, Lesson
from tests.api.conftest import JsonClient
from tests.factories import LessonFactory

pytestmark = pytest.mark.django_db(transaction=True)


def _a_request_waits_for_a_lock(timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute("SELECT count(*) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND wait_event_type = 'Lock'")
            if cursor.fetchone()[0]:
                return True
            time.sleep(0.05)
    return False


def _race(monkeypatch, raw_key: str, lesson: Lesson, first: dict, second: dict):
    """PATCH `first` and hold it under the row lock (in full_clean, before its commit) until the PATCH
    of `second`, sent meanwhile, waits for that lock; then let both finish. Their two responses."""
    first_holds_the_lock, release = threading.Event(), threading.Event()
    full_clean = Lesson.full_clean

    def held_once(self, *args, **kwargs):
        if not first_holds_the_lock.is_set():
            first_holds_the_lock.set()
            release.wait(10)
        return full_clean(self, *args, **kwargs)

    monkeypatch.setattr(Lesson, "full_clean", held_once)
    answers = {}

    def patch(name, body):
        try:
            answers[name] = JsonClient(raw_key).patch(f"/lessons/{lesson.pk}", body)
        finally:
            connection.close()

    first_writer = threading.Thread(target=patch, args=("first", first))
    first_writer.start()
    assert first_holds_the_lock.wait(10)
    second_writer = threading.Thread(target=patch, args=("second", second))
    second_writer.start()
    assert _a_request_waits_for_a_lock()
    release.set()
    first_writer.join(20), second_writer.join(20)
    return answers["first"], answers["second"]


def test_the_later_answer_shows_both_changes_under_the_tag_a_read_gives(monkeypatch, team_key, team):
    """One PATCH sets the confidence, the other the title: the second's answer showed the title as it
    was before, under the same strong ETag that GET then gave with the new title."""
    lesson = LessonFactory(team=team, title="Pin the base image", confidence=0.5)
    first, second = _race(monkeypatch, team_key[1], lesson, {"confidence": 0.9}, {"title": "Pin the image by digest"})
    assert (first.status_code, second.status_code) == (200, 200), (first.content, second.content)
    read = JsonClient(team_key[1]).get(f"/lessons/{lesson.pk}")
    assert second["ETag"] == read["ETag"] != first["ETag"]
    for answer in (second.json(), read.json()):
        assert (answer["title"], answer["confidence"]) == ("Pin the image by digest", 0.9)
    assert second.json()["updated_at"] == read.json()["updated_at"]


def test_a_change_back_while_another_writer_holds_the_row_is_not_lost(monkeypatch, team_key, team):
    """Writer A sets the confidence to 0.9; B's PATCH to 0.5, waiting for A's lock, compared with the
    0.5 it had read, found nothing to change and answered 200 with the old tag: 0.9 stayed, B's
    write lost without a word."""
    lesson = LessonFactory(team=team, confidence=0.5)
    before = JsonClient(team_key[1]).get(f"/lessons/{lesson.pk}")["ETag"]
    first, second = _race(monkeypatch, team_key[1], lesson, {"confidence": 0.9}, {"confidence": 0.5})
    assert (first.status_code, second.status_code) == (200, 200), (first.content, second.content)
    assert Lesson.objects.get(pk=lesson.pk).confidence == 0.5
    read = JsonClient(team_key[1]).get(f"/lessons/{lesson.pk}")
    assert second.json()["confidence"] == read.json()["confidence"] == 0.5
    assert second["ETag"] == read["ETag"] and len({before, first["ETag"], second["ETag"]}) == 3


def _terms(count: int, length: int) -> list[str]:
    # random, so the index cannot compress them: past the budget, the row did not fit its btree entry
    return [secrets.token_hex(length)[:length] for _ in range(count)]


def test_two_term_lists_that_fit_alone_are_held_to_the_budget_together(monkeypatch, team_key, team):
    """Each PATCH's lists fitted the budget against the copy it read; together the row stored 100
    entries and 2,800 bytes (an export the import refuses), or the database refused the index entry
    with a 422 naming no field."""
    lesson = LessonFactory(team=team)
    tags, tech_stacks = _terms(50, 28), _terms(50, 29)
    first, second = _race(monkeypatch, team_key[1], lesson, {"tags": tags}, {"tech_stacks": tech_stacks})
    assert first.status_code == 200, first.content
    assert second.status_code == 422, second.content
    [error] = second.json()["errors"]
    assert error["field"] == "tech_stacks"
    assert error["message"] == (
        f"tags, tech stacks and project types hold at most {MAX_TERMS_PER_ROW} entries and "
        f"{MAX_TERM_BYTES_PER_ROW:,} bytes of text (UTF-8) together; this lesson has 100 and 2,850"
    )
    stored = Lesson.objects.get(pk=lesson.pk)
    assert (stored.tags, stored.tech_stacks) == (tags, [])
    assert sum(len(term.encode()) for term in [*stored.tags, *stored.tech_stacks]) <= MAX_TERM_BYTES_PER_ROW
