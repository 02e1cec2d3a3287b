"""`python manage.py revoke_api_key PREFIX [--team SLUG]`: revoke a key by the prefix
`list_api_keys` and the admin show (a leaked key, an operator without the admin)."""

from django.core.management.base import BaseCommand, CommandError

from lessons.management.commands._team_option import team_from_option
from lessons.management.commands._terminal import printable
from lessons.selectors.api_keys import api_key_list
from lessons.services.api_keys import PREFIX_LENGTH, api_key_matches, api_key_revoke


class Command(BaseCommand):
    help = (
        "Revoke an API key by its prefix (msk_ and 8 characters, as list_api_keys shows it): the API refuses it "
        "from the next request, an MCP server from its next tool call. To rotate, create_api_key first."
    )

    def add_arguments(self, parser):
        parser.add_argument("prefix", help="The key's prefix (msk_1a2b3c4d), or the whole key.")
        parser.add_argument("--team", help="The key's team (slug), when two teams' keys share a prefix.")

    def handle(self, *args, prefix, team=None, **options):
        given = prefix.strip()
        prefix = given[:PREFIX_LENGTH]  # the whole key pasted in works too
        if len(prefix) < PREFIX_LENGTH:
            raise CommandError(f"PREFIX: {prefix!r} is too short; give the {PREFIX_LENGTH} characters "
                               "list_api_keys shows (msk_ and 8 more)")
        keys = [key for key in api_key_list(team=team_from_option(team) if team else None, prefix=prefix)
                if key.revoked_at is None]
        if len(given) > PREFIX_LENGTH:
            # A whole key must be the key, as authentication checks it: its first 12 characters
            # alone would revoke whichever key starts the same way (a typo, a key of another store).
            keys = [key for key in keys if api_key_matches(api_key=key, raw_key=given)]
            if not keys:
                raise CommandError(f"PREFIX: the key given ({prefix}...) is not an active key of this store; "
                                   "nothing was revoked (list_api_keys shows them all)")
        if not keys:
            raise CommandError(f"PREFIX: no active key {prefix}{f' in team {team}' if team else ''} "
                               "(list_api_keys shows them all)")
        if len(keys) > 1:
            teams = ", ".join(sorted(key.team.slug for key in keys))
            raise CommandError(f"PREFIX: {len(keys)} active keys share {prefix} (teams {teams}); name one with --team")
        key = api_key_revoke(api_key=keys[0])
        self.stdout.write(
            f"Revoked API key {printable(key.name)!r} of team {key.team.slug} (prefix {key.prefix}): refused from the next "
            "request, and by an MCP server from its next tool call."
        )
