import pytest

from tests.factories import TeamFactory


@pytest.fixture
def team(db):
    return TeamFactory(slug="acme", name="Acme")


@pytest.fixture
def other_team(db):
    return TeamFactory(slug="globex", name="Globex")
