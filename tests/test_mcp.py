"""The MCP server end to end: the official SDK's client spawns `python -m lantern.cli --db TMP mcp` over stdio (real
SQLite file, the fake embedder (tests/conftest.py)), lists the tools, archives a conversation and recovers its port; the
tests of the tools' argument handling talk to the same server in-process (the SDK's in-memory transport)."""

from __future__ import annotations

import json
import os
import sys

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from samples import PORT_CONVERSATION as CONVERSATION  # noqa: E402


def _text(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")


# the SDK's 2.x renamed the result and tool fields to snake case (``structuredContent`` -> ``structured_content``):
# these read either, so the suite runs on 1.x (1.10 and later) and 2.x alike
def _err(result) -> bool:
    return result.is_error if hasattr(result, "is_error") else result.isError


def _data(result):
    return result.structured_content if hasattr(result, "structured_content") else result.structuredContent


def _schema(tool) -> dict:
    return tool.input_schema if hasattr(tool, "input_schema") else tool.inputSchema


def _out_schema(tool) -> dict:
    return tool.output_schema if hasattr(tool, "output_schema") else tool.outputSchema


async def _session_run(db, body):
    # the whole environment: the SDK passes only HOME, PATH, ... by default, and the server must import this
    # checkout's lantern (PYTHONPATH) and share the test run's USE load cache (conftest.py)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "lantern.cli", "--db", str(db), "mcp"], env=dict(os.environ)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await body(session)


async def _memory_run(db, body):
    """The server of ``lantern mcp`` (``build_server``: its tools, their argument checks and errors) in this process,
    over the SDK's in-memory transport; the stdio transport and the process are tested by the tests that spawn it."""
    from lantern.integrations.mcp import SDK_MAJOR, build_server

    server = build_server(db)
    try:
        if SDK_MAJOR >= 2:  # 2.x: its Client connects to a server object in-process
            async with mcp.Client(server) as session:
                return await body(session)
        from mcp.shared.memory import create_connected_server_and_client_session

        async with create_connected_server_and_client_session(server) as session:
            return await body(session)
    finally:
        server._lantern_service.close()


def test_mcp_end_to_end(tmp_path):
    db = tmp_path / "mcp.db"

    async def body(s: ClientSession):
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(tools) == {"archive", "recover", "recover_compaction", "search", "forget", "feedback", "stats"}
        assert _schema(tools["archive"])["required"] == ["messages"]
        assert _schema(tools["archive"])["properties"]["messages"]["type"] == "array"
        assert set(_schema(tools["recover"])["properties"]) >= {"query", "session", "budget"}
        assert set(_schema(tools["search"])["properties"]) == {"query", "k", "session", "user", "agent", "project"}
        assert set(_schema(tools["forget"])["properties"]) == {
            "entry",
            "session",
            "user",
            "agent",
            "project",
            "confirm",
        }
        assert _out_schema(tools["recover"])["required"] == ["text", "chars", "entries"]
        assert _out_schema(tools["stats"])["properties"]["entries"]["type"] == "integer"

        # a read before anything is archived: a tool error, the database is not created
        r = await s.call_tool("stats", {})
        assert _err(r) and "no database" in _text(r)
        assert not db.exists()

        r = await s.call_tool("archive", {"messages": CONVERSATION, "session": "build-42"})
        assert not _err(r), _text(r)
        archived = _data(r)
        assert archived["added"] == 2 and archived["session"] == "build-42" and len(archived["entry_ids"]) == 2
        r = await s.call_tool("archive", {"messages": CONVERSATION, "session": "build-42"})
        assert _data(r)["duplicates"] == 2 and _data(r)["added"] == 0

        # after a "compaction": the summary lost the port; recovery brings it back, excluding the live turns
        summary = "[Summary] The user set up the billing database and asked for docs."
        r = await s.call_tool(
            "recover",
            {
                "query": "which port does the billing database listen on?\n" + summary,
                "session": "build-42",
                "budget": 2000,
                "exclude": CONVERSATION[-2:],
            },
        )
        assert not _err(r), _text(r)
        rec = _data(r)
        assert "5433" in rec["text"] and rec["chars"] <= 2000 and len(rec["chars"] * "x") == len(rec["text"])
        assert [e["id"] for e in rec["entries"]] == [archived["entry_ids"][0]]  # the live turn is not re-injected
        assert "5433" in _text(r)  # the unstructured content carries it too
        assert "reason" in rec and rec["relevance"]["entries"] == 2
        # the compaction's own recovery: what the summary and the live turns lost, with the loss report
        r = await s.call_tool(
            "recover_compaction", {"summary": summary, "session": "build-42", "live": CONVERSATION[-2:]}
        )
        assert not _err(r), _text(r)
        comp = _data(r)
        assert "5433" in comp["text"] and comp["loss"]["by_type"]["port"]["packed"] >= 1
        assert [e["id"] for e in comp["entries"]] == [archived["entry_ids"][0]]
        r = await s.call_tool("recover_compaction", {"summary": summary, "session": "nobody"})
        assert _data(r)["reason"] == "nothing_archived" and _data(r)["text"] == ""
        assert _data(r)["loss"]["lost"] == 0  # the loss report is there whatever the result
        r = await s.call_tool("recover_compaction", {"summary": "x" * 1_000_001, "session": "build-42"})
        # over compaction.MAX_SUMMARY_CHARS: read up to there, the block still made and saying so
        assert not _err(r) and _data(r)["text"] and "1,000,001 characters" in _data(r)["detail"]
        r = await s.call_tool("recover", {"query": "   "})
        assert _data(r)["reason"] == "empty_query" and _data(r)["text"] == ""  # an empty block says why
        r = await s.call_tool("recover", {"query": "which hotel did I book in Lisbon for the wedding?"})
        assert _data(r)["reason"] == "below_floor" and "< min_score" in _data(r)["detail"]

        r = await s.call_tool("search", {"query": "postgres port", "k": 5})
        hits = _data(r)["hits"]
        assert hits and hits[0]["id"] == archived["entry_ids"][0] and "semantic" in hits[0]["ranks"]

        r = await s.call_tool("stats", {})
        assert _data(r)["entries"] == 2 and _data(r)["sessions"] == 1

        r = await s.call_tool("feedback", {"entry_ids": [archived["entry_ids"][0]], "useful": True})
        assert not _err(r) and _data(r) == {"updated": 1}
        r = await s.call_tool("feedback", {"entry_ids": [], "useful": True})
        assert _err(r)

        # an unreadable message is skipped and counted with a warning naming it, as in `lantern ingest`
        r = await s.call_tool("archive", {"messages": [{"role": 7, "content": {"x": 1}}], "session": "junk"})
        assert not _err(r) and _data(r)["skipped"] == 1 and "message 1" in _data(r)["warnings"][0]

        # bad input: tool errors, and the server keeps serving
        bad = [
            ("archive", {"messages": "not a list"}),
            ("archive", {"messages": []}),
            ("recover", {"query": "x", "budget": -1}),
            ("recover", {"query": "x", "exclude": ["nope"]}),
            ("recover", {}),
            ("search", {"query": "x", "k": 0}),
            ("forget", {}),
            ("forget", {"entry": 1, "session": "build-42"}),
            ("nonexistent", {}),
        ]
        for name, args in bad:
            r = await s.call_tool(name, args)
            assert _err(r), (name, args, _text(r))
            assert "Traceback" not in _text(r)

        preview = _data(await s.call_tool("forget", {"session": "build-42"}))  # a preview: nothing deleted
        assert preview["forgotten"] == 0 and preview["would_forget"] > 0 and preview["confirm"]
        r = await s.call_tool("forget", {"session": "build-42", "confirm": "not-the-token"})
        assert _err(r) and "nothing forgotten" in _text(r)
        r = await s.call_tool("forget", {"session": "build-42", "confirm": preview["confirm"]})
        assert _data(r) == {"forgotten": 2} == {"forgotten": preview["would_forget"]}
        r = await s.call_tool("forget", {"session": "build-42", "confirm": True})  # as --yes: no preview
        assert _data(r) == {"forgotten": 0}
        r = await s.call_tool("recover", {"query": "postgres port 5433"})
        assert not _err(r) and _data(r)["text"] == ""
        return True

    assert anyio.run(_session_run, db, body)


def test_mcp_empty_session_is_the_default_session_for_archive_and_forget(tmp_path):
    """``session: ""`` means the default session in both tools, as the REST API's archive takes it: archive stores
    into "default" and forget deletes it (before, forget with "" deleted nothing)."""
    db = tmp_path / "empty-session.db"

    async def body(s: ClientSession):
        r = await s.call_tool("archive", {"messages": CONVERSATION, "session": ""})
        assert not _err(r) and _data(r)["session"] == "default" and _data(r)["added"] == 2
        r = await s.call_tool(
            "archive", {"messages": [{"role": "user", "content": "keep this: port 6380"}], "session": "other"}
        )
        assert _data(r)["added"] == 1
        r = await s.call_tool("forget", {"session": "", "confirm": True})
        assert not _err(r) and _data(r) == {"forgotten": 2}, _text(r)
        r = await s.call_tool("stats", {})
        assert (_data(r)["entries"], _data(r)["sessions"]) == (1, 1)
        r = await s.call_tool("archive", {"messages": CONVERSATION, "session": "default"})
        assert _data(r)["added"] == 2
        r = await s.call_tool("forget", {"session": "default", "confirm": True})
        assert _data(r) == {"forgotten": 2}
        return True

    assert anyio.run(_memory_run, db, body)


def test_mcp_command_without_database_flag_uses_env(tmp_path, monkeypatch):
    """LANTERN_DB is honoured like in the rest of the CLI."""
    db = tmp_path / "env.db"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "lantern.cli", "mcp"],
        env={**__import__("os").environ, "LANTERN_DB": str(db)},
    )

    async def run():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            r = await s.call_tool(
                "archive", {"messages": [{"role": "user", "content": "deploy tag v2.3.1 to eu-west-1"}]}
            )
            assert not _err(r), _text(r)
            return json.loads(_text(r))

    assert anyio.run(run)["added"] == 1
    assert db.exists()


