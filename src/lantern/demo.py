"""``lantern demo`` / ``make demo``: the context cliff on a real coding conversation, measured without labels.

Protocol (ours, after the paper's §1 definition of the cliff ΔF = F(C_t*) \\ F(C_t*+1)):

1. Archive every turn of a real aider chat log excerpt (shipped, Apache-2.0), one ``archive`` call per turn,
   timing each call.
2. Compact each session at t* = the turn 60% of the way through it: the last ``KEEP`` turns before t* stay
   verbatim, every earlier turn is replaced by one extractive line (its user message, cut to 100 characters).
3. The *needed lost facts* are specific tokens (paths, numbers, identifiers, error strings, hashes, versions,
   URLs, quoted names; found by ``extract_tags``) that the next ``LOOKAHEAD`` turns after t* use again, that appear
   in the compacted-away turns, and that are absent from the compacted context.
4. Recover with the compacted context's tail as query (last user message + the compaction summary), the kept
   turns excluded as live context, budget 6,000 characters. A fact is recovered when it is in the injected block.

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

from .api import Lantern
from .archive.chunk import chunk
from .archive.parse import parse
from .archive.tags import extract_tags
from .model import Turn

EXCERPT = Path(__file__).parent / "data" / "demo" / "aider-chat-excerpt.md"
KEEP = 4  # turns kept verbatim after the compaction (issue #2)
LOOKAHEAD = 10  # turns after t* whose reuse of a fact makes it "needed"
COMPACT_AT = 0.6  # t* as a fraction of the session's turns
SUMMARY_LINE_CHARS = 100
FACT_KINDS = {"path", "error", "identifier", "port", "url", "version", "hash", "number", "quoted", "env"}


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


def compaction_summary(turns: list[Turn]) -> str:
    """The extractive compaction: one line per compacted turn, its first user line cut to 100 characters."""
    lines = []
    for turn in turns:
        user = next((m.text for m in turn.messages if m.role == "user" and m.text.strip()), "")
        first = user.strip().splitlines()[0] if user.strip() else "(no user message)"
        lines.append(f"- turn {turn.index}: {first[:SUMMARY_LINE_CHARS]}")
    return "[Summary of the earlier conversation]\n" + "\n".join(lines)


def needed_lost_facts(compacted: list[Turn], context: str, future: list[Turn]) -> list[str]:
    """Specific tokens used again after t* that were in compacted-away turns and are absent from the context."""
    gone = "\n".join(t.text for t in compacted)
    facts: list[str] = []
    for turn in future:
        for tag in extract_tags(turn.text):
            v = tag.value
            if tag.kind in FACT_KINDS and len(v) >= 3 and v not in facts and v in gone and v not in context:
                facts.append(v)
    return facts


def compact_and_recover(lantern: Lantern, session: str, turns: list[Turn]) -> CompactionResult | None:
    if len(turns) < KEEP + 4:
        return None
    t_star = max(KEEP + 1, int(len(turns) * COMPACT_AT))
    compacted, kept, future = turns[: t_star - KEEP], turns[t_star - KEEP : t_star], turns[t_star : t_star + LOOKAHEAD]
    summary = compaction_summary(compacted)
    live_messages = [m for t in kept for m in t.messages]
    context = summary + "\n" + "\n".join(t.text for t in kept)
    last_user = next((m.text for m in reversed(live_messages) if m.role == "user" and m.text.strip()), "")
    facts = needed_lost_facts(compacted, context, future)
    start = time.perf_counter()
    rec = lantern.recover(last_user + "\n" + summary, session=session, exclude=live_messages)
    ms = (time.perf_counter() - start) * 1000
    recovered = [f for f in facts if f in rec.text]
    return CompactionResult(session, len(turns), t_star, facts, recovered, rec.text, rec.chars, ms, len(context))


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
        console.print(f"[bold]Lantern demo[/]: {sum(map(len, by_session.values()))} turns in {len(by_session)} real "
                      f"aider sessions ({EXCERPT.stat().st_size:,} bytes, Apache-2.0), database {path}{kept}")
        lantern = Lantern(path)
        start = time.perf_counter()
        lantern.embedder.embed(["warm up"])
        load_ms = (time.perf_counter() - start) * 1000
        archive_ms: list[float] = []
        for session, turns in by_session.items():
            for turn in turns:
                t0 = time.perf_counter()
                lantern.archive(turn.messages, session=session)
                archive_ms.append((time.perf_counter() - t0) * 1000)
        results = [r for s, turns in by_session.items() if (r := compact_and_recover(lantern, s, turns))]
        stats = lantern.stats()
        lantern.close()

    if show_block and results:  # first, so that the figures stay on screen at the end
        first = max(results, key=lambda r: len(r.lost))
        console.print(Panel(escape(first.block) or "(empty)", title=f"injected block for {first.session} ({first.chars:,} characters)"))
    table = Table(title="Compaction at turn t* of each session: last 4 turns kept, earlier turns cut to one line each; "
                        "recovery budget 6,000 characters")
    for col in ("session", "turns", "t*", "context chars", "facts lost", "recovered", "block chars", "recover ms"):
        table.add_column(col, justify="right" if col != "session" else "left", no_wrap=col == "session")
    for r in results:
        table.add_row(r.session, str(r.turns), str(r.t_star), f"{r.context_chars:,}", str(len(r.lost)),
                      f"{len(r.recovered)} ({100 * len(r.recovered) / max(len(r.lost), 1):.0f}%)", f"{r.chars:,}", f"{r.recover_ms:.0f}")
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
        f"over {len(archive_ms)} calls (model load {load_ms:.0f} ms, excluded); "
        f"{stats['bytes_per_entry']:,} bytes stored per turn. No network, no LLM calls."
    )
    return results
