"""A sidebar filter clicked after a list search, as the tester did: the engine searches within it.

The sidebar's links for the lesson category and the memory importance send `?category=` and
`?importance=`, which the search did not read: "database security" then "frontend" under "By
category" said "0 results" where the engine finds 21 frontend lessons, and the playground link
left the category out."""

import re

import pytest

from lessons.search import SearchFilters, SearchRequest, search
from lessons.selectors.admin_search import ALL_LESSON_STATUSES

pytestmark = pytest.mark.django_db(transaction=True)


def _search_then_click(page, *, path: str, team, query: str, filter_title: str, choice: str):
    page.goto(f"{path}?team__id__exact={team.pk}")
    page.fill("#searchbar", query)
    page.press("#searchbar", "Enter")
    page.wait_for_selector(".engine-search-summary")
    sidebar = page.locator(f"#changelist-filter details[data-filter-title='{filter_title}']")
    with page.expect_navigation():
        sidebar.get_by_role("link", name=choice, exact=True).click()
    page.wait_for_selector(".engine-search-summary")
    assert page.input_value("#searchbar") == query  # the click kept the search
    return page.locator("#result_list tbody tr")


def test_a_category_clicked_after_a_search_lists_the_engines_hits_in_it(admin_page, live_demo_team, screenshot):
    query = "database security"
    rows = _search_then_click(admin_page, path="/admin/lessons/lesson/", team=live_demo_team, query=query,
                              filter_title="category", choice="frontend")
    frontend = SearchFilters(statuses=ALL_LESSON_STATUSES, categories=("frontend",))
    engine = search(request=SearchRequest(team=live_demo_team, query=query, kind="lessons", limit=50, filters=frontend))
    assert len(engine.results) >= 10
    assert rows.count() == len(engine.results)
    assert set(rows.locator("td.field-category").all_inner_texts()) == {"frontend"}
    assert f"{len(engine.results)} results" in admin_page.locator("#changelist-search .small.quiet").inner_text()
    chosen = admin_page.locator("#changelist-filter details[data-filter-title='category'] li.selected")
    assert chosen.inner_text().strip() == "frontend"
    screenshot("list-search-then-category-frontend")

    # "Why this order?" opens the same search, category and all, and ranks the same rows
    titles = rows.locator("th.field-title a").all_inner_texts()
    admin_page.get_by_role("link", name=re.compile("search playground")).click()
    admin_page.wait_for_selector(".playground-run")
    assert admin_page.input_value("#id_q") == query and admin_page.input_value("#id_category") == "frontend"
    assert admin_page.locator("#run-1 .hit").count() == len(titles)
    assert admin_page.locator("#run-1 .hit .hit-title").first.inner_text() == titles[0]
    screenshot("playground-from-list-search-in-frontend")


def test_an_importance_clicked_after_a_search_lists_the_engines_hits_at_it(admin_page, live_demo_team, screenshot):
    query = "a day with friends"
    rows = _search_then_click(admin_page, path="/admin/lessons/memory/", team=live_demo_team, query=query,
                              filter_title="importance", choice="3")
    engine = search(request=SearchRequest(team=live_demo_team, query=query, kind="memories", limit=50,
                                          filters=SearchFilters(min_importance=3, max_importance=3)))
    assert engine.results
    assert rows.count() == len(engine.results)
    assert set(rows.locator("td.field-importance").all_inner_texts()) == {"3"}
    screenshot("list-search-then-importance-3")
    admin_page.get_by_role("link", name=re.compile("search playground")).click()
    admin_page.wait_for_selector(".playground-run")
    assert admin_page.input_value("#id_min_importance") == admin_page.input_value("#id_max_importance") == "3"
    assert admin_page.locator("#run-1 .hit").count() == len(engine.results)
