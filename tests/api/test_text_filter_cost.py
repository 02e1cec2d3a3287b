"""What a list's `text` filter costs, and how long a free text may be.

Every different word of `?text=` is one regular expression over each row's fields: "a" written
1,000 times ran for 44 s on a 2,000-lesson team (6.7 s on the demo team), and MCP's list_lessons
with 300 of them for 16.5 s. A repeat, in any case and with or without its accents, is now one
test, and a text of more than MAX_TEXT_FILTER_WORDS different words is refused naming `text`.
The SQL issued is counted rather than timed.

A free text's length was counted before the services normalise it (NFC): "e" and a combining
accent, 20,000 times, is 20,000 characters as stored and was refused as over 20,000."""

import json
import unicodedata

import anyio
import pydantic
import pytest
from asgiref.sync import sync_to_async
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from mcp import Client

from lessons.api import errors
from lessons.api.schemas import MAX_TEXT_FILTER_WORDS
from lessons.api.tools import TOOLS_BY_NAME
from lessons.mcp_server import build_server
from lessons.models import MAX_TEXT_CHARS, Lesson, Memory
from lessons.services.lessons import lesson_create
from lessons.services.memories import memory_create

REGEX_TEST = "~*"  # PostgreSQL's case-insensitive match: one per field a word is looked for in
TOO_LONG = f"String should have at most {MAX_TEXT_CHARS} characters"


def _pattern_tests(queries) -> list[int]:
    """How many regular expression matches each query that filters by words holds."""
    return [query["sql"].count(REGEX_TEST) for query in queries if REGEX_TEST in query["sql"]]


@pytest.mark.django_db
def test_a_word_written_1000_times_is_one_test_and_finds_what_the_word_finds(api, team):
    found = lesson_create(team=team, title="Keep a cache per tenant", description="A note").pk
    lesson_create(team=team, title="Pin your dependencies", description="Versions drift")
    text = " ".join(["a"] * 1000)  # 1,999 characters: within the filter's 2,000
    with CaptureQueriesContext(connection) as issued:
        response = api.get("/lessons", {"text": text})
    assert response.status_code == 200, response.content
    assert [lesson["id"] for lesson in response.json()["items"]] == [found]
    # one word, looked for in the title or the description: two matches, in the count and the page
    assert _pattern_tests(issued.captured_queries) == [2, 2]


@pytest.mark.django_db
def test_a_repeat_in_another_case_or_with_other_accents_is_the_same_word(api, team):
    cafe = memory_create(team=team, content="Café au lait with Søren", details="in Neukölln").pk
    memory_create(team=team, content="Tea with Sam")
    text = " ".join(["Café", "CAFE", "café,", "cafe", "CAFÉ", "Cafe\u0301"] * 60)  # 1,919 characters
    with CaptureQueriesContext(connection) as issued:
        response = api.get("/memories", {"text": text})
    assert response.status_code == 200, response.content
    assert [memory["id"] for memory in response.json()["items"]] == [cafe]
    assert _pattern_tests(issued.captured_queries) == [2, 2]  # content or details, one word
    # a letter only the database folds ("ø" is "o" to unaccent()) is one test too
    with CaptureQueriesContext(connection) as issued:
        response = api.get("/memories", {"text": "Søren soren SOREN"})
    assert [memory["id"] for memory in response.json()["items"]] == [cafe]
    assert _pattern_tests(issued.captured_queries) == [2, 2]


@pytest.mark.django_db
def test_different_words_are_each_still_looked_for(api, team):
    both = lesson_create(team=team, title="Row level security", description="per tenant").pk
    lesson_create(team=team, title="Row counts", description="per table")
    with CaptureQueriesContext(connection) as issued:
        response = api.get("/lessons", {"text": "row ROW security Row tenant"})
    assert [lesson["id"] for lesson in response.json()["items"]] == [both]
    assert _pattern_tests(issued.captured_queries) == [6, 6]  # three words, two fields each


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/lessons", "/memories"])
def test_more_different_words_than_the_cap_are_refused_naming_text(api, team, path):
    words = [f"word{number}" for number in range(MAX_TEXT_FILTER_WORDS + 1)]
    refused = api.get(path, {"text": " ".join(words)})
    assert refused.status_code == 422
    assert refused.json()["errors"] == [{
        "field": "text",
        "message": f"at most {MAX_TEXT_FILTER_WORDS} different words; got {MAX_TEXT_FILTER_WORDS + 1}",
    }]
    # the cap counts words as the filter compares them: repeats in any case or accents count once
    at_the_cap = words[:-2] + ["Café", "cafe", "CAFÉ"] + words[:-2]  # 31 words and café
    assert api.get(path, {"text": " ".join(at_the_cap)}).status_code == 200


@pytest.mark.django_db
def test_the_list_tools_take_the_same_filter(team):
    found = lesson_create(team=team, title="Keep a cache per tenant").pk
    memory = memory_create(team=team, content="Had a coffee with Sam").pk
    for tool, row in (("list_lessons", found), ("list_memories", memory)):
        with CaptureQueriesContext(connection) as issued:
            answer = TOOLS_BY_NAME[tool].call(team=team, arguments={"text": " ".join(["A"] * 300)})
        assert [result["id"] for result in answer["results"]] == [row], tool
        assert _pattern_tests(issued.captured_queries) == [2, 2], tool


