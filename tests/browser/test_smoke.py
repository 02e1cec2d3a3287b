"""The browser-test set-up itself: Chromium starts, the live server answers, a staff member is signed in."""

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_admin_index_renders_for_staff(admin_page, screenshot):
    admin_page.goto("/admin/")
    assert admin_page.locator("#site-name").inner_text() == "Memory Store"
    assert admin_page.get_by_role("link", name="Lessons").first.is_visible()
    assert "log out" in admin_page.locator("#user-tools").text_content().lower()
    path = screenshot("smoke-admin-index")
    assert path.stat().st_size > 10_000  # a rendered page, not a blank one


def test_anonymous_page_gets_the_login_form(page):
    page.goto("/admin/")
    assert "/admin/login/" in page.url
    assert page.locator("input[name=username]").is_visible()
