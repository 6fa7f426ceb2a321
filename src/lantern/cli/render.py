"""How the commands print: archived text as visible escapes on a terminal, JSON lines, rich tables fitted to the
console, and the lines that say what a command left undone."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer

from lantern.text.names import plural
from lantern.text.terminal import TERMINAL_UNSAFE, console, shown


def on_terminal():
    """How archived text is printed to stdout: on a terminal, ``shown`` (control characters, bidi controls and
    U+2028 / U+2029 as visible escapes, newlines and tabs kept), so hostile text cannot drive or reorder the
    terminal; to a pipe (an LLM, a file), unchanged."""
    return (lambda text: shown(text, keep_lines=True)) if sys.stdout.isatty() else (lambda text: text)


def stdout_console():
    """A rich console on stdout (text/terminal.py ``console``: lines whole when piped)."""
    return console()


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
    was skipped: api/read.py ``recover``) are printed as one ``warning: …`` line each on stderr."""
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
SIGNAL_LEGEND = {
    "fulltext": "full text (BM25)",
    "prf": "pseudo-relevance feedback (BM25 of the query expanded from the first hits)",
    "semantic_e5": "semantic (e5)",
    "time": "the date the query names",
}  # the legend's words for a signal whose name alone does not say what it is (recover/rank.py)
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
        "ranks per signal: "
        + ", ".join(f"{SIGNAL_COLUMNS.get(n, n)} = {SIGNAL_LEGEND.get(n, n)}" for n in shown_signals)
        + " (– unranked)"
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


def print_turn(turn: Any, as_json: bool) -> None:
    """One ``chat`` answer: as a JSON line, or the answer on stdout (visible escapes on a terminal) and the
    ``recovery_line`` on stderr."""
    if as_json:
        print_json(turn.to_json())
        return
    print(on_terminal()(turn.answer), flush=True)
    typer.secho(recovery_line(turn), err=True, fg=typer.colors.CYAN)


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


def note(line: str) -> None:
    """One yellow line on stderr: what a command says beside its output (nothing found, a short block, a warning)."""
    typer.secho(line, err=True, fg=typer.colors.YELLOW)


