"""The batched backfill: pk-ordered batches of pending rows, each committed on its own."""

import numpy as np
import pytest
from django.test import override_settings

from lessons.embedding import EmbeddingUnavailable
from lessons.models import Lesson, Memory
from lessons.selectors.embeddings import with_embedding_status
from lessons.services.embeddings import embedding_backfill, embedding_refresh, embeddings_deferred
from lessons.services.lessons import lesson_create, lesson_update
from lessons.services.memories import memory_create, memory_update

pytestmark = pytest.mark.django_db

TOPICS = [
    ("Rotate leaked keys at once", "A key in a public repo was abused.", "Revoke first, investigate after."),
    ("Index foreign keys", "Deleting parents scanned the child table.", "Add an index on every foreign key."),
    ("Pin base images", "A new upstream image broke the build.", "Pin images by digest."),
    ("Retry with jitter", "Clients retried in lockstep and overloaded the API.", "Add random jitter to backoff."),
    ("Feature flags need owners", "Old flags piled up.", "Give every flag an owner and an expiry date."),
]


def make_lessons(team, count=len(TOPICS)) -> list[Lesson]:
    with embeddings_deferred():
        return [
            lesson_create(team=team, title=title, description=description, recommendation=recommendation)
            for title, description, recommendation in TOPICS[:count]
        ]


def statuses(model) -> dict[int, str]:
    return dict(with_embedding_status(queryset=model.objects.all()).values_list("pk", "embedding_status"))


def test_backfill_embeds_missing_and_stale_in_pk_ordered_batches(team):
    lessons = make_lessons(team)
    calls = []
    report = embedding_backfill(
        kind="lessons", batch_size=2, progress=lambda advance, total: calls.append((advance, total))
    )
    assert (report.pending, report.embedded, report.already_fresh, report.failed) == (5, 5, 0, 0)
    assert calls == [(0, 5), (2, 5), (2, 5), (1, 5)]
    assert set(statuses(Lesson).values()) == {"fresh"}
    stamps = dict(Lesson.objects.values_list("pk", "embedded_at"))
    # Batches go in primary-key order and each has its own write (and time stamp).
    ordered = [stamps[lesson.pk] for lesson in sorted(lessons, key=lambda lesson: lesson.pk)]
    assert ordered == sorted(ordered) and ordered[0] < ordered[2] < ordered[4]

    lesson_update(lesson=lessons[3], recommendation="Use full jitter.")
    report = embedding_backfill(kind="lessons", batch_size=2)
    assert (report.pending, report.embedded, report.already_fresh) == (1, 1, 4)
    assert Lesson.objects.get(pk=lessons[0].pk).embedded_at == stamps[lessons[0].pk]  # not embedded twice


def test_include_fresh_re_embeds_everything_and_dry_run_writes_nothing(team):
    make_lessons(team, 3)
    dry = embedding_backfill(kind="all", dry_run=True)
    assert (dry.pending, dry.embedded) == (3, 0)
    assert set(statuses(Lesson).values()) == {"missing"}
    embedding_backfill()
    before = dict(Lesson.objects.values_list("pk", "embedded_at"))
    report = embedding_backfill(include_fresh=True)
    assert (report.pending, report.embedded, report.already_fresh) == (3, 3, 0)
    after = dict(Lesson.objects.values_list("pk", "embedded_at"))
    assert all(after[pk] > before[pk] for pk in before)


def test_backfill_scopes_by_kind_team_and_ids(team, other_team):
    ours = make_lessons(team, 2)
    theirs = make_lessons(other_team, 2)
    with embeddings_deferred():
        memory = memory_create(team=team, content="Ana runs on Sundays")
    assert embedding_backfill(kind="lessons", team=team).embedded == 2
    assert statuses(Lesson)[theirs[0].pk] == "missing"
    assert statuses(Memory) == {memory.pk: "missing"}
    assert embedding_backfill(kind="lessons", ids=[theirs[1].pk]).embedded == 1
    assert statuses(Lesson)[theirs[0].pk] == "missing"
    assert embedding_backfill(kind="memories").embedded == 1
    assert {statuses(Lesson)[lesson.pk] for lesson in ours} == {"fresh"}


def test_backfill_covers_memory_versions_that_never_had_an_embedding(team):
    with embeddings_deferred():
        memory = memory_create(team=team, content="Tom plays bass")
        memory = memory_update(memory=memory, content="Tom plays double bass")
    version = Memory.objects.get(current_version=memory)
    assert statuses(Memory) == {memory.pk: "missing", version.pk: "missing"}
    assert embedding_backfill(kind="memories").embedded == 2
    assert statuses(Memory) == {memory.pk: "fresh", version.pk: "fresh"}


