"""Every filter is applied inside every leg: a second team holds the very same rows (so it would
rank as high as the first if anything leaked), and each filter is checked in each mode."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from lessons.models import Lesson, Memory
from lessons.search import SearchFilters, SearchRequest, search
from lessons.search.filters import filter_clause
from tests.search.demo import drop_demo_team, load_demo_team

pytestmark = pytest.mark.django_db

MODES = ("hybrid", "semantic", "text")


@pytest.fixture(scope="module")
def twin_teams(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        first, second = load_demo_team(slug="twin-a"), load_demo_team(slug="twin-b")
        yield first, second
        drop_demo_team(slug="twin-a")
        drop_demo_team(slug="twin-b")


NOW = timezone.now()

LESSON_FILTERS = [
    (SearchFilters(), Q(status="confirmed")),
    (SearchFilters(statuses=("proposed", "rejected")), Q(status__in=["proposed", "rejected"])),
    (SearchFilters(categories=("security",)), Q(status="confirmed", category="security")),
    (SearchFilters(phase="testing"), Q(status="confirmed", category__in=["testing", "security", "performance", "workflow"])),
    (SearchFilters(phase="testing", categories=("testing", "frontend")), Q(status="confirmed", category="testing")),
    (SearchFilters(tech_stacks=("supabase",)), Q(status="confirmed", tech_stacks__overlap=["supabase"])),
    (SearchFilters(project_types=("saas",)), Q(status="confirmed", project_types__overlap=["saas"])),
    (SearchFilters(tags=("rls", "jwt")), Q(status="confirmed", tags__overlap=["rls", "jwt"])),
    (SearchFilters(until=NOW - timedelta(days=1)), Q(pk__in=[])),
]

MEMORY_FILTERS = [
    (SearchFilters(), Q(current_version__isnull=True)),
    (SearchFilters(include_versions=True), Q()),
    (SearchFilters(categories=("person",)), Q(current_version__isnull=True, categories__overlap=["person"])),
    (SearchFilters(min_importance=8), Q(current_version__isnull=True, importance__gte=8)),
    (SearchFilters(min_importance=5, max_importance=5), Q(current_version__isnull=True, importance=5)),
    (SearchFilters(max_importance=4), Q(current_version__isnull=True, importance__lte=4)),
    (SearchFilters(people=("maria",)), Q(current_version__isnull=True, people__overlap=["Maria"])),
    (SearchFilters(emotions=("panic",)), Q(current_version__isnull=True, emotions__overlap=["panic"])),
    (
        SearchFilters(since=NOW - timedelta(days=365 * 2), until=NOW - timedelta(days=365)),
        Q(current_version__isnull=True, occurred_at__gte=NOW - timedelta(days=365 * 2), occurred_at__lt=NOW - timedelta(days=365)),
    ),
]


def hits(team, *, kind, mode, filters, query):
    response = search(request=SearchRequest(team=team, query=query, kind=kind, mode=mode, filters=filters, limit=50))
    return response, {hit.id for hit in response.results}


@pytest.mark.parametrize("filters, allowed", LESSON_FILTERS)
def test_lesson_filters_hold_in_every_leg(twin_teams, filters, allowed):
    team, twin = twin_teams
    permitted = set(Lesson.objects.filter(allowed, team=team).values_list("id", flat=True))
    for mode in MODES:
        for query in ("row level security for supabase", "testing"):
            response, found = hits(team, kind="lessons", mode=mode, filters=filters, query=query)
            assert found <= permitted, (mode, query)
            assert not found & set(Lesson.objects.filter(team=twin).values_list("id", flat=True))
            if permitted:
                assert found, (mode, query)


@pytest.mark.parametrize("filters, allowed", MEMORY_FILTERS)
def test_memory_filters_hold_in_every_leg(twin_teams, filters, allowed):
    team, twin = twin_teams
    permitted = set(Memory.objects.filter(allowed, team=team).values_list("id", flat=True))
    assert permitted
    for mode in MODES:
        for query in ("my friend's birthday", "panic"):
            response, found = hits(team, kind="memories", mode=mode, filters=filters, query=query)
            assert found and found <= permitted, (mode, query)
            assert not found & set(Memory.objects.filter(team=twin).values_list("id", flat=True))


def test_a_selective_filter_still_fills_the_page(twin_teams):
    """pgvector's iterative scan keeps going past rows the filter rejects."""
    team, _ = twin_teams
    rls = Lesson.objects.filter(team=team, status="confirmed", tags__overlap=["rls"]).count()
    response = search(
        request=SearchRequest(
            team=team, query="deploying containers to kubernetes", mode="semantic", similarity_floor=0.0,
            limit=rls, filters=SearchFilters(tags=("rls",)),
        )
    )
    assert len(response.results) == rls and response.fallback is None


def test_versions_only_when_asked(twin_teams):
    team, _ = twin_teams
    earlier = Memory.objects.filter(team=team, current_version__isnull=False).first()
    assert earlier is not None
    query = earlier.content
    _, current_only = hits(team, kind="memories", mode="hybrid", filters=SearchFilters(), query=query)
    _, with_versions = hits(team, kind="memories", mode="hybrid", filters=SearchFilters(include_versions=True), query=query)
    assert earlier.id not in current_only
    assert earlier.id in with_versions


# --- the covering indexes of the filter columns (migration 0009) --------------------------------

EVERY_LESSON_FILTER = SearchFilters(categories=("security",), tech_stacks=("django",), project_types=("saas",),
                                    tags=("rls",), since=NOW - timedelta(days=30), until=NOW)
EVERY_MEMORY_FILTER = SearchFilters(categories=("person",), min_importance=5, max_importance=9, people=("maria",),
                                    emotions=("joy",),
                                    since=NOW - timedelta(days=30), until=NOW)


def filter_columns_read(kind, filters):
    sql, _ = filter_clause(kind=kind, team_id=1, filters=filters)
    return set(re.findall(r"\bt\.(\w+)", sql))


def index_columns(name):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.attname FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid"
            " JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE c.relname = %s",
            [name],
        )
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.parametrize(
    "kind, filters, index",
    [("lessons", EVERY_LESSON_FILTER, "lesson_filter_columns"), ("memories", EVERY_MEMORY_FILTER, "memory_filter_columns")],
)
def test_every_column_a_filter_reads_is_in_its_covering_index(kind, filters, index):
    read = filter_columns_read(kind, filters)
    assert {"team_id", "updated_at" if kind == "lessons" else "occurred_at"} <= read
    assert read <= index_columns(index), f"add {sorted(read - index_columns(index))} to the index (migration)"


def test_a_person_search_text_match_is_the_one_filter_left_uncovered():
    extra = filter_columns_read("memories", SearchFilters(person_like="jon")) - index_columns("memory_filter_columns")
    assert extra == {"content", "details"}
