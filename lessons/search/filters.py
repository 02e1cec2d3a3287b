"""One WHERE-clause builder for every leg of a search (semantic, keyword, exact terms, recency).

Filters are applied inside each leg's SQL, never after ranking, so a leg's top N is the top N of
the rows the caller may see. The clause is over the row table aliased `t`; values are always
parameters, never interpolated.
"""

import re
import unicodedata
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection

from lessons.models import Lesson, Memory
from lessons.search.kinds import SEARCH_KINDS
from lessons.selectors.embeddings import with_embedding_status
from lessons.search.signature import value_bits
from lessons.search.spellings import spelled_values, stored_spellings
from lessons.search.types import SearchFilters, SearchRequestError
from lessons.text import UNSPACED_SCRIPTS, clean_name, name_in_text_pattern, whole_word_pattern

# A name in `people` is the person asked for when it is the same name in any case, starts with
# it ("Jon" -> Jonas, from this many letters), or is one typo away from it ("Jonah" -> Jonas, from
# this many letters: "Anna" and "Anne", "Mark" and "Mary" are different people). A trigram match
# (similarity 0.3) answered "Samantha" with Sam, "Marius" with Maria and "Davidson" with David.
# The start and the typo only stand for a name no memory lists: a team with a Tom has Tomke too.
PERSON_PREFIX_MIN_LETTERS = 3
PERSON_TYPO_MIN_LETTERS = 5
PERSON_TEXT_MIN_LETTERS = 2
# A name as the `people` filter, the listing's `person`, the person search and the friends listing compare
# it: in its compatibility form (NFKC: "ｱｷﾗ" is アキラ, "Ⓢam" Sam; unaccent() folds full-width Latin, "Ｓａｍ",
# but leaves those), lowercased, without its accents ("Zoe" is Zoë); FOLDED_NAMES folds every name of a
# `people` array so, as the index memory_folded_people_gin holds them (migration 0033).
FOLDED_NAME = "lessons_folded_name({})"
FOLDED_NAMES = "lessons_folded_names({})"
# A memory's text as the person search looks for a name in it: compatibility form, without accents; the
# index memory_person_text_trgm holds its trigrams, so a name's pattern reads only the rows that may hold it.
PERSON_TEXT = "lessons_person_text(t.content, t.details)"


def compatible_name(value) -> str:
    """A person's name as asked for (clean_name), in its compatibility form (NFKC), as a search reads its
    query: "ｱｷﾗ" is "アキラ", "Ⓢam" "Sam". So its patterns find the name as texts write it, and an ASCII
    name's signature bits are those of the stored names that fold to it."""
    return " ".join(unicodedata.normalize("NFKC", clean_name(value)).split())


def names_one_of_sql(people: str) -> str:
    """A boolean SQL expression: the array column `people` holds one of the names given as its one
    parameter (a text[]), compared folded (FOLDED_NAMES); over `people` of lessons_memory, an index
    answers it."""
    return f"{FOLDED_NAMES.format(people)} && {FOLDED_NAMES.format('%s::varchar[]')}"


def folded_accents(texts: list[str]) -> list[str]:
    """`texts` as PostgreSQL's unaccent() folds them ("Søren" -> "Soren"), in one round trip.
    A pattern is built from the folded text and escaped after: unaccent() applied to a finished
    pattern folded "×" into "*", "‖" into "||", "∖" into a backslash and "％" into "%", so an
    escaped word became live syntax again (an invalid expression, or a filter matching every row)."""
    if not texts:
        return []
    with connection.cursor() as cursor:
        cursor.execute("SELECT array_agg(unaccent(u.text) ORDER BY u.i)"
                       " FROM unnest(%s::text[]) WITH ORDINALITY AS u(text, i)", [list(texts)])
        return list(cursor.fetchone()[0])


def table_for(kind: str) -> str:
    return Lesson._meta.db_table if kind == "lessons" else Memory._meta.db_table


def phase_categories(phase: str) -> list[str]:
    mapping = settings.SEARCH_PHASE_CATEGORIES
    key = phase.strip().lower()
    if key not in mapping:
        raise SearchRequestError("phase", f"unknown phase {phase!r}; use one of: {', '.join(mapping)}")
    return list(mapping[key])


@dataclass(frozen=True)
class FilterClause:
    """A filter as every leg applies it: `sql`, a boolean expression over `t`, with its `params`;
    and `signature_masks`, one tuple per filter that tests equality, of each allowed value's bits
    (signature.py): a row passing the filter carries, for every tuple, all bits of one of its
    masks in its postings' signatures."""

    sql: str
    params: list
    signature_masks: tuple[tuple[int, ...], ...] = field(default=())


