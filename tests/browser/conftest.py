"""Browser tests: the admin's pages driven in a real Chromium (Debian's package, installed by
`make install`) through Playwright's sync API, against pytest-django's `live_server`.

Fixtures (names are stable; other test modules rely on them):

- `browser`: one headless Chromium per test module (`/usr/bin/chromium`, or `CHROMIUM_PATH`).
  Playwright's own browser download is not used. Module-scoped, not session-scoped: Playwright's
  sync API keeps an asyncio loop running in the main thread while it is started, and tests that run
  later in the session (the MCP server's, with anyio) need that thread free of it.
- `page`: a fresh browser context and page for one test, anonymous, 1280x800, with a short default
  timeout so a missing element fails fast. Its base URL is the live server's, so paths work:
  `page.goto("/admin/")`.
- `admin_user` (pytest-django's): a superuser; `admin_page` signs it in (its session cookie is set
  on the context, no login form round trip) and returns that `page`.
- `screenshot(name)`: saves the current `admin_page` (or the given `page=`) as
  `.data/screenshots/<name>.png` (git-ignored) and returns the path, so a test can take pictures a
  person then looks at; `full_page=True` for the whole scroll height.
- `live_demo_team`: the demo lessons and memories in team `demo`, embedded with the real model
  (vectors reused within the run, see tests/search/demo.py), for the test that asks for it.

Notes: tests that use `live_server` run in pytest-django's transactional mode (the server thread
must see committed rows), so every table is emptied after each of them; module-scoped data such as
`demo_team` does not survive into them, use `live_demo_team`. Playwright's sync API keeps an event
loop running in the test's thread, which trips Django's async-safety check on ORM calls made in the
test itself; `DJANGO_ALLOW_ASYNC_UNSAFE` is set here for that (the ORM is still used from one thread).
"""

import os
from pathlib import Path

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "1")

from playwright.sync_api import sync_playwright  # noqa: E402

CHROMIUM_PATH = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT_DIR = Path(__file__).resolve().parents[2] / ".data" / "screenshots"
VIEWPORT = {"width": 1280, "height": 800}
TIMEOUT_MS = 10_000


# Module scope, not session: Playwright's sync API keeps an asyncio loop running in the test thread
# while it is started, and the MCP tests (tests/mcp/, collected after tests/browser/) then fail
# with "Already running asyncio in this thread". Stopping it after each browser module frees the
# thread; a Chromium start costs about a second.
@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(viewport=VIEWPORT, base_url=live_server.url)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def admin_page(page, admin_user, live_server, client):
    """`page`, signed in as pytest-django's superuser `admin_user` (staff)."""
    from django.conf import settings

    client.force_login(admin_user)
    session_cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    page.context.add_cookies(
        [{"name": settings.SESSION_COOKIE_NAME, "value": session_cookie.value, "url": live_server.url}]
    )
    return page


@pytest.fixture
def screenshot(request):
    """`screenshot(name, page=None, full_page=False) -> Path`; the page defaults to the test's
    `admin_page` (or `page`)."""

    def take(name: str, *, page=None, full_page: bool = False) -> Path:
        if page is None:
            fixture = "admin_page" if "admin_page" in request.fixturenames else "page"
            page = request.getfixturevalue(fixture)
        SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOT_DIR / f"{name}.png"
        page.screenshot(path=str(path), full_page=full_page)
        return path

    return take


@pytest.fixture
def live_demo_team(transactional_db):
    from tests.search.demo import load_demo_team

    return load_demo_team(slug="demo")
