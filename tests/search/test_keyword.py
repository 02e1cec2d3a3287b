"""The BM25 keyword leg: postings kept in step with the rows, and the arithmetic of the score."""

import math

import pytest
from django.db import connection
from django.test import override_settings

from lessons.models import Lesson, Team
from lessons.search.keyword import keyword_candidates, rows_scored_sql
from lessons.services.lessons import lesson_create, lesson_delete, lesson_update
from lessons.services.memories import memory_create, memory_update
from tests.factories import LessonFactory

pytestmark = pytest.mark.django_db

PLAIN_BM25 = {"K1": 1.2, "B": 0.75, "FIELD_WEIGHTS": {"A": 1.0, "B": 1.0, "C": 1.0, "D": 1.0}}


def search(team, query, *, filter_sql="t.team_id = %s", filter_params=None, limit=10, kind="lessons"):
    return keyword_candidates(
        kind=kind,
        team_id=team.id,
        query=query,
        filter_sql=filter_sql,
        filter_params=[team.id] if filter_params is None else filter_params,
        limit=limit,
    )


def stats(team, kind="l"):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT doc_count, len_a + len_b + len_c + len_d FROM lessons_keyword_stats WHERE kind = %s AND team_id = %s",
            [kind, team.id],
        )
        return cursor.fetchone()


def postings(row_id, kind="l"):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT lexeme, tf_a + tf_b + tf_c + tf_d FROM lessons_keyword_posting WHERE kind = %s AND row_id = %s",
            [kind, row_id],
        )
        return dict(cursor.fetchall())


def bare_lesson(team, title, description=""):
    """A lesson whose only indexed words are the given ones (category set to a word we never query)."""
    return LessonFactory(team=team, title=title, description=description, recommendation="", category="zzz")


def test_postings_follow_inserts_updates_deletes_and_raw_sql(team):
    lesson = lesson_create(team=team, title="Cache invalidation", description="cache keys expire", category="zzz")
    assert postings(lesson.id) == {"cach": 2, "invalid": 1, "key": 1, "expir": 1, "zzz": 1}
    assert stats(team) == (1, 6)

    lesson_update(lesson=lesson, description="stale reads")
    assert postings(lesson.id) == {"cach": 1, "invalid": 1, "stale": 1, "read": 1, "zzz": 1}
    assert stats(team) == (1, 5)

    Lesson.objects.filter(pk=lesson.pk).update(title="Pool size")  # behind the ORM's back
    assert set(postings(lesson.id)) == {"pool", "size", "stale", "read", "zzz"}

    lesson_update(lesson=lesson, confidence=0.9)  # no text change: postings untouched
    assert stats(team) == (1, 5)

    lesson_delete(lesson=lesson)
    assert postings(lesson.id) == {}
    assert stats(team) == (0, 0)


def test_memory_versions_are_indexed_as_rows_of_their_own(team):
    memory = memory_create(team=team, content="Jonas studies architecture")
    memory_update(memory=memory, content="Jonas builds furniture")
    hits = search(team, "architecture", kind="memories")
    assert [hit.id for hit in hits] == [memory.previous_versions.get().id]


@override_settings(SEARCH_BM25=PLAIN_BM25)
def test_score_is_bm25(team):
    """Three one-field documents; the expected score written out from the formula."""
    first = bare_lesson(team, "apple apple banana")
    bare_lesson(team, "banana cherry")
    bare_lesson(team, "cherry date elderberry fig")
    hits = search(team, "apple")
    # N = 3, df(appl) = 1, every doc also holds the term "zzz": lengths 4, 3, 5, avglen 4.
    idf = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    k1, b = 1.2, 0.75
    expected = idf * 2 * (k1 + 1) / (2 + k1 * (1 - b + b * 4 / 4))
    assert [hit.id for hit in hits] == [first.id]
    assert hits[0].score == pytest.approx(expected, rel=1e-9)
    assert hits[0].matched_terms == ["appl"]


@override_settings(SEARCH_BM25=PLAIN_BM25)
def test_rarer_terms_and_shorter_documents_rank_higher(team):
    short = bare_lesson(team, "banana split")
    long = bare_lesson(team, "banana with custard cream sprinkles and a long list of other toppings")
    for _ in range(3):
        bare_lesson(team, "banana bread")
    rare = bare_lesson(team, "durian")
    hits = search(team, "banana split durian")
    assert hits[0].id in {short.id, rare.id}
    ranked = [hit.id for hit in hits]
    assert ranked.index(short.id) < ranked.index(long.id)


def test_exact_terms_match_tags_and_tech_stacks_unstemmed(team):
    tagged = lesson_create(team=team, title="Pages render twice", tech_stacks=["nextjs"], tags=["rls"])
    lesson_create(team=team, title="Something else entirely")
    assert [hit.id for hit in search(team, "nextjs")] == [tagged.id]
    assert [hit.id for hit in search(team, "RLS")] == [tagged.id]


