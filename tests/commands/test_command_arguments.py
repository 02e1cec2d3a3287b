"""Arguments every command refuses alike, and input meant for another command.

- An argument whose bytes are not UTF-8 is refused by manage.py before any command parses it:
  create_team said "'caf\\udce9' is not a usable slug", import_lessons "no such file" (or imported
  the file and named it with the surrogate in every line's error), where the others said this.
- `search ""` listed the ten most recent rows at score 0, labelled "low"; the API refuses a blank query.
- A memories export given to import_lessons (or the reverse) was 116 lines of "unknown field(s)"
  that never named the command that takes the file."""

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from lessons.models import Lesson, Memory, SearchRecord, Team
from tests.reliability.throwaway import ROOT, free_port, project_env

COMMANDS_DIR = Path(ROOT) / "lessons" / "management" / "commands"
COMMANDS = sorted(path.stem for path in COMMANDS_DIR.glob("*.py") if not path.stem.startswith("_"))
DEMO_DIR = Path(ROOT) / "lessons" / "demo_data"
NOT_UTF8 = "caf\udce9"  # how Python holds the bytes b"caf\xe9" of a command line


def manage_py(*args: str) -> subprocess.CompletedProcess:
    """`python manage.py ARGS` as a shell runs it (a str with surrogates goes out as its bytes),
    aimed at a server that is not there: a command that got past the check fails differently."""
    env = project_env(f"postgres://nobody:secret@127.0.0.1:{free_port()}/memory_store")
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)


def refused_as_not_utf8(result: subprocess.CompletedProcess, command: str, shown: str) -> bool:
    return (result.returncode == 1 and result.stdout == ""
            and result.stderr == f"{command}: an argument ('{shown}') is not UTF-8 text; give it in UTF-8 (the "
                                 "terminal's or the shell's encoding, or a $'\\x..' escape, sent other bytes).\n")


def test_the_project_has_the_commands_this_file_checks():
    assert {"create_team", "import_lessons", "import_memories", "search", "export_lessons"} <= set(COMMANDS)
    assert len(COMMANDS) >= 20


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_refuses_an_argument_that_is_not_utf8_alike(command):
    result = manage_py(command, NOT_UTF8)
    assert refused_as_not_utf8(result, command, "caf\\xe9"), result.stderr


@pytest.mark.parametrize("args", [
    ("create_team", "acme", "--name", NOT_UTF8),
    ("import_lessons", "/tmp/" + NOT_UTF8, "--team", "demo"),
    ("import_memories", "-", f"--team={NOT_UTF8}"),
    ("search", "retries", "--team", "demo", "--category", NOT_UTF8),
])
def test_an_option_value_or_a_path_is_refused_the_same(args):
    shown = next(arg for arg in args if "\udce9" in arg).replace("\udce9", "\\xe9")
    assert refused_as_not_utf8(manage_py(*args), args[0], shown)


def test_an_existing_file_with_such_a_name_is_not_imported_under_a_surrogate(tmp_path):
    """Before, the import read it, and every line's error named `.../b\\udce9.jsonl:1`."""
    path = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"b\xe9.jsonl"))
    Path(path).write_text('{"title": "x", "confidence": 7}\n')
    result = manage_py("import_lessons", path, "--team", "demo", "--create-team")
    assert refused_as_not_utf8(result, "import_lessons", path.replace("\udce9", "\\xe9"))
    assert "\\udce9" not in result.stderr


def test_a_command_name_that_is_not_utf8_is_refused_by_manage_py():
    assert refused_as_not_utf8(manage_py(NOT_UTF8), "manage.py", "caf\\xe9")


# --- search: a blank query ---------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("query", ["", "   ", "\t\n", "\u200b", " \u2060\ufeff "])
def test_a_blank_search_query_is_a_command_error_naming_the_query(team, query):
    Lesson.objects.create(team=team, title="Retries need a backoff")
    out = StringIO()
    with pytest.raises(CommandError, match=r"^QUERY: .* is blank; give the words to look for$"):
        call_command("search", query, "--team", team.slug, "--json", stdout=out)
    assert out.getvalue() == ""  # no rows, no "low" at score 0.000
    assert not SearchRecord.objects.exists()


@pytest.mark.django_db
def test_a_search_without_a_query_is_refused_and_the_help_no_longer_offers_it(team, capsys):
    with pytest.raises(CommandError, match="the following arguments are required: query"):
        call_command("search", "--team", team.slug)
    with pytest.raises(SystemExit):
        call_command("search", "--help")
    help_text = capsys.readouterr().out
    assert "most recent" not in help_text and "empty:" not in help_text
    assert "not blank" in help_text


@pytest.mark.django_db
def test_a_long_blank_query_is_shown_cut_short(team):
    with pytest.raises(CommandError) as raised:
        call_command("search", " " * 500, "--team", team.slug)
    assert len(str(raised.value)) < 100


