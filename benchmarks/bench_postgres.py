"""The PostgreSQL backend beside SQLite, measured in the same run: filling the store, the first recovery in a new
handle (in-process index load included), recover p50 / p95, and one-turn archive p50 / p95.

    .venv/bin/python benchmarks/bench_postgres.py [--sizes 1000,10000] [--queries 30] [--pool 1000] [--url URL]

Store contents as bench_recover.py makes them (benchmarks/_common.py ``fill_store``: real aider turns through the
real write-path stages, embedded once; later entries are noisy copies), added through each backend's own
``add``. The server is a pgserver (PyPI wheel: PostgreSQL 16, pgvector 0.6.2) in a temporary directory on this
machine, reached over its Unix socket, unless ``--url`` names one (its database must be empty). Archive: a new
single-turn conversation per call (``Lantern.archive``: redact, summarize, embed, store), ``--archives`` calls.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Pool, begin, clean_pool, fill_store, pct, pool_and_queries  # noqa: E402
from lantern.api import Lantern  # noqa: E402
from lantern.embed import get_embedder  # noqa: E402


def measure(locations, embedder, pool, sizes, queries, archives, console):
    """Fill every store in ``locations`` ({backend name: path or URL}) to each size, then time the recoveries and
    archives with the backends interleaved (query by query, the backend that goes first alternating), so both see
    the same load from other processes on the shared machine."""
    builders = {name: Lantern(loc, embedder=embedder) for name, loc in locations.items()}
    filled = dict.fromkeys(locations, 0)
    for size in sizes:
        fill_s, added, stats, first, took, wrote = {}, {}, {}, {}, {}, {}
        for name, builder in builders.items():
            added[name] = size - filled[name]
            t0 = time.perf_counter()
            fill_store(builder.store, pool, filled[name], size, sigma=0.02)
            fill_s[name] = time.perf_counter() - t0
            filled[name] = size
            stats[name] = builder.store.stats()
        handles = {name: Lantern(loc, embedder=embedder) for name, loc in locations.items()}
        try:
            for name, lt in handles.items():
                t0 = time.perf_counter()
                lt.recover("warm-up: where is the config file loaded?")
                first[name] = time.perf_counter() - t0
                lt.recover("how do I run the tests?")
                took[name], wrote[name] = [], []
            order = list(handles)
            for i, q in enumerate(queries):
                for name in order if i % 2 == 0 else order[::-1]:
                    t0 = time.perf_counter()
                    handles[name].recover(q)
                    took[name].append(time.perf_counter() - t0)
            for i in range(archives):
                msg = [{"role": "user", "content": f"bench note {size}-{i}: the deploy key rotates every {i} days"}]
                for name in order if i % 2 == 0 else order[::-1]:
                    t0 = time.perf_counter()
                    handles[name].archive(msg, session=f"bench-archive-{size}")
                    wrote[name].append(time.perf_counter() - t0)
        finally:
            for lt in handles.values():
                lt.close()
        for name in handles:
            filled[name] += archives
            console.print(
                f"{name} {size:,}: fill {fill_s[name]:.1f} s ({added[name] / fill_s[name]:,.0f} entries/s), "
                f"{stats[name]['bytes_per_turn']:,} bytes/turn, first "
                f"recover {first[name] * 1000:.0f} ms, recover p50 {pct(took[name], 50) * 1000:.1f} ms p95 "
                f"{pct(took[name], 95) * 1000:.1f} ms, archive p50 {pct(wrote[name], 50) * 1000:.1f} ms p95 "
                f"{pct(wrote[name], 95) * 1000:.1f} ms"
            )
    for builder in builders.values():
        builder.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000", help="entry counts, ascending (default 1000,10000)")
    ap.add_argument("--queries", type=int, default=30, help="real user messages used as queries (default 30)")
    ap.add_argument("--pool", type=int, default=1000, help="real turns embedded once to fill the stores")
    ap.add_argument("--archives", type=int, default=20, help="one-turn archive calls timed per size (default 20)")
    ap.add_argument("--embedder", default="minilm", help="minilm (default), use or routed")
    ap.add_argument("--url", default=None, help="an existing server's empty database instead of a pgserver")
    args, console, meter, label, turns, _ = begin(ap, width=140)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    n_pool, queries = pool_and_queries(turns, args.pool, args.queries)
    embedder = get_embedder(args.embedder)
    embedder.load()
    console.print(f"data: {label}; embedder {embedder.id}; {len(queries)} queries")
    tmp = Path(tempfile.mkdtemp(prefix="lantern-bench-pg-"))
    server = None
    try:
        url = args.url
        if url is None:
            import pgserver
            import psycopg

            server = pgserver.get_server(tmp / "pg", cleanup_mode="stop")
            with psycopg.connect(server.get_uri(), autocommit=True) as conn:
                conn.execute("CREATE DATABASE bench")
            url = server.get_uri("bench")
        builder = Lantern(tmp / "pool.db", embedder=embedder)
        pool = Pool(builder, clean_pool(turns[:n_pool], builder))
        builder.close()
        measure({"sqlite": tmp / "bench.db", "postgresql": url}, embedder, pool, sizes, queries, args.archives, console)
        console.print(meter.report())
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
