"""Curation over the API: near-duplicate lessons and memories, merging them, "not a duplicate",
restoring an earlier version of a memory. The admin's curation pages call the same selectors
and services (`lessons.selectors.curation`, `lessons.services.curation`).

Added to the API before the lessons and memories routers, so that `/lessons/duplicates` is not
taken for a lesson id."""

from contextlib import contextmanager

from django.core.exceptions import ValidationError
from django.http import HttpResponse
from ninja import Path, Query, Router

from lessons.api import preconditions
from lessons.api.curation_schemas import (
    DismissedOut,
    DismissIn,
    DuplicatesQuery,
    LessonDuplicatesOut,
    LessonMergeIn,
    LessonMergeOut,
    MemoryDuplicatesOut,
    MemoryMergeIn,
    MemoryMergeOut,
)
from lessons.api.permissions import needs
from lessons.api.query_parameters import takes_query
from lessons.api.schemas import (
    AUTHENTICATED,
    INVALID,
    MAX_ID,
    NOT_FOUND,
    PRECONDITION,
    WITH_BODY,
    MemoryOut,
    PathId,
)
from lessons.models import DuplicateKind, Lesson, Memory
from lessons.selectors.curation import lesson_duplicate_pairs, memory_duplicate_pairs
from lessons.selectors.listing import lesson_get, lesson_list, memory_get
from lessons.services import curation as curation_services

router = Router()

LessonId = Path(..., ge=1, le=MAX_ID, description="The lesson that is kept.")
MemoryId = Path(..., ge=1, le=MAX_ID, description="The memory (its current version).")
VersionId = Path(..., ge=1, le=MAX_ID, description="The id of one of the memory's earlier versions.")


@contextmanager
def _service_field_named(name: str):
    """The merge services name the merged rows `merged`; in the API that field is `name`. Their
    checks run again under the rows' locks, so a merge that lost a race is refused there."""
    try:
        yield
    except ValidationError as error:
        if not hasattr(error, "error_dict") or "merged" not in error.error_dict:
            raise
        fields = {name if field == "merged" else field: messages for field, messages in error.error_dict.items()}
        raise ValidationError(fields) from None


def _pairs_out(pairs, threshold: float) -> dict:
    return {
        "threshold": threshold,
        "pairs": [
            {"first": pair.first, "second": pair.second, "distance": pair.distance, "similarity": pair.similarity}
            for pair in pairs
        ],
    }


@router.get(
    "/lessons/duplicates",
    tags=["lessons"],
    response={200: LessonDuplicatesOut, **INVALID, **AUTHENTICATED},
    summary="Pairs of lessons that say the same thing",
)
@takes_query(DuplicatesQuery)
@needs("lessons", "view")
def lesson_duplicates(request, params: Query[DuplicatesQuery]):
    """Pairs of the team's confirmed and proposed lessons whose embeddings are closer than
    `threshold` (cosine distance), closest first; pairs marked "not a duplicate" are left out."""
    pairs = lesson_duplicate_pairs(team=request.auth.team, threshold=params.threshold, limit=params.limit)
    return _pairs_out(pairs, params.threshold)


@router.post(
    "/lessons/duplicates/dismiss",
    tags=["lessons"],
    response={200: DismissedOut, **WITH_BODY, **INVALID, **AUTHENTICATED},
    summary="Mark two lessons as not duplicates",
)
@needs("lessons", "change")
def dismiss_lesson_pair(request, payload: DismissIn):
    dismissal = curation_services.duplicate_dismiss(
        team=request.auth.team, kind=DuplicateKind.LESSON, first_id=payload.ids[0], second_id=payload.ids[1]
    )
    return {"kind": dismissal.kind, "ids": [dismissal.low_id, dismissal.high_id]}


@router.post(
    "/lessons/{lesson_id}/merge",
    tags=["lessons"],
    response={200: LessonMergeOut, **PRECONDITION, **WITH_BODY, **NOT_FOUND, **INVALID, **AUTHENTICATED},
    summary="Merge lessons into this one",
    description="Keeps this lesson and deletes `merge_ids`, in one transaction: frequency summed, the highest "
    "confidence, tags / tech stacks / project types united, the text of `text_from`; each merged lesson is "
    "recorded on the kept one. Ids of another team do not exist here (422). " + preconditions.DOCUMENTED,
)
@needs("lessons", "change", "delete")
@preconditions.honours_if_match
def merge_lessons(
    request, response: HttpResponse, payload: LessonMergeIn, lesson_id: PathId = LessonId,
    if_match: str | None = preconditions.if_match_header(),
):
    team = request.auth.team
    keep = lesson_get(team=team, lesson_id=lesson_id)
    if keep.pk in payload.merge_ids:
        raise ValidationError({"merge_ids": f"lesson {keep.pk} is the one kept; it cannot be merged into itself"})
    found = lesson_list(team=team).filter(pk__in=payload.merge_ids).in_bulk()
    missing = [pk for pk in payload.merge_ids if pk not in found]
    if missing:
        raise ValidationError({"merge_ids": f"lesson {missing[0]} does not exist"})
    text_from = None
    if payload.text_from is not None:
        text_from = keep if payload.text_from == keep.pk else found.get(payload.text_from, Lesson(pk=payload.text_from))
    with _service_field_named("merge_ids"):
        kept = curation_services.lesson_merge(
            keep=keep, merged=[found[pk] for pk in payload.merge_ids], text_from=text_from,
            expected_updated_at=preconditions.expected_updated_at(if_match, row=keep),
        )
    return {"lesson": preconditions.with_etag(response, kept), "merged_ids": payload.merge_ids}


