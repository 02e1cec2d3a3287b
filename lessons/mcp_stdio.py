"""Standard input for the MCP server: lines read without a blocking thread, and lines the SDK would
drop answered here.

The SDK's stdio transport reads stdin on a worker thread and drops a line it cannot read as a
JSON-RPC message: a client got no answer at all to a line that is not JSON, or to a request whose
strings hold a lone surrogate (`"\\ud800"`, which JSON allows and Node-based clients write), and
waited for its own timeout. Such a line is answered here: a parse error (-32700), or an error
naming the field with the request's own id; so is a `tools/call` whose params hold no tool name
or arguments that are not an object (the SDK's answer, "Invalid request parameters", named
nothing), a request naming a key twice (the SDK kept the last value), a request whose id is not a
string or an integer (read by the SDK as a notification: never answered, and an object id ended the
server), a request sent before `initialize`, and a line too long to hold. And a thread blocked
in `read()` kept Ctrl-C from ending the server until the next line came; a pipe or terminal is
read here when the event loop says it is readable, so Ctrl-C cancels the read at once.
"""

import errno
import json
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import mcp_types as types
import pydantic

from lessons import strict_json
from lessons.error_text import json_type

CHUNK = 65536
# The longest line read: the HTTP API's largest body (Django's DATA_UPLOAD_MAX_MEMORY_SIZE, 2.5 MB);
# a tool's texts are at most 20,000 characters each.
MAX_LINE_BYTES = 2_621_440


async def _chunks(fd: int) -> AsyncIterator[bytes]:
    """What arrives on `fd` until its end. A pipe, socket or terminal is waited on by the event
    loop; a regular file (`< requests.jsonl`), which epoll cannot wait on, is read on a thread."""
    mode = os.fstat(fd).st_mode
    pollable = stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)
    while True:
        if pollable:
            try:
                await anyio.wait_readable(fd)
            except OSError as error:
                if error.errno != errno.EPERM:
                    raise
                pollable = False  # a device epoll refuses (`< /dev/null`): read on a thread too
                continue
            chunk = os.read(fd, CHUNK)
        else:
            chunk = await anyio.to_thread.run_sync(os.read, fd, CHUNK)
        if not chunk:
            return
        yield chunk


def _lone_surrogate_path(value, path: str = "") -> str | None:
    """The path ("params.arguments.title") of the first string holding a lone surrogate, or None."""
    if isinstance(value, str):
        return path if any("\ud800" <= character <= "\udfff" for character in value) else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, str) and _lone_surrogate_path(key) is not None:
            return f"{path}.{key.encode('utf-8', 'backslashreplace').decode()}".lstrip(".")
        found = _lone_surrogate_path(item, f"{path}.{key}".lstrip("."))
        if found is not None:
            return found
    return None


def unreadable_line_error(line: str) -> types.JSONRPCError | None:
    """The error to answer a line with that the SDK cannot read, or None when it can."""
    try:
        message = strict_json.loads(line)
    except strict_json.DuplicateKey as error:
        # JSON the SDK would read, keeping the last value: refused as a request, with its id unless
        # that is what came twice
        request_id = None if error.key == "id" else answerable_id(json.loads(line))
        return types.JSONRPCError(
            jsonrpc="2.0", id=request_id,
            error=types.ErrorData(code=types.INVALID_REQUEST, message=f"{error}; nothing was done"),
        )
    except ValueError as error:
        if "Exceeds the limit" in str(error):  # Python's words, with advice for its own programmers
            return _parse_error("not a JSON line this server reads: a number of over 4,300 digits")
        return _parse_error(f"not a JSON line: {error}")
    except RecursionError:  # ~1,000 nested arrays in 2 kB: the decoder's stack, and the server, gave out
        return _parse_error("not a JSON line this server reads: nested too deeply")
    request_id = answerable_id(message)
    if (fault := _id_fault(message)) is not None:
        error = types.ErrorData(code=types.INVALID_REQUEST, message=f"{fault}; nothing was done")
        return types.JSONRPCError(jsonrpc="2.0", id=None, error=error)
    try:
        field = _lone_surrogate_path(message)
    except RecursionError:
        return types.JSONRPCError(
            jsonrpc="2.0", id=request_id,
            error=types.ErrorData(code=types.INVALID_REQUEST, message="nested too deeply; nothing was done"),
        )
    if field is not None:
        return types.JSONRPCError(
            jsonrpc="2.0", id=request_id,
            error=types.ErrorData(code=types.INVALID_PARAMS,
                                  message=f"{field}: not valid Unicode text (a lone surrogate); nothing was done"),
        )
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except pydantic.ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"][1:]) or "message"
        return types.JSONRPCError(
            jsonrpc="2.0", id=request_id,
            error=types.ErrorData(code=types.INVALID_REQUEST,
                                  message=f"not a JSON-RPC 2.0 message ({where}: {first['msg']})"),
        )
    fault = _tool_call_fault(message)
    if fault is not None and request_id is not None:
        return types.JSONRPCError(
            jsonrpc="2.0", id=request_id,
            error=types.ErrorData(code=types.INVALID_PARAMS, message=f"{fault}; nothing was done"),
        )
    return None


