"""The MCP server, driven by the official SDK's own client: in process (JSON-RPC over memory
streams) for the tools' behaviour, and as `python manage.py mcp` over stdio end to end.

The server runs the ORM in a worker thread, i.e. on its own database connection, so these tests
commit their data (`transaction=True`)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import anyio
import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.db import DataError, IntegrityError, ProgrammingError, connection, connections
from psycopg import errors as pg_errors
from mcp import Client, StdioServerParameters

from lessons.api.tools import AGENT_TOOLS
from lessons.mcp_server import build_server
from lessons.mcp_stdio import checked_lines, unreadable_line_error
from lessons.models import Lesson, Memory, SearchRecord
from lessons.services.api_keys import api_key_create, api_key_revoke
from lessons.services.lessons import lesson_create
from lessons.services.usage import search_record

pytestmark = pytest.mark.django_db(transaction=True)

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _run(session):
    """Run `session(client)` against an in-process server for the team; returns its result."""

    def runner(team):
        async def main():
            try:
                async with Client(build_server(team=team), mode="legacy") as client:
                    return await session(client)
            finally:
                # The server's worker thread holds its own connection; let the test database go.
                await sync_to_async(connections.close_all, thread_sensitive=True)()

        return anyio.run(main)

    return runner


def _payload(result):
    return json.loads(result.content[0].text)


def test_lists_the_same_tools_as_the_api(team):
    async def session(client):
        return await client.list_tools()

    listed = _run(session)(team)
    assert [tool.name for tool in listed.tools] == [tool.name for tool in AGENT_TOOLS]
    by_name = {tool.name: tool for tool in listed.tools}
    for tool in AGENT_TOOLS:
        assert by_name[tool.name].input_schema == tool.parameters()
        assert by_name[tool.name].description == tool.description


def test_every_tool_declares_what_it_answers_and_answers_it(team):
    """outputSchema: a client can check an answer and read its fields without the docs. The SDK's
    client checks every answer against it; so does this test, for one call of every tool."""
    import jsonschema

    lesson_create(team=team, title="Pin your dependencies", tags=["deps"])

    async def session(client):
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        search = await client.call_tool("search_lessons", {"query": "pin dependencies"})
        memory = await client.call_tool("store_memory", {"content": "Coffee with Zoë", "people": ["Zoë"],
                                                         "emotions": ["happy"], "categories": ["event"]})
        memory_id, search_id = memory.structured_content["id"], search.structured_content["search_id"]
        calls = {
            "search_lessons": search,
            "store_memory": memory,
            "report_usage": await client.call_tool("report_usage", {"search_id": search_id}),
            "semantic_search": await client.call_tool("semantic_search", {"query": "coffee"}),
            "relevant_lessons": await client.call_tool("relevant_lessons", {}),
            "patterns_for_feature": await client.call_tool("patterns_for_feature", {"feature": "Dependencies"}),
            "lessons_for_session": await client.call_tool("lessons_for_session", {"recent_activity": "pip install"}),
            "store_lesson": await client.call_tool("store_lesson", {"title": "Cache the wheels"}),
            "propose_lesson": await client.call_tool("propose_lesson", {"title": "Vendor the wheels"}),
            "get_memory": await client.call_tool("get_memory", {"memory_id": memory_id}),
            "update_memory": await client.call_tool("update_memory", {"memory_id": memory_id, "importance": 8}),
            "get_all_friends": await client.call_tool("get_all_friends", {}),
            "get_panic_attacks": await client.call_tool("get_panic_attacks", {}),
            "get_interests": await client.call_tool("get_interests", {}),
            "get_events": await client.call_tool("get_events", {}),
            "list_memories": await client.call_tool("list_memories", {"order": "occurred_at"}),
            "list_lessons": await client.call_tool("list_lessons", {"tag": ["deps"]}),
            "search_by_person": await client.call_tool("search_by_person", {"name": "Zoe"}),
            "search_by_emotion": await client.call_tool("search_by_emotion", {"emotion": "happy"}),
            "search_across_versions": await client.call_tool("search_across_versions", {"query": "coffee"}),
            "delete_memory": await client.call_tool("delete_memory", {"memory_id": memory_id}),
        }
        return listed, calls

    listed, calls = _run(session)(team)
    assert sorted(calls) == sorted(tool.name for tool in AGENT_TOOLS)  # one call of every tool
    for name, result in calls.items():
        schema = listed[name].output_schema
        assert schema["type"] == "object" and schema["properties"], name
        assert not result.is_error, (name, result.content[0].text)
        jsonschema.validate(result.structured_content, schema)
    person = calls["search_by_person"].structured_content
    assert person["total"] == 1 and "total" in listed["search_by_person"].output_schema["required"]
    assert "$ref" not in json.dumps([tool.output_schema for tool in listed.values()])  # flat, like the inputs


def test_store_tools_write_for_the_servers_team_only(team, other_team):
    async def session(client):
        lesson = await client.call_tool("store_lesson", {"title": "Pin your dependencies", "tags": ["Deps"]})
        proposal = await client.call_tool("propose_lesson", {"title": "Maybe vendor the wheels"})
        memory = await client.call_tool("store_memory", {"content": "Met Sam at the gym", "people": ["Sam"]})
        return lesson, proposal, memory

    lesson, proposal, memory = _run(session)(team)
    assert not lesson.is_error and not proposal.is_error and not memory.is_error
    stored = Lesson.objects.get(pk=_payload(lesson)["id"])
    assert (stored.team, stored.tags, stored.status) == (team, ["deps"], "confirmed")
    assert _payload(proposal)["status"] == "proposed"
    assert lesson.structured_content["title"] == "Pin your dependencies"
    assert Memory.objects.get(pk=_payload(memory)["id"]).team == team
    assert not Lesson.objects.filter(team=other_team).exists()


def test_bad_arguments_are_a_tool_error_naming_the_field(team):
    async def session(client):
        return (
            await client.call_tool("search_lessons", {"query": "rls", "limit": -1}),
            await client.call_tool("search_lessons", {"query": "x" * 100_000}),
            await client.call_tool("store_lesson", {"title": "x", "confidence": 7}),
            await client.call_tool("store_lesson", {"title": "x", "category": "Not OK!"}),
            await client.call_tool("no_such_tool", {}),
        )

    negative, too_long, confidence, category, unknown = _run(session)(team)
    for result in (negative, too_long, confidence, category, unknown):
        assert result.is_error
    assert _payload(negative)["errors"][0]["field"] == "limit"
    assert "at most 2000" in _payload(too_long)["errors"][0]["message"]
    assert _payload(confidence)["errors"][0]["field"] == "confidence"
    assert _payload(category)["errors"][0]["field"] == "category"
    assert "search_lessons" in _payload(unknown)["detail"]
    assert _payload(unknown)["errors"][0]["field"] == "name"  # named like every other refusal
    assert not Lesson.objects.exists()


def test_an_argument_a_tool_does_not_take_is_refused_by_name(team):
    """A misspelt argument must not run the tool on its defaults, nor a caller override what a
    tool fixes (search_lessons searches lessons)."""

    async def session(client):
        return (
            await client.call_tool("get_events", {"day": 1}),
            await client.call_tool("get_all_friends", {"limt": 1}),
            await client.call_tool("search_lessons", {"query": "rls", "kind": "memories"}),
            await client.call_tool("store_memory", {"content": "x", "mood": "calm"}),
        )

    events, friends, kind, memory = _run(session)(team)
    assert [_payload(result)["errors"][0]["field"] for result in (events, friends, kind, memory)] == [
        "day",
        "limt",
        "kind",
        "mood",
    ]
    assert all(result.is_error for result in (events, friends, kind, memory))
    assert _payload(events)["errors"][0]["message"] == "not an argument of get_events; it takes days, limit"
    assert not Memory.objects.exists()


def test_a_blank_name_or_emotion_is_refused_not_read_as_everyone(team):
    Memory.objects.create(team=team, content="Lunch with Ada", people=["Ada"], emotions=["happy"])

    async def session(client):
        return (
            await client.call_tool("search_by_person", {"name": "   "}),
            await client.call_tool("search_by_emotion", {"emotion": " "}),
            await client.call_tool("search_by_person", {"name": "  Ada "}),
        )

    blank_name, blank_emotion, ada = _run(session)(team)
    assert blank_name.is_error and _payload(blank_name)["errors"][0]["field"] == "name"
    assert blank_emotion.is_error and _payload(blank_emotion)["errors"][0]["field"] == "emotion"
    assert [hit["fields"]["content"] for hit in _payload(ada)["results"]] == ["Lunch with Ada"]
    assert _payload(ada)["total"] == 1
    assert Memory.objects.get().returned_count == 1  # only the real search counted a return


def test_search_lessons_reads_the_teams_lessons(team, other_team):
    ours = lesson_create(team=team, title="Enable row level security on multi-tenant tables")
    theirs = lesson_create(team=other_team, title="Enable row level security on multi-tenant tables")

    async def session(client):
        return await client.call_tool("search_lessons", {"query": "tenant data isolation in postgres"})

    result = _run(session)(team)
    assert not result.is_error, result.content[0].text
    ids = [hit["id"] for hit in _payload(result)["results"]]
    assert ours.pk in ids and theirs.pk not in ids


def _test_database_url() -> str:
    """The test database, as a DATABASE_URL a subprocess can use (the embedded server listens on
    a Unix socket, which goes in the query string)."""
    settings = connection.settings_dict
    host = settings["HOST"] or settings.get("OPTIONS", {}).get("host", "")
    port = settings["PORT"] or settings.get("OPTIONS", {}).get("port", "")
    credentials = quote(settings["USER"]) + (f":{quote(settings['PASSWORD'])}" if settings.get("PASSWORD") else "")
    return f"postgres://{credentials}@/{settings['NAME']}?host={quote(str(host))}&port={port}"


def test_manage_py_mcp_over_stdio_with_an_api_key(team, other_team):
    ours = lesson_create(team=team, title="Index the foreign keys you join on")
    lesson_create(team=other_team, title="Index the foreign keys you join on")
    key, raw_key = api_key_create(team=team, name="coding assistant")
    environment = {
        **os.environ,
        "DATABASE_URL": _test_database_url(),
        "DJANGO_DEBUG": "1",
        "MEMORY_STORE_API_KEY": raw_key,
    }
    parameters = StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcp"], env=environment, cwd=str(PROJECT_ROOT)
    )

    async def main():
        async with Client(parameters, read_timeout_seconds=120) as client:
            tools = await client.list_tools()
            stored = await client.call_tool("store_memory", {"content": "Started the MCP session", "importance": 3})
            found = await client.call_tool("search_lessons", {"query": "slow joins", "mode": "text", "limit": 5})
            # Revoked while the session runs: the next call is refused, as the HTTP API's next request is.
            await sync_to_async(api_key_revoke)(api_key=key)
            after = await client.call_tool("store_memory", {"content": "Written with a revoked key"})
            return tools, stored, found, after

    tools, stored, found, after = anyio.run(main)
    assert after.is_error
    assert [error["field"] for error in _payload(after)["errors"]] == ["api_key"]
    assert not Memory.objects.filter(content="Written with a revoked key").exists()
    assert "search_lessons" in {tool.name for tool in tools.tools}
    assert not stored.is_error
    assert Memory.objects.get(pk=_payload(stored)["id"]).team == team
    assert not found.is_error, found.content[0].text
    assert [hit["id"] for hit in _payload(found)["results"]] == [ours.pk]


def test_a_client_that_leaves_while_the_model_loads_ends_the_server_cleanly(team):
    """A client that initialises and disconnects at once (listing tools, probing) used to leave the
    process tearing down under the model's loading thread: SIGABRT, "terminate called..."."""
    environment = {**os.environ, "DATABASE_URL": _test_database_url(), "DJANGO_DEBUG": "1", "EMBEDDING_WARM_UP": "1"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"},
        },
    }
    for _ in range(2):  # the load outlives the session nearly every time; twice makes a miss unlikely
        server = subprocess.Popen(
            [sys.executable, "manage.py", "mcp", "--team", team.slug],
            cwd=PROJECT_ROOT, env=environment, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        server.stdin.write(json.dumps(initialize) + "\n")
        server.stdin.flush()
        assert json.loads(server.stdout.readline())["id"] == 1
        server.stdin.close()
        status = server.wait(timeout=120)
        errors = server.stderr.read()
        server.stdout.close()
        server.stderr.close()
        assert status == 0, errors
        assert "terminate called" not in errors and "Traceback" not in errors


def test_report_usage_closes_the_loop_for_the_servers_team_only(team, other_team):
    ours = lesson_create(team=team, title="Enable row level security on multi-tenant tables")
    theirs = lesson_create(team=other_team, title="Enable row level security on multi-tenant tables")
    their_search = str(search_record(team=other_team, kind="lessons", operation="search", query="rls", mode="text",
                                     result_ids=[theirs.pk], source="api"))

    async def session(client):
        found = _payload(await client.call_tool("search_lessons", {"query": "row level security", "mode": "text"}))
        used = await client.call_tool("report_usage", {"search_id": found["search_id"], "used": [ours.pk]})
        again = await client.call_tool("report_usage", {"search_id": found["search_id"], "used": [ours.pk]})
        stranger = await client.call_tool("report_usage", {"search_id": found["search_id"], "used": [theirs.pk]})
        foreign = await client.call_tool("report_usage", {"search_id": their_search, "used": [theirs.pk]})
        return found, used, again, stranger, foreign

    found, used, again, stranger, foreign = _run(session)(team)
    assert SearchRecord.objects.get(pk=found["search_id"]).source == "mcp"
    assert not used.is_error and _payload(used)["recorded"]["used"] == [ours.pk]
    assert _payload(again)["already_recorded"] == [ours.pk]
    assert stranger.is_error and _payload(stranger)["errors"][0]["field"] == "used"
    assert foreign.is_error and "does not exist" in _payload(foreign)["detail"]
    assert Lesson.objects.get(pk=ours.pk).used_count == 1
    assert Lesson.objects.get(pk=theirs.pk).used_count == 0


def test_listing_tools_answer_people_and_every_panic_attack_without_labels(team):
    from lessons.services.memories import memory_create

    sam = memory_create(team=team, content="Sam is my climbing partner", categories=["person"], people=["Sam"])
    panic = memory_create(team=team, content="Panic attack on the tram", emotions=["panic"])
    memory_create(team=team, content="Calm evening with Sam", emotions=["calm"], people=["Sam"], importance=3)

    async def session(client):
        return await client.call_tool("get_all_friends", {}), await client.call_tool("get_panic_attacks", {})

    friends, panics = _run(session)(team)
    assert not friends.is_error and not panics.is_error
    people = _payload(friends)
    assert people["total"] == 1 and people["results"][0]["name"] == "Sam"
    assert people["results"][0]["memory_count"] == 2 and people["results"][0]["memory_ids"][0] == sam.pk
    listed = _payload(panics)
    assert listed["total"] == 1 and [m["id"] for m in listed["results"]] == [panic.pk]
    assert "relevance" not in listed["results"][0] and "score" not in listed["results"][0]


def test_list_lessons_answers_the_teams_lessons_filtered_and_paged_as_get_lessons_lists_them(team, other_team):
    proposed = lesson_create(team=team, title="Vendor the wheels", status="proposed", tags=["deps"]).pk
    pinned = lesson_create(team=team, title="Pin your dependencies", tags=["deps"], tech_stacks=["next.js"]).pk
    cached = lesson_create(team=team, title="Cache the build", tags=["ci"]).pk
    lesson_create(team=other_team, title="Another team's dependencies", tags=["deps"])

    async def session(client):
        def listed(**arguments):
            return client.call_tool("list_lessons", arguments)

        return [await listed(), await listed(tag=["deps"]), await listed(status=["proposed"]),
                await listed(tech_stack=["nextjs"]), await listed(limit=1, offset=1), await listed(text="dependencies"),
                await listed(status=["maybe"]), await listed(order="title")]

    everything, deps, waiting, nextjs, second, words, bad_status, no_order = _run(session)(team)
    assert _payload(everything)["total"] == 3
    assert [row["id"] for row in _payload(everything)["results"]] == [cached, pinned, proposed]  # newest first
    assert "relevance" not in _payload(everything)["results"][0] and "score" not in _payload(everything)["results"][0]
    assert [row["id"] for row in _payload(deps)["results"]] == [pinned, proposed]
    assert [row["id"] for row in _payload(waiting)["results"]] == [proposed]
    assert [row["id"] for row in _payload(nextjs)["results"]] == [pinned]  # in the spelling the team stores
    assert _payload(second)["total"] == 3 and [row["id"] for row in _payload(second)["results"]] == [pinned]
    assert [row["id"] for row in _payload(words)["results"]] == [pinned]
    for result, field in [(bad_status, "status.0"), (no_order, "order")]:
        assert result.is_error, field
        assert _payload(result)["errors"][0]["field"] == field, _payload(result)


def test_list_memories_answers_a_timeline_filtered_and_paged_as_get_memories_lists_it(team, other_team):
    # An agent asked "what happened this spring, in order" could only search (ranked, labelled) or
    # list the last days' events: the list the API had was not a tool.
    from datetime import UTC, datetime

    from lessons.services.memories import memory_create

    def stored(content, month, **fields):
        return memory_create(team=team, content=content, occurred_at=datetime(2024, month, 10, tzinfo=UTC),
                             **fields).pk

    may = stored("First chair finished", 5, people=["Zoë"], importance=8)
    march = stored("Moved to Leipzig", 3, people=["Zoë", "Sam"])
    january = stored("Started the carpentry course", 1)
    april = stored("Sam visited for Easter", 4, people=["Sam"], categories=["event"])
    memory_create(team=other_team, content="Another team's spring", occurred_at=datetime(2024, 4, 1, tzinfo=UTC))

    async def session(client):
        def listed(**arguments):
            return client.call_tool("list_memories", arguments)

        return [
            await listed(order="occurred_at"),
            await listed(order="occurred_at", since="2024-03-01T00:00:00Z", until="2024-06-01T00:00:00Z",
                         limit=2, offset=1),
            await listed(person=["zoe"], order="-occurred_at"),
            await listed(category=["event"], min_importance=5),
            await listed(order="happened"),
            await listed(since="2024-05-01T00:00:00Z", until="2024-04-01T00:00:00Z"),
            await listed(limit=0),
        ]

    timeline, spring_page, zoe, events, bad_order, backwards, no_rows = _run(session)(team)
    assert _payload(timeline)["total"] == 4
    assert [m["id"] for m in _payload(timeline)["results"]] == [january, march, april, may]
    assert "relevance" not in _payload(timeline)["results"][0] and "score" not in _payload(timeline)["results"][0]
    assert _payload(spring_page)["total"] == 3  # March, April, May; the page is the second and third
    assert [m["id"] for m in _payload(spring_page)["results"]] == [april, may]
    assert [m["id"] for m in _payload(zoe)["results"]] == [may, march]  # "zoe" is Zoë, the latest first
    assert [m["id"] for m in _payload(events)["results"]] == [april]
    for result, field in [(bad_order, "order"), (backwards, "until"), (no_rows, "limit")]:
        assert result.is_error, field
        assert _payload(result)["errors"][0]["field"] == field, _payload(result)


def _not_migrated() -> ProgrammingError:
    error = ProgrammingError('column "imported_digest" does not exist')
    error.__cause__ = pg_errors.UndefinedColumn('column "imported_digest" does not exist')
    return error


@pytest.mark.parametrize("error, words", [
    # new code on an old schema: the tools said "the database is unavailable", as for an outage
    (_not_migrated(), "the database is not migrated to this version of the service"),
    (ProgrammingError("syntax error at or near"), "internal error (ProgrammingError)"),
])
def test_a_schema_behind_the_code_says_to_migrate(team, monkeypatch, error, words):
    def refused(**fields):
        raise error

    monkeypatch.setattr("lessons.api.operations.memory_services.memory_create", refused)

    async def session(client):
        return await client.call_tool("store_memory", {"content": "Met Ana"})

    result = _run(session)(team)
    assert result.is_error and _payload(result)["detail"].startswith(words)
    assert "imported_digest" not in _payload(result)["detail"]


def _deadlock():
    from django.db import OperationalError
    from psycopg import errors as pg_errors

    error = OperationalError("deadlock detected")
    error.__cause__ = pg_errors.DeadlockDetected("deadlock detected")
    return error


@pytest.mark.parametrize("error, words", [
    (DataError("value too long for type character varying(64)"), "body: a value the database cannot store"),
    (IntegrityError("duplicate key value violates unique constraint"), "conflicts with a change another request"),
    # a deadlock: nothing was kept, and the same call can succeed (the API's 503 with Retry-After)
    (_deadlock(), "the database ended this request to settle a conflict with a concurrent one"),
])
def test_a_value_the_database_refuses_is_the_callers_error_not_an_outage(team, monkeypatch, error, words):
    """The API answers these 422 and 409; the tools said "the database is unavailable", which tells
    an agent to retry or give up. The service is made to fail here: the schemas refuse every
    value they know the database refuses, so none is left to send."""
    def refused(**fields):
        raise error

    monkeypatch.setattr("lessons.api.operations.memory_services.memory_create", refused)

    async def session(client):
        return await client.call_tool("store_memory", {"content": "Met Ana"})

    result = _run(session)(team)
    assert result.is_error
    assert _payload(result)["detail"].startswith(words)
    assert "unavailable" not in _payload(result)["detail"]


def test_timestamps_are_written_as_the_api_writes_them(team):
    """Milliseconds and Z on both surfaces: MCP used to write microseconds, the API milliseconds."""
    from tests.api.conftest import JsonClient

    async def session(client):
        return await client.call_tool("store_lesson", {"title": "Pin the base image digest"})

    stored = _payload(_run(session)(team))
    assert stored["created_at"].endswith("Z") and len(stored["created_at"]) == len("2026-11-24T14:33:46.433Z")
    _, raw_key = api_key_create(team=team, name="agent")
    read = JsonClient(raw_key).get(f"/lessons/{stored['id']}").json()
    assert (stored["created_at"], stored["updated_at"]) == (read["created_at"], read["updated_at"])


def _start_server(team, **environment):
    return subprocess.Popen(
        [sys.executable, "manage.py", "mcp", "--team", team.slug],
        cwd=PROJECT_ROOT, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "DATABASE_URL": _test_database_url(), "DJANGO_DEBUG": "1", "EMBEDDING_WARM_UP": "0",
             **environment},
        # a test runner may ignore SIGINT; the server is started as from a terminal
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _send(server, message) -> None:
    server.stdin.write((message if isinstance(message, str) else json.dumps(message)) + "\n")
    server.stdin.flush()


def _stop(server) -> None:
    """End the session as a client does (its stdin closed) and wait for the server to exit."""
    server.stdin.close()
    server.wait(timeout=60)
    server.stdout.close()
    server.stderr.close()


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}}


