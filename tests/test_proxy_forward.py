"""The OpenAI-compatible chat-completions proxy (integrations/forward.py, ``lantern serve --upstream``): a REAL tiny
OpenAI-compatible upstream (FastAPI under uvicorn on a loopback port, in a thread) that records what it receives,
and the real proxy app (TestClient) over a real SQLite file and the fake embedder (tests/conftest.py)."""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")
from fastapi import FastAPI, Request  # noqa: E402
from fastapi.responses import JSONResponse, StreamingResponse  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from lantern.integrations.proxy import build_app  # noqa: E402
from serving import start_server, stop_server  # noqa: E402

SSE_CHUNKS = [
    b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n',
    b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"The migration '
    b'"}}]}\n\n',
    b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"ran on shard '
    b'quokka-7."}}]}\n\n',
    b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
    b"data: [DONE]\n\n",
]

# two parallel tool calls whose names and arguments arrive in pieces, interleaved by index (OpenAI's stream shape)
TOOL_SSE_CHUNKS = [
    b'data: {"id":"c2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":null,'  # noqa: E501
    b'"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_wea","arguments":""}}]}}]}\n\n',
    b'data: {"id":"c2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
    b'"function":{"name":"ther","arguments":"{\\"city\\": \\"Reyk"}}]}}]}\n\n',
    b'data: {"id":"c2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,'
    b'"id":"call_b","type":"function","function":{"name":"read_file","arguments":"{\\"path\\": "}}]}}]}\n\n',
    b'data: {"id":"c2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
    b'"function":{"arguments":"javik\\", \\"unit\\": \\"celsius\\"}"}}]}}]}\n\n',
    b'data: {"id":"c2","object":"chat.com',  # a chunk boundary inside an event
    b'pletion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,'
    b'"function":{"arguments":"\\"config/zebra-42.yaml\\"}"}}]}}]}\n\n',
    b'data: {"id":"c2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n',  # noqa: E501
    b"data: [DONE]\n\n",
]


def _anthropic_event(kind: str, data: dict) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


