"""The memory REST API (integrations/proxy.py): FastAPI's TestClient over a real SQLite file and the fake embedder
(tests/conftest.py), and one real `lantern serve` on a loopback port."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from lantern import Lantern

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
from fastapi.testclient import TestClient  # noqa: E402

from lantern.integrations.proxy import build_app  # noqa: E402
from samples import PORT_CONVERSATION as CONVERSATION  # noqa: E402


@pytest.fixture
def client(tmp_path):
    with TestClient(build_app(tmp_path / "api.db"), raise_server_exceptions=False, base_url="http://127.0.0.1") as c:
        yield c


def test_archive_recover_search_forget_stats(client, tmp_path):
    assert client.get("/v1/memory/stats").status_code == 404  # nothing archived yet: no database created
    assert not (tmp_path / "api.db").exists()

    r = client.post("/v1/memory/archive", json={"messages": CONVERSATION, "session": "build-42"})
    assert r.status_code == 200, r.text
    archived = r.json()
    assert archived["added"] == 2 and archived["duplicates"] == 0 and len(archived["entry_ids"]) == 2
    assert (
        client.post("/v1/memory/archive", json={"messages": CONVERSATION, "session": "build-42"}).json()["duplicates"]
        == 2
    )

    summary = "[Summary] The user set up the billing database and asked for docs."
    r = client.post(
        "/v1/memory/recover",
        json={
            "query": "which port does the billing database use?\n" + summary,
            "session": "build-42",
            "budget": 2000,
            "exclude": CONVERSATION[-2:],
        },
    )
    assert r.status_code == 200, r.text
    rec = r.json()
    assert "5433" in rec["text"] and len(rec["text"]) == rec["chars"] <= 2000
    assert [e["id"] for e in rec["entries"]] == [archived["entry_ids"][0]]

    r = client.post(
        "/v1/memory/recover_compaction",
        json={"summary": summary, "session": "build-42", "live": CONVERSATION[-2:], "budget": 2000},
    )
    assert r.status_code == 200, r.text
    comp = r.json()
    assert "5433" in comp["text"] and comp["chars"] <= 2000 and comp["loss"]["packed"] >= 1

    hits = client.post("/v1/memory/search", json={"query": "postgres port", "k": 3}).json()["hits"]
    assert hits[0]["id"] == archived["entry_ids"][0] and hits[0]["ranks"]

    s = client.get("/v1/memory/stats").json()
    assert s["entries"] == 2 and s["sessions"] == 1 and s["embedder"] and s["pruned"] == 0

    assert client.post(
        "/v1/memory/feedback", json={"entry_ids": [archived["entry_ids"][0]], "useful": False}
    ).json() == {"updated": 1}
    assert client.post("/v1/memory/feedback", json={"entry_ids": [], "useful": False}).status_code == 422

    assert client.post("/v1/memory/forget", json={"entry": archived["entry_ids"][1], "confirm": True}).json() == {
        "forgotten": 1
    }
    assert client.post("/v1/memory/forget", json={"session": "build-42", "confirm": True}).json() == {"forgotten": 1}
    gone = client.post("/v1/memory/recover", json={"query": "postgres 5433"}).json()
    assert gone["text"] == "" and gone["reason"] == "nothing_archived"  # an empty block says why


@pytest.mark.parametrize(
    "path, body, status",
    [
        ("/v1/memory/archive", {"messages": []}, 422),
        ("/v1/memory/archive", {"messages": "x"}, 422),
        ("/v1/memory/archive", {}, 422),
        ("/v1/memory/recover", {"query": "x", "budget": -5}, 422),
        ("/v1/memory/recover", {"query": 3}, 422),
        ("/v1/memory/search", {"query": "x", "k": 0}, 422),
        ("/v1/memory/recover_compaction", {"summary": "s", "budget": -1}, 422),
        ("/v1/memory/recover_compaction", {"summary": 3}, 422),
        ("/v1/memory/recover_compaction", {"summary": "s", "sesion": "typo"}, 422),
        ("/v1/memory/forget", {}, 400),
        ("/v1/memory/forget", {"entry": 1, "session": "s"}, 400),
    ],
)
def test_bad_input_is_a_json_error(client, path, body, status):
    client.post("/v1/memory/archive", json={"messages": CONVERSATION})
    r = client.post(path, json=body)
    assert r.status_code == status, r.text
    assert isinstance(r.json()["error"], str) and "Traceback" not in r.text
    r = client.post(path, content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["error"]
    assert client.get("/v1/memory/stats").status_code == 200  # still serving


def test_a_summary_over_the_limit_still_gets_its_block_and_says_it_was_cut(client):
    client.post("/v1/memory/archive", json={"messages": CONVERSATION})
    r = client.post("/v1/memory/recover_compaction", json={"summary": "x " * 500_001})  # compaction.MAX_SUMMARY_CHARS
    assert r.status_code == 200 and "1,000,002 characters" in r.json()["detail"], r.text[:500]


def test_openapi_schema(client):
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    for p in ("archive", "recover", "search", "forget"):
        assert "post" in paths[f"/v1/memory/{p}"]
    assert "get" in paths["/v1/memory/stats"]
    recover_body = spec["components"]["schemas"]["RecoverRequest"]
    assert recover_body["required"] == ["query"] and "budget" in recover_body["properties"]
    assert "RecoverResponse" in spec["components"]["schemas"]
    assert client.get("/docs").status_code == 200
    r = client.get("/v1/nothing-here")
    assert r.status_code == 404 and r.json() == {"error": "Not Found"}
    assert client.get("/v1/memory/archive").status_code == 405


def test_bearer_token_and_body_limit(tmp_path):
    app = build_app(tmp_path / "t.db", token="s3cret", max_body_bytes=4096)
    with TestClient(app, base_url="http://127.0.0.1") as c:
        assert c.get("/v1/memory/stats").status_code == 401
        assert c.get("/v1/memory/stats", headers={"Authorization": "Bearer wrong"}).status_code == 401
        auth = {"Authorization": "Bearer s3cret"}
        r = c.post("/v1/memory/archive", json={"messages": CONVERSATION}, headers=auth)
        assert r.status_code == 200, r.text
        big = {"messages": [{"role": "user", "content": "x" * 5000}]}
        r = c.post("/v1/memory/archive", json=big, headers=auth)
        assert r.status_code == 413 and "4096" in r.json()["error"]

        def chunks():  # no Content-Length: counted while read
            for _ in range(10):
                yield b" " * 1000

        r = c.post("/v1/memory/archive", content=chunks(), headers={**auth, "content-type": "application/json"})
        assert r.status_code == 413
        assert c.get("/v1/memory/stats", headers=auth).json()["entries"] == 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_lantern_serve_on_loopback(tmp_path):
    port = _free_port()
    env = {**os.environ, "LANTERN_TOKEN": "tok"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "lantern.cli", "--db", str(tmp_path / "s.db"), "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        base, auth = f"http://127.0.0.1:{port}", {"Authorization": "Bearer tok"}
        deadline = time.monotonic() + 15
        while True:
            try:
                httpx.get(base + "/openapi.json", headers=auth, timeout=1)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.1)
        r = httpx.post(
            base + "/v1/memory/archive", json={"messages": CONVERSATION, "session": "s"}, headers=auth, timeout=30
        )
        assert r.status_code == 200 and r.json()["added"] == 2
        r = httpx.post(base + "/v1/memory/recover", json={"query": "postgres port"}, headers=auth, timeout=30)
        assert "5433" in r.json()["text"]
        assert httpx.get(base + "/v1/memory/stats", timeout=5).status_code == 401
        # bound to loopback only
        conns = (
            subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True)
            if shutil.which("ss")
            else None
        )
        if conns is not None and conns.returncode == 0 and conns.stdout.strip():
            assert [line.split()[3] for line in conns.stdout.splitlines()] == [f"127.0.0.1:{port}"]
    finally:
        proc.terminate()
        proc.communicate(timeout=10)  # closes the pipes


@pytest.mark.parametrize(
    "path, body, message",
    [
        (
            "/v1/memory/recover",
            {"query": "port", "sesion": "a"},
            "unknown argument for recover: 'sesion' (recover takes query, session, budget, exclude, user, agent, "
            "project)",
        ),
        (
            "/v1/memory/search",
            {"query": "port", "k": 3, "usr": "bob", "projet": "p"},
            "unknown arguments for search: 'usr', 'projet' (search takes query, k, session, user, agent, project)",
        ),
        (
            "/v1/memory/forget",
            {"sesion": "s"},
            "unknown argument for forget: 'sesion' (forget takes entry, session, user, agent, project, confirm)",
        ),
        (
            "/v1/memory/search",
            {"query": "x", "k": 0},
            "invalid arguments for search: k: should be greater than or equal to 1 (got 0)",
        ),
    ],
)
def test_an_unknown_or_invalid_field_is_a_422_with_the_mcp_servers_one_line(client, path, body, message):
    """A misspelt field used to be ignored: "sesion" silently searched every session and "usr" another user's
    scope. It is now refused, in the words the MCP server uses, and nothing is read or deleted."""
    client.post("/v1/memory/archive", json={"messages": CONVERSATION, "session": "s"})
    before = client.get("/v1/memory/stats").json()["entries"]
    r = client.post(path, json=body)
    assert r.status_code == 422 and r.json() == {"error": message}
    assert client.get("/v1/memory/stats").json()["entries"] == before


@pytest.mark.parametrize(
    "path, body",
    [
        ("/v1/memory/forget", {"entry": True}),
        ("/v1/memory/forget", {"entry": "1"}),
        ("/v1/memory/feedback", {"entry_ids": [True], "useful": True}),
        ("/v1/memory/feedback", {"entry_ids": [1], "useful": "yes"}),
        ("/v1/memory/search", {"query": "port", "k": "3"}),
        ("/v1/memory/recover", {"query": "port", "exclude": [True]}),
    ],
)
def test_a_boolean_or_a_string_is_no_entry_id_nor_count(client, path, body):
    """``{"entry": true}`` deleted entry 1 (pydantic coerced it); ids, counts and ``useful`` are strict: a 422,
    nothing deleted (breaker finding)."""
    client.post("/v1/memory/archive", json={"messages": CONVERSATION})
    before = client.get("/v1/memory/stats").json()["entries"]
    r = client.post(path, json=body)
    assert r.status_code == 422 and "should be a valid" in r.json()["error"], r.text
    assert client.get("/v1/memory/stats").json()["entries"] == before


def test_chat_completions_without_an_upstream_says_how_to_start_one(client):
    """Without --upstream the server is the memory API alone; a chat client pointed at it got a bare 404 "Not
    Found" (newcomer finding)."""
    r = client.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 404 and "--upstream" in r.json()["error"]


