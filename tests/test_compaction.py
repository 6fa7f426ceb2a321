"""Live compaction detection (compaction.py) on a real store with the real embedder."""

from __future__ import annotations

import pytest

from lantern import Lantern
from lantern.compaction import detect, is_summary

SYSTEM = {"role": "system", "content": "You are a coding assistant."}


def conversation() -> list[dict]:
    msgs = [SYSTEM,
            {"role": "user", "content": "Start postgres for the billing service."},
            {"role": "assistant", "content": "Started: docker run -p 5433:5432 postgres:16, listening on port 5433."}]
    for i in range(8):
        msgs += [{"role": "user", "content": f"Refactor module number {i} of the invoice renderer."},
                 {"role": "assistant", "content": f"Refactored renderer module {i}; all {10 + i} tests pass."}]
    return msgs


@pytest.fixture()
def lt(tmp_path):
    with Lantern(tmp_path / "c.db") as lt:
        yield lt


def test_no_compaction_while_the_conversation_grows(lt):
    msgs = conversation()
    assert detect(lt, "s", msgs) is None  # nothing archived yet
    lt.archive(msgs, session="s")
    grown = msgs + [{"role": "user", "content": "Now write the changelog."}]
    assert detect(lt, "s", grown) is None
    # a new conversation under the same session id shares no archived turn: not a compaction
    assert detect(lt, "s", [{"role": "user", "content": "Hello, new topic entirely."}]) is None


def test_claude_code_summary_detected_and_recovery_brings_back_the_port(lt):
    msgs = conversation()
    ids = lt.archive(msgs, session="s").entry_ids
    summary = {"role": "system", "content": "This session is being continued from a previous conversation that ran out "
               "of context. The user set up the billing database and refactored the invoice renderer."}
    live = [summary, *msgs[-4:], {"role": "user", "content": "Which port does the billing database listen on?"}]
    c = detect(lt, "s", live)
    assert c is not None and c.reason == "summary" and "continued" in c.summary
    assert ids[1] in c.lost_entry_ids and ids[-1] not in c.lost_entry_ids and ids[-2] not in c.lost_entry_ids
    assert "port" in c.query and "billing" in c.query
    rec = c.recover(lt, budget=3000)
    assert "5433" in rec.text
    assert all(e.id not in (ids[-1], ids[-2]) for e in rec.entries)  # still live: never re-injected


def test_dropped_turns_without_summary(lt):
    msgs = conversation()
    ids = lt.archive(msgs, session="s").entry_ids
    live = [SYSTEM, *msgs[-6:]]  # the client kept its system prompt and a window of recent turns
    c = detect(lt, "s", live)
    assert c is not None and c.reason == "dropped" and c.summary is None
    assert ids[1] in c.lost_entry_ids and ids[0] not in c.lost_entry_ids  # system prompt still live
    assert detect(lt, "other-session", live) is None


@pytest.mark.parametrize("text,role,expected", [
    ("[Summary] earlier work", "system", True),
    ("Summary of the conversation so far: ...", "user", True),
    ("<summary>the user asked</summary>", "system", True),
    ("This session is being continued from a previous conversation that ran out of context.", "user", True),
    ("Please write a summary of the conversation", "user", False),
    ("[Summary] quoted by the assistant", "assistant", False),
])
def test_is_summary(text, role, expected):
    assert is_summary({"role": role, "content": text}) is expected
    assert is_summary({"role": role, "content": [{"type": "text", "text": text}]}) is expected
