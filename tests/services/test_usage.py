"""Recording searches and agents' feedback (lessons/services/usage.py), on the real database."""

import threading
import uuid
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from lessons.models import Lesson, Memory, SearchFeedback, SearchRecord
from lessons.services.curation import lesson_merge, memory_merge
from lessons.services.usage import feedback_record, search_record, searches_purge, usage_reset
from tests.factories import LessonFactory, MemoryFactory

pytestmark = pytest.mark.django_db


def record(team, ids, *, kind="lessons", **kwargs):
    return search_record(team=team, kind=kind, operation="search", query="q", mode="hybrid", result_ids=ids,
                         source="api", **kwargs)


def counts(model, pk):
    row = model.objects.get(pk=pk)
    return row.returned_count, row.used_count, row.not_helpful_count


def test_search_record_keeps_the_search_and_counts_returns_in_one_statement(team, other_team):
    a, b, c = LessonFactory(team=team), LessonFactory(team=team), LessonFactory(team=team)
    stranger = LessonFactory(team=other_team)
    updated_before = Lesson.objects.get(pk=a.pk).updated_at
    with CaptureQueriesContext(connection) as queries:
        search_id = record(team, [b.pk, a.pk, stranger.pk])
    writes = [q["sql"] for q in queries.captured_queries if "INSERT" in q["sql"] or "UPDATE" in q["sql"]]
    assert len(writes) == 1 and "= ANY(" in writes[0]
    saved = SearchRecord.objects.get(pk=search_id)
    assert (saved.team, saved.kind, saved.query, saved.mode, saved.source) == (team, "lessons", "q", "hybrid", "api")
    assert saved.result_ids == [b.pk, a.pk, stranger.pk]  # in the order returned
    assert counts(Lesson, a.pk) == (1, 0, 0) and counts(Lesson, b.pk) == (1, 0, 0)
    assert counts(Lesson, c.pk) == (0, 0, 0)
    assert counts(Lesson, stranger.pk) == (0, 0, 0)  # another team's row is never counted
    assert Lesson.objects.get(pk=a.pk).last_returned_at is not None
    assert Lesson.objects.get(pk=a.pk).updated_at == updated_before  # a count is not an edit
    record(team, [a.pk])
    assert counts(Lesson, a.pk) == (2, 0, 0)


def test_search_record_counts_memories_on_their_table(team):
    memory = MemoryFactory(team=team)
    search_id = record(team, [memory.pk], kind="memories")
    assert SearchRecord.objects.get(pk=search_id).kind == "memories"
    assert counts(Memory, memory.pk) == (1, 0, 0)


def test_an_empty_answer_is_recorded_too(team):
    search_id = record(team, [])
    assert SearchRecord.objects.get(pk=search_id).result_ids == []
    with pytest.raises(ValidationError) as error:
        feedback_record(team=team, search_id=search_id, used=[1])
    assert "used" in error.value.message_dict


def test_feedback_counts_used_and_not_helpful_once_per_result(team):
    a, b, c = LessonFactory(team=team), LessonFactory(team=team), LessonFactory(team=team)
    search_id = record(team, [a.pk, b.pk, c.pk])
    result = feedback_record(team=team, search_id=search_id, used=[a.pk, a.pk], not_helpful=[c.pk])
    assert result.as_dict() == {
        "search_id": str(search_id), "recorded": {"used": [a.pk], "not_helpful": [c.pk]}, "already_recorded": [],
        "merged": [], "gone": [], "versions": [],
    }
    assert counts(Lesson, a.pk) == (1, 1, 0) and counts(Lesson, c.pk) == (1, 0, 1)
    assert Lesson.objects.get(pk=a.pk).last_used_at is not None
    # The same report again, and a change of mind: nothing counts twice, the first verdict stands.
    again = feedback_record(team=team, search_id=search_id, used=[a.pk, b.pk], not_helpful=[])
    assert again.used == [b.pk] and again.already_recorded == [a.pk]
    flipped = feedback_record(team=team, search_id=search_id, used=[c.pk])
    assert flipped.used == [] and flipped.already_recorded == [c.pk]
    assert counts(Lesson, a.pk) == (1, 1, 0) and counts(Lesson, b.pk) == (1, 1, 0) and counts(Lesson, c.pk) == (1, 0, 1)
    assert SearchFeedback.objects.filter(search_id=search_id).count() == 3


def test_a_second_search_may_count_the_same_result_again(team):
    a = LessonFactory(team=team)
    for _ in range(2):
        feedback_record(team=team, search_id=record(team, [a.pk]), used=[a.pk])
    assert counts(Lesson, a.pk) == (2, 2, 0)


