"""The LLM half against a real model on this machine: SmolLM2-135M-Instruct served by llama-cpp-python
(tests/llm_server.py). The model is weak; these tests check wiring, prompts, parsing, costs and fallbacks, not
answer quality."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import sqlite3
import subprocess
import sys

import pytest

from lantern import Lantern
from lantern.config import Config
from lantern.llm import LLMClient
from lantern.memory.agent import TITLES, MemoryAgent

TURNS = [
    {"role": "user", "content": "Which port does the billing database listen on?"},
    {"role": "assistant", "content": "The billing database listens on port 5433 (docker-compose.yml maps 5432)."},
    {"role": "user", "content": "And the cache?"},
    {"role": "assistant", "content": "Redis runs on port 6380 with maxmemory 2gb."},
    {"role": "user", "content": "Where are the migrations?"},
    {"role": "assistant", "content": "The migrations live in db/migrations/0001_init.sql."},
]


@pytest.fixture()
def db(tmp_path):
    path = tmp_path / "m.db"
    with Lantern(path) as lt:
        lt.archive(TURNS, session="work")
    return path


SLOW = {"LANTERN_LLM_TIMEOUT": "240"}  # a 135M model on 2 shared cores: seconds per answer, not milliseconds


def _cli(db, *args, env=None, input=None):
    return subprocess.run(
        [sys.executable, "-m", "lantern.cli", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **SLOW, **(env or {})},
        input=input,
    )


def test_a_completion_reports_its_tokens(local_llm):
    with LLMClient(local_llm.settings) as client:
        out = client.chat([{"role": "user", "content": "Say hello in one word."}], max_tokens=8)
    assert out.text.strip() and out.usage.calls == 1
    assert out.usage.tokens_in > 0 and 0 < out.usage.tokens_out <= 8 and out.usage.ms > 0


def test_recover_rerank_makes_one_call_and_returns_the_block(db, local_llm):
    s = local_llm.settings
    r = _cli(
        db,
        "recover",
        "which port does the billing database use?",
        "--rerank",
        "--llm-base-url",
        s.base_url,
        "--llm-model",
        s.model,
        "--json",
        env={"LANTERN_LLM_JSON_MODE": "object"},  # the server's own format: no refused probe
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["reranked"] is True and out["llm_calls"] == 1, r.stderr
    assert not r.stderr
    assert out["tokens_in"] > 0 and out["tokens_out"] > 0
    assert "5433" in out["text"] and out["chars"] <= 6000


def test_the_readme_snippet_reranks_against_the_local_server_with_one_line_on_stderr(db, tmp_path, local_llm):
    """README.md "An LLM, if you want one", verbatim but for the port: the base URL and model exported, no JSON
    mode; llama-cpp-python's server refuses json_schema with a 500 and its traceback, and the rerank falls back."""
    chat = tmp_path / "chat.db"
    chat.write_bytes(db.read_bytes())
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANTERN_LLM_")}
    env |= {"LANTERN_LLM_BASE_URL": local_llm.settings.base_url, "LANTERN_LLM_MODEL": "my-model", **SLOW}
    question = "which port did we give the billing database?"
    for extra in ([], ["--json"]):
        r = subprocess.run(
            [sys.executable, "-m", "lantern.cli", "--db", "chat.db", "recover", question, "--rerank", *extra],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
            cwd=tmp_path,
        )
        assert r.returncode == 0, r.stderr
        assert "5433" in r.stdout
        (line,) = r.stderr.splitlines()
        assert line.startswith("warning: LLM endpoint") and "json_schema" in line and "json_object" in line
        assert "File" not in r.stderr and "Traceback" not in r.stderr
    out = json.loads(r.stdout)
    assert out["reranked"] is True and out["llm_calls"] == 2  # the refused json_schema request, then the answer


