"""The search pages on a phone (390 x 844) and the lesson list with an unbroken title (1280 x 800).

Before: the playground was 555 px wide at 390, its Setting A/B rows ran off the screen (fusion and
weights out of reach) and each hit's title got a letter's width, one letter a line, ~3,500 px of
page for two hits; the list search's summary broke the team's name one letter a line; a 300-character
title without a space pushed the relevance, team and status columns out of a 1280 px window."""

import pytest
from playwright.sync_api import expect

from lessons.services.lessons import lesson_create
from lessons.services.memories import memory_create, memory_update
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}
TOLERANCE = 2  # px: sub-pixel rounding, not a scrollbar's worth
UNBROKEN_TITLE = ("DatabaseSecurity" * 19)[:300]


def page_width(page) -> int:
    return page.evaluate("() => document.documentElement.scrollWidth")


def lines(page, selector: str) -> list[dict]:
    """Each element's width and the number of lines its text takes."""
    return page.evaluate(
        """(selector) => [...document.querySelectorAll(selector)].map((element) => {
            const box = element.getBoundingClientRect();
            const style = getComputedStyle(element);
            const lineHeight = parseFloat(style.lineHeight) || parseFloat(style.fontSize) * 1.2;
            const range = document.createRange();
            range.selectNodeContents(element);
            const tops = new Set([...range.getClientRects()].map((rect) => Math.round(rect.top)));
            return {text: element.textContent.trim(), width: box.width, height: box.height,
                    lines: Math.max(tops.size, Math.round(box.height / lineHeight))};
        })""",
        selector,
    )


def boxes(page, selector: str) -> list[dict]:
    return page.evaluate(
        """(selector) => [...document.querySelectorAll(selector)].map((element) => {
            const box = element.getBoundingClientRect();
            return {name: element.name || element.className || element.textContent.trim(),
                    left: box.left, right: box.right, width: box.width};
        })""",
        selector,
    )


def test_the_playground_fits_a_phone(admin_page, live_demo_team, screenshot):
    admin_page.set_viewport_size(PHONE)
    admin_page.goto("/admin/lessons/search/?q=database+security&b_mode=text")
    admin_page.wait_for_selector("#run-2 .hit")
    screenshot("narrow-playground-390")
    screenshot("narrow-playground-390-full", full_page=True)

    assert page_width(admin_page) <= PHONE["width"] + TOLERANCE
    # Every field of both settings (mode, fusion, the three weights) is on the screen.
    fields = boxes(admin_page, ".playground-settings .field select, .playground-settings .field input")
    assert len(fields) == 10
    off_screen = [field for field in fields if field["left"] < 0 or field["right"] > PHONE["width"] + TOLERANCE]
    assert not off_screen, off_screen
    # The query form's fields too, with "Context, filters and caller" open.
    admin_page.click(".playground-more summary")
    fields = boxes(admin_page, ".playground-query .field input, .playground-query .field select")
    assert len(fields) >= 10
    off_screen = [field for field in fields if field["left"] < 0 or field["right"] > PHONE["width"] + TOLERANCE]
    assert not off_screen, off_screen
    assert page_width(admin_page) <= PHONE["width"] + TOLERANCE
    admin_page.click(".playground-more summary")
    # Hit titles (at most 110 characters) get a column's width, not a letter's.
    titles = lines(admin_page, ".hit-title")
    assert len(titles) >= 4
    for title in titles:
        assert title["width"] >= 150, title
        assert title["lines"] <= 5, title
    # The score bars keep a visible length too.
    bars = boxes(admin_page, ".hit .score-parts .bar")
    assert bars and min(bar["width"] for bar in bars) >= 40, bars
    assert max(bar["right"] for bar in bars) <= PHONE["width"] + TOLERANCE
    admin_page.evaluate("() => document.querySelector('#run-1').scrollIntoView()")
    screenshot("narrow-playground-390-hits")


def test_the_playground_keeps_its_two_columns_at_1280(admin_page, live_demo_team, screenshot):
    admin_page.goto("/admin/lessons/search/?q=database+security&b_mode=text")
    admin_page.wait_for_selector("#run-2 .hit")
    screenshot("narrow-playground-1280")

    assert page_width(admin_page) <= DESKTOP["width"]
    runs = boxes(admin_page, ".playground-run")
    assert len(runs) == 2 and runs[1]["left"] > runs[0]["right"]  # side by side
    settings = boxes(admin_page, ".playground-settings .setting")
    assert len(settings) == 2 and settings[1]["left"] > settings[0]["right"]
    for title in lines(admin_page, ".hit-title"):
        assert title["lines"] <= 2, title


