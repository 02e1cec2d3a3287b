"""Lessons: list, read, write, the propose / accept / reject workflow, and the agents' shortcuts."""

from django.http import HttpResponse
from ninja import Path, Query, Router
from ninja.pagination import paginate

from lessons.api import errors, operations, preconditions
from lessons.api.pagination import Pages
from lessons.api.permissions import needs
from lessons.api.query_parameters import takes_query
from lessons.api.schemas import (
    AUTHENTICATED,
    CONFLICT,
    INVALID,
    NOT_FOUND,
    PRECONDITION,
    WITH_BODY,
    ErrorOut,
    LessonDecisionOut,
    LessonFilters,
    LessonIn,
    LessonOut,
    LessonPatch,
    LessonProposeIn,
    MAX_ID,
    PathId,
    PatternsQuery,
    RelevantLessonsQuery,
    SearchOut,
    SessionIn,
)
from lessons.selectors.listing import lesson_get, lesson_list
from lessons.services import lessons as lesson_services

router = Router(tags=["lessons"])

LessonId = Path(..., ge=1, le=MAX_ID, description="The lesson's id.")


@router.get("/lessons", response={200: list[LessonOut], **INVALID, **AUTHENTICATED})
@paginate(Pages)
@takes_query(LessonFilters, Pages.Input)
@needs("lessons", "view")
def list_lessons(request, filters: Query[LessonFilters]):
    return lesson_list(team=request.auth.team, filters=filters)


@router.post("/lessons", response={201: LessonOut, **WITH_BODY, **CONFLICT, **INVALID, **AUTHENTICATED})
@needs("lessons", "add")
def create_lesson(request, response: HttpResponse, payload: LessonIn):
    return 201, preconditions.with_etag(response, operations.store_lesson(team=request.auth.team, payload=payload))


@router.post("/lessons/propose", response={201: LessonOut, **WITH_BODY, **CONFLICT, **INVALID, **AUTHENTICATED})
@needs("lessons", "add")
def propose_lesson(request, response: HttpResponse, payload: LessonProposeIn):
    return 201, preconditions.with_etag(response, operations.propose_lesson(team=request.auth.team, payload=payload))


@router.get("/lessons/relevant", response={200: SearchOut, **INVALID, **AUTHENTICATED})
@takes_query(RelevantLessonsQuery)
@needs("lessons", "view")
def relevant_lessons(request, params: Query[RelevantLessonsQuery]):
    return operations.relevant_lessons(team=request.auth.team, payload=params, source=operations.source_of(request))


@router.get("/lessons/patterns", response={200: SearchOut, **INVALID, **AUTHENTICATED})
@takes_query(PatternsQuery)
@needs("lessons", "view")
def lesson_patterns(request, params: Query[PatternsQuery]):
    return operations.lesson_patterns(team=request.auth.team, payload=params, source=operations.source_of(request))


@router.post("/lessons/session", response={200: SearchOut, **WITH_BODY, **INVALID, **AUTHENTICATED})
@needs("lessons", "view")
def session_lessons(request, payload: SessionIn):
    return operations.session_lessons(team=request.auth.team, payload=payload)


@router.get(
    "/lessons/{lesson_id}", response={200: LessonOut, 304: None, **NOT_FOUND, **INVALID, **AUTHENTICATED},
    description="The lesson, with its `ETag` (for `If-Match` on a write; `If-None-Match` answers 304).",
)
@takes_query()  # only the path: a query string is a mistake
@needs("lessons", "view")
def get_lesson(request, response: HttpResponse, lesson_id: PathId = LessonId):
    lesson = lesson_get(team=request.auth.team, lesson_id=lesson_id)
    return preconditions.not_modified(request, lesson) or preconditions.with_etag(response, lesson)