def test_a_word_whose_stem_is_itself_counts_once(team):
    lesson = bare_lesson(team, "cell biology")
    bare_lesson(team, "other words")
    once = search(team, "cell")[0].score
    assert search(team, "cell")[0].matched_terms == ["cell"]
    assert search(team, "the cell")[0].score == pytest.approx(once)  # stop words add nothing
    assert lesson.id == search(team, "cells")[0].id  # stemmed query reaches the stemmed text


def test_no_terms_no_hits(team):
    bare_lesson(team, "anything")
    assert search(team, "") == []
    assert search(team, "the of and") == []


def test_filters_apply_before_the_limit(team):
    for number in range(30):
        bare_lesson(team, f"deploy pipeline {number}")
    wanted = LessonFactory(team=team, title="deploy pipeline slow", category="rare-category")
    hits = search(
        team, "deploy pipeline", filter_sql="t.team_id = %s AND t.category = %s", filter_params=[team.id, "rare-category"], limit=5
    )
    assert [hit.id for hit in hits] == [wanted.id]


def test_teams_keep_their_own_statistics_and_rows(team, other_team):
    mine = bare_lesson(team, "kafka consumer lag")
    bare_lesson(team, "unrelated")
    before = search(team, "kafka")[0].score
    for _ in range(5):
        bare_lesson(other_team, "kafka kafka")
    assert search(team, "kafka")[0].score == pytest.approx(before)  # df and N are per team
    assert [hit.id for hit in search(team, "kafka", limit=50)] == [mine.id]


def test_coverage_is_the_share_of_the_querys_english_terms_a_row_carries(team):
    both = bare_lesson(team, "Tune connection pools")
    one = bare_lesson(team, "Tune the piano")
    found = {c.id: c for c in search(team, "tune connection pools")}
    assert found[both.id].coverage == pytest.approx(1.0)
    assert found[one.id].coverage == pytest.approx(1 / 3)  # tune, of tune / connect / pool
    # a query word no row carries still counts in the share
    assert search(team, "tune guitar")[0].coverage == pytest.approx(0.5)


def _bookkeeping_rows(team_id: int) -> dict[str, int]:
    with connection.cursor() as cursor:
        counts = {}
        for table in ("lessons_keyword_df", "lessons_keyword_stats", "lessons_keyword_reference"):
            cursor.execute(f"SELECT count(*) FROM {table} WHERE team_id = %s", [team_id])
            counts[table] = cursor.fetchone()[0]
        return counts


def test_a_deleted_teams_keyword_bookkeeping_goes_with_it(team):
    # The counters, document frequencies and reference length have no foreign key: a deleted
    # team used to leave them behind for good (migration 0010).
    other = Team.objects.create(slug="keeps-its-rows", name="Keeps its rows")
    for owner in (team, other):
        lesson_create(team=owner, title="Cache invalidation", description="cache keys expire")
        memory_create(team=owner, content="Talked about caching with Ana")
    team_id = team.id
    assert all(_bookkeeping_rows(team_id).values())
    kept = _bookkeeping_rows(other.id)

    team.delete()  # the ORM deletes its lessons and memories, then the team
    assert _bookkeeping_rows(team_id) == dict.fromkeys(kept, 0)
    assert _bookkeeping_rows(other.id) == kept
    assert [(c.score > 0) for c in search(other, "cache")] == [True]


def test_words_after_an_html_tag_are_indexed_and_found(team):
    # the text parser took `<script>` and `<style>` for HTML and dropped the rest of the field
    lesson = bare_lesson(team, "Load <script> tags with defer",
                         "A blocking <script> in <head> and inline <style> blocks; an <iframe> without sandbox.")
    assert {"defer", "block", "head", "inlin", "ifram", "sandbox", "script", "style"} <= set(postings(lesson.id))
    for query in ("defer", "iframe sandbox", "<script> defer", "<style>"):
        assert [c.id for c in search(team, query)] == [lesson.id], query
    memory = memory_create(team=team, content="Wrote <style> rules for the blog with Ada", people=["Ada"])
    assert {"rule", "blog", "ada"} <= set(postings(memory.id, kind="m"))


