"""Tune-split check of how the routed embedder embeds a QUERY, in a bilingual store (dense retrieval only).

    .venv/bin/python benchmarks/routed_mixed_store.py [--locomo PATH] [--memdaily PATH] [--cache DIR]

The tune split of ``lantern eval`` is monolingual per store (a LoCoMo conversation is English, a MemDaily history
Chinese), so there the query mode of ``RoutedEmbedder`` cannot matter: a store holds one model's block only and a
query fills only blocks the store occupies. A bilingual user's store holds both. This script builds that case from
the TUNE split only (LoCoMo conversations 1-5, MemDaily type 01; never the report split): store i = LoCoMo tune
conversation i + MemDaily tune history i mod 4, their archived entries with their routed vectors taken from the
``lantern eval`` archive cache (built with ``lantern --embedder routed eval ... --split tune``; built here if
missing). Every question with evidence (LoCoMo categories 1-4, MemDaily all) is asked against its mixed store
by the semantic signal alone; evidence recall@10 (share of the evidence turns in the top 10) per query mode:

- ``own block``: the query fills only its own model's block (``cross_lingual=False``);
- ``both blocks``: the query fills both blocks, each times 1/sqrt(2) (the default, as the store holds both);
- ``own store``: the same questions against their own monolingual store (the eval's setting), for reference.

A drop from ``own store`` to ``both blocks`` is what the other language's entries cost a query in its own language.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from lantern.embed import RoutedEmbedder, embed_query
from lantern.eval.cases import prepare
from lantern.eval.datasets import SEPARATE_CATEGORIES, load
from lantern.eval.run import default_cache_dir

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def questions(p):
    """(question, set of relevant entry ids) for each fact of a Prepared history with resolvable evidence."""
    out = []
    for f in p.history.facts:
        if f.category in SEPARATE_CATEGORIES:
            continue
        rel = {p.entry_ids[p.turn_of[e]] for e in f.evidence if e in p.turn_of}
        if rel:
            out.append((f.question, rel))
    return out


def store_arrays(p):
    """Ids and full-width vectors (n, dim) of a store: the index holds only the columns of the blocks in use."""
    index = p.lantern.index
    index.refresh()
    full = np.zeros((len(index.ids), index.dim), np.float32)
    full[:, index.columns] = index.matrix
    return index.ids.copy(), full


def recall_at_10(matrix: np.ndarray, keys: list, q: np.ndarray, rel: set) -> float:
    top = np.argsort(-(matrix @ q), kind="stable")[:10]
    return len({keys[i] for i in top} & rel) / len(rel)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--locomo", type=Path, default=DATA / "locomo" / "locomo10.json")
    ap.add_argument("--memdaily", type=Path, default=DATA / "memdaily" / "messages_and_QAs")
    ap.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="eval archive cache (default $LANTERN_EVAL_CACHE or ~/.cache/lantern/eval)",
    )
    args = ap.parse_args()
    console = Console(width=120)
    both, own = RoutedEmbedder(), None
    own = RoutedEmbedder(both.minilm, both.use, cross_lingual=False)
    cache = args.cache or default_cache_dir()
    loco, _ = prepare(load("locomo", args.locomo).select("tune"), cache, both)
    memd, _ = prepare(load("memdaily", args.memdaily).select("tune"), cache, both)
    loco, memd = list(loco.values()), list(memd.values())
    recalls: dict[tuple[str, str], list[float]] = {}
    for i, lp in enumerate(loco):
        mp = memd[i % len(memd)]
        parts = {"locomo": (lp, *store_arrays(lp)), "memdaily": (mp, *store_arrays(mp))}
        mixed = np.concatenate([parts["locomo"][2], parts["memdaily"][2]])
        keys = [("locomo", int(x)) for x in parts["locomo"][1]] + [("memdaily", int(x)) for x in parts["memdaily"][1]]
        for name, (p, ids, matrix) in parts.items():
            qs = questions(p)
            texts = [q for q, _ in qs]
            vb = embed_query(both, texts)  # the mixed store occupies both blocks
            vo = embed_query(own, texts)
            single_keys = [(name, int(x)) for x in ids]
            for (_, rel), b, o in zip(qs, vb, vo):
                rel = {(name, r) for r in rel}
                recalls.setdefault((name, "own store"), []).append(recall_at_10(matrix, single_keys, o, rel))
                recalls.setdefault((name, "own block"), []).append(recall_at_10(mixed, keys, o, rel))
                recalls.setdefault((name, "both blocks"), []).append(recall_at_10(mixed, keys, b, rel))
        console.print(f"store {i + 1}: {lp.history.id} + {mp.history.id}")
    t = Table(title="Dense recall@10 in bilingual stores (tune split; semantic signal alone)")
    t.add_column("questions")
    for mode in ("own store", "own block", "both blocks"):
        t.add_column(mode, justify="right")
    t.add_column("n", justify="right")
    for name in ("locomo", "memdaily"):
        t.add_row(
            name,
            *(f"{np.mean(recalls[(name, m)]):.3f}" for m in ("own store", "own block", "both blocks")),
            str(len(recalls[(name, "own store")])),
        )
    console.print(t)
    console.print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
