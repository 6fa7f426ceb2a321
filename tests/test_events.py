"""Compaction events (store/events.py, ``Lantern.record_compaction`` / ``Lantern.events``, ``lantern events``):
recorded by the Python API (compaction.Compaction.recover), the real proxy app and the real Claude Code hook
process; removed by forget, raw file bytes included. Real SQLite files, the fake embedder (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from lantern import Lantern
from lantern.compaction import detect
from lantern.store.migrations import MIGRATIONS

SYSTEM = {"role": "system", "content": "You are a coding assistant."}
TOKEN = "pelican_quasar_77"  # only in the question asked after the compaction: the event's query holds it
SUMMARY = {
    "role": "system",
    "content": "This session is being continued from a previous conversation that ran out of context. "
    "Summary: the user set up the billing database and refactored the invoice renderer.",
}
FIXTURE = Path(__file__).parent / "fixtures" / "claude_code_session.jsonl"
SID = "7f3c2a10-5b1e-4c8e-9d2a-1e6f0b7c9a41"


def conversation() -> list[dict]:
    msgs = [
        SYSTEM,
        {"role": "user", "content": "Start postgres for the billing service."},
        {"role": "assistant", "content": "Started: docker run -p 5433:5432 postgres:16, listening on port 5433."},
    ]
    for i in range(8):
        msgs += [
            {"role": "user", "content": f"Refactor module number {i} of the invoice renderer."},
            {"role": "assistant", "content": f"Refactored renderer module {i}; all {10 + i} tests pass."},
        ]
    return msgs


def compacted(msgs: list[dict]) -> list[dict]:
    question = {"role": "user", "content": f"Which port does the billing database listen on? ({TOKEN})"}
    return [SUMMARY, *msgs[-4:], question]


def raw_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in path.parent.iterdir() if p.name.startswith(path.name))


def recorded(lt: Lantern, session: str = "s", user: str | None = None):
    msgs = conversation()
    ids = lt.archive(msgs, session=session, user=user).entry_ids
    c = detect(lt, session, compacted(msgs), user=user)
    assert c is not None and c.reason == "summary"
    rec = c.recover(lt, budget=3000)
    return ids, c, rec


def test_schema_has_the_events_table(tmp_path):
    with Lantern(tmp_path / "m.db") as lt:
        assert lt.stats()["schema_version"] == len(MIGRATIONS) >= 6
        columns = [r[1] for r in lt.store.db.execute("PRAGMA table_info(events)")]
    assert columns[:3] == ["id", "time", "session"] and "lost" in columns and "rerank" in columns


def test_api_compaction_recover_records_one_small_event(tmp_path):
    with Lantern(tmp_path / "e.db") as lt:
        ids, c, rec = recorded(lt)
        (event,) = lt.events()
        assert event.session == "s" and event.source == "api" and event.reason == "summary"
        assert event.lost == c.lost_entry_ids and ids[1] in event.lost and ids[-1] not in event.lost
        assert [i for i, _, _ in event.injected] == [e.id for e in rec.entries]
        assert [n for _, n, _ in event.injected] == [len(e.text) for e in rec.entries]
        assert event.chars == rec.chars and event.budget == 3000 and event.rerank is False
        assert set(event.recovered) <= set(event.lost) and set(event.recovered) | set(event.not_recovered) == set(
            event.lost
        )
        assert ids[1] in event.recovered  # the port turn came back
        assert TOKEN in event.query and "billing" in event.query
        assert event.time.tzinfo is not None and abs(event.time.timestamp() - time.time()) < 60
        # small: ids and counts, no copy of a turn's text
        row = lt.store.db.execute("SELECT lost, injected, query FROM events").fetchone()
        assert "5433" not in row[0] + row[1] and "Refactored" not in row[2]
        # filters: the session and its sub-sessions' parents, the user
        assert lt.events("s/sub") == lt.events() and lt.events("other") == []
        assert lt.events(user="bob") == [] and lt.events(event_id=event.id)[0].id == event.id
        assert event.to_json()["injected"][0] == {
            "id": rec.entries[0].id,
            "chars": len(rec.entries[0].text),
            "excerpt": rec.entries[0].excerpt,
        }
        # record=False (the caller records its own) writes nothing
        c.recover(lt, record=False)
        assert len(lt.events()) == 1
        # the receipt: the latency, nothing to say about an empty block, the loss report as recovered
        assert event.latency_ms is not None and event.latency_ms > 0 and event.empty_reason is None
        assert event.loss["lost"] == len(rec.loss.items) and event.loss["by_type"] == rec.loss.by_type()


def test_a_recovery_that_injects_nothing_says_why(tmp_path):
    with Lantern(tmp_path / "w.db") as lt:
        lt.archive(conversation(), session="s")
        rec = lt.recover_compaction(SUMMARY["content"], session="s", budget=3000, record=True)
        empty = lt.recover_compaction("x", session="nothing-here", budget=3000, record=True)
        assert empty.text == "" and empty.reason == "nothing_archived"
        newest, first = lt.events(session=None)
        assert newest.empty_reason == "nothing_archived" and newest.injected == [] and newest.latency_ms >= 0
        assert (first.empty_reason is None) == bool(rec.text)


@given(st.lists(st.integers(1, 6), min_size=1, max_size=20))
@settings(max_examples=examples(40), deadline=None)
def test_an_events_lost_entries_are_a_set_in_first_given_order(tmp_path_factory, lost):
    """Newcomer finding: the demo named entry 51 twice (a repeated turn is stored once), and the event listed it
    twice in ``lost`` and ``not_recovered``. Each entry is listed once, in the order first given."""
    with Lantern(tmp_path_factory.mktemp("ev") / "e.db") as lt:
        lt.archive(conversation(), session="s")
        rec = lt.recover_compaction(SUMMARY["content"], session="s", budget=3000)
        lt.record_compaction(rec, session="s", reason="gist", lost=lost)
        (event,) = lt.events("s")
    assert event.lost == list(dict.fromkeys(lost))
    assert sorted(event.recovered + event.not_recovered) == sorted(set(lost))


@pytest.mark.parametrize("source", ["mcp", "proxy"])
def test_every_recovery_the_mcp_server_and_the_rest_api_serve_leaves_a_receipt(tmp_path, source):
    from lantern.integrations.service import MemoryService

    path = tmp_path / "m.db"
    with Lantern(path) as lt:
        lt.archive(conversation(), session="s")
    service = MemoryService(path, source=source)
    try:
        found = service.recover("which port does the billing database listen on", session="s", budget=2000)
        nothing = service.recover("which port does the billing database listen on", session="none", budget=2000)
    finally:
        service.close()
    assert found["text"] and not nothing["text"]
    with Lantern(path) as lt:
        second, first = lt.events()
    assert first.source == second.source == source and first.reason == "query"
    assert first.chars == len(found["text"]) and first.empty_reason is None and first.latency_ms > 0
    assert second.injected == [] and second.empty_reason == nothing.get("reason", "nothing_relevant")  # the why


@settings(max_examples=examples(60), deadline=None)
@given(
    packed=st.integers(0, 80),
    cut=st.integers(0, 80),
    value=st.text(min_size=1, max_size=400),
)
def test_an_events_loss_report_is_bounded_and_keeps_every_count(packed, cut, value):
    from lantern.store.events import LOSS_CUT, LOSS_PACKED, LOSS_VALUE_CHARS, bound_loss

    item = {"value": value, "type": "path", "weight": 0.5, "turn": 3, "entry": 7, "seen": 1}
    report = {
        "lost": packed + cut,
        "kept": 4,
        "packed": packed,
        "by_type": {"path": {"lost": packed + cut, "packed": packed}},
        "items": [dict(item, packed=True)] * packed,
        "cut": [dict(item, packed=False)] * cut,
    }
    kept = bound_loss(report)
    assert {k: kept[k] for k in ("lost", "kept", "packed", "by_type")} == {
        k: report[k] for k in ("lost", "kept", "packed", "by_type")
    }
    assert len(kept["items"]) == min(packed, LOSS_PACKED) and len(kept["cut"]) == min(cut, LOSS_CUT)
    for i in kept["items"] + kept["cut"]:
        assert len(i["value"]) <= LOSS_VALUE_CHARS + 1 and value.startswith(i["value"].rstrip("…")[:1])
    assert len(json.dumps(kept)) < 2_000 + (LOSS_PACKED + LOSS_CUT) * (LOSS_VALUE_CHARS * 6 + 200)


def test_the_query_is_redacted_like_archived_text(tmp_path):
    secret = "sk-proj-" + "Zq7Xk2Lm9Np4Rt8Vw3Ys6Ab1Cd5Ef0Gh"
    with Lantern(tmp_path / "r.db") as lt:
        msgs = conversation()
        lt.archive(msgs, session="s")
        live = [SUMMARY, *msgs[-4:], {"role": "user", "content": f"the key {secret} failed; which port again?"}]
        c = detect(lt, "s", live)
        c.recover(lt)
        (event,) = lt.events()
        assert secret not in event.query and "which port again" in event.query
    assert secret.encode() not in raw_bytes(tmp_path / "r.db")


@pytest.mark.parametrize("how", ["session", "user", "entry"])
def test_forget_removes_events_and_the_query_bytes(tmp_path, how):
    path = tmp_path / "f.db"
    with Lantern(path, user="alice") as lt:
        ids, c, rec = recorded(lt)
        recorded(lt, session="keep", user="bob")
        lt.store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert TOKEN.encode() in raw_bytes(path)  # the control: the query is in the file
        selector = {"session": {"session": "s"}, "user": {"user": "alice"}, "entry": {"entry": ids[1]}}[how]
        lt.forget(**selector)
        mine = lt.events()
        if how == "entry":  # the event stays without the forgotten id, and without its query (it may quote it)
            (event,) = mine
            assert ids[1] not in event.lost and ids[1] not in [i for i, _, _ in event.injected]
            assert event.query == "" and event.lost and event.loss is None  # the loss report quotes turns too
        else:
            assert mine == []
        (theirs,) = lt.events(user="bob")  # another user's events stay
        assert TOKEN in theirs.query
        lt.forget(user="bob")
        assert lt.events(user="bob") == []
    assert TOKEN.encode() not in raw_bytes(path)


def test_a_turn_archived_after_the_event_leaves_its_query_when_deleted(tmp_path):
    """A turn archived after an event (the reply a regenerate abandons) cannot be quoted by the event's query:
    deleting it keeps the query; deleting a turn of the session archived before the event blanks it."""
    with Lantern(tmp_path / "e.db") as lt:
        ids, _, _ = recorded(lt)
        later = lt.archive([{"role": "assistant", "content": "A reply the user regenerated away."}], session="s")
        lt.forget(entry=later.entry_ids[0])
        (event,) = lt.events()
        assert TOKEN in event.query
        lt.forget(entry=ids[-1])  # still live at the compaction, so not listed; older than the event
        (event,) = lt.events()
        assert event.query == "" and event.lost


def test_forgetting_every_listed_entry_deletes_the_event(tmp_path):
    with Lantern(tmp_path / "g.db") as lt:
        ids, c, rec = recorded(lt)
        listed = set(c.lost_entry_ids) | {e.id for e in rec.entries}
        for i in listed:
            lt.forget(entry=i, vacuum=False)
        assert lt.events() == []


def test_a_locked_database_still_recovers_without_an_event(tmp_path, monkeypatch, caplog):
    from lantern import reinforce

    monkeypatch.setattr(reinforce, "WRITE_WAIT_S", 0.05)
    path = tmp_path / "l.db"
    with Lantern(path) as lt:
        msgs = conversation()
        lt.archive(msgs, session="s")
        c = detect(lt, "s", compacted(msgs))
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        try:
            rec = c.recover(lt)
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert "5433" in rec.text and lt.events() == []
    assert "compaction event not recorded" in caplog.text


def _src() -> str:
    return os.pathsep.join([str(Path(__file__).parents[1] / "src"), os.environ.get("PYTHONPATH", "")])


# ---------------------------------------------------------------------------------------------- the proxy
@pytest.fixture(scope="module")
def upstream():
    """A real tiny OpenAI-compatible upstream on a loopback port, in a thread."""
    pytest.importorskip("uvicorn")
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from serving import start_server, stop_server

    async def chat(request):
        body = await request.json()
        text = f"reply to: {str(body['messages'][-1].get('content'))[:40]}"
        return JSONResponse(
            {
                "id": "c",
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            }
        )

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    port, server, thread = start_server(app, wait_s=10)
    yield f"http://127.0.0.1:{port}/v1"
    stop_server(server, thread)


def test_a_compaction_handled_by_the_proxy_is_an_event(tmp_path, upstream, monkeypatch):
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from lantern.integrations.proxy import build_app

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    path = tmp_path / "p.db"
    headers = {"X-Lantern-Session": "billing-42", "X-Lantern-User": "alice"}
    msgs = conversation()
    with TestClient(build_app(path, upstream=upstream), base_url="http://127.0.0.1") as client:
        r = client.post("/v1/chat/completions", json={"model": "m", "messages": msgs}, headers=headers)
        assert r.status_code == 200
        live = compacted(msgs)
        for _ in range(2):  # the same compaction sent twice: one recovery, one event
            r = client.post("/v1/chat/completions", json={"model": "m", "messages": live}, headers=headers)
            assert r.status_code == 200
    with Lantern(path, user="alice") as lt:
        (event,) = lt.events()
        by_text = {i: t for i, _, t in lt.store.session_turns("billing-42", lt.scope)}
    assert event.source == "proxy" and event.reason == "summary" and event.session == "billing-42"
    assert event.user == "alice" and TOKEN in event.query
    port_turn = next(i for i, t in by_text.items() if "5433" in t)
    assert port_turn in event.lost and port_turn in event.recovered
    assert not any("module number 6" in by_text[i] for i in event.lost)  # still live: not lost
    out = subprocess.run(
        [sys.executable, "-m", "lantern.cli", "--db", str(path), "events", "--json", "--user", "alice"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": _src()},
    )
    assert out.returncode == 0, out.stderr
    (shown,) = json.loads(out.stdout)
    assert shown["id"] == event.id and shown["lost"] == event.lost and shown["source"] == "proxy"
    on_the_timeline(path, "billing-42", "alice", event)


def on_the_timeline(path: Path, session: str, user: str, event) -> None:
    """The inspector shows the event on the session's timeline, its lost turns marked, and lost beside injected."""
    pytest.importorskip("jinja2")
    from fastapi.testclient import TestClient

    from lantern.integrations.ui import build_app

    with TestClient(build_app(path), base_url="http://127.0.0.1") as ui:
        page = ui.get("/session", params={"s": session, "user": user}).text
        assert f'id="ev{event.id}"' in page and f"Compaction #{event.id}" in page
        assert page.count(f"lost in #{event.id} · recovered") == len(event.recovered)
        assert page.count(f"lost in #{event.id} · not recovered") == len(event.not_recovered)
        detail = ui.get(f"/event/{event.id}").text
        assert detail.count("✓ recovered") == len(event.recovered) and f"{len(event.injected)} entries" in detail


