"""Staff who are not superusers get what their permissions say, by every route: the list actions,
the API keys, the search playground, the duplicate marks, and a 403 that reads like the admin."""

import pytest
from django.contrib.auth.models import Permission, User
from django.core.exceptions import PermissionDenied
from django.test import RequestFactory
from django.urls import reverse

from lessons.admin.denied import permission_denied
from lessons.models import ApiKey, DuplicateDismissal, Lesson, LessonStatus, Memory
from lessons.services.api_keys import api_key_authenticate, api_key_create
from lessons.services.curation import duplicate_dismiss
from lessons.services.memories import memory_create
from tests.curation_data import DOCKER_PIN, DOCKER_PIN_AGAIN, PANIC, PANIC_AGAIN, embed, lesson
from tests.factories import LessonFactory

pytestmark = pytest.mark.django_db

LESSONS = reverse("admin:lessons_lesson_changelist")
MEMORIES = reverse("admin:lessons_memory_changelist")
API_KEYS = reverse("admin:lessons_apikey_changelist")
PLAYGROUND = reverse("admin:lessons_search_playground")
MARKS = reverse("admin:lessons_duplicatedismissal_changelist")


def curator(client, name: str, *codenames: str):
    user = User.objects.create_user(name, password="x", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="lessons", codename__in=codenames))
    client.force_login(user)
    return client


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


@pytest.mark.parametrize("codenames", [(), ("view_lesson", "view_memory"), ("add_lesson", "change_lesson")])
def test_api_keys_are_closed_to_staff_without_a_key_permission(client, team, codenames):
    api_key, raw_key = api_key_create(team=team, name="ci bot")
    curator(client, "someone", *codenames)
    assert client.get(API_KEYS).status_code == 403
    revoke = client.post(API_KEYS, {"action": "revoke_selected", "_selected_action": [api_key.pk]})
    assert revoke.status_code == 403
    assert api_key_authenticate(raw_key=raw_key) is not None
    assert "API keys" not in client.get(reverse("admin:index")).content.decode()


def test_viewing_keys_is_not_revoking_them(client, team):
    api_key, raw_key = api_key_create(team=team, name="ci bot")
    curator(client, "auditor", "view_apikey")
    listing = client.get(API_KEYS)
    assert listing.status_code == 200 and "revoke_selected" not in listing.content.decode()
    assert "<h1>API keys</h1>" in listing.content.decode()  # not "Select API key to change"
    client.post(API_KEYS, {"action": "revoke_selected", "_selected_action": [api_key.pk]})
    assert api_key_authenticate(raw_key=raw_key) is not None
    curator(client, "keeper", "view_apikey", "change_apikey")
    client.post(API_KEYS, {"action": "revoke_selected", "_selected_action": [api_key.pk]})
    assert api_key_authenticate(raw_key=raw_key) is None
    assert f"revoked {ApiKey.objects.get().revoked_at:%-d %b %Y}" in client.get(API_KEYS).content.decode()


def test_view_only_curators_get_no_action_that_changes_rows(client, team):
    proposal = lesson(team, {"title": "Cache the build layers"}, status=LessonStatus.PROPOSED)
    memory = memory_create(team=team, content="Tom plays bass.")
    Lesson.objects.filter(pk=proposal.pk).update(embedded_at=None)
    curator(client, "viewer", "view_lesson", "view_memory")
    for url in (LESSONS, MEMORIES):
        page = client.get(url).content.decode()
        for action in ("accept_selected", "reject_selected", "reembed_selected", "delete_selected"):
            assert f'value="{action}"' not in page
    for action in ("accept_selected", "reject_selected", "reembed_selected"):
        client.post(LESSONS, {"action": action, "_selected_action": [proposal.pk], "confirm": "yes"})
    client.post(MEMORIES, {"action": "reembed_selected", "_selected_action": [memory.pk]})
    proposal.refresh_from_db()
    assert proposal.status == LessonStatus.PROPOSED and proposal.embedded_at is None
    assert client.session.get("embedding_jobs") is None  # no job was queued


def test_changing_lessons_does_not_reach_memories(client, team):
    memory = memory_create(team=team, content="Tom plays bass.")
    proposal = lesson(team, {"title": "Cache the build layers"}, status=LessonStatus.PROPOSED)
    curator(client, "lessoneditor", "view_lesson", "change_lesson", "view_memory")
    assert 'value="reembed_selected"' not in client.get(MEMORIES).content.decode()
    assert 'value="accept_selected"' in client.get(LESSONS).content.decode()
    client.post(LESSONS, {"action": "reject_selected", "_selected_action": [proposal.pk]})
    proposal.refresh_from_db()
    assert proposal.status == LessonStatus.REJECTED
    assert Memory.objects.get(pk=memory.pk).version == 1


def test_the_playground_shows_only_the_kinds_a_curator_may_view(client, team):
    lesson(team, {"title": "Pin Docker base images", "description": "Builds broke on a moved tag."})
    memory_create(team=team, content="Had a panic attack on the tram.")
    curator(client, "noperm")
    denied = client.get(PLAYGROUND, {"team": team.slug, "kind": "memories", "q": "panic"})
    assert denied.status_code == 403 and b"panic attack" not in denied.content
    assert "Search playground" not in client.get(reverse("admin:index")).content.decode()

    curator(client, "memviewer", "view_memory")
    assert "Search playground" in client.get(reverse("admin:index")).content.decode()
    page = client.get(PLAYGROUND, {"team": team.slug, "kind": "lessons", "q": "docker"})
    assert page.status_code == 200 and "Pin Docker base images" not in page.content.decode()
    assert page.context["form"].errors["kind"]
    assert [value for value, _ in page.context["form"].fields["kind"].choices] == ["memories"]
    found = client.get(PLAYGROUND, {"team": team.slug, "kind": "memories", "q": "panic attack"})
    assert "Had a panic attack on the tram." in found.content.decode()
    blank = client.get(PLAYGROUND)  # the first visit starts on the kind this curator may see
    assert blank.context["form"].initial["kind"] == "memories"


