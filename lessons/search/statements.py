"""The search's SQL: statement 1 (keyword and exact-term legs), statement 2a (the semantic legs) and
statement 2b (the fields of every kept candidate), plus the field fetches the fallbacks need.

Rows come back as dicts of a candidate's fields and signals; the legs' SQL lives in keyword.py,
exact.py and semantic.py.
"""

from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import connection

from lessons.search.exact import exact_leg_sql, exact_session_sql
from lessons.search.keyword import exact_fallback, keyword_leg_sql, keyword_probe, keyword_session_sql
from lessons.search.kinds import TIMESTAMPS, SearchKind
from lessons.search.semantic import feedback_vector_sql, semantic_leg_sql, session_settings_sql
from lessons.search.spellings import with_spellings

LEG_NAMES = {"sem_p": "semantic", "sem_c": "contextual_semantic", "kw_p": "keyword", "ex": "exact"}
KEYWORD_SIGNALS = ("bm25_p", "bm25_max", "terms_p", "coverage_p", "word_share_p", "in_kw_p", "in_ex")


@dataclass(frozen=True)
class Scope:
    """Where a search looks: the kind, and the filter clause over `t` every leg applies."""

    kind: SearchKind
    filter_sql: str
    filter_params: list
    narrowed: bool = False  # a filter beyond the team and its default status or versions (SearchFilters.narrows)
    signature_masks: tuple[tuple[int, ...], ...] = ()  # the filter's, for the keyword postings (signature.py)


def field_columns(kind: SearchKind, *, display: bool = True) -> list[str]:
    """The SELECT list of a candidate's fields; without `display`, not the long texts no score
    reads (SearchKind.display_fields: `with_display_fields` fetches them for the page's hits).
    Timestamps come as fixed-format UTC text, parsed by `datetime.fromisoformat` (C): psycopg's
    timestamptz loader as Django registers it is pure Python, and parsing two timestamps for ~500
    candidates cost 9 ms of a 50 ms search."""
    return [
        f"to_char(t.{column} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US') AS {column}"
        if column in TIMESTAMPS else f"t.{column}"
        for column in kind.fields if display or column not in kind.display_fields
    ]


def with_display_fields(*, kind: SearchKind, rows: list[dict]) -> None:
    """Add the long texts (SearchKind.display_fields) to the rows of the page's hits that lack
    them, in place, each row's fields in the kind's order. The candidates travel without them: a
    lesson's description, context and recommendation were most of statement 2b's 60-110 kB for
    ~150 candidates, of which a page shows 10."""
    rows = [row for row in rows if any(name not in row for name in kind.display_fields)]
    if not rows:
        return
    texts = {found["id"]: found for found in fetch_dicts(
        f"SELECT t.id, {', '.join(f't.{name}' for name in kind.display_fields)} FROM {kind.table} AS t"
        " WHERE t.id = ANY(%s::bigint[])", [[row["id"] for row in rows]])}
    for row in rows:
        found = texts.get(row["id"], {})
        merged = {**row, **{name: found.get(name) for name in kind.display_fields}}
        row.clear()
        row.update({name: merged[name] for name in kind.fields})


