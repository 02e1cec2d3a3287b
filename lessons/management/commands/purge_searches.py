"""`python manage.py purge_searches`: forget searches older than the retention (run it daily, e.g.
from cron). Their verdicts go with them; the usage counts on lessons and memories stay."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from lessons.services.usage import searches_purge


MAX_DAYS = 36_500  # further back than any search could have been recorded


class Command(BaseCommand):
    help = "Delete recorded searches (and their feedback) older than SEARCH_RECORD_RETENTION_DAYS or --days."

    def add_arguments(self, parser):
        parser.add_argument(
            "--days", type=int, default=None,
            help=f"keep this many days (default: SEARCH_RECORD_RETENTION_DAYS, now {settings.SEARCH_RECORD_RETENTION_DAYS})",
        )
        parser.add_argument("--dry-run", action="store_true", help="only count what would be deleted")

    def handle(self, *args, days, dry_run, **options):
        if days is not None and not 0 <= days <= MAX_DAYS:
            raise CommandError(f"--days: must be 0 to {MAX_DAYS:,} (a century), not {days}")
        kept = settings.SEARCH_RECORD_RETENTION_DAYS if days is None else days
        count = searches_purge(older_than_days=kept, dry_run=dry_run)
        verb = "would delete" if dry_run else "deleted"
        self.stdout.write(f"{verb} {count} search(es) older than {kept} day(s)")
