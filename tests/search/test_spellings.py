"""A term in every spelling the team stores it in (lessons/search/spellings.py): `nextjs` and
`next.js` are one tech stack, to a query and to a filter."""

from importlib import import_module

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from lessons.search import SearchFilters, SearchRequest, search
from lessons.search.filters import filter_clause
from lessons.search.spellings import (
    SPELLING_INDEX_PREDICATE,
    SPELLING_TERM,
    SPELLINGS_SQL,
    spelled_values,
    stored_spellings,
)
from lessons.services.lessons import lesson_create
from lessons.services.memories import memory_create


@pytest.fixture
def next_lessons(team):
    """Two Next.js lessons, each spelling the stack its own way, and lessons that are not about it."""
    dotted = lesson_create(team=team, title="Set revalidate on cached pages",
                           description="Pages rendered at build time served stale prices.",
                           tech_stacks=["Next.js"], confidence=0.6)
    plain = lesson_create(team=team, title="Remote images on pages need the loader",
                          description="Images from the CDN failed until a loader was configured.",
                          tech_stacks=["nextjs"], confidence=0.6)
    others = [
        lesson_create(team=team, title="Server components cannot use hooks",
                      description="A page crashed because a component used state on the server.",
                      tech_stacks=["react"], confidence=0.9),
        lesson_create(team=team, title="Vacuum large tables",
                      description="Autovacuum fell behind on the events table.", tech_stacks=["postgresql"]),
    ]
    return {"dotted": dotted.pk, "plain": plain.pk, "others": {lesson.pk for lesson in others}}


@pytest.mark.parametrize("query", ["nextjs", "next.js", "Next.js", "NEXTJS"])
@pytest.mark.parametrize("mode", ["hybrid", "text"])
def test_a_stack_query_finds_both_spellings_first(team, next_lessons, query, mode):
    # the "`nextjs` returns exactly the Next.js lessons", with the model and without (text)
    response = search(request=SearchRequest(team=team, query=query, mode=mode, explain=True))
    top = [hit.id for hit in response.results[:2]]
    assert set(top) == {next_lessons["dotted"], next_lessons["plain"]}
    assert [hit.explanation["exact_term"] for hit in response.results] == [True, True] + [False] * (
        len(response.results) - 2)


def test_the_spellings_come_with_the_keyword_plan_in_one_round_trip(team, next_lessons):
    with CaptureQueriesContext(connection) as queries:
        response = search(request=SearchRequest(team=team, query="nextjs", mode="text"))
    assert {hit.id for hit in response.results[:2]} == {next_lessons["dotted"], next_lessons["plain"]}
    # as any text search, and one statement more: the row stored as `next.js` measured in its own spelling
    probe, statement, spelled = (query["sql"] for query in queries.captured_queries)
    assert "lessons_keyword_df" in probe and "regexp_replace(lexeme" in probe
    assert "spelled_postings" in spelled


@pytest.mark.parametrize("stack", ["nextjs", "Next.js", "next.js"])
def test_a_stack_filter_keeps_both_spellings_and_nothing_else(team, next_lessons, stack):
    response = search(request=SearchRequest(team=team, query="pages", mode="text", limit=10,
                                            filters=SearchFilters(tech_stacks=(stack,))))
    assert {hit.id for hit in response.results} == {next_lessons["dotted"], next_lessons["plain"]}


def filter_values(*, kind_code: str, team_id: int, values: list[str]) -> list[str]:
    """A filter's allowed values, as filters.py and the lists widen them."""
    return spelled_values(values, stored_spellings(kind_code=kind_code, team_id=team_id, values=values))


