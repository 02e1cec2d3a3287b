"""Terms stored with a space or an underscore, or that the text parser splits otherwise ("error
handling", "back_off", "node js", "socket.io-client"), are found by every spelling of their term, as
"next.js" is (lessons/search/spellings.py, migration 0029). Before, the keyword vocabulary never
held them: `tag=error-handling`, `tech_stack=nodejs` and `emotion=panic-attack` listed nothing."""

import threading
from importlib import import_module

import pytest
from django.apps import apps as current_apps
from django.db import connection, transaction

from lessons.search import SearchRequest, search
from lessons.search.kinds import canonical
from lessons.search.spellings import SPELLING_INDEX_PREDICATE, VOCABULARY_SPELLINGS_SQL
from lessons.services.api_keys import api_key_create
from lessons.services.lessons import lesson_create, lesson_update
from lessons.services.memories import memory_create, memory_update
from tests.api.conftest import JsonClient

MIGRATION = import_module("lessons.migrations.0029_term_spellings")


@pytest.fixture
def api(team):
    return JsonClient(api_key_create(team=team, name="agent")[1])


@pytest.fixture
def spaced_lesson(api):
    """The outside tester's lesson, stored through the API, beside one that shares none of its terms."""
    created = api.post("/lessons", {"title": "Retry the payment webhook", "tags": ["error handling", "back_off"],
                                    "tech_stacks": ["node js", "ruby_on_rails"]})
    assert created.status_code == 201, created.content
    api.post("/lessons", {"title": "Cache the price list", "tags": ["caching"], "tech_stacks": ["django"]})
    return created.json()["id"]


@pytest.fixture
def spaced_memory(api):
    created = api.post("/memories", {"content": "Could not breathe in the lift", "emotions": ["panic attack"],
                                     "categories": ["me_time"]})
    assert created.status_code == 201, created.content
    api.post("/memories", {"content": "Long lunch with the team", "emotions": ["calm"], "categories": ["work"]})
    return created.json()["id"]


def listed(api, path: str, params: dict) -> list[int]:
    response = api.get(path, params)
    assert response.status_code == 200, response.content
    return [item["id"] for item in response.json()["items"]]


def searched(api, *, query: str, kind: str, filters: dict) -> list[int]:
    response = api.post("/search", {"query": query, "kind": kind, "mode": "text", "filters": filters})
    assert response.status_code == 200, response.content
    return [hit["id"] for hit in response.json()["results"]]


LESSON_SPELLINGS = [
    ("tag", "tags", spelling) for spelling in ("error-handling", "errorhandling", "error handling", "Error_Handling")
] + [
    ("tag", "tags", spelling) for spelling in ("back-off", "backoff", "back_off")
] + [
    ("tech_stack", "tech_stacks", spelling) for spelling in ("nodejs", "node-js", "node.js", "node js")
] + [
    ("tech_stack", "tech_stacks", spelling) for spelling in ("ruby-on-rails", "rubyonrails", "ruby_on_rails")
]


@pytest.mark.parametrize("list_filter, search_filter, spelling", LESSON_SPELLINGS)
def test_a_lesson_filter_finds_a_spaced_or_underscored_term_in_any_spelling(api, spaced_lesson, list_filter,
                                                                            search_filter, spelling):
    assert listed(api, "/lessons", {list_filter: spelling}) == [spaced_lesson]
    assert searched(api, query="payment webhook", kind="lessons", filters={search_filter: [spelling]}) == [
        spaced_lesson]


MEMORY_SPELLINGS = [
    ("emotion", "emotions", spelling) for spelling in ("panic-attack", "panicattack", "panic attack")
] + [
    ("category", "categories", spelling) for spelling in ("metime", "me-time", "me_time", "me time")
]


@pytest.mark.parametrize("list_filter, search_filter, spelling", MEMORY_SPELLINGS)
def test_a_memory_filter_finds_a_spaced_or_underscored_term_in_any_spelling(api, spaced_memory, list_filter,
                                                                            search_filter, spelling):
    assert listed(api, "/memories", {list_filter: spelling}) == [spaced_memory]
    assert searched(api, query="lift", kind="memories", filters={search_filter: [spelling]}) == [spaced_memory]


