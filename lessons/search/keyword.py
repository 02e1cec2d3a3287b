"""The keyword leg: top-k BM25 in PostgreSQL, reading each term's best postings first.

    score(row) = sum over query terms q of
                 qtf(q) * idf(q) * tf(q, row) * (k1 + 1) / (tf(q, row) + k1 * (1 - b + b * len(row) / avglen))
    idf(q)     = ln(1 + (N - df(q) + 0.5) / (df(q) + 0.5))                      (Lucene's BM25 idf)
    tf(q, row) = sum over fields f of W_f * (occurrences of q in field f)      (fields: the tsvector
    len(row)   = sum over fields f of W_f * (terms in field f)                  weights A, B, C, D)

Query terms are the query's English lexemes (stemmed, without stop words) plus its exact words as
the 'simple' configuration leaves them, when they differ from a stem and are not stop words: tags,
tech stacks and categories are indexed unstemmed, so `nextjs` or `rls` match them exactly; and a word
of letters and digits in its other spelling (`vue3` as `vue` `3`, "python 3" as `python3`: QUERY_TERMS_SQL).

## Design: impact-ordered heads, a bound, and completion (issue 13)

Scoring every posting of every query term grows with the team: at 100,000 lessons a common word
has tens of thousands of postings. The leg reads only what can matter, in one statement:

1. **Stored statistics.** N and avglen come from `lessons_keyword_stats`, df from
   `lessons_keyword_df` (both kept by triggers, migrations 0002 and 0006), so idf costs one index
   probe per term instead of counting its postings.
2. **The plan, from those frequencies** (before any posting is read). When the query's terms have
   at most SEARCH_KEYWORD_SCAN_RATIO (2.5) times the postings their heads would read, sum of df <=
   2.5 x sum of min(df, head), every posting is scored: the whole-list scan, exact, nothing to
   prove. Fitted over SciFact train's queries, a posting costs the scan ~1.8 us and the heads
   ~4.5 us (bounds, completion, verdict); with lists that short the heads read most of them
   anyway. Small teams and rare words take the scan, common words in a large team the heads. The
   choice is one probe of the frequencies before the statement (`keyword_plan`, 0.7 ms).
3. **Heads.** Each posting stores its *impact*, tf / (tf + k1 * (1 - b + b * len / avglen_ref)),
   computed with its team's reference average length (`lessons_keyword_reference`). An index on
   (kind, team, lexeme, impact DESC) gives each term's best HEAD postings (max(HEAD_POSTINGS, 8 x
   the leg's limit)) without touching the rest of its list.
4. **Partial scores and bounds.** A row seen in some heads has an exact partial score from them.
   For a term whose list was cut, a row missing from its head can score at most
   bound(q) = idf(q) * qtf * (k1 + 1) * impact of the head's last posting * max(1, avglen / avglen_ref)
   (the factor covers the team's average length having grown since the impacts were written: a
   longer average only raises today's term factor, by at most that ratio).
5. **Threshold and completion.** theta = the k-th best partial score among rows that pass the
   caller's filter (walked best first, so the filter is checked for few rows; each check is an
   index-only scan of the kind's covering index of the filter columns, migration 0009, not a heap
   fetch: at 300,000 lessons that took a filtered search's p95 from 100.5 to 80.6 ms). Every filtered row
   whose partial score plus its missing terms' bounds reaches theta has those postings read by
   primary key; its score is then exact. The top k of those exact scores is the answer.
6. **Certainty.** A row in no head at all scores at most the sum of the bounds. If that is below
   theta (and at least k rows passed the filter, and the impacts were computed with today's k1, b
   and field weights), no row outside the heads can enter the top k: the result is exactly BM25's
   top k, ties aside. Otherwise the statement says so (`certain` false) and the caller runs the
   whole-list scan (`keyword_leg_sql(..., head=None)`), the design before this one, so results
   never depend on the shortcut. A very restrictive filter was the typical uncertain case; 7 is
   why it is less so.
7. **Heads of the rows a filter admits** (migration 0011, signature.py). Every posting carries a
   64-bit Bloom signature of its row's equality filter values (status, category, tech stacks,
   project types, tags; memories: current, categories, emotions, people). Under a filter beyond
   the team's defaults the head read skips postings whose signature lacks the filter's bits (an
   index-only test on the impact index), so a head is the term's best postings *among rows the
   filter may keep*: the bound of 4 holds for them, and a head shorter than `head` is the whole
   admitted list (no bound). The exact filter is still checked in 5, now on rows that nearly all
   pass (a signature admits a rejected row with chance about (bits set / 64)^3: 1 in 130 for
   bench_search's lessons, 1 in 20 for a row with ten values; signature.py). Dates,
   importance and the fuzzy person match are not in the signature: those filters are checked row
   by row only. Measured at 100,000 synthetic lessons, bench_search's 57 filtered queries of 200,
   each query both ways in turn (text mode, median of 3): p50 / p95 18.5 / 28.4 ms before, 16.8
   / 21.9 ms with signatures; unproved answers among all 200 queries 166 -> 152. The signature
   costs 8 bytes a posting in the table and in the impact index.

Average-length drift: impacts use the reference length, so after a team's documents change in
length the order inside a head is slightly off and the bound's factor loosens (more rows to
complete, more uncertain fallbacks); results stay exact. `manage.py refresh_keyword_impacts`
recomputes a team's impacts when its average length has drifted by more than
SEARCH_KEYWORD_IMPACT_DRIFT; the task after every write (lessons.tasks.embed_item) and the end of
every import and corpus load run the same check, so no cron is needed. A refresh also applies
changed k1, b or field weights, which until then make every search take the whole-list scan.

Exactness, measured with `eval_retrieval DATASET --keyword-exactness` (no fallback; the top 10 of
a limit-10 search's leg, in order, against the whole-list scan's): as a search runs it (the plan,
2), and with heads always, of 500 postings (the default, HEAD_POSTINGS) and 1,000:

| dataset | queries | scanned by the plan | identical as searched | identical, heads of 500 | proved (500) | identical (1,000) | proved (1,000) |
|---|---:|---:|---:|---:|---:|---:|---:|
| SciFact train | 809 | 760 | 809 (100%) | 808 (99.9%) | 446 (55.1%) | 809 (100%) | 796 (98.4%) |
| SciFact test | 300 | 275 | 300 (100%) | 300 (100%) | 164 (54.7%) | 300 (100%) | 296 (98.7%) |
| LoCoMo dev (memories, per conversation) | 997 | 997 | 997 (100%) | 996 (99.9%, a tie) | 997 (100%) | 996 (a tie) | 997 (100%) |
| lessons-dev (graded, exact and never queries) | 16 | 16 | 16 (100%) | 16 (100%) | 16 (100%) | 16 (100%) | 16 (100%) |

SciFact train's nDCG@10 is the same at 500 as at 1,000 (hybrid 0.7325, text 0.6987); at limit 100
(legs of 150, heads of 1,200) the plan scans every one of these queries, and the heads alone would
have proved 804 of 809 SciFact train answers. Heads of 500 are the default because the answers
stay the same while, at 300,000 lessons, a hybrid search's p95 fell from 94.0 to 78.6 ms (paired
runs of bench_search's queries, each query at both sizes in turn); 300 gave 71.6 ms but SciFact
train 804 of 809 identical.

At 100,000 synthetic lessons (bench_search's text, far flatter than real text: a few templates,
so a common word's postings nearly all score alike) about half of the multi-word queries cannot be
proved; their answers are kept (SEARCH_KEYWORD_EXACT_FALLBACK off) and are still complete for every
row the heads reached. README, Scale, has the latency.
"""