def test_lines_the_sdk_cannot_read_are_answered_not_dropped(team):
    """A line that is not JSON, or a request holding a lone surrogate (JSON allows "\\ud800", and
    Node-based clients write it), got no answer at all: the client waited for its own timeout."""
    server = _start_server(team)
    try:
        _send(server, INITIALIZE)
        assert json.loads(server.stdout.readline())["id"] == 1
        _send(server, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(server, "this is not json")
        _send(server, '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "store_lesson",'
                      ' "arguments": {"title": "lone \\ud800 surrogate"}}}')
        _send(server, {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                       "params": {"name": "store_lesson", "arguments": ["a title"]}})
        _send(server, {"jsonrpc": "2.0", "id": 8, "method": "ping"})
        answers = [json.loads(server.stdout.readline()) for _ in range(4)]
    finally:
        _stop(server)
    assert answers[0]["id"] is None and answers[0]["error"]["code"] == -32700
    assert answers[1]["id"] == 7 and answers[1]["error"]["code"] == -32602
    assert answers[1]["error"]["message"].startswith("params.arguments.title: not valid Unicode text")
    assert answers[2]["id"] == 9 and answers[2]["error"]["code"] == -32602
    assert answers[2]["error"]["message"].startswith("params.arguments: expected an object")
    assert answers[3] == {"jsonrpc": "2.0", "id": 8, "result": {}}  # the session goes on
    assert not Lesson.objects.exists()


@pytest.mark.parametrize("params, message", [
    (None, "params: expected an object with the tool's name and its arguments"),
    ({"arguments": {}}, "params.name: expected the tool's name (a string), got nothing"),
    ({"name": 5}, "params.name: expected the tool's name (a string), got a number"),
    ({"name": "search_lessons", "arguments": "retries"}, "params.arguments: expected an object of the tool's "
                                                         "arguments, got a string"),
    # the SDK's bare "Invalid request parameters" again
    ({"name": "search_lessons", "arguments": {"query": "x"}, "_meta": 5},
     "params._meta: expected an object (MCP's request metadata), got a number"),
])
def test_a_tool_call_without_a_name_or_with_arguments_not_an_object_names_the_fault(params, message):
    request = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", **({} if params is None else {"params": params})}
    error = unreadable_line_error(json.dumps(request))
    assert (error.id, error.error.code, error.error.message) == (3, -32602, f"{message}; nothing was done")
    for readable in ({"name": "search_lessons"}, {"name": "search_lessons", "arguments": None}):
        assert unreadable_line_error(json.dumps({**request, "params": readable})) is None


def test_a_number_too_long_to_read_is_said_plainly():
    """Python's own words came through: "Exceeds the limit (4300 digits) ... use
    sys.set_int_max_str_digits() to increase the limit"."""
    line = '{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "get_lesson", ' \
           '"arguments": {"lesson_id": ' + "9" * 5000 + '}}}'
    error = unreadable_line_error(line)
    assert (error.error.code, error.error.message) == (
        -32700, "not a JSON line this server reads: a number of over 4,300 digits")


def test_a_request_naming_a_key_twice_is_refused_with_its_id():
    """The SDK read it, keeping the last value: a memory was stored with whichever content came second."""
    line = ('{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "store_memory", '
            '"arguments": {"content": "a", "importance": 9, "content": "b"}}}')
    error = unreadable_line_error(line)
    assert (error.id, error.error.code) == (4, -32600)
    assert error.error.message == 'the key "content" appears twice in one object; send each key once; nothing was done'
    assert unreadable_line_error('{"jsonrpc": "2.0", "id": 4, "id": 5, "method": "ping"}').id is None  # which one?
    assert unreadable_line_error('{"jsonrpc": "2.0", "id": 4, "method": "ping"}') is None


@pytest.mark.parametrize("given, shown", [
    ({"a": 1}, "an object"), ([1], "an array"), (1.5, "1.5"), (2.0, "2.0"), (True, "true"), (None, "null"),
])
def test_a_request_whose_id_is_not_a_string_or_an_integer_is_refused(given, shown):
    """The SDK read such a request as a notification: an object or array id ended the server (the
    answer owed to every earlier request lost), and 1.5 or true was never answered."""
    for method in ("ping", "notifications/initialized"):
        error = unreadable_line_error(json.dumps({"jsonrpc": "2.0", "id": given, "method": method}))
        assert (error.id, error.error.code) == (None, -32600)
        assert error.error.message == f"id: a request's id is a string or an integer, not {shown}; nothing was done"
    for fine in (7, "seven", -1, 0):
        assert unreadable_line_error(json.dumps({"jsonrpc": "2.0", "id": fine, "method": "ping"})) is None
    assert unreadable_line_error(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})) is None


