"""Long-turn benchmark (issue #19, item 1): is the one line that matters in a huge turn recovered, at small budgets
and at the default one?

    .venv/bin/python benchmarks/bench_long_turns.py [--budgets 1000,1500,6000] [--json PATH]

Transcripts: tests/long_turns.py builds them in real formats (a Claude Code session file whose ``pytest -v`` turn
holds ~115 KB of output with the one failing test at its end; an OpenAI chat whose ``write_file`` call carries a
24 KB settings module with ``RETENTION_DAYS`` deep inside; a 4 KB task statement and, later, a short turn giving the
answer). Each scenario has two questions, each with the string the block must hold to answer it.

Two stores: "alone" (each scenario's transcript in a store of its own) and "mixed" (one store holding the shipped
aider excerpt, 97 real coding turns, plus the three transcripts, each its own session; questions asked across the
whole store). For every question and budget: found (the string is inside the block) and the characters injected.
Also: the archive time of each transcript, the database size, and the recovery latency.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from _common import EXCERPT, CpuMeter, pct, print_machine  # noqa: E402
from lantern import Lantern  # noqa: E402
from long_turns import scenarios  # noqa: E402


def archive(memory: Lantern, sc, session: str) -> float:
    t0 = time.perf_counter()
    if sc.path is not None:
        memory.ingest(sc.path, session=session)
    else:
        memory.archive(sc.messages, session=session)
    return time.perf_counter() - t0


def ask(memory: Lantern, sc, budgets: list[int], store: str, rows: list[dict], latencies: list[float]) -> None:
    for question, expect in sc.asks:
        for budget in budgets:
            t0 = time.perf_counter()
            rec = memory.recover(question, budget=budget)
            latencies.append(time.perf_counter() - t0)
            rows.append(
                {
                    "store": store,
                    "scenario": sc.name,
                    "question": question,
                    "budget": budget,
                    "found": expect in rec.text,
                    "chars": rec.chars,
                    "entries": len(rec.entries),
                    "excerpts": sum(e.excerpt for e in rec.entries),
                }
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budgets", default="1000,1500,6000")
    ap.add_argument("--json", type=Path, help="also write every row as JSON here")
    args = ap.parse_args()
    budgets = [int(b) for b in args.budgets.split(",") if b]
    console = Console(width=150)
    print_machine(console)
    meter = CpuMeter()
    rows: list[dict] = []
    latencies: list[float] = []
    archive_s: dict[str, float] = {}
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        scs = scenarios(folder / "files")
        for n, sc in enumerate(scs):
            with Lantern(folder / f"alone{n}.db") as memory:
                archive_s[sc.name] = archive(memory, sc, "s")
                sizes[f"alone: {sc.name}"] = memory.stats()["database_bytes"]
                ask(memory, sc, budgets, "alone", rows, latencies)
        with Lantern(folder / "mixed.db") as memory:
            memory.ingest(EXCERPT, format="aider", session="aider")
            for n, sc in enumerate(scs):
                archive(memory, sc, f"scenario{n}")
            sizes["mixed"] = memory.stats()["database_bytes"]
            for sc in scs:
                ask(memory, sc, budgets, "mixed", rows, latencies)

    table = Table(title="found / asked, and mean characters injected, per budget")
    table.add_column("store")
    table.add_column("scenario")
    for b in budgets:
        table.add_column(f"{b:,}", justify="right")
    for store in ("alone", "mixed"):
        for sc in scs:
            cells = []
            for b in budgets:
                rs = [r for r in rows if r["store"] == store and r["scenario"] == sc.name and r["budget"] == b]
                cells.append(
                    f"{sum(r['found'] for r in rs)}/{len(rs)} · {sum(r['chars'] for r in rs) / len(rs):,.0f} ch"
                )
            table.add_row(store, sc.name, *cells)
    totals = []
    for b in budgets:
        rs = [r for r in rows if r["budget"] == b]
        totals.append(f"{sum(r['found'] for r in rs)}/{len(rs)}")
    table.add_row("all", "", *totals)
    console.print(table)
    detail = Table(title="every question")
    for col in ("store", "question", *[f"{b:,}" for b in budgets]):
        detail.add_column(col)
    for store in ("alone", "mixed"):
        for sc in scs:
            for question, _ in sc.asks:
                cells = []
                for b in budgets:
                    r = next(r for r in rows if r["store"] == store and r["question"] == question and r["budget"] == b)
                    cells.append(
                        f"{'found' if r['found'] else 'MISSED'} {r['chars']:,} ({r['entries']}e/{r['excerpts']}x)"
                    )
                detail.add_row(store, question, *cells)
    console.print(detail)
    console.print(
        "archive (s): "
        + "; ".join(f"{k} {v:.2f}" for k, v in archive_s.items())
        + "\ndatabase bytes: "
        + "; ".join(f"{k} {v:,}" for k, v in sizes.items())
        + f"\nrecover latency: p50 {1000 * pct(latencies, 50):.1f} ms, p95 {1000 * pct(latencies, 95):.1f} ms "
        f"over {len(latencies)} calls"
    )
    console.print(meter.report())
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
