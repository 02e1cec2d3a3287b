"""The files eval_retrieval, simulate_usage and bench_writes write (`--json`, `--hits`): never one
the run reads, written whole or not at all (a failing, stopped or disk-full run leaves the
previous file as it was, and says which file), and a SIGTERM ends the run with one line."""

import json
import os
import shutil
import signal
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from lessons.evaluation import runner, usage_simulation
from lessons.models import Lesson, SearchRecord, Team

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
PREVIOUS = '{"previous": "run"}\n'


def run(*args) -> str:
    out = StringIO()
    call_command(*[str(arg) for arg in args], stdout=out, stderr=StringIO(), verbosity=0)
    return out.getvalue()


@pytest.fixture
def beir(tmp_path) -> Path:
    return Path(shutil.copytree(FIXTURES / "beir_tiny", tmp_path / "tiny"))


@pytest.fixture
def graded(tmp_path) -> Path:
    return Path(shutil.copytree(FIXTURES / "graded_tiny", tmp_path / "g3"))


def _previous(path: Path) -> Path:
    path.write_text(PREVIOUS)
    return path


def _left_behind(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir() if path.name.endswith(".partial"))


# --- an output that is an input ----------------------------------------------------------------


def _link(tmp_path: Path, source: Path, *, hard: bool = False) -> Path:
    link = tmp_path / f"{'hard' if hard else 'soft'}-{source.name}"
    if hard:
        os.link(source, link)
    else:
        link.symlink_to(source)
    return link


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("command", "layout", "option", "output", "how"),
    [
        ("eval_retrieval", "beir", "--hits", "corpus.jsonl", "by name"),
        ("eval_retrieval", "beir", "--json", "queries.jsonl", "by name"),
        ("eval_retrieval", "beir", "--json", "qrels/test.tsv", "through a link"),
        ("eval_retrieval", "beir", "--hits", "qrels/train.tsv", "as a hard link"),  # another split's judgments
        ("eval_retrieval", "graded", "--json", "queries.json", "by name"),
        ("eval_retrieval", "graded", "--hits", "lessons.jsonl", "through a link"),
        ("simulate_usage", "beir", "--json", "qrels/train.tsv", "by name"),
        ("simulate_usage", "beir", "--json", "corpus.jsonl", "through a link"),
    ],
)
def test_an_output_that_is_one_of_the_datasets_files_is_refused_before_anything_loads(
    request, tmp_path, command, layout, option, output, how,
):
    dataset = request.getfixturevalue(layout)
    source = dataset / output
    before = source.read_bytes()
    path = source if how == "by name" else _link(tmp_path, source, hard=how == "as a hard link")
    modes = ["--modes", "text"] if command == "eval_retrieval" else []
    with pytest.raises(CommandError) as raised:
        run(command, dataset, *modes, option, path)
    assert str(raised.value) == f"{option}: cannot write {path}: it is the dataset's {source}, which this run reads"
    assert source.read_bytes() == before
    assert not Team.objects.exists()  # refused before the corpus loads


@pytest.mark.django_db
def test_an_output_beside_the_datasets_files_is_written(beir):
    output = run("eval_retrieval", beir, "--modes", "text", "--json", beir / "results.json")
    assert f"wrote {beir / 'results.json'}" in output
    assert json.loads((beir / "results.json").read_text())["dataset"] == "tiny"


# --- written whole or not at all ----------------------------------------------------------------


def _searches_fail_after(monkeypatch, module, count: int, failure) -> None:
    real_search = module.search
    calls = []

    def search(**kwargs):
        calls.append(1)
        if len(calls) > count:
            failure()
        return real_search(**kwargs)

    monkeypatch.setattr(module, "search", search)


@pytest.mark.django_db
def test_a_run_that_fails_half_way_leaves_the_previous_hits_and_figures_as_they_were(tmp_path, beir, monkeypatch):
    hits, figures = _previous(tmp_path / "hits.jsonl"), _previous(tmp_path / "figures.json")

    def database_gone():
        raise RuntimeError("the database went away")

    _searches_fail_after(monkeypatch, runner, 6, database_gone)  # the hits of 5 searches were written
    with pytest.raises(RuntimeError, match="the database went away"):
        run("eval_retrieval", beir, "--modes", "text,semantic", "--hits", hits, "--json", figures)
    assert hits.read_text() == PREVIOUS  # it was opened with "w" before the first search: emptied, or cut mid-line
    assert figures.read_text() == PREVIOUS
    assert _left_behind(tmp_path) == []


def _disk_full(*args):
    raise OSError(28, "No space left on device")


@pytest.mark.django_db
def test_a_full_disk_names_the_file_and_leaves_the_previous_one(tmp_path, beir, monkeypatch):
    hits = _previous(tmp_path / "hits.jsonl")
    monkeypatch.setattr(os, "fsync", _disk_full)  # the file system says it as the file is committed to disk
    with pytest.raises(CommandError) as raised:
        run("eval_retrieval", beir, "--modes", "text", "--hits", hits)
    assert str(raised.value) == f"--hits: cannot write {hits}: No space left on device"
    assert hits.read_text() == PREVIOUS
    assert _left_behind(tmp_path) == []