def test_other_terms_and_teams_stay_out(api, team, other_team, spaced_lesson):
    lesson_create(team=other_team, title="Their webhook", tech_stacks=["deno js"])
    assert listed(api, "/lessons", {"tech_stack": "denojs"}) == []  # another team's spelling is not read
    assert listed(api, "/lessons", {"tag": "error"}) == []  # a word of the term is not the term
    assert listed(api, "/lessons", {"tech_stack": "node"}) == []


@pytest.mark.parametrize("query", ["nodejs", "node-js", "NodeJS"])
@pytest.mark.parametrize("mode", ["text", "hybrid"])
def test_a_one_word_query_finds_the_spaced_tech_stack_first_as_an_exact_term(team, query, mode):
    spaced = lesson_create(team=team, title="Stream the upload to storage",
                           description="Buffering whole files ran the server out of memory.", tech_stacks=["node js"])
    lesson_create(team=team, title="Stream logs to the collector", description="Logs were lost on restarts.",
                  tech_stacks=["python"], confidence=0.9)
    response = search(request=SearchRequest(team=team, query=query, mode=mode, explain=True))
    assert response.results[0].id == spaced.pk
    assert response.results[0].explanation["exact_term"] is True
    assert all(not hit.explanation["exact_term"] for hit in response.results[1:])


@pytest.mark.parametrize(("query", "mode"), [("vue3 upgrade", "text"), ("vue3 upgrade", "hybrid"),
                                             ("python 3 upgrade", "text"), ("python 3 upgrade", "hybrid")])
def test_a_version_written_apart_or_together_finds_the_other_spelling(team, query, mode,
                                                                     django_capture_on_commit_callbacks):
    # the parser reads "vue3" as one word and "Vue 3" as two: in text mode each query found the
    # other's lesson by "upgrade" alone, level with any other upgrade
    with django_capture_on_commit_callbacks(execute=True):  # embedded by the real model
        vue = lesson_create(team=team, title="Upgrading to Vue 3",
                            description="The options API still works; migrate filters to computed properties first.")
        python = lesson_create(team=team, title="The python3 upgrade broke our scripts",
                               description="print became a function and dict views stopped being lists.")
        lesson_create(team=team, title="Upgrade PostgreSQL one major version at a time",
                      description="pg_upgrade needs the old binaries installed beside the new ones.", confidence=0.9)
    response = search(request=SearchRequest(team=team, query=query, mode=mode, explain=True))
    expected = vue if query.startswith("vue") else python
    assert response.results[0].id == expected.pk
    [first, *others] = [hit.explanation["bm25"] for hit in response.results]
    assert first > max(others)


def test_a_lesson_edited_to_a_new_spaced_tag_is_found_by_its_hyphen_spelling(api, team):
    lesson = lesson_create(team=team, title="Retry with jitter", tags=["retries"])
    assert listed(api, "/lessons", {"tag": "rate-limiting"}) == []
    lesson_update(lesson=lesson, tags=["retries", "rate limiting"])
    assert listed(api, "/lessons", {"tag": "rate-limiting"}) == [lesson.pk]
    assert listed(api, "/lessons", {"tag": "ratelimiting"}) == [lesson.pk]


def test_a_spelling_left_behind_by_an_edit_lets_no_row_through(api, team):
    # the table keeps "error handling" after the edit (migration 0029): it only widens an equality test
    lesson = lesson_create(team=team, title="Log the failure", tags=["error handling"])
    lesson_update(lesson=lesson, tags=["logging"])
    assert listed(api, "/lessons", {"tag": "error-handling"}) == []
    assert listed(api, "/lessons", {"tag": "logging"}) == [lesson.pk]


