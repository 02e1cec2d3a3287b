"""`eval-` slugs belong to the evaluation teams, which the admin lists hide: `create_team eval-foo`
made a team that was "created" and then nowhere to be seen. Every creator refuses the prefix with
the admin's own sentence (the team service holds the rule); the evaluation tools, which own those
teams, still make them."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from lessons.models import ApiKey, Lesson, Team
from lessons.services.teams import RESERVED_SLUG_RULE, TeamError, team_for_slug, team_get_or_create
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db

LESSON_LINE = '{"title": "Retry webhooks with backoff"}\n'


@pytest.mark.parametrize("slug", ["eval-foo", "EVAL-foo"])
def test_create_team_refuses_the_evaluation_prefix_naming_the_slug(slug):
    with pytest.raises(CommandError) as refused:
        call_command("create_team", slug, stdout=StringIO())
    assert str(refused.value) == f"slug: {slug!r} is not available. {RESERVED_SLUG_RULE}"
    assert not Team.objects.exists()


def test_the_command_and_the_admin_say_the_same_rule(admin_client):
    with pytest.raises(CommandError) as refused:
        call_command("create_team", "eval-demo", stdout=StringIO())
    response = admin_client.post(reverse("admin:lessons_team_add"), {"slug": "eval-demo", "name": "Eval demo"})
    [admin_message] = response.context["adminform"].form.errors["slug"]
    assert str(refused.value).endswith(admin_message)


@pytest.mark.parametrize("slug", ["eval", "evaluation-notes", "my-eval-team"])
def test_slugs_that_only_resemble_the_prefix_are_created(slug):
    call_command("create_team", slug, stdout=StringIO())
    assert Team.objects.filter(slug=slug).exists()


def test_create_team_flags_refuse_a_new_evaluation_team(tmp_path):
    lessons = tmp_path / "lessons.jsonl"
    lessons.write_text(LESSON_LINE)
    with pytest.raises(CommandError, match="slug: 'eval-x' is not available"):
        call_command("import_lessons", str(lessons), team="eval-x", create_team=True,
                     stdout=StringIO(), stderr=StringIO())
    with pytest.raises(CommandError, match="slug: 'eval-y' is not available"):
        call_command("create_api_key", "--team", "eval-y", "--name", "curl", "--create-team", stdout=StringIO())
    assert not Team.objects.exists() and not ApiKey.objects.exists()


def test_an_existing_evaluation_team_is_still_written_into(tmp_path):
    TeamFactory(slug="eval-scifact")
    lessons = tmp_path / "lessons.jsonl"
    lessons.write_text(LESSON_LINE)
    call_command("import_lessons", str(lessons), team="eval-scifact", create_team=True,
                 stdout=StringIO(), stderr=StringIO())
    assert Lesson.objects.filter(team__slug="eval-scifact").count() == 1


def test_an_unknown_evaluation_team_is_not_offered_to_create_team():
    with pytest.raises(TeamError) as missing:
        team_for_slug(slug="eval-scifact")
    assert str(missing.value) == ("--team: no team with slug 'eval-scifact'; teams starting with “eval-” are made "
                                  "by eval_retrieval when it loads a dataset")


def test_the_evaluation_tools_still_make_their_teams():
    team = team_get_or_create(slug="eval-beir_tiny-alice", name="Evaluation beir_tiny (user=alice)")
    assert Team.objects.get(slug="eval-beir_tiny-alice") == team
