"""Read-path benchmark: ``Lantern.recover`` latency at 1k, 10k and 100k archived turns, broken down by stage,
against the semantic signal alone (one matrix-vector product) as the in-process baseline.

    .venv/bin/python benchmarks/bench_recover.py [--sizes 1000,10000,100000] [--queries 50] [--pool 2000] [--excerpt]
                                                 [--profile] [--embedder minilm|use|routed]

Store: embedding 100k turns one by one would take an hour, so a pool of --pool real aider turns is run through the
real write-path stages (``Writer.prepare``: summarize, tags, hints, classify) and embedded once (batched); the
store is then filled through ``Store.add`` (the real store stage, FTS5 included) with entry i = pool turn i % P:
the first P entries are the real turns with their real vectors, later copies get " [copy k]" appended to the text
(so the content hash differs) and the pool vector plus Gaussian noise (sigma --sigma per component),
re-normalized. Pool turns that the store would merge or dedupe (same text, or a turn that extends the previous one)
are left out of the pool so each size holds exactly that many entries.

Queries: the user messages (3 words or more) of the aider turns that come AFTER the pool: real, and never an
entry's own text. Each size gets a fresh ``Lantern`` (fresh in-process index): its first ``recover`` builds the
index (reported separately as the load time), 2 warm-up queries follow, then every query --repeat times.
Stages are timed by wrapping the functions ``pipeline.recover`` calls (same call, no copy of the pipeline); what
they do not cover (building candidates, masks) is the "glue" row. Timers are exclusive: a timed stage called inside
another (the entry fetches that packing makes) counts in its own row only. MMR and the duplicate check run lazily
while packing reads candidates, so they count in the "MMR + duplicate check + pack" row.
Target: <= 30 ms p50 at 10k entries.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Pool, begin, clean_pool, fill_store, pct, pool_and_queries  # noqa: E402
from lantern import reinforce  # noqa: E402
from lantern.api import Lantern  # noqa: E402
from lantern.embed import embed_query, get_embedder  # noqa: E402
from lantern.recover import facts_note, local, neighbours, pipeline, prf, rank, signals, speaker, timeframe  # noqa: E402

TARGET_P50_MS, TARGET_SIZE = 30.0, 10_000

STAGES = [  # (row label, where the timer sits)
    ("index refresh check", "index.refresh"),
    ("embed query (worker thread, overlapped)", "embedder.embed"),
    ("wait for the query vector", "queries.vector"),
    ("query terms", "rank.query_terms"),
    ("semantic (matrix @ q + top-N)", "signals.semantic"),
    ("fulltext (FTS5 bm25 top-N)", "signals.fulltext"),
    ("keyword (hint postings, Jaccard)", "signals.keyword"),
    ("prf (RM3 expansion, 2nd FTS5 query)", "prf.prf_ranking"),
    ("time (dates the query names)", "timeframe.time_ranking"),
    ("neighbour (adjacent turns, SQL)", "neighbours.neighbour_ranking"),
    ("local (turns near the best hits, SQL + cosine)", "local.local_ranking"),
    ("speaker (a named speaker's candidates)", "speaker.speaker_ranking"),
    ("fetch entries (SQL: candidates, prf, packed)", "store.entries"),
    ("importance (eq. 2 over the pool)", "signals.importance"),
    ("RRF fusion", "rank.rrf"),
    ("MMR + duplicate check + pack (lazy)", "pipeline.pack_with_notes"),
    ("bump access counts (write)", "store.bump_access"),
    ("reinforcement c, σ and access counts (write)", "reinforce.record_recovery"),
    ("superseded-fact notes (SQL)", "facts_note.facts_of_entries"),
]


class Timers:
    """Wraps callables so each call adds its exclusive wall time to ``self.now[label]``."""

    def __init__(self) -> None:
        self.now: dict[str, float] = defaultdict(float)
        self._undo: list[tuple[object, str, object, bool]] = []
        self._local = threading.local()  # per thread, per open timed call: the time of timed calls inside it
        self.parallel: set[str] = set()  # stages run in another thread, overlapped: not part of the call's own time

    def wrap(self, owner: object, attr: str, label: str, parallel: bool = False) -> None:
        fn = getattr(owner, attr)
        had_own = isinstance(owner, type(sys)) or attr in getattr(owner, "__dict__", {})
        now, local = self.now, self._local
        if parallel:
            self.parallel.add(label)

        def timed(*a, **k):  # exclusive time: what timed stages called inside took is left to their own rows
            inner = local.__dict__.setdefault("inner", [0.0])
            inner.append(0.0)
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                dt = time.perf_counter() - t0
                now[label] += dt - inner.pop()
                inner[-1] += dt

        setattr(owner, attr, timed)
        self._undo.append((owner, attr, fn, had_own))

    def restore(self) -> None:
        for owner, attr, fn, had_own in reversed(self._undo):
            if had_own:
                setattr(owner, attr, fn)
            else:
                delattr(owner, attr)
        self._undo.clear()


def fulltext_selection(lantern: Lantern, queries: list[str], repeat: int) -> dict[str, tuple[list[float], list[float]]]:
    """The full-text query of each recovery (its terms, the store's bm25 top-N in the recovery's scope) with the
    terms ``signals.select_terms`` keeps corpus-relatively alone (``rows`` None: no absolute bound) and with the
    absolute bound (``FTS_MAX_POSTINGS``), on the same store in the same process: {"relative" | "bounded": (seconds
    per query, estimated postings of the kept terms = fraction x entries)}."""
    store, n, cfg = lantern.store, lantern.store.count(), lantern.config
    out: dict[str, tuple[list[float], list[float]]] = {"relative": ([], []), "bounded": ([], [])}
    for _ in range(repeat):
        for q in queries:
            terms = [t for t in rank.query_terms(q)[: cfg.max_query_terms] if signals.has_word(t)]
            fractions = store.term_fractions([signals.quote(t) for t in terms], signals.FTS_SAMPLE_ROWS)
            for name, rows in (("relative", None), ("bounded", n)):
                kept = signals.select_terms(terms, fractions, rows)
                t0 = time.perf_counter()
                store.fulltext(signals.fts_query(kept), cfg.signal_top_n, None, lantern.scope)
                out[name][0].append(time.perf_counter() - t0)
                out[name][1].append(sum(fractions[signals.quote(t)] for t in kept) * n)
    return out


def instrument(lantern: Lantern) -> Timers:
    t = Timers()
    t.wrap(lantern.index, "refresh", "index refresh check")
    t.wrap(
        lantern.embedder,
        "embed_query" if hasattr(lantern.embedder, "embed_query") else "embed",
        "embed query (worker thread, overlapped)",
        parallel=True,
    )
    t.wrap(lantern.queries, "vector", "wait for the query vector")
    t.wrap(rank, "query_terms", "query terms")
    for name, label in (
        ("semantic", "semantic (matrix @ q + top-N)"),
        ("fulltext", "fulltext (FTS5 bm25 top-N)"),
        ("keyword", "keyword (hint postings, Jaccard)"),
        ("importance", "importance (eq. 2 over the pool)"),
    ):
        t.wrap(signals, name, label)
    t.wrap(prf, "prf_ranking", "prf (RM3 expansion, 2nd FTS5 query)")
    t.wrap(timeframe, "time_ranking", "time (dates the query names)")
    t.wrap(neighbours, "neighbour_ranking", "neighbour (adjacent turns, SQL)")
    t.wrap(local, "local_ranking", "local (turns near the best hits, SQL + cosine)")
    t.wrap(speaker, "speaker_ranking", "speaker (a named speaker's candidates)")
    t.wrap(lantern.store, "entries", "fetch entries (SQL: candidates, prf, packed)")
    t.wrap(rank, "rrf", "RRF fusion")
    t.wrap(pipeline, "pack_with_notes", "MMR + duplicate check + pack (lazy)")
    t.wrap(lantern.store, "bump_access", "bump access counts (write)")
    t.wrap(lantern.index, "note_access", "bump access counts (write)")
    t.wrap(reinforce, "record_recovery", "reinforcement c, σ and access counts (write)")
    t.wrap(facts_note, "facts_of_entries", "superseded-fact notes (SQL)")
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000", help="entry counts, ascending (default 1000,10000,100000)")
    ap.add_argument("--queries", type=int, default=50, help="real user messages used as queries (default 50)")
    ap.add_argument("--pool", type=int, default=2000, help="real turns embedded once to fill the store (default 2000)")
    ap.add_argument("--sigma", type=float, default=0.02, help="noise per vector component of copies (default 0.02)")
    ap.add_argument("--repeat", type=int, default=2, help="times each query is run per size (default 2)")
    ap.add_argument("--profile", action="store_true", help="also cProfile the queries at the largest size")
    ap.add_argument("--embedder", default="minilm", help="minilm (default), use or routed")
    args, console, meter, label, turns, _ = begin(ap, width=140)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    n_pool, queries = pool_and_queries(turns, args.pool, args.queries)
    console.print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    embedder = get_embedder(args.embedder)
    embedder.load()
    console.print(f"embedder: {embedder.id} ({embedder.dim}-d)")
    with tempfile.TemporaryDirectory(prefix="lantern-bench-recover-") as tmp:
        path = Path(tmp) / "recover.db"
        builder = Lantern(path, embedder=embedder)
        pool_turns = clean_pool(turns[:n_pool], builder)
        t0 = time.perf_counter()
        pool = Pool(builder, pool_turns)
        pool_s = time.perf_counter() - t0
        console.print(
            f"data: {label}: {len(turns):,} turns; pool = first {n_pool:,} turns, {len(pool):,} after dropping the "
            "ones "
            f"the store would merge (prepared + embedded in {pool_s:.1f} s); {len(queries)} queries from the "
            f"{len(turns) - n_pool:,} later turns (median {np.median([len(q) for q in queries]):.0f} characters)"
        )

        results = []
        filled = 0
        profile_text = ""
        for size in sizes:
            t0 = time.perf_counter()
            fill_store(builder.store, pool, filled, size, sigma=args.sigma)
            fill_s = time.perf_counter() - t0
            filled = size
            stats = builder.stats()

            lantern = Lantern(path, embedder=embedder)  # a fresh in-process index, as in a new process
            timers = instrument(lantern)
            t0 = time.perf_counter()
            lantern.recover("warm-up: where is the config file loaded?")
            first_s = time.perf_counter() - t0
            load_s = timers.now["index refresh check"]
            lantern.recover("how do I run the tests?")
            lantern.recover("fix the failing lint error")

            total_s: list[float] = []
            per_stage: dict[str, list[float]] = {name: [] for name, _ in STAGES}
            glue: list[float] = []
            n_cands: list[int] = []
            for _ in range(args.repeat):
                for q in queries:
                    timers.now.clear()
                    t0 = time.perf_counter()
                    rec = lantern.recover(q)
                    dt = time.perf_counter() - t0
                    total_s.append(dt)
                    for name, _ in STAGES:
                        per_stage[name].append(timers.now.get(name, 0.0))
                    glue.append(dt - sum(v for k, v in timers.now.items() if k not in timers.parallel))
                    n_cands.append(len(rec.candidates))
            timers.restore()

            # baseline: the semantic signal alone, on the same index and the same query vectors
            lantern.index.refresh()
            qvecs = embed_query(embedder, queries, lantern.index.block_occupied)
            matvec_s, semantic_s = [], []
            for _ in range(args.repeat):
                for v in qvecs:
                    t0 = time.perf_counter()
                    lantern.index.cosines(v)  # the matrix-vector product over the columns in use
                    matvec_s.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    signals.semantic(lantern.index, v, None, lantern.config.signal_top_n)
                    semantic_s.append(time.perf_counter() - t0)

            selection = fulltext_selection(lantern, queries, args.repeat)

            with Lantern(path, embedder=embedder) as again:  # the load once more, the file now read once
                t0 = time.perf_counter()
                again.index.refresh()
                reload_s = time.perf_counter() - t0

            if args.profile and size == sizes[-1]:
                prof = cProfile.Profile()
                prof.enable()
                for q in queries:
                    lantern.recover(q)
                prof.disable()
                buf = io.StringIO()
                pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(18)
                profile_text = f"cProfile of {len(queries)} recover calls at {size:,} entries (top by tottime):\n"
                profile_text += buf.getvalue()
                with Lantern(path, embedder=embedder) as fresh:  # the index load once more, profiled
                    prof = cProfile.Profile()
                    prof.enable()
                    fresh.index.refresh()
                    prof.disable()
                buf = io.StringIO()
                pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(12)
                profile_text += f"cProfile of the in-process index load at {size:,} entries (top by tottime):\n"
                profile_text += buf.getvalue()
            lantern.close()
            results.append(
                dict(
                    size=size,
                    fill_s=fill_s,
                    stats=stats,
                    load_s=load_s,
                    reload_s=reload_s,
                    first_s=first_s,
                    total=total_s,
                    stages=per_stage,
                    glue=glue,
                    matvec=matvec_s,
                    semantic=semantic_s,
                    cands=float(np.mean(n_cands)),
                    matrix_mb=lantern.index.matrix.nbytes / 1e6,
                    selection=selection,
                )
            )
            console.print(
                f"  {size:,} entries: filled in {fill_s:.1f} s, index load {load_s * 1000:.0f} ms, "
                f"recover p50 {pct(total_s, 50) * 1000:.1f} ms"
            )
        builder.close()

    # ---------------------------------------------------------------- report
    t1 = Table(
        title=(
            f"Lantern.recover latency ({len(queries)} real queries x {args.repeat}, budget 6,000 chars, after warm-up)"
        )
    )
    for col in (
        "entries",
        "db MB",
        "index load ms",
        "reload ms",
        "1st recover ms",
        "p50 ms",
        "p95 ms",
        "mean ms",
        "matvec alone p50 ms",
        "semantic alone p50 ms",
        "p50 ÷ matvec",
        "p50 ÷ semantic",
        "target",
    ):
        t1.add_column(col, justify="right")
    for r in results:
        p50 = pct(r["total"], 50) * 1000
        mv, se = pct(r["matvec"], 50) * 1000, pct(r["semantic"], 50) * 1000
        target = (
            (("meets" if p50 <= TARGET_P50_MS else "MISSES") + f" <= {TARGET_P50_MS:.0f}")
            if r["size"] == TARGET_SIZE
            else ""
        )
        t1.add_row(
            f"{r['size']:,}",
            f"{r['stats']['database_bytes'] / 1e6:,.0f}",
            f"{r['load_s'] * 1000:,.0f}",
            f"{r['reload_s'] * 1000:,.0f}",
            f"{r['first_s'] * 1000:,.0f}",
            f"{p50:.1f}",
            f"{pct(r['total'], 95) * 1000:.1f}",
            f"{np.mean(r['total']) * 1000:.1f}",
            f"{mv:.2f}",
            f"{se:.2f}",
            f"{p50 / mv:.0f}x",
            f"{p50 / se:.1f}x",
            target,
        )
    console.print(t1)
    console.print(
        "index load = MemoryIndex.refresh inside the first recover of a fresh Lantern, right after the fill "
        "(the file just written); reload = the same on another fresh Lantern afterwards; 1st recover includes "
        "the index load"
    )

    t2 = Table(title="Where recover's time goes: per stage p50 and p95 (ms); share = stage mean / recover mean")
    t2.add_column("stage", justify="left")
    for r in results:
        t2.add_column(f"{r['size']:,} p50", justify="right")
        t2.add_column("p95", justify="right")
        t2.add_column("share", justify="right")
    for name, _where in STAGES + [("glue (candidates, masks)", "")]:
        cells = []
        for r in results:
            vals = r["glue"] if name.startswith("glue") else r["stages"][name]
            cells += [
                f"{pct(vals, 50) * 1000:.2f}",
                f"{pct(vals, 95) * 1000:.2f}",
                f"{100 * np.mean(vals) / np.mean(r['total']):.0f}%",
            ]
        t2.add_row(name, *cells)
    cells = []
    for r in results:
        cells += [f"{pct(r['total'], 50) * 1000:.2f}", f"{pct(r['total'], 95) * 1000:.2f}", "100%"]
    t2.add_row("recover (whole call)", *cells, style="bold")
    console.print(t2)
    console.print(
        "candidates per query (mean): "
        + ", ".join(f"{r['size']:,}: {r['cands']:.0f}" for r in results)
        + "; in-process matrix: "
        + ", ".join(f"{r['size']:,}: {r['matrix_mb']:.0f} MB" for r in results)
        + "; Store.add fill rate: "
        + ", ".join(
            f"{r['size']:,}: {(r['size'] - (results[i - 1]['size'] if i else 0)) / r['fill_s']:,.0f} rows/s"
            for i, r in enumerate(results)
        )
    )
    t3 = Table(
        title=(
            "Full-text query alone (Store.fulltext, bm25 top-N, the recovery's terms): terms kept corpus-relatively "
            f"(baseline) vs also within {signals.FTS_MAX_POSTINGS:,} postings"
        )
    )
    for col in ("entries", "relative p50 ms", "relative p95 ms", "bounded p50 ms", "bounded p95 ms", "p50 ratio"):
        t3.add_column(col, justify="right")
    t3.add_column("est. postings per query (mean): relative / bounded", justify="right")
    for r in results:
        (rel, rel_post), (bnd, bnd_post) = r["selection"]["relative"], r["selection"]["bounded"]
        t3.add_row(
            f"{r['size']:,}",
            f"{pct(rel, 50) * 1000:.2f}",
            f"{pct(rel, 95) * 1000:.2f}",
            f"{pct(bnd, 50) * 1000:.2f}",
            f"{pct(bnd, 95) * 1000:.2f}",
            f"{pct(bnd, 50) / pct(rel, 50):.2f}x",
            f"{np.mean(rel_post):,.0f} / {np.mean(bnd_post):,.0f}",
        )
    console.print(t3)
    if profile_text:
        console.print(profile_text, markup=False, highlight=False)
    console.print(meter.report())


if __name__ == "__main__":
    main()