def keyword_statement(*, scope: Scope, team_id: int, keyword_query: str, exact_terms: list[str],
                      term_forms: dict[str, list[str]], limit: int, with_fields: bool,
                      head: int | None = 0) -> tuple[list[dict], dict]:
    """Statement 1: the BM25 and exact-term legs: each candidate's id, BM25 (and the query's
    attainable maximum), matched terms and coverage, and its fields when no statement 2 will fetch
    them (text mode, no model). Returns the rows and each leg's count.

    The BM25 leg scores every posting of the query's terms when they are few next to their heads,
    else reads each term's best postings (`keyword_probe`, one probe first; keyword.py). When the
    heads cannot prove their answer is BM25's top k, the counts say so (`keyword_unproved`), and
    with SEARCH_KEYWORD_EXACT_FALLBACK the statement runs again over every posting (`head=None`)."""
    kind = scope.kind
    ctes: list[tuple[str, str, list]] = []
    if head == 0 and keyword_query.strip():
        # the plan, and the stored spellings of the exact terms ("nextjs" is also "next.js"): one probe
        probe = keyword_probe(kind=kind.name, team_id=team_id, query=keyword_query, limit=limit,
                              spelling_terms=exact_terms)
        head, term_forms = probe.head, with_spellings(term_forms, probe.spellings)
    # Postings are skipped by signature only under a narrowing filter: the team's default status or
    # versions admit nearly every row, and the unfiltered leg stays as measured (keyword.py).
    leg = keyword_leg_sql(kind=kind.name, team_id=team_id, query=keyword_query, filter_sql=scope.filter_sql,
                          filter_params=scope.filter_params, limit=limit, head=head,
                          signature_masks=scope.signature_masks if scope.narrowed else ())
    if leg is not None:
        ctes.append(("kw_p", leg[0], leg[1]))
    if exact_terms:
        ctes.append(("ex", *exact_leg_sql(kind=kind, terms=exact_terms, forms=term_forms, filter_sql=scope.filter_sql,
                                          filter_params=scope.filter_params, limit=limit, narrowed=scope.narrowed)))
    if not ctes:
        return [], {}
    names = [name for name, _, _ in ctes]
    params = [value for _, _, cte_params in ctes for value in cte_params]
    columns = []
    if "kw_p" in names:
        columns.append("kw_p.score AS bm25_p, kw_p.max_score AS bm25_max, kw_p.matched_terms AS terms_p,"
                       " kw_p.coverage AS coverage_p, kw_p.word_share AS word_share_p")
    columns.extend(f"({name}.id IS NOT NULL) AS in_{name}" for name in names)
    union = " UNION ".join(f"SELECT id FROM {name} WHERE id IS NOT NULL" for name in names)
    joins = "".join(f" LEFT JOIN {name} ON {name}.id = c.id" for name in names)
    if with_fields:  # text mode's one statement: the long texts too, for ~50 rows rather than a round trip
        columns[:0] = field_columns(kind)
        joins = f" JOIN {kind.table} AS t ON t.id = c.id" + joins
    else:
        columns.insert(0, "c.id")
    # The verdict rides on a one-row table, so it arrives even when no row does.
    verdict = "(SELECT coalesce(bool_and(certain), true) FROM kw_p)" if "kw_p" in names else "true"
    statement = (
        (keyword_session_sql() if "kw_p" in names else "") + (exact_session_sql() if "ex" in names else "")
        + "WITH " + ", ".join(f"{name} AS MATERIALIZED ({sql})" for name, sql, _ in ctes)
        + f", candidate_ids AS ({union}) SELECT verdict.kw_certain, found.* FROM (SELECT {verdict} AS kw_certain)"
        + f" AS verdict LEFT JOIN (SELECT {', '.join(columns)} FROM candidate_ids AS c{joins}) AS found ON true"
    )
    rows = fetch_dicts(statement, params)
    if head is not None and rows and not rows[0]["kw_certain"] and exact_fallback():
        return keyword_statement(scope=scope, team_id=team_id, keyword_query=keyword_query, exact_terms=exact_terms,
                                 term_forms=term_forms, limit=limit, with_fields=with_fields, head=None)
    verdict_certain = not rows or rows[0]["kw_certain"]
    rows = [row for row in rows if row["id"] is not None]
    counts = {LEG_NAMES[name]: sum(1 for row in rows if row[f"in_{name}"]) for name in names}
    if not verdict_certain:
        counts["keyword_unproved"] = 1
    return rows, counts


def semantic_legs(*, scope: Scope, vectors: list[str], limit: int) -> dict[str, list[tuple[int, float]]]:
    """Statement 2a: the semantic legs alone (HNSW), each leg's (id, cosine), nearest first: `sem_p`
    for the primary query, `sem_c` for the contextual one. It reads nothing statement 1 found, so
    it can run on a connection of its own at the same time (parallel.py)."""
    kind = scope.kind
    legs = [("sem_p", *semantic_leg_sql(table=kind.table, vector=vectors[0], filter_sql=scope.filter_sql,
                                        filter_params=scope.filter_params, limit=limit))]
    if len(vectors) > 1:
        legs.append(("sem_c", *semantic_leg_sql(table=kind.table, vector=vectors[1], filter_sql=scope.filter_sql,
                                                filter_params=scope.filter_params, limit=limit)))
    prefix, params = session_settings_sql()
    statement = prefix + " UNION ALL ".join(
        f"(SELECT '{name}' AS leg, leg.id, leg.similarity FROM ({sql}) AS leg)" for name, sql, _ in legs
    )
    params = [*params, *(value for _, _, leg_params in legs for value in leg_params)]
    found: dict[str, list[tuple[int, float]]] = {name: [] for name, _, _ in legs}
    for row in fetch_dicts(statement, params):
        found[row["leg"]].append((row["id"], float(row["similarity"])))
    for rows in found.values():
        rows.sort(key=lambda pair: -pair[1])  # relaxed_order: the index may return them slightly out of order
    return found