# Anthropic Messages stream: a text block, then a tool_use block whose input JSON arrives in pieces
ANTHROPIC_SSE = [
    _anthropic_event(
        "message_start", {"message": {"id": "msg_1", "type": "message", "role": "assistant", "content": []}}
    ),
    _anthropic_event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
    _anthropic_event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "Reading the "}}),
    _anthropic_event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "heron config."}}),
    _anthropic_event("content_block_stop", {"index": 0}),
    _anthropic_event(
        "content_block_start",
        {"index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}},
    ),
    _anthropic_event(
        "content_block_delta", {"index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"path": "conf/'}}
    ),
    _anthropic_event(
        "content_block_delta", {"index": 1, "delta": {"type": "input_json_delta", "partial_json": 'heron-8.toml"}'}}
    ),
    _anthropic_event("content_block_stop", {"index": 1}),
    _anthropic_event("message_delta", {"delta": {"stop_reason": "tool_use"}}),
    _anthropic_event("message_stop", {}),
]


def _parse(raw: bytes):
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def _upstream_app(received: list[dict]) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/messages")
    async def messages(request: Request):
        raw = await request.body()
        body = _parse(raw)
        received.append({"raw": raw, "body": body, "headers": dict(request.headers)})
        if body is None:
            return JSONResponse({"error": "unparsable body"}, status_code=400)
        if body.get("stream"):

            async def gen():
                for c in ANTHROPIC_SSE:
                    yield c

            return StreamingResponse(gen(), media_type="text/event-stream")
        last = body["messages"][-1]["content"]
        return {
            "id": "msg_2",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": [{"type": "text", "text": f"reply to: {str(last)[:40]}"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        raw = await request.body()
        body = _parse(raw)
        received.append({"raw": raw, "body": body, "headers": dict(request.headers)})
        if body is None:
            return JSONResponse({"error": "unparsable body"}, status_code=400)
        if body.get("model") == "broken":
            return JSONResponse({"error": {"message": "upstream exploded", "type": "server_error"}}, status_code=500)
        if body.get("model") == "slow":
            await asyncio.sleep(3)
        if body.get("stream"):
            chunks = TOOL_SSE_CHUNKS if body.get("model") == "tools" else SSE_CHUNKS

            async def gen():
                for c in chunks:
                    yield c
                    await asyncio.sleep(0.01)

            return StreamingResponse(gen(), media_type="text/event-stream")
        return {
            "id": "cmpl-1",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": f"reply to: {body['messages'][-1]['content'][:40]}"},
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    @app.get("/v1/models")
    async def models(request: Request):
        received.append({"path": "/v1/models", "query": str(request.url.query), "headers": dict(request.headers)})
        return {"object": "list", "data": [{"id": "tiny-model", "object": "model"}]}

    return app


@pytest.fixture(scope="module")
def upstream():
    received: list[dict] = []
    port, server, thread = start_server(_upstream_app(received), wait_s=10)
    yield f"http://127.0.0.1:{port}/v1", received
    stop_server(server, thread)


@pytest.fixture
def proxy(tmp_path, upstream, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    url, received = upstream
    received.clear()
    with TestClient(
        build_app(tmp_path / "p.db", upstream=url, upstream_timeout=1.0),
        raise_server_exceptions=False,
        base_url="http://127.0.0.1",
    ) as c:
        yield c, received


def _entries(path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT session, text FROM entries ORDER BY id").fetchall()


def _long_conversation() -> list[dict]:
    msgs = [
        {"role": "system", "content": "You are a helpful coding assistant."},
        {"role": "user", "content": "Start postgres for the billing service."},
        {
            "role": "assistant",
            "content": "Started it: docker run -p 5433:5432 postgres:16; billing db listens on port 5433.",
        },
    ]
    for i in range(10):
        msgs += [
            {
                "role": "user",
                "content": f"Refactor step {i}: split the invoice renderer module {i} into smaller functions.",
            },
            {
                "role": "assistant",
                "content": f"Done with step {i}; renderer module {i} now has {i + 3} functions and tests pass.",
            },
        ]
    return msgs


def test_passthrough_of_a_normal_request(proxy, tmp_path):
    client, received = proxy
    payload = {
        "model": "tiny",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Say hello to the billing team."},
        ],
    }
    raw = json.dumps(payload).encode()
    r = client.post(
        "/v1/chat/completions",
        content=raw,
        headers={"content-type": "application/json", "authorization": "Bearer sk-upstream-key"},
    )
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"].startswith("reply to: Say hello")
    assert len(received) == 1 and received[0]["raw"] == raw  # forwarded byte for byte: nothing injected
    assert received[0]["headers"]["authorization"] == "Bearer sk-upstream-key"
    texts = [t for s, t in _entries(tmp_path / "p.db")]
    assert any("Say hello to the billing team." in t and "reply to: Say hello" in t for t in texts)  # reply archived
    assert all(s == "default" for s, _ in _entries(tmp_path / "p.db"))
    # the memory API still works beside the proxy, and unknown memory paths are not sent upstream
    assert client.get("/v1/memory/stats").json()["entries"] >= 2
    assert client.get("/v1/memory/nope").status_code == 404 and len(received) == 1


def test_compaction_injects_the_lost_port(proxy, tmp_path):
    client, received = proxy
    headers = {"X-Lantern-Session": "billing-42"}
    conv = _long_conversation() + [{"role": "user", "content": "Now run the whole test suite."}]
    r = client.post("/v1/chat/completions", json={"model": "tiny", "messages": conv}, headers=headers)
    assert r.status_code == 200
    assert received[0]["body"]["messages"] == conv  # growing conversation: nothing injected
    conv.append(r.json()["choices"][0]["message"])
    summary = {
        "role": "system",
        "content": "This session is being continued from a previous conversation that ran out "
        "of context. Summary: the user set up the billing database and refactored the invoice renderer.",
    }
    compacted = [summary, *conv[-4:], {"role": "user", "content": "Which port does the billing database listen on?"}]
    r = client.post("/v1/chat/completions", json={"model": "tiny", "messages": compacted}, headers=headers)
    assert r.status_code == 200, r.text
    sent = received[1]["body"]["messages"]
    assert len(sent) == len(compacted) + 1 and sent[0] == summary and sent[2:] == compacted[1:]
    assert sent[1]["role"] == "system" and "5433" in sent[1]["content"]
    assert "step 9" not in sent[1]["content"]  # turns still live are never re-injected
    assert {s for s, _ in _entries(tmp_path / "p.db")} == {"billing-42"}


def test_recovered_block_stays_while_the_compaction_lasts(proxy, tmp_path):
    client, received = proxy
    headers = {"X-Lantern-Session": "billing-43"}
    conv = _long_conversation()
    for i in range(6):  # many ordinary requests first: nothing injected
        conv = conv + [{"role": "user", "content": f"Request {i}: run linter pass {i} on the renderer."}]
        r = client.post("/v1/chat/completions", json={"model": "tiny", "messages": conv}, headers=headers)
        assert r.status_code == 200 and received[-1]["body"]["messages"] == conv
        conv = conv + [r.json()["choices"][0]["message"]]
    summary = {
        "role": "system",
        "content": "This session is being continued from a previous conversation that ran out "
        "of context. Summary: the user set up the billing database and refactored the invoice renderer.",
    }
    compacted = [summary, *conv[-4:], {"role": "user", "content": "Which port does the billing database listen on?"}]
    r = client.post("/v1/chat/completions", json={"model": "tiny", "messages": compacted}, headers=headers)
    block = received[-1]["body"]["messages"][1]
    assert block["role"] == "system" and "5433" in block["content"] and "linter pass 5" not in block["content"]
    # the compacted conversation goes on: the same block, unchanged, on every request (the client never saw it)
    grown = compacted + [r.json()["choices"][0]["message"], {"role": "user", "content": "And the renderer tests?"}]
    r = client.post("/v1/chat/completions", json={"model": "tiny", "messages": grown}, headers=headers)
    sent = received[-1]["body"]["messages"]
    assert sent[1] == block and sent[2:] == grown[1:]
    # the client pastes the port turn back: it is live again, so the block is recovered anew without it
    port_turn = _long_conversation()[1:3]
    pasted = grown + [r.json()["choices"][0]["message"], *port_turn, {"role": "user", "content": "Which port again?"}]
    client.post("/v1/chat/completions", json={"model": "tiny", "messages": pasted}, headers=headers)
    sent = received[-1]["body"]["messages"]
    if sent != pasted:  # a block anew (none when nothing specific is lost any more), never the old one
        assert sent[2:] == pasted[1:] and sent[1] != block and "docker run -p 5433" not in sent[1]["content"]
    # a conversation without compaction in the same session again: nothing injected
    fresh = [{"role": "user", "content": "Unrelated: what is a good name for a cat?"}]
    client.post("/v1/chat/completions", json={"model": "tiny", "messages": fresh}, headers=headers)
    assert received[-1]["body"]["messages"] == fresh


def test_streaming_bytes_unchanged_and_reply_archived(proxy, tmp_path):
    client, received = proxy
    payload = {
        "model": "tiny",
        "stream": True,
        "messages": [{"role": "user", "content": "Run the migration on the staging shard."}],
    }
    with client.stream("POST", "/v1/chat/completions", json=payload, headers={"X-Lantern-Session": "mig"}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        body = b"".join(r.iter_raw())
    assert body == b"".join(SSE_CHUNKS)
    assert received[0]["body"]["stream"] is True
    texts = [t for s, t in _entries(tmp_path / "p.db") if s == "mig"]
    assert any("Run the migration" in t and "The migration ran on shard quokka-7." in t for t in texts)


def test_streamed_tool_call_deltas_archived_assembled(proxy, tmp_path):
    client, received = proxy
    payload = {
        "model": "tools",
        "stream": True,
        "messages": [{"role": "user", "content": "What is the weather in Reykjavik, and read my zebra config."}],
    }
    with client.stream("POST", "/v1/chat/completions", json=payload, headers={"X-Lantern-Session": "tools"}) as r:
        assert r.status_code == 200
        body = b"".join(r.iter_raw())
    assert body == b"".join(TOOL_SSE_CHUNKS)  # relayed unchanged
    texts = [t for s, t in _entries(tmp_path / "p.db") if s == "tools"]
    assert len(texts) == 1 and "weather in Reykjavik" in texts[0]
    # each call with its whole name and its arguments joined from every piece, in index order
    assert "get_weather" in texts[0] and "read_file" in texts[0]
    assert '{"city": "Reykjavik", "unit": "celsius"}' in texts[0]
    assert '{"path": "config/zebra-42.yaml"}' in texts[0]
    assert texts[0].index("get_weather") < texts[0].index("read_file")


def test_sse_parser_assembles_calls_and_text():
    from lantern.integrations.sse import _SSEText

    p = _SSEText()
    for c in TOOL_SSE_CHUNKS:
        p.feed(c)
    reply = p.reply
    assert reply["content"] is None and [c["id"] for c in reply["tool_calls"]] == ["call_a", "call_b"]
    assert json.loads(reply["tool_calls"][0]["function"]["arguments"]) == {"city": "Reykjavik", "unit": "celsius"}
    assert reply["tool_calls"][1]["function"] == {"name": "read_file", "arguments": '{"path": "config/zebra-42.yaml"}'}
    q = _SSEText()
    for c in SSE_CHUNKS:
        q.feed(c)
    assert q.reply == {"role": "assistant", "content": "The migration ran on shard quokka-7."}
    empty = _SSEText()
    empty.feed(b": keep-alive\n\ndata: [DONE]\n\n")
    assert empty.reply is None


def test_upstream_error_and_timeout_passed_back(proxy, tmp_path):
    client, received = proxy
    msgs = [{"role": "user", "content": "hello"}]
    r = client.post("/v1/chat/completions", json={"model": "broken", "messages": msgs})
    assert r.status_code == 500 and r.json() == {"error": {"message": "upstream exploded", "type": "server_error"}}
    r = client.post("/v1/chat/completions", json={"model": "broken", "stream": True, "messages": msgs})
    assert r.status_code == 500 and r.json()["error"]["message"] == "upstream exploded"
    t0 = time.monotonic()
    r = client.post("/v1/chat/completions", json={"model": "slow", "messages": msgs})
    assert r.status_code == 504 and "timed out" in r.json()["error"] and time.monotonic() - t0 < 2.5


def test_other_paths_passed_through(proxy):
    client, received = proxy
    r = client.get("/v1/models?limit=5", headers={"authorization": "Bearer sk-x"})
    assert r.status_code == 200 and r.json()["data"][0]["id"] == "tiny-model"
    assert received[-1]["path"] == "/v1/models" and received[-1]["query"] == "limit=5"
    assert received[-1]["headers"]["authorization"] == "Bearer sk-x"
    assert client.get("/v1/not-there").status_code == 404  # the upstream's own 404


def test_archive_failure_never_fails_the_request(proxy, tmp_path, monkeypatch):
    client, received = proxy
    import lantern.integrations.forward as forward_module

    def broken(*a, **k):
        raise RuntimeError("secret text: port 5433 must not reach the log")

    monkeypatch.setattr(forward_module, "_archive_new", broken)
    r = client.post(
        "/v1/chat/completions", json={"model": "tiny", "messages": [{"role": "user", "content": "hi there"}]}
    )
    assert r.status_code == 200 and len(received) == 1
    logged = (tmp_path / "home" / ".lantern" / "logs" / "proxy.log").read_text()
    assert "archive failed" in logged and "RuntimeError" in logged and "5433" not in logged and "hi there" not in logged


def test_no_upstream_no_forwarding(tmp_path):
    with TestClient(build_app(tmp_path / "x.db"), raise_server_exceptions=False, base_url="http://127.0.0.1") as c:
        assert c.post("/v1/chat/completions", json={"model": "m", "messages": []}).status_code == 404


def test_token_is_ours_and_upstream_key_is_sent(tmp_path, upstream, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    url, received = upstream
    received.clear()
    app = build_app(tmp_path / "t.db", token="proxy-token", upstream=url, upstream_key="sk-upstream")
    with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as c:
        assert c.get("/v1/models").status_code == 401 and not received  # no token: never forwarded
        r = c.get("/v1/models", headers={"authorization": "Bearer proxy-token"})
        assert r.status_code == 200 and received[-1]["headers"]["authorization"] == "Bearer sk-upstream"


def test_real_lantern_serve_upstream_on_loopback(tmp_path, upstream):
    """`lantern serve --upstream URL` as a real process on a loopback port, streaming through a real socket."""
    import os
    import subprocess
    import sys

    import httpx

    url, received = upstream
    received.clear()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    env.pop("LANTERN_TOKEN", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lantern.cli",
            "--db",
            str(tmp_path / "r.db"),
            "serve",
            "--port",
            str(port),
            "--upstream",
            url,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        base = f"http://127.0.0.1:{port}/v1"  # what a client puts in OPENAI_BASE_URL
        deadline = time.monotonic() + 15
        while True:
            try:
                httpx.get(base + "/models", timeout=1)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.1)
        payload = {"model": "tiny", "stream": True, "messages": [{"role": "user", "content": "Migrate staging."}]}
        with httpx.stream("POST", base + "/chat/completions", json=payload, timeout=30) as r:
            assert r.status_code == 200
            assert b"".join(r.iter_raw()) == b"".join(SSE_CHUNKS)
        assert received[-1]["body"]["messages"] == payload["messages"]
        r = httpx.post(base + "/memory/search", json={"query": "quokka shard migration", "k": 1}, timeout=30)
        assert (
            "quokka-7" in r.json()["hits"][0]["summary"]
            or "quokka"
            in httpx.post(base + "/memory/recover", json={"query": "which shard", "budget": 2000}, timeout=30).json()[
                "text"
            ]
        )
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


def _anthropic_conversation() -> list[dict]:
    msgs = [
        {"role": "user", "content": "Start postgres for the billing service."},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "text",
                    "text": "Started it: docker run -p 5433:5432 postgres:16; billing db listens on port 5433.",
                }
            ],
        },
    ]
    for i in range(10):
        msgs += [
            {"role": "user", "content": [{"type": "text", "text": f"Refactor step {i}: split renderer module {i}."}]},
            {"role": "assistant", "content": f"Done with step {i}; renderer module {i} has {i + 3} functions."},
        ]
    return msgs


def test_anthropic_messages_compaction_injects_into_system(proxy, tmp_path):
    client, received = proxy
    headers = {"X-Lantern-Session": "claude-1", "x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}
    conv = _anthropic_conversation() + [{"role": "user", "content": "Now run the whole test suite."}]
    body = {"model": "claude-x", "max_tokens": 100, "system": "You are a helpful coding assistant.", "messages": conv}
    raw = json.dumps(body).encode()
    r = client.post("/v1/messages", content=raw, headers={**headers, "content-type": "application/json"})
    assert r.status_code == 200 and r.json()["content"][0]["text"].startswith("reply to:")
    assert received[-1]["raw"] == raw  # nothing injected, forwarded byte for byte
    assert received[-1]["headers"]["x-api-key"] == "sk-ant-test"
    texts = [t for s, t in _entries(tmp_path / "p.db") if s == "claude-1"]
    assert any("5433" in t for t in texts) and any("helpful coding assistant" in t for t in texts)
    assert any("Now run the whole test suite." in t and "reply to:" in t for t in texts)  # the reply archived
    summary = {
        "role": "user",
        "content": "This session is being continued from a previous conversation that ran out "
        "of context. Summary: the user set up the billing database and refactored the renderer.",
    }
    compacted = [summary, *conv[-4:], {"role": "user", "content": "Which port does the billing database listen on?"}]
    for system in (
        "You are a helpful coding assistant.",
        [{"type": "text", "text": "You are a helpful coding assistant."}],
    ):
        r = client.post("/v1/messages", json={**body, "system": system, "messages": compacted}, headers=headers)
        assert r.status_code == 200, r.text
        sent = received[-1]["body"]
        assert sent["messages"] == compacted  # the messages untouched; the block goes into system
        text = sent["system"] if isinstance(sent["system"], str) else "\n".join(b["text"] for b in sent["system"])
        assert text.startswith("You are a helpful coding assistant.") and "5433" in text
        assert "step 9" not in text  # still live: never re-injected
        assert isinstance(sent["system"], type(system))


def test_anthropic_stream_relayed_and_tool_use_archived(proxy, tmp_path):
    client, received = proxy
    payload = {
        "model": "claude-x",
        "max_tokens": 100,
        "stream": True,
        "messages": [{"role": "user", "content": "Open the heron config please."}],
    }
    with client.stream("POST", "/v1/messages", json=payload, headers={"X-Lantern-Session": "claude-2"}) as r:
        assert r.status_code == 200
        assert b"".join(r.iter_raw()) == b"".join(ANTHROPIC_SSE)
    texts = [t for s, t in _entries(tmp_path / "p.db") if s == "claude-2"]
    assert len(texts) == 1 and "Open the heron config" in texts[0] and "Reading the heron config." in texts[0]
    assert "read_file" in texts[0] and "conf/heron-8.toml" in texts[0]


def test_only_new_turns_are_embedded(proxy, tmp_path):
    client, received = proxy
    headers = {"X-Lantern-Session": "billing-44"}
    conv = _long_conversation() + [{"role": "user", "content": "Now run the whole test suite."}]
    r = client.post("/v1/chat/completions", json={"model": "tiny", "messages": conv}, headers=headers)
    conv.append(r.json()["choices"][0]["message"])
    lantern = client.app.app.state.service._lantern
    embedded: list[str] = []
    real = lantern.embedder.embed
    real_query = getattr(lantern.embedder, "embed_query", None)  # the read path's query embedding (embed.embed_query)

    def counting(texts, *a, **k):
        embedded.extend(texts)
        return real(texts, *a, **k)

    def counting_query(texts, *a, **k):
        embedded.extend(texts)
        return real_query(texts, *a, **k)

    lantern.embedder.embed = counting
    if real_query is not None:
        lantern.embedder.embed_query = counting_query
    summary = {
        "role": "system",
        "content": "This session is being continued from a previous conversation that ran out "
        "of context. Summary: billing database set up, renderer refactored.",
    }
    compacted = [summary, *conv[-4:], {"role": "user", "content": "Which port does the billing database listen on?"}]
    client.post("/v1/chat/completions", json={"model": "tiny", "messages": compacted}, headers=headers)
    # 2 texts: the recovery's query (summary and question), then the archive of the question with its reply; the
    # two kept turns (already archived) are not embedded again, and the compaction summary is not archived
    assert len(embedded) == 2 and not any("step 9" in t for t in embedded), embedded
    # the query: the question and the summary's own words, without Claude Code's fixed opening
    assert (
        embedded[0] == "Which port does the billing database listen on?\nbilling database set up, renderer refactored."
    )
    assert "port does the billing" in embedded[1] and "reply to" in embedded[1]
    stored = lantern.store.db.execute("SELECT count(*) FROM entries WHERE text LIKE '%continued from a previous%'")
    assert stored.fetchone()[0] == 0


SUMMARY = {
    "role": "system",
    "content": "This session is being continued from a previous conversation that ran out "
    "of context. Summary: the user set up the billing database and refactored the invoice renderer.",
}


def _compacted_with_block(client, received, headers):
    """A conversation archived, then compacted: the proxy injects a block holding the lost port turn. Returns the
    compacted conversation grown by one request (whose resend would re-inject the kept block)."""
    conv = _long_conversation() + [{"role": "user", "content": "Now run the whole test suite."}]
    r = client.post("/v1/chat/completions", json={"model": "tiny", "messages": conv}, headers=headers)
    conv.append(r.json()["choices"][0]["message"])
    compacted = [SUMMARY, *conv[-4:], {"role": "user", "content": "Which port does the billing database listen on?"}]
    r = client.post("/v1/chat/completions", json={"model": "tiny", "messages": compacted}, headers=headers)
    assert "docker run -p 5433" in received[-1]["body"]["messages"][1]["content"]
    return compacted + [r.json()["choices"][0]["message"], {"role": "user", "content": "And the renderer tests?"}]


@pytest.mark.parametrize("how", ["rest", "second handle"])
def test_forgotten_entries_are_never_reinjected(proxy, tmp_path, how):
    from lantern.api import Lantern

    client, received = proxy
    headers = {"X-Lantern-Session": "billing-45"}
    grown = _compacted_with_block(client, received, headers)
    with sqlite3.connect(tmp_path / "p.db") as db:
        ((entry,),) = db.execute("SELECT id FROM entries WHERE text LIKE '%docker run -p 5433%'").fetchall()
    if how == "rest":
        assert client.post("/v1/memory/forget", json={"entry": entry, "confirm": True}).json() == {"forgotten": 1}
    else:  # another process's handle: the proxy's in-memory state never saw it
        with Lantern(tmp_path / "p.db") as other:
            assert other.forget(entry=entry) == 1
    r = client.post("/v1/chat/completions", json={"model": "tiny", "messages": grown}, headers=headers)
    assert r.status_code == 200
    assert "docker run -p 5433" not in received[-1]["raw"].decode()
    assert received[-1]["body"]["messages"][-len(grown) + 1 :] == grown[1:]


def test_kept_blocks_are_bounded_by_the_tracker(proxy, tmp_path):
    client, received = proxy
    _compacted_with_block(client, received, {"X-Lantern-Session": "billing-46"})
    forwarder = client.app.app.state.forwarder
    assert len(forwarder.blocks) == 1
    forwarder.tracker.max_sessions = 1  # the next session pushes billing-46 out of the tracker
    client.post(
        "/v1/chat/completions",
        json={"model": "tiny", "messages": [{"role": "user", "content": "hi"}]},
        headers={"X-Lantern-Session": "other"},
    )
    assert len(forwarder.tracker.seen) == 1 and not forwarder.blocks


def test_lantern_headers_are_never_forwarded(proxy):
    client, received = proxy
    ours = {
        "X-Lantern-Session": "h",
        "X-Lantern-User": "alice",
        "X-Lantern-Agent": "coder",
        "X-Lantern-Project": "billing",
        "X-Lantern-Future": "x",
        "X-Other": "kept",
    }
    client.post(
        "/v1/chat/completions", json={"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}, headers=ours
    )
    client.post(
        "/v1/messages",
        json={"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
        headers=ours,
    )
    client.get("/v1/models", headers=ours)
    assert len(received) == 3
    for got in received:
        assert not [k for k in got["headers"] if k.lower().startswith("x-lantern-")], got["headers"]
        assert got["headers"]["x-other"] == "kept"


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_deeply_nested_body_is_forwarded_untouched(proxy, tmp_path, path):
    client, received = proxy
    depth = 200_000
    raw = b'{"model": "tiny", "messages": ' + b"[" * depth + b"]" * depth + b"}"
    r = client.post(path, content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json() == {"error": "unparsable body"}  # the upstream's answer, not our 500
    assert received[-1]["raw"] == raw
    assert not (tmp_path / "p.db").exists() or _entries(tmp_path / "p.db") == []


def test_anthropic_system_of_another_shape_is_never_replaced(proxy, tmp_path):
    client, received = proxy
    headers = {"X-Lantern-Session": "claude-3"}
    conv = _anthropic_conversation() + [{"role": "user", "content": "Now run the whole test suite."}]
    body = {"model": "claude-x", "max_tokens": 100, "system": "You are a helpful coding assistant.", "messages": conv}
    client.post("/v1/messages", json=body, headers=headers)
    summary = {
        "role": "user",
        "content": "This session is being continued from a previous conversation that ran out "
        "of context. Summary: the user set up the billing database and refactored the renderer.",
    }
    compacted = [summary, *conv[-4:], {"role": "user", "content": "Which port does the billing database listen on?"}]
    for system in ({"odd": "shape"}, 42):
        r = client.post("/v1/messages", json={**body, "system": system, "messages": compacted}, headers=headers)
        assert r.status_code == 200, r.text
        assert received[-1]["body"] == {**body, "system": system, "messages": compacted}


def test_compaction_query_is_embedded_ahead_once(proxy, tmp_path):
    """A request holding a new compaction summary: its recovery's query is embedded in the prefetch thread
    (recover/query_vectors.py) before detection, exactly once, and the block still brings back the port."""
    from lantern.compaction import summary_query_text

    client, received = proxy
    headers = {"X-Lantern-Session": "billing-45"}
    conv = _long_conversation() + [{"role": "user", "content": "Now run the whole test suite."}]
    r = client.post("/v1/chat/completions", json={"model": "tiny", "messages": conv}, headers=headers)
    conv.append(r.json()["choices"][0]["message"])
    lantern = client.app.app.state.service._lantern
    calls: list[tuple[str, list[str]]] = []
    real = lantern.embedder.embed
    real_query = getattr(lantern.embedder, "embed_query", None)  # the read path's query embedding (embed.embed_query)

    def recording(texts, *a, **k):
        calls.append((threading.current_thread().name, list(texts)))
        return real(texts, *a, **k)

    def recording_query(texts, *a, **k):
        calls.append((threading.current_thread().name, list(texts)))
        return real_query(texts, *a, **k)

    lantern.embedder.embed = recording
    if real_query is not None:
        lantern.embedder.embed_query = recording_query
    question = {"role": "user", "content": "Which port does the billing database listen on?"}
    compacted = [SUMMARY, *conv[-4:], question]
    r = client.post("/v1/chat/completions", json={"model": "tiny", "messages": compacted}, headers=headers)
    assert r.status_code == 200 and "5433" in received[-1]["body"]["messages"][1]["content"]
    query = question["content"] + "\n" + summary_query_text(SUMMARY["content"])
    assert query.endswith("\nthe user set up the billing database and refactored the invoice renderer.")
    assert [c for c in calls if c[1] == [query]] == [(calls[0][0], [query])]  # embedded once ...
    assert calls[0][0].startswith("lantern-query")  # ... ahead, in the prefetch thread
    # the same compaction resent (its summary already seen): nothing embedded ahead, the block is reused
    calls.clear()
    grown = compacted + [r.json()["choices"][0]["message"], {"role": "user", "content": "And the test database?"}]
    client.post("/v1/chat/completions", json={"model": "tiny", "messages": grown}, headers=headers)
    assert not any(name.startswith("lantern-query") for name, _ in calls)


def test_user_messages_that_look_like_summaries_are_archived_runtime_summaries_are_not(tmp_path):
    """A breaker's finding: the proxy left out every message ``is_summary`` matched, including a user's own
    "Summary of the conversation I had with my landlord: ...". Only a runtime's compaction summary stays out."""
    from lantern import Lantern
    from lantern.integrations.forward import _archive_new

    with Lantern(tmp_path / "s.db", embedder="minilm") as lantern:
        _archive_new(
            lantern,
            "s",
            [
                {"role": "system", "content": "[Summary] the user set up billing and the renderer."},
                {
                    "role": "user",
                    "content": "This session is being continued from a previous conversation. Summary: billing.",
                },
                {
                    "role": "user",
                    "content": "Summary of the conversation I had with my landlord: rent goes to $2,310 in May",
                },
                {"role": "assistant", "content": "Sure, noted."},
                {"role": "user", "content": "[Summary] of my meds: metformin 500mg twice daily"},
                {"role": "assistant", "content": "Noted the metformin dose."},
            ],
        )
        texts = [r[0] for r in lantern.store.db.execute("SELECT text FROM entries ORDER BY turn")]
        assert len(texts) == 2, texts
        assert "$2,310" in texts[0] and "Sure, noted." in texts[0]
        assert "metformin 500mg" in texts[1] and "Noted the metformin dose." in texts[1]
        assert not any("continued from a previous" in t or "set up billing" in t for t in texts)


@settings(max_examples=examples(40), deadline=None)
@given(
    mark=st.sampled_from(["[Summary]", "[summary of the earlier turns]", "<summary>", "  [SUMMARY]:"]),
    body=st.text(min_size=0, max_size=80),
    lead=st.lists(st.sampled_from(["system", "developer"]), max_size=2),
)
def test_a_user_message_opening_the_conversation_with_a_summarys_markup_is_a_runtime_summary(mark, body, lead):
    """Issue 37: a runtime that compacts puts its summary where the replaced turns were, before any reply, often as
    a user message ("[Summary] ..."); the proxy archived it. Before any assistant message such a user message is
    the runtime's summary; after one it is the user's own words ("[Summary] of my meds: ...")."""
    from lantern.compaction import runtime_summaries

    summary = {"role": "user", "content": f"{mark} {body}"}
    head = [{"role": r, "content": "You are a coding assistant."} for r in lead]
    reply = {"role": "assistant", "content": "Noted."}
    assert runtime_summaries([*head, summary, {"role": "user", "content": "go on"}])[len(head)] is True
    assert runtime_summaries([*head, {"role": "user", "content": "hi"}, reply, summary])[-1] is False
    words = {"role": "user", "content": f"Summary of the conversation I had with my landlord: {body}"}
    assert runtime_summaries([*head, words])[-1] is False


def test_the_proxy_does_not_archive_a_user_role_summary_opening_a_compacted_request(tmp_path):
    from lantern import Lantern
    from lantern.integrations.forward import _archive_new

    with Lantern(tmp_path / "u.db", embedder="minilm") as lantern:
        _archive_new(
            lantern,
            "s",
            [
                {"role": "system", "content": "You are a coding assistant."},
                {"role": "user", "content": "[Summary] The user set up the billing database and asked for docs."},
                {"role": "user", "content": "Which port did we pick?"},
                {"role": "assistant", "content": "Port 5433."},
            ],
        )
        texts = [r[0] for r in lantern.store.db.execute("SELECT text FROM entries ORDER BY turn")]
    assert texts and not any("set up the billing database" in t for t in texts)
    assert any("Which port did we pick?" in t and "Port 5433." in t for t in texts)


# ---------------------------------------------------------------------------------------------- rewinds (issue #19)
def _edit_conversation() -> list[dict]:
    """A chat whose user will edit their third message (a chat UI's "edit and resend"): the first answer set the
    invoice retry delay to 90 s; the user then edits that question and the reply to the edit says 30 s."""
    return [
        {"role": "system", "content": "You are a helpful coding assistant."},
        {"role": "user", "content": "Start postgres for the billing service."},
        {"role": "assistant", "content": "Started it: docker run -p 5433:5432 postgres:16; port 5433. " + "x" * 2500},
        {"role": "user", "content": "Add retries to the invoice sender."},
        {
            "role": "assistant",
            "content": "Added retries: 5 attempts, delay 90 seconds, in billing/send.py. " + "y" * 2500,
        },
        {"role": "user", "content": "Also log every failed attempt."},
    ]


@pytest.mark.parametrize("mode", ["skip", "mark"])
def test_a_resent_conversation_with_its_last_turns_edited_away_abandons_them(tmp_path, upstream, monkeypatch, mode):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    url, received = upstream
    db = tmp_path / "p.db"
    head = {"X-Lantern-Session": "chat-7"}
    with TestClient(build_app(db, upstream=url, upstream_timeout=5.0, rewound=mode), base_url="http://127.0.0.1") as c:
        convo = _edit_conversation()
        for n in (2, 4, 6):  # the conversation as the client sent it, turn by turn
            sent = convo[:n]
            reply = c.post("/v1/chat/completions", json={"model": "m", "messages": sent}, headers=head).json()
            if n < 6:
                assert reply["choices"][0]["message"]["content"]  # the upstream's reply, archived with the turn
        archived = [t for s, t in _entries(db) if s == "chat-7"]
        assert any("90 seconds" in t for t in archived)
        # the user edits their second question: the client resends the first turn and the edited question only
        received.clear()
        edited = convo[:3] + [{"role": "user", "content": "Add retries to the invoice sender, 30 s apart."}]
        r = c.post("/v1/chat/completions", json={"model": "m", "messages": edited}, headers=head)
        assert r.status_code == 200
        sent_up = received[-1]["body"]["messages"]
        assert len(sent_up) == len(edited)  # no recovered block: a rewind is not a compaction
        # one request is no evidence (a title request looks the same): nothing is taken off the session yet
        assert any("90 seconds" in t for s, t in _entries(db) if s == "chat-7")
        # the conversation goes on from the edit: now the edited-away turn is moved off the session, not deleted
        reply = r.json()["choices"][0]["message"]
        on = [*edited, reply, {"role": "user", "content": "And log every failed attempt."}]
        assert c.post("/v1/chat/completions", json={"model": "m", "messages": on}, headers=head).status_code == 200
    stored = _entries(db)
    main = " ".join(t for s, t in stored if s == "chat-7")
    assert "90 seconds" not in main and "5433" in main and "30 s apart" in main
    kept = [t for s, t in stored if s.startswith("chat-7/abandoned-")]
    assert any("90 seconds" in t for t in kept)  # whatever --rewound says: the proxy never deletes on inference


def test_a_compaction_after_a_rewind_does_not_recover_the_rewound_turn(tmp_path, upstream, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    url, received = upstream
    db = tmp_path / "p.db"
    head = {"X-Lantern-Session": "chat-8"}
    convo = _edit_conversation()
    with TestClient(build_app(db, upstream=url, upstream_timeout=5.0), base_url="http://127.0.0.1") as c:
        for n in (2, 4, 6):
            c.post("/v1/chat/completions", json={"model": "m", "messages": convo[:n]}, headers=head)
        # the user edits the last question: the turn archived with its reply is abandoned
        edited = {"role": "user", "content": "Also send failed attempts to sentry-9."}
        c.post("/v1/chat/completions", json={"model": "m", "messages": [*convo[:5], edited]}, headers=head)
        # then the client compacts: a summary replaces the first turns
        received.clear()
        compacted = [
            convo[0],
            {"role": "system", "content": "[Summary] The user set up billing's database and invoice retries."},
            convo[3],
            convo[4],
            edited,
            {"role": "assistant", "content": "reply to: Also send failed attempts to sentry-9."},
            {"role": "user", "content": "Which port did the database get?"},
        ]
        c.post("/v1/chat/completions", json={"model": "m", "messages": compacted}, headers=head)
        block = next(m["content"] for m in received[-1]["body"]["messages"] if "Recovered from Lantern" in m["content"])
    assert "5433" in block  # the compacted first turn comes back
    assert "every failed attempt" not in block  # the edited-away turn does not


def _compact_through(client, headers, model="tiny"):
    """The growing conversation, then its compacted form asking for the lost port: the second response."""
    conv = _long_conversation() + [{"role": "user", "content": "Now run the whole test suite."}]
    r = client.post("/v1/chat/completions", json={"model": model, "messages": conv}, headers=headers)
    assert r.status_code == 200, r.text
    conv.append(r.json()["choices"][0]["message"])
    summary = {"role": "system", "content": "Summary of the conversation so far: the user set up the billing database."}
    compacted = [summary, *conv[-4:], {"role": "user", "content": "Which port does the billing database listen on?"}]
    return client.post("/v1/chat/completions", json={"model": model, "messages": compacted}, headers=headers)


def test_rerank_through_the_upstream_uses_the_requests_model_and_key_and_never_loses_the_block(
    tmp_path, upstream, monkeypatch
):
    """serve --upstream U --rerank: the compaction's rerank call goes to U with the request's model and the
    Authorization the proxy forwards; an answer that is no id list falls back to the fused order, block kept."""
    from lantern import Lantern
    from lantern.integrations.forward import UPSTREAM

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LANTERN_LLM_API_KEY", raising=False)
    url, received = upstream
    received.clear()
    app = build_app(tmp_path / "p.db", upstream=url, upstream_timeout=5.0, rerank=UPSTREAM)
    headers = {"X-Lantern-Session": "billing-42", "Authorization": "Bearer sk-client"}
    with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
        r = _compact_through(client, headers)
    assert r.status_code == 200, r.text
    calls = [c for c in received if isinstance(c.get("body"), dict) and "response_format" in c["body"]]
    assert len(calls) == 1 and len(received) == 3  # the two chat requests and one rerank call
    assert calls[0]["body"]["model"] == "tiny" and calls[0]["headers"]["authorization"] == "Bearer sk-client"
    sent = received[-1]["body"]["messages"]
    assert sent[1]["role"] == "system" and "5433" in sent[1]["content"]
    with Lantern(tmp_path / "p.db") as lt:
        (event,) = lt.events("billing-42")
    assert event.rerank is False  # the fake's answer is no id list: fused order


def test_rerank_off_makes_no_llm_call(proxy):
    client, received = proxy
    r = _compact_through(client, {"X-Lantern-Session": "s"})
    assert r.status_code == 200 and len(received) == 2
