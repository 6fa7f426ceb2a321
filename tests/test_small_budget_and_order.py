"""Newcomer findings, on the real store and models: a small budget in a Chinese store with a superseded fact still
brings back the turn (the notes give way); one session's block lists its turns in conversation order; Chinese fact
keys lose a stray 的, and an adverbial 的 ("真的是") makes no fact."""

from __future__ import annotations

import pytest

from lantern import Lantern
from lantern.archive.facts import extract_facts

pytestmark = pytest.mark.real_models  # a Chinese question clears the injection decision by meaning

ZH = [
    {
        "role": "user",
        "content": "我们的测试服务器端口设置为 8443，数据库密码是 Hx9!kPq2zz",
        "timestamp": "2026-03-01T10:00:00Z",
    },
    {"role": "assistant", "content": "好的，已记录：端口 8443。", "timestamp": "2026-03-01T10:00:05Z"},
    {
        "role": "user",
        "content": "部署脚本放在 /opt/deploy/run.sh，先停服务然后再拉镜像。",
        "timestamp": "2026-03-01T10:05:00Z",
    },
    {"role": "assistant", "content": "明白，步骤已记下。", "timestamp": "2026-03-01T10:05:05Z"},
    {"role": "user", "content": "测试服务器端口改为 9443 了，不再用 8443。", "timestamp": "2026-03-05T09:00:00Z"},
    {"role": "assistant", "content": "已更新为 9443。", "timestamp": "2026-03-05T09:00:05Z"},
]


def test_small_budget_recovers_the_turn_even_when_notes_do_not_fit(tmp_path):
    with Lantern(tmp_path / "zh.db") as memory:
        memory.archive(ZH, session="zh")
        for budget in (300, 400):
            result = memory.recover("端口是多少", budget=budget)
            assert result.entries and result.chars <= budget, (budget, result)
            assert "9443" in result.text or "8443" in result.text


def test_one_session_block_lists_turns_in_conversation_order(tmp_path):
    with Lantern(tmp_path / "o.db", embedder="minilm") as memory:
        memory.archive(
            [
                {"role": "user", "content": "the billing database listens on port 5433"},
                {"role": "assistant", "content": "noted, port 5433 for billing"},
                {"role": "user", "content": "the renderer lives in src/render/invoice.py"},
                {"role": "assistant", "content": "ok, invoice renderer noted"},
                {"role": "user", "content": "billing database password rotates monthly"},
                {"role": "assistant", "content": "rotation noted for the billing database"},
            ],
            session="s",
        )
        result = memory.recover("billing database port", session="s", budget=6000)
        order = [result.text.index(e.text[:30]) for e in sorted(result.entries, key=lambda e: e.turn)]
        assert len(order) >= 2 and order == sorted(order), result.text


def test_chinese_fact_keys():
    facts = extract_facts(["我们的测试服务器端口设置为 8443"])
    assert facts and facts[0].key_text == "测试服务器端口", facts
    assert not extract_facts(["那就真的是完美了"])
    assert extract_facts(["我的名字是张三"])  # 的 inside the key: an attribute, still a fact
