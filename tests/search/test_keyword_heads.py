"""The keyword leg's impact-ordered heads (lessons/search/keyword.py): the answers they prove equal
the whole-list scan's, unproved answers are flagged (and replaced when asked), and the counters and
impacts the heads rely on stay true through writes, drift and refreshes."""

import random
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from lessons.models import Lesson
from lessons.search import SearchFilters, SearchRequest, search
from lessons.search.keyword import (
    TABLES,
    bm25_parameters,
    keyword_candidates,
    keyword_leg_sql,
    keyword_plan,
    keyword_session_sql,
)
from lessons.services.keyword_index import keyword_impacts_refresh, keyword_index_state
from lessons.services.lessons import lesson_delete, lesson_update
from tests.factories import LessonFactory, MemoryFactory

pytestmark = pytest.mark.django_db

WORDS = ("cache pool queue index shard replica lock vacuum tenant policy webhook retry token session "
         "deploy rollback metric trace budget schema").split()
QUERIES = ["cache", "cache pool", "queue retry webhook", "index vacuum lock shard", "tenant policy",
           "deploy rollback metric", "session token cache", "schema"]


def corpus(team, *, rows=120, seed=3, extra_words=0):
    """Lessons whose titles and descriptions draw on a small vocabulary, so that every posting list
    is longer than the small heads the tests use and term frequencies and lengths vary."""
    rng = random.Random(seed)
    lessons = []
    for _ in range(rows):
        title = " ".join(rng.choices(WORDS, k=rng.randint(1, 4)))
        body = " ".join(rng.choices(WORDS, k=rng.randint(2, 30) + extra_words))
        lessons.append(LessonFactory.build(team=team, title=title, description=body, recommendation="",
                                           category="zzz"))
    Lesson.objects.bulk_create(lessons)  # the triggers index each row all the same


def leg(team, query, *, head, limit=10, filter_sql="t.team_id = %s", filter_params=None):
    sql, params = keyword_leg_sql(kind="lessons", team_id=team.id, query=query, filter_sql=filter_sql,
                                  filter_params=[team.id] if filter_params is None else filter_params,
                                  limit=limit, head=head)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def ranking(rows):
    """(score, id) best first, scores rounded: the heads add a row's terms in another order than
    the scan, so equal scores may differ in the last bits and swap two tied rows."""
    return sorted(((round(row[1], 9), row[0]) for row in rows if row[0] is not None), key=lambda p: (-p[0], p[1]))


def test_a_proved_answer_is_the_whole_list_scans_top_k(team):
    corpus(team)
    proved_with_cut_heads = 0
    for query in QUERIES:
        scan = ranking(leg(team, query, head=None, limit=10))
        for head in (12, 25, 60):
            rows = leg(team, query, head=head, limit=10)
            if all(row[5] for row in rows):
                assert ranking(rows) == scan, (query, head)
                proved_with_cut_heads += 1
    # the shortcut was exercised, not only the whole lists: every list here is longer than 60
    assert proved_with_cut_heads >= 8


def test_an_unproved_answer_is_flagged_and_replaced_by_the_scan_when_asked(team):
    corpus(team)
    # one row may pass the filter: the heads cannot find k rows, so they cannot prove anything
    wanted = LessonFactory(team=team, title="cache pool", description="cache", category="rare")
    restrictive = dict(filter_sql="t.team_id = %s AND t.category = %s", filter_params=[team.id, "rare"])
    rows = leg(team, "cache pool", head=12, **restrictive)
    assert not any(row[5] for row in rows)

    common = dict(kind="lessons", team_id=team.id, query="cache pool", limit=10, head=12, **restrictive)
    assert [c.id for c in keyword_candidates(**common, fallback=True)] == [wanted.id]
    kept = keyword_candidates(**common, fallback=False)
    assert all(not c.certain for c in kept)


def test_an_empty_unproved_answer_still_says_so(team):
    corpus(team)
    rows = leg(team, "cache", head=12, filter_sql="t.team_id = %s AND t.category = %s",
               filter_params=[team.id, "nothing-has-this"])
    assert rows == [(None, None, None, None, None, False, False, None)]


def test_the_search_reports_an_unproved_keyword_leg(team):
    corpus(team, rows=900)  # a search's leg reads at least 8 x 50 postings a term: lists must be longer
    with override_settings(SEARCH_KEYWORD_HEAD=12, SEARCH_KEYWORD_EXACT_FALLBACK=False, SEARCH_KEYWORD_SCAN_RATIO=0):
        # no row passes, and a date is not in the postings' signatures: the heads find fewer than k
        unproved = search(request=SearchRequest(team=team, query="cache pool", mode="text", limit=5,
                                                filters=SearchFilters(until=timezone.now() - timedelta(days=1))))
        assert unproved.candidates.get("keyword_unproved") == 1
        # a category no row has: no posting's signature admits it, so the empty answer is proved
        none_there = search(request=SearchRequest(team=team, query="cache pool", mode="text", limit=5,
                                                  filters=SearchFilters(categories=("rare",))))
        assert "keyword_unproved" not in none_there.candidates
    with override_settings(SEARCH_KEYWORD_HEAD=5000):
        proved = search(request=SearchRequest(team=team, query="cache pool", mode="text", limit=5))
    assert "keyword_unproved" not in proved.candidates


