"""The curation console in a real browser: the lists' engine search, the playground's score parts,
accepting proposals with confirmation, re-embedding as a task with its progress page."""

import re

import pytest

from lessons.models import Lesson
from lessons.services.embeddings import embeddings_deferred
from lessons.services.lessons import lesson_create
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_lesson_list_search_finds_lessons_by_meaning(admin_page, live_demo_team, screenshot):
    admin_page.goto("/admin/lessons/lesson/")
    admin_page.fill("#searchbar", "database security")
    admin_page.press("#searchbar", "Enter")
    admin_page.wait_for_selector(".engine-search-summary")
    rows = admin_page.locator("#result_list tbody tr")
    assert rows.count() >= 10
    first = rows.first
    assert first.locator(".relevance").inner_text().lower() in ("high", "medium")
    titles = rows.locator("th.field-title a").all_inner_texts()
    categories = rows.locator("td.field-category").all_inner_texts()
    assert categories[0] in {"security", "database"}, titles[:5]
    assert sum(category in {"security", "database"} for category in categories[:5]) >= 4, titles[:5]
    summary = admin_page.locator(".engine-search-summary").inner_text()
    # 196 demo lessons, a page of 50: the summary says these are the best 50, not all that match
    assert re.search(r"the best 50 hits \(a search shows one page of its best; more rows may match.*\) in \d+ ms",
                     summary)
    screenshot("list-search-database-security")
    # The summary's link opens the same query in the playground, with the list's filters: the list
    # searched every status, so the playground does too, a page of 50 in team demo.
    admin_page.get_by_role("link", name=re.compile("search playground")).click()
    admin_page.wait_for_selector(".playground-run")
    assert admin_page.input_value("#id_q") == "database security"
    assert admin_page.input_value("#id_limit") == "50" and admin_page.input_value("#id_team") == "demo"
    statuses = admin_page.locator("input[name=status]")
    assert statuses.count() == 3 and all(statuses.nth(i).is_checked() for i in range(3))
    assert admin_page.locator("#run-1 .hit").count() == 50
    screenshot("playground-opened-from-the-list")


def test_playground_shows_each_score_taken_apart_for_two_settings(admin_page, live_demo_team, screenshot):
    admin_page.goto("/admin/lessons/search/")
    admin_page.fill("#id_q", "keep tenants from seeing each other's rows")
    admin_page.select_option("#id_mode", "hybrid")
    admin_page.select_option("#id_b_mode", "text")
    admin_page.click("input[type=submit][value=Search]")
    admin_page.wait_for_selector("#run-2 .hit")
    hybrid, text = admin_page.locator("#run-1"), admin_page.locator("#run-2")
    assert hybrid.locator("h2").first.inner_text().startswith("A: hybrid")
    assert text.locator("h2").first.inner_text().startswith("B: text")
    top = hybrid.locator(".hit").first
    # Bars for the semantic, keyword and quality parts and the penalty, drawn with their widths.
    for part in ("semantic", "keyword", "quality", "penalty"):
        assert top.locator(f"tr.part-{part} .bar").is_visible()
    semantic_width = top.locator("tr.part-semantic .bar-fill").bounding_box()["width"]
    assert semantic_width > 50  # the best hit by meaning: a long bar
    assert text.locator(".hit").first.locator("tr.part-semantic .bar-fill").bounding_box()["width"] == 0
    assert "found by primary" in top.locator(".hit-meta").inner_text()
    assert re.search(r"total \d+(\.\d)? ms", hybrid.locator(".timings").inner_text())
    assert "union" in hybrid.locator(".candidates").inner_text()
    assert top.locator(".rank-change").count() == 1  # where it ranks under the other setting
    # The hybrid's best hit says which of its tags the label feedback counted; text mode has none.
    feedback = top.locator(".label-feedback")
    assert feedback.is_visible() and feedback.locator("code").count() >= 1
    assert re.search(r"score = \(\d\.\d{3} \+ 0\.15\) ÷ 1\.15", feedback.inner_text())
    assert text.locator(".label-feedback").count() == 0
    screenshot("playground-hybrid-vs-text")
    screenshot("playground-hybrid-vs-text-full", full_page=True)
    title = top.locator(".hit-title").inner_text()
    top.locator(".hit-title").click()
    admin_page.wait_for_selector("#lesson_form")
    assert admin_page.input_value("#id_title") == title


def test_accepting_asks_first_and_touches_proposals_only(admin_page, screenshot):
    team = TeamFactory(slug="acme")
    with embeddings_deferred():
        proposal = lesson_create(team=team, title="Proposal: cache tokenizer output", status="proposed")
        rejected = lesson_create(team=team, title="Rejected: turn off CSRF for the API", status="rejected")
    admin_page.goto("/admin/lessons/lesson/")
    for lesson in (proposal, rejected):
        admin_page.check(f"input.action-select[value='{lesson.pk}']")
    admin_page.select_option("select[name=action]", "accept_selected")
    admin_page.click("button[name=index]")
    admin_page.wait_for_selector(".accept-list")
    assert "proposed → confirmed" in admin_page.locator(".accept-list").inner_text()
    assert "Rejected: turn off CSRF" in admin_page.locator(".confirm-skipped").inner_text()
    screenshot("accept-confirmation")
    assert Lesson.objects.get(pk=proposal.pk).status == "proposed"  # asked, not done
    admin_page.click("input[type=submit][value^='Yes, accept']")
    admin_page.wait_for_selector(".messagelist")
    assert "1 proposal(s) accepted." in admin_page.locator(".messagelist").inner_text()
    assert dict(Lesson.objects.values_list("pk", "status")) == {proposal.pk: "confirmed", rejected.pk: "rejected"}


def test_reembed_selected_runs_as_a_task_with_a_progress_page(admin_page, screenshot):
    team = TeamFactory(slug="acme")
    with embeddings_deferred():
        lessons = [lesson_create(team=team, title=f"Lesson {n} about retries and backoff") for n in range(3)]
    admin_page.goto("/admin/lessons/lesson/")
    admin_page.check("#action-toggle")
    admin_page.select_option("select[name=action]", "reembed_selected")
    admin_page.click("button[name=index]")
    admin_page.wait_for_selector(".embedding-job")
    assert "/admin/lessons/reembed/" in admin_page.url
    assert "3 of 3 re-embedded" in admin_page.locator(".job-summary").inner_text()
    assert admin_page.locator(".job-bar").get_attribute("aria-valuenow") == "100"
    screenshot("reembed-progress")
    assert Lesson.objects.filter(pk__in=[lesson.pk for lesson in lessons], embedding__isnull=False).count() == 3
