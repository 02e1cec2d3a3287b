"""export_lessons and export_memories: the file the matching import reads, such that export ->
import into an empty team -> export gives the same bytes; written whole or not at all; read in a
constant number of queries and in one snapshot."""

import io
import itertools
import json
import threading
import uuid
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from lessons.models import Lesson, Memory, Team
from lessons.selectors import exports
from lessons.selectors.exports import memory_export_rows
from lessons.services.api_keys import api_key_create
from lessons.services.curation import lesson_merge, memory_merge
from lessons.services.lessons import lesson_create, lesson_update
from lessons.services.memories import memory_create, memory_update
from tests.api.conftest import JsonClient
from tests.factories import LessonFactory, MemoryFactory

pytestmark = pytest.mark.django_db


def run(command, path, **options):
    stdout, stderr = StringIO(), StringIO()
    call_command(command, str(path), stdout=stdout, stderr=stderr, **options)
    return stdout.getvalue(), stderr.getvalue()


def fill(team):
    """Rows as the services write them, dated as if written long ago."""
    lesson_create(team=team, external_id="l-1", title="Naïve retries billed the café twice 🚀",
                  description="Stripe 再送 “invoice.paid”.", tech_stacks=["django", "stripe"], tags=["webhooks"],
                  confidence=0.95, frequency=3)
    lesson_create(team=team, title="No id and no lists", status="proposed")
    lesson_create(team=team, external_id="l-3", title="Rejected idea", status="rejected", confidence=0.1)
    Lesson.objects.filter(team=team).update(created_at=F("created_at") - timedelta(days=400),
                                            updated_at=F("updated_at") - timedelta(days=300))
    zoe = memory_create(team=team, external_id="m-1", content="Zoë studies architecture", details="In Wien.",
                        categories=["person"], people=["Zoë"], emotions=["proud"],
                        occurred_at=datetime(2023, 4, 1, 9, 30, tzinfo=UTC))
    memory_update(memory=zoe, content="Zoë dropped out to learn carpentry")
    memory_update(memory=zoe, importance=9)  # not a text: the next version's written_at is not this
    memory_update(memory=zoe, content="Zoë is a carpenter in Leipzig", details="")
    memory_update(memory=zoe, people=["Zoë", "Ida"])  # after the last text: written_at stays that text's
    memory_create(team=team, content="A memory without id, people or emotions")
    Memory.objects.filter(team=team).update(created_at=F("created_at") - timedelta(days=400),
                                            updated_at=F("updated_at") - timedelta(days=400))


def versions_seen_by_the_api(team):
    api = JsonClient(api_key_create(team=team, name="reader")[1])
    seen = []
    for memory in Memory.objects.filter(team=team, current_version__isnull=True).order_by("id"):
        detail = api.get(f"/memories/{memory.pk}").json()
        versions = api.get(f"/memories/{memory.pk}/versions").json()
        seen.append((detail["created_at"], detail["updated_at"],
                     [(v["version"], v["content"], v["written_at"], v["replaced_at"]) for v in versions]))
    return seen


