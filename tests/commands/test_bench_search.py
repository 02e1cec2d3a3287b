"""bench_search on a small team: the sampled build (real model, real triggers), the JSON figures
at two sizes, and the refusals. The real runs (10k / 100k / 300k) are in docs/scaling.md."""

import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from lessons.management.commands.bench_search import NEARBY_PREFIX, TOPICS
from lessons.models import Lesson, Team
from lessons.search import SearchRequest, search

TEAM = "bench-search-test"


@pytest.fixture
def bench_team(transactional_db):
    yield TEAM
    # Through the ORM, so the keyword triggers remove the postings too (a flush would not).
    Team.objects.filter(slug=TEAM).delete()


def test_a_sampled_build_measured_at_two_sizes(bench_team, tmp_path):
    out = StringIO()
    figures_path = tmp_path / "figures.json"
    call_command(
        "bench_search", team=TEAM, lessons="300,600", embed_sample=50, queries=5,
        json_path=str(figures_path), stdout=out, stderr=StringIO(),
    )

    figures = json.loads(figures_path.read_text())
    assert [size["lessons"] for size in figures] == [300, 600]
    for size in figures:
        assert set(size) == {"lessons", "modes"}
        assert set(size["modes"]) == {"hybrid", "semantic", "text"}
        for timing in size["modes"].values():
            assert set(timing) == {"p50_ms", "p95_ms"}
            assert 0 < timing["p50_ms"] <= timing["p95_ms"]
    report = out.getvalue()
    assert "300 lessons: 50 embedded by the model, 250 given a nearby vector" in report
    assert "600 lessons: 50 embedded by the model, 550 given a nearby vector" in report
    assert "300 rows given a nearby vector" in report and "summary" in report

    lessons = Lesson.objects.filter(team__slug=TEAM)
    assert lessons.count() == 600
    assert not lessons.filter(embedding__isnull=True).exists()
    sampled = lessons.exclude(embedding_model__startswith=NEARBY_PREFIX)
    nearby = lessons.filter(embedding_model__startswith=NEARBY_PREFIX)
    assert sampled.count() == 50 and nearby.count() == 550
    samples: dict[str, list[np.ndarray]] = {}
    for tags, vector in sampled.values_list("tags", "embedding"):
        samples.setdefault(tags[0], []).append(np.asarray(vector))
    assert set(samples) == {tag for _, tag, _ in TOPICS}  # every topic can lend a vector
    for tags, vector in nearby.values_list("tags", "embedding"):
        vector = np.asarray(vector)
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-3)
        # The lender is one of the topic's samples: the closest of them is at least that close.
        assert max(float(vector @ lender) / np.linalg.norm(lender) for lender in samples[tags[0]]) > 0.8

    # The rows went through the real table: the keyword index finds rows that were never embedded.
    team = Team.objects.get(slug=TEAM)
    hits = search(request=SearchRequest(team=team, query="webhook retries", mode="text", limit=10)).results
    nearby_ids = set(nearby.values_list("pk", flat=True))
    assert hits and any(hit.id in nearby_ids for hit in hits)


def test_one_size_writes_one_object(bench_team, tmp_path):
    figures_path = tmp_path / "figures.json"
    call_command(
        "bench_search", team=TEAM, lessons=40, embed_sample=20, queries=2, modes="text",
        json_path=str(figures_path), stdout=StringIO(), stderr=StringIO(),
    )
    figures = json.loads(figures_path.read_text())
    assert figures["lessons"] == 40 and set(figures["modes"]) == {"text"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"lessons": "abc"}, "whole numbers"),
        ({"lessons": 0}, "at least 1"),
        ({"lessons": "-5"}, "at least 1"),
        ({"lessons": "1000,100"}, "ascending"),
        ({"lessons": "100,1000", "embed_sample": 200}, "larger than the smallest size"),
        ({"lessons": 100, "embed_sample": 5}, "one lesson per topic"),
        ({"lessons": 100, "embed_sample": 50, "noise": 0}, "--noise"),
        ({"lessons": 100, "noise": 5}, "--noise must be between 0 and 1"),  # without --embed-sample too
        ({"queries": 0}, "--queries"),
        ({"modes": "hybrid,bogus"}, "--modes: unknown mode\\(s\\) bogus"),  # after the build, with a traceback
        ({"json_path": "/nonexistent-bench-dir/figures.json"}, "does not exist"),
    ],
)
def test_bad_input_is_refused_before_anything_is_built(db, options, message):
    with pytest.raises(CommandError, match=message):
        call_command("bench_search", team=TEAM, stdout=StringIO(), **options)
    assert not Team.objects.filter(slug=TEAM).exists()


def test_a_directory_is_no_json_path(db, tmp_path):
    with pytest.raises(CommandError, match="it is a folder"):
        call_command("bench_search", team=TEAM, json_path=str(tmp_path), stdout=StringIO())
