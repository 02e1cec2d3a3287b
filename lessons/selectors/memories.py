"""Domain queries over memories (seed 004): friends, panic attacks, interests, recent events,
people and earlier versions.

Two kinds of answer:
- listings (friends, panic attacks, interests, events) say what their names say: plain ORM /
  SQL reads over the team's current memories, in a documented order, with `total`; no ranking,
  no relevance labels, never a fallback;
- searches (by person, by emotion, across versions) rank by meaning through `lessons.search`
  and keep its response shape.
"""

from dataclasses import dataclass, replace
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from lessons.models import CURRENT_MEMORY, MEMORY_HAPPENED_AT, Memory, Team
from lessons.search import MAX_LIMIT, SearchFilters, SearchHit, SearchRequest, SearchResponse, search
from lessons.search.filters import FOLDED_NAME, compatible_name, filter_clause, names_one_of_sql


@dataclass(frozen=True)
class MemoryListing:
    """`total` memories match; `results` are the first `limit` of them, in the listing's order."""

    total: int
    results: list[Memory]


@dataclass(frozen=True)
class Person:
    name: str  # the most common spelling among their memories
    summary: str  # a memory about them: says their name, names the fewest others, most important
    importance: int  # max over their memories
    memory_count: int
    memory_ids: list[int]  # most important first, then most recent


@dataclass(frozen=True)
class PeopleListing:
    total: int
    results: list[Person]


def _current(*, team: Team) -> QuerySet[Memory]:
    return (
        Memory.objects.filter(CURRENT_MEMORY, team=team)
        .defer("embedding", "search_vector")
        .annotate(moment=MEMORY_HAPPENED_AT)
    )


def _listing_limit(limit: int | None) -> int:
    """A listing answers every row by default, at most MEMORY_LISTING_MAX."""
    return max(1, min(limit or settings.MEMORY_LISTING_MAX, settings.MEMORY_LISTING_MAX))


def _listing(memories: QuerySet[Memory], *, limit: int | None) -> MemoryListing:
    return MemoryListing(total=memories.count(), results=list(memories[: _listing_limit(limit)]))


# --- listings ----------------------------------------------------------------------------------


# Where a person's summary is looked for: the slices of their memories in the summary's order (fewest
# people named, most important, most recent), each read only when the ones before hold no memory that
# says their name. Testing it parses a memory's text: all 200,000 (memory, person) pairs of a
# 100,000-memory team took 3.1 s of the listing's 4.3; by slices, about 2,500 tests (under 0.1 s).
SUMMARY_SLICES = ("1:1", "2:4", "5:16", "17:")
# Its text says their name as words, read as the keyword index reads a text (lessons_keyword_text,
# migrations 0028-0031): without accents ("Zoë's concert" says Zoe), in the compatibility form ("ｱｷﾗ
# called" says アキラ), each Han or Kana character a word ("アキラの誕生日", one word to the parser, says アキラ).
SAYS_NAME = ("to_tsvector('simple', lessons_keyword_text(s.content))"
             " @@ phraseto_tsquery('simple', lessons_keyword_text(spellings.key))")


def _first_saying_name(slice_: str) -> str:
    return (f"(SELECT c.id FROM unnest(people.candidates[{slice_}]) WITH ORDINALITY AS c(id, place)"
            f" JOIN {Memory._meta.db_table} AS s ON s.id = c.id WHERE {SAYS_NAME} ORDER BY c.place LIMIT 1)")


PEOPLE_SQL = f"""
WITH listed AS (
    -- one row per (memory, name it lists)
    SELECT * FROM (
        SELECT m.id, m.importance, coalesce(m.occurred_at, m.created_at) AS moment,
               cardinality(m.people) AS people_named, btrim(unnest(m.people)) AS name
        FROM {Memory._meta.db_table} AS m
        WHERE m.team_id = %s AND m.current_version_id IS NULL
    ) AS each_name
    WHERE name <> ''
), spelled AS (
    -- each spelling once, folded once: a team writes a few hundred names over 200,000 pairs
    SELECT name, key, uses, dense_rank() OVER (ORDER BY key) AS person
    FROM (SELECT name, {FOLDED_NAME.format('name')} AS key, count(*) AS uses FROM listed GROUP BY name) AS spelling
), spellings AS (
    -- a person's name as most memories write it; on a tie the spelling that says more: in its
    -- compatibility form ("Sam" over "Ｓａｍ"), a capital ("Sam" over "sam"), accents ("Zoë" over "Zoe")
    SELECT DISTINCT ON (person) person, key, name
    FROM spelled
    ORDER BY person, uses DESC, name IS NFKC NORMALIZED DESC, name = lower(name), name = unaccent(name), name
), people AS (
    SELECT spelled.person,
           max(listed.importance) AS importance,
           array_agg(listed.id ORDER BY listed.importance DESC, listed.moment DESC, listed.id DESC) AS memory_ids,
           array_agg(listed.id ORDER BY listed.people_named, listed.importance DESC, listed.moment DESC,
                     listed.id DESC) AS candidates
    FROM listed JOIN spelled USING (name)
    GROUP BY spelled.person
)
SELECT spellings.name,
       (SELECT content FROM {Memory._meta.db_table}
         WHERE id = coalesce({", ".join(_first_saying_name(slice_) for slice_ in SUMMARY_SLICES)},
                             people.candidates[1])) AS summary,
       people.importance, people.memory_ids, count(*) OVER () AS total
FROM people JOIN spellings USING (person)
ORDER BY people.importance DESC, spellings.key ASC
LIMIT %s
"""


