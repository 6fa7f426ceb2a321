"""Lantern as an MCP server over stdio (the official ``mcp`` SDK, extra ``mcp``): ``lantern --db PATH mcp``.

Tools (JSON schemas from the typed signatures): ``archive`` (messages + session), ``recover`` (query, session,
budget, exclude), ``search`` (query, k, session), ``forget`` (entry or session), ``feedback`` (entry ids, useful),
``stats``. Bad input comes back as a tool error (``isError``) with one line saying what is wrong; the server keeps
running. Arguments that do not match a tool's schema give one line naming each field and its problem
(``validation_message``), not the SDK's multi-line pydantic dump; argument names a tool does not take are rejected
in one line naming them
(``unknown_arguments_message``), where the SDK would ignore them. Nothing but the protocol is written to stdout.

Every request line gets an answer (``stdio_server``): the SDK's JSON parser refuses a lone surrogate escape
(``"\\ud83d"``, which JavaScript's ``JSON.stringify`` writes for an emoji cut in half) and JSON nested deeper than
about 128 levels, and then answers nothing, so the client would wait for ever; such a line is parsed again by Python's
``json`` (a lone surrogate becomes U+FFFD, as everywhere in Lantern), and a line that still cannot be read gets a
JSON-RPC parse error (-32700) or invalid-request error (-32600) with the request's id when it can be found.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import sys
import threading
import typing
from contextlib import asynccontextmanager
from io import TextIOWrapper
from typing import Any

import anyio
import anyio.lowlevel
import mcp.types as types
from mcp.shared.message import SessionMessage
from mcp.types import ToolAnnotations
from pydantic import TypeAdapter, ValidationError  # strict: true is no entry id

from lantern import lazy_re

try:  # the SDK's 2.x: FastMCP was renamed MCPServer; JSONRPCMessage is a plain union of the four message models
    from mcp.server.mcpserver import MCPServer as _SDKServer
    from mcp.server.mcpserver.exceptions import ToolError

    SDK_MAJOR = 2
except ImportError:  # 1.x (1.10 and later): FastMCP; JSONRPCMessage is a RootModel wrapping that union
    from mcp.server.fastmcp import FastMCP as _SDKServer
    from mcp.server.fastmcp.exceptions import ToolError

    SDK_MAJOR = 1

from lantern.archive.parse.jsonl import loads
from lantern.errors import LanternError
from lantern.integrations.messages import unknown_arguments_message, validation_message
from lantern.integrations.schemas import (
    Agent,
    ArchiveResponse,
    ArchiveSession,
    Budget,
    CompactedSession,
    CompactionRecoverResponse,
    EntryIds,
    Exclude,
    FeedbackResponse,
    FeedbackUser,
    ForgetConfirm,
    ForgetEntry,
    ForgetResponse,
    ForgetSession,
    ForgetUser,
    K,
    Live,
    Messages,
    Project,
    Query,
    RecoverResponse,
    SearchQuery,
    SearchResponse,
    SessionFilter,
    StatsResponse,
    Summary,
    Useful,
    User,
)
from lantern.integrations.service import MemoryService

INSTRUCTIONS = (
    "Lantern archives conversation turns (with tool calls and results) and recovers the specifics a compaction "
    "or summary dropped: ports, paths, hashes, flags, error messages. Call `archive` with the turns before they "
    "are compacted away; after a compaction, call `recover` with the current context's tail plus the summary as "
    "query and inject the returned `text`."
)


_JSONRPC = TypeAdapter(types.JSONRPCMessage)  # 1.x: returns the RootModel; 2.x: the request/response model itself


def _wrap(root: Any) -> SessionMessage:
    """A SessionMessage holding the JSON-RPC message model ``root`` (a JSONRPCError...), in either SDK's shape."""
    return SessionMessage(types.JSONRPCMessage(root) if SDK_MAJOR == 1 else root)


