"""lessons/evaluation/output_files.py: outputs written whole or not at all, into a pipe rather than
over it; and the dataset readers past a byte-order mark, wherever the imports read past one."""

import os
import shutil
import threading
from pathlib import Path

import pytest
from django.core.management import CommandError

from lessons.evaluation.beir import read_dataset
from lessons.evaluation.graded import read_graded_set
from lessons.evaluation.output_files import written_whole

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
BOM = "\ufeff"


def test_an_error_inside_the_block_leaves_no_file_where_there_was_none(tmp_path):
    path = tmp_path / "hits.jsonl"
    with pytest.raises(ZeroDivisionError), written_whole(path, option="--hits") as out:
        out.write("a first line\n")
        1 / 0
    assert list(tmp_path.iterdir()) == []


def test_a_new_file_gets_the_mode_a_plain_write_gives_it(tmp_path):
    umask = os.umask(0o022)
    try:
        with written_whole(tmp_path / "figures.json", option="--json") as out:
            out.write("{}\n")
    finally:
        os.umask(umask)
    assert oct((tmp_path / "figures.json").stat().st_mode & 0o777) == oct(0o644)  # not mkstemp's 0600


def test_a_named_pipe_is_written_into_not_replaced(tmp_path):
    pipe = tmp_path / "hits.fifo"
    os.mkfifo(pipe)
    received = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_text()))
    reader.start()
    with written_whole(pipe, option="--hits") as out:
        out.write('{"a": 1}\n')
    reader.join(timeout=10)
    assert received == ['{"a": 1}\n']
    assert pipe.is_fifo()


def test_a_folder_it_cannot_create_the_temporary_in_names_the_option_and_the_file(tmp_path):
    path = tmp_path / "gone" / "figures.json"  # the folder went away after the options were checked
    with pytest.raises(CommandError, match=f"--json: cannot write {path}: No such file or directory"):
        with written_whole(path, option="--json"):
            pass


def _marked(path: Path, *, every_line: bool = False) -> None:
    text = path.read_text(encoding="utf-8")
    if every_line:  # files joined after an editor marked each
        text = "".join(BOM + line for line in text.splitlines(keepends=True))
    path.write_text(BOM + text.removeprefix(BOM), encoding="utf-8")


def test_a_beir_set_reads_the_same_with_byte_order_marks(tmp_path):
    copy = Path(shutil.copytree(FIXTURES / "beir_tiny", tmp_path / "beir_tiny"))
    _marked(copy / "corpus.jsonl", every_line=True)
    _marked(copy / "queries.jsonl")
    _marked(copy / "qrels" / "train.tsv")
    assert read_dataset(copy, split="train") == read_dataset(FIXTURES / "beir_tiny", split="train")


def test_a_graded_set_reads_the_same_with_byte_order_marks(tmp_path):
    copy = Path(shutil.copytree(FIXTURES / "graded_tiny", tmp_path / "graded_tiny"))
    _marked(copy / "queries.json")
    _marked(copy / "lessons.jsonl", every_line=True)  # as the import reads it: every id is known
    marked, plain = read_graded_set(copy), read_graded_set(FIXTURES / "graded_tiny")
    assert (marked.graded, marked.exact, marked.feature, marked.never) == (
        plain.graded, plain.exact, plain.feature, plain.never)
    assert (copy / "queries.json").read_bytes().startswith(BOM.encode())