@router.get(
    "/memories/duplicates",
    tags=["memories"],
    response={200: MemoryDuplicatesOut, **INVALID, **AUTHENTICATED},
    summary="Pairs of current memories that say the same thing",
)
@takes_query(DuplicatesQuery)
@needs("memories", "view")
def memory_duplicates(request, params: Query[DuplicatesQuery]):
    pairs = memory_duplicate_pairs(team=request.auth.team, threshold=params.threshold, limit=params.limit)
    return _pairs_out(pairs, params.threshold)


@router.post(
    "/memories/duplicates/dismiss",
    tags=["memories"],
    response={200: DismissedOut, **WITH_BODY, **INVALID, **AUTHENTICATED},
    summary="Mark two memories as not duplicates",
)
@needs("memories", "change")
def dismiss_memory_pair(request, payload: DismissIn):
    dismissal = curation_services.duplicate_dismiss(
        team=request.auth.team, kind=DuplicateKind.MEMORY, first_id=payload.ids[0], second_id=payload.ids[1]
    )
    return {"kind": dismissal.kind, "ids": [dismissal.low_id, dismissal.high_id]}


@router.post(
    "/memories/{memory_id}/merge",
    tags=["memories"],
    response={200: MemoryMergeOut, **PRECONDITION, **WITH_BODY, **NOT_FOUND, **INVALID, **AUTHENTICATED},
    summary="Merge a memory into this one",
    description="Keeps this memory's text and versions; adds the other's categories, people and emotions, the "
    "higher importance, its date if this one has none; deletes the other with its versions. "
    + preconditions.DOCUMENTED,
)
@needs("memories", "change", "delete")
@preconditions.honours_if_match
def merge_memories(
    request, response: HttpResponse, payload: MemoryMergeIn, memory_id: PathId = MemoryId,
    if_match: str | None = preconditions.if_match_header(),
):
    team = request.auth.team
    keep = memory_get(team=team, memory_id=memory_id)
    try:
        merged = memory_get(team=team, memory_id=payload.merge_id)
    except Memory.DoesNotExist as missing:
        raise ValidationError({"merge_id": str(missing)}) from None
    if merged.pk == keep.pk:
        raise ValidationError({"merge_id": f"memory {keep.pk} is the one kept; it cannot be merged into itself"})
    with _service_field_named("merge_id"):
        kept = curation_services.memory_merge(
            keep=keep, merged=merged, expected_updated_at=preconditions.expected_updated_at(if_match, row=keep)
        )
    return {"memory": preconditions.with_etag(response, kept), "merged_id": payload.merge_id}


@router.post(
    "/memories/{memory_id}/versions/{version_id}/restore",
    tags=["memories"],
    response={200: MemoryOut, **PRECONDITION, **NOT_FOUND, **INVALID, **AUTHENTICATED},
    summary="Make an earlier version's text current again",
    description="The version's content and details become the memory's; the text they replace is kept as a "
    "version, so a restore is undone the same way. " + preconditions.DOCUMENTED,
)
@needs("memories", "change")
@preconditions.honours_if_match
def restore_memory_version(
    request, response: HttpResponse, memory_id: PathId = MemoryId, version_id: PathId = VersionId,
    if_match: str | None = preconditions.if_match_header(),
):
    memory = memory_get(team=request.auth.team, memory_id=memory_id)
    version = memory.previous_versions.filter(pk=version_id).first()
    if version is None:
        missing = Memory.DoesNotExist(f"memory {memory_id} has no earlier version {version_id}")
        missing.field = "version_id"
        raise missing
    restored = curation_services.memory_restore_version(
        memory=memory, version=version, expected_updated_at=preconditions.expected_updated_at(if_match, row=memory)
    )
    return preconditions.with_etag(response, restored)
