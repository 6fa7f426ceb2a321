"""Retrieval-trigger benchmark (docs/architecture.md §5.3): precision / recall / F1 of ``should_recover`` on a labelled
set built from the shared datasets, per source and per dataset, English and Chinese apart, and its cost per turn.

    .venv/bin/python benchmarks/bench_triggers.py [--split report|tune|all] [--examples N] [--data DIR]

Labelled set (``lantern.memory.triggers_eval``): positives are questions about earlier conversation (LoCoMo QA,
MemDaily questions, MemoryBank probing questions en/cn); negatives are ordinary turns (LoCoMo utterances, MemDaily
messages, MemoryBank user queries en/cn, aider user messages). Draft path: MemoryBank assistant replies (ordinary,
all negative) give its false-fire rate. Halves by a fixed hash of the text: the cue list was tuned on ``tune``;
report on ``report``. ``--examples N`` prints up to N false positives per cue and misses per source (use it on
the tune half). Data is read from ../shared/data (read-only).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pct, print_machine  # noqa: E402
from lantern.memory.triggers_eval import SHARED, SOURCES, Score, available, evaluate, load_items  # noqa: E402


def f(x: float) -> str:
    return "—" if x != x or math.isinf(x) else f"{x:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", choices=["report", "tune", "all"], default="report")
    ap.add_argument("--examples", type=int, default=0)
    ap.add_argument("--data", type=Path, default=SHARED)
    args = ap.parse_args()
    console = Console(width=130)
    if not available(args.data):
        console.print(f"error: shared data not found under {args.data}")
        raise SystemExit(1)
    print_machine(console)
    items = load_items(args.data)
    ev = evaluate(items, args.split, timing=True, examples=args.examples)
    console.print(
        f"labelled set: {len(items):,} texts; split {args.split!r}: {sum(s.n for s in ev.by_source.values()):,}"
    )

    t = Table(
        title=f"Trigger per source ({args.split} half): fires on a positive = recall, on a negative = false-fire rate"
    )
    for c in ("source", "dataset", "lang", "path", "label", "n", "fired", "recall", "false-fire rate"):
        t.add_column(c, justify="right" if c in ("n", "fired", "recall", "false-fire rate") else "left")
    for src, (ds, lang, label, kind) in SOURCES.items():
        s = ev.by_source.get(src)
        if not s:
            continue
        t.add_row(
            src,
            ds,
            lang,
            kind,
            "positive" if label else "negative",
            f"{s.n:,}",
            f"{s.tp + s.fp:,}",
            f(s.recall) if label else "",
            "" if label else f(s.fp / s.n),
        )
    console.print(t)

    t = Table(title=f"Question path P / R / F1 ({args.split} half; positives and negatives as they occur in the data)")
    for c in ("scope", "positives", "negatives", "TP", "FP", "precision", "recall", "F1"):
        t.add_column(c, justify="left" if c == "scope" else "right")

    def row(name: str, s: Score) -> None:
        t.add_row(
            name, f"{s.tp + s.fn:,}", f"{s.fp + s.tn:,}", f"{s.tp:,}", f"{s.fp:,}", f(s.precision), f(s.recall), f(s.f1)
        )

    for ds in sorted(ev.by_dataset):
        row(ds, ev.by_dataset[ds])
    for lang in ("en", "zh"):
        if lang in ev.by_lang:
            row(f"all {lang.upper()}", ev.by_lang[lang])
    row("all", ev.overall)
    console.print(t)

    t = Table(title=f"Per cue ({args.split} half): texts it fires on")
    for c in ("cue", "on positives", "on negatives (questions + drafts)", "precision"):
        t.add_column(c, justify="left" if c == "cue" else "right")
    for cue, s in sorted(ev.by_cue.items(), key=lambda kv: -(kv[1].tp + kv[1].fp)):
        t.add_row(cue, f"{s.tp:,}", f"{s.fp:,}", f(s.precision))
    console.print(t)

    lat = ev.latency_us
    console.print(
        f"latency per turn (should_recover, fastest of 3 calls per text, {len(lat):,} calls): p50 {pct(lat, 50):.1f} "
        "µs, "
        f"p95 {pct(lat, 95):.1f} µs, p99 {pct(lat, 99):.1f} µs, max {max(lat):.0f} µs"
    )
    for key, texts in sorted(ev.examples.items()):
        console.print(f"[bold]{key}[/bold]", highlight=False)
        for x in texts:
            console.print("   ", x, markup=False, highlight=False)


if __name__ == "__main__":
    main()