def filter_clause(*, kind: str, team_id: int, filters: SearchFilters) -> tuple[str, list]:
    """A boolean SQL expression over `t` and its parameters: team always, then each filter given."""
    clause = filter_parts(kind=kind, team_id=team_id, filters=filters)
    return clause.sql, clause.params


def filter_parts(*, kind: str, team_id: int, filters: SearchFilters) -> FilterClause:
    """The filter's SQL and its signature masks, built side by side so they test the same values."""
    parts = ["t.team_id = %s"]
    params: list = [team_id]
    masks: list[tuple[int, ...]] = []

    # the term filters' values in every spelling the team stores them in ("nextjs", "next.js")
    term_filters = ((filters.tech_stacks, filters.project_types, filters.tags) if kind == "lessons"
                    else (filters.categories, filters.emotions))
    stored = stored_spellings(kind_code=SEARCH_KINDS[kind].keyword_code, team_id=team_id,
                              values=[value for values in term_filters for value in values])

    def spelled(values) -> list[str]:
        return spelled_values(values, stored)

    def add(sql: str, *values, facet: str | None = None) -> None:
        parts.append(sql)
        params.extend(values)
        if facet is not None:  # the first value is the list of allowed values
            masks.append(tuple(value_bits(facet, value) for value in values[0]))

    if kind == "lessons":
        add("t.status = ANY(%s::varchar[])", list(filters.statuses), facet="status")
        categories = [c.lower() for c in filters.categories]
        if filters.phase:
            allowed = phase_categories(filters.phase)
            categories = [c for c in categories if c in allowed] if categories else allowed
            if not categories:  # a category outside the phase: nothing may match
                parts.append("FALSE")
        if categories:
            add("t.category = ANY(%s::varchar[])", categories, facet="category")
        if filters.tech_stacks:
            add("t.tech_stacks && %s::varchar[]", spelled(filters.tech_stacks), facet="tech_stacks")
        if filters.project_types:
            add("t.project_types && %s::varchar[]", spelled(filters.project_types), facet="project_types")
        if filters.tags:
            add("t.tags && %s::varchar[]", spelled(filters.tags), facet="tags")
        if filters.since:
            add("t.updated_at >= %s", filters.since)
        if filters.until:
            add("t.updated_at < %s", filters.until)
    else:
        if filters.only_versions:  # no signature mask: a version's postings carry no "current" value
            parts.append("t.current_version_id IS NOT NULL")
        elif not filters.include_versions:
            parts.append("t.current_version_id IS NULL")
            masks.append((value_bits("current", "yes"),))
        if filters.categories:
            add("t.categories && %s::varchar[]", spelled(filters.categories), facet="categories")
        if filters.min_importance is not None:
            add("t.importance >= %s", filters.min_importance)
        if filters.max_importance is not None:
            add("t.importance <= %s", filters.max_importance)
        if filters.people:
            # as names are stored (NFC: "Zoe" + a combining accent is Zoé), in their compatibility form
            # ("ｱｷﾗ" is アキラ), lowercased by PostgreSQL on both sides ("İlker": Python says "i̇lker",
            # PostgreSQL "ilker") and without their accents ("Zoe" is Zoë), as the friends listing
            # groups them; the postings' signatures hold PostgreSQL's folded names (migrations 0024,
            # 0033), so only ASCII names, which both fold alike, may skip postings by signature
            names = [compatible_name(name) for name in filters.people]
            ascii_only = all(name.isascii() for name in names)
            add(
                names_one_of_sql("t.people"),
                [name.lower() if ascii_only else name for name in names],
                facet="people" if ascii_only else None,
            )
        if filters.person_like:
            # as names are stored (NFC, one space), in their compatibility form
            add(*_person_named(team_id=team_id, name=compatible_name(filters.person_like)))
        if filters.emotions:
            add("t.emotions && %s::varchar[]", spelled(filters.emotions), facet="emotions")
        if filters.since:
            add("coalesce(t.occurred_at, t.created_at) >= %s", filters.since)
        if filters.until:
            add("coalesce(t.occurred_at, t.created_at) < %s", filters.until)
    if filters.embedding_states:
        add(*_in_embedding_states(kind=kind, team_id=team_id, states=filters.embedding_states))
    return FilterClause(sql=" AND ".join(parts), params=params, signature_masks=tuple(masks))


