"""Settings for the test suite, so a bare `pytest` works in any shell: development mode (the
immediate task backend, a development secret) unless the environment says otherwise."""

import os

os.environ.setdefault("DJANGO_DEBUG", "1")

from memory_site.settings import *  # noqa: E402,F401,F403

# Tests sign in thousands of times; django-axes keeps its own tests (tests/admin/test_login_throttle.py).
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
