"""`POST /search`: the hybrid search engine, over lessons or memories, for the caller's team."""

from ninja import Router

from lessons.api import operations
from lessons.api.docs import SEARCH_EXAMPLE
from lessons.api.permissions import require_permission
from lessons.api.schemas import AUTHENTICATED, INVALID, WITH_BODY, SearchIn, SearchOut

router = Router(tags=["search"])


@router.post(
    "/search",
    response={200: SearchOut, **WITH_BODY, **INVALID, **AUTHENTICATED},
    # The docs' "Try it out" body: one that answers 200 (the example generated from the schema
    # sent `since` equal to `until`, a 422).
    openapi_extra={"requestBody": {"content": {"application/json": {"example": SEARCH_EXAMPLE}}}},
)
def search(request, payload: SearchIn):
    require_permission(request, kind=payload.kind, actions=("view",))
    return operations.search(team=request.auth.team, payload=payload)