from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from lessons.search.signature import signature_sql
from lessons.search.spellings import stored_spellings_sql

TABLES = {"lessons": ("l", "lessons_lesson"), "memories": ("m", "lessons_memory")}
DEFAULT_BM25 = {"K1": 1.2, "B": 0.3, "FIELD_WEIGHTS": {"A": 1.5, "B": 1.0, "C": 0.5, "D": 1.0}}
# Postings read per term before the bound takes over (at least 8 x the leg's limit).
HEAD_POSTINGS = 500
# A query whose terms have at most this many times the postings their heads would read has them
# all scored (the design, 2): a posting costs the scan ~1.8 us, the heads ~4.5 us.
SCAN_RATIO = 2.5


@dataclass
class KeywordCandidate:
    id: int
    score: float  # raw BM25, >= 0, not normalised
    matched_terms: list[str]
    coverage: float | None = None  # share of the query's English terms the row carries
    certain: bool = True  # False: the heads could not prove this is BM25's top k
    scanned: bool = False  # every posting was scored (the plan, design 2), not the heads
    word_share: float | None = None  # share of the query's words it matched, each once in any form


# Memory for the leg's hash aggregates (per row: its partial score and matched terms). PostgreSQL
# sizes an array_agg group at 8 kB when it plans, so with the default work_mem (4 MB) a hash of
# more than about 1,000 rows spilled to disk: every heads search on a large team (3,000 head
# postings, 2,000 rows) wrote temporary files. Set for the statement only (SET LOCAL).
KEYWORD_WORK_MEM = "32MB"