def test_the_migration_rewrites_the_vectors_and_postings_of_rows_with_tags(team):
    import importlib

    from django.apps import apps as current_apps
    from django.db import connection as db

    migration = importlib.import_module("lessons.migrations.0018_search_vectors_without_tag_starts")
    tagged = bare_lesson(team, "Load <script> tags with defer")
    plain = bare_lesson(team, "Pool size")
    remembered = memory_create(team=team, content="Dinner <b>with</b> Ada", people=["Ada <ada@example.org>"])
    before = {row: postings(row) for row in (tagged.id, plain.id)}, postings(remembered.id, kind="m"), stats(team)

    with db.cursor() as cursor:  # the rows' deferred foreign key checks, before the ALTER TABLE
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    with db.schema_editor(atomic=False) as editor:  # inside the test's transaction
        migration.rebuild_search_vectors(current_apps, editor)

    after = {row: postings(row) for row in (tagged.id, plain.id)}, postings(remembered.id, kind="m"), stats(team)
    assert after == before
    lesson_update(lesson=tagged, title="Load <script> tags async")  # the triggers were created again
    assert "async" in postings(tagged.id) and "defer" not in postings(tagged.id)
    assert [c.id for c in search(team, "async")] == [tagged.id]


def test_a_word_matched_in_two_forms_is_one_word_of_the_query(team):
    # `security` is a tag (indexed unstemmed) and a word of the title (stemmed `secur`): counting
    # matched terms, it was two of the two words of "database security"
    cookies = LessonFactory(team=team, title="Session cookie security", description="", recommendation="",
                            category="zzz", tags=["security"])
    both = LessonFactory(team=team, title="Database security reviews", description="", recommendation="",
                         category="zzz", tags=[])
    found = {candidate.id: candidate for candidate in search(team, "database security")}
    assert sorted(found[cookies.id].matched_terms) == ["secur", "security"]
    assert (found[cookies.id].word_share, found[cookies.id].coverage) == (0.5, 0.5)
    # English terms alone: their coverage says it (the words are counted only where a tag's form matched)
    assert (found[both.id].word_share, found[both.id].coverage) == (None, 1.0)
    # a word no row has still counts in the query's words
    assert search(team, "zxqvw security")[0].word_share == 0.5


def test_a_word_of_letters_and_digits_finds_it_written_apart_and_the_other_way(team, other_team):
    # "vue3" is one word to the parser and "Vue 3" two: each query used to miss the other's lessons
    apart = bare_lesson(team, "Upgrading to Vue 3")
    bare_lesson(team, "Upgrading the database")
    bare_lesson(team, "Three things about React")
    found = search(team, "vue3")
    assert [hit.id for hit in found] == [apart.id]
    assert sorted(found[0].matched_terms) == ["3", "vue"]
    assert found[0].word_share == 1.0  # both parts are the one query word
    joined = bare_lesson(other_team, "The vue3 upgrade guide")
    bare_lesson(other_team, "Upgrading the database")
    assert [hit.id for hit in search(other_team, "vue 3")] == [joined.id]
    assert search(other_team, "vue 3")[0].matched_terms == ["vue3"]
    # digits then letters, both ways
    two_factor = bare_lesson(team, "Enforce 2fa for admins")
    spaced = bare_lesson(other_team, "Turn on 2 FA")
    assert [hit.id for hit in search(team, "2 fa")] == [two_factor.id]
    assert [hit.id for hit in search(other_team, "2FA")] == [spaced.id]
    assert search(team, "database")[0].matched_terms == ["databas"]


def test_a_word_some_row_says_as_written_is_not_also_split(team):
    # a gene's name is one word ("APOE4" is not APOE and 4): a word is read apart only where no row
    # of the team says it as the query does
    allele = bare_lesson(team, "APOE4 carriers and dementia")
    bare_lesson(team, "APOE and 4 other genes")
    assert [hit.id for hit in search(team, "apoe4")] == [allele.id]
    # the query's words side by side are still also read as one
    both = {hit.id for hit in search(team, "apoe 4")}
    assert allele.id in both and len(both) == 2
    # a row saying it both ways carries both forms' evidence
    written_both_ways = bare_lesson(team, "Vue 3 and vue3 are the same")
    apart = bare_lesson(team, "Moving to Vue 3")
    assert [hit.id for hit in search(team, "vue 3")][:2] == [written_both_ways.id, apart.id]


def test_other_spellings_do_not_raise_the_attainable_maximum(team):
    # they are alternatives to words already counted: a row matching the query as written scores
    # the same share of the maximum as it did before they were looked for
    apart = bare_lesson(team, "Upgrading to Vue 3")
    bare_lesson(team, "Upgrading the database")
    with connection.cursor() as cursor:
        cursor.execute(*rows_scored_sql(kind_code="l", team_id=team.id, query="vue3 upgrade", row_ids=[apart.id]))
        [(_, _, matched_terms, _, maximum, _)] = cursor.fetchall()
    assert sorted(matched_terms) == ["3", "upgrad", "vue"]

    def idf(df):
        return math.log(1 + (2 - df + 0.5) / (df + 0.5))

    # the query's words as written: vue3 and the unstemmed upgrade (a tag's form), which no row has,
    # and upgrad (both rows); not vue and 3
    assert maximum == pytest.approx((idf(0) + idf(2) + idf(0)) * (1.2 + 1))
