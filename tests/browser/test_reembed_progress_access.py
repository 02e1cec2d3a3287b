"""Access to the console in a real browser: a re-embedding job's progress page opens for a colleague
in another browser (it answered 404 outside the session that started the job) and follows the job
as a worker runs it, while a curator who may not see lessons is denied it; and staff without any
permission get a page at /admin/lessons/ that says so and whom to ask (it was a 404)."""

import pytest
from django.conf import settings as dj_settings
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import Client
from playwright.sync_api import expect

from tests.browser.conftest import TIMEOUT_MS, VIEWPORT
from tests.factories import LessonFactory, TeamFactory

pytestmark = pytest.mark.django_db(transaction=True)

DATABASE_QUEUE = {"default": {"BACKEND": "django_tasks_db.backend.DatabaseBackend"}}


@pytest.fixture
def signed_in_page(browser, live_server):
    """`signed_in_page(name, *codenames)`: a page in a browser context of its own (its own cookies),
    signed in as a new staff user with these permissions on `lessons`."""
    contexts = []

    def open_page(name: str, *codenames: str):
        user = User.objects.create_user(name, password="x", is_staff=True)
        user.user_permissions.add(
            *Permission.objects.filter(content_type__app_label="lessons", codename__in=codenames)
        )
        client = Client()
        client.force_login(user)
        context = browser.new_context(viewport=VIEWPORT, base_url=live_server.url)
        contexts.append(context)
        context.set_default_timeout(TIMEOUT_MS)
        cookie = client.cookies[dj_settings.SESSION_COOKIE_NAME]
        context.add_cookies([{"name": dj_settings.SESSION_COOKIE_NAME, "value": cookie.value, "url": live_server.url}])
        return context.new_page()

    yield open_page
    for context in contexts:
        context.close()


def test_a_colleague_follows_the_re_embedding_job_and_others_are_denied_it(signed_in_page, settings, screenshot):
    settings.TASKS = DATABASE_QUEUE  # production's queue: the job waits for a worker
    team = TeamFactory(slug="acme", name="Acme")
    LessonFactory.create_batch(3, team=team)
    alice = signed_in_page("alice", "view_lesson", "change_lesson")
    alice.goto("/admin/lessons/lesson/")
    alice.check("#action-toggle")
    alice.select_option("select[name=action]", "reembed_selected")
    alice.click("button[name=index]")
    expect(alice.locator(".job-summary")).to_contain_text("0 of 3 re-embedded")
    job_page = alice.url
    assert "/admin/lessons/reembed/" in job_page

    colleague = signed_in_page("bob", "view_lesson", "change_lesson")
    response = colleague.goto(job_page)
    assert response.status == 200
    expect(colleague.locator("h1")).to_have_text("Re-embedding 3 lessons")
    expect(colleague.locator(".job-status")).to_contain_text("ready · this page reloads every 2 seconds")
    screenshot("reembed-progress-colleague-waiting", page=colleague)

    call_command("db_worker", batch=True, startup_delay=False, reload=False, verbosity=0)
    # the page reloads itself: the colleague sees the job end without doing anything
    expect(colleague.locator(".job-summary")).to_contain_text("3 of 3 re-embedded")
    expect(colleague.locator(".job-status")).to_have_text("successful")
    expect(colleague.locator(".messagelist .success")).to_contain_text("Done: every queued row")
    screenshot("reembed-progress-colleague-done", page=colleague)

    outsider = signed_in_page("memories", "view_memory", "change_memory")
    response = outsider.goto(job_page)
    assert response.status == 403
    expect(outsider.locator("h1")).to_have_text("Permission denied")
    expect(outsider.locator(".job-summary")).to_have_count(0)
    screenshot("reembed-progress-denied", page=outsider)


def test_staff_without_permissions_are_told_whom_to_ask(signed_in_page, live_server, screenshot):
    nobody = signed_in_page("newcomer")
    response = nobody.goto("/admin/lessons/")
    assert response.status == 403
    expect(nobody.locator("h1")).to_have_text("No permissions in this console")
    text = nobody.locator("#content-main")
    expect(text).to_contain_text("Your account, newcomer, may sign in to this console but has no permissions in it yet")
    expect(text).to_contain_text("Ask an administrator of this console (a superuser)")
    expect(nobody.locator("#site-name")).to_have_text("Memory Store")
    expect(nobody.locator("#user-tools")).to_contain_text("Log out")  # to sign in as someone else
    screenshot("no-permissions-app-page", page=nobody)
    nobody.get_by_role("link", name="Back to the start page").click()
    expect(nobody).to_have_url(f"{live_server.url}/admin/")
