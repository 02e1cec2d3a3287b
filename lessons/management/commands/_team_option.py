"""The team a command's option names (`--team SLUG`, delete_team's SLUG), looked up as everywhere
else (`lessons.selectors.teams.team_named`: blank refused, "did you mean" for another case), its
refusal a CommandError."""

from django.core.management.base import CommandError

from lessons.models import Team
from lessons.selectors.teams import TeamError, team_named


def team_from_option(slug: str, *, option: str = "--team") -> Team:
    try:
        return team_named(slug=slug, option=option)
    except TeamError as error:
        raise CommandError(str(error)) from error