def answerable_id(message) -> str | int | None:
    """The message's id when it is one JSON-RPC allows, to answer it with."""
    request_id = message.get("id") if isinstance(message, dict) else None
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        return None
    return request_id


def _id_fault(message) -> str | None:
    """What is wrong with a request's id, or None. MCP takes a string or an integer. The SDK read a
    request with any other id (an object, 1.5, true, null) as a notification: it was never
    answered, and an object's id ended the server."""
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    if answerable_id(message) is not None:
        return None
    given = message["id"]
    shown = json.dumps(given) if isinstance(given, (bool, float)) or given is None else json_type(given)
    return f"id: a request's id is a string or an integer, not {shown}"


def _parse_error(message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=types.PARSE_ERROR, message=message))


def _tool_call_fault(message) -> str | None:
    """What is wrong with a `tools/call` request's params, or None. The SDK answered these with a
    bare "Invalid request parameters", which names nothing a client could fix."""
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    params = message.get("params")
    if not isinstance(params, dict):
        return "params: expected an object with the tool's name and its arguments"
    if not isinstance(params.get("name"), str):
        given = "nothing" if params.get("name") is None else json_type(params["name"])
        return f"params.name: expected the tool's name (a string), got {given}"
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        return f"params.arguments: expected an object of the tool's arguments, got {json_type(arguments)}"
    meta = params.get("_meta")
    if meta is not None and not isinstance(meta, dict):
        return f"params._meta: expected an object (MCP's request metadata), got {json_type(meta)}"
    return None


async def checked_lines(fd: int, answer: Callable[[types.JSONRPCError], Awaitable[None]],
                        max_line_bytes: int = MAX_LINE_BYTES) -> AsyncIterator[str]:
    """The lines of `fd` the SDK can read; every other line is answered through `answer`. Blank
    lines are skipped, as the SDK's reader would fail them. A line is gathered in a buffer that
    grows in place (joining each chunk to the line so far took 14 s for one 40 MB line), and one
    longer than `max_line_bytes` is answered and skipped to its end, not held."""
    pending, too_long, session = bytearray(), False, _Session()
    async for chunk in _chunks(fd):
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            if not too_long and len(pending) + end - start <= max_line_bytes:
                pending += chunk[start:end]
                if line := await _readable(bytes(pending), answer, session):
                    yield line
            else:
                await answer(_line_too_long(max_line_bytes))
            pending.clear()
            too_long, start = False, end + 1
        if not too_long:
            pending += chunk[start:]
            if len(pending) > max_line_bytes:
                too_long = True
                pending.clear()
    if too_long:
        await answer(_line_too_long(max_line_bytes))
    elif line := await _readable(bytes(pending), answer, session):
        yield line


def _line_too_long(limit: int) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(
        code=types.INVALID_REQUEST,
        message=f"a line longer than {limit:,} bytes: this server reads lines of up to {limit:,} bytes, as the "
                "HTTP API reads bodies; nothing was done"))


class _Session:
    """Whether the client has sent `initialize` yet: the SDK answered a request sent before it
    with "Invalid request parameters", which says nothing of the cause."""

    def __init__(self):
        self.initialize_sent = False

    def fault(self, line: str) -> types.JSONRPCError | None:
        if self.initialize_sent:
            return None
        message = json.loads(line)  # read already: unreadable_line_error found nothing wrong
        method = message.get("method") if isinstance(message, dict) else None
        if method == "initialize":
            self.initialize_sent = True
        elif method is not None and method != "ping" and (request_id := answerable_id(message)) is not None:
            return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"{method}: the session is not initialized; send initialize first; nothing was done"))
        return None


async def _readable(raw: bytes, answer, session: _Session) -> str | None:
    """The line, or None when it is blank or was answered here."""
    try:
        line = raw.decode("utf-8").strip()
    except UnicodeDecodeError as error:
        # decoded with replacement characters, the line was stored as "caf\ufffd": refused, as the
        # imports refuse it
        await answer(_parse_error(f"not UTF-8 text ({error.reason} at byte {error.start + 1} of the line); "
                                  "nothing was done"))
        return None
    if not line:
        return None
    error = unreadable_line_error(line) or session.fault(line)
    if error is not None:
        await answer(error)
        return None
    return line
