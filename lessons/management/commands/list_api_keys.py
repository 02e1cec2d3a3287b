"""`python manage.py list_api_keys [--team SLUG]`: every API key, by prefix, with its use."""

from django.core.management.base import BaseCommand

from lessons.management.commands._team_option import team_from_option
from lessons.management.commands._terminal import printable
from lessons.selectors.api_keys import api_key_list


def _when(moment) -> str:
    return moment.strftime("%Y-%m-%d %H:%M") if moment else "-"


class Command(BaseCommand):
    help = "List API keys (prefix, team, name, created, last used, revoked); the keys themselves are never stored."

    def add_arguments(self, parser):
        parser.add_argument("--team", help="Only this team's keys (slug).")

    def handle(self, *args, team=None, **options):
        keys = list(api_key_list(team=team_from_option(team) if team is not None else None))
        if not keys:
            self.stdout.write("No API keys" + (f" for team {team}." if team else "."))
            return
        self.stdout.write(f"{'prefix':<13} {'team':<20} {'created':<16} {'last used':<16} {'revoked':<16} name")
        for key in keys:
            self.stdout.write(
                f"{key.prefix:<13} {key.team.slug:<20} {_when(key.created_at):<16} {_when(key.last_used_at):<16} "
                f"{_when(key.revoked_at):<16} {printable(key.name)}"
            )
