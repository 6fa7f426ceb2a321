"""How the commands print: archived text as visible escapes on a terminal, JSON lines, rich tables fitted to the
console, and the lines that say what a command left undone."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import typer

from lantern.text.terminal import TERMINAL_UNSAFE, shown


def on_terminal():
    """How archived text is printed to stdout: on a terminal, ``shown`` (control characters, bidi controls and
    U+2028 / U+2029 as visible escapes, newlines and tabs kept), so hostile text cannot drive or reorder the
    terminal; to a pipe (an LLM, a file), unchanged."""
    return (lambda text: shown(text, keep_lines=True)) if sys.stdout.isatty() else (lambda text: text)


PIPED_WIDTH = 160  # the width of the tables printed to a pipe or a file, unless $COLUMNS says otherwise


def stdout_console():
    """A rich console on stdout: on a terminal, the terminal's width; to a pipe or a file, ``$COLUMNS`` when set,
    else ``PIPED_WIDTH`` (rich would take 80 columns, or the width of whatever terminal stdin or stderr is on)."""
    from rich.console import Console

    if sys.stdout.isatty():
        return Console()
    columns = os.environ.get("COLUMNS", "")
    return Console(width=int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_WIDTH)


def print_json(value) -> None:
    """Print ``value`` as one line of JSON (``ensure_ascii=False``). On a terminal, the characters ``shown`` escapes
    that JSON leaves raw (C1 controls, bidi controls, U+2028 / U+2029) are written as ``\\uXXXX`` escapes: the same
    JSON value; to a pipe, the bytes are unchanged."""
    text = json.dumps(value, ensure_ascii=False)
    if sys.stdout.isatty():
        text = TERMINAL_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    print(text)


@contextlib.contextmanager
def warnings_on_stderr():
    """While the block runs, warnings logged on the ``lantern`` logger (e.g. a recovery whose reinforcement write
    was skipped: api.py ``recover``) are printed as one ``warning: …`` line each on stderr."""
    import logging

    class Line(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            typer.secho(f"warning: {record.getMessage()}", err=True, fg=typer.colors.YELLOW)

    logger, handler = logging.getLogger("lantern"), Line(logging.WARNING)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


SIGNAL_COLUMNS = {
    "semantic": "sem",
    "fulltext": "fts",
    "keyword": "kw",
    "importance": "imp",
    "prf": "prf",
    "time": "time",
    "neighbour": "nb",
    "local": "loc",
    "speaker": "spk",
    "semantic_e5": "e5",
}  # the search tables' rank column per signal
WRAPPED_FLOOR = {"session": 12, "verdict": 12, "category": 10, "summary": 20}  # the narrowest a wrapping column gets
EXPLAIN_DROPPED_FIRST = ("σ", "c", "category", "MMR")  # left out, in this order, when a console is too narrow; then
# the rank columns, last signal first


def print_search_table(rows: list[dict], explain: bool) -> None:
    """The table of ``search`` / ``search --explain``, fitted to the console's width (``fit_columns``): the summary,
    session and verdict columns wrap; on a console too narrow for every column, the low-value ones are left out
    (named under the table; --json has them all). Archived text as visible escapes on a terminal."""
    from rich.table import Table
    from rich.text import Text

    safe = on_terminal()  # archived text (summaries, sessions) as visible escapes on a terminal
    used = {name for r in rows for name in r["ranks"]}
    signals = [n for n in SIGNAL_COLUMNS if n in used] + sorted(used - set(SIGNAL_COLUMNS))
    headers = [
        "id",
        "session",
        "turn",
        *(SIGNAL_COLUMNS.get(n, n) for n in signals),
        "RRF",
        *(("LLM",) if explain and any(r.get("rerank") for r in rows) else ()),
        *(("MMR", "verdict", "category", "c", "σ") if explain else ()),
        "summary",
    ]
    cells = []
    for r in rows:
        ranks = [str(r["ranks"].get(s, "–")) for s in signals]
        llm_place = (str(r.get("rerank") or "–"),) if "LLM" in headers else ()
        extra = (
            (
                *llm_place,
                str(r["mmr"] or "–"),
                safe(r["verdict"] + (f" ({r['reason']})" if r["reason"] else "")),
                safe(str(r["category"] or "–")),
                f"{r['confidence']:.2f}",
                f"{r['success']:.2f}",
            )
            if explain
            else ()
        )
        cells.append(
            [
                str(r["id"]),
                safe(r["session"]),
                str(r["turn"]),
                *ranks,
                f"{r['rrf' if explain else 'score']:.4f}",
                *extra,
                safe(r["summary"]).replace("\n", " ").replace("\t", " "),
            ]
        )
    console = stdout_console()
    droppable = [*(EXPLAIN_DROPPED_FIRST if explain else ()), *(SIGNAL_COLUMNS.get(n, n) for n in reversed(signals))]
    kept, widths = fit_columns(headers, cells, console.width, WRAPPED_FLOOR, droppable)
    shown_signals = [n for n in signals if headers.index(SIGNAL_COLUMNS.get(n, n)) in kept]
    caption = (
        "ranks per signal: " + ", ".join(f"{SIGNAL_COLUMNS.get(n, n)} = {n}" for n in shown_signals) + " (– unranked)"
        if shown_signals
        else ""
    )
    left_out = [headers[i] for i in range(len(headers)) if i not in kept]
    if left_out:
        caption += (
            "\n" if caption else ""
        ) + f"left out to fit {console.width} columns: {', '.join(left_out)} (--json has them)"
    table = Table(show_lines=False, caption=caption or None, caption_justify="left")
    for i, width in zip(kept, widths):
        table.add_column(headers[i], width=width, overflow="fold")
    for row in cells:
        table.add_row(*(Text(row[i]) for i in kept))
    console.print(table)


def fit_columns(
    headers: list[str], rows: list[list[str]], width: int, floors: dict[str, int], droppable: list[str]
) -> tuple[list[int], list[int]]:
    """Which columns of a rich table (``headers``, plain-text ``rows``) to show and how wide, so that the table,
    borders and padding included, fits ``width`` console columns: each column as wide as its widest cell; if that
    is too wide, the columns named in ``floors`` (they wrap) narrowed, widest first, to no less than their floor or
    their header; if even that is too wide, the ``droppable`` columns left out in that order, and then the wrapping
    columns narrowed down to their header. Returns (indexes of the columns kept, their content widths)."""
    from rich.cells import cell_len

    natural = [max([cell_len(h)] + [cell_len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    floor = [min(natural[i], max(floors.get(h, natural[i]), cell_len(h))) for i, h in enumerate(headers)]
    kept = list(range(len(headers)))

    def room() -> int:  # per column a border and a space either side, and the closing border
        return width - 3 * len(kept) - 1

    for name in droppable:
        if sum(floor[i] for i in kept) <= room():
            break
        if name in headers and headers.index(name) in kept and len(kept) > 1:
            kept.remove(headers.index(name))
    widths = {i: natural[i] for i in kept}
    excess = sum(widths.values()) - room()
    for least in (floor, [cell_len(h) if h in floors else natural[i] for i, h in enumerate(headers)]):
        while excess > 0:  # the floors first; on a console narrower still, the wrapping columns down to their header
            narrower = [i for i in kept if widths[i] > least[i]]
            if not narrower:
                break
            widest = max(narrower, key=lambda i: widths[i])
            widths[widest] -= 1
            excess -= 1
    return kept, [widths[i] for i in kept]


def readers(holders: Any) -> str:
    return ", ".join(f"process {pid} ({name})" for pid, name in holders) or "another connection to it"


def say_waiting(erasure: Any, wait: float) -> None:
    typer.echo(f"waiting up to {wait:g} s for {readers(erasure.holders)} to finish reading the database...", err=True)


def unerased(path: Any, n: Any, server: bool = False) -> str:
    """What a forget a reader held up leaves in the file, and until when (``Forgotten``). ``server``: a PostgreSQL
    database, whose tables keep the rows' bytes until VACUUM FULL gets their locks (``holders``: server sessions)."""
    if server:
        sessions = ", ".join(f"server session {pid} ({name})" for pid, name in n.holders) or "another session"
        return (
            f"its text remains in the tables of {path} ({n.remaining_bytes:,} bytes, rows from before the forget) "
            f"until {sessions} ends its transaction; the next lantern command on this database after that finishes "
            "the erase"
        )
    return (
        f"its text remains in {path} and {path}-wal ({n.remaining_bytes:,} bytes, pages from before the forget) "
        f"until {readers(n.holders)} ends its read transaction or closes the database; the next lantern command "
        "on this database after that finishes the erase"
    )


