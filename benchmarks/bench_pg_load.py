"""Many writers and readers on one PostgreSQL server (issue #23 item 3): ``--writers`` processes each archive
``--turns`` turns while ``--readers`` processes recover in a loop, all against one database; then every turn a
writer saw acknowledged is looked for on the server.

    .venv/bin/python benchmarks/bench_pg_load.py [--writers 8] [--turns 500] [--readers 8] [--prefill 2000]

Each archive call sends the writer's previous turn again with its new one, as a proxy or hook re-sends a
conversation (the re-sent turn must be deduplicated), and writers ``2k`` and ``2k+1`` share one conversation (user
``u<k>``, session ``load``), so two processes append turns to one conversation at once. Turn contents are real
aider turns (a user message and the assistant's reply), each prefixed with a marker ``[w<writer> t<turn>]``.
Readers recover real aider user messages as user ``u<reader mod writers/2>`` until the writers finish. The store
is prefilled with ``--prefill`` entries as bench_recover.py makes them (benchmarks/_common.py ``fill_store``).

Counted afterwards, by SQL on the server: a turn LOST is one whose ``archive`` call returned but whose marker is in
no entry; DUPLICATED, a marker in more than one entry; a turn-number fault, a conversation whose turn numbers are
not exactly 0..n-1; a SCOPE LEAK, a recovered entry of another user than the reader's. Errors are every exception a
process met (its class and first line), counted. Latencies: archive (one call: redact, summarize, embed, store) and
recover (the first recovery of each reader, which loads the in-process index, apart) p50 / p95.

The server is a pgserver (PyPI wheel: PostgreSQL 16, pgvector 0.6.2) in a temporary directory, over its Unix
socket, unless ``--url`` names an empty database. ``--backend sqlite`` runs the same load on one SQLite file.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import re
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Pool, begin, clean_pool, fill_store, pct, user_text  # noqa: E402

MARK = re.compile(r"\[w(\d+) t(\d+)\]")


def _error(e: BaseException) -> str:
    first = (str(e).strip().splitlines() or [""])[0][:160]
    return f"{type(e).__name__}: {first}"


def writer(k: int, url: str, pairs: list[tuple[str, str]], turns: int, start, out) -> None:
    """Process body: archive ``turns`` turns (``pairs`` cycled) as user u<k//2>, session ``load``."""
    from lantern.api import Lantern

    took, acked, errors = [], [], []
    try:
        lt = Lantern(url, embedder="minilm", user=f"u{k // 2}")
        lt.embedder.load()
    except Exception as e:  # noqa: BLE001 - counted, the benchmark reports every error
        start.wait()
        out.put(("writer", k, took, acked, [_error(e)], []))
        return
    start.wait()
    prev: list[dict] = []
    for i in range(turns):
        q, a = pairs[(k * 7919 + i) % len(pairs)]
        turn = [{"role": "user", "content": f"[w{k} t{i}] {q}"}, {"role": "assistant", "content": a}]
        t0 = time.perf_counter()
        try:
            lt.archive(prev + turn, session="load")
            took.append(time.perf_counter() - t0)
            acked.append(i)
        except Exception as e:  # noqa: BLE001
            errors.append(_error(e))
            if len(errors) == 1:
                traceback.print_exc()
        prev = turn
    lt.close()
    out.put(("writer", k, took, acked, errors, []))


def reader(j: int, url: str, queries: list[str], users: int, start, stop, out) -> None:
    """Process body: recover ``queries`` (cycled) as user u<j mod users> until ``stop`` is set."""
    from lantern.api import Lantern

    took, errors, seen = [], [], []
    try:
        lt = Lantern(url, embedder="minilm", user=f"u{j % users}")
        lt.embedder.load()
    except Exception as e:  # noqa: BLE001
        start.wait()
        out.put(("reader", j, took, [], [_error(e)], seen))
        return
    start.wait()
    i = 0
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            r = lt.recover(queries[(j * 31 + i) % len(queries)])
            took.append(time.perf_counter() - t0)
            seen.extend(e.id for e in r.entries)
        except Exception as e:  # noqa: BLE001
            errors.append(_error(e))
            if len(errors) == 1:
                traceback.print_exc()
        i += 1
    lt.close()
    out.put(("reader", j, took, [], errors, seen))


