"""Domain queries over lessons (seeds 000 and 003), all answered by the search engine, so each
returns a SearchResponse and the API serialises them one way."""

from collections.abc import Sequence
import re

from django.conf import settings

from lessons.models import Team
from lessons.search import SearchFilters, SearchRequest, SearchResponse, search
from lessons.search.types import MAX_QUERY_CHARS

SESSION_ACTIVITY_CHARS = 1_000
SESSION_PATH_PART_CHARS = 100


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
    its semantic part halved), the phase narrows the categories. Nothing to go on: recent lessons."""
    tech = tuple(t.strip().lower() for t in tech_stack if t and t.strip())
    described = " ".join(part for part in [project_type and f"{project_type} project", tech and "using " + ", ".join(tech)] if part)
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
