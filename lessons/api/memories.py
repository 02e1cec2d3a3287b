"""Memories: list, read, write (a new text keeps the old one as a version), versions, and the
agents' shortcuts: listings (friends, panic attacks, interests, events) and searches (by person,
by emotion, across versions)."""

from django.http import HttpResponse
from ninja import Path, Query, Router
from ninja.pagination import paginate

from lessons.api import operations, preconditions
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
    ByEmotionQuery,
    ByPersonQuery,
    EventsQuery,
    MAX_ID,
    MEMORY_ID,
    MemoryFilters,
    MemoryIn,
    MemoryLimitQuery,
    MemoryListOut,
    MemoryOrderQuery,
    MemoryOut,
    MemoryPatch,
    MemoryVersionOut,
    PanicAttacksQuery,
    PathId,
    PeopleOut,
    PersonSearchOut,
    SearchOut,
    SearchVersionsIn,
)
from lessons.selectors.listing import memory_get, memory_list, memory_versions
from lessons.services import memories as memory_services

router = Router(tags=["memories"])

MemoryId = Path(..., ge=1, le=MAX_ID, description=MEMORY_ID)


@router.get("/memories", response={200: list[MemoryOut], **INVALID, **AUTHENTICATED})
@paginate(Pages)
@takes_query(MemoryFilters, MemoryOrderQuery, Pages.Input)
@needs("memories", "view")
def list_memories(request, filters: Query[MemoryFilters], ordering: Query[MemoryOrderQuery]):
    return memory_list(team=request.auth.team, filters=filters, order=ordering.order)


@router.post("/memories", response={201: MemoryOut, **WITH_BODY, **CONFLICT, **INVALID, **AUTHENTICATED})
@needs("memories", "add")
def create_memory(request, response: HttpResponse, payload: MemoryIn):
    return 201, preconditions.with_etag(response, operations.store_memory(team=request.auth.team, payload=payload))


@router.get("/memories/friends", response={200: PeopleOut, **INVALID, **AUTHENTICATED})
@takes_query(MemoryLimitQuery)
@needs("memories", "view")
def friends(request, params: Query[MemoryLimitQuery]):
    return operations.friends(team=request.auth.team, payload=params)


@router.get("/memories/panic-attacks", response={200: MemoryListOut, **INVALID, **AUTHENTICATED})
@takes_query(PanicAttacksQuery)
@needs("memories", "view")
def panic_attacks(request, params: Query[PanicAttacksQuery]):
    """Every memory whose emotions or categories hold a panic term (settings.MEMORY_PANIC_TERMS),
    in the order they happened."""
    return operations.panic_attacks(team=request.auth.team, payload=params)


@router.get("/memories/interests", response={200: MemoryListOut, **INVALID, **AUTHENTICATED})
@takes_query(MemoryLimitQuery)
@needs("memories", "view")
def interests(request, params: Query[MemoryLimitQuery]):
    return operations.interests(team=request.auth.team, payload=params)


@router.get("/memories/events", response={200: MemoryListOut, **INVALID, **AUTHENTICATED})
@takes_query(EventsQuery)
@needs("memories", "view")
def events(request, params: Query[EventsQuery]):
    return operations.events(team=request.auth.team, payload=params)


@router.get("/memories/by-person", response={200: PersonSearchOut, **INVALID, **AUTHENTICATED})
@takes_query(ByPersonQuery)
@needs("memories", "view")
def by_person(request, params: Query[ByPersonQuery]):
    return operations.by_person(team=request.auth.team, payload=params, source=operations.source_of(request))


@router.get("/memories/by-emotion", response={200: SearchOut, **INVALID, **AUTHENTICATED})
@takes_query(ByEmotionQuery)
@needs("memories", "view")
def by_emotion(request, params: Query[ByEmotionQuery]):
    return operations.by_emotion(team=request.auth.team, payload=params, source=operations.source_of(request))


@router.post("/memories/search-versions", response={200: SearchOut, **WITH_BODY, **INVALID, **AUTHENTICATED})
@needs("memories", "view")
def search_versions(request, payload: SearchVersionsIn):
    return operations.search_versions(team=request.auth.team, payload=payload)


@router.get(
    "/memories/{memory_id}", response={200: MemoryOut, 304: None, **NOT_FOUND, **INVALID, **AUTHENTICATED},
    description="The memory, with its `ETag` (for `If-Match` on a write; `If-None-Match` answers 304).",
)
@takes_query()  # only the path: a query string is a mistake
@needs("memories", "view")
def get_memory(request, response: HttpResponse, memory_id: PathId = MemoryId):
    memory = memory_get(team=request.auth.team, memory_id=memory_id)
    return preconditions.not_modified(request, memory) or preconditions.with_etag(response, memory)


@router.patch(
    "/memories/{memory_id}",
    response={200: MemoryOut, **PRECONDITION, **NOT_FOUND, **WITH_BODY, **CONFLICT, **INVALID, **AUTHENTICATED},
    description="Changes the fields sent; a new content or details keeps the old text as a version. "
    + preconditions.DOCUMENTED,
)
@needs("memories", "change")
@preconditions.honours_if_match
def update_memory(
    request, response: HttpResponse, payload: MemoryPatch, memory_id: PathId = MemoryId,
    if_match: str | None = preconditions.if_match_header(),
):
    memory = memory_get(team=request.auth.team, memory_id=memory_id)
    updated = memory_services.memory_update(
        memory=memory, expected_updated_at=preconditions.expected_updated_at(if_match, row=memory),
        **payload.model_dump(exclude_unset=True),
    )
    return preconditions.with_etag(response, updated)


@router.delete(
    "/memories/{memory_id}", response={204: None, **PRECONDITION, **NOT_FOUND, **INVALID, **AUTHENTICATED},
    description="Deletes the memory with its earlier versions. " + preconditions.DOCUMENTED,
)
@needs("memories", "delete")
@preconditions.honours_if_match
def delete_memory(request, memory_id: PathId = MemoryId, if_match: str | None = preconditions.if_match_header()):
    memory = memory_get(team=request.auth.team, memory_id=memory_id)
    memory_services.memory_delete(
        memory=memory, expected_updated_at=preconditions.expected_updated_at(if_match, row=memory)
    )
    return 204, None


@router.get("/memories/{memory_id}/versions", response={200: list[MemoryVersionOut], **NOT_FOUND, **INVALID, **AUTHENTICATED})
@takes_query()  # only the path: a query string is a mistake
@needs("memories", "view")
def versions(request, memory_id: PathId = MemoryId):
    return memory_versions(memory=memory_get(team=request.auth.team, memory_id=memory_id))
