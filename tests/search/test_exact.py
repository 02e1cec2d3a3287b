"""The exact-term leg: rows carrying a query's terms as tags, tech stacks or a category. One term
beside a filter is read as one arm per column (exact.py); these tests hold both forms to the same rows."""

import pytest
from django.db import connection

from lessons.search import SearchFilters, SearchRequest, search
from lessons.search.exact import exact_leg_sql
from lessons.search.filters import filter_clause
from lessons.search.kinds import SEARCH_KINDS
from tests.factories import LessonFactory, MemoryFactory


@pytest.fixture
def carriers(team):
    """Lessons carrying "rls" in each exact column, inside and outside a supabase filter."""
    return {
        "tag": LessonFactory(team=team, title="Policies per table", tags=["rls"], tech_stacks=["supabase"]),
        "stack": LessonFactory(team=team, title="Policies on every table", tech_stacks=["rls", "supabase"]),
        "category": LessonFactory(team=team, title="Policies for tenants", category="rls", tech_stacks=["supabase"]),
        "two_columns": LessonFactory(team=team, title="Policies twice", tags=["rls"], tech_stacks=["rls", "supabase"]),
        "other_stack": LessonFactory(team=team, title="Policies in Django", tags=["rls"], tech_stacks=["django"]),
        "proposed": LessonFactory(team=team, title="Policies maybe", tags=["rls"], tech_stacks=["supabase"],
                                  status="proposed"),
        "unrelated": LessonFactory(team=team, title="Cache keys", tags=["redis"], tech_stacks=["supabase"]),
    }


def _exact_ids(*, team, kind: str, terms: list[str], filters: SearchFilters, narrowed: bool) -> list[int]:
    filter_sql, filter_params = filter_clause(kind=kind, team_id=team.pk, filters=filters)
    sql, params = exact_leg_sql(kind=SEARCH_KINDS[kind], terms=terms, forms={}, filter_sql=filter_sql,
                                filter_params=filter_params, limit=50, narrowed=narrowed)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def test_a_filtered_one_term_query_finds_its_carriers_in_every_column_once(team, carriers):
    response = search(request=SearchRequest(team=team, query="rls", mode="text",
                                            filters=SearchFilters(tech_stacks=("supabase",))))
    expected = {carriers[name].pk for name in ("tag", "stack", "category", "two_columns")}
    assert response.candidates["exact"] == 4
    hit_ids = [hit.id for hit in response.results]
    assert set(hit_ids) == expected
    assert len(hit_ids) == len(set(hit_ids))


@pytest.mark.parametrize("filters", [
    SearchFilters(tech_stacks=("supabase",)),
    SearchFilters(categories=("rls",)),
    SearchFilters(tags=("rls",), statuses=("confirmed", "proposed")),
    SearchFilters(),
])
def test_the_arms_find_the_rows_the_single_condition_finds(team, carriers, filters):
    arms = _exact_ids(team=team, kind="lessons", terms=["rls"], filters=filters, narrowed=True)
    single = _exact_ids(team=team, kind="lessons", terms=["rls"], filters=filters, narrowed=False)
    assert arms == single  # the same rows in the same order (quality, then id)
    assert len(arms) == len(set(arms))
    assert arms  # every filter above leaves some carriers


def test_memories_read_their_exact_columns_as_arms_too(team):
    sad = MemoryFactory(team=team, content="A long walk after the funeral", categories=["family"], emotions=["grief"])
    both = MemoryFactory(team=team, content="Grief group on Tuesdays", categories=["grief"], emotions=["grief"],
                         people=["Ana"])
    MemoryFactory(team=team, content="Grief at work", categories=["work"], emotions=["grief"], people=["Bo"])
    filters = SearchFilters(people=("ana",))
    arms = _exact_ids(team=team, kind="memories", terms=["grief"], filters=filters, narrowed=True)
    assert arms == _exact_ids(team=team, kind="memories", terms=["grief"], filters=filters, narrowed=False)
    assert arms == [both.pk]
    unfiltered = _exact_ids(team=team, kind="memories", terms=["grief"], filters=SearchFilters(), narrowed=True)
    assert sad.pk in unfiltered and both.pk in unfiltered


def test_only_a_filter_beyond_the_team_and_its_default_status_narrows():
    assert not SearchFilters().narrows
    assert not SearchFilters(statuses=("confirmed", "proposed")).narrows
    assert not SearchFilters(include_versions=True).narrows
    assert SearchFilters(tech_stacks=("supabase",)).narrows
    assert SearchFilters(categories=("security",)).narrows
    assert SearchFilters(people=("ana",)).narrows
    assert SearchFilters(min_importance=5).narrows
