"""Finding a team by its slug, and what a team holds (what `delete_team` shows before it deletes)."""

import re
from dataclasses import asdict, dataclass

from lessons.models import ApiKey, Lesson, Memory, SearchRecord, Team


_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class TeamError(ValueError):
    """A team that cannot be used or created; the message says why and what to do."""


def team_named(*, slug: str, option: str = "--team", hint: str = "") -> Team:
    """The team with this slug, as a command's `option` names it. Unknown: TeamError naming the
    option, suggesting a team whose slug differs only in case, else adding `hint`."""
    clean = (slug or "").strip()
    if not clean:
        raise TeamError(f"{option}: name a team by its slug (it is blank)")
    if _CONTROL_CHARACTER.search(clean):  # no slug has one, and PostgreSQL refuses a NUL in a query
        raise TeamError(f"{option}: no team's slug has a control character ({clean!r})")
    team = Team.objects.filter(slug=clean).first()
    if team is not None:
        return team
    other_case = team_slug_in_other_case(slug=clean)
    advice = f"; did you mean {other_case!r}?" if other_case else hint
    raise TeamError(f"{option}: no team with slug {clean!r}{advice}")


@dataclass(frozen=True)
class TeamContents:
    lessons: int
    memories: int  # current memories
    memory_versions: int  # their earlier versions
    api_keys: int
    searches: int  # recorded searches (their feedback goes with them)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def summary(self) -> str:
        return ", ".join(f"{count:,} {CONTENT_NAMES[name][count != 1]}" for name, count in self.as_dict().items())


CONTENT_NAMES = {  # (one, several): how summaries and the admin's delete page name each count
    "lessons": ("lesson", "lessons"),
    "memories": ("memory", "memories"),
    "memory_versions": ("memory version", "memory versions"),
    "api_keys": ("API key", "API keys"),
    "searches": ("recorded search", "recorded searches"),
}


def team_contents(*, team: Team) -> TeamContents:
    # A count per table: joined in one query, the tables' rows would multiply each other.
    memories = Memory.objects.filter(team=team)
    return TeamContents(
        lessons=Lesson.objects.filter(team=team).count(),
        memories=memories.filter(current_version__isnull=True).count(),
        memory_versions=memories.filter(current_version__isnull=False).count(),
        api_keys=ApiKey.objects.filter(team=team).count(),
        searches=SearchRecord.objects.filter(team=team).count(),
    )


def team_slug_in_other_case(*, slug: str) -> str | None:
    """The slug of a team whose slug differs from this one only in case (for "did you mean")."""
    return Team.objects.filter(slug__iexact=slug.strip()).values_list("slug", flat=True).first()
