from django.core.management.base import CommandError

from lessons.management.commands._export_base import JsonLinesExportCommand
from lessons.models import LessonStatus
from lessons.selectors.exports import lesson_export_rows


class Command(JsonLinesExportCommand):
    help = "Export a team's lessons as JSON Lines, in the format import_lessons reads (PATH - for stdout)."
    kind, one = "lessons", "lesson"

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--status", action="append", default=[], metavar="S",
                            help=f"Only lessons with this status ({', '.join(LessonStatus.values)}); repeatable. "
                                 "Default: every status.")

    def handle(self, *args, status=(), **options):
        unknown = [value for value in status if value not in LessonStatus.values]
        if unknown:
            raise CommandError(f"--status: no status {unknown[0]!r}; use {', '.join(LessonStatus.values)}")
        self.statuses = list(dict.fromkeys(status))
        return super().handle(*args, **options)

    def rows(self, *, team):
        return lesson_export_rows(team=team, statuses=self.statuses)

    def what(self, count):
        only = f" ({', '.join(self.statuses)})" if self.statuses else ""
        return super().what(count) + only
