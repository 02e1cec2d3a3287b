"""The admin keeps its word across pages: a bulk accept whose proposals were decided from another
tab, the team delete page, the re-embedding page's way back to the list, the playground link's
embedding filter and the duplicates pages' empty state."""

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from lessons.models import Lesson, Memory, SearchRecord, Team
from lessons.services import teams as team_services
from lessons.services.api_keys import api_key_create
from lessons.services.embeddings import embedding_backfill, embeddings_deferred
from lessons.services.lessons import lesson_create
from lessons.services.memories import memory_create, memory_update
from lessons.services.usage import search_record
from tests.factories import LessonFactory

pytestmark = pytest.mark.django_db

LESSONS = reverse("admin:lessons_lesson_changelist")


def test_an_accept_confirmed_after_another_tab_rejected_one_says_it_was_left_alone(admin_client, team):
    first = LessonFactory(team=team, title="Proposal: cache the tokenizer", status="proposed")
    second = LessonFactory(team=team, title="Proposal: pin the model version", status="proposed")
    ids = [first.pk, second.pk]
    asked = admin_client.post(LESSONS, {"action": "accept_selected", "_selected_action": ids})
    assert "These 2 proposals will become <strong>confirmed</strong>" in asked.content.decode()
    Lesson.objects.filter(pk=second.pk).update(status="rejected")  # another tab
    response = admin_client.post(LESSONS, {"action": "accept_selected", "_selected_action": ids, "confirm": "yes"},
                                 follow=True)
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "1 proposal(s) accepted. 1 had changed status meanwhile and was left alone."]
    assert dict(Lesson.objects.values_list("pk", "status")) == {first.pk: "confirmed", second.pk: "rejected"}


def _full_team(team):
    lesson = LessonFactory(team=team, title="Pin the base image digest")
    memory = memory_create(team=team, content="Met Ana at the gym")
    memory_update(memory=memory, content="Met Ana at the climbing gym")
    memory_update(memory=memory, content="Met Ana at the climbing gym on Tuesday")  # 1 memory, 2 earlier versions
    api_key_create(team=team, name="ci bot")
    search_record(team=team, kind="lessons", operation="search", query="docker", mode="hybrid",
                  result_ids=[lesson.pk], source="api")
    return lesson, memory


def _summary(page: str) -> list[str]:
    import re

    summary = page.split("<h2>Summary</h2>", 1)[1].split("</ul>", 1)[0]
    return [" ".join(item.split()) for item in re.findall(r"<li>(.*?)</li>", summary, re.S)]


def test_a_teams_delete_page_counts_what_goes_with_it_and_lists_no_row(admin_client, team, other_team):
    lesson, memory = _full_team(team)
    page = admin_client.get(reverse("admin:lessons_team_delete", args=[team.pk])).content.decode()
    assert _summary(page) == ["Lessons: 1", "Memories: 1", "Earlier memory versions: 2", "API keys: 1",
                              "Recorded searches: 1"]
    assert lesson.title not in page and "Met Ana" not in page and "ci bot" not in page  # no row listed
    assert 'id="deleted-objects"' not in page

    response = admin_client.post(reverse("admin:lessons_team_delete", args=[team.pk]), {"post": "yes"})
    assert response.status_code == 302
    assert not Team.objects.filter(pk=team.pk).exists() and Team.objects.filter(pk=other_team.pk).exists()
    assert not Memory.objects.filter(team_id=team.pk).exists() and not SearchRecord.objects.exists()


def test_deleting_teams_from_the_list_counts_them_together_and_goes_through_team_delete(admin_client, team,
                                                                                        other_team, monkeypatch):
    _full_team(team)
    LessonFactory(team=other_team, title="Index foreign keys")
    chosen = {"action": "delete_selected", "_selected_action": [team.pk, other_team.pk]}
    page = admin_client.post(reverse("admin:lessons_team_changelist"), chosen).content.decode()
    assert _summary(page) == ["Teams: 2", "Lessons: 2", "Memories: 1", "Earlier memory versions: 2",
                              "API keys: 1", "Recorded searches: 1"]
    assert "Index foreign keys" not in page and "Acme" in page and "Globex" in page  # the teams, not their rows

    deleted = []
    original = team_services.team_delete
    monkeypatch.setattr(team_services, "team_delete", lambda *, team: deleted.append(team.slug) or original(team=team))
    response = admin_client.post(reverse("admin:lessons_team_changelist"), {**chosen, "post": "yes"}, follow=True)
    assert sorted(deleted) == ["acme", "globex"]
    assert not Team.objects.exists() and not Lesson.objects.exists()
    assert "Successfully deleted 2 teams." in [str(m) for m in get_messages(response.wsgi_request)]