def spellings_of(team) -> set[tuple[str, str, str]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT kind, term, spelling FROM lessons_term_spelling WHERE team_id = %s", [team.pk])
        return set(cursor.fetchall())


def vocabulary_spellings(team, *, kind_code: str, terms: list[str]) -> set[tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute(VOCABULARY_SPELLINGS_SQL, [kind_code, team.pk, terms])
        return set(cursor.fetchall())


# Values the parser keeps whole (the vocabulary's), splits (the table's), or that are their own term.
PARSED = {"next.js": "vocabulary", "react-native": "vocabulary", "python3.11": "vocabulary", "x.y_z": "vocabulary",
          "error handling": "table", "back_off": "table", "socket.io-client": "table", "asp.net-core": "table",
          "k8s-1.29": "table", "c++-builder": "table", "a--b": "table", "rust": "neither", "c#": "neither"}


def test_each_spelling_is_in_exactly_one_of_the_two_places(team):
    lesson_create(team=team, title="Terms of every shape", tags=list(PARSED))
    table = {spelling for kind, _, spelling in spellings_of(team) if kind == "l"}
    vocabulary = {spelling for _, spelling in vocabulary_spellings(
        team, kind_code="l", terms=sorted({canonical(value) for value in PARSED}))}
    found = {value: "table" if value in table else "vocabulary" if value in vocabulary else "neither"
             for value in PARSED}
    assert found == PARSED
    assert not table & vocabulary
    assert {term for kind, term, _ in spellings_of(team)} == {canonical(value) for value, place in PARSED.items()
                                                             if place == "table"}


def test_a_lesson_category_project_type_and_a_memory_version_are_noted(team):
    lesson_create(team=team, title="Plan the sprint", category="team process", project_types=["mobile app"])
    memory = memory_create(team=team, content="A quiet evening", categories=["alone time"])
    memory_update(memory=memory, content="A quiet evening at home", categories=["family_time"])
    assert spellings_of(team) == {("l", "teamprocess", "team process"), ("l", "mobileapp", "mobile app"),
                                  ("m", "alonetime", "alone time"), ("m", "familytime", "family_time")}


def test_the_migration_notes_the_spellings_of_rows_stored_before_it(api, team, other_team, spaced_lesson,
                                                                     spaced_memory):
    lesson_create(team=other_team, title="Their lesson", tags=["load testing", "next.js"])
    noted = spellings_of(team), spellings_of(other_team)
    assert ("l", "errorhandling", "error handling") in noted[0]
    with connection.cursor() as cursor:  # as before the migration: rows, and no spellings noted
        cursor.execute("DELETE FROM lessons_term_spelling WHERE team_id = ANY(%s)", [[team.pk, other_team.pk]])
    assert listed(api, "/lessons", {"tag": "error-handling"}) == []

    with connection.schema_editor(atomic=False) as editor:  # inside the test's transaction
        MIGRATION.note_stored_spellings(current_apps, editor)
        assert (spellings_of(team), spellings_of(other_team)) == noted
        MIGRATION.note_stored_spellings(current_apps, editor)  # again: nothing is noted twice
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM lessons_term_spelling WHERE team_id = %s", [team.pk])
        assert cursor.fetchone()[0] == len(noted[0])
    assert spellings_of(other_team) == {("l", "loadtesting", "load testing")}
    assert listed(api, "/lessons", {"tag": "error-handling"}) == [spaced_lesson]
    assert listed(api, "/memories", {"emotion": "panic-attack"}) == [spaced_memory]


def test_two_writers_noting_the_same_new_spelling_do_not_wait_for_each_other(team):
    # with a unique key the second waited for the first to commit, and two transactions noting two
    # spellings in opposite orders deadlocked
    rows = (f"(SELECT {team.pk}::bigint AS team_id, ARRAY['soak testing']::varchar[] AS tags,"
            " '{}'::varchar[] AS tech_stacks, '{}'::varchar[] AS project_types, 'x'::varchar AS category) AS n")
    with connection.cursor() as cursor:  # the test's transaction, left open
        cursor.execute(MIGRATION.note_spellings_sql("l", rows))
    failures = []

    def second_writer():
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '2s'")
                cursor.execute(MIGRATION.note_spellings_sql("l", rows))
                transaction.set_rollback(True)
        except Exception as error:  # noqa: BLE001 - reported to the test's thread
            failures.append(error)
        finally:
            connection.close()

    writer = threading.Thread(target=second_writer)
    writer.start()
    writer.join(10)
    assert not writer.is_alive() and failures == []


def test_a_deleted_teams_spellings_go_with_it(team, other_team):
    lesson_create(team=other_team, title="Their lesson", tags=["load testing"])
    lesson_create(team=team, title="Our lesson", tags=["load testing"])
    other_team.delete()
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT team_id FROM lessons_term_spelling WHERE team_id = ANY(%s)",
                       [[team.pk, other_team.pk]])
        assert [team_id for [team_id] in cursor.fetchall()] == [team.pk]


def test_the_migration_reads_the_vocabulary_as_its_index_does():
    # a value left out of the table must be one the vocabulary's lookup reads (migration 0023)
    assert MIGRATION.HELD_BY_VOCABULARY.startswith(SPELLING_INDEX_PREDICATE.replace("lexeme", "value") + " AND ")
