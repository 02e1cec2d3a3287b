"""The curation pages in a real browser: the proposals queue (accept, reject, merge into a
neighbour), the duplicates pages (merge, not a duplicate), a memory's history (diff, restore).

The rows are embedded with the real model before the page is opened (`embed`), so the
neighbours and pairs the pages show are the model's."""

import re

import pytest
from playwright.sync_api import expect

from lessons.models import DuplicateDismissal, Lesson, LessonMerge, Memory
from lessons.services.memories import memory_create, memory_update
from tests.curation_data import (
    CHECKOUT_TESTS,
    DOCKER_PIN,
    DOCKER_PIN_AGAIN,
    FOREIGN_KEYS,
    PANIC,
    PANIC_AGAIN,
    embed,
    embedded_memories,
    lesson,
)
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db(transaction=True)

N_PLUS_ONE = {
    "title": "Avoid N+1 queries in list endpoints",
    "description": "The orders list issued one query per order to load its customer.",
    "recommendation": "Load related rows with select_related or prefetch_related.",
}
N_PLUS_ONE_AGAIN = {
    "title": "N+1 queries when listing orders",
    "description": "The orders list ran one query per order to load its customer.",
    "recommendation": "Load the customers with select_related or prefetch_related.",
}


@pytest.fixture
def curated_team(db):
    return TeamFactory(slug="acme", name="Acme")


def message(page):
    return page.locator("ul.messagelist li").first


def test_proposals_queue_accept_reject_and_merge_into_a_neighbour(admin_page, curated_team, screenshot):
    team = curated_team
    pin = lesson(team, DOCKER_PIN, frequency=2, confidence=0.6, tags=["docker"])
    others = [lesson(team, fields) for fields in (FOREIGN_KEYS, CHECKOUT_TESTS, N_PLUS_ONE)]
    duplicate = lesson(team, DOCKER_PIN_AGAIN, status="proposed", confidence=0.9, tags=["builds"])
    good = lesson(team, N_PLUS_ONE_AGAIN, status="proposed")
    bad = lesson(team, {"title": "Commit node_modules to the repository"}, status="proposed")
    embed(pin, *others, duplicate, good, bad)
    TeamFactory(slug="aardvark", name="aardvark")  # first by name, nothing waiting: not where the queue opens

    admin_page.goto("/admin/")
    expect(admin_page.locator(".curation-waiting").first).to_have_text("3 waiting")
    screenshot("index-proposals-waiting")
    admin_page.get_by_role("link", name="Review proposals").click()
    expect(admin_page.locator("h1")).to_have_text("Proposals to review")
    expect(admin_page.locator(".curation-summary")).to_contain_text("3 proposals waiting in Acme")
    expect(admin_page.locator("#id_team option:checked")).to_have_text("Acme (acme) \u2014 3 waiting")
    expect(admin_page.locator("#id_team option").first).to_have_text("aardvark")
    card = admin_page.locator(f"#proposal-{duplicate.pk}")
    neighbours = card.locator(".neighbour")
    expect(neighbours).to_have_count(3)
    # The closest confirmed lesson is the one it restates, and the page says how close.
    expect(neighbours.first).to_have_attribute("data-lesson", str(pin.pk))
    similarity = float(neighbours.first.locator(".curation-similarity").inner_text())
    assert similarity > 0.85
    screenshot("proposals", full_page=True)

    card.locator(f'.neighbour[data-lesson="{pin.pk}"]').get_by_role("button", name="Merge into this").click()
    expect(message(admin_page)).to_contain_text(f"Merged the proposal into #{pin.pk}")
    expect(admin_page.locator(f"#proposal-{duplicate.pk}")).to_have_count(0)
    expect(admin_page.locator("#id_team option:checked")).to_have_text("Acme (acme) \u2014 2 waiting")
    pin.refresh_from_db()
    assert (pin.title, pin.frequency, pin.confidence, pin.tags) == (DOCKER_PIN["title"], 3, 0.9, ["docker", "builds"])
    assert not Lesson.objects.filter(pk=duplicate.pk).exists()
    assert LessonMerge.objects.get(lesson=pin).merged_lesson_id == duplicate.pk

    admin_page.locator(f"#proposal-{good.pk}").get_by_role("button", name="Accept").click()
    expect(message(admin_page)).to_contain_text("Accepted")
    admin_page.locator(f"#proposal-{bad.pk}").get_by_role("button", name="Reject").click()
    expect(message(admin_page)).to_contain_text("Rejected")
    expect(admin_page.locator(".curation-empty")).to_contain_text("Nothing to review")
    assert Lesson.objects.get(pk=good.pk).status == "confirmed"
    assert Lesson.objects.get(pk=bad.pk).status == "rejected"


