from django.core.management.base import BaseCommand, CommandError

from lessons.management.commands._terminal import printable
from lessons.selectors.admin_search import EVALUATION_TEAM_PREFIX
from lessons.services.teams import SLUG_RULE, TeamError, team_create


class Command(BaseCommand):
    help = "Create a team: its slug (used by --team everywhere) and a display name."

    def add_arguments(self, parser):
        parser.add_argument(
            "slug",
            help=f"Short identifier: {SLUG_RULE} (e.g. acme); not starting with {EVALUATION_TEAM_PREFIX}, "
                 "which is reserved for the evaluation teams eval_retrieval loads.",
        )
        parser.add_argument("--name", help="Display name (default: the slug).")

    def handle(self, *args, slug, name=None, **options):
        try:
            team = team_create(slug=slug, name=name)
        except TeamError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(f"Created team {team.slug!r} ({printable(team.name)}).")