def test_filter_values_add_the_stored_spellings_and_keep_the_given_first(team, next_lessons):
    assert filter_values(kind_code="l", team_id=team.pk, values=["NextJS"]) == ["nextjs", "next.js"]
    assert filter_values(kind_code="l", team_id=team.pk, values=["next.js"]) == ["next.js", "nextjs"]
    # a spelling no row stores is not invented, and a plain word stays itself
    assert filter_values(kind_code="l", team_id=team.pk, values=["react"]) == ["react"]
    assert filter_values(kind_code="l", team_id=team.pk, values=["vue.js"]) == ["vue.js", "vuejs"]


def test_another_teams_spellings_are_not_read(team, other_team, next_lessons):
    lesson_create(team=other_team, title="Edge functions", tech_stacks=["remix.run"])
    assert filter_values(kind_code="l", team_id=team.pk, values=["remixrun"]) == ["remixrun"]
    assert filter_values(kind_code="l", team_id=other_team.pk, values=["remixrun"]) == ["remixrun", "remix.run"]


def test_a_memory_filter_reads_a_category_in_either_spelling(team):
    filed = memory_create(team=team, content="Long walk by the river", categories=["self-care"])
    memory_create(team=team, content="Walk to the office", categories=["work"])
    response = search(request=SearchRequest(team=team, query="walk", kind="memories", mode="text",
                                            filters=SearchFilters(categories=("selfcare",))))
    assert [hit.id for hit in response.results] == [filed.pk]


def test_the_filter_tests_the_widened_values_with_their_signatures(team, next_lessons):
    # every allowed spelling is a parameter of the same equality test, so the postings' signatures
    # (one mask per spelling) still skip only rows the filter rejects
    where, params = filter_clause(kind="lessons", team_id=team.pk, filters=SearchFilters(tech_stacks=("nextjs",)))
    assert "t.tech_stacks && %s::varchar[]" in where
    assert ["nextjs", "next.js"] in params


def test_the_lookup_says_what_the_index_says():
    # the planner reads the partial index only when the lookup's WHERE implies its predicate and
    # compares its expression (measured: 0.07-0.25 ms on teams of 1,500-52,000 words)
    index = import_module("lessons.migrations.0023_keyword_spellings")
    assert (index.SPELLING_TERM, index.SPELLING_INDEX_PREDICATE) == (SPELLING_TERM, SPELLING_INDEX_PREDICATE)
    assert f"{SPELLING_INDEX_PREDICATE} AND {SPELLING_TERM} = ANY(%s)" in SPELLINGS_SQL


@pytest.fixture
def java_lessons(team):
    """Lessons on two Java releases: 1.8 (Java 8) and 18, one of them spelled without its space."""
    return {
        stack: lesson_create(team=team, title=f"Runtime flags on {stack}", description="The JVM needed its heap set.",
                             tech_stacks=[stack]).pk
        for stack in ("java 1.8", "java 18", "java18")
    }


@pytest.mark.parametrize("stack, wanted", [("java 18", {"java 18", "java18"}), ("Java18", {"java 18", "java18"}),
                                           ("java 1.8", {"java 1.8"})])
def test_a_version_filter_keeps_its_dot(team, java_lessons, stack, wanted):
    # canonical drops every dot: `java 18` also kept the Java 8 lessons, `java 1.8` the Java 18 ones
    response = search(request=SearchRequest(team=team, query="heap", mode="text", limit=10,
                                            filters=SearchFilters(tech_stacks=(stack,))))
    assert {hit.id for hit in response.results} == {java_lessons[name] for name in wanted}
    assert set(filter_values(kind_code="l", team_id=team.pk, values=[stack])) >= {stack.lower()}


def test_a_callers_version_is_not_another_versions_stack(team, java_lessons):
    # the caller's tech stack counts for the lessons naming it, not for another release's
    response = search(request=SearchRequest(team=team, query="heap", mode="text", limit=10, tech_stack=("java 18",),
                                            explain=True))
    overlap = {hit.id: hit.explanation["metadata"] for hit in response.results}
    assert overlap == {java_lessons["java 1.8"]: 0.0, java_lessons["java 18"]: 1.0, java_lessons["java18"]: 1.0}