def candidate_statement(*, scope: Scope, vectors: list[str], semantic: dict[str, list[tuple[int, float]]],
                        keyword_rows: list[dict], floor: float, band: float | None = None,
                        feedback: dict | None = None) -> tuple[list[dict], int]:
    """Statement 2b: the fields and similarities of every candidate, the semantic legs' and the
    keyword legs' (whose signals are carried over from statement 1). Semantic-only candidates under
    the floor are dropped here, so their fields never leave the database. With a `band`, the floor
    adapts to the query: min(floor, best similarity among the candidates - band). With `feedback`
    ({"k", "query_over_beta"}), every candidate also gets its cosine to the query moved toward the
    primary leg's k nearest rows (semantic.py, `sim_f`).
    Returns the rows and the size of the union before the floor."""
    kind = scope.kind
    names = list(semantic)
    keyword_ids = [row["id"] for row in keyword_rows]
    union_ids = list(dict.fromkeys([*(row_id for name in names for row_id, _ in semantic[name]), *keyword_ids]))
    similarities = [f"1 - (t.embedding <=> %s::vector) AS sim_{name[-1]}" for name in names]
    params: list = list(vectors[: len(names)])
    ctes = ""
    if feedback is not None:  # not a leg: the vector every candidate's S is measured from
        nearest = [row_id for row_id, _ in semantic.get("sem_p", [])[: feedback["k"]]]
        ctes = f"feedback AS MATERIALIZED ({feedback_vector_sql(table=kind.table)}), "
        params[:0] = [feedback["query_over_beta"], nearest]
        similarities.append("1 - (t.embedding <=> (SELECT v FROM feedback)) AS sim_f")
    params.append(union_ids)
    columns = [*field_columns(kind, display=False), *(f"s.sim_{name[-1]}" for name in names),
               *(["s.sim_f"] if feedback is not None else [])]
    floor_sql = ""
    if floor > 0 and names:
        # The query's own cosines decide (the feedback similarity runs higher by construction).
        sims = [f"s.sim_{name[-1]}" for name in names]
        best = sims[0] if len(sims) == 1 else f"greatest({', '.join(sims)})"
        threshold = "%s" if band is None else f"least(%s, (SELECT max({best}) FROM similarities AS s) - %s)"
        floor_sql = f" WHERE s.id = ANY(%s::bigint[]) OR {best} >= {threshold}"
        params.extend([keyword_ids, floor, *([] if band is None else [band])])
    # `similarities` is materialised so that the floor filters the candidates alone: inlined, the
    # planner pushed it into a scan of the whole table (a cosine for every row, 16 ms on SciFact).
    # The union's size rides on a one-row table, so it arrives even when the floor leaves no row.
    statement = (
        f"WITH {ctes}similarities AS MATERIALIZED (SELECT t.id, {', '.join(similarities)}"
        f" FROM {kind.table} AS t WHERE t.id = ANY(%s::bigint[]))"
        " SELECT counts.union_size, kept.* FROM (SELECT count(*) AS union_size FROM similarities) AS counts"
        f" LEFT JOIN (SELECT {', '.join(columns)} FROM similarities AS s JOIN {kind.table} AS t ON t.id = s.id"
        f"{floor_sql}) AS kept ON true"
    )
    rows = fetch_dicts(statement, params)
    union_size = rows[0]["union_size"]
    rows = with_keyword_signals([row for row in rows if row["id"] is not None], keyword_rows)
    for name in names:
        found = {row_id for row_id, _ in semantic[name]}
        for row in rows:
            row[f"in_{name}"] = row["id"] in found
    return rows, union_size


def rows_with_fields(*, kind: SearchKind, keyword_rows: list[dict]) -> list[dict]:
    """The fields of statement 1's candidates, when it ran without them and no model answered."""
    if not keyword_rows:
        return []
    rows = fetch_dicts(
        f"SELECT {', '.join(field_columns(kind))} FROM {kind.table} AS t WHERE t.id = ANY(%s::bigint[])",
        [[row["id"] for row in keyword_rows]],
    )
    return with_keyword_signals(rows, keyword_rows)


def with_keyword_signals(rows: list[dict], keyword_rows: list[dict]) -> list[dict]:
    """Statement 1's findings (BM25, matched terms, coverage, legs) onto rows fetched later; None
    for a row the keyword legs did not find."""
    signals = {row["id"]: row for row in keyword_rows}
    for row in rows:
        found = signals.get(row["id"], {})
        for name in KEYWORD_SIGNALS:
            row[name] = found.get(name)
    return rows


def recent_rows(*, scope: Scope, limit: int) -> list[dict]:
    """Rows passing the filter, most recently updated first (the recency fallback)."""
    sql = (f"SELECT {', '.join(field_columns(scope.kind))} FROM {scope.kind.table} AS t WHERE {scope.filter_sql}"
           " ORDER BY t.updated_at DESC, t.id DESC LIMIT %s")
    return fetch_dicts(sql, [*scope.filter_params, limit])


def fetch_dicts(statement: str, params: list) -> list[dict]:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        while cursor.description is None and cursor.nextset():  # past the SET LOCAL statements
            pass
        names = [column.name for column in cursor.description]
        rows = [dict(zip(names, values)) for values in cursor.fetchall()]
    timestamps = [name for name in names if name in TIMESTAMPS]  # text from field_columns
    for row in rows:
        for name in timestamps:
            if row[name] is not None:
                row[name] = datetime.fromisoformat(row[name]).replace(tzinfo=UTC)
    return rows
