"""Curating: merging duplicate lessons (and memories), remembering "not a duplicate", restoring an
earlier version of a memory.

Merging lessons keeps one lesson and deletes the others, in one transaction:
- its text (title, description, context, recommendation, category) comes from the lesson the
  curator picks (`text_from`, the kept lesson itself by default);
- frequency is the sum, confidence the highest, tags / tech stacks / project types the union
  (the kept lesson's terms first, in order);
- status: the kept lesson's, except that a kept proposal or rejected lesson becomes confirmed when
  a confirmed lesson is merged into it (that knowledge was already confirmed; a merge never hides it);
- usage (returned, used and not-helpful counts, the latest dates): the sum over every lesson;
- every merged lesson leaves a `LessonMerge` record on the kept one with its fields as they were;
  records the merged lessons carried themselves move to the kept lesson;
- the kept lesson is re-embedded (after the commit) only when its embedded text changed, through
  `lesson_update` like any other edit.
A merge never crosses teams: a lesson of another team is a ValidationError and nothing changes.

Merging memories is simpler, because a memory's text has a history of its own: the kept memory
keeps its text and its versions; it gains the other's categories, people and emotions, the
higher importance, its date if it had none, and its usage counts; the other memory (with its
versions) is deleted, and leaves a `MemoryMerge` record on the kept one with its fields and its
earlier texts (records it carried itself move to the kept memory).
"""

from collections.abc import Collection
from contextlib import contextmanager
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from lessons.models import (
    MAX_FREQUENCY,
    DuplicateDismissal,
    DuplicateKind,
    Lesson,
    LessonMerge,
    LessonStatus,
    Memory,
    MemoryMerge,
    Team,
)
from lessons.services import lessons as lesson_services
from lessons.services import memories as memory_services
from lessons.services.common import (
    changed_since_opened,
    forget_dismissals,
    normalise_names,
    normalise_terms,
    refuse_changed_since_read,
)

# What the curator picks from one lesson as a whole (the text a reader sees).
MERGED_TEXT_FIELDS = ("title", "description", "context", "recommendation", "category")
SNAPSHOT_FIELDS = (
    "external_id",
    *MERGED_TEXT_FIELDS,
    "confidence",
    "frequency",
    "project_types",
    "tech_stacks",
    "tags",
    "status",
)


def _union(*lists: list[str]) -> list[str]:
    return normalise_terms(term for values in lists for term in values)


def _snapshot(lesson: Lesson) -> dict:
    fields = {name: getattr(lesson, name) for name in SNAPSHOT_FIELDS}
    fields["created_at"] = lesson.created_at.isoformat()
    fields["updated_at"] = lesson.updated_at.isoformat()
    fields["uid"] = str(lesson.uid)  # an import of a backup that still holds it does not bring it back
    return fields


