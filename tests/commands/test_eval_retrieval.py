"""`eval_retrieval` end to end on tiny BEIR-layout datasets (tests/fixtures/), with the real
model and the real search engine."""

import json
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from lessons.evaluation.beir import read_dataset
from lessons.evaluation.metrics import ndcg_at_k
from lessons.models import Lesson, Memory, Team

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TINY = FIXTURES / "beir_tiny"
SCOPED = FIXTURES / "beir_scoped"


def run(*args) -> str:
    out = StringIO()
    call_command("eval_retrieval", *[str(arg) for arg in args], stdout=out, stderr=StringIO(), verbosity=0)
    return out.getvalue()


@pytest.mark.django_db
def test_reports_every_mode_and_writes_json(tmp_path):
    path = tmp_path / "result.json"
    output = run(TINY, "--json", path)
    result = json.loads(path.read_text())
    assert result["dataset"] == "beir_tiny"
    assert result["split"] == "test"
    assert result["queries"] == 4
    assert list(result["results"]) == ["hybrid", "semantic", "text"]
    for mode, scores in result["results"].items():
        assert set(scores) == {"ndcg@10", "recall@100", "mrr@10", "p50_ms", "p95_ms"}
        assert 0 < scores["p50_ms"] <= scores["p95_ms"]
        assert mode in output
    # Each query paraphrases exactly one of eight distinct abstracts: by meaning, the right one
    # comes first every time, so every query has nDCG@10 = MRR@10 = recall@100 = 1.
    assert result["results"]["semantic"]["ndcg@10"] == pytest.approx(1.0)
    assert result["results"]["hybrid"]["mrr@10"] == pytest.approx(1.0)
    assert result["results"]["hybrid"]["recall@100"] == pytest.approx(1.0)
    # q3 ("Lack of sleep harms memory.") shares only "memory" with d3's title, which the keyword
    # leg finds; q2's "colon" is not "colorectal", but "aspirin", "risk" and "cancer" are there.
    assert result["results"]["text"]["recall@100"] > 0.5
    assert "| hybrid" in output and "nDCG@10" in output
    assert Lesson.objects.filter(team__slug="eval-beir_tiny").count() == 8


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.django_db
def test_hits_are_written_with_their_explanations_and_rescore_to_the_reported_figures(tmp_path):
    results, hits = tmp_path / "result.json", tmp_path / "hits.jsonl"
    output = run(TINY, "--json", results, "--hits", hits)
    assert f"wrote {hits} (12 searches with their hits)" in output
    lines = _lines(hits)
    assert [(line["mode"], line["query_id"]) for line in lines] == [
        (mode, query) for mode in ("hybrid", "semantic", "text") for query in ("q1", "q2", "q3", "q4")]
    qrels = read_dataset(TINY, split="test").qrels
    reported = json.loads(results.read_text())["results"]
    for mode in ("hybrid", "semantic", "text"):
        mine = [line for line in lines if line["mode"] == mode]
        for line in mine:
            assert line["dataset"] == "beir_tiny" and line["team"] == "eval-beir_tiny"
            assert line["judgments"] == qrels[line["query_id"]]
            assert [hit["rank"] for hit in line["hits"]] == list(range(1, len(line["hits"]) + 1))
        # the lines are the rankings the table was computed from: the same nDCG@10, query by query
        mean = sum(ndcg_at_k([hit["external_id"] for hit in line["hits"]], line["judgments"], 10)
                   for line in mine) / len(mine)
        assert mean == pytest.approx(reported[mode]["ndcg@10"], abs=1e-4)
    first = next(line for line in lines if line["mode"] == "hybrid")["hits"][0]
    assert set(first["labels"]) == {"tags", "tech_stacks", "category"}
    assert {"similarity", "feedback_similarity", "semantic", "keyword", "quality", "weights"} <= set(first["explanation"])
    text_hit = next(line for line in lines if line["mode"] == "text" and line["hits"])["hits"][0]
    assert "similarity" not in text_hit["explanation"] and text_hit["explanation"]["bm25"] > 0


@pytest.mark.django_db
def test_second_run_reuses_the_loaded_corpus():
    run(TINY, "--modes", "text")
    ids = set(Lesson.objects.filter(team__slug="eval-beir_tiny").values_list("id", flat=True))
    output = run(TINY, "--modes", "text")
    assert "0 created, 0 updated, 8 unchanged, 0 deleted, 0 embedded" in output
    assert set(Lesson.objects.filter(team__slug="eval-beir_tiny").values_list("id", flat=True)) == ids