def test_lines_are_split_at_any_chunk_boundary_and_a_line_past_the_limit_is_answered_not_held():
    notes = [json.dumps({"jsonrpc": "2.0", "method": f"notifications/{name}"}) for name in "abc"]
    lines = [notes[0].encode(), b"x" * 250, notes[1].encode(), b"y" * 101, notes[2].encode(), b"z" * 500]

    async def read_all(chunk_size):
        answered, read = [], []
        reader, writer = os.pipe()
        data = b"\n".join(lines)  # the last line has no newline: it ends with the input

        async def answer(error):
            answered.append(error.error.message)

        async def feed():
            for start in range(0, len(data), chunk_size):
                os.write(writer, data[start:start + chunk_size])
                await anyio.sleep(0)
            os.close(writer)

        async with anyio.create_task_group() as group:
            group.start_soon(feed)
            async for line in checked_lines(reader, answer, max_line_bytes=100):
                read.append(line)
        os.close(reader)
        return read, answered

    for chunk_size in (1, 7, 64, 100, 101, 4096):
        read, answered = anyio.run(read_all, chunk_size)
        assert read == notes, chunk_size
        assert len(answered) == 3 and all(message.startswith("a line longer than 100 bytes") for message in answered)


def test_a_session_survives_bad_ids_reused_ids_early_requests_and_a_huge_line(team):
    """Piped in and ended: every request is answered, in well under the minute the server waits
    for answers owed, and each fault is answered on its own without ending the session."""
    Lesson.objects.create(team=team, title="Vacuum the tables nightly")
    lines = [
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},  # before initialize
        INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"x": "a" * 3_000_000}}),
        # one id used twice (the client's mistake): both requests are still answered
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "search_lessons",
                                                                        "arguments": {"query": "vacuum"}}},
        {"jsonrpc": "2.0", "id": 5, "method": "ping"},
        {"jsonrpc": "2.0", "id": 6, "method": "ping"},
    ]
    server = _start_server(team)
    started = time.monotonic()
    try:
        output, errors = server.communicate(
            "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines), timeout=120)
    finally:
        server.kill()
    assert time.monotonic() - started < 50 and server.returncode == 0, errors
    assert "Traceback" not in errors
    answers = [json.loads(line) for line in output.splitlines()]
    early = answers[0]
    assert early["id"] == 2 and early["error"]["message"].startswith("tools/list: the session is not initialized")
    refused = [answer["error"]["message"] for answer in answers if answer["id"] is None]
    assert [message.split(";")[0] for message in refused] == [
        "id: a request's id is a string or an integer, not an object",
        "id: a request's id is a string or an integer, not 1.5",
        "a line longer than 2,621,440 bytes: this server reads lines of up to 2,621,440 bytes, as the HTTP API reads "
        "bodies",
    ]
    by_id = {}
    for answer in answers:
        by_id.setdefault(answer["id"], []).append(answer)
    assert len(by_id[5]) == 2 and any(answer.get("result") == {} for answer in by_id[5])
    [search] = [answer for answer in by_id[5] if answer.get("result") != {}]
    assert not search["result"]["isError"] and search["result"]["structuredContent"]["results"]
    assert by_id[6] == [{"jsonrpc": "2.0", "id": 6, "result": {}}] and 1 in by_id and 3 not in by_id


def test_a_line_nested_too_deeply_is_answered_and_the_session_goes_on(team):
    """~1,200 nested arrays (2.4 kB) ran the JSON decoder out of stack: a RecursionError ended the
    server, and every later request went unanswered."""
    deep = lambda depth: json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call",  # noqa: E731
                                     "params": {"name": "store_memory", "arguments": {"content": None}}}
                                    ).replace("null", "[" * depth + "]" * depth)
    too_deep = unreadable_line_error(deep(1_200))
    assert (too_deep.id, too_deep.error.code) == (None, -32700) and "nested too deeply" in too_deep.error.message
    for depth in (300, 900, 990):  # near the decoder's limit (the caller's stack counts): an answer, never a raise
        assert unreadable_line_error(deep(depth)).error.code in (-32700, -32600, -32602)
    server = _start_server(team)
    try:
        _send(server, INITIALIZE)
        assert json.loads(server.stdout.readline())["id"] == 1
        _send(server, deep(1_200))
        server.stdin.flush()
        server.stdin.buffer.write(b'{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": '
                                  b'"store_memory", "arguments": {"content": "caf\xe9"}}}\n')
        server.stdin.buffer.flush()
        _send(server, {"jsonrpc": "2.0", "id": 8, "method": "ping"})
        answers = [json.loads(server.stdout.readline()) for _ in range(3)]
    finally:
        _stop(server)
    assert answers[0]["error"]["code"] == -32700 and "nested too deeply" in answers[0]["error"]["message"]
    # a byte that is not UTF-8 is refused, as the imports refuse it; it was stored as "caf\ufffd"
    assert answers[1]["error"]["code"] == -32700 and answers[1]["error"]["message"].startswith("not UTF-8 text")
    assert answers[2] == {"jsonrpc": "2.0", "id": 8, "result": {}}
    assert server.returncode == 0 and not Memory.objects.filter(team=team).exists()


