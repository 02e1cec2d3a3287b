"""One WHERE-clause builder for every leg of a search (semantic, keyword, exact terms, recency).

Filters are applied inside each leg's SQL, never after ranking, so a leg's top N is the top N of
the rows the caller may see. The clause is over the row table aliased `t`; values are always
parameters, never interpolated.
"""

from django.conf import settings

from lessons.models import Lesson, Memory
from lessons.search.types import SearchFilters, SearchRequestError

# Trigram similarity a name in `people` needs to count as the person asked for ("Jon" ~ "Jonas").
PERSON_NAME_SIMILARITY = 0.3
# word_similarity a name needs against the memory's text when it is not in `people`.
PERSON_TEXT_SIMILARITY = 0.6


def table_for(kind: str) -> str:
    return Lesson._meta.db_table if kind == "lessons" else Memory._meta.db_table


def phase_categories(phase: str) -> list[str]:
    mapping = settings.SEARCH_PHASE_CATEGORIES
    key = phase.strip().lower()
    if key not in mapping:
        raise SearchRequestError("phase", f"unknown phase {phase!r}; use one of: {', '.join(mapping)}")
    return list(mapping[key])


def filter_clause(*, kind: str, team_id: int, filters: SearchFilters) -> tuple[str, list]:
    """A boolean SQL expression over `t` and its parameters: team always, then each filter given."""
    parts = ["t.team_id = %s"]
    params: list = [team_id]

    def add(sql: str, *values) -> None:
        parts.append(sql)
        params.extend(values)

    if kind == "lessons":
        add("t.status = ANY(%s::varchar[])", list(filters.statuses))
        categories = [c.lower() for c in filters.categories]
        if filters.phase:
            allowed = phase_categories(filters.phase)
            categories = [c for c in categories if c in allowed] if categories else allowed
            if not categories:  # a category outside the phase: nothing may match
                parts.append("FALSE")
        if categories:
            add("t.category = ANY(%s::varchar[])", categories)
        if filters.tech_stacks:
            add("t.tech_stacks && %s::varchar[]", [v.lower() for v in filters.tech_stacks])
        if filters.project_types:
            add("t.project_types && %s::varchar[]", [v.lower() for v in filters.project_types])
        if filters.tags:
            add("t.tags && %s::varchar[]", [v.lower() for v in filters.tags])
        if filters.since:
            add("t.updated_at >= %s", filters.since)
        if filters.until:
            add("t.updated_at < %s", filters.until)
    else:
        if not filters.include_versions:
            parts.append("t.current_version_id IS NULL")
        if filters.categories:
            add("t.categories && %s::varchar[]", [v.lower() for v in filters.categories])
        if filters.min_importance is not None:
            add("t.importance >= %s", filters.min_importance)
        if filters.people:
            add(
                "EXISTS (SELECT 1 FROM unnest(t.people) AS p(name) WHERE lower(p.name) = ANY(%s::text[]))",
                [v.lower() for v in filters.people],
            )
        if filters.person_like:
            name = filters.person_like.strip().lower()
            add(
                "(EXISTS (SELECT 1 FROM unnest(t.people) AS p(name)"
                " WHERE similarity(lower(p.name), %s) >= %s OR lower(p.name) LIKE %s)"
                " OR word_similarity(%s, lower(t.content || ' ' || t.details)) >= %s)",
                name,
                PERSON_NAME_SIMILARITY,
                name.replace("%", r"\%").replace("_", r"\_") + "%",
                name,
                PERSON_TEXT_SIMILARITY,
            )
        if filters.emotions:
            add("t.emotions && %s::varchar[]", [v.lower() for v in filters.emotions])
        if filters.since:
            add("coalesce(t.occurred_at, t.created_at) >= %s", filters.since)
        if filters.until:
            add("coalesce(t.occurred_at, t.created_at) < %s", filters.until)
    return " AND ".join(parts), params
