"""Chinese read path: ``Lantern.recover`` latency on stores of Chinese turns at 1k and 10k entries with the default
embedder (``routed``: USE for the main vector, e5 ranked apart as ``semantic_e5``), against the query's embedding
alone (USE + e5 for one question, the stage no store size changes) as the in-process baseline.

    .venv/bin/python benchmarks/bench_recover_zh.py [--sizes 1000,10000] [--queries 40] [--pool 1500] [--repeat 2]

Store: the MemDaily histories of ../shared/data/memdaily (Chinese), chunked into turns as ``lantern eval`` does,
first --pool turns run through the real write-path stages and embedded once (``_common.Pool``), then the store
filled through ``Store.add`` with synthetic copies beyond the pool (``_common.fill_store``: the copy's text gets
" [copy k]", its vector the pool vector plus noise). Queries: the MemDaily questions of those histories. Each size gets
a fresh ``Lantern`` (a fresh in-process index, as in a new process); 2 warm-up recoveries, then every question
--repeat times, with the baseline (``embed_query`` of the same question) interleaved. Needs ../shared/data: without
it the script says so and exits. Issue #23's target: p50 <= 40 ms at 10k entries.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, CpuMeter, Pool, clean_pool, fill_store, pct, print_machine  # noqa: E402
from lantern.api import Lantern  # noqa: E402
from lantern.embed import embed_query, get_embedder  # noqa: E402
from lantern.eval.cases import history_turns  # noqa: E402
from lantern.eval.datasets import load_memdaily  # noqa: E402

SHARED = REPO.parent / "shared" / "data" / "memdaily"
TARGET_P50_MS, TARGET_SIZE = 40.0, 10_000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000", help="entry counts, ascending (default 1000,10000)")
    ap.add_argument("--queries", type=int, default=40, help="MemDaily questions used as queries (default 40)")
    ap.add_argument("--pool", type=int, default=1500, help="real turns embedded once to fill the store (default 1500)")
    ap.add_argument("--repeat", type=int, default=2, help="times each question is run per size (default 2)")
    args = ap.parse_args()
    console = Console(width=140)
    print_machine(console)
    if not SHARED.is_dir():
        console.print(f"no MemDaily data at {SHARED}: this benchmark needs ../shared/data")
        return
    meter = CpuMeter()
    console.print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    dataset = load_memdaily(SHARED)
    turns, questions = [], []
    for history in sorted(dataset.histories, key=lambda h: h.id):
        turns.extend(history_turns(history))
        questions.extend(f.question for f in history.facts)
        if len(turns) >= args.pool:
            break
    questions = list(dict.fromkeys(questions))[: args.queries]
    embedder = get_embedder("routed")
    embedder.load()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    rows = []
    with tempfile.TemporaryDirectory(prefix="lantern-bench-zh-") as tmp:
        path = Path(tmp) / "zh.db"
        builder = Lantern(path, embedder=embedder)
        t0 = time.perf_counter()
        pool = Pool(builder, clean_pool(turns[: args.pool], builder))
        console.print(
            f"data: MemDaily ({SHARED}): pool of {len(pool):,} Chinese turns prepared + embedded in "
            f"{time.perf_counter() - t0:.1f} s; {len(questions)} questions"
        )
        filled = 0
        for size in sizes:
            fill_store(builder.store, pool, filled, size, sigma=0.02)
            filled = size
            lantern = Lantern(path, embedder=embedder)
            t0 = time.perf_counter()
            lantern.recover(questions[0])
            first_s = time.perf_counter() - t0
            lantern.recover(questions[-1])
            occupied = lantern.index.block_occupied
            total, base = [], []
            for _ in range(args.repeat):
                for q in questions:
                    t0 = time.perf_counter()
                    embed_query(embedder, [q], occupied)
                    base.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    lantern.recover(q)
                    total.append(time.perf_counter() - t0)
            lantern.close()
            rows.append((size, first_s, total, base))

    table = Table(title="Chinese recover latency (routed: USE + e5), MemDaily questions (ms)")
    for col in ("entries", "recover p50", "p95", "embed query alone p50", "recover ÷ embed", "first recover"):
        table.add_column(col, justify="right")
    for size, first_s, total, base in rows:
        table.add_row(
            f"{size:,}",
            f"{pct(total, 50) * 1000:.1f}",
            f"{pct(total, 95) * 1000:.1f}",
            f"{pct(base, 50) * 1000:.1f}",
            f"{pct(total, 50) / pct(base, 50):.2f}x",
            f"{first_s * 1000:.0f}",
        )
    console.print(table)
    at = [r for r in rows if r[0] == TARGET_SIZE]
    if at:
        p50 = pct(at[0][2], 50) * 1000
        verdict = "met" if p50 <= TARGET_P50_MS else "not met"
        console.print(f"target: p50 <= {TARGET_P50_MS:.0f} ms at {TARGET_SIZE:,} entries: {p50:.1f} ms, {verdict}")
    console.print(meter.report())


if __name__ == "__main__":
    main()
