"""`make run`'s first-start command: the local admin's sign-in line names where the server runs."""

from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
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


@pytest.mark.django_db(transaction=True)
def test_a_first_start_stopped_halfway_loads_the_whole_demo_next_time(monkeypatch):
    from lessons.models import Lesson, Memory, Team
    from lessons.services import imports

    real_import = imports._import_memory
    seen = []

    def stopped_at_the_tenth_memory(*, team, data):
        seen.append(1)
        if len(seen) == 10:
            raise KeyboardInterrupt
        return real_import(team=team, data=data)

    monkeypatch.setattr(imports, "_import_memory", stopped_at_the_tenth_memory)
    with override_settings(DEBUG=False), pytest.raises(CommandError, match="interrupted") as stopped:
        call_command("bootstrap", stdout=StringIO(), stderr=StringIO())
    # it says what happened: the import's own "the lines before it are imported" was not true here
    assert "none of it was kept" in str(stopped.value) and "lines before it" not in str(stopped.value)
    assert stopped.value.returncode == 130
    assert not Team.objects.filter(slug="demo").exists()  # nothing half-loaded is kept
    assert not Lesson.objects.exists() and not Memory.objects.exists()
    monkeypatch.setattr(imports, "_import_memory", real_import)
    with override_settings(DEBUG=False, EMBEDDINGS_ENABLED=False):
        call_command("bootstrap", stdout=StringIO(), stderr=StringIO())
    lines = (Path(__file__).resolve().parents[2] / "lessons" / "demo_data" / "memories.jsonl").read_text().splitlines()
    assert Memory.objects.filter(team__slug="demo", current_version__isnull=True).count() == len(
        [line for line in lines if line.strip()])