def test_recover_rerank_with_the_server_gone_still_returns_the_block(db):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    r = _cli(
        db,
        "recover",
        "which port does the billing database use?",
        "--rerank",
        "--llm-base-url",
        f"http://127.0.0.1:{port}/v1",
        "--llm-model",
        "m",
        "--json",
    )
    assert r.returncode == 0
    out = json.loads(r.stdout)
    assert out["reranked"] is False and out["llm_calls"] == 1 and "5433" in out["text"]
    assert r.stderr.count("warning: rerank skipped") == 1 and "unreachable" in r.stderr


def test_rerank_without_an_endpoint_is_a_usage_error(db):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANTERN_LLM_")}
    r = subprocess.run(
        [sys.executable, "-m", "lantern.cli", "--db", str(db), "recover", "port?", "--rerank"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 2 and "--llm-base-url" in r.stderr


def test_search_explain_shows_the_llm_place(db, local_llm):
    s = local_llm.settings
    r = _cli(
        db,
        "search",
        "billing database port",
        "--explain",
        "--rerank",
        "--llm-base-url",
        s.base_url,
        "--llm-model",
        s.model,
        "--json",
    )
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert all("rerank" in row for row in rows)
    placed = [row["rerank"] for row in rows if row["rerank"]]
    assert placed == sorted(placed) or sorted(placed) == list(range(1, len(placed) + 1))


def test_chat_once_answers_archives_and_reports_the_recovery(db, local_llm):
    s = local_llm.settings
    r = _cli(
        db,
        "chat",
        "--once",
        "As I said earlier, which port does the billing database use?",
        "--session",
        "work",
        "--llm-base-url",
        s.base_url,
        "--llm-model",
        s.model,
        "--json",
        "--max-tokens",
        "32",
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["answer"].strip()
    assert out["recovered"] is True and any("as I said" in x for x in out["reasons"])
    assert out["generations"] == 1 and out["llm_calls"] == 1  # a back-reference skips the draft
    with Lantern(db) as lt:
        assert lt.stats()["entries"] == len(TURNS) // 2 + 1
        found = lt.search("As I said earlier, which port", k=3)
        assert any("As I said earlier" in h.entry.text and out["answer"][:20] in h.entry.text for h in found)


def test_chat_reads_questions_from_stdin_and_says_when_no_recovery_ran(db, local_llm):
    s = local_llm.settings
    r = _cli(
        db,
        "chat",
        "--session",
        "work",
        "--llm-base-url",
        s.base_url,
        "--llm-model",
        s.model,
        "--max-tokens",
        "24",
        input="Hello there, how are you today?\n\nWhat is two plus two?\n",
    )
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("[")]
    assert len(lines) == 2  # the blank line is no question
    assert all(x.startswith(("[no recovery;", "[recovery:")) for x in lines)


def test_the_agent_recovers_with_the_marker_at_most_two_generations(tmp_path, local_llm):
    with Lantern(tmp_path / "a.db", config=Config()) as lt:
        lt.archive(TURNS, session="old")
        agent = MemoryAgent(lt, "new", local_llm.settings, top_k=2)
        turn = agent.ask("Which port did we use before for the billing database?")
        assert turn.reasons and turn.recovered and turn.generations <= 2
        assert len(turn.recovery.entries) <= 2
        sent = "\n".join(m["content"] for m in turn.context.messages)
        assert TITLES["en"] in sent and "5433" in sent
        marker_at = [i for i, m in enumerate(turn.context.messages) if TITLES["en"] in m["content"]][0]
        assert (
            turn.context.messages[-1]["content"].startswith("Which port") and marker_at < len(turn.context.messages) - 1
        )
        assert turn.usage.calls == turn.generations and turn.usage.tokens_in > 0
        zh = agent.ask("我们之前说的数据库端口是多少？")
        if zh.recovered:
            assert any(TITLES["zh"] in m["content"] for m in zh.context.messages)
        assert lt.stats()["entries"] == len(TURNS) // 2 + 2  # both turns archived in session "new"


@pytest.fixture(scope="module")
def small_window_llm(tmp_path_factory):
    """SmolLM2 served with a 1,024-token window (tests/llm_server.py), for the test of a context larger than the
    model's window: the context it answers then holds ~600 tokens, not the ~2,500 the shared 4,096-token server
    needs a minute of one core to read."""
    from llm_server import LocalLLM, missing

    why = missing()
    if why:
        pytest.skip(why)
    server = LocalLLM(tmp_path_factory.mktemp("llm-small") / "server.log", n_ctx=1024)
    yield server
    server.stop()


def test_the_agent_fits_a_recovered_block_of_code_to_the_models_window(tmp_path, small_window_llm):
    """SmolLM2 served with a 1,024-token window: the default 16,000-character context holding ~14,000 characters
    of recovered code (~5,000 tokens) is refused (HTTP 400, context_length_exceeded), and the agent asks again with
    half the context until the model answers."""
    code = "".join(f"def handler_{i}(request):\n    return respond(request, code={i})\n" for i in range(300))
    turns = [
        {"role": "user", "content": "Show me the billing module and remember its port."},
        {"role": "assistant", "content": "billing/server.py listens on port 5433:\n" + code},
    ]
    with Lantern(tmp_path / "a.db") as lt:
        lt.archive(turns, session="old")
        slow = dataclasses.replace(small_window_llm.settings, timeout_s=600)  # a few seconds per refusal when loaded
        agent = MemoryAgent(lt, "new", slow)
        turn = agent.ask("As I said earlier, which port does the billing module listen on?")
        assert turn.recovered and turn.answer
        assert turn.usage.calls > turn.generations  # at least one refusal, then an answer
        assert len(turn.context.text) <= 8_000
        assert lt.stats()["entries"] == 2  # the old turn, and the question with its answer


def test_the_agent_gist_is_written_by_the_llm_every_five_turns(tmp_path, local_llm):
    with Lantern(tmp_path / "g.db") as lt:
        agent = MemoryAgent(lt, "s", local_llm.settings, max_tokens=24)
        # gist_every (5) turns: the fifth answer's turn refreshes the gist
        questions = ["My name is Ada.", "I work on billing.", "The db port is 5433.", "We use Redis.", "Thanks!"]
        assert len(questions) == agent.memory.gist_every
        for q in questions:
            agent.ask(q)
        assert agent.memory.refreshes >= 1
        assert agent.memory.gist_source == "llm", agent.memory.gist_error
        assert agent.memory.gist.strip()


def test_the_proxy_reranks_a_compaction_recovery_through_its_own_upstream(tmp_path, local_llm, monkeypatch):
    """lantern serve --upstream <the local model> --rerank: the compaction recovery's lost items are reranked by the
    upstream with the request's model; the event records it and the injected block still holds the lost port."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from lantern.integrations import forward
    from lantern.integrations.forward import UPSTREAM
    from lantern.integrations.proxy import build_app

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(forward, "RERANK_TIMEOUT", 240.0)  # SmolLM2 on a loaded 2-core machine takes over 30 s
    app = build_app(tmp_path / "p.db", upstream=local_llm.settings.base_url, upstream_timeout=240, rerank=UPSTREAM)
    headers = {"X-Lantern-Session": "work"}
    conv = [*TURNS, {"role": "user", "content": "Thanks. Now summarize."}]
    model = local_llm.settings.model
    with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
        r = client.post(
            "/v1/chat/completions", json={"model": model, "messages": conv, "max_tokens": 8}, headers=headers
        )
        assert r.status_code == 200, r.text
        compacted = [
            {"role": "system", "content": "Summary of the conversation so far: ports and paths were discussed."},
            {"role": "user", "content": "Which port does the billing database listen on?"},
        ]
        r = client.post(
            "/v1/chat/completions", json={"model": model, "messages": compacted, "max_tokens": 8}, headers=headers
        )
        assert r.status_code == 200, r.text
    with Lantern(tmp_path / "p.db") as lt:
        (event,) = lt.events("work")
    assert event.rerank is True and event.injected
    with sqlite3.connect(tmp_path / "p.db") as db:
        texts = [db.execute("SELECT text FROM entries WHERE id = ?", (i,)).fetchone()[0] for i, *_ in event.injected]
    assert any("5433" in t for t in texts)
