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
from _common import Pool, begin, clean_pool, fill_store, pct, user_text  # noqa: E402
from lantern.api import Lantern  # noqa: E402
from lantern.embed import get_embedder  # noqa: E402


def measure(location, embedder, pool, sizes, queries, archives, console, name):
    rows = []
    filled = 0
    builder = Lantern(location, embedder=embedder)
    for size in sizes:
        t0 = time.perf_counter()
        fill_store(builder.store, pool, filled, size, sigma=0.02)
        fill_s = time.perf_counter() - t0
        filled = size
        stats = builder.stats()
        with Lantern(location, embedder=embedder) as lt:
            t0 = time.perf_counter()
            lt.recover("warm-up: where is the config file loaded?")
            first_s = time.perf_counter() - t0
            lt.recover("how do I run the tests?")
            took = []
            for q in queries:
                t0 = time.perf_counter()
                lt.recover(q)
                took.append(time.perf_counter() - t0)
            wrote = []
            for i in range(archives):
                msg = [{"role": "user", "content": f"bench note {size}-{i}: the deploy key rotates every {i} days"}]
                t0 = time.perf_counter()
                lt.archive(msg, session=f"bench-archive-{size}")
                wrote.append(time.perf_counter() - t0)
            filled += archives
        rows.append((name, size, fill_s, stats["bytes_per_entry"], first_s, took, wrote))
        console.print(
            f"{name} {size:,}: fill {fill_s:.1f} s, {stats['bytes_per_entry']:,} bytes/entry, first recover "
            f"{first_s * 1000:.0f} ms, recover p50 {pct(took, 50) * 1000:.1f} ms p95 {pct(took, 95) * 1000:.1f} ms, "
            f"archive p50 {pct(wrote, 50) * 1000:.1f} ms p95 {pct(wrote, 95) * 1000:.1f} ms"
        )
    builder.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000", help="entry counts, ascending (default 1000,10000)")
    ap.add_argument("--queries", type=int, default=30, help="real user messages used as queries (default 30)")
    ap.add_argument("--pool", type=int, default=1000, help="real turns embedded once to fill the stores")
    ap.add_argument("--archives", type=int, default=20, help="one-turn archive calls timed per size (default 20)")
    ap.add_argument("--embedder", default="minilm", help="minilm (default), use or routed")
    ap.add_argument("--url", default=None, help="an existing server's empty database instead of a pgserver")
    args, console, _meter, label, turns, _ = begin(ap, width=140)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    n_pool = min(args.pool, int(len(turns) * 0.8))
    queries = list(dict.fromkeys(q for q in (user_text(t) for t in turns[n_pool:]) if len(q.split()) >= 3))
    queries = queries[: args.queries]
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
        for name, location in (("sqlite", tmp / "bench.db"), ("postgresql", url)):
            measure(location, embedder, pool, sizes, queries, args.archives, console, name)
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
