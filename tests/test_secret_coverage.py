"""Secret coverage by generator (issue 38, item 3; issue 20, item 1): the formats are the tables of the code, not a
list kept here. Every row of ``secret_tokens.TOKENS`` (provider token formats), ``secret_context.CONTEXTS`` (config
contexts) and ``secret_statements.CONTEXTS`` (statements, calls, prose), and one assignment per provider word of
``secret_context.PROVIDER_WORDS``, gives samples (its generators, ``secret_tokens.sample``) and look-alikes. Every
sample is stored through every entry path — the archive API, ingest of each transcript format, the REST API and the
forwarding proxy of ``lantern serve``, the MCP server, import of an export — into a real SQLite file, and the random
parts of every sample are looked for in the raw bytes of the ``.db`` and ``-wal`` files (the WAL not checkpointed:
every page written is in it) and in every column as read (summary and tags may be stored deflated). The archive path
puts each case, round robin, in a place of a turn or in one of the other fields a message or a call carries (speaker
name, meta, tool names, a transcript's session, files, the session, user, agent and project a call names:
``FIELDS``); the REST, proxy, MCP and import paths name each case's session after its secret when it fits a name.
Each case carries a marker word, which must be stored, so a format the path did not read cannot pass unnoticed.
Look-alikes (identifiers that are not secrets: Twilio account SIDs, publishable keys, prefixes as words, shorter
runs) must come out unchanged.

The random bodies come from ``random.Random(SEED)`` (``$LANTERN_SECRET_SEED`` picks another run).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from lantern import Lantern
from lantern.archive import secret_context, secret_statements
from lantern.archive.redact import META_SALT, PLACEHOLDER_RE, find_secrets, make_policy, redact_text
from lantern.archive.secret_context import PROVIDER_WORDS
from lantern.archive.secret_tokens import TOKENS, sample
from lantern.store.facts import MAX_FACT_BYTES
from lantern.store.sqlite import Store

# the config contexts (secret_context) and the statement, call and prose forms (secret_statements): one table
CONTEXTS = secret_context.CONTEXTS + secret_statements.CONTEXTS
SEED = int(os.environ.get("LANTERN_SECRET_SEED", "38"))
NEUTRAL = "Here it is, {s} , rotate it next week."
PLACES = ("user", "tool-result", "arguments", "assistant")


@dataclass(frozen=True)
class Case:
    """A generated secret in its text: ``parts`` are the random pieces the generator drew (8+ characters each),
    which must not reach the database; ``marker`` is a word of the text that must."""

    id: str
    text: str
    parts: tuple[str, ...]
    marker: str


def _provider_key(word: str) -> str:
    """An assignment's key naming the provider ``word`` and no secret word (only the provider table can find it)."""
    base = word.upper().replace("-", "_").strip("_")
    return base if "KEY" in base else f"{base}_CREDS"


def generated(seed: int = SEED) -> list[Case]:
    """One case per sample spec of every TOKENS row, one per CONTEXTS row and one per provider word."""
    rng = random.Random(seed)
    out: list[Case] = []

    def add(cid: str, text: str, parts: list[str]) -> None:
        marker = f"case{len(out):04d}x"
        out.append(Case(cid, f"{marker}\n{text}", tuple(p for p in parts if len(p) >= 8), marker))

    for i, rule in enumerate(TOKENS):
        for j, spec in enumerate(rule.samples):
            parts: list[str] = []
            value = sample(spec, rng, parts)
            if rule.keep_prefix:  # the trigger (a webhook's host and path) stays; what follows it is the secret
                parts = [p for p in parts if not any(p in t for t in rule.triggers)]
            add(f"{rule.kind}/{i}.{j}", NEUTRAL.format(s=value), parts)
    for row in CONTEXTS:
        parts = []
        secret = sample(row.secret, rng, parts)
        text = sample(row.template.replace("{s}", "\x00"), rng).replace("\x00", secret)
        add(f"context/{row.id}", text, [*parts, secret])
    for word in sorted(PROVIDER_WORDS):
        parts = []
        value = sample("{28:A}{2:d}{2:A}", rng, parts)
        add(f"provider/{word}", f"{_provider_key(word)}={value}", ["".join(parts)])
    return out


