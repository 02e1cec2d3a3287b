"""Domain queries over lessons (seeds 000 and 003). Each returns a SearchResponse, so the API
serialises them one way: searches answered by the search engine, and one listing (a phase's
lessons, when the phase is all a caller gives) read straight from the database."""

from collections.abc import Sequence
from itertools import zip_longest
import math
import re
from time import perf_counter

from django.conf import settings
from django.db.models import Case, F, FloatField, IntegerField, Value, When, Window
from django.db.models.functions import Greatest, Least, Ln, RowNumber

from lessons.models import Lesson, Team
from lessons.search import (
    MAX_LIMIT, SearchFilters, SearchHit, SearchRequest, SearchRequestError, SearchResponse, search,
)
from lessons.search.filters import phase_categories
from lessons.search.kinds import FREQUENCY_SATURATION, LESSONS
from lessons.search.scoring import collapse_same_title_rows
from lessons.search.types import MAX_QUERY_CHARS

SESSION_ACTIVITY_CHARS = 1_000
SESSION_PATH_PART_CHARS = 100
# The phase listing reads this many lessons of each category past its page, so same-title lessons
# can fold (as the engine's recency fallback does).
PHASE_FOLD_ROOM = 50


def lessons_relevant(
    *,
    team: Team,
    project_type: str | None = None,
    tech_stack: Sequence[str] = (),
    phase: str | None = None,
    limit: int = 15,
) -> SearchResponse:
    """Lessons for a project: the query describes it ("saas project using nextjs, supabase"); the
    caller's tech stack and project type are scored as metadata (and a lesson for other stacks has
    its semantic part halved), the phase narrows the categories. A phase alone is the phase's
    listing (`lessons_of_phase`). Nothing to go on: recent lessons."""
    tech = tuple(t.strip().lower() for t in tech_stack if t and t.strip())
    described = " ".join(part for part in [project_type and f"{project_type} project", tech and "using " + ", ".join(tech)] if part)
    if not described and phase:
        return lessons_of_phase(team=team, phase=phase, limit=limit)
    return search(
        request=SearchRequest(
            team=team,
            query=described,
            kind="lessons",
            limit=limit,
            tech_stack=tech,
            project_type=project_type,
            filters=SearchFilters(phase=phase),
        )
    )


def lessons_of_phase(*, team: Team, phase: str, limit: int = 15) -> SearchResponse:
    """The confirmed lessons a phase allows (settings.SEARCH_PHASE_CATEGORIES), its categories
    taken in turn in the mapping's order (the first is the phase's own: `testing` for testing): the
    best lesson of each category, then the second best of each, and so on, a category that runs
    out skipped. Within a category, most confident and most frequent first, as the engine's quality
    part weighs them (0.7 x confidence + 0.3 x the frequency part), newest first on a tie.
    Same-title lessons fold as in a search (the member of the earliest category leads).

    Taken in turn, not category by category: listed one category after the other, a page of 15
    showed only the first (`build`: 15 frontend lessons, none of the demo's 19 confirmed backend
    ones, nor database or security; `discovery`: architecture only), which hid the rest of the
    phase. In turn, a page with room for one of each shows every category that has lessons.

    A listing, not a search: with a phase and nothing else there is no text to rank by meaning.
    The phase was a filter on a search without a query, which is the recency fallback: every phase
    allowing `workflow` (all but design) answered the same newest workflow lessons, labelled low,
    while the demo has 17 confirmed testing lessons. Seed 000 ranks a phase's lessons by the
    project's context and their quality; with no context, quality is what is left. The phase's
    name as the query was the other choice, and a poor one: only testing and deployment are names
    of categories, and "discovery" or "build" as a query ranks by what those words happen to mean.

    The database ranks each category's lessons itself (row_number() over the category) and sends
    at most `limit` + PHASE_FOLD_ROOM of each, never all of a big team's lessons: a page takes at
    most `limit` from one category, and the room lets same-title lessons fold.

    Each hit's score is its quality (reported use left out), so scores fall within a category, not
    down the page: the page's order is the turns. Its label says what the listing knows, never a
    meaning it did not measure: `high` for the phase's own category, `medium` for the others it
    allows. No fallback: a team without lessons of the phase gets none. An unknown phase is a
    SearchRequestError on `phase`."""
    started = perf_counter()
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise SearchRequestError("limit", f"must be a whole number from 1 to {MAX_LIMIT}, got {limit!r}")
    categories = phase_categories(phase)
    standing = Case(*(When(category=category, then=Value(n)) for n, category in enumerate(categories)),
                    output_field=IntegerField())
    frequency_part = Least(Value(1.0), Ln(Greatest(F("frequency"), 1) + 1.0) / math.log1p(FREQUENCY_SATURATION),
                           output_field=FloatField())
    place_in_category = Window(RowNumber(), partition_by=F("category"),
                               order_by=[F("base_quality").desc(), F("updated_at").desc(), F("id").desc()])
    tick = perf_counter()
    rows = list(
        Lesson.objects.filter(team=team, status__in=SearchFilters().statuses, category__in=categories)
        .annotate(standing=standing, base_quality=0.7 * F("confidence") + 0.3 * frequency_part)
        .annotate(place_in_category=place_in_category)
        .filter(place_in_category__lte=limit + PHASE_FOLD_ROOM)
        # category by category, so a fold's lead is its member of the earliest category
        .order_by("standing", "place_in_category")
        .values(*LESSONS.fields)
    )
    sql_ms = (perf_counter() - tick) * 1000.0
    by_category: list[list[tuple[int, float, dict, list[int]]]] = [[] for _ in categories]
    for row, ids in collapse_same_title_rows(rows):
        standing_of_row = categories.index(row["category"])
        by_category[standing_of_row].append((standing_of_row, _base_quality(row), row, ids))
    for entries in by_category:
        # folded, a lesson's frequency is its title's sum: its quality can rise past its neighbours'
        # (a stable sort: ties keep the database's order, newest first)
        entries.sort(key=lambda entry: -entry[1])
    hits = [
        SearchHit(id=row["id"], external_id=row["external_id"], kind=LESSONS.hit_kind, fields=row,
                  score=round(quality, 4), relevance="high" if standing == 0 else "medium", found_by=[],
                  collapsed_ids=ids if len(ids) > 1 else [])
        for standing, quality, row, ids in _in_turn(by_category)[:limit]
    ]
    # `mode` is one of the engine's (the answer's shape has no listing): the request's default, as the
    # recency fallback reports it
    return SearchResponse(mode="hybrid", degraded=False, degraded_reason=None, fallback=None, results=hits,
                          timings_ms={"sql": round(sql_ms, 2), "total": round((perf_counter() - started) * 1000.0, 2)})


