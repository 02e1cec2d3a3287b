from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from lessons.models import Team
from lessons.services.api_keys import api_key_create


class Command(BaseCommand):
    help = "Create an API key for a team. The key is printed once, alone on the last line; only its hash is kept."

    def add_arguments(self, parser):
        parser.add_argument("--team", required=True, help="Slug of an existing team.")
        parser.add_argument("--name", required=True, help="Who or what will use the key.")

    def handle(self, *args, team, name, **options):
        team_row = Team.objects.filter(slug=team).first()
        if team_row is None:
            raise CommandError(f"--team: no team with slug {team!r}")
        if not name.strip():
            raise CommandError("--name: give the key a name")
        try:
            api_key, raw_key = api_key_create(team=team_row, name=name)
        except ValidationError as error:
            problems = (f"--{field}: {' '.join(messages)}" for field, messages in error.message_dict.items())
            raise CommandError("; ".join(problems)) from error
        self.stdout.write(
            f"Created API key {api_key.name!r} for team {team_row.slug} (prefix {api_key.prefix}). "
            "Copy it now; it cannot be shown again:"
        )
        self.stdout.write(raw_key)
