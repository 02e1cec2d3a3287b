import os
import sys
from functools import partial

import anyio
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from lessons.embedding import warm_up_in_background
from lessons.management.commands._team_option import team_from_option
from lessons.mcp_server import serve_stdio
from lessons.services.api_keys import api_key_authenticate

API_KEY_ENVIRONMENT_VARIABLE = "MEMORY_STORE_API_KEY"


class Command(BaseCommand):
    help = (
        "Serve the agent tools over MCP (stdio) for one team: --team SLUG, or --api-key KEY "
        f"(or the {API_KEY_ENVIRONMENT_VARIABLE} environment variable, which keeps the key out of `ps`)."
    )
    # stdout carries the protocol: nothing else may be written to it.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--team", help="Slug of the team whose lessons and memories the tools see.")
        parser.add_argument("--api-key", help="An active API key; its team is used.")

    def handle(self, *args, team=None, api_key=None, **options):
        # Python leaves sys.stdin or sys.stdout None when the process started with that descriptor
        # closed (`mcp <&-`): the server then waited forever on whatever file took descriptor 0 next,
        # or ended in a traceback without stdout.
        for name, stream in (("input", sys.stdin), ("output", sys.stdout)):
            if stream is None:
                raise CommandError(f"standard {name} is closed: the MCP server reads its requests on standard "
                                   "input and answers on standard output (an MCP client starts it with both)")
        key_source = "--api-key" if api_key else API_KEY_ENVIRONMENT_VARIABLE
        if team and not api_key and os.environ.get(API_KEY_ENVIRONMENT_VARIABLE):
            # the key in the environment was silently passed over for --team, unchecked
            raise CommandError(f"give exactly one of --team SLUG or a key: {API_KEY_ENVIRONMENT_VARIABLE} is set too "
                               "(unset it to serve --team)")
        api_key = api_key or (os.environ.get(API_KEY_ENVIRONMENT_VARIABLE) if not team else None)
        if bool(team) == bool(api_key):
            raise CommandError(f"give exactly one of --team SLUG or --api-key KEY (or {API_KEY_ENVIRONMENT_VARIABLE})")
        if team:
            team_row = team_from_option(team)
        else:
            key = api_key_authenticate(raw_key=api_key.strip())
            if key is None:
                raise CommandError(f"{key_source}: unknown or revoked key")
            team_row = key.team
        if settings.EMBEDDING_WARM_UP:  # the agent's first search should not wait for the model
            warm_up_in_background()
        anyio.run(partial(serve_stdio, team=team_row, api_key=api_key.strip() if api_key else None))