@pytest.mark.django_db
def test_drop_starts_again():
    run(TINY, "--modes", "text")
    output = run(TINY, "--modes", "text", "--drop")
    assert "dropped 1 team(s)" in output
    assert "8 created" in output and "8 embedded" in output


@pytest.mark.django_db
def test_train_split_max_queries_and_memories(tmp_path):
    path = tmp_path / "r.json"
    run(TINY, "--split", "train", "--kind", "memories", "--modes", "semantic", "--max-queries", "1", "--json", path)
    result = json.loads(path.read_text())
    assert (result["split"], result["queries"], list(result["results"])) == ("train", 1, ["semantic"])
    assert result["results"]["semantic"]["ndcg@10"] == pytest.approx(1.0)  # q5 -> d5 (exercise, depression)
    assert Memory.objects.filter(team__slug="eval-beir_tiny").count() == 8


@pytest.mark.django_db
def test_rrf_fusion_runs():
    output = run(TINY, "--modes", "hybrid", "--fusion", "rrf")
    assert "fusion rrf" in output


@pytest.mark.django_db
def test_scope_key_searches_each_users_own_memories(tmp_path):
    path = tmp_path / "r.json"
    run(SCOPED, "--kind", "memories", "--scope-key", "user", "--modes", "semantic", "--json", path)
    # Alice and Bob both ask for their cat's name; each team holds only its own cat, so both
    # find the right memory first (without scopes one of them would get the other's cat).
    assert json.loads(path.read_text())["results"]["semantic"]["mrr@10"] == pytest.approx(1.0)
    assert set(Team.objects.values_list("slug", flat=True)) == {
        "eval-beir_scoped",
        "eval-beir_scoped-alice",
        "eval-beir_scoped-bob",
    }


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((FIXTURES / "nope",), "no such directory"),
        ((TINY, "--split", "dev"), "split 'dev'"),
        ((TINY, "--modes", "hybrid,fuzzy"), "--modes: unknown mode"),
        ((TINY, "--kind", "notes"), "--kind"),
        ((TINY, "--fusion", "max"), "--fusion"),
        ((TINY, "--max-queries", "0"), "--max-queries"),
        ((TINY, "--weights", "semantic=x"), "--weights"),
        # Refused before the corpus loads (the engine's refusal came after it, as a traceback).
        ((TINY, "--weights", "semantic=-5,keyword=0,quality=0"), "--weights: semantic: expected a number >= 0"),
        ((TINY, "--weights", "semantic=nan"), "--weights: semantic"),
        ((TINY, "--weights", "semantic=0,keyword=0,quality=0"), "at least one weight must be above 0"),
        # weights a mode has nothing to score by: the engine's refusal escaped as a traceback
        ((TINY, "--weights", "semantic=1,keyword=0,quality=0"), "--weights: text mode scores by keyword and quality"),
        ((TINY, "--weights", "keyword=1,semantic=0,quality=0", "--modes", "semantic"),
         "--weights: semantic mode scores by semantic and quality"),
        ((TINY, "--weights", "semantic=1,semantic=2"), "--weights: semantic is given twice"),
        # A graded set would ignore these: refused by name instead.
        ((FIXTURES / "lessons_dev", "--max-queries", "1", "--kind", "memories"), "--kind, --max-queries: not used"),
        ((FIXTURES / "lessons_dev", "--weights", "semantic=1"), "--weights: not used by a graded lesson set"),
        ((TINY, "--json", "/nonexistent-folder/r.json"), "--json: cannot write .* does not exist"),
        ((TINY, "--json", str(FIXTURES)), "--json: cannot write .* it is a folder"),
        ((TINY / "corpus.jsonl",), "corpus.jsonl: a file; name the dataset's folder"),
        ((TINY, "--split", " "), "--split: blank"),
        ((TINY, "--scope-key", "no_such_key"), "--scope-key: no document of beir_tiny has the metadata key"),
        ((TINY, "--keyword-exactness", "--modes", "hybrid"), "--modes: not used by --keyword-exactness"),
        ((TINY, "--hits", "/nonexistent-folder/h.jsonl"), "--hits: cannot write .* does not exist"),
        ((TINY, "--hits", "same.json", "--json", "same.json"), "--hits: the same file as --json"),
        ((TINY, "--hits", "h.jsonl", "--keyword-exactness"), "--hits: not used by --keyword-exactness"),
    ],
)
def test_bad_input_is_a_command_error(args, message):
    with pytest.raises(CommandError, match=message):
        run(*args)
    assert not Team.objects.exists()  # nothing loaded


