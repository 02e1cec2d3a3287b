"""Merging lessons and memories, "not a duplicate", restoring a memory's version."""

from datetime import timedelta

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from lessons.embedding import embedding_text, get_embedding_backend
from lessons.models import MAX_FREQUENCY, DuplicateDismissal, Lesson, LessonMerge, Memory, MemoryMerge
from lessons.services.curation import duplicate_dismiss, lesson_merge, memory_merge, memory_restore_version
from lessons.services.memories import memory_create, memory_update
from tests.curation_data import BASS, CHECKOUT_TESTS, DOCKER_PIN, DOCKER_PIN_AGAIN, FOREIGN_KEYS, embed, lesson

pytestmark = pytest.mark.django_db


def test_merge_sums_frequency_keeps_highest_confidence_and_unions_terms(team):
    kept = lesson(team, DOCKER_PIN, frequency=3, confidence=0.6, tags=["docker", "ci"], tech_stacks=["docker"],
                  project_types=["saas"])
    first = lesson(team, DOCKER_PIN_AGAIN, frequency=2, confidence=0.9, tags=["CI", "builds"],
                   tech_stacks=["docker", "github-actions"], project_types=["api"])
    second = lesson(team, {**DOCKER_PIN_AGAIN, "title": "Pin base images"}, frequency=1, confidence=0.4,
                    tags=["reproducibility"])

    result = lesson_merge(keep=kept, merged=[first, second])

    result.refresh_from_db()
    assert result.pk == kept.pk
    assert result.frequency == 6
    assert result.confidence == 0.9
    assert result.tags == ["docker", "ci", "builds", "reproducibility"]
    assert result.tech_stacks == ["docker", "github-actions"]
    assert result.project_types == ["saas", "api"]
    assert result.title == DOCKER_PIN["title"]  # the kept lesson's own text by default
    assert not Lesson.objects.filter(pk__in=[first.pk, second.pk]).exists()
    records = {record.merged_lesson_id: record for record in LessonMerge.objects.filter(lesson=kept)}
    assert set(records) == {first.pk, second.pk}
    assert records[first.pk].merged_title == DOCKER_PIN_AGAIN["title"]
    assert records[first.pk].merged_fields["frequency"] == 2
    assert records[first.pk].merged_fields["tags"] == ["ci", "builds"]
    assert not any(record.text_kept for record in records.values())


def test_merge_takes_the_text_the_curator_picks_and_re_embeds_it(team, django_capture_on_commit_callbacks):
    kept = lesson(team, DOCKER_PIN, category="deployment")
    other = lesson(team, DOCKER_PIN_AGAIN, category="workflow", context="Every service's Dockerfile.")
    embed(kept, other)
    old_vector = np.asarray(kept.embedding)

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        lesson_merge(keep=kept, merged=[other], text_from=other)

    assert len(callbacks) == 1  # one embedding, queued after the commit
    kept.refresh_from_db()
    assert (kept.title, kept.description, kept.recommendation, kept.context, kept.category) == (
        DOCKER_PIN_AGAIN["title"], DOCKER_PIN_AGAIN["description"], DOCKER_PIN_AGAIN["recommendation"],
        "Every service's Dockerfile.", "workflow",
    )
    expected = get_embedding_backend().embed_documents([embedding_text(kept)])[0]
    np.testing.assert_allclose(np.asarray(kept.embedding), expected, atol=1e-6)
    assert not np.allclose(np.asarray(kept.embedding), old_vector)
    assert LessonMerge.objects.get(lesson=kept).text_kept


def test_merge_keeping_the_text_does_not_re_embed(team, django_capture_on_commit_callbacks):
    kept, other = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN)
    embed(kept, other)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        lesson_merge(keep=kept, merged=[other])
    assert callbacks == []


def test_merge_never_crosses_teams_and_changes_nothing(team, other_team):
    kept = lesson(team, DOCKER_PIN, frequency=2)
    ours = lesson(team, DOCKER_PIN_AGAIN)
    theirs = lesson(other_team, DOCKER_PIN_AGAIN, frequency=5)
    with pytest.raises(ValidationError) as error:
        lesson_merge(keep=kept, merged=[ours, theirs])
    assert "merged" in error.value.message_dict
    assert "another team" in str(error.value)
    assert Lesson.objects.filter(pk__in=[kept.pk, ours.pk, theirs.pk]).count() == 3
    kept.refresh_from_db()
    assert kept.frequency == 2
    assert not LessonMerge.objects.exists()


