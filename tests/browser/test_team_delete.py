"""A team's delete confirmation counts what goes with it (lessons, memories and their earlier
versions apart, API keys, recorded searches) instead of listing every row: one memory with three
versions read "Memories: 3", and a 300,000-lesson team's page could not be loaded."""

import pytest
from playwright.sync_api import expect

from lessons.models import Lesson, Team
from lessons.services.api_keys import api_key_create
from lessons.services.memories import memory_create, memory_update
from tests.factories import LessonFactory, TeamFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_teams_delete_page_shows_counts_and_deletes_the_team(admin_page, screenshot):
    team = TeamFactory(slug="acme", name="Acme")
    for number in range(40):
        LessonFactory(team=team, title=f"Lesson number {number}")
    memory = memory_create(team=team, content="Met Ana at the gym")
    memory_update(memory=memory, content="Met Ana at the climbing gym")
    memory_update(memory=memory, content="Met Ana at the climbing gym on Tuesday")
    api_key_create(team=team, name="ci bot")

    admin_page.goto(f"/admin/lessons/team/{team.pk}/delete/")
    content = admin_page.locator("#content")
    expect(content).to_contain_text("Are you sure you want to delete the team")
    summary = [" ".join(item.split()) for item in content.locator("ul li").all_inner_texts()]
    assert summary == ["Lessons: 40", "Memories: 1", "Earlier memory versions: 2", "API keys: 1",
                       "Recorded searches: 0"]
    assert "Lesson number" not in content.inner_text() and "Met Ana" not in content.inner_text()
    screenshot("team-delete-confirmation", full_page=True)
    page_height = admin_page.evaluate("document.documentElement.scrollHeight")
    assert page_height <= 800, page_height  # a screenful, not a row per lesson

    admin_page.get_by_role("button", name="Yes, I’m sure").click()
    expect(admin_page.locator(".messagelist")).to_contain_text("was deleted successfully")
    assert not Team.objects.filter(pk=team.pk).exists() and not Lesson.objects.exists()
