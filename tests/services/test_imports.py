import json

import pytest

from lessons.models import Lesson, Memory, Team
from lessons.services.curation import lesson_merge, memory_merge
from lessons.services.imports import import_lessons, import_memories
from lessons.services.lessons import lesson_accept, lesson_reject, lesson_update

pytestmark = pytest.mark.django_db


def jsonl(*objects) -> list[str]:
    return [json.dumps(item) if not isinstance(item, str) else item for item in objects]


GOOD_LESSON = {"external_id": "l-1", "title": "Enable RLS", "tags": ["rls"], "tech_stacks": ["supabase"]}


def test_import_creates_team_and_applies_defaults():
    report = import_lessons(lines=jsonl(GOOD_LESSON), team_slug="new-team", create_team=True)
    assert (report.created, report.errors) == (1, [])
    lesson = Lesson.objects.get()
    assert lesson.team == Team.objects.get(slug="new-team")
    assert (lesson.confidence, lesson.frequency, lesson.status) == (0.5, 1, "confirmed")


def test_reimport_changes_nothing_and_changed_line_updates():
    import_lessons(lines=jsonl(GOOD_LESSON, {"title": "No external id"}), team_slug="t", create_team=True)
    stamps = dict(Lesson.objects.values_list("id", "updated_at"))
    again = import_lessons(lines=jsonl(GOOD_LESSON, {"title": "No external id"}), team_slug="t", create_team=True)
    assert (again.created, again.updated, again.unchanged) == (0, 0, 2)
    assert dict(Lesson.objects.values_list("id", "updated_at")) == stamps

    changed = import_lessons(lines=jsonl({**GOOD_LESSON, "confidence": 0.9}), team_slug="t", create_team=True)
    assert changed.updated == 1
    assert Lesson.objects.get(external_id="l-1").confidence == 0.9


def test_a_reimport_keeps_the_curators_merges_and_decisions():
    lines = jsonl(
        GOOD_LESSON,
        {"external_id": "l-2", "title": "Turn on row level security", "tags": ["rls"]},
        {"external_id": "l-3", "title": "Rotate the service key", "status": "proposed"},
        {"external_id": "l-4", "title": "Log every admin sign-in", "status": "proposed"},
    )
    import_lessons(lines=lines, team_slug="t", create_team=True)
    kept, duplicate = Lesson.objects.get(external_id="l-1"), Lesson.objects.get(external_id="l-2")
    lesson_merge(keep=kept, merged=[duplicate])
    lesson_accept(lesson=Lesson.objects.get(external_id="l-3"))
    lesson_reject(lesson=Lesson.objects.get(external_id="l-4"))

    again = import_lessons(lines=lines, team_slug="t")
    # The merged lesson is not created again beside the one that absorbed it, and the accept and
    # the reject stand (the file still says "proposed"); each is said, line by line.
    assert (again.created, again.merged_away, again.unchanged, again.errors) == (0, 1, 3, [])
    assert "1 merged away by curators" in again.summary()
    assert not Lesson.objects.filter(external_id="l-2").exists()
    assert dict(Lesson.objects.values_list("external_id", "status")) == {
        "l-1": "confirmed", "l-3": "confirmed", "l-4": "rejected"}
    notes = dict(again.notes)
    # The kept lesson's summed frequency and united tags are the curator's: the file's 1 did not go back.
    assert Lesson.objects.get(pk=kept.pk).frequency == 2
    assert notes[1] == "changed by curators since it was imported; the file's values were not applied"
    assert notes[2] == f"merged into lesson #{kept.pk} by a curator; not created again"
    assert notes[3] == "status left confirmed as the curators set it (the file says proposed)"
    assert notes[4] == "status left rejected as the curators set it (the file says proposed)"