@pytest.mark.django_db(transaction=True)
def test_the_mcp_server_refuses_too_many_words_naming_text(team):
    """Through the MCP server (its worker thread, its own connection), as an agent calls it."""
    words = " ".join(f"word{number}" for number in range(40))

    async def main():
        try:
            async with Client(build_server(team=team), mode="legacy") as client:
                return await client.call_tool("list_lessons", {"text": words})
        finally:
            await sync_to_async(connections.close_all, thread_sensitive=True)()

    result = anyio.run(main)
    assert result.is_error
    assert json.loads(result.content[0].text)["errors"] == [
        {"field": "text", "message": f"at most {MAX_TEXT_FILTER_WORDS} different words; got 40"}]


# --- free text is as long as it is stored -----------------------------------------------------

DECOMPOSED_E = "e\u0301"  # two code points, one character (é) once NFC-normalised
# NFC lengthens this one: U+0958 is never composed, and is stored as two code points
LENGTHENED_BY_NFC = "\u0958"


def test_the_characters_are_what_the_tests_say():
    assert len(unicodedata.normalize("NFC", DECOMPOSED_E)) == 1
    assert len(unicodedata.normalize("NFC", LENGTHENED_BY_NFC)) == 2


def _refusals(response) -> list[dict]:
    assert response.status_code == 422, response.content
    return response.json()["errors"]


@pytest.mark.django_db
def test_a_lesson_text_counts_its_characters_as_stored(api, team):
    stored = api.post("/lessons", {"title": DECOMPOSED_E * 300, "description": DECOMPOSED_E * MAX_TEXT_CHARS,
                                   "context": DECOMPOSED_E * MAX_TEXT_CHARS})
    assert stored.status_code == 201, stored.content[:300]
    lesson = Lesson.objects.get(pk=stored.json()["id"])
    assert lesson.description == "é" * MAX_TEXT_CHARS and lesson.title == "é" * 300
    patched = api.patch(f"/lessons/{lesson.pk}", {"recommendation": DECOMPOSED_E * MAX_TEXT_CHARS})
    assert patched.status_code == 200, patched.content[:300]

    over = api.post("/lessons", {"title": DECOMPOSED_E * 301, "description": DECOMPOSED_E * (MAX_TEXT_CHARS + 1)})
    assert _refusals(over) == [{"field": "title", "message": "String should have at most 300 characters"},
                               {"field": "description", "message": TOO_LONG}]
    # a text NFC makes longer is refused here too, as the services would store it, not by the model
    lengthened = api.patch(f"/lessons/{lesson.pk}", {"context": LENGTHENED_BY_NFC * (MAX_TEXT_CHARS // 2 + 1)})
    assert _refusals(lengthened) == [{"field": "context", "message": TOO_LONG}]


@pytest.mark.django_db
def test_a_memory_text_counts_its_characters_as_stored(api, team):
    stored = api.post("/memories", {"content": DECOMPOSED_E * MAX_TEXT_CHARS, "details": DECOMPOSED_E * 10})
    assert stored.status_code == 201, stored.content[:300]
    memory = Memory.objects.get(pk=stored.json()["id"])
    assert memory.content == "é" * MAX_TEXT_CHARS
    patched = api.patch(f"/memories/{memory.pk}", {"details": DECOMPOSED_E * MAX_TEXT_CHARS})
    assert patched.status_code == 200, patched.content[:300]

    over = api.patch(f"/memories/{memory.pk}", {"content": DECOMPOSED_E * (MAX_TEXT_CHARS + 1)})
    assert _refusals(over) == [{"field": "content", "message": TOO_LONG}]
    lengthened = api.post("/memories", {"content": "Met Sam", "details": LENGTHENED_BY_NFC * (MAX_TEXT_CHARS // 2 + 1)})
    assert _refusals(lengthened) == [{"field": "details", "message": TOO_LONG}]


@pytest.mark.django_db
def test_the_memory_tools_count_as_stored_too(team):
    stored = TOOLS_BY_NAME["store_memory"].call(team=team, arguments={"content": DECOMPOSED_E * MAX_TEXT_CHARS})
    assert Memory.objects.get(pk=stored["id"]).content == "é" * MAX_TEXT_CHARS
    with pytest.raises(pydantic.ValidationError) as refused:
        TOOLS_BY_NAME["store_memory"].call(team=team, arguments={"content": DECOMPOSED_E * (MAX_TEXT_CHARS + 1)})
    assert errors.pydantic_validation_errors(refused.value)["errors"] == [{"field": "content", "message": TOO_LONG}]


def test_the_schemas_still_say_the_limits():
    parameters = TOOLS_BY_NAME["store_lesson"].parameters()["properties"]
    assert parameters["title"]["maxLength"] == 300 and parameters["title"]["minLength"] == 1
    assert parameters["description"]["maxLength"] == MAX_TEXT_CHARS
    assert TOOLS_BY_NAME["update_memory"].parameters()["properties"]["content"]["maxLength"] == MAX_TEXT_CHARS