def check(url: str, writers: int, acked: dict[int, list[int]], seen: dict[int, list[int]], users: int) -> dict:
    """The counts of the docstring, read from the server."""
    if url.startswith("postgresql://"):
        import psycopg

        connect = psycopg.connect
    else:
        import sqlite3
        from contextlib import closing

        def connect(path):
            return closing(sqlite3.connect(path))

    with connect(url) as conn:
        rows = conn.execute("SELECT id, user_id, turn, text FROM entries WHERE session = 'load'").fetchall()
        owners = dict(conn.execute("SELECT id, user_id FROM entries").fetchall())
    found: Counter = Counter()
    turns_by_user: dict[str, list[int]] = {}
    for _, user, turn, text in rows:
        for m in MARK.finditer(text):
            found[(int(m.group(1)), int(m.group(2)))] += 1
        turns_by_user.setdefault(user, []).append(turn)
    lost = sum(1 for k in range(writers) for i in acked.get(k, []) if found[(k, i)] == 0)
    duplicated = sum(1 for n in found.values() if n > 1)
    turn_faults = sum(1 for t in turns_by_user.values() if sorted(t) != list(range(len(t))))
    leaks = sum(1 for j, ids in seen.items() for i in ids if i in owners and owners[i] != f"u{j % users}")
    return {
        "acknowledged": sum(len(v) for v in acked.values()),
        "stored": len(found),
        "lost": lost,
        "duplicated": duplicated,
        "turn_faults": turn_faults,
        "scope_leaks": leaks,
        "recovered_entries_checked": sum(len(v) for v in seen.values()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--writers", type=int, default=8, help="writer processes (default 8; even: two per conversation)")
    ap.add_argument("--turns", type=int, default=500, help="turns each writer archives (default 500)")
    ap.add_argument("--readers", type=int, default=8, help="processes recovering in a loop (default 8)")
    ap.add_argument("--prefill", type=int, default=2000, help="entries in the store before the run (default 2000)")
    ap.add_argument("--pool", type=int, default=1000, help="real turns embedded once for the prefill")
    ap.add_argument("--url", default=None, help="an existing server's empty database instead of a pgserver")
    ap.add_argument(
        "--backend", default="postgresql", choices=("postgresql", "sqlite"), help="sqlite: the same load on one file"
    )
    args, console, meter, label, turns, _ = begin(ap, width=140)
    from rich.table import Table

    from lantern.api import Lantern

    n_pool = min(args.pool, int(len(turns) * 0.8))
    pairs = []
    for t in turns:
        q = user_text(t)
        a = "\n".join(m.text for m in t.messages if m.role == "assistant" and m.text.strip())
        if len(q.split()) >= 3 and a:
            pairs.append((q[:1500], a[:3000]))
    queries = list(dict.fromkeys(q for q in (user_text(t) for t in turns[n_pool:]) if len(q.split()) >= 3))[:200]
    console.print(
        f"data: {label}; {len(pairs)} real (user, assistant) pairs; {len(queries)} queries; {args.writers} writers x "
        f"{args.turns} turns, {args.readers} readers, prefill {args.prefill:,}"
    )
    tmp = Path(tempfile.mkdtemp(prefix="lantern-bench-pgload-"))
    server = None
    try:
        url = args.url
        if args.backend == "sqlite":
            url = str(tmp / "load.db")
            console.print(f"store: one SQLite file, {url}")
        elif url is None:
            import pgserver
            import psycopg

            server = pgserver.get_server(tmp / "pg", cleanup_mode="stop")
            with psycopg.connect(server.get_uri(), autocommit=True) as conn:
                conn.execute("CREATE DATABASE load")
                max_conn = conn.execute("SHOW max_connections").fetchone()[0]
            url = server.get_uri("load")
            console.print(f"server: pgserver PostgreSQL (max_connections {max_conn}), Unix socket")
        builder = Lantern(tmp / "pool.db", embedder="minilm")
        pool = Pool(builder, clean_pool(turns[:n_pool], builder))
        builder.close()
        with Lantern(url, embedder="minilm") as lt:
            t0 = time.perf_counter()
            fill_store(lt.store, pool, 0, args.prefill, sigma=0.02)
            console.print(f"prefill: {args.prefill:,} entries in {time.perf_counter() - t0:.1f} s")

        ctx = mp.get_context("spawn")
        start = ctx.Barrier(args.writers + args.readers + 1)
        stop = ctx.Event()
        out = ctx.Queue()
        users = max(1, args.writers // 2)
        procs = [ctx.Process(target=writer, args=(k, url, pairs, args.turns, start, out)) for k in range(args.writers)]
        procs += [
            ctx.Process(target=reader, args=(j, url, queries, users, start, stop, out)) for j in range(args.readers)
        ]
        for p in procs:
            p.start()
        start.wait()
        t0 = time.perf_counter()
        results = []
        writers_left = args.writers
        while writers_left:
            got = out.get()
            results.append(got)
            if got[0] == "writer":
                writers_left -= 1
        wall = time.perf_counter() - t0
        stop.set()
        while len(results) < len(procs):
            results.append(out.get())
        for p in procs:
            p.join()
        meter_line = meter.report()

        archive = [x for r in results if r[0] == "writer" for x in r[2]]
        firsts = [r[2][0] for r in results if r[0] == "reader" and r[2]]
        recover = [x for r in results if r[0] == "reader" for x in r[2][1:]]
        errors = Counter(e for r in results for e in r[4])
        acked = {r[1]: r[3] for r in results if r[0] == "writer"}
        seen = {r[1]: r[5] for r in results if r[0] == "reader"}
        counts = check(url, args.writers, acked, seen, users)

        table = Table(title=f"{args.writers} writers x {args.turns} turns + {args.readers} readers, one server")
        for col in ("operation", "calls", "p50 (ms)", "p95 (ms)", "max (ms)"):
            table.add_column(col, justify="right" if col != "operation" else "left")
        for name, values in (("archive", archive), ("recover", recover), ("first recover (index load)", firsts)):
            table.add_row(
                name,
                f"{len(values):,}",
                f"{pct(values, 50) * 1000:.1f}",
                f"{pct(values, 95) * 1000:.1f}",
                f"{max(values, default=float('nan')) * 1000:.1f}",
            )
        console.print(table)
        console.print(
            f"turns acknowledged {counts['acknowledged']:,}, stored {counts['stored']:,}; LOST {counts['lost']}, "
            f"DUPLICATED {counts['duplicated']}, conversations with turn-number faults {counts['turn_faults']}, "
            f"scope leaks {counts['scope_leaks']} (of {counts['recovered_entries_checked']:,} recovered entries); "
            f"errors {sum(errors.values())}; writers' wall time {wall:.1f} s"
        )
        for e, n in errors.most_common():
            console.print(f"  error x{n}: {e}")
        console.print(meter_line)
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