@transaction.atomic
def lesson_merge(
    *, keep: Lesson, merged: list[Lesson], text_from: Lesson | None = None,
    expected_updated_at: datetime | Collection[datetime] | None = None,
) -> Lesson:
    """Merge the lessons `merged` into `keep` (see the module's docstring) and return `keep`.

    Raises ValidationError (naming the field: `merged`, `text_from`) when `merged` is empty,
    contains `keep`, or holds a lesson of another team; when `text_from` is neither `keep` nor
    one of `merged`; or when a lesson no longer exists; ChangedSinceRead when `keep` changed since
    the writer read it (`expected_updated_at`, the API's If-Match). Nothing is changed then."""
    merged_ids = list(dict.fromkeys(lesson.pk for lesson in merged))
    if not merged_ids:
        raise ValidationError({"merged": "Name at least one lesson to merge into this one."})
    if keep.pk in merged_ids:
        raise ValidationError({"merged": f"Lesson {keep.pk} cannot be merged into itself."})
    text_from_id = text_from.pk if text_from is not None else keep.pk
    if text_from_id != keep.pk and text_from_id not in merged_ids:
        raise ValidationError({"text_from": f"Lesson {text_from_id} is neither kept nor merged."})

    # Lock every row involved, in id order (two merges of overlapping lessons cannot deadlock),
    # and work from the stored rows, not from what the caller holds.
    rows = {
        lesson.pk: lesson
        for lesson in Lesson.objects.select_for_update().filter(pk__in=[keep.pk, *merged_ids]).order_by("pk")
    }
    if keep.pk not in rows:  # deleted meanwhile: the kept lesson is gone, not a bad merge list
        raise Lesson.DoesNotExist(f"lesson {keep.pk} does not exist")
    # a merge rewrites the kept lesson and deletes the others: from a stale read, it replaced an
    # edit made since without a word
    refuse_changed_since_read(row=rows[keep.pk], expected_updated_at=expected_updated_at)
    missing = [pk for pk in merged_ids if pk not in rows]
    if missing:
        raise ValidationError({"merged": f"Lesson(s) {', '.join(map(str, missing))} no longer exist."})
    kept = rows[keep.pk]
    others = [rows[pk] for pk in merged_ids]
    foreign = [lesson.pk for lesson in others if lesson.team_id != kept.team_id]
    if foreign:
        raise ValidationError(
            {"merged": f"Lesson(s) {', '.join(map(str, foreign))} belong to another team than lesson {kept.pk}; "
                       "a merge stays within one team."}
        )

    source = rows[text_from_id]
    changes = {name: getattr(source, name) for name in MERGED_TEXT_FIELDS}
    everyone = [kept, *others]
    changes["frequency"] = min(MAX_FREQUENCY, sum(lesson.frequency for lesson in everyone))
    changes["confidence"] = max(lesson.confidence for lesson in everyone)
    for name in lesson_services.TERM_FIELDS:
        changes[name] = _union(*(getattr(lesson, name) for lesson in everyone))
    # A merge never hides confirmed knowledge: a kept proposal or rejected lesson (a stale duplicates
    # page) becomes confirmed when a confirmed lesson is merged into it.
    if kept.status != LessonStatus.CONFIRMED and any(lesson.status == LessonStatus.CONFIRMED for lesson in others):
        changes["status"] = LessonStatus.CONFIRMED
    _add_usage(Lesson, kept=kept, others=others)

    LessonMerge.objects.filter(lesson__in=others).update(lesson=kept)
    LessonMerge.objects.bulk_create(
        [
            LessonMerge(
                team_id=kept.team_id,
                lesson=kept,
                merged_lesson_id=lesson.pk,
                merged_title=lesson.title,
                merged_fields=_snapshot(lesson),
                text_kept=lesson.pk == text_from_id,
            )
            for lesson in others
        ]
    )
    forget_dismissals(kind=DuplicateKind.LESSON, team_id=kept.team_id, ids=merged_ids)
    Lesson.objects.filter(pk__in=merged_ids).delete()
    # Through the update service: validation, and an embedding scheduled only if the text changed.
    before = kept.updated_at
    # None of the kept lesson's own fields may change (frequency already at its cap, nothing new in
    # the others), but the merge happened
    with _as_the_merges_result(noun="lessons", fields=Lesson.term_fields):
        return _moved_since(lesson_services.lesson_update(lesson=kept, **changes), before=before)


