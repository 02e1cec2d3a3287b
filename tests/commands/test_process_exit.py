"""How a `manage.py` process ends: one line and a true status, never a traceback or a hang.

Run as people run them, in fresh processes: Ctrl-C while the settings start the embedded server
was a traceback, a Ctrl-C's wind-down could hang for good (a lock left held), a Ctrl-C after the
work was done turned success into 130, and a closed or full stdout ended in a traceback."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.commands.test_search_command import _test_database_environment
from tests.factories import LessonFactory

PROJECT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


def _manage(*args, stdout=subprocess.PIPE, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=PROJECT, env=env or _test_database_environment(),
                          stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=300)


def _said(stderr: str) -> list[str]:
    """What the process said, without the log's INFO lines."""
    return [line for line in stderr.splitlines() if line.strip() and " INFO " not in line]


@pytest.mark.parametrize("args", [("check",), ("search", "retries", "--team", "nobody", "--mode", "text")])
def test_a_closed_standard_output_is_one_line(args):
    # every command failed on Django's OutputWrapper holding None: AttributeError, in a traceback
    finished = subprocess.run([sys.executable, "manage.py", *args], cwd=PROJECT, env=_test_database_environment(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300,
                              preexec_fn=lambda: os.close(1))
    assert finished.returncode == 1
    assert _said(finished.stderr) == [
        "CommandError: standard output is closed; send it somewhere (a file, a pipe, /dev/null)"]


@pytest.mark.django_db(transaction=True)  # the team committed: the command runs in a process of its own
def test_a_full_disk_under_stdout_is_one_line(team):
    """Buffered, as in a shell without PYTHONUNBUFFERED: what the failed write left in the buffer was
    flushed again at exit, "Exception ignored ... OSError: No space left on device" and status 120
    (this test's environment had PYTHONUNBUFFERED=1, which hid it)."""
    LessonFactory(team=team, title="Retry uploads with backoff")  # a line for the export to write
    buffered = {name: value for name, value in _test_database_environment().items() if name != "PYTHONUNBUFFERED"}
    for args, line in (
        (("search", "retries", "--team", team.slug, "--mode", "text"),
         "search: input or output failed: No space left on device."),
        (("check",), "check: input or output failed: No space left on device."),
        (("export_lessons", "-", "--team", team.slug),
         "CommandError: cannot write to stdout: No space left on device"),
    ):
        with open("/dev/full", "w") as full:
            finished = _manage(*args, stdout=full, env=buffered)
        assert (finished.returncode, _said(finished.stderr)) == (1, [line]), finished.stderr


INTERRUPTED_EARLY = """
import sys
import manage

def interrupted(argv):
    raise KeyboardInterrupt  # as a Ctrl-C lands while the settings start the embedded server

manage.start_query_encoder_early = interrupted
sys.argv = ["manage.py", "search", "retries", "--team", "demo"]
manage.main()
"""


def test_ctrl_c_before_the_command_runs_is_the_one_line_too():
    finished = subprocess.run([sys.executable, "-c", INTERRUPTED_EARLY], cwd=PROJECT, env=_test_database_environment(),
                              capture_output=True, text=True, timeout=300)
    assert finished.returncode == 130
    assert _said(finished.stderr) == ["search: interrupted (Ctrl-C); work committed before it is kept."]


# A wind-down that cannot end: a thread the interpreter waits for at exit and that never returns,
# as a lock a KeyboardInterrupt left held kept one waiting.
HUNG_WIND_DOWN = """
import sys, threading
import manage

manage.EXIT_DEADLINE_SECONDS = float(sys.argv[1])
threading.Thread(target=threading.Event().wait).start()  # not a daemon: exit waits for it
exit = sys.exit


def winding_down(status):  # leave() has set its handlers: the parent may signal now
    sys.stderr.write("winding down\\n")
    sys.stderr.flush()
    exit(status)


sys.exit = winding_down
manage.leave(int(sys.argv[2]))
"""


def test_a_wind_down_that_hangs_ends_at_the_deadline_with_the_status_decided():
    finished = subprocess.run([sys.executable, "-c", HUNG_WIND_DOWN, "1", "0"], cwd=PROJECT,
                              capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    finished = subprocess.run([sys.executable, "-c", HUNG_WIND_DOWN, "1", "130"], cwd=PROJECT,
                              capture_output=True, text=True, timeout=120)
    assert finished.returncode == 130, finished.stderr


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_while_winding_down_leaves_at_once_with_the_status_decided(stop):
    # a finished search interrupted on its way out said 130 (or aborted in C++): its work was done
    process = subprocess.Popen([sys.executable, "-c", HUNG_WIND_DOWN, "600", "0"], cwd=PROJECT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert process.stderr.readline() == "winding down\n"
        process.send_signal(stop)
        _, errors = process.communicate(timeout=60)  # the deadline is 10 minutes: only the signal ends it
    finally:
        process.kill()
    assert process.returncode == 0 and "Traceback" not in errors, errors