# --- imports: the other kind's file ------------------------------------------------------------


def run_import(command: str, path, **options) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(command, str(path), stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_a_memories_export_given_to_import_lessons_names_import_memories_and_writes_nothing():
    path = DEMO_DIR / "memories.jsonl"
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError) as raised:
        call_command("import_lessons", str(path), team="zz", create_team=True, stdout=out, stderr=err)
    assert str(raised.value) == (f"{path}:1: this looks like a memories export: use import_memories (the line has a "
                                 "memory's fields and no title); nothing was imported")
    assert "unknown field" not in err.getvalue() and out.getvalue() == ""
    assert not Team.objects.filter(slug="zz").exists()  # the team --create-team made is not kept
    assert not Lesson.objects.exists()


@pytest.mark.django_db
def test_a_lessons_export_given_to_import_memories_names_import_lessons(team):
    path = DEMO_DIR / "lessons.jsonl"
    with pytest.raises(CommandError, match=r":1: this looks like a lessons export: use import_lessons \(the line has "
                                           r"a lesson's fields and no content\); nothing was imported"):
        run_import("import_memories", path, team=team.slug)
    assert not Memory.objects.exists()


@pytest.mark.django_db
def test_a_real_export_of_the_other_kind_is_recognised_from_standard_input(tmp_path, team):
    """What export_memories writes (uid, dates, history) after blank lines, read from `-`."""
    rows = [{"external_id": "m-1", "content": "Lena moved to Oslo", "categories": ["event"],
             "history": [{"content": "Lena moves to Oslo"}]}, {"external_id": "m-2", "content": "Coffee at 9"}]
    source = tmp_path / "memories.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    run_import("import_memories", source, team=team.slug)
    exported = tmp_path / "export.jsonl"
    call_command("export_memories", str(exported), team=team.slug, stdout=StringIO())
    assert set(json.loads(exported.read_text().splitlines()[0])) > {"uid", "content", "history"}
    stdin = StringIO("\n  \n" + exported.read_text())
    with pytest.raises(CommandError, match=r"^<stdin>:3: this looks like a memories export: use import_memories"):
        call_command("import_lessons", "-", team=team.slug, stdin=stdin, stdout=StringIO(), stderr=StringIO())
    assert not Lesson.objects.exists()


@pytest.mark.django_db
def test_later_lines_of_the_other_kind_keep_their_errors_and_are_pointed_at_once(tmp_path, team):
    memory = {"external_id": "m-1", "content": "Lena moved to Oslo", "people": ["Lena"]}
    lines = [{"external_id": "l-1", "title": "Retries need a backoff"}, memory, {**memory, "external_id": "m-2"},
             {"external_id": "l-2", "title": "Pin versions", "content": "a typo for description"}]
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match=r"3 line\(s\) could not be imported; the others were\."):
        call_command("import_lessons", str(path), team=team.slug, stdout=out, stderr=err)
    said = err.getvalue().splitlines()
    assert said[:3] == [f"{path}:2: unknown field(s): content, people", f"{path}:3: unknown field(s): content, people",
                        f"{path}:4: unknown field(s): content"]
    # lines 2 and 3 are a memory's fields only; line 4 is a lesson with a stray field: not counted
    assert said[3:] == [f"{path}: 2 line(s) look like a memories export: use import_memories for them"]
    assert "1 created" in out.getvalue()
    assert list(Lesson.objects.values_list("external_id", flat=True)) == ["l-1"]


@pytest.mark.django_db
def test_a_first_line_with_a_field_of_both_kinds_is_imported_line_by_line_as_before(tmp_path, team):
    path = tmp_path / "lessons.jsonl"
    path.write_text(json.dumps({"title": "Pin versions", "content": "a typo"}) + "\n"
                    + json.dumps({"title": "Retries need a backoff"}) + "\n")
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="1 line"):
        call_command("import_lessons", str(path), team=team.slug, stdout=out, stderr=err)
    assert err.getvalue() == f"{path}:1: unknown field(s): content\n"
    assert "1 created" in out.getvalue()


@pytest.mark.django_db
@pytest.mark.parametrize("as_bytes", [True, False])
def test_a_byte_order_mark_does_not_hide_the_other_kind(tmp_path, team, as_bytes):
    line = "\ufeff" + json.dumps({"content": "Coffee at 9", "importance": 3}) + "\n"
    path = tmp_path / "memories.jsonl"
    path.write_text(line, encoding="utf-8")
    stdin = path.open("rb") if as_bytes else StringIO(line)
    with stdin, pytest.raises(CommandError, match=r"^<stdin>:1: this looks like a memories export"):
        call_command("import_lessons", "-", team=team.slug, stdin=stdin, stdout=StringIO(), stderr=StringIO())
