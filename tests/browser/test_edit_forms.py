"""The lesson and memory edit pages in a real browser: a lesson's title (a sentence) shows whole,
list fields say they are comma-separated, and what a curator types there is saved normalised
(a blank item from a trailing or doubled comma dropped, not refused); a term the store cannot
keep is refused with the field named and nothing saved."""

import pytest
from playwright.sync_api import expect

from lessons.models import Lesson, Memory
from lessons.services.lessons import lesson_reject
from lessons.services.memories import memory_create, memory_update
from tests.factories import LessonFactory, MemoryFactory, TeamFactory

pytestmark = pytest.mark.django_db(transaction=True)

# 82 characters: lessons-dev's titles are 72 long at the median and 82 at the 90th percentile; the
# stock input showed about 40
LONG_TITLE = "Scope every ORM query by tenant in one manager, not in each view that remembers it"


def box_width(page, selector: str) -> float:
    return page.locator(selector).bounding_box()["width"]


def test_lesson_title_shows_whole_and_list_fields_take_comma_separated_terms(admin_page, screenshot):
    lesson = LessonFactory(team=TeamFactory(slug="acme"), title=LONG_TITLE, tags=["tenancy"])
    admin_page.goto(f"/admin/lessons/lesson/{lesson.pk}/change/")

    title = admin_page.locator("#id_title")
    expect(title).to_have_value(LONG_TITLE)
    # as wide as the description box, and the whole sentence fits without scrolling the input
    assert box_width(admin_page, "#id_title") >= 0.95 * box_width(admin_page, "#id_description")
    assert title.evaluate("input => input.scrollWidth <= input.clientWidth")
    for name in ("tags", "tech_stacks", "project_types"):
        expect(admin_page.locator(f"#id_{name}_helptext")).to_contain_text("Comma-separated")
    screenshot("lesson-change-form", full_page=True)

    admin_page.fill("#id_tags", "Tenancy, ORM ,multi-tenant,")  # a trailing comma is not an item
    admin_page.fill("#id_tech_stacks", "Django, PostgreSQL")
    admin_page.click("input[name=_continue]")
    expect(admin_page.locator("ul.messagelist li", has_text="was changed successfully")).to_have_count(1)
    # what was stored otherwise than typed is said (the terms are kept in lower case)
    expect(admin_page.locator("ul.messagelist li").first).to_contain_text("“tenancy, orm, multi-tenant”")

    lesson = Lesson.objects.get(pk=lesson.pk)
    assert lesson.tags == ["tenancy", "orm", "multi-tenant"]
    assert lesson.tech_stacks == ["django", "postgresql"]
    assert lesson.title == LONG_TITLE


def test_memory_list_fields_say_comma_separated_and_keep_their_own_help(admin_page, screenshot):
    memory = MemoryFactory(team=TeamFactory(slug="acme"), people=["Mateo", "Smith, John"], emotions=["excited"])
    admin_page.goto(f"/admin/lessons/memory/{memory.pk}/change/")

    expect(admin_page.locator("#id_emotions_helptext")).to_have_text("Comma-separated.")
    expect(admin_page.locator("#id_people_helptext")).to_have_text("One per line.")  # a name may hold a comma
    # the model's own help stays after the format
    expect(admin_page.locator("#id_categories_helptext")).to_contain_text("Comma-separated. person, emotion")
    assert box_width(admin_page, "#id_people") >= 0.95 * box_width(admin_page, "#id_content")
    expect(admin_page.locator("#id_people")).to_have_value("Mateo\nSmith, John")
    screenshot("memory-change-form", full_page=True)


def test_a_bad_term_is_refused_on_its_field_and_nothing_is_saved(admin_page):
    lesson = LessonFactory(team=TeamFactory(slug="acme"), tags=["tenancy"])
    admin_page.goto(f"/admin/lessons/lesson/{lesson.pk}/change/")
    admin_page.fill("#id_tags", "orm,, multi;tenant")
    admin_page.click("input[name=_continue]")

    expect(admin_page.locator(".errornote")).to_be_visible()
    expect(admin_page.locator(".form-row.field-tags .errorlist")).to_contain_text("Use ASCII letters, digits, spaces")
    assert Lesson.objects.get(pk=lesson.pk).tags == ["tenancy"]


def test_people_read_one_a_line_on_the_list_and_an_earlier_versions_page(admin_page, screenshot):
    # joined with commas, "Smith, John" and "Doe, Jane" read as four people
    long_name = "L" * 200
    memory = memory_create(team=TeamFactory(slug="acme"), content="Board meeting",
                           people=["Smith, John", "Doe, Jane", long_name])
    memory_update(memory=memory, content="Board meeting, moved to Friday")
    earlier = Memory.objects.get(current_version=memory)

    admin_page.goto("/admin/lessons/memory/")
    names = admin_page.locator("#result_list td.field-people_names .person-name")
    expect(names).to_have_text(["Smith, John", "Doe, Jane", long_name])

    admin_page.goto(f"/admin/lessons/memory/{earlier.pk}/change/")
    names = admin_page.locator(".field-people_names .person-name")
    expect(names).to_have_text(["Smith, John", "Doe, Jane", long_name])
    page_width = admin_page.evaluate("document.documentElement.scrollWidth")
    assert page_width <= admin_page.viewport_size["width"]  # the long name wraps
    screenshot("memory-earlier-version-people", full_page=True)


def test_a_page_opened_before_another_curators_decision_says_so_instead_of_undoing_it(admin_page, screenshot):
    proposal = LessonFactory(team=TeamFactory(slug="acme"), title=LONG_TITLE, status="proposed")
    admin_page.goto(f"/admin/lessons/lesson/{proposal.pk}/change/")
    lesson_reject(lesson=Lesson.objects.get(pk=proposal.pk))  # another curator, meanwhile
    admin_page.fill("#id_context", "Seen in the billing service.")
    admin_page.click("input[name=_continue]")
    error = admin_page.locator(".errornote, ul.errorlist.nonfield").last
    expect(error).to_contain_text("was changed by someone else")
    screenshot("lesson-changed-since-opened")
    stored = Lesson.objects.get(pk=proposal.pk)
    assert (stored.status, stored.context) == ("rejected", proposal.context)