def test_another_teams_search_does_not_exist(team, other_team):
    a = LessonFactory(team=other_team)
    search_id = record(other_team, [a.pk])
    with pytest.raises(SearchRecord.DoesNotExist):
        feedback_record(team=team, search_id=search_id, used=[a.pk])
    with pytest.raises(SearchRecord.DoesNotExist):
        feedback_record(team=team, search_id=uuid.uuid4(), used=[])
    assert counts(Lesson, a.pk) == (1, 0, 0)


def test_ids_not_returned_or_given_two_verdicts_are_refused_and_nothing_is_written(team):
    a, b = LessonFactory(team=team), LessonFactory(team=team)
    search_id = record(team, [a.pk])
    with pytest.raises(ValidationError) as error:
        feedback_record(team=team, search_id=search_id, used=[a.pk], not_helpful=[b.pk])
    assert list(error.value.message_dict) == ["not_helpful"]
    assert str(b.pk) in error.value.message_dict["not_helpful"][0]
    with pytest.raises(ValidationError) as error:
        feedback_record(team=team, search_id=search_id, used=[a.pk], not_helpful=[a.pk])
    assert "not_helpful" in error.value.message_dict
    assert counts(Lesson, a.pk) == (1, 0, 0)
    assert not SearchFeedback.objects.exists()


def test_purge_forgets_old_searches_and_their_feedback_but_keeps_the_counts(team):
    a = LessonFactory(team=team)
    old = record(team, [a.pk], now=timezone.now() - timedelta(days=40))
    feedback_record(team=team, search_id=old, used=[a.pk])
    recent = record(team, [a.pk])
    assert searches_purge(older_than_days=30, dry_run=True) == 1
    assert SearchRecord.objects.count() == 2
    assert searches_purge(older_than_days=30) == 1
    assert list(SearchRecord.objects.values_list("pk", flat=True)) == [recent]
    assert not SearchFeedback.objects.exists()
    assert counts(Lesson, a.pk) == (2, 1, 0)
    with pytest.raises(SearchRecord.DoesNotExist):
        feedback_record(team=team, search_id=old, used=[a.pk])


def test_usage_reset_zeroes_one_team(team, other_team):
    a, theirs = LessonFactory(team=team), LessonFactory(team=other_team)
    feedback_record(team=team, search_id=record(team, [a.pk]), used=[a.pk])
    feedback_record(team=other_team, search_id=record(other_team, [theirs.pk]), used=[theirs.pk])
    usage_reset(team=team)
    assert counts(Lesson, a.pk) == (0, 0, 0)
    assert Lesson.objects.get(pk=a.pk).last_used_at is None
    assert not SearchRecord.objects.filter(team=team).exists()
    assert counts(Lesson, theirs.pk) == (1, 1, 0)


def test_counts_survive_an_edit_made_from_a_stale_copy(team):
    from lessons.services.lessons import lesson_update

    stale = LessonFactory(team=team)
    feedback_record(team=team, search_id=record(team, [stale.pk]), used=[stale.pk])
    lesson_update(lesson=stale, title="A new title")  # `stale` still holds count 0 in memory
    assert counts(Lesson, stale.pk) == (1, 1, 0)


def test_a_search_that_cannot_be_recorded_is_answered_without_an_id(team, caplog):
    a = LessonFactory(team=team)
    refused = search_record(team=team, kind="lessons", operation="search", query="q", mode="m" * 30,
                            result_ids=[a.pk], source="api")  # longer than the column: the database refuses
    assert refused is None
    assert "could not record a search" in caplog.text
    assert not SearchRecord.objects.exists()
    assert counts(Lesson, a.pk) == (0, 0, 0)  # nothing half-written
    assert record(team, [a.pk]) is not None  # and the connection is still usable


def test_a_verdict_on_a_row_merged_away_since_counts_for_the_row_that_absorbed_it(team):
    """Used on a lesson merged into another after the search: "recorded", and no count moved
    anywhere. The merge record names the row that holds it now (also after a second merge)."""
    kept, merged, third = LessonFactory(team=team), LessonFactory(team=team), LessonFactory(team=team)
    search_id = record(team, [kept.pk, merged.pk, third.pk])
    lesson_merge(keep=kept, merged=[merged])
    result = feedback_record(team=team, search_id=search_id, used=[merged.pk])
    assert (result.used, result.merged, result.gone) == ([merged.pk], {merged.pk: kept.pk}, [])
    assert Lesson.objects.get(pk=kept.pk).used_count == 1
    assert feedback_record(team=team, search_id=search_id, used=[merged.pk]).already_recorded == [merged.pk]

    lesson_merge(keep=third, merged=[Lesson.objects.get(pk=kept.pk)])  # the records move to `third`
    later = feedback_record(team=team, search_id=search_id, not_helpful=[kept.pk])
    assert later.merged == {kept.pk: third.pk}
    assert Lesson.objects.get(pk=third.pk).not_helpful_count == 1


