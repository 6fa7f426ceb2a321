"""The commands about the store itself: ``forget``, ``vacuum``, ``copy``, ``stats`` and ``reindex``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Optional

import typer

from lantern.cli.common import fail, guard, open_db, state
from lantern.cli.options import agent_option, embedder_name, project_option, utf8, warn_password
from lantern.cli.render import (
    copied_line,
    forgotten_lines,
    note,
    print_json,
    print_stats,
    progress_bar,
    say_waiting,
    unvacuumed,
    warnings_unsaid,
)
from lantern.text.names import plural


def forget(
    entry: Optional[int] = typer.Option(None, "--entry", help="Entry id."),
    session: Optional[str] = typer.Option(None, "--session", callback=utf8, help="Every entry of this session."),
    user: Optional[str] = typer.Option(
        None,
        "--user",
        "-u",
        callback=utf8,
        help=(
            "Every entry of this user (with --entry/--session: only within this user). Without it, the user is "
            '$LANTERN_USER, else the default user "".'
        ),
    ),
    agent: Optional[str] = typer.Option(
        None, "--agent", callback=utf8, help="Every entry of this agent (within the user)."
    ),
    project: Optional[str] = typer.Option(
        None, "--project", callback=utf8, help="Every entry of this project (within the user)."
    ),
    wait: float = typer.Option(
        10.0, "--wait", min=0, help="Seconds to wait for a process reading the database before saying what remains."
    ),
    yes: bool = typer.Option(
        False, "--yes", "-y", help="Delete without asking (scripts: without a terminal, forget refuses without it)."
    ),
) -> None:
    """Delete entries from every table, then vacuum; never crosses users.

    Every table: entries, full text, embeddings, and every table that refers to them. The vacuum rewrites the file
    so the deleted text is not left in free pages or the WAL. A process reading the database keeps the old pages
    until its read ends: forget waits for it (--wait, 10 s), else says what remains and exits 3.

    On a terminal it asks first (as the inspector does); --yes skips the question. Without a terminal to ask on it
    refuses unless --yes is given: a deletion has no undo."""
    if entry is not None and session is not None:
        fail("give --entry or --session, not both")
    if all(x is None for x in (entry, session, user, agent, project)):
        fail("give --entry, --session, --user, --agent or --project")
    who = user if user is not None else os.environ.get("LANTERN_USER")  # `--user ""` is the default user
    asked = {"entry": entry, "session": session, "user": who, "agent": agent, "project": project}
    if not yes:
        what = forget_target(entry, session, user, who, agent, project)
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            fail(f"forget deletes {what} with no undo: give --yes to confirm (no terminal to ask on)")
        count = guard(lambda: _forget_count(asked))
        # nothing selected: nothing to ask; the run below says which filter found nothing and the closest names
        if count and not typer.confirm(
            f"Delete {what} from every table: {plural(count, 'entry', 'entries')}?", default=False, err=True
        ):
            typer.echo("nothing forgotten", err=True)
            raise typer.Exit(1)

    def run():
        with open_db() as lantern, warnings_unsaid():  # the warning api.forget logs: said in the command's words
            n = lantern.forget(**asked, wait=wait, on_wait=lambda erasure: say_waiting(erasure, wait))
            near = lantern.sessions_like(session, user=who, agent=agent, project=project) if session and not n else []
            forgotten_lines(n, lantern.path, lantern.backend != "sqlite", entry, session, who, near)
        if not n.erased:
            raise typer.Exit(3)

    guard(run)


def _forget_count(asked: dict) -> int:
    """How many entries a forget with these selectors would delete now (the question's count)."""
    with open_db() as lantern:
        return lantern.forget_count(**asked)


def forget_target(entry, session, user, who, agent, project) -> str:
    """What a forget with these selectors deletes, in the words of its question: ``entry 7``, ``every entry of
    session 'x'``, ``every entry of user 'u'``, with the agent / project filters and the user they stay in."""
    from lantern.text.terminal import shown

    if entry is not None:
        what = f"entry {entry}"
    elif session is not None:
        what = f"every entry of session {shown(session)!r}"
    elif user is not None and agent is None and project is None:
        what = f"every entry of user {shown(user)!r}"
    else:
        what = "every entry"
    filters = [f"{k} {shown(v)!r}" for k, v in (("agent", agent), ("project", project)) if v is not None]
    if filters:
        what += " of " + " and ".join(filters)
    if not (user is not None and entry is None and session is None and not filters):
        what += f" (user {shown(who)!r})" if who else ' (the default user "")'
    return what


def vacuum(
    wait: float = typer.Option(
        10.0, "--wait", min=0, help="Seconds to wait for a process reading the database before saying what remains."
    ),
) -> None:
    """Rewrite the database without its free space, giving it back to the filesystem.

    Deleted or rewritten rows leave space in the file for later writes; stats --all-users shows it as free_bytes.
    The upgrade to schema 9 leaves much of it.

    SQLite: VACUUM, then a checkpoint that empties the WAL, as forget does. PostgreSQL: VACUUM FULL.

    A process reading the database keeps the old pages until its read ends: vacuum waits for it (--wait, 10 s),
    else says what remains and exits 3."""

    def run():
        with open_db() as lantern:
            before, erasure, after = lantern.vacuum(wait=wait, on_wait=lambda e: say_waiting(e, wait))
            if not erasure.complete:
                note(unvacuumed(lantern.path, erasure))
                raise typer.Exit(3)
            print(f"{lantern.path}: {before:,} -> {after:,} bytes")

    guard(run)


def copy(
    src: str = typer.Argument(
        ..., help="The store to copy from: a SQLite file or a postgresql:// URL.", callback=warn_password
    ),
    dst: str = typer.Argument(
        ..., help="The store to copy into (created when missing), file or URL.", callback=warn_password
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the counts as one JSON object."),
) -> None:
    """Copy every entry (scopes, embeddings, facts, reinforcement state) between stores, SQLite <-> PostgreSQL.

    Entries already in DST are skipped: a copy stopped part way resumes when run again. The counts are verified
    after the copy (every source entry is in DST with its embedding). Compaction events are copied with their
    entry ids mapped to DST's.

    A copy onto itself (the same file or server database, by any path or URL) is refused. Errors name SRC or DST."""
    from lantern.config import is_server_url
    from lantern.text.terminal import console

    console = console(stderr=True)  # the bar on stderr, as ingest draws it

    def run():
        from lantern.api import copy_store

        with progress_bar(console, "copying", "entries", remaining=False, disable=as_json) as update:
            counts = copy_store(
                src if is_server_url(src) else Path(src), dst if is_server_url(dst) else Path(dst), progress=update
            )
        if as_json:
            print_json(counts)
        else:
            print(copied_line(src, dst, counts))

    guard(run, None, also=(src, dst))  # copy_store names SRC or DST in its errors


def stats(
    as_json: bool = typer.Option(False, "--json", help="Print the statistics as one JSON object."),
    user: Optional[str] = typer.Option(
        None,
        "--user",
        "-u",
        callback=utf8,
        help='Count this user\'s entries (default $LANTERN_USER, else the default user "").',
    ),
    agent: Optional[str] = agent_option(),
    project: Optional[str] = project_option(),
    all_users: bool = typer.Option(
        False, "--all-users", help="Count every user's entries (an administrator's view; not with --user)."
    ),
) -> None:
    """Entries, sessions, embedder, sizes: of one user, or of every user with --all-users."""
    if all_users and (user is not None or agent is not None or project is not None):
        fail("--all-users counts every user: give no --user, --agent or --project with it")

    def run():
        who = user if user is not None else os.environ.get("LANTERN_USER")  # `--user ""`: the default user
        with open_db() as lantern:
            s = lantern.stats(all_users=True) if all_users else lantern.stats(user=who, agent=agent, project=project)
        if as_json:
            print(json.dumps(s))
        else:
            print_stats(s)

    guard(run)


def reindex(
    embedder: Optional[str] = typer.Option(
        None,
        "--embedder",
        callback=embedder_name,
        help="routed, routed-v1, minilm, use or e5 (default: the current one).",
    ),
    fill: bool = typer.Option(
        False,
        "--fill",
        help="Only compute the vectors still missing (turns a hook stored text-first; the e5 part of English turns).",
    ),
) -> None:
    """Re-embed every entry (after changing the embedder); --fill only computes the vectors of the entries stored
    text-first and the e5 part of the entries that lack it, which the daemon, ingest, the servers and recoveries
    otherwise do a little at a time."""
    from lantern.text.terminal import console

    console = console(stderr=True)  # the bar on stderr, and none (nor its empty line) when that is not a terminal
    if embedder and state.embedder and embedder != state.embedder:  # `--embedder use reindex --embedder routed`
        raise typer.BadParameter(
            f"the global --embedder {state.embedder} and reindex --embedder {embedder} differ; give the target once",
            param_hint="--embedder",
        )

    def run():  # open_db: a missing path or a zero-byte file is refused, never made a database
        # opened with its own embedder: the global --embedder, when given, is the target (opened with the target,
        # `lantern --embedder e5 reindex` would fail with the mismatch error the command exists to resolve)
        with open_db(own_embedder=True) as lantern:
            if fill:
                with progress_bar(console, "filling", elapsed=False) as update:
                    n = lantern.fill_vectors(progress=update)
                print(f"{plural(n, 'entry', 'entries')} given their missing vector part")
                return
            with progress_bar(console, "re-embedding", elapsed=False) as update:
                n = lantern.reindex(embedder or state.embedder, progress=update)
                lantern.build_graphs()  # a large store's HNSW graphs, saved with the snapshot: no command waits
            print(f"{plural(n, 'entry', 'entries')} re-embedded with {lantern.embedder.id}")  # after the bar: on stdout

    guard(run)


def redact() -> None:
    """Re-apply today's redaction rules to every archived text in place.

    Turns archived by an older Lantern, under older rules or with redaction off keep secrets in clear.

    This rewrites text, summary, tags, hints, meta, facts and event queries, 256 entries per transaction.

    Stopped part way, it resumes where it stopped. Rewritten entries are re-embedded (reindex --fill).

    The old bytes are erased from the file as forget erases them."""
    from lantern.text.terminal import console

    console = console(stderr=True)

    def run():
        with open_db() as lantern:
            if not lantern.redaction.secrets:
                note("secret redaction is off for this database: nothing to redact")
                return
            with progress_bar(console, "redacting", elapsed=False) as update:
                checked, rewritten = lantern.redact_stored(progress=update)
            print(
                f"{plural(checked, 'entry', 'entries')} checked, {rewritten} rewritten"
                if checked
                else "every archived text is already redacted under these rules"
            )

    guard(run)
