"""``lantern demo`` / ``make demo``: the context cliff on a real coding conversation, measured without labels.

Protocol: the look-ahead protocol of ``lantern.eval.lookahead`` (shared with the ``aider`` eval dataset):

1. Archive every turn of a real aider chat log excerpt (shipped, Apache-2.0), one ``archive`` call per turn,
   timing each call.
2. Compact each session at t* (60% of its turns): the last ``KEEP`` turns before t* stay verbatim, every earlier
   turn is replaced by one extractive line (``compaction_summary``).
3. The *needed lost facts* (``needed_lost_facts``): specific tokens that the next ``LOOKAHEAD`` turns after t* use
   again, that appear in the compacted-away turns, and that are absent from the compacted context.
4. Recover with the compacted context's tail as query (``recovery_query``), the kept turns excluded as live
   context and the look-ahead turns excluded too (they lie in the future of t*), budget 6,000 characters. A fact
   is recovered when it is in the injected block.

No network, no LLM: every figure printed is measured on this run.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from lantern.api import Lantern
from lantern.archive.chunk import chunk
from lantern.archive.parse import parse
from lantern.eval.lookahead import KEEP, LOOKAHEAD, compaction_summary, needed_lost_facts, recovery_query, t_star
from lantern.model import Turn

EXCERPT = Path(__file__).parent / "data" / "demo" / "aider-chat-excerpt.md"


@dataclass
class CompactionResult:
    session: str
    turns: int
    t_star: int
    lost: list[str]
    recovered: list[str]
    block: str
    chars: int
    recover_ms: float
    context_chars: int = 0
    extra: dict = field(default_factory=dict)


def compact_and_recover(
    lantern: Lantern, session: str, turns: list[Turn], entry_ids: list[int] | None = None
) -> CompactionResult | None:
    """Compact one session at t* and recover (the module docstring's steps 2-4). ``entry_ids``: the archived entry
    of each turn; when given, the compaction is recorded as an event (source ``demo``, reason ``gist``: the
    compacted-away turns lost, what the block injected), as the proxy and the hooks record theirs."""
    t = t_star(len(turns))
    if t is None:
        return None
    compacted, kept, future = turns[: t - KEEP], turns[t - KEEP : t], turns[t : t + LOOKAHEAD]
    summary = compaction_summary(compacted)
    context = summary + "\n" + "\n".join(x.text for x in kept)
    facts = needed_lost_facts(compacted, context, future)
    not_yet = [m for x in kept + turns[t:] for m in x.messages]  # live context, and the turns after t*
    start = time.perf_counter()
    rec = lantern.recover(
        recovery_query(kept, summary), session=session, exclude=not_yet, min_score=0.0
    )  # a compaction
    ms = (time.perf_counter() - start) * 1000
    recovered = [f for f in facts if f in rec.text]
    if entry_ids is not None:
        lantern.record_compaction(
            rec, session=session, reason="gist", lost=[i for i in entry_ids[: t - KEEP] if i is not None], source="demo"
        )
    return CompactionResult(session, len(turns), t, facts, recovered, rec.text, rec.chars, ms, len(context))


def _pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def run(db: Path | None = None, *, show_block: bool = True, console: Console | None = None) -> list[CompactionResult]:
    """Run the demo; returns the per-session results it printed. ``db`` defaults to a fresh temporary file."""
    console = console or Console()
    parsed = parse(EXCERPT, "aider")
    by_session: dict[str, list[Turn]] = {}
    for turn in chunk(parsed.messages, None):
        by_session.setdefault(turn.session or "default", []).append(turn)
    for turns in by_session.values():  # re-number within each session
        for i, t in enumerate(turns):
            t.index = i

    with tempfile.TemporaryDirectory(prefix="lantern-demo-") as tmp:
        path = db or Path(tmp) / "demo.db"
        kept = "" if db else " (temporary; --demo-db PATH keeps it)"
        console.print(
            f"[bold]Lantern demo[/]: {sum(map(len, by_session.values()))} turns in {len(by_session)} real "
            f"aider sessions ({EXCERPT.stat().st_size:,} bytes, Apache-2.0), database {path}{kept}"
        )
        lantern = Lantern(path)
        start = time.perf_counter()
        lantern.embedder.embed(["warm up"])
        load_ms = (time.perf_counter() - start) * 1000
        archive_ms: list[float] = []
        ids: dict[str, list[int]] = {}
        for session, turns in by_session.items():
            for turn in turns:
                t0 = time.perf_counter()
                archived = lantern.archive(turn.messages, session=session)
                archive_ms.append((time.perf_counter() - t0) * 1000)
                ids.setdefault(session, []).append(archived.entry_ids[0] if archived.entry_ids else None)
        results = [r for s, turns in by_session.items() if (r := compact_and_recover(lantern, s, turns, ids.get(s)))]
        stats = lantern.stats(all_users=True)
        lantern.close()

    if show_block and results:  # first, so that the figures stay on screen at the end
        first = max(results, key=lambda r: len(r.lost))
        console.print(
            Panel(
                escape(first.block) or "(empty)",
                title=f"injected block for {first.session} ({first.chars:,} characters)",
            )
        )
    table = Table(
        title="Compaction at turn t* of each session: last 4 turns kept, earlier turns cut to one line each; "
        "recovery budget 6,000 characters"
    )
    for col in ("session", "turns", "t*", "context chars", "facts lost", "recovered", "block chars", "recover ms"):
        table.add_column(col, justify="right" if col != "session" else "left", no_wrap=col == "session")
    for r in results:
        table.add_row(
            r.session,
            str(r.turns),
            str(r.t_star),
            f"{r.context_chars:,}",
            str(len(r.lost)),
            f"{len(r.recovered)} ({100 * len(r.recovered) / max(len(r.lost), 1):.0f}%)",
            f"{r.chars:,}",
            f"{r.recover_ms:.0f}",
        )
    lost = sum(len(r.lost) for r in results)
    got = sum(len(r.recovered) for r in results)
    table.add_row("[bold]all", "", "", "", f"[bold]{lost}", f"[bold]{got} ({100 * got / max(lost, 1):.0f}%)", "", "")
    console.print(table)
    for r in results:
        missing = [f for f in r.lost if f not in r.recovered]
        console.print(f"[green]recovered[/] in {r.session}: {escape(', '.join(r.recovered)) or '—'}")
        console.print(f"[red]not recovered[/] in {r.session}: {escape(', '.join(missing)) or '—'}")
    console.print(
        f"archive latency per turn: p50 {_pct(archive_ms, 50):.1f} ms, p95 {_pct(archive_ms, 95):.1f} ms "
        f"over {len(archive_ms)} calls (model load {load_ms:.0f} ms, excluded). No network, no LLM calls."
    )
    console.print(
        f"stored: {stats['bytes_per_turn']:,} bytes per turn, the whole file (text, indexes, free pages) over its "
        f"{stats['entries']} archived turns"
    )
    return results
