"""`lessons_relevant` asked for a phase alone (GET /lessons/relevant?phase=..., the MCP tool
`relevant_lessons`): the phase's lessons, not the recency fallback.

Before, the phase only narrowed the categories of a search without a query, so every phase whose
categories include `workflow` (all but design) answered the same five newest workflow lessons,
labelled low, as `fallback: "recency"`, while the demo has 17 confirmed testing lessons."""

import json

import anyio
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from mcp import Client

from lessons.mcp_server import build_server
from lessons.models import Lesson
from lessons.search.kinds import LESSONS
from lessons.search.scoring import folded_row, same_title_groups
from lessons.selectors.lessons import lessons_relevant
from lessons.services.api_keys import api_key_create
from lessons.services.lessons import lesson_create
from tests.api.conftest import JsonClient

pytestmark = pytest.mark.django_db


def _base_quality(lesson: Lesson) -> float:
    """The engine's quality part of a lesson (confidence and frequency), without reported use."""
    return round(LESSONS.quality({"confidence": lesson.confidence, "frequency": lesson.frequency}, None), 4)


def _confirmed(team, categories) -> list[Lesson]:
    return list(Lesson.objects.filter(team=team, status="confirmed", category__in=categories))


def test_testing_phase_alone_answers_the_best_testing_lessons_first(demo_team):
    response = lessons_relevant(team=demo_team, phase="testing", limit=5)

    assert response.fallback is None
    # the phase's categories in turn: its own first, then the others it allows
    assert [hit.fields["category"] for hit in response.results] == [
        "testing", "security", "performance", "workflow", "testing"]
    testing = sorted(_confirmed(demo_team, ["testing"]), key=lambda lesson: (-_base_quality(lesson), -lesson.id))
    own = [hit for hit in response.results if hit.fields["category"] == "testing"]
    assert [hit.id for hit in own] == [lesson.id for lesson in testing[:2]]
    assert [hit.fields["title"] for hit in own] == [
        "Run tests against real Postgres, not SQLite", "In Playwright, wait for the UI, never for a fixed time"]
    assert [hit.score for hit in own] == [_base_quality(lesson) for lesson in testing[:2]]
    # labelled by what the listing knows, never `low` as a miss
    assert [hit.relevance for hit in response.results] == ["high", "medium", "medium", "medium", "high"]


def _in_turn_standings(counts: list[int]) -> list[int]:
    """Category standings taken in turn: 0, 1, ..., then 0, 1, ... again, a category that ran out skipped."""
    return [standing for turn in range(max(counts, default=0)) for standing, count in enumerate(counts)
            if turn < count]


def _best_folded_quality(team, category) -> float:
    """The best quality among a category's confirmed lessons, same-title lessons folded."""
    rows = [{"title": x.title, "status": x.status, "confidence": x.confidence, "frequency": x.frequency}
            for x in _confirmed(team, [category])]
    return max(round(LESSONS.quality(folded_row(group[0], group), None), 4) for group in same_title_groups(rows))


@pytest.mark.parametrize("phase", list(settings.SEARCH_PHASE_CATEGORIES))
def test_every_phase_takes_its_categories_in_turn_in_the_mappings_order(demo_team, phase):
    allowed = settings.SEARCH_PHASE_CATEGORIES[phase]
    response = lessons_relevant(team=demo_team, phase=phase, limit=100)

    assert response.fallback is None and not response.degraded
    lessons = sorted(_confirmed(demo_team, allowed), key=lambda lesson: allowed.index(lesson.category))
    groups = same_title_groups([{"title": x.title, "status": x.status, "category": x.category} for x in lessons])
    assert len(response.results) == min(100, len(groups))
    # a folded group stands in its earliest category
    counts = [sum(1 for group in groups if group[0]["category"] == category) for category in allowed]
    standings = [allowed.index(hit.fields["category"]) for hit in response.results]
    assert standings == _in_turn_standings(counts)[:100]
    assert all(hit.fields["status"] == "confirmed" for hit in response.results)
    for standing in set(standings):  # within a category: most confident and most frequent first
        scores = [hit.score for hit, s in zip(response.results, standings) if s == standing]
        assert scores == sorted(scores, reverse=True)
    assert [hit.relevance for hit in response.results] == ["high" if s == 0 else "medium" for s in standings]


def test_a_build_page_of_15_shows_the_phases_categories_in_turn(demo_team):
    """The tester's finding: `build` at the default limit listed 15 frontend lessons, none of the
    demo's backend, database or security ones."""
    build = settings.SEARCH_PHASE_CATEGORIES["build"]
    response = lessons_relevant(team=demo_team, phase="build")

    categories = [hit.fields["category"] for hit in response.results]
    assert len(categories) == 15
    assert categories == build + build + build[:1]  # frontend, backend, database, ..., workflow, frontend, ...
    assert {"frontend", "backend", "database", "security"} <= set(categories)
    # each category's turn brings its best lesson, then its second best
    assert [hit.score for hit in response.results[:len(build)]] == [
        _best_folded_quality(demo_team, category) for category in build]
    for category in build:
        scores = [hit.score for hit in response.results if hit.fields["category"] == category]
        assert scores == sorted(scores, reverse=True)
    assert [hit.relevance for hit in response.results] == ["high" if c == "frontend" else "medium" for c in categories]