@pytest.mark.parametrize("closed, said", [(0, "standard input is closed"), (1, "standard output is closed")])
def test_a_closed_standard_input_or_output_is_said_in_one_line(team, closed, said):
    """`manage.py mcp <&-` waited forever on whatever file took descriptor 0 next; `>&-` ended in a
    traceback."""
    finished = subprocess.run(
        [sys.executable, "manage.py", "mcp", "--team", team.slug], cwd=PROJECT_ROOT, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120, preexec_fn=lambda: os.close(closed),
        env={**os.environ, "DATABASE_URL": _test_database_url(), "DJANGO_DEBUG": "1", "EMBEDDING_WARM_UP": "0"},
    )
    assert finished.returncode == 1 and "Traceback" not in finished.stderr, finished.stderr
    assert finished.stderr.startswith(f"CommandError: {said}") and finished.stderr.count("\n") == 1


def test_stdin_from_dev_null_ends_the_server_quietly(team):
    """epoll refuses /dev/null (EPERM): `manage.py mcp < /dev/null` ended in a traceback."""
    with open(os.devnull) as nothing:
        finished = subprocess.run(
            [sys.executable, "manage.py", "mcp", "--team", team.slug], cwd=PROJECT_ROOT, stdin=nothing,
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "DATABASE_URL": _test_database_url(), "DJANGO_DEBUG": "1", "EMBEDDING_WARM_UP": "0"},
        )
    assert finished.returncode == 0 and "Traceback" not in finished.stderr, finished.stderr