def test_a_verdict_on_a_row_deleted_since_is_not_claimed_as_recorded(team):
    a, b = LessonFactory(team=team), LessonFactory(team=team)
    search_id = record(team, [a.pk, b.pk])
    Lesson.objects.filter(pk=a.pk).delete()
    result = feedback_record(team=team, search_id=search_id, used=[b.pk], not_helpful=[a.pk])
    assert result.as_dict()["recorded"] == {"used": [b.pk], "not_helpful": []}
    assert (result.gone, result.already_recorded) == ([a.pk], [])
    assert list(SearchFeedback.objects.filter(search_id=search_id).values_list("result_id", flat=True)) == [b.pk]
    assert counts(Lesson, b.pk) == (1, 1, 0)


def test_a_memory_merged_away_since_counts_for_the_memory_kept(team):
    kept, merged = MemoryFactory(team=team), MemoryFactory(team=team)
    search_id = record(team, [kept.pk, merged.pk], kind="memories")
    memory_merge(keep=kept, merged=merged)
    result = feedback_record(team=team, search_id=search_id, used=[merged.pk])
    assert result.as_dict()["merged"] == [{"id": merged.pk, "counted_for": kept.pk}]
    assert counts(Memory, kept.pk)[1] == 1


def _at_once(work, *, threads: int) -> list:
    """Run work(i) in `threads` threads released together; what each returned or raised."""
    start = threading.Barrier(threads)
    outcomes = [None] * threads

    def run(i):
        try:
            start.wait(10)
            outcomes[i] = work(i)
        except Exception as error:  # noqa: BLE001 - the test reports what each thread met
            outcomes[i] = error
        finally:
            connection.close()

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    return outcomes


@pytest.mark.django_db(transaction=True)
def test_concurrent_searches_returning_the_same_rows_are_all_recorded(team):
    """Each UPDATE locked its rows in the order it met them in the heap, which moves as rows are
    updated: searches sharing results deadlocked, and most answered without a search_id."""
    rows = [LessonFactory(team=team).pk for _ in range(40)]
    threads, rounds = 8, 12

    def searches(i):
        ordered = rows if i % 2 else rows[::-1]
        return [record(team, ordered[j:] + ordered[:j]) for j in range(rounds)]

    outcomes = _at_once(searches, threads=threads)
    assert all(isinstance(ids, list) and None not in ids for ids in outcomes), outcomes
    assert {counts(Lesson, pk)[0] for pk in rows} == {threads * rounds}