def test_a_403_in_the_admin_reads_like_the_admin(client, team):
    row = lesson(team, {"title": "Pin Docker base images"})
    curator(client, "memviewer", "view_memory")
    response = client.get(reverse("admin:lessons_lesson_change", args=[row.pk]))
    page = response.content.decode()
    assert response.status_code == 403
    assert "Permission denied" in page and 'id="site-name"' in page  # the admin's header and title
    assert "may not open this page" in page and f'href="{reverse("admin:index")}"' in page
    assert "Log out" in page  # the user tools stay, so they can sign in as someone else
    elsewhere = permission_denied(RequestFactory().get("/api/v1/lessons"), PermissionDenied())
    assert elsewhere.status_code == 403 and b"site-name" not in elsewhere.content  # Django's page outside it


def test_a_curator_who_may_dismiss_but_not_merge_gets_that_button(client, team):
    pin, pin_again = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN)
    embed(pin, pin_again)
    duplicates = reverse("admin:lessons_lesson_duplicates")
    curator(client, "lessoneditor", "view_lesson", "change_lesson")
    page = client.get(duplicates).content.decode()
    assert 'value="dismiss"' in page and 'value="merge"' not in page and "Merging keeps" not in page
    response = client.post(duplicates, {"action": "dismiss", "first": pin.pk, "second": pin_again.pk}, follow=True)
    assert [f"#{pin.pk} “{pin.title}” and #{pin_again.pk} “{pin_again.title}” are marked as not duplicates."] == (
        messages_of(response)
    )
    assert "1 pair marked “not a duplicate” is left out" in response.content.decode()


def test_whoever_may_mark_a_pair_may_take_the_mark_back(client, team):
    pin, pin_again = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN)
    panic, panic_again = memory_create(team=team, content=PANIC), memory_create(team=team, content=PANIC_AGAIN)
    lesson_mark = duplicate_dismiss(team=team, kind="lesson", first_id=pin.pk, second_id=pin_again.pk)
    memory_mark = duplicate_dismiss(team=team, kind="memory", first_id=panic.pk, second_id=panic_again.pk)
    curator(client, "lessoneditor", "view_lesson", "change_lesson", "view_memory")
    listing = client.get(MARKS)
    assert listing.status_code == 200
    assert [mark.pk for mark in listing.context["cl"].result_list] == [lesson_mark.pk]
    assert MARKS in client.get(reverse("admin:index")).content.decode()  # listed on the start page
    other = client.post(reverse("admin:lessons_duplicatedismissal_delete", args=[memory_mark.pk]), {"post": "yes"})
    assert other.status_code == 302 and DuplicateDismissal.objects.filter(pk=memory_mark.pk).exists()
    client.post(reverse("admin:lessons_duplicatedismissal_delete", args=[lesson_mark.pk]), {"post": "yes"})
    assert not DuplicateDismissal.objects.filter(pk=lesson_mark.pk).exists()
    curator(client, "viewer", "view_lesson", "view_memory")
    assert client.get(MARKS).status_code == 403


def test_messages_name_the_other_team_and_cut_long_memories_with_an_ellipsis(admin_client, team, other_team):
    ours, theirs = lesson(team, DOCKER_PIN), lesson(other_team, DOCKER_PIN_AGAIN)
    duplicates = reverse("admin:lessons_lesson_duplicates")
    response = admin_client.post(duplicates, {"action": "dismiss", "first": ours.pk, "second": theirs.pk}, follow=True)
    assert messages_of(response) == [f"Lesson {theirs.pk} belongs to another team; a pair is two rows of one team."]
    long_text = "Walked from the station along the river to the old market hall, then took the tram home late."
    memory = memory_create(team=team, content=long_text)
    assert str(memory) == long_text[:79] + "…"


@pytest.mark.parametrize("action", ["reject_selected", "accept_selected", "delete_selected"])
def test_a_change_action_posted_by_a_viewer_says_it_is_not_theirs(client, team, action):
    """A view-only curator's crafted POST of a change action answered the list again without a word."""
    proposal = LessonFactory(team=team, status="proposed")
    curator(client, "viewer", "view_lesson")
    data = {"action": action, "index": 0, "_selected_action": [proposal.pk], "confirm": "yes", "post": "yes"}
    response = client.post(LESSONS, data, follow=True)
    assert response.status_code == 200
    [message] = messages_of(response)
    needed = "delete" if action == "delete_selected" else "change"
    assert "is not available to you" in message and f"needs the {needed} permission on lessons" in message
    assert "Nothing was changed." in message
    assert Lesson.objects.get().status == LessonStatus.PROPOSED


def test_an_action_this_list_does_not_have_is_named(admin_client, team):
    response = admin_client.post(LESSONS, {"action": "explode", "index": 0, "_selected_action": [1]}, follow=True)
    assert any("There is no action “explode”" in text for text in messages_of(response))


def test_a_curator_without_view_permission_still_gets_permission_denied(client, team):
    curator(client, "nobody")
    assert client.post(LESSONS, {"action": "reject_selected", "_selected_action": [1]}).status_code == 403
