"""What the console says, in a real browser: a bulk accept on a status-filtered list after another
tab rejected one of its proposals, a merge that confirms the proposal it keeps, a playground filter
the API refuses, and a team slug reserved for evaluation teams."""

import pytest
from playwright.sync_api import expect

from lessons.models import Lesson, Team
from lessons.services.lessons import lesson_reject_proposals
from tests.curation_data import DOCKER_PIN, DOCKER_PIN_AGAIN, embed, lesson
from tests.factories import LessonFactory, TeamFactory

pytestmark = pytest.mark.django_db(transaction=True)


def message(page):
    return page.locator("ul.messagelist li").first


def test_an_accept_on_the_proposed_list_names_the_proposal_rejected_meanwhile(admin_page, screenshot):
    team = TeamFactory(slug="acme", name="Acme")
    first, second = (LessonFactory(team=team, title=f"Proposal {number}", status="proposed") for number in (1, 2))
    admin_page.goto("/admin/lessons/lesson/?status__exact=proposed")
    for proposal in (first, second):
        admin_page.locator(f'input[name="_selected_action"][value="{proposal.pk}"]').check()
    admin_page.locator('select[name="action"]').first.select_option("accept_selected")
    admin_page.get_by_role("button", name="Go").first.click()
    expect(admin_page.locator("ul.accept-list li")).to_have_count(2)
    lesson_reject_proposals(lesson_ids=[second.pk])  # another tab, or an agent through the API

    admin_page.get_by_role("button", name="Yes, accept 2").click()
    expect(message(admin_page)).to_have_text(
        "1 proposal(s) accepted. 1 had changed status meanwhile and was left alone.")
    screenshot("accept-filtered-list-decided-meanwhile")
    assert dict(Lesson.objects.values_list("pk", "status")) == {first.pk: "confirmed", second.pk: "rejected"}


def test_a_merge_keeping_a_proposal_says_it_is_now_confirmed(admin_page, screenshot):
    team = TeamFactory(slug="acme", name="Acme")
    proposal = lesson(team, DOCKER_PIN, status="proposed", confidence=0.5)
    confirmed = lesson(team, DOCKER_PIN_AGAIN, confidence=0.4, frequency=2)
    embed(proposal, confirmed)
    admin_page.goto("/admin/lessons/lesson/duplicates/?team=acme")
    pair = admin_page.locator("section.curation-card")
    expect(pair).to_have_count(1)
    pair.locator(f'input[name="keep"][value="{proposal.pk}"]').check()
    pair.locator(f'input[name="text_from"][value="{proposal.pk}"]').check()
    pair.get_by_role("button", name="Merge").click()
    expect(message(admin_page)).to_have_text(
        f"Merged lesson #{confirmed.pk} into #{proposal.pk} “{DOCKER_PIN['title']}”: frequency 3, confidence 0.50. "
        f"#{proposal.pk} was proposed and is now confirmed: agents find it in their searches from now on.")
    screenshot("duplicates-merge-confirms-the-kept-proposal")
    assert Lesson.objects.get(pk=proposal.pk).status == "confirmed"


def test_a_playground_filter_the_api_refuses_is_shown_next_to_it(admin_page, screenshot):
    TeamFactory(slug="acme", name="Acme")
    admin_page.goto("/admin/lessons/search/?team=acme&q=cache&tags=bad+tag!")
    tags = admin_page.locator(".field").filter(has=admin_page.locator("#id_tags"))
    expect(tags.locator(".errorlist")).to_have_text(
        "filters.tags.0: Use ASCII letters, digits, spaces and + # . _ - "
        "(start with a letter or digit, or a dot and one: .net).")
    expect(admin_page.locator("#content")).not_to_contain_text("No results.")
    screenshot("playground-refused-tag", full_page=True)


def test_a_team_slug_reserved_for_evaluation_teams_is_refused_on_its_field(admin_page, screenshot):
    admin_page.goto("/admin/lessons/team/add/")
    admin_page.locator("#id_name").press_sequentially("Eval demo")  # the slug follows the name as typed
    expect(admin_page.locator("#id_slug")).to_have_value("eval-demo")
    admin_page.get_by_role("button", name="Save", exact=True).click()
    expect(admin_page.locator(".field-slug .errorlist")).to_contain_text(
        "Slugs starting with “eval-” are reserved for the evaluation teams that eval_retrieval loads")
    screenshot("team-add-eval-slug-refused")
    assert not Team.objects.exists()
