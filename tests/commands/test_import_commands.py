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


def test_lines_the_database_could_not_store_are_reported_by_field_and_the_rest_imported(tmp_path):
    """NUL, a lone surrogate, an infinite or NaN number, an impossible date: each is one bad line
    naming its field, never a traceback that stops the import halfway."""
    lines = [
        json.dumps({"external_id": "ok-1", "content": "Good first"}),
        '{"external_id": "nul", "content": "nul\\u0000byte"}',
        '{"external_id": "sur", "content": "x", "people": ["\\ud800"]}',
        '{"external_id": "inf", "content": "x", "importance": 1e400}',
        '{"external_id": "nan", "content": "x", "importance": NaN}',
        json.dumps({"external_id": "date", "content": "x", "occurred_at": "2024-13-45T00:00:00"}),
        json.dumps({"external_id": "far", "content": "x", "occurred_at": "9999-12-31T23:00:00-02:00"}),
        json.dumps({"external_id": "ok-2", "content": "Good last"}),
    ]
    source = tmp_path / "memories.jsonl"
    source.write_text("\n".join(lines) + "\n")
    stderr, stdout = StringIO(), StringIO()
    with pytest.raises(CommandError, match="6 line"):
        call_command("import_memories", str(source), team="acme", create_team=True, stdout=stdout, stderr=stderr)
    reported = stderr.getvalue().splitlines()
    assert reported == [
        f"{source}:2: content: text cannot contain NUL characters (code 0)",
        f"{source}:3: people: not valid Unicode text (a lone surrogate such as \\ud800)",
        f"{source}:4: importance: expected a finite number, got inf",
        f"{source}:5: importance: expected a finite number, got nan",
        f"{source}:6: occurred_at: not a real date-time, '2024-13-45T00:00:00' (month must be in 1..12)",
        f"{source}:7: occurred_at: Use a moment between years 1 and 9999 in UTC.",
    ]
    assert sorted(Memory.objects.values_list("external_id", flat=True)) == ["ok-1", "ok-2"]


def test_a_line_that_is_not_utf8_is_one_bad_line_with_its_number(tmp_path):
    good = [json.dumps({"external_id": f"g{n}", "title": f"Lesson {n}"}).encode() for n in range(300)]
    bad = '{"external_id": "bad", "title": "caf\u00e9"}'.encode("latin-1")
    source = tmp_path / "lessons.jsonl"
    source.write_bytes(b"\xef\xbb\xbf" + b"\n".join([*good, bad, json.dumps({"title": "After"}).encode()]) + b"\n")
    stderr = StringIO()
    with pytest.raises(CommandError, match="1 line"):
        call_command("import_lessons", str(source), team="acme", create_team=True, stdout=StringIO(), stderr=stderr)
    reason = "not UTF-8 text (invalid continuation byte at byte 37 of the line)"
    assert stderr.getvalue().strip() == f"{source}:301: {reason}"
    assert Lesson.objects.count() == 301  # the byte-order mark did not cost line 1


def test_a_blank_external_id_matches_on_the_text_again(tmp_path):
    source = tmp_path / "lessons.jsonl"
    source.write_text(json.dumps({"external_id": "  ", "title": "Blank id"}) + "\n")
    out = StringIO()
    call_command("import_lessons", str(source), team="acme", create_team=True, stdout=out)
    call_command("import_lessons", str(source), team="acme", stdout=out)
    assert "1 unchanged" in out.getvalue().splitlines()[-1]
    assert Lesson.objects.get().external_id is None


def test_a_directory_is_not_called_a_missing_file(tmp_path):
    with pytest.raises(CommandError, match="not a regular file"):
        call_command("import_lessons", str(tmp_path), team="acme", create_team=True)


def test_a_team_created_for_an_import_that_imported_nothing_is_not_kept(tmp_path):
    from lessons.models import Team

    source = tmp_path / "lessons.jsonl"
    source.write_text("{not json\n" + json.dumps({"title": "x", "confidence": 7}) + "\n")
    out = StringIO()
    with pytest.raises(CommandError, match="2 line"):
        call_command("import_lessons", str(source), team="fresh", create_team=True, stdout=out, stderr=StringIO())
    assert "team 'fresh' not kept" in out.getvalue()
    assert not Team.objects.filter(slug="fresh").exists()
    # A team that was there before is kept, whatever the file held.
    Team.objects.create(slug="kept", name="Kept")
    with pytest.raises(CommandError):
        call_command("import_lessons", str(source), team="kept", create_team=True, stdout=StringIO(), stderr=StringIO())
    assert Team.objects.filter(slug="kept").exists()
