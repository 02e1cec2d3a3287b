import shutil
from pathlib import Path

import pytest

from lessons.evaluation.beir import DatasetError, read_dataset, read_qrels

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TINY = FIXTURES / "beir_tiny"


def test_reads_corpus_judged_queries_and_crlf_qrels():
    dataset = read_dataset(TINY, split="test")
    assert dataset.name == "beir_tiny"
    assert len(dataset.documents) == 8
    assert dataset.documents[0].id == "d1"
    assert dataset.documents[0].title == "Vitamin D supplementation and bone fractures"
    # Only queries judged in the test split, in file order; q5-q7 are train or unjudged.
    assert [query.id for query in dataset.queries] == ["q1", "q2", "q3", "q4"]
    # The header line is skipped and no "\r" sticks to the ids or scores.
    assert dataset.qrels == {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 1}, "q4": {"d7": 1}}


def test_train_split_keeps_graded_and_zero_scores():
    dataset = read_dataset(TINY, split="train")
    assert [query.id for query in dataset.queries] == ["q5", "q6"]
    assert dataset.qrels == {"q5": {"d5": 2}, "q6": {"d8": 1, "d2": 0}}


def test_metadata_is_kept():
    dataset = read_dataset(FIXTURES / "beir_scoped", split="test")
    assert dataset.documents[0].metadata == {"user": "alice"}
    assert dataset.documents[0].title == ""
    assert dataset.queries[0].metadata == {"user": "alice"}


def test_missing_directory(tmp_path):
    with pytest.raises(DatasetError, match="no such directory"):
        read_dataset(tmp_path / "nope")


def test_missing_corpus(tmp_path):
    shutil.copytree(TINY, tmp_path / "ds")
    (tmp_path / "ds" / "corpus.jsonl").unlink()
    with pytest.raises(DatasetError, match="corpus.jsonl: missing"):
        read_dataset(tmp_path / "ds")


def test_unknown_split_names_the_known_ones():
    with pytest.raises(DatasetError, match=r"split 'dev'.*splits with qrels: test, train"):
        read_dataset(TINY, split="dev")


def test_broken_corpus_line_is_named(tmp_path):
    shutil.copytree(TINY, tmp_path / "ds")
    with (tmp_path / "ds" / "corpus.jsonl").open("a") as corpus:
        corpus.write('{"_id": "d9", "title": "x", \n')
    with pytest.raises(DatasetError, match=r"corpus.jsonl:9: not JSON"):
        read_dataset(tmp_path / "ds")


def test_bad_score_is_named(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text("query-id\tcorpus-id\tscore\r\nq1\td1\thigh\r\n")
    with pytest.raises(DatasetError, match=r"test.tsv:2: score"):
        read_qrels(path)


def test_qrels_without_header_and_lf_endings(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text("q1\td1\t1\nq1\td2\t2\n")
    assert read_qrels(path) == {"q1": {"d1": 1, "d2": 2}}


def test_judged_query_missing_from_queries(tmp_path):
    shutil.copytree(TINY, tmp_path / "ds")
    with (tmp_path / "ds" / "qrels" / "test.tsv").open("a", newline="") as qrels:
        qrels.write("q99\td1\t1\r\n")
    with pytest.raises(DatasetError, match="q99"):
        read_dataset(tmp_path / "ds")


def test_judged_document_missing_from_the_corpus(tmp_path):
    """It could never be found, so it would lower every score silently."""
    shutil.copytree(TINY, tmp_path / "ds")
    first_query = read_dataset(tmp_path / "ds").queries[0].id
    with (tmp_path / "ds" / "qrels" / "test.tsv").open("a", newline="") as qrels:
        qrels.write(f"{first_query}\td-nowhere\t1\r\n")
    with pytest.raises(DatasetError, match="judged documents not in corpus.jsonl: d-nowhere"):
        read_dataset(tmp_path / "ds")