@pytest.mark.django_db(transaction=True)
def test_concurrent_reports_on_the_same_rows_are_all_counted(team):
    """Two reports holding the same rows FOR SHARE then both wanted them FOR UPDATE: a deadlock,
    one report refused as "the database is unavailable" and its verdicts lost."""
    rows = [LessonFactory(team=team).pk for _ in range(12)]
    threads, rounds = 8, 6
    search_ids = [[record(team, rows) for _ in range(rounds)] for _ in range(threads)]

    def reports(i):
        used = rows[: len(rows) // 2] if i % 2 else rows[::-1]
        return [feedback_record(team=team, search_id=search_id, used=used).used for search_id in search_ids[i]]

    outcomes = _at_once(reports, threads=threads)
    assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
    used = {pk: counts(Lesson, pk)[1] for pk in rows}
    assert used == {pk: rounds * (threads if pk in rows[: len(rows) // 2] else threads // 2) for pk in rows}


@pytest.mark.django_db(transaction=True)
def test_a_transaction_ended_by_a_deadlock_is_run_again(team):
    """The backstop for what id order cannot prevent (a report locking a merged row's new holder in
    a second batch): a real deadlock between two transactions, and both end done."""
    from lessons.services.usage import _attempts

    first, second = LessonFactory(team=team).pk, LessonFactory(team=team).pk
    both_hold_one = threading.Barrier(2)
    tries = [0, 0]

    def lock_in_order(i):
        order = (first, second) if i == 0 else (second, first)
        for attempt in _attempts():
            with attempt, transaction.atomic(), connection.cursor() as cursor:
                tries[i] += 1
                cursor.execute("UPDATE lessons_lesson SET used_count = used_count + 1 WHERE id = %s", [order[0]])
                if tries[i] == 1:
                    both_hold_one.wait(10)
                cursor.execute("UPDATE lessons_lesson SET used_count = used_count + 1 WHERE id = %s", [order[1]])
        return tries[i]

    outcomes = _at_once(lock_in_order, threads=2)
    assert sorted(outcomes) == [1, 2]  # one was chosen as the deadlock's victim, and ran again
    assert counts(Lesson, first)[1] == counts(Lesson, second)[1] == 2


@pytest.mark.django_db(transaction=True)
def test_reports_on_searches_made_before_a_merge_do_not_deadlock_with_searches(team):
    """A < B < C, B merged into A, reports of [B, C] alongside searches of [A, C]: a report locked C
    (still present), then A (B's holder) in a second statement, while a search held A and wanted C;
    most reports ended in a deadlock even after the retries, and their verdicts were lost."""
    a, b, c = (LessonFactory(team=team).pk for _ in range(3))
    reporters, per_reporter, searchers, rounds = 8, 5, 6, 12
    search_ids = [[record(team, [a, b, c]) for _ in range(per_reporter)] for _ in range(reporters)]
    lesson_merge(keep=Lesson.objects.get(pk=a), merged=[Lesson.objects.get(pk=b)])

    def work(i):
        if i < reporters:
            return [feedback_record(team=team, search_id=s, used=[b, c]).merged for s in search_ids[i]]
        return [record(team, [c, a]) for _ in range(rounds)]

    outcomes = _at_once(work, threads=reporters + searchers)
    assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
    assert all(None not in ids for ids in outcomes[reporters:]), outcomes
    reports = reporters * per_reporter
    assert counts(Lesson, a)[1] == counts(Lesson, c)[1] == reports


def test_a_verdict_on_every_row_of_a_merge_counts_the_same_before_or_after_it(team):
    """Used [A, B], then B merged into A: A used 2 of 2 (summed by the merge). B merged first, then the
    same report: both verdicts recorded for A, and A counted only one of them (used 1 of 2)."""

    def report_then_merge():
        kept, merged = LessonFactory(team=team), LessonFactory(team=team)
        search_id = record(team, [kept.pk, merged.pk])
        feedback_record(team=team, search_id=search_id, used=[kept.pk, merged.pk])
        other_id = record(team, [kept.pk, merged.pk])
        feedback_record(team=team, search_id=other_id, not_helpful=[kept.pk, merged.pk])
        lesson_merge(keep=kept, merged=[merged])
        return counts(Lesson, kept.pk)

    def merge_then_report():
        kept, merged = LessonFactory(team=team), LessonFactory(team=team)
        search_id = record(team, [kept.pk, merged.pk])
        other_id = record(team, [kept.pk, merged.pk])
        lesson_merge(keep=kept, merged=[merged])
        result = feedback_record(team=team, search_id=search_id, used=[kept.pk, merged.pk])
        assert (result.used, result.merged) == ([kept.pk, merged.pk], {merged.pk: kept.pk})
        feedback_record(team=team, search_id=other_id, not_helpful=[kept.pk, merged.pk])
        return counts(Lesson, kept.pk)

    assert report_then_merge() == merge_then_report() == (4, 2, 2)


def test_verdicts_on_several_rows_merged_into_one_memory_count_each(team):
    kept, merged = MemoryFactory(team=team), MemoryFactory(team=team)
    search_id = record(team, [kept.pk, merged.pk], kind="memories")
    memory_merge(keep=kept, merged=merged)
    feedback_record(team=team, search_id=search_id, used=[merged.pk, kept.pk])
    assert counts(Memory, kept.pk) == (2, 2, 0)


@pytest.mark.django_db(transaction=True)
def test_a_merge_committed_while_a_report_waits_for_its_lock_is_followed(team):
    """The report finds B's holder (A) unlocked, then waits for A's lock while A is merged into D: the
    lock finds A gone, and the report looks again and counts for D rather than calling B gone."""
    a, b, d = (LessonFactory(team=team) for _ in range(3))
    search_id = record(team, [a.pk, b.pk, d.pk])
    lesson_merge(keep=a, merged=[b])
    merging = threading.Event()

    def work(i):
        if i == 1:
            merging.wait(10)  # the merge holds A: the report's lookup still sees B in A
            return feedback_record(team=team, search_id=search_id, used=[b.pk])
        with transaction.atomic():
            lesson_merge(keep=Lesson.objects.get(pk=d.pk), merged=[Lesson.objects.get(pk=a.pk)])
            merging.set()
            with connection.cursor() as cursor:
                for _ in range(200):  # until the report waits for A's lock (10 s at most)
                    cursor.execute("SELECT pg_stat_clear_snapshot()")  # else read once per transaction
                    cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                   " AND datname = current_database()")
                    if cursor.fetchone()[0]:
                        break
                    threading.Event().wait(0.05)
                else:
                    raise AssertionError("the report never waited for the merge's lock")

    merged, reported = _at_once(work, threads=2)
    assert merged is None, merged
    assert (reported.used, reported.merged, reported.gone) == ([b.pk], {b.pk: d.pk}, []), reported
    assert counts(Lesson, d.pk)[1] == 1