def test_requests_piped_in_are_all_answered_before_the_server_stops(team):
    """`printf '...' | manage.py mcp`: the SDK ended the session as soon as stdin ended and
    cancelled the calls still running, so the last requests (a tools/list) went unanswered."""
    Lesson.objects.create(team=team, title="Retry with exponential backoff")
    server = _start_server(team)
    requests = [
        INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "search_lessons",
                                                                        "arguments": {"query": "retries"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "get_all_friends", "arguments": {}}},
        # a request the client cancelled gets no answer, and is not waited for
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}},
    ]
    try:
        output, _ = server.communicate("".join(json.dumps(request) + "\n" for request in requests), timeout=120)
    finally:
        server.kill()
    answers = {answer["id"]: answer for answer in map(json.loads, output.splitlines())}
    assert sorted(answers) == [1, 2, 3, 4] and server.returncode == 0
    assert len(answers[2]["result"]["tools"]) == len(AGENT_TOOLS)
    assert not answers[3]["result"]["isError"] and not answers[4]["result"]["isError"]


def test_ctrl_c_ends_the_server_while_its_client_is_still_connected(team):
    """A thread blocked reading stdin kept Ctrl-C from ending the server until the next line."""
    server = _start_server(team)
    try:
        _send(server, INITIALIZE)
        assert json.loads(server.stdout.readline())["id"] == 1
        server.send_signal(signal.SIGINT)
        status = server.wait(timeout=30)  # it took another line of input, however long that was
        errors = server.stderr.read()
    finally:
        server.kill()
        for stream in (server.stdin, server.stdout, server.stderr):
            stream.close()
    assert status == 130 and "interrupted (Ctrl-C)" in errors


