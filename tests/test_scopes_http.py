"""Scopes over HTTP: the REST memory API's ``user`` field and the chat proxy's ``X-Lantern-User`` header keep users
apart (real upstream on loopback from test_proxy_forward, real SQLite file, the fake embedder)."""

from __future__ import annotations

import sqlite3

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
from fastapi.testclient import TestClient  # noqa: E402

from lantern.integrations.proxy import build_app  # noqa: E402
from samples import PORT_CONVERSATION  # noqa: E402
from test_proxy_forward import _long_conversation, upstream  # noqa: E402,F401 - the loopback upstream fixture


def test_rest_api_scopes(tmp_path):
    with TestClient(
        build_app(tmp_path / "api.db"), raise_server_exceptions=False, base_url="http://127.0.0.1"
    ) as client:
        r = client.post(
            "/v1/memory/archive",
            json={"messages": PORT_CONVERSATION, "session": "s", "user": "alice", "agent": "coder"},
        )
        assert r.status_code == 200 and r.json()["added"] == 2
        for body in ({"user": "bob"}, {}, {"user": "alice", "agent": "other"}):
            assert client.post("/v1/memory/search", json={"query": "postgres port 5433", **body}).json()["hits"] == []
            assert (
                "5433"
                not in client.post("/v1/memory/recover", json={"query": "postgres port 5433", **body}).json()["text"]
            )
        assert client.post("/v1/memory/search", json={"query": "postgres port", "user": "alice"}).json()["hits"]
        ids = [
            h["id"]
            for h in client.post("/v1/memory/search", json={"query": "postgres port", "user": "alice"}).json()["hits"]
        ]
        # feedback is confined to the caller's user: bob (or the default user) cannot move alice's success rate
        for body in ({"user": "bob"}, {}):
            r = client.post("/v1/memory/feedback", json={"entry_ids": ids, "useful": False, **body})
            assert r.status_code == 200 and r.json() == {"updated": 0}
        r = client.post("/v1/memory/feedback", json={"entry_ids": ids, "useful": True, "user": "alice"})
        assert r.json() == {"updated": len(ids)}
        assert client.post("/v1/memory/feedback", json={"entry_ids": ids, "useful": True, "user": 7}).status_code == 422
        assert client.post("/v1/memory/forget", json={"session": "s", "user": "bob", "confirm": True}).json() == {
            "forgotten": 0
        }
        assert client.post("/v1/memory/forget", json={"user": "alice", "confirm": True}).json() == {"forgotten": 2}
        assert client.post("/v1/memory/search", json={"user": 3, "query": "x"}).status_code == 422


def test_rest_api_empty_session_is_the_default_session(tmp_path):
    """``"session": ""`` is the default session for archive and for forget alike (the MCP tools behave the same)."""
    with TestClient(
        build_app(tmp_path / "empty.db"), raise_server_exceptions=False, base_url="http://127.0.0.1"
    ) as client:
        r = client.post("/v1/memory/archive", json={"messages": PORT_CONVERSATION, "session": ""})
        assert r.status_code == 200 and r.json()["session"] == "default" and r.json()["added"] == 2
        assert client.post("/v1/memory/forget", json={"session": "", "confirm": True}).json() == {"forgotten": 2}
        assert client.get("/v1/memory/stats").json()["entries"] == 0


def test_proxy_detects_and_recovers_inside_the_header_user(tmp_path, upstream, monkeypatch):  # noqa: F811
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    url, received = upstream
    received.clear()
    with TestClient(
        build_app(tmp_path / "p.db", upstream=url, upstream_timeout=5.0),
        raise_server_exceptions=False,
        base_url="http://127.0.0.1",
    ) as client:
        conv = _long_conversation() + [{"role": "user", "content": "Now run the whole test suite."}]
        alice = {"X-Lantern-Session": "billing-42", "X-Lantern-User": "alice"}
        bob = {"X-Lantern-Session": "billing-42", "X-Lantern-User": "bob"}
        r = client.post("/v1/chat/completions", json={"model": "tiny", "messages": conv}, headers=alice)
        assert r.status_code == 200
        conv.append(r.json()["choices"][0]["message"])
        summary = {
            "role": "system",
            "content": "This session is being continued from a previous conversation that "
            "ran out of context. Summary: the user set up the billing database.",
        }
        compacted = [
            summary,
            *conv[-4:],
            {"role": "user", "content": "Which port does the billing database listen on?"},
        ]
        # bob sends the same compacted context in a session of the same name: nothing of alice's comes back
        r = client.post("/v1/chat/completions", json={"model": "tiny", "messages": compacted}, headers=bob)
        assert r.status_code == 200
        assert received[-1]["body"]["messages"] == compacted
        # alice gets her port back
        r = client.post("/v1/chat/completions", json={"model": "tiny", "messages": compacted}, headers=alice)
        sent = received[-1]["body"]["messages"]
        assert sent[1]["role"] == "system" and "5433" in sent[1]["content"]
    con = sqlite3.connect(tmp_path / "p.db")
    users = {u for (u,) in con.execute("SELECT DISTINCT user_id FROM entries")}
    con.close()
    assert users == {"alice", "bob"}
