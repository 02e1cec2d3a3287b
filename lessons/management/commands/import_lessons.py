from lessons.management.commands._import_base import JsonLinesImportCommand
from lessons.services.imports import import_lessons


class Command(JsonLinesImportCommand):
    help = "Import lessons from JSON Lines into a team; idempotent on external_id."
    kind = "lessons"

    def import_lines(self, *, lines, team_slug, create_team):
        return import_lessons(lines=lines, team_slug=team_slug, create_team=create_team)
