"""The production server as an operator starts it: gunicorn with DEBUG off, run as a subprocess.

A bad setting stops it with one line before a worker boots (it used to be a traceback per worker,
then gunicorn's own; a blank secret used to start a server whose every answer was an unlogged
500). A good start serves, logs Django's own refusals and each request's duration, and takes
traffic at once when the warm-up is off."""

import json
import os
import secrets
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.mcp.test_mcp_server import _test_database_url
from tests.reliability.throwaway import ROOT, free_port, stop_process, wait_for

GUNICORN = str(Path(sys.executable).with_name("gunicorn"))


def production_env(**overrides: str) -> dict:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST_", "DJANGO_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="memory_site.settings",
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        DJANGO_SECURE_SSL_REDIRECT="0",
        PYTHONUNBUFFERED="1",
    )
    env.update(overrides)
    return env


def run(command: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        ({"DJANGO_SECRET_KEY": ""}, "DJANGO_SECRET_KEY: must be set when DJANGO_DEBUG is off"),
        ({"DJANGO_SECRET_KEY": "   "}, "DJANGO_SECRET_KEY: must be set when DJANGO_DEBUG is off"),
        ({"DJANGO_SECRET_KEY": "abc"}, "DJANGO_SECRET_KEY: has 3 characters when DJANGO_DEBUG is off (at least 50"),
        ({"DJANGO_ALLOWED_HOSTS": ""}, "DJANGO_ALLOWED_HOSTS must name the host names this server answers to"),
        ({"SEARCH_BM25_K1": "1x2"}, "SEARCH_BM25_K1: '1x2' is not a finite number"),
        # resolved only at a worker's first save, after its commit: every write answered 500
        ({"TASKS_BACKEND": "nope.Backend"}, "TASKS_BACKEND: Could not find backend 'nope.Backend'"),
    ],
)
def test_a_bad_setting_stops_the_server_and_every_command_with_one_line(overrides, said):
    env = production_env(PORT=str(free_port()), **overrides)
    served = run([GUNICORN, "--config", "gunicorn.conf.py"], env)
    assert served.returncode == 2, served.stderr
    output = served.stdout + served.stderr
    assert f"memory-store: a setting is wrong: {said}" in output
    assert "Traceback" not in output and "Listening at" not in output  # stopped before it served
    checked = run([sys.executable, "manage.py", "check"], env)
    assert checked.returncode != 0 and said in checked.stderr and "Traceback" not in checked.stderr


def test_an_embedding_backend_that_cannot_be_imported_stops_the_server_with_one_line():
    # imported at a worker's warm-up: each worker printed a traceback, then gunicorn halted
    env = production_env(PORT=str(free_port()), EMBEDDING_BACKEND="lessons.embedding.backends.NoSuchBackend")
    served = run([GUNICORN, "--config", "gunicorn.conf.py"], env)
    assert served.returncode == 2, served.stderr
    output = served.stdout + served.stderr
    assert ("memory-store: a setting is wrong: EMBEDDING_BACKEND 'lessons.embedding.backends.NoSuchBackend' "
            "cannot be imported") in output
    assert "Traceback" not in output and "Listening at" not in output


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        ({"PORT": "99999"}, "PORT: 99999 is out of range; use 1 to 65535"),
        ({"GUNICORN_THREADS": "0"}, "GUNICORN_THREADS: 0 is out of range"),
        ({"GUNICORN_MAX_REQUESTS": "many"}, "GUNICORN_MAX_REQUESTS: 'many'"),
    ],
)
def test_a_bad_gunicorn_number_is_one_line(overrides, said):
    served = run([GUNICORN, "--config", "gunicorn.conf.py"], production_env(**overrides))
    assert served.returncode == 1
    assert f"gunicorn.conf.py: a setting is wrong: {said}" in served.stderr
    assert "Traceback" not in served.stderr


def test_make_serve_checks_what_gunicorn_would_answer_with_a_traceback():
    # gunicorn parses WEB_CONCURRENCY with int() as it loads; `make serve` runs the file first
    checked = run([sys.executable, "gunicorn.conf.py"], production_env(WEB_CONCURRENCY="abc"))
    assert checked.returncode == 1 and "Traceback" not in checked.stderr
    assert "gunicorn.conf.py: a setting is wrong: WEB_CONCURRENCY: 'abc'" in checked.stderr
    good = run([sys.executable, "gunicorn.conf.py"], production_env(WEB_CONCURRENCY="3", PORT="8123"))
    assert good.returncode == 0 and good.stdout.strip() == "gunicorn: 3 worker(s) x 4 thread(s) on 127.0.0.1:8123"
    makefile = (ROOT / "Makefile").read_text()
    serve = makefile[makefile.index("\nserve: install"):makefile.index("\n\n", makefile.index("\nserve: install"))]
    assert serve.index("gunicorn.conf.py\n") < serve.index("--config gunicorn.conf.py")
    assert "CHROMIUM" not in makefile[makefile.index("\ninstall:"):makefile.index("\n", makefile.index("\ninstall:") + 1)]


def _get(url: str, host: str | None = None) -> tuple[int, str, str]:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read().decode()


@pytest.mark.django_db
def test_the_production_server_serves_logs_refusals_and_durations(tmp_path):
    port = free_port()
    log = tmp_path / "gunicorn.log"
    env = production_env(
        DATABASE_URL=_test_database_url(), PORT=str(port), WEB_CONCURRENCY="1", GUNICORN_THREADS="2",
        EMBEDDING_WARM_UP="0",
    )
    with open(log, "w") as output:
        server = subprocess.Popen([GUNICORN, "--config", "gunicorn.conf.py"], cwd=ROOT, env=env, stdout=output,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _reachable(f"{base}/api/v1/health"), timeout=90, what="gunicorn to answer")
        status, kind, body = _get(f"{base}/api/v1/health")
        assert status == 200 and json.loads(body)["database"]["ok"] is True
        status, kind, body = _get(f"{base}/api/v1/health", host="evil.example")
        assert (status, kind) == (400, "application/json")
        assert json.loads(body)["detail"].startswith("bad request: the Host header names no host")
        status, kind, _ = _get(f"{base}/admin/login/", host="evil.example")
        assert status == 400 and kind.startswith("text/html")  # the admin keeps Django's page
    finally:
        stop_process(server)
    logged = log.read_text()
    assert "taking traffic (EMBEDDING_WARM_UP=0" in logged  # did not wait for the model
    assert "Invalid HTTP_HOST header: 'evil.example'" in logged  # django.security, with DEBUG off
    requests = [line for line in logged.splitlines() if '"GET /api/v1/health HTTP/1.1"' in line]
    assert len(requests) >= 2 and all(line.endswith("ms") for line in requests)
    assert "Traceback" not in logged


def _reachable(url: str) -> bool:
    try:
        return _get(url)[0] == 200
    except OSError:
        return False
