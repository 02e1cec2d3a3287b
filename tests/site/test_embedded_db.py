"""The embedded PostgreSQL counts its users; a killed one must not keep it running forever."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from memory_site.embedded_db import _forget_dead_users, _LiveUsers

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