def test_a_call_waiting_on_a_lock_does_not_hold_up_the_sessions_other_calls(team):
    finished = []
    locked = anyio.Event()

    def hold_the_lessons_table():
        with psycopg.connect(_test_database_url()) as blocker, blocker.transaction():
            blocker.execute("LOCK TABLE lessons_lesson IN ACCESS EXCLUSIVE MODE")
            anyio.from_thread.run_sync(locked.set)
            time.sleep(3)
            finished.append("lock released")

    async def session(client):
        async def call(name, arguments):
            result = await client.call_tool(name, arguments)
            finished.append(name)
            return result

        async with anyio.create_task_group() as group:
            group.start_soon(anyio.to_thread.run_sync, hold_the_lessons_table)
            await locked.wait()
            group.start_soon(call, "store_lesson", {"title": "Written after the lock"})
            await anyio.sleep(0.2)
            group.start_soon(call, "get_interests", {})

    _run(session)(team)
    # one thread for every call: the read of memories waited 20 s behind the write to lessons
    assert finished.index("get_interests") < finished.index("lock released") < finished.index("store_lesson")
    assert Lesson.objects.filter(title="Written after the lock").exists()


def test_a_team_deleted_under_a_running_server_is_a_tool_error_naming_team(team):
    async def session(client):
        before = await client.call_tool("get_all_friends", {})
        await sync_to_async(lambda: type(team).objects.filter(pk=team.pk).delete())()
        return before, await client.call_tool("store_memory", {"content": "Met Ana"}), await client.call_tool(
            "search_lessons", {"query": "anything"})

    before, stored, searched = _run(session)(team)
    assert not before.is_error
    for result in (stored, searched):  # writes failed on a foreign key, reads answered as for an empty team
        assert result.is_error and _payload(result)["errors"][0]["field"] == "team"
        assert "no longer exists" in _payload(result)["errors"][0]["message"]