def _root(message: SessionMessage) -> Any:
    """The request / notification / response / error model inside a SessionMessage, in either SDK's shape."""
    return message.message.root if SDK_MAJOR == 1 else message.message


def lantern_version() -> str:
    """Lantern's version (the ``lantern-memory`` distribution), reported to MCP clients as the server's version."""
    try:
        from importlib.metadata import version

        return version("lantern-memory")
    except Exception:  # noqa: BLE001 - a source tree on PYTHONPATH, not installed
        return "0"


class _Server(_SDKServer):
    """FastMCP whose argument validation errors are our one-line ``validation_message``, and which rejects argument
    names outside a tool's input schema (``unknown_arguments_message``) instead of ignoring them as the SDK does (a
    misspelt ``sesion`` would otherwise search every session)."""

    _known: dict[str, list[str]] | None = None

    _calls_in_progress = 0
    _interrupted = False

    async def run_stdio_async(self) -> None:
        """The SDK's ``run_stdio_async`` over our ``stdio_server`` (every request line answered)."""
        _say_when_interrupted(self)
        try:
            async with stdio_server() as (read_stream, write_stream):
                low = self.lowlevel
                await low.run(read_stream, write_stream, low.create_initialization_options())
        except Exception as e:
            # 2.x at Ctrl-C with requests still queued: the SDK's relay of the input to its serving loop sends into
            # the loop's closed stream and fails with BrokenResourceError, which would replace the cancellation
            # (exit 130) with an internal error; that is the interrupt, not a fault
            if not (self._interrupted and _only_stream_errors(e)):
                raise
            raise asyncio.CancelledError from None
        finally:
            _leave_at_ctrl_c()

    @property
    def lowlevel(self) -> Any:
        """The SDK's low-level server under this one (1.x: ``_mcp_server``; 2.x: ``_lowlevel_server``)."""
        return self._lowlevel_server if SDK_MAJOR >= 2 else self._mcp_server

    async def _parameters(self) -> dict[str, list[str]]:
        """Tool name -> the argument names of its input schema (``list_tools``, read once: the tools are fixed)."""
        if self._known is None:
            self._known = {
                t.name: list(
                    (getattr(t, "input_schema", None) or getattr(t, "inputSchema", None) or {}).get("properties", {})
                )
                for t in await self.list_tools()
            }
        return self._known

    async def call_tool(self, name: str, arguments: dict[str, Any], *context: Any, **kw: Any):
        """The SDK's ``call_tool`` (2.x passes a request context too), after our check of the argument names."""
        known = (await self._parameters()).get(name)
        unknown = [k for k in (arguments or {}) if known is not None and k not in known]
        if unknown:
            raise ToolError(unknown_arguments_message(name, unknown, known))
        try:
            return await super().call_tool(name, arguments, *context, **kw)
        except ToolError as e:
            if isinstance(e.__cause__, ValidationError):  # the SDK's check of the arguments, before the tool runs
                raise ToolError(validation_message(name, e.__cause__.errors(include_url=False))) from None
            raise


_SURROGATE = lazy_re.compile("[\ud800-\udfff]")
# the id of a request whose JSON cannot be read whole (too deeply nested): clients write jsonrpc and id first
_LEADING_ID = lazy_re.compile(
    r'^\s*\{\s*(?:"jsonrpc"\s*:\s*"[^"\\]*"\s*,\s*)?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*[,}]'
)


def _without_surrogates(value: Any) -> Any:
    """``value`` (parsed JSON) with every lone surrogate in its strings and keys replaced by U+FFFD (iterative: a
    value nested as deep as ``json`` reads does not overflow the stack here)."""

    def fix(x: Any) -> Any:
        return _SURROGATE.sub("\ufffd", x) if isinstance(x, str) else x

    root = [fix(value)]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        parent, key = stack.pop()
        item = parent[key]
        if isinstance(item, list):
            for i, v in enumerate(item):
                item[i] = fix(v)
                if isinstance(v, (list, dict)):
                    stack.append((item, i))
        elif isinstance(item, dict):
            if any(isinstance(k, str) and _SURROGATE.search(k) for k in item):
                parent[key] = item = {fix(k): v for k, v in item.items()}
            for k, v in item.items():
                item[k] = fix(v)
                if isinstance(v, (list, dict)):
                    stack.append((item, k))
    return root[0]