@transaction.atomic
def memory_merge(
    *, keep: Memory, merged: Memory, expected_updated_at: datetime | Collection[datetime] | None = None
) -> Memory:
    """Merge the current memory `merged` into the current memory `keep` (see the module's
    docstring). Raises ValidationError for the same memory twice, an earlier version, or a memory
    of another team, ChangedSinceRead when `keep` changed since `expected_updated_at` (If-Match);
    nothing is changed then."""
    if keep.pk == merged.pk:
        raise ValidationError({"merged": f"Memory {keep.pk} cannot be merged into itself."})
    rows = {memory.pk: memory for memory in Memory.objects.select_for_update().filter(pk__in=[keep.pk, merged.pk]).order_by("pk")}
    if keep.pk not in rows:
        raise Memory.DoesNotExist(f"memory {keep.pk} does not exist")
    refuse_changed_since_read(row=rows[keep.pk], expected_updated_at=expected_updated_at)
    if merged.pk not in rows:
        raise ValidationError({"merged": f"Memory {merged.pk} no longer exists."})
    kept, other = rows[keep.pk], rows[merged.pk]
    if kept.team_id != other.team_id:
        raise ValidationError(
            {"merged": f"Memory {other.pk} belongs to another team than memory {kept.pk}; "
                       "a merge stays within one team."}
        )
    for memory in (kept, other):
        if not memory.is_current:
            raise ValidationError({"merged": f"Memory {memory.pk} is an earlier version; merge current memories."})

    changes = {
        "categories": _union(kept.categories, other.categories),
        "emotions": _union(kept.emotions, other.emotions),
        "people": normalise_names([*kept.people, *other.people]),
        "importance": max(kept.importance, other.importance),
    }
    if kept.occurred_at is None and other.occurred_at is not None:
        changes["occurred_at"] = other.occurred_at
    _add_usage(Memory, kept=kept, others=[other])
    # What the merged memory said: a merge can be read later, and an import of the same memory
    # does not create it again beside the one that absorbed it.
    MemoryMerge.objects.filter(memory=other).update(memory=kept)
    MemoryMerge.objects.create(
        team_id=kept.team_id, memory=kept, merged_memory_id=other.pk, merged_content=other.content,
        merged_fields=_memory_snapshot(other),
    )
    forget_dismissals(kind=DuplicateKind.MEMORY, team_id=kept.team_id, ids=[other.pk])
    memory_services.memory_delete(memory=other)
    before = kept.updated_at
    # the other may hold nothing new, but the merge happened
    with _as_the_merges_result(noun="memories", fields=Memory.term_fields):
        return _moved_since(memory_services.memory_update(memory=kept, **changes), before=before)


@contextmanager
def _as_the_merges_result(*, noun: str, fields: Collection[str]):
    """A term list the merge's union makes too long is refused by its field's name, a field the
    request never sent ("tags: at most 50 entries; got 60"): said as what the merge would make."""
    try:
        yield
    except ValidationError as error:
        if not hasattr(error, "error_dict") or not set(error.error_dict) & set(fields):
            raise
        raise ValidationError({
            name: [f"the merged {noun} together: {message}; remove some from them before merging"
                   if name in fields and "at most" in message else message for message in messages]
            for name, messages in error.message_dict.items()
        }) from error


def _moved_since(merged_into, *, before):
    """The row that absorbed others, its `updated_at` (and so its ETag) moved also when none of its
    own fields changed: a row that absorbed another is another version of the store's state, and an
    agent holding its tag could not tell (If-None-Match answered 304 after the merge)."""
    if merged_into.updated_at == before:
        merged_into.updated_at = timezone.now()
        type(merged_into).objects.filter(pk=merged_into.pk).update(updated_at=merged_into.updated_at)
    return merged_into


def _memory_snapshot(memory: Memory) -> dict:
    fields = {name: getattr(memory, name) for name in memory_services.EDITABLE_FIELDS}
    for name in ("occurred_at", "created_at", "updated_at"):  # moments as JSON text
        moment = getattr(memory, name)
        fields[name] = moment.isoformat() if moment else None
    fields["uid"] = str(memory.uid)
    fields["versions"] = list(
        Memory.objects.filter(current_version=memory).order_by("version").values("version", "content", "details")
    )
    return fields


def _add_usage(model, *, kept, others: list) -> None:
    """The kept row takes the merged rows' usage (issue 14): counts summed, the latest dates. Only
    the kept row's own counts survived, so a much-used duplicate lost its history and a "not
    helpful" vote on the kept one was all that was left."""
    everyone = [kept, *others]
    counts = {name: sum(getattr(row, name) for row in everyone)
              for name in ("returned_count", "used_count", "not_helpful_count")}
    dates = {name: max((getattr(row, name) for row in everyone if getattr(row, name)), default=None)
             for name in ("last_returned_at", "last_used_at")}
    model.objects.filter(pk=kept.pk).update(**counts, **dates)
    for name, value in {**counts, **dates}.items():  # the caller's copy answers with them too
        setattr(kept, name, value)