@pytest.mark.django_db
def test_missing_queries_file(tmp_path):
    shutil.copytree(TINY, tmp_path / "ds")
    (tmp_path / "ds" / "queries.jsonl").unlink()
    with pytest.raises(CommandError, match="queries.jsonl: missing"):
        run(tmp_path / "ds")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"_id": "dn", "title": "nul \u0000 title", "text": "x"}, r"corpus.jsonl:\d+: title: contains a NUL character"),
        ({"_id": "de", "title": "", "text": ""}, r"corpus.jsonl:\d+: _id 'de': both title and text are empty"),
    ],
)
def test_a_document_that_cannot_be_stored_is_named_before_anything_loads(tmp_path, line, message):
    shutil.copytree(TINY, tmp_path / "ds")
    with open(tmp_path / "ds" / "corpus.jsonl", "a") as corpus:
        corpus.write(json.dumps(line) + "\n")
    for kind in ("lessons", "memories"):
        with pytest.raises(CommandError, match=message):
            run(tmp_path / "ds", "--kind", kind)
    assert not Team.objects.exists()  # no empty evaluation team left behind


@pytest.mark.django_db
@pytest.mark.parametrize("present", ["lessons.jsonl", "queries.json"])
def test_a_graded_set_missing_one_file_is_told_which(tmp_path, present):
    (tmp_path / "set").mkdir()
    shutil.copy(FIXTURES / "lessons_dev" / present, tmp_path / "set" / present)
    missing = "queries.json" if present == "lessons.jsonl" else "lessons.jsonl"
    with pytest.raises(CommandError, match=f"a graded set needs lessons.jsonl and queries.json; {missing} is missing"):
        run(tmp_path / "set")


@pytest.mark.django_db(transaction=True)
def test_ctrl_c_while_embedding_stops_the_run_instead_of_measuring_half_a_corpus(tmp_path):
    from django.test import override_settings

    shutil.copytree(TINY, tmp_path / "ds")
    with open(tmp_path / "ds" / "corpus.jsonl", "a") as corpus:
        corpus.write(json.dumps({"_id": "stop", "title": "INTERRUPT HERE", "text": "while this encodes"}) + "\n")
    backend = {"BACKEND": "tests.embedding_backends.InterruptedOnMarkerBackend", "BATCH_SIZE": 64}
    with override_settings(EMBEDDING_BACKEND=backend), pytest.raises(CommandError) as raised:
        run(tmp_path / "ds")
    assert raised.value.returncode == 130
    assert str(raised.value) == ("interrupted (Ctrl-C or SIGTERM): what was loaded and embedded before it is kept, "
                                 "and a re-run goes on from it")


@pytest.mark.django_db
def test_a_misspelt_section_of_a_graded_set_is_refused_not_skipped(tmp_path):
    shutil.copytree(FIXTURES / "lessons_dev", tmp_path / "set")
    spec = json.loads((tmp_path / "set" / "queries.json").read_text())
    spec["grades"] = spec.pop("graded")
    (tmp_path / "set" / "queries.json").write_text(json.dumps(spec))
    with pytest.raises(CommandError, match=r"unknown section\(s\) 'grades'; the sections are graded, exact"):
        run(tmp_path / "set")


@pytest.mark.django_db
def test_a_key_a_graded_entry_does_not_use_is_said_on_stderr(tmp_path):
    shutil.copytree(FIXTURES / "graded_tiny", tmp_path / "set")
    spec = json.loads((tmp_path / "set" / "queries.json").read_text())
    spec["graded"][0]["need_in_top_5"] = 1  # a misspelt key beside the real one
    (tmp_path / "set" / "queries.json").write_text(json.dumps(spec))
    out, err = StringIO(), StringIO()
    call_command("eval_retrieval", str(tmp_path / "set"), "--modes", "text", stdout=out, stderr=err)
    assert "note: " in err.getvalue() and "graded[0]: key(s) 'need_in_top_5' not read" in err.getvalue()
    assert "nDCG@5" in out.getvalue()  # the run goes on
