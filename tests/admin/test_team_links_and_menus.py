"""A read-only team on a change page is linked only for a curator who may open the team, on every
page that shows one (an API key's, a not-a-duplicate mark's, as a lesson's): Django linked it
whatever the curator may do, and the link answered 403. The lesson and memory add forms offer the
curated teams, as every list does: they offered evaluation teams ("Eval mini (eval-mini)")."""

import html
import re

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from lessons.models import Lesson, Memory
from lessons.services.api_keys import api_key_create
from lessons.services.curation import duplicate_dismiss
from tests.factories import LessonFactory, MemoryFactory, TeamFactory

pytestmark = pytest.mark.django_db

TEAM_PAGE = re.compile(r'href="/admin/lessons/team/\d+/change/"')


def curator(client, name: str, *codenames: str):
    user = User.objects.create_user(name, password="x", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="lessons", codename__in=codenames))
    client.force_login(user)
    return client


def team_row(page: str) -> str:
    """The change page's team row (its read-only value), as HTML."""
    rows = re.findall(r'<div class="form-row[^"]*field-team[^"]*">(.*?)</div>\s*</div>', page, re.S)
    assert len(rows) == 1, rows  # the team once
    return rows[0]


def _options(page: str, name: str) -> list[str]:
    select = re.search(rf'<select name="{name}"[^>]*>(.*?)</select>', page, re.S).group(1)
    return [html.unescape(text) for text in re.findall(r"<option[^>]*>([^<]*)</option>", select)]


@pytest.fixture
def api_key_page(team):
    api_key, _ = api_key_create(team=team, name="ci bot")
    return reverse("admin:lessons_apikey_change", args=[api_key.pk])


@pytest.fixture
def mark_page(team):
    first, second = LessonFactory(team=team), LessonFactory(team=team)
    mark = duplicate_dismiss(team=team, kind="lesson", first_id=first.pk, second_id=second.pk)
    return reverse("admin:lessons_duplicatedismissal_change", args=[mark.pk])


@pytest.mark.parametrize("codenames", [("view_apikey",), ("view_apikey", "change_apikey", "add_apikey")])
def test_an_api_keys_team_is_text_for_a_curator_who_may_not_open_teams(client, api_key_page, codenames):
    response = curator(client, "keykeeper", *codenames).get(api_key_page)
    assert response.status_code == 200
    row = team_row(response.content.decode())
    assert "Acme (acme)" in row and not TEAM_PAGE.search(row), row


def test_a_marks_team_is_text_for_a_curator_who_may_not_open_teams(client, mark_page):
    response = curator(client, "lessoneditor", "view_lesson", "change_lesson").get(mark_page)
    assert response.status_code == 200
    row = team_row(response.content.decode())
    assert "Acme (acme)" in row and not TEAM_PAGE.search(row), row


@pytest.mark.parametrize("page", ["api_key_page", "mark_page"])
def test_the_team_stays_a_link_for_whoever_may_open_it(client, admin_client, team, request, page):
    url = request.getfixturevalue(page)
    team_url = reverse("admin:lessons_team_change", args=[team.pk])
    viewer = curator(client, "teamviewer", "view_apikey", "view_team", "view_lesson", "change_lesson")
    for who in (admin_client, viewer):
        row = team_row(who.get(url).content.decode())
        assert f'<a href="{team_url}">Acme (acme)</a>' in row, row
        assert who.get(team_url).status_code == 200  # the link opens


@pytest.fixture
def evaluation_team(db):
    return TeamFactory(slug="eval-mini", name="Eval mini")


@pytest.mark.parametrize("model", ["lesson", "memory", "apikey"])
def test_the_add_forms_offer_the_curated_teams_only(admin_client, team, evaluation_team, model):
    page = admin_client.get(reverse(f"admin:lessons_{model}_add")).content.decode()
    assert [label for label in _options(page, "team") if label != "---------"] == ["Acme (acme)"]


def test_an_evaluation_team_posted_to_the_add_form_is_refused_on_its_field(admin_client, evaluation_team):
    response = admin_client.post(reverse("admin:lessons_memory_add"), {"team": evaluation_team.pk, "content": "x"})
    assert response.status_code == 200
    assert "team" in response.context["adminform"].form.errors
    assert not Memory.objects.exists()


def _posted_as_shown(form, **changes) -> dict:
    """What the change page's form posts back unchanged, with `changes`."""
    data = {}
    for bound in form:
        widget, value = bound.field.widget, bound.value()
        if hasattr(widget, "widgets"):  # a date and a time
            for index, (part, part_value) in enumerate(zip(widget.widgets, widget.decompress(value))):
                data[f"{bound.html_name}_{index}"] = part.format_value(part_value) or ""
        elif isinstance(value, list):
            data[bound.html_name] = bound.field.delimiter.join(value)
        else:
            data[bound.html_name] = "" if value is None else value
    return {**data, **changes}


@pytest.mark.parametrize(
    "model, make, change",
    [
        (Lesson, lambda team: LessonFactory(team=team), {"title": "Edited in an evaluation team"}),
        (Memory, lambda team: MemoryFactory(team=team), {"content": "Edited in an evaluation team"}),
    ],
)
def test_a_row_of_an_evaluation_team_is_still_edited(admin_client, evaluation_team, model, make, change):
    row = make(evaluation_team)
    url = reverse(f"admin:lessons_{model._meta.model_name}_change", args=[row.pk])
    page = admin_client.get(url)
    assert page.status_code == 200
    assert "team" not in page.context["adminform"].form.fields  # read-only: the curated menu is not asked
    assert "Eval mini (eval-mini)" in team_row(page.content.decode())
    response = admin_client.post(url, _posted_as_shown(page.context["adminform"].form, **change))
    assert response.status_code == 302, response.context["adminform"].form.errors
    row.refresh_from_db()
    assert row.team == evaluation_team
    field, value = next(iter(change.items()))
    assert getattr(row, field) == value
