"""The chat-completions proxy against a hostile upstream and a client that walks away (breaker findings): a real
upstream (FastAPI under uvicorn in a thread) and the real proxy app under uvicorn in a thread, over real sockets,
a real SQLite file and the real embedder."""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import threading
import time

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")
from fastapi import FastAPI, Request  # noqa: E402
from fastapi.responses import StreamingResponse  # noqa: E402

from lantern.integrations.proxy import build_app  # noqa: E402


def _chunk(text: str) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}).encode() + b"\n\n"


def _upstream_app() -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = json.loads(await request.body())

        async def slow():  # a long answer: the client stops reading after the first piece
            yield _chunk("The canary lives on port 7419. ")
            for i in range(300):
                await asyncio.sleep(0.05)
                yield _chunk(f"more {i} ")

        gen = {"slow": slow}[body["model"]]
        return StreamingResponse(gen(), media_type="text/event-stream")

    return app


def _serve(app) -> tuple[str, uvicorn.Server, threading.Thread]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    return f"http://127.0.0.1:{port}/v1", server, thread


@pytest.fixture
def live_proxy(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    up_url, up_server, up_thread = _serve(_upstream_app())
    url, server, thread = _serve(build_app(tmp_path / "p.db", upstream=up_url, upstream_timeout=30.0))
    yield url, tmp_path / "p.db"
    for s, t in ((server, thread), (up_server, up_thread)):
        s.should_exit = True
        t.join(timeout=10)


def _texts(db, session: str) -> list[str]:
    if not db.exists():
        return []
    with sqlite3.connect(db) as c:
        return [t for (t,) in c.execute("SELECT text FROM entries WHERE session = ?", (session,))]


def test_client_disconnect_mid_stream_still_archives_the_turn(live_proxy):
    """A user pressing "stop generating": the client closes the stream after the first piece. The request's turn
    and the part of the reply that was relayed are archived anyway (before: nothing at all was archived, the
    archive in the relay's ``finally`` was cancelled with the response)."""
    url, db = live_proxy
    payload = {"model": "slow", "stream": True,
               "messages": [{"role": "user", "content": "Where does the heron canary listen?"}]}
    with httpx.stream("POST", url + "/chat/completions", json=payload, headers={"X-Lantern-Session": "stop"},
                      timeout=30) as r:
        assert r.status_code == 200
        for piece in r.iter_raw():
            if b"7419" in piece:
                break  # the client walks away mid-stream
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not _texts(db, "stop"):
        time.sleep(0.2)
    texts = _texts(db, "stop")
    assert texts, "nothing archived after the client disconnected"
    assert "heron canary" in texts[0] and "port 7419" in texts[0]
