import re

import pytest
from django.urls import reverse

from lessons.models import Lesson, Memory
from lessons.services.lessons import lesson_propose, lesson_reject
from lessons.services.memories import memory_create
from tests.factories import LessonFactory

pytestmark = pytest.mark.django_db


def test_admin_lists_and_searches(admin_client, team):
    LessonFactory(team=team, title="Enable RLS everywhere", tags=["rls"])
    memory_create(team=team, content="Panic attack on the tram")
    for name in ("admin:lessons_team_changelist", "admin:lessons_lesson_changelist", "admin:lessons_memory_changelist"):
        assert admin_client.get(reverse(name)).status_code == 200
    response = admin_client.get(reverse("admin:lessons_lesson_changelist"), {"q": "RLS"})
    assert b"Enable RLS everywhere" in response.content


def test_admin_edit_of_memory_text_makes_a_version(admin_client, team):
    memory = memory_create(team=team, content="Tom plays bass", importance=6)
    url = reverse("admin:lessons_memory_change", args=[memory.pk])
    form = {
        "team": team.pk,
        "external_id": "",
        "content": "Tom switched to double bass",
        "details": "",
        "categories": "person",
        "importance": 6,
        "people": "Tom",
        "emotions": "",
        "occurred_at_0": "",
        "occurred_at_1": "",
        "previous_versions-TOTAL_FORMS": 0,
        "previous_versions-INITIAL_FORMS": 0,
    }
    response = admin_client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    memory.refresh_from_db()
    assert (memory.content, memory.version) == ("Tom switched to double bass", 2)
    assert Memory.objects.get(current_version=memory).content == "Tom plays bass"


def test_admin_add_lesson_goes_through_the_service(admin_client, team):
    form = {
        "team": team.pk,
        "title": "  Pin your base images  ",
        "category": "deployment",
        "status": "confirmed",
        "description": "",
        "context": "",
        "recommendation": "",
        "confidence": 0.8,
        "frequency": 2,
        "project_types": "",
        "tech_stacks": "Docker",
        "tags": "",
        "external_id": "",
    }
    response = admin_client.post(reverse("admin:lessons_lesson_add"), form)
    assert response.status_code == 302, response.content.decode()[:2000]
    lesson = Lesson.objects.get()
    assert (lesson.title, lesson.tech_stacks) == ("Pin your base images", ["docker"])


def test_admin_accept_action(admin_client, team):
    proposal = LessonFactory(team=team, status="proposed")
    admin_client.post(
        reverse("admin:lessons_lesson_changelist"),
        {"action": "accept_selected", "_selected_action": [proposal.pk], "confirm": "yes"},
    )
    proposal.refresh_from_db()
    assert proposal.status == "confirmed"


def test_admin_carries_the_product_name_and_links_the_api_docs(admin_client):
    page = admin_client.get(reverse("admin:index")).content.decode()
    assert "Memory Store" in page and "Django administration" not in page
    assert 'href="/api/v1/docs"' in page
    assert 'href="/admin/lessons/search/"' in page  # the search playground, from every admin page


def test_people_are_typed_one_per_line_so_a_name_may_hold_a_comma(admin_client, team):
    # split at commas, "Smith, John" came back from the next save as two people
    memory = memory_create(team=team, content="Board meeting", people=["Smith, John", "Dr. Jane Doe, PhD"])
    url = reverse("admin:lessons_memory_change", args=[memory.pk])
    page = admin_client.get(url).content.decode()
    assert "Smith, John\nDr. Jane Doe, PhD</textarea>" in page
    form = {
        "team": team.pk, "external_id": "", "content": "Board meeting", "details": "", "categories": "event",
        "importance": 5, "people": "Smith, John\r\nDr. Jane Doe, PhD\r\n\r\nBob\r\n", "emotions": "",
        "occurred_at_0": "", "occurred_at_1": "",
        "previous_versions-TOTAL_FORMS": 0, "previous_versions-INITIAL_FORMS": 0,
    }
    response = admin_client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    memory.refresh_from_db()
    assert memory.people == ["Smith, John", "Dr. Jane Doe, PhD", "Bob"]