@router.patch(
    "/lessons/{lesson_id}",
    response={200: LessonOut, **PRECONDITION, **NOT_FOUND, **WITH_BODY, **CONFLICT, **INVALID, **AUTHENTICATED},
    description="Changes the fields sent. " + preconditions.DOCUMENTED,
)
@needs("lessons", "change")
@preconditions.honours_if_match
def update_lesson(
    request, response: HttpResponse, payload: LessonPatch, lesson_id: PathId = LessonId,
    if_match: str | None = preconditions.if_match_header(),
):
    lesson = lesson_get(team=request.auth.team, lesson_id=lesson_id)
    updated = lesson_services.lesson_update(
        lesson=lesson, expected_updated_at=preconditions.expected_updated_at(if_match, row=lesson),
        **payload.model_dump(exclude_unset=True),
    )
    return preconditions.with_etag(response, updated)


@router.delete(
    "/lessons/{lesson_id}", response={204: None, **PRECONDITION, **NOT_FOUND, **INVALID, **AUTHENTICATED},
    description="Deletes the lesson. " + preconditions.DOCUMENTED,
)
@needs("lessons", "delete")
@preconditions.honours_if_match
def delete_lesson(request, lesson_id: PathId = LessonId, if_match: str | None = preconditions.if_match_header()):
    lesson = lesson_get(team=request.auth.team, lesson_id=lesson_id)
    lesson_services.lesson_delete(
        lesson=lesson, expected_updated_at=preconditions.expected_updated_at(if_match, row=lesson)
    )
    return 204, None


DECIDED = {409: ErrorOut}  # the lesson is no longer a proposal, and not in the state asked for


def _decide(request, response: HttpResponse, lesson_id: int, decision: str, if_match: str | None):
    lesson = lesson_get(team=request.auth.team, lesson_id=lesson_id)
    try:
        decided = lesson_services.lesson_decide_proposal(
            lesson=lesson, decision=decision,
            expected_updated_at=preconditions.expected_updated_at(if_match, row=lesson),
        )
    except lesson_services.LessonNotAProposal as refused:
        return 409, errors.field_error("status", str(refused))
    decided.lesson.changed = decided.changed  # LessonDecisionOut reads it
    return 200, preconditions.with_etag(response, decided.lesson)


_DECISION_DOC = (
    "Decides a proposal only, as the admin's proposals page does: the lesson is locked and read again, so "
    "of two agents deciding one proposal at once the second hears the first one's decision. "
    "The same decision again on a lesson already {state} is a 200 with `changed: false` (nothing written); "
    "a lesson in the other decided state is a 409 naming its status (to change a decided lesson, PATCH "
    "`/lessons/{{id}}` with `status`). 404 for a lesson that is not your team's or was deleted or merged away. "
    "Send the `ETag` of the version you reviewed as `If-Match`: a proposal edited since is not decided (412 "
    "naming `If-Match`; checked only when the decision would write). The answer carries the lesson's `ETag`."
)


@router.post(
    "/lessons/{lesson_id}/accept",
    response={200: LessonDecisionOut, **DECIDED, **PRECONDITION, **NOT_FOUND, **INVALID, **AUTHENTICATED},
    summary="Accept a proposal (it becomes confirmed)",
    description=_DECISION_DOC.format(state="confirmed"),
)
@needs("lessons", "change")
@preconditions.honours_if_match
def accept_lesson(
    request, response: HttpResponse, lesson_id: PathId = LessonId,
    if_match: str | None = preconditions.if_match_header(),
):
    return _decide(request, response, lesson_id, "accept", if_match)


@router.post(
    "/lessons/{lesson_id}/reject",
    response={200: LessonDecisionOut, **DECIDED, **PRECONDITION, **NOT_FOUND, **INVALID, **AUTHENTICATED},
    summary="Reject a proposal (it becomes rejected)",
    description=_DECISION_DOC.format(state="rejected"),
)
@needs("lessons", "change")
@preconditions.honours_if_match
def reject_lesson(
    request, response: HttpResponse, lesson_id: PathId = LessonId,
    if_match: str | None = preconditions.if_match_header(),
):
    return _decide(request, response, lesson_id, "reject", if_match)