def test_the_list_search_summary_keeps_the_team_name_whole_on_a_phone(admin_page, live_demo_team, screenshot):
    admin_page.set_viewport_size(PHONE)
    admin_page.goto(f"/admin/lessons/lesson/?q=database+security&team__id__exact={live_demo_team.pk}")
    admin_page.wait_for_selector(".engine-search-summary")
    screenshot("narrow-list-search-390")

    summary = admin_page.locator(".engine-search-summary")
    expect(summary).to_contain_text("in team demo")
    (team,) = lines(admin_page, ".engine-search-summary strong")
    assert team["text"] == "demo"
    assert team["lines"] == 1, team
    (box,) = boxes(admin_page, ".engine-search-summary")
    assert box["width"] >= 250, box  # the summary has the toolbar's width, not a word's
    assert box["right"] <= PHONE["width"] + TOLERANCE, box


@pytest.mark.parametrize("query", ["", "database security"])
def test_an_unbroken_title_leaves_the_other_columns_in_view(admin_page, live_demo_team, screenshot, query):
    lesson = lesson_create(
        team=live_demo_team,
        title=UNBROKEN_TITLE,
        description="Database security: encrypt the backups, rotate the database credentials.",
        category="security",
    )
    admin_page.goto(f"/admin/lessons/lesson/?q={query.replace(' ', '+')}&team__id__exact={live_demo_team.pk}")
    row = admin_page.locator(f"#result_list tbody tr:has(input.action-select[value='{lesson.pk}'])")
    expect(row).to_have_count(1)
    row.scroll_into_view_if_needed()
    screenshot(f"narrow-list-unbroken-title-1280{'-search' if query else ''}")

    # In sight: inside the list's box (which scrolls sideways for the last columns, as without this
    # title), not only inside the window; the title keeps its 18em and no more than a sentence's room.
    visible_right = admin_page.evaluate(
        "() => { const box = document.querySelector('.results'); "
        "return box.getBoundingClientRect().left + box.clientWidth; }"
    )
    assert visible_right <= DESKTOP["width"]
    headers = ["team_label", "category", "status"] + (["search_relevance"] if query else [])
    placed = boxes(admin_page, ", ".join(f"#result_list thead th.column-{name}" for name in headers))
    assert len(placed) == len(headers), placed
    out_of_sight = [header for header in placed if header["right"] > visible_right]
    assert not out_of_sight, out_of_sight
    (title,) = boxes(admin_page, f"#result_list tbody tr:has(input[value='{lesson.pk}']) th.field-title")
    assert 230 <= title["width"] <= 400, title  # 18em, as a title with spaces gets


UNBROKEN_RUN = "x" * 3_000
LONG_URL = "https://example.com/" + "a1b2c3d4" * 60


def test_long_unbroken_words_wrap_in_a_memorys_history_and_the_proposals_queue(admin_page, screenshot):
    """A 3,000-character run made a memory's page 25,000 px wide (its version diffs did not wrap),
    and a proposal's URL ran across its neighbours' merge buttons (16,000 px)."""
    team = TeamFactory(slug="acme")
    memory = memory_create(team=team, content=f"Pasted a token {UNBROKEN_RUN} by mistake")
    for n in range(2):
        memory = memory_update(memory=memory, content=f"Pasted a token {UNBROKEN_RUN[: 2_000 - n]} again ({n})")
    lesson_create(team=team, title="Pin base images by digest", description="Tags move under you.")
    lesson_create(team=team, title="Pin base images", description=f"See {LONG_URL} for the digest list.",
                  status="proposed")
    admin_page.set_viewport_size(DESKTOP)

    admin_page.goto(f"/admin/lessons/memory/{memory.pk}/change/")
    expect(admin_page.locator(".history-version").first).to_be_visible()
    assert page_width(admin_page) <= DESKTOP["width"] + TOLERANCE
    screenshot("memory-history-unbroken-run")

    admin_page.goto(f"/admin/lessons/lesson/proposals/?team={team.slug}")
    expect(admin_page.locator(".proposal")).to_have_count(1)
    assert page_width(admin_page) <= DESKTOP["width"] + TOLERANCE
    # the description stays in its own column, left of the neighbours and their buttons
    text, neighbours = (admin_page.locator(selector).bounding_box() for selector in (".proposal-text",
                                                                                      ".proposal-neighbours"))
    assert text["x"] + text["width"] <= neighbours["x"] + TOLERANCE
    screenshot("proposal-with-a-long-url", full_page=True)


def test_an_unbroken_title_wraps_in_the_headings_and_breadcrumbs_of_its_pages(admin_page, screenshot):
    lesson = lesson_create(team=TeamFactory(slug="acme"), title="Pin " + "X" * 150, status="proposed")
    memory = memory_create(team=TeamFactory(slug="beta"), content="Token " + "y" * 300)
    for width, pages in ((1300, ["lesson/{l}/change/", "lesson/{l}/history/"]),
                         (420, ["memory/{m}/change/", "memory/{m}/history/"])):
        admin_page.set_viewport_size({"width": width, "height": 800})
        for path in pages:
            admin_page.goto("/admin/lessons/" + path.format(l=lesson.pk, m=memory.pk))
            assert page_width(admin_page) <= width + TOLERANCE, path
    screenshot("memory-history-unbroken-title-420", full_page=False)
