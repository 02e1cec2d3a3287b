"""What an import does when it is stopped or meets another writer: Ctrl-C while reading lines or
while embedding ends with status 130 and a sentence saying what was kept (it used to report
success, with the rows unembedded); a file naming one row twice, a history for a memory that
exists, and a row another import stored at the same moment are each said, not silently merged."""

import json
import os
import signal
import time
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from lessons.models import Lesson, Memory
from lessons.services import imports

pytestmark = pytest.mark.django_db


def jsonl(tmp_path, rows, name="rows.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def run(command, path, **options):
    stdout, stderr = StringIO(), StringIO()
    call_command(command, str(path), stdout=stdout, stderr=stderr, **options)
    return stdout.getvalue(), stderr.getvalue()


@pytest.mark.django_db(transaction=True)  # the backfill is queued when the import's rows commit
def test_ctrl_c_while_embedding_keeps_the_rows_and_says_they_wait_for_the_backfill(tmp_path):
    rows = [{"external_id": f"l-{n}", "title": f"Lesson {n}"} for n in range(4)]
    rows.append({"external_id": "l-4", "title": "INTERRUPT HERE while this batch encodes"})
    backend = {"BACKEND": "tests.embedding_backends.InterruptedOnMarkerBackend", "BATCH_SIZE": 64}
    with override_settings(EMBEDDING_BACKEND=backend), pytest.raises(CommandError) as raised:
        run("import_lessons", jsonl(tmp_path, rows), team="acme", create_team=True)
    assert raised.value.returncode == 130
    assert str(raised.value).startswith(
        "interrupted (Ctrl-C or SIGTERM) while embedding: every row counted above is stored")
    assert "backfill_embeddings --team acme" in str(raised.value)
    assert Lesson.objects.filter(team__slug="acme").count() == 5  # stored, waiting for their embedding
    assert not Lesson.objects.filter(team__slug="acme", embedding__isnull=False).exists()


def test_ctrl_c_between_lines_keeps_the_lines_before_and_a_re_run_finishes(tmp_path, monkeypatch):
    rows = [{"external_id": f"l-{n}", "title": f"Lesson {n}"} for n in range(5)]
    path = jsonl(tmp_path, rows)
    real_import = imports._import_lesson

    def interrupted_at_the_fourth(*, team, data):
        if data["external_id"] == "l-3":
            raise KeyboardInterrupt
        return real_import(team=team, data=data)

    monkeypatch.setattr(imports, "_import_lesson", interrupted_at_the_fourth)
    with pytest.raises(CommandError) as raised:
        run("import_lessons", path, team="acme", create_team=True)
    assert raised.value.returncode == 130
    assert str(raised.value).startswith("interrupted (Ctrl-C or SIGTERM) at line 4: the lines before it are imported")
    assert sorted(Lesson.objects.values_list("external_id", flat=True)) == ["l-0", "l-1", "l-2"]
    monkeypatch.setattr(imports, "_import_lesson", real_import)
    out, _ = run("import_lessons", path, team="acme")
    assert "2 created, 0 updated, 3 unchanged, 0 failed" in out


def test_sigterm_between_lines_stops_as_ctrl_c_does(tmp_path, monkeypatch):
    rows = [{"external_id": f"l-{n}", "title": f"Lesson {n}"} for n in range(5)]
    real_import = imports._import_lesson

    def stopped_at_the_fourth(*, team, data):
        if data["external_id"] == "l-3":
            os.kill(os.getpid(), signal.SIGTERM)  # a process manager's stop: the process ended at once
            time.sleep(5)
        return real_import(team=team, data=data)

    monkeypatch.setattr(imports, "_import_lesson", stopped_at_the_fourth)
    with pytest.raises(CommandError) as raised:
        run("import_lessons", jsonl(tmp_path, rows), team="acme", create_team=True)
    assert raised.value.returncode == 130
    assert str(raised.value).startswith("interrupted (Ctrl-C or SIGTERM) at line 4: the lines before it")
    assert sorted(Lesson.objects.values_list("external_id", flat=True)) == ["l-0", "l-1", "l-2"]


def test_one_row_twice_in_a_file_is_refused_on_the_later_line(tmp_path):
    path = jsonl(tmp_path, [{"external_id": "d-1", "title": "First"}, {"external_id": "d-2", "title": "Other"},
                            {"external_id": "d-1", "title": "Second"}])
    with pytest.raises(CommandError, match="1 line"):
        run("import_lessons", path, team="acme", create_team=True)
    assert Lesson.objects.get(external_id="d-1").title == "First"
    stdout, stderr = StringIO(), StringIO()
    with pytest.raises(CommandError):
        call_command("import_lessons", str(path), team="acme", stdout=stdout, stderr=stderr)
    assert "0 created, 0 updated, 2 unchanged, 1 failed" in stdout.getvalue()  # a re-run changes nothing
    assert f"{path}:3: external_id 'd-1' is on line 1 too; a file holds each row once" in stderr.getvalue()


def test_a_history_for_a_memory_that_exists_is_said_to_be_left_as_stored(tmp_path, team):
    row = {"external_id": "m-1", "content": "Now", "history": [{"content": "First"}]}
    run("import_memories", jsonl(tmp_path, [row]), team=team.slug)
    _, quiet = run("import_memories", jsonl(tmp_path, [row], "again.jsonl"), team=team.slug)
    assert "note" not in quiet  # the same file again: nothing to say
    row["history"] = [{"content": "First"}, {"content": "Between"}]
    out, said = run("import_memories", jsonl(tmp_path, [row], "more.jsonl"), team=team.slug)
    assert "0 created, 0 updated, 1 unchanged" in out
    assert ":1: note: history left as stored: the memory exists" in said
    assert Memory.objects.filter(current_version__external_id="m-1").count() == 1


def test_a_row_another_import_stored_at_the_same_moment_is_updated_not_a_traceback(tmp_path, team, monkeypatch):
    Lesson.objects.create(team=team, external_id="r-1", title="Stored by the other import")
    real_find = imports._find_existing
    calls = []

    real_peers = Lesson.external_id_peers

    def not_yet_visible(queryset, **lookup):  # the other writer committed after this one looked
        calls.append(lookup["external_id"])
        return None if len(calls) == 1 else real_find(queryset, **lookup)

    def peers_as_first_seen(lesson):  # the service's own check ran before that commit too
        return None if len(calls) == 1 else real_peers(lesson)

    monkeypatch.setattr(imports, "_find_existing", not_yet_visible)
    monkeypatch.setattr(Lesson, "external_id_peers", peers_as_first_seen)
    out, _ = run("import_lessons", jsonl(tmp_path, [{"external_id": "r-1", "title": "From this import"}]),
                 team=team.slug)
    assert "0 created, 1 updated, 0 unchanged, 0 failed" in out
    assert Lesson.objects.get(external_id="r-1").title == "From this import"


def test_a_row_another_import_committed_after_this_lines_lookup_is_updated(tmp_path, team, monkeypatch):
    """The other import committed between this line's lookup and its create: the services' own
    check of the id refused the create, and two imports of one file at once both failed lines."""
    Lesson.objects.create(team=team, external_id="r-1", title="Stored by the other import")
    real_find = imports._find_existing
    calls = []

    def not_yet_visible(queryset, **lookup):
        calls.append(lookup["external_id"])
        return None if len(calls) == 1 else real_find(queryset, **lookup)

    monkeypatch.setattr(imports, "_find_existing", not_yet_visible)
    out, _ = run("import_lessons", jsonl(tmp_path, [{"external_id": "r-1", "title": "From this import"}]),
                 team=team.slug)
    assert "0 created, 1 updated, 0 unchanged, 0 failed" in out
    assert Lesson.objects.get(external_id="r-1").title == "From this import"


def test_nothing_imported_is_not_called_the_others(tmp_path):
    with pytest.raises(CommandError, match=r"2 line\(s\) could not be imported; no line was\.") as raised:
        run("import_lessons", jsonl(tmp_path, [["a list"], {"title": 5}]), team="acme", create_team=True)
    assert raised.value.returncode == 1
    stdout, stderr = StringIO(), StringIO()
    with pytest.raises(CommandError):
        call_command("import_lessons", str(jsonl(tmp_path, [["a list"], {"title": 5}], "b.jsonl")),
                     team="acme", create_team=True, stdout=stdout, stderr=stderr)
    assert ":1: expected a JSON object, got an array" in stderr.getvalue()
    assert ":2: title: expected a string, got a number" in stderr.getvalue()


def test_an_empty_file_is_said_and_a_quiet_run_prints_only_what_went_wrong(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    out, said = run("import_lessons", empty, team="acme", create_team=True)
    assert f"{empty}: no row to import (the file is empty or holds only blank lines)" in said
    out, said = run("import_lessons", jsonl(tmp_path, [{"title": "Quiet"}]), team="acme", create_team=True,
                    verbosity=0)
    assert out == "" and said == ""
    assert Lesson.objects.filter(title="Quiet").exists()


@pytest.mark.parametrize("history, message", [
    ({}, "history: expected a list of earlier versions, got an object"),
    ("", "history: expected a list of earlier versions, got a string"),
    (False, "history: expected a list of earlier versions, got a boolean"),
])
def test_a_history_that_is_not_a_list_is_a_bad_line_not_no_history(tmp_path, history, message):
    path = jsonl(tmp_path, [{"content": "Now", "history": history}])
    stdout, stderr = StringIO(), StringIO()
    with pytest.raises(CommandError):
        call_command("import_memories", str(path), team="acme", create_team=True, stdout=stdout, stderr=stderr)
    assert f"{path}:1: {message}" in stderr.getvalue()
    assert not Memory.objects.exists()


def test_byte_order_marks_where_files_were_joined_and_cr_line_ends_are_named(tmp_path):
    joined = tmp_path / "joined.jsonl"
    joined.write_bytes(b'\xef\xbb\xbf{"title": "First"}\n\xef\xbb\xbf{"title": "Second"}\n')
    out, _ = run("import_lessons", joined, team="acme", create_team=True)
    assert "2 created" in out
    classic_mac = tmp_path / "mac.jsonl"
    classic_mac.write_bytes(b'{"title": "Third"}\r{"title": "Fourth"}\r')
    stdout, stderr = StringIO(), StringIO()
    with pytest.raises(CommandError):
        call_command("import_lessons", str(classic_mac), team="acme", stdout=stdout, stderr=stderr)
    assert f"{classic_mac}:1: the lines end in CR alone" in stderr.getvalue()


def test_rows_written_with_the_model_off_are_said_to_wait_for_the_backfill(tmp_path):
    with override_settings(EMBEDDINGS_ENABLED=False):
        _, said = run("import_lessons", jsonl(tmp_path, [{"title": "Unembedded"}]), team="acme", create_team=True)
    assert "note: the model is off (EMBEDDINGS_ENABLED=0): the 1 row(s) written are found by keywords" in said


def test_a_value_the_database_refuses_is_a_bad_line_naming_its_first_words(tmp_path, monkeypatch):
    from django.db import DataError

    def refused(*, team, data):
        raise DataError("value too long for type character varying(64)\nDETAIL: the rest")

    monkeypatch.setattr(imports, "_import_lesson", refused)
    stdout, stderr = StringIO(), StringIO()
    with pytest.raises(CommandError):
        call_command("import_lessons", str(jsonl(tmp_path, [{"title": "x"}])), team="acme", create_team=True,
                     stdout=stdout, stderr=stderr)
    assert ":1: a value the database cannot store (value too long for type character varying(64))" in stderr.getvalue()
