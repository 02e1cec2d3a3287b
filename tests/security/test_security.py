"""The security review's checks, kept as tests: deploy checks, admin sign-in throttling, headers,
no traceback in any answer."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

PROJECT = Path(__file__).resolve().parents[2]


def test_check_deploy_is_clean_under_production_settings():
    environment = {
        # Not the browser tests' DJANGO_ALLOW_ASYNC_UNSAFE (set in this process for Playwright).
        **{name: value for name, value in os.environ.items() if name != "DJANGO_ALLOW_ASYNC_UNSAFE"},
        "DJANGO_SETTINGS_MODULE": "memory_site.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_ALLOWED_HOSTS": "memory.example.org",
    }
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=PROJECT, env=environment, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


@pytest.mark.django_db
def test_admin_sign_in_is_locked_at_the_fifth_failure_for_that_user_and_address():
    get_user_model().objects.create_superuser(username="curator", email="c@example.org", password="right-horse-9")
    client = Client(REMOTE_ADDR="203.0.113.7")
    for _ in range(4):
        response = client.post("/admin/login/", {"username": "curator", "password": "wrong"})
        assert response.status_code == 200  # the form again, with its error
    fifth = client.post("/admin/login/", {"username": "curator", "password": "wrong"})
    assert fifth.status_code == 429
    locked = client.post("/admin/login/", {"username": "curator", "password": "right-horse-9"})
    assert locked.status_code == 429  # even the right password, until the cool-off ends
    other_address = Client(REMOTE_ADDR="198.51.100.2")
    signed_in = other_address.post("/admin/login/", {"username": "curator", "password": "right-horse-9"})
    assert signed_in.status_code == 302  # the lock is per user and address, not a denial of service


@pytest.mark.django_db
def test_security_headers_on_api_and_admin():
    for path in ("/api/v1/health", "/admin/login/"):
        response = Client().get(path)
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["X-Frame-Options"] == "DENY"
        assert response["Referrer-Policy"] == "same-origin"
        assert response["Cross-Origin-Opener-Policy"] == "same-origin"


@pytest.mark.django_db
def test_an_unexpected_error_answers_without_a_traceback(settings, team, monkeypatch):
    from lessons.api import operations
    from lessons.services.api_keys import api_key_create

    settings.DEBUG = False
    _, raw_key = api_key_create(team=team, name="agent")

    def explode(**kwargs):
        raise RuntimeError("secret internals /srv/app/lessons/engine.py line 42")

    monkeypatch.setattr(operations, "run_search", explode)
    client = Client(raise_request_exception=False)
    response = client.post("/api/v1/search", {"query": "x"}, content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    body = response.content.decode()
    assert response.status_code == 500
    assert "Traceback" not in body and "secret internals" not in body and "engine.py" not in body


@pytest.mark.django_db
def test_requests_django_turns_away_get_json_under_the_api(settings):
    settings.DEBUG = False
    wrong_host = Client(HTTP_HOST="evil.example").get("/api/v1/health")
    assert wrong_host.status_code == 400 and wrong_host["Content-Type"] == "application/json"
    assert wrong_host.json()["detail"].startswith("bad request: the Host header names no host")
    assert Client(HTTP_HOST="evil.example").get("/admin/login/")["Content-Type"].startswith("text/html")
    no_token = Client(enforce_csrf_checks=True).post("/api/v1/docs")  # a page, not an operation
    assert no_token.status_code == 403 and "CSRF token" in no_token.json()["detail"]
    assert "text/html" in Client(enforce_csrf_checks=True).post("/admin/login/")["Content-Type"]


@pytest.mark.django_db
def test_the_https_redirect_keeps_a_posts_method(settings):
    settings.SECURE_SSL_REDIRECT = True
    posted = Client().post("/api/v1/search", "{}", content_type="application/json")
    assert posted.status_code == 308 and posted["Location"] == "https://testserver/api/v1/search"
    assert Client().get("/api/v1/lessons").status_code == 301  # a GET may keep Django's 301
    # ... but a load balancer's probe over plain HTTP gets its answer, not a redirect
    assert Client().get("/api/v1/health").status_code in (200, 503)
    secure = Client().post("/api/v1/search", "{}", content_type="application/json", secure=True)
    assert secure.status_code == 401  # over HTTPS it is answered (here: no key)


def test_hosts_and_trusted_origins_listed_with_spaces_are_trimmed():
    # "127.0.0.1, localhost" kept " localhost": every request naming it was a 400, and the second
    # trusted origin refused every sign-in behind the proxy (403)
    environment = {
        **{name: value for name, value in os.environ.items() if name != "DJANGO_ALLOW_ASYNC_UNSAFE"},
        "DJANGO_SETTINGS_MODULE": "memory_site.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1, localhost , memory.example.org,",
        "DJANGO_CSRF_TRUSTED_ORIGINS": "https://a.example.org, https://b.example.org",
        "DATABASE_URL": "postgres://settings-check.invalid/none",
    }
    script = "from django.conf import settings; print(settings.ALLOWED_HOSTS, settings.CSRF_TRUSTED_ORIGINS)"
    result = subprocess.run([sys.executable, "-c", f"import django; django.setup(); {script}"], cwd=PROJECT,
                            env=environment, capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == (
        "['127.0.0.1', 'localhost', 'memory.example.org'] ['https://a.example.org', 'https://b.example.org']"
    ), result.stderr


@pytest.mark.django_db
@pytest.mark.parametrize("raised, status", [("database", 503), ("other", 500)])
def test_an_admin_page_during_a_database_outage_is_a_503(settings, monkeypatch, raised, status):
    # the admin answered a bare "Server Error (500)" on every page while the API answered 503
    from django.contrib.admin.sites import AdminSite
    from django.db import OperationalError

    settings.DEBUG = False
    user = get_user_model().objects.create_superuser(username="curator", email="c@example.org", password="x-9-y-8")

    def each_context(self, request):  # looked up per request (the URLconf keeps `index` itself)
        raise OperationalError("connection refused") if raised == "database" else RuntimeError("a bug")

    monkeypatch.setattr(AdminSite, "each_context", each_context)
    client = Client(raise_request_exception=False)
    client.force_login(user)
    response = client.get("/admin/")
    assert response.status_code == status
    if raised == "database":
        assert response["Retry-After"] == "5" and b"The database is not answering" in response.content
        assert b"connection refused" not in response.content
