"""import_lessons / import_memories read what the exports write into: standard input (`-`),
`/dev/stdin`, a named pipe and a process substitution (`<(zcat backup.jsonl.gz)`). They refused
all of these ("not a regular file", "-: no such file"), so restoring a compressed backup needed
a temporary file. Run as people run them, in processes of their own, with the stream's lines
named in errors as a file's are."""

import gzip
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from io import BytesIO, StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from lessons.models import Lesson, Memory
from tests.commands.test_process_exit import _said
from tests.commands.test_search_command import _test_database_environment

PROJECT = Path(__file__).resolve().parents[2]
# The subprocesses commit their rows: the tables are emptied after each test, not rolled back.
pytestmark = pytest.mark.django_db(transaction=True)

LESSONS = [json.dumps({"external_id": "l-1", "title": "Retry uploads with backoff"}), "{not json",
           json.dumps({"external_id": "l-2", "title": "Pin the base image"})]
LESSONS_SUMMARY = "lessons into team 'acme': 2 created, 0 updated, 0 unchanged, 1 failed"
MEMORIES = [json.dumps({"content": "The deploy froze on Friday"}), json.dumps({"content": 7}),
            json.dumps({"content": "The cache warmed in a minute"})]


def _environment() -> dict[str, str]:
    return {**_test_database_environment(), "EMBEDDINGS_ENABLED": "0"}  # no model to load for a few rows


def _manage(*args, **popen) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=PROJECT, env=_environment(),
                          capture_output=True, text=True, timeout=300, **popen)


def _text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def _assert_two_lessons_and_line_2_named(finished: subprocess.CompletedProcess, name: str) -> None:
    assert finished.returncode == 1, finished.stderr
    assert finished.stdout.splitlines() == [LESSONS_SUMMARY]
    said = _said(finished.stderr)
    assert said[0].startswith(f"{name}:2: broken JSON"), said
    assert said[-1] == "CommandError: 1 line(s) could not be imported; the others were."
    assert sorted(Lesson.objects.filter(team__slug="acme").values_list("external_id", flat=True)) == ["l-1", "l-2"]


def test_dash_reads_standard_input_and_names_it_stdin(team):
    finished = _manage("import_lessons", "-", "--team", "acme", input=_text(LESSONS))
    _assert_two_lessons_and_line_2_named(finished, "<stdin>")
    again = _manage("import_lessons", "-", "--team", "acme", input=_text(LESSONS))  # idempotent, as a file is
    assert "2 unchanged, 1 failed" in again.stdout


def test_dev_stdin_is_read_and_named_as_given(team):
    finished = _manage("import_memories", "/dev/stdin", "--team", "acme", input=_text(MEMORIES))
    assert finished.returncode == 1, finished.stderr
    assert finished.stdout.splitlines() == ["memories into team 'acme': 2 created, 0 updated, 0 unchanged, 1 failed"]
    assert _said(finished.stderr)[0] == "/dev/stdin:2: content: expected a string, got a number"
    assert Memory.objects.filter(team__slug="acme").count() == 2


