"""Reinforcement benchmark: the added cost of reinforcement (paper Appendix D; lantern/reinforce.py) per recovery at
10k archived turns, against ``recover`` without it, in the same process on the same index.

    .venv/bin/python benchmarks/bench_reinforce.py [--size 10000] [--queries 50] [--pool 1000] [--repeat 2] [--excerpt]

Store: as bench_recover.py (``_common.fill_store``): a pool of real aider turns through the real write-path stages,
embedded once, copied up to --size entries with noisy vectors. Queries: user messages (3 words or more) of the aider
turns after the pool. One ``Lantern`` handle; each query is run once with ``Config(reinforce=False)`` (access
count bump only, its own transaction) and once with reinforcement (access bump + c of the packed and cut candidates
+ a pending recovery row, one transaction), alternating which goes first. Reported per recovery:

- end to end: ``recover`` p50/p95 both ways and their ratio;
- the write itself: ``reinforce.record_recovery`` against ``Store.bump_access`` (what it replaces), and the
  difference of their p50s: the added cost (target <= 5 ms at 10k entries);
- the usefulness check at archive time: ``reinforce.resolve_pending`` while archiving one assistant reply after
  each reinforced recovery (inside ``Store.add``'s transaction).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Pool, begin, clean_pool, fill_store, pct, pool_and_queries  # noqa: E402
from lantern import reinforce  # noqa: E402
from lantern.api import Lantern  # noqa: E402
from lantern.config import Config  # noqa: E402
from lantern.embed import MiniLMEmbedder  # noqa: E402

TARGET_ADDED_MS = 5.0


class Timed:
    """Wraps ``owner.attr`` so each call (for which ``only(args, kwargs)`` holds) appends its wall time (seconds)
    to ``self.calls``."""

    def __init__(self, owner: object, attr: str, only=lambda a, k: True):
        self.owner, self.attr, self.fn = owner, attr, getattr(owner, attr)
        self.own = isinstance(owner, type(sys)) or attr in getattr(owner, "__dict__", {})
        self.calls: list[float] = []
        fn, calls = self.fn, self.calls

        def timed(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                if only(a, k):
                    calls.append(time.perf_counter() - t0)

        setattr(owner, attr, timed)

    def restore(self) -> None:
        if self.own:
            setattr(self.owner, self.attr, self.fn)
        else:
            delattr(self.owner, self.attr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=10_000, help="entries in the store (default 10000)")
    ap.add_argument("--queries", type=int, default=50, help="real user messages used as queries (default 50)")
    ap.add_argument("--pool", type=int, default=1000, help="real turns embedded once to fill the store (default 1000)")
    ap.add_argument("--sigma", type=float, default=0.02, help="noise per vector component of copies (default 0.02)")
    ap.add_argument("--repeat", type=int, default=2, help="times each query is run each way (default 2)")
    args, console, meter, label, turns, _ = begin(ap, width=120)
    n_pool, queries = pool_and_queries(turns, args.pool, args.queries)
    console.print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    embedder = MiniLMEmbedder()
    embedder.load()
    with tempfile.TemporaryDirectory(prefix="lantern-bench-reinforce-") as tmp:
        path = Path(tmp) / "reinforce.db"
        builder = Lantern(path, embedder=embedder)
        pool = Pool(builder, clean_pool(turns[:n_pool], builder))
        fill_store(builder.store, pool, 0, args.size, sigma=args.sigma)
        builder.close()
        console.print(
            f"data: {label}; store: {args.size:,} entries from a pool of {len(pool):,} real turns; {len(queries)} "
            "queries"
        )

        on = Config()
        off = replace(on, reinforce=False)
        lantern = Lantern(path, embedder=embedder, config=on)
        for q in ("warm-up: where is the config file loaded?", "how do I run the tests?"):
            lantern.recover(q)
        plain_s: list[float] = []
        reinforced_s: list[float] = []
        n_cut: list[int] = []
        writes = Timed(reinforce, "record_recovery")
        bumps = Timed(lantern.store, "bump_access", only=lambda a, k: len(a) < 2 and k.get("db") is None)  # plain only
        for r in range(args.repeat):
            for i, q in enumerate(queries):
                for mode in (off, on) if (i + r) % 2 == 0 else (on, off):
                    lantern.config = mode
                    t0 = time.perf_counter()
                    rec = lantern.recover(q)
                    (reinforced_s if mode.reinforce else plain_s).append(time.perf_counter() - t0)
                    if mode.reinforce:
                        n_cut.append(
                            sum(c.verdict.startswith("cut:") and c.mmr_order is not None for c in rec.candidates)
                        )  # examined and cut (reinforce.py)
        writes.restore()
        bumps.restore()
        plain_bumps = bumps.calls

        lantern.config = on
        resolves = Timed(reinforce, "resolve_pending")
        archive_s: list[float] = []
        for i, q in enumerate(queries):
            lantern.recover(q)
            t0 = time.perf_counter()
            lantern.archive(
                [{"role": "user", "content": q}, {"role": "assistant", "content": f"Done: see {q[:60]} (reply {i})."}],
                session="bench-replies",
            )
            archive_s.append(time.perf_counter() - t0)
        resolves.restore()
        stats = lantern.stats()
        lantern.close()

    ms = lambda xs, p: pct(xs, p) * 1000  # noqa: E731
    added = ms(writes.calls, 50) - ms(plain_bumps, 50)
    table = Table(
        title=f"reinforcement cost per recovery at {args.size:,} entries ({len(plain_s)} recoveries each way)"
    )
    for col in ("what", "p50 ms", "p95 ms"):
        table.add_column(col, justify="left" if col == "what" else "right")
    table.add_row("recover, reinforce off (end to end)", f"{ms(plain_s, 50):.2f}", f"{ms(plain_s, 95):.2f}")
    table.add_row("recover, reinforce on (end to end)", f"{ms(reinforced_s, 50):.2f}", f"{ms(reinforced_s, 95):.2f}")
    table.add_row("  write: Store.bump_access (off)", f"{ms(plain_bumps, 50):.2f}", f"{ms(plain_bumps, 95):.2f}")
    table.add_row(
        "  write: reinforce.record_recovery (on)", f"{ms(writes.calls, 50):.2f}", f"{ms(writes.calls, 95):.2f}"
    )
    table.add_row("added cost (record_recovery − bump_access, p50)", f"{added:.2f}", "")
    table.add_row(
        "archive one reply turn (with pending recovery)", f"{ms(archive_s, 50):.2f}", f"{ms(archive_s, 95):.2f}"
    )
    table.add_row(
        "  of which reinforce.resolve_pending", f"{ms(resolves.calls, 50):.2f}", f"{ms(resolves.calls, 95):.2f}"
    )
    console.print(table)
    ratio = pct(reinforced_s, 50) / pct(plain_s, 50)
    console.print(
        f"end-to-end ratio on/off (p50): {ratio:.3f}; candidates decayed per recovery: median {np.median(n_cut):.0f}; "
        f"pruned after the run: {stats['pruned']}; added cost {added:.2f} ms vs target ≤ {TARGET_ADDED_MS} ms: "
        f"{'OK' if added <= TARGET_ADDED_MS else 'OVER'}"
    )
    console.print(meter.report())


if __name__ == "__main__":
    main()
