"""First-start set-up used by `make run`: migrations, the demo data, and (in development) a local
admin account whose random password is printed once."""

import os
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from lessons.models import Team

DEMO_DIR = Path(__file__).resolve().parents[2] / "demo_data"
DEMO_TEAM = "demo"


class Command(BaseCommand):
    help = "Apply migrations, load the demo data on first start, create a local admin in development."

    def add_arguments(self, parser):
        parser.add_argument("--no-demo", action="store_true", help="Do not load the demo data.")

    def handle(self, *args, no_demo, **options):
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("Database migrated.")
        if not no_demo and not Team.objects.filter(slug=DEMO_TEAM).exists():
            self.stdout.write(f"First start: loading the demo data into team {DEMO_TEAM!r}...")
            # All or nothing: the team exists only once both files are in, so a start interrupted
            # halfway loads the demo again next time (it used to keep half and never finish). The
            # rows are embedded after the commit.
            try:
                with transaction.atomic():
                    call_command("import_lessons", str(DEMO_DIR / "lessons.jsonl"), team=DEMO_TEAM, create_team=True)
                    call_command("import_memories", str(DEMO_DIR / "memories.jsonl"), team=DEMO_TEAM)
            except CommandError as error:
                if error.returncode != 130:
                    raise
                # the import's own message says the lines before are kept: here nothing is
                raise CommandError(
                    "interrupted (Ctrl-C or SIGTERM) while loading the demo data: none of it was kept (the lines "
                    "counted above were rolled back); the next start loads it again.", returncode=130,
                ) from error
        if settings.DEBUG:
            self._create_local_admin()

    def _create_local_admin(self):
        users = get_user_model()
        if users.objects.filter(is_superuser=True).exists():
            return
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser(username="admin", email="admin@localhost", password=password)
        self.stdout.write(
            self.style.SUCCESS(
                f"Created a local admin account. Sign in at {_served_at()}/admin/ as "
                f"'admin' with password: {password}  (shown only this once)"
            )
        )


def _served_at() -> str:
    """Where `make run` serves (it exports HOST and PORT to this command); every interface is
    reached locally at 127.0.0.1."""
    host = os.environ.get("HOST") or "127.0.0.1"
    return f"http://{'127.0.0.1' if host == '0.0.0.0' else host}:{os.environ.get('PORT') or '8000'}"
