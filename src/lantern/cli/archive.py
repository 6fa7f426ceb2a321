"""The write path's commands: ``ingest`` (``Lantern.ingest``), ``export`` and ``import`` (lantern/portability.py)."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Optional

import typer

from lantern.cli.common import before_open, guard, open_db
from lantern.cli.options import agent_option, project_option, user_option, utf8
from lantern.cli.render import (
    imported_line,
    interrupted,
    no_turns_line,
    print_directory,
    print_ingested,
    progress_bar,
)
from lantern.text.names import plural


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
    from lantern.archive.parse import FORMATS
    from lantern.text.terminal import console

    if format != "auto" and format not in FORMATS:
        raise typer.BadParameter(f"unknown format {format!r}; one of auto, {', '.join(FORMATS)}", param_hint="--format")
    console = console(stderr=True)
    if file.is_dir():
        return _ingest_directory(file, format, session, as_json, user, agent, project, console)
    before = before_open()  # a new database that received nothing (an error, or no turn) is undone
    committed, start = [0], {}  # turns of committed batches (as reported); the path and its entries at the start

    def run():
        try:
            with open_db(create=True) as lantern, progress_bar(console, "archiving", "turns", disable=as_json) as bar:
                start.update(path=lantern.path, entries=lantern.count())

                def report(done: int, total: int) -> None:
                    committed[0] = done
                    bar(done, total)

                scope = {"user": user, "agent": agent, "project": project}
                result = lantern.ingest(file, session, format=format, progress=report, **scope)
            print_ingested(console, file, result, as_json)
        except Exception:
            before.undo()
            raise
        if not result.added and not result.duplicates:
            before.undo()
            no_turns_line(console, file, format, result.skipped)
            raise typer.Exit(1)

    try:
        guard(run)
    except KeyboardInterrupt:
        from lantern.api import entry_count

        done = committed[0]
        if start and isinstance(start["path"], Path):  # a batch may have committed just before the interrupt
            stored = entry_count(start["path"])
            done = done if stored is None else max(done, stored - start["entries"])
        interrupted(done)
        raise typer.Exit(130) from None


def _ingest_directory(
    root: Path, format: str, session: Optional[str], as_json: bool, user, agent, project, console
) -> None:
    """``lantern ingest DIR`` -> ``Lantern.ingest(DIR)``: one progress bar (bytes), then the summary
    (archive/directory.py ``summary_lines``). Exit code 1 when no file had a turn or a file could not be read."""
    before = before_open()

    def run():
        try:
            label = f"archiving {root}"
            with open_db(create=True) as lantern, progress_bar(console, label, disable=as_json) as update:
                scope = {"user": user, "agent": agent, "project": project}
                result = lantern.ingest(root, session, format=format, progress=update, **scope)
        except Exception:
            before.undo()
            raise
        if not result.ingested:
            before.undo()
        if not print_directory(root, result, as_json):
            raise typer.Exit(1)

    try:
        guard(run)
    except KeyboardInterrupt:
        interrupted()
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
            dest = sys.stdout if file == "-" else Path(file)
            n = lantern.export(dest, session=session, user=user, agent=agent, project=project, embeddings=embeddings)
            why = "" if n else lantern.why_none(session=session, user=user, agent=agent, project=project)
            if user is None and not why.startswith("in session"):  # every user's export: no one user's words
                why = ""
        typer.echo(f"{plural(n, 'entry', 'entries')} exported" + (f": nothing {why}" if why else ""), err=True)

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
        print(imported_line(file, r))

    guard(run)
