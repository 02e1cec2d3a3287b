from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from lessons.services.api_keys import api_key_create
from lessons.services.teams import TeamError, team_for_slug


class Command(BaseCommand):
    help = "Create an API key for a team. The key is printed once, alone on the last line; only its hash is kept."

    def add_arguments(self, parser):
        parser.add_argument("--team", required=True, help="Slug of the team.")
        parser.add_argument("--name", required=True, help="Who or what will use the key.")
        parser.add_argument("--create-team", action="store_true", help="Create the team if it does not exist.")

    def handle(self, *args, team, name, create_team=False, **options):
        if not name.strip():
            raise CommandError("--name: give the key a name")
        try:
            with transaction.atomic():  # a key that cannot be made leaves no new team behind
                team_row = team_for_slug(slug=team, create=create_team)
                api_key, raw_key = api_key_create(team=team_row, name=name)
        except TeamError as error:
            raise CommandError(str(error)) from error
        except ValidationError as error:
            problems = (f"--{field}: {' '.join(messages)}" for field, messages in error.message_dict.items())
            raise CommandError("; ".join(problems)) from error
        self.stdout.write(
            f"Created API key {api_key.name!r} for team {team_row.slug} (prefix {api_key.prefix}). "
            "Copy it now; it cannot be shown again:"
        )
        self.stdout.write(raw_key)
