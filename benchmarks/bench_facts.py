"""Fact-versioning benchmark (docs/architecture.md §5.4): what fact extraction adds to archiving a turn, and what the
superseded-fact notes (and ``as_of``) add to a recovery at 10k entries — each against the same operation with the
feature off, in the same process, interleaved.

    .venv/bin/python benchmarks/bench_facts.py [--archive-turns 300] [--size 10000] [--pool 2000] [--queries 50]
                                               [--repeat 2] [--excerpt]

Data: ../shared/data/aider_chat_history/chat-history.md when present (read-only), else the shipped demo excerpt.

1. Extraction alone: ``extract_facts`` over each turn's texts (exactly what ``Writer.prepare`` passes it), every
   turn of the log, ``--repeat`` passes, fastest pass per turn kept.
2. Archive: the first ``--archive-turns`` turns archived one call per turn into two fresh databases, one with
   ``Config(extract_facts=False)``, sharing one loaded embedder; the two calls of a turn alternate which goes first.
   Added cost = paired difference (on − off) per turn: extraction + the facts rows + chain linking.
3. Recovery: a store of ``--size`` entries filled as bench_recover.py does (a pool of real turns through the real
   write stages — facts included — then copies through ``Store.add``), queried by the user messages of later turns
   with notes on, notes off (``Config(fact_notes=False)``) and notes on with ``as_of`` = the median event time;
   the variants of one query run back to back, order rotating.
Targets: ≤ 2 ms added per archived turn, ≤ 5 ms added per recovery at 10k entries.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Pool, begin, clean_pool, fill_store, pct, user_text  # noqa: E402
from lantern.api import Lantern  # noqa: E402
from lantern.archive.facts import extract_facts, fact_texts  # noqa: E402
from lantern.config import Config  # noqa: E402
from lantern.embed import MiniLMEmbedder  # noqa: E402

ARCHIVE_TARGET_MS, RECOVER_TARGET_MS = 2.0, 5.0


def row(table: Table, label: str, values_s, note: str = "") -> None:
    v = np.asarray(values_s) * 1000
    table.add_row(label, f"{len(v):,}", f"{v.mean():.3f}", f"{pct(v, 50):.3f}", f"{pct(v, 95):.3f}", note)


def new_table(title: str) -> Table:
    table = Table(title=title)
    for col in ("measure", "n", "mean ms", "p50 ms", "p95 ms", "note"):
        table.add_column(col, justify="right" if col not in ("measure", "note") else "left")
    return table


def bench_extraction(turns, repeat: int) -> tuple[list[float], list[int]]:
    texts = [fact_texts(t) for t in turns]
    best = [float("inf")] * len(turns)
    counts = [0] * len(turns)
    for _ in range(repeat):
        for i, tx in enumerate(texts):
            t0 = time.perf_counter()
            found = extract_facts(*tx)
            best[i] = min(best[i], time.perf_counter() - t0)
            counts[i] = len(found)
    return best, counts


def bench_archive(turns, embedder, tmp: Path) -> tuple[list[float], list[float], int]:
    on = Lantern(tmp / "on.db", embedder=embedder)
    off = Lantern(tmp / "off.db", embedder=embedder, config=Config(extract_facts=False))
    on.archive(turns[0].messages, session="warm")  # first-call costs (statement cache, FTS) outside the timing
    off.archive(turns[0].messages, session="warm")
    on_s, off_s = [], []
    for i, turn in enumerate(turns):
        pair = [(on, on_s), (off, off_s)]
        for lt, out in pair if i % 2 == 0 else pair[::-1]:
            t0 = time.perf_counter()
            lt.archive(turn.messages, session="bench")
            out.append(time.perf_counter() - t0)
    n_facts = on.store.db.execute("SELECT count(*) FROM facts").fetchone()[0]
    on.close()
    off.close()
    return on_s, off_s, n_facts


def bench_recover(turns, embedder, tmp: Path, size: int, n_pool: int, n_queries: int, repeat: int, sigma: float = 0.02):
    path = tmp / "recover.db"
    builder = Lantern(path, embedder=embedder)
    pool = Pool(builder, clean_pool(turns[:n_pool], builder))
    fill_store(builder.store, pool, 0, size, sigma=sigma)
    n_facts = builder.store.db.execute("SELECT count(*) FROM facts").fetchone()[0]
    superseded = builder.store.db.execute("SELECT count(*) FROM facts WHERE valid_to IS NOT NULL").fetchone()[0]
    median_time = builder.store.db.execute(
        "SELECT coalesce(time, archived_at) FROM entries ORDER BY 1 LIMIT 1 OFFSET ?", (size // 2,)
    ).fetchone()[0]
    builder.close()
    queries = list(dict.fromkeys(q for q in (user_text(t) for t in turns[n_pool:]) if len(q.split()) >= 3))[:n_queries]
    as_of = datetime.fromtimestamp(median_time, tz=timezone.utc)
    variants = {
        "notes off": (Lantern(path, embedder=embedder, config=Config(fact_notes=False)), {}),
        "notes on": (Lantern(path, embedder=embedder), {}),
        "notes on + as_of": (Lantern(path, embedder=embedder), {"as_of": as_of}),
    }
    for lt, kw in variants.values():  # index load and warm-up outside the timing
        lt.recover("warm-up: where is the config file loaded?", **kw)
        lt.recover("how do I run the tests?", **kw)
    times: dict[str, list[float]] = {name: [] for name in variants}
    noted = 0
    names = list(variants)
    for r in range(repeat):
        for qi, q in enumerate(queries):
            k = (qi + r) % len(names)
            for name in names[k:] + names[:k]:
                lt, kw = variants[name]
                t0 = time.perf_counter()
                rec = lt.recover(q, **kw)
                times[name].append(time.perf_counter() - t0)
                noted += name == "notes on" and bool(rec.facts)
    for lt, _ in variants.values():
        lt.close()
    return times, len(queries), n_facts, superseded, noted, as_of


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--archive-turns", type=int, default=300, help="turns archived one call each, per variant (default 300)"
    )
    ap.add_argument("--size", type=int, default=10_000, help="entries in the recovery store (default 10,000)")
    ap.add_argument("--pool", type=int, default=2000, help="real turns embedded once to fill the store (default 2000)")
    ap.add_argument("--queries", type=int, default=50, help="real user messages used as queries (default 50)")
    ap.add_argument(
        "--repeat", type=int, default=2, help="passes (extraction: fastest kept; recovery: all kept) (default 2)"
    )
    args, console, meter, label, turns, _ = begin(ap, width=130)
    console.print(f"data: {label}: {len(turns):,} turns")
    embedder = MiniLMEmbedder()
    embedder.load()

    extract_s, counts = bench_extraction(turns, args.repeat)
    table = new_table("Archive: fact extraction on vs off (same process, interleaved)")
    row(table, "extract_facts alone, every turn", extract_s, f"{sum(counts):,} facts in {len(turns):,} turns")
    with tempfile.TemporaryDirectory(prefix="lantern-bench-facts-") as tmp:
        n = min(args.archive_turns, len(turns) - 1)
        on_s, off_s, n_facts = bench_archive(turns[1 : n + 1], embedder, Path(tmp))
        added = np.asarray(on_s) - np.asarray(off_s)
        row(table, "archive, extraction off", off_s)
        row(table, "archive, extraction on", on_s, f"{n_facts:,} facts stored")
        row(
            table,
            "added per turn (on − off, paired)",
            added,
            f"ratio of means {np.mean(on_s) / np.mean(off_s):.3f}; target ≤ {ARCHIVE_TARGET_MS} ms",
        )
        console.print(table)

        n_pool = min(args.pool, int(len(turns) * 0.8))
        times, nq, n_facts, superseded, noted, as_of = bench_recover(
            turns, embedder, Path(tmp), args.size, n_pool, args.queries, args.repeat
        )
        table = new_table(
            f"Recovery at {args.size:,} entries: superseded-fact notes on vs off ({nq} queries × {args.repeat})"
        )
        for name, values in times.items():
            row(table, f"recover, {name}", values, f"as_of {as_of:%Y-%m-%d %H:%M}" if "as_of" in name else "")
        off = np.asarray(times["notes off"])
        row(
            table,
            "added by notes (on − off, paired)",
            np.asarray(times["notes on"]) - off,
            f"{n_facts:,} facts, {superseded:,} superseded; {noted} recoveries carried notes; target ≤ "
            f"{RECOVER_TARGET_MS} ms",
        )
        row(table, "added by notes + as_of (paired)", np.asarray(times["notes on + as_of"]) - off)
        console.print(table)
    console.print(meter.report())


if __name__ == "__main__":
    main()