@pytest.mark.django_db(transaction=True)
def test_interrupted_backfill_keeps_its_finished_batches_and_resumes(team):
    """Really committed (transactional test): Ctrl-C after the first batch keeps that batch; the
    re-run embeds only the rest."""
    lessons = make_lessons(team)

    def interrupt_after_first_batch(advance, total):
        if advance:
            raise KeyboardInterrupt

    interrupted = embedding_backfill(kind="lessons", batch_size=2, progress=interrupt_after_first_batch)
    assert interrupted.interrupted and (interrupted.pending, interrupted.embedded) == (5, 2)  # a report, no traceback
    first_two = sorted(lesson.pk for lesson in lessons)[:2]
    done = {pk for pk, status in statuses(Lesson).items() if status == "fresh"}
    assert done == set(first_two)
    stamps = dict(Lesson.objects.filter(pk__in=first_two).values_list("pk", "embedded_at"))

    report = embedding_backfill(kind="lessons", batch_size=2)
    assert (report.pending, report.embedded, report.already_fresh) == (3, 3, 2)
    assert set(statuses(Lesson).values()) == {"fresh"}
    assert dict(Lesson.objects.filter(pk__in=first_two).values_list("pk", "embedded_at")) == stamps


@pytest.mark.parametrize(
    "edit",
    [{"title": "Rotate leaked keys within the hour"}, {"tags": ["secrets"]}, {"tech_stacks": ["vault"]}],
    ids=["title", "tags", "tech_stacks"],
)
def test_an_edit_made_while_embedding_is_not_overwritten(team, django_capture_on_commit_callbacks, edit):
    """A worker reads the row, the model works, a curator saves a new text (or new tags, which are
    embedded too) meanwhile, then the worker writes: the guarded write refuses, the row stays
    stale, and the edit's own task fixes it."""
    (lesson,) = make_lessons(team, 1)
    embedding_backfill(kind="lessons")
    original = Lesson.objects.get(pk=lesson.pk)
    read_by_worker = Lesson.objects.get(pk=lesson.pk)  # holds the text as it was before the edit

    with django_capture_on_commit_callbacks(execute=False) as edit_tasks:
        lesson_update(lesson=Lesson.objects.get(pk=lesson.pk), **edit)
    report = embedding_refresh(items=[read_by_worker])
    assert (report.embedded, report.changed_ids) == (0, [lesson.pk])
    row = Lesson.objects.get(pk=lesson.pk)
    assert {name: getattr(row, name) for name in edit} == edit
    np.testing.assert_array_equal(np.asarray(row.embedding), np.asarray(original.embedding))
    assert statuses(Lesson) == {lesson.pk: "stale"}

    for run in edit_tasks:
        run()
    assert statuses(Lesson) == {lesson.pk: "fresh"}


def test_backfill_with_the_model_off_raises_before_writing(team):
    make_lessons(team, 2)
    with override_settings(EMBEDDINGS_ENABLED=False):
        assert embedding_backfill(dry_run=True).pending == 2  # counting needs no model
        with pytest.raises(EmbeddingUnavailable, match="turned off"):
            embedding_backfill()
    assert set(statuses(Lesson).values()) == {"missing"}


@pytest.mark.parametrize("arguments, message", [({"kind": "notes"}, "kind"), ({"batch_size": 0}, "batch_size")])
def test_backfill_refuses_bad_arguments(arguments, message):
    with pytest.raises(ValueError, match=message):
        embedding_backfill(**arguments)


def test_a_failing_encode_fails_only_its_batch(team):
    """The backfill encodes several batches in one call; when that call fails it retries batch by
    batch, so one bad input costs its own batch, not the whole window."""
    with embeddings_deferred():
        lessons = [lesson_create(team=team, title=f"Ordinary lesson {n}") for n in range(5)]
        lesson_update(lesson=lessons[2], title="A POISON lesson")
    ordered = sorted(lesson.pk for lesson in lessons)
    poison = {"BACKEND": "tests.embedding_backends.CrashesOnPoisonBackend", "BATCH_SIZE": 64}
    with override_settings(EMBEDDING_BACKEND=poison):
        report = embedding_backfill(kind="lessons", batch_size=2)
        assert (report.embedded, report.failed_ids) == (3, {"lessons": ordered[2:4]})
        assert report.failure_reasons == ["embedding failed: the encoder crashed"]
        assert sorted(pk for pk, status in statuses(Lesson).items() if status == "missing") == ordered[2:4]
