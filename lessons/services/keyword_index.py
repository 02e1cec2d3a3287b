"""The keyword index's maintenance: a team's posting impacts recomputed with its current average
length and BM25 parameters (lessons/search/keyword.py explains why impacts exist and why drift only
costs speed, never exactness)."""

from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction

from lessons.models import Team
from lessons.search.keyword import TABLES, bm25_parameters

DEFAULT_DRIFT = 1.2


@dataclass(frozen=True)
class KeywordIndexState:
    kind: str
    team_id: int
    rows: int
    drift: float  # max(current / reference, reference / current) of the average length; 1.0 = none
    parameters_current: bool  # impacts were computed with today's k1, b and field weights

    def needs_refresh(self, *, threshold: float) -> bool:
        return self.rows > 0 and (self.drift > threshold or not self.parameters_current)


def keyword_index_state(*, team: Team, kind: str) -> KeywordIndexState:
    """How far a team's impacts are from today's statistics and parameters."""
    kind_code = TABLES[kind][0]
    k1, b, weights = bm25_parameters()
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT coalesce(sum(s.doc_count), 0),
                   (%s * sum(s.len_a) + %s * sum(s.len_b) + %s * sum(s.len_c) + %s * sum(s.len_d))
                       / nullif(sum(s.doc_count), 0),
                   (SELECT avglen FROM lessons_keyword_reference AS r WHERE r.kind = %s AND r.team_id = %s),
                   (SELECT r.k1 = %s AND r.b = %s AND r.w_a = %s AND r.w_b = %s AND r.w_c = %s AND r.w_d = %s
                      FROM lessons_keyword_reference AS r WHERE r.kind = %s AND r.team_id = %s)
              FROM lessons_keyword_stats AS s WHERE s.kind = %s AND s.team_id = %s
            """,
            [weights["A"], weights["B"], weights["C"], weights["D"], kind_code, team.pk,
             k1, b, weights["A"], weights["B"], weights["C"], weights["D"], kind_code, team.pk, kind_code, team.pk],
        )
        rows, current, reference, parameters_current = cursor.fetchone()
    drift = 1.0
    if current and reference:
        current, reference = float(current), float(reference)  # sums of bigints arrive as Decimal
        drift = max(current / reference, reference / current)
    return KeywordIndexState(kind=kind, team_id=team.pk, rows=int(rows), drift=float(drift),
                             parameters_current=bool(parameters_current) or not rows)


def keyword_impacts_refresh(*, team: Team, kind: str) -> int:
    """Recompute every posting impact of a team's rows of one kind with the team's average length
    today and the configured k1, b and field weights. Writers to that team wait for it (an advisory
    lock), searches do not. Returns the number of postings rewritten."""
    k1, b, weights = bm25_parameters()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT lessons_keyword_refresh_impacts(%s, %s, %s, %s, %s, %s, %s, %s)",
            [TABLES[kind][0], team.pk, k1, b, weights["A"], weights["B"], weights["C"], weights["D"]],
        )
        return int(cursor.fetchone()[0] or 0)


def keyword_impacts_refresh_if_drifted(*, team: Team, kinds: tuple[str, ...] = ("lessons", "memories"),
                                       threshold: float | None = None) -> dict[str, int]:
    """Refresh the kinds whose impacts have drifted past `threshold` (SEARCH_KEYWORD_IMPACT_DRIFT)
    or were computed with other parameters. Returns postings rewritten per refreshed kind."""
    if threshold is None:
        threshold = float(getattr(settings, "SEARCH_KEYWORD_IMPACT_DRIFT", DEFAULT_DRIFT))
    refreshed = {}
    for kind in kinds:
        if keyword_index_state(team=team, kind=kind).needs_refresh(threshold=threshold):
            refreshed[kind] = keyword_impacts_refresh(team=team, kind=kind)
    return refreshed


def keyword_impacts_upkeep(*, team: Team, kind: str) -> int:
    """After a write: refresh the team's impacts of `kind` if they have drifted, so a team that grows
    one row at a time needs no cron. Called from the task that follows each write (lessons.tasks:
    on the worker in production, after the commit), never inside the write's transaction. An upkeep
    already under way for that team and kind makes this one a no-op (a try-lock held over the check
    and the refresh), so concurrent workers never rewrite the postings twice. Returns the postings
    rewritten."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))",
                       [f"lessons_keyword_upkeep:{TABLES[kind][0]}:{team.pk}"])
        if not cursor.fetchone()[0]:
            return 0
        return keyword_impacts_refresh_if_drifted(team=team, kinds=(kind,)).get(kind, 0)