def keyword_session_sql() -> str:
    """SET LOCAL statements sent in the same round trip as the leg (so they end with its transaction)."""
    return f"SET LOCAL work_mem = '{KEYWORD_WORK_MEM}'; "


def bm25_parameters() -> tuple[float, float, dict[str, float]]:
    configured = {**DEFAULT_BM25, **getattr(settings, "SEARCH_BM25", {})}
    weights = {**DEFAULT_BM25["FIELD_WEIGHTS"], **configured.get("FIELD_WEIGHTS", {})}
    return float(configured["K1"]), float(configured["B"]), {field: float(weights[field]) for field in "ABCD"}


def head_size(limit: int) -> int:
    return max(int(getattr(settings, "SEARCH_KEYWORD_HEAD", HEAD_POSTINGS)), 8 * limit)


# CTEs english, exact, terms (and their helpers): the query's terms (parameters: the query, twice,
# then the kind and team), as the leg and its plan both read them; without `<` and without accents,
# as the rows' search vectors are (lessons.models.WithoutTagStarts, KeywordText).
# Each term keeps the positions of the query's words it came from: one word can give two terms (the
# stem `secur` and the unstemmed `security`, as a tag is indexed), and a row matching both matched
# one word, not two.
# `split_or_joined`: a word of letters then digits (or digits then letters) is also read written apart,
# and two such neighbouring words also written as one: "vue3" is also `vue` and `3`, "vue 3" also `vue3`
# and "2 FA" `2fa`, as people write both (the parser keeps "vue3" one word). A word is read apart only
# where no row of the team says it as the query does: "APOE4" is a gene, not APOE and 4 (read apart it
# cost SciFact train's hybrid 0.0025 nDCG@10, as a fallback 0.0007). The other spelling weighs 0.8 of
# what it stands for (each part 0.4 of its word, the joined form 1.6: 0.8 of its two), so on equal
# statistics the query's own spelling ranks first. These are spellings of words already counted, so
# the attainable maximum leaves them out (`alternative`): they find rows and never lower a label.
QUERY_TERMS_SQL = """
        english AS (
            SELECT lexeme, coalesce(array_length(positions, 1), 1)::float8 AS qtf, true AS english, positions,
                   false AS alternative
              FROM unnest(to_tsvector('english', lessons_keyword_text(translate(%s, '<', ' '))))
        ), simple_words AS (
            SELECT * FROM unnest(to_tsvector('simple', lessons_keyword_text(translate(%s, '<', ' ')))) AS s
        ), exact AS (
            SELECT s.lexeme, coalesce(array_length(s.positions, 1), 1)::float8 AS qtf, false AS english, s.positions,
                   false AS alternative
              FROM simple_words AS s
             WHERE NOT EXISTS (SELECT 1 FROM english e WHERE e.lexeme = s.lexeme)
               AND numnode(plainto_tsquery('english', s.lexeme)) > 0
        ), other_forms AS (
            -- (text, weight, positions, source): a word written apart, when the team has no row saying it
            -- as the query does, and two neighbouring words written as one
            SELECT parts.text, 0.4 * coalesce(array_length(s.positions, 1), 1) AS qtf, s.positions, s.lexeme AS source
              FROM simple_words AS s
             CROSS JOIN LATERAL (
                   SELECT m[1] || ' ' || m[2] AS text
                     FROM regexp_match(s.lexeme, '^([[:alpha:]]+|[[:digit:]]+)([[:alpha:]]+|[[:digit:]]+)$') AS m
                    WHERE (m[1] ~ '^[[:digit:]]') <> (m[2] ~ '^[[:digit:]]')) AS parts
            UNION ALL
            SELECT w.lexeme || d.lexeme, 1.6, ARRAY[wp, dp]::smallint[], NULL
              FROM simple_words AS w CROSS JOIN unnest(w.positions) AS wp,
                   simple_words AS d CROSS JOIN unnest(d.positions) AS dp
             WHERE dp = wp + 1 AND ((w.lexeme ~ '^[[:alpha:]]+$' AND d.lexeme ~ '^[[:digit:]]+$')
                                 OR (w.lexeme ~ '^[[:digit:]]+$' AND d.lexeme ~ '^[[:alpha:]]+$'))
        ), other_terms AS (
            SELECT e.lexeme, o.qtf, o.positions
              FROM other_forms AS o CROSS JOIN LATERAL unnest(to_tsvector('english', o.text)) AS e
             WHERE NOT EXISTS (SELECT 1 FROM english x WHERE x.lexeme = e.lexeme)
               AND NOT EXISTS (SELECT 1 FROM exact x WHERE x.lexeme = e.lexeme)
               AND (o.source IS NULL OR (SELECT coalesce(sum(d.df), 0) FROM lessons_keyword_df AS d
                                          WHERE d.kind = %s AND d.team_id = %s AND d.lexeme = o.source) <= 0)
        ), split_or_joined AS (
            SELECT o.lexeme, sum(o.qtf) AS qtf, false AS english,
                   ARRAY(SELECT DISTINCT p FROM other_terms AS x CROSS JOIN unnest(x.positions) AS p
                          WHERE x.lexeme = o.lexeme ORDER BY p)::smallint[] AS positions, true AS alternative
              FROM other_terms AS o
             GROUP BY o.lexeme
        ), terms AS (
            SELECT * FROM english UNION ALL SELECT * FROM exact UNION ALL SELECT * FROM split_or_joined
        )"""


