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


def test_dated_lines_give_a_created_row_their_dates_and_an_existing_row_keeps_its_own(tmp_path):
    from lessons.selectors.listing import memory_versions

    lessons = tmp_path / "lessons.jsonl"
    lessons.write_text("".join(json.dumps(row) + "\n" for row in [
        {"external_id": "both", "title": "Both dates", "created_at": "2023-01-02T03:04:05+00:00",
         "updated_at": "2023-06-01T00:00:00+02:00"},
        {"external_id": "created", "title": "Created only", "created_at": "2023-01-02T03:04:05"},  # no offset: UTC
    ]))
    call_command("import_lessons", str(lessons), team="acme", create_team=True, stdout=StringIO())
    dates = {row.external_id: (row.created_at.isoformat(), row.updated_at.isoformat()) for row in Lesson.objects.all()}
    assert dates == {"both": ("2023-01-02T03:04:05+00:00", "2023-05-31T22:00:00+00:00"),
                     "created": ("2023-01-02T03:04:05+00:00", "2023-01-02T03:04:05+00:00")}
    # Dated once, a lesson only the file changed is still updated: the dates are no curator's edit.
    lessons.write_text(json.dumps({"external_id": "both", "title": "Both dates, retitled",
                                   "created_at": "2020-01-01T00:00:00+00:00"}) + "\n")
    out, err = StringIO(), StringIO()
    call_command("import_lessons", str(lessons), team="acme", stdout=out, stderr=err)
    assert "1 updated" in out.getvalue() and err.getvalue() == ""
    assert Lesson.objects.get(external_id="both").created_at.isoformat() == "2023-01-02T03:04:05+00:00"

    memories = tmp_path / "memories.jsonl"
    line = {"external_id": "m-1", "content": "Jonas is a carpenter", "created_at": "2022-01-01T00:00:00+00:00",
            "written_at": "2024-01-01T00:00:00+00:00", "updated_at": "2024-02-01T00:00:00+00:00",
            "history": [{"content": "Jonas studies", "written_at": "2022-01-01T00:00:00+00:00"},
                        {"content": "Jonas dropped out", "details": "In Berlin.",
                         "written_at": "2023-01-01T00:00:00Z"}]}
    memories.write_text(json.dumps(line) + "\n")
    call_command("import_memories", str(memories), team="acme", stdout=StringIO())
    memory = Memory.objects.get(current_version__isnull=True)
    seen = [(version.version, version.written_at.year, version.replaced_at and version.replaced_at.year)
            for version in memory_versions(memory=memory)]
    assert seen == [(3, 2024, None), (2, 2023, 2024), (1, 2022, 2023)]
    assert (memory.created_at.year, memory.updated_at.isoformat()) == (2022, "2024-02-01T00:00:00+00:00")
    line.update(created_at="2019-01-01T00:00:00+00:00", written_at="2021-01-01T00:00:00+00:00", updated_at=None,
                history=[{**version, "written_at": f"20{19 + n}-01-01T00:00:00+00:00"}
                         for n, version in enumerate(line["history"])])
    memories.write_text(json.dumps(line) + "\n")
    out, err = StringIO(), StringIO()
    call_command("import_memories", str(memories), team="acme", stdout=out, stderr=err)
    assert "1 unchanged" in out.getvalue() and err.getvalue() == ""  # no note: the dates are the row's
    assert Memory.objects.get(pk=memory.pk).created_at.year == 2022


