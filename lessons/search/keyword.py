"""The keyword leg: BM25 computed in PostgreSQL over the stored search vectors.

    score(row) = sum over query terms q of
                 qtf(q) * idf(q) * tf(q, row) * (k1 + 1) / (tf(q, row) + k1 * (1 - b + b * len(row) / avglen))
    idf(q)     = ln(1 + (N - df(q) + 0.5) / (df(q) + 0.5))                      (Lucene's BM25 idf)
    tf(q, row) = sum over fields f of W_f * (occurrences of q in field f)      (fields: the tsvector
    len(row)   = sum over fields f of W_f * (terms in field f)                  weights A, B, C, D)

N, df and avglen are those of the team's rows of that kind, read from `lessons_keyword_posting`
and `lessons_keyword_stats`, which triggers keep in step with the rows (migration 0002). Query
terms are the query's English lexemes (stemmed, without stop words) plus its exact words as the
'simple' configuration leaves them, when they differ from a stem and are not stop words: tags,
tech stacks and categories are indexed unstemmed, so `nextjs` or `rls` match them exactly.

Everything runs as one SQL statement; Python only formats it. The caller's filters are applied
inside it (a boolean expression over the row table aliased `t`), before the LIMIT.
"""

from dataclasses import dataclass

from django.conf import settings
from django.db import connection

TABLES = {"lessons": ("l", "lessons_lesson"), "memories": ("m", "lessons_memory")}
DEFAULT_BM25 = {"K1": 1.2, "B": 0.5, "FIELD_WEIGHTS": {"A": 1.5, "B": 1.0, "C": 0.5, "D": 1.0}}


@dataclass
class KeywordCandidate:
    id: int
    score: float  # raw BM25, >= 0, not normalised
    matched_terms: list[str]
    coverage: float | None = None  # share of the query's English terms the row carries


def bm25_parameters() -> tuple[float, float, dict[str, float]]:
    configured = {**DEFAULT_BM25, **getattr(settings, "SEARCH_BM25", {})}
    weights = {**DEFAULT_BM25["FIELD_WEIGHTS"], **configured.get("FIELD_WEIGHTS", {})}
    return float(configured["K1"]), float(configured["B"]), {field: float(weights[field]) for field in "ABCD"}


def keyword_leg_sql(
    *, kind: str, team_id: int, query: str, filter_sql: str, filter_params: list, limit: int
) -> tuple[str, list] | None:
    """One SELECT (id, score, matched_terms), best first, that a caller may run alone or embed as
    a CTE. None when the query holds no text at all."""
    if not query or not query.strip():
        return None
    kind_code, table = TABLES[kind]
    k1, b, weights = bm25_parameters()
    # float8 throughout: `1.0 * smallint` would be computed in (slow) numeric.
    weighted_tf = " + ".join(f"{weights[f]!r}::float8 * p.tf_{f.lower()}" for f in "ABCD")
    weighted_len = " + ".join(f"{weights[f]!r}::float8 * p.len_{f.lower()}" for f in "ABCD")
    stats_len = " + ".join(f"{weights[f]!r}::float8 * len_{f.lower()}" for f in "ABCD")
    sql = f"""
        WITH english AS (
            SELECT lexeme, coalesce(array_length(positions, 1), 1) AS qtf, true AS english
              FROM unnest(to_tsvector('english', %s))
        ), exact AS (
            SELECT s.lexeme, coalesce(array_length(s.positions, 1), 1) AS qtf, false AS english
              FROM unnest(to_tsvector('simple', %s)) AS s
             WHERE NOT EXISTS (SELECT 1 FROM english e WHERE e.lexeme = s.lexeme)
               AND numnode(plainto_tsquery('english', s.lexeme)) > 0
        ), terms AS (
            SELECT * FROM english UNION ALL SELECT * FROM exact
        ), stats AS (
            SELECT doc_count::float8 AS n, greatest(({stats_len}) / nullif(doc_count, 0), 1e-9) AS avglen
              FROM lessons_keyword_stats WHERE kind = %s AND team_id = %s
        ), term_weights AS MATERIALIZED (
            -- idf from each term's posting count, read off the index (no postings materialised)
            SELECT terms.lexeme, terms.english, df.df, terms.qtf * ln(1 + (stats.n - df.df + 0.5) / (df.df + 0.5)) AS weight
              FROM terms CROSS JOIN stats
             CROSS JOIN LATERAL (
                   SELECT count(*)::float8 AS df FROM lessons_keyword_posting AS p
                    WHERE p.kind = %s AND p.team_id = %s AND p.lexeme = terms.lexeme
             ) AS df
        ), weighted_terms AS (
            SELECT * FROM term_weights WHERE df > 0
        ), postings AS (
            SELECT p.row_id, p.lexeme, w.english, w.weight, ({weighted_tf}) AS tf, ({weighted_len}) AS len
              FROM weighted_terms AS w JOIN lessons_keyword_posting AS p
                ON p.kind = %s AND p.team_id = %s AND p.lexeme = w.lexeme
        ), scored AS (
            -- matched_terms unsorted: ordering them here sorted every posting (5 ms of 30 for a
            -- 16-term query); the engine sorts the few it shows.
            SELECT p.row_id,
                   sum(p.weight * p.tf * {k1 + 1!r} / (p.tf + {k1!r} * (1 - {b!r} + {b!r} * p.len / stats.avglen))) AS score,
                   array_agg(p.lexeme) AS matched_terms,
                   count(*) FILTER (WHERE p.english) AS english_matched
              FROM postings AS p CROSS JOIN stats
             WHERE p.tf > 0
             GROUP BY p.row_id
        ), ranked AS MATERIALIZED (
            SELECT * FROM scored ORDER BY score DESC, row_id
        )
        -- Walk the ranking best first and stop at `limit` rows that pass the filter, instead of
        -- joining every matching row to its table before sorting.
        -- coverage: the share of the query's English terms the row carries, an absolute signal
        -- (the score is only comparable within one search) for labelling hits without a model.
        -- max_score: what a row matching every query term (each as often as the query says, tf -> oo)
        -- would score, words no row has included: sum of qtf x idf x (k1 + 1). score / max_score is
        -- absolute evidence: matching one of two terms cannot reach 1.
        SELECT ranked.row_id AS id, ranked.score, ranked.matched_terms,
               ranked.english_matched::float8 / nullif((SELECT count(*) FROM english), 0) AS coverage,
               (SELECT sum(weight) * {k1 + 1!r} FROM term_weights) AS max_score
          FROM ranked
         WHERE EXISTS (SELECT 1 FROM {table} AS t WHERE t.id = ranked.row_id AND ({filter_sql}))
         ORDER BY ranked.score DESC, ranked.row_id
         LIMIT %s
    """
    params = [query, query, kind_code, team_id, kind_code, team_id, kind_code, team_id, *filter_params, limit]
    return sql, params


def keyword_candidates(
    *, kind: str, team_id: int, query: str, filter_sql: str, filter_params: list, limit: int
) -> list[KeywordCandidate]:
    """The best `limit` rows by BM25 among those passing the filter, best first."""
    statement = keyword_leg_sql(
        kind=kind, team_id=team_id, query=query, filter_sql=filter_sql, filter_params=filter_params, limit=limit
    )
    if statement is None:
        return []
    with connection.cursor() as cursor:
        cursor.execute(*statement)
        return [
            KeywordCandidate(id=row[0], score=float(row[1]), matched_terms=sorted(row[2]), coverage=row[3])
            for row in cursor.fetchall()
        ]
