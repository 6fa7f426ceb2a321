"""Layered context (docs/architecture.md §5): working memory, rolling gist and its cadence, the LLM gist through a
local HTTP server speaking /v1/chat/completions (never a remote call), build_context's budget and its
no-turn-twice rule, triggers, and the three-day scenario through Session."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lantern import Config, Lantern
from lantern.memory.context import GIST_TITLE, Session


def exchange(user: str, reply: str, when: str | None = None) -> list[dict]:
    first = {"role": "user", "content": user}
    if when:
        first["timestamp"] = when
    return [first, {"role": "assistant", "content": reply}]


TOPICS = [
    ("Start postgres for the billing service on port 5433.", "Started postgres 16, listening on 127.0.0.1:5433."),
    ("Add a health check to api/health.py.", "Added GET /healthz in api/health.py returning 200."),
    ("Rename the flag --fast to --quick in cli.py.", "Renamed the flag; cli.py now accepts --quick."),
    ("Pin numpy to 1.26.4 in requirements.txt.", "Pinned numpy==1.26.4."),
    ("Write a test for the parser edge case with empty lines.", "Added tests/test_parser.py::test_empty_lines."),
    ("Set the log level to debug for the worker.", "Worker LOG_LEVEL=debug now."),
    ("Cache the embeddings in ~/.cache/emb.", "Embeddings are cached under ~/.cache/emb."),
    ("Bump the Docker base image to python:3.12-slim.", "Dockerfile uses python:3.12-slim."),
    ("Add retries to the HTTP client, three at most.", "http_client.py retries 3 times with backoff."),
    ("Document the deploy steps in DEPLOY.md.", "DEPLOY.md has the five deploy steps."),
    ("Turn off telemetry in the config.", "telemetry: false in config.yaml."),
    ("Make the migration script idempotent.", "migrate.py checks user_version first."),
]


@pytest.fixture()
def lantern(tmp_path):
    with Lantern(tmp_path / "m.db") as lt:
        yield lt


def fill(session: Session, n: int) -> None:
    for user, reply in TOPICS[:n]:
        session.add(exchange(user, reply))


def test_working_memory_is_the_last_three_turns_verbatim(lantern):
    s = Session(lantern, "chat")
    fill(s, 5)
    assert [w.turn.messages[0].text for w in s.working] == [u for u, _ in TOPICS[2:5]]
    ctx = s.build_context("Thanks, what next?", 10_000)
    assert [m["content"] for m in ctx.working] == [x for pair in TOPICS[2:5] for x in pair]
    assert [m["role"] for m in ctx.working] == ["user", "assistant"] * 3
    assert ctx.messages[-1] == {"role": "user", "content": "Thanks, what next?"}


def test_gist_refreshes_every_five_turns_from_turns_that_left_working_memory(lantern):
    s = Session(lantern, "chat")
    fill(s, 4)
    assert s.refreshes == 0 and s.gist == ""
    fill_more = TOPICS[4:5]
    s.add(exchange(*fill_more[0]))  # 5th turn: first refresh; turns 1-2 have left working memory
    assert s.refreshes == 1
    assert s.gist.splitlines() == [
        "turn 0: Start postgres for the billing service on port 5433. → Started postgres 16, listening on "
        "127.0.0.1:5433.",
        "turn 1: Add a health check to api/health.py. → Added GET /healthz in api/health.py returning 200.",
    ]
    for user, reply in TOPICS[5:9]:  # turns 6-9: no refresh, the gist does not move
        s.add(exchange(user, reply))
        assert s.refreshes == 1 and len(s.gist.splitlines()) == 2
    s.add(exchange(*TOPICS[9]))  # 10th turn: second refresh
    assert s.refreshes == 2
    assert [line.split(":")[0] for line in s.gist.splitlines()] == [f"turn {i}" for i in range(7)]
    working_text = " ".join(w.turn.text for w in s.working)
    assert not any(line.split(": ", 1)[1].split(" → ")[0] in working_text for line in s.gist.splitlines())


def test_every_turn_is_in_working_memory_or_the_gist_between_refreshes(lantern):
    """After 6 turns the 3rd had left working memory and waited for the 10th turn's refresh: it was in neither
    layer of the context (newcomer finding). It is now shown as its gist line until the refresh folds it in."""
    s = Session(lantern, "chat")
    for n, (user, reply) in enumerate(TOPICS, 1):
        s.add(exchange(user, reply))
        ctx = s.build_context("Thanks, what next?", 20_000, recover=False)
        working = " ".join(m["content"] for m in ctx.working)
        for i, (u, _) in enumerate(TOPICS[:n]):
            assert u in working or f"turn {i}: {u}" in ctx.gist, (n, i)
    assert s.gist.count("\n") + 1 == 7  # the folded gist itself still refreshes every 5 turns (turns 0-6 at 10)


def test_pending_lines_are_capped_deduplicated_and_forgotten(tmp_path):
    """Breaker findings on the pending lines: they were not held to gist_max_chars; with working_turns=0 a turn
    that grew was pending twice; a forgotten turn's id reused by a new turn brought the forgotten text back."""
    from lantern import Config

    with Lantern(tmp_path / "cap.db", config=Config(working_turns=1, gist_every=50, gist_max_chars=300)) as lt:
        s = Session(lt, "chat")
        fill(s, 12)
        ctx = s.build_context("next?", 20_000, recover=False)
        assert 0 < len(ctx.gist) - len(GIST_TITLE) - 1 <= 300
    with Lantern(tmp_path / "grow.db", config=Config(working_turns=0)) as lt:
        s = Session(lt, "chat")
        s.add([{"role": "user", "content": "Turn one: the port is 5433."}])
        s.add(exchange("Turn one: the port is 5433.", "Noted, 5433."))
        assert s.build_context("next?", 4000, recover=False).gist.count("turn 0:") == 1
    with Lantern(tmp_path / "reuse.db", config=Config(working_turns=1, gist_every=10)) as lt:
        s = Session(lt, "chat")
        for user in ("Turn X is fine.", "My favourite animal is the teal-ELEPHANT.", "Turn Y."):
            s.add(exchange(user, "Noted."))
        lt.forget(entry=3)
        lt.forget(entry=2)
        s.add(exchange("Turn NEW.", "Noted."))
        ctx = s.build_context("anything?", 4000, recover=False)
        assert "ELEPHANT" not in ctx.text and "Turn NEW." in " ".join(m["content"] for m in ctx.working)