def duplicate_dismiss(
    *, team: Team, kind: str, first_id: int, second_id: int, names_other_teams: bool = False
) -> DuplicateDismissal:
    """Remember that two rows of `team` are not duplicates (idempotent). Raises ValidationError for
    an unknown kind, the same id twice, or an id that is not a row of `kind` in `team`
    (for memories: a current memory). Another team's row "does not exist", as everywhere an agent
    asks; `names_other_teams` (the admin, whose curators see every team) says whose it is."""
    if kind not in DuplicateKind.values:
        raise ValidationError({"kind": f"Use one of {', '.join(DuplicateKind.values)}."})
    if first_id == second_id:
        raise ValidationError({"ids": "A row cannot be a duplicate of itself: name two different ids."})
    low, high = sorted((first_id, second_id))
    rows = Lesson.objects.filter(team=team) if kind == DuplicateKind.LESSON else Memory.objects.filter(
        team=team, current_version__isnull=True
    )
    found = set(rows.filter(pk__in=[low, high]).values_list("pk", flat=True))
    unknown = [pk for pk in (low, high) if pk not in found]
    if unknown:
        raise ValidationError(
            {"ids": _not_pairable(kind=kind, team=team, row_id=unknown[0], names_other_teams=names_other_teams)}
        )
    dismissal, _ = DuplicateDismissal.objects.get_or_create(team=team, kind=kind, low_id=low, high_id=high)
    return dismissal


def _not_pairable(*, kind: str, team: Team, row_id: int, names_other_teams: bool) -> str:
    """Why a row cannot be one of `team`'s pairs: gone, another team's, or an earlier version."""
    model = Lesson if kind == DuplicateKind.LESSON else Memory
    row = model.objects.filter(pk=row_id).first()
    if row is None or (row.team_id != team.pk and not names_other_teams):
        return f"{kind.capitalize()} {row_id} does not exist."
    if row.team_id != team.pk:
        return f"{kind.capitalize()} {row_id} belongs to another team; a pair is two rows of one team."
    return f"Memory {row_id} is an earlier version; only current memories pair up."


@transaction.atomic
def memory_restore_version(
    *,
    memory: Memory,
    version: Memory,
    seen_updated_at: datetime | None = None,
    expected_updated_at: datetime | Collection[datetime] | None = None,
) -> Memory:
    """Make the text (content and details) of the earlier `version` the memory's current text.
    Nothing is lost: the text it replaces is kept as a version like any other edit, so the
    restore itself shows in the history (and can be undone the same way). Raises
    ValidationError when `version` is not an earlier version of `memory`, or when the memory
    changed since `seen_updated_at` (its `updated_at` when the caller's page showed it): a restore
    from a stale tab replaced a newer edit without a word. `expected_updated_at` is the API's
    form of the same check (If-Match): ChangedSinceRead, as memory_update raises it."""
    if not memory.is_current:
        raise ValidationError({"memory": "Restore onto the current memory, not an earlier version."})
    if version.current_version_id != memory.pk:
        raise ValidationError({"version": f"Memory {version.pk} is not an earlier version of memory {memory.pk}."})
    # memory_update takes the other fields from the object it is given: give it the stored row.
    stored = Memory.objects.select_for_update().filter(pk=memory.pk).first()
    if stored is None:
        raise Memory.DoesNotExist(f"memory {memory.pk} does not exist (deleted or merged meanwhile)")
    stale = changed_since_opened(
        row=stored, opened_at=seen_updated_at, would="restoring would replace that change",
        then="Nothing was restored: open the memory again to see the change, then restore if you still want to.",
    )
    if stale is not None:
        raise stale
    refuse_changed_since_read(row=stored, expected_updated_at=expected_updated_at)
    restored = memory_services.memory_update(memory=stored, content=version.content, details=version.details)
    memory.__dict__.update({name: getattr(restored, name) for name in (*memory_services.EDITABLE_FIELDS, "version", "updated_at")})
    return restored