def memories_friends(*, team: Team, limit: int | None = None) -> PeopleListing:
    """The people in the team's current memories: one entry per name in any memory's `people`
    (trimmed, in any case, with or without its accents, in its compatibility form, as the person
    search reads names: "Zoe" and "Zoë" are one person, "ｱｷﾗ" and "アキラ" too), whatever the
    memory's category: a person who only appears in an event or a health memory is still someone
    we know. Grouped in PostgreSQL; ordered by importance (the max over their memories), then name;
    at most `limit` (MEMORY_LISTING_MAX).
    A person's summary is their memory that says their name and names the fewest other people,
    then the most important and most recent: the most important alone summed David up as "Lena
    told me she's pregnant" and Maria, whose memory says "Maria has been my best friend since
    ...", as the open mic she came to. The summary is looked for lazily (SUMMARY_SLICES): 4.3 s for a
    100,000-memory team became about 0.9."""
    with connection.cursor() as cursor:
        cursor.execute(PEOPLE_SQL, [team.pk, _listing_limit(limit)])
        rows = cursor.fetchall()
    people = []
    for name, summary, importance, ids, _ in rows:
        ids = list(dict.fromkeys(ids))  # a memory can name a person twice ("Sam", "sam"): listed, counted once
        people.append(Person(name=name, summary=summary, importance=importance, memory_count=len(ids),
                             memory_ids=ids))
    return PeopleListing(total=rows[0][-1] if rows else 0, results=people)


def _spellings(terms) -> list[str]:
    """Each term as stored terms may spell it: "panic-attack", "panic attack", "panic_attack"
    (terms allow spaces, hyphens and underscores alike)."""
    spelled: dict[str, None] = {}
    for term in terms:
        words = term.lower().replace("_", " ").replace("-", " ").split()
        for separator in ("-", " ", "_"):
            spelled.setdefault(separator.join(words), None)
    return list(spelled)


def memories_panic_attacks(*, team: Team, limit: int | None = None) -> MemoryListing:
    """Every current memory whose emotions or categories hold one of settings.MEMORY_PANIC_TERMS,
    in the order they happened (occurred_at, else created_at), at most MEMORY_LISTING_MAX."""
    terms = _spellings(settings.MEMORY_PANIC_TERMS)
    memories = _current(team=team).filter(Q(emotions__overlap=terms) | Q(categories__overlap=terms))
    return _listing(memories.order_by("moment", "id"), limit=limit)


def memories_interests(*, team: Team, limit: int | None = None) -> MemoryListing:
    """Current memories in category `interest`, most important first, then most recent."""
    memories = _current(team=team).filter(categories__contains=["interest"])
    return _listing(memories.order_by("-importance", F("moment").desc(), "-id"), limit=limit)


def memories_recent_events(*, team: Team, days: int = 30, limit: int | None = None) -> MemoryListing:
    """Current memories in category `event` that happened in the last `days` days (occurred_at,
    else created_at), newest first; an event still to come has not happened yet."""
    now = timezone.now()
    memories = _current(team=team).filter(
        categories__contains=["event"], moment__gte=now - timedelta(days=days), moment__lte=now
    )
    return _listing(memories.order_by(F("moment").desc(), "-id"), limit=limit)


# --- searches ----------------------------------------------------------------------------------


def memories_by_emotion(*, team: Team, emotion: str, limit: int = 20) -> SearchResponse:
    """Memories carrying the emotion (its tag comes first, as an exact term) and memories whose
    meaning is close to it: "panic" finds the racing heart on the S-Bahn that never says panic.
    An untagged memory needs a relevance label of at least "medium": an emotion nobody felt
    ("zzqqxx") used to answer 20 unrelated memories labelled low. Never the recency fallback."""
    feeling = emotion.strip().lower()
    response = search(request=SearchRequest(team=team, query=feeling, kind="memories", limit=limit))
    if response.fallback is not None:
        return replace(response, results=[], fallback=None)
    felt = [hit for hit in response.results if feeling in (hit.fields.get("emotions") or []) or hit.relevance != "low"]
    return replace(response, results=felt)


