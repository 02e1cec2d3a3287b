"""Who may open what in the console: a re-embedding job's page for every curator who may see its rows
(it was the starting session's only), the team of a row linked only for a curator who may open the
team's page (a view-only curator's link answered 403), and an app's page for staff without any
permission a 403 that says so (Django's 404 said the page did not exist)."""

import re
from uuid import uuid4

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django_tasks_db.models import DBTaskResult

from lessons.admin.embeddings import SESSION_KEY
from lessons.models import Lesson
from lessons.tasks import embed_item
from tests.factories import LessonFactory, MemoryFactory

pytestmark = pytest.mark.django_db

DATABASE_QUEUE = {"default": {"BACKEND": "django_tasks_db.backend.DatabaseBackend"}}
LESSONS = reverse("admin:lessons_lesson_changelist")
CURATOR = ("view_lesson", "change_lesson")


def curator(name: str, *codenames: str) -> Client:
    """A new browser session, signed in as a new staff user with these permissions on `lessons`."""
    user = User.objects.create_user(name, password="x", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="lessons", codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def database_queue(settings):
    """Production's queue: the job waits in the database until a worker runs it."""
    settings.TASKS = DATABASE_QUEUE


def reembed(client: Client, rows) -> str:
    """Run "Re-embed selected" on the lesson list; the job page's URL."""
    response = client.post(LESSONS, {"action": "reembed_selected", "_selected_action": [row.pk for row in rows]})
    assert response.status_code == 302 and "/admin/lessons/reembed/" in response["Location"], response
    return response["Location"]


# --- 1. the re-embedding job's page -------------------------------------------------------------


@pytest.mark.django_db(transaction=True)  # the worker closes the connection when it is done
def test_a_colleague_and_the_same_curator_signed_in_again_open_the_job(database_queue, team):
    rows = LessonFactory.create_batch(3, team=team)
    alice = curator("alice", *CURATOR)
    job_page = reembed(alice, rows)
    [queued] = DBTaskResult.objects.filter(task_path="lessons.tasks.reembed_items")
    assert job_page.rstrip("/").endswith(str(queued.id))

    colleague = curator("bob", *CURATOR)
    alice.logout()  # a new sign-in is a new session, without the job in it
    alice.force_login(User.objects.get(username="alice"))
    assert SESSION_KEY not in alice.session
    for client in (alice, colleague, curator("viewer", "view_lesson")):  # a viewer sees the rows, and so the job
        response = client.get(job_page)
        html = response.content.decode()
        assert response.status_code == 200, html[:500]
        assert "Re-embedding 3 lessons" in html and "<strong>0 of 3</strong> re-embedded" in html
        assert '<dd class="job-status">ready' in html and 'http-equiv="refresh"' in html  # waiting for a worker

    call_command("db_worker", batch=True, startup_delay=False, reload=False, verbosity=0)
    html = colleague.get(job_page).content.decode()
    assert "<strong>3 of 3</strong> re-embedded" in html and "embedded 3, failed 0" in html
    assert '<dd class="job-status">successful' in html and 'http-equiv="refresh"' not in html


def test_curators_who_may_not_see_the_rows_are_denied_the_job(database_queue, team):
    job_page = reembed(curator("alice", *CURATOR), LessonFactory.create_batch(2, team=team))
    for client in (curator("memories", "view_memory", "change_memory"), curator("nobody")):
        response = client.get(job_page)
        assert response.status_code == 403
        assert "Re-embedding" not in response.content.decode() and 'id="site-name"' in response.content.decode()


def test_a_page_of_no_re_embedding_job_is_404(database_queue, team):
    alice = curator("alice", *CURATOR)
    other_task = embed_item.enqueue(kind="memories", item_id=1)  # in the queue, but not a re-embedding
    for token in (str(uuid4()), str(other_task.id), "not-a-task-id"):
        assert alice.get(reverse("admin:lessons_embedding_job", args=[token])).status_code == 404, token


def test_the_session_s_job_is_denied_once_the_curator_lost_the_permission(team):
    """The immediate backend (development) keeps no record of its tasks: there the page is the
    session's, and still needs the permission."""
    rows = LessonFactory.create_batch(2, team=team)
    carol = curator("carol", *CURATOR)
    job_page = reembed(carol, rows)
    assert "<strong>2 of 2</strong> re-embedded" in carol.get(job_page).content.decode()
    User.objects.get(username="carol").user_permissions.clear()
    assert carol.get(job_page).status_code == 403


# --- 2. the team on a row's change page ---------------------------------------------------------


def admin_links(html: str) -> set[str]:
    return {href for href in re.findall(r'href="([^"#?]+)[^"]*"', html) if href.startswith("/admin/")}


@pytest.mark.parametrize(("factory", "codename"), [(LessonFactory, "view_lesson"), (MemoryFactory, "view_memory")])
def test_a_view_only_curator_sees_the_team_as_text_and_every_link_opens(team, factory, codename):
    row = factory(team=team)
    viewer = curator("viewer", codename)
    page = reverse(f"admin:lessons_{row._meta.model_name}_change", args=[row.pk])
    response = viewer.get(page)
    html = response.content.decode()
    assert response.status_code == 200
    team_page = reverse("admin:lessons_team_change", args=[team.pk])
    assert team_page not in html
    assert re.search(r'<div class="readonly">Acme \(acme\)</div>', html), "the team, as text"
    for link in admin_links(html) - {reverse("admin:logout")}:
        assert viewer.get(link).status_code == 200, link  # the team's page answered 403


def test_a_curator_who_may_view_teams_gets_the_link(team):
    row = LessonFactory(team=team)
    team_page = reverse("admin:lessons_team_change", args=[team.pk])
    for client in (curator("teamviewer", "view_lesson", "view_team"), curator("editor", *CURATOR, "change_team")):
        html = client.get(reverse("admin:lessons_lesson_change", args=[row.pk])).content.decode()
        assert f'<div class="readonly"><a href="{team_page}">Acme (acme)</a></div>' in html
        assert client.get(team_page).status_code == 200


def test_the_change_form_still_saves_without_a_team_field(admin_client, team):
    row = LessonFactory(team=team, title="Before")
    page = reverse("admin:lessons_lesson_change", args=[row.pk])
    form = admin_client.get(page).context["adminform"].form
    assert "team" not in form.fields
    data = {**{name: form[name].value() or "" for name in form.fields}, "title": "After"}
    data = {name: ", ".join(value) if isinstance(value, list) else value for name, value in data.items()}
    response = admin_client.post(page, data)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Lesson.objects.get(pk=row.pk).title == "After" and Lesson.objects.get(pk=row.pk).team == team


# --- 3. staff without any permission ------------------------------------------------------------


def test_staff_without_permissions_are_told_so_on_the_app_page(team):
    nobody = curator("nobody")
    for app in ("lessons", "auth"):
        response = nobody.get(reverse("admin:app_list", args=[app]))
        html = response.content.decode()
        assert response.status_code == 403, app
        assert "<h1>No permissions in this console</h1>" in html
        assert "Your account, <strong>nobody</strong>, may sign in to this console" in html
        assert "Ask an administrator of this console (a superuser)" in html and "Log out" in html
    assert nobody.get("/admin/no-such-app/").status_code == 404  # still: no such page


def test_the_app_page_lists_what_a_curator_may_see_and_denies_the_rest(admin_client, team):
    memories = curator("memories", "view_memory")
    response = memories.get(reverse("admin:app_list", args=["lessons"]))
    assert response.status_code == 200 and "Memories" in response.content.decode()
    denied = memories.get(reverse("admin:app_list", args=["auth"]))
    assert denied.status_code == 403
    assert "<h1>Permission denied</h1>" in denied.content.decode()
    assert "may not open this page" in denied.content.decode()
    assert admin_client.get(reverse("admin:app_list", args=["lessons"])).status_code == 200