def test_dates_that_go_backwards_or_into_the_future_are_bad_lines(tmp_path):
    lessons = tmp_path / "lessons.jsonl"
    lessons.write_text("".join(json.dumps(row) + "\n" for row in [
        {"title": "Backwards", "created_at": "2024-01-02T00:00:00+00:00", "updated_at": "2024-01-01T00:00:00+00:00"},
        {"title": "Ahead", "created_at": "2999-01-01T00:00:00+00:00"},
        {"title": "Fine", "created_at": "2024-01-01T00:00:00+00:00"},
    ]))
    err = StringIO()
    with pytest.raises(CommandError, match="2 line"):
        call_command("import_lessons", str(lessons), team="acme", create_team=True, stdout=StringIO(), stderr=err)
    first, second = err.getvalue().splitlines()
    assert first == (f"{lessons}:1: updated_at: before created_at "
                     "(2024-01-01T00:00:00+00:00 < 2024-01-02T00:00:00+00:00)")
    assert second.startswith(f"{lessons}:2: created_at: in the future (2999-01-01T00:00:00+00:00, now is ")
    assert list(Lesson.objects.values_list("title", flat=True)) == ["Fine"]

    memories = tmp_path / "memories.jsonl"
    memories.write_text("".join(json.dumps(row) + "\n" for row in [
        {"content": "Backwards history", "history": [
            {"content": "a", "written_at": "2024-03-01T00:00:00+00:00"},
            {"content": "b", "written_at": "2024-02-01T00:00:00+00:00"}]},
        {"content": "Current before its history", "written_at": "2024-01-01T00:00:00+00:00",
         "history": [{"content": "a", "written_at": "2024-03-01T00:00:00+00:00"}]},
        {"content": "Undated history, dated text", "written_at": "2024-01-01T00:00:00+00:00",
         "history": [{"content": "a"}, {"content": "b"}]},
        {"content": "Two dates for one text", "created_at": "2024-01-01T00:00:00+00:00",
         "written_at": "2024-02-01T00:00:00+00:00"},
        {"content": "Ahead", "history": [{"content": "a", "written_at": "2999-01-01T00:00:00+00:00"}]},
        {"content": "Fine", "history": [{"content": "a", "written_at": "2024-01-01T00:00:00+00:00"}]},
    ]))
    err = StringIO()
    with pytest.raises(CommandError, match="5 line"):
        call_command("import_memories", str(memories), team="acme", stdout=StringIO(), stderr=err)
    reported = err.getvalue().splitlines()
    assert reported[0].startswith(f"{memories}:1: history[1].written_at: before history[0].written_at "
                                  "(2024-02-01T00:00:00+00:00 < 2024-03-01T00:00:00+00:00)")
    assert reported[1].startswith(f"{memories}:2: written_at: before history[0].written_at (")
    assert reported[2].startswith(f"{memories}:3: written_at: before history[1].written_at (not given: the time of "
                                  "the import) (")
    assert reported[3].startswith(f"{memories}:4: written_at: a memory without history was written when it was created")
    assert reported[4].startswith(f"{memories}:5: history[0].written_at: in the future (2999-01-01T00:00:00+00:00")
    assert len(reported) == 5
    assert list(Memory.objects.filter(current_version__isnull=True).values_list("content", flat=True)) == ["Fine"]


def test_a_dated_history_text_repeated_is_one_version_dated_when_first_written(tmp_path):
    from lessons.selectors.listing import memory_versions

    memories = tmp_path / "memories.jsonl"
    memories.write_text(json.dumps({"content": "Lives in Leipzig", "written_at": "2024-01-01T00:00:00+00:00",
                                    "history": [
        {"content": "Lives in Berlin", "written_at": "2022-01-01T00:00:00+00:00"},
        {"content": "Lives in Berlin ", "written_at": "2023-01-01T00:00:00+00:00"},  # the same text, once trimmed
    ]}) + "\n")
    call_command("import_memories", str(memories), team="acme", create_team=True, stdout=StringIO())
    memory = Memory.objects.get(current_version__isnull=True)
    assert [(version.content, version.written_at.year) for version in memory_versions(memory=memory)] == [
        ("Lives in Leipzig", 2024), ("Lives in Berlin", 2022)]


def test_a_line_is_matched_on_its_text_as_stored_so_a_re_run_makes_no_duplicate(tmp_path):
    # decomposed accents and invisible characters are cleaned on the way in: matched on the raw
    # text, the stored row was never found and every re-run created another
    lessons = tmp_path / "lessons.jsonl"
    lessons.write_text("".join(json.dumps(row) + "\n" for row in [
        {"title": "Cafe\u0301 lesson", "description": "pass\u200bword reset "},
        {"external_id": " l-2\u200b", "title": "Second"},
    ]))
    memories = tmp_path / "memories.jsonl"
    memories.write_text(json.dumps({"content": "Zoe\u0308 moved\u2060 to Wien", "details": "\ufeffIn May."}) + "\n")
    for run in range(2):
        out, err = StringIO(), StringIO()
        call_command("import_lessons", str(lessons), team="acme", create_team=True, stdout=out, stderr=err)
        call_command("import_memories", str(memories), team="acme", stdout=out, stderr=err)
        assert err.getvalue() == ""
        summaries = [line for line in out.getvalue().splitlines() if "created" in line]
        if run:
            assert [line.split(": ")[1] for line in summaries] == ["0 created, 0 updated, 2 unchanged, 0 failed",
                                                                  "0 created, 0 updated, 1 unchanged, 0 failed"]
    assert sorted(Lesson.objects.values_list("title", "description", "external_id")) == [
        ("Café lesson", "password reset", None), ("Second", "", "l-2")]
    assert list(Memory.objects.values_list("content", "details")) == [("Zoë moved to Wien", "In May.")]


def test_one_external_id_spelt_with_an_invisible_character_is_still_one_row_in_a_file(tmp_path):
    source = tmp_path / "lessons.jsonl"
    source.write_text(json.dumps({"external_id": "d-1", "title": "First"}) + "\n"
                      + json.dumps({"external_id": "d-1\u200b", "title": "Second"}) + "\n")
    stderr = StringIO()
    with pytest.raises(CommandError, match="1 line"):
        call_command("import_lessons", str(source), team="acme", create_team=True, stdout=StringIO(), stderr=stderr)
    assert f"{source}:2: external_id 'd-1' is on line 1 too; a file holds each row once" in stderr.getvalue()
    assert list(Lesson.objects.values_list("external_id", "title")) == [("d-1", "First")]