def test_mcp_argument_errors_are_one_line_naming_the_field(tmp_path):
    """Arguments that fail a tool's schema: one line per call naming each bad field and its problem (not the SDK's
    multi-line pydantic dump with its URLs); the server keeps serving."""
    cases = [
        ("archive", {}, "invalid arguments for archive: messages: required"),
        (
            "archive",
            {"messages": "not a list"},
            "invalid arguments for archive: messages: should be a valid list (got 'not a list')",
        ),
        (
            "search",
            {"query": "x", "k": 0},
            "invalid arguments for search: k: should be greater than or equal to 1 (got 0)",
        ),
        (
            "recover",
            {"query": "x", "budget": -1},
            "invalid arguments for recover: budget: should be greater than or equal to 0 (got -1)",
        ),
        (
            "recover",
            {"query": "x", "exclude": [{"role": "user", "content": "a"}, "nope"]},
            "invalid arguments for recover: exclude[1]: should be a valid dictionary or a valid integer",
        ),
        ("feedback", {"entry_ids": ["a", 2], "useful": "maybe"}, "invalid arguments for feedback: entry_ids[0]: "),
        ("forget", {"entry": 1.5}, "invalid arguments for forget: entry: should be a valid integer"),
        ("search", {"query": "x" * 500, "k": "many"}, "invalid arguments for search: k: should be a valid integer"),
    ]

    async def body(s: ClientSession):
        for name, args, want in cases:
            r = await s.call_tool(name, args)
            text = _text(r)
            assert _err(r) and text.startswith(want), (name, args, text)
            assert "\n" not in text and "pydantic" not in text and "validation error" not in text, text
        r = await s.call_tool("feedback", {"entry_ids": ["a", 2], "useful": "maybe"})
        assert "; useful: should be a valid boolean" in _text(r)  # every bad field is named
        return True

    assert anyio.run(_memory_run, tmp_path / "mcp.db", body)


