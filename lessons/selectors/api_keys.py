"""Reading API keys: who holds which, for operators (the keys themselves are never stored)."""

from django.db.models import F, QuerySet

from lessons.models import ApiKey, Team


def api_key_list(*, team: Team | None = None, prefix: str | None = None) -> QuerySet[ApiKey]:
    """Keys with their team, active ones first, then by team and name; only `team`'s, or only
    those whose prefix is `prefix`, when given."""
    keys = ApiKey.objects.select_related("team")
    if team is not None:
        keys = keys.filter(team=team)
    if prefix is not None:
        keys = keys.filter(prefix=prefix)
    return keys.order_by(F("revoked_at").asc(nulls_first=True), "team__slug", "name", "-created_at")
