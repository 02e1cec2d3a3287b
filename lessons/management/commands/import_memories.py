from lessons.management.commands._import_base import JsonLinesImportCommand
from lessons.services.imports import import_memories


class Command(JsonLinesImportCommand):
    help = "Import memories (with their earlier versions in `history`) from JSON Lines into a team."
    kind = "memories"

    def import_lines(self, *, lines, team_slug, create_team):
        return import_memories(lines=lines, team_slug=team_slug, create_team=create_team)
