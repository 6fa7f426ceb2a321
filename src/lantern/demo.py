"""``lantern demo`` / ``make demo``: the context cliff on a real coding conversation, measured without labels.

Protocol: the look-ahead protocol of ``lantern.eval.lookahead`` (shared with the ``aider`` eval dataset):

1. Archive the turns of a real aider chat log excerpt (shipped, Apache-2.0) as they happen, one ``archive`` call
   per turn, timing each call: a session's turns up to its compaction first, the turns after it once it is
   recovered (they lie in its future).
2. Compact each session at t* (60% of its turns): the last ``KEEP`` turns before t* stay verbatim, every earlier
   turn is replaced by one extractive line (``compaction_summary``).
3. The *needed lost facts* (``needed_lost_facts``): specific tokens that the next ``LOOKAHEAD`` turns after t* use
   again, that appear in the compacted-away turns, and that are absent from the compacted context.
4. Recover what the compaction lost, as the Claude Code and Codex hooks do after theirs
   (``Lantern.recover_compaction``): the summary and the kept turns are what the model still has, everything else
   archived in the session is the loss; budget ``Config.budget`` (6,000 characters). A fact is recovered when it
   is in the injected block.

What it prints: the story first, per session: where the context was compacted, what the compaction lost (the
needed lost facts), which came back and from which turn, one line per fact (the injected block itself behind
``--show-block``); then the figures: the table per session, archive latency and bytes per turn.

No network, no LLM: every figure printed is measured on this run.
"""

from __future__ import annotations

import re
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from lantern import lazy_re
from lantern.api import Lantern
from lantern.archive.chunk import chunk
from lantern.archive.parse import parse
from lantern.errors import LanternError
from lantern.eval.lookahead import KEEP, LOOKAHEAD, compaction_summary, needed_lost_facts, t_star
from lantern.model import Turn
from lantern.text.terminal import console as terminal_console

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
    cut_turns: int = 0  # turns [0, cut_turns) were compacted to one line each
    lost_from: dict[str, int] = field(default_factory=dict)  # fact -> the last compacted turn that held it (archived)
    back_from: dict[str, int] = field(default_factory=dict)  # recovered fact -> the block's turn it came back in


def compact_and_recover(
    lantern: Lantern, session: str, turns: list[Turn], entry_ids: list[int] | None = None
) -> CompactionResult | None:
    """Compact one session at t* and recover (the module docstring's steps 2-4), its turns up to t* archived and
    none after. ``entry_ids``: the archived entry of each turn; when given, the compaction is recorded as an event
    (source ``demo``, reason ``gist``: the compacted-away turns lost, what the block injected), as the proxy and the
    hooks record theirs."""
    t = t_star(len(turns))
    if t is None:
        return None
    compacted, kept, future = turns[: t - KEEP], turns[t - KEEP : t], turns[t : t + LOOKAHEAD]
    summary = compaction_summary(compacted)
    context = summary + "\n" + "\n".join(x.text for x in kept)
    facts = needed_lost_facts(compacted, context, future)
    start = time.perf_counter()
    rec = lantern.recover_compaction(summary, live=[m for x in kept for m in x.messages], session=session)
    ms = (time.perf_counter() - start) * 1000
    recovered = [f for f in facts if f in rec.text]
    archived_turn = {x.index: x.index for x in compacted}  # the block numbers turns as the archive does
    if entry_ids is not None:  # a repeated turn (another /clear) is stored once, so later ones shift
        stored = lantern.store.entries(
            [i for i in entry_ids[: len(compacted)] if i is not None], text=False, tags=False
        )
        archived_turn |= {x.index: stored[i].turn for x, i in zip(compacted, entry_ids) if i in stored}
    lost_from = {f: max((archived_turn[x.index] for x in compacted if f in x.text), default=-1) for f in facts}
    back_from = {f: turn for f in recovered if (turn := _turn_in_block(rec.text, f)) is not None}
    if entry_ids is not None:
        lantern.record_compaction(
            rec,
            session=session,
            reason="gist",
            lost=[i for i in entry_ids[: t - KEEP] if i is not None],
            source="demo",
            latency_ms=ms,
        )
    return CompactionResult(
        session,
        len(turns),
        t,
        facts,
        recovered,
        rec.text,
        rec.chars,
        ms,
        len(context),
        cut_turns=len(compacted),
        lost_from=lost_from,
        back_from=back_from,
    )


# a compaction block's line head (recover/loss_pack.py ``head``): "- turn N: " or "- turn N · where: "
_TURN_HEADER = lazy_re.compile(r"^- turn (\d+)[:· ]", re.MULTILINE)