@contextlib.contextmanager
def progress_bar(
    console, label: str, unit: str | None = None, *, elapsed: bool = True, remaining: bool = True, disable: bool = False
):
    """A transient progress bar on ``console`` (stderr): ``label`` (rich markup), the bar, the percentage,
    ``{done} unit`` when ``unit`` is given, the elapsed time (``elapsed``) and the remaining time (``remaining``);
    none, nor the empty line where it would be, when ``disable`` or when the console is not a terminal. Yields
    ``update(done, total)``."""
    from rich.progress import (
        BarColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = [
        TextColumn(label),
        BarColumn(),
        TaskProgressColumn(),
        *((TextColumn("{task.completed} " + unit),) if unit else ()),
        *((TimeElapsedColumn(),) if elapsed else ()),
        *((TimeRemainingColumn(),) if remaining else ()),
    ]
    with Progress(*columns, console=console, transient=True, disable=disable or not console.is_terminal) as bar:
        task = bar.add_task(label, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def print_warm(answer: dict | None, as_json: bool) -> bool:
    """Print the warm daemon's answer to a recovery (``warm_answer``) when it says everything, as JSON or as its
    block; False when there is none or its block is empty (the command runs in-process then, which says why)."""
    if answer is None or not (as_json or answer["text"]):
        return False
    if as_json:
        print_json(answer)
    else:
        print(on_terminal()(answer["text"]))
    return True


def print_recovery(result: Any, as_json: bool, why_empty: Any, short: bool = True) -> None:
    """A recovery as JSON, or its block (a terminal gets archived control characters as visible escapes; a pipe the
    text as is), with a line on stderr for a short block (``short``: a question's recovery); for an empty one
    "nothing recovered" and ``why_empty()``'s sentence (``continuation``)."""
    if as_json:
        print_json(result.to_json())
    elif result.text:
        print(on_terminal()(result.text))
        if short and result.reason:  # a short block: the evidence was uncertain (recover/relevance.py)
            note(f"short block ({result.reason}): {result.detail}; --min-score 0 gives the full budget")
    else:
        note(f"nothing recovered{continuation(result, why_empty())}")


def continuation(recovery: Any, why: str) -> str:
    """``why`` (``Lantern.why_empty``'s sentence) as the rest of the line "nothing recovered…": ": WHY", or
    " (REASON): WHY" when the relevance floor held every candidate back; "" for no sentence."""
    if not why:
        return ""
    return f" ({recovery.reason}): {why}" if recovery.held_by_floor else f": {why}"


def explain_rows(candidates: list) -> list[dict]:
    """``search --explain``'s rows: every candidate with its ranks, RRF score, MMR turn, LLM place, verdict and
    reason, category, c, σ and the first 100 characters of its summary."""
    return [
        {
            "id": c.entry.id,
            "session": c.entry.session,
            "turn": c.entry.turn,
            "ranks": c.ranks,
            "rrf": round(c.rrf, 5),
            "mmr": c.mmr_order,
            "rerank": c.rerank,
            "verdict": c.verdict,
            "reason": c.reason,
            "category": c.entry.category,
            "confidence": round(c.entry.confidence, 3),
            "success": round(c.entry.success, 3),
            "summary": c.entry.summary[:100],
        }
        for c in candidates
    ]


def search_rows(hits: list) -> list[dict]:
    """``search``'s rows: each hit with its ranks, fused score and the first 160 characters of its summary."""
    return [
        {
            "id": h.entry.id,
            "session": h.entry.session,
            "turn": h.entry.turn,
            "ranks": h.ranks,
            "score": round(h.score, 5),
            "summary": h.entry.summary[:160],
        }
        for h in hits
    ]


def print_facts(rows: list) -> None:
    """``facts``' table (at least 120 columns wide): key, value, validity, whether current, the source turn."""
    from rich.markup import escape
    from rich.table import Table

    safe = on_terminal()  # archived keys, values and sessions as visible escapes on a terminal
    table = Table()
    for col in ("key", "value", "valid from", "valid to", "current", "source"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(
            escape(safe(r.key)),
            escape(safe(r.value if r.value is not None else "(retracted)")),
            r.valid_from.strftime("%Y-%m-%d %H:%M"),
            r.valid_to.strftime("%Y-%m-%d %H:%M") if r.valid_to else "–",
            "yes" if r.current else "",
            escape(safe(f"{r.session} · turn {r.turn} (entry {r.entry_id})")),
        )
    out = console()
    if out.is_terminal:
        out.width = max(out.width, 120)
    out.print(table)


def print_events(rows: list) -> None:
    """``events``' table, one row per compaction event, then each event's loss lines (model.loss_lines)."""
    from rich.markup import escape
    from rich.table import Table

    from lantern.model import loss_lines

    safe = on_terminal()
    table = Table()
    columns = ("id", "time (UTC)", "session", "source", "reason", "lost", "recovered", "injected", "chars", "ms")
    for col in columns:
        table.add_column(col, overflow="fold", justify="right" if col in ("id", "lost", "chars", "ms") else "left")
    for r in rows:
        table.add_row(
            str(r.id),
            r.time.strftime("%Y-%m-%d %H:%M:%S"),
            escape(safe(r.session)),
            escape(r.source),
            escape(r.reason),
            str(len(r.lost)),
            f"{len(r.recovered)} of {len(r.lost)}",
            plural(len(r.injected), "entry", "entries")
            if r.injected
            else f"none: {escape(r.empty_reason or 'nothing_relevant')}",
            f"{r.chars:,}",
            "–" if r.latency_ms is None else f"{r.latency_ms:,.0f}",
        )
    console = stdout_console()
    console.print(table)
    for r in rows:
        for line in loss_lines(r.loss, head=f"event {r.id}: "):
            console.print(escape(safe(line)), soft_wrap=True, highlight=False)


def outside_scope_line(missing: list[int], user: Any, agent: Any, project: Any) -> str:
    """``feedback``'s warning about the ids that name no entry of the scope (``Lantern.outside_scope``)."""
    scope = (
        ("this user" if user is None else f"user {user!r}")
        + (f" under agent {agent!r}" if agent is not None else "")
        + (f" in project {project!r}" if project is not None else "")
    )
    if len(missing) == 1:
        return f"warning: entry {missing[0]} is not an entry of {scope}; nothing changed for it"
    listed = ", ".join(map(str, missing[:10])) + (", …" if len(missing) > 10 else "")
    return f"warning: {len(missing)} of the ids are not entries of {scope} ({listed}); nothing changed for them"


def print_stats(s: dict) -> None:
    """``stats``' lines: one ``key: value`` per figure, colons aligned; the per-table bytes last, one line each."""
    width = max(map(len, s))
    # bytes_per_turn_by_table last: one line per table or index, largest first, under the one-line figures
    for key, value in sorted(s.items(), key=lambda kv: isinstance(kv[1], dict)):
        if isinstance(value, dict):
            if not value:  # no turn archived yet: no bytes per turn to show
                continue
            print(f"{key:>{width}}:")
            inner = max(map(len, value), default=0)
            for name, part in value.items():
                print(f"{'':>{width}}  {name:<{inner}}  {part:>8,}")
            continue
        shown_value = '"" (the default user)' if key == "user" and value == "" else value
        print(f"{key:>{width}}: {shown_value}")


def copied_line(src: str, dst: str, counts: dict) -> str:
    """``copy``'s line: the two stores (a URL without its password), the entries verified, copied, grown and
    already there, and the compaction events."""
    from lantern.config import is_server_url, redact_url

    def place(location: str) -> str:
        return redact_url(location) if is_server_url(location) else location

    return (
        f"{place(src)} -> {place(dst)}: {plural(counts['entries'], 'entry', 'entries')} "
        f"verified, {counts['added']} copied, "
        + (f"{counts['grown']} grown (replacing the turn they extend), " if counts["grown"] else "")
        + f"{counts['duplicates']} already there; "
        f"{plural(counts['events'], 'compaction event', 'compaction events')}, {counts['events_added']} copied"
    )


@contextlib.contextmanager
def warnings_unsaid():
    """While the block runs, warnings logged on the ``lantern`` logger are not printed (the command says the same
    in its own words)."""
    import logging

    quiet = logging.NullHandler()
    logging.getLogger("lantern").addHandler(quiet)
    try:
        yield
    finally:
        logging.getLogger("lantern").removeHandler(quiet)


def forgotten_lines(
    n: Any, path: Any, server: bool, entry: Any, session: Any, who: Any, near: Sequence[str] = ()
) -> None:
    """What ``forget`` did: the entries forgotten; for none, which filter found nothing (a mistyped id must not
    look like success) and, for a session, the user's sessions named closest to it (``near``); when a reader held
    the erase up, what remains (``unerased``) on stderr."""
    if not n.erased:
        print(f"{plural(n, 'entry', 'entries')} forgotten from the index")
        note(unerased(path, n, server))
        return
    print(f"{plural(n, 'entry', 'entries')} forgotten")
    if n == 0:
        what = f"entry {entry}" if entry is not None else f"session {session!r}" if session is not None else "entry"
        closest = f"; the closest: {', '.join(map(repr, near))}" if near else ""
        typer.echo(f"no {what} matched" + (f" for user {who!r}" if who else "") + closest, err=True)


def unvacuumed(path: Any, erasure: Any) -> str:
    """What a vacuum a reader held up leaves, and until when."""
    return (
        f"{path}: rewritten, but {readers(erasure.holders)} still holds the old pages "
        f"({erasure.remaining_bytes:,} bytes); the next lantern command on this database after its read "
        "ends finishes the vacuum"
    )


def print_ingested(console: Any, file: Path, result: Any, as_json: bool) -> None:
    """What ``ingest FILE`` archived: its warnings on ``console`` (stderr; the first 20, then how many more: a
    warning quotes the input, so never as markup, and as visible escapes on a terminal), then the result as JSON or
    as one line (the path and the session as visible escapes on a terminal)."""
    from rich.markup import escape

    safe = shown if console.is_terminal else str
    for w in result.warnings[:20]:
        console.print(f"[yellow]warning:[/] {escape(safe(w))}")
    if len(result.warnings) > 20:
        console.print(f"[yellow]… {len(result.warnings) - 20} more warnings[/]")
    if as_json:
        keys = ("session", "added", "duplicates", "skipped", "redacted", "entry_ids", "warnings")
        print_json({k: getattr(result, k) for k in keys})  # on a terminal, C1 / bidi controls as \\uXXXX
    else:
        name = shown if sys.stdout.isatty() else str
        print(
            f"{name(file)}: {plural(result.added, 'turn')} archived, {result.duplicates} already archived, "
            f"{plural(result.skipped, 'item')} skipped (session {name(result.session)})"
        )


def no_turns_line(console: Any, file: Path, format: str, skipped: int) -> None:
    """``ingest``'s error for a file with no turn, on ``console`` (stderr)."""
    from rich.markup import escape

    safe = shown if console.is_terminal else str
    console.print(
        f"[red]error:[/] no turns found in {escape(safe(file))}"
        + (f" with --format {format}; try --format auto" if format != "auto" else "")
        + (f" ({plural(skipped, 'item')} skipped)" if skipped else "")
    )


def print_directory(root: Path, result: Any, as_json: bool) -> bool:
    """What ``ingest DIR`` archived (archive/directory.py ``summary_lines``, or JSON), and the error line when no
    file had a turn or a file could not be read; returns whether all went well."""
    from lantern.archive.directory import summary_lines

    if as_json:
        print_json(result.to_json())
    else:
        for line in summary_lines(result):
            print(line)
    if result.ingested and not result.failed:
        return True
    typer.secho(
        f"error: no transcript with turns found under {shown(root) if sys.stderr.isatty() else root}"
        if not result.ingested
        else f"error: {len(result.failed)} file{'s' if len(result.failed) != 1 else ''} could not be read",
        err=True,
        fg=typer.colors.RED,
    )
    return False


def interrupted(done: int | None = None) -> None:
    """The line an interrupted ingest leaves on stderr: ``done`` turns committed (None: a directory's ingest)."""
    note(
        f"interrupted: {done} turns committed (the batch in progress was rolled back); run the same command again "
        "to resume, turns already archived are skipped"
        if done is not None
        else "interrupted: the files and batches already committed are kept; run the same command again to "
        "resume, turns already archived are skipped"
    )


def imported_line(file: str, r: Any) -> str:
    """``import``'s line: the entries imported, grown and already stored, and the lines read."""
    return (
        f"{file}: {plural(r.added, 'entry', 'entries')} imported, "
        + (f"{r.grown} grown (replacing the turn they extend), " if r.grown else "")
        + f"{r.duplicates} already stored "
        f"({plural(r.lines, 'line')})"
    )


def eval_lines(results: dict, out: Path) -> list[str]:
    """``eval``'s summary: lantern's (else the first system's) recovered share and recall@10, with ``--qa`` the
    answer accuracy per condition (F1 when the judge's calibration failed), and the files written."""
    head = results["systems"].get("lantern", next(iter(results["systems"].values())))["overall"]
    lines = [
        f"{head['n']} lost facts; lantern recovered {100 * head['recovered']:.1f}%, recall@10 {head['recall@10']:.3f}"
    ]
    if results.get("qa"):
        cond = results["qa"]["conditions"]
        calibration = results["qa"].get("judge_calibration")
        if calibration is not None and not calibration["reported"]:
            lines.append(f"judge not reported: {calibration['reason']}")
            lines.append("answer F1: " + ", ".join(f"{c} {cond[c]['f1']:.3f} (n={cond[c]['n']})" for c in cond))
        else:
            accuracy = ", ".join(f"{c} {100 * cond[c]['correct']:.1f}% (n={cond[c]['n']})" for c in cond)
            lines.append("answer accuracy: " + accuracy)
    return [*lines, f"wrote {out / 'report.md'} and {out / 'results.json'}"]


def realcompact_lines(table: dict, out: Path) -> list[str]:
    """``eval realcompact``'s summary: the compactions and lost facts, each system's macro share at 4,000
    characters, and the files written."""
    mid = table["budgets"][4000]["systems"]
    return [
        f"{table['events']} compactions, {table['facts']} lost facts; at 4,000 characters "
        + ", ".join(f"{name} {row['macro']:.1f}%" for name, row in mid.items()),
        f"wrote {out / 'report.md'} and {out / 'results.json'}",
    ]


def serve_warnings(host: str, token: Any, upstream: Any, upstream_key: Any, loopback: bool) -> None:
    """``serve``'s warnings on stderr: no --token off loopback; --token without --upstream-key."""
    if token is None and not loopback:
        note(f"warning: serving {host} without --token: anyone who reaches it can read the archive")
    if token is not None and upstream and not upstream_key:
        note(
            "warning: with --token the client's Authorization header is not forwarded; set --upstream-key "
            "(or $LANTERN_UPSTREAM_KEY) if the upstream needs a key"
        )


def serve_banner(host: str, port: int, token: Any, upstream: Any) -> None:
    """Where ``serve``'s memory API and proxy listen, on stderr."""
    docs = "docs /docs" if token is None else "no /docs or /openapi.json with --token"
    typer.echo(f"lantern memory API on http://{host}:{port}/v1/memory ({docs})", err=True)
    if upstream:
        from lantern.llm import shown_url

        shown = shown_url(upstream)  # its user info and query (a key) as ***
        typer.echo(f"chat-completions proxy: OPENAI_BASE_URL=http://{host}:{port}/v1 -> {shown}", err=True)
