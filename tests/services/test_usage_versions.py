"""Feedback on earlier versions of a memory (`search-versions` hits): a verdict counts for the memory as it
stands, as one on a row merged away counts for the row that absorbed it (lessons/services/usage.py).

Before, the count moved on the version row itself, which no normal search ranks and neither the memory's
answer nor its /versions shows: the feedback was accepted (202) and reached nothing."""

import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from lessons.models import Memory, SearchFeedback
from lessons.services.api_keys import api_key_create
from lessons.services.curation import memory_merge
from lessons.services.memories import memory_create, memory_delete, memory_update
from lessons.services.usage import feedback_record, search_record
from tests.api.conftest import JsonClient
from tests.factories import LessonFactory, MemoryFactory

pytestmark = pytest.mark.django_db


def record(team, ids, *, kind="memories"):
    return search_record(team=team, kind=kind, operation="search_versions", query="q", mode="hybrid",
                         result_ids=ids, source="api")


def counts(pk):
    row = Memory.objects.get(pk=pk)
    return row.returned_count, row.used_count, row.not_helpful_count


def edited(team, text="Planted quince saplings in the orchard"):
    """A memory whose first text is now an earlier version: (the memory, that version)."""
    memory = memory_create(team=team, content=text)
    memory_update(memory=memory, content=f"{text}, and pruned the old pear tree")
    return memory, memory.previous_versions.get()


def test_a_verdict_on_an_earlier_version_counts_for_its_memory(team):
    memory, version = edited(team)
    search_id = record(team, [version.pk])
    result = feedback_record(team=team, search_id=search_id, used=[version.pk])
    assert result.as_dict()["recorded"] == {"used": [version.pk], "not_helpful": []}
    assert result.as_dict()["versions"] == [{"id": version.pk, "counted_for": memory.pk}]
    assert (result.merged, result.gone) == ({}, [])
    assert counts(memory.pk)[1:] == (1, 0) and Memory.objects.get(pk=memory.pk).last_used_at is not None
    # returned and used for its memory (a use without its return scored 0.5 where 0.33 was due)
    assert counts(memory.pk)[0] == 1 and counts(version.pk) == (0, 0, 0)
    # The verdict is kept as given (on the version), once: a repeat counts nothing.
    assert list(SearchFeedback.objects.values_list("result_id", flat=True)) == [version.pk]
    again = feedback_record(team=team, search_id=search_id, used=[version.pk])
    assert (again.used, again.already_recorded, again.versions) == ([], [version.pk], {})
    assert counts(memory.pk)[1] == 1


def test_not_helpful_on_an_earlier_version_counts_for_its_memory(team):
    memory, version = edited(team)
    result = feedback_record(team=team, search_id=record(team, [memory.pk, version.pk]), not_helpful=[version.pk])
    assert result.versions == {version.pk: memory.pk}
    assert counts(memory.pk) == (2, 0, 1) and counts(version.pk) == (0, 0, 0)  # each returned, for the memory


def test_verdicts_on_a_memory_and_its_versions_in_one_report_count_each(team):
    """As for rows merged into one: every verdict recorded counts, also when several reach one memory."""
    memory, first = edited(team)
    memory_update(memory=memory, content="Planted quince and medlar saplings in the orchard")
    second = memory.previous_versions.exclude(pk=first.pk).get()
    other = memory_create(team=team, content="Bought a ladder for the apple harvest")
    result = feedback_record(team=team, search_id=record(team, [second.pk, memory.pk, first.pk, other.pk]),
                             used=[second.pk, memory.pk, first.pk], not_helpful=[other.pk])
    assert result.used == [second.pk, memory.pk, first.pk]
    assert result.versions == {second.pk: memory.pk, first.pk: memory.pk}
    assert counts(memory.pk) == (3, 3, 0)  # three returns and three uses reached it
    assert counts(other.pk) == (1, 0, 1)
    assert counts(first.pk) == counts(second.pk) == (0, 0, 0)


def test_a_version_of_a_memory_edited_again_since_the_search_counts_for_the_memory(team):
    memory, version = edited(team)
    search_id = record(team, [version.pk])
    memory_update(memory=memory, content="The quince saplings took; the pear tree did not")
    assert feedback_record(team=team, search_id=search_id, used=[version.pk]).versions == {version.pk: memory.pk}
    assert counts(memory.pk)[1] == 1


