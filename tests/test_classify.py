"""Write-time category and importance prior (archive/classify.py; docs/architecture.md §2.6), English and Chinese,
and their effect on the importance ranking of the real store."""

from __future__ import annotations

import pytest

from lantern import Lantern, Message, ToolCall, ToolResult, Turn
from lantern.archive import classify as classify_module
from lantern.archive.classify import CATEGORIES, PRIORS, classify, classify_turn


def turn(*messages: Message) -> Turn:
    return Turn(list(messages))


CASES = [
    # (turn, category, prior)
    (turn(Message("system", "You are a careful assistant.")), "system", 1.0),
    (turn(Message("system", "你是一个严谨的助手。")), "system", 1.0),
    (turn(Message("user", "We decided to deploy on Fridays only.")), "decision", 0.8),
    (turn(Message("user", "You must not push to main. Don't skip the review.")), "decision", 0.8),
    (turn(Message("user", "我们决定周五上线，必须先跑测试。")), "decision", 0.8),
    (turn(Message("user", "不要直接推到主分支。")), "decision", 0.8),
    (turn(Message("user", "We decided that the port is 5433.")), "decision", 0.85),
    (turn(Message("user", "我们决定了，数据库端口是5433。")), "decision", 0.85),
    (turn(Message("user", "I prefer tabs over spaces.")), "preference", 0.8),
    (turn(Message("user", "I love hiking, and my favourite season for it is autumn.")), "preference", 0.8),
    (turn(Message("user", "我更喜欢用 Vim，讨厌 Emacs。")), "preference", 0.8),
    (turn(Message("user", "I prefer Postgres; we use it in production.")), "preference", 0.85),
    (turn(Message("user", "My name is Anna and I live in Berlin.")), "fact", 0.8),
    (turn(Message("user", "The port is 5433.")), "fact", 0.8),
    (turn(Message("user", "我的名字是小明，地址是北京市海淀区。")), "fact", 0.8),
    (turn(Message("user", "端口是5433，版本是16。")), "fact", 0.8),
    (turn(Message("user", "How do I deploy?"), Message("assistant", "1. Build the image\n2. Push it\n3. Restart")), "process", 0.6),
    (turn(Message("user", "部署的步骤是什么？"), Message("assistant", "先构建镜像，然后推送。")), "process", 0.6),
    (
        turn(
            Message("user", "run it"),
            Message("assistant", tool_calls=[ToolCall("bash", "pytest -q")]),
            Message("tool", tool_results=[ToolResult("." * 2000 + " 120 passed in 3.2s")]),
        ),
        "tool_call",
        0.3,
    ),
    (
        turn(
            Message("user", "运行"),
            Message("assistant", tool_calls=[ToolCall("bash", "ls -la")]),
            Message("tool", tool_results=[ToolResult("总用量 48\n" + "-rw-r--r-- 1 root root 12 文件.txt\n" * 40)]),
        ),
        "tool_call",
        0.3,
    ),
    (turn(Message("user", "I went to the beach yesterday with my kids.")), "fact", 0.5),
    (turn(Message("user", "昨天我们去了海边。")), "fact", 0.5),
]


@pytest.mark.parametrize("t, category, prior", CASES)
def test_category_and_prior(t, category, prior):
    c = classify_turn(t)
    assert (c.category, c.prior) == (category, prior)
    assert c.category in CATEGORIES and 0.0 <= c.prior <= 1.0
    assert classify(t) == (c.memory_type, c.prior)  # the two-value form agrees


def test_every_category_is_reachable_in_both_languages():
    seen = {(cat, any("\u4e00" <= ch <= "\u9fff" for m in t.messages for ch in (m.text + "".join(r.content for r in m.tool_results))))
            for t, cat, _ in CASES}
    for cat in CATEGORIES:
        assert (cat, True) in seen and (cat, False) in seen, cat


def test_category_is_stored_and_exposed(tmp_path):
    with Lantern(tmp_path / "m.db") as lt:
        r = lt.archive([
            {"role": "user", "content": "我们决定用 PostgreSQL，不要用 MongoDB。"}, {"role": "assistant", "content": "好的。"},
            {"role": "user", "content": "My name is Anna."}, {"role": "assistant", "content": "Hi Anna."},
        ], session="s")
        entries = lt.store.entries(r.entry_ids)
        assert [entries[i].category for i in r.entry_ids] == ["decision", "fact"]
        cand = lt.explain("数据库 PostgreSQL", session="s").candidates
        assert {c.entry.category for c in cand} <= {"decision", "fact"} and cand[0].entry.category is not None


def _importance_order(tmp_path, name: str) -> list[str]:
    """Archive a decision turn and a tool-output turn about the same thing; their importance ranks, best first."""
    with Lantern(tmp_path / name) as lt:
        lt.archive([
            {"role": "user", "content": "We decided the cache server listens on port 6380."},
            {"role": "assistant", "content": "Noted: cache server on 6380."},
            {"role": "user", "content": "check the cache server"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\": \"redis-cli -p 6380 ping\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "PONG cache server port 6380 " + "ok " * 300},
        ], session="s")
        cands = lt.explain("cache server port 6380", session="s").candidates
        ranked = sorted((c for c in cands if "importance" in c.ranks), key=lambda c: c.ranks["importance"])
        return [c.entry.category for c in ranked]


def test_category_prior_change_shows_in_importance_ranking(tmp_path, monkeypatch):
    assert _importance_order(tmp_path, "a.db") == ["decision", "tool_call"]
    # swap the two priors: tool output now outranks the decision
    monkeypatch.setitem(PRIORS, "decision+fact", ("decision", 0.1))
    monkeypatch.setitem(PRIORS, "decision", ("decision", 0.1))
    monkeypatch.setitem(PRIORS, "tool_call", ("tool_call", 1.0))
    assert classify_module.PRIORS["tool_call"] == ("tool_call", 1.0)
    assert _importance_order(tmp_path, "b.db") == ["tool_call", "decision"]
