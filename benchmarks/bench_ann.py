"""Semantic signal and recovery at 10k, 100k and 1M entries: exact search against the HNSW graphs (store/ann.py),
their recall against exact search, and the first recovery of a new process (index open included).

    .venv/bin/python benchmarks/bench_ann.py [--sizes 10000,100000,1000000] [--queries 50] [--pool 2000]
                                             [--embedder minilm] [--db PATH] [--runs 3] [--excerpt]
                                             [--recover-only]

Store: as benchmarks/bench_recover.py (and its helpers in _common.py): a pool of real aider turns through the real
write-path stages, embedded once by the real model; the store is filled through ``Store.add`` (the real store
stage) in batches of --batch rows, entry i = pool turn i % P, later copies marked in their text and session and
given the pool vector plus Gaussian noise (sigma --sigma per nonzero component), re-normalized. ``--db PATH`` keeps
the database between runs (filled only up to each size). Queries: real user messages of the turns after the pool.

Per size, in this process: the index load (``MemoryIndex.refresh`` of a fresh handle), recover with exact search
(``Config.ann_min_rows`` above the size), the graphs' build (``ann_min_rows=0``, timed to the end of the worker
thread), recover with the graphs, and the semantic signal alone both ways on the same query vectors
(``signals.semantic`` with n = ``signal_top_n``), with recall@10 and recall@100 of the graphs' top 100 against the
exact top 100, and recall@10 counted in source turns (``source_recall``: the copies of one real turn are
near-duplicates). Recover's semantic and full-text stages are timed apart (wrappers around the functions the pipeline
calls, as in bench_recover). Then --runs new processes each open the database and run one recover (the default
Config): the index open and the first recover, timed inside the process, after one untimed run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Pool, begin, clean_pool, fill_store, pct, pool_and_queries  # noqa: E402
from lantern.api import Lantern  # noqa: E402
from lantern.config import Config  # noqa: E402
from lantern.embed import embed_query, get_embedder  # noqa: E402
from lantern.recover import signals  # noqa: E402

EXACT = Config(ann_min_rows=2**62)
FORCED = Config(ann_min_rows=0)

FIRST = r"""
import json, sys, time
t0 = time.perf_counter()
from lantern.api import Lantern
lantern = Lantern(sys.argv[1], embedder=sys.argv[3])
lantern.embedder.load()
t1 = time.perf_counter()
lantern.index.refresh()
t2 = time.perf_counter()
lantern.recover(sys.argv[2])
t3 = time.perf_counter()
graphs = lantern.index.ann is not None and not lantern.index.ann.building
lantern.close()
t4 = time.perf_counter()
print(json.dumps({"open": t2 - t1, "recover": t3 - t2, "close": t4 - t3, "graphs": graphs}))
"""


def timed(owner, attr, sink: dict[str, float]):
    fn = getattr(owner, attr)

    def wrapper(*a, **k):
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            sink[attr] = sink.get(attr, 0.0) + time.perf_counter() - t0

    setattr(owner, attr, wrapper)
    return fn


def recover_run(lantern: Lantern, queries: list[str]) -> dict[str, list[float]]:
    """Each query once (after 2 warm-ups): whole-call, semantic and full-text seconds."""
    sink: dict[str, float] = {}
    originals = {a: timed(signals, a, sink) for a in ("semantic", "fulltext")}
    out: dict[str, list[float]] = {"total": [], "semantic": [], "fulltext": []}
    try:
        lantern.recover("how do I run the tests?")
        lantern.recover("fix the failing lint error")
        for q in queries:
            sink.clear()
            t0 = time.perf_counter()
            lantern.recover(q)
            out["total"].append(time.perf_counter() - t0)
            out["semantic"].append(sink.get("semantic", 0.0))
            out["fulltext"].append(sink.get("fulltext", 0.0))
    finally:
        for a, fn in originals.items():
            setattr(signals, a, fn)
    return out


def source_recall(index, got: np.ndarray, want: np.ndarray, pool_size: int) -> float:
    """Recall of the exact top positions ``want`` among ``got``, counted in source turns: entry id e is a copy of pool
    turn (e - 1) % P (``_common.fill_store``), and the copies of one turn are near-duplicates of one another, so the
    exact top 10 at 1M (500 copies per turn) is a near-random pick among ties that plain recall cannot reproduce."""
    source = (index.ids[want] - 1) % pool_size
    found = (index.ids[got] - 1) % pool_size
    return len(np.intersect1d(found, source)) / max(len(np.unique(source)), 1)


def recover_only(args, console, embedder, folder: Path, sizes: list[int], queries: list[str], pool_size: int) -> None:
    """``--recover-only``: each ``ann-SIZE.db`` already filled (and its snapshot written by an earlier run) opened
    with the default Config in this process; index open, recover p50 / p95 with its stages, the semantic signal both
    ways and its recall (plain and by source turn)."""
    t = Table(title="Lantern.recover with the default Config on a filled store (--recover-only), ms")
    for col in (
        "entries",
        "index open",
        "graphs",
        "recover p50",
        "recover p95",
        "semantic p50",
        "fulltext p50",
        "recall@10",
        "recall@10, source turns",
    ):
        t.add_column(col, justify="right")
    for size in sizes:
        t0 = time.perf_counter()
        lantern = Lantern(folder / f"ann-{size}.db", embedder=embedder)
        lantern.index.refresh()
        opened = time.perf_counter() - t0
        runs = recover_run(lantern, queries)
        idx, n_top = lantern.index, lantern.config.signal_top_n
        rec10, src10, graphs = [], [], idx.ann
        for v in embed_query(embedder, queries, idx.block_occupied):
            idx.ann = None
            want = signals.semantic(idx, v, None, n_top)
            idx.ann = graphs
            got = signals.semantic(idx, v, None, n_top)
            rec10.append(len(np.intersect1d(got[0][:10], want[0][:10])) / max(min(10, len(want[0])), 1))
            src10.append(source_recall(idx, got[0][:10], want[0][:10], pool_size))
        t.add_row(
            f"{size:,}",
            f"{opened * 1000:.0f}",
            str(graphs is not None and not graphs.building),
            f"{pct(runs['total'], 50) * 1000:.1f}",
            f"{pct(runs['total'], 95) * 1000:.1f}",
            f"{pct(runs['semantic'], 50) * 1000:.2f}",
            f"{pct(runs['fulltext'], 50) * 1000:.2f}",
            f"{np.mean(rec10):.3f}",
            f"{np.mean(src10):.3f}",
        )
        lantern.close()
    console.print(t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000", help="entry counts, ascending")
    ap.add_argument("--queries", type=int, default=50, help="real user messages used as queries (default 50)")
    ap.add_argument("--pool", type=int, default=2000, help="real turns embedded once to fill the store (default 2000)")
    ap.add_argument("--sigma", type=float, default=0.02, help="noise per vector component of copies (default 0.02)")
    ap.add_argument("--batch", type=int, default=10_000, help="rows per Store.add transaction (default 10000)")
    ap.add_argument("--embedder", default="minilm", help="minilm (default), use or routed")
    ap.add_argument("--db", default=None, help="keep the databases (ann-SIZE.db) in this folder between runs")
    ap.add_argument("--fill-only", action="store_true", help="fill the databases of --db and stop")
    ap.add_argument("--runs", type=int, default=3, help="new processes timed per size (default 3)")
    ap.add_argument(
        "--recover-only", action="store_true", help="with --db: time recover on the stores already there, no fill"
    )
    args, console, meter, label, turns, _ = begin(ap, width=150)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    n_pool, queries = pool_and_queries(turns, args.pool, args.queries)
    console.print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    embedder = get_embedder(args.embedder)
    embedder.load()
    tmp = tempfile.TemporaryDirectory(prefix="lantern-bench-ann-")
    folder = Path(args.db) if args.db else Path(tmp.name)
    folder.mkdir(parents=True, exist_ok=True)
    with Lantern(folder / "pool.db", embedder=embedder) as scratch:
        pool = Pool(scratch, clean_pool(turns[:n_pool], scratch))
    console.print(f"data: {label}: pool {len(pool):,} real turns, {len(queries)} queries; embedder {embedder.id}")
    n_top = Config().signal_top_n

    if args.recover_only:
        recover_only(args, console, embedder, folder, sizes, queries, len(pool))
        console.print(meter.report())
        return
    results = []
    previous: Path | None = None
    for size in sizes:
        path = folder / f"ann-{size}.db"
        if not path.exists() and previous is not None:
            shutil.copyfile(previous, path)  # the smaller store, closed (no WAL left), filled on from there
        previous = path
        with Lantern(path, embedder=embedder) as builder:
            have = builder.store.count()
            t0 = time.perf_counter()
            if have < size:
                fill_store(builder.store, pool, have, size, sigma=args.sigma, batch=args.batch)
            fill_s = time.perf_counter() - t0
        r: dict = dict(size=size, fill_s=fill_s, filled=size - have)
        console.print(f"  {size:,}: filled {r['filled']:,} in {fill_s:.0f} s")
        if args.fill_only:
            continue

        lantern = Lantern(path, embedder=embedder, config=EXACT)
        t0 = time.perf_counter()
        lantern.index.refresh()
        r["load_s"] = time.perf_counter() - t0
        r["exact"] = recover_run(lantern, queries)

        lantern.config = FORCED
        t0 = time.perf_counter()
        lantern.index.refresh()
        lantern.index._dirty = True  # the parameters changed: the next refresh builds the graphs
        lantern.index.refresh()
        lantern.index.wait_ann()
        r["build_s"] = time.perf_counter() - t0
        r["ann"] = recover_run(lantern, queries)

        idx = lantern.index
        vecs = embed_query(embedder, queries, idx.block_occupied)
        exact_s, ann_s, rec10, rec100, src10 = [], [], [], [], []
        graphs = idx.ann
        for v in vecs:
            idx.ann = None
            t0 = time.perf_counter()
            want = signals.semantic(idx, v, None, n_top)
            exact_s.append(time.perf_counter() - t0)
            idx.ann = graphs
            t0 = time.perf_counter()
            got = signals.semantic(idx, v, None, n_top)
            ann_s.append(time.perf_counter() - t0)
            rec10.append(len(np.intersect1d(got[0][:10], want[0][:10])) / max(min(10, len(want[0])), 1))
            rec100.append(len(np.intersect1d(got[0], want[0])) / max(len(want[0]), 1))
            src10.append(source_recall(idx, got[0][:10], want[0][:10], len(pool)))
        r.update(exact_sem=exact_s, ann_sem=ann_s, rec10=rec10, rec100=rec100, src10=src10)
        r["matrix_mb"] = idx.matrix.nbytes / 1e6
        lantern.close()

        firsts = []
        for i in range(args.runs + 1):
            res = subprocess.run(
                [sys.executable, "-c", FIRST, str(path), queries[i % len(queries)], args.embedder],
                capture_output=True,
                text=True,
                check=True,
            )
            if i:
                firsts.append(json.loads(res.stdout.strip().splitlines()[-1]))
        r["first"] = firsts
        results.append(r)
        console.print(
            f"  {size:,}: load {r['load_s']:.1f} s, graphs built in "
            f"{r['build_s']:.1f} s, recover p50 exact {pct(r['exact']['total'], 50) * 1000:.1f} ms / graphs "
            f"{pct(r['ann']['total'], 50) * 1000:.1f} ms, recall@10 {np.mean(rec10):.3f}"
        )
    if args.fill_only:
        return

    t1 = Table(title=f"Semantic signal alone, top {n_top} ({len(queries)} real queries): exact vs HNSW graphs")
    for col in (
        "entries",
        "matrix MB",
        "graphs build s",
        "exact p50 ms",
        "graphs p50 ms",
        "graphs p95 ms",
        "exact ÷ graphs",
        "recall@10",
        "recall@100",
        "recall@10, source turns",
    ):
        t1.add_column(col, justify="right")
    for r in results:
        e, a = pct(r["exact_sem"], 50) * 1000, pct(r["ann_sem"], 50) * 1000
        t1.add_row(
            f"{r['size']:,}",
            f"{r['matrix_mb']:,.0f}",
            f"{r['build_s']:.1f}",
            f"{e:.2f}",
            f"{a:.2f}",
            f"{pct(r['ann_sem'], 95) * 1000:.2f}",
            f"{e / a:.1f}x",
            f"{np.mean(r['rec10']):.3f}",
            f"{np.mean(r['rec100']):.3f}",
            f"{np.mean(r['src10']):.3f}",
        )
    console.print(t1)

    t2 = Table(title="Lantern.recover (after warm-up), exact vs graphs, same process: p50 / p95 ms, stages p50 ms")
    for col in (
        "entries",
        "index load s",
        "exact p50",
        "exact p95",
        "graphs p50",
        "graphs p95",
        "semantic exact",
        "semantic graphs",
        "fulltext (exact run)",
        "fulltext (graphs run)",
    ):
        t2.add_column(col, justify="right")
    for r in results:
        ex, an = r["exact"], r["ann"]
        t2.add_row(
            f"{r['size']:,}",
            f"{r['load_s']:.2f}",
            *(
                f"{pct(x, q) * 1000:.1f}"
                for x, q in ((ex["total"], 50), (ex["total"], 95), (an["total"], 50), (an["total"], 95))
            ),
            *(f"{pct(x, 50) * 1000:.2f}" for x in (ex["semantic"], an["semantic"], ex["fulltext"], an["fulltext"])),
        )
    console.print(t2)

    t3 = Table(title=f"First recover in a new process (default Config), median of {args.runs} after 1 untimed run, ms")
    for col in ("entries", "index open", "first recover", "open + recover", "close", "graphs in use"):
        t3.add_column(col, justify="right")
    for r in results:
        f = r["first"]
        med = {k: float(np.median([x[k] for x in f])) * 1000 for k in ("open", "recover", "close")}
        t3.add_row(
            f"{r['size']:,}",
            f"{med['open']:.0f}",
            f"{med['recover']:.0f}",
            f"{med['open'] + med['recover']:.0f}",
            f"{med['close']:.0f}",
            ", ".join(str(x["graphs"]) for x in f),
        )
    console.print(t3)
    console.print(meter.report())
    tmp.cleanup()


if __name__ == "__main__":
    main()
