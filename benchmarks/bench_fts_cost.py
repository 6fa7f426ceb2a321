"""What one full-text term costs: the fit behind ``signals.FTS_TOKEN_SCAN`` (recover/signals.py ``read_costs``).

    .venv/bin/python benchmarks/bench_fts_cost.py --db /tmp/ann-bench/ann-100000.db [--queries 50] [--repeat 3]

Store: a database filled by ``bench_ann.py --db FOLDER`` (synthetic copies of real aider turns). Terms: every term
with a word character of the first --queries real user messages (``query_terms``, as the read path makes them).
Each term alone is run as the read path's query (``bm25()`` ordered, LIMIT 100), best of --repeat; its matched rows
and, for a term the tokenizer splits (a phrase), the rows of each of its tokens are counted in the index. A least-
squares fit of time = a · matched rows + b · phrase-token rows + c gives the cost of a token row walked for a phrase
in matched rows, b / a: the value ``FTS_TOKEN_SCAN`` rounds.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import begin, pool_and_queries  # noqa: E402
from lantern.recover import signals  # noqa: E402
from lantern.text.tags import query_terms  # noqa: E402

QUERY = "SELECT rowid, bm25(entries_fts) AS s FROM entries_fts WHERE entries_fts MATCH ? ORDER BY s LIMIT 100"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, help="a store filled by bench_ann.py --db (e.g. ann-100000.db)")
    ap.add_argument("--queries", type=int, default=50, help="real user messages whose terms are timed (default 50)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per term, the best kept (default 3)")
    args, console, meter, label, turns, _ = begin(ap, width=120)
    _, queries = pool_and_queries(turns, 2000, args.queries)
    db = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    entries = db.execute("SELECT count(*) FROM entries").fetchone()[0]

    def rows(match: str) -> int:
        return db.execute("SELECT count(*) FROM entries_fts WHERE entries_fts MATCH ?", (match,)).fetchone()[0]

    terms = sorted({t for q in queries for t in query_terms(q) if signals.has_word(t)})
    x, y = [], []
    for term in terms:
        tokens = signals.fts_tokens(term)
        scan = sum(rows(signals.quote(t)) for t in tokens) if len(tokens) > 1 else 0
        best = min(_timed(db, signals.quote(term)) for _ in range(args.repeat))
        x.append((rows(signals.quote(term)), scan, 1.0))
        y.append(best * 1000)
    a = np.asarray(x, np.float64)
    ms = np.asarray(y)
    coef, *_ = np.linalg.lstsq(a, ms, rcond=None)
    r2 = 1 - ((ms - a @ coef) ** 2).sum() / ((ms - ms.mean()) ** 2).sum()
    phrases = a[:, 1] > 0
    console.print(f"data: {label}; store {args.db}: {entries:,} entries; {len(terms)} terms, {phrases.sum()} phrases")
    table = Table(title="One full-text term's bm25 query: time = a · matched rows + b · phrase-token rows + c")
    for col in ("a, µs per matched row", "b, µs per phrase-token row", "c, ms", "b / a", "R²", "FTS_TOKEN_SCAN"):
        table.add_column(col, justify="right")
    table.add_row(
        f"{coef[0] * 1000:.3f}",
        f"{coef[1] * 1000:.4f}",
        f"{coef[2]:.2f}",
        f"{coef[1] / coef[0]:.4f}",
        f"{r2:.3f}",
        f"{signals.FTS_TOKEN_SCAN}",
    )
    console.print(table)
    top = np.argsort(-ms)[:5]
    console.print("slowest terms: " + "; ".join(f"{terms[i]!r} {ms[i]:.1f} ms" for i in top))
    console.print(meter.report())


def _timed(db: sqlite3.Connection, match: str) -> float:
    t0 = time.perf_counter()
    db.execute(QUERY, (match,)).fetchall()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