class UnreadableLine(ValueError):
    """A stdin line that is no JSON-RPC message and names no request id to answer: handed to the SDK's session,
    which logs it to the client (a notification), as the SDK does with every line it cannot parse."""


def _error(request_id: Any, code: int, message: str) -> SessionMessage | UnreadableLine:
    if not isinstance(request_id, (int, str)) or isinstance(request_id, bool):
        return UnreadableLine(message)
    return _wrap(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)))


def _leading_id(line: str) -> Any:
    m = _LEADING_ID.match(line)
    return json.loads(m.group(1)) if m else None


def read_message(line: str) -> SessionMessage | UnreadableLine:
    """One stdin line as the message to serve, or as the error response to send back. The SDK's own parser first;
    a line it refuses is parsed by Python's ``json`` (lone surrogates -> U+FFFD); a line nothing can read is a
    parse error, a JSON value that is no JSON-RPC message an invalid request, answered to the request's id when
    one can be found (else ``UnreadableLine``: JSON-RPC's null id is not in the SDK's types). Ours."""
    try:
        return SessionMessage(_JSONRPC.validate_json(line))
    except Exception:  # noqa: BLE001 - the fallback below says what is wrong
        pass
    try:
        obj = loads(line)  # an integer longer than Python converts stays its digits, as in every transcript parser
    except RecursionError:
        return _error(_leading_id(line), types.PARSE_ERROR, "request nested too deeply to parse")
    except ValueError as e:
        return _error(_leading_id(line), types.PARSE_ERROR, f"invalid JSON: {' '.join(str(e).split())}")
    obj = _without_surrogates(obj)
    request_id = obj.get("id") if isinstance(obj, dict) else None
    try:
        return SessionMessage(_JSONRPC.validate_python(obj))
    except RecursionError:
        return _error(request_id, types.PARSE_ERROR, "request nested too deeply to parse")
    except Exception:  # noqa: BLE001 - not a JSON-RPC message
        return _error(request_id, types.INVALID_REQUEST, "not a JSON-RPC 2.0 request, notification or response")


ANSWER_WAIT = 30.0  # seconds without an answer after which end of input stops the server anyway (ours)
STDIN_QUEUE = 64  # request lines read ahead of the server (backpressure on the reading thread; ours)


def _read_stdin_lines(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue, fd: int = 0) -> None:
    """The body of a daemon thread: the lines of ``fd`` (bytes, each with its newline) put on ``queue`` in the
    loop's thread, then None at end of file. It reads with ``os.read``, not ``sys.stdin``: a thread blocked there
    holds no buffer lock, so the server can stop at Ctrl-C while the client keeps stdin open, and the interpreter
    exits without waiting for it (anyio's worker-thread ``readline`` cannot be cancelled)."""

    def put(item: bytes | None) -> bool:
        try:
            asyncio.run_coroutine_threadsafe(queue.put(item), loop).result()
            return True
        except (RuntimeError, concurrent.futures.CancelledError):  # the loop is closed or the server stopped
            return False

    buf, scan = bytearray(), 0
    try:
        while chunk := os.read(fd, 1 << 16):
            buf += chunk
            while (end := buf.find(b"\n", scan)) >= 0:
                if not put(bytes(buf[: end + 1])):
                    return
                del buf[: end + 1]
                scan = 0
            scan = len(buf)
        if buf and not put(bytes(buf)):
            return
    except OSError:
        pass
    put(None)


