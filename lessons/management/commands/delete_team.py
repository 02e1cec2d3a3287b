"""`python manage.py delete_team SLUG`: delete a team and everything in it, after showing what
that is. It asks for the slug to be typed again, or takes `--yes` where nobody can answer."""

import sys

from django.core.management.base import BaseCommand, CommandError

from lessons.management.commands._team_option import team_from_option
from lessons.management.commands._terminal import printable
from lessons.selectors.teams import team_contents
from lessons.services.teams import team_delete


class Command(BaseCommand):
    help = (
        "Delete a team with all its lessons, memories (and their versions), API keys and recorded searches. "
        "Shows what it holds first; asks you to type the slug again unless --yes. "
        "A slug that starts with a hyphen goes last, after --: delete_team --dry-run -- -old."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug", help="the team's slug (as in --team elsewhere)")
        parser.add_argument("--dry-run", action="store_true", help="only show what would be deleted")
        parser.add_argument("--yes", action="store_true", help="do not ask (for scripts; there is no undo)")

    def handle(self, *args, slug, dry_run, yes, **options):
        team = team_from_option(slug, option="SLUG")
        self.stdout.write(f"Team {team.slug!r} ({printable(team.name)}) holds {team_contents(team=team).summary()}.")
        if dry_run:
            self.stdout.write("Dry run: nothing deleted.")
            return
        if not yes:
            self._confirm(team.slug)
        deleted = team_delete(team=team)
        self.stdout.write(f"Deleted team {team.slug!r} and {deleted.summary()}.")

    def _confirm(self, slug: str) -> None:
        if not sys.stdin.isatty():
            raise CommandError("--yes: not asked on a terminal, so nothing was deleted; add --yes to delete")
        self.stdout.write("This cannot be undone. ", ending="")
        self.stdout.flush()
        try:
            answer = input(f"Type the slug ({slug}) to delete it: ").strip()
        except EOFError:  # Ctrl-D: no answer is not a yes
            raise CommandError("no answer: nothing was deleted") from None
        except KeyboardInterrupt:  # Ctrl-C at the question: said here, as nothing had started
            self.stdout.write("")
            raise CommandError("interrupted (Ctrl-C) at the question: nothing was deleted", returncode=130) from None
        if answer != slug:
            raise CommandError(f"you typed {answer!r}, not {slug!r}: nothing was deleted")
