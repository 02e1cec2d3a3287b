"""Curation steps leave the admin's history, as a form's save does: accepting and rejecting (the
proposals page and the list actions), merging (proposals page, both duplicates pages) and
restoring a memory's version. Before, a row's History page said "This object doesn't have a change
history" and "Recent actions" showed only form edits."""

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.urls import reverse

from lessons.models import Lesson, Memory
from lessons.services.memories import memory_create, memory_update
from tests.curation_data import DOCKER_PIN, DOCKER_PIN_AGAIN, lesson

pytestmark = pytest.mark.django_db

LESSONS = reverse("admin:lessons_lesson_changelist")
PROPOSALS = reverse("admin:lessons_lesson_proposals")
DUPLICATES = reverse("admin:lessons_lesson_duplicates")
MEMORY_DUPLICATES = reverse("admin:lessons_memory_duplicates")


def history_of(row) -> list[tuple[int, str]]:
    """The row's entries in the admin's log, oldest first: (action flag, message)."""
    entries = LogEntry.objects.filter(
        content_type=ContentType.objects.get_for_model(type(row)), object_id=str(row.pk)
    ).order_by("action_time", "pk")
    return [(entry.action_flag, entry.get_change_message()) for entry in entries]


def history_page(client, row) -> str:
    url = reverse(f"admin:lessons_{type(row)._meta.model_name}_history", args=[row.pk])
    return client.get(url).content.decode()


@pytest.mark.parametrize("action, message", [("accept", "Accepted the proposal."), ("reject", "Rejected the proposal.")])
def test_deciding_on_the_proposals_page_is_in_the_lessons_history(admin_client, admin_user, team, action, message):
    proposal = lesson(team, DOCKER_PIN, status="proposed")
    admin_client.post(PROPOSALS, {"proposal": proposal.pk, "action": action})
    assert history_of(proposal) == [(CHANGE, message)]
    assert LogEntry.objects.get().user == admin_user
    page = history_page(admin_client, proposal)
    assert message in page and "doesn’t have a change history" not in page


def test_the_list_actions_log_each_proposal_they_decide(admin_client, team):
    first, second = lesson(team, DOCKER_PIN, status="proposed"), lesson(team, DOCKER_PIN_AGAIN, status="proposed")
    confirmed = lesson(team, {"title": "Index foreign keys"})
    admin_client.post(LESSONS, {"action": "accept_selected", "_selected_action": [first.pk, confirmed.pk],
                                "confirm": "yes"})
    admin_client.post(LESSONS, {"action": "reject_selected", "_selected_action": [second.pk, confirmed.pk]})
    assert history_of(first) == [(CHANGE, "Accepted the proposal.")]
    assert history_of(second) == [(CHANGE, "Rejected the proposal.")]
    assert history_of(confirmed) == []  # left alone, so not logged


@pytest.mark.parametrize("button, whose", [("merge_into", "this lesson's text kept"),
                                           ("merge_into_with_text", "the proposal's text taken")])
def test_a_merge_on_the_proposals_page_is_logged_on_both_lessons(admin_client, team, button, whose):
    proposal = lesson(team, DOCKER_PIN, status="proposed")
    target = lesson(team, DOCKER_PIN_AGAIN)
    admin_client.post(PROPOSALS, {"proposal": proposal.pk, button: target.pk})
    target.refresh_from_db()
    assert history_of(target) == [
        (CHANGE, f"Merged proposal #{proposal.pk} “{DOCKER_PIN['title']}” into this lesson ({whose}).")
    ]
    # the merged-away row is deleted: logged as a deletion that says where it went ("Recent actions")
    assert history_of(proposal) == [(DELETION, f"Merged into lesson #{target.pk} “{target.title}”.")]
    assert f"Merged proposal #{proposal.pk}" in history_page(admin_client, target)


def test_a_merge_on_the_lesson_duplicates_page_is_logged_on_both_lessons(admin_client, team):
    kept, other = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN)
    admin_client.post(DUPLICATES, {"action": "merge", "first": kept.pk, "second": other.pk, "keep": kept.pk,
                                   "text_from": other.pk})
    assert not Lesson.objects.filter(pk=other.pk).exists()
    kept.refresh_from_db()
    assert history_of(kept) == [
        (CHANGE, f"Merged lesson #{other.pk} “{DOCKER_PIN_AGAIN['title']}” into this lesson (its text taken).")
    ]
    assert history_of(other) == [(DELETION, f"Merged into lesson #{kept.pk} “{kept.title}”.")]
    index = admin_client.get(reverse("admin:index")).content.decode()  # "Recent actions"
    assert DOCKER_PIN_AGAIN["title"] in index


def test_a_merge_on_the_memory_duplicates_page_is_logged_on_both_memories(admin_client, team):
    kept = memory_create(team=team, content="Tom plays bass")
    other = memory_create(team=team, content="Tom is a bassist")
    admin_client.post(MEMORY_DUPLICATES, {"action": "merge", "first": kept.pk, "second": other.pk, "keep": kept.pk})
    assert not Memory.objects.filter(pk=other.pk).exists()
    assert history_of(kept) == [(CHANGE, f"Merged memory #{other.pk} “Tom is a bassist” into this memory.")]
    assert history_of(other) == [(DELETION, f"Merged into memory #{kept.pk}.")]
    assert "Merged memory" in history_page(admin_client, kept)


def test_restoring_a_version_is_in_the_memorys_history(admin_client, team):
    memory = memory_create(team=team, content="First words")
    memory_update(memory=memory, content="Second words")
    first = Memory.objects.get(current_version=memory, version=1)
    admin_client.post(reverse("admin:lessons_memory_restore_version", args=[memory.pk, first.pk]))
    memory.refresh_from_db()
    assert memory.version == 3
    assert history_of(memory) == [(CHANGE, "Restored version 1 (the replaced text is version 2).")]
    assert "Restored version 1" in history_page(admin_client, memory)


def test_a_refused_step_logs_nothing(admin_client, team):
    proposal = lesson(team, DOCKER_PIN, status="proposed")
    admin_client.post(PROPOSALS, {"proposal": proposal.pk, "action": "accept"})
    admin_client.post(PROPOSALS, {"proposal": proposal.pk, "action": "reject"})  # "already been handled"
    assert history_of(proposal) == [(CHANGE, "Accepted the proposal.")]
