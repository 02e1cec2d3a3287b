"""In Chromium: a curator who may add API keys but lacks a permission a key carries is told so on
the add page (and which permissions), and the playground's team menu names teams "Name (slug)"
without evaluation teams, its weight boxes showing the chosen mode's defaults."""

import pytest
from playwright.sync_api import expect

from lessons.models import ApiKey
from tests.browser.test_curator_roles import sign_in
from tests.factories import LessonFactory, TeamFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_adding_a_key_without_the_data_permissions_says_which_are_missing(page, client, live_server, screenshot):
    TeamFactory(slug="acme", name="Acme")
    sign_in(page, client, live_server, "keyman", "view_apikey", "add_apikey")
    page.goto("/admin/lessons/apikey/")
    with page.expect_response(lambda response: response.url.endswith("/admin/lessons/apikey/add/")) as answer:
        page.get_by_role("link", name="Add API key").click()
    assert answer.value.status == 403
    expect(page.locator("h1")).to_have_text("You may not create API keys")
    expect(page.locator(".errornote")).to_contain_text("lacks 8 of the permissions a key carries")
    missing = page.locator("ul.missing-permissions li")
    expect(missing).to_have_count(8)
    expect(missing.first).to_have_text("Can add lesson (lessons.add_lesson)")
    expect(page.locator("#content-main")).to_contain_text("reads, adds, changes and deletes that team's lessons")
    expect(page.locator('input[name="name"]')).to_have_count(0)
    screenshot("apikey-add-refused", page=page, full_page=True)
    page.get_by_role("link", name="Back to the API keys").click()
    expect(page).to_have_url(f"{live_server.url}/admin/lessons/apikey/")
    assert not ApiKey.objects.exists()


def test_the_playground_team_menu_and_weight_boxes(admin_page, screenshot):
    acme = TeamFactory(slug="acme", name="Acme Corporation")
    TeamFactory(slug="demo", name="demo")
    TeamFactory(slug="eval-scifact", name="SciFact benchmark")
    admin_page.goto("/admin/lessons/search/")
    team = admin_page.locator("#id_team")
    assert team.locator("option").all_inner_texts() == ["Acme Corporation (acme)", "demo"]
    assert team.input_value() == "demo"
    boxes = [admin_page.locator(f"#id_b_w_{part}") for part in ("semantic", "keyword", "quality")]
    assert [box.get_attribute("placeholder") for box in boxes] == ["–", "0.50", "0.50"]  # B starts as text
    admin_page.select_option("#id_b_mode", "semantic")
    assert [box.get_attribute("placeholder") for box in boxes] == ["0.75", "–", "0.25"]
    admin_page.select_option("#id_b_mode", "")  # nothing to compare: B follows A
    admin_page.select_option("#id_mode", "text")
    assert [admin_page.locator(f"#id_w_{part}").get_attribute("placeholder")
            for part in ("semantic", "keyword", "quality")] == ["–", "0.50", "0.50"]
    assert [box.get_attribute("placeholder") for box in boxes] == ["–", "0.50", "0.50"]
    admin_page.select_option("#id_b_mode", "text")
    team.click()  # the menu open, for the picture
    screenshot("playground-team-menu")
    admin_page.keyboard.press("Escape")
    # after the search the B column's header reports the weights its boxes showed
    LessonFactory(team=acme, title="Retry webhooks with backoff", description="Retries hammered the provider.")
    admin_page.select_option("#id_mode", "hybrid")
    team.select_option("acme")
    admin_page.fill("#id_q", "retries")
    admin_page.click("input[type=submit][value=Search]")
    admin_page.wait_for_selector("#run-2 .hit")
    expect(admin_page.locator("#run-2 .run-weights")).to_have_text("weights keyword 0.50 · quality 0.50")
    assert [box.get_attribute("placeholder") for box in boxes] == ["–", "0.50", "0.50"]
    assert team.locator("option:checked").inner_text() == "Acme Corporation (acme)"
    screenshot("playground-weights-text-mode", full_page=True)