def _in_turn(columns: list[list]) -> list:
    """The first of each column, then the second of each, ...; a column that runs out is skipped."""
    return [entry for turn in zip_longest(*columns, fillvalue=_RAN_OUT) for entry in turn if entry is not _RAN_OUT]


_RAN_OUT = object()


def _base_quality(row: dict) -> float:
    """The engine's quality part of a lesson without its reported use (kinds.lesson_quality)."""
    return LESSONS.quality({**row, "used_count": 0}, None)


def lessons_patterns_for_feature(
    *,
    team: Team,
    feature: str,
    tech_stack: Sequence[str] = (),
    project_type: str | None = None,
    limit: int = 3,
) -> SearchResponse:
    """How we built FEATURE before (seed 000: by meaning, so "Authentication" also finds lessons
    about sessions, JWTs or Supabase auth whose titles never say it). The feature's name alone is
    the query: wrapped in a template ("implementation patterns for ...") its embedding drifted
    toward the template's words (lessons-dev: 1 of the top 3 relevant instead of 3)."""
    return search(
        request=SearchRequest(
            team=team,
            query=feature.strip(),
            kind="lessons",
            limit=limit,
            tech_stack=tuple(t.strip().lower() for t in tech_stack if t and t.strip()),
            project_type=project_type,
        )
    )


def lessons_for_session(
    *,
    team: Team,
    project: str | None = None,
    cwd: str | None = None,
    recent_activity: str = "",
    limit: int = 5,
) -> SearchResponse:
    """What to remind an agent of when a session starts (seed 003): the project's name, the last
    parts of the working directory and the recent activity make the query; the similarity floor
    keeps weak matches out, and when nothing qualifies the most recently confirmed lessons come
    back, flagged as the recency fallback."""
    parts = []
    if project and project.strip():
        parts.append(project.strip())
    if cwd and cwd.strip():
        # either separator: an agent on Windows sends C:\Users\me\src\shop, which a POSIX path
        # read as one part, so the whole directory went into the query
        path_parts = [p[:SESSION_PATH_PART_CHARS] for p in re.split(r"[\\/]+", cwd.strip()) if p][-2:]
        parts.extend(p for p in path_parts if p.lower() != (project or "").strip().lower())
    if recent_activity and recent_activity.strip():
        parts.append(" ".join(recent_activity.split())[:SESSION_ACTIVITY_CHARS])
    # A fixed floor, not the adaptive one: at a session's start weak matches are noise, and when
    # nothing clears it the most recent lessons are the better reminder (seed 003). The query is
    # cut to a search's limit: each field within its own could still make a longer one, refused
    # as `query`, a field this call does not have.
    return search(request=SearchRequest(team=team, query=" ".join(parts)[:MAX_QUERY_CHARS], kind="lessons",
                                        limit=limit, similarity_floor=settings.SEARCH_SIMILARITY_FLOOR))
