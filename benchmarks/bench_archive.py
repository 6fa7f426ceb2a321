"""Write-path benchmark: per-turn ``Lantern.archive`` latency on real aider turns, broken down by stage, against
the MiniLM embedding of the same summaries as the in-process baseline; batched ``Lantern.ingest`` throughput;
storage bytes per turn.

    .venv/bin/python benchmarks/bench_archive.py [--turns 500] [--ingest-turns 2000] [--excerpt]

Data: ../shared/data/aider_chat_history/chat-history.md when present, else the shipped demo excerpt (97 turns,
cycled under new session names to reach --turns). Databases are temporary files, deleted at the end.

Per turn, interleaved so that any background load hits every measurement alike:
  1. baseline: ``MiniLMEmbedder.embed([summary])`` of that turn's summary, alone;
  2. ``Lantern.archive(turn.messages, session=...)`` on the benchmark database (one call per turn);
  3. the stages of that same call, each timed directly (same functions, same arguments as ``Lantern.archive``):
     parse/chunk (``clean_message`` + ``chunk``), summarize + tags + classify (``Writer.prepare``, with its parts timed
     once more on their own), embed, store (``Store.add`` of the one row on a second database).
Targets: archive <= 25 ms p50 per turn, aim <= 12 ms.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import begin, markdown_prefix, pct  # noqa: E402
from lantern.api import Lantern  # noqa: E402
from lantern.archive.chunk import chunk  # noqa: E402
from lantern.archive.classify import classify  # noqa: E402
from lantern.archive.pipeline import clean_message  # noqa: E402
from lantern.archive.summarize import summarize  # noqa: E402
from lantern.embed import MiniLMEmbedder  # noqa: E402
from lantern.model import content_hash  # noqa: E402
from lantern.store.sqlite import Store  # noqa: E402
from lantern.text.tags import extract_tags, hint_terms  # noqa: E402

TARGET_P50_MS, AIM_P50_MS = 25.0, 12.0
STAGES = [
    ("parse/chunk", "clean_message + chunk", 0),
    ("summarize+tags+classify", "Writer.prepare", 0),
    ("  summarize", "summarize", 1),
    ("  extract_tags", "extract_tags", 1),
    ("  hint_terms", "hint_terms", 1),
    ("  classify", "classify", 1),
    ("  render text + content hash", "Turn.text, content_hash", 1),
    ("embed", "MiniLMEmbedder.embed([summary])", 0),
    ("store", "Store.add([row], vector) (one transaction)", 0),
]


def storage_breakdown(store: Store) -> list[tuple[str, int]]:
    """Bytes per table/index (SQLite dbstat), largest first; FTS5 shadow tables summed under ``entries_fts``."""
    sizes: dict[str, int] = {}
    for name, size in store.db.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
        key = "entries_fts (FTS5 shadow tables)" if name.startswith("entries_fts") else name
        sizes[key] = sizes.get(key, 0) + size
    return sorted(sizes.items(), key=lambda kv: -kv[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=500, help="turns archived one call each (default 500)")
    ap.add_argument(
        "--ingest-turns", type=int, default=2000, help="turns of the transcript given to ingest (default 2000)"
    )
    ap.add_argument("--warmup", type=int, default=20, help="turns archived on a scratch database first (default 20)")
    args, console, meter, label, all_turns, markdown = begin(ap, width=120)
    # the measured turns: the first --turns of the log; a short log is cycled under new session names
    work = [
        (t, "bench" if i < len(all_turns) else f"bench~{i // len(all_turns)}")
        for i, t in ((i, all_turns[i % len(all_turns)]) for i in range(args.turns))
    ]
    console.print(
        f"data: {label}: {len(all_turns):,} turns; measuring {len(work)} turns "
        f"(mean {np.mean([len(t.text) for t, _ in work]):,.0f} characters of text per turn)"
    )
    console.print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    embedder = MiniLMEmbedder()
    t0 = time.perf_counter()
    embedder.load()
    load_s = time.perf_counter() - t0

    with tempfile.TemporaryDirectory(prefix="lantern-bench-archive-") as tmp:
        tmp = Path(tmp)
        with Lantern(tmp / "warmup.db", embedder=embedder) as warm:  # model, tokenizer, SQLite code paths warm
            for turn in all_turns[-args.warmup :]:
                warm.archive(turn.messages, session="warmup")

        lantern = Lantern(tmp / "archive.db", embedder=embedder)
        stage_store = Store(tmp / "stages.db")
        stage_store.check_embedder(embedder.id, embedder.dim)
        cfg = lantern.config
        archive_s: list[float] = []
        base_s: list[float] = []
        st: dict[str, list[float]] = {name: [] for name, _, _ in STAGES}
        pc = time.perf_counter
        for turn, session in work:
            summary = summarize(turn, cfg.summary_message_chars, cfg.summary_max_chars)
            # 1. baseline: the embedding alone
            t0 = pc()
            embedder.embed([summary])
            base_s.append(pc() - t0)
            # 2. the real call
            t0 = pc()
            lantern.archive(turn.messages, session=session)
            archive_s.append(pc() - t0)
            # 3. its stages, timed directly
            t0 = pc()
            turns = chunk([clean_message(m) for m in turn.messages], None)
            st["parse/chunk"].append(pc() - t0)
            t0 = pc()
            rows = [lantern.writer.prepare(t, session, lantern.scope) for t in turns]
            st["summarize+tags+classify"].append(pc() - t0)
            for t in turns:  # the parts of Writer.prepare, once more each on its own
                t0 = pc()
                summarize(t, cfg.summary_message_chars, cfg.summary_max_chars)
                t1 = pc()
                tags = extract_tags(t.text)
                t2 = pc()
                hint_terms(tags, t.tool_names)
                t3 = pc()
                classify(t)
                t4 = pc()
                content_hash(session, t.text)
                t5 = pc()
            st["  summarize"].append(t1 - t0)
            st["  extract_tags"].append(t2 - t1)
            st["  hint_terms"].append(t3 - t2)
            st["  classify"].append(t4 - t3)
            st["  render text + content hash"].append(t5 - t4)
            t0 = pc()
            vectors = embedder.embed([r.summary for r in rows])
            st["embed"].append(pc() - t0)
            t0 = pc()
            stage_store.add(rows, vectors)
            st["store"].append(pc() - t0)
        archive_stats = lantern.stats()
        archive_tables = storage_breakdown(lantern.store)
        lantern.close()
        stage_store.close()

        # ---------------------------------------------------------------- batched ingest
        n_ingest = min(args.ingest_turns, len(all_turns))
        transcript = tmp / "transcript.md"
        transcript.write_text(markdown_prefix(markdown, all_turns, n_ingest), encoding="utf-8")
        with Lantern(tmp / "ingest.db", embedder=embedder) as ing:
            t0 = time.perf_counter()
            result = ing.ingest(transcript, session="ingest")
            ingest_s = time.perf_counter() - t0
            ingest_stats = ing.stats()
            ingest_tables = storage_breakdown(ing.store)
            n_parsed = result.added + result.duplicates
            # baseline: the batched embedding alone of the same summaries, same batches of 256 turns
            summaries = [r.summary for r in (ing.writer.prepare(t, "ingest", ing.scope) for t in all_turns[:n_ingest])]
        t0 = time.perf_counter()
        for start in range(0, len(summaries), 256):
            embedder.embed(summaries[start : start + 256])
        embed_batch_s = time.perf_counter() - t0

    # ---------------------------------------------------------------- report
    def row(name: str, values: list[float], ref: float | None) -> list[str]:
        a = np.asarray(values) * 1000
        share = f"{100 * a.mean() / ref:.0f}%" if ref else ""
        return [name, f"{np.percentile(a, 50):.2f}", f"{np.percentile(a, 95):.2f}", f"{a.mean():.2f}", share]

    arch_mean = float(np.mean(archive_s)) * 1000
    table = Table(title=f"Per-turn archive latency, {len(work)} real turns, one Lantern.archive call each (ms)")
    for col in ("measurement", "p50", "p95", "mean", "% of archive mean"):
        table.add_column(col, justify="left" if col == "measurement" else "right")
    table.add_row(*row("Lantern.archive (whole call)", archive_s, arch_mean), style="bold")
    for name, _, depth in STAGES:
        table.add_row(*row(name, st[name], arch_mean), style="dim" if depth else None)
    stage_sum = [sum(st[n][i] for n, _, d in STAGES if d == 0) for i in range(len(work))]
    table.add_row(*row("sum of the 4 stages", stage_sum, arch_mean))
    table.add_row(*row("baseline: MiniLM embed alone", base_s, arch_mean), style="bold")
    console.print(table)

    p50, p95 = pct(archive_s, 50) * 1000, pct(archive_s, 95) * 1000
    b50, bmean = pct(base_s, 50) * 1000, float(np.mean(base_s)) * 1000
    verdict = "meets" if p50 <= TARGET_P50_MS else "MISSES"
    console.print(
        f"ratio archive / embedding alone: p50 {p50 / b50:.2f}x, mean {arch_mean / bmean:.2f}x; "
        f"non-embedding cost (archive mean - embed mean) {arch_mean - bmean:.2f} ms per turn "
        f"({100 * (arch_mean - bmean) / arch_mean:.0f}% of the call)"
    )
    console.print(
        f"archive p50 {p50:.1f} ms, p95 {p95:.1f} ms: {verdict} the <= {TARGET_P50_MS:.0f} ms p50 target "
        f"({'meets' if p50 <= AIM_P50_MS else 'misses'} the <= {AIM_P50_MS:.0f} ms aim). "
        f"Model load {load_s * 1000:.0f} ms, excluded."
    )

    t2 = Table(title=f"Batched ingest: Lantern.ingest of the first {n_ingest:,} turns as one transcript file")
    for col in ("measurement", "seconds", "turns/s", "ms/turn"):
        t2.add_column(col, justify="left" if col == "measurement" else "right")
    t2.add_row(
        "Lantern.ingest (parse .. store, 256 turns/transaction)",
        f"{ingest_s:.2f}",
        f"{n_parsed / ingest_s:.1f}",
        f"{1000 * ingest_s / n_parsed:.2f}",
        style="bold",
    )
    t2.add_row(
        "baseline: MiniLM embed alone, same summaries, batches of 256",
        f"{embed_batch_s:.2f}",
        f"{len(summaries) / embed_batch_s:.1f}",
        f"{1000 * embed_batch_s / len(summaries):.2f}",
    )
    console.print(t2)
    console.print(
        f"ingest: {result.added:,} added, {result.duplicates:,} duplicates, {result.skipped} skipped; "
        f"ratio ingest / embedding alone {ingest_s / embed_batch_s:.2f}x"
    )

    t3 = Table(title="Storage (Lantern.stats()['database_bytes'] / entries; per table from SQLite dbstat)")
    for col in (
        "database",
        "entries",
        "text chars/entry",
        "database bytes",
        "bytes/entry",
        "largest tables (bytes/entry)",
    ):
        t3.add_column(col, justify="left" if col in ("database", "largest tables (bytes/entry)") else "right")
    for name, s, tables in (
        ("per-turn archive", archive_stats, archive_tables),
        ("ingest", ingest_stats, ingest_tables),
    ):
        n = s["entries"]
        top = ", ".join(f"{k} {v / n:,.0f}" for k, v in tables[:4])
        t3.add_row(
            name,
            f"{n:,}",
            f"{s['text_chars'] / n:,.0f}",
            f"{s['database_bytes']:,}",
            f"{s['database_bytes'] / n:,.0f}",
            top,
        )
    console.print(t3)
    console.print(meter.report())


if __name__ == "__main__":
    main()
