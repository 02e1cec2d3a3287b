"""The lesson and memory lists' actions: accepting asks first, accepting and rejecting touch only
proposals, bulk delete goes through the delete services."""

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from lessons.models import Lesson, Memory
from lessons.services import lessons as lesson_services
from lessons.services import memories as memory_services
from lessons.services.memories import memory_create, memory_update
from tests.factories import LessonFactory

pytestmark = pytest.mark.django_db

LESSONS = reverse("admin:lessons_lesson_changelist")
MEMORIES = reverse("admin:lessons_memory_changelist")


@pytest.fixture
def mixed(team):
    return {
        "proposed": LessonFactory(team=team, title="Proposal: cache the tokenizer", status="proposed"),
        "proposed_2": LessonFactory(team=team, title="Proposal: pin the model version", status="proposed"),
        "rejected": LessonFactory(team=team, title="Rejected: disable CSRF", status="rejected"),
        "confirmed": LessonFactory(team=team, title="Confirmed: use transactions", status="confirmed"),
    }


def _statuses():
    return dict(Lesson.objects.values_list("title", "status"))


def test_accept_asks_first_and_lists_what_will_change(admin_client, mixed):
    before = _statuses()
    response = admin_client.post(
        LESSONS, {"action": "accept_selected", "_selected_action": [lesson.pk for lesson in mixed.values()]}
    )
    assert response.status_code == 200
    assert _statuses() == before  # nothing changed yet
    page = response.content.decode()
    assert "These 2 proposals will become <strong>confirmed</strong>" in page
    assert "Proposal: cache the tokenizer" in page and "proposed → confirmed" in page
    assert "2 selected lessons are not a proposal and will not change" in page
    assert "Rejected: disable CSRF" in page and "(rejected)" in page
    # Only the proposals are carried into the confirming form.
    assert page.count('name="_selected_action"') == 2


def test_confirmed_accept_applies_to_proposals_only(admin_client, mixed):
    response = admin_client.post(
        LESSONS,
        {"action": "accept_selected", "_selected_action": [lesson.pk for lesson in mixed.values()], "confirm": "yes"},
        follow=True,
    )
    # the confirmation posts back only the proposals it listed, so the other two count as decided since
    assert [str(message) for message in get_messages(response.wsgi_request)] == [
        "2 proposal(s) accepted. 2 had changed status meanwhile and were left alone."]
    assert _statuses() == {
        "Proposal: cache the tokenizer": "confirmed",
        "Proposal: pin the model version": "confirmed",
        "Rejected: disable CSRF": "rejected",  # not revived
        "Confirmed: use transactions": "confirmed",
    }


def test_accept_of_no_proposal_says_so_and_changes_nothing(admin_client, mixed):
    response = admin_client.post(
        LESSONS, {"action": "accept_selected", "_selected_action": [mixed["rejected"].pk], "confirm": "yes"}, follow=True
    )
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "Nothing to accept: since this page was opened, 1 was accepted or rejected."]
    assert _statuses()["Rejected: disable CSRF"] == "rejected"
    # chosen from the list (no confirmation yet): the selection itself holds no proposal
    response = admin_client.post(LESSONS, {"action": "accept_selected", "_selected_action": [mixed["rejected"].pk]},
                                 follow=True)
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "None of the selected lessons is a proposal: nothing to accept."]


def test_a_confirmation_whose_proposals_went_meanwhile_says_what_happened(admin_client, mixed):
    decided, merged = mixed["proposed"], mixed["proposed_2"]
    Lesson.objects.filter(pk=decided.pk).update(status="rejected")
    Lesson.objects.filter(pk=merged.pk).delete()
    response = admin_client.post(
        LESSONS, {"action": "accept_selected", "_selected_action": [decided.pk, merged.pk], "confirm": "yes"},
        follow=True,
    )
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "Nothing to accept: since this page was opened, 1 was accepted or rejected and 1 no longer exists "
        "(merged or deleted)."]


@pytest.mark.parametrize("service, decided_meanwhile", [
    (lesson_services.lesson_accept_proposals, "rejected"),
    (lesson_services.lesson_reject_proposals, "confirmed"),
])
def test_accept_and_reject_services_skip_a_proposal_decided_meanwhile(mixed, service, decided_meanwhile):
    proposal = mixed["proposed"]
    Lesson.objects.filter(pk=proposal.pk).update(status=decided_meanwhile)
    changed = service(lesson_ids=[proposal.pk, mixed["proposed_2"].pk])
    assert [lesson.title for lesson in changed] == ["Proposal: pin the model version"]
    assert Lesson.objects.get(pk=proposal.pk).status == decided_meanwhile