def test_mcp_unknown_argument_names_are_rejected_in_one_line(tmp_path):
    """The SDK ignores argument names outside a tool's schema: a misspelt `sesion` would recover from every session.
    Each tool rejects them with one line naming them and the names it takes; nothing runs (no database is created),
    and the same call with the right name works."""

    async def body(s: ClientSession):
        r = await s.call_tool("archive", {"messages": CONVERSATION, "sesion": "s1"})
        assert _err(r) and _text(r) == (
            "unknown argument for archive: 'sesion' (archive takes messages, session, user, agent, project)"
        ), _text(r)
        assert not (tmp_path / "mcp.db").exists()  # rejected before the tool ran
        r = await s.call_tool("search", {"query": "port", "kk": 3, "scope": "x"})
        assert _err(r) and _text(r).startswith("unknown arguments for search: 'kk', 'scope' (search takes query, k,")
        r = await s.call_tool("stats", {"verbose": True})
        assert _err(r) and _text(r) == "unknown argument for stats: 'verbose' (stats takes user, agent, project)"
        for name in ("recover", "forget", "feedback"):
            r = await s.call_tool(name, {"query": "x", "entry_ids": [1], "useful": True, "bogus\nname": 1})
            text = _text(r)
            assert _err(r) and text.startswith("unknown argument") and "'bogus\\nname'" in text and "\n" not in text, (
                text
            )
        r = await s.call_tool("archive", {"messages": CONVERSATION, "session": "s1"})
        assert not _err(r) and _data(r)["added"] >= 1
        r = await s.call_tool(
            "recover", {"query": "which port does postgres listen on?", "session": "s1", "budget": 2000}
        )
        assert not _err(r) and _data(r)["entries"]
        r = await s.call_tool("archive", {"messages": [{"role": "user", "content": "still serving"}]})
        assert not _err(r) and _data(r)["added"] == 1
        return True

    assert anyio.run(_memory_run, tmp_path / "mcp.db", body)


