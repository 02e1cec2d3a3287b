"""Where an export cannot write, it says so in one line; a symbolic link is followed, not replaced."""

import errno
import io

import pytest
from django.core.management import CommandError, call_command

from tests.factories import LessonFactory, TeamFactory

pytestmark = pytest.mark.django_db


def test_a_folder_the_export_may_not_write_in_is_one_line_not_a_traceback(tmp_path, monkeypatch):
    LessonFactory(team=TeamFactory(slug="paths"))
    folder = tmp_path / "locked"
    folder.mkdir()

    def refuse(*args, **kwargs):  # as a folder without write permission answers (tests run as root here)
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("tempfile.mkstemp", refuse)
    with pytest.raises(CommandError, match=r"^cannot write in .*locked: Permission denied$"):
        call_command("export_lessons", str(folder / "backup.jsonl"), team="paths")
    assert list(folder.iterdir()) == []


class FullDisk(io.RawIOBase):
    """stdout on a full disk (`> /dev/full`): every write fails with ENOSPC."""

    def writable(self):
        return True

    def write(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_stdout_is_one_line_not_a_traceback():
    LessonFactory(team=TeamFactory(slug="paths"))
    stdout = io.TextIOWrapper(FullDisk())
    with pytest.raises(CommandError, match=r"^cannot write to stdout: No space left on device$"):
        call_command("export_lessons", "-", team="paths", stdout=stdout, stderr=io.StringIO())


def test_force_on_a_symbolic_link_replaces_the_file_it_names_and_keeps_the_link(tmp_path):
    LessonFactory(team=TeamFactory(slug="paths"), title="Kept behind the link")
    real, link = tmp_path / "real.jsonl", tmp_path / "latest.jsonl"
    real.write_text("an older backup\n")
    link.symlink_to(real.name)
    call_command("export_lessons", str(link), team="paths", force=True)
    assert link.is_symlink() and "Kept behind the link" in real.read_text()
    with pytest.raises(CommandError, match="the file exists"):  # without --force the file it names is kept
        call_command("export_lessons", str(link), team="paths")


def test_a_named_pipe_is_written_into_not_replaced(tmp_path):
    """Renamed over, a named pipe became a regular file its reader never saw (it hung on 0 bytes)."""
    import os
    import threading

    LessonFactory(team=TeamFactory(slug="paths"), title="Through the pipe")
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    received = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_text()), daemon=True)
    reader.start()
    call_command("export_lessons", str(pipe), team="paths", stdout=io.StringIO())  # no --force: nothing replaced
    reader.join(timeout=30)
    assert pipe.is_fifo() and "Through the pipe" in received[0]