def test_the_default_leg_scans_a_query_whose_lists_are_short_next_to_its_heads(team):
    """The plan, from the stored document frequencies: when the query's terms have at most
    SEARCH_KEYWORD_SCAN_RATIO times the postings their heads would read, every posting is scored
    (exact, nothing to prove); above that the heads are read."""
    corpus(team)
    wanted = LessonFactory(team=team, title="cache pool", description="cache", category="rare")
    restrictive = dict(kind="lessons", team_id=team.id, query="cache pool", limit=1,  # heads of max(12, 8 x 1)
                       filter_sql="t.team_id = %s AND t.category = %s", filter_params=[team.id, "rare"])
    with connection.cursor() as cursor:  # the English stems and the word as written
        cursor.execute("SELECT sum(df), sum(least(df, 12)) FROM lessons_keyword_df WHERE kind = 'l'"
                       " AND team_id = %s AND lexeme IN ('cach', 'cache', 'pool')", [team.id])
        postings, in_heads = (int(value) for value in cursor.fetchone())
    assert postings > in_heads  # the heads of 12 are cut: alone they could not prove this answer
    plan = dict(kind="lessons", team_id=team.id, query="cache pool", limit=1)
    with override_settings(SEARCH_KEYWORD_HEAD=12, SEARCH_KEYWORD_SCAN_RATIO=postings / in_heads):
        assert keyword_plan(**plan) is None
        scanned = keyword_candidates(**restrictive, fallback=False)
    assert [(c.id, c.certain, c.scanned) for c in scanned] == [(wanted.id, True, True)]  # exact, and says so
    with override_settings(SEARCH_KEYWORD_HEAD=12, SEARCH_KEYWORD_SCAN_RATIO=postings / in_heads * 0.99):
        assert keyword_plan(**plan) == 12
        from_heads = keyword_candidates(**restrictive, fallback=False)
    assert from_heads == keyword_candidates(**{**restrictive, "head": 12}, fallback=False)
    assert from_heads and not any(c.certain or c.scanned for c in from_heads)  # the heads' verdict: not proved


def test_impacts_follow_the_reference_and_drift_keeps_answers_exact(team):
    corpus(team, rows=60)
    corpus(team, rows=60, seed=4, extra_words=60)  # much longer rows: the average length grows
    state = keyword_index_state(team=team, kind="lessons")
    assert state.drift > 1.2  # impacts were written with the first row's length
    for query in QUERIES:
        rows = leg(team, query, head=25)
        if all(row[5] for row in rows):
            assert ranking(rows) == ranking(leg(team, query, head=None))

    rewritten = keyword_impacts_refresh(team=team, kind="lessons")
    assert rewritten == sum(len(Lesson.objects.get(pk=pk).search_vector.split())
                            for pk in Lesson.objects.filter(team=team).values_list("pk", flat=True))
    assert keyword_index_state(team=team, kind="lessons").drift == pytest.approx(1.0)
    k1, b, w = bm25_parameters()
    with connection.cursor() as cursor:  # every impact is the formula's, with today's length and parameters
        cursor.execute(
            """SELECT max(abs(p.impact - (tfw / (tfw + %s * (1 - %s + %s * lenw / r.avglen)))))
                 FROM (SELECT impact, %s * tf_a + %s * tf_b + %s * tf_c + %s * tf_d AS tfw,
                              %s * len_a + %s * len_b + %s * len_c + %s * len_d AS lenw, kind, team_id
                         FROM lessons_keyword_posting WHERE kind = 'l' AND team_id = %s) AS p
                 JOIN lessons_keyword_reference AS r ON r.kind = p.kind AND r.team_id = p.team_id""",
            [k1, b, b, *(w[f] for f in "ABCD"), *(w[f] for f in "ABCD"), team.id],
        )
        assert cursor.fetchone()[0] < 1e-6


@pytest.mark.parametrize("kind", ["lessons", "memories"])
def test_a_new_teams_first_rows_get_impacts_of_the_configured_defaults(team, kind):
    """The database writes a new team's reference with defaults of its own (lessons_keyword_apply);
    when they differ from the settings' every search of that team is an unproved whole-list scan
    until a refresh. The settings here are the shipped defaults (no SEARCH_BM25_* in the test run)."""
    if kind == "lessons":
        LessonFactory(team=team, title="cache stampede after a deploy")
    else:
        MemoryFactory(team=team, content="the cache fell over after the deploy")
    state = keyword_index_state(team=team, kind=kind)
    assert state.rows == 1 and state.parameters_current
    k1, b, w = bm25_parameters()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT k1, b, w_a, w_b, w_c, w_d FROM lessons_keyword_reference WHERE kind = %s AND team_id = %s",
            [TABLES[kind][0], team.id],
        )
        assert cursor.fetchone() == pytest.approx((k1, b, w["A"], w["B"], w["C"], w["D"]))


