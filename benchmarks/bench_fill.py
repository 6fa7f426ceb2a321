"""What English e5 costs, and where (issue #22): ``Lantern.archive`` per turn, the deferred fill's rate, recovery,
and bytes per entry, with English e5 off (the default, the baseline) and on (``Config.e5_english_weight`` 0.25),
in the same process on the same real aider turns.

    .venv/bin/python benchmarks/bench_fill.py [--turns 300] [--bulk 2000] [--queries 40] [--excerpt]

Per turn, interleaved (off, on, off, on, ...) so load hits both alike: one ``archive`` call on each database (the
hook / proxy pattern). Then the rest of the turns, up to --bulk, in one ``archive`` call each database (no fill on
the way), then ``fill_vectors()`` on the "on" database timed whole: entries per second. Then --queries user messages
as queries, recovered alternately on both (after 2 warm-ups each). Bytes: ``stats(all_users=True)``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import begin, pct, user_text  # noqa: E402
from lantern.api import Lantern  # noqa: E402
from lantern.config import Config  # noqa: E402

ON_WEIGHT = 0.25


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=300, help="turns archived one call each, per database")
    ap.add_argument("--bulk", type=int, default=2000, help="entries per database in all")
    ap.add_argument("--queries", type=int, default=40)
    args, console, meter, label, turns, _ = begin(ap, 120)
    console.print(f"data: {label}, {len(turns)} turns (cycled under new session names)")
    need = max(args.turns, args.bulk)
    cycled = [(f"s{i // len(turns)}", turns[i % len(turns)]) for i in range(need)]
    tmp = Path(tempfile.mkdtemp(prefix="bench_fill_"))
    configs = {"off": Config(fill_on_recover=0), "on": Config(e5_english_weight=ON_WEIGHT, fill_on_recover=0)}
    handles = {name: Lantern(tmp / f"{name}.db", config=config) for name, config in configs.items()}
    archive_ms: dict[str, list[float]] = {name: [] for name in handles}
    for session, turn in cycled[: args.turns]:
        for name, lt in handles.items():
            t0 = time.perf_counter()
            lt.archive(turn.messages, session=session)
            archive_ms[name].append((time.perf_counter() - t0) * 1000)
    rest = cycled[args.turns : args.bulk]
    for lt in handles.values():
        for session, turn in rest:
            lt.archive(turn.messages, session=session)
    on = handles["on"]
    pending = on.stats(all_users=True)["vectors_pending"]
    t0 = time.perf_counter()
    filled = on.fill_vectors()
    fill_s = time.perf_counter() - t0
    queries = [q for q in (user_text(t)[:300] for _, t in cycled) if q.strip()][: args.queries]
    recover_ms: dict[str, list[float]] = {name: [] for name in handles}
    for lt in handles.values():
        for q in queries[:2]:
            lt.recover(q)
    for q in queries:
        for name, lt in handles.items():
            t0 = time.perf_counter()
            lt.recover(q)
            recover_ms[name].append((time.perf_counter() - t0) * 1000)
    stats = {name: lt.stats(all_users=True) for name, lt in handles.items()}
    for lt in handles.values():
        lt.close()

    table = Table(title=f"English e5 off (default) vs on (weight {ON_WEIGHT}), {args.bulk} entries")
    for col in ("", "archive p50 ms", "archive p95 ms", "recover p50 ms", "recover p95 ms", "bytes/turn", "vectors"):
        table.add_column(col, justify="left" if not col else "right")
    for name in handles:
        s = stats[name]
        table.add_row(
            name,
            f"{pct(archive_ms[name], 50):.1f}",
            f"{pct(archive_ms[name], 95):.1f}",
            f"{pct(recover_ms[name], 50):.1f}",
            f"{pct(recover_ms[name], 95):.1f}",
            f"{s['bytes_per_turn']:,}",
            f"{s['bytes_per_turn_by_table'].get('embeddings', 0):,}",
        )
    console.print(table)
    ratio = pct(archive_ms["on"], 50) / pct(archive_ms["off"], 50)
    console.print(f"archive p50 on/off: {ratio:.2f}x (same process, interleaved; {args.turns} calls each)")
    console.print(f"fill: {filled} of {pending} pending e5 blocks in {fill_s:.1f} s = {filled / fill_s:.1f} entries/s")
    console.print(f"recover p50 on/off: {pct(recover_ms['on'], 50) / pct(recover_ms['off'], 50):.2f}x")
    console.print(meter.report())


if __name__ == "__main__":
    main()
