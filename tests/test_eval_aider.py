"""The aider look-ahead dataset (issue 3): the loader on a tiny aider log written by us, the demo's protocol shared
with the eval (same lost facts), and an end-to-end eval whose recovered facts are exactly the tokens in the block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lantern.eval.cases import history_turns
from lantern.eval.compaction import compact, lost_turns
from lantern.eval.datasets import load
from lantern.eval.lookahead import KEEP, LOOKAHEAD, compaction_summary, fact_type, needed_lost_facts, t_star
from lantern.eval.run import main

FIX = Path(__file__).parent / "fixtures" / "eval" / "aider_mini.md"
AIDER = Path(__file__).resolve().parents[2] / "shared" / "data" / "aider_chat_history" / "chat-history.md"


def test_aider_loader_builds_lookahead_facts():
    ds = load("aider", FIX)
    assert ds.keep == KEEP and ds.compaction == "gist" and len(ds.sha256) == 64
    assert len(ds.histories) == 1  # the second session has 1 turn: too short to compact
    h = ds.histories[0]
    assert h.query == "context" and h.split == "tune"
    assert len(history_turns(h)) == t_star(10) == 6  # only the turns before t* are archived
    facts = {f.answer: f for f in h.facts}
    assert set(facts) == {"src/db/config.py", "0.23.5", "ConnectionRefusedError"}
    assert facts["src/db/config.py"].category == "path" and facts["src/db/config.py"].evidence == ["0:1"]
    assert facts["0.23.5"].category == "decision"  # "let's use pytest-asyncio 0.23.5" in a user message
    assert facts["ConnectionRefusedError"].category == "error" and facts["ConnectionRefusedError"].match == "answer"


def test_fact_type_decision_needs_a_user_cue():
    turns = history_turns(load("aider", FIX).histories[0])
    assert fact_type("src/db/config.py", "path", turns[:1]) == "path"  # named by the assistant only
    assert fact_type("0.23.5", "version", turns[1:2]) == "decision"
    assert fact_type("5433", "port", turns[:1]) == "number"


def test_eval_lost_facts_equal_the_demo_protocol():
    """The eval's gist compaction at KEEP turns loses exactly the demo's needed lost facts."""
    from lantern.archive.chunk import chunk
    from lantern.archive.parse import parse

    turns = chunk(parse(FIX, "aider").messages, None)[:10]
    for i, t in enumerate(turns):
        t.index = i
    t = t_star(len(turns))
    compacted, kept = turns[: t - KEEP], turns[t - KEEP : t]
    context = compaction_summary(compacted) + "\n" + "\n".join(x.text for x in kept)
    demo = needed_lost_facts(compacted, context, turns[t : t + LOOKAHEAD])
    h = load("aider", FIX).histories[0]
    ht = history_turns(h)
    comp = compact("gist", ht, KEEP)
    turn_of = {m.meta["dia_id"]: i for i, x in enumerate(ht) for m in x.messages}
    lost = [f.answer for f in h.facts if lost_turns(f, turn_of, comp)]
    assert sorted(lost) == sorted(demo) == ["0.23.5", "ConnectionRefusedError", "src/db/config.py"]


def test_eval_aider_end_to_end(tmp_path):
    out = tmp_path / "out"
    results = main(
        "aider",
        FIX,
        out,
        split="all",
        systems=["lantern", "recency", "random"],
        cache_dir=tmp_path / "cache",
        plots=False,
    )
    assert results["config"]["compaction"] == "gist" and results["config"]["keep"] == KEEP
    assert results["dataset"]["lost"] == 3
    rows = [json.loads(x) for x in (out / "facts.jsonl").read_text().splitlines()]
    lantern = [r for r in rows if r["system"] == "lantern"]
    assert {r["category"] for r in lantern} == {"path", "decision", "error"}
    # two compacted turns, a 6,000-character budget: the whole past fits, every token comes back
    assert all(r["recovered"] for r in lantern) and results["systems"]["lantern"]["overall"]["recall@5"] == 1.0
    assert set(results["systems"]["lantern"]["by_category"]) == {"path", "decision", "error"}
    small = main(
        "aider",
        FIX,
        tmp_path / "o2",
        split="all",
        systems=["lantern"],
        cache_dir=tmp_path / "cache",
        plots=False,
        budget=60,
    )
    assert small["systems"]["lantern"]["overall"]["recovered"] < 1.0  # 60 characters cannot hold three tokens' turns


@pytest.mark.skipif(not AIDER.exists(), reason="../shared/data/aider_chat_history not present")
def test_aider_loader_on_the_real_log():
    ds = load("aider", AIDER)
    assert len(ds.histories) >= 40 and ds.n_facts > 500
    cats = {f.category for h in ds.histories for f in h.facts}
    assert {"path", "number", "identifier", "error", "name", "decision"} <= cats
    assert {h.split for h in ds.histories} == {"tune", "report"}
