"""A list's "(N total)" counts what the list shows with no filter chosen, which is where its link
leads: the lesson and memory lists and the team list hide evaluation teams (`eval-*`) by default, and
said "799 results (6042 total)" (the team list "10 results (17 total)", with "All" marked) while the
link led back to the same 799."""

import re

import pytest
from django.urls import reverse

from lessons.services.memories import memory_update
from tests.factories import LessonFactory, MemoryFactory, TeamFactory

pytestmark = pytest.mark.django_db


def _summary(page: str) -> str | None:
    """The search bar's "N results (M total)", or None when the list shows no such line."""
    found = re.search(r'<span class="small quiet">(.*?)</span>', page, re.S)
    return re.sub(r"<[^>]+>|\s+", " ", found.group(1)).strip() if found else None


@pytest.fixture
def teams(db):
    acme, globex = TeamFactory(slug="acme", name="Acme"), TeamFactory(slug="globex", name="Globex")
    evaluation = TeamFactory(slug="eval-scifact", name="eval-scifact")
    return acme, globex, evaluation


@pytest.mark.parametrize("kind", ["lesson", "memory"])
def test_the_total_counts_the_rows_the_list_shows_by_default(admin_client, teams, kind):
    acme, globex, evaluation = teams
    factory = LessonFactory if kind == "lesson" else MemoryFactory
    for team, rows in ((acme, 2), (globex, 1), (evaluation, 5)):
        factory.create_batch(rows, team=team)
    if kind == "memory":  # an earlier version is hidden by default too
        memory_update(memory=acme.memories.first(), content="Changed words")
    url = reverse(f"admin:lessons_{kind}_changelist")
    default = admin_client.get(url)
    assert default.context["cl"].result_count == default.context["cl"].full_result_count == 3
    assert _summary(default.content.decode()) is None  # nothing more to show: no "(N total)"
    narrowed = admin_client.get(url, {"team__id__exact": acme.pk})
    assert _summary(narrowed.content.decode()) == "2 results ( 3 total )"
    everything = admin_client.get(url, {"team__id__exact": "all"})
    assert everything.context["cl"].result_count == 8


def test_the_team_list_says_it_hides_evaluation_teams_and_counts_those_it_shows(admin_client, teams):
    url = reverse("admin:lessons_team_changelist")
    default = admin_client.get(url)
    page = default.content.decode()
    assert default.context["cl"].result_count == default.context["cl"].full_result_count == 2
    assert _summary(page) is None
    choices = re.findall(r'<li( class="selected")?>\s*<a href="[^"]*"[^>]*>([^<]*)</a>',
                         re.search(r'evaluation teams.*?</ul>', page, re.S).group(0))
    assert [(bool(selected), label.strip()) for selected, label in choices] == [
        (True, "Without evaluation teams"), (False, "With evaluation teams"), (False, "Only evaluation teams"),
    ]
    assert admin_client.get(url, {"evaluation": "include"}).context["cl"].result_count == 3
    only = admin_client.get(url, {"evaluation": "only"})
    assert _summary(only.content.decode()) == "1 result ( 2 total )"