def test_a_version_whose_memory_was_deleted_or_merged_away_since_is_gone(team):
    """A version goes with its memory; the merge record names the memory, not its versions."""
    deleted, deleted_version = edited(team, "Repaired the greenhouse door")
    merged, merged_version = edited(team, "Repotted the lemon tree")
    kept = memory_create(team=team, content="Repotted the lemon tree in spring")
    search_id = record(team, [deleted_version.pk, merged_version.pk, kept.pk])
    memory_delete(memory=deleted)
    memory_merge(keep=kept, merged=merged)
    result = feedback_record(team=team, search_id=search_id, used=[deleted_version.pk, merged_version.pk, kept.pk])
    assert (result.used, result.gone, result.versions, result.merged) == (
        [kept.pk], [deleted_version.pk, merged_version.pk], {}, {})
    assert counts(kept.pk)[1] == 1


def test_lessons_and_current_memories_list_no_versions(team):
    lesson = LessonFactory(team=team)
    memory = MemoryFactory(team=team)
    assert feedback_record(team=team, search_id=record(team, [lesson.pk], kind="lessons"),
                           used=[lesson.pk]).as_dict()["versions"] == []
    assert feedback_record(team=team, search_id=record(team, [memory.pk]), used=[memory.pk]).versions == {}


def test_a_version_and_its_memory_are_locked_in_one_id_ordered_statement(team):
    memory, version = edited(team)
    other = MemoryFactory(team=team)
    search_id = record(team, [other.pk, version.pk])
    with CaptureQueriesContext(connection) as queries:
        feedback_record(team=team, search_id=search_id, used=[other.pk, version.pk])
    locks = [q["sql"] for q in queries.captured_queries if "FOR NO KEY UPDATE" in q["sql"]]
    assert len(locks) == 1 and "ORDER BY id" in locks[0]
    assert all(str(pk) in locks[0] for pk in (memory.pk, version.pk, other.pk))


def _at_once(work, *, threads: int) -> list:
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
def test_reports_on_versions_do_not_deadlock_with_searches_and_count_every_verdict(team):
    """M < C < V (V an earlier version of M): reports of [V, C] lock M, C and V in one statement, while
    searches of [V, C, M] lock the same rows in the same order; no report or search is lost."""
    memory = MemoryFactory(team=team)
    other = MemoryFactory(team=team)
    version = MemoryFactory(team=team, current_version=memory)
    reporters, per_reporter, searchers, rounds = 6, 5, 6, 12
    search_ids = [[record(team, [version.pk, other.pk]) for _ in range(per_reporter)] for _ in range(reporters)]

    def work(i):
        if i < reporters:
            return [feedback_record(team=team, search_id=s, used=[version.pk, other.pk]).versions
                    for s in search_ids[i]]
        return [record(team, [version.pk, other.pk, memory.pk]) for _ in range(rounds)]

    outcomes = _at_once(work, threads=reporters + searchers)
    assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
    assert all(None not in ids for ids in outcomes[reporters:]), outcomes
    assert all(versions == {version.pk: memory.pk} for report in outcomes[:reporters] for versions in report)
    reports = reporters * per_reporter
    assert counts(memory.pk)[1] == counts(other.pk)[1] == reports
    assert counts(version.pk)[1] == 0


def test_the_testers_report_through_the_api(team, django_capture_on_commit_callbacks):
    """The outside tester's steps: create, edit, search-versions, feedback on the old text; the memory's
    own answer now shows the use."""
    api = JsonClient(api_key_create(team=team, name="agent")[1])
    with django_capture_on_commit_callbacks(execute=True):
        created = api.post("/memories", {"content": "Planted quince saplings in the orchard"})
        assert created.status_code == 201, created.content
        memory_id = created.json()["id"]
        edit = api.patch(f"/memories/{memory_id}", {"content": "Planted quince and medlar saplings by the wall"})
        assert edit.status_code == 200, edit.content
    version_id = Memory.objects.get(current_version_id=memory_id).pk

    answer = api.post("/memories/search-versions", {"query": "quince saplings orchard"}).json()
    assert version_id in [hit["id"] for hit in answer["results"]]
    response = api.post("/feedback", {"search_id": answer["search_id"], "used": [version_id]})
    assert response.status_code == 202, response.content
    assert response.json()["recorded"] == {"used": [version_id], "not_helpful": []}
    assert response.json()["versions"] == [{"id": version_id, "counted_for": memory_id}]
    assert response.json()["merged"] == [] and response.json()["gone"] == []
    assert api.get(f"/memories/{memory_id}").json()["used_count"] == 1