@asynccontextmanager
async def stdio_server():
    """``mcp.server.stdio.stdio_server`` whose reader answers every line (``read_message``): a line the SDK's
    parser refuses is not handed on as an exception (which the SDK only logs, leaving the request unanswered).
    Lines come from a daemon thread (``_read_stdin_lines``), decoded as UTF-8 with U+FFFD for bad bytes."""
    stdout = anyio.wrap_file(TextIOWrapper(sys.stdout.buffer, encoding="utf-8"))
    read_writer, read_stream = anyio.create_memory_object_stream(0)
    write_stream, write_reader = anyio.create_memory_object_stream(0)
    lines: asyncio.Queue = asyncio.Queue(STDIN_QUEUE)
    threading.Thread(
        target=_read_stdin_lines, args=(asyncio.get_running_loop(), lines), name="lantern-mcp-stdin", daemon=True
    ).start()

    unanswered: dict[Any, int] = {}  # request id -> requests handed to the session not yet answered on stdout
    answered = [anyio.Event()]

    async def until_answered():
        """At end of input, wait for the answers to the requests already read: the SDK's server cancels its
        in-flight handlers once its input closes, so a pipelined request (or one on a last line) would get no answer.
        Gives up after ANSWER_WAIT seconds without any answer."""
        while unanswered:
            with anyio.move_on_after(ANSWER_WAIT) as idle:
                await answered[0].wait()
            if idle.cancelled_caught:
                return
            answered[0] = anyio.Event()

    async def stdin_reader():
        try:
            async with read_writer:
                while (raw := await lines.get()) is not None:
                    if not raw.strip():  # a blank line (an extra newline, a CRLF pair) is no message: skip it
                        continue
                    message = read_message(raw.decode("utf-8", errors="replace"))
                    if isinstance(message, UnreadableLine):
                        await read_writer.send(message)  # logged to the client by the session, as the SDK does
                    elif isinstance(_root(message), types.JSONRPCError):
                        await write_stream.send(message)
                    else:
                        if isinstance(_root(message), types.JSONRPCRequest):
                            unanswered[_root(message).id] = unanswered.get(_root(message).id, 0) + 1
                        await read_writer.send(message)
                await until_answered()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):  # the session stopped reading (Ctrl-C)
            await anyio.lowlevel.checkpoint()

    async def stdout_writer():
        try:
            async with write_reader:
                async for message in write_reader:
                    await stdout.write(message.message.model_dump_json(by_alias=True, exclude_none=True) + "\n")
                    await stdout.flush()
                    root = _root(message)
                    if isinstance(root, (types.JSONRPCResponse, types.JSONRPCError)) and root.id in unanswered:
                        unanswered[root.id] -= 1
                        if not unanswered[root.id]:
                            del unanswered[root.id]
                        answered[0].set()
        except anyio.ClosedResourceError:  # pragma: no cover
            await anyio.lowlevel.checkpoint()
        except BrokenPipeError:  # the client is gone: nobody to answer, stop serving (a write in flight completes)
            _silence_stdout()
            tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdin_reader)
        tg.start_soon(stdout_writer)
        yield read_stream, write_stream


def _say_when_interrupted(server: _Server) -> None:
    """Wrap the running loop's SIGINT handler (asyncio's: the first Ctrl-C stops the server once the call in
    progress returns) so that the first Ctrl-C during a call says so on stderr, and a second one leaves at once
    (exit 130). A tool call runs on the loop's thread; its write is one transaction, never committed half."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        return
    handler = signal.getsignal(signal.SIGINT)
    if not callable(handler):
        return
    said = []

    def on_sigint(signum, frame):
        if said:  # abandon the call: its open transaction is never committed, and SQLite rolls it back when the
            os._exit(130)  # database is next opened; or serving is stuck (a write to a client that reads nothing)
        said.append(signum)
        server._interrupted = True
        if server._calls_in_progress:
            sys.stderr.write(
                "lantern mcp: interrupted; finishing the call in progress, then stopping "
                "(Ctrl-C again to abandon it: nothing of it is stored)\n"
            )
            sys.stderr.flush()
        return handler(signum, frame)

    signal.signal(signal.SIGINT, on_sigint)


def _only_stream_errors(e: BaseException) -> bool:
    """Whether ``e`` (an exception group, nested or not) holds nothing but anyio's closed / broken stream errors."""
    inner = getattr(e, "exceptions", None)
    if inner is not None:
        return all(_only_stream_errors(x) for x in inner)
    return isinstance(e, (anyio.BrokenResourceError, anyio.ClosedResourceError))


