"""lessons/output_files.py, the one whole-or-nothing writer of the exports and the measuring
commands, with its two switches: `private` (an export holds a team's memories: mode 0600) and
`option` (the measuring commands name it in every error; an export's message names the file)."""

import os
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from lessons.evaluation.output_files import write_json_whole
from lessons.output_files import written_whole
from tests.factories import LessonFactory, TeamFactory


@pytest.fixture
def umask_022():
    umask = os.umask(0o022)
    yield
    os.umask(umask)


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@pytest.mark.django_db
def test_an_export_is_its_owners_alone_even_over_a_file_others_could_read(tmp_path, umask_022):
    LessonFactory(team=TeamFactory(slug="acme"))
    fresh, replaced = tmp_path / "fresh.jsonl", tmp_path / "replaced.jsonl"
    replaced.write_text("an older backup\n")
    os.chmod(replaced, 0o644)
    call_command("export_lessons", str(fresh), team="acme", stdout=StringIO())
    call_command("export_lessons", str(replaced), team="acme", force=True, stdout=StringIO())
    assert (oct(_mode(fresh)), oct(_mode(replaced))) == (oct(0o600), oct(0o600))


def test_figures_keep_the_mode_of_the_file_they_replace(tmp_path, umask_022):
    figures = tmp_path / "figures.json"
    figures.write_text("{}\n")
    os.chmod(figures, 0o640)
    write_json_whole(figures, {"ndcg@10": 0.5}, stdout=StringIO())
    assert oct(_mode(figures)) == oct(0o640) and '"ndcg@10": 0.5' in figures.read_text()


@pytest.mark.django_db
def test_a_full_device_is_named_by_the_option_or_by_the_file_alone():
    LessonFactory(team=TeamFactory(slug="acme"))
    with pytest.raises(CommandError) as export_refused:
        call_command("export_lessons", "/dev/full", team="acme", stdout=StringIO())
    with pytest.raises(CommandError) as figures_refused:
        write_json_whole(Path("/dev/full"), {}, stdout=StringIO())
    assert str(export_refused.value) == "cannot write /dev/full: No space left on device"
    assert str(figures_refused.value) == "--json: cannot write /dev/full: No space left on device"
    assert Path("/dev/full").is_char_device()  # written into, never renamed over


@pytest.mark.parametrize("option, message", [(None, "cannot write {path}: Invalid cross-device link"),
                                             ("--hits", "--hits: cannot write {path}: Invalid cross-device link")])
def test_a_rename_that_fails_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch, option, message):
    path = tmp_path / "out.jsonl"
    path.write_text("the last good run\n")

    def refuse(*args):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(CommandError) as refused, written_whole(path, option=option, private=option is None) as out:
        out.write("a new line\n")
    assert str(refused.value) == message.format(path=path)
    assert path.read_text() == "the last good run\n" and [entry.name for entry in tmp_path.iterdir()] == ["out.jsonl"]
