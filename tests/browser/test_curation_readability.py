"""What a curator reads and reaches, in a real browser: a duplicate pair on a phone, the memory
list's people, keyboard focus on the console's buttons, the admin's icon.

Before: at 390 px the duplicates page kept its three columns (names 145 px, each row 95 px), so words
broke mid-word and a description ran 20+ lines; the memory list's people column (~55 px) broke
"Smith, John" into "Smith," / "John" and "Okafor" into "Okafo" / "r"; a focused Accept or Reject
button had only the browser's 1 px dark outline, lost on its dark blue or red; and every admin page
asked for /favicon.ico, a 404 in the console."""

import datetime

import pytest
from django.core.signals import request_started
from playwright.sync_api import expect

from lessons.services.memories import memory_create
from tests.curation_data import DOCKER_PIN, DOCKER_PIN_AGAIN, PANIC, PANIC_AGAIN, embed, lesson
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"width": 390, "height": 844}
TOLERANCE = 2  # px: sub-pixel rounding
LONG_DESCRIPTION = (
    "Builds broke when the latest tag of the base image changed under us: a minor release of the image "
    "moved OpenSSL forward, our integration tests failed on certificate validation, and the deploy "
    "pipeline was blocked for most of a day while we found out which layer had changed."
)


def cells(page, selector: str) -> list[dict]:
    """Each element's box and how many lines its text takes."""
    return page.evaluate(
        """(selector) => [...document.querySelectorAll(selector)].map((element) => {
            const box = element.getBoundingClientRect();
            const range = document.createRange();
            range.selectNodeContents(element);
            const tops = new Set([...range.getClientRects()].filter((rect) => rect.width > 0)
                                   .map((rect) => Math.round(rect.top)));
            return {text: element.textContent.trim().slice(0, 40), left: box.left, right: box.right,
                    width: box.width, height: box.height, lines: tops.size,
                    clipped: element.scrollWidth > element.clientWidth + 1};
        })""",
        selector,
    )


def page_width(page) -> int:
    return page.evaluate("() => document.documentElement.scrollWidth")


def test_a_duplicate_pair_reads_on_a_phone(admin_page, screenshot):
    team = TeamFactory(slug="acme", name="Acme")
    pin = lesson(team, {**DOCKER_PIN, "description": LONG_DESCRIPTION})
    pin_again = lesson(team, DOCKER_PIN_AGAIN)
    panic, panic_again = memory_create(team=team, content=PANIC), memory_create(team=team, content=PANIC_AGAIN)
    embed(pin, pin_again, panic, panic_again)
    admin_page.set_viewport_size(PHONE)
    admin_page.goto("/admin/lessons/lesson/duplicates/?team=acme&threshold=0.3")
    pair = admin_page.locator(f"#pair-{pin.pk}-{pin_again.pk}")
    expect(pair).to_be_visible()
    pair.scroll_into_view_if_needed()
    screenshot("duplicates-phone-390")
    screenshot("duplicates-phone-390-full", full_page=True)

    assert page_width(admin_page) <= PHONE["width"] + TOLERANCE
    values = cells(admin_page, f"#pair-{pin.pk}-{pin_again.pk} td[data-item]")
    assert len(values) == 12  # 6 fields of 2 lessons
    for value in values:  # each value has the card's width, not a third of it
        assert value["width"] >= 300, value
    labels = cells(admin_page, f"#pair-{pin.pk}-{pin_again.pk} tbody th.field")
    assert [label["text"] for label in labels][:3] == ["Status", "Confidence · frequency", "Description"]
    for label in labels:
        assert label["lines"] == 1 and label["width"] >= 300, label  # a heading above its two values
    (description,) = cells(admin_page, f"#pair-{pin.pk}-{pin_again.pk} tr:nth-child(3) td[data-item='#{pin.pk}']")
    assert description["lines"] <= 8, description  # 20+ lines side by side
    # each value says whose it is: the lesson's id before it
    marker = admin_page.evaluate(
        "(selector) => getComputedStyle(document.querySelector(selector), '::before').content",
        f"#pair-{pin.pk}-{pin_again.pk} td[data-item='#{pin_again.pk}']",
    )
    assert marker == f'"#{pin_again.pk}"'

    admin_page.goto("/admin/lessons/memory/duplicates/?team=acme&threshold=0.3")
    memories = admin_page.locator(f"#pair-{panic.pk}-{panic_again.pk}")
    expect(memories).to_be_visible()
    memories.scroll_into_view_if_needed()
    screenshot("memory-duplicates-phone-390")
    assert page_width(admin_page) <= PHONE["width"] + TOLERANCE
    for value in cells(admin_page, f"#pair-{panic.pk}-{panic_again.pk} td[data-item]"):
        assert value["width"] >= 300, value

    # a desktop keeps the two side by side
    admin_page.set_viewport_size({"width": 1280, "height": 800})
    first, second = cells(admin_page, f"#pair-{panic.pk}-{panic_again.pk} tr:first-child td[data-item]")
    assert second["left"] >= first["right"] - TOLERANCE