def test_bulk_delete_of_lessons_goes_through_the_delete_service(admin_client, mixed, monkeypatch):
    deleted = []
    original = lesson_services.lesson_delete
    monkeypatch.setattr(lesson_services, "lesson_delete", lambda *, lesson: deleted.append(lesson.pk) or original(lesson=lesson))
    chosen = [mixed["rejected"].pk, mixed["confirmed"].pk]
    response = admin_client.post(LESSONS, {"action": "delete_selected", "_selected_action": chosen, "post": "yes"})
    assert response.status_code == 302
    assert sorted(deleted) == sorted(chosen)
    assert set(_statuses()) == {"Proposal: cache the tokenizer", "Proposal: pin the model version"}


def test_bulk_delete_is_all_or_nothing(admin_client, mixed, monkeypatch):
    calls = []

    def failing_delete(*, lesson):
        calls.append(lesson.pk)
        if len(calls) == 2:
            raise RuntimeError("the database went away")
        lesson.delete()

    monkeypatch.setattr(lesson_services, "lesson_delete", failing_delete)
    with pytest.raises(RuntimeError):
        lesson_services.lesson_delete_many(lessons=Lesson.objects.filter(pk__in=[mixed["rejected"].pk, mixed["confirmed"].pk]))
    assert len(calls) == 2 and len(_statuses()) == 4  # the first delete was rolled back


def test_bulk_delete_of_memories_goes_through_the_delete_service(admin_client, team, monkeypatch):
    first = memory_update(memory=memory_create(team=team, content="Tom plays bass"), content="Tom plays double bass")
    second = memory_create(team=team, content="Ana moved to Lisbon")
    kept = memory_create(team=team, content="Sam likes climbing")
    deleted = []
    original = memory_services.memory_delete
    monkeypatch.setattr(memory_services, "memory_delete", lambda *, memory: deleted.append(memory.pk) or original(memory=memory))
    response = admin_client.post(MEMORIES, {"action": "delete_selected", "_selected_action": [first.pk, second.pk], "post": "yes"})
    assert response.status_code == 302
    assert sorted(deleted) == sorted([first.pk, second.pk])
    assert list(Memory.objects.values_list("pk", flat=True)) == [kept.pk]  # versions went with their memory


def test_reject_applies_to_proposals_only_and_says_what_it_left(admin_client, mixed):
    selected = [lesson.pk for lesson in mixed.values()]
    response = admin_client.post(LESSONS, {"action": "reject_selected", "_selected_action": selected}, follow=True)
    assert [str(message) for message in get_messages(response.wsgi_request)] == [
        "2 proposal(s) rejected. 2 selected lesson(s) were not proposals and were left alone"
        " (a confirmed lesson is retired on its own page)."
    ]
    assert _statuses() == {
        "Proposal: cache the tokenizer": "rejected",
        "Proposal: pin the model version": "rejected",
        "Rejected: disable CSRF": "rejected",
        "Confirmed: use transactions": "confirmed",  # not hidden from every search by a bulk click
    }


def test_reject_of_no_proposal_says_so_and_changes_nothing(admin_client, mixed):
    before = _statuses()
    response = admin_client.post(
        LESSONS, {"action": "reject_selected", "_selected_action": [mixed["confirmed"].pk]}, follow=True
    )
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "None of the selected lessons is a proposal: nothing to reject."
    ]
    assert _statuses() == before


@pytest.mark.parametrize("changelist", [
    LESSONS, MEMORIES, reverse("admin:lessons_team_changelist"), reverse("admin:lessons_apikey_changelist"),
    reverse("admin:lessons_duplicatedismissal_changelist"), reverse("admin:lessons_searchrecord_changelist"),
])
@pytest.mark.parametrize("selected", ["abc", "1.5", str(2**63), "\u0663"])  # the last: an Arabic-Indic 3
def test_a_selection_that_is_not_ids_is_a_message_not_a_500(admin_client, mixed, changelist, selected):
    # a crafted or truncated form: Django filtered the list on it and answered 500
    response = admin_client.post(changelist, {"action": "delete_selected", "_selected_action": [selected]},
                                 follow=True)
    assert response.status_code == 200
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "The selection holds something that is not a row's id; nothing was done. Select the rows again."]
    assert Lesson.objects.count() == 4


def test_a_selection_of_rows_gone_meanwhile_is_not_called_done(admin_client, mixed):
    gone = mixed["confirmed"].pk
    lesson_services.lesson_delete(lesson=mixed["confirmed"])
    response = admin_client.post(LESSONS, {"action": "reembed_selected", "_selected_action": [gone]}, follow=True)
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "None of the selected rows exists any more; nothing was done. Select the rows again."]
