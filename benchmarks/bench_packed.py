"""Read cost of the deflated summary and tags (store/packed.py, migration m009): the read path's entry fetch on one
store whose rows are packed and on a copy of it with the same rows as plain TEXT, in the same process.

    .venv/bin/python benchmarks/bench_packed.py [--size 10000] [--pool 2000] [--fetch 300] [--repeat 200] [--excerpt]

A store is filled as ``bench_bytes.py`` fills it (``_common.fill_store``: real aider turns through the real
write-path stages and ``Store.add``), with MiniLM vectors (the vectors play no part here). The copy has every summary
and tags value inflated back to TEXT (what a store written before m009 holds; the store reads both). Timed, runs of
the two stores interleaved: ``Store.entries(ids, text=False, tags=False)`` for ``--fetch`` random ids (what
recover/rank.py reads for its candidate pool: summaries, no text, no tags), the same with tags (what ``explain``
reads), and ``Store.entries(ids[:10])`` with text and tags (what a recovery packs).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Pool, begin, clean_pool, fill_store, pct  # noqa: E402
from lantern.api import Lantern  # noqa: E402
from lantern.embed import get_embedder  # noqa: E402
from lantern.store.packed import unpack  # noqa: E402
from lantern.store.sqlite import Store  # noqa: E402


def plain_copy(src: Path, dst: Path) -> None:
    """``dst``: ``src`` with every summary and tags value inflated back to TEXT, vacuumed like ``src``."""
    a, b = sqlite3.connect(src), sqlite3.connect(dst, isolation_level=None)
    a.backup(b)
    a.close()
    b.create_function("unpack", 1, unpack)
    b.execute("BEGIN")
    b.execute("UPDATE entries SET summary = unpack(summary), tags = unpack(tags)")
    b.execute("COMMIT")
    b.execute("VACUUM")
    b.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=10_000, help="entries in the store (default 10000)")
    ap.add_argument("--pool", type=int, default=2_000, help="real turns prepared and embedded once (default 2000)")
    ap.add_argument("--fetch", type=int, default=300, help="ids per fetch (default 300)")
    ap.add_argument("--repeat", type=int, default=200, help="fetches timed per store and kind (default 200)")
    args, console, meter, label, turns, _ = begin(ap, width=120)
    console.print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    embedder = get_embedder("minilm")
    embedder.load()
    with tempfile.TemporaryDirectory(prefix="lantern-bench-packed-") as tmp:
        packed_path, plain_path = Path(tmp) / "packed.db", Path(tmp) / "plain.db"
        builder = Lantern(packed_path, embedder=embedder)
        pool = Pool(builder, clean_pool(turns[: args.pool], builder))
        fill_store(builder.store, pool, 0, args.size, sigma=0.02)
        builder.store.db.execute("VACUUM")
        builder.close()
        plain_copy(packed_path, plain_path)
        stores = {"plain TEXT": Store(plain_path), "packed (m009)": Store(packed_path)}
        counts = {
            name: s.db.execute(
                "SELECT total(typeof(summary) = 'blob'), total(typeof(tags) = 'blob') FROM entries"
            ).fetchone()
            for name, s in stores.items()
        }
        console.print(
            f"data: {label}; {args.size:,} entries; BLOB summaries / tags: "
            + "; ".join(f"{name} {int(a):,} / {int(b):,}" for name, (a, b) in counts.items())
        )
        n = stores["packed (m009)"].count()
        rng = np.random.default_rng(0)
        kinds = {
            f"entries({args.fetch} ids, no text, no tags): rank's candidate pool": dict(text=False, tags=False),
            f"entries({args.fetch} ids, no text, tags): explain's candidates": dict(text=False, tags=True),
            "entries(10 ids, text and tags): a recovery's packed entries": dict(text=True, tags=True, few=True),
        }
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.repeat):
            ids = rng.choice(np.arange(1, n + 1), size=args.fetch, replace=False).tolist()
            for kind, opts in kinds.items():
                chosen = ids[:10] if opts.get("few") else ids
                for name, store in stores.items():  # interleaved: the load of the machine falls on both alike
                    t0 = time.perf_counter()
                    got = store.entries(chosen, text=opts["text"], tags=opts["tags"])
                    times.setdefault((kind, name), []).append((time.perf_counter() - t0) * 1000)
                    assert len(got) == len(chosen)
        same = all(
            stores["plain TEXT"].entries(ids) == stores["packed (m009)"].entries(ids)
            for ids in (list(range(1, n + 1))[i : i + 500] for i in range(0, n, 500))
        )
        table = Table(title=f"Store.entries, {args.repeat} fetches per row (ms)")
        for col in ("fetch", "plain p50", "plain p95", "packed p50", "packed p95", "p50 ratio"):
            table.add_column(col, justify="left" if col == "fetch" else "right")
        for kind in kinds:
            a, b = times[(kind, "plain TEXT")], times[(kind, "packed (m009)")]
            table.add_row(
                kind,
                f"{pct(a, 50):.2f}",
                f"{pct(a, 95):.2f}",
                f"{pct(b, 50):.2f}",
                f"{pct(b, 95):.2f}",
                f"{pct(b, 50) / pct(a, 50):.2f}x",
            )
        console.print(table)
        console.print(f"every entry read the same from both stores: {same}")
        for s in stores.values():
            s.close()
    console.print(meter.report())


if __name__ == "__main__":
    main()
