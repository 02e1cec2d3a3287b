"""A team's name is anyone's text: a 200-character one must not widen the curation pages. Before, the
team menu of the proposals and duplicates pages was as wide as its longest entry, and such a name made
those pages ~2,800 px wide in a 1024 px window, the Show button and the help text out of sight."""

import pytest
from playwright.sync_api import expect

from tests.factories import LessonFactory, TeamFactory

pytestmark = pytest.mark.django_db(transaction=True)

WINDOW = {"width": 1024, "height": 768}
TOLERANCE = 2  # px: sub-pixel rounding
LONG_NAME = ("Platform engineering and developer productivity working group for the payments, billing, "
             "invoicing, tax and revenue recognition services of the European, Middle Eastern and "
             "Asia-Pacific regions, 2026-2027")[:200]  # as long as a name may be


def widths(page) -> dict:
    return page.evaluate(
        """() => {
            const select = document.querySelector('.curation-filter select[name=team]');
            const filter = document.querySelector('.curation-filter');
            const submit = filter.querySelector('input[type=submit]');
            return {page: document.documentElement.scrollWidth, window: window.innerWidth,
                    select: select.getBoundingClientRect().width,
                    filterRight: filter.getBoundingClientRect().right,
                    submitRight: submit.getBoundingClientRect().right};
        }"""
    )


@pytest.mark.parametrize("path", ["lesson/proposals", "lesson/duplicates", "memory/duplicates"])
def test_a_long_team_name_leaves_the_curation_pages_as_wide_as_the_window(admin_page, screenshot, path):
    team = TeamFactory(slug="payments-platform", name=LONG_NAME)
    TeamFactory(slug="acme", name="Acme")
    LessonFactory(team=team, status="proposed")
    admin_page.set_viewport_size(WINDOW)
    admin_page.goto(f"/admin/lessons/{path}/?team=payments-platform")
    select = admin_page.locator(".curation-filter select[name=team]")
    expect(select).to_have_value("payments-platform")
    screenshot(f"long-team-name-{path.replace('/', '-')}")

    shown = widths(admin_page)
    assert shown["page"] <= shown["window"], shown  # was ~2,800 px
    assert shown["select"] <= 400, shown  # a menu, not a line of text
    assert shown["submitRight"] <= shown["filterRight"] + TOLERANCE, shown  # Show stays in the box
    # the whole name is still there: the open menu lists it
    assert LONG_NAME in select.locator("option:checked").inner_text()