def _leave_at_ctrl_c() -> None:
    """Once serving has stopped, a further Ctrl-C exits 130 at once: no call is in progress, every answer is
    flushed, and a KeyboardInterrupt during the interpreter's shutdown would only print a traceback."""
    import signal

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, lambda signum, frame: os._exit(130))


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null, so the interpreter's final flush of a broken pipe prints no BrokenPipeError."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def build_server(path: str | os.PathLike[str] | None = None, embedder: str | None = None) -> _Server:
    """The MCP server (the SDK's FastMCP in 1.x, MCPServer in 2.x) over the database at ``path`` (default
    ``$LANTERN_DB`` or ``~/.lantern/lantern.db``). It reports Lantern's version to clients, not the SDK's."""
    service = MemoryService(path, embedder, warm=True, source="mcp")
    service.start_filler()
    if SDK_MAJOR >= 2:
        server = _Server("lantern", instructions=INSTRUCTIONS, log_level="WARNING", version=lantern_version())
    else:
        server = _Server("lantern", instructions=INSTRUCTIONS, log_level="WARNING")
        server.lowlevel.version = lantern_version()  # 1.x's FastMCP takes no version: its server reports the SDK's

    def call(model, fn, *args):
        server._calls_in_progress += 1
        try:
            return model.model_validate(fn(*args))
        except (LanternError, ValueError, TypeError) as e:
            raise ToolError(str(e)) from e
        except Exception as e:  # an internal error is a tool error too, never a dead server
            from lantern.config import scrub

            # a driver's words may quote the server URL: never its password (config.scrub)
            raise ToolError(scrub(f"internal error {type(e).__name__}: {e}", str(service.path))) from e
        finally:
            server._calls_in_progress -= 1

    @server.tool(annotations=ToolAnnotations(title="Archive turns", destructiveHint=False, idempotentHint=True))
    def archive(
        messages: Messages,
        session: ArchiveSession = None,
        user: User = None,
        agent: Agent = None,
        project: Project = None,
    ) -> ArchiveResponse:
        """Archive conversation turns in one transaction (turns already archived are counted as duplicates).
        Secrets are redacted before anything is stored."""
        return call(ArchiveResponse, service.archive, messages, session, user, agent, project)

    @server.tool(annotations=ToolAnnotations(title="Recover lost specifics", destructiveHint=False))
    def recover(
        query: Query,
        session: SessionFilter = None,
        budget: Budget = None,
        exclude: Exclude = None,
        user: User = None,
        agent: Agent = None,
        project: Project = None,
    ) -> RecoverResponse:
        """The block of archived turns to inject back after a compaction, or for a question: {text, chars, reason,
        detail, relevance, entries}. An empty or shortened block says why in ``reason`` (no_match, below_floor:
        the archive holds nothing that answers it; uncertain: a short block of the best evidence)."""
        return call(RecoverResponse, service.recover, query, session, budget, exclude, user, agent, project)

    @server.tool(annotations=ToolAnnotations(title="Recover what a compaction lost", readOnlyHint=True))
    def recover_compaction(
        summary: Summary,
        session: CompactedSession = None,
        budget: Budget = None,
        live: Live = None,
        user: User = None,
        agent: Agent = None,
        project: Project = None,
    ) -> CompactionRecoverResponse:
        """Right after a compaction: the paths, names, commands, flags and values of the session's archived turns
        that neither the summary nor the live context states, as a block to inject: {text, chars, reason, entries,
        loss}. ``loss`` says what was lost, by type, and what came back."""
        return call(
            CompactionRecoverResponse, service.recover_compaction, summary, session, budget, live, user, agent, project
        )

    @server.tool(annotations=ToolAnnotations(title="Search the archive", readOnlyHint=True))
    def search(
        query: SearchQuery,
        k: K = 10,
        session: SessionFilter = None,
        user: User = None,
        agent: Agent = None,
        project: Project = None,
    ) -> SearchResponse:
        """Top k archived turns by fused score (semantic, full text, keyword, importance), with each signal's rank."""
        return call(SearchResponse, service.search, query, k, session, user, agent, project)

    @server.tool(annotations=ToolAnnotations(title="Forget", destructiveHint=True, idempotentHint=True))
    def forget(
        entry: ForgetEntry = None,
        session: ForgetSession = None,
        user: ForgetUser = None,
        agent: Agent = None,
        project: Project = None,
        confirm: ForgetConfirm = None,
    ) -> ForgetResponse:
        """Delete one entry, a whole session, or everything of a user / agent / project from every table, in two
        calls: without confirm nothing is deleted and the reply says how many entries would be (would_forget) with
        a confirm token; show that to the user, then call again with the same arguments and confirm=<token>."""
        return call(ForgetResponse, service.forget, entry, session, user, agent, project, confirm)

    @server.tool(
        annotations=ToolAnnotations(title="Feedback on recovered entries", destructiveHint=False, idempotentHint=False)
    )
    def feedback(
        entry_ids: EntryIds,
        useful: Useful,
        user: FeedbackUser = None,
        agent: Agent = None,
        project: Project = None,
    ) -> FeedbackResponse:
        """Tell Lantern whether recovered entries were useful: moves their success rate σ, which weighs their
        importance. Only the user's own entries are updated."""
        return call(FeedbackResponse, service.feedback, entry_ids, useful, user, agent, project)

    @server.tool(annotations=ToolAnnotations(title="Statistics", readOnlyHint=True))
    def stats(user: User = None, agent: Agent = None, project: Project = None) -> StatsResponse:
        """Entries, sessions, text characters, pruned entries and pending recoveries of the user; embedder."""
        return call(StatsResponse, service.stats, user, agent, project)

    for tool in server._tool_manager.list_tools():
        _keep_strings(tool)
    server._lantern_service = service  # for tests and shutdown
    return server


