from lessons.management.commands._export_base import JsonLinesExportCommand
from lessons.selectors.exports import memory_export_rows


class Command(JsonLinesExportCommand):
    help = ("Export a team's memories, each with its earlier versions in `history`, as JSON Lines in the format "
            "import_memories reads (PATH - for stdout).")
    kind, one = "memories", "memory"

    def handle(self, *args, **options):
        self.versions = 0
        return super().handle(*args, **options)

    def rows(self, *, team):
        return memory_export_rows(team=team)

    def tally(self, row):
        self.versions += len(row["history"])

    def what(self, count):
        return f"{super().what(count)} ({self.versions} earlier version{'' if self.versions == 1 else 's'})"