def recovery_line(turn) -> str:
    """The stderr line after an answer: whether a recovery fired and why, and what the turn cost."""
    cost = f"{turn.generations} generation{'s' if turn.generations > 1 else ''}, {turn.usage.calls} LLM calls, "
    cost += f"{turn.usage.tokens_in} tokens in / {turn.usage.tokens_out} out, {turn.ms:.0f} ms"
    if not turn.reasons:
        return f"[no recovery; {cost}]"
    got = len(turn.recovery.entries) if turn.recovery is not None else 0
    used = f", {len(turn.used)} used by the answer" if got else ""
    detail = turn.recovery.detail if turn.recovery is not None and turn.recovery.reason else ""
    found = f"{got} entries{used}" if got else "found nothing"
    return f"[recovery: {'; '.join(turn.reasons)}{f' ({detail})' if detail else ''} -> {found}; {cost}]"


def installed(path: Path, changed: bool, uninstall: bool, pinned: Any) -> None:
    """What ``install`` did, and which database the hooks write to (pinned in their command, or where they look
    when they run)."""
    from lantern.config import redact_url

    verb = "removed from" if uninstall else "installed in"
    print(f"Lantern hooks {verb} {path}" if changed else f"{path} already up to date")
    if uninstall:
        return
    if pinned is not None:
        print(f"the hooks write to {redact_url(str(Path(pinned).expanduser().resolve()))}")
    else:
        print(
            f"the hooks write to $LANTERN_DB as the agent sees it, else {Path.home() / '.lantern' / 'lantern.db'} "
            "(pin one: --db FILE)"
        )