def test_a_reimport_updates_what_only_the_file_changed_and_keeps_a_curators_edit():
    import_lessons(lines=jsonl(GOOD_LESSON, {"external_id": "l-2", "title": "Pin images"}), team_slug="t",
                   create_team=True)
    edited = Lesson.objects.get(external_id="l-2")
    lesson_update(lesson=edited, title="Pin base images by digest")  # a curator's edit
    newer = jsonl({**GOOD_LESSON, "confidence": 0.9}, {"external_id": "l-2", "title": "Pin images", "frequency": 3})
    report = import_lessons(lines=newer, team_slug="t")
    assert (report.updated, report.unchanged) == (1, 1)
    assert Lesson.objects.get(external_id="l-1").confidence == 0.9  # only the file changed it: updated
    assert (Lesson.objects.get(external_id="l-2").title, Lesson.objects.get(external_id="l-2").frequency) == (
        "Pin base images by digest", 1)
    assert dict(report.notes) == {2: "changed by curators since it was imported; the file's values were not applied"}
    # and the same file again: l-1 is as the import left it, so it is simply unchanged
    assert import_lessons(lines=newer, team_slug="t").unchanged == 2


def test_bad_lines_are_reported_with_number_and_reason_and_good_lines_land():
    report = import_lessons(
        lines=jsonl(
            GOOD_LESSON,
            '{"title": "broken", ',
            {"external_id": "l-2", "description": "no title"},
            {"external_id": "l-3", "title": "Too sure", "confidence": 7},
            {"external_id": "l-4", "title": "Strange", "colour": "red"},
            {"external_id": "l-5", "title": "Tags wrong", "tags": "rls"},
            "",
            {"external_id": "l-6", "title": "Fine too"},
        ),
        team_slug="t",
        create_team=True,
    )
    reasons = dict(report.errors)
    assert sorted(reasons) == [2, 3, 4, 5, 6]
    assert "broken JSON" in reasons[2]
    assert reasons[3].startswith("title:")
    assert reasons[4].startswith("confidence:")
    assert "colour" in reasons[5]
    assert reasons[6].startswith("tags:")
    assert sorted(Lesson.objects.values_list("external_id", flat=True)) == ["l-1", "l-6"]


def test_numbers_written_as_strings_import_as_the_api_takes_them():
    # the API and the MCP tools took {"frequency": "3"}; the import refused the same line
    report = import_lessons(lines=jsonl(
        {**GOOD_LESSON, "confidence": "0.9", "frequency": " 3 "},
        {"external_id": "l-2", "title": "Wordy", "frequency": "three"},
        {"external_id": "l-3", "title": "Half", "frequency": "2.5"},
        {"external_id": "l-4", "title": "Not a number", "confidence": "NaN"},
    ), team_slug="t", create_team=True)
    assert report.created == 1
    assert (Lesson.objects.get().confidence, Lesson.objects.get().frequency) == (0.9, 3)
    reasons = dict(report.errors)
    assert reasons[2] == "frequency: expected a number, got the string 'three'"
    assert reasons[3] == "frequency: expected a whole number, got 2.5"
    assert reasons[4].startswith("confidence: expected a finite number")
    memories = import_memories(lines=jsonl({"content": "Ran 5 km", "importance": "7"}), team_slug="t")
    assert (memories.created, Memory.objects.get().importance) == (1, 7)


def test_json_python_cannot_read_is_a_bad_line_in_plain_words_and_the_import_goes_on():
    # a line nested 5,000 deep stopped the import with a RecursionError traceback
    report = import_lessons(
        lines=jsonl(
            GOOD_LESSON,
            '{"title": "Deep", "tags": ' + "[" * 5000 + "]" * 5000 + "}",
            '{"title": "Huge", "frequency": ' + "9" * 5000 + "}",
            {"external_id": "l-6", "title": "Fine\u200b too"},
        ),
        team_slug="t",
        create_team=True,
    )
    reasons = dict(report.errors)
    assert reasons[2].startswith("the JSON is nested too deeply to read")
    assert reasons[3] == "a number in the JSON has more than 4,300 digits"
    assert report.created == 2 and Lesson.objects.get(external_id="l-6").title == "Fine too"


def test_a_line_naming_a_key_twice_is_a_bad_line_and_the_import_goes_on():
    """Python's reader kept the last value: the line was imported with whichever came second."""
    report = import_lessons(
        lines=jsonl(GOOD_LESSON, '{"external_id": "l-2", "title": "First", "confidence": 0.9, "title": "Second"}'),
        team_slug="t",
        create_team=True,
    )
    assert dict(report.errors) == {2: 'the key "title" appears twice in one object; send each key once'}
    assert report.created == 1 and not Lesson.objects.filter(external_id="l-2").exists()