def test_a_failing_merge_rolls_back_everything(team):
    kept = lesson(team, DOCKER_PIN, frequency=2)
    other = lesson(team, DOCKER_PIN_AGAIN, frequency=3)
    # A tag written behind the services' back, which the kept lesson's validation refuses: the
    # merge fails at its very last step, after the deletes and the records.
    Lesson.objects.filter(pk=other.pk).update(tags=["not allowed!"])
    with pytest.raises(ValidationError) as error:
        lesson_merge(keep=kept, merged=[other])
    assert "tags" in error.value.message_dict
    assert Lesson.objects.filter(pk=other.pk).exists()
    assert not LessonMerge.objects.exists()
    kept.refresh_from_db()
    assert kept.frequency == 2


@pytest.mark.parametrize("case", ["empty", "itself", "text_from_elsewhere"])
def test_merge_refuses_bad_requests_naming_the_field(team, case):
    kept, other, bystander = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN), lesson(team, FOREIGN_KEYS)
    arguments = {
        "empty": ({"merged": []}, "merged"),
        "itself": ({"merged": [kept, other]}, "merged"),
        "text_from_elsewhere": ({"merged": [other], "text_from": bystander}, "text_from"),
    }[case]
    with pytest.raises(ValidationError) as error:
        lesson_merge(keep=kept, **arguments[0])
    assert list(error.value.message_dict) == [arguments[1]]
    assert Lesson.objects.filter(team=team).count() == 3


def test_records_follow_a_lesson_merged_again(team):
    first, second, third = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN), lesson(team, CHECKOUT_TESTS)
    lesson_merge(keep=second, merged=[first])
    lesson_merge(keep=third, merged=[second])
    assert sorted(LessonMerge.objects.filter(lesson=third).values_list("merged_lesson_id", flat=True)) == sorted(
        [first.pk, second.pk]
    )
    third.refresh_from_db()
    assert third.frequency == 3


def test_a_proposal_kept_over_a_confirmed_lesson_becomes_confirmed(team):
    proposal = lesson(team, DOCKER_PIN, status="proposed")
    confirmed = lesson(team, DOCKER_PIN_AGAIN)
    lesson_merge(keep=proposal, merged=[confirmed])
    proposal.refresh_from_db()
    assert proposal.status == "confirmed"
    # ... but merging a proposal into a confirmed lesson leaves it confirmed, and a rejected one
    # merged into a proposal leaves that a proposal.
    another, rejected = lesson(team, FOREIGN_KEYS, status="proposed"), lesson(team, CHECKOUT_TESTS, status="rejected")
    lesson_merge(keep=another, merged=[rejected])
    another.refresh_from_db()
    assert another.status == "proposed"


def test_merging_forgets_the_dismissals_of_deleted_lessons(team):
    kept, other, third = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN), lesson(team, FOREIGN_KEYS)
    duplicate_dismiss(team=team, kind="lesson", first_id=other.pk, second_id=third.pk)
    duplicate_dismiss(team=team, kind="lesson", first_id=kept.pk, second_id=third.pk)
    lesson_merge(keep=kept, merged=[other])
    assert list(DuplicateDismissal.objects.values_list("low_id", "high_id")) == [
        tuple(sorted((kept.pk, third.pk)))
    ]