def test_a_team_whose_rows_the_user_may_not_delete_is_not_deleted(client, team):
    from django.contrib.auth.models import Permission, User

    LessonFactory(team=team, title="Pin the base image digest")
    user = User.objects.create_user("teams-only", password="x", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_team", "delete_team"]))
    client.force_login(user)
    url = reverse("admin:lessons_team_delete", args=[team.pk])
    page = client.get(url).content.decode()
    assert "your account doesn't have permission to delete the following types of objects" in page
    assert "lesson" in page
    assert client.post(url, {"post": "yes"}).status_code == 403
    assert Team.objects.filter(pk=team.pk).exists()


def test_the_reembedding_page_leads_back_to_the_list_as_it_was(admin_client, team):
    from html import unescape

    lessons = [LessonFactory(team=team, title=f"Proposal {number}", status="proposed") for number in range(2)]
    listed = f"{LESSONS}?status__exact=proposed&team__id__exact={team.pk}&o=-1"
    chosen = {"action": "reembed_selected", "_selected_action": [row.pk for row in lessons]}
    response = admin_client.post(listed, chosen)
    assert response.status_code == 302 and "/admin/lessons/reembed/" in response["Location"]
    html = unescape(admin_client.get(response["Location"]).content.decode())
    back = f'href="{listed}"'
    assert f'<a class="button" {back}>Back to lessons</a>' in html  # the button
    assert f"<a {back}>Lessons</a>" in html  # the breadcrumb
    # a job page opened without them (a bookmark) leads to the plain list
    bare = admin_client.get(response["Location"].split("?")[0]).content.decode()
    assert f'<a class="button" href="{LESSONS}">Back to lessons</a>' in bare


def test_the_playground_link_keeps_the_lists_embedding_filter_and_the_playground_applies_it(admin_client, team):
    from urllib.parse import parse_qs, urlsplit

    with embeddings_deferred():
        fresh = lesson_create(team=team, title="Cache the docker build layers")
        stale = lesson_create(team=team, title="Cache the npm packages in CI")
        lesson_create(team=team, title="Cache the pip wheels between jobs")  # never embedded: missing
    embedding_backfill(ids=[fresh.pk, stale.pk], kind="lessons")
    Lesson.objects.filter(pk=stale.pk).update(title="Cache the npm packages in CI, edited")
    listed = admin_client.get(LESSONS, {"q": "cache", "embedding_status": "stale", "team__id__exact": team.pk})
    assert [row.pk for row in listed.context["cl"].result_list] == [stale.pk]
    link = parse_qs(urlsplit(listed.context["cl"].playground_url).query)
    assert link["embedding"] == ["stale"]

    playground = admin_client.get(reverse("admin:lessons_search_playground"), {**link, "b_mode": ""})
    assert [row.id for row in playground.context["runs"][0].rows] == [stale.pk]  # the list's one row
    assert 'name="embedding" value="stale" id="id_embedding_1" checked' in playground.content.decode()
    unfiltered = admin_client.get(reverse("admin:lessons_search_playground"),
                                  {**{k: v for k, v in link.items() if k != "embedding"}, "b_mode": ""})
    assert len(unfiltered.context["runs"][0].rows) == 3
    refused = admin_client.get(reverse("admin:lessons_search_playground"), {**link, "embedding": "rotten"})
    assert "embedding" in refused.context["form"].errors and not refused.context["runs"]


@pytest.mark.parametrize("kind, rows", [("memory", "current memories"), ("lesson", "lessons")])
def test_a_duplicates_page_whose_only_pair_was_marked_not_a_duplicate_says_no_other_pair_is_close(
        admin_client, team, kind, rows):
    from lessons.services.curation import duplicate_dismiss
    from tests.curation_data import BASS, DOCKER_PIN, DOCKER_PIN_AGAIN, PANIC, PANIC_AGAIN, embedded_lessons
    from tests.curation_data import embedded_memories

    if kind == "memory":
        first, second, _ = embedded_memories(team, PANIC, PANIC_AGAIN, BASS)
    else:
        first, second = embedded_lessons(team, DOCKER_PIN, DOCKER_PIN_AGAIN)
    url = reverse(f"admin:lessons_{kind}_duplicates")
    assert len(admin_client.get(url, {"team": "acme", "threshold": 0.35}).context["pairs"]) == 1
    duplicate_dismiss(team=team, kind=kind, first_id=first.pk, second_id=second.pk)
    page = " ".join(admin_client.get(url, {"team": "acme", "threshold": 0.35}).content.decode().split())
    assert "1 pair marked “not a duplicate” is left out" in page
    assert f"Apart from the pair marked “not a duplicate”, no two {rows} in Acme are closer than 0.35." in page
    assert f"No two {rows} in" not in page  # the marked pair is that close: "no two" alone was untrue