def test_gist_rolls_off_oldest_lines_past_its_cap(tmp_path):
    from lantern import Config

    with Lantern(tmp_path / "m.db", config=Config(gist_max_chars=250)) as lt:
        s = Session(lt, "chat")
        fill(s, 10)
        assert 0 < len(s.gist) <= 250
        assert s.gist.splitlines()[-1].startswith("turn 6:")  # newest kept, oldest dropped
        # the Session keeps no record of turns in no layer (breaker: it grew by one entry per turn)
        assert len(s._place_of) == len(s.working) + len(s._pending) + len(s.gist.splitlines())


@pytest.mark.parametrize("budget", [80, 150, 300, 600, 1000, 2000, 4000, 8000])
def test_budget_is_respected(lantern, budget):
    s = Session(lantern, "chat", system_prompt="You are a careful coding assistant.")
    fill(s, 12)
    question = "Which port did we use before for postgres?"
    ctx = s.build_context(question, budget)
    assert len(ctx.text) <= budget
    assert ctx.text == "\n\n".join(m["content"] for m in ctx.messages if m["content"])
    assert (
        ctx.messages[0]["content"] == "You are a careful coding assistant." and ctx.messages[-1]["content"] == question
    )


def test_budget_too_small_for_system_and_question_is_an_error(lantern):
    s = Session(lantern, "chat", system_prompt="x" * 100)
    with pytest.raises(ValueError, match="cannot hold"):
        s.build_context("question?", 50)
    with pytest.raises(ValueError):
        s.build_context("question?", -1)


def test_no_turn_appears_twice(lantern):
    s = Session(lantern, "chat")
    fill(s, 12)
    # the question is about a turn still in working memory AND one only in the archive
    ctx = s.build_context("As I said earlier: which port does postgres use, and what is in DEPLOY.md?", 20_000)
    assert ctx.recovery is not None and ctx.recovery.entries
    working_ids = {w.entry_id for w in s.working}
    recovered = [e.id for e in ctx.recovery.entries]
    assert len(recovered) == len(set(recovered)) and not working_ids & set(recovered)
    assert ctx.text.count("DEPLOY.md has the five deploy steps.") == 1  # working memory only
    assert ctx.text.count("listening on 127.0.0.1:5433") == 1  # recovered, and its gist line dropped
    assert "turn 0:" not in ctx.gist
    # every gist line that is left belongs to a turn in neither working memory nor the recovered block
    turns = {e.turn for e in ctx.recovery.entries}
    for line in ctx.gist.splitlines()[1:]:
        assert int(line.split(":")[0].split()[1]) not in turns


