"""A list action judges the rows the curator ticked by their ids, whatever the list's filters say
now: the confirmation posts back to the list's URL, Django rebuilt the selection from the filtered
list, and on `?status__exact=proposed` a proposal rejected meanwhile from another tab dropped out
of it and was reported as "no longer exists (merged or deleted)" although it was there, rejected."""

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from lessons.models import Lesson
from lessons.services.lessons import lesson_delete
from tests.factories import LessonFactory

pytestmark = pytest.mark.django_db

LESSONS = reverse("admin:lessons_lesson_changelist")
PROPOSED = f"{LESSONS}?status__exact=proposed"
TESTING = f"{LESSONS}?category__exact=testing"
EVERY_LIST = pytest.mark.parametrize("listed", [LESSONS, PROPOSED, TESTING], ids=["unfiltered", "proposed", "testing"])


def _proposals(team, count=2):
    return [LessonFactory(team=team, title=f"Proposal {number}", category="testing", status="proposed")
            for number in range(count)]


def _said(response) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def _accept(client, listed, ids):
    """The list's "Accept selected proposals…", then the confirmation's "Yes" (after `meanwhile`)."""
    asked = client.post(listed, {"action": "accept_selected", "_selected_action": ids})
    assert f"Yes, accept {len(ids)}" in asked.content.decode()
    return lambda: client.post(listed, {"action": "accept_selected", "_selected_action": ids, "confirm": "yes"},
                               follow=True)


@EVERY_LIST
def test_an_accept_names_a_proposal_rejected_meanwhile_as_left_alone(admin_client, team, listed):
    first, second = _proposals(team)
    confirm = _accept(admin_client, listed, [first.pk, second.pk])
    Lesson.objects.filter(pk=second.pk).update(status="rejected")  # another tab
    assert _said(confirm()) == ["1 proposal(s) accepted. 1 had changed status meanwhile and was left alone."]
    assert dict(Lesson.objects.values_list("pk", "status")) == {first.pk: "confirmed", second.pk: "rejected"}


@EVERY_LIST
def test_an_accept_names_a_proposal_deleted_meanwhile_as_gone(admin_client, team, listed):
    first, second = _proposals(team)
    confirm = _accept(admin_client, listed, [first.pk, second.pk])
    lesson_delete(lesson=second)
    assert _said(confirm()) == ["1 proposal(s) accepted. 1 no longer exists (merged or deleted)."]


@EVERY_LIST
def test_accepting_one_proposal_rejected_meanwhile_says_it_was_decided(admin_client, team, listed):
    (proposal,) = _proposals(team, count=1)
    confirm = _accept(admin_client, listed, [proposal.pk])
    Lesson.objects.filter(pk=proposal.pk).update(status="rejected")
    assert _said(confirm()) == ["Nothing to accept: since this page was opened, 1 was accepted or rejected."]
    assert Lesson.objects.get(pk=proposal.pk).status == "rejected"


def test_a_proposal_that_left_the_lists_filter_meanwhile_is_still_accepted_as_confirmed(admin_client, team):
    first, second = _proposals(team)
    confirm = _accept(admin_client, TESTING, [first.pk, second.pk])
    Lesson.objects.filter(pk=second.pk).update(category="workflow")  # an edit elsewhere; still a proposal
    assert _said(confirm()) == ["2 proposal(s) accepted."]
    assert set(Lesson.objects.values_list("status", flat=True)) == {"confirmed"}


@EVERY_LIST
def test_a_reject_says_how_many_selected_lessons_it_left_alone(admin_client, team, listed):
    first, second, third = _proposals(team, count=3)
    Lesson.objects.filter(pk=second.pk).update(status="confirmed")  # accepted from another tab
    lesson_delete(lesson=third)
    response = admin_client.post(listed, {"action": "reject_selected",
                                          "_selected_action": [first.pk, second.pk, third.pk]}, follow=True)
    assert _said(response) == [
        "1 proposal(s) rejected. 1 selected lesson(s) were not proposals and were left alone (a confirmed lesson "
        "is retired on its own page). 1 no longer exists (merged or deleted)."]
    assert dict(Lesson.objects.values_list("pk", "status")) == {first.pk: "rejected", second.pk: "confirmed"}


@EVERY_LIST
def test_a_reject_of_lessons_all_decided_meanwhile_says_none_is_a_proposal(admin_client, team, listed):
    (proposal,) = _proposals(team, count=1)
    Lesson.objects.filter(pk=proposal.pk).update(status="confirmed")
    response = admin_client.post(listed, {"action": "reject_selected", "_selected_action": [proposal.pk]},
                                 follow=True)
    assert _said(response) == ["None of the selected lessons is a proposal: nothing to reject."]
    assert Lesson.objects.get(pk=proposal.pk).status == "confirmed"


@EVERY_LIST
@pytest.mark.parametrize("action", ["accept_selected", "reject_selected"])
def test_only_a_selection_whose_every_row_is_gone_is_said_to_exist_no_more(admin_client, team, listed, action):
    first, second = _proposals(team)
    lesson_delete(lesson=first)
    Lesson.objects.filter(pk=second.pk).update(status="rejected")
    response = admin_client.post(listed, {"action": action, "_selected_action": [first.pk]}, follow=True)
    assert _said(response) == ["None of the selected rows exists any more; nothing was done. Select the rows again."]
    response = admin_client.post(listed, {"action": action, "_selected_action": [first.pk, second.pk]}, follow=True)
    assert "None of the selected rows exists any more" not in " ".join(_said(response))


def test_select_all_across_a_filtered_list_still_takes_only_the_lists_rows(admin_client, team):
    testing = _proposals(team)
    other = LessonFactory(team=team, title="Another proposal", category="workflow", status="proposed")
    page = [row.pk for row in testing]
    response = admin_client.post(TESTING, {"action": "reject_selected", "_selected_action": page,
                                           "select_across": "1"}, follow=True)
    assert _said(response) == ["2 proposal(s) rejected."]
    assert Lesson.objects.get(pk=other.pk).status == "proposed"
