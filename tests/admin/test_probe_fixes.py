"""What a curator's walk through the admin found (the change forms, history, duplicates and
re-embedding pages), each as it now behaves."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from lessons.models import Memory
from lessons.services.lessons import lesson_create
from lessons.services.memories import memory_create, memory_update

pytestmark = pytest.mark.django_db


def _lesson_form(lesson, **changes):
    form = {
        "external_id": lesson.external_id or "", "title": lesson.title, "category": lesson.category,
        "status": lesson.status, "description": lesson.description, "context": lesson.context,
        "recommendation": lesson.recommendation, "confidence": lesson.confidence, "frequency": lesson.frequency,
        "project_types": ",".join(lesson.project_types), "tech_stacks": ",".join(lesson.tech_stacks),
        "tags": ",".join(lesson.tags),
    }
    return {**form, **changes}


def test_a_rows_team_is_read_only_once_it_exists_and_a_posted_team_changes_nothing(admin_client, team, other_team):
    lesson = lesson_create(team=team, title="Pin the base image digest")
    url = reverse("admin:lessons_lesson_change", args=[lesson.pk])
    page = admin_client.get(url).content.decode()
    assert 'name="team"' not in page and "Acme" in page
    # the form posted with another team (the field was editable and answered a 500)
    response = admin_client.post(url, _lesson_form(lesson, team=other_team.pk, title="Pin base image digests"))
    assert response.status_code == 302, response.content.decode()[:1500]
    lesson.refresh_from_db()
    assert (lesson.team, lesson.title) == (team, "Pin base image digests")

    memory = memory_create(team=team, content="Met Ana at the gym")
    memory_page = admin_client.get(reverse("admin:lessons_memory_change", args=[memory.pk])).content.decode()
    assert 'name="team"' not in memory_page
    assert 'name="team"' in admin_client.get(reverse("admin:lessons_lesson_add")).content.decode()


def test_the_number_inputs_say_the_models_bounds_and_each_message_once(admin_client, team):
    lesson = lesson_create(team=team, title="Pin the base image digest")
    url = reverse("admin:lessons_lesson_change", args=[lesson.pk])
    page = admin_client.get(url).content.decode()
    assert 'name="frequency"' in page and 'min="1"' in page
    response = admin_client.post(url, _lesson_form(lesson, frequency=-1, tags=f"ok, {'t' * 65}"))
    errors = response.context["adminform"].form.errors
    assert errors["frequency"] == ["Ensure this value is greater than or equal to 1."]
    assert len(errors["tags"]) == 1 and "at most 64" in errors["tags"][0]
    memory = memory_create(team=team, content="Met Ana at the gym")
    memory_page = admin_client.get(reverse("admin:lessons_memory_change", args=[memory.pk])).content.decode()
    assert 'name="importance"' in memory_page and 'min="1"' in memory_page and 'max="10"' in memory_page
    # the date and time inputs are labelled for screen readers (the stock ones had plain text beside)
    assert 'aria-label="Occurred at: date"' in memory_page and 'aria-label="Occurred at: time"' in memory_page


def _history_times(page: str) -> list[str]:
    import re

    return re.findall(r'<span class="when">([^<]+)</span>', page)


def test_the_history_dates_each_version_when_its_text_was_written(admin_client, team):
    started = timezone.now() - timedelta(days=3)
    memory = memory_create(team=team, content="First words")
    Memory.objects.filter(pk=memory.pk).update(created_at=started)
    memory.refresh_from_db()
    memory_update(memory=memory, content="Second words")
    second_written = Memory.objects.get(current_version=memory).updated_at
    Memory.objects.filter(current_version=memory).update(updated_at=started + timedelta(days=1))
    memory_update(memory=memory, importance=9)  # moves the current row's updated_at, not its text
    Memory.objects.filter(pk=memory.pk).update(updated_at=started + timedelta(days=2))
    page = admin_client.get(reverse("admin:lessons_memory_change", args=[memory.pk])).content.decode()
    assert second_written  # the archive wrote it
    fmt = "%-d %b %Y, %H:%M"
    local = timezone.localtime
    assert _history_times(page) == [
        f"written {local(started).strftime(fmt)}",
        f"since {local(started + timedelta(days=1)).strftime(fmt)}",
    ]
    assert 'id="content-history" style="clear: both"' in page  # the "Versions" link lands on it


def test_an_earlier_version_has_no_delete_button_and_cannot_be_deleted_alone(admin_client, team):
    memory = memory_create(team=team, content="First words")
    memory_update(memory=memory, content="Second words")
    memory_update(memory=memory, content="Third words")
    middle = Memory.objects.get(current_version=memory, version=2)
    page = admin_client.get(reverse("admin:lessons_memory_change", args=[middle.pk])).content.decode()
    assert "deletelink" not in page
    delete = reverse("admin:lessons_memory_delete", args=[middle.pk])
    why = f"version 2 of memory #{memory.pk} is part of its memory's history"
    for method in (admin_client.get, admin_client.post):  # the page, and its confirmation posted anyway
        refused = method(delete, {"post": "yes"}, follow=True)
        assert refused.redirect_chain[-1][0] == reverse("admin:lessons_memory_change", args=[middle.pk])
        assert any(why in str(message) for message in refused.context["messages"])
    # Under "Earlier versions" the action is not offered; under "Both" a selection holding one is refused.
    earlier = reverse("admin:lessons_memory_changelist") + "?version_state=earlier"
    offered = admin_client.post(earlier, {"action": "delete_selected", "_selected_action": [middle.pk]}, follow=True)
    assert [str(message) for message in offered.context["messages"]] == [
        "“Delete selected memories” is not offered on this list. Nothing was changed."
    ]
    changelist = reverse("admin:lessons_memory_changelist") + "?version_state=all"
    for confirm in ({}, {"post": "yes"}):
        asked = admin_client.post(
            changelist, {"action": "delete_selected", "_selected_action": [middle.pk], **confirm}, follow=True
        )
        shown = [str(message) for message in asked.context["messages"]]
        assert any(text.startswith("Nothing was deleted") and why in text for text in shown), shown
    assert Memory.objects.filter(current_version=memory).count() == 2

    # the memory itself is deleted with its versions, as before
    response = admin_client.post(reverse("admin:lessons_memory_delete", args=[memory.pk]), {"post": "yes"})
    assert response.status_code == 302
    assert not Memory.objects.exists()


def test_the_duplicate_pages_and_the_reembedding_page_speak_plainly(admin_client, team):
    memory = memory_create(team=team, content="Met Ana at the gym")
    duplicates = reverse("admin:lessons_memory_duplicates")
    response = admin_client.post(duplicates, {"action": "dismiss", "first": memory.pk, "second": memory.pk},
                                 follow=True)
    text = " ".join(str(message) for message in response.context["messages"])
    assert f"A pair is two different memories; both ids here are {memory.pk}." in text
    response = admin_client.post(duplicates, {"action": "dismiss", "first": memory.pk, "second": 999_999},
                                 follow=True)
    text = " ".join(str(message) for message in response.context["messages"])
    assert "One of these memories no longer exists" in text and "memorys" not in text

    lesson = lesson_create(team=team, title="Pin the base image digest")
    response = admin_client.post(reverse("admin:lessons_lesson_changelist"),
                                 {"action": "reembed_selected", "_selected_action": [lesson.pk]}, follow=True)
    assert "Re-embedding 1 lesson<" in response.content.decode() or "Re-embedding 1 lesson " in response.content.decode()
    assert "1 lessons" not in response.content.decode()


def test_the_teams_page_refuses_a_slug_with_capitals(admin_client, team):
    response = admin_client.post(reverse("admin:lessons_team_add"), {"slug": "ACME", "name": "Shouting Acme"})
    assert response.status_code == 200  # the form again, with the reason on the field
    assert "Use lowercase letters" in " ".join(response.context["adminform"].form.errors["slug"])
    assert list(team.__class__.objects.values_list("slug", flat=True)) == ["acme"]


def test_deleting_a_memory_with_history_names_its_versions_as_versions(admin_client, team):
    """The confirmation said "Memories: 4" and listed each version as "Memory: ...", which read as
    four memories going for one memory with three earlier versions."""
    memory = memory_create(team=team, content="First words")
    for words in ("Second words", "Third words", "Fourth words"):
        memory_update(memory=memory, content=words)
    other = memory_create(team=team, content="Another memory")
    page = admin_client.get(reverse("admin:lessons_memory_delete", args=[memory.pk]))
    assert dict(page.context["model_count"]) == {"memories": 1, "earlier versions": 3}
    assert page.content.decode().count("Earlier version: ") == 3
    bulk = admin_client.post(reverse("admin:lessons_memory_changelist"),
                             {"action": "delete_selected", "_selected_action": [memory.pk, other.pk]})
    assert dict(bulk.context["model_count"]) == {"memories": 2, "earlier versions": 3}
    alone = admin_client.get(reverse("admin:lessons_memory_delete", args=[other.pk]))
    assert dict(alone.context["model_count"]) == {"memories": 1}