MEMORY_WITH_HISTORY = {
    "external_id": "m-1",
    "content": "Jonas is a carpenter in Leipzig",
    "details": "Moved there in 2025.",
    "categories": ["person"],
    "importance": 7,
    "people": ["Jonas"],
    "occurred_at": "2025-03-01T10:00:00+00:00",
    "history": [
        {"content": "Jonas studies architecture", "details": "In Berlin."},
        {"content": "Jonas dropped out to learn carpentry", "details": "Apprenticeship in Berlin."},
    ],
}


def test_memory_import_replays_history_as_versions_and_is_idempotent():
    report = import_memories(lines=jsonl(MEMORY_WITH_HISTORY), team_slug="me", create_team=True)
    assert (report.created, report.errors) == (1, [])
    memory = Memory.objects.get(current_version__isnull=True)
    assert (memory.version, memory.content) == (3, "Jonas is a carpenter in Leipzig")
    assert list(memory.previous_versions.order_by("version").values_list("content", flat=True)) == [
        "Jonas studies architecture",
        "Jonas dropped out to learn carpentry",
    ]
    again = import_memories(lines=jsonl(MEMORY_WITH_HISTORY), team_slug="me", create_team=True)
    assert (again.created, again.updated, again.unchanged) == (0, 0, 1)
    assert Memory.objects.count() == 3


def test_memory_import_reports_bad_values_without_half_writes():
    report = import_memories(
        lines=jsonl(
            {"external_id": "m-2", "content": "Too important", "importance": 11},
            {"external_id": "m-3", "content": "Bad date", "occurred_at": "yesterday"},
            {"external_id": "m-4", "content": "Bad history", "history": [{"content": "ok"}, {"details": "no content"}]},
        ),
        team_slug="me",
        create_team=True,
    )
    reasons = dict(report.errors)
    assert reasons[1].startswith("importance:")
    assert reasons[2].startswith("occurred_at:")
    assert reasons[3].startswith("history[1]")
    assert not Memory.objects.exists()


def test_an_import_that_moves_the_average_length_refreshes_the_keyword_impacts():
    # Any caller of the import service (the commands, the graded lesson sets of eval_retrieval)
    # leaves the team's keyword heads tight, not only the command line.
    from lessons.services.keyword_index import keyword_index_state

    lines = jsonl({"title": "Short"}, *({"title": f"Lesson {n}", "description": "cache pool queue retry " * 10}
                                        for n in range(8)))
    report = import_lessons(lines=lines, team_slug="drifting", create_team=True)
    assert report.created == 9 and report.impacts_refreshed["lessons"] > 0
    team = Team.objects.get(slug="drifting")
    assert keyword_index_state(team=team, kind="lessons").drift == pytest.approx(1.0)
    assert import_lessons(lines=lines, team_slug="drifting").impacts_refreshed == {}  # nothing moved


def test_a_memory_merged_away_is_not_imported_again_by_id_or_by_text():
    lines = jsonl({"external_id": "m-1", "content": "Tom plays bass", "people": ["Tom"]},
                  {"external_id": "m-2", "content": "Tom is a bassist", "people": ["Tom"]},
                  {"content": "Lena sings", "details": "In a choir."},
                  {"content": "Lena sings in a choir", "details": "On Sundays."})
    import_memories(lines=lines, team_slug="me", create_team=True)
    tom = memory_merge(keep=Memory.objects.get(external_id="m-1"), merged=Memory.objects.get(external_id="m-2"))
    lena = memory_merge(keep=Memory.objects.get(content="Lena sings"),
                        merged=Memory.objects.get(content="Lena sings in a choir"))
    again = import_memories(lines=lines, team_slug="me")
    # both came back beside the memories that absorbed them
    assert (again.created, again.merged_away, again.unchanged, again.errors) == (0, 2, 2, [])
    assert dict(again.notes) == {2: f"merged into memory #{tom.pk} by a curator; not created again",
                                 4: f"merged into memory #{lena.pk} by a curator; not created again"}
    assert Memory.objects.count() == 2


