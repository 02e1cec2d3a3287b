"""The search playground, /admin/lessons/search/ (lessons.admin.playground)."""

import re

import pytest
from django.urls import reverse

from lessons.search import SearchFilters, SearchRequest, search
from lessons.selectors.admin_search import PlaygroundSetting, playground_compare, score_parts

pytestmark = pytest.mark.django_db

PLAYGROUND = reverse("admin:lessons_search_playground")


def test_the_playground_is_at_its_address_and_for_staff_only(client, admin_client):
    assert PLAYGROUND == "/admin/lessons/search/"
    anonymous = client.get(PLAYGROUND)
    assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]
    assert admin_client.get(PLAYGROUND).status_code == 200


def test_two_settings_side_by_side_with_score_parts(admin_client, demo_team):
    response = admin_client.get(PLAYGROUND, {"team": "demo", "q": "database security", "mode": "hybrid", "b_mode": "text"})
    assert response.status_code == 200
    first, second = response.context["runs"]
    assert (first.response.mode, second.response.mode) == ("hybrid", "text")
    assert len(first.rows) == 10 and len(second.rows) == 10
    for run in (first, second):
        for row in run.rows:
            # The bars add up to the engine's own weighted score.
            assert sum(part.contribution for part in row.parts) == pytest.approx(row.weighted_score, abs=2e-3)
    assert first.rows[0].similarity is not None and "semantic" in first.rows[0].legs
    assert all(row.parts[0].value == 0 for row in second.rows)  # text mode: no semantic part
    # Each row says where it ranked under the other setting.
    shared = {row.id for row in first.rows} & {row.id for row in second.rows}
    for row in first.rows:
        assert (row.other_rank is not None) == (row.id in shared)
    page = response.content.decode()
    assert page.count('class="playground-run"') == 2
    assert "timings" in page and "candidates" in page and "below floor" in page
    assert reverse("admin:lessons_lesson_change", args=[first.rows[0].id]) in page
    assert "matched <code>" in page
    # Label feedback, hybrid only: the score is the weighted score taken through it, and said so.
    assert all(row.label_feedback is None for row in second.rows)
    for row in first.rows:
        feedback = row.label_feedback
        assert row.score == pytest.approx((row.weighted_score + feedback["weight"] * feedback["value"])
                                          / feedback["divisor"], abs=2e-3)
        assert bool(feedback["shared"]) == (feedback["value"] == 1.0)
    assert first.rows[0].label_feedback["shared"]  # the best hit shares its own tags
    assert "tags shared with the top 3 (a row among them counts its own):" in page and "÷ 1.15" in page


def test_weights_change_the_ranking_and_are_applied_as_given(admin_client, demo_team):
    response = admin_client.get(
        PLAYGROUND,
        {"team": "demo", "q": "database security", "w_semantic": "1", "w_keyword": "0", "w_quality": "0",
         "b_mode": "hybrid", "b_w_semantic": "0", "b_w_keyword": "0", "b_w_quality": "1"},
    )
    first, second = response.context["runs"]
    assert first.weights == {"semantic": 1.0, "keyword": 0.0, "quality": 0.0}
    assert second.weights == {"semantic": 0.0, "keyword": 0.0, "quality": 1.0}
    assert [row.id for row in first.rows] != [row.id for row in second.rows]
    qualities = [row.parts[2].value for row in second.rows]
    assert qualities[:3] == sorted(qualities, reverse=True)[:3] or second.rows[0].exact_term


