"""The API docs for staff, in a real browser: pick the team, try the default search example, 200."""

import json

import pytest

from lessons.services.lessons import lesson_create
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db(transaction=True)


def _open_search_operation(page):
    page.goto("/api/v1/docs")
    operation = page.locator(".opblock-post").filter(has_text="/api/v1/search").first
    operation.locator(".opblock-summary").click()
    operation.get_by_role("button", name="Try it out").click()
    return operation


def test_staff_pick_a_team_and_the_default_search_example_answers_200(admin_page, screenshot):
    team = TeamFactory(slug="acme")
    TeamFactory(slug="eval-scifact")
    lesson_create(team=team, title="Enable row level security on every tenant table", category="security")
    admin_page.goto("/api/v1/docs")
    picker = admin_page.locator("#staff-team")
    assert picker.locator("option").all_inner_texts() == ["choose a team…", "acme", "eval-scifact"]
    assert picker.input_value() == "acme"  # the only curated team is preselected
    picker.select_option("eval-scifact")
    picker.select_option("acme")
    operation = _open_search_operation(admin_page)  # reloads: the choice is remembered
    assert admin_page.locator("#staff-team").input_value() == "acme"
    operation.get_by_role("button", name="Execute").click()
    status = operation.locator(".live-responses-table .response .response-col_status").first
    status.wait_for()
    assert status.inner_text().strip().startswith("200")
    body = json.loads(operation.locator(".live-responses-table .response-col_description pre.microlight").first.inner_text())
    assert body["results"][0]["fields"]["title"] == "Enable row level security on every tenant table"
    operation.scroll_into_view_if_needed()
    screenshot("api-docs-staff-team-search-200")


def test_a_key_given_with_authorize_answers_for_its_team_not_the_pickers(admin_page):
    from lessons.services.api_keys import api_key_create

    TeamFactory(slug="acme")
    theirs = TeamFactory(slug="globex")
    lesson_create(team=theirs, title="Rotate the signing keys every quarter", category="security")
    _, raw_key = api_key_create(team=theirs, name="docs")
    operation = _open_search_operation(admin_page)
    assert admin_page.locator("#staff-team").input_value() == "acme"
    admin_page.evaluate("([scheme, key]) => window.ui.preauthorizeApiKey(scheme, key)", ["ApiKeyAuth", raw_key])
    operation.get_by_role("button", name="Execute").click()
    status = operation.locator(".live-responses-table .response .response-col_status").first
    status.wait_for()
    # the picker's X-Team beside another team's key is a 422 now; the docs leave it out
    assert status.inner_text().strip().startswith("200")
    answer = operation.locator(".live-responses-table .response-col_description pre.microlight").first
    assert json.loads(answer.inner_text())["results"][0]["fields"]["title"] == "Rotate the signing keys every quarter"


def test_without_a_team_the_docs_show_the_documented_400(admin_page):
    TeamFactory(slug="acme")
    operation = _open_search_operation(admin_page)
    admin_page.locator("#staff-team").select_option("")  # "choose a team…"
    assert operation.locator(".responses-table tr.response[data-code='400']").count() == 1
    operation.get_by_role("button", name="Execute").click()
    status = operation.locator(".live-responses-table .response .response-col_status").first
    status.wait_for()
    assert status.inner_text().strip().startswith("400")
    body = json.loads(operation.locator(".live-responses-table .response-col_description pre.microlight").first.inner_text())
    assert body["errors"][0]["field"] == "X-Team"


def test_anonymous_visitors_get_no_team_picker(page):
    TeamFactory(slug="acme")
    page.goto("/api/v1/docs")
    page.wait_for_selector(".opblock")
    assert page.locator("#staff-team").count() == 0