def _admits_str(annotation: Any) -> bool:
    """Whether a field of this type takes a string (``str``, or a union with ``str`` in it)."""
    return annotation is str or any(_admits_str(a) for a in typing.get_args(annotation) if a is not type(None))


def _keep_strings(tool: Any) -> None:
    """String arguments stay strings. The SDK parses a string argument as JSON when its field's type is not exactly
    ``str`` (``FuncMetadata.pre_parse_json``, for clients that send a list as ``"[...]"``), so a session named
    ``{"a": 1}`` (``str | None``) reached validation as an object and was refused. Here a string given to a field
    that takes strings is passed on as given; other fields keep the SDK's parse."""
    meta = tool.fn_metadata
    keep = {
        key
        for name, field in meta.arg_model.model_fields.items()
        if _admits_str(field.annotation)
        for key in (name, field.alias)
        if key
    }
    sdk_parse = meta.pre_parse_json

    def pre_parse_json(data: dict[str, Any]) -> dict[str, Any]:
        parsed = sdk_parse(data)
        return {k: data[k] if k in keep and isinstance(data[k], str) else v for k, v in parsed.items()}

    object.__setattr__(meta, "pre_parse_json", pre_parse_json)  # the SDK's FuncMetadata is a pydantic model


def serve(path: str | os.PathLike[str] | None = None, embedder: str | None = None) -> None:
    """Run the MCP server on stdin/stdout until the client closes the stream or Ctrl-C (KeyboardInterrupt: the
    call in progress finishes first; a second Ctrl-C abandons it, its transaction rolled back)."""
    server = build_server(path, embedder)
    try:
        server.run("stdio")
    finally:
        server._lantern_service.close()