def test_tool_errors_show_unicode_as_it_is(team):
    async def session(client):
        return await client.call_tool("store_memory", {"content": "A name", "people": ["😀"]})

    result = _run(session)(team)
    assert result.is_error and "😀" in result.content[0].text and "\\ud83d" not in result.content[0].text


def test_the_memory_tools_read_correct_and_forget_a_memory_of_the_servers_team_only(team, other_team):
    from lessons.services.memories import memory_create, memory_update

    memory = memory_create(team=team, content="Met Sam at the gym on Monday", people=["Sam"])
    memory_update(memory=memory, content="Met Sam at the gym on Tuesday")
    theirs = memory_create(team=other_team, content="Their diary")

    async def session(client):
        read = _payload(await client.call_tool("get_memory", {"memory_id": memory.pk}))
        corrected = await client.call_tool("update_memory", {
            "memory_id": memory.pk, "people": ["Sam", "Maria"], "expected_updated_at": read["updated_at"]})
        # a second agent still holding the first read: refused, nothing written
        stale = await client.call_tool("update_memory", {
            "memory_id": memory.pk, "people": ["Sam", "Tom"], "expected_updated_at": read["updated_at"]})
        stale_delete = await client.call_tool("delete_memory", {
            "memory_id": memory.pk, "expected_updated_at": read["updated_at"]})
        foreign = [await client.call_tool(name, {"memory_id": theirs.pk, **extra}) for name, extra in (
            ("get_memory", {}), ("update_memory", {"content": "Mine now"}), ("delete_memory", {}))]
        unknown = await client.call_tool("get_memory", {"memory_id": 10**12})
        fresh = _payload(await client.call_tool("get_memory", {"memory_id": memory.pk}))
        deleted = await client.call_tool("delete_memory", {
            "memory_id": memory.pk, "expected_updated_at": fresh["updated_at"]})
        return read, corrected, stale, stale_delete, foreign, unknown, fresh, deleted

    read, corrected, stale, stale_delete, foreign, unknown, fresh, deleted = _run(session)(team)
    assert (read["id"], read["content"], read["version"]) == (memory.pk, "Met Sam at the gym on Tuesday", 2)
    assert [(v["version"], v["content"], v["is_current"]) for v in read["versions"]] == [
        (2, "Met Sam at the gym on Tuesday", True), (1, "Met Sam at the gym on Monday", False)]
    assert not corrected.is_error, corrected.content[0].text
    assert _payload(corrected)["people"] == ["Sam", "Maria"] and _payload(corrected)["updated_at"] != read["updated_at"]
    for refused in (stale, stale_delete):
        assert refused.is_error
        assert [error["field"] for error in _payload(refused)["errors"]] == ["expected_updated_at"]
        message = _payload(refused)["errors"][0]["message"]
        assert message.startswith("the memory was changed at ") and "call get_memory again" in message
    for result in (*foreign, unknown):
        assert result.is_error and _payload(result)["errors"][0]["field"] == "memory_id"
        assert "does not exist" in _payload(result)["detail"]
    assert Memory.objects.get(pk=theirs.pk).content == "Their diary"
    assert fresh["people"] == ["Sam", "Maria"]  # Tom's stale write did not replace Maria
    assert not deleted.is_error and _payload(deleted) == {"id": memory.pk, "deleted": True}
    assert not Memory.objects.filter(team=team).exists()  # with its earlier version


def test_a_number_for_a_moment_is_refused_naming_the_argument(team):
    # "occurred_at": 2024 was stored as 1970-01-01T00:33:44 (seconds since 1970)
    async def session(client):
        return (
            await client.call_tool("store_memory", {"content": "We moved to Leipzig", "occurred_at": 2024}),
            await client.call_tool("list_memories", {"since": "2024"}),
            await client.call_tool("store_memory", {"content": "We moved to Leipzig", "occurred_at": "2024-05-01"}),
        )

    number, text, date = _run(session)(team)
    assert number.is_error and text.is_error and not date.is_error
    assert [_payload(result)["errors"][0]["field"] for result in (number, text)] == ["occurred_at", "since"]
    assert "is a number, which would be read as seconds since 1970" in _payload(number)["errors"][0]["message"]
    assert [memory.occurred_at.isoformat() for memory in Memory.objects.all()] == ["2024-05-01T00:00:00+00:00"]