def test_a_line_without_an_external_id_merged_away_is_not_created_again():
    lines = jsonl({"title": "Pin images", "description": "Tags move."},
                  {"title": "Pin base images", "description": "Tags move under you."})
    import_lessons(lines=lines, team_slug="t", create_team=True)
    kept = Lesson.objects.get(title="Pin images")
    lesson_merge(keep=kept, merged=[Lesson.objects.get(title="Pin base images")])
    again = import_lessons(lines=lines, team_slug="t")
    assert (again.created, again.merged_away) == (0, 1)
    assert dict(again.notes)[2] == f"merged into lesson #{kept.pk} by a curator; not created again"
    assert Lesson.objects.count() == 1


def test_a_text_longer_than_the_api_allows_is_one_bad_line_in_either_import():
    # an import stored a 50-million-character description the API would refuse (422 over 20,000)
    too_long = "x" * 20_001
    report = import_lessons(lines=jsonl({"external_id": "l-1", "title": "Long", "description": too_long},
                                        {"external_id": "l-2", "title": "Short", "description": "x" * 20_000}),
                            team_slug="t", create_team=True)
    assert report.errors == [(1, "description: at most 20000 characters, as over the API (this one has 20,001)")]
    assert list(Lesson.objects.values_list("external_id", flat=True)) == ["l-2"]
    report = import_memories(lines=jsonl({"content": "Met Ana", "history": [{"content": too_long}]},
                                         {"content": too_long}), team_slug="me", create_team=True)
    assert [number for number, _ in report.errors] == [1, 2]
    assert report.errors[0][1].startswith("history[0].content: at most 20000 characters")
    assert not Memory.objects.exists()


def test_broken_json_says_where_or_that_the_line_ends_too_soon():
    # a cut-off object was reported at "column 1", a position on the next line
    report = import_lessons(lines=['{"external_id": "m-1", "title": "x"\n', '{"title": "x",, "a": 1}\n',
                                   '{"external_id": "m-3", "title": "cut in the mid'], team_slug="t", create_team=True)
    reasons = dict(report.errors)
    assert reasons[1].startswith("broken JSON: the line ends before its JSON does")
    # where the string that never closes starts (the parser's "Unterminated string starting at" lost it)
    assert reasons[3] == ("broken JSON: the line ends before its JSON does (a string starting at column 33 is never "
                          "closed; a file cut short?)")
    assert reasons[2] == "broken JSON: Expecting property name enclosed in double quotes (column 15)"


def test_lines_alike_in_text_take_the_rows_in_id_order_and_a_merged_twin_is_said_once():
    twin = {"title": "Pin images", "description": "Tags move."}
    lines = jsonl({**twin, "recommendation": "Pin by digest."}, {**twin, "recommendation": "Never pin."},
                  {**twin, "recommendation": "Pin by tag."})
    assert import_lessons(lines=lines, team_slug="t", create_team=True).created == 3
    first, second, third = Lesson.objects.order_by("id")
    assert [lesson.recommendation for lesson in (first, second, third)] == [
        "Pin by digest.", "Never pin.", "Pin by tag."]
    lesson_merge(keep=first, merged=[third])
    again = import_lessons(lines=lines, team_slug="t")
    # lines 1 and 2 take back their rows; line 3's row is merged away, so it is not created again
    assert (again.created, again.updated, again.unchanged, again.merged_away, again.errors) == (0, 0, 2, 1, [])
    assert dict(again.notes) == {1: "changed by curators since it was imported; the file's values were not applied",
                                 3: f"merged into lesson #{first.pk} by a curator; not created again"}
    assert Lesson.objects.get(pk=second.pk).recommendation == "Never pin."


def test_a_failed_line_claims_no_row_and_the_next_line_alike_in_text_takes_it():
    import_lessons(lines=jsonl({"title": "Pin images", "confidence": 0.9}, {"title": "Pin images", "confidence": 0.5}),
                   team_slug="t", create_team=True)
    lines = jsonl({"title": "Pin images", "confidence": 0.9}, {"title": "Pin images", "category": "x" * 500},
                  {"title": "Pin images", "confidence": 0.2})
    report = import_lessons(lines=lines, team_slug="t")
    # line 2 found the second row and failed: line 3 takes that row, not a new one
    assert (report.created, report.updated, report.unchanged, [n for n, _ in report.errors]) == (0, 1, 1, [2])
    assert list(Lesson.objects.order_by("id").values_list("confidence", flat=True)) == [0.9, 0.2]