@pytest.mark.parametrize("invisible", ["\u200b", "\ufeff \u2060", "\u200d", "\u00ad"])
def test_a_title_of_only_invisible_characters_is_refused_on_its_field_not_a_500(admin_client, team, invisible):
    response = admin_client.post(reverse("admin:lessons_lesson_add"), {
        "team": team.pk, "title": invisible, "category": "workflow", "status": "confirmed", "description": "",
        "context": "", "recommendation": "", "confidence": 0.5, "frequency": 1, "project_types": "",
        "tech_stacks": "", "tags": "", "external_id": "",
    })
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["title"] == ["This field is required."]
    assert not Lesson.objects.exists()


def test_a_form_opened_before_another_curators_decision_cannot_undo_it(admin_client, team):
    """Curator A opens a proposal, curator B rejects it, A edits the context and saves: A's form
    wrote "proposed" back over B's decision. It is refused now, and says why."""
    proposal = lesson_propose(team=team, title="Pin your base images", category="deployment")
    url = reverse("admin:lessons_lesson_change", args=[proposal.pk])
    page = admin_client.get(url).content.decode()
    [opened_at] = re.findall(r'name="opened_at" value="([^"]+)"', page)
    lesson_reject(lesson=proposal)  # curator B
    form = {
        "team": team.pk, "title": "Pin your base images", "category": "deployment", "status": "proposed",
        "description": "", "context": "Our CI rebuilt images nightly.", "recommendation": "", "confidence": 0.5,
        "frequency": 1, "project_types": "", "tech_stacks": "", "tags": "", "external_id": "", "opened_at": opened_at,
    }
    response = admin_client.post(url, form)
    assert response.status_code == 200  # the form again, with the reason
    assert "was changed by someone else" in response.content.decode()
    proposal.refresh_from_db()
    assert (proposal.status, proposal.context) == ("rejected", "")
    # Opened again, the same edit saves, and keeps B's decision unless A changes it.
    [opened_at] = re.findall(r'name="opened_at" value="([^"]+)"', admin_client.get(url).content.decode())
    response = admin_client.post(url, {**form, "status": "rejected", "opened_at": opened_at})
    assert response.status_code == 302, response.content.decode()[:2000]
    proposal.refresh_from_db()
    assert (proposal.status, proposal.context) == ("rejected", "Our CI rebuilt images nightly.")


def test_a_category_stored_otherwise_than_typed_is_said_so(admin_client, team):
    """"Not Lower" was stored as "not lower" without a word; the lower case stays, and is said."""
    form = {
        "team": team.pk, "title": "Pin your base images", "category": "Not Lower", "status": "confirmed",
        "description": "", "context": "", "recommendation": "", "confidence": 0.5, "frequency": 1,
        "project_types": "", "tech_stacks": "Docker, docker", "tags": "", "external_id": "",
    }
    response = admin_client.post(reverse("admin:lessons_lesson_add"), form, follow=True)
    lesson = Lesson.objects.get()
    assert (lesson.category, lesson.tech_stacks) == ("not lower", ["docker"])
    messages = [str(message) for message in response.context["messages"]]
    assert any("category “Not Lower” as “not lower”" in text and "tech stacks “Docker, docker” as “docker”" in text
               for text in messages), messages
    # an edit that types what is stored says nothing more than Django's "changed successfully"
    url = reverse("admin:lessons_lesson_change", args=[lesson.pk])
    [opened_at] = re.findall(r'name="opened_at" value="([^"]+)"', admin_client.get(url).content.decode())
    response = admin_client.post(url, {**form, "category": "not lower", "tech_stacks": "docker",
                                       "opened_at": opened_at}, follow=True)
    assert not [text for text in map(str, response.context["messages"]) if "stored in lower case" in text]


def test_a_memorys_categories_stored_otherwise_than_typed_are_said_so(admin_client, team):
    form = {
        "team": team.pk, "external_id": "", "content": "Board meeting", "details": "", "categories": "Work",
        "importance": 5, "people": "", "emotions": "Proud", "occurred_at_0": "", "occurred_at_1": "",
    }
    response = admin_client.post(reverse("admin:lessons_memory_add"), form, follow=True)
    assert Memory.objects.get().categories == ["work"]
    assert any("categories “Work” as “work”; emotions “Proud” as “proud”" in str(message)
               for message in response.context["messages"])


