"""A team added (or renamed) in the admin with a slug starting with `eval-` is refused on its slug
field: the lists hide evaluation teams, so "eval-demo" was "added successfully" and then nowhere
to be seen. An evaluation team's own page still saves while its slug stays as it is."""

import pytest
from django.urls import reverse

from lessons.models import Team
from lessons.services.teams import team_create

pytestmark = pytest.mark.django_db

ADD = reverse("admin:lessons_team_add")
REFUSAL = ("Slugs starting with “eval-” are reserved for the evaluation teams that eval_retrieval loads, which "
           "the lesson, memory and team lists hide; choose another slug.")


def _change(team):
    return reverse("admin:lessons_team_change", args=[team.pk])


def test_adding_an_eval_team_is_refused_on_its_slug(admin_client):
    response = admin_client.post(ADD, {"slug": "eval-demo", "name": "Eval demo"})
    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"slug": [REFUSAL]}
    assert not Team.objects.exists()
    assert REFUSAL in response.content.decode()


@pytest.mark.parametrize("slug", ["eval", "evaluation-notes", "my-eval-team"])
def test_slugs_that_only_resemble_the_prefix_are_added(admin_client, slug):
    response = admin_client.post(ADD, {"slug": slug, "name": "Notes"})
    assert response.status_code == 302
    assert Team.objects.filter(slug=slug).exists()


def test_renaming_a_team_into_the_prefix_is_refused(admin_client, team):
    response = admin_client.post(_change(team), {"slug": "eval-acme", "name": team.name})
    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"slug": [REFUSAL]}
    assert Team.objects.get(pk=team.pk).slug == "acme"


def test_an_evaluation_teams_page_saves_while_its_slug_is_kept(admin_client):
    scifact = team_create(slug="eval-scifact", name="Evaluation scifact", allow_reserved=True)
    response = admin_client.post(_change(scifact), {"slug": "eval-scifact", "name": "SciFact benchmark"})
    assert response.status_code == 302
    assert Team.objects.get(pk=scifact.pk).name == "SciFact benchmark"
    response = admin_client.post(_change(scifact), {"slug": "eval-scifact-2", "name": "SciFact benchmark"})
    assert response.context["adminform"].form.errors == {"slug": [REFUSAL]}
    response = admin_client.post(_change(scifact), {"slug": "scifact", "name": "SciFact benchmark"})
    assert response.status_code == 302 and Team.objects.get(pk=scifact.pk).slug == "scifact"
