"""import_lessons / import_memories (and the exports' paths) against input that used to crash them
halfway or mislead: each is one line naming what is wrong, and what is stored stays whole."""

import json
import os
import threading
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from lessons.models import Lesson, Memory, Team
from lessons.services.curation import lesson_merge
from tests.factories import LessonFactory

pytestmark = pytest.mark.django_db

HUGE = "1" + "0" * 400  # an integer literal past float's range: OverflowError in math.isfinite


def run(command, path, **options):
    stdout, stderr = StringIO(), StringIO()
    call_command(command, str(path), stdout=stdout, stderr=stderr, **options)
    return stdout.getvalue(), stderr.getvalue()


def failing(command, path, **options):
    stdout, stderr = StringIO(), StringIO()
    with pytest.raises(CommandError) as raised:
        call_command(command, str(path), stdout=stdout, stderr=stderr, **options)
    return str(raised.value), stdout.getvalue(), stderr.getvalue()


def write_lines(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.mark.parametrize("command, field, good", [
    ("import_lessons", "confidence", '{"title":"Good one"}'),
    ("import_lessons", "frequency", '{"title":"Good one"}'),
    ("import_memories", "importance", '{"content":"Good one"}'),
])
def test_a_huge_integer_is_one_bad_line_naming_its_field(tmp_path, team, command, field, good):
    base = '{"title":"x",' if command == "import_lessons" else '{"content":"x",'
    source = write_lines(tmp_path / "rows.jsonl", good, base + f'"{field}":{HUGE}}}', good.replace("one", "two"))
    message, out, err = failing(command, source, team="acme")
    assert message == "1 line(s) could not be imported; the others were."
    assert f"{source}:2: {field}: expected a finite number, got one too large" in err
    assert "2 created, 0 updated, 0 unchanged, 1 failed" in out
    model = Lesson if command == "import_lessons" else Memory
    assert model.objects.filter(team=team).count() == 2


def test_a_bad_status_is_a_bad_line_every_time_and_a_re_import_changes_nothing(tmp_path, team):
    source = write_lines(tmp_path / "lessons.jsonl", '{"title":"Dup title","status":"bogus"}',
                         '{"title":"Dup title","recommendation":"keep me"}',
                         '{"external_id":"e1","title":"With an id","status":"bogus"}')
    for run_number in (1, 2):
        message, out, err = failing("import_lessons", source, team="acme")
        assert f"{source}:1: status: no status 'bogus'; use proposed, confirmed, rejected" in err
        assert f"{source}:3: status: no status 'bogus'" in err
        assert "note:" not in err
        assert (f"{1 if run_number == 1 else 0} created, 0 updated, {0 if run_number == 1 else 1} unchanged, "
                "2 failed") in out
    assert list(Lesson.objects.filter(team=team).values_list("title", "recommendation", "status")) == [
        ("Dup title", "keep me", "confirmed")]


@pytest.mark.skipif(not os.path.exists("/proc/sys/vm/compact_memory"), reason="needs Linux's write-only sysctl")
def test_a_file_that_cannot_be_opened_is_one_line_naming_it():
    message, out, err = failing("import_lessons", "/proc/sys/vm/compact_memory", team="hunt-x", create_team=True)
    assert message == "/proc/sys/vm/compact_memory: cannot read it: Permission denied"
    assert not Team.objects.filter(slug="hunt-x").exists()


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux's unreadable proc file")
def test_a_file_that_cannot_be_read_is_one_line_and_leaves_no_team_behind():
    message, out, err = failing("import_lessons", "/proc/self/clear_refs", team="hunt-x", create_team=True)
    assert message == "/proc/self/clear_refs: cannot read it: Invalid argument"
    assert not Team.objects.filter(slug="hunt-x").exists()


def test_a_read_error_after_some_lines_keeps_them_and_says_where_it_stopped(tmp_path, team, monkeypatch):
    source = write_lines(tmp_path / "lessons.jsonl", '{"title":"First"}', '{"title":"Second"}', '{"title":"Third"}')
    real_open = Path.open

    class FailingAfterTwo:
        def __init__(self, handle):
            self.handle, self.read = handle, 0

        def __iter__(self):
            return self

        def __next__(self):
            if self.read == 2:
                raise OSError(5, "Input/output error")
            self.read += 1
            return next(self.handle)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

    # The fault is the disk's, not the database's: the file object is what fails.
    monkeypatch.setattr(Path, "open", lambda self, *a, **k: FailingAfterTwo(real_open(self, *a, **k)))
    message, out, err = failing("import_lessons", source, team="acme")
    assert message == (f"{source}: cannot read it past line 2: Input/output error; the lines before it are "
                       "imported as counted above")
    assert "2 created" in out
    assert Lesson.objects.filter(team=team).count() == 2


@pytest.fixture
def loop(tmp_path):
    os.symlink(tmp_path / "l2", tmp_path / "l1")
    os.symlink(tmp_path / "l1", tmp_path / "l2")
    return tmp_path / "l1"


@pytest.mark.parametrize("command", ["import_lessons", "export_lessons", "export_memories"])
def test_a_symlink_loop_is_one_line(loop, team, command):
    message, _, _ = failing(command, loop, team="acme", **({"force": True} if command.startswith("export") else {}))
    assert message == f"{loop}: Too many levels of symbolic links"


@pytest.mark.parametrize("command", ["import_memories", "export_lessons", "export_memories"])
def test_a_file_name_too_long_is_one_line(tmp_path, team, command):
    path = tmp_path / ("x" * 300)
    message, _, _ = failing(command, path, team="acme")
    assert message == f"{path}: File name too long"


def test_an_export_to_a_long_but_valid_file_name_is_written(tmp_path, team):
    LessonFactory(team=team, title="One lesson")
    path = tmp_path / ("x" * 250)  # the temporary file's name beside it must still fit
    out, _ = run("export_lessons", path, team="acme")
    assert "exported 1 lesson" in out
    assert json.loads(path.read_text())["title"] == "One lesson"
    assert [entry.name for entry in tmp_path.iterdir()] == [path.name]


def test_a_file_whose_only_line_was_merged_away_is_not_called_empty(tmp_path, team):
    keep = LessonFactory(team=team, title="Kept")
    gone = LessonFactory(team=team, title="Merged", external_id="m1")
    lesson_merge(keep=keep, merged=[gone])
    source = write_lines(tmp_path / "lessons.jsonl", '{"external_id":"m1","title":"Merged"}')
    out, err = run("import_lessons", source, team="acme")
    assert "0 created, 0 updated, 0 unchanged, 1 merged away by curators, 0 failed" in out
    assert "no row to import" not in err


def test_a_history_that_repeats_a_text_is_not_noted_on_a_re_import(tmp_path, team):
    source = write_lines(tmp_path / "memories.jsonl", json.dumps(
        {"external_id": "h1", "content": "final text", "history": [{"content": "first"}, {"content": "first"}]}),
        json.dumps({"external_id": "h2", "content": "same", "history": [{"content": "before"}, {"content": "same"}]}))
    out, err = run("import_memories", source, team="acme")
    assert "2 created" in out
    out, err = run("import_memories", source, team="acme")
    assert "0 created, 0 updated, 2 unchanged" in out
    assert err == ""
    # A history that does differ from the stored versions is still said.
    write_lines(source, json.dumps({"external_id": "h1", "content": "final text", "history": [{"content": "other"}]}))
    out, err = run("import_memories", source, team="acme")
    assert ":1: note: history left as stored" in err


@pytest.mark.django_db(transaction=True)  # two imports on connections of their own, as two processes
@pytest.mark.parametrize("command, text, model", [
    ("import_lessons", "title", Lesson), ("import_memories", "content", Memory)])
def test_two_imports_of_one_file_at_once_store_each_row_once(tmp_path, command, text, model):
    rows = [{"external_id": f"r-{n}", text: f"With an id {n}"} if n % 2 else {text: f"Without an id {n}"}
            for n in range(60)]
    source = write_lines(tmp_path / "rows.jsonl", *(json.dumps(row) for row in rows))
    start, outcomes = threading.Barrier(2), []

    def one_import():
        try:
            start.wait()
            outcomes.append(run(command, source, team="hunt-y", create_team=True))
        except BaseException as error:  # said by the assertion below, not lost in the thread
            outcomes.append(error)
        finally:
            connection.close()

    imports = [threading.Thread(target=one_import) for _ in range(2)]
    for thread in imports:
        thread.start()
    for thread in imports:
        thread.join()
    assert all(isinstance(outcome, tuple) for outcome in outcomes), outcomes
    assert all("0 failed" in out for out, _ in outcomes)
    texts = list(model.objects.filter(team__slug="hunt-y").values_list(text, flat=True))
    assert len(texts) == 60 and len(set(texts)) == 60
