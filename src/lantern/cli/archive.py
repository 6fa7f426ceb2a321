"""The write path's commands: ``ingest`` (``Lantern.ingest``), ``export`` and ``import`` (lantern/portability.py)."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Optional

import typer

from lantern.cli.common import before_open, guard, open_db
from lantern.cli.options import agent_option, project_option, user_option, utf8
from lantern.cli.render import print_json
from lantern.text.names import plural
from lantern.text.terminal import shown


def ingest(
    file: Path = typer.Argument(
        ..., metavar="FILE|DIR", help="Transcript file, or a directory: every transcript under it."
    ),
    format: str = typer.Option(
        "auto",
        "--format",
        "-f",
        help="auto, openai, anthropic, jsonl, claude-code, codex, sharegpt, swe_agent, aider, locomo.",
    ),
    session: Optional[str] = typer.Option(
        None,
        "--session",
        "-s",
        callback=utf8,
        help=(
            "Session id (default: the file name; for a directory, each file's path under it, and NAME becomes a "
            "prefix)."
        ),
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print the result as JSON (a directory: every file with its outcome)."
    ),
    user: Optional[str] = user_option('User the turns belong to (default $LANTERN_USER, else the default user "").'),
    agent: Optional[str] = agent_option(),
    project: Optional[str] = project_option(),
) -> None:
    """Archive a transcript file (one transaction per batch; re-ingesting adds no duplicates; Ctrl-C keeps the
    batches already committed and a re-run resumes). A directory: every regular file under it, format detected per
    file; files that are not transcripts are skipped and listed with their reason at the end."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(stderr=True)
    committed = [0]  # turns of committed batches, as reported by progress
    counts = {}  # entries in the database when the ingest started (and its path)

    from lantern.archive.parse import FORMATS

    if format != "auto" and format not in FORMATS:
        raise typer.BadParameter(f"unknown format {format!r}; one of auto, {', '.join(FORMATS)}", param_hint="--format")

    def report(done: int, total: int) -> None:
        committed[0] = done
        bar.update(task, completed=done, total=total)

    if file.is_dir():
        return _ingest_directory(file, format, session, as_json, user, agent, project, console)

    before = before_open()

    def discard_new_db() -> None:
        """A new database that received nothing (an error, or no turn in the file) is removed, a zero-byte file
        made zero bytes again (as ``import``)."""
        before.undo()

    def run():
        try:
            _run()
        except Exception:
            discard_new_db()
            raise

    def _run():
        nonlocal bar, task
        with (
            open_db(create=True) as lantern,
            Progress(
                TextColumn("archiving"),
                BarColumn(),
                TaskProgressColumn(),
                TextColumn("{task.completed} turns"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=console,
                transient=True,
                disable=as_json or not console.is_terminal,  # not on a terminal: no bar, and no empty line where it was
            ) as bar,
        ):
            counts.update(path=lantern.path, before=lantern.count())
            task = bar.add_task("ingest", total=None)
            result = lantern.ingest(
                file, session, format=format, progress=report, user=user, agent=agent, project=project
            )
        from rich.markup import escape

        safe = (
            shown if console.is_terminal else str
        )  # a warning quotes the input: never markup, never raw on a terminal
        for w in result.warnings[:20]:
            console.print(f"[yellow]warning:[/] {escape(safe(w))}")
        if len(result.warnings) > 20:
            console.print(f"[yellow]… {len(result.warnings) - 20} more warnings[/]")
        if as_json:
            keys = ("session", "added", "duplicates", "skipped", "redacted", "entry_ids", "warnings")
            print_json({k: getattr(result, k) for k in keys})  # on a terminal, C1 / bidi controls as \\uXXXX
        else:  # the path and the session (the file name by default) as visible escapes on a terminal
            name = shown if sys.stdout.isatty() else str
            print(
                f"{name(file)}: {plural(result.added, 'turn')} archived, {result.duplicates} already archived, "
                f"{plural(result.skipped, 'item')} skipped (session {name(result.session)})"
            )
        if not result.added and not result.duplicates:
            discard_new_db()
            console.print(
                f"[red]error:[/] no turns found in {escape(safe(file))}"
                + (f" with --format {format}; try --format auto" if format != "auto" else "")
                + (f" ({plural(result.skipped, 'item')} skipped)" if result.skipped else "")
            )
            raise typer.Exit(1)

    bar = task = None
    try:
        guard(run)
    except KeyboardInterrupt:
        done = committed[0]
        if counts and isinstance(counts["path"], Path):  # a batch may have committed just before the interrupt
            from lantern.api import entry_count

            stored = entry_count(counts["path"])
            if stored is not None:
                done = max(done, stored - counts["before"])
        typer.secho(
            f"interrupted: {done} turns committed (the batch in progress was rolled back); "
            "run the same command again to resume, turns already archived are skipped",
            err=True,
            fg=typer.colors.YELLOW,
        )
        raise typer.Exit(130) from None


def _ingest_directory(
    root: Path, format: str, session: Optional[str], as_json: bool, user, agent, project, console
) -> None:
    """``lantern ingest DIR`` -> ``Lantern.ingest(DIR)``: one progress bar (bytes), then the summary
    (archive/directory.py ``summary_lines``). Exit code 1 when no file had a turn or a file could not be read."""
    from rich.progress import (
        BarColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    before = before_open()

    def run():
        try:
            with (
                open_db(create=True) as lantern,
                Progress(
                    TextColumn(f"archiving {root}"),
                    BarColumn(),
                    TaskProgressColumn(),
                    TimeElapsedColumn(),
                    TimeRemainingColumn(),
                    console=console,
                    transient=True,
                    disable=as_json or not console.is_terminal,
                ) as bar,
            ):
                task = bar.add_task("ingest", total=None)
                result = lantern.ingest(
                    root,
                    session,
                    format=format,
                    user=user,
                    agent=agent,
                    project=project,
                    progress=lambda done, total: bar.update(task, completed=done, total=total),
                )
        except Exception:
            before.undo()
            raise
        if not result.ingested:
            before.undo()
        if as_json:
            print_json(result.to_json())
        else:
            from lantern.archive.directory import summary_lines

            for line in summary_lines(result):
                print(line)
        if not result.ingested or result.failed:
            typer.secho(
                f"error: no transcript with turns found under {shown(root) if sys.stderr.isatty() else root}"
                if not result.ingested
                else f"error: {len(result.failed)} file{'s' if len(result.failed) != 1 else ''} could not be read",
                err=True,
                fg=typer.colors.RED,
            )
            raise typer.Exit(1)

    try:
        guard(run)
    except KeyboardInterrupt:
        typer.secho(
            "interrupted: the files and batches already committed are kept; run the same command again to "
            "resume, turns already archived are skipped",
            err=True,
            fg=typer.colors.YELLOW,
        )
        raise typer.Exit(130) from None


def export(
    file: str = typer.Argument(..., metavar="FILE|-", help="Output JSONL file, or - for stdout."),
    session: Optional[str] = typer.Option(
        None, "--session", "-s", callback=utf8, help="Only this session (and its sub-sessions)."
    ),
    user: Optional[str] = user_option("Only this user's entries (default $LANTERN_USER, else EVERY user: a backup)."),
    agent: Optional[str] = typer.Option(None, "--agent", callback=utf8, help="Only this agent's entries."),
    project: Optional[str] = typer.Option(None, "--project", callback=utf8, help="Only this project's entries."),
    embeddings: bool = typer.Option(
        True, "--embeddings/--no-embeddings", help="Include the embeddings (base64 float32)."
    ),
) -> None:
    """Export entries as JSONL: a header (format version, embedder), then one record per entry."""

    def run():
        with open_db() as lantern:
            if file == "-":
                n = lantern.export(
                    sys.stdout, session=session, user=user, agent=agent, project=project, embeddings=embeddings
                )
            else:
                n = lantern.export(
                    Path(file), session=session, user=user, agent=agent, project=project, embeddings=embeddings
                )
        typer.echo(f"{plural(n, 'entry', 'entries')} exported", err=True)

    guard(run)


def import_(
    file: str = typer.Argument(..., metavar="FILE|-", help="A JSONL export (lantern export), or - for stdin."),
    user: Optional[str] = typer.Option(
        None,
        "--user",
        "-u",
        callback=utf8,
        help=(
            "Put every entry into this user (default: the users recorded in the file; $LANTERN_USER is NOT used here, "
            "so "
            "a multi-user backup is never folded into one user by accident)."
        ),
    ),
    agent: Optional[str] = typer.Option(None, "--agent", callback=utf8, help="Put every entry under this agent."),
    project: Optional[str] = typer.Option(None, "--project", callback=utf8, help="Put every entry under this project."),
    embeddings: bool = typer.Option(
        True, "--embeddings/--no-embeddings", help="Use the recorded embeddings, or recompute them (another embedder)."
    ),
) -> None:
    """Import a JSONL export; importing twice adds nothing.

    One transaction per 256 lines; entries already stored (same content hash) are skipped, a stored turn a record
    grew from is replaced (grown); a bad line is an error
    naming it, and nothing of its batch is written."""

    before = before_open()

    def run():
        try:
            with open_db(create=True) as lantern:
                src = (
                    io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="surrogateescape", newline="")
                    if file == "-"
                    else Path(file)
                )  # a byte that is not UTF-8: an error naming its line
                r = lantern.import_(src, user=user, agent=agent, project=project, embeddings=embeddings)
        except Exception:  # a failed import leaves no new database behind (tied to an embedder), nor a zero-byte
            before.undo()  # file turned into one
            raise
        print(
            f"{file}: {plural(r.added, 'entry', 'entries')} imported, "
            + (f"{r.grown} grown (replacing the turn they extend), " if r.grown else "")
            + f"{r.duplicates} already stored "
            f"({plural(r.lines, 'line')})"
        )

    guard(run)
