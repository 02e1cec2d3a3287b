"""Learning from use in the admin: counts in the lesson and memory lists (sortable), the recorded
searches with their feedback, read-only."""

import pytest
from django.urls import reverse

from lessons.models import Lesson
from lessons.services.usage import feedback_record, search_record
from tests.factories import LessonFactory, MemoryFactory

pytestmark = pytest.mark.django_db


def _used(team, row, *, times, kind="lessons"):
    for _ in range(times):
        search_id = search_record(team=team, kind=kind, operation="search", query="rls", mode="hybrid",
                                  result_ids=[row.pk], source="api")
        feedback_record(team=team, search_id=search_id, used=[row.pk])
    return search_id


def _titles_in_order(content: bytes, titles: list[str]) -> list[str]:
    text = content.decode()
    return sorted(titles, key=text.index)


def test_lesson_list_shows_and_sorts_by_use(admin_client, team):
    popular = LessonFactory(team=team, title="Popular lesson")
    LessonFactory(team=team, title="Ignored lesson")
    _used(team, popular, times=3)
    url = reverse("admin:lessons_lesson_changelist")
    page = admin_client.get(url)
    assert b"column-used_count" in page.content and b"column-returned_count" in page.content
    position = list(page.context["cl"].list_display).index("used_count")
    for direction, first in ((f"{position}", "Ignored lesson"), (f"-{position}", "Popular lesson")):
        response = admin_client.get(url, {"o": direction})
        assert response.status_code == 200
        assert _titles_in_order(response.content, ["Popular lesson", "Ignored lesson"])[0] == first


def test_memory_list_shows_use_and_the_change_form_is_read_only_for_counts(admin_client, team):
    memory = MemoryFactory(team=team, content="Sailing with Jonas")
    _used(team, memory, times=2, kind="memories")
    page = admin_client.get(reverse("admin:lessons_memory_changelist"))
    assert b"column-used_count" in page.content
    lesson = LessonFactory(team=team)
    _used(team, lesson, times=1)
    form = admin_client.get(reverse("admin:lessons_lesson_change", args=[lesson.pk]))
    assert form.status_code == 200
    assert b"Usage (reported by agents)" in form.content
    assert b'name="used_count"' not in form.content  # shown, never edited


def test_search_records_and_their_feedback_are_listed_read_only(admin_client, team):
    lesson = LessonFactory(team=team)
    search_id = _used(team, lesson, times=1)
    listing = admin_client.get(reverse("admin:lessons_searchrecord_changelist"))
    assert listing.status_code == 200 and b"rls" in listing.content
    detail = admin_client.get(reverse("admin:lessons_searchrecord_change", args=[search_id]))
    assert detail.status_code == 200 and b"used" in detail.content
    assert admin_client.get(reverse("admin:lessons_searchrecord_add")).status_code == 403
    assert Lesson.objects.get(pk=lesson.pk).used_count == 1
