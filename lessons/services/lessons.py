"""Writing lessons: create, update, delete, and the propose / accept / reject workflow."""

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from lessons.embedding import embedded_fields
from lessons.models import DuplicateKind, Lesson, LessonStatus, Team
from lessons.services.common import forget_dismissals, normalise_terms, normalise_text, refuse_changed_since_read
from lessons.services.embeddings import embedding_schedule
from lessons.text import clean_identifier

TEXT_FIELDS = ("title", "description", "context", "recommendation")
TERM_FIELDS = ("project_types", "tech_stacks", "tags")
EDITABLE_FIELDS = (
    "external_id",
    *TEXT_FIELDS,
    "category",
    "confidence",
    "frequency",
    *TERM_FIELDS,
    "status",
)
# A change to these (the text and the label line: tags, tech stacks) changes the
# embedded text. Every status is embedded: accepting a proposal makes it searchable at once, and
# curators can search proposals and rejected lessons by meaning too.
EMBEDDED_FIELDS = embedded_fields(Lesson)


def _normalised(fields: dict) -> dict:
    clean = dict(fields)
    for name in TEXT_FIELDS:
        if name in clean and clean[name] is not None:
            clean[name] = normalise_text(clean[name])
    for name in TERM_FIELDS:
        if name in clean:
            clean[name] = normalise_terms(clean[name])
    if "category" in clean and clean["category"] is not None:
        clean["category"] = str(clean["category"]).strip().lower()
    if "external_id" in clean:
        clean["external_id"] = clean_identifier(clean["external_id"]) if clean["external_id"] else None
    return clean


@transaction.atomic
def lesson_create(
    *,
    team: Team,
    title: str,
    description: str = "",
    context: str = "",
    recommendation: str = "",
    category: str = "workflow",
    confidence: float = 0.5,
    frequency: int = 1,
    project_types: list[str] | None = None,
    tech_stacks: list[str] | None = None,
    tags: list[str] | None = None,
    status: str = LessonStatus.CONFIRMED,
    external_id: str | None = None,
) -> Lesson:
    fields = _normalised(
        {
            "external_id": external_id,
            "title": title,
            "description": description,
            "context": context,
            "recommendation": recommendation,
            "category": category,
            "confidence": confidence,
            "frequency": frequency,
            "project_types": project_types or [],
            "tech_stacks": tech_stacks or [],
            "tags": tags or [],
            "status": status,
        }
    )
    lesson = Lesson(team=team, **fields)
    lesson.full_clean()
    lesson.save()
    embedding_schedule(item=lesson)
    return lesson


def _locked(lesson: Lesson, *, expected_updated_at) -> Lesson:
    """The stored row, locked (inside the caller's transaction) and checked against the
    `updated_at` the writer read (see common.refuse_changed_since_read)."""
    stored = Lesson.objects.select_for_update().filter(pk=lesson.pk).first()
    if stored is None:
        raise Lesson.DoesNotExist(f"lesson {lesson.pk} does not exist (deleted or merged meanwhile)")
    refuse_changed_since_read(row=stored, expected_updated_at=expected_updated_at)
    return stored


@transaction.atomic
def lesson_update(
    *, lesson: Lesson, expected_updated_at: datetime | Collection[datetime] | None = None, **changes
) -> Lesson:
    """Apply `changes` (any of EDITABLE_FIELDS); unknown names are a programming error. Returns the
    row as stored; `lesson` (the caller's copy) is brought up to date when something was written.

    Only the fields in `changes` are written, over the row as it is in the database (read under a
    row lock), never over `lesson` as the caller read it, as memory_update does: compared with a
    stale copy, a PATCH of a confidence another writer had just changed was "no change" (its write
    lost), an answer showed the other writer's field as it was before under the new ETag, and two
    edits of the term lists each fitted their budget and together stored more than the index takes.

    Raises Lesson.DoesNotExist when the lesson was deleted or merged away meanwhile: the row is
    locked first, so an edit or an accept racing a merge waits for it and then says the lesson is
    gone (the save used to fail with a DatabaseError, a 500), or lands before the merge takes it.
    Raises ChangedSinceRead, under that lock, when `expected_updated_at` is given and the lesson
    changed since: of two writers sending the same one, exactly one lands."""
    unknown = set(changes) - set(EDITABLE_FIELDS)
    if unknown:
        raise TypeError(f"lesson_update() got unknown fields: {', '.join(sorted(unknown))}")
    stored = _locked(lesson, expected_updated_at=expected_updated_at)
    normalised = _normalised(changes)
    changed = _differing(stored, normalised)
    if not changed:
        return stored
    for name in changed:
        setattr(stored, name, normalised[name])
    stored.term_fields_changed = tuple(changed)
    stored.full_clean()
    stored.save(update_fields=[*changed, "updated_at"])
    if any(name in EMBEDDED_FIELDS for name in changed):
        embedding_schedule(item=stored)
    lesson.__dict__.update({name: getattr(stored, name) for name in (*EDITABLE_FIELDS, "updated_at")})
    return stored


def lesson_changed_fields(*, lesson: Lesson, **fields) -> list[str]:
    """The names in `fields` whose values, stored as lesson_update stores them, differ from `lesson`'s."""
    return _differing(lesson, _normalised(fields))


