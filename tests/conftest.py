import pytest

from lessons.search.parallel import close_worker_connections
from tests.factories import TeamFactory
from tests.search.demo import drop_demo_team, load_demo_team


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup):
    """The test database, whose drop at the end must not find the search workers' connections."""
    yield
    close_worker_connections()


@pytest.fixture
def team(db):
    return TeamFactory(slug="acme", name="Acme")


@pytest.fixture
def other_team(db):
    return TeamFactory(slug="globex", name="Globex")


@pytest.fixture(scope="module")
def demo_team(django_db_setup, django_db_blocker):
    """The demo data in team `demo`, loaded and embedded once for the module (vectors are reused
    across modules, see tests/search/demo.py)."""
    with django_db_blocker.unblock():
        team = load_demo_team(slug="demo")
        yield team
        drop_demo_team(slug="demo")
