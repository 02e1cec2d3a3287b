"""`python manage.py refresh_keyword_impacts [--team SLUG] [--kind lessons|memories] [--force]`:
recompute the keyword index's posting impacts where a team's average length has drifted (or BM25's
parameters changed). Searches stay exact either way; drift only makes them slower. The task after
every write and the end of every import run the same check; run this after writes that bypass both
(raw SQL, bulk_create), or with --force."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from lessons.management.commands._team_option import team_from_option
from lessons.models import Team
from lessons.services.keyword_index import (
    DEFAULT_DRIFT,
    keyword_impacts_refresh,
    keyword_index_state,
)


class Command(BaseCommand):
    help = "Recompute keyword posting impacts for teams whose average document length has drifted."

    def add_arguments(self, parser):
        parser.add_argument("--team", help="one team's slug (default: every team)")
        parser.add_argument("--kind", choices=["lessons", "memories"], help="one kind (default: both)")
        parser.add_argument(
            "--threshold", type=float, default=None,
            help="refresh when current/reference average length (either way) exceeds this "
            f"(default SEARCH_KEYWORD_IMPACT_DRIFT, {DEFAULT_DRIFT})",
        )
        parser.add_argument("--force", action="store_true", help="refresh whatever the drift")

    def handle(self, *args, team=None, kind=None, threshold=None, force=False, **options):
        if threshold is None:
            threshold = float(getattr(settings, "SEARCH_KEYWORD_IMPACT_DRIFT", DEFAULT_DRIFT))
        if not threshold >= 1:  # also refuses nan, which compares false with everything
            raise CommandError("--threshold: must be 1 or more (1 refreshes any drift)")
        teams = Team.objects.order_by("slug")
        if team is not None:
            teams = teams.filter(pk=team_from_option(team).pk)
        kinds = [kind] if kind else ["lessons", "memories"]
        refreshed = 0
        for each in teams:
            for each_kind in kinds:
                state = keyword_index_state(team=each, kind=each_kind)
                if state.rows == 0 or not (force or state.needs_refresh(threshold=threshold)):
                    continue
                postings = keyword_impacts_refresh(team=each, kind=each_kind)
                refreshed += 1
                reason = "parameters changed" if not state.parameters_current else f"drift {state.drift:.2f}"
                self.stdout.write(f"{each.slug} {each_kind}: {state.rows} rows, {reason}: {postings} postings rewritten")
        self.stdout.write(f"refreshed {refreshed} team index(es)")
