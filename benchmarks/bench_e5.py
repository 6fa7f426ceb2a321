"""What e5 costs on a Chinese conversation: ``Lantern.archive`` per turn and ``Lantern.recover`` per question with the
default embedder ``routed`` (MiniLM / USE + e5 for CJK text, the semantic_e5 signal) against ``routed-v1`` (MiniLM /
USE), the baseline, run in the same process on the same turns and questions.

    .venv/bin/python benchmarks/bench_e5.py [--turns 300] [--queries 50] [--repeat 2] [--fixture]

Data: the first MemDaily history of ../shared/data/memdaily (Chinese, type 01: the tune split), its messages chunked
into turns as ``lantern eval`` does; queries are its questions. Without ../shared/data (or with --fixture) the tiny
MemDaily fixture of tests/fixtures/eval is used (a smoke run: too few turns for figures). For each embedder a fresh
database: the first --turns turns archived one ``archive`` call each (the hook / proxy pattern: per-turn latency), the
rest in one call (bulk rate), then every question recovered --repeat times on a fresh ``Lantern`` after 2 warm-ups.
The embedders alternate (v1, routed, v1, routed) over two rounds so drift on a shared machine hits both.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, CpuMeter, pct, print_machine  # noqa: E402
from lantern.api import Lantern  # noqa: E402
from lantern.eval.cases import history_turns  # noqa: E402
from lantern.eval.datasets import load_memdaily  # noqa: E402

SHARED = REPO.parent / "shared" / "data" / "memdaily"
FIXTURE = REPO / "tests" / "fixtures" / "eval" / "memdaily"
EMBEDDERS = ("routed-v1", "routed")  # baseline first


def messages_of(turn) -> list:
    return list(turn.messages)  # Message objects, as lantern eval archives them


def run_one(name: str, turns, questions: list[str], n_single: int, repeat: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="lantern-bench-e5-") as tmp:
        path = Path(tmp) / "zh.db"
        lt = Lantern(path, embedder=name)
        lt.archive(messages_of(turns[0]), session="warm")  # loads the models: not part of the per-turn figures
        single = []
        for t in turns[1 : n_single + 1]:
            t0 = time.perf_counter()
            lt.archive(messages_of(t), session="s")
            single.append(time.perf_counter() - t0)
        rest = [m for t in turns[n_single + 1 :] for m in messages_of(t)]
        t0 = time.perf_counter()
        bulk = lt.archive(rest, session="s").added if rest else 0
        bulk_s = time.perf_counter() - t0
        lt.close()

        lt = Lantern(path, embedder=name)  # a fresh in-process index, as in a new process
        lt.recover("我上次说的是什么？")
        lt.recover("数据库的端口是多少？")
        rec_s, e5_hits = [], 0
        for _ in range(repeat):
            for q in questions:
                t0 = time.perf_counter()
                rec = lt.recover(q)
                rec_s.append(time.perf_counter() - t0)
                e5_hits += any("semantic_e5" in c.ranks for c in rec.candidates)
        entries = lt.stats()["entries"]
        lt.close()
    return {
        "single": single,
        "bulk_s": bulk_s,
        "bulk": bulk,
        "recover": rec_s,
        "entries": entries,
        "e5_share": e5_hits / max(len(rec_s), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=300, help="turns archived one call each (default 300)")
    ap.add_argument("--queries", type=int, default=50, help="questions recovered (default 50)")
    ap.add_argument("--repeat", type=int, default=2, help="times each question is recovered (default 2)")
    ap.add_argument("--fixture", action="store_true", help="use the tiny test fixture even if ../shared/data exists")
    args = ap.parse_args()
    console = Console(width=140)
    print_machine(console)
    meter = CpuMeter()
    source = FIXTURE if args.fixture or not SHARED.is_dir() else SHARED
    dataset = load_memdaily(source)
    history = sorted(dataset.histories, key=lambda h: (h.split != "tune", h.id))[0]
    turns = history_turns(history)
    questions = list(dict.fromkeys(f.question for f in history.facts))[: args.queries]
    n_single = min(args.turns, max(len(turns) - 1, 0))
    console.print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    console.print(
        f"data: {source} history {history.id}: {len(turns):,} turns, {len(questions)} questions"
        f"{' (fixture: a smoke run, not figures)' if source == FIXTURE else ''}"
    )

    runs: dict[str, list[dict]] = {name: [] for name in EMBEDDERS}
    for _ in range(2):
        for name in EMBEDDERS:
            runs[name].append(run_one(name, turns, questions, n_single, args.repeat))

    table = Table(title="e5 on a Chinese conversation: routed vs routed-v1 (same process, same turns and questions)")
    for col in (
        "embedder",
        "entries",
        "archive ms/turn p50",
        "p95",
        "bulk ms/turn",
        "recover p50 ms",
        "p95",
        "recover p50 ÷ v1",
        "archive p50 ÷ v1",
        "recoveries with semantic_e5",
    ):
        table.add_column(col, justify="right" if col != "embedder" else "left")
    base = {}
    for name in EMBEDDERS:
        single = [s for r in runs[name] for s in r["single"]]
        rec = [s for r in runs[name] for s in r["recover"]]
        bulk = sum(r["bulk_s"] for r in runs[name]) / max(sum(r["bulk"] for r in runs[name]), 1)
        a50, r50 = pct(single, 50) * 1000 if single else float("nan"), pct(rec, 50) * 1000
        base.setdefault("a", a50)
        base.setdefault("r", r50)
        table.add_row(
            name,
            f"{runs[name][0]['entries']:,}",
            f"{a50:.1f}",
            f"{pct(single, 95) * 1000:.1f}" if single else "-",
            f"{bulk * 1000:.1f}",
            f"{r50:.1f}",
            f"{pct(rec, 95) * 1000:.1f}",
            f"{r50 / base['r']:.2f}x",
            f"{a50 / base['a']:.2f}x",
            f"{np.mean([r['e5_share'] for r in runs[name]]):.0%}",
        )
    console.print(table)
    console.print(
        f"archive: {n_single} turns one call each per run, the rest in one call; recover: {len(questions)} questions "
        f"x {args.repeat} per run; 2 runs per embedder, alternating"
    )
    console.print(meter.report())


if __name__ == "__main__":
    main()