# ---------------------------------------------------------------------------------------------- the hooks
def test_a_compaction_handled_by_the_claude_code_hook_is_an_event(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    db = tmp_path / "db" / "lantern.db"
    env = {k: v for k, v in os.environ.items() if k not in ("LANTERN_DB", "HOME", "LANTERN_USER")}
    env.update(HOME=str(home), LANTERN_DB=str(db), PYTHONPATH=_src())
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")

    def hook(event: str, **extra):
        payload = {
            "session_id": SID,
            "transcript_path": str(transcript),
            "cwd": "/home/dev/billing",
            "hook_event_name": event,
            **extra,
        }
        r = subprocess.run(
            [sys.executable, "-m", "lantern.cli", "hook", "claude-code"],
            input=json.dumps(payload),
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        return r.stdout

    hook("PreCompact", trigger="manual")
    out = json.loads(hook("SessionStart", source="compact"))
    context = out["hookSpecificOutput"]["additionalContext"]
    assert "5433" in context
    hook("UserPromptSubmit", prompt="as I said earlier, what was the port?")
    # every prompt is a candidate (issue 35): one about nothing archived gets nothing, and is no event
    assert hook("UserPromptSubmit", prompt="write a haiku about autumn leaves in Kyoto") == ""

    r = subprocess.run(
        [sys.executable, "-m", "lantern.cli", "events", "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    prompt_event, start_event = json.loads(r.stdout)  # newest first
    assert start_event["source"] == prompt_event["source"] == "claude-code"
    assert start_event["reason"] == "compact_boundary" and prompt_event["reason"] == "back_reference"
    assert start_event["session"] == SID and "what was the port" in prompt_event["query"]
    with Lantern(db) as lt:
        turns = {i: t for i, _, t in lt.store.session_turns(SID, lt.scope)}
    assert start_event["lost"] and set(start_event["lost"]) <= set(turns)
    port_turns = {i for i in start_event["lost"] if "5433" in turns[i]}
    assert port_turns and port_turns & set(start_event["recovered"])
    assert sum(x["chars"] for x in start_event["injected"]) <= len(context)
    with Lantern(db) as lt:
        (event,) = [e for e in lt.events(SID) if e.id == start_event["id"]]
    on_the_timeline(db, SID, "", event)

    table = subprocess.run(
        [sys.executable, "-m", "lantern.cli", "events"],
        env={**env, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert table.returncode == 0 and "compact_boundary" in table.stdout and "back_reference" in table.stdout