def _cut(text: str, parts: tuple[str, ...]) -> str:
    for p in parts:
        text = text.replace(p, "\x00")
    return text


def lookalikes(seed: int = SEED) -> list[tuple[str, str]]:
    """(row id, text) of every look-alike of every row, and two benign assignments per provider word."""
    rng = random.Random(seed + 1)
    out = [(rule.kind, sample(spec, rng)) for rule in TOKENS for spec in rule.lookalikes]
    out += [(row.id, sample(spec, rng)) for row in CONTEXTS for spec in row.lookalikes]
    for word in sorted(PROVIDER_WORDS):
        base = _provider_key(word).removesuffix("_CREDS")
        out += [(word, f"{base}_REGION=us-east-1"), (word, f"{base}_USERNAME=deploy-bot")]
    return out


CASES = generated()
LOOKALIKES = lookalikes()
# every text with its random parts cut out: what the formats themselves hold (a PEM's "-----BEGIN", a template's kept
# certificate), which a window of a part may share without being a leak
FIXED = "\n".join(_cut(c.text, c.parts) for c in CASES)


def test_every_row_has_a_source_samples_and_lookalikes():
    assert all(r.source and r.samples and r.lookalikes for r in TOKENS)
    assert all(c.source and c.secret and c.lookalikes and "{s}" in c.template for c in CONTEXTS)
    assert len({c.id for c in CONTEXTS}) == len(CONTEXTS)
    assert len(CASES) >= 200 and len({c.id for c in CASES}) == len(CASES)
    assert all(c.parts for c in CASES), [c.id for c in CASES if not c.parts]