@pytest.mark.django_db(transaction=True)
def test_a_change_made_between_the_forms_check_and_its_save_is_not_lost(admin_client, team, monkeypatch):
    """The stale-page check compared the page's moment with the row as read before the form, without
    a lock: a change landing between that check and the save was overwritten (the curator's 0.7 over
    another writer's 0.9, unrefused). The row is now locked from the check to the save, so the other
    writer waits, and writes after the curator's save instead of under it."""
    import threading

    from django.db import connection

    from lessons.admin.common import ServiceTextForm
    from lessons.services.lessons import lesson_update

    lesson = LessonFactory(team=team, title="Pin your base images", category="deployment", confidence=0.5)
    url = reverse("admin:lessons_lesson_change", args=[lesson.pk])
    [opened_at] = re.findall(r'name="opened_at" value="([^"]+)"', admin_client.get(url).content.decode())
    checked, other_done = threading.Event(), threading.Event()
    clean = ServiceTextForm.clean

    def checked_then_other_writer(self):
        cleaned = clean(self)
        checked.set()
        other_done.wait(1)  # the other writer's change lands here unless the row is locked
        return cleaned

    def other_writer():
        try:
            assert checked.wait(10)
            lesson_update(lesson=Lesson.objects.get(pk=lesson.pk), confidence=0.9)
            other_done.set()
        finally:
            connection.close()

    monkeypatch.setattr(ServiceTextForm, "clean", checked_then_other_writer)
    writer = threading.Thread(target=other_writer)
    writer.start()
    form = {
        "team": team.pk, "title": "Pin your base images", "category": "deployment", "status": "confirmed",
        "description": "", "context": "Nightly rebuilds", "recommendation": "", "confidence": 0.7,
        "frequency": 1, "project_types": "", "tech_stacks": "", "tags": "", "external_id": "", "opened_at": opened_at,
    }
    response = admin_client.post(url, form)
    writer.join(10)
    assert response.status_code == 302 and other_done.is_set()
    lesson.refresh_from_db()
    assert (lesson.context, lesson.confidence) == ("Nightly rebuilds", 0.9)  # the other writer came after


def test_a_form_opened_before_the_row_was_deleted_does_not_bring_it_back(admin_client, team):
    lesson = LessonFactory(team=team, title="Pin your base images", category="deployment")
    url = reverse("admin:lessons_lesson_change", args=[lesson.pk])
    page = admin_client.get(url)
    [opened_at] = re.findall(r'name="opened_at" value="([^"]+)"', page.content.decode())
    drawn = page.context["adminform"].form
    form = type(drawn)(data={"title": lesson.title, "opened_at": opened_at}, instance=drawn.instance)
    Lesson.objects.filter(pk=lesson.pk).delete()  # between the admin reading it and the form's check
    assert not form.is_valid()
    assert "was deleted or merged away by someone else" in str(form.non_field_errors())


def test_a_title_is_measured_as_it_is_stored_as_the_api_measures_it(admin_client, team):
    """"e" and a combining accent, 200 times: 400 characters typed, 200 once stored (NFC). The admin
    refused it as over 300 while the API stored it; a title over 300 once stored is still refused."""
    lesson_form = {
        "team": team.pk, "category": "workflow", "status": "confirmed", "description": "", "context": "",
        "recommendation": "", "confidence": 0.5, "frequency": 1, "project_types": "", "tech_stacks": "",
        "tags": "", "external_id": "",
    }
    response = admin_client.post(reverse("admin:lessons_lesson_add"), {**lesson_form, "title": "e\u0301" * 200})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Lesson.objects.get().title == "\u00e9" * 200
    response = admin_client.post(reverse("admin:lessons_lesson_add"), {**lesson_form, "title": "e\u0301" * 301})
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["title"] == [
        "Ensure this value has at most 300 characters (it has 301)."]
    assert Lesson.objects.count() == 1