def test_changed_bm25_parameters_are_never_trusted_until_refreshed(team):
    corpus(team, rows=40)
    with override_settings(SEARCH_BM25={"K1": 2.0, "B": 0.75}):
        assert not any(row[5] for row in leg(team, "cache", head=1000))  # impacts of other parameters
        assert keyword_index_state(team=team, kind="lessons").needs_refresh(threshold=1.2)
        call_command("refresh_keyword_impacts", "--team", team.slug, "--kind", "lessons")
        assert all(row[5] for row in leg(team, "cache", head=1000))


def test_counters_are_the_sums_of_their_shards_through_writes(team, other_team):
    corpus(team, rows=30)
    lessons = list(Lesson.objects.filter(team=team))
    lesson_update(lesson=lessons[0], title="entirely new words")
    lesson_delete(lesson=lessons[1])
    Lesson.objects.filter(pk=lessons[2].pk).update(team=other_team)  # moves its postings and counts
    with connection.cursor() as cursor:  # another writer's shard, as a second session would leave it
        cursor.execute("""INSERT INTO lessons_keyword_stats (kind, team_id, shard, doc_count, len_a, len_b, len_c, len_d)
                          VALUES ('l', %s, 7, 0, 0, 0, 0, 0) ON CONFLICT DO NOTHING""", [team.id])
        for each in (team, other_team):
            cursor.execute("SELECT sum(doc_count) FROM lessons_keyword_stats WHERE kind = 'l' AND team_id = %s",
                           [each.id])
            assert cursor.fetchone()[0] == Lesson.objects.filter(team=each).count()
            cursor.execute(
                """SELECT count(*) FROM (
                       SELECT lexeme, count(*) AS n FROM lessons_keyword_posting
                        WHERE kind = 'l' AND team_id = %s GROUP BY lexeme) AS p
                   FULL JOIN (SELECT lexeme, sum(df) AS n FROM lessons_keyword_df
                               WHERE kind = 'l' AND team_id = %s GROUP BY lexeme HAVING sum(df) <> 0) AS d
                     USING (lexeme)
                  WHERE p.n IS DISTINCT FROM d.n""",
                [each.id, each.id],
            )
            assert cursor.fetchone()[0] == 0  # every term's df is its posting count


def test_refresh_command_reports_what_it_did_and_refuses_bad_input(team, capsys):
    corpus(team, rows=20)
    corpus(team, rows=20, seed=5, extra_words=80)
    call_command("refresh_keyword_impacts", "--team", team.slug)
    out = capsys.readouterr().out
    assert f"{team.slug} lessons: 40 rows, drift" in out and "refreshed 1 team index(es)" in out
    call_command("refresh_keyword_impacts", "--team", team.slug)
    assert "refreshed 0 team index(es)" in capsys.readouterr().out  # nothing drifted since
    with pytest.raises(CommandError, match="--team: no team"):
        call_command("refresh_keyword_impacts", "--team", "nobody")
    for threshold in ("0.5", "nan"):  # nan was accepted, and refreshed nothing
        with pytest.raises(CommandError, match="--threshold"):
            call_command("refresh_keyword_impacts", "--threshold", threshold)


def _temp_blocks_written(plan: dict) -> int:
    return plan.get("Temp Written Blocks", 0) + sum(_temp_blocks_written(child) for child in plan.get("Plans", []))


def test_the_heads_keep_their_per_row_aggregates_in_memory(team):
    """PostgreSQL plans an array_agg group at 8 kB, so with the default work_mem the heads' hash of
    more than about 1,000 rows spilled to temporary files; the leg's own work_mem keeps it in memory."""
    corpus(team, rows=1500, extra_words=4)
    sql, params = keyword_leg_sql(kind="lessons", team_id=team.id, query="cache pool queue", filter_sql="t.team_id = %s",
                                  filter_params=[team.id], limit=50, head=1500)
    written = {}
    with connection.cursor() as cursor:
        for setting in ("RESET work_mem; ", keyword_session_sql()):
            cursor.execute(setting + "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params)
            while cursor.description is None and cursor.nextset():
                pass
            written[setting] = _temp_blocks_written(cursor.fetchone()[0][0]["Plan"])
    assert written["RESET work_mem; "] > 0  # the default spills: this test measures something
    assert written[keyword_session_sql()] == 0


@pytest.mark.django_db(transaction=True)  # outside a transaction, as a web request runs a search
def test_the_legs_memory_setting_ends_with_its_statement(team):
    corpus(team, rows=30)
    with connection.cursor() as cursor:
        cursor.execute("SHOW work_mem")
        before = cursor.fetchone()[0]
    search(request=SearchRequest(team=team, query="cache pool", mode="text"))
    keyword_candidates(kind="lessons", team_id=team.id, query="cache pool", filter_sql="t.team_id = %s",
                       filter_params=[team.id], limit=10)
    with connection.cursor() as cursor:
        cursor.execute("SHOW work_mem")
        assert cursor.fetchone()[0] == before