def test_the_memory_lists_people_are_one_whole_name_a_line(admin_page, screenshot):
    team = TeamFactory(slug="lessons-dev", name="lessons-dev")
    moment = datetime.datetime(2025, 9, 28, 23, 59, tzinfo=datetime.UTC)
    for content, people in [
        ("Priya moved to Lisbon in September to lead the database security team at her new company.",
         ["Smith, John", "Okafor"]),
        ("Board meeting about the merger; Dr. Okafor presented the numbers and John took the minutes.",
         ["Dr. Okafor", "Priya", "Henrike"]),
    ]:
        memory_create(team=team, content=content, people=people, categories=["work", "relationship"], importance=8,
                      occurred_at=moment)
    admin_page.goto("/admin/lessons/memory/")
    expect(admin_page.locator("#result_list tbody tr")).to_have_count(2)
    screenshot("memory-list-people")

    names = cells(admin_page, "#result_list td.field-people_names .person-name")
    assert sorted(name["text"] for name in names) == ["Dr. Okafor", "Henrike", "Okafor", "Priya", "Smith, John"]
    for name in names:
        assert name["lines"] == 1 and not name["clipped"], name  # never broken inside, nor cut
    # the table still fits its box, no sideways scroll
    fits = admin_page.evaluate(
        "() => { const t = document.querySelector('#result_list'); return t.scrollWidth <= "
        "t.closest('.results').clientWidth + 1; }"
    )
    assert fits


def test_a_very_long_name_is_cut_with_its_whole_name_as_title(admin_page):
    team = TeamFactory(slug="acme", name="Acme")
    long_name = "Maximiliana Wolfeschlegelsteinhausenbergerdorff-Featherstonehaugh"
    memory_create(team=team, content="Met the new neighbour.", people=[long_name])
    admin_page.goto("/admin/lessons/memory/")
    name = admin_page.locator("#result_list .person-name")
    expect(name).to_have_attribute("title", long_name)
    (box,) = cells(admin_page, "#result_list .person-name")
    assert box["lines"] == 1 and box["width"] <= 7 * 12 + TOLERANCE, box  # 7em of 12 px at most (console.css)


def focus_ring(page, selector: str) -> dict:
    return page.evaluate(
        """(selector) => {
            const element = document.querySelector(selector);
            const style = getComputedStyle(element);
            return {focused: document.activeElement === element, visible: element.matches(':focus-visible'),
                    width: style.outlineWidth, style: style.outlineStyle, colour: style.outlineColor,
                    offset: style.outlineOffset};
        }""",
        selector,
    )


def tab_to(page, selector: str, *, most: int = 60) -> None:
    """Press Tab until `selector` has the focus, as a keyboard user gets there."""
    for _ in range(most):
        if page.evaluate("(selector) => document.activeElement === document.querySelector(selector)", selector):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached {selector}")


def test_keyboard_focus_on_the_curation_buttons_is_a_clear_ring(admin_page, screenshot):
    team = TeamFactory(slug="acme", name="Acme")
    proposal = lesson(team, DOCKER_PIN, status="proposed")
    pin, pin_again = lesson(team, DOCKER_PIN_AGAIN), lesson(team, {**DOCKER_PIN, "title": "Pin base images"})
    embed(proposal, pin, pin_again)
    admin_page.goto("/admin/lessons/lesson/proposals/?team=acme")
    card = admin_page.locator(f"#proposal-{proposal.pk}")
    for button in ("accept", "reject"):
        selector = f"#proposal-{proposal.pk} button[value='{button}']"
        tab_to(admin_page, selector)
        ring = focus_ring(admin_page, selector)
        assert ring["focused"] and ring["visible"], ring
        assert (ring["width"], ring["style"], ring["offset"]) == ("3px", "solid", "2px"), ring
        assert ring["colour"] == "rgb(255, 191, 71)", ring  # amber, outside a dark band
        box = card.bounding_box()
        admin_page.screenshot(path=str(screenshot(f"focus-{button}").with_name(f"focus-{button}.png")),
                              clip={"x": box["x"], "y": box["y"], "width": box["width"], "height": 260})
    selector = f"#proposal-{proposal.pk} a.title"  # the links too
    tab_to(admin_page, selector)
    assert focus_ring(admin_page, selector)["width"] == "3px"

    admin_page.goto("/admin/lessons/lesson/duplicates/?team=acme&threshold=0.5")
    selector = "section.curation-card button[value='merge']"
    tab_to(admin_page, selector, most=120)
    ring = focus_ring(admin_page, selector)
    assert ring["visible"] and ring["width"] == "3px", ring
    admin_page.locator(selector).first.scroll_into_view_if_needed()
    screenshot("focus-merge")


def test_admin_pages_have_an_icon_and_ask_for_no_favicon(admin_page):
    team = TeamFactory(slug="acme", name="Acme")
    row = lesson(team, DOCKER_PIN)
    served = []  # what the live server was asked for (Playwright does not report a favicon's request)

    def record(sender, environ, **kwargs):
        served.append(environ["PATH_INFO"])

    errors = []
    admin_page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    request_started.connect(record)
    try:
        for path in ("/admin/", "/admin/lessons/lesson/", f"/admin/lessons/lesson/{row.pk}/change/",
                     "/admin/lessons/lesson/proposals/", "/admin/lessons/memory/duplicates/",
                     "/admin/lessons/search/"):
            admin_page.goto(path)
            icon = admin_page.locator("link[rel='icon']")
            expect(icon).to_have_count(1)
            assert icon.get_attribute("href").startswith("data:image/svg+xml,")
            admin_page.wait_for_timeout(300)  # a favicon is asked for after the page's load
    finally:
        request_started.disconnect(record)
    assert "/admin/lessons/search/" in served  # the recording works
    assert "/favicon.ico" not in served, served
    assert not errors, errors