def _terms_and_weights_sql(*, stats_len: str) -> str:
    """CTEs english, exact, terms, stats, term_weights, weighted_terms: the query's terms with
    their idf weights, from the stored statistics."""
    return f"""
        {QUERY_TERMS_SQL}, stats AS MATERIALIZED (
            -- the shards' sums (the counters are sharded by writer, migration 0006)
            SELECT sum(doc_count)::float8 AS n,
                   greatest(sum({stats_len}) / nullif(sum(doc_count), 0), 1e-9) AS avglen
              FROM lessons_keyword_stats WHERE kind = %s AND team_id = %s
        ), term_weights AS MATERIALIZED (
            SELECT terms.lexeme, terms.english, terms.alternative, df.df,
                   terms.qtf * ln(1 + (stats.n - df.df + 0.5) / (df.df + 0.5)) AS weight
              FROM terms CROSS JOIN stats
             CROSS JOIN LATERAL (
                   SELECT coalesce(sum(d.df), 0)::float8 AS df FROM lessons_keyword_df AS d
                    WHERE d.kind = %s AND d.team_id = %s AND d.lexeme = terms.lexeme
             ) AS df
        ), weighted_terms AS (
            SELECT * FROM term_weights WHERE df > 0
        )"""


def english_lexemes(word: str) -> frozenset[str]:
    """The English terms the leg reads `word` as (QUERY_TERMS_SQL's `english`): "retries" is
    `retri`. A one-word lookup asks whether a row matched these, not every term of its query."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT array(SELECT lexeme FROM unnest(to_tsvector('english',"
                       " lessons_keyword_text(translate(%s, '<', ' ')))))", [word])
        return frozenset(cursor.fetchone()[0])


def scan_ratio() -> float:
    """The default leg scores every posting when the query's terms have at most this many times the
    postings their heads would read (the design, 2)."""
    return float(getattr(settings, "SEARCH_KEYWORD_SCAN_RATIO", SCAN_RATIO))


def keyword_plan(*, kind: str, team_id: int, query: str, limit: int) -> int | None:
    """The leg's plan for this query (the design, 2): None, score every posting, when its terms
    have at most scan_ratio() times the postings their heads of head_size(limit) would read;
    otherwise that head size. One probe of the stored document frequencies. (Both plans in one
    statement behind one-time filters cost 3 ms of planning on every search: more than the choice
    saves on a small team.)"""
    return keyword_probe(kind=kind, team_id=team_id, query=query, limit=limit).head


@dataclass(frozen=True)
class KeywordProbe:
    head: int | None  # keyword_plan's answer
    spellings: list[tuple[str, str]]  # (term, a stored spelling of it): spellings.stored_spellings_sql


def keyword_probe(*, kind: str, team_id: int, query: str, limit: int, spelling_terms=()) -> KeywordProbe:
    """The plan, and in the same round trip the stored spellings of `spelling_terms` (a short
    query's exact terms: "nextjs" is also the tech stack written "next.js")."""
    kind_code, _ = TABLES[kind]
    head = head_size(limit)
    spellings_sql, spellings_params = "NULL::text[]", []
    if spelling_terms:
        spellings_sql, spellings_params = stored_spellings_sql(kind_code=kind_code, team_id=team_id,
                                                               terms=spelling_terms)
    sql = f"""
        WITH {QUERY_TERMS_SQL}, df AS (
            SELECT d.lexeme, sum(d.df) AS df FROM lessons_keyword_df AS d
             WHERE d.kind = %s AND d.team_id = %s AND d.lexeme IN (SELECT lexeme FROM terms)
             GROUP BY d.lexeme
        )
        SELECT coalesce(sum(df), 0) <= %s * coalesce(sum(least(df, {head})), 0), ({spellings_sql}) FROM df
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [query, query, kind_code, team_id, kind_code, team_id, scan_ratio(), *spellings_params])
        scan, spellings = cursor.fetchone()
    return KeywordProbe(head=None if scan else head, spellings=[(term, lexeme) for term, lexeme in spellings or []])


def keyword_leg_sql(
    *, kind: str, team_id: int, query: str, filter_sql: str, filter_params: list, limit: int,
    head: int | None = 0, signature_masks: tuple[tuple[int, ...], ...] = (),
) -> tuple[str, list] | None:
    """One SELECT (id, score, matched_terms, coverage, max_score, certain, scanned, word_share), best first,
    that a caller may run alone or embed as a CTE. `head`: postings read per term (0: the default
    for this limit; None: every posting, the exact whole-list scan; `keyword_plan` chooses). None
    when the query holds no text. With heads, an empty answer that is not certain comes as one row
    with a NULL id. `signature_masks` (the filter's, filters.FilterClause): postings whose
    signature lacks them are skipped, since their rows fail the filter (the design, 7)."""
    if not query or not query.strip():
        return None
    kind_code, table = TABLES[kind]
    k1, b, weights = bm25_parameters()
    sql_parts = _bm25_sql_parts()
    common = _terms_and_weights_sql(stats_len=sql_parts.pop("stats_len"))
    params = [query, query, kind_code, team_id, kind_code, team_id, kind_code, team_id]
    signature = f" AND {signature_sql(signature_masks, column='p.signature')}" if signature_masks else ""
    leg = dict(kind_code=kind_code, team_id=team_id, table=table, filter_sql=filter_sql,
               filter_params=filter_params, limit=limit, signature=signature, **sql_parts)
    if head is None:
        ctes, leg_params, answer = _scan_sql(**leg)
    else:
        ctes, leg_params, answer = _heads_sql(**leg, head=head or head_size(limit), k1=k1, b=b, weights=weights)
    return f"WITH {common}, {ctes} {answer}", [*params, *leg_params]


def _bm25_sql_parts() -> dict[str, str]:
    """The formula's SQL pieces, for the leg and for rows_scored_sql alike. float8 throughout:
    `1.0 * smallint` would be computed in (slow) numeric."""
    k1, b, weights = bm25_parameters()
    return {
        "weighted_tf": " + ".join(f"{weights[f]!r}::float8 * p.tf_{f.lower()}" for f in "ABCD"),
        "weighted_len": " + ".join(f"{weights[f]!r}::float8 * p.len_{f.lower()}" for f in "ABCD"),
        "term_factor": f"p.tf * {k1 + 1!r} / (p.tf + {k1!r} * (1 - {b!r} + {b!r} * p.len / stats.avglen))",
        # max_score: what a row matching every query term (each as often as the query says, tf -> oo)
        # would score, words no row has included: sum of qtf x idf x (k1 + 1). score / max_score is
        # absolute evidence: matching one of two terms cannot reach 1.
        # coverage: the share of the query's English terms the row carries.
        "outputs": f"""
               english_matched::float8 / nullif((SELECT count(*) FROM english), 0) AS coverage,
               (SELECT sum(weight) FILTER (WHERE NOT alternative) * {k1 + 1!r} FROM term_weights) AS max_score""",
        "stats_len": " + ".join(f"{weights[f]!r}::float8 * len_{f.lower()}" for f in "ABCD"),
    }


def rows_scored_sql(*, kind_code: str, team_id: int, query: str, row_ids: list[int]) -> tuple[str, list]:
    """One SELECT (id, score, matched_terms, coverage, max_score, word_share) of `row_ids`, scored
    for `query` as the leg scores a row (its formula, statistics and outputs), each row's postings
    read by primary key: a few rows, not every posting of the query's terms (a spelled tech stack
    is carried by thousands of rows on a large team). exact.with_spelled_keyword_signals uses it."""
    parts = _bm25_sql_parts()
    sql = f"""
        WITH {_terms_and_weights_sql(stats_len=parts["stats_len"])}, spelled_postings AS (
            SELECT p.row_id, w.lexeme, w.english, w.weight, ({parts["weighted_tf"]}) AS tf,
                   ({parts["weighted_len"]}) AS len
              FROM weighted_terms AS w JOIN lessons_keyword_posting AS p
                ON p.kind = %s AND p.row_id = ANY(%s::bigint[]) AND p.lexeme = w.lexeme
        ), spelled AS (
            SELECT p.row_id, sum(p.weight * {parts["term_factor"]}) AS score, array_agg(p.lexeme) AS matched_terms,
                   count(*) FILTER (WHERE p.english) AS english_matched
              FROM spelled_postings AS p CROSS JOIN stats
             WHERE p.tf > 0
             GROUP BY p.row_id
        )
        SELECT s.row_id AS id, s.score, s.matched_terms, {parts["outputs"]}, {_word_share_sql("s")}
          FROM spelled AS s"""
    return sql, [query, query, kind_code, team_id, kind_code, team_id, kind_code, team_id, kind_code, list(row_ids)]


def _word_share_sql(alias: str) -> str:
    """The answer's last column: the share of the query's words (their positions) that the row's
    matched terms come from, each word once whichever of its forms matched. Only for a row that
    matched a term in its unstemmed form (a tag's): one that matched English terms alone has its
    coverage, and counting its words cost 2 ms a statement on SciFact's long claims."""
    words = "SELECT count(DISTINCT q.pos) FROM terms AS t CROSS JOIN unnest(t.positions) AS q(pos)"
    return (f"CASE WHEN cardinality({alias}.matched_terms) > {alias}.english_matched THEN "
            f"({words} WHERE t.lexeme = ANY({alias}.matched_terms))::float8 / nullif(({words}), 0) END "
            "AS word_share")


def _scan_sql(*, kind_code, team_id, table, filter_sql, filter_params, limit, signature, weighted_tf, weighted_len,
              term_factor, outputs) -> tuple[str, list, str]:
    """The whole-list scan: every posting of every query term scored. CTEs, their parameters, and
    the SELECT of the answer."""
    ctes = f"""
        scan_postings AS (
            SELECT p.row_id, p.lexeme, w.english, w.weight, ({weighted_tf}) AS tf, ({weighted_len}) AS len
              FROM weighted_terms AS w JOIN lessons_keyword_posting AS p
                ON p.kind = %s AND p.team_id = %s AND p.lexeme = w.lexeme{signature}
        ), scan_scored AS (
            -- matched_terms unsorted: sorting them here sorted every posting; the engine sorts the few it shows
            SELECT p.row_id, sum(p.weight * {term_factor}) AS score, array_agg(p.lexeme) AS matched_terms,
                   count(*) FILTER (WHERE p.english) AS english_matched
              FROM scan_postings AS p CROSS JOIN stats
             WHERE p.tf > 0
             GROUP BY p.row_id
        ), scan_ranked AS MATERIALIZED (
            SELECT * FROM scan_scored ORDER BY score DESC, row_id
        ), scan_answer AS (
            -- walk the ranking best first and stop at `limit` rows that pass the filter
            SELECT r.row_id AS id, r.score, r.matched_terms, {outputs}, true AS certain, true AS scanned,
                   {_word_share_sql("r")}
              FROM scan_ranked AS r
             WHERE EXISTS (SELECT 1 FROM {table} AS t WHERE t.id = r.row_id AND ({filter_sql}))
             ORDER BY r.score DESC, r.row_id
             LIMIT %s
        )"""
    return ctes, [kind_code, team_id, *filter_params, limit], "SELECT * FROM scan_answer"


def _heads_sql(*, kind_code, team_id, table, filter_sql, filter_params, limit, signature, weighted_tf,
               weighted_len, term_factor, outputs, head, k1, b, weights) -> tuple[str, list, str]:
    """Heads of `head` postings a term, the bound, completion and the verdict (the design above).
    CTEs, their parameters, and the SELECT of the answer."""

    def filtered(row: str) -> str:
        # A scalar subquery, not EXISTS: the planner turns a lone EXISTS into a semi-join, which may
        # hash the ranking and lose its order; a per-row filter keeps it and stops at the LIMIT.
        return f"(SELECT true FROM {table} AS t WHERE t.id = {row} AND ({filter_sql})) IS NOT NULL"

    ctes = f"""
        reference AS MATERIALIZED (
            SELECT greatest(1, stats.avglen / r.avglen) AS drift,
                   (r.k1 = {k1!r} AND r.b = {b!r} AND r.w_a = {weights['A']!r} AND r.w_b = {weights['B']!r}
                    AND r.w_c = {weights['C']!r} AND r.w_d = {weights['D']!r}) AS current
              FROM lessons_keyword_reference AS r CROSS JOIN stats
             WHERE r.kind = %s AND r.team_id = %s
        ), heads AS MATERIALIZED (
            -- each term's best postings by stored impact (of rows the filter's signature admits):
            -- an index range read that stops at `head`
            SELECT w.lexeme, w.english, w.weight, w.df > {head} AS cut, p.row_id, p.impact,
                   ({weighted_tf}) AS tf, ({weighted_len}) AS len
              FROM weighted_terms AS w CROSS JOIN LATERAL (
                   SELECT * FROM lessons_keyword_posting AS p
                    WHERE p.kind = %s AND p.team_id = %s AND p.lexeme = w.lexeme{signature}
                    ORDER BY p.impact DESC LIMIT {head}
              ) AS p
        ), bounds AS MATERIALIZED (
            -- the most a row missing from a cut head can still get from that term (a head shorter
            -- than `head` holds every posting the signature admits: nothing is missing)
            SELECT h.lexeme, h.english, h.weight,
                   CASE WHEN bool_or(h.cut) AND count(*) >= {head}
                        THEN h.weight * {k1 + 1!r} * min(h.impact) * (SELECT drift FROM reference)
                        ELSE 0 END AS bound
              FROM heads AS h GROUP BY h.lexeme, h.english, h.weight
        ), ranked AS MATERIALIZED (
            -- partial scores from the heads; `upper` adds the bounds of the cut terms a row was not seen in
            SELECT p.row_id, sum(p.weight * {term_factor}) AS score,
                   sum(p.weight * {term_factor}) + (SELECT sum(bound) FROM bounds) - sum(b.bound) AS upper,
                   array_agg(p.lexeme) AS matched_terms, count(*) FILTER (WHERE p.english) AS english_matched
              FROM heads AS p JOIN bounds AS b ON b.lexeme = p.lexeme CROSS JOIN stats
             WHERE p.tf > 0
             GROUP BY p.row_id
             ORDER BY score DESC, p.row_id
        ), top_partial AS MATERIALIZED (
            -- the best `limit` partial scores among rows the caller may see, walked best first
            SELECT r.* FROM ranked AS r WHERE {filtered("r.row_id")} LIMIT %s
        ), theta AS MATERIALIZED (
            -- fewer than k: the answer cannot be proved, and nothing is worth completing
            SELECT CASE WHEN count(*) >= %s THEN min(score) ELSE 'infinity' END AS theta, count(*) AS found
              FROM top_partial
        ), promising AS MATERIALIZED (
            SELECT r.* FROM ranked AS r, theta
             WHERE r.upper > r.score AND r.upper >= theta.theta
             ORDER BY r.upper DESC, r.row_id
        ), incomplete AS MATERIALIZED (
            -- rows whose missing terms could still lift them to the k-th partial score, most promising
            -- first, the filter checked as they come; at most 4k of them (more: the answer is not proved)
            SELECT r.* FROM promising AS r
             WHERE r.row_id IN (SELECT row_id FROM top_partial) OR {filtered("r.row_id")}
             LIMIT {4 * limit + 1}
        ), completion AS (
            -- their missing terms' postings, each read by primary key
            SELECT i.row_id, sum(b.weight * {term_factor}) AS score, array_agg(b.lexeme) AS matched_terms,
                   count(*) FILTER (WHERE b.english) AS english_matched
              FROM incomplete AS i
              JOIN bounds AS b ON b.bound > 0 AND NOT b.lexeme = ANY(i.matched_terms)
              CROSS JOIN LATERAL (
                   SELECT ({weighted_tf}) AS tf, ({weighted_len}) AS len FROM lessons_keyword_posting AS p
                    WHERE p.kind = %s AND p.row_id = i.row_id AND p.lexeme = b.lexeme
                    LIMIT 1  -- one row by primary key; the LIMIT also keeps the planner from flattening
              ) AS p
              CROSS JOIN stats
             WHERE p.tf > 0
             GROUP BY i.row_id
        ), final AS (
            SELECT r.row_id, r.score + coalesce(c.score, 0) AS score,
                   r.matched_terms || coalesce(c.matched_terms, '{{}}') AS matched_terms,
                   r.english_matched + coalesce(c.english_matched, 0) AS english_matched
              FROM (SELECT * FROM top_partial UNION SELECT * FROM incomplete) AS r
              LEFT JOIN completion AS c ON c.row_id = r.row_id
        ), verdict AS MATERIALIZED (
            -- no row outside the heads can pass the k-th: each scores at most the bounds' sum
            SELECT coalesce((SELECT current FROM reference), false)
                   AND (NOT EXISTS (SELECT 1 FROM bounds WHERE bound > 0)
                        OR ((SELECT found FROM theta) >= %s
                            AND (SELECT count(*) FROM incomplete) <= {4 * limit}
                            AND (SELECT sum(bound) FROM bounds) <= (SELECT theta FROM theta))) AS certain
        ), answer AS (
            SELECT final.row_id AS id, final.score, final.matched_terms, {outputs}, verdict.certain,
                   false AS scanned, {_word_share_sql("final")}
              FROM final CROSS JOIN verdict
             ORDER BY final.score DESC, final.row_id
             LIMIT %s
        )"""
    answer = """
        SELECT * FROM answer
        UNION ALL  -- an empty answer still says whether it is certain
        SELECT NULL, NULL, NULL, NULL, NULL, false, false, NULL FROM verdict
         WHERE NOT verdict.certain AND NOT EXISTS (SELECT 1 FROM answer)"""
    params = [
        kind_code, team_id, kind_code, team_id, *filter_params, limit, limit, *filter_params,
        kind_code, limit, limit,
    ]
    return ctes, params, answer


def exact_fallback() -> bool:
    """Whether an answer the heads cannot prove is replaced by the whole-list scan's."""
    return bool(getattr(settings, "SEARCH_KEYWORD_EXACT_FALLBACK", False))


def keyword_candidates(
    *, kind: str, team_id: int, query: str, filter_sql: str, filter_params: list, limit: int,
    head: int | None = 0, fallback: bool | None = None, signature_masks: tuple[tuple[int, ...], ...] = (),
) -> list[KeywordCandidate]:
    """The best `limit` rows by BM25 among those passing the filter, best first, as a search's leg
    finds them (`head` 0: the plan `keyword_plan` chooses; a number: heads of that size; None: every
    posting). An answer the heads cannot prove is kept, flagged `certain=False`, unless `fallback`
    (default SEARCH_KEYWORD_EXACT_FALLBACK) asks for the scan."""
    if not query or not query.strip():
        return []
    if head == 0:
        head = keyword_plan(kind=kind, team_id=team_id, query=query, limit=limit)
    statement = keyword_leg_sql(kind=kind, team_id=team_id, query=query, filter_sql=filter_sql,
                                filter_params=filter_params, limit=limit, head=head, signature_masks=signature_masks)
    with connection.cursor() as cursor:
        cursor.execute(keyword_session_sql() + statement[0], statement[1])
        while cursor.description is None and cursor.nextset():  # past the SET LOCAL
            pass
        rows = cursor.fetchall()
    if fallback is None:
        fallback = exact_fallback()
    if head is not None and fallback and any(not row[5] for row in rows):
        return keyword_candidates(kind=kind, team_id=team_id, query=query, filter_sql=filter_sql,
                                  filter_params=filter_params, limit=limit, head=None,
                                  signature_masks=signature_masks)
    return [KeywordCandidate(id=row[0], score=float(row[1]), matched_terms=sorted(row[2]), coverage=row[3],
                             certain=row[5], scanned=row[6], word_share=row[7])
            for row in rows if row[0] is not None]