def _differing(lesson: Lesson, normalised: dict) -> list[str]:
    return [name for name, value in normalised.items() if getattr(lesson, name) != value]


@transaction.atomic
def lesson_delete(*, lesson: Lesson, expected_updated_at: datetime | Collection[datetime] | None = None) -> None:
    """Locked first, as an edit or a merge locks it: a merge under way that keeps this lesson adds
    records to it, which a delete collected before them would leave pointing at nothing. With
    `expected_updated_at`, a lesson changed since is not deleted (ChangedSinceRead)."""
    stored = _locked(lesson, expected_updated_at=expected_updated_at)
    stored.delete()
    forget_dismissals(kind=DuplicateKind.LESSON, team_id=stored.team_id, ids=[lesson.pk])


def lesson_propose(*, team: Team, **fields) -> Lesson:
    """An agent's suggestion: stored as proposed until a curator accepts or rejects it."""
    return lesson_create(team=team, **{**fields, "status": LessonStatus.PROPOSED})


def lesson_accept(*, lesson: Lesson) -> Lesson:
    return lesson_update(lesson=lesson, status=LessonStatus.CONFIRMED)


def lesson_reject(*, lesson: Lesson) -> Lesson:
    return lesson_update(lesson=lesson, status=LessonStatus.REJECTED)


class LessonNotAProposal(Exception):
    """Accept or reject asked of a lesson that is no longer a proposal, and not already in the state
    asked for: a curator (or another agent) decided it differently; only an edit changes it now."""

    def __init__(self, *, lesson: Lesson, decision: str):
        self.lesson = lesson
        self.status = lesson.status
        super().__init__(
            f"lesson {lesson.pk} is {lesson.status}, not a proposal: {decision} decides proposals only; "
            f"to change a decided lesson, PATCH /api/v1/lessons/{lesson.pk} with its new status"
        )


@dataclass(frozen=True)
class ProposalDecision:
    lesson: Lesson
    changed: bool  # False: the lesson was already in the state asked for, nothing was written


_DECISIONS = {"accept": LessonStatus.CONFIRMED, "reject": LessonStatus.REJECTED}


@transaction.atomic
def lesson_decide_proposal(
    *, lesson: Lesson, decision: str, expected_updated_at: datetime | Collection[datetime] | None = None
) -> ProposalDecision:
    """Accept or reject one proposal, as the admin's proposals page does: the row is locked and
    read again, so of two agents deciding it at once the second sees the first one's decision.
    The same decision again changes nothing (changed=False); a lesson in the other decided state
    raises LessonNotAProposal (a confirmed lesson is retired, a rejected one revived, by an edit
    of its status, not by a proposal's accept or reject). Lesson.DoesNotExist when it is gone.

    With `expected_updated_at` (the version the decider reviewed), a proposal edited since is not
    decided (ChangedSinceRead): accepting it would confirm advice nobody reviewed. It is checked
    only when the decision would write, so a retried accept still hears changed=False."""
    target = _DECISIONS[decision]
    stored = Lesson.objects.select_for_update().filter(pk=lesson.pk).first()
    if stored is None:
        raise Lesson.DoesNotExist(f"lesson {lesson.pk} does not exist (deleted or merged meanwhile)")
    if stored.status == target:
        return ProposalDecision(lesson=stored, changed=False)
    if stored.status != LessonStatus.PROPOSED:
        raise LessonNotAProposal(lesson=stored, decision=decision)
    refuse_changed_since_read(row=stored, expected_updated_at=expected_updated_at)
    return ProposalDecision(lesson=lesson_update(lesson=stored, status=target), changed=True)


def _locked_proposals(lesson_ids: list[int]) -> list[Lesson]:
    """The proposals among `lesson_ids`, locked in id order (inside the caller's transaction), so a
    proposal someone else decided meanwhile is no longer among them."""
    return list(
        Lesson.objects.select_for_update().filter(pk__in=lesson_ids, status=LessonStatus.PROPOSED).order_by("pk")
    )


@transaction.atomic
def lesson_accept_proposals(*, lesson_ids: list[int]) -> list[Lesson]:
    """Accept those of `lesson_ids` that are proposals; confirmed and rejected lessons are left as
    they are (a curator's bulk "accept" must not revive a rejected lesson). Returns the accepted."""
    return [lesson_accept(lesson=lesson) for lesson in _locked_proposals(lesson_ids)]


@transaction.atomic
def lesson_reject_proposals(*, lesson_ids: list[int]) -> list[Lesson]:
    """Reject those of `lesson_ids` that are proposals, as lesson_accept_proposals accepts them:
    a bulk "reject" must not hide a confirmed lesson from every agent's search in one click (a
    curator retires one on its own page). Returns the rejected."""
    return [lesson_reject(lesson=lesson) for lesson in _locked_proposals(lesson_ids)]


@transaction.atomic
def lesson_delete_many(*, lessons) -> int:
    """Delete `lessons` (a queryset or list) one by one through `lesson_delete`, all or none; one
    merged or deleted meanwhile is already gone, and not counted."""
    count = 0
    for lesson in list(lessons):
        try:
            lesson_delete(lesson=lesson)
        except Lesson.DoesNotExist:
            continue
        count += 1
    return count
