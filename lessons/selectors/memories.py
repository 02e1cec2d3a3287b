"""Domain queries over memories (seed 004): friends, emotions, interests, recent events, people and
earlier versions. Each returns a SearchResponse, so the API serialises them one way."""

from datetime import timedelta

from django.utils import timezone

from lessons.models import Team
from lessons.search import SearchFilters, SearchRequest, SearchResponse, list_items, search


def memories_friends(*, team: Team, limit: int = 50) -> SearchResponse:
    """Every person memory, most important first."""
    return list_items(
        request=SearchRequest(team=team, kind="memories", limit=limit, filters=SearchFilters(categories=("person",))),
        order="importance",
    )


def memories_interests(*, team: Team, limit: int = 50) -> SearchResponse:
    """Every interest memory, most important first."""
    return list_items(
        request=SearchRequest(team=team, kind="memories", limit=limit, filters=SearchFilters(categories=("interest",))),
        order="importance",
    )


def memories_recent_events(*, team: Team, days: int = 30, limit: int = 50) -> SearchResponse:
    """Event memories of the last `days` days (by when they happened), newest first."""
    since = timezone.now() - timedelta(days=days)
    return list_items(
        request=SearchRequest(
            team=team, kind="memories", limit=limit, filters=SearchFilters(categories=("event",), since=since)
        ),
        order="occurred",
    )


def memories_by_emotion(*, team: Team, emotion: str, limit: int = 20) -> SearchResponse:
    """Memories carrying the emotion (its tag comes first, as an exact term) and memories whose
    meaning is close to it: "panic" finds the racing heart on the S-Bahn that never says panic."""
    return search(request=SearchRequest(team=team, query=emotion.strip().lower(), kind="memories", limit=limit))


def memories_by_person(*, team: Team, name: str, limit: int = 20) -> SearchResponse:
    """Memories about a person: ranked by meaning ("memories about NAME") among those naming
    them, in `people` or in the text, tolerant of spelling ("Jon" finds Jonas, "Jonah" too)."""
    return search(
        request=SearchRequest(
            team=team,
            query=f"memories about {name.strip()}",
            kind="memories",
            limit=limit,
            filters=SearchFilters(person_like=name.strip()),
            similarity_floor=0.0,
        )
    )


def memories_search_versions(*, team: Team, query: str, limit: int = 10) -> SearchResponse:
    """A search that also looks at the earlier versions of each memory."""
    return search(
        request=SearchRequest(
            team=team, query=query, kind="memories", limit=limit, filters=SearchFilters(include_versions=True)
        )
    )