def test_trigger_decides_recovery_and_query_is_question_plus_gist(lantern):
    s = Session(lantern, "chat")
    fill(s, 10)
    plain = s.build_context("Now write the release notes.", 8000)
    assert plain.recovery is None and not plain.trigger and plain.recovered == ""
    back = s.build_context("What was the numpy version we pinned again?", 8000)
    assert back.trigger and back.recovery is not None
    assert back.recovery.query == "What was the numpy version we pinned again?\n" + s.gist
    assert "1.26.4" in back.recovered and back.recovered.startswith("[Recovered by Lantern")
    forced = s.build_context("Now write the release notes.", 8000, recover=True)
    assert forced.recovery is not None
    drafted = s.build_context("Which base image?", 8000, draft="I'm not sure which image we chose.")
    assert drafted.trigger and drafted.recovery is not None


@pytest.mark.real_models  # the question clears the injection decision by meaning
def test_recovered_block_names_session_time_and_turn(lantern):
    lantern.archive(
        exchange("Pin numpy to 1.26.4 in requirements.txt.", "Pinned numpy==1.26.4.", "2026-03-13T09:00:00Z"),
        session="old",
    )
    s = Session(lantern, "new")
    fill(s, 3)
    ctx = s.build_context("Which numpy version did we use before?", 6000)
    assert ctx.trigger
    assert "[Recovered by Lantern" in ctx.recovered
    assert "session old · turn 0 · 2026-03-13 09:00" in ctx.recovered or (
        "all from session old" in ctx.recovered and "turn 0 · 2026-03-13 09:00" in ctx.recovered
    )
    assert ctx.messages[-2] == {"role": "system", "content": ctx.recovered}


def test_recovery_reads_the_users_whole_archive_unless_session_only(lantern):
    """build_context recovers across every session of the user (the pin was made in "old"); ``session_only`` keeps
    to this session and its sub-sessions, like ``recover(session=...)``; another user's archive is never read."""
    lantern.archive(
        exchange("Pin numpy to 1.24.3 in constraints.txt.", "Pinned numpy==1.24.3 in constraints.txt."), session="old"
    )
    lantern.archive(
        exchange("Pin numpy to 2.0.1 for the experiment.", "Pinned numpy==2.0.1."), session="old", user="bob"
    )
    s = Session(lantern, "new")
    fill(s, 5)  # TOPICS[3] (numpy 1.26.4 again, in this session) has left working memory
    s.lantern.archive(
        exchange("Pin numpy to 1.25.0 in the sidecar image.", "Pinned numpy==1.25.0 there."), session="new/sidecar"
    )
    question = "Which numpy version did we pin before?"
    wide = s.build_context(question, 6000, recover=True)
    assert {e.session for e in wide.recovery.entries} >= {"old", "new", "new/sidecar"}
    narrow = s.build_context(question, 6000, recover=True, session_only=True)
    sessions = {e.session for e in narrow.recovery.entries}
    assert sessions and sessions <= {"new", "new/sidecar"}
    assert "1.24.3" in wide.recovered and "1.24.3" not in narrow.recovered
    assert "2.0.1" not in wide.recovered + narrow.recovered  # bob's


def test_three_day_scenario_through_sessions(lantern):
    d1 = Session(lantern, "day-1")
    d1.add(
        exchange("For the record, the staging DB port is 5433.", "Noted: staging DB on 5433.", "2026-03-13T09:00:00Z")
    )
    d2 = Session(lantern, "day-2")
    d2.add(
        exchange("I changed the staging DB port to 5434 because of a clash.", "OK, 5434 it is.", "2026-03-14T09:00:00Z")
    )
    d3 = Session(lantern, "day-3", system_prompt="You are the ops assistant.")
    ctx = d3.build_context("Which staging DB port did we use before?", 4000)
    assert "- staging DB port: 5433 until 14 Mar 2026 09:00, now 5434" in ctx.recovered
    assert len(ctx.text) <= 4000


