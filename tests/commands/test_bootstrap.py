"""`make run`'s first-start command: the local admin's sign-in line names where the server runs."""

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import override_settings

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "environment, url",
    [
        ({}, "http://127.0.0.1:8000/admin/"),
        ({"PORT": "8019"}, "http://127.0.0.1:8019/admin/"),
        ({"HOST": "0.0.0.0", "PORT": "8080"}, "http://127.0.0.1:8080/admin/"),
    ],
)
def test_the_local_admin_line_names_the_host_and_port_make_run_serves(monkeypatch, environment, url):
    for name in ("HOST", "PORT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    out = StringIO()
    with override_settings(DEBUG=True):
        call_command("bootstrap", no_demo=True, stdout=out)
    assert f"Sign in at {url} as 'admin'" in out.getvalue()
    assert get_user_model().objects.filter(username="admin", is_superuser=True).exists()
    again = StringIO()
    with override_settings(DEBUG=True):
        call_command("bootstrap", no_demo=True, stdout=again)
    assert "Sign in" not in again.getvalue()  # the password is shown only once