def test_the_playground_runs_the_same_search_as_the_api(demo_team):
    request = SearchRequest(team=demo_team, query="flaky tests in CI", limit=5, filters=SearchFilters())
    (run,) = playground_compare(request=request, settings=[PlaygroundSetting()])
    assert [row.id for row in run.rows] == [hit.id for hit in search(request=request).results]


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"limit": "0"}, "limit", "greater than or equal to 1"),
        ({"limit": "500"}, "limit", "less than or equal to 100"),
        ({"kind": "notes"}, "kind", "Select a valid choice"),
        ({"mode": "magic"}, "mode", "Select a valid choice"),
        ({"w_semantic": "-1"}, "w_semantic", "greater than or equal to 0"),
        ({"w_semantic": "0", "w_keyword": "0", "w_quality": "0"}, "w_semantic", "at least one weight must be above 0"),
        # the engine would quietly share the weight between the parts the mode has
        ({"mode": "text", "w_keyword": "0", "w_quality": "0"}, "w_keyword",
         "text mode scores with the keyword and quality weights; at least one of them must be above 0"),
        ({"b_mode": "semantic", "b_w_semantic": "0", "b_w_quality": "0"}, "b_w_semantic",
         "semantic mode scores with the semantic and quality weights"),
        ({"q": "x" * 2_001}, "q", "at most 2000 characters"),
        ({"team": "nobody"}, "team", "Select a valid choice"),
        ({"min_importance": "11"}, "min_importance", "less than or equal to 10"),
    ],
)
def test_bad_parameters_are_shown_next_to_their_field(admin_client, team, params, field, message):
    response = admin_client.get(PLAYGROUND, {"team": "acme", "q": "retries", **params})
    assert response.status_code == 200
    form = response.context["form"]
    assert field in form.errors and message in " ".join(form.errors[field]), form.errors
    assert response.context["runs"] == []


def test_memories_with_filters_and_context(admin_client, demo_team):
    response = admin_client.get(
        PLAYGROUND,
        {"team": "demo", "kind": "memories", "q": "panic", "min_importance": "5",
         "context": "I had to leave the meeting room because my heart was racing"},
    )
    (run,) = response.context["runs"]
    assert run.rows and all(row.kind == "memory" for row in run.rows)
    assert run.response.context_keywords
    assert reverse("admin:lessons_memory_change", args=[run.rows[0].id]) in response.content.decode()


def test_score_parts_with_a_penalty_and_metadata_add_up():
    explanation = {
        "semantic": 0.8, "keyword": 0.4, "metadata": 1.0, "quality": 0.5, "penalty": 0.2,
        "weights": {"semantic": 0.5, "keyword": 0.3, "quality": 0.2}, "weighted_score": 0.5 * 0.4 + 0.3 * 0.7 + 0.2 * 0.5,
    }
    parts = {part.name: part for part in score_parts(explanation=explanation)}
    assert parts["keyword"].value == pytest.approx(0.7) and parts["keyword"].label == "keyword + metadata"
    assert parts["penalty"].contribution == -0.2
    assert sum(part.contribution for part in parts.values()) == pytest.approx(explanation["weighted_score"])


def test_the_quality_part_says_how_much_of_it_is_usage():
    explanation = {"semantic": 0.5, "keyword": 0.0, "metadata": None, "quality": 0.9, "usage": 0.25, "penalty": 0.0,
                   "weights": {"semantic": 0.6, "keyword": 0.2, "quality": 0.2}, "weighted_score": 0.48}
    parts = {part.name: part for part in score_parts(explanation=explanation)}
    assert parts["quality"].label == "quality (usage +0.25)"
    parts = {part.name: part for part in score_parts(explanation={**explanation, "usage": 0.0})}
    assert parts["quality"].label == "quality"


def test_each_weight_input_names_its_setting_and_part(admin_client, demo_team):
    page = admin_client.get(reverse("admin:lessons_search_playground")).content.decode()
    labels = re.findall(r'<input[^>]*name="(?:b_)?w_\w+"[^>]*aria-label="([^"]+)"', page)
    assert sorted(labels) == sorted(f"Setting {setting}: {part} weight" for setting in "AB"
                                    for part in ("semantic", "keyword", "quality"))


def test_an_unknown_team_leaves_the_team_list_unchosen(admin_client, demo_team):
    page = admin_client.get(reverse("admin:lessons_search_playground"), {"team": "nope", "q": "x"}).content.decode()
    assert "nope" in page and "is not one of the available choices" in page
    select = re.search(r'<select name="team"[^>]*>(.*?)</select>', page, re.S).group(1)
    # the first option, the one a browser shows when none is selected, chooses nothing
    assert re.match(r'\s*<option value="">— choose a team —</option>', select) and "selected" not in select