def test_export_import_export_gives_the_same_bytes_and_the_same_dates(tmp_path, team):
    fill(team)
    for command, name in (("export_lessons", "lessons"), ("export_memories", "memories")):
        run(command, tmp_path / f"{name}.jsonl", team="acme")
        run(f"import_{name}", tmp_path / f"{name}.jsonl", team="copy", create_team=True)
        run(command, tmp_path / f"{name}-again.jsonl", team="copy")
        assert (tmp_path / f"{name}-again.jsonl").read_bytes() == (tmp_path / f"{name}.jsonl").read_bytes()

    lines = [json.loads(line) for line in (tmp_path / "lessons.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(line["external_id"], line["status"]) for line in lines] == [
        ("l-1", "confirmed"), (None, "proposed"), ("l-3", "rejected")]
    assert lines[1]["tags"] == [] and lines[0]["created_at"].endswith("+00:00")
    assert "Naïve retries billed the café twice 🚀" in (tmp_path / "lessons.jsonl").read_text(encoding="utf-8")
    zoe, plain = [json.loads(line) for line in (tmp_path / "memories.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [version["content"] for version in zoe["history"]] == [
        "Zoë studies architecture", "Zoë dropped out to learn carpentry"]  # oldest first
    assert zoe["written_at"] < zoe["updated_at"]  # the people changed after the last text
    assert (plain["external_id"], plain["history"], plain["people"]) == (None, [], [])
    assert plain["written_at"] == plain["created_at"]
    assert versions_seen_by_the_api(team) == versions_seen_by_the_api(Team.objects.get(slug="copy"))


def test_dash_writes_the_same_bytes_to_stdout_and_the_summary_to_stderr(tmp_path, team):
    fill(team)
    run("export_memories", tmp_path / "memories.jsonl", team="acme")
    # An ASCII text layer (a C locale): the data still goes out as UTF-8 bytes, as in the file.
    stdout, stderr = io.TextIOWrapper(io.BytesIO(), encoding="ascii"), StringIO()
    call_command("export_memories", "-", team="acme", stdout=stdout, stderr=stderr)
    assert stdout.buffer.getvalue() == (tmp_path / "memories.jsonl").read_bytes()
    assert stderr.getvalue() == "exported 2 memories (2 earlier versions) of team 'acme' to stdout\n"


def test_lessons_of_some_statuses_only_and_a_bad_status_named(tmp_path, team):
    fill(team)
    out, _ = run("export_lessons", tmp_path / "some.jsonl", team="acme", status=["rejected", "proposed"])
    assert out == f"exported 2 lessons (rejected, proposed) of team 'acme' to {tmp_path / 'some.jsonl'}\n"
    assert [json.loads(line)["status"] for line in (tmp_path / "some.jsonl").read_text().splitlines()] == [
        "proposed", "rejected"]  # id order, whatever the options' order
    with pytest.raises(CommandError, match="--status: no status 'accepted'; use proposed, confirmed, rejected"):
        run("export_lessons", tmp_path / "bad.jsonl", team="acme", status=["confirmed", "accepted"])
    assert not (tmp_path / "bad.jsonl").exists()


def test_an_existing_file_is_refused_without_force_and_replaced_with_it(tmp_path, team):
    LessonFactory(team=team, title="Only one")
    target = tmp_path / "lessons.jsonl"
    target.write_text("precious\n")
    with pytest.raises(CommandError, match=f"{target}: the file exists; add --force to replace it"):
        run("export_lessons", target, team="acme")
    assert target.read_text() == "precious\n"
    out, _ = run("export_lessons", target, team="acme", force=True)
    assert out == f"exported 1 lesson of team 'acme' to {target}\n"
    assert json.loads(target.read_text())["title"] == "Only one"
    assert [path.name for path in tmp_path.iterdir()] == ["lessons.jsonl"]


def test_an_unknown_team_a_missing_folder_and_a_folder_are_command_errors(tmp_path, team):
    with pytest.raises(CommandError, match="--team: no team with slug 'acmee'"):
        run("export_memories", tmp_path / "memories.jsonl", team="acmee")
    with pytest.raises(CommandError, match="its folder .*/nowhere does not exist"):
        run("export_memories", tmp_path / "nowhere" / "memories.jsonl", team="acme")
    with pytest.raises(CommandError, match="is a folder"):
        run("export_memories", tmp_path, team="acme", force=True)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fault", [RuntimeError("the disk caught fire"), KeyboardInterrupt()])
def test_a_fault_mid_write_leaves_no_half_file_and_the_old_file_whole(tmp_path, team, monkeypatch, fault):
    for number in range(5):
        LessonFactory(team=team, title=f"Lesson {number}")
    real_dict, rows = exports._lesson_dict, itertools.count()

    def failing_after_two(values):
        if next(rows) == 2:
            raise fault
        return real_dict(values)

    monkeypatch.setattr(exports, "_lesson_dict", failing_after_two)
    fresh, kept = tmp_path / "fresh.jsonl", tmp_path / "kept.jsonl"
    kept.write_text("the last good export\n")
    for target in (fresh, kept):
        rows = itertools.count()
        with pytest.raises((RuntimeError, CommandError)) as raised:
            run("export_lessons", target, team="acme", force=True)
        if isinstance(fault, KeyboardInterrupt):
            assert raised.value.returncode == 130
            assert str(raised.value) == f"interrupted (Ctrl-C or SIGTERM): nothing was written to {target}"
    assert not fresh.exists() and kept.read_text() == "the last good export\n"
    assert [path.name for path in tmp_path.iterdir()] == ["kept.jsonl"]  # no temporary file left


def test_memories_stream_in_chunks_in_a_constant_number_of_queries(tmp_path, team, django_assert_max_num_queries):
    def add_memories(count):
        for _ in range(count):
            memory = MemoryFactory(team=team)
            for version in (1, 2):
                MemoryFactory(team=team, current_version=memory, version=version, content=f"Before {version}")

    counts = []
    for total, more in ((3, 3), (40, 37)):
        add_memories(more)
        with django_assert_max_num_queries(6), CaptureQueriesContext(connection) as queries:
            run("export_memories", tmp_path / f"{total}.jsonl", team="acme")
        counts.append(len(queries))
        assert len((tmp_path / f"{total}.jsonl").read_text().splitlines()) == total
    assert counts[0] == counts[1]
    # Across chunk boundaries each memory still gets its own versions, oldest first.
    assert list(memory_export_rows(team=team, chunk_size=7)) == list(memory_export_rows(team=team))
    assert {tuple(v["content"] for v in row["history"]) for row in memory_export_rows(team=team, chunk_size=7)} == {
        ("Before 1", "Before 2")}


@pytest.mark.django_db(transaction=True)  # the command's own transaction, REPEATABLE READ, not the test's
def test_an_edit_during_the_export_is_not_in_the_file(tmp_path, monkeypatch):
    team = Team.objects.create(slug="acme", name="Acme")
    first, second = MemoryFactory(team=team, content="First as it was"), MemoryFactory(team=team, content="Second")
    from lessons.management.commands import export_memories

    real_rows = export_memories.memory_export_rows

    def rows_with_an_edit_meanwhile(*, team):
        # The export's snapshot is taken (the team is read): another writer commits an edit now.
        def edit():
            try:
                Memory.objects.filter(pk=first.pk).update(content="First as edited")
                MemoryFactory(team=team, current_version=second, version=1, content="Second before")
            finally:
                connection.close()

        writer = threading.Thread(target=edit)
        writer.start()
        writer.join(10)
        yield from real_rows(team=team)

    monkeypatch.setattr(export_memories, "memory_export_rows", rows_with_an_edit_meanwhile)
    run("export_memories", tmp_path / "memories.jsonl", team="acme")
    rows = [json.loads(line) for line in (tmp_path / "memories.jsonl").read_text().splitlines()]
    assert [(row["content"], row["history"]) for row in rows] == [("First as it was", []), ("Second", [])]
    assert Memory.objects.get(pk=first.pk).content == "First as edited"  # the edit itself landed


def twins(team):
    """Rows without an external_id, alike in the text they are matched on and different in the rest."""
    lesson_create(team=team, title="Retry webhooks", description="They fail.", recommendation="Back off and retry.")
    lesson_create(team=team, title="Retry webhooks", description="They fail.", recommendation="BAD ADVICE",
                  status="rejected")
    memory_create(team=team, content="Lunch with the team", people=["Ana"], importance=7)
    memory_create(team=team, content="Lunch with the team", people=["Ben", "Cleo"], importance=2)
    Lesson.objects.filter(team=team).update(created_at=F("created_at") - timedelta(days=5),
                                             updated_at=F("updated_at") - timedelta(days=3))
    Memory.objects.filter(team=team).update(created_at=F("created_at") - timedelta(days=5),
                                             updated_at=F("updated_at") - timedelta(days=3))


def test_rows_alike_in_text_come_back_as_as_many_rows_into_an_empty_team(tmp_path, team):
    # they came back as one: "1 created, 1 updated", a false status note, the rejected one's advice
    # on the confirmed lesson (and one memory with the other's people, silently)
    twins(team)
    for command, name in (("export_lessons", "lessons"), ("export_memories", "memories")):
        run(command, tmp_path / f"{name}.jsonl", team="acme")
        out, err = run(f"import_{name}", tmp_path / f"{name}.jsonl", team="copy", create_team=True)
        assert ": 2 created, 0 updated, 0 unchanged, 0 failed\n" in out and err == ""
        run(command, tmp_path / f"{name}-again.jsonl", team="copy")
        assert (tmp_path / f"{name}-again.jsonl").read_bytes() == (tmp_path / f"{name}.jsonl").read_bytes()
    copy = Team.objects.get(slug="copy")
    assert list(Lesson.objects.filter(team=copy).order_by("id").values_list("status", "recommendation")) == [
        ("confirmed", "Back off and retry."), ("rejected", "BAD ADVICE")]
    assert list(Memory.objects.filter(team=copy).order_by("id").values_list("people", "importance")) == [
        (["Ana"], 7), (["Ben", "Cleo"], 2)]


def test_a_team_re_importing_its_own_export_changes_nothing_and_says_nothing(tmp_path, team):
    # every run was "0 created, 2 updated" with false notes, and updated_at moved on each
    twins(team)
    for command, name in (("export_lessons", "lessons"), ("export_memories", "memories")):
        run(command, tmp_path / f"{name}.jsonl", team="acme")
        stamps = {model: dict(model.objects.values_list("id", "updated_at")) for model in (Lesson, Memory)}
        for _ in range(2):
            out, err = run(f"import_{name}", tmp_path / f"{name}.jsonl", team="acme")
            assert ": 0 created, 0 updated, 2 unchanged, 0 failed\n" in out and err == ""
        assert {model: dict(model.objects.values_list("id", "updated_at")) for model in (Lesson, Memory)} == stamps
        run(command, tmp_path / f"{name}-again.jsonl", team="acme")
        assert (tmp_path / f"{name}-again.jsonl").read_bytes() == (tmp_path / f"{name}.jsonl").read_bytes()
    assert Lesson.objects.count() == 2 and Memory.objects.count() == 2


def test_restoring_an_older_backup_keeps_the_edits_made_since_and_says_so(tmp_path, team):
    # a PATCHed memory went back to the file's text, as a new version, without a word
    memory = memory_create(team=team, external_id="m-1", content="Zoë studies architecture")
    twins(team)
    run("export_lessons", tmp_path / "lessons.jsonl", team="acme")
    run("export_memories", tmp_path / "memories.jsonl", team="acme")
    api = JsonClient(api_key_create(team=team, name="agent")[1])
    assert api.patch(f"/memories/{memory.pk}", {"content": "Zoë is a carpenter"}).status_code == 200
    lesson = Lesson.objects.filter(team=team).order_by("id").first()  # stored by a service: no import digest
    assert api.patch(f"/lessons/{lesson.pk}", {"recommendation": "Back off, retry, then alert."}).status_code == 200

    backup = [json.loads(line) for line in (tmp_path / "memories.jsonl").read_text().splitlines()]
    out, err = run("import_memories", tmp_path / "memories.jsonl", team="acme")
    assert ": 0 created, 0 updated, 3 unchanged, 0 failed\n" in out
    memory.refresh_from_db()
    assert (memory.content, memory.version) == ("Zoë is a carpenter", 2)
    assert err == (f"{tmp_path / 'memories.jsonl'}:1: note: changed since this file was written (stored updated_at "
                   f"{memory.updated_at.isoformat()} > the file's {backup[0]['updated_at']}); "
                   "the file's values were not applied\n")

    out, err = run("import_lessons", tmp_path / "lessons.jsonl", team="acme")
    assert ": 0 created, 0 updated, 2 unchanged, 0 failed\n" in out
    lesson.refresh_from_db()
    assert lesson.recommendation == "Back off, retry, then alert."
    assert err.startswith(f"{tmp_path / 'lessons.jsonl'}:1: note: changed since this file was written (stored "
                          f"updated_at {lesson.updated_at.isoformat()} > the file's ")
    assert err.count("note:") == 1  # the twin nobody touched: nothing to say

    # A line without updated_at is not checked: the file's values are applied, as before.
    undated = {key: value for key, value in backup[0].items() if key not in ("written_at", "updated_at")}
    (tmp_path / "undated.jsonl").write_text(json.dumps(undated) + "\n")
    out, err = run("import_memories", tmp_path / "undated.jsonl", team="acme")
    assert ": 0 created, 1 updated" in out and err == ""
    assert Memory.objects.get(pk=memory.pk).content == "Zoë studies architecture"


def test_a_backup_finds_each_row_by_its_uid_even_when_its_text_was_edited_since(tmp_path, team):
    # Rows without an external_id were matched on their text alone: restoring the backup over the
    # team it came from made a second lesson and a second memory of the two edited since.
    twins(team)
    lesson_create(team=team, title="Deleted after the backup")
    run("export_lessons", tmp_path / "lessons.jsonl", team="acme")
    run("export_memories", tmp_path / "memories.jsonl", team="acme")
    backup = [json.loads(line) for line in (tmp_path / "lessons.jsonl").read_text().splitlines()]
    stored = Lesson.objects.filter(team=team).order_by("id")
    assert [line["uid"] for line in backup] == [str(lesson.uid) for lesson in stored]
    edited_lesson, _, gone = stored
    lesson_update(lesson=edited_lesson, title="Retry webhooks with backoff")
    gone.delete()
    edited_memory = Memory.objects.filter(team=team).order_by("id").first()
    memory_update(memory=edited_memory, content="Lunch with the whole team")

    out, err = run("import_lessons", tmp_path / "lessons.jsonl", team="acme")
    assert ": 1 created, 0 updated, 2 unchanged, 0 failed\n" in out  # the deleted one, with its uid
    assert err.startswith(f"{tmp_path / 'lessons.jsonl'}:1: note: changed since this file was written")
    assert sorted(Lesson.objects.filter(team=team).values_list("title", flat=True)) == [
        "Deleted after the backup", "Retry webhooks", "Retry webhooks with backoff"]
    assert str(Lesson.objects.get(team=team, title="Deleted after the backup").uid) == backup[2]["uid"]

    out, err = run("import_memories", tmp_path / "memories.jsonl", team="acme")
    assert ": 0 created, 0 updated, 2 unchanged, 0 failed\n" in out
    assert err.startswith(f"{tmp_path / 'memories.jsonl'}:1: note: changed since this file was written")
    assert sorted(Memory.objects.filter(team=team, current_version__isnull=True).values_list("content", flat=True)) == [
        "Lunch with the team", "Lunch with the whole team"]


def test_a_backup_line_of_a_row_merged_away_since_is_not_created_again_by_its_uid(tmp_path, team):
    # edited, then merged into another: neither its text nor the merge record's text is the file's
    twins(team)
    run("export_lessons", tmp_path / "lessons.jsonl", team="acme")
    run("export_memories", tmp_path / "memories.jsonl", team="acme")
    keep, merged = Lesson.objects.filter(team=team).order_by("id")
    lesson_update(lesson=merged, title="Retry webhooks, rejected")
    lesson_merge(keep=keep, merged=[Lesson.objects.get(pk=merged.pk)])
    kept_memory, merged_memory = Memory.objects.filter(team=team).order_by("id")
    memory_merge(keep=kept_memory, merged=memory_update(memory=merged_memory, content="Lunch with Ben and Cleo"))

    for name, noun, kept in (("lessons", "lesson", keep), ("memories", "memory", kept_memory)):
        out, err = run(f"import_{name}", tmp_path / f"{name}.jsonl", team="acme")
        assert ", 1 merged away by curators, 0 failed\n" in out
        assert f":2: note: merged into {noun} #{kept.pk} by a curator; not created again\n" in err
    assert Lesson.objects.filter(team=team).count() == 1
    assert Memory.objects.filter(team=team, current_version__isnull=True).count() == 1


def test_a_file_from_another_team_or_from_before_uids_is_matched_as_before(tmp_path, team):
    # A uid this team has no row for: the row is found by its text (the team restored from an
    # export written before rows had uids), and a row it creates takes the line's uid.
    twins(team)
    run("export_lessons", tmp_path / "lessons.jsonl", team="acme")
    lines = [json.loads(line) for line in (tmp_path / "lessons.jsonl").read_text().splitlines()]
    foreign = [{**line, "uid": str(uuid.uuid4())} for line in lines]
    foreign.append({"title": "New from elsewhere", "uid": str(uuid.uuid4())})
    (tmp_path / "foreign.jsonl").write_text("".join(json.dumps(line) + "\n" for line in foreign))
    out, _ = run("import_lessons", tmp_path / "foreign.jsonl", team="acme")
    assert ": 1 created, 0 updated, 2 unchanged, 0 failed\n" in out
    assert [str(uid) for uid in Lesson.objects.filter(team=team).order_by("id").values_list("uid", flat=True)] == [
        lines[0]["uid"], lines[1]["uid"], foreign[2]["uid"]]  # the matched rows keep their own


def test_a_bad_uid_or_a_uid_on_two_lines_is_a_bad_line_naming_it(tmp_path, team):
    given = str(uuid.uuid4())
    (tmp_path / "lessons.jsonl").write_text("".join(json.dumps(line) + "\n" for line in (
        {"title": "One", "uid": given},
        {"title": "Two", "uid": given.upper()},  # the same uid, spelt otherwise
        {"title": "Three", "uid": "lesson-3"},
        {"title": "Four", "uid": 4},
    )))
    with pytest.raises(CommandError):
        run("import_lessons", tmp_path / "lessons.jsonl", team="acme")
    assert list(Lesson.objects.filter(team=team).values_list("title", "uid")) == [("One", uuid.UUID(given))]
    stderr = StringIO()
    with pytest.raises(CommandError):
        call_command("import_lessons", str(tmp_path / "lessons.jsonl"), team="acme", stdout=StringIO(), stderr=stderr)
    assert f":2: uid '{given}' is on line 1 too; a file holds each row once" in stderr.getvalue()
    assert ":3: uid: expected a UUID such as " in stderr.getvalue() and "got 'lesson-3'" in stderr.getvalue()
    assert ":4: uid: expected a UUID such as " in stderr.getvalue() and "got 4" in stderr.getvalue()


def test_rows_written_without_a_uid_get_one_each(team):
    # what a server still running the earlier code stores during a deploy, and what the migration
    # gives the rows already stored: the database's own default, per row
    original = lesson_create(team=team, title="Stored by the services")
    columns = ", ".join(field.column for field in Lesson._meta.concrete_fields
                        if field.column not in ("id", "uid", "search_vector"))  # the vector is generated
    with connection.cursor() as cursor:
        for _ in range(2):  # each a copy naming every column but its id and its uid
            cursor.execute(f"INSERT INTO lessons_lesson ({columns}) SELECT {columns} FROM lessons_lesson "
                           "WHERE id = %s", [original.pk])
    uids = list(Lesson.objects.filter(team=team).values_list("uid", flat=True))
    assert len(uids) == 3 and len(set(uids)) == 3 and None not in uids


def test_a_row_whose_external_id_changed_since_the_backup_is_found_by_its_uid(tmp_path, team):
    fill(team)
    run("export_lessons", tmp_path / "lessons.jsonl", team="acme")
    run("export_memories", tmp_path / "memories.jsonl", team="acme")
    lesson = Lesson.objects.get(team=team, external_id="l-1")
    lesson_update(lesson=lesson, external_id="stripe-retries")
    memory = Memory.objects.get(team=team, external_id="m-1", current_version__isnull=True)
    memory_update(memory=memory, external_id=None)

    out, err = run("import_lessons", tmp_path / "lessons.jsonl", team="acme")
    assert ": 0 created, 0 updated, 3 unchanged, 0 failed\n" in out  # l-1 came back as a second lesson
    assert err.startswith(f"{tmp_path / 'lessons.jsonl'}:1: note: changed since this file was written")
    out, _ = run("import_memories", tmp_path / "memories.jsonl", team="acme")
    assert ": 0 created, 0 updated, 2 unchanged, 0 failed\n" in out
    assert list(Lesson.objects.filter(team=team).order_by("id").values_list("external_id", flat=True)) == [
        "stripe-retries", None, "l-3"]
    assert Memory.objects.filter(team=team, current_version__isnull=True).count() == 2
