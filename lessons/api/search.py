"""`POST /search`: the hybrid search engine, over lessons or memories, for the caller's team."""

from ninja import Router

from lessons.api import operations
from lessons.api.schemas import AUTHENTICATED, INVALID, WITH_BODY, SearchIn, SearchOut

router = Router(tags=["search"])


@router.post("/search", response={200: SearchOut, **WITH_BODY, **INVALID, **AUTHENTICATED})
def search(request, payload: SearchIn):
    return operations.search(team=request.auth.team, payload=payload)
