"""`POST /feedback`: which results of a search the agent used (issue 14: learning from use)."""

from ninja import Router

from lessons.api import operations
from lessons.api.permissions import is_staff_session, require_permission
from lessons.api.schemas import AUTHENTICATED, INVALID, NOT_FOUND, WITH_BODY, FeedbackIn, FeedbackOut
from lessons.selectors.usage import search_record_kind

router = Router(tags=["feedback"])


@router.post("/feedback", response={202: FeedbackOut, **WITH_BODY, **NOT_FOUND, **INVALID, **AUTHENTICATED})
def report_usage(request, payload: FeedbackIn):
    """Report the results of a search (by its `search_id`) you used and those that were not helpful.
    404 for a search that is not your team's (or was purged); 422 for an id the search did not return.
    Reporting the same result again counts nothing (`already_recorded`). A result merged into another
    row since the search counts for that row (`merged` says which), an earlier version of a memory for
    the memory (`versions`); one deleted since is listed in `gone`, with nothing recorded for it, and the
    rest of the report is still recorded (202)."""
    if is_staff_session(request):  # a key is not checked: agents' feedback reads the search once
        kind = search_record_kind(team=request.auth.team, search_id=payload.search_id)
        if kind is not None:  # an unknown search is the service's 404
            require_permission(request, kind=kind, actions=("change",))
    return 202, operations.report_usage(team=request.auth.team, payload=payload)
