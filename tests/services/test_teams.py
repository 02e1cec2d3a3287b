"""Team services: every path that names or makes a team checks the slug before writing."""

import pytest

from lessons.models import Team
from lessons.services.teams import TeamError, team_create, team_for_slug, team_get_or_create


@pytest.mark.django_db
def test_create_names_the_team_after_its_slug_unless_named():
    assert team_create(slug=" acme ").name == "acme"
    assert team_create(slug="globex", name="  Globex Corp ").name == "Globex Corp"


@pytest.mark.django_db
@pytest.mark.parametrize("slug, message", [
    ("bad slug!", r"slug: 'bad slug!' is not a usable slug; use only lowercase ASCII letters \(a-z\), digits, "
                  "hyphens and underscores, at most 100 characters"),
    ("ünï", r"slug: 'ünï' is not a usable slug; use only lowercase ASCII letters"),  # letters, but not ASCII
    ("", "slug: a team needs a slug"),
    ("x" * 101, "slug: Ensure this value has at most 100"),
    ("Acme", r"slug: Use lowercase letters \(acme, not Acme\)"),
])
def test_create_refuses_a_bad_slug_before_writing(slug, message):
    with pytest.raises(TeamError, match=message):
        team_create(slug=slug)
    assert not Team.objects.exists()


@pytest.mark.django_db
def test_create_refuses_a_taken_slug():
    team_create(slug="acme")
    with pytest.raises(TeamError, match="slug: a team with slug 'acme' already exists"):
        team_create(slug="acme", name="Another")
    assert Team.objects.get().name == "acme"


@pytest.mark.django_db
def test_a_slug_in_another_case_is_not_the_team_but_is_suggested():
    Team.objects.create(slug="acme", name="Acme")
    with pytest.raises(TeamError, match=r"--team: no team with slug 'ACME'; did you mean 'acme'\?"):
        team_for_slug(slug="ACME")
    with pytest.raises(TeamError, match="Use lowercase letters"):
        team_for_slug(slug="ACME", create=True)
    assert list(Team.objects.values_list("slug", flat=True)) == ["acme"]


@pytest.mark.django_db
def test_an_unknown_slug_says_how_to_create_it_and_creates_only_when_asked():
    with pytest.raises(TeamError, match=r"--team: no team with slug 'acme'; create it with --create-team"):
        team_for_slug(slug="acme")
    assert not Team.objects.exists()
    created = team_for_slug(slug="acme", create=True, name="Acme")
    assert team_for_slug(slug=" acme ") == created and created.name == "Acme"


@pytest.mark.django_db
def test_get_or_create_slugifies_and_returns_the_existing_team():
    team = team_get_or_create(slug="Eval SciFact", name="Evaluation scifact")
    assert team.slug == "eval-scifact"
    assert team_get_or_create(slug="eval-scifact", name="ignored") == team
    assert Team.objects.count() == 1
    with pytest.raises(TeamError, match="'!!!' is not a usable team slug"):
        team_get_or_create(slug="!!!")


@pytest.mark.django_db
@pytest.mark.parametrize("slug, message", [
    ("", r"^slug: a team needs a slug \(lowercase ASCII letters"),  # not also "name: cannot be blank"
    ("   ", r"^slug: a team needs a slug"),
])
def test_a_blank_slug_is_one_message_about_the_slug(slug, message):
    with pytest.raises(TeamError, match=message):
        team_create(slug=slug)
    with pytest.raises(TeamError, match=r"^--team: name a team by its slug \(it is blank\)$"):
        team_for_slug(slug=slug)


@pytest.mark.django_db
@pytest.mark.parametrize("slug", ["de mo", "Ops Team!"])
def test_an_unknown_slug_that_could_not_be_one_is_not_offered_to_create_team(slug):
    with pytest.raises(TeamError) as raised:
        team_for_slug(slug=slug)
    assert "create_team" not in str(raised.value)
    assert str(raised.value).endswith(
        "; a slug is lowercase ASCII letters (a-z), digits, hyphens and underscores, at most 100 characters")


@pytest.mark.django_db
def test_a_slug_with_blanks_around_it_is_named_without_them():
    with pytest.raises(TeamError, match=r"^--team: no team with slug 'demo'; create it"):
        team_for_slug(slug=" demo ")


@pytest.fixture
def legacy_team(db):
    """A team created before slugs were lowercase (migration 0014): its slug kept its capital."""
    team = Team.objects.create(slug="legacy", name="Acme Inc")
    Team.objects.filter(pk=team.pk).update(slug="Acme")
    team.refresh_from_db()
    return team


def test_a_lowercase_twin_of_an_old_capitalised_team_is_refused(legacy_team):
    with pytest.raises(TeamError, match="team 'Acme' has this slug in other capitals; use 'Acme'"):
        team_create(slug="acme")
    assert list(Team.objects.values_list("slug", flat=True)) == ["Acme"]


def test_a_capitalised_twin_of_a_lowercase_team_is_told_to_use_it_and_nothing_more(db):
    Team.objects.create(slug="acme", name="Acme")
    with pytest.raises(TeamError) as error:
        team_create(slug="Acme")
    said = str(error.value)
    # "or give that team the slug 'acme'": it has that slug already
    assert "use 'acme'" in said and "give that team" not in said


def test_an_old_capitalised_team_can_still_be_edited_but_not_given_a_new_capitalised_slug(legacy_team, admin_client):
    legacy_team.name = "Acme Corporation"
    legacy_team.full_clean()  # the slug is as stored: accepted
    page = f"/admin/lessons/team/{legacy_team.pk}/change/"
    response = admin_client.post(page, {"slug": "Acme", "name": "Acme Corporation"})
    assert response.status_code == 302
    assert Team.objects.get(pk=legacy_team.pk).name == "Acme Corporation"
    response = admin_client.post(page, {"slug": "AcmeCorp", "name": "Acme Corporation"})
    assert response.status_code == 200 and "Use lowercase letters" in response.content.decode()
    response = admin_client.post(page, {"slug": "acme", "name": "Acme Corporation"})  # its own slug, lowercased
    assert response.status_code == 302 and Team.objects.get(pk=legacy_team.pk).slug == "acme"


def test_a_team_another_writer_created_since_the_lookup_is_used(db, monkeypatch):
    # two imports with --create-team at once: the second said "a team with slug ... already exists"
    from lessons.services import teams

    real_named = teams.team_named

    def not_there_yet(**kwargs):
        Team.objects.create(slug="acme", name="acme")  # the other import's create, just committed
        monkeypatch.setattr(teams, "team_named", real_named)
        raise TeamError("no team with slug 'acme'")

    monkeypatch.setattr(teams, "team_named", not_there_yet)
    assert team_for_slug(slug="acme", create=True) == Team.objects.get(slug="acme")
    assert Team.objects.count() == 1