def test_duplicates_page_merge_with_the_other_text_and_dismiss(admin_page, curated_team, screenshot):
    team = curated_team
    pin = lesson(team, DOCKER_PIN, frequency=2, tags=["docker"], tech_stacks=["docker"])
    pin_again = lesson(team, DOCKER_PIN_AGAIN, frequency=1, confidence=0.9, tags=["ci"])
    n1 = lesson(team, N_PLUS_ONE, tech_stacks=["django"])
    n1_again = lesson(team, N_PLUS_ONE_AGAIN, tech_stacks=["django"], status="proposed")
    keys, checkout = lesson(team, FOREIGN_KEYS), lesson(team, CHECKOUT_TESTS)
    embed(pin, pin_again, n1, n1_again, keys, checkout)

    admin_page.goto("/admin/lessons/lesson/")
    admin_page.locator(".object-tools").get_by_role("link", name="Duplicates").click()
    expect(admin_page.locator("h1")).to_have_text("Duplicate lessons")
    cards = admin_page.locator("section.curation-card")
    expect(cards).to_have_count(2)  # the two restatements; nothing unrelated
    expect(admin_page.locator(f"#pair-{pin.pk}-{pin_again.pk}")).to_be_visible()
    expect(admin_page.locator(f"#pair-{n1.pk}-{n1_again.pk}")).to_be_visible()
    shot = screenshot("duplicates")
    # The README's picture: the page's content, without the header and sidebar (a smaller PNG).
    content = admin_page.locator("#content").bounding_box()
    admin_page.screenshot(
        path=str(shot.with_name("duplicates-readme.png")),
        clip={"x": content["x"], "y": content["y"], "width": content["width"], "height": 690},
    )

    # Keep the second lesson, but with the first one's text.
    pair = admin_page.locator(f"#pair-{pin.pk}-{pin_again.pk}")
    pair.locator(f'input[name="keep"][value="{pin_again.pk}"]').check()
    pair.locator(f'input[name="text_from"][value="{pin.pk}"]').check()
    pair.get_by_role("button", name="Merge").click()
    expect(message(admin_page)).to_contain_text(f"Merged lesson #{pin.pk} into #{pin_again.pk}")
    expect(cards).to_have_count(1)
    pin_again.refresh_from_db()
    assert (pin_again.title, pin_again.frequency, pin_again.confidence) == (DOCKER_PIN["title"], 3, 0.9)
    assert (pin_again.tags, pin_again.tech_stacks) == (["ci", "docker"], ["docker"])
    assert not Lesson.objects.filter(pk=pin.pk).exists()
    # The kept lesson's page records what was merged into it.
    duplicates_url = admin_page.url
    admin_page.goto(f"/admin/lessons/lesson/{pin_again.pk}/change/")
    expect(admin_page.locator("#merges")).to_contain_text(f"#{pin.pk} {DOCKER_PIN['title']}")
    admin_page.goto(duplicates_url)

    admin_page.locator(f"#pair-{n1.pk}-{n1_again.pk}").get_by_role("button", name="Not a duplicate").click()
    expect(message(admin_page)).to_contain_text("marked as not duplicates")
    expect(cards).to_have_count(0)
    admin_page.reload()
    # the marked pair is left out, not gone: the empty state says so ("No two" alone was untrue)
    expect(admin_page.locator(".curation-empty")).to_contain_text(
        "Apart from the pair marked “not a duplicate”, no two lessons in Acme")
    assert DuplicateDismissal.objects.filter(kind="lesson", low_id=n1.pk, high_id=n1_again.pk).exists()

    # A bad threshold is an admin message, not an error page; a wider one finds unrelated pairs.
    admin_page.goto("/admin/lessons/lesson/duplicates/?team=acme&threshold=7")
    expect(admin_page.locator(".curation-filter .errorlist")).to_contain_text("Threshold")
    admin_page.fill("#id_threshold", "0.9")
    admin_page.get_by_role("button", name="Show").click()
    expect(admin_page).to_have_url(re.compile(r"threshold=0\.9"))
    assert cards.count() >= 1