# ---------------------------------------------------------------------------------------------- entry paths
def turn(text: str, place: str, i: int) -> list[dict]:
    """A conversation turn holding ``text`` in ``place`` (tool-call arguments: json.dumps, ASCII escapes)."""
    if place == "user":
        return [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]
    if place == "assistant":
        return [{"role": "user", "content": "What is configured?"}, {"role": "assistant", "content": text}]
    call = {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"cmd": "cat x"})}}
    if place == "arguments":
        call["function"]["arguments"] = json.dumps({"cmd": f"echo start\n{text}\necho done"})
    msgs = [
        {"role": "user", "content": "Check the settings."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    result = text if place == "tool-result" else "ok"
    return msgs + [
        {"role": "tool", "tool_call_id": f"c{i}", "content": result},
        {"role": "assistant", "content": "Done."},
    ]


# ---------------------------------------------------------------------------------------------- every stored field
# Every field of what the write path stores, by how its text is kept out of the database in clear: redacted on the
# way in (archive/redact.py: redact_messages for a message's fields, redact_name for names, Scope.name), derived
# from redacted text, or no free text at all. A field added to one of these classes fails
# test_every_stored_field_is_classified until it is put in one of them (and, if it holds text, covered below).
REDACTED_FIELDS = {
    "Message": {"text", "tool_calls", "tool_results", "files", "name", "session", "meta"},
    "ToolCall": {"name", "arguments"},
    "ToolResult": {"content", "name"},
    "NewEntry": {"session", "meta", "user", "agent", "project"},
}
DERIVED_FIELDS = {"NewEntry": {"text", "summary", "tags", "hints", "facts", "content_hash"}}
NOT_TEXT_FIELDS = {
    "Message": {"role", "time"},  # a role of a closed set (parse/objects.py norm_role); a datetime
    "ToolCall": {"id"},  # ids pair a call with its result; never stored
    "ToolResult": {"call_id"},
    "NewEntry": {"memory_type", "importance", "time", "tool_count", "file_count", "category"},
}
# (field, where the case's text goes): each case in one of them, round robin; names hold at most MAX_ID_CHARS
FIELDS = ("name", "meta", "tool-name", "result-name", "message-session", "files", "session", "user", "agent", "project")
NAME_FIELDS = {"session", "user", "agent", "project", "message-session"}
NAME_CASE_CHARS = 200  # ours: a case whose text is longer goes elsewhere (a name holds at most 256 characters)


def _field_case(c: Case, where: str, i: int) -> tuple[list, dict]:
    """(messages, archive keywords) holding ``c.text`` in ``where``, and its marker in the user's text."""
    from lantern.model import Message, ToolCall, ToolResult

    kw: dict = {"session": f"fields-{i}"}
    user = Message("user", f"{c.marker} Check the settings {i}.")  # the marker in the text, wherever the case is
    reply = Message("assistant", "Done.")
    if where == "name":
        user.name = c.text
    elif where == "meta":
        user.meta = {"note": c.text, "nested": [{"deep": c.text}]}
    elif where == "files":
        user.files = [c.text]
    elif where == "message-session":
        user.session = reply.session = c.text
    elif where in ("tool-name", "result-name"):
        call = ToolCall(c.text if where == "tool-name" else "bash", "{}", f"c{i}")
        result = ToolResult("ok", f"c{i}", c.text if where == "result-name" else None)
        return [user, Message("assistant", tool_calls=[call]), Message("tool", tool_results=[result]), reply], kw
    else:  # a name the call gives
        kw[where] = c.text
    return [user, reply], kw


def _via_archive(cases: list[Case], db: Path, tmp: Path) -> None:
    """Each case in one place of a turn (PLACES) or one field (FIELDS), round robin; a case too long for a name
    goes to the next place that is not one."""
    places = (*PLACES, *FIELDS)
    with Lantern(db) as lt:
        for i, c in enumerate(cases):
            k = i % len(places)
            while places[k] in NAME_FIELDS and len(c.text) > NAME_CASE_CHARS:
                k = (k + 1) % len(places)
            if places[k] in PLACES:
                messages, kw = turn(c.text, places[k], i), {"session": c.id}
            else:
                messages, kw = _field_case(c, places[k], i)
            assert lt.archive(messages, **kw).added >= 1, c.id


def _name(c: Case) -> str:
    """The session a REST, proxy or MCP call names for case ``c``: the case's secret line when it fits a name and
    a header (no line break, Latin-1) and is no JSON text (the MCP SDK reads a JSON-looking string argument as the
    value it spells), else the case's id."""
    line = c.text.split("\n", 1)[1]
    fits = len(line) <= NAME_CASE_CHARS and line.isprintable() and line.isascii()
    return line if fits and not line.lstrip().startswith(("{", "[", '"')) else c.id


def _transcript(fmt: str, cases: list[Case]) -> str:
    """Every case as a turn of one transcript in ``fmt``; a case is in a tool call's arguments and its result
    where the format has tool calls, else in the user's message."""
    if fmt == "openai":
        msgs = []
        for i, c in enumerate(cases):
            msgs += turn(c.text, PLACES[i % len(PLACES)], i)
        return json.dumps(msgs)
    if fmt == "anthropic":
        msgs = []
        for i, c in enumerate(cases):
            msgs += [
                {"role": "user", "content": "Check the settings."},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {"cmd": c.text}}],
                },
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": c.text}]},
                {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
            ]
        return json.dumps({"model": "claude-x", "system": "You are a coding assistant.", "messages": msgs})
    if fmt == "jsonl":
        lines = []
        for c in cases:
            lines += [{"role": "user", "content": c.text}, {"role": "assistant", "content": "Noted."}]
        return "\n".join(json.dumps(x) for x in lines) + "\n"
    if fmt == "aider":
        parts = ["# aider chat started at 2026-01-05 10:00:00\n"]
        for c in cases:
            quoted = "\n".join(f"#### {line}  " for line in c.text.split("\n"))
            parts.append(f"{quoted}\n\nNoted.\n")
        return "\n".join(parts)
    if fmt == "sharegpt":
        conv = []
        for c in cases:
            conv += [{"from": "human", "value": c.text}, {"from": "gpt", "value": "Noted."}]
        return json.dumps([{"id": "s1", "conversations": conv}])
    if fmt == "locomo":
        turns = []
        for i, c in enumerate(cases):
            turns += [
                {"speaker": "Ada", "dia_id": f"D1:{2 * i + 1}", "text": c.text},
                {"speaker": "Ben", "dia_id": f"D1:{2 * i + 2}", "text": "Noted."},
            ]
        conv = {
            "speaker_a": "Ada",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": turns,
        }
        return json.dumps([{"sample_id": "conv-1", "conversation": conv, "qa": []}])
    if fmt == "claude-code":
        lines, parent = [], None
        for i, c in enumerate(cases):
            for kind, message in (
                ("user", {"role": "user", "content": "Check the settings."}),
                (
                    "assistant",
                    {
                        "id": f"msg_{i}",
                        "type": "message",
                        "role": "assistant",
                        "model": "claude-x",
                        "content": [
                            {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": c.text}}
                        ],
                    },
                ),
                (
                    "user",
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": c.text}],
                    },
                ),
                (
                    "assistant",
                    {
                        "id": f"msg_{i}b",
                        "type": "message",
                        "role": "assistant",
                        "model": "claude-x",
                        "content": [{"type": "text", "text": "Done."}],
                    },
                ),
            ):
                uid = f"{len(lines):08d}-1c2d-4e5f-8a9b-{len(lines):012d}"
                lines.append(
                    {
                        "parentUuid": parent,
                        "isSidechain": False,
                        "type": kind,
                        "uuid": uid,
                        "sessionId": "7f3c2a10-5b1e-4c8e-9d2a-1e6f0b7c9a41",
                        "timestamp": f"2026-01-05T10:{len(lines) // 60 % 60:02d}:{len(lines) % 60:02d}.000Z",
                        "cwd": "/home/dev/app",
                        "message": message,
                    }
                )
                parent = uid
        return "\n".join(json.dumps(x) for x in lines) + "\n"
    if fmt == "codex":
        lines = [
            {
                "timestamp": "2026-01-05T10:00:00.000Z",
                "type": "session_meta",
                "payload": {
                    "id": "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5",
                    "cwd": "/home/dev/app",
                    "originator": "codex_cli_rs",
                },
            }
        ]
        for i, c in enumerate(cases):
            for payload in (
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Check the settings."}]},
                {
                    "type": "function_call",
                    "name": "shell",
                    "arguments": json.dumps({"command": ["bash", "-lc", c.text]}),
                    "call_id": f"call_{i}",
                },
                {
                    "type": "function_call_output",
                    "call_id": f"call_{i}",
                    "output": json.dumps({"output": c.text, "metadata": {"exit_code": 0}}),
                },
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
            ):
                lines.append({"timestamp": "2026-01-05T10:00:01.000Z", "type": "response_item", "payload": payload})
        return "\n".join(json.dumps(x) for x in lines) + "\n"
    if fmt == "swe_agent":
        history = [
            {"role": "system", "content": "SETTING: You are an autonomous programmer.", "agent": "primary"},
            {"role": "user", "content": "ISSUE: check the settings.", "agent": "primary"},
        ]
        steps = [
            {
                "thought": "Let me look.",
                "action": f"cat settings_{i}.env",
                "observation": c.text,
                "response": "...",
                "state": "{}",
            }
            for i, c in enumerate(cases)
        ]
        return json.dumps({"environment": "swe_main", "trajectory": steps, "history": history, "info": {}})
    raise ValueError(fmt)


