"""Values nested too deep to walk (issue 20, item 4): every entry point answers TranscriptFormatError (or its own
clean error built on it: HTTP 400, an MCP tool error, a skipped JSONL line), never a bare RecursionError.

A generator of nesting shapes (dicts, lists, both alternating, a dict of lists with a string leaf) at depths from
a few levels to far past Python's recursion limit, placed where a caller's value is walked: message content, a
content part, OpenAI tool-call arguments, an Anthropic ``tool_use`` input and ``tool_result`` content, a
``Message``'s ``meta``; given to ``Lantern.archive`` (dicts, ``Message`` objects, the JSON text), ``recover``'s
``exclude``, ``ingest`` (a whole JSON file, a streamed JSONL file), the REST API and the MCP tool.
"""

from __future__ import annotations

import json

import anyio
import pytest

from lantern import Lantern, Message, TranscriptFormatError
from lantern.archive.parse.jsonl import NESTED_TOO_DEEPLY

SHAPES = ("dict", "list", "mixed", "dict-of-lists")
DEPTHS = (3, 200, 900, 1000, 3000, 30_000)
DEEP = 1000  # from this depth on, json itself refuses the text: every entry point must refuse the value too


def nested(shape: str, depth: int):
    """A value ``depth`` levels deep of ``shape`` (built iteratively), with a string at the bottom."""
    v: object = "bottom"
    for i in range(depth):
        if shape == "dict" or (shape == "mixed" and i % 2):
            v = {"k": v}
        elif shape == "list" or shape == "mixed":
            v = [v]
        else:  # dict-of-lists
            v = {"k": [v]} if i % 2 else {"n": 1, "k": v}
    return v


def nested_json(shape: str, depth: int) -> str:
    """The JSON text of ``nested(shape, depth)``, built as text (json.dumps cannot write the deepest ones)."""
    opens, closes = [], []
    for i in range(depth):
        if shape == "dict" or (shape == "mixed" and i % 2):
            opens.append('{"k": '), closes.append("}")
        elif shape == "list" or shape == "mixed":
            opens.append("["), closes.append("]")
        elif i % 2:
            opens.append('{"k": ['), closes.append("]}")
        else:
            opens.append('{"n": 1, "k": '), closes.append("}")
    return "".join(reversed(opens)) + '"bottom"' + "".join(closes)


def placed(where: str, v) -> list:
    """A two-message conversation with ``v`` at ``where``."""
    reply = {"role": "assistant", "content": "done"}
    if where == "content":
        return [{"role": "user", "content": v}, reply]
    if where == "content-part":
        return [{"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "custom", "value": v}]}, reply]
    if where == "openai-arguments":
        call = {"id": "c1", "type": "function", "function": {"name": "run", "arguments": v}}
        return [{"role": "user", "content": "go"}, {"role": "assistant", "content": None, "tool_calls": [call]}]
    if where == "anthropic-input":
        use = {"type": "tool_use", "id": "t1", "name": "run", "input": {"cmd": v}}
        return [{"role": "user", "content": "go"}, {"role": "assistant", "content": [use]}]
    if where == "anthropic-result":
        result = {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "custom", "v": v}]}
        use = {"type": "tool_use", "id": "t1", "name": "run", "input": {}}
        return [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result]},
        ]
    raise AssertionError(where)


WHERES = ("content", "content-part", "openai-arguments", "anthropic-input", "anthropic-result")
CASES = [(s, d, w) for s in SHAPES for d in DEPTHS for w in WHERES]


def outcome(call) -> str:
    """ "ok" or "nested" (TranscriptFormatError saying so); any other exception fails the test."""
    try:
        call()
    except TranscriptFormatError as e:
        assert NESTED_TOO_DEEPLY in str(e), e
        return "nested"
    return "ok"


@pytest.fixture(scope="module")
def lantern(tmp_path_factory):
    with Lantern(tmp_path_factory.mktemp("deep") / "deep.db") as lt:
        yield lt


