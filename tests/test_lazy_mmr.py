"""MMR and the duplicate check run lazily, only as far as packing reads (recover/fusion.py ``mmr``,
recover/pipeline.py): the same selection order as the full computation, fewer similarity rows, and the same block
for ``recover`` (lazy) and ``explain`` (complete) on the real store with the real model."""

from __future__ import annotations

from dataclasses import replace
from itertools import islice
from pathlib import Path

import numpy as np

from lantern import Lantern
from lantern.recover.fusion import mmr

EXCERPT = Path(__file__).resolve().parents[1] / "src" / "lantern" / "data" / "demo" / "aider-chat-excerpt.md"


def reference_mmr(relevance: np.ndarray, similarity: np.ndarray, lam: float) -> list[int]:
    """Carbonell & Goldstein 1998 written out plainly: argmax of λ·rel − (1 − λ)·max sim to the picked ones."""
    rel = relevance / relevance.max()
    picked: list[int] = []
    while len(picked) < len(rel):
        best, best_gain = -1, -np.inf
        for i in range(len(rel)):
            if i in picked:
                continue
            redundancy = max((similarity[i, j] for j in picked), default=0.0)
            gain = lam * rel[i] - (1 - lam) * redundancy
            if gain > best_gain:
                best, best_gain = i, gain
        picked.append(best)
    return picked


def test_mmr_matches_the_plain_definition_and_computes_only_the_rows_it_uses():
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(40, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    similarity = vectors @ vectors.T
    relevance = rng.random(40) + 0.01
    assert list(mmr(relevance, similarity, 0.7)) == reference_mmr(relevance, similarity, 0.7)
    asked: list[int] = []

    def row(i: int) -> np.ndarray:
        asked.append(i)
        return similarity[i]

    first = list(islice(mmr(relevance, row, 0.7), 3))
    assert first == reference_mmr(relevance, similarity, 0.7)[:3]
    assert len(asked) <= 3 and set(asked) <= set(first)


def test_recover_reads_lazily_and_packs_what_explain_packs(tmp_path):
    with Lantern(tmp_path / "lazy.db", embedder="minilm") as memory:
        assert memory.ingest(EXCERPT, format="aider", session="aider").added > 20
        memory.config = replace(memory.config, reinforce=False)  # recover must not change the ranking between calls
        for query, budget in (("which file holds the test runner", 900), ("how do we handle the lint error", 2500)):
            full = memory.explain(query, budget=budget)
            lazy = memory.recover(query, budget=budget)
            assert lazy.text == full.text and [e.id for e in lazy.entries] == [e.id for e in full.entries]
            ranked = [c for c in full.candidates if not c.verdict.startswith("excluded:")]
            assert ranked and all(c.mmr_order for c in ranked)  # explain: every candidate has its MMR turn
            lazy_ranked = [c for c in lazy.candidates if not c.verdict.startswith("excluded:")]
            unread = [c for c in lazy_ranked if c.mmr_order is None]
            assert unread, "a small budget stops packing long before the last candidate"
            assert all(c.verdict == "cut:budget" for c in unread)
            # the candidates packing did read carry the same MMR turn and verdict in both
            by_id = {c.entry.id: c for c in ranked}
            for c in lazy_ranked:
                if c.mmr_order is not None:
                    assert (c.mmr_order, c.verdict) == (by_id[c.entry.id].mmr_order, by_id[c.entry.id].verdict)


def test_reinforcement_decays_the_candidates_packing_examined_not_the_ones_it_never_reached(tmp_path):
    with Lantern(tmp_path / "decay.db", embedder="minilm") as memory:
        memory.ingest(EXCERPT, format="aider", session="aider")
        before = {c.entry.id: c.entry.confidence for c in memory.explain("run the tests", budget=6000).candidates}
        result = memory.recover("run the tests", budget=6000)
        after = {e.id: e.confidence for e in memory.store.entries(list(before), text=False, tags=False).values()}
        packed = {e.id for e in result.entries}
        examined = {c.entry.id for c in result.candidates if c.verdict.startswith("cut:") and c.mmr_order is not None}
        unread = {c.entry.id for c in result.candidates if c.mmr_order is None}
        assert packed and examined and unread
        assert all(after[i] == min(1.0, before[i] + 0.15) for i in packed)
        assert all(abs(after[i] - max(0.0, before[i] - 0.02)) < 1e-9 for i in examined)
        assert all(after[i] == before[i] for i in unread)


def test_recoveries_that_pack_nothing_decay_nothing_and_read_ahead_is_not_examined(tmp_path):
    """A breaker's finding: entries read ahead in a batch of 16 got an MMR turn and were decayed although packing
    never looked at them; 45 recoveries with a 60-character budget pruned the best entries of the store."""
    with Lantern(tmp_path / "tiny.db", embedder="minilm") as memory:
        memory.ingest(EXCERPT, format="aider", session="aider")
        query = "which file holds the test runner"
        before = {c.entry.id: c.entry.confidence for c in memory.explain(query).candidates}
        for _ in range(5):
            result = memory.recover(query, budget=60)
            assert not result.entries and all(c.mmr_order is None for c in result.candidates)
        after = {e.id: e.confidence for e in memory.store.entries(list(before), text=False, tags=False).values()}
        assert after == before
        result = memory.recover(query, budget=1500)
        examined = {c.entry.id for c in result.candidates if c.mmr_order is not None}
        packed = {e.id for e in result.entries}
        cut = examined - packed
        # every candidate with an MMR turn was examined by packing: packed, or cut with packing's own reason
        assert all(
            c.verdict in ("packed", "excerpt") or c.reason != "budget exhausted"
            for c in result.candidates
            if c.mmr_order is not None
        ), [(c.verdict, c.reason) for c in result.candidates if c.entry.id in cut]