def test_deleting_a_row_forgets_its_dismissals(team):
    """Only a merge forgot them: a deleted row's marks stayed ("#12 (deleted)" in the admin's marks,
    counted on the duplicates page)."""
    from lessons.services.lessons import lesson_delete, lesson_delete_many
    from lessons.services.memories import memory_delete, memory_delete_many

    first, second, third = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN), lesson(team, FOREIGN_KEYS)
    duplicate_dismiss(team=team, kind="lesson", first_id=first.pk, second_id=second.pk)
    duplicate_dismiss(team=team, kind="lesson", first_id=second.pk, second_id=third.pk)
    a, b, c = (memory_create(team=team, content=text) for text in ("Walk by the lake", "Lake walk", "Dinner"))
    for pair in ((a, b), (b, c), (a, c)):
        duplicate_dismiss(team=team, kind="memory", first_id=pair[0].pk, second_id=pair[1].pk)
    lesson_delete(lesson=first)
    memory_delete(memory=a)
    assert sorted(DuplicateDismissal.objects.values_list("kind", "low_id", "high_id")) == sorted([
        ("lesson", *sorted((second.pk, third.pk))), ("memory", *sorted((b.pk, c.pk)))])
    lesson_delete_many(lessons=[third])
    memory_delete_many(memories=[c])
    assert not DuplicateDismissal.objects.exists()


def test_dismissal_stores_the_pair_ordered_once(team):
    first, second = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN)
    one = duplicate_dismiss(team=team, kind="lesson", first_id=second.pk, second_id=first.pk)
    two = duplicate_dismiss(team=team, kind="lesson", first_id=first.pk, second_id=second.pk)
    assert one.pk == two.pk
    assert (one.low_id, one.high_id) == (min(first.pk, second.pk), max(first.pk, second.pk))
    assert DuplicateDismissal.objects.count() == 1


def test_dismissal_refuses_other_teams_rows_and_bad_pairs(team, other_team):
    ours = lesson(team, DOCKER_PIN)
    theirs = lesson(other_team, DOCKER_PIN_AGAIN)
    with pytest.raises(ValidationError, match=str(theirs.pk)):
        duplicate_dismiss(team=team, kind="lesson", first_id=ours.pk, second_id=theirs.pk)
    with pytest.raises(ValidationError) as error:
        duplicate_dismiss(team=team, kind="lesson", first_id=ours.pk, second_id=ours.pk)
    assert "ids" in error.value.message_dict
    with pytest.raises(ValidationError) as error:
        duplicate_dismiss(team=team, kind="recipe", first_id=ours.pk, second_id=theirs.pk)
    assert "kind" in error.value.message_dict
    assert not DuplicateDismissal.objects.exists()


# --- memories -------------------------------------------------------------------------------------


def test_memory_merge_keeps_one_text_and_unions_the_rest(team):
    kept = memory_create(team=team, content=BASS, categories=["person"], people=["Tom"], importance=4)
    other = memory_create(
        team=team, content="Tom is a bassist.", categories=["interest"], people=["Tom", "Lena"],
        emotions=["proud"], importance=7, occurred_at="2025-03-01T10:00:00Z",
    )
    memory_update(memory=other, content="Tom is a jazz bassist.")  # the other one has a version too
    result = memory_merge(keep=kept, merged=other)

    result.refresh_from_db()
    assert (result.content, result.version) == (BASS, 1)  # the kept text, no new version
    assert result.categories == ["person", "interest"]
    assert result.people == ["Tom", "Lena"]
    assert result.emotions == ["proud"]
    assert result.importance == 7
    assert result.occurred_at is not None
    assert not Memory.objects.filter(pk=other.pk).exists()
    assert not Memory.objects.filter(current_version_id=other.pk).exists()  # its versions went with it
    assert Memory.objects.filter(team=team).count() == 1


def test_a_memory_merge_leaves_a_record_that_follows_the_kept_memory(team):
    kept = memory_create(team=team, content=BASS, people=["Tom"])
    other = memory_create(team=team, content="Tom is a bassist.", people=["Lena"], emotions=["proud"],
                          importance=7, external_id="m-2")
    memory_update(memory=other, content="Tom is a jazz bassist.")
    merged = memory_merge(keep=kept, merged=other)
    (record,) = MemoryMerge.objects.filter(memory=merged)
    assert (record.team_id, record.merged_memory_id, record.merged_content) == (
        team.pk, other.pk, "Tom is a jazz bassist.")
    fields = record.merged_fields
    assert (fields["external_id"], fields["people"], fields["emotions"], fields["importance"]) == (
        "m-2", ["Lena"], ["proud"], 7)
    # its earlier text, deleted with it, is kept in the record
    assert [version["content"] for version in fields["versions"]] == ["Tom is a bassist."]

    third = memory_create(team=team, content="Tom plays bass in a jazz trio")
    memory_merge(keep=third, merged=merged)
    assert sorted(MemoryMerge.objects.filter(memory=third).values_list("merged_memory_id", flat=True)) == sorted(
        [other.pk, kept.pk])


