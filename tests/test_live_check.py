"""The live-context check of the read path (recover/pipeline.py ``still_live``): an archived entry whose
whitespace-collapsed text lies inside the live context is never re-injected; one whose head is live but whose full
text goes on is not live; only the heads of the other candidates are read."""

from __future__ import annotations

from lantern import Lantern
from lantern.recover.rank import still_live


def test_still_live_reads_heads_first_and_checks_full_texts(tmp_path):
    long_tail = "deploy notes: " + "the staging cluster uses port 7443 and the worker pool has 12 nodes. " * 10
    with Lantern(tmp_path / "live.db", embedder="minilm") as memory:
        billing = [
            {"role": "user", "content": "the billing database listens on port 5433"},
            {"role": "assistant", "content": "noted: billing on 5433"},
        ]
        ids = memory.archive(
            billing
            + [
                {"role": "user", "content": "what are the deploy notes?"},
                {"role": "assistant", "content": long_tail},
                {"role": "user", "content": "the renderer lives in src/render/invoice.py"},
                {"role": "assistant", "content": "ok"},
            ],
            session="s",
        ).entry_ids
        assert len(ids) == 3
        texts = {e.id: e.text for e in memory.store.entries(ids).values()}
        live = memory.live_text(
            billing
            + [
                {"role": "user", "content": "what are the deploy notes?"},
                {"role": "assistant", "content": long_tail[:300]},
            ]
        )  # the long turn cut short
        got = still_live(memory.store, ids, live, head_chars=50)
        assert got == {i for i, t in texts.items() if " ".join(t.split()) in live}
        assert len(got) == 1 and "5433" in texts[got.pop()]
        reads: list[list[int]] = []
        entries = memory.store.entries
        memory.store.entries = lambda i, **k: reads.append(list(i)) or entries(i, **k)
        still_live(memory.store, ids, live, head_chars=50)
        assert len(reads) == 1 and len(reads[0]) == 2  # the two whose head is live; the renderer turn is not read
        # a recovery never re-injects the live turn, and still brings the others
        result = memory.recover("billing database port and renderer", exclude=billing)
        assert "5433" not in result.text and "invoice.py" in result.text