def _raw_server(db):
    """The server over raw stdio (the SDK's client cannot send a lone surrogate escape or JSON nested that deep)."""
    import subprocess

    proc = subprocess.Popen(
        [sys.executable, "-m", "lantern.cli", "--db", str(db), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    return proc


def _raw_exchange(proc, line: bytes, timeout: float = 60.0) -> dict:
    """Send one line; the next line the server writes that is a response (notifications are skipped)."""
    import select
    import time

    proc.stdin.write(line + b"\n")
    proc.stdin.flush()
    deadline = time.monotonic() + timeout
    while True:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"no answer within {timeout} s to {line[:120]!r}"
        out = proc.stdout.readline()
        assert out, "the server closed stdout"
        message = json.loads(out)  # nothing but JSON-RPC on stdout
        if "id" in message:
            return message


def test_mcp_answers_lone_surrogates_and_deep_nesting(tmp_path):
    """The SDK's JSON parser refuses a lone surrogate escape (JavaScript's JSON.stringify writes "\\ud83d" for an
    emoji cut in half) and JSON nested deeper than ~128 levels, and answered nothing: the client waited for ever.
    A lone surrogate is now archived as U+FFFD; a request nested too deeply, or not JSON at all, gets an error
    with its id; the server keeps serving."""
    proc = _raw_server(tmp_path / "mcp.db")
    try:
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        }
        assert _raw_exchange(proc, json.dumps(init).encode())["id"] == 0
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

        def call(i: int, arguments: bytes, name: bytes = b"archive") -> dict:
            line = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":%s}}' % (
                i,
                name,
                arguments,
            )
            r = _raw_exchange(proc, line)
            assert r["id"] == i, r
            return r

        r = call(
            1,
            b'{"messages":[{"role":"user","content":"emoji cut \\ud83d: port 5433 \xe7\xab\xaf\xe5\x8f\xa3"}],'
            b'"session":"s\\udc00"}',
        )
        assert not r["result"]["isError"], r
        assert (
            r["result"]["structuredContent"]["added"] == 1 and r["result"]["structuredContent"]["session"] == "s\ufffd"
        )
        r = call(2, b'{"query":"port \\udfff","budget":500}', b"recover")
        assert (
            "5433" in r["result"]["structuredContent"]["text"] and "\ufffd" in r["result"]["structuredContent"]["text"]
        )
        nested = b"[" * 200 + b"]" * 200  # past the SDK parser's limit, within Python's: read and archived
        r = call(3, b'{"messages":[{"role":"user","content":"deep tool args","x":%s}]}' % nested)
        assert r["result"]["structuredContent"]["added"] == 1, r
        nested = b"[" * 100_000 + b"]" * 100_000  # past every parser: an error answering id 3
        r = call(3, b'{"messages":[{"role":"user","content":%s}]}' % nested)
        assert r["error"]["code"] == -32700 and "nested too deeply" in r["error"]["message"], r
        r = _raw_exchange(proc, b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"stats"')
        assert r["id"] == 4 and r["error"]["code"] == -32700
        r = _raw_exchange(proc, b'{"id":"five","method":5}')
        assert r["id"] == "five" and r["error"]["code"] == -32600
        r = call(6, b"{}", b"stats")
        assert r["result"]["structuredContent"]["entries"] == 2
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0


def test_mcp_exits_quietly_when_the_client_goes_away_mid_call(tmp_path):
    """A client that dies (both pipes closed) while a call runs: the call's write completes, and the server
    exits 0 with nothing on stderr (it used to exit 1 with "internal error ExceptionGroup")."""
    import subprocess
    import time

    db = tmp_path / "mcp.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "lantern.cli", "--db", str(db), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ),
    )
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }
    assert _raw_exchange(proc, json.dumps(init).encode())["id"] == 0
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "archive",
            "arguments": {"messages": [{"role": "user", "content": "the api listens on port 5433 " * 500}]},
        },
    }
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n' + json.dumps(call).encode() + b"\n")
    proc.stdin.flush()
    time.sleep(0.2)
    proc.stdin.close()
    proc.stdout.close()
    try:
        err = proc.stderr.read()
        assert proc.wait(timeout=60) == 0, err
    finally:
        proc.kill()
    assert err == b""
    from lantern import Lantern

    assert Lantern(db).stats()["entries"] == 1


