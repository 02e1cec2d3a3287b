"""Graded lesson sets (lessons/evaluation/graded.py): reading and checking `queries.json`, scoring
each kind of check through the real engine and model, the command's tables and JSON, and the
ranking on lessons-dev, a set written independently of this project's demo data."""

import json
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from lessons.evaluation.beir import DatasetError
from lessons.evaluation.graded import evaluate_graded, graded_set_load, read_graded_set
from lessons.evaluation.metrics import ndcg_at_k
from lessons.models import Lesson, Team
from lessons.search import SearchRequest, search

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TINY = FIXTURES / "graded_tiny"
LESSONS_DEV = FIXTURES / "lessons_dev"  # a copy of shared/bench/lessons-dev (CC0)
MODES = ["hybrid", "semantic", "text"]


def run(*args) -> str:
    out = StringIO()
    call_command("eval_retrieval", *[str(arg) for arg in args], stdout=out, stderr=StringIO(), verbosity=0)
    return out.getvalue()


def test_reads_every_kind_of_check():
    graded_set = read_graded_set(TINY)
    assert graded_set.name == "graded_tiny"
    assert [(q.query, q.relevant, q.need_in_top5) for q in graded_set.graded][0] == (
        "hash passwords with argon2id", ("g3",), 1)
    assert [c.query for c in graded_set.exact] == ["kubernetes", "nodejs"]
    assert [(c.feature, c.top) for c in graded_set.feature] == [("Authentication", 2)]
    assert [c.forbidden for c in graded_set.never] == [("g6",), ("g8",)]


def _broken(tmp_path: Path, change) -> Path:
    directory = tmp_path / "broken"
    shutil.copytree(TINY, directory)
    spec = json.loads((directory / "queries.json").read_text())
    change(spec)
    (directory / "queries.json").write_text(json.dumps(spec))
    return directory


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda s: s["graded"][0].update(need_in_top5=2), r"graded\[0\]: need_in_top5 must be 1..1"),
        (lambda s: s["graded"][1].update(need_in_top5=True), r"graded\[1\]: `need_in_top5` must be a whole number"),
        (lambda s: s["graded"][1].pop("need_in_top5"), r"graded\[1\]: `need_in_top5` is missing"),
        # a blank query was loaded and scored 0 in every mode
        (lambda s: s["graded"][1].update(query="  "), r"graded\[1\]: `query` is blank"),
        (lambda s: s["graded"][1].update(query="\u200b"), r"graded\[1\]: `query` is blank"),
        # the search refused these with a traceback, after the whole set was loaded
        (lambda s: s["graded"][1].update(query="x" * 2001), r"graded\[1\]: `query` is 2001 characters long"),
        (lambda s: s["never"][0].update(query="a\u0000b"), r"never\[0\]: `query` cannot contain NUL"),
        (lambda s: s["graded"][0].update(relevant="g3"), r"graded\[0\].relevant: expected a non-empty list"),
        (lambda s: s["graded"][2].pop("query"), r"graded\[2\]: `query` is missing"),
        (lambda s: s["graded"][2].update(query=5), r"graded\[2\]: `query` must be a text"),
        (lambda s: s["graded"][2].update(relevant=["g99"]), r"graded\[2\].relevant: not an external_id .*: g99"),
        (lambda s: s["graded"].append(dict(s["graded"][0])), r"graded\[3\]: query 'hash passwords with argon2id' "
                                                            r"is already graded\[0\]"),
        (lambda s: s["exact"][0].update(all_of=[]), r"exact\[0\].all_of: expected a non-empty list"),
        (lambda s: s["exact"].__setitem__(1, "nodejs"), r"exact\[1\]: expected an object"),
        (lambda s: s["feature"][0].update(top=0), r"feature\[0\]: top must be 1..2"),
        (lambda s: s["never"][0].update(forbidden=["x1"]), r"never\[0\].forbidden: not an external_id .*: x1"),
        (lambda s: s.update(never={"query": "q"}), r"`never` must be a list"),
        (lambda s: s.update(graded=[]), "no graded queries"),
    ],
)
def test_a_broken_queries_file_names_the_entry_at_fault(tmp_path, change, message):
    with pytest.raises(DatasetError, match=message):
        read_graded_set(_broken(tmp_path, change))


def test_a_key_the_reader_does_not_know_is_said_not_refused(tmp_path):
    # an annotation beside an entry is fine; a misspelt key passed unseen
    graded_set = read_graded_set(_broken(tmp_path, lambda s: s["never"][0].update(forbiden=["x1"], why="seed")))
    assert graded_set.notes == (
        f"{tmp_path / 'broken' / 'queries.json'}: never[0]: key(s) 'forbiden', 'why' not read "
        "(an entry is read by query, forbidden)",)
    assert read_graded_set(TINY).notes == ()