# ----------------------------------------------------------------------------------------------- LLM gist
class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.server.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        if self.server.fail:
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b'{"error": "boom"}')
            return
        new_turns = body["messages"][-1]["content"]
        reply = {
            "choices": [
                {
                    "message": {
                        "role": "assistant",
                        "content": f"LLM gist #{len(self.server.requests)}: {new_turns.count('user:')} new turns",
                    }
                }
            ]
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture()
def llm_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.requests, server.fail = [], False
    # poll_interval: shutdown() returns at once instead of within serve_forever's default 0.5 s
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_llm_gist_through_a_local_chat_completions_server(tmp_path, llm_server, monkeypatch):
    monkeypatch.setenv("LANTERN_GIST_API_KEY", "test-key")
    with Lantern(tmp_path / "m.db") as lt:
        lt.config = replace(lt.config, gist_base_url=f"http://127.0.0.1:{llm_server.server_port}/v1", gist_model="tiny")
        s = Session(lt, "chat")
        fill(s, 5)
        assert s.gist_source == "llm" and s.gist == "LLM gist #1: 2 new turns"
        path, headers, body = llm_server.requests[0]
        assert path == "/v1/chat/completions" and body["model"] == "tiny"
        assert headers.get("authorization") == "Bearer test-key"
        assert "Start postgres for the billing service" in body["messages"][-1]["content"]
        assert "Pin numpy" not in body["messages"][-1]["content"]  # still in working memory
        fill_rest = TOPICS[5:10]
        for user, reply in fill_rest:
            s.add(exchange(user, reply))
        assert len(llm_server.requests) == 2 and s.gist == "LLM gist #2: 5 new turns"
        assert "LLM gist #1" in llm_server.requests[1][2]["messages"][-1]["content"]  # rolling: previous gist sent
        ctx = s.build_context("ok", 8000)
        assert ctx.gist == GIST_TITLE + "\nLLM gist #2: 5 new turns"


def test_llm_failure_falls_back_to_the_extractive_gist(tmp_path, llm_server):
    llm_server.fail = True
    with Lantern(tmp_path / "m.db") as lt:
        lt.config = replace(lt.config, gist_base_url=f"http://127.0.0.1:{llm_server.server_port}/v1")
        s = Session(lt, "chat")
        fill(s, 5)
        assert len(llm_server.requests) == 1
        assert s.gist_source == "extractive" and "HTTP 500" in s.gist_error
        assert s.gist.startswith("turn 0: Start postgres")


def test_forget_reaches_a_live_session_and_budgets_take_any_number(tmp_path):
    """A forgotten turn leaves working memory and the gist of a Session that already holds it; integral floats and
    numpy integers are budgets like ints (as for recover)."""
    import numpy as np

    from lantern import Lantern
    from lantern.memory.context import Session

    with Lantern(tmp_path / "f.db") as m:
        s = Session(m, "chat")
        for i in range(12):
            s.add(
                [
                    {"role": "user", "content": f"SECRET{i} the svc-{i} port is {5000 + i}"},
                    {"role": "assistant", "content": "ok"},
                ]
            )
        assert "SECRET11" in s.build_context("what was the port before?", 10**6).text
        m.forget(session="chat")
        ctx = s.build_context("what was the port before?", 10**6)
        assert "SECRET" not in ctx.text and not s.gist
        assert len(s.build_context("hi", 8000.0).text) <= 8000
        assert len(s.build_context("hi", np.int64(8000)).text) <= 8000


def test_llm_gist_stays_whole_while_turns_are_pending(tmp_path, llm_server):
    """The pending lines were rolled together with the LLM summary, newest first, so a summary near the cap
    vanished from the context until the next refresh (breaker finding). It stays; the pending lines are capped apart."""
    with Lantern(tmp_path / "m.db", config=Config(gist_max_chars=40)) as lt:
        lt.config = replace(lt.config, gist_base_url=f"http://127.0.0.1:{llm_server.server_port}/v1", gist_model="tiny")
        s = Session(lt, "chat")
        fill(s, 7)  # refreshed at 5; turns 3 and 4 have left working memory since
        assert s.gist_source == "llm" and len(s._pending) == 2
        assert "LLM gist #1" in s.build_context("ok", 8000, recover=False).gist


def test_a_turn_grown_by_another_handle_stays_in_working_memory(tmp_path):
    """Another handle (a proxy, a hook) archived the reply of a turn this Session holds: the row grows in place
    with a new content hash; it is the same turn, not a forgotten one (breaker finding)."""
    db = tmp_path / "m.db"
    with Lantern(db) as lt, Lantern(db) as other:
        s = Session(lt, "chat")
        first = {"role": "user", "content": "My flight to Lisbon is TP1234 on Friday."}
        s.add([first])
        other.archive([first, {"role": "assistant", "content": "Noted: TP1234."}], session="chat")
        s.add(exchange("What should I pack?", "Light clothes."))
        assert len(s.working) == 2 and "TP1234" in s.build_context("anything else?", 8000, recover=False).text


def test_a_failed_refresh_leaves_no_transaction_open(tmp_path):
    """A refresh that fails inside its read transaction (here: the embedder check raises) ends the transaction and
    resets the index; the next call reloads and writes work (breaker finding: a transaction left open broke every
    later write)."""
    with Lantern(tmp_path / "m.db") as lt:
        lt.archive(exchange("the redis port is 6380", "ok"), session="s")
        lt.index.mark_dirty()
        check = lt.store.verify_embedder

        def fail(*a, **k):
            raise KeyboardInterrupt

        lt.store.verify_embedder = fail
        with pytest.raises(KeyboardInterrupt):
            lt.search("redis port")
        lt.store.verify_embedder = check
        assert not lt.store.db.in_transaction and len(lt.index.ids) == 0
        assert lt.archive(exchange("the redis port is 6381", "ok"), session="s").added == 1
        assert [h.entry.text[:30] for h in lt.search("redis port", k=2)]
