"""Staff signed in to the admin use the API with the Django permissions the admin gives them:
a session without a model's permission was once enough to read, edit, accept and delete any
team's rows through the API while the admin answered 403 for the same user."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from lessons.models import Lesson, Memory
from lessons.services.api_keys import api_key_create
from tests.api.conftest import JsonClient
from tests.factories import LessonFactory, MemoryFactory

pytestmark = pytest.mark.django_db

TEAM = {"HTTP_X_TEAM": "globex"}


def _curator(*codenames, name="curator"):
    user = get_user_model().objects.create_user(name, password="pw-not-used", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="lessons", codename__in=codenames))
    client = JsonClient()
    client.client.force_login(user)
    return client


@pytest.fixture
def rows(other_team):
    return {
        "lesson": LessonFactory(team=other_team, title="Globex secret lesson", status="proposed"),
        "other": LessonFactory(team=other_team, title="Another globex lesson"),
        "memory": MemoryFactory(team=other_team, content="Globex secret memory"),
    }


def _refused(response, permission):
    assert response.status_code == 403, response.content
    assert permission in response.json()["detail"]


def test_staff_without_permissions_can_neither_read_nor_write(rows):
    client = _curator()
    lesson, memory = rows["lesson"], rows["memory"]
    _refused(client.get("/lessons", **TEAM), "lessons.view_lesson")
    _refused(client.get(f"/lessons/{lesson.pk}", **TEAM), "lessons.view_lesson")
    _refused(client.get(f"/memories/{memory.pk}", **TEAM), "lessons.view_memory")
    _refused(client.get("/memories/friends", **TEAM), "lessons.view_memory")
    _refused(client.post("/search", {"query": "secret", "kind": "memories"}, **TEAM), "lessons.view_memory")
    _refused(client.post("/lessons", {"title": "Written without rights"}, **TEAM), "lessons.add_lesson")
    _refused(client.patch(f"/lessons/{lesson.pk}", {"title": "changed"}, **TEAM), "lessons.change_lesson")
    _refused(client.post(f"/lessons/{lesson.pk}/accept", **TEAM), "lessons.change_lesson")
    _refused(client.delete(f"/lessons/{rows['other'].pk}", **TEAM), "lessons.delete_lesson")
    _refused(client.delete(f"/memories/{memory.pk}", **TEAM), "lessons.delete_memory")
    lesson.refresh_from_db()
    assert (lesson.title, lesson.status) == ("Globex secret lesson", "proposed")
    assert Lesson.objects.filter(team=lesson.team).count() == 2
    assert Memory.objects.filter(pk=memory.pk).exists()


def test_a_view_only_curator_reads_and_searches_but_changes_nothing(rows):
    client = _curator("view_lesson", "view_memory")
    lesson = rows["lesson"]
    assert client.get(f"/lessons/{lesson.pk}", **TEAM).json()["title"] == "Globex secret lesson"
    assert client.post("/search", {"query": "secret", "kind": "memories"}, **TEAM).status_code == 200
    assert client.get("/lessons/duplicates", **TEAM).status_code == 200
    _refused(client.patch(f"/lessons/{lesson.pk}", {"title": "changed"}, **TEAM), "lessons.change_lesson")
    _refused(client.post(f"/lessons/{lesson.pk}/reject", **TEAM), "lessons.change_lesson")
    _refused(client.post("/memories", {"content": "new"}, **TEAM), "lessons.add_memory")
    lesson.refresh_from_db()
    assert (lesson.title, lesson.status) == ("Globex secret lesson", "proposed")


def test_a_merge_needs_change_and_delete(rows):
    lesson, other = rows["lesson"], rows["other"]
    editor = _curator("view_lesson", "change_lesson", name="editor")
    _refused(editor.post(f"/lessons/{lesson.pk}/merge", {"merge_ids": [other.pk]}, **TEAM), "lessons.delete_lesson")
    assert Lesson.objects.filter(pk=other.pk).exists()
    curator = _curator("view_lesson", "change_lesson", "delete_lesson", name="merger")
    assert curator.post(f"/lessons/{lesson.pk}/merge", {"merge_ids": [other.pk]}, **TEAM).status_code == 200
    assert not Lesson.objects.filter(pk=other.pk).exists()


def test_usage_feedback_needs_change_on_the_searched_kind(rows):
    client = _curator("view_memory", "view_lesson", "change_lesson")
    answer = client.post("/search", {"query": "secret", "kind": "memories"}, **TEAM).json()
    hit = answer["results"][0]["id"]
    _refused(client.post("/feedback", {"search_id": answer["search_id"], "used": [hit]}, **TEAM),
             "lessons.change_memory")
    lessons = client.post("/search", {"query": "globex lesson", "kind": "lessons"}, **TEAM)
    lesson_answer = lessons.json()
    used = [lesson_answer["results"][0]["id"]]
    assert client.post("/feedback", {"search_id": lesson_answer["search_id"], "used": used}, **TEAM).status_code == 202


def test_a_superuser_may_do_everything_and_keys_are_not_checked(rows, other_team):
    admin = get_user_model().objects.create_superuser("boss", password="pw-not-used")
    client = JsonClient()
    client.client.force_login(admin)
    assert client.patch(f"/lessons/{rows['lesson'].pk}", {"title": "edited"}, **TEAM).status_code == 200
    agent = JsonClient(api_key_create(team=other_team, name="agent")[1])
    assert agent.post(f"/lessons/{rows['lesson'].pk}/accept").status_code == 200


def test_a_key_learns_nothing_about_another_teams_ids_from_a_dismissal(team, rows):
    agent = JsonClient(api_key_create(team=team, name="agent")[1])
    mine = LessonFactory(team=team)
    theirs = agent.post("/lessons/duplicates/dismiss", {"ids": [mine.pk, rows["lesson"].pk]})
    missing = agent.post("/lessons/duplicates/dismiss", {"ids": [mine.pk, 10**9]})
    assert theirs.status_code == missing.status_code == 422
    assert theirs.json()["detail"] == f"ids: Lesson {rows['lesson'].pk} does not exist."
    assert missing.json()["detail"] == f"ids: Lesson {10**9} does not exist."