@pytest.mark.parametrize("command", ["import_lessons", "import_memories"])
def test_a_named_pipe_is_read_as_its_writer_writes(tmp_path, team, command):
    fifo = tmp_path / "rows.fifo"
    os.mkfifo(fifo)
    lines = LESSONS if command == "import_lessons" else MEMORIES

    def write():  # open waits for the reader, as a shell's `mkfifo p; zcat b.gz > p &` does
        with open(fifo, "w") as out:
            for line in lines:
                out.write(line + "\n")
                out.flush()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    finished = _manage(command, str(fifo), "--team", "acme")
    writer.join(timeout=10)
    if command == "import_lessons":
        _assert_two_lessons_and_line_2_named(finished, str(fifo))
    else:
        assert finished.returncode == 1, finished.stderr
        assert "2 created, 0 updated, 0 unchanged, 1 failed" in finished.stdout
        assert _said(finished.stderr)[0] == f"{fifo}:2: content: expected a string, got a number"


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("gzip") is None, reason="needs bash and gzip")
def test_a_compressed_backup_is_restored_through_a_process_substitution(tmp_path, team):
    """The README's export into `>(gzip > backup.jsonl.gz)`, read back without a temporary file."""
    backup = tmp_path / "backup.jsonl.gz"
    backup.write_bytes(gzip.compress(_text(LESSONS).encode()))
    script = 'exec "$0" manage.py import_lessons <(gzip -dc "$1") --team acme'
    finished = subprocess.run(["bash", "-c", script, sys.executable, str(backup)], cwd=PROJECT, env=_environment(),
                              capture_output=True, text=True, timeout=300)
    name = next(line for line in _said(finished.stderr) if ":2: " in line).split(":2: ")[0]
    assert name.startswith("/dev/fd/")  # the substitution's name, as the shell gave it
    _assert_two_lessons_and_line_2_named(finished, name)


def test_sigterm_while_waiting_for_a_line_names_the_line_not_yet_read(team):
    """On a pipe a stop mostly lands while the next line is awaited: the line before it is
    imported whole, so the line named is the one not read (it was named the one imported)."""
    process = subprocess.Popen([sys.executable, "manage.py", "import_lessons", "-", "--team", "acme"], cwd=PROJECT,
                               env=_environment(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        process.stdin.write(_text([LESSONS[0], LESSONS[2]]))
        process.stdin.flush()
        deadline = time.monotonic() + 120
        while Lesson.objects.filter(team=team).count() < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)  # past line 2's commit: waiting for line 3
        process.send_signal(signal.SIGTERM)
        # stdin left open until it has stopped: closed at once, the read could see the end of the
        # input before the signal, as when the writer dies of the same Ctrl-C
        process.wait(timeout=120)
        out, errors = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 130, errors
    assert out.splitlines() == ["lessons into team 'acme': 2 created, 0 updated, 0 unchanged, 0 failed"]
    assert _said(errors) == [
        "CommandError: interrupted (Ctrl-C or SIGTERM) at line 3: the lines before it are imported as counted above, "
        "nothing after; run the same command again to import the rest (lines already imported come out unchanged)."]
    assert Lesson.objects.filter(team=team).count() == 2


def test_a_closed_standard_input_is_one_line(team):
    finished = subprocess.run([sys.executable, "manage.py", "import_lessons", "-", "--team", "acme"], cwd=PROJECT,
                              env=_environment(), capture_output=True, text=True, timeout=300,
                              preexec_fn=lambda: os.close(0))
    assert finished.returncode == 1
    assert _said(finished.stderr) == [
        "CommandError: standard input is closed; pipe the JSON Lines into it, or name a file instead of -"]


# In this process: what a stream changes nowhere else.


def _call(*args, **options):
    stdout, stderr = StringIO(), StringIO()
    call_command(*args, stdout=stdout, stderr=stderr, **options)
    return stdout.getvalue(), stderr.getvalue()


def test_an_empty_standard_input_is_said_by_its_name(team):
    _, err = _call("import_lessons", "-", team="acme", stdin=BytesIO(b""))
    assert err == "<stdin>: no row to import (the file is empty or holds only blank lines)\n"


def test_a_socket_is_still_not_a_file_of_lines(tmp_path, team):
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(path))
        with pytest.raises(CommandError, match=f"^{path}: not a regular file"):
            _call("import_lessons", str(path), team="acme")


def test_a_ctrl_c_before_the_first_line_arrives_names_line_1(team):
    class NothingYet:
        def __iter__(self):
            return self

        def __next__(self):
            raise KeyboardInterrupt  # as a Ctrl-C lands while the read waits

    with pytest.raises(CommandError, match="at line 1: the lines before it") as raised:
        _call("import_lessons", "-", team="acme", stdin=NothingYet())
    assert raised.value.returncode == 130
