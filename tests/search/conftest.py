import pytest

from tests.search.demo import drop_demo_team, load_demo_team


@pytest.fixture(scope="module")
def demo_team(django_db_setup, django_db_blocker):
    """The demo data in team `demo`, loaded and embedded once for the module."""
    with django_db_blocker.unblock():
        team = load_demo_team(slug="demo")
        yield team
        drop_demo_team(slug="demo")
