"""The agent tools over the Model Context Protocol (official `mcp` SDK, low-level `Server`).

The tools are `lessons.api.tools.AGENT_TOOLS`, the ones `GET /api/v1/tools` lists: the same
names, the same input schemas (the endpoints'), the same operations. One server serves one team,
chosen when it starts (`python manage.py mcp --team SLUG` or with an API key). Bad arguments come
back as a tool error naming the field, exactly as the HTTP API would name it.
"""

import json
import logging
from collections import Counter

import anyio
import mcp_types as types
import pydantic
from asgiref.sync import sync_to_async
from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError, DataError, IntegrityError, ProgrammingError, connections
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from lessons.api import errors
from lessons.api.tools import AGENT_TOOLS, TOOLS_BY_NAME
from lessons.error_text import lost_to_a_concurrent_write, one_line, over_a_database_limit
from lessons.mcp_stdio import answerable_id, checked_lines
from lessons.models import Team
from lessons.search.types import SearchRequestError
from lessons.services.api_keys import api_key_authenticate

logger = logging.getLogger(__name__)

SERVER_NAME = "memory-store"
INSTRUCTIONS = (
    "A memory store of lessons learned and personal memories. Search lessons before designing or "
    "debugging (search_lessons, patterns_for_feature); store or propose what you learn (store_lesson, "
    "propose_lesson); list_lessons lists them by filters, not ranked. After a search, report the results "
    "you used with report_usage and the answer's search_id: what agents use ranks higher. Memories: "
    "store_memory, get_memory (with its versions), list_memories (filtered, in an order: a timeline with "
    "order occurred_at), update_memory and delete_memory; pass the updated_at you read as "
    "expected_updated_at, so a change someone made meanwhile is not lost (the call is refused instead). "
    "Every tool sees only this server's team."
)


def mcp_tools() -> list[types.Tool]:
    return [
        types.Tool(
            name=tool.name, description=tool.description, input_schema=tool.parameters(),
            output_schema=tool.output_schema(),
        )
        for tool in AGENT_TOOLS
    ]


def _error(body: dict) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(body, ensure_ascii=False))],
        structured_content=body,
        is_error=True,
    )


class KeyNoLongerValid(Exception):
    """The API key the server was started with was revoked (or deleted) since."""


class TeamNoLongerExists(Exception):
    """The team the server was started for was deleted since."""


def _call(*, team: Team, name: str, arguments: dict | None, api_key: str | None = None):
    """Runs in a worker thread of its own: the ORM is synchronous. The thread's connection is
    closed when the call ends: a pool thread may not serve the session's next call, and a
    connection left on an idle thread outlived the session's use of it.

    A server started with an API key checks it before every call, as the HTTP API checks every
    request: a key revoked while an agent's session ran went on reading and writing for as long as
    the session lived, and its `last_used_at` stayed at the start."""
    try:
        if api_key is not None and api_key_authenticate(raw_key=api_key) is None:
            raise KeyNoLongerValid(
                "the API key this server was started with is unknown or revoked; nothing was done"
            )
        if not Team.objects.filter(pk=team.pk).exists():
            # a deleted team's writes failed on its foreign key, its reads answered as for an empty team
            raise TeamNoLongerExists(
                f"the team this server serves ({team.slug}) no longer exists; nothing was done: "
                "restart the server for another team"
            )
        return TOOLS_BY_NAME[name].call(team=team, arguments=arguments)
    finally:
        connections.close_all()


def call_tool_result(*, result) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
        structured_content=result if isinstance(result, dict) else {"result": result},
    )


