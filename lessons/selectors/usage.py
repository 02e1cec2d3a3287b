"""Reads of the recorded searches (learning from use)."""

import uuid
from collections.abc import Iterable

from lessons.models import Memory, SearchRecord, Team


def search_record_kind(*, team: Team, search_id: uuid.UUID | str) -> str | None:
    """What `team`'s recorded search `search_id` searched ("lessons" or "memories"); None when the
    team has no such search."""
    return SearchRecord.objects.filter(team=team, pk=search_id).values_list("kind", flat=True).first()


def versions_current_memory(*, team: Team, ids: Iterable[int]) -> dict[int, int]:
    """Each of `ids` that is an earlier version of one of `team`'s memories -> that memory (the row
    with the current text). Read without a lock: a version never moves to another memory (it is
    deleted with its own) and a current memory never becomes a version, so the answer cannot go
    stale, only a version deleted since can be missing from the rows a caller then locks."""
    return dict(
        Memory.objects.filter(team=team, pk__in=list(ids), current_version__isnull=False)
        .values_list("pk", "current_version_id")
    )