# How many of the memories naming a person one search ranks at most, to put their own first.
PERSON_RANKING_WIDTH = MAX_LIMIT


def memories_by_person(*, team: Team, name: str, limit: int = 20) -> SearchResponse:
    """Memories about a person: ranked by meaning ("memories about NAME") among those naming
    them, in `people` or in the text, tolerant of spelling ("Jon" finds Jonas, "Jonah" too, "Zoe"
    Zoë) when no memory lists the name itself (filters.py: a team with a Tom has Tomke too). A name
    no memory has gives no results. `total` counts every memory naming them: the seed's "all
    memories about a person" when it is over `limit`; those listing them are the friends listing's
    `memory_count`.

    Every hit names the person, so its label says how: `high` when its `people` list them as
    written (any case, with or without accents: the friends listing's one person), `medium`
    otherwise (a mention in the text, another name such as "Jonas" for "Jon"). Labelled by
    meaning, a memory listing Henrike read `low` for "Henrike" when its text was about dinner.
    The `high` hits come first, each group in the ranking's order: ranked together, a memory
    that only said "Tom" came above the one memory listing him."""
    wanted = compatible_name(name)
    naming = SearchFilters(person_like=name.strip())
    total, listed = _naming_counts(team=team, filters=naming, name=wanted)
    # Their own come first from every memory naming them, not from the ranking's first `limit`,
    # where memories only saying the name pushed theirs off the page.
    response = _person_search(team=team, name=naming.person_like, filters=naming,
                              limit=min(PERSON_RANKING_WIDTH, max(limit, total)) if listed else limit)
    hits = _labelled(response.results, name=wanted)
    own = [hit for hit in hits if hit.relevance == "high"]
    if len(own) < min(limit, listed) and total > PERSON_RANKING_WIDTH:
        # the ranking's first PERSON_RANKING_WIDTH held too few of their own: theirs, ranked alone
        own = _labelled(_person_search(team=team, name=naming.person_like, filters=SearchFilters(people=(wanted,)),
                                       limit=limit).results, name=wanted)
    own_ids = {hit.id for hit in own}
    others = [hit for hit in hits if hit.relevance != "high" and hit.id not in own_ids]
    return replace(response, total=total, results=(own + others)[:limit])


def _person_search(*, team: Team, name: str, filters: SearchFilters, limit: int) -> SearchResponse:
    """A search for "memories about NAME" among the memories `filters` keep, none dropped by
    meaning. The engine's recency fallback reads through the same filter, so it holds only
    memories naming the person (those the legs missed: not embedded yet, the model off, "Zoe" for
    the word "Zoë"), most recent first; for a name nobody has it is empty."""
    return search(request=SearchRequest(team=team, query=f"memories about {name}", kind="memories", limit=limit,
                                        filters=filters, similarity_floor=0.0))


def _labelled(hits: list[SearchHit], *, name: str) -> list[SearchHit]:
    """`hits`, each labelled by how it names the person (memories_by_person)."""
    folded = _folded_names([name, *(person for hit in hits for person in hit.fields.get("people", []))])
    return [replace(hit, relevance="high" if folded[name] in {folded[p] for p in hit.fields.get("people", [])}
                    else "medium") for hit in hits]


def _folded_names(names: list[str]) -> dict[str, str]:
    """Each name as the people filters compare it (filters.FOLDED_NAME), folded by PostgreSQL: its
    unaccent() folds "Søren" and "Æsa", which Python's Unicode decomposition leaves as they are, and
    it reads the compatibility form: "ｱｷﾗ" as "アキラ"."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT v, {FOLDED_NAME.format('v')} FROM unnest(%s::text[]) AS v", [sorted(set(names))])
        return dict(cursor.fetchall())


def _naming_counts(*, team: Team, filters: SearchFilters, name: str) -> tuple[int, int]:
    """How many memories pass `filters`, as the search's legs apply them, and how many of those
    list `name` in `people` (as the friends listing's `memory_count` counts them)."""
    where, params = filter_clause(kind="memories", team_id=team.pk, filters=filters)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*), count(*) FILTER (WHERE {names_one_of_sql('t.people')})"
                       f" FROM {Memory._meta.db_table} AS t WHERE {where}", [[name], *params])
        total, listed = cursor.fetchone()
    return total, listed


def memories_search_versions(*, team: Team, query: str, limit: int = 10) -> SearchResponse:
    """A search that also looks at the earlier versions of each memory."""
    return search(
        request=SearchRequest(
            team=team, query=query, kind="memories", limit=limit, filters=SearchFilters(include_versions=True)
        )
    )
