"""Curators who are staff but not superusers, in a real browser: the buttons they get are the ones
their permissions allow, a mark they made can be taken back, a page they may not open reads like
the admin; and the duplicates page and the API key list keep their columns in view.

Before: a curator who may change lessons but not delete them got no "Not a duplicate" button
(the view allowed it), and could not list the marks to undo one; a 403 was a bare "403 Forbidden"
with no way back; long unbroken words made the duplicates page 503 px wide on a 390 px phone; the
API key list cut off its "Revoked at" column at 1280 px."""

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User
from playwright.sync_api import expect

from lessons.models import DuplicateDismissal
from lessons.services.api_keys import api_key_create, api_key_revoke
from tests.curation_data import DOCKER_PIN, DOCKER_PIN_AGAIN, embed, lesson
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"width": 390, "height": 844}
TOLERANCE = 2  # px: sub-pixel rounding
UNBROKEN = "worker_prefetch_multiplier=1_with_celery_acks_late_enabled_everywhere"


def sign_in(page, client, live_server, name: str, *codenames: str):
    user = User.objects.create_user(name, password="x", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="lessons", codename__in=codenames))
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    page.context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie.value, "url": live_server.url}])
    return page


def page_width(page) -> int:
    return page.evaluate("() => document.documentElement.scrollWidth")


def test_a_curator_who_may_not_delete_dismisses_a_pair_and_takes_the_mark_back(
    page, client, live_server, screenshot
):
    team = TeamFactory(slug="acme", name="Acme")
    pin = lesson(team, {**DOCKER_PIN, "description": f"{DOCKER_PIN['description']} See {UNBROKEN}."})
    pin_again = lesson(team, {**DOCKER_PIN_AGAIN, "description": f"{DOCKER_PIN_AGAIN['description']} {UNBROKEN}."})
    embed(pin, pin_again)
    sign_in(page, client, live_server, "lessoneditor", "view_lesson", "change_lesson")
    page.set_viewport_size(PHONE)
    page.goto("/admin/lessons/lesson/duplicates/?team=acme")
    pair = page.locator(f"#pair-{pin.pk}-{pin_again.pk}")
    expect(pair).to_be_visible()
    screenshot("curator-duplicates-390", page=page, full_page=True)
    assert page_width(page) <= PHONE["width"] + TOLERANCE  # the long word wraps inside its cell
    expect(pair.get_by_role("button", name="Merge")).to_have_count(0)
    expect(pair.locator('input[name="keep"]')).to_have_count(0)

    pair.get_by_role("button", name="Not a duplicate").click()
    expect(page.locator("ul.messagelist li").first).to_contain_text(f"#{pin.pk} “{pin.title}” and #{pin_again.pk}")
    expect(page.locator("section.curation-card")).to_have_count(0)
    page.get_by_role("link", name="see or take back the marks").click()
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(str(pin_again.pk))
    expect(rows.first.get_by_role("link", name=f"#{pin_again.pk} {pin_again.title}")).to_be_visible()
    screenshot("curator-marks-390", page=page, full_page=True)
    assert page_width(page) <= PHONE["width"] + TOLERANCE
    rows.first.locator("input.action-select").check()
    page.select_option("select[name=action]", "delete_selected")
    page.get_by_role("button", name="Go").click()
    page.get_by_role("button", name="Yes, I’m sure").click()
    assert not DuplicateDismissal.objects.exists()
    page.goto("/admin/lessons/lesson/duplicates/?team=acme")
    expect(page.locator(f"#pair-{pin.pk}-{pin_again.pk}")).to_be_visible()  # the pair is back


def test_a_page_a_curator_may_not_open_says_so_in_the_admin(page, client, live_server, screenshot):
    row = lesson(TeamFactory(slug="acme"), DOCKER_PIN)
    sign_in(page, client, live_server, "memviewer", "view_memory")
    response = page.goto(f"/admin/lessons/lesson/{row.pk}/change/")
    assert response.status == 403
    expect(page.locator("h1")).to_have_text("Permission denied")
    expect(page.locator("#site-name")).to_have_text("Memory Store")
    screenshot("curator-permission-denied", page=page)
    expect(page.locator("#user-tools")).to_contain_text("Search playground")  # memories: they may search those
    page.get_by_role("link", name="Back to the start page").click()
    expect(page.locator("#curation-module")).to_contain_text("Duplicate memories")
    expect(page.locator("#curation-module")).not_to_contain_text("Review proposals")


def test_the_api_key_list_shows_whether_each_key_works(admin_page, screenshot):
    team = TeamFactory(slug="acme-platform-engineering", name="Acme platform engineering")
    api_key_create(team=team, name="continuous integration bot for the monorepo")
    old, _ = api_key_create(team=team, name="laptop of a former contractor")
    api_key_revoke(api_key=old)
    admin_page.goto("/admin/lessons/apikey/")
    screenshot("api-keys-1280")
    expect(admin_page.locator("h1")).to_have_text("API keys")
    states = admin_page.locator("#result_list td.field-state")
    expect(states).to_have_count(2)
    expect(states.filter(has_text="active")).to_have_count(1)
    expect(states.filter(has_text="revoked")).to_have_count(1)
    box = admin_page.locator("#changelist .results").bounding_box()
    for column in ("state", "created_at"):  # the first column the list cut off, and the last one
        for index in range(2):
            cell = admin_page.locator(f"#result_list td.field-{column}").nth(index).bounding_box()
            assert cell["x"] + cell["width"] <= box["x"] + box["width"] + TOLERANCE, column  # in view
    admin_page.get_by_role("link", name="Revoked").click()
    expect(states).to_have_count(1)
    expect(states.first).to_contain_text("revoked")
