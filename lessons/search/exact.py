"""The exact-term leg: rows carrying every query term as an exact term (tags, tech stacks,
category; a memory's categories and emotions), found on the GIN indexes of those arrays.

They are the rows the exact-term tier ranks first (seed 000: `nextjs` returns every Next.js
lesson before unrelated semantic neighbours), made candidates even when neither other leg
reached them.

A row the leg finds through another stored spelling of a term (the query says `errorhandling`,
the row's tag `error handling`; lessons/search/spellings.py) is one the BM25 leg cannot match:
the text parser reads the two spellings as different words. Its words are measured by the query
written in the row's own spelling (`with_spelled_keyword_signals`), so it is scored, explained
and labelled as that spelling's query would have it: before, its hit had no matched terms and
read `medium` where the stored spelling read `high`.
"""

import re

from django.db import connection

from lessons.search.keyword import rows_scored_sql
from lessons.search.kinds import _PARTS, SearchKind, canonical
from lessons.search.scoring import bare_word, respelled_query

# Only short queries form a tier: a tag, a tech stack, a title word or two.
EXACT_TIER_MAX_TERMS = 3
# A one-word query is a lookup: a row whose text carries the word (an error code, a name, "retries")
# joins the tier too. Below it the semantic leg has nothing to go on but the word's spelling, and
# its flat cosines, lifted by dense feedback, put unrelated rows first: "frobnitz", the one word of
# one lesson's description, ranked that lesson 19th behind 18 rows without the word.
TEXT_TIER_MAX_TERMS = 1
# Rows carrying the terms that the leg reads before ranking them by quality (see exact_leg_sql).
EXACT_LEG_SCAN = 500


def exact_session_sql() -> str:
    """SET LOCAL statements sent in the same round trip as the leg. The carriers it reads are the
    first EXACT_LEG_SCAN a scan meets, and PostgreSQL starts a sequential scan of a table larger
    than a quarter of shared_buffers where the last one stopped (synchronize_seqscans): at 300,000
    lessons the same one-word query then got a different sample, and different answers, each time
    another query had scanned the table (6 runs, 6 answers). Off, every scan starts at the
    table's first page, so the sample and the answer stay the same."""
    return "SET LOCAL synchronize_seqscans = off; "


def exact_leg_sql(*, kind: SearchKind, terms: list[str], forms: dict[str, list[str]], filter_sql: str,
                  filter_params: list, limit: int, narrowed: bool = False) -> tuple[str, list]:
    """One SELECT (id) of the rows carrying every term in one of its stored spellings. `narrowed`:
    the filter goes beyond the team and its default status or versions (SearchFilters.narrows)."""
    # Each column that can carry a term, as a condition on one parameter: the term's spellings.
    alternatives = [f"t.{column} && %s::varchar[]" for column in kind.exact_arrays]
    alternatives += [f"t.{column} = ANY(%s::varchar[])" for column in kind.exact_scalars]
    order_columns = sorted(set(re.findall(r"\bt\.(\w+)", kind.exact_order)) - {"id"})
    inner_columns = ", ".join(["t.id", *(f"t.{column}" for column in order_columns)])
    if len(terms) == 1 and narrowed:
        return _one_term_arms_sql(kind=kind, alternatives=alternatives, variants=_spellings(terms[0], forms),
                                  columns=inner_columns, filter_sql=filter_sql, filter_params=filter_params,
                                  limit=limit)
    conditions, params, term_queries, query_params = [], [], [], []
    for term in terms:
        variants = _spellings(term, forms)
        conditions.append("(" + " OR ".join(alternatives) + ")")
        params.extend([variants] * len(alternatives))
        term_queries.append("(" + " || ".join(["plainto_tsquery('simple', lessons_keyword_text(%s))"] * len(variants)) + ")")
        query_params.extend(variants)
    # A superset first, on the search vector's GIN index: exact terms are indexed there in their
    # 'simple' form, unaccented, so every row carrying the terms matches. Intersecting posting lists in the index
    # is what makes "database security" cheap when 30,000 rows carry one term and none both (the
    # array conditions alone read every carrier of the first term).
    if len(terms) > 1:  # one term: its own array indexes are as selective
        tsquery = " && ".join(term_queries)
        conditions.insert(0, f"(numnode({tsquery}) = 0 OR t.search_vector @@ ({tsquery}))")
        params[:0] = [*query_params, *query_params]
    # At most EXACT_LEG_SCAN rows carrying the terms are read, in no order (the first a scan meets,
    # see exact_session_sql), then ranked by quality:
    # ordering every carrier first read 15,000 rows for a common tag at 300,000 lessons (250 ms).
    # Past that many carriers the leg is a sample; the BM25 leg's heads still bring the best of them.
    sql = (f"SELECT t.id FROM (SELECT {inner_columns} FROM {kind.table} AS t"
           f" WHERE {filter_sql} AND {' AND '.join(conditions)} LIMIT {EXACT_LEG_SCAN}) AS t"
           f" ORDER BY {kind.exact_order} LIMIT %s")
    return sql, [*filter_params, *params, limit]