def _interrupted_mid_call(db, second: bool, busy: bool = True, signals: int = 1):
    """Start the server, warm it with one call, send a long archive call (``busy``), Ctrl-C it once, twice
    (``second``) or ``signals`` times a second apart; the client keeps stdin open throughout."""
    import signal
    import subprocess
    import time

    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "lantern.cli", "--db", str(db), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }
    assert _raw_exchange(proc, json.dumps(init).encode())["id"] == 0
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    warm = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "archive",
            "arguments": {"messages": [{"role": "user", "content": "warm the embedding model"}]},
        },
    }
    assert _raw_exchange(proc, json.dumps(warm).encode())["id"] == 1
    big = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {
            "name": "archive",
            "arguments": {
                "messages": [
                    {"role": "user", "content": f"message {i}: service {i} listens on port {5000 + i}"}
                    for i in range(800)
                ]
            },
        },
    }
    if busy:
        proc.stdin.write(json.dumps(big).encode() + b"\n")
        proc.stdin.flush()
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    for _ in range(signals - 1):
        time.sleep(1.0)
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGINT)
    if second:
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
    try:  # stdin stays open, as a client's does: the server must stop on Ctrl-C alone
        proc.wait(timeout=120)
        err = proc.stderr.read()
    finally:
        proc.kill()
    return proc.returncode, err.decode("utf-8", "replace")


@pytest.mark.real_models  # the call in progress is the real model embedding a big archive (fake: done in 0.5 s)
def test_mcp_ctrl_c_finishes_the_call_in_progress_and_says_so(tmp_path):
    """Ctrl-C during a call: the call's write completes (one transaction), a line on stderr says so, exit 130."""
    from lantern import Lantern

    rc, err = _interrupted_mid_call(tmp_path / "mcp.db", second=False)
    assert rc == 130
    assert err.strip() == (
        "lantern mcp: interrupted; finishing the call in progress, then stopping "
        "(Ctrl-C again to abandon it: nothing of it is stored)"
    )
    assert Lantern(tmp_path / "mcp.db").stats()["entries"] == 1 + 800