def _person_named(*, team_id: int, name: str) -> list:
    """The person search's filter (`person_like`) and its parameters: the memory names `name`.

    In `people`: the same name in any case, with or without its accents and in its compatibility
    form ("Zoe" is Zoë, "José" Jose, "ｱｷﾗ" アキラ); and, only when no current memory of the team lists
    that name (the friends listing has no such person), another name it starts, is one typo from, or
    is a whole word of (the surname "Featherstonehaugh" in Orla Featherstonehaugh): asked for Tom, a
    team with a Tom answered Tomke's and Tomasz's memories among his and counted them in his `total`.
    In the text: the whole name with no letter or digit touching it ("Tom" is not "tomorrow", "Anna"
    not "Vienna", "J.R." ends at its dot), as names are written (name_in_text_pattern); a one-letter
    name only as a whole stored name ("A" is mostly an article). The patterns are built from the name
    as unaccent() folds it, never folded after they are built (folded_accents).

    Both parts are indexed (migration 0033): the names as FOLDED_NAMES, the text's trigrams. The other
    names are found among the team's names first, so the filter asks the index for them too: tested
    on every memory, a name nobody has read the whole team (3.7 s for 100,000 memories)."""
    in_people, values = names_one_of_sql("t.people"), [[name]]
    in_text = ""
    if len(name) >= min(PERSON_PREFIX_MIN_LETTERS, PERSON_TYPO_MIN_LETTERS, PERSON_TEXT_MIN_LETTERS):
        unaccented, someone = _unaccented_and_listed(team_id=team_id, name=name)
        if not someone:
            in_people, values = f"{FOLDED_NAMES.format('t.people')} && %s::text[]", [
                _names_like(team_id=team_id, name=name, unaccented=unaccented)]
        if len(name) >= PERSON_TEXT_MIN_LETTERS:
            # only as a name is written, with a capital: "Jazz" found every memory about jazz, "May"
            # and "Nobody" the months and "nobody seemed to care"
            in_text = f" OR {PERSON_TEXT} ~ %s"
            # in a script written without spaces a name always touches letters ("今天小李来我家"):
            # there it is found anywhere in the text, as the lists' text filter finds a word
            values.append(re.escape(unaccented) if UNSPACED_SCRIPTS.search(name) else name_in_text_pattern(unaccented))
    return [f"({in_people}{in_text})", *values]


def _unaccented_and_listed(*, team_id: int, name: str) -> tuple[str, bool]:
    """`name` as unaccent() folds it (folded_accents), and whether a current memory of the team
    lists it in `people` as the friends listing groups names (FOLDED_NAME), in one round trip."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT unaccent(%s), EXISTS (SELECT 1 FROM {table_for('memories')} AS m WHERE m.team_id = %s"
            f" AND m.current_version_id IS NULL AND {names_one_of_sql('m.people')})",
            [name, team_id, [name]],
        )
        unaccented, listed = cursor.fetchone()
    return unaccented, listed


def _names_like(*, team_id: int, name: str, unaccented: str) -> list[str]:
    """The names the team's memories (current or earlier versions) list that stand for `name`, which
    no current memory lists (_person_named), folded (FOLDED_NAME): the name itself, and by its length
    a name it starts, one typo from it, or one it is a whole word of. Read from the team's distinct
    names, a few hundred, not from each memory."""
    tests, values = ["f.name = f.asked"], []
    if len(name) >= PERSON_PREFIX_MIN_LETTERS:
        tests.append("starts_with(f.name, f.asked)")
    if len(name) >= PERSON_TYPO_MIN_LETTERS:
        tests.append("levenshtein_less_equal(f.name, f.asked, 1) <= 1")
    if len(name) >= PERSON_TEXT_MIN_LETTERS:
        tests.append("f.name ~* %s")
        values.append(whole_word_pattern(unaccented))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT coalesce(array_agg(f.name), '{{}}') FROM (SELECT DISTINCT {FOLDED_NAME.format('n.name')} AS name,"
            f" {FOLDED_NAME.format('%s')} AS asked FROM (SELECT DISTINCT unnest(m.people) AS name"
            f" FROM {table_for('memories')} AS m WHERE m.team_id = %s) AS n) AS f WHERE {' OR '.join(tests)}",
            [name, team_id, *values],
        )
        return list(cursor.fetchone()[0])


def _in_embedding_states(*, kind: str, team_id: int, states) -> list:
    """`t.id IN (the team's rows in one of `states`)` and its parameters, the states decided as the
    admin's lists decide them (a row's text hashed in SQL against its stored hash). The admin's
    embedding filter was applied to the search's best 50, so stale rows ranked lower were missed.
    The team's rows are all hashed: a curator's filter, not an agent's."""
    model = SEARCH_KINDS[kind].model
    rows = with_embedding_status(queryset=model.objects.filter(team_id=team_id)).filter(
        embedding_status__in=list(states)).values("id")
    sql, values = rows.query.sql_with_params()
    return [f"t.id IN ({sql})", *values]