INGEST_FORMATS = ("openai", "anthropic", "jsonl", "aider", "sharegpt", "locomo", "claude-code", "codex", "swe_agent")
SUFFIX = {"jsonl": ".jsonl", "claude-code": ".jsonl", "codex": ".jsonl", "aider": ".md", "swe_agent": ".traj"}


def _via_ingest(fmt: str):
    def store(cases: list[Case], db: Path, tmp: Path) -> None:
        path = tmp / f"transcript{SUFFIX.get(fmt, '.json')}"
        path.write_text(_transcript(fmt, cases), encoding="utf-8")
        with Lantern(db) as lt:
            r = lt.ingest(path, format=fmt)
            assert r.added >= 1 and not r.skipped, (fmt, r)

    return store


def _upstream(port: int):
    """A chat-completions server that answers with the last message's content (the reply archived holds it)."""
    import uvicorn
    from fastapi import FastAPI

    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(body: dict):
        last = body["messages"][-1]["content"]
        message = {"role": "assistant", "content": f"You said: {last}"}
        return {
            "id": "c1",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
        }

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    return server, thread


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _via_rest(cases: list[Case], db: Path, tmp: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from lantern.integrations.proxy import build_app

    with TestClient(build_app(db), raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
        for i, c in enumerate(cases):
            r = client.post(
                "/v1/memory/archive", json={"messages": turn(c.text, PLACES[i % len(PLACES)], i), "session": _name(c)}
            )
            assert r.status_code == 200 and r.json()["added"] >= 1, (c.id, r.text)


def _via_proxy(cases: list[Case], db: Path, tmp: Path) -> None:
    pytest.importorskip("uvicorn")
    from fastapi.testclient import TestClient

    from lantern.integrations.proxy import build_app

    port = _free_port()
    server, thread = _upstream(port)
    try:
        app = build_app(db, upstream=f"http://127.0.0.1:{port}/v1", upstream_timeout=10.0)
        with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
            for c in cases:
                body = {
                    "model": "tiny",
                    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": c.text}],
                }
                r = client.post("/v1/chat/completions", json=body, headers={"X-Lantern-Session": _name(c)})
                assert r.status_code == 200 and c.marker in r.json()["choices"][0]["message"]["content"], (c.id, r.text)
    finally:
        server.should_exit = True
        thread.join(timeout=5)


def _via_mcp(cases: list[Case], db: Path, tmp: Path) -> None:
    mcp = pytest.importorskip("mcp")
    from lantern.integrations.mcp import SDK_MAJOR, build_server

    async def run() -> None:
        server = build_server(db)
        try:
            if SDK_MAJOR >= 2:
                client = mcp.Client(server)
            else:
                from mcp.shared.memory import create_connected_server_and_client_session

                client = create_connected_server_and_client_session(server)
            async with client as session:
                for i, c in enumerate(cases):
                    result = await session.call_tool(
                        "archive", {"messages": turn(c.text, PLACES[i % len(PLACES)], i), "session": _name(c)}
                    )
                    assert not getattr(result, "is_error", getattr(result, "isError", False)), c.id
        finally:
            server._lantern_service.close()

    asyncio.run(run())


def _via_import(cases: list[Case], db: Path, tmp: Path) -> None:
    """An export written by another tool (or a database with redaction off): every field holds the case's text."""
    with Lantern(db) as lt:
        header = {
            "type": "header",
            "format": "lantern-export",
            "version": 1,
            "embedder": lt.embedder.id,
            "dim": lt.embedder.dim,
            "embeddings": False,
        }
        lines = [header]
        for i, c in enumerate(cases):
            lines.append(
                {
                    "type": "entry",
                    "id": i + 1,
                    "session": _name(c),
                    "turn": 0,
                    "time": 1_767_600_000.0 + i,
                    "archived_at": 1_767_600_000.0 + i,
                    "text": f"user: {c.text}\nassistant: Noted.",
                    "summary": c.text,
                    "tags": [["secret", c.text]],
                    "hints": [c.text],
                    "meta": {"note": c.text},
                    **({"agent_id": c.text} if len(c.text) <= 200 else {}),  # a name (store/transfer.py limits)
                    "facts": [
                        {
                            "key": "setting",
                            "key_text": "setting",
                            "value": c.text,
                            "replaces": None,
                            "recorded_at": None,
                        }
                    ]
                    if len(c.text.encode()) <= MAX_FACT_BYTES
                    else [],
                }
            )
        path = tmp / "export.jsonl"
        path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
        assert lt.import_(path, embeddings=False).added == len(cases)


ENTRY_PATHS = {
    "archive": _via_archive,
    **{f"ingest-{fmt}": _via_ingest(fmt) for fmt in INGEST_FORMATS},
    "rest": _via_rest,
    "proxy": _via_proxy,
    "mcp": _via_mcp,
    "import": _via_import,
}


def raw_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())


def forms(piece: str, fixed: str) -> set[bytes]:
    """The byte forms a random piece may take in the file: as is, JSON-escaped (with and without ASCII escapes),
    and, for a piece of 16+ characters, its first, middle and last 12 characters (a secret redacted in part) unless
    ``fixed`` (the texts without their random parts) holds them (every base64 PEM starts with "LS0tLS1CRUdJ")."""
    whole = {piece, json.dumps(piece)[1:-1], json.dumps(piece, ensure_ascii=False)[1:-1]}
    if len(piece) >= 16:
        whole |= {w for j in (0, len(piece) // 2 - 6, len(piece) - 12) if (w := piece[j : j + 12]) not in fixed}
    return {s.encode() for s in whole if s}


@pytest.mark.parametrize("path_name", list(ENTRY_PATHS))
def test_no_generated_secret_reaches_the_raw_database_file(path_name, tmp_path):
    db = tmp_path / "coverage.db"
    ENTRY_PATHS[path_name](CASES, db, tmp_path)
    raw = raw_bytes(db)
    con = sqlite3.connect(db)
    try:
        texts = "\n".join(t for (t,) in con.execute("SELECT text FROM entries"))
        # every other column as read: summary and tags may be stored deflated (store/packed.py), the names and meta
        # as they are; looked in as the raw bytes are
        stored = "\n".join(
            "\n".join([*map(str, row[:5]), Store.entry_value("summary", row[5]), Store.entry_value("tags", row[6])])
            for row in con.execute("SELECT session, user_id, agent_id, project, meta, summary, tags FROM entries")
        )
        noise = [Store.entry_value("content_hash", h) for (h,) in con.execute("SELECT content_hash FROM entries")]
        noise += [v for (v,) in con.execute("SELECT value FROM meta WHERE key = ?", (META_SALT,))]
    finally:
        con.close()
    for h in noise:  # the database's own random hex: a hex piece of a secret may match it by chance
        raw = raw.replace(h.encode(), b" ")
    unread = [c.id for c in CASES if c.marker not in texts]
    assert not unread, f"{path_name}: cases not stored at all: {unread[:10]}"
    raw += stored.encode()
    leaked = [(c.id, p) for c in CASES for p in c.parts if any(f in raw for f in forms(p, FIXED))]
    print(
        f"\n[coverage] {path_name}: {len(CASES)} formats, {len(leaked)} found in the raw .db/-wal bytes: {leaked[:10]}"
    )
    assert not leaked
    assert len(PLACEHOLDER_RE.findall(texts + stored)) >= len(CASES)


def test_lookalikes_come_out_unchanged():
    policy = make_policy(b"k")
    changed = [(rid, text) for rid, text in LOOKALIKES if find_secrets(text, policy)]
    print(f"\n[coverage] {len(LOOKALIKES)} look-alikes, {len(changed)} changed: {changed}")
    assert len(LOOKALIKES) >= 200 and not changed


def test_lookalikes_are_stored_verbatim(tmp_path):
    with Lantern(tmp_path / "look.db") as lt:
        for i, (rid, text) in enumerate(LOOKALIKES):
            r = lt.archive(turn(text, PLACES[i % len(PLACES)], i), session=f"look-{i}")
            stored = lt.store.entries(r.entry_ids)[r.entry_ids[0]].text
            assert r.redacted == 0 and (text in stored or json.dumps(text)[1:-1] in stored), (rid, text)


@pytest.mark.parametrize("seed", range(5))
def test_other_seeds_redact_every_format_and_keep_every_lookalike(seed):
    """The generators at other seeds, through ``redact_text`` (no database): every random part is gone."""
    policy = make_policy(b"k")
    missed = []
    cases = generated(1000 + seed)
    fixed = "\n".join(_cut(c.text, c.parts) for c in cases)
    for c in cases:
        out, n = redact_text(c.text, policy)
        if not n or any(f.decode() in out for p in c.parts for f in forms(p, fixed)):
            missed.append((c.id, c.text[:80]))
    changed = [(rid, t) for rid, t in lookalikes(1000 + seed) if find_secrets(t, policy)]
    assert not missed and not changed, (missed, changed)


def test_redacted_tool_arguments_stay_valid_json():
    policy = make_policy(b"k")
    for i, c in enumerate(CASES):
        for args in (
            json.dumps({"cmd": c.text}),
            json.dumps({"cmd": c.text}, ensure_ascii=False),
            json.dumps([c.text, i]),
        ):
            out, n = redact_text(args, policy)
            assert n >= 1, c.id
            assert json.loads(out) is not None, (c.id, out)


def test_twilio_account_sids_and_publishable_keys_are_identifiers():
    policy = make_policy(b"k")
    text = (
        "TWILIO_ACCOUNT_SID=AC0123456789abcdef0123456789abcdef\n"
        "STRIPE_PUBLISHABLE_KEY=pk_live_51H8aBcDeFgHiJkLmNoPqRsTuV\n"
        "SUPABASE_ANON_KEY=sb_publishable_4fT9aQw2ZxYbC8dE1gH7jK3mN0pR5s\n"
        "TWILIO_API_KEY=SK0123456789abcdef0123456789abcdef"
    )
    out, n = redact_text(text, policy)
    assert n == 1 and "AC0123456789abcdef" in out and "pk_live_51H8a" in out and "sb_publishable_4fT9" in out
    assert "SK0123456789abcdef" not in out


def test_every_stored_field_is_classified():
    from dataclasses import fields

    from lantern.model import Message, ToolCall, ToolResult
    from lantern.store.base import NewEntry

    for cls in (Message, ToolCall, ToolResult, NewEntry):
        have = {f.name for f in fields(cls)}
        known = REDACTED_FIELDS.get(cls.__name__, set()) | DERIVED_FIELDS.get(cls.__name__, set())
        known |= NOT_TEXT_FIELDS.get(cls.__name__, set())
        assert have == known, (cls.__name__, have ^ known)


def test_every_message_field_is_redacted_for_every_format():
    """Every case in every field of a message (no database: ``redact_messages``, the one stage they pass)."""
    from lantern.archive.redact import redact_messages

    policy = make_policy(b"k")
    missed = []
    for i, c in enumerate(CASES):
        for where in FIELDS[:6]:
            messages, _ = _field_case(c, where, i)
            out, n = redact_messages(messages, policy)
            flat = repr(out)
            if not n or any(f.decode() in flat for p in c.parts for f in forms(p, FIXED) if f.isascii()):
                missed.append((where, c.id))
    assert not missed, missed[:20]


def test_a_name_holding_a_secret_is_found_by_the_name_as_given(db_location):
    """A name is stored redacted and matched in that form, on both backends: the session, user and project a call
    gives find what was archived under them, and forget deletes it, also for a session stored in clear before
    names were redacted."""
    secret = "ghp_" + "Zq8XwV3mK7pL2nR9tY4uB6cD1eF5gH0jA3sW"
    session, user, project = f"deploy {secret}", f"ci {secret}", f"repo-{secret}"
    db = db_location
    with Lantern(db, user=user) as lt:
        turn_ = [{"role": "user", "content": "The staging port is 8443."}, {"role": "assistant", "content": "Noted."}]
        r = lt.archive(turn_, session=session, project=project)
        assert r.added == 1 and secret not in r.session and "[secret:github-token" in r.session
        assert lt.search("staging port", session=session, project=project)
        recovery = lt.recover("which staging port?", session=session, budget=400)
        assert recovery.entries
        # an event's labels and session: stored as names are, found by the session as given
        lt.record_compaction(recovery, session=session, reason=f"why {secret}", source=f"by {secret}", lost=[])
        assert [e.session for e in lt.events(session)] == [r.session]
        assert lt.turn_hash(session, lt.store.entries(r.entry_ids)[r.entry_ids[0]].text, project=project) == (
            lt.store.entries(r.entry_ids)[r.entry_ids[0]].content_hash
        )
        # a session stored in clear (an older Lantern): forgotten by its name as given all the same
        with lt.store.transaction() as con:
            con.execute("UPDATE entries SET session = ? WHERE id = ?", (session, r.entry_ids[0]))
        assert lt.forget(session=session) == 1
        assert lt.stats()["entries"] == 0
    if isinstance(db, Path):
        assert secret.encode() not in raw_bytes(db)


def test_a_name_whose_redacted_form_is_over_the_limit_is_refused_in_words(tmp_path):
    """Placeholders are longer than the short secrets they replace: a name at its limit holding several grows past
    it. Refused (NameTooLongError, a ValueError) rather than stored over the limit PostgreSQL's index takes."""
    from lantern.errors import NameTooLongError
    from lantern.scope import MAX_ID_CHARS, MAX_SESSION_CHARS

    secrets = " ".join(f"pwd={i:02d}Xy!" for i in range(30))
    with Lantern(tmp_path / "long.db") as lt:
        turn_ = [{"role": "user", "content": "hello"}]
        with pytest.raises(NameTooLongError, match="at most 384"):
            lt.archive(turn_, session=secrets[:MAX_SESSION_CHARS])
        with pytest.raises(NameTooLongError, match="at most 256"):
            lt.archive(turn_, session="s", project=secrets[:MAX_ID_CHARS])
        assert lt.stats()["entries"] == 0


def test_a_one_line_form_in_a_tool_calls_raw_json_is_redacted_as_in_a_message():
    """A tool call's arguments written without escapes (``{"command": "api-key: <hex>"}``, no ``\\n`` inside) are
    read as a message's text is: every one-line case, inside a JSON string, loses its random parts (the class of
    break38's ``api-key:`` header kept in clear in the arguments while redacted in the message)."""
    policy = make_policy(b"k")
    missed = []
    for c in CASES:
        body = c.text.split("\n", 1)[1]
        if "\n" in body or '"' in body or "\\" in body:
            continue
        args = f'{{"command": "{body}"}}'
        out, _ = redact_text(args, policy)
        if any(f.decode() in out for p in c.parts for f in forms(p, FIXED)):
            missed.append((c.id, args[:80]))
    assert not missed, missed


def test_a_token_cut_short_at_a_names_end_is_redacted():
    """A session named after a prompt's first characters cuts a token short (``npm_`` and 34 of its 36): in a name
    every prefix rule's token is found from ``CUT_MIN`` characters after its trigger on; the same cut in a message
    is a look-alike (a shorter run) and stays."""
    from lantern.archive.redact import redact_name
    from lantern.archive.secret_tokens import CUT_MIN

    policy = make_policy(b"k")
    rng = random.Random(SEED)
    missed = []
    for rule in TOKENS:
        if rule.back is not None or rule.gate is not None or rule.keep_prefix:
            continue
        for spec in rule.samples:
            token = sample(spec, rng)
            trigger = next((t for t in rule.triggers if token.startswith(t)), None)
            if trigger is None or len(trigger) < 3 or " " in token or not rule.pattern.fullmatch(token):
                continue
            for cut in range(len(trigger) + CUT_MIN, len(token)):
                name = f"proxy-here: {token[:cut]}"
                if token[len(trigger) : cut] in redact_name(name, policy):
                    missed.append((rule.kind, cut, len(token)))
                    break
    assert not missed, missed
