"""The team list's "Delete selected teams" names each team as a link to its page under "Teams": it
showed `['Team: <a href="/admin/lessons/team/5/change/">Scratch</a>']`, a Python list of escaped
HTML, since Django's delete_selected wraps what it deletes in one more list than the page read."""

import pytest
from playwright.sync_api import expect

from lessons.models import Team
from tests.factories import LessonFactory, TeamFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_lists_delete_names_each_team_as_a_link_and_deletes_them(admin_page, screenshot):
    scratch = TeamFactory(slug="scratch", name="Scratch")
    sandbox = TeamFactory(slug="sandbox", name="Sandbox")
    kept = TeamFactory(slug="kept", name="Kept")
    LessonFactory(team=scratch, title="Pin the base image digest")

    admin_page.goto("/admin/lessons/team/")
    for team in (scratch, sandbox):
        admin_page.locator(f'input[name="_selected_action"][value="{team.pk}"]').check()
    admin_page.locator('select[name="action"]').select_option("delete_selected")
    admin_page.get_by_role("button", name="Go").click()

    teams = admin_page.locator("ul.deleted-teams > li")
    expect(teams).to_have_count(2)
    for team in (sandbox, scratch):
        link = teams.get_by_role("link", name=team.name, exact=True)
        expect(link).to_have_attribute("href", f"/admin/lessons/team/{team.pk}/change/")
    shown = admin_page.locator("#content").inner_text()
    assert sorted(" ".join(text.split()) for text in teams.all_inner_texts()) == ["Team: Sandbox", "Team: Scratch"]
    assert "[" not in shown and "&lt;" not in shown and "<a" not in shown, shown
    screenshot("team-delete-selected-confirmation", full_page=True)

    admin_page.get_by_role("button", name="Yes, I’m sure").click()
    expect(admin_page.locator(".messagelist")).to_contain_text("Successfully deleted 2 teams.")
    assert list(Team.objects.values_list("pk", flat=True)) == [kept.pk]
