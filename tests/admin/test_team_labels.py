"""Teams are named "name (slug)" wherever the admin offers or shows one, as the curation pages do: a
team's name need not be unique, and two teams named "demo" were two identical entries in the API key
form's menu (a key picked for the wrong one answers for another team's data)."""

import html
import re

import pytest
from django.urls import reverse

from lessons.models import ApiKey
from lessons.services.api_keys import api_key_create
from tests.factories import LessonFactory, MemoryFactory, TeamFactory

pytestmark = pytest.mark.django_db


def _options(page: str, name: str) -> list[str]:
    select = re.search(rf'<select name="{name}"[^>]*>(.*?)</select>', page, re.S).group(1)
    return [html.unescape(text) for text in re.findall(r"<option[^>]*>([^<]*)</option>", select)]


@pytest.fixture
def two_demos(db):
    return TeamFactory(slug="demo", name="demo"), TeamFactory(slug="demo-staging", name="demo")


@pytest.mark.parametrize("model", ["apikey", "lesson", "memory"])
def test_the_add_forms_name_each_team_by_its_slug_too(admin_client, two_demos, model):
    page = admin_client.get(reverse(f"admin:lessons_{model}_add")).content.decode()
    teams = [label for label in _options(page, "team") if label != "---------"]
    assert teams == ["demo", "demo (demo-staging)"]  # the slug alone when it is the name


def test_the_key_goes_to_the_team_picked(admin_client, two_demos):
    _, staging = two_demos
    admin_client.post(reverse("admin:lessons_apikey_add"), {"team": staging.pk, "name": "ci"})
    assert ApiKey.objects.get().team == staging


def _column(page: str, name: str) -> list[str]:
    return [html.unescape(cell) for cell in re.findall(rf'<td class="field-{name}[^"]*">([^<]*)</td>', page)]


def _filter_choices(page: str) -> list[str]:
    filters = re.search(r'<nav id="changelist-filter".*?</nav>', page, re.S).group(0)
    links = re.findall(r'<a href="\?[^"]*team__id__exact=[^"]*">([^<]*)</a>', filters)
    return [html.unescape(text.strip()) for text in links]


@pytest.mark.parametrize("model", ["lesson", "memory", "apikey"])
def test_a_lists_team_column_and_its_filter_say_the_same(admin_client, two_demos, model):
    demo, staging = two_demos
    acme = TeamFactory(slug="acme", name="Acme")
    for team in (acme, staging):
        if model == "lesson":
            LessonFactory(team=team)
        elif model == "memory":
            MemoryFactory(team=team)
        else:
            api_key_create(team=team, name="bot")
    page = admin_client.get(reverse(f"admin:lessons_{model}_changelist")).content.decode()
    shown = set(_column(page, "team_label"))
    assert shown == {"Acme (acme)", "demo (demo-staging)"}
    assert shown <= set(_filter_choices(page)), _filter_choices(page)
    assert {"Acme (acme)", "demo", "demo (demo-staging)"} <= set(_filter_choices(page))
