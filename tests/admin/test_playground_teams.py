"""The playground's team menu and weight boxes, and the not-a-duplicate marks' team filter.

Before: the playground's menu listed bare slugs, evaluation teams (`eval-*`) among them, while every
other team picker said "Name (slug)" and left benchmark corpora out; the marks' filter offered the
evaluation teams too. And a text column's weight boxes showed hybrid's 0.6 · 0.2 · 0.2 while its
header said the search ran on keyword 0.50 · quality 0.50."""

import html
import json
import re

import pytest
from django.urls import reverse

from lessons.admin.playground import mode_default_weights
from lessons.services.curation import duplicate_dismiss
from tests.factories import LessonFactory, TeamFactory

pytestmark = pytest.mark.django_db

PLAYGROUND = reverse("admin:lessons_search_playground")
MARKS = reverse("admin:lessons_duplicatedismissal_changelist")
LONG_QUERY = "how do we keep database migrations safe when several services share one schema in production"


@pytest.fixture
def teams(db):
    return (TeamFactory(slug="acme", name="Acme"), TeamFactory(slug="demo", name="demo"),
            TeamFactory(slug="eval-scifact", name="SciFact benchmark"))


def _options(page: str, name: str) -> list[tuple[str, str, bool]]:
    """(value, label, selected) of the `name` menu."""
    select = re.search(rf'<select name="{name}"[^>]*>(.*?)</select>', page, re.S).group(1)
    return [(value, html.unescape(label), "selected" in attrs)
            for value, attrs, label in re.findall(r'<option value="([^"]*)"([^>]*)>([^<]*)</option>', select)]


def _placeholders(page: str, prefix: str) -> list[str]:
    return [re.search(rf'<input[^>]*name="{prefix}{part}"[^>]*>', page).group(0).split('placeholder="')[1].split('"')[0]
            for part in ("semantic", "keyword", "quality")]


def test_the_team_menu_names_curated_teams_by_name_and_slug(admin_client, teams):
    page = admin_client.get(PLAYGROUND).content.decode()
    assert _options(page, "team") == [("acme", "Acme (acme)", False), ("demo", "demo", True)]


def test_an_evaluation_team_a_link_names_is_offered_as_one(admin_client, teams):
    # the lists link here with their team, an evaluation team when their filter chose one
    response = admin_client.get(PLAYGROUND, {"team": "eval-scifact", "q": "retries", "mode": "text"})
    assert _options(response.content.decode(), "team") == [
        ("acme", "Acme (acme)", False), ("demo", "demo", False),
        ("eval-scifact", "SciFact benchmark (eval-scifact) (evaluation)", True),
    ]
    (run,) = response.context["runs"]
    assert run.error is None


def test_an_unknown_team_is_still_refused_beside_its_field(admin_client, teams):
    response = admin_client.get(PLAYGROUND, {"team": "eval-nothing", "q": "retries"})
    assert "team" in response.context["form"].errors and response.context["runs"] == []


def test_the_weight_boxes_show_the_defaults_of_each_columns_mode(admin_client, teams):
    page = admin_client.get(PLAYGROUND).content.decode()  # A hybrid, B text: the page's first choice
    assert _placeholders(page, "w_") == ["0.60", "0.20", "0.20"]
    assert _placeholders(page, "b_w_") == ["–", "0.50", "0.50"]
    page = admin_client.get(PLAYGROUND, {"team": "acme", "mode": "semantic", "b_mode": "text", "q": "retries"})
    assert _placeholders(page.content.decode(), "w_") == ["0.75", "–", "0.25"]
    # the page's script shows another mode's when one is picked: each mode's, for this query
    shown = json.loads(re.search(r'id="playground-default-weights"[^>]*>(.*?)</script>',
                                 page.content.decode(), re.S).group(1))
    assert shown == {"hybrid": {"semantic": "0.60", "keyword": "0.20", "quality": "0.20"},
                     "text": {"keyword": "0.50", "quality": "0.50"},
                     "semantic": {"semantic": "0.75", "quality": "0.25"}}


def test_the_boxes_show_the_weights_the_header_then_reports(admin_client, teams):
    acme = teams[0]
    LessonFactory(team=acme, title="Retry webhooks with backoff", description="retries and webhooks")
    LessonFactory(team=acme, title="Cap retries", description="retries without a cap hammer the provider")
    for query in ("retries", LONG_QUERY + " retries"):  # a long query leans on words: other defaults
        response = admin_client.get(PLAYGROUND, {"team": "acme", "q": query, "mode": "text", "b_mode": "text",
                                                 "b_w_keyword": "0.8"})
        page = response.content.decode()
        first, second = response.context["runs"]
        assert first.rows and first.weights == pytest.approx(
            {name: float(value) for name, value in zip(("semantic", "keyword", "quality"), _placeholders(page, "w_"))
             if value != "–"}, abs=0.005)
        # a blank box beside a filled one stands for the value it shows
        quality = mode_default_weights(mode="text", kind="lessons", query=query, caller_metadata=False)["quality"]
        assert _placeholders(page, "b_w_")[2] == f"{quality:.2f}"
        assert second.weights == pytest.approx({"keyword": 0.8 / (0.8 + quality), "quality": quality / (0.8 + quality)},
                                              abs=1e-3)
    assert _placeholders(page, "w_") != ["–", "0.50", "0.50"]  # the long query's are not the short one's


def test_semantic_mode_with_a_callers_tech_stack_scores_the_keyword_slot_too():
    plain = mode_default_weights(mode="semantic", kind="lessons", query="retries", caller_metadata=False)
    caller = mode_default_weights(mode="semantic", kind="lessons", query="retries", caller_metadata=True)
    assert set(plain) == {"semantic", "quality"} and caller == pytest.approx(
        {"semantic": 0.6, "keyword": 0.2, "quality": 0.2})


def test_the_marks_team_filter_leaves_evaluation_teams_out(admin_client, teams):
    acme, demo, evaluation = teams
    for team in teams:
        first, second = LessonFactory(team=team), LessonFactory(team=team)
        duplicate_dismiss(team=team, kind="lesson", first_id=first.pk, second_id=second.pk)
    page = admin_client.get(MARKS).content.decode()
    assert page.count('class="field-team_label"') == 3  # every mark is listed
    team_filter = re.search(r'<details data-filter-title="team".*?</details>', page, re.S).group(0)
    offered = [html.unescape(label)
               for label in re.findall(r'<a href="\?team__id__exact=\d+"[^>]*>([^<]*)</a>', team_filter)]
    assert offered == ["Acme (acme)", "demo"]
    # a link naming one still filters
    chosen = admin_client.get(MARKS, {"team__id__exact": evaluation.pk})
    assert [mark.team for mark in chosen.context["cl"].result_list] == [evaluation]