def test_memory_duplicates_merge_and_dismiss(admin_page, curated_team, screenshot):
    panic, panic_again, supermarket = embedded_memories(
        curated_team, PANIC, PANIC_AGAIN, "Another panic attack, this time in the supermarket queue."
    )
    admin_page.goto("/admin/lessons/memory/")
    admin_page.locator(".object-tools").get_by_role("link", name="Duplicates").click()
    admin_page.fill("#id_threshold", "0.3")
    admin_page.get_by_role("button", name="Show").click()
    pair = admin_page.locator(f"#pair-{panic.pk}-{panic_again.pk}")
    expect(pair).to_contain_text("tram")
    pair.locator(f'input[name="keep"][value="{panic_again.pk}"]').check()
    pair.get_by_role("button", name="Merge").click()
    expect(message(admin_page)).to_contain_text(f"Merged memory #{panic.pk} into #{panic_again.pk}")
    expect(admin_page.locator("section.curation-card")).to_have_count(0)
    assert list(Memory.objects.values_list("pk", flat=True).order_by("pk")) == [panic_again.pk, supermarket.pk]

    admin_page.fill("#id_threshold", "0.8")
    admin_page.get_by_role("button", name="Show").click()
    remaining = admin_page.locator(f"#pair-{panic_again.pk}-{supermarket.pk}")
    expect(remaining).to_be_visible()
    remaining.get_by_role("button", name="Not a duplicate").click()
    expect(admin_page.locator("section.curation-card")).to_have_count(0)
    assert DuplicateDismissal.objects.filter(kind="memory").count() == 1

    # The kept memory's page records what was merged into it, after its versions.
    admin_page.goto(f"/admin/lessons/memory/{panic_again.pk}/change/")
    merges = admin_page.locator("#merges")
    expect(merges).to_contain_text(f"#{panic.pk} {PANIC}"[:60])
    assert merges.bounding_box()["y"] > admin_page.locator("#history").bounding_box()["y"]
    merges.scroll_into_view_if_needed()
    screenshot("memory-merges")


def test_memory_history_shows_word_diffs_and_restores_a_version(admin_page, curated_team, screenshot):
    memory = memory_create(
        team=curated_team, content="Tom plays bass in a band", details="Mostly covers.", people=["Tom"]
    )
    memory_update(memory=memory, content="Tom plays double bass in a jazz band")
    memory_update(memory=memory, details="Mostly standards, on Fridays at the Blue Note.")

    admin_page.goto(f"/admin/lessons/memory/{memory.pk}/change/")
    admin_page.get_by_role("link", name="Versions (3)").click()
    history = admin_page.locator("#history")
    expect(history).to_be_in_viewport()
    versions = history.locator("article.history-version")
    expect(versions).to_have_count(3)
    expect(versions.nth(0)).to_have_attribute("data-version", "1")  # oldest first
    expect(versions.nth(2)).to_contain_text("current")
    second = versions.nth(1)
    expect(second.locator("ins")).to_have_text([" double", "jazz "])
    expect(versions.nth(2).locator("del")).to_have_text(["covers"])
    expect(versions.nth(2).locator("ins")).to_have_text(["standards, on Fridays at the Blue Note"])
    screenshot("memory-history", full_page=True)

    versions.nth(0).get_by_role("button", name="Restore this version").click()
    expect(message(admin_page)).to_contain_text("Restored the text of version 1: it is version 4 now")
    expect(admin_page.locator("#id_content")).to_have_value("Tom plays bass in a band")
    expect(admin_page.locator("#id_details")).to_have_value("Mostly covers.")
    expect(admin_page.locator("#history article.history-version")).to_have_count(4)
    memory.refresh_from_db()
    assert (memory.version, memory.content) == (4, "Tom plays bass in a band")
    assert Memory.objects.filter(current_version=memory).count() == 3
