"""Keyword postings carry a signature of their row's filter values (lessons/search/signature.py,
migration 0011): PostgreSQL and Python compute the same bits, the triggers keep every posting's
signature current through writes, and a filtered keyword leg that skips postings by signature
returns what the exact filter alone returns."""

import random

import pytest
from django.db import connection

from lessons.models import Lesson, Memory
from lessons.search import SearchFilters, SearchRequest, search
from lessons.search.filters import filter_parts
from lessons.search.keyword import keyword_candidates
from lessons.search.signature import signature_sql, value_bits
from lessons.services.lessons import lesson_accept, lesson_propose, lesson_update
from lessons.services.memories import memory_create, memory_update
from tests.factories import LessonFactory

pytestmark = pytest.mark.django_db

WORDS = "cache pool queue index shard replica lock vacuum tenant policy webhook retry".split()
CATEGORIES = ["security", "database", "testing", "workflow", "frontend", "deployment", "performance"]
TECH = ["redis", "postgresql", "celery", "django", "nextjs", "docker", "supabase", "prisma"]


def expected_signature(values: dict[str, list[str]]) -> int:
    bits = 0
    for field, field_values in values.items():
        for value in field_values:
            bits |= value_bits(field, value)
    return bits - (1 << 64) if bits >= 1 << 63 else bits


def lesson_signature(lesson: Lesson) -> int:
    lesson.refresh_from_db()
    return expected_signature({"status": [lesson.status], "category": [lesson.category],
                               "tech_stacks": lesson.tech_stacks, "project_types": lesson.project_types,
                               "tags": lesson.tags})


def memory_signature(memory: Memory) -> int:
    memory.refresh_from_db()
    return expected_signature({"current": ["yes"] if memory.current_version_id is None else [],
                               "categories": memory.categories, "emotions": memory.emotions,
                               "people": [name.lower() for name in memory.people]})


def posting_signatures(*, kind: str, row_id: int) -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT signature FROM lessons_keyword_posting WHERE kind = %s AND row_id = %s",
                       [kind, row_id])
        return {value for (value,) in cursor.fetchall()}


@pytest.mark.parametrize("field, value", [("category", "security"), ("tags", "naïve-ünïcode"), ("people", "jo"),
                                          ("current", "yes"), ("tech_stacks", "c++"), ("status", "")])
def test_postgres_and_python_set_the_same_three_bits(field, value):
    with connection.cursor() as cursor:
        cursor.execute("SELECT lessons_keyword_facet(%s, %s)", [field, value])
        assert cursor.fetchone()[0] == value_bits(field, value)
    assert 1 <= bin(value_bits(field, value) & (2**64 - 1)).count("1") <= 3


def test_the_mask_expression_means_every_test_one_value():
    assert signature_sql([], column="s") == "true"
    assert signature_sql([(4, 8), ()], column="s") == "false"  # a test no value passes keeps no row
    with connection.cursor() as cursor:
        for signature, passes in [(4 | 16, True), (8 | 16, True), (4, False), (16, False), (-1, True)]:
            cursor.execute(f"SELECT {signature_sql([(4, 8), (16,)], column='s')} FROM (SELECT %s::bigint AS s) AS x",
                           [signature])
            assert cursor.fetchone()[0] is passes, signature