def test_memory_merge_refuses_other_teams_and_earlier_versions(team, other_team):
    kept = memory_create(team=team, content=BASS)
    theirs = memory_create(team=other_team, content=BASS)
    with pytest.raises(ValidationError, match="another team"):
        memory_merge(keep=kept, merged=theirs)
    mine = memory_create(team=team, content="First words")
    memory_update(memory=mine, content="Second words")
    earlier = Memory.objects.get(current_version=mine)
    with pytest.raises(ValidationError, match="earlier version"):
        memory_merge(keep=kept, merged=earlier)
    with pytest.raises(ValidationError, match="itself"):
        memory_merge(keep=kept, merged=kept)
    assert Memory.objects.count() == 4
    assert not MemoryMerge.objects.exists()


def test_restore_makes_an_old_text_current_and_keeps_the_replaced_one(team):
    memory = memory_create(team=team, content="Maria works as a nurse", details="Night shifts.")
    memory_update(memory=memory, content="Maria became a midwife", details="Day shifts.")
    first = Memory.objects.get(current_version=memory, version=1)

    memory_restore_version(memory=memory, version=first)

    memory.refresh_from_db()
    assert (memory.content, memory.details, memory.version) == ("Maria works as a nurse", "Night shifts.", 3)
    history = list(Memory.objects.filter(current_version=memory).order_by("version").values_list("version", "content"))
    assert history == [(1, "Maria works as a nurse"), (2, "Maria became a midwife")]


def test_restore_refuses_a_version_of_another_memory(team):
    one = memory_create(team=team, content="One")
    memory_update(memory=one, content="One, edited")
    two = memory_create(team=team, content="Two")
    with pytest.raises(ValidationError) as error:
        memory_restore_version(memory=two, version=Memory.objects.get(current_version=one))
    assert "version" in error.value.message_dict
    two.refresh_from_db()
    assert (two.content, two.version) == ("Two", 1)


def test_a_merge_that_lost_a_race_says_which_side_went(team):
    kept, other = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN)
    Lesson.objects.filter(pk=other.pk).delete()  # merged or deleted by someone else meanwhile
    with pytest.raises(ValidationError) as error:
        lesson_merge(keep=kept, merged=[other])
    assert list(error.value.message_dict) == ["merged"]
    gone, survivor = lesson(team, FOREIGN_KEYS), lesson(team, CHECKOUT_TESTS)
    Lesson.objects.filter(pk=gone.pk).delete()
    with pytest.raises(Lesson.DoesNotExist, match=f"lesson {gone.pk} does not exist"):
        lesson_merge(keep=gone, merged=[survivor])
    assert Lesson.objects.filter(pk=survivor.pk).exists()


def test_a_rejected_lesson_kept_over_a_confirmed_one_becomes_confirmed(team):
    """A stale duplicates page merged a confirmed lesson into one rejected meanwhile: both vanished
    from every agent's search. A merge never hides confirmed knowledge."""
    rejected = lesson(team, DOCKER_PIN, status="rejected")
    confirmed = lesson(team, DOCKER_PIN_AGAIN)
    kept = lesson_merge(keep=rejected, merged=[confirmed])
    assert Lesson.objects.get(pk=kept.pk).status == "confirmed"
    # Rejected into rejected stays rejected; a proposal merged into a rejected lesson does not revive it.
    again = lesson_merge(keep=lesson(team, CHECKOUT_TESTS, status="rejected"),
                         merged=[lesson(team, FOREIGN_KEYS, status="proposed")])
    assert Lesson.objects.get(pk=again.pk).status == "rejected"