def build_server(*, team: Team, api_key: str | None = None) -> Server:
    """`api_key`: the raw key the server was started with, checked before every tool call."""

    async def on_list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=mcp_tools())

    async def on_call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in TOOLS_BY_NAME:
            known = ", ".join(sorted(TOOLS_BY_NAME))
            return _error(errors.field_error("name", f"no tool {params.name!r}; the tools are {known}"))
        try:
            # each call on a thread of its own: one call waiting on a lock held elsewhere made every
            # other call of the session wait behind it
            result = await sync_to_async(_call, thread_sensitive=False)(
                team=team, name=params.name, arguments=params.arguments, api_key=api_key
            )
        except KeyNoLongerValid as error:
            return _error(errors.field_error("api_key", str(error)))
        except TeamNoLongerExists as error:
            return _error(errors.field_error("team", str(error)))
        except pydantic.ValidationError as error:
            return _error(errors.pydantic_validation_errors(error))
        except DjangoValidationError as error:
            return _error(errors.django_validation_errors(error))
        except ObjectDoesNotExist as error:  # the API's 404: e.g. another team's search_id
            return _error(errors.missing(error))
        except SearchRequestError as error:
            return _error(errors.field_error(error.field, error.message))
        except DataError as error:  # the API's 422 and 409: the caller's to fix, not an outage
            return _error(errors.unstorable_value(error))
        except IntegrityError as error:
            return _error(errors.conflict(error))
        except ProgrammingError as error:
            if (body := errors.not_migrated(error)) is None:
                logger.exception("tool %s failed", params.name)
                body = errors.internal(error)
            return _error(body)
        except DatabaseError as error:
            if over_a_database_limit(error):  # the API's 422 too
                logger.error("a value past a database limit: %s", one_line(error))
                return _error(errors.unstorable_value(error))
            if lost_to_a_concurrent_write(error):  # the API's 503 with Retry-After: send it again
                logger.warning("a tool call lost to a concurrent one: %s", one_line(error))
                return _error(errors.concurrent_write(error))
            logger.error("database unavailable: %s", one_line(error))
            return _error(errors.database_unavailable(error))
        except Exception as error:  # an agent gets a tool error, never a dead session; the log has the trace
            logger.exception("tool %s failed", params.name)
            return _error(errors.internal(error))
        return call_tool_result(result=result)

    return Server(
        SERVER_NAME,
        version="1.0.0",
        instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


# At the end of stdin, how long the server still waits for the answers of requests it has read.
ANSWERS_AFTER_STDIN_CLOSED_SECONDS = 60


class _Unanswered:
    """The ids of the requests read from stdin whose answer is not written yet. The SDK ends the
    session as soon as its input ends, cancelling the calls still running: `printf '...' | manage.py
    mcp` lost the answer to its last request (a `tools/list` among them) without a word."""

    def __init__(self):
        # id -> requests read with it and not answered: a client reusing an id (its fault) lost the
        # first request's answer when the second's was written, as a set counted them as one
        self.ids: Counter = Counter()
        self.none_left = anyio.Event()
        self.none_left.set()

    def read(self, line: str) -> None:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return
        if not isinstance(message, dict) or "method" not in message:
            return
        if (request_id := answerable_id(message)) is not None:  # mcp_stdio answered any other id
            if not self.ids:
                self.none_left = anyio.Event()
            self.ids[request_id] += 1
        elif message["method"] == "notifications/cancelled":  # a cancelled request is not answered
            params = message.get("params")
            self._answered(params.get("requestId") if isinstance(params, dict) else None)

    def _answered(self, request_id) -> None:
        if not isinstance(request_id, (str, int)) or self.ids[request_id] <= 0:
            return
        self.ids[request_id] -= 1
        if self.ids[request_id] == 0:
            del self.ids[request_id]
        if not self.ids:
            self.none_left.set()

    def written(self, message: SessionMessage) -> None:
        if isinstance(message.message, (types.JSONRPCResponse, types.JSONRPCError)):
            self._answered(message.message.id)


class _AnswersNoted:
    """The server's write stream, noting each answer it writes in `unanswered`."""

    def __init__(self, stream, unanswered: _Unanswered):
        self._stream, self._unanswered = stream, unanswered

    async def send(self, message: SessionMessage) -> None:
        await self._stream.send(message)
        self._unanswered.written(message)

    def __getattr__(self, name):
        return getattr(self._stream, name)

    async def __aenter__(self):
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc_info):
        return await self._stream.__aexit__(*exc_info)


async def _until_answered(lines, unanswered: _Unanswered):
    """`lines`, then, once they end, a wait for the answers still owed (at most a minute)."""
    async for line in lines:
        unanswered.read(line)
        yield line
    with anyio.move_on_after(ANSWERS_AFTER_STDIN_CLOSED_SECONDS):
        await unanswered.none_left.wait()


async def serve_stdio(*, team: Team, api_key: str | None = None, stdin_fd: int = 0) -> None:
    """Serve on this process's stdin and stdout. Lines the SDK cannot read are answered by
    mcp_stdio (it would drop them unanswered); stdout stays the SDK's alone. When stdin ends, the
    requests read are answered before the server stops."""
    server = build_server(team=team, api_key=api_key)
    outgoing = {}
    connected = anyio.Event()
    unanswered = _Unanswered()

    async def answer(error: types.JSONRPCError) -> None:
        await connected.wait()
        await outgoing["stream"].send(SessionMessage(error))

    lines = _until_answered(checked_lines(stdin_fd, answer), unanswered)
    async with stdio_server(stdin=lines) as (read_stream, write_stream):
        outgoing["stream"] = write_stream
        connected.set()
        await server.run(read_stream, _AnswersNoted(write_stream, unanswered), server.create_initialization_options())
