"""Compaction recovery benchmark (docs/architecture.md §3.8): ``Lantern.recover_compaction`` on a session of ~300
turns, against the question recovery ``Lantern.recover`` on the same store, in the same process, interleaved.

    .venv/bin/python benchmarks/bench_recover_compaction.py [--turns 300] [--runs 30] [--budget 4000]

Data: a generated coding session (user asks, tool calls with paths, commands and flags, tool outputs of 200–3,000
characters, assistant replies; ~1,000 characters a turn); and, when ../shared/data/realcompact is present, its
real sessions whose compaction has 250–350 turns before it (read only).
Target: recover_compaction p50 ≤ 100 ms on a session of 300 turns (issue 34).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CpuMeter, pct, print_machine  # noqa: E402
from lantern.api import Lantern  # noqa: E402

TARGET_MS = 100.0
REAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "realcompact"
WORDS = "fix the retry loop in the handler and keep the old flag working while tests pass".split()


def generated(turns: int, seed: int = 0) -> tuple[list[dict], str]:
    """A coding session of ``turns`` messages as OpenAI dicts, and a summary naming a tenth of its specifics."""
    rng = random.Random(seed)
    msgs: list[dict] = []
    named: list[str] = []
    i = 0
    while len(msgs) < turns:
        path = f"pkg/{rng.choice(['api', 'store', 'cli', 'sync'])}/{rng.choice(WORDS)}_{i}.go"
        ident = f"{rng.choice(WORDS).title()}Handler{i}"
        named += [path, ident]
        msgs.append({"role": "user", "content": f"Now {' '.join(rng.sample(WORDS, 6))} in {path} ({ident})."})
        call = {"command": f"go test ./pkg/... -run {ident} --count={i % 5 + 1}"}
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": f"c{i}", "type": "function", "function": {"name": "Bash", "arguments": json.dumps(call)}}
                ],
            }
        )
        out = "\n".join(f"ok {path}:{k} {ident}.{rng.choice(WORDS)}() {k * 3}ms" for k in range(rng.randint(5, 60)))
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": out})
        msgs.append({"role": "assistant", "content": f"Fixed {ident} in {path}; {' '.join(rng.sample(WORDS, 8))}."})
        i += 1
    summary = "This session is being continued. The user fixed: " + ", ".join(named[:: max(1, len(named) // 20)])
    return msgs[:turns], summary


def real_events(lo: int = 250, hi: int = 350, limit: int = 5):
    """(messages, summary) of real compactions with ``lo``..``hi`` turns before them."""
    if not REAL.is_dir():
        return []
    from lantern.eval.realcompact import load_events, messages

    out = []
    for events in load_events(REAL)[0]:
        for ev in events:
            if lo <= len(ev.before) <= hi:
                out.append((messages(ev.before), ev.summary))
    return out[:limit]


def measure(lt: Lantern, session: str, msgs: list[dict], summary: str, runs: int, budget: int):
    live = msgs[-4:]
    query = next(m["content"] for m in reversed(msgs) if m["role"] == "user") + "\n" + summary[:2000]
    comp, rec = [], []
    lt.recover_compaction(summary, live=live, session=session, budget=budget)  # warm: the first read of the file
    lt.explain(query, session=session, budget=budget, exclude=live, min_score=0)
    for k in range(runs):
        for first in (0, 1) if k % 2 == 0 else (1, 0):
            start = time.perf_counter()
            if first == 0:
                lt.recover_compaction(summary, live=live, session=session, budget=budget)
                comp.append(time.perf_counter() - start)
            else:
                lt.explain(query, session=session, budget=budget, exclude=live, min_score=0)
                rec.append(time.perf_counter() - start)
    return np.array(comp) * 1000, np.array(rec) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=300)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--budget", type=int, default=4000)
    args = ap.parse_args()
    from rich.console import Console

    console = Console(width=120)
    print_machine(console)
    meter = CpuMeter()
    table = Table(title=f"recover_compaction vs recover, budget {args.budget:,} characters")
    for col in ("session", "turns", "chars", "compaction p50 ms", "p95 ms", "recover p50 ms", "ratio", "target"):
        table.add_column(col, justify="left" if col == "session" else "right")
    cases = [("generated", *generated(args.turns))] + [(f"real {k}", m, s) for k, (m, s) in enumerate(real_events())]
    with tempfile.TemporaryDirectory() as tmp, Lantern(Path(tmp) / "b.db") as lt:
        for name, msgs, summary in cases:
            lt.archive(msgs, session=name)
            comp, rec = measure(lt, name, msgs, summary, args.runs, args.budget)
            chars = sum(len(m.get("content") or "") for m in msgs)
            p50 = pct(comp, 50)
            table.add_row(
                name,
                f"{len(msgs)}",
                f"{chars:,}",
                f"{p50:.1f}",
                f"{pct(comp, 95):.1f}",
                f"{pct(rec, 50):.1f}",
                f"{p50 / pct(rec, 50):.2f}",
                "met" if p50 <= TARGET_MS else "NOT met",
            )
    console.print(table)
    console.print(meter.report())


if __name__ == "__main__":
    main()