@pytest.mark.parametrize("shape, depth, where", CASES)
def test_archive_and_exclude_never_raise_a_bare_recursion_error(lantern, shape, depth, where):
    v = nested(shape, depth)
    messages = placed(where, v)
    got = outcome(lambda: lantern.archive(messages, session=f"{shape}-{depth}-{where}"))
    assert outcome(lambda: lantern.recover("bottom", exclude=messages)) in ("ok", got)
    walked = where in ("openai-arguments", "anthropic-input") or (where == "content" and shape != "list")
    if depth >= DEEP and walked:  # (a list inside a content list is no part: ignored, never walked)
        assert got == "nested"  # refused, as the same value in a file is


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("depth", DEPTHS)
def test_message_meta_and_text_input(lantern, shape, depth):
    v = nested(shape, depth)
    got = outcome(lambda: lantern.archive([Message("user", "hello", meta={"k": v}), Message("assistant", "hi")]))
    if depth >= DEEP:
        assert got == "nested"
    text = json.dumps([{"role": "user", "content": "x"}])[:-1] + ', {"role": "user", "content": '
    text += nested_json(shape, depth) + "}]"
    got = outcome(lambda: lantern.archive(text, session=f"text-{shape}-{depth}"))
    if depth >= DEEP:
        assert got == "nested"


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("depth", (900, 1000, 30_000))
def test_files_whole_and_streamed(lantern, tmp_path, shape, depth):
    deep = '{"role": "user", "content": ' + nested_json(shape, depth) + "}"
    plain = '{"role": "assistant", "content": "fine"}'
    whole = tmp_path / "whole.json"
    whole.write_text(f"[{deep}, {plain}]")
    got = outcome(lambda: lantern.ingest(whole))
    if depth >= DEEP:
        assert got == "nested"
    lines = tmp_path / "lines.jsonl"
    lines.write_text('{"role": "user", "content": "first"}\n' + deep + "\n" + plain + "\n")
    r = lantern.ingest(lines)  # a line too deep is skipped and named, as a line json cannot read
    assert r.added + r.duplicates >= 1
    if depth >= DEEP:
        assert r.skipped == 1 and r.warnings == [f"line 2: {NESTED_TOO_DEEPLY}; skipped"]


def test_rest_and_mcp_refuse_cleanly(tmp_path):
    pytest.importorskip("fastapi")
    pytest.importorskip("mcp")
    from fastapi.testclient import TestClient

    from lantern.integrations.mcp import build_server
    from lantern.integrations.proxy import build_app

    with TestClient(build_app(tmp_path / "api.db"), raise_server_exceptions=False, base_url="http://127.0.0.1") as c:
        for shape in SHAPES:
            for depth in (900, 990, 1000, 30_000):
                body = '{"messages": [{"role": "user", "content": ' + nested_json(shape, depth) + "}]}"
                r = c.post("/v1/memory/archive", content=body, headers={"content-type": "application/json"})
                assert r.status_code in (200, 400, 422), (shape, depth, r.status_code, r.text[:200])

    server = build_server(tmp_path / "mcp.db")

    async def run():
        from lantern.integrations.mcp import ToolError  # the SDK's own: 1.x and 2.x keep it in different modules

        for shape in SHAPES:
            for depth in (900, 1000, 5000):
                try:
                    r = await server.call_tool(
                        "archive", {"messages": [{"role": "user", "content": nested(shape, depth)}]}
                    )
                except ToolError as e:
                    message = str(e)
                else:  # 2.x answers an error result where 1.x raises
                    if not getattr(r, "is_error", False):
                        continue
                    message = "\n".join(getattr(c, "text", "") for c in r.content)
                assert "internal error" not in message and ("nested" in message or "messages" in message), message[:200]

    anyio.run(run)
    server._lantern_service.close()