def test_lesson_postings_follow_their_rows_filter_values_through_every_write(team):
    lesson = lesson_propose(team=team, title="Cache pool sizing", description="Size the pool to the cores.",
                            category="Database", tech_stacks=["Redis"], tags=["pool"])
    assert posting_signatures(kind="l", row_id=lesson.id) == {lesson_signature(lesson)}
    lesson_accept(lesson=lesson)  # status only: the text is unchanged, the postings are re-signed
    assert posting_signatures(kind="l", row_id=lesson.id) == {lesson_signature(lesson)}
    lesson_update(lesson=lesson, category="performance", tech_stacks=["redis", "celery"], project_types=["saas"])
    assert posting_signatures(kind="l", row_id=lesson.id) == {lesson_signature(lesson)}
    lesson_update(lesson=lesson, description="Size the pool to the cores, then measure.", tags=["pool", "sizing"])
    assert posting_signatures(kind="l", row_id=lesson.id) == {lesson_signature(lesson)}

    Lesson.objects.bulk_create([LessonFactory.build(team=team, title=f"Bulk {n}", category="testing",
                                                    tags=[f"t{n}"]) for n in range(3)])
    for bulk in Lesson.objects.filter(team=team, title__startswith="Bulk"):
        assert posting_signatures(kind="l", row_id=bulk.id) == {lesson_signature(bulk)}
    Lesson.objects.filter(team=team, title__startswith="Bulk").update(category="frontend")  # raw SQL's path
    for bulk in Lesson.objects.filter(team=team, title__startswith="Bulk"):
        assert posting_signatures(kind="l", row_id=bulk.id) == {lesson_signature(bulk)}
    bulk_ids = list(Lesson.objects.filter(team=team, title__startswith="Bulk").values_list("id", flat=True))
    Lesson.objects.filter(id__in=bulk_ids).delete()
    assert all(posting_signatures(kind="l", row_id=row_id) == set() for row_id in bulk_ids)


def test_memory_postings_follow_versions_people_and_emotions(team):
    memory = memory_create(team=team, content="Dinner with Maria at the harbour", people=["Maria"],
                           categories=["event"], emotions=["joy"])
    assert posting_signatures(kind="m", row_id=memory.id) == {memory_signature(memory)}
    memory_update(memory=memory, emotions=["joy", "calm"], people=["Maria", "Jonas"])
    assert posting_signatures(kind="m", row_id=memory.id) == {memory_signature(memory)}
    memory_update(memory=memory, content="Dinner with Maria and Jonas at the harbour")  # archives a version
    version = Memory.objects.get(current_version=memory)
    assert posting_signatures(kind="m", row_id=version.id) == {memory_signature(version)}
    assert memory_signature(version) != memory_signature(memory)  # a version is not current
    assert posting_signatures(kind="m", row_id=memory.id) == {memory_signature(memory)}


def test_people_sign_postings_without_their_accents_so_an_ascii_filter_skips_none_of_them(team):
    """A filter naming "Zoe" finds Zoë (migration 0024): were her postings signed "zoë", the keyword
    leg would skip them by signature before the exact filter saw the row."""
    memory = memory_create(team=team, content="Coffee with Zoë and Søren by the harbour", people=["Zoë", "Søren"])
    expected = expected_signature({"current": ["yes"], "people": ["zoe", "soren"]})
    assert posting_signatures(kind="m", row_id=memory.id) == {expected}
    for people, passes in [(("Zoe",), True), (("SOREN",), True), (("zoey",), False)]:
        clause = filter_parts(kind="memories", team_id=team.id, filters=SearchFilters(people=people))
        assert clause.signature_masks  # ASCII names: the keyword leg may skip postings by signature
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT bool_and({signature_sql(clause.signature_masks, column='signature')})"
                           " FROM lessons_keyword_posting WHERE kind = 'm' AND row_id = %s", [memory.id])
            assert cursor.fetchone()[0] is passes, people
    memory_create(team=team, content="A walk by the harbour with Zoey", people=["Zoey"])
    clause = filter_parts(kind="memories", team_id=team.id, filters=SearchFilters(people=("zoe",)))
    for head in (5, None):  # reading the term's best postings only, and every posting
        found = keyword_candidates(kind="memories", team_id=team.id, query="harbour", filter_sql=clause.sql,
                                   filter_params=clause.params, limit=10, head=head, fallback=False,
                                   signature_masks=clause.signature_masks)
        assert [candidate.id for candidate in found] == [memory.id], head


