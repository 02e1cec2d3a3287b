"""The spellings a team stores a term in: "nextjs" is also the tech stack written "next.js",
"reactnative" the tag "react-native", "errorhandling" the tag "error handling". Terms compare as
kinds.canonical reads them (lowercase, letters, digits, '+' and '#'). The stored spellings come from
two places, read by one statement:

- the keyword vocabulary (lessons_keyword_df), whose 'simple' lexemes carry every tag, tech stack
  and category the text parser keeps whole ("next.js", "react-native"). Only words with punctuation
  between letters or digits can differ from their term, and only they are indexed (migration 0023).
- lessons_term_spelling, the spellings the parser splits into words ("error handling", "back_off",
  "socket.io-client"), noted by triggers as rows are written (migration 0029). Before, they were in
  neither: `tag=error-handling` missed the lessons tagged "error handling".

Each is one probe of a small index (both 0.06-0.09 ms, warm, on a team of 190,000 lessons).
Before the vocabulary was read, `nextjs` (a query or a filter) missed every lesson whose tech stack
said `next.js`, which `next.js` found, and the filter `tech_stacks: ["Next.js"]` missed the lessons
saying `nextjs`.
"""

from collections.abc import Iterable

from django.db import connection

from lessons.search.kinds import canonical, term_key

# kinds.canonical in SQL; the index's expression and predicate (migration 0023 writes them out).
SPELLING_TERM = "regexp_replace(lexeme, '[^a-z0-9+#]', '', 'g')"
SPELLING_INDEX_PREDICATE = "lexeme ~ '^[a-z0-9+#._-]+$' AND lexeme ~ '[a-z0-9][._-]+[a-z0-9]'"
VOCABULARY_SPELLINGS_SQL = (
    f"SELECT {SPELLING_TERM} AS term, lexeme AS spelling FROM lessons_keyword_df"
    f" WHERE kind = %s AND team_id = %s AND {SPELLING_INDEX_PREDICATE} AND {SPELLING_TERM} = ANY(%s)"
    " GROUP BY lexeme HAVING sum(df) > 0"
)
# And the spellings the vocabulary cannot hold: disjoint from its own, but a few may no longer be
# stored and a few noted twice (migration 0029 says why both are harmless; UNION reads each once).
SPELLINGS_SQL = (f"{VOCABULARY_SPELLINGS_SQL} UNION SELECT term, spelling FROM lessons_term_spelling"
                 " WHERE kind = %s AND team_id = %s AND term = ANY(%s)")


def _lookup_params(*, kind_code: str, team_id: int, terms) -> list:
    """SPELLINGS_SQL's parameters: the kind, team and (canonical) terms, once for each source."""
    return [kind_code, team_id, sorted({term for term in terms if term})] * 2


def stored_spellings_sql(*, kind_code: str, team_id: int, terms) -> tuple[str, list]:
    """A scalar subquery, and its parameters: the pairs [term, stored spelling] of `terms`
    (canonical) that the team stores spelled otherwise, as a text[][] (NULL when none). The
    keyword leg's plan probe reads it in its round trip (keyword.keyword_probe)."""
    return (f"SELECT array_agg(ARRAY[s.term, s.spelling] ORDER BY s.spelling) FROM ({SPELLINGS_SQL}) AS s",
            _lookup_params(kind_code=kind_code, team_id=team_id, terms=terms))


def with_spellings(forms: dict[str, list[str]], found: list[tuple[str, str]]) -> dict[str, list[str]]:
    """A query's term forms (scoring.query_term_forms) with the stored spellings `found` of its
    terms: the exact-term leg looks for them all."""
    if not found:
        return forms
    widened = {term: set(spellings) for term, spellings in forms.items()}
    for term, lexeme in found:
        widened.setdefault(term, {term}).add(lexeme)
    return {term: sorted(spellings) for term, spellings in widened.items()}


def stored_spellings(*, kind_code: str, team_id: int, values: Iterable[str]) -> dict[str, set[str]]:
    """term -> the spellings the team stores it in, for the terms of `values` (filter values as
    given: "Next.js" is the term "nextjs"). One index probe for all of a request's filters; none
    when it has no such value."""
    terms = {canonical(value) for value in values} - {""}
    if not terms:
        return {}
    stored: dict[str, set[str]] = {}
    with connection.cursor() as cursor:
        cursor.execute(SPELLINGS_SQL, _lookup_params(kind_code=kind_code, team_id=team_id, terms=terms))
        for term, spelling in cursor.fetchall():
            stored.setdefault(term, set()).add(spelling)
    return stored


def spelled_values(values: Iterable[str], stored: dict[str, set[str]]) -> list[str]:
    """A filter's allowed values (lowercase, as stored) with every spelling of the same term in
    `stored` (stored_spellings): ["next.js"] -> ["next.js", "nextjs"] when some lesson says
    `nextjs`. The values as given come first, in order; the filter still tests equality, so
    signatures still apply. A version's dots count (kinds.term_key): `java 18` is not `java 1.8`,
    though both are the canonical term "java18" the spellings are looked up by."""
    given = list(dict.fromkeys(value.lower() for value in values))
    spelled = dict.fromkeys(given)
    for value in given:
        spelled.setdefault(term_key(value), None)
    for value in given:
        key = term_key(value)
        spelled.update(dict.fromkeys(s for s in sorted(stored.get(canonical(value), ())) if term_key(s) == key))
    return list(spelled)