def _spellings(term: str, forms: dict[str, list[str]]) -> list[str]:
    """The spellings a term may be stored in: its forms, and the term without its '+' signs."""
    return sorted({*forms.get(term, [term]), term.replace("+", "")})


def _one_term_arms_sql(*, kind: SearchKind, alternatives: list[str], variants: list[str], columns: str,
                       filter_sql: str, filter_params: list, limit: int) -> tuple[str, list]:
    """One term beside a filter (a category, a tech stack, ...): one arm per column that can carry the
    term, each with the filter and a LIMIT of its own (so the planner costs it as the short read it
    is), and the planner can intersect the term's index with the filter's. As one OR it read the
    filter's rows and checked the term in the heap: "RLS" among one tech stack's lessons at 100,000
    lessons read 4,454 pages for its 500 carriers (21-24 ms); the arms read 577 (5-7 ms). Without a
    filter the OR stays: its BitmapOr over the term's indexes is the better plan ("kubernetes":
    591 pages, 4.6 ms; as arms 6.5 ms). A row carrying the term in two columns comes from two arms;
    GROUP BY keeps it once."""
    arms = [f"(SELECT {columns} FROM {kind.table} AS t WHERE {filter_sql} AND {alternative} LIMIT {EXACT_LEG_SCAN})"
            for alternative in alternatives]
    sql = (f"SELECT t.id FROM ({' UNION ALL '.join(arms)} LIMIT {EXACT_LEG_SCAN}) AS t"
           f" GROUP BY {columns} ORDER BY {kind.exact_order} LIMIT %s")
    params = [value for _ in alternatives for value in (*filter_params, variants)]
    return sql, [*params, limit]


def with_spelled_keyword_signals(*, kind: SearchKind, team_id: int, query: str, rows: list[dict],
                                 exact_terms: list[str], written: dict[str, set[str]]) -> None:
    """In place: each row carrying every exact term, some of them only in spellings the query did
    not write (`written`: scoring.query_written_forms), gets the keyword signals (BM25, its
    attainable maximum, matched terms, coverage, word share) of `query` written in the row's
    spellings, when they say more than its own. One statement for all such rows, none when the
    query writes every term as its rows do."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        if not set(exact_terms) <= kind.exact_terms_of(row):
            continue
        if spelled := _spelled_terms(kind=kind, row=row, terms=exact_terms, written=written):
            groups.setdefault(respelled_query(query, spelled), []).append(row)
    if not groups:
        return
    statements, params = [], []
    for group, (respelled, members) in enumerate(groups.items()):
        sql, sql_params = rows_scored_sql(kind_code=kind.keyword_code, team_id=team_id, query=respelled,
                                              row_ids=[row["id"] for row in members])
        statements.append(f"(SELECT {group} AS spelled_group, found.* FROM ({sql}) AS found)")
        params.extend(sql_params)
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(statements), params)
        found = {(group, row_id): signals for group, row_id, *signals in cursor.fetchall()}
    for group, members in enumerate(groups.values()):
        for row in members:
            if (group, row["id"]) in found:
                _take_if_stronger(row, *found[(group, row["id"])])


def _spelled_terms(*, kind: SearchKind, row: dict, terms: list[str], written: dict[str, set[str]]) -> dict[str, str]:
    """term -> the spelling the row carries it in, for each term it carries in no spelling the
    query wrote: its value ("error handling"), else a part of one, else a word of its title."""
    values = [value for column in kind.exact_arrays for value in row.get(column) or []]
    values += [row[column] for column in kind.exact_scalars if row.get(column)]
    carried: dict[str, list[str]] = {}
    for spelling in (*values, *(part for value in values for part in _PARTS.split(value)), *kind.exact_words(row)):
        if term := canonical(spelling):
            carried.setdefault(term, []).append(bare_word(spelling))
    return {term: carried[term][0] for term in terms
            if carried.get(term) and not set(carried[term]) & written.get(term, set())}


def _take_if_stronger(row: dict, score, matched_terms, coverage, max_score, word_share) -> None:
    """The respelled query's signals replace the row's own when they reach a larger share of their
    query's attainable BM25 (a row whose text also says the query's spelling keeps the better)."""
    own = float(row.get("bm25_p") or 0.0) / float(row.get("bm25_max") or 1.0)
    if not max_score or float(score) / float(max_score) <= own:
        return
    row.update(bm25_p=score, bm25_max=max_score, terms_p=list(matched_terms), coverage_p=coverage,
               word_share_p=word_share)