@pytest.mark.real_models  # the call in progress is the real model embedding a big archive (fake: done in 0.5 s)
def test_mcp_second_ctrl_c_abandons_the_call_and_stores_none_of_it(tmp_path):
    """A second Ctrl-C leaves at once (it used to print a long ExceptionGroup traceback): none of the call is
    stored, the database is intact and keeps what earlier calls wrote."""
    import sqlite3

    from lantern import Lantern

    rc, err = _interrupted_mid_call(tmp_path / "mcp.db", second=True)
    assert rc == 130
    assert "Traceback" not in err and "Group" not in err and err.count("\n") == 1, err[:2000]
    with sqlite3.connect(tmp_path / "mcp.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert Lantern(tmp_path / "mcp.db").stats()["entries"] == 1


def test_mcp_a_json_integer_longer_than_python_converts_is_read_as_in_every_parser(tmp_path):
    """A request holding an integer of 5,000 digits (valid JSON) was refused whole as "invalid JSON: Exceeds the limit
    (4300 digits) ... use sys.set_int_max_str_digits()", while `lantern ingest` archives the same messages: such an
    integer now keeps its digits as text, as in every transcript parser; where an integer is expected the error is
    one line (breaker finding)."""
    import subprocess

    big = "9" * 5000
    proc = subprocess.Popen(
        [sys.executable, "-m", "lantern.cli", "--db", str(tmp_path / "mcp.db"), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ),
    )
    try:
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        }
        assert _raw_exchange(proc, json.dumps(init).encode())["id"] == 0
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

        def call(i, name, arguments):
            line = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":%s}}' % (  # noqa: UP031
                i,
                name,
                arguments,
            )
            return _raw_exchange(proc, line.encode())

        r = call(
            1,
            "archive",
            '{"messages":[{"role":"user","content":"the api listens on port 5433"},{"role":"assistant",'  # noqa: UP031
            '"content":[{"type":"tool_use","id":"t1","name":"probe","input":{"n":%s}}]}]}' % big,
        )
        assert r["result"]["structuredContent"]["added"] == 1, r
        r = call(2, "feedback", '{"entry_ids":[%s],"useful":true}' % big)  # noqa: UP031
        text = r["result"]["content"][0]["text"]
        assert r["result"]["isError"] and text.startswith("invalid arguments for feedback: entry_ids[0]: "), text
        assert "\n" not in text and "set_int_max_str_digits" not in text, text
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0


def test_mcp_ctrl_c_stops_an_idle_server_while_the_client_keeps_stdin_open(tmp_path):
    """Ctrl-C between calls, stdin still open (a terminal, or a client that stays): exit 130 at once, nothing on
    stderr. The stdin reader used to be a worker thread's readline that nothing could cancel: the server ran on
    until stdin closed, and a third Ctrl-C aborted the interpreter (SIGABRT, "could not acquire lock for stdin")."""
    from lantern import Lantern

    rc, err = _interrupted_mid_call(tmp_path / "mcp.db", second=False, busy=False, signals=3)
    assert rc == 130 and err == ""
    assert Lantern(tmp_path / "mcp.db").stats()["entries"] == 1


def test_mcp_a_boolean_or_a_string_is_no_entry_id(tmp_path):
    """``forget {"entry": true}`` deleted entry 1 and ``{"entry": "2"}`` entry 2 (pydantic's lax coercion);
    ids, counts and ``useful`` are strict now: a tool error, nothing deleted or updated (breaker finding)."""

    async def body(s):
        r = await s.call_tool(
            "archive",
            {
                "messages": [
                    {"role": "user", "content": "the api listens on port 5433"},
                    {"role": "assistant", "content": "noted"},
                    {"role": "user", "content": "redis is on 6380"},
                ]
            },
        )
        assert not _err(r) and _data(r)["added"] == 2
        for name, args in [
            ("forget", {"entry": True}),
            ("feedback", {"entry_ids": [True], "useful": True}),
            ("feedback", {"entry_ids": [1], "useful": "yes"}),
            ("recover", {"query": "port", "exclude": [True]}),
        ]:
            r = await s.call_tool(name, args)
            assert _err(r) and "should be a valid" in _text(r), (name, args, _text(r))
        r = await s.call_tool("stats", {})
        return _data(r)["entries"]

    assert anyio.run(_memory_run, tmp_path / "mcp.db", body) == 2


def test_mcp_reports_lanterns_version(tmp_path):
    """The server's ``serverInfo`` is Lantern's name and version (the ``lantern-memory`` distribution), not the
    SDK's: 1.x's FastMCP would report the version of ``mcp`` itself."""
    from importlib.metadata import version

    from lantern.integrations.mcp import lantern_version

    async def run():
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "lantern.cli", "--db", str(tmp_path / "v.db"), "mcp"],
            env=dict(os.environ),
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            info = init.server_info if hasattr(init, "server_info") else init.serverInfo
            return info.name, info.version

    name, reported = anyio.run(run)
    assert (name, reported) == ("lantern", lantern_version())
    assert reported == version("lantern-memory") and reported != version("mcp")