def test_a_merge_keeps_the_usage_of_every_lesson_and_memory(team):
    now = timezone.now()
    kept = lesson(team, DOCKER_PIN)
    used = lesson(team, DOCKER_PIN_AGAIN)
    Lesson.objects.filter(pk=kept.pk).update(returned_count=3, not_helpful_count=1, last_returned_at=now)
    Lesson.objects.filter(pk=used.pk).update(returned_count=5, used_count=2, last_used_at=now - timedelta(days=2),
                                             last_returned_at=now - timedelta(days=1))
    merged = lesson_merge(keep=Lesson.objects.get(pk=kept.pk), merged=[Lesson.objects.get(pk=used.pk)])
    stored = Lesson.objects.get(pk=kept.pk)
    for row in (merged, stored):  # the answer and the database
        assert (row.returned_count, row.used_count, row.not_helpful_count) == (8, 2, 1)
        assert (row.last_returned_at, row.last_used_at) == (now, now - timedelta(days=2))
    first = memory_create(team=team, content="Hiked the ridge with Sam")
    second = memory_create(team=team, content="Ridge hike with Sam")
    Memory.objects.filter(pk=second.pk).update(returned_count=4, used_count=3, last_used_at=now)
    memory_merge(keep=first, merged=Memory.objects.get(pk=second.pk))
    first.refresh_from_db()
    assert (first.returned_count, first.used_count, first.last_used_at) == (4, 3, now)


def test_a_merge_that_changes_none_of_the_kept_lessons_fields_still_moves_its_updated_at(team):
    """Frequency already at its cap, the higher confidence and every tag already the kept lesson's:
    the merge deleted the other and recorded itself, but updated_at (the ETag) stayed."""
    kept = lesson(team, DOCKER_PIN, frequency=MAX_FREQUENCY, confidence=0.9, tags=["x"])
    other = lesson(team, DOCKER_PIN_AGAIN, frequency=MAX_FREQUENCY, confidence=0.1, tags=["x"])
    before = Lesson.objects.get(pk=kept.pk).updated_at
    merged = lesson_merge(keep=kept, merged=[other])
    stored = Lesson.objects.get(pk=kept.pk)
    assert merged.updated_at == stored.updated_at > before
    assert (stored.frequency, stored.confidence, stored.tags) == (MAX_FREQUENCY, 0.9, ["x"])


def test_the_migration_forgets_marks_that_deletes_left_behind(team):
    import importlib

    from django.db import connection

    forget = importlib.import_module("lessons.migrations.0027_forget_deleted_rows_dismissals").FORGET
    kept, other = lesson(team, DOCKER_PIN), lesson(team, DOCKER_PIN_AGAIN)
    duplicate_dismiss(team=team, kind="lesson", first_id=kept.pk, second_id=other.pk)
    left = memory_create(team=team, content="Walk by the lake")
    DuplicateDismissal.objects.create(team=team, kind="lesson", low_id=kept.pk, high_id=other.pk + 10_000)
    DuplicateDismissal.objects.create(team=team, kind="memory", low_id=left.pk, high_id=left.pk + 10_000)
    with connection.cursor() as cursor:
        cursor.execute(forget)
    assert list(DuplicateDismissal.objects.values_list("kind", "low_id", "high_id")) == [
        ("lesson", *sorted((kept.pk, other.pk)))]


def test_a_merge_whose_union_is_too_long_says_so_and_changes_nothing(team):
    """It was refused as "tags: at most 50 entries; got 60", a field the merge request never sent."""
    kept = lesson(team, DOCKER_PIN, tags=[f"kept-{i}" for i in range(30)])
    other = lesson(team, DOCKER_PIN_AGAIN, tags=[f"other-{i}" for i in range(30)])
    with pytest.raises(ValidationError) as error:
        lesson_merge(keep=kept, merged=[other])
    assert error.value.message_dict["tags"] == [
        "the merged lessons together: at most 50 entries; got 60; remove some from them before merging"]
    assert Lesson.objects.filter(pk=other.pk).exists() and not LessonMerge.objects.exists()
    kept.refresh_from_db()
    assert len(kept.tags) == 30

    first = memory_create(team=team, content="Lunch with the whole team", people=[f"Kept {i}" for i in range(40)])
    second = memory_create(team=team, content="Lunch with the team", people=[f"Other {i}" for i in range(40)])
    with pytest.raises(ValidationError) as error:
        memory_merge(keep=first, merged=second)
    assert error.value.message_dict["people"][0].startswith("the merged memories together: at most 50 entries; got 80")
    assert Memory.objects.filter(pk=second.pk).exists() and not MemoryMerge.objects.exists()
