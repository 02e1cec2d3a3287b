import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from lessons.models import Lesson, LessonStatus, Memory

pytestmark = pytest.mark.django_db

DEMO_DIR = Path(__file__).resolve().parents[2] / "lessons" / "demo_data"


def test_import_lessons_command_reports_bad_lines_and_exits_non_zero(tmp_path):
    source = tmp_path / "lessons.jsonl"
    source.write_text(
        json.dumps({"external_id": "a", "title": "Good"}) + "\n" + "{not json\n" + json.dumps({"title": "x", "confidence": 7}) + "\n"
    )
    stdout, stderr = StringIO(), StringIO()
    with pytest.raises(CommandError, match="2 line"):
        call_command("import_lessons", str(source), team="acme", create_team=True, stdout=stdout, stderr=stderr)
    assert f"{source}:2: broken JSON" in stderr.getvalue()
    assert f"{source}:3: confidence:" in stderr.getvalue()
    assert "1 created" in stdout.getvalue()
    assert "keyword index: lessons impacts refreshed" not in stdout.getvalue()  # one row: nothing drifted
    assert Lesson.objects.filter(team__slug="acme").count() == 1


def test_import_command_says_when_it_refreshed_the_keyword_impacts(tmp_path):
    rows = [{"title": "Short"}]
    rows += [{"title": f"Lesson {n}", "description": "cache pool queue " * 10} for n in range(6)]
    source = tmp_path / "lessons.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    stdout = StringIO()
    call_command("import_lessons", str(source), team="acme", create_team=True, stdout=stdout)
    assert "7 created" in stdout.getvalue()
    assert "keyword index: lessons impacts refreshed (" in stdout.getvalue()


def test_import_command_on_a_missing_file_is_a_command_error():
    with pytest.raises(CommandError, match="no such file"):
        call_command("import_memories", "/nonexistent/file.jsonl", team="acme")


def test_demo_data_imports_cleanly_and_is_rich_enough():
    out = StringIO()
    call_command("import_lessons", str(DEMO_DIR / "lessons.jsonl"), team="demo", create_team=True, stdout=out)
    call_command("import_memories", str(DEMO_DIR / "memories.jsonl"), team="demo", stdout=out)
    lessons = Lesson.objects.filter(team__slug="demo")
    assert lessons.count() >= 150
    assert lessons.filter(status=LessonStatus.PROPOSED).exists() and lessons.filter(status=LessonStatus.REJECTED).exists()
    assert len(set(lessons.values_list("category", flat=True))) >= 9
    stacks = {stack for row in lessons.values_list("tech_stacks", flat=True) for stack in row}
    assert {"nextjs", "react", "django", "fastapi", "supabase", "docker", "kubernetes"} <= stacks
    memories = Memory.objects.filter(team__slug="demo", current_version__isnull=True)
    assert memories.count() >= 100
    assert memories.filter(emotions__contains=["panic"]).count() >= 5
    assert Memory.objects.filter(team__slug="demo", current_version__isnull=False).exists()

    again = StringIO()
    call_command("import_lessons", str(DEMO_DIR / "lessons.jsonl"), team="demo", stdout=again)
    assert "0 created, 0 updated" in again.getvalue()


def test_an_import_into_an_unknown_team_is_refused_and_says_how(tmp_path, team):
    source = tmp_path / "lessons.jsonl"
    source.write_text(json.dumps({"external_id": "a", "title": "Good"}) + "\n")
    with pytest.raises(CommandError, match="no team with slug 'acmee'.*--create-team.*create_team acmee"):
        call_command("import_lessons", str(source), team="acmee")
    assert not Lesson.objects.exists()
    call_command("import_lessons", str(source), team="acme", stdout=StringIO())  # the existing team is fine
    assert Lesson.objects.filter(team=team).count() == 1


def test_a_150_character_team_slug_is_a_clear_error_and_writes_nothing(tmp_path):
    from lessons.models import Team

    source = tmp_path / "memories.jsonl"
    source.write_text(json.dumps({"content": "Met Jonas"}) + "\n")
    with pytest.raises(CommandError, match="slug: Ensure this value has at most 100 characters"):
        call_command("import_memories", str(source), team="x" * 150, create_team=True)
    assert not Team.objects.exists() and not Memory.objects.exists()
