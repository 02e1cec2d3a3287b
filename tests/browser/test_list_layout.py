"""The lesson and memory lists in a real browser at 1280 x 800: the app sidebar is gone, so the table
has the page's width, and the column a curator reads (title, content) keeps room for a sentence.
Before, the table had 631 px for its 12 columns, the title 130 px, the content 116 px."""

import pytest
from playwright.sync_api import expect

from tests.factories import LessonFactory, MemoryFactory, TeamFactory

pytestmark = pytest.mark.django_db(transaction=True)

TITLE = "Scope every ORM query by tenant in one manager, not in each view that remembers it"
CONTENT = "Mateo's trio played a packed set at the jazz club and debuted his own tune."


def layout(page) -> dict:
    return page.evaluate(
        """() => {
            const table = document.querySelector('#result_list');
            const main = table.querySelector('tbody tr th');
            return {sidebar: document.querySelector('#nav-sidebar') !== null,
                    box: table.closest('.results').clientWidth, main: main.getBoundingClientRect().width,
                    mainLines: Math.round(main.getBoundingClientRect().height /
                                          parseFloat(getComputedStyle(main).lineHeight))};
        }"""
    )


@pytest.mark.parametrize("kind", ["lesson", "memory"])
def test_the_list_has_the_width_and_its_main_column_a_sentences_room(admin_page, screenshot, kind):
    team = TeamFactory(slug="acme")
    if kind == "lesson":
        LessonFactory(team=team, title=TITLE, category="architecture")
    else:
        MemoryFactory(team=team, content=CONTENT, people=["Mateo"], categories=["event", "interest"])
    admin_page.goto(f"/admin/lessons/{kind}/")
    expect(admin_page.locator("#result_list tbody tr")).to_have_count(1)

    shown = layout(admin_page)
    assert not shown["sidebar"]
    assert shown["box"] >= 900  # of 1280: only the filters beside it
    assert shown["main"] >= 230  # 18em
    assert shown["mainLines"] <= 4  # the stock list broke this title over 6-7 lines
    screenshot(f"{kind}-list-layout")


def test_other_admin_pages_keep_the_app_sidebar(admin_page):
    admin_page.goto("/admin/lessons/team/")
    expect(admin_page.locator("#nav-sidebar")).to_be_attached()
