"""Load the demo lessons and memories into a team of their own, embedded with the real model.

Module-scoped fixtures call `load_demo_team` and `drop_demo_team` around a module's tests: the
rows are committed outside the tests' transactions (so they are loaded and embedded once per
module) and deleted afterwards, so other modules never see them.
"""

from pathlib import Path

from lessons.models import Lesson, Memory, Team
from lessons.services.embeddings import embedding_refresh
from lessons.services.imports import import_lessons, import_memories

DEMO_DIR = Path(__file__).resolve().parents[2] / "lessons" / "demo_data"
BATCH = 64


def load_demo_team(*, slug: str, memories: bool = True) -> Team:
    with open(DEMO_DIR / "lessons.jsonl", encoding="utf-8") as lines:
        report = import_lessons(lines=lines, team_slug=slug)
    assert report.ok, report.errors
    if memories:
        with open(DEMO_DIR / "memories.jsonl", encoding="utf-8") as lines:
            report = import_memories(lines=lines, team_slug=slug)
        assert report.ok, report.errors
    team = Team.objects.get(slug=slug)
    for model in (Lesson, Memory):
        rows = list(model.objects.filter(team=team).order_by("pk"))
        for start in range(0, len(rows), BATCH):
            result = embedding_refresh(items=rows[start : start + BATCH])
            assert result.failure_reason is None, result.failure_reason
    return team


def drop_demo_team(*, slug: str) -> None:
    Team.objects.filter(slug=slug).delete()


def by_external_id(team: Team, external_id: str) -> Lesson:
    return Lesson.objects.get(team=team, external_id=external_id)