def test_unreadable_queries_file(tmp_path):
    directory = tmp_path / "broken"
    shutil.copytree(TINY, directory)
    (directory / "queries.json").write_text("{not json")
    with pytest.raises(DatasetError, match="queries.json: cannot read it"):
        read_graded_set(directory)


@pytest.mark.django_db
def test_each_check_scores_what_the_engine_returned():
    graded_set = read_graded_set(TINY)
    team, summary = graded_set_load(graded_set=graded_set)
    assert "8 created" in summary and "8 embedded" in summary
    results = evaluate_graded(graded_set=graded_set, team=team, modes=MODES)
    for mode in MODES:
        scores = results[mode]
        # The title's own words: first in every mode.
        assert scores.ndcg_at_5["hash passwords with argon2id"] == pytest.approx(1.0), mode
        assert scores.met["hash passwords with argon2id"], mode
        # g8 first; g5 (a Kubernetes deployment) in the top 5 or not: nDCG@5 between 1 / ideal and 1.
        assert 0.613 <= scores.ndcg_at_5["readiness probe for kubernetes deployments"] <= 1.0, mode
        assert scores.met["readiness probe for kubernetes deployments"], mode
        # A rejected lesson is never returned: a miss that scores 0.
        assert scores.ndcg_at_5["turn off tls verification"] == 0.0 and not scores.met["turn off tls verification"]
        assert scores.never == {"let the coding agent force-push to main": True, "readiness probe": False}, mode
        assert scores.exact["nodejs"] is False, mode  # all_of names a lesson without the stack
        assert len(scores.latencies_ms) == 3 + 2 + 2  # graded, exact, never: one search each
    for mode in ("hybrid", "text"):  # the exact-term tier is not semantic mode's
        assert results[mode].exact["kubernetes"] is True, mode
    assert results["hybrid"].feature == {"Authentication": True}


@pytest.mark.django_db
def test_the_command_prints_both_tables_and_writes_json(tmp_path):
    path = tmp_path / "graded.json"
    output = run(TINY, "--json", path)
    assert "graded_tiny: 3 graded queries, 2 exact, 1 feature, 2 never checks" in output
    assert "| mode     | nDCG@5 | need_in_top5 met | exact | feature | never | p50 ms |" in output
    assert "| turn off tls verification | 0.000* | 0.000* | 0.000* | +0.000 |" in output
    assert "hybrid above text on" in output and "hybrid above semantic on" in output
    payload = json.loads(path.read_text())
    assert payload["dataset"] == "graded_tiny" and list(payload["results"]) == MODES
    hybrid = payload["results"]["hybrid"]
    counts = ("graded", "need_in_top5_met", "exact_passed", "feature_passed", "never_passed")
    assert [hybrid[name] for name in counts] == [3, 2, 1, 1, 1]
    assert set(hybrid["per_query_ndcg@5"]) == {q.query for q in read_graded_set(TINY).graded}
    assert Lesson.objects.filter(team__slug="eval-graded_tiny").count() == 8
    assert "8 unchanged" in run(TINY, "--modes", "text")  # a second run imports nothing again


@pytest.mark.django_db
def test_the_graded_queries_hits_are_written_and_rescore_to_the_reported_figures(tmp_path):
    results, hits = tmp_path / "graded.json", tmp_path / "hits.jsonl"
    output = run(TINY, "--json", results, "--hits", hits)
    assert f"wrote {hits} (9 searches with their hits)" in output
    lines = [json.loads(line) for line in hits.read_text().splitlines()]
    graded = read_graded_set(TINY).graded
    assert [(line["mode"], line["query"]) for line in lines] == [(mode, q.query) for mode in MODES for q in graded]
    reported = json.loads(results.read_text())["results"]
    for line in lines:
        check = next(q for q in graded if q.query == line["query"])
        assert line["judgments"] == {doc_id: 1 for doc_id in check.relevant}
        ranking = [hit["external_id"] for hit in line["hits"]]
        assert ndcg_at_k(ranking, line["judgments"], 5) == pytest.approx(
            reported[line["mode"]]["per_query_ndcg@5"][line["query"]], abs=1e-4)
        assert all(isinstance(hit["labels"]["tags"], list) for hit in line["hits"])


@pytest.mark.django_db
def test_a_broken_set_is_a_command_error_and_loads_nothing(tmp_path):
    with pytest.raises(CommandError, match=r"graded\[0\]: need_in_top5"):
        run(_broken(tmp_path, lambda s: s["graded"][0].update(need_in_top5=5)))
    assert not Team.objects.exists()


