"""Reads of the recorded searches (learning from use)."""

import uuid

from lessons.models import SearchRecord, Team


def search_record_kind(*, team: Team, search_id: uuid.UUID | str) -> str | None:
    """What `team`'s recorded search `search_id` searched ("lessons" or "memories"); None when the
    team has no such search."""
    return SearchRecord.objects.filter(team=team, pk=search_id).values_list("kind", flat=True).first()
