"""Does the keyword index agree with the rows it indexes? Read-only, for one team and kind.

The triggers of migration 0002 keep `lessons_keyword_posting` (one row per lexeme of each row's
search vector) and `lessons_keyword_stats` (the team's document count and field lengths) in step
with the rows. Concurrent writers are where a lost update would show, so the write benchmark asks
this after its run. The stats are summed over every row matching (kind, team): the per-team row
may become several shard rows, and the check must hold either way. The expected figures are
computed from the stored search vectors themselves, not through the migration's functions.
"""

from dataclasses import asdict, dataclass, field

from django.db import connection

from lessons.models import Team
from lessons.search.keyword import TABLES


@dataclass
class KeywordIndexCheck:
    kind: str
    rows: int  # rows of `kind` in the team, earlier memory versions included (they are indexed too)
    doc_count: int  # sum of the team's stats rows
    stats_rows: int  # one per (kind, team) today; more once the stats are sharded
    postings: int
    lexemes: int  # sum of length(search_vector): the postings there should be
    rows_without_postings: int  # rows with a non-empty vector and no posting at all
    stats_lengths: list[int]  # sum of len_a..len_d over the stats rows
    vector_lengths: list[int]  # positions per weight A..D in the stored vectors
    mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def as_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def keyword_index_check(*, kind: str, team: Team) -> KeywordIndexCheck:
    kind_code, table = TABLES[kind]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT (SELECT count(*) FROM {table} WHERE team_id = %(team)s),
                   (SELECT coalesce(sum(doc_count), 0) FROM lessons_keyword_stats
                     WHERE kind = %(kind)s AND team_id = %(team)s),
                   (SELECT count(*) FROM lessons_keyword_posting WHERE kind = %(kind)s AND team_id = %(team)s),
                   (SELECT coalesce(sum(length(search_vector)), 0) FROM {table} WHERE team_id = %(team)s),
                   (SELECT count(*) FROM {table} AS r
                     WHERE r.team_id = %(team)s AND length(r.search_vector) > 0
                       AND NOT EXISTS (SELECT 1 FROM lessons_keyword_posting AS p
                                        WHERE p.kind = %(kind)s AND p.row_id = r.id))
            """,
            {"kind": kind_code, "team": team.pk},
        )
        rows, doc_count, postings, lexemes, without = cursor.fetchone()
        cursor.execute(
            """
            SELECT count(*), coalesce(sum(len_a), 0), coalesce(sum(len_b), 0), coalesce(sum(len_c), 0),
                   coalesce(sum(len_d), 0)
              FROM lessons_keyword_stats WHERE kind = %s AND team_id = %s
            """,
            [kind_code, team.pk],
        )
        stats_rows, *stats_lengths = [int(value) for value in cursor.fetchone()]
        cursor.execute(
            f"""
            SELECT count(*) FILTER (WHERE w = 'A'), count(*) FILTER (WHERE w = 'B'),
                   count(*) FILTER (WHERE w = 'C'), count(*) FILTER (WHERE w = 'D')
              FROM {table} AS r, unnest(r.search_vector) AS u, unnest(u.weights) AS w
             WHERE r.team_id = %s
            """,
            [team.pk],
        )
        vector_lengths = [int(value) for value in cursor.fetchone()]

    check = KeywordIndexCheck(
        kind=kind, rows=rows, doc_count=int(doc_count), stats_rows=stats_rows, postings=postings,
        lexemes=int(lexemes), rows_without_postings=without, stats_lengths=stats_lengths, vector_lengths=vector_lengths,
    )
    if check.doc_count != check.rows:
        check.mismatches.append(f"doc_count {check.doc_count} != rows {check.rows}")
    if check.postings != check.lexemes:
        check.mismatches.append(f"postings {check.postings} != lexemes in the vectors {check.lexemes}")
    if check.rows_without_postings:
        check.mismatches.append(f"{check.rows_without_postings} rows with a search vector have no postings")
    if check.stats_lengths != check.vector_lengths:
        check.mismatches.append(f"field lengths A-D {check.stats_lengths} != {check.vector_lengths} in the vectors")
    return check