def test_a_category_that_runs_out_is_skipped_and_a_big_one_does_not_crowd_out_the_rest(team):
    """More lessons in the first category than a page and its fold room: each category is read
    on its own, so the phase's later ones still take their turn."""
    Lesson.objects.bulk_create(
        Lesson(team=team, title=f"Frontend lesson {n}", category="frontend", status="confirmed",
               confidence=0.5 + n / 1000) for n in range(120))
    backend = lesson_create(team=team, title="Time out outbound calls", category="backend", confidence=0.6)
    workflow = lesson_create(team=team, title="Small pull requests", category="workflow", confidence=0.4)

    with CaptureQueriesContext(connection) as queries:
        response = lessons_relevant(team=team, phase="build", limit=5)

    assert [hit.fields["category"] for hit in response.results] == [
        "frontend", "backend", "workflow", "frontend", "frontend"]
    assert response.results[1].id == backend.id and response.results[2].id == workflow.id
    assert [hit.fields["title"] for hit in response.results if hit.fields["category"] == "frontend"] == [
        "Frontend lesson 119", "Frontend lesson 118", "Frontend lesson 117"]
    # the database ranks within each category and cuts there: not every frontend lesson comes back
    listing_sql = [q["sql"] for q in queries.captured_queries if "ROW_NUMBER()" in q["sql"].upper()]
    assert len(listing_sql) == 1 and "PARTITION BY" in listing_sql[0].upper()


def test_phases_answer_different_lessons(demo_team):
    """The tester's finding: every phase but design answered the same list."""
    firsts = {phase: tuple(hit.id for hit in lessons_relevant(team=demo_team, phase=phase, limit=5).results)
              for phase in ("testing", "deployment", "maintenance", "discovery")}
    assert len(set(firsts.values())) == len(firsts)


def test_a_phase_with_a_project_still_searches_by_meaning(demo_team):
    response = lessons_relevant(team=demo_team, project_type="saas", tech_stack=["nextjs"], phase="testing", limit=5)
    assert response.fallback is None
    assert all(hit.found_by for hit in response.results)  # ranked by the search, not listed
    assert {hit.fields["category"] for hit in response.results} <= set(settings.SEARCH_PHASE_CATEGORIES["testing"])


def test_same_title_lessons_fold_into_one_hit_of_the_listing(team):
    first = lesson_create(team=team, title="Seed randomness", category="testing", confidence=0.6, frequency=2)
    second = lesson_create(team=team, title="Seed randomness", category="testing", confidence=0.9, frequency=3)
    other = lesson_create(team=team, title="Freeze time", category="testing", confidence=0.8, frequency=1)
    lesson_create(team=team, title="Unreviewed idea", category="testing", confidence=1.0, status="proposed")

    response = lessons_relevant(team=team, phase="Testing", limit=5)

    assert [hit.id for hit in response.results] == [second.id, other.id]
    folded = response.results[0]
    assert folded.collapsed_ids == sorted([first.id, second.id])
    assert folded.fields["confidence"] == 0.9 and folded.fields["frequency"] == 5


def test_a_team_without_lessons_of_the_phase_gets_an_empty_answer(team):
    lesson_create(team=team, title="Prefer CSS grid", category="frontend")
    response = lessons_relevant(team=team, phase="testing")
    assert response.results == [] and response.fallback is None


def test_the_api_answers_the_phase_and_records_it(demo_team):
    api = JsonClient(api_key_create(team=demo_team, name="phase tester")[1])
    response = api.get("/lessons/relevant", {"phase": "testing", "limit": 5})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["fallback"] is None and body["search_id"]
    assert [hit["fields"]["category"] for hit in body["results"]] == [
        "testing", "security", "performance", "workflow", "testing"]

    unknown = api.get("/lessons/relevant", {"phase": "lunch"})
    assert unknown.status_code == 422, unknown.content
    assert "phase" in [error["field"] for error in unknown.json()["errors"]]


@pytest.mark.django_db(transaction=True)
def test_the_mcp_tool_answers_the_phase_within_its_output_schema(team):
    import jsonschema

    testing = lesson_create(team=team, title="Run tests against real Postgres", category="testing", confidence=0.9)
    workflow = lesson_create(team=team, title="Small pull requests", category="workflow", confidence=0.95)

    async def main():
        try:
            async with Client(build_server(team=team), mode="legacy") as client:
                tools = {tool.name: tool for tool in (await client.list_tools()).tools}
                return tools["relevant_lessons"], await client.call_tool("relevant_lessons", {"phase": "testing"})
        finally:
            await sync_to_async(connections.close_all, thread_sensitive=True)()

    tool, result = anyio.run(main)
    answer = json.loads(result.content[0].text)
    jsonschema.validate(answer, tool.output_schema)
    assert answer["fallback"] is None
    assert [(hit["id"], hit["relevance"]) for hit in answer["results"]] == [(testing.id, "high"),
                                                                          (workflow.id, "medium")]
