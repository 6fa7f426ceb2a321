"""Storage benchmark: bytes on disk per archived turn, by table and index, against the turn's own text.

    .venv/bin/python benchmarks/bench_bytes.py [--sizes 10000] [--pool 2000] [--embedder routed] [--excerpt]

A store is filled as ``bench_recover.py`` fills it (benchmarks/_common.py ``fill_store``: real aider turns through
the real write-path stages and ``Store.add``, copies beyond the pool with `` [copy k]`` appended), then measured with
SQLite's ``dbstat`` (``Store.bytes_by_table``, what ``lantern stats`` prints) after a ``VACUUM`` (a store as it
settles; the pages of a store being written hold some slack besides). The baseline is the turns' own text: the UTF-8
bytes of ``entries.text``, the one thing a turn cannot be stored without. Issue #23's target: at most 3 KB per turn
beyond it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Pool, begin, clean_pool, fill_store  # noqa: E402
from lantern.api import Lantern  # noqa: E402
from lantern.embed import get_embedder  # noqa: E402

TARGET_BEYOND_TEXT = 3_000  # bytes per turn (issue #23)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000", help="comma-separated entry counts (default 10000)")
    ap.add_argument("--pool", type=int, default=2_000, help="real turns prepared and embedded once (default 2000)")
    ap.add_argument("--embedder", default="routed", help="routed (default, as `lantern` uses), minilm or use")
    args, console, meter, label, turns, _ = begin(ap, width=120)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    console.print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    embedder = get_embedder(args.embedder)
    embedder.load()
    with tempfile.TemporaryDirectory(prefix="lantern-bench-bytes-") as tmp:
        path = Path(tmp) / "bytes.db"
        builder = Lantern(path, embedder=embedder)
        pool = Pool(builder, clean_pool(turns[: args.pool], builder))
        console.print(f"data: {label}; pool {len(pool):,} turns; embedder {embedder.id} ({embedder.dim}-d)")
        filled = 0
        for size in sizes:
            fill_store(builder.store, pool, filled, size, sigma=0.02)
            filled = size
            builder.store.db.execute("VACUUM")
            stats = builder.store.stats()
            n = stats["entries"]
            text = builder.store.db.execute("SELECT sum(length(CAST(text AS BLOB))) FROM entries").fetchone()[0] / n
            table = Table(title=f"Bytes per turn by table and index, {n:,} entries (dbstat, after VACUUM)")
            for col in ("table or index", "bytes per turn", "% of the file"):
                table.add_column(col, justify="left" if col == "table or index" else "right")
            total = stats["bytes_per_turn"]
            for name, b in stats["bytes_per_turn_by_table"].items():
                table.add_row(name, f"{b:,}", f"{100 * b / total:.1f}%")
            table.add_row("[bold]all (the file)", f"[bold]{total:,}", "100%")
            table.add_row("baseline: the turn's text (UTF-8)", f"{text:,.0f}", f"{100 * text / total:.1f}%")
            beyond = total - text
            table.add_row("[bold]beyond the text", f"[bold]{beyond:,.0f}", f"{100 * beyond / total:.1f}%", style="bold")
            console.print(table)
            verdict = "meets" if beyond <= TARGET_BEYOND_TEXT else "MISSES"
            console.print(
                f"{n:,} entries: {total:,} bytes per turn, {total / text:.2f}x the text; {beyond:,.0f} beyond it: "
                f"{verdict} the <= {TARGET_BEYOND_TEXT:,} target"
            )
        builder.close()
    console.print(meter.report())


if __name__ == "__main__":
    main()