def test_a_row_passes_the_signature_test_of_every_filter_it_passes(team):
    lesson = LessonFactory(team=team, title="Webhook retry", category="security", tech_stacks=["redis", "docker"],
                           project_types=["saas"], tags=["webhook", "retry"])
    memory = memory_create(team=team, content="Met Maria", people=["Maria"], categories=["person"], emotions=["joy"])
    checks = [
        ("l", lesson.id, "lessons", SearchFilters(categories=("Security",), tech_stacks=("docker", "nextjs"),
                                                  project_types=("saas",), tags=("retry",)), True),
        ("l", lesson.id, "lessons", SearchFilters(phase="testing"), True),  # security is a testing category
        ("l", lesson.id, "lessons", SearchFilters(categories=("database",)), False),
        ("l", lesson.id, "lessons", SearchFilters(statuses=("proposed",)), False),
        ("m", memory.id, "memories", SearchFilters(people=("maria",), categories=("person",), emotions=("joy",)), True),
        ("m", memory.id, "memories", SearchFilters(people=("jonas",)), False),
    ]
    for code, row_id, kind, filters, passes in checks:
        clause = filter_parts(kind=kind, team_id=team.id, filters=filters)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT bool_and({signature_sql(clause.signature_masks, column='signature')})"
                           " FROM lessons_keyword_posting WHERE kind = %s AND row_id = %s", [code, row_id])
            assert cursor.fetchone()[0] is passes, filters


def varied_corpus(team, *, rows=400, seed=11):
    rng = random.Random(seed)
    Lesson.objects.bulk_create([
        LessonFactory.build(team=team, title=" ".join(rng.choices(WORDS, k=rng.randint(1, 3))),
                            description=" ".join(rng.choices(WORDS, k=rng.randint(3, 25))), recommendation="",
                            category=rng.choice(CATEGORIES), tech_stacks=rng.sample(TECH, rng.randint(1, 3)),
                            tags=rng.sample(WORDS, 2))
        for _ in range(rows)
    ])


FILTERS = [SearchFilters(categories=("security",)), SearchFilters(tech_stacks=("redis",)),
           SearchFilters(categories=("testing", "frontend"), tech_stacks=("docker",)),
           SearchFilters(tags=("vacuum",)), SearchFilters(categories=("nothing-has-this",))]
QUERIES = ["cache", "cache pool", "queue retry webhook", "index vacuum lock", "tenant policy replica"]


def test_skipping_postings_by_signature_keeps_the_exact_filtered_answer(team, other_team):
    varied_corpus(team)
    varied_corpus(other_team, seed=12)  # another team's postings share the terms
    proved = {"with": 0, "without": 0}
    for filters in FILTERS:
        clause = filter_parts(kind="lessons", team_id=team.id, filters=filters)
        leg = dict(kind="lessons", team_id=team.id, filter_sql=clause.sql, filter_params=clause.params, limit=10,
                   fallback=False)
        for query in QUERIES:
            exact = [(c.id, round(c.score, 9)) for c in keyword_candidates(**leg, query=query, head=None)]
            scanned = keyword_candidates(**leg, query=query, head=None, signature_masks=clause.signature_masks)
            assert [(c.id, round(c.score, 9)) for c in scanned] == exact, (filters, query)
            for name, masks in (("with", clause.signature_masks), ("without", ())):
                heads = keyword_candidates(**leg, query=query, head=12, signature_masks=masks)
                if heads and all(c.certain for c in heads):
                    assert [(c.id, round(c.score, 9)) for c in heads] == exact, (filters, query, name)
                    proved[name] += 1
                elif not exact:
                    assert heads == []
    # heads of rows the filter admits prove more filtered answers than heads of every row
    assert proved["with"] > proved["without"]


def test_a_row_whose_signature_admits_it_wrongly_is_still_filtered_out(team):
    varied_corpus(team, rows=150)
    filters = SearchFilters(categories=("security",))
    outsider = LessonFactory(team=team, title="cache cache pool", description="cache pool cache", category="database")
    with connection.cursor() as cursor:  # every bit set: what a Bloom false positive looks like
        cursor.execute("UPDATE lessons_keyword_posting SET signature = -1 WHERE kind = 'l' AND row_id = %s",
                       [outsider.id])
    for mode in ("text", "hybrid"):
        response = search(request=SearchRequest(team=team, query="cache pool", mode=mode, filters=filters, limit=20))
        assert response.results and outsider.id not in {hit.id for hit in response.results}
        assert {hit.fields["category"] for hit in response.results} == {"security"}