# JSON texts of objects and lists: what the SDK's pre-parse turns into an object when a field's type is not just str
_JSON_TEXTS = (
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
        max_leaves=6,
    )
    .filter(lambda v: isinstance(v, list | dict))
    .map(json.dumps)
)


def _string_fields(server) -> list[tuple[str, str]]:
    """(tool, argument) for every argument whose schema takes a string."""

    def takes_string(prop: dict) -> bool:
        return prop.get("type") == "string" or any(takes_string(p) for p in prop.get("anyOf", ()))

    return [
        (t.name, arg)
        for t in anyio.run(server.list_tools)
        for arg, prop in (_schema(t).get("properties") or {}).items()
        if takes_string(prop)
    ]


def test_mcp_string_arguments_stay_strings(tmp_path):
    """A string given to any argument that takes strings reaches the tool as that string, JSON-looking or not: a
    session or user named ``{"a": 1}`` is a name (the SDK's pre-parse made it an object, refused as not a string)."""
    from lantern.integrations.mcp import build_server

    server = build_server(tmp_path / "strings.db")
    try:
        fields = _string_fields(server)
        assert ("archive", "session") in fields and ("search", "query") in fields

        @given(text=_JSON_TEXTS)
        @settings(max_examples=examples(60), deadline=None)
        def check(text):
            for name, arg in fields:
                tool = server._tool_manager.get_tool(name)
                assert tool.fn_metadata.pre_parse_json({arg: text})[arg] == text, (name, arg)

        check()
    finally:
        server._lantern_service.close()


def test_mcp_session_named_like_json_round_trips(tmp_path):
    """End to end: archive into a session named as a JSON object, find it by that name, forget it by that name."""
    name = '{"a": 1}'

    async def body(s: ClientSession):
        r = await s.call_tool("archive", {"messages": CONVERSATION, "session": name, "user": "[1, 2]"})
        assert not _err(r) and _data(r)["session"] == name, _text(r)
        r = await s.call_tool("search", {"query": "postgres port", "session": name, "user": "[1, 2]"})
        assert not _err(r) and _data(r)["hits"], _text(r)
        r = await s.call_tool("forget", {"session": name, "user": "[1, 2]", "confirm": True})
        assert _data(r) == {"forgotten": 2}, _text(r)
        return True

    assert anyio.run(_memory_run, tmp_path / "json-name.db", body)


def test_lantern_mcp_help_names_every_tool_the_server_has(tmp_path):
    """Newcomer finding: ``lantern mcp --help`` listed six tools after recover_compaction made seven; the help's
    list is read against the server's own."""
    import re

    from clirun import lantern as cli
    from lantern.integrations.mcp import build_server

    tools = {t.name for t in anyio.run(build_server(tmp_path / "help.db").list_tools)}
    shown = re.search(r"\(tools ([a-z_, ]+)\)", " ".join(cli("mcp", "--help", columns=400).stdout.decode().split()))
    assert shown is not None and set(shown.group(1).split(", ")) == tools


def test_integrations_md_tables_name_every_mcp_tool_and_memory_route(tmp_path):
    """Newcomer finding: the MCP and REST tables of docs/integrations.md left out recover_compaction (the tool and
    ``POST /v1/memory/recover_compaction``). Each table is read against the server's own tools and routes."""
    import re
    from pathlib import Path

    from lantern.integrations.mcp import build_server
    from lantern.integrations.proxy import memory_routes

    doc = (Path(__file__).resolve().parents[1] / "docs/integrations.md").read_text(encoding="utf-8")
    tools = {t.name for t in anyio.run(build_server(tmp_path / "doc.db").list_tools)}
    assert tools - set(re.findall(r"^\| `([a-z_]+)` \|", doc, re.M)) == set()
    routes = {(m, r.path) for r in memory_routes.routes for m in r.methods}
    assert routes - set(re.findall(r"^\| `(GET|POST|DELETE|PUT) (/v1/memory/[a-z_/]+)", doc, re.M)) == set()
