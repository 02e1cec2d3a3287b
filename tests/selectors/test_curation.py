"""Duplicates by meaning (in SQL, on the HNSW index), the proposals queue, a memory's history."""

import pytest
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from lessons.models import Memory
from lessons.selectors import curation
from lessons.selectors.curation import (
    DiffPart,
    lesson_duplicate_pairs,
    memory_duplicate_pairs,
    memory_history,
    proposal_queue,
    word_diff,
)
from lessons.services.curation import duplicate_dismiss
from lessons.services.memories import memory_update
from tests.curation_data import (
    BASS,
    CHECKOUT_TESTS,
    DOCKER_PIN,
    DOCKER_PIN_AGAIN,
    FOREIGN_KEYS,
    PANIC,
    PANIC_AGAIN,
    embed,
    embedded_lessons,
    embedded_memories,
    lesson,
)

pytestmark = pytest.mark.django_db


def pair_ids(pairs):
    return [(pair.first.pk, pair.second.pk) for pair in pairs]


def test_the_paraphrase_is_the_only_pair_closer_than_the_default_threshold(team):
    pin, pin_again, keys, checkout = embedded_lessons(team, DOCKER_PIN, DOCKER_PIN_AGAIN, FOREIGN_KEYS, CHECKOUT_TESTS)
    pairs = lesson_duplicate_pairs(team=team)
    assert pair_ids(pairs) == [(pin.pk, pin_again.pk)]  # ordered low id, high id; once
    assert 0 < pairs[0].distance < curation.DEFAULT_DUPLICATE_THRESHOLD
    assert pairs[0].similarity == pytest.approx(1 - pairs[0].distance)
    # A generous threshold lets unrelated pairs in too, the closest still first.
    loose = lesson_duplicate_pairs(team=team, threshold=1.0)
    assert pair_ids(loose)[0] == (pin.pk, pin_again.pk)
    assert len(loose) > 1
    assert [pair.distance for pair in loose] == sorted(pair.distance for pair in loose)
    assert all(pair.first.pk < pair.second.pk for pair in loose)
    assert len(set(pair_ids(loose))) == len(loose)


def test_duplicates_stay_within_a_team(team, other_team):
    (ours,) = embedded_lessons(team, DOCKER_PIN)
    (theirs,) = embedded_lessons(other_team, DOCKER_PIN_AGAIN)
    assert lesson_duplicate_pairs(team=team, threshold=1.0) == []
    assert lesson_duplicate_pairs(team=other_team, threshold=1.0) == []
    (ours_again,) = embedded_lessons(team, DOCKER_PIN_AGAIN)
    assert pair_ids(lesson_duplicate_pairs(team=team)) == [(ours.pk, ours_again.pk)]
    assert all(theirs.pk not in pair for pair in pair_ids(lesson_duplicate_pairs(team=team, threshold=1.0)))


def test_a_dismissed_pair_stops_showing(team):
    pin, pin_again, keys = embedded_lessons(team, DOCKER_PIN, DOCKER_PIN_AGAIN, FOREIGN_KEYS)
    before = pair_ids(lesson_duplicate_pairs(team=team, threshold=1.0))
    duplicate_dismiss(team=team, kind="lesson", first_id=pin_again.pk, second_id=pin.pk)
    after = pair_ids(lesson_duplicate_pairs(team=team, threshold=1.0))
    assert (pin.pk, pin_again.pk) in before
    assert after == [pair for pair in before if pair != (pin.pk, pin_again.pk)]
    # A memory dismissal with the same ids does not hide the lesson pair.
    panic, panic_again = embedded_memories(team, PANIC, PANIC_AGAIN)
    duplicate_dismiss(team=team, kind="memory", first_id=panic.pk, second_id=panic_again.pk)
    assert pair_ids(lesson_duplicate_pairs(team=team, threshold=1.0)) == after


def test_rejected_lessons_are_left_out_unless_asked_for(team):
    pin = lesson(team, DOCKER_PIN)
    rejected = lesson(team, DOCKER_PIN_AGAIN, status="rejected")
    embed(pin, rejected)
    assert lesson_duplicate_pairs(team=team) == []
    assert pair_ids(lesson_duplicate_pairs(team=team, statuses=("confirmed", "rejected"))) == [(pin.pk, rejected.pk)]


def test_the_pairs_come_from_the_hnsw_index(team):
    embedded_lessons(team, DOCKER_PIN, DOCKER_PIN_AGAIN, FOREIGN_KEYS)
    with CaptureQueriesContext(connection) as queries:
        lesson_duplicate_pairs(team=team)
    statement = next(query["sql"] for query in queries.captured_queries if "LATERAL" in query["sql"])
    with transaction.atomic(), connection.cursor() as cursor:
        curation._vector_settings(cursor)
        cursor.execute("EXPLAIN " + statement)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index Scan using lesson_embedding_hnsw" in plan
    assert "Order By: (embedding <=> a.embedding)" in plan


@pytest.mark.parametrize("arguments, field", [({"threshold": 0}, "threshold"), ({"threshold": 1.5}, "threshold"),
                                               ({"limit": 0}, "limit"), ({"limit": 201}, "limit")])
def test_bad_threshold_or_limit_names_the_field(team, arguments, field):
    with pytest.raises(ValidationError) as error:
        lesson_duplicate_pairs(team=team, **arguments)
    assert list(error.value.message_dict) == [field]