def _archive(lantern: Lantern, session: str, turns: list[Turn], archive_ms: list[float]) -> list[int | None]:
    """Archive each turn with one ``archive`` call, its wall time (ms) appended to ``archive_ms``; the entry id of
    each (None for a turn stored already: a repeated ``/clear``)."""
    ids: list[int | None] = []
    for turn in turns:
        t0 = time.perf_counter()
        archived = lantern.archive(turn.messages, session=session)
        archive_ms.append((time.perf_counter() - t0) * 1000)
        ids.append(archived.entry_ids[0] if archived.entry_ids else None)
    return ids


def _turn_in_block(block: str, fact: str) -> int | None:
    """The turn of the block's line (its ``- turn N`` head) on which ``fact`` first appears; None when no line
    head comes before it."""
    at = block.find(fact)
    headers = [m for m in _TURN_HEADER.finditer(block, 0, at + 1) if m.start() <= at] if at >= 0 else []
    return int(headers[-1].group(1)) if headers else None


def _pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def run(db: Path | None = None, *, show_block: bool = False, console: Console | None = None) -> list[CompactionResult]:
    """Run the demo; returns the per-session results it printed. ``db`` defaults to a fresh temporary file.
    Raises ``LanternError`` when ``db`` is an existing non-empty file: the demo builds a new store, and archiving
    its turns into a user's store would mix them into real memory (and a second run measures only duplicates)."""
    if db is not None and Path(db).is_file() and Path(db).stat().st_size > 0:
        raise LanternError(
            f"{db} already exists: the demo builds a new database (give a path that does not exist, or delete it)"
        )
    console = console or terminal_console()
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
        results: list[CompactionResult] = []
        for session, turns in by_session.items():
            t = t_star(len(turns)) or len(turns)
            ids = _archive(lantern, session, turns[:t], archive_ms)
            if (r := compact_and_recover(lantern, session, turns, ids)) is not None:
                results.append(r)
            _archive(lantern, session, turns[t:], archive_ms)  # the turns after the compaction, as they come
        stats = lantern.stats(all_users=True)
        lantern.close()

    for r in results:  # the story first: one paragraph per session, one line per fact
        _story(console, r, show_block)
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
    console.print(
        f"archive latency per turn: p50 {_pct(archive_ms, 50):.1f} ms, p95 {_pct(archive_ms, 95):.1f} ms "
        f"over {len(archive_ms)} calls (model load {load_ms:.0f} ms, excluded). No network, no LLM calls."
    )
    repeated = len(archive_ms) - stats["entries"]
    console.print(
        f"stored: {stats['entries']} turns from the {len(archive_ms)} archive calls"
        + (
            f" ({repeated} calls repeated a turn already archived in the same session, such as another `/clear`, and "
            "were counted as duplicates, not stored twice)"
            if repeated > 0
            else ""
        )
        + f"; {stats['bytes_per_turn']:,} bytes per turn, the whole file (text, indexes, free pages)"
    )
    if not show_block:
        console.print("lantern demo --show-block prints each injected block.")
    return results


def _story(console: Console, r: CompactionResult, show_block: bool) -> None:
    """What happened to one session, in words: the compaction, what it lost, what came back and from where."""
    kept = f"turns {r.cut_turns}-{r.t_star - 1} stayed verbatim" if r.t_star > r.cut_turns else "none stayed"
    console.print(
        f"\n[bold]{escape(r.session)}[/] · {r.turns} turns. At turn {r.t_star} the context was compacted: turns "
        f"0-{r.cut_turns - 1} became one summary line each, {kept}; {r.context_chars:,} characters left."
    )
    if not r.lost:
        console.print("  The next turns use no specific that only the compacted turns held: nothing to recover.")
        return
    console.print(
        f"  The next {LOOKAHEAD} turns use {len(r.lost)} specifics that only the compacted turns held. "
        f"Lantern's block ({r.chars:,} characters, {r.recover_ms:.0f} ms) brought back {len(r.recovered)}:"
    )
    width = min(max(len(f) for f in r.lost), 48)
    for fact in sorted(r.lost, key=lambda f: (f not in r.recovered, r.lost_from.get(f, -1))):
        lost = f"lost with turn {r.lost_from[fact]}" if r.lost_from.get(fact, -1) >= 0 else "lost"
        if fact in r.recovered:
            where = f"back in the block's turn {r.back_from[fact]}" if fact in r.back_from else "back in the block"
            console.print(f"  [green]✓[/] {escape(fact):<{width}}  {lost}, {where}", highlight=False)
        else:
            console.print(f"  [red]✗[/] {escape(fact):<{width}}  {lost}, not in the block", highlight=False)
    if show_block:
        console.print(Panel(escape(r.block) or "(empty)", title=f"injected block for {r.session} ({r.chars:,} chars)"))