@pytest.mark.django_db
@pytest.mark.parametrize("option", ["--hits", "--json"])
def test_a_device_is_written_into_and_a_failing_write_to_it_names_it(beir, option):
    # /dev/full: every write fails as on a full disk; a device is written into, never renamed over
    with pytest.raises(CommandError) as raised:
        run("eval_retrieval", beir, "--modes", "text", option, "/dev/full")
    assert str(raised.value) == f"{option}: cannot write /dev/full: No space left on device"
    assert Path("/dev/full").is_char_device()


@pytest.mark.django_db
def test_hits_through_a_link_replace_the_file_it_names_and_the_link_stays(tmp_path, beir):
    target = _previous(tmp_path / "hits-1.jsonl")
    os.chmod(target, 0o640)
    latest = tmp_path / "latest.jsonl"
    latest.symlink_to(target)
    output = run("eval_retrieval", beir, "--modes", "text", "--hits", latest)
    assert f"wrote {latest} (4 searches with their hits)" in output
    assert latest.is_symlink() and len(target.read_text().splitlines()) == 4
    assert oct(target.stat().st_mode & 0o777) == oct(0o640)  # the replaced file's mode, not the temporary's 0600
    assert _left_behind(tmp_path) == []


@pytest.mark.django_db(transaction=True)
def test_bench_writes_on_a_full_disk_names_the_file_and_leaves_the_previous_figures(tmp_path, monkeypatch):
    figures = _previous(tmp_path / "figures.json")
    monkeypatch.setattr(os, "fsync", _disk_full)
    with pytest.raises(CommandError) as raised:
        call_command("bench_writes", writers=1, rows=2, json_path=str(figures), stdout=StringIO(), stderr=StringIO())
    assert str(raised.value) == f"--json: cannot write {figures}: No space left on device"
    assert figures.read_text() == PREVIOUS  # write_text emptied it first
    assert _left_behind(tmp_path) == []


# --- a stop (SIGTERM) ---------------------------------------------------------------------------


class _ReachedTheTest(Exception):
    """SIGTERM got past the command: without the command's handler it ended the process (143)."""


@pytest.fixture
def sigterm_guard():
    def reached(signum, frame):
        raise _ReachedTheTest

    previous = signal.signal(signal.SIGTERM, reached)
    try:
        yield reached
    finally:
        signal.signal(signal.SIGTERM, previous)


def _stop():
    os.kill(os.getpid(), signal.SIGTERM)  # a process manager's stop
    time.sleep(5)  # the handler interrupts the sleep


@pytest.mark.django_db
def test_sigterm_ends_eval_retrieval_with_one_line_and_leaves_the_previous_hits(
    tmp_path, beir, monkeypatch, sigterm_guard,
):
    hits, figures = _previous(tmp_path / "hits.jsonl"), tmp_path / "figures.json"
    _searches_fail_after(monkeypatch, runner, 3, _stop)
    with pytest.raises(CommandError) as raised:
        run("eval_retrieval", beir, "--modes", "text", "--hits", hits, "--json", figures)
    assert raised.value.returncode == 130
    assert str(raised.value) == (
        f"interrupted (Ctrl-C or SIGTERM): --hits {hits} left as it was; --json {figures} not written; "
        "what was loaded and embedded before it is kept, and a re-run goes on from it"
    )
    assert hits.read_text() == PREVIOUS and not figures.exists()
    assert _left_behind(tmp_path) == []
    assert Lesson.objects.filter(team__slug="eval-tiny").count() == 8  # the corpus stays loaded
    assert signal.getsignal(signal.SIGTERM) is sigterm_guard  # the command's handler was its own


@pytest.mark.django_db
def test_sigterm_ends_simulate_usage_with_one_line_and_leaves_the_previous_figures(
    tmp_path, beir, monkeypatch, sigterm_guard,
):
    figures = _previous(tmp_path / "simulation.json")
    _searches_fail_after(monkeypatch, usage_simulation, 1, _stop)  # in the replay
    with pytest.raises(CommandError) as raised:
        run("simulate_usage", beir, "--json", figures)
    assert raised.value.returncode == 130
    assert str(raised.value) == (
        f"interrupted (Ctrl-C or SIGTERM): --json {figures} left as it was; the documents loaded before it are kept"
    )
    assert figures.read_text() == PREVIOUS
    assert not SearchRecord.objects.exists()  # the replay's searches are reset, as after a finished run
    assert signal.getsignal(signal.SIGTERM) is sigterm_guard


# --- a byte-order mark -------------------------------------------------------------------------


def _with_byte_order_mark(path: Path) -> None:
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())


@pytest.mark.django_db
def test_a_beir_set_whose_files_start_with_a_byte_order_mark_is_measured(beir):
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        _with_byte_order_mark(beir / name)
    output = run("eval_retrieval", beir, "--modes", "text")
    assert "tiny / test: 4 queries" in output
    assert Lesson.objects.filter(team__slug="eval-tiny").count() == 8


@pytest.mark.django_db
def test_a_graded_set_whose_files_start_with_a_byte_order_mark_is_measured(graded):
    for name in ("queries.json", "lessons.jsonl"):
        _with_byte_order_mark(graded / name)
    output = run("eval_retrieval", graded, "--modes", "text")
    assert "nDCG@5" in output
