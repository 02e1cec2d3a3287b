"""The search playground refuses the filter and caller values `POST /api/v1/search` refuses, in the
API's words and next to the field: `tags=bad tag!` and 60 tech stacks answered "No results." there
while the API answered 422 naming `filters.tags.0` and "at most 50"."""

import json

import pytest
from django.test import Client
from django.urls import reverse

from lessons.services.api_keys import api_key_create

pytestmark = pytest.mark.django_db

PLAYGROUND = reverse("admin:lessons_search_playground")
SIXTY = [f"stack{number}" for number in range(60)]


def _api_refusal(team, body: dict) -> list[str]:
    """What the API answers to the search `body`: each field at fault as "field: message"."""
    _, raw_key = api_key_create(team=team, name="agent")
    response = Client(headers={"Authorization": f"Bearer {raw_key}"}).post(
        "/api/v1/search", data=json.dumps({"query": "cache", **body}), content_type="application/json")
    assert response.status_code == 422, response.content
    return [f"{error['field']}: {error['message']}" for error in response.json()["errors"]]


@pytest.mark.parametrize(
    ("field", "typed", "body", "api_field"),
    [
        ("tags", "bad tag!", {"filters": {"tags": ["bad tag!"]}}, "filters.tags.0"),
        ("tech_stacks", ", ".join(SIXTY), {"filters": {"tech_stacks": SIXTY}}, "filters.tech_stacks"),
        ("category", "testing, " + "x" * 65, {"filters": {"categories": ["testing", "x" * 65]}},
         "filters.categories.1"),
        ("tech_stack", "django, c/c++", {"tech_stack": ["django", "c/c++"]}, "tech_stack.1"),
        ("project_type", "saas!", {"project_type": "saas!"}, "project_type"),
    ],
)
def test_a_value_the_api_refuses_is_refused_next_to_its_field_in_the_apis_words(
        admin_client, team, field, typed, body, api_field):
    (refusal,) = _api_refusal(team, body)
    assert refusal.startswith(f"{api_field}: ")

    response = admin_client.get(PLAYGROUND, {"team": team.slug, "q": "cache", field: typed})
    assert response.status_code == 200
    form = response.context["form"]
    assert form.errors == {field: [refusal]}
    assert response.context["runs"] == [] and not response.context["searched"]
    html = response.content.decode()
    shown_at = html.index(f'name="{field}"')
    error_at = html.index('<ul class="errorlist"', shown_at)
    assert html.index("</div>", shown_at) > error_at  # in the field's own box
    assert "No results." not in html


def test_values_the_api_takes_are_searched(admin_client, demo_team):
    response = admin_client.get(PLAYGROUND, {"team": "demo", "q": "database security", "mode": "text",
                                             "tags": "Security, sql", "tech_stacks": ", ".join(SIXTY[:50]),
                                             "project_type": "saas", "tech_stack": "node.js, c++"})
    assert response.context["form"].errors == {}
    (run,) = response.context["runs"]
    assert run.error is None
    assert response.context["form"].cleaned_data["tags"] == ("security", "sql")