SELECTORS = st.sampled_from(
    [
        {"session": "a"},
        {"session": "b"},
        {"session": ""},
        {"user": "u2"},
        {"session": "a", "user": "u2"},
        {"agent": "x"},
    ]
)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(selector=SELECTORS, extra=st.integers(0, 2), wrong=st.sampled_from([None, "other-call", "tampered", "stale"]))
def test_forget_over_rest_previews_first_and_deletes_only_what_its_token_confirmed(
    tmp_path_factory, selector, extra, wrong
):
    """Over REST (and MCP: the same MemoryService.forget), for any selection: a forget without confirm deletes
    nothing and says how many entries it would (the count a confirmed forget then deletes); the same call with the
    preview's token deletes exactly those; a token of another call, a tampered one, or one the selection outgrew
    (turns archived since the preview) deletes nothing and is a 400 (before: the first call deleted at once)."""
    from lantern.integrations.proxy import build_app

    db = tmp_path_factory.mktemp("confirm") / "m.db"
    with Lantern(db) as lt:
        for user in ("", "u2"):
            for session in ("a", "b", "default"):
                lt.archive([{"role": "user", "content": f"{session} {user} turn"}], session=session, user=user)
        lt.archive([{"role": "user", "content": "x's turn"}], session="a", agent="x")
    with TestClient(build_app(str(db)), base_url="http://127.0.0.1") as client:
        preview = client.post("/v1/memory/forget", json=selector)
        assert preview.status_code == 200, preview.text
        body = preview.json()
        assert body["forgotten"] == 0 and body["would_forget"] >= 0 and isinstance(body["confirm"], str)
        token = body["confirm"]
        if wrong == "other-call":
            other = {"session": "zzz"} if selector != {"session": "zzz"} else {"session": "yyy"}
            token = client.post("/v1/memory/forget", json=other).json()["confirm"]
        elif wrong == "tampered":
            token = ("0" if token[0] != "0" else "1") + token[1:]
        elif wrong == "stale":
            user = selector.get("user", "")
            session = selector.get("session") or "default"
            with Lantern(db) as lt:
                for k in range(extra + 1):
                    lt.archive(
                        [{"role": "user", "content": f"later {k}"}],
                        session=session,
                        user=user,
                        agent=selector.get("agent"),
                    )
        r = client.post("/v1/memory/forget", json={**selector, "confirm": token})
        if wrong is None:
            assert r.status_code == 200 and r.json()["forgotten"] == body["would_forget"], r.text
            again = client.post("/v1/memory/forget", json=selector).json()
            assert again["would_forget"] == 0
        else:
            assert r.status_code == 400 and "nothing forgotten" in r.json()["error"], r.text
            still = client.post("/v1/memory/forget", json=selector).json()["would_forget"]
            assert still == body["would_forget"] + (extra + 1 if wrong == "stale" else 0)