@pytest.mark.django_db
def test_lessons_dev_the_hybrid_holds_against_each_leg():
    """lessons-dev's 60 lessons and 12 graded queries were written independently of the demo data.
    Measured with this code (README Quality): nDCG@5 hybrid 0.718, semantic 0.655, text 0.500;
    need_in_top5 met 9, 7, 5 of 12; the hybrid above text on 7 queries, under it on 1. A ranking
    change that lets the hybrid fall under one of its legs here fails this test."""
    graded_set = read_graded_set(LESSONS_DEV)
    team, _ = graded_set_load(graded_set=graded_set)
    results = evaluate_graded(graded_set=graded_set, team=team, modes=MODES)
    hybrid, semantic, text = (results[mode] for mode in MODES)
    assert hybrid.mean_ndcg >= max(semantic.mean_ndcg, text.mean_ndcg)
    assert hybrid.mean_ndcg > 0.70
    assert sum(hybrid.met.values()) >= max(sum(semantic.met.values()), sum(text.met.values()), 9)
    assert all(hybrid.exact.values()) and all(text.exact.values())  # `kubernetes`: exactly its lessons
    assert all(hybrid.feature.values())
    assert all(scores_never for mode in MODES for scores_never in results[mode].never.values())
    wins = sum(hybrid.ndcg_at_5[q.query] > text.ndcg_at_5[q.query] for q in graded_set.graded)
    losses = sum(hybrid.ndcg_at_5[q.query] < text.ndcg_at_5[q.query] for q in graded_set.graded)
    assert wins >= 7 and losses <= 1


@pytest.mark.django_db
def test_lessons_dev_label_feedback_brings_the_lessons_tagged_like_the_best_hits(settings):
    """Label feedback (scoring.label_feedback), with the real model: "flaky end to end tests" finds
    the lesson on turning off animations in the browser suite (its semantic part 0.25, tagged
    intermittent-failures like the best hit), and "events for one order processed out of sequence"
    the one on dropping stale updates (tagged idempotency like the second hit, on deduplicating
    events). Off, both miss their need_in_top5, and two fewer needs are met."""
    graded_set = read_graded_set(LESSONS_DEV)
    team, _ = graded_set_load(graded_set=graded_set)
    on = evaluate_graded(graded_set=graded_set, team=team, modes=["hybrid"])["hybrid"]
    settings.SEARCH_LABEL_FEEDBACK = {"top": 3, "weight": 0.0}
    off = evaluate_graded(graded_set=graded_set, team=team, modes=["hybrid"])["hybrid"]
    lifted = ("flaky end to end tests", "events for one order processed out of sequence")
    assert all(on.met[query] and not off.met[query] for query in lifted)
    assert sum(on.met.values()) == sum(off.met.values()) + 2
    assert on.mean_ndcg > off.mean_ndcg + 0.03


@pytest.mark.django_db
def test_lessons_dev_labels_off_topic_hits_low_and_some_relevant_hits_high():
    """Relevance labels read each hit's own evidence (issue 10, part 3), checked on lessons-dev,
    not only on the demo data they were first calibrated with."""
    graded_set = read_graded_set(LESSONS_DEV)
    team, _ = graded_set_load(graded_set=graded_set)
    for query in ("how do I tune my guitar", "tax return deadline", "best sourdough starter", "train a puppy to sit"):
        response = search(request=SearchRequest(team=team, query=query, limit=10))
        assert response.results, query  # a full page of the least unrelated lessons...
        assert {hit.relevance for hit in response.results} == {"low"}, query  # ...none of them claimed
    labels = []
    for check in graded_set.graded:
        response = search(request=SearchRequest(team=team, query=check.query, limit=10))
        labels += [hit.relevance for hit in response.results if hit.external_id in check.relevant]
    assert labels.count("high") >= 5 and labels.count("high") + labels.count("medium") > len(labels) / 2


@pytest.mark.django_db
def test_drop_and_keyword_exactness_on_a_graded_set():
    run(TINY, "--modes", "text")
    first_ids = set(Lesson.objects.filter(team__slug="eval-graded_tiny").values_list("id", flat=True))
    output = run(TINY, "--drop", "--keyword-exactness")
    assert "dropped 1 team(s) of graded_tiny" in output and "8 created" in output
    assert not first_ids & set(Lesson.objects.filter(team__slug="eval-graded_tiny").values_list("id", flat=True))
    # Every graded, exact and never query, at limits 10 and 100: a small team's leg is the exact scan.
    assert output.count("identical 7/7 (100.0%)") == 4


def test_the_tables_star_legend_shows_only_when_a_star_does():
    from lessons.evaluation.graded import GradedQuery, GradedScores, GradedSet, graded_table

    graded_set = GradedSet(name="set", lessons_path=Path("lessons.jsonl"),
                           graded=(GradedQuery(query="q", relevant=("a",), need_in_top5=1),))

    def table(met):
        scores = GradedScores(ndcg_at_5={"q": 1.0 if met else 0.0}, met={"q": met}, latencies_ms=[1.0])
        return graded_table(graded_set=graded_set, results={"hybrid": scores, "text": scores})

    assert "| q | 1.000 | 1.000 | +0.000 |" in table(True) and "not met" not in table(True)
    assert "| q | 0.000* | 0.000* | +0.000 |" in table(False) and "(* need_in_top5 not met)" in table(False)