def test_memory_duplicates_are_current_memories_only(team):
    panic, panic_again, bass = embedded_memories(team, PANIC, PANIC_AGAIN, BASS)
    assert pair_ids(memory_duplicate_pairs(team=team, threshold=0.3)) == [(panic.pk, panic_again.pk)]
    # Editing a memory keeps its old text as a version: the version is history, not a duplicate.
    memory_update(memory=bass, content="Tom plays double bass in a jazz band on Fridays.")
    embed(bass, *Memory.objects.filter(current_version=bass))
    assert pair_ids(memory_duplicate_pairs(team=team, threshold=0.3)) == [(panic.pk, panic_again.pk)]


def test_proposals_come_with_their_nearest_confirmed_lessons_of_the_team(team, other_team):
    proposal = lesson(team, DOCKER_PIN_AGAIN, status="proposed")
    confirmed = [lesson(team, fields) for fields in (DOCKER_PIN, FOREIGN_KEYS, CHECKOUT_TESTS)]
    extra = lesson(team, {**FOREIGN_KEYS, "title": "Foreign keys want indexes"})
    rejected = lesson(team, DOCKER_PIN, status="rejected")
    theirs = lesson(other_team, DOCKER_PIN)
    another = lesson(team, FOREIGN_KEYS, status="proposed")
    not_embedded = lesson(team, CHECKOUT_TESTS, status="proposed")
    embed(proposal, *confirmed, extra, rejected, theirs, another)

    queue = proposal_queue(team=team)

    assert [review.proposal.pk for review in queue] == [proposal.pk, another.pk, not_embedded.pk]  # oldest first
    first = queue[0]
    assert len(first.neighbours) == 3
    assert first.neighbours[0].lesson.pk == confirmed[0].pk
    assert first.neighbours[0].similarity > 0.85
    similarities = [neighbour.similarity for neighbour in first.neighbours]
    assert similarities == sorted(similarities, reverse=True)
    allowed = {row.pk for row in (*confirmed, extra)}
    assert all(neighbour.lesson.pk in allowed for review in queue for neighbour in review.neighbours)
    assert queue[2].neighbours == []  # not embedded yet: nothing to compare with
    assert [review.proposal.pk for review in proposal_queue(team=team, limit=1, offset=1)] == [another.pk]


def test_memory_history_runs_oldest_to_newest_with_word_diffs(team):
    (memory,) = embedded_memories(team, "Tom plays bass in a band")
    memory_update(memory=memory, content="Tom plays double bass in a jazz band")
    memory_update(memory=memory, details="Fridays at the Blue Note.")
    earlier = Memory.objects.get(current_version=memory, version=1)

    for start in (memory, earlier):  # from the memory or from one of its versions
        history = memory_history(memory=start)
        assert [(entry.version.version, entry.is_current) for entry in history] == [(1, False), (2, False), (3, True)]
    assert history[0].content_diff is None
    assert history[1].content_diff == [
        DiffPart("equal", "Tom plays"),
        DiffPart("insert", " double"),
        DiffPart("equal", " bass in a "),
        DiffPart("insert", "jazz "),
        DiffPart("equal", "band"),
    ]
    assert history[1].changed
    assert [part.op for part in history[2].content_diff] == ["equal"]
    assert history[2].details_diff == [DiffPart("insert", "Fridays at the Blue Note.")]


def test_word_diff_groups_a_rewritten_run_into_one_change():
    parts = word_diff("Goal: run a half marathon before I turn 35.", "Goal: run a 10k in under an hour.")
    assert parts == [
        DiffPart("equal", "Goal: run a "),
        DiffPart("delete", "half marathon before I turn 35"),
        DiffPart("insert", "10k in under an hour"),
        DiffPart("equal", "."),
    ]
    assert word_diff("same", "same") == [DiffPart("equal", "same")]
    assert word_diff("", "new") == [DiffPart("insert", "new")]
    assert word_diff("<b>old</b>", "") == [DiffPart("delete", "<b>old</b>")]


EXACT_PAIRS_SQL = """
    SELECT a.id, b.id FROM {table} a JOIN {table} b ON a.team_id = b.team_id AND a.id < b.id
     WHERE a.team_id = %s AND a.embedding IS NOT NULL AND b.embedding IS NOT NULL AND {condition}
       AND (a.embedding <=> b.embedding) < %s
     ORDER BY a.embedding <=> b.embedding
"""


@pytest.mark.parametrize("kind", ["lessons", "memories"])
def test_the_index_finds_what_an_exact_comparison_of_every_pair_finds_on_the_demo_data(demo_team, kind):
    threshold = 0.35  # wider than the default, so that there is something to find
    if kind == "lessons":
        table, condition = "lessons_lesson", "a.status <> 'rejected' AND b.status <> 'rejected'"
        found = lesson_duplicate_pairs(team=demo_team, threshold=threshold, limit=200)
    else:
        table, condition = "lessons_memory", "a.current_version_id IS NULL AND b.current_version_id IS NULL"
        found = memory_duplicate_pairs(team=demo_team, threshold=threshold, limit=200)
    with connection.cursor() as cursor:
        cursor.execute(EXACT_PAIRS_SQL.format(table=table, condition=condition), [demo_team.pk, threshold])
        exact = [tuple(row) for row in cursor.fetchall()]
    assert len(exact) >= 2
    assert pair_ids(found) == exact
