"""The ``lantern`` command: a typer app mirroring the Python API one to one.

    lantern [--db PATH] ingest FILE|DIR [--format auto|...] [--session ID] -> Lantern.ingest
    lantern [--db PATH] recover QUERY [--budget N] [--session ID] [--as-of ISO] [--json] -> Lantern.recover
    lantern [--db PATH] search QUERY [-k N] [--explain] [--json]           -> Lantern.search / Lantern.explain
    lantern [--db PATH] forget (--entry ID | --session ID | --user U) [--wait S] -> Lantern.forget
    lantern [--db PATH] export FILE [--user U] [--session ID]              -> Lantern.export
    lantern [--db PATH] import FILE [--user U] [--no-embeddings]           -> Lantern.import_
    lantern [--db PATH] stats [--user U | --all-users] [--json]             -> Lantern.stats
    lantern [--db PATH] facts [KEY] [--as-of ISO] [--history] [--json]     -> Lantern.facts
    lantern [--db PATH] events [--session ID] [--json]                     -> Lantern.events
    lantern [--db PATH] ui [--host H] [--port N] [--token T] [--open]      -> lantern.integrations.ui
    lantern [--db PATH] feedback ID... (--useful | --not-useful)           -> Lantern.feedback
    lantern [--db PATH] reindex [--embedder NAME]                          -> Lantern.reindex
    lantern demo                                                           -> lantern.demo.run
    lantern eval DATASET --data PATH --out DIR                             -> lantern.eval.run.main
    lantern hook claude-code  /  lantern install claude-code [--user]      -> lantern.integrations.claude_code
    lantern hook codex  /  lantern install codex [--user]                  -> lantern.integrations.codex

Heavy imports (numpy, onnxruntime) happen inside the commands, so ``lantern --help`` stays instant.

Every memory command takes the scope options --user (default $LANTERN_USER, else the default user ""), --agent and
--project (lantern/scope.py).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from lantern.text.names import plural
from lantern.text.terminal import TERMINAL_UNSAFE, shown

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Archive every turn; recover what compaction lost.")


def _flags_without_metavar() -> None:
    """A flag takes no value, so its help shows none: typer (0.2x) prints a value type after every option in its
    rich help, ``<bool>`` after flags too (``--version <bool>``, ``--json <bool>``, ``--help <bool>``); for flags
    that type is dropped. Typers that print no type for flags have no ``display_type_rich``: nothing to change."""
    option = getattr(getattr(typer, "core", None), "TyperOption", None)
    display_type = getattr(option, "display_type_rich", None)
    if display_type is None or getattr(display_type, "lantern_flags", False):
        return

    def display_type_rich(self, ctx):
        return (
            None if getattr(self, "is_flag", False) and not getattr(self, "count", False) else display_type(self, ctx)
        )

    display_type_rich.lantern_flags = True
    option.display_type_rich = display_type_rich


_flags_without_metavar()


class State:
    db: Optional[Path] = None
    embedder: Optional[str] = None
    rewound: Optional[str] = None  # --rewound / $LANTERN_REWOUND; None: the default, skip


state = State()


DISTRIBUTION = (
    "lantern-memory"  # the installed distribution whose version ``lantern --version`` prints (pyproject.toml)
)


def _version(value: bool) -> None:
    """``lantern --version``: print ``lantern VERSION`` (the installed distribution's metadata) and exit 0, before
    any command or database is looked at."""
    if not value:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        typer.echo(f"lantern {version(DISTRIBUTION)}")
    except PackageNotFoundError:
        _fail(f"the distribution {DISTRIBUTION} is not installed (running from a source tree?): pip install -e .")
    raise typer.Exit(0)


def _embedder_name(value: Optional[str]) -> Optional[str]:
    """An ``--embedder`` value unchanged when it names an embedder (``lantern.embed.embedder_class``: a name or an
    id); an unknown one is a usage error (exit 2), as a bad ``--format`` is, with the message of the Python API."""
    if value is None:
        return None
    from lantern.embed import embedder_class

    try:
        embedder_class(value)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    return value


def _rewound_mode(value: Optional[str]) -> Optional[str]:
    """``--rewound`` is skip or mark; anything else is a usage error (exit 2)."""
    if value is not None and value not in ("skip", "mark"):
        raise typer.BadParameter(f"expected skip or mark, got {value!r}")
    return value


def _db_location(value: Optional[str]) -> Any:
    """A database option's value as the location it names: a ``postgresql://`` URL kept as the string it is (a
    Path would fold its ``//`` and make it a relative file name), anything else a Path; None stays None. Every
    option naming a database takes a string and goes through here."""
    from lantern.config import is_server_url, location_error

    if (why := location_error(value)) is not None:
        raise typer.BadParameter(why)
    return None if value is None else value if is_server_url(value) else Path(value)


def _sqlite_only(value: Optional[str]) -> Optional[str]:
    """An option that names a SQLite file only (``demo --demo-db``): a server URL is a usage error (exit 2), never
    taken as a relative file name (with its password in it)."""
    from lantern.config import is_server_url, redact_url

    if is_server_url(value):
        raise typer.BadParameter(f"takes a SQLite file path, not a server URL ({redact_url(value)})")
    return value


def _secret(ctx: typer.Context, name: str, value: Optional[str], file: Optional[Path]) -> Optional[str]:
    """A secret option's value (``--token``, ``--upstream-key``): given, or read from its ``--...-file`` (the
    file's text without its final line break; any other process's ``ps`` shows a command line, not a file). Both
    given, or an unreadable or empty file, is a usage error. Given on the command line itself (not from its
    environment variable), a warning says that ``ps`` shows it."""
    option = "--" + name.replace("_", "-")
    if file is not None:
        if value is not None:
            raise typer.BadParameter(f"give {option} or {option}-file, not both", param_hint=f"'{option}-file'")
        try:
            value = file.read_text(encoding="utf-8").rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as e:
            raise typer.BadParameter(f"cannot read {file}: {type(e).__name__}", param_hint=f"'{option}-file'") from None
        if not value:
            raise typer.BadParameter(f"{file} is empty", param_hint=f"'{option}-file'")
        return value
    if value is not None and _on_command_line(ctx, name):
        _warn_visible(option, f"use {option}-file or its environment variable")
    return value


def _on_command_line(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was given on the command line (not by its environment variable nor its default)."""
    return getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"


def _warn_visible(what: str, instead: str) -> None:
    typer.secho(
        f"warning: {what} on the command line is visible to other users in ps; {instead} (docs/cli.md#secrets)",
        err=True,
        fg=typer.colors.YELLOW,
    )


@app.callback()
def _global(
    ctx: typer.Context,
    db: Optional[str] = typer.Option(
        None,
        "--db",
        metavar="<path|url>",
        help="Database file (default $LANTERN_DB or ~/.lantern/lantern.db), or a postgresql:// URL (docs/postgres.md).",
        envvar="LANTERN_DB",
    ),
    embedder: Optional[str] = typer.Option(
        None,
        "--embedder",
        callback=_embedder_name,
        help="routed (a new database's default), routed-v1, minilm, use or e5 (default: the database's own).",
    ),
    rewound: Optional[str] = typer.Option(
        None,
        "--rewound",
        envvar="LANTERN_REWOUND",
        callback=_rewound_mode,
        help=(
            "Turns of a rewound Claude Code branch: skip (default: not archived, and removed when the rewind shows "
            "later) or mark (kept in <session>/abandoned-<id>). The proxy (serve) always marks."
        ),
    ),
    _show_version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    state.db = _db_location(db)
    state.embedder = embedder
    from lantern.config import has_password

    if _on_command_line(ctx, "db") and has_password(db):
        _warn_visible("the password of a --db URL", "use $LANTERN_DB, $PGPASSWORD or ~/.pgpass")
    state.rewound = rewound


def _utf8(value):
    """A name option's value (session, user, agent, project, fact key) unchanged when it is text; a usage error
    when the shell passed bytes that are not UTF-8 (Python decodes them to lone surrogates, which SQLite cannot
    store nor match)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raw = (
                value.encode("utf-8", "surrogateescape")
                if all("\udc80" <= c <= "\udcff" for c in value if "\ud800" <= c <= "\udfff")
                else value.encode("utf-8", "backslashreplace")
            )
            raise typer.BadParameter(f"not UTF-8 text: {raw!r}; names are stored as UTF-8") from None
    return value


# the scope options of every memory command (lantern/scope.py)
def _user_option(
    help: str = 'User id: only this user\'s entries (default $LANTERN_USER, else the default user "").',
) -> object:
    return typer.Option(None, "--user", "-u", envvar="LANTERN_USER", help=help, callback=_utf8)


def _agent_option() -> object:
    return typer.Option(
        None, "--agent", help="Agent id: a filter on reads (default any), a label on writes.", callback=_utf8
    )


def _llm_url_option() -> object:
    return typer.Option(
        None,
        "--llm-base-url",
        envvar="LANTERN_LLM_BASE_URL",
        metavar="URL",
        help="OpenAI-compatible API root (.../v1) of the LLM half; receives conversation text. Default "
        "$LANTERN_LLM_BASE_URL.",
    )


def _llm_model_option() -> object:
    return typer.Option(
        None, "--llm-model", envvar="LANTERN_LLM_MODEL", metavar="NAME", help="Model name (default $LANTERN_LLM_MODEL)."
    )


def _live_option() -> object:
    return typer.Option(
        None,
        "--live",
        metavar="FILE",
        help="A transcript of what is still in the live context (any ingest format): its turns are never recovered.",
    )


def _live(path: Optional[Path]) -> list | None:
    """The messages of the ``--live`` transcript (archive/parse: any format ``ingest`` reads; a pipe, ``/dev/stdin``
    or a FIFO is read to its end, as ``cat`` reads it: a FIFO waits for its writer), or None. Raises
    TranscriptFormatError (one red line, exit 1) for a file that is not a transcript, and LanternError for one that
    holds no message (``[]``, ``{"messages": []}``, only empty messages: as ``ingest`` refuses a transcript with no
    turn): a live context always holds messages, so an empty one is a wrong file, not "nothing is live"."""
    if path is None:
        return None
    from lantern.archive.parse import parse
    from lantern.errors import LanternError

    result = parse(path)
    if not result.messages:
        skipped = f" ({plural(result.skipped, 'item')} skipped)" if result.skipped else ""
        raise LanternError(
            f"no messages in the --live file {path}{skipped}: give the live context's messages (any format ingest "
            "reads), or leave --live out when nothing is live"
        )
    return result.messages


def _rerank_option() -> object:
    return typer.Option(
        False, "--rerank", help="LANTERN-Rerank: one LLM call reorders the fused top candidates (needs --llm-base-url)."
    )


def _llm(rerank: bool, base_url: Optional[str], model: Optional[str]):
    """The LLM settings of a command (lantern/llm.py), or None without --rerank. A usage error (exit 2) when
    --rerank has no endpoint or no model."""
    if not rerank:
        return None
    from lantern.llm import settings

    try:
        chosen = settings(None, base_url, model)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="'--llm-model'") from None
    if chosen is None:
        raise typer.BadParameter(
            "--rerank needs an LLM endpoint: give --llm-base-url URL and --llm-model NAME", param_hint="'--rerank'"
        )
    return chosen


def _project_option() -> object:
    return typer.Option(
        None, "--project", help="Project: a filter on reads (default any), a label on writes.", callback=_utf8
    )


def _warm(op: str, args: dict, kwargs: dict, user: Optional[str]):
    """The warm daemon's answer to ``op`` (integrations/daemon.py) when one of this identity runs, else None: the
    command works in-process (no daemon, a global ``--embedder`` or ``--rewound`` it does not use, a database not
    there yet, whose error ``_open`` words). The CLI never starts the daemon."""
    from lantern.config import default_db_path
    from lantern.integrations import daemon

    if state.embedder is not None or state.rewound is not None:
        return None
    path = state.db or default_db_path()
    if not isinstance(path, str):
        if not path.exists() or _empty_file(path):
            return None
        path = str(path.resolve())
    try:
        return daemon.call(op, {**args, "db": path, "user": user, "kwargs": kwargs})
    except daemon.Unavailable:
        return None


def _open(create: bool = False, own_embedder: bool = False):
    """The database of ``--db``; only ``ingest`` creates one (a mistyped path is an error, not a new file).
    ``own_embedder``: open it with the embedder it records, whatever the global ``--embedder`` (``reindex``)."""
    from lantern.api import Lantern
    from lantern.config import default_db_path, redact_url
    from lantern.errors import LanternError

    path = state.db or default_db_path()
    if isinstance(path, str):  # a PostgreSQL URL: the server says whether the database is there
        return Lantern(path, embedder=None if own_embedder else state.embedder)
    if not create and not path.exists():
        raise LanternError(f"no database at {redact_url(str(path))}: archive something first (lantern ingest FILE)")
    if not create and _empty_file(path):  # SQLite would take it for a new database and this command would make one
        raise LanternError(
            f"{path} is an empty file, not a Lantern database: check --db, or archive something into "
            f"it first (lantern --db {path} ingest FILE)"
        )
    if state.rewound is not None:
        from dataclasses import replace

        from lantern.config import DEFAULT

        return Lantern(
            path, embedder=None if own_embedder else state.embedder, config=replace(DEFAULT, rewound=state.rewound)
        )
    return Lantern(path, embedder=None if own_embedder else state.embedder)


def _empty_file(path: Path) -> bool:
    """Whether ``path`` (or the file a symlink points to) is a zero-byte regular file. A WAL beside it does not
    make it a database: SQLite deletes the WAL of a zero-page database when it opens it."""
    try:
        return path.is_file() and path.resolve().stat().st_size == 0
    except OSError:
        return False


def _remove_database(path: Path) -> None:
    """Delete the database file at ``path`` with its WAL and shared-memory files (a database this command created
    and that must not stay behind empty, tied to an embedder)."""
    for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        leftover.unlink(missing_ok=True)


class _NothingToUndo:
    """``_Before`` of a PostgreSQL database: nothing is created on a server that a failure should remove (an
    ingest that fails wrote nothing past its last committed batch)."""

    def undo(self) -> None:
        pass


def _before_open():
    """What a command that may create the database must be able to undo (``_Before``), for ``--db``."""
    from lantern.config import default_db_path

    location = state.db or default_db_path()
    return _NothingToUndo() if isinstance(location, str) else _Before(location)


class _Before:
    """What is at ``path`` before a command that may create the database there (ingest, import) opens it, so that a
    failure undoes exactly what the command made and nothing else: a database it created is removed with its WAL
    and shared-memory files and the folders made for it; a zero-byte file it turned into a database is made a
    zero-byte file again (its -wal / -shm removed when they were not there before); a database that was there is
    left alone. A database that holds entries is never undone: turns committed before a failure (an ingest's
    earlier slices or files) stay, and ``ingest`` resumes from them. Nor is one another process has open (a
    concurrent ingest into the same new path: ``store.sqlite.alone_and_empty``). Through a symlink, the file it
    points to is what is undone (SQLite creates it and its -wal / -shm there); the symlink itself is kept."""

    def __init__(self, path: Path):
        self.path = path
        self.real = path.resolve()  # a symlink (even a dangling one): the file SQLite writes
        self.created = not path.exists()
        self.was_empty = _empty_file(path)
        self.sidecars = [
            p
            for p in (self.real.with_name(self.real.name + "-wal"), self.real.with_name(self.real.name + "-shm"))
            if not p.exists()
        ]
        self.folders = []  # the folders that do not exist yet, innermost first (Store creates them)
        folder = path.parent
        while not folder.exists() and folder != folder.parent:
            self.folders.append(folder)
            folder = folder.parent

    def undo(self) -> None:
        """Leave ``path`` as the command found it (see the class); a database holding entries is kept."""
        if not self.real.exists() or not (self.created or (self.was_empty and not _empty_file(self.path))):
            if self.created:
                self._remove_folders()
            return
        from lantern.store.sqlite import alone_and_empty

        with alone_and_empty(self.real) as undoable:
            if not undoable:
                return
            if os.name != "nt":  # under the exclusive lock: nobody opens it in between (Windows: once closed)
                self._restore()
        if os.name == "nt":
            self._restore()

    def _restore(self) -> None:
        if self.created:
            _remove_database(self.real)
            self._remove_folders()
        else:
            with contextlib.suppress(OSError):
                os.truncate(self.real, 0)
            for sidecar in self.sidecars:
                sidecar.unlink(missing_ok=True)

    def _remove_folders(self) -> None:
        for folder in self.folders:
            with contextlib.suppress(OSError):  # not empty (something else wrote there): kept
                folder.rmdir()


def _smallest_budget(packs, budget: int, limit: int = 1_000_000) -> int | None:
    """The smallest budget above ``budget`` at which ``packs(b)`` (a recovery at budget ``b`` packs an entry) holds,
    found by the recovery itself: doubling, then bisection (packing more room never packs less); None past
    ``limit`` characters."""
    lo, hi = budget, max(budget * 2, budget + 64)
    while not packs(hi):
        lo, hi = hi, hi * 2
        if hi > limit:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if packs(mid) else (mid, hi)
    return hi


def _why_empty(result, as_of: Optional[str] = None, without_as_of=None, counts=None, packs_at=None) -> str:
    """Why an empty recovery is empty, for the one line the CLI prints: no turn older than the ``--as-of`` time
    (``as_of``, as given; ``without_as_of``: a callable returning the same recovery's explanation without it, called
    only then), no candidate (``counts``: a callable returning ``_scope_counts``, called only then, to name the
    user, agent / project or session filter that left the store's entries out), or every ranked candidate cut
    because the budget left no room after the block's title line (``packs_at``: a callable telling whether the same
    recovery at another budget packs an entry, to name the smallest budget that does); or an empty query."""
    from datetime import timezone

    from lantern.recover.pack import FULL_BELOW, title

    ranked = [c for c in result.candidates if not c.verdict.startswith("excluded:")]
    if not (result.query or "").strip():
        return ": the query is empty (give the question, or the live context's tail after a compaction)"
    if not ranked and as_of is not None and without_as_of is not None:
        later = [
            c.entry.time or c.entry.archived_at
            for c in without_as_of().candidates  # as --as-of: the event
            if not c.verdict.startswith("excluded:")
        ]  # time, else the archiving time
        if later:  # the turns the query finds all came after the asked time
            return (
                f": no archived turn is older than the --as-of time {as_of} (without --as-of the candidates date "
                f"from {min(later).astimezone(timezone.utc):%Y-%m-%d %H:%M} UTC on)"
            )
    if not ranked:
        named = _filtered_out(counts()) if counts is not None else ""
        return ": no archived turn is a candidate" + (named or " (all excluded or none archived)")
    if all(c.verdict == "cut:floor" for c in ranked):
        return (
            f" ({result.reason}): no archived turn matches well enough (best relevance {result.relevance.score:.2f}, "
            f"below the relevance floor {result.min_score:g}); --min-score 0 recovers anyway"
        )
    if any(c.verdict == "cut:budget" for c in ranked):
        sessions = {c.entry.session for c in ranked}
        top = len(title(sessions.pop() if len(sessions) == 1 else None))
        least = _smallest_budget(packs_at, result.budget) if packs_at is not None else None
        advice = f"use --budget {least} or more" if least is not None else "use a larger --budget"
        return (
            f": --budget {result.budget} leaves no room for an entry after the block's title line ({top} "
            f"characters; an entry needs {FULL_BELOW} or more): {advice}"
        )
    return ""


def _scope_counts(lantern, session, user, agent, project) -> dict:
    """How many entries the store holds, how many of them are the user's, inside the agent / project filters too,
    and in the session as well (the session or its sub-sessions, as recovery reads it): one COUNT query."""
    from lantern.scope import resolve

    scope = resolve(lantern.scope, user, agent, project)
    row = lantern.store.scope_counts(scope, session)
    return {
        "total": row[0],
        "user": row[1],
        "filtered": row[2],
        "session": row[3],
        "scope": scope,
        "session_name": session,
    }


def _filtered_out(counts: dict) -> str:
    """The words after "no archived turn is a candidate" naming the filter that left every entry of the store out
    (the user, then agent / project, then the session), or "" when the scope holds entries (or the store none)."""
    scope = counts["scope"]

    def entries(n: int) -> str:
        return plural(n, "entry is", "entries are")

    if not counts["total"]:
        return " (the database holds no entry)"
    if not counts["user"]:
        who = f"user {scope.user!r}" if scope.user else 'the default user ""'
        return f" for {who} ({entries(counts['total'])} under other users: --user or $LANTERN_USER picks the user)"
    if not counts["filtered"]:
        named = [
            f"{kind} {value!r}"
            for kind, value in (("agent", scope.agent), ("project", scope.project))
            if value is not None
        ]
        return (
            f" for {' and '.join(named)} (this user's {entries(counts['user'])} outside "
            f"{'it' if len(named) == 1 else 'them'})"
        )
    if not counts["session"]:
        return f" in session {counts['session_name']!r} ({entries(counts['filtered'])} in other sessions)"
    return ""


def _on_terminal():
    """How archived text is printed to stdout: on a terminal, ``shown`` (control characters, bidi controls and
    U+2028 / U+2029 as visible escapes, newlines and tabs kept), so hostile text cannot drive or reorder the
    terminal; to a pipe (an LLM, a file), unchanged."""
    return (lambda text: shown(text, keep_lines=True)) if sys.stdout.isatty() else (lambda text: text)


PIPED_WIDTH = 160  # the width of the tables printed to a pipe or a file, unless $COLUMNS says otherwise


def _stdout_console():
    """A rich console on stdout: on a terminal, the terminal's width; to a pipe or a file, ``$COLUMNS`` when set,
    else ``PIPED_WIDTH`` (rich would take 80 columns, or the width of whatever terminal stdin or stderr is on)."""
    from rich.console import Console

    if sys.stdout.isatty():
        return Console()
    columns = os.environ.get("COLUMNS", "")
    return Console(width=int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_WIDTH)


def _print_json(value) -> None:
    """Print ``value`` as one line of JSON (``ensure_ascii=False``). On a terminal, the characters ``shown`` escapes
    that JSON leaves raw (C1 controls, bidi controls, U+2028 / U+2029) are written as ``\\uXXXX`` escapes: the same
    JSON value; to a pipe, the bytes are unchanged."""
    text = json.dumps(value, ensure_ascii=False)
    if sys.stdout.isatty():
        text = TERMINAL_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    print(text)


def _importable(module: str) -> bool:
    """Whether ``module`` can be found (without importing it)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


@contextlib.contextmanager
def _warnings_on_stderr():
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


def _fail(message: str) -> None:
    """One red ``error:`` line on stderr, exit 1. The message may quote the input (a file name, a session): on a
    terminal its control and bidi characters are shown as escapes (``shown``), so a file named with an escape
    sequence cannot drive the terminal; to a pipe it is written as is."""
    typer.secho(
        f"error: {shown(message, keep_lines=True) if sys.stderr.isatty() else message}", fg=typer.colors.RED, err=True
    )
    raise typer.Exit(1)


_STATE_DB = object()  # ``_guard``'s default ``db``: the global --db (state.db)


def _guard(fn, db: Any = _STATE_DB, *, also: tuple[Any, ...] = ()):
    """Run a command body; Lantern's own errors become one red line and exit code 1, never a traceback. ``db``:
    the database the command works on, named by a driver's error (``database DB: ...``; default the global
    ``--db``, else ``~/.lantern/lantern.db``): a command whose store is not the global --db gives its own (None:
    the line names none). The passwords of ``db``, of the global --db and of the ``also`` locations are scrubbed
    from every line (config.scrub: a driver may quote a URL or part of it)."""
    import sqlite3

    from lantern.config import is_server_url, redact_url, scrub
    from lantern.errors import LanternError

    location = (state.db or "~/.lantern/lantern.db") if db is _STATE_DB else db
    urls = [str(u) for u in (state.db, location, *also) if u is not None]

    def fail(message: str, about_db: bool = False) -> None:
        if about_db and location is not None:
            shown_db = redact_url(str(location)) if is_server_url(str(location)) else location
            message = f"database {shown_db}: {message}"
        _fail(scrub(message, *urls))

    try:
        return fn()
    except typer.Exit:
        raise
    except LanternError as e:
        fail(str(e))
    except sqlite3.OperationalError as e:  # locked beyond busy_timeout, read-only file, directory as --db, full disk
        from lantern.store.sqlite import write_error_words

        fail(write_error_words(None if is_server_url(str(location)) else location, e), about_db=True)
    except BrokenPipeError:  # `lantern export - | head`: the reader left; not an error of ours
        _quiet_broken_pipe()
    except OSError as e:
        fail(f"{e.strerror or e}: {getattr(e, 'filename', '') or ''}".rstrip(": "))
    except (ValueError, TypeError) as e:
        fail(str(e))
    except Exception as e:  # never a traceback for a user; LANTERN_DEBUG=1 shows it
        if os.environ.get("LANTERN_DEBUG"):
            raise
        if type(e).__module__.startswith("psycopg"):  # the PostgreSQL server refused or lost the command
            fail((str(e).strip().splitlines() or [type(e).__name__])[0], about_db=True)
        fail(f"internal error {type(e).__name__}: {e} (set LANTERN_DEBUG=1 for the traceback)")


def _quiet_broken_pipe() -> None:
    """Exit quietly after the reader of our stdout went away (``| head``): point stdout at /dev/null so the
    interpreter's final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    raise typer.Exit(0)


def _iso(value: Optional[str], option: str):
    """An ISO 8601 option value as a datetime (``Z`` allowed), None when absent; ValueError names the option."""
    from datetime import datetime

    if value is None:
        return None
    try:
        return datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{option} must be an ISO 8601 time such as 2026-03-14 or 2026-03-14T09:00:00Z, got {value!r}"
        ) from None


def _iso_option(value: Optional[str]) -> Optional[str]:
    """``--as-of`` checked when parsed: a value that is no ISO 8601 time is a usage error (exit 2, as the README
    says of out-of-range values), not a runtime error (exit 1). Returns the value as given."""
    try:
        _iso(value, "--as-of")
    except ValueError as e:
        raise typer.BadParameter(str(e).replace("--as-of must be", "must be")) from None
    return value


@app.command()
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
        callback=_utf8,
        help=(
            "Session id (default: the file name; for a directory, each file's path under it, and NAME becomes a "
            "prefix)."
        ),
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print the result as JSON (a directory: every file with its outcome)."
    ),
    user: Optional[str] = _user_option('User the turns belong to (default $LANTERN_USER, else the default user "").'),
    agent: Optional[str] = _agent_option(),
    project: Optional[str] = _project_option(),
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

    before = _before_open()

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
            _open(create=True) as lantern,
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
            counts.update(path=lantern.path, before=lantern.store.count())
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
            _print_json({k: getattr(result, k) for k in keys})  # on a terminal, C1 / bidi controls as \\uXXXX
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
        _guard(run)
    except KeyboardInterrupt:
        done = committed[0]
        if counts and isinstance(counts["path"], Path):  # a batch may have committed just before the interrupt
            from lantern.store.sqlite import entry_count

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

    before = _before_open()

    def run():
        try:
            with (
                _open(create=True) as lantern,
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
            _print_json(result.to_json())
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
        _guard(run)
    except KeyboardInterrupt:
        typer.secho(
            "interrupted: the files and batches already committed are kept; run the same command again to "
            "resume, turns already archived are skipped",
            err=True,
            fg=typer.colors.YELLOW,
        )
        raise typer.Exit(130) from None


@app.command()
def recover(
    query: Optional[str] = typer.Argument(
        None, metavar="QUERY", help="The question (not with --summary: a compaction's recovery needs none)."
    ),
    budget: int = typer.Option(6000, "--budget", "-b", min=0, help="Characters to inject."),
    session: Optional[str] = typer.Option(None, "--session", "-s", callback=_utf8, help="Only this session."),
    as_json: bool = typer.Option(
        False,
        "--json",
        help='Print {"text", "chars", "reason", "detail", "relevance", "entries": [...]}; with --rerank also '
        '"reranked", "llm_calls", "tokens_in", "tokens_out"; with --summary "loss" (always; zero counts when '
        "nothing was archived).",
    ),
    as_of: Optional[str] = typer.Option(
        None, "--as-of", callback=_iso_option, help="ISO 8601 time (naive = UTC): answer as of then."
    ),
    rerank: bool = _rerank_option(),
    llm_base_url: Optional[str] = _llm_url_option(),
    llm_model: Optional[str] = _llm_model_option(),
    min_score: Optional[float] = typer.Option(
        None,
        "--min-score",
        min=0.0,
        help="Relevance floor: inject nothing when no turn matches at least this well (best cosine, or best "
        "coverage of the query's terms; a short block up to the clear score). Default: the configured one; 0 turns "
        "the decision off (the full budget).",
    ),
    live: Optional[Path] = _live_option(),
    summary: Optional[Path] = typer.Option(
        None,
        "--summary",
        help="A compaction summary file, UTF-8 text up to 1,000,000 characters ('-': stdin; an empty file: none): "
        "recover what it and --live lost from "
        "--session (Lantern.recover_compaction) instead of answering QUERY.",
    ),
    user: Optional[str] = _user_option(),
    agent: Optional[str] = _agent_option(),
    project: Optional[str] = _project_option(),
) -> None:
    """Recover archived turns for QUERY within a character budget, or what a compaction lost (--summary)."""
    llm = _llm(rerank, llm_base_url, llm_model)
    if summary is not None:
        if query is not None:
            raise typer.BadParameter("give QUERY or --summary, not both", param_hint="QUERY")
        for given, name in ((as_of, "--as-of"), (min_score, "--min-score")):
            if given is not None:  # a compaction's block is the loss now: no past time, never held to a floor
                raise typer.BadParameter(f"{name} applies to a QUERY's recovery, not to --summary", param_hint=name)
        return _recover_compaction(summary, budget, session, as_json, live, user, agent, project, rerank, llm)
    if query is None:
        raise typer.BadParameter("missing QUERY (or --summary FILE for a compaction's recovery)", param_hint="QUERY")

    def run():
        when = _iso(as_of, "--as-of")
        exclude = _live(live)
        if not rerank and when is None and exclude is None:
            kwargs = {"session": session, "budget": budget, "agent": agent, "project": project, "min_score": min_score}
            warm = _warm("recover", {"query": query}, kwargs, user)
            if warm is not None and (as_json or warm["text"]):  # an empty block: in-process, which says why
                if as_json:
                    _print_json(warm)
                else:
                    print(_on_terminal()(warm["text"]))
                return
        with _open() as lantern, _warnings_on_stderr():
            result = lantern.recover(
                query,
                session=session,
                budget=budget,
                as_of=when,
                rerank=rerank,
                llm=llm,
                user=user,
                agent=agent,
                project=project,
                min_score=min_score,
                exclude=exclude,
            )
            if as_json:
                _print_json(result.to_json())
            elif result.text:  # a terminal gets archived control characters as visible escapes; a pipe the text as is
                print(_on_terminal()(result.text))
                if result.reason:  # a short block: the evidence was uncertain (recover/relevance.py)
                    typer.secho(
                        f"short block ({result.reason}): {result.detail}; --min-score 0 gives the full budget",
                        err=True,
                        fg=typer.colors.YELLOW,
                    )
            else:
                why = _why_empty(
                    result,
                    as_of if when is not None else None,
                    lambda: lantern.explain(
                        query,
                        session=session,
                        budget=budget,
                        user=user,
                        agent=agent,
                        project=project,
                        min_score=min_score,
                        exclude=exclude,
                    ),
                    lambda: _scope_counts(lantern, session, user, agent, project),
                    lambda b: bool(
                        lantern.explain(
                            query,
                            session=session,
                            budget=b,
                            user=user,
                            agent=agent,
                            project=project,
                            min_score=min_score,
                            exclude=exclude,
                        ).text
                    ),
                )
                typer.secho(f"nothing recovered{why}", err=True, fg=typer.colors.YELLOW)

    _guard(run)


COMPACTION_EMPTY = {
    "nothing_archived": "the session has no archived turn (ingest its transcript first, or check --session/--user)",
    "nothing_lost": "every specific of the archived turns is in the summary or the live context",
    "budget": "the budget is too small for one item",
}


def _recover_compaction(
    summary: Path,
    budget: int,
    session: Optional[str],
    as_json: bool,
    live: Optional[Path],
    user: Optional[str],
    agent: Optional[str],
    project: Optional[str],
    rerank: bool = False,
    llm: Any = None,
) -> None:
    """``recover --summary``: one call of ``Lantern.recover_compaction``."""

    def run():
        from lantern.compaction import read_summary

        text = read_summary(summary)
        if live is None and not rerank:
            kwargs = {"session": session, "budget": budget, "agent": agent, "project": project}
            warm = _warm("recover_compaction", {"summary": text}, kwargs, user)
            if warm is not None and (as_json or warm["text"]):
                if as_json:
                    _print_json(warm)
                else:
                    print(_on_terminal()(warm["text"]))
                return
        with _open() as lantern, _warnings_on_stderr():
            result = lantern.recover_compaction(
                text,
                live=_live(live),
                session=session,
                budget=budget,
                user=user,
                agent=agent,
                project=project,
                rerank=rerank,
                llm=llm,
            )
        if as_json:
            _print_json(result.to_json())
        elif result.text:
            print(_on_terminal()(result.text))
        else:
            why = COMPACTION_EMPTY.get(result.reason or "", result.reason or "")
            typer.secho(f"nothing recovered: {why}", err=True, fg=typer.colors.YELLOW)

    _guard(run)


@app.command()
def search(
    query: str = typer.Argument(..., metavar="QUERY", help="What to look for."),
    k: int = typer.Option(10, "-k", min=1, help="Results."),
    session: Optional[str] = typer.Option(
        None, "--session", "-s", callback=_utf8, help="Only this session (and its sub-sessions)."
    ),
    explain: bool = typer.Option(False, "--explain", help="Every candidate: rank per signal, RRF score, verdict."),
    budget: int = typer.Option(6000, "--budget", "-b", min=0, help="Budget used by --explain."),
    as_json: bool = typer.Option(
        False, "--json", help="Print the results as JSON (with --explain: every candidate's ranks and verdict)."
    ),
    rerank: bool = _rerank_option(),
    llm_base_url: Optional[str] = _llm_url_option(),
    llm_model: Optional[str] = _llm_model_option(),
    min_score: Optional[float] = typer.Option(
        None,
        "--min-score",
        min=0.0,
        help="Relevance floor: list nothing when no turn matches at least this well (as recover's). Default: none; "
        "with --explain, the configured one.",
    ),
    live: Optional[Path] = _live_option(),
    user: Optional[str] = _user_option(),
    agent: Optional[str] = _agent_option(),
    project: Optional[str] = _project_option(),
) -> None:
    """Search the archive (fused ranking); --explain shows why each candidate was packed or cut (with --rerank,
    the LLM's place of each beside its fused rank)."""
    llm = _llm(rerank, llm_base_url, llm_model)
    if rerank and not explain:
        raise typer.BadParameter(
            "--rerank goes with --explain (search alone shows the fused ranking)", param_hint="'--rerank'"
        )
    if live is not None and not explain:
        raise typer.BadParameter(
            "--live goes with --explain (search alone ranks every archived turn; recover takes --live too)",
            param_hint="'--live'",
        )

    def run():
        exclude = _live(live)
        with _open() as lantern, _warnings_on_stderr():
            if explain:
                cands = lantern.explain(
                    query,
                    session=session,
                    budget=budget,
                    rerank=rerank,
                    llm=llm,
                    user=user,
                    agent=agent,
                    project=project,
                    min_score=min_score,
                    exclude=exclude,
                ).candidates
                rows = [
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
                    for c in cands
                ]
            else:
                rows = [
                    {
                        "id": h.entry.id,
                        "session": h.entry.session,
                        "turn": h.entry.turn,
                        "ranks": h.ranks,
                        "score": round(h.score, 5),
                        "summary": h.entry.summary[:160],
                    }
                    for h in lantern.search(
                        query, k=k, session=session, user=user, agent=agent, project=project, min_score=min_score
                    )
                ]
        if as_json:
            _print_json(rows)
            return
        if not rows and min_score and not explain:
            typer.secho(
                f"nothing found: no archived turn matches at least --min-score {min_score:g}",
                err=True,
                fg=typer.colors.YELLOW,
            )
            return
        _print_search_table(rows, explain)

    _guard(run)


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


def _print_search_table(rows: list[dict], explain: bool) -> None:
    """The table of ``search`` / ``search --explain``, fitted to the console's width (``_fit_columns``): the summary,
    session and verdict columns wrap; on a console too narrow for every column, the low-value ones are left out
    (named under the table; --json has them all). Archived text as visible escapes on a terminal."""
    from rich.table import Table
    from rich.text import Text

    safe = _on_terminal()  # archived text (summaries, sessions) as visible escapes on a terminal
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
    console = _stdout_console()
    droppable = [*(EXPLAIN_DROPPED_FIRST if explain else ()), *(SIGNAL_COLUMNS.get(n, n) for n in reversed(signals))]
    kept, widths = _fit_columns(headers, cells, console.width, WRAPPED_FLOOR, droppable)
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


def _fit_columns(
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


@app.command()
def forget(
    entry: Optional[int] = typer.Option(None, "--entry", help="Entry id."),
    session: Optional[str] = typer.Option(None, "--session", callback=_utf8, help="Every entry of this session."),
    user: Optional[str] = typer.Option(
        None,
        "--user",
        "-u",
        callback=_utf8,
        help=(
            "Every entry of this user (with --entry/--session: only within this user). Without it, the user is "
            '$LANTERN_USER, else the default user "".'
        ),
    ),
    agent: Optional[str] = typer.Option(
        None, "--agent", callback=_utf8, help="Every entry of this agent (within the user)."
    ),
    project: Optional[str] = typer.Option(
        None, "--project", callback=_utf8, help="Every entry of this project (within the user)."
    ),
    wait: float = typer.Option(
        10.0, "--wait", min=0, help="Seconds to wait for a process reading the database before saying what remains."
    ),
) -> None:
    """Delete entries from every table, then vacuum; never crosses users.

    Every table: entries, full text, embeddings, and every table that refers to them. The vacuum rewrites the file
    so the deleted text is not left in free pages or the WAL. A process reading the database keeps the old pages
    until its read ends: forget waits for it (--wait, 10 s), else says what remains and exits 3."""
    if entry is not None and session is not None:
        _fail("give --entry or --session, not both")
    if all(x is None for x in (entry, session, user, agent, project)):
        _fail("give --entry, --session, --user, --agent or --project")

    def run():
        with _open() as lantern:
            who = user if user is not None else os.environ.get("LANTERN_USER")  # `--user ""` is the default user
            import logging

            quiet = logging.NullHandler()  # the warning api.forget logs: said below in the command's own words
            logging.getLogger("lantern").addHandler(quiet)
            try:
                n = lantern.forget(
                    entry=entry,
                    session=session,
                    user=who,
                    agent=agent,
                    project=project,
                    wait=wait,
                    on_wait=lambda erasure: _say_waiting(erasure, wait),
                )
            finally:
                logging.getLogger("lantern").removeHandler(quiet)
            if not n.erased:
                print(f"{plural(n, 'entry', 'entries')} forgotten from the index")
                server = getattr(lantern.store, "backend", "sqlite") != "sqlite"
                typer.secho(_unerased(lantern.path, n, server), err=True, fg=typer.colors.YELLOW)
                raise typer.Exit(3)
            print(f"{plural(n, 'entry', 'entries')} forgotten")
            if n == 0:  # say which filter found nothing: a mistyped id must not look like success
                what = (
                    f"entry {entry}"
                    if entry is not None
                    else f"session {session!r}"
                    if session is not None
                    else "entry"
                )
                typer.echo(f"no {what} matched" + (f" for user {who!r}" if who else ""), err=True)

    _guard(run)


@app.command()
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
        with _open() as lantern:
            before = lantern.store.file_bytes()
            erasure = lantern.store.erase_free_space(wait=wait, on_wait=lambda e: _say_waiting(e, wait))
            after = lantern.store.file_bytes()
            if not erasure.complete:
                typer.secho(
                    f"{lantern.path}: rewritten, but {_readers(erasure.holders)} still holds the old pages "
                    f"({erasure.remaining_bytes:,} bytes); the next lantern command on this database after its read "
                    "ends finishes the vacuum",
                    err=True,
                    fg=typer.colors.YELLOW,
                )
                raise typer.Exit(3)
            print(f"{lantern.path}: {before:,} -> {after:,} bytes")

    _guard(run)


def _readers(holders: Any) -> str:
    return ", ".join(f"process {pid} ({name})" for pid, name in holders) or "another connection to it"


def _say_waiting(erasure: Any, wait: float) -> None:
    typer.echo(f"waiting up to {wait:g} s for {_readers(erasure.holders)} to finish reading the database...", err=True)


def _unerased(path: Any, n: Any, server: bool = False) -> str:
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
        f"until {_readers(n.holders)} ends its read transaction or closes the database; the next lantern command "
        "on this database after that finishes the erase"
    )


@app.command()
def export(
    file: str = typer.Argument(..., metavar="FILE|-", help="Output JSONL file, or - for stdout."),
    session: Optional[str] = typer.Option(
        None, "--session", "-s", callback=_utf8, help="Only this session (and its sub-sessions)."
    ),
    user: Optional[str] = _user_option("Only this user's entries (default $LANTERN_USER, else EVERY user: a backup)."),
    agent: Optional[str] = typer.Option(None, "--agent", callback=_utf8, help="Only this agent's entries."),
    project: Optional[str] = typer.Option(None, "--project", callback=_utf8, help="Only this project's entries."),
    embeddings: bool = typer.Option(
        True, "--embeddings/--no-embeddings", help="Include the embeddings (base64 float32)."
    ),
) -> None:
    """Export entries as JSONL: a header (format version, embedder), then one record per entry."""

    def run():
        with _open() as lantern:
            if file == "-":
                n = lantern.export(
                    sys.stdout, session=session, user=user, agent=agent, project=project, embeddings=embeddings
                )
            else:
                n = lantern.export(
                    Path(file), session=session, user=user, agent=agent, project=project, embeddings=embeddings
                )
        typer.echo(f"{plural(n, 'entry', 'entries')} exported", err=True)

    _guard(run)


@app.command("import")
def import_(
    file: str = typer.Argument(..., metavar="FILE|-", help="A JSONL export (lantern export), or - for stdin."),
    user: Optional[str] = typer.Option(
        None,
        "--user",
        "-u",
        callback=_utf8,
        help=(
            "Put every entry into this user (default: the users recorded in the file; $LANTERN_USER is NOT used here, "
            "so "
            "a multi-user backup is never folded into one user by accident)."
        ),
    ),
    agent: Optional[str] = typer.Option(None, "--agent", callback=_utf8, help="Put every entry under this agent."),
    project: Optional[str] = typer.Option(
        None, "--project", callback=_utf8, help="Put every entry under this project."
    ),
    embeddings: bool = typer.Option(
        True, "--embeddings/--no-embeddings", help="Use the recorded embeddings, or recompute them (another embedder)."
    ),
) -> None:
    """Import a JSONL export; importing twice adds nothing.

    One transaction per 256 lines; entries already stored (same content hash) are skipped, a stored turn a record
    grew from is replaced (grown); a bad line is an error
    naming it, and nothing of its batch is written."""

    before = _before_open()

    def run():
        try:
            with _open(create=True) as lantern:
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

    _guard(run)


@app.command()
def copy(
    src: str = typer.Argument(..., help="The store to copy from: a SQLite file or a postgresql:// URL."),
    dst: str = typer.Argument(..., help="The store to copy into (created when missing), file or URL."),
    as_json: bool = typer.Option(False, "--json", help="Print the counts as one JSON object."),
) -> None:
    """Copy every entry (scopes, embeddings, facts, reinforcement state) between stores, SQLite <-> PostgreSQL.

    Entries already in DST are skipped: a copy stopped part way resumes when run again. The counts are verified
    after the copy (every source entry is in DST with its embedding). Compaction events are copied with their
    entry ids mapped to DST's.

    A copy onto itself (the same file or server database, by any path or URL) is refused. Errors name SRC or DST."""
    from rich.console import Console

    from lantern.config import is_server_url, redact_url

    console = Console(stderr=True)  # the bar on stderr, as ingest draws it

    def shown_location(location: str) -> str:
        return redact_url(location) if is_server_url(location) else location

    def run():
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

        from lantern.api import copy_store

        with Progress(
            TextColumn("copying"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.completed} entries"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=as_json or not console.is_terminal,
        ) as bar:
            task = bar.add_task("copy", total=None)
            counts = copy_store(
                src if is_server_url(src) else Path(src),
                dst if is_server_url(dst) else Path(dst),
                progress=lambda done, total: bar.update(task, completed=done, total=total),
            )
        if as_json:
            _print_json(counts)
        else:
            print(
                f"{shown_location(src)} -> {shown_location(dst)}: {plural(counts['entries'], 'entry', 'entries')} "
                f"verified, {counts['added']} copied, "
                + (f"{counts['grown']} grown (replacing the turn they extend), " if counts["grown"] else "")
                + f"{counts['duplicates']} already there; "
                f"{plural(counts['events'], 'compaction event', 'compaction events')}, {counts['events_added']} copied"
            )

    _guard(run, None, also=(src, dst))  # copy_store names SRC or DST in its errors


@app.command()
def stats(
    as_json: bool = typer.Option(False, "--json", help="Print the statistics as one JSON object."),
    user: Optional[str] = typer.Option(
        None,
        "--user",
        "-u",
        callback=_utf8,
        help='Count this user\'s entries (default $LANTERN_USER, else the default user "").',
    ),
    agent: Optional[str] = _agent_option(),
    project: Optional[str] = _project_option(),
    all_users: bool = typer.Option(
        False, "--all-users", help="Count every user's entries (an administrator's view; not with --user)."
    ),
) -> None:
    """Entries, sessions, embedder, sizes: of one user, or of every user with --all-users."""
    if all_users and (user is not None or agent is not None or project is not None):
        _fail("--all-users counts every user: give no --user, --agent or --project with it")

    def run():
        with _open() as lantern:
            if all_users:
                s = lantern.stats(all_users=True)
            else:  # `--user ""` is the default user, as in forget
                who = user if user is not None else os.environ.get("LANTERN_USER")
                s = lantern.stats(user=who, agent=agent, project=project)
        if as_json:
            print(json.dumps(s))
        else:
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
                shown = '"" (the default user)' if key == "user" and value == "" else value
                print(f"{key:>{width}}: {shown}")

    _guard(run)


@app.command()
def facts(
    key: Optional[str] = typer.Argument(
        None, metavar="KEY", callback=_utf8, help="One key (normalized: case, 'the', 的, _ . - ignored); default all."
    ),
    as_of: Optional[str] = typer.Option(
        None, "--as-of", callback=_iso_option, help="ISO 8601 time (naive = UTC): the values valid then."
    ),
    history: bool = typer.Option(False, "--history", help="Every version, not only the valid one."),
    as_json: bool = typer.Option(False, "--json", help="Print the FactRecord rows as JSON."),
    user: Optional[str] = _user_option(),
    agent: Optional[str] = _agent_option(),
    project: Optional[str] = _project_option(),
) -> None:
    """Versioned facts extracted from the archive: current values, as of a time, or their history."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    def run():
        when = _iso(as_of, "--as-of")
        with _open() as lantern:
            rows = lantern.facts(key, when, history=history, user=user, agent=agent, project=project)
        if as_json:
            _print_json([r.to_json() for r in rows])
            return
        if not rows:
            typer.secho("no facts", err=True, fg=typer.colors.YELLOW)
            return
        safe = _on_terminal()  # archived keys, values and sessions as visible escapes on a terminal
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
        Console(width=max(Console().width, 120)).print(table)

    _guard(run)


@app.command()
def events(
    session: Optional[str] = typer.Option(
        None, "--session", "-s", callback=_utf8, help="Only this session's events (and its parent sessions')."
    ),
    limit: int = typer.Option(50, "--limit", "-n", min=1, help="At most this many, newest first."),
    as_json: bool = typer.Option(False, "--json", help="Print the events as JSON."),
    user: Optional[str] = _user_option(),
    agent: Optional[str] = _agent_option(),
    project: Optional[str] = _project_option(),
) -> None:
    """Compaction events: when a compaction was detected (proxy, hooks, API), the turns it lost, what was injected.

    Each event names its session, how it was detected, the lost entries (recovered: injected again; not recovered),
    the injected entries and characters, the latency, and why nothing was injected when nothing was.

    Under the table: what each compaction's summary lost, by type, and the specifics that came back, each with its
    turn. `lantern ui` shows them on the session's timeline."""
    from rich.markup import escape
    from rich.table import Table

    from lantern.model import loss_lines

    def run():
        kwargs = {"session": session, "limit": limit, "agent": agent, "project": project}
        warm = _warm("events", {}, kwargs, user)
        if warm is not None:
            from datetime import datetime
            from types import SimpleNamespace

            rows = [SimpleNamespace(**{**r, "time": datetime.fromisoformat(r["time"])}) for r in warm]
        else:
            with _open() as lantern:
                rows = lantern.events(session, limit=limit, user=user, agent=agent, project=project)
        if as_json:
            _print_json(warm if warm is not None else [r.to_json() for r in rows])
            return
        if not rows:
            typer.secho("no compaction events", err=True, fg=typer.colors.YELLOW)
            return
        safe = _on_terminal()
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
        console = _stdout_console()
        console.print(table)
        for r in rows:
            for line in loss_lines(r.loss, head=f"event {r.id}: "):
                console.print(escape(safe(line)), soft_wrap=True, highlight=False)

    _guard(run)


@app.command()
def feedback(
    ctx: typer.Context,
    ids: list[int] = typer.Argument(..., metavar="ID", help="Entry ids (as shown by recover --json or search)."),
    useful: Optional[bool] = typer.Option(
        None,
        "--useful/--not-useful",
        show_default=False,
        help="Whether the recovered entries helped (one of the two is required).",
    ),
    user: Optional[str] = _user_option(
        'Only this user\'s entries are updated (default $LANTERN_USER, else the default user "").'
    ),
    agent: Optional[str] = typer.Option(
        None, "--agent", callback=_utf8, help="Only this agent's entries are updated (default any)."
    ),
    project: Optional[str] = typer.Option(
        None, "--project", callback=_utf8, help="Only this project's entries are updated (default any)."
    ),
) -> None:
    """Tell Lantern whether recovered entries were useful (updates their success rate σ; reinforce.py)."""
    if useful is None:
        ctx.fail("give --useful or --not-useful")

    def run():
        with _open() as lantern:
            n = lantern.feedback(ids, useful, user=user, agent=agent, project=project)
            asked = list(dict.fromkeys(ids))
            missing = _outside_scope(lantern, asked, user, agent, project) if n < len(asked) else []
        print(f"{plural(n, 'entry', 'entries')} marked {'useful' if useful else 'not useful'}")
        if missing:
            scope = (
                ("this user" if user is None else f"user {user!r}")
                + (f" under agent {agent!r}" if agent is not None else "")
                + (f" in project {project!r}" if project is not None else "")
            )
            if len(missing) == 1:
                line = f"entry {missing[0]} is not an entry of {scope}; nothing changed for it"
            else:
                listed = ", ".join(map(str, missing[:10])) + (", …" if len(missing) > 10 else "")
                line = f"{len(missing)} of the ids are not entries of {scope} ({listed}); nothing changed for them"
            typer.secho(f"warning: {line}", err=True, fg=typer.colors.YELLOW)

    _guard(run)


def _outside_scope(lantern, ids: list[int], user, agent, project) -> list[int]:
    """Which of ``ids`` name no entry inside the scope (one query; for the warning of ``feedback``)."""
    from lantern.scope import resolve

    valid = [i for i in ids if -(2**63) <= i < 2**63]
    inside = lantern.store.places(valid, resolve(lantern.scope, user, agent, project))
    return [i for i in ids if i not in inside]


@app.command()
def reindex(
    embedder: Optional[str] = typer.Option(
        None,
        "--embedder",
        callback=_embedder_name,
        help="routed, routed-v1, minilm, use or e5 (default: the current one).",
    ),
    fill: bool = typer.Option(
        False, "--fill", help="Only compute the vector parts still missing (the e5 part of English turns)."
    ),
) -> None:
    """Re-embed every entry (after changing the embedder); --fill only computes the e5 part of the entries that
    lack it, which ingest, the servers and recoveries otherwise do a little at a time."""
    from rich.console import Console
    from rich.progress import Progress

    console = Console(stderr=True)  # the bar on stderr, and none (nor its empty line) when that is not a terminal
    if embedder and state.embedder and embedder != state.embedder:  # `--embedder use reindex --embedder routed`
        raise typer.BadParameter(
            f"the global --embedder {state.embedder} and reindex --embedder {embedder} differ; give the target once",
            param_hint="--embedder",
        )

    def run():  # _open: a missing path or a zero-byte file is refused, never made a database
        # opened with its own embedder: the global --embedder, when given, is the target (opened with the target,
        # `lantern --embedder e5 reindex` would fail with the mismatch error the command exists to resolve)
        with _open(own_embedder=True) as lantern:
            if fill:
                with Progress(transient=True, console=console, disable=not console.is_terminal) as bar:
                    task = bar.add_task("filling", total=None)
                    n = lantern.fill_vectors(progress=lambda d, t: bar.update(task, completed=d, total=t))
                print(f"{plural(n, 'entry', 'entries')} given their missing vector part")
                return
            with Progress(transient=True, console=console, disable=not console.is_terminal) as bar:
                task = bar.add_task("re-embedding", total=None)
                n = lantern.reindex(
                    embedder or state.embedder, progress=lambda d, t: bar.update(task, completed=d, total=t)
                )
                lantern.build_graphs()  # a large store's HNSW graphs, saved with the snapshot: no command waits
            print(f"{plural(n, 'entry', 'entries')} re-embedded with {lantern.embedder.id}")  # after the bar: on stdout

    _guard(run)


@app.command()
def chat(
    session: str = typer.Option("chat", "--session", "-s", callback=_utf8, help="Session the turns are archived in."),
    once: Optional[str] = typer.Option(None, "--once", metavar="QUESTION", help="Ask one question, answer, exit."),
    system: Optional[str] = typer.Option(None, "--system", help="System prompt (default: the agent's)."),
    budget: int = typer.Option(16000, "--budget", "-b", min=1, help="Characters of the whole context sent."),
    top_k: int = typer.Option(2, "--top-k", min=1, help="Recovered entries per turn."),
    rerank: bool = typer.Option(False, "--rerank", help="LANTERN-Rerank each recovery (one more LLM call)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per answer (answer, recovery, costs)."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", min=1, help="Cap of each answer (default 256)."),
    llm_base_url: Optional[str] = _llm_url_option(),
    llm_model: Optional[str] = _llm_model_option(),
    user: Optional[str] = _user_option("User id the turns belong to (default $LANTERN_USER)."),
) -> None:
    """Chat with the configured LLM over Lantern's memory: every turn archived; when a question refers back or the
    draft answer is unsure, lost turns are recovered and the answer regenerated (shown on stderr: which cue).
    Questions come from --once, else one per line on stdin (interactive on a terminal). Needs an LLM endpoint;
    it receives the conversation and what is recovered."""
    from lantern.llm import settings

    try:
        llm = settings(None, llm_base_url, llm_model)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="'--llm-model'") from None
    if llm is None:
        raise typer.BadParameter(
            "chat needs an LLM endpoint: give --llm-base-url URL and --llm-model NAME", param_hint="'--llm-base-url'"
        )

    def run():
        from lantern.memory.agent import SYSTEM_PROMPT, MemoryAgent
        from lantern.scope import resolve

        interactive = once is None and sys.stdin.isatty()
        with _open(create=True) as lantern, _warnings_on_stderr():
            if user is not None:
                lantern.scope = resolve(lantern.scope, user, None, None)
            agent = MemoryAgent(
                lantern,
                session,
                llm,
                system_prompt=system if system is not None else SYSTEM_PROMPT,
                budget=budget,
                top_k=top_k,
                rerank=rerank,
                max_tokens=max_tokens,
            )
            questions = [once] if once is not None else _questions(interactive)
            for question in questions:
                if not question.strip():
                    continue
                turn = agent.ask(question)
                if as_json:
                    _print_json(turn.to_json())
                    continue
                print(_on_terminal()(turn.answer), flush=True)
                typer.secho(_recovery_line(turn), err=True, fg=typer.colors.CYAN)

    _guard(run)


def _questions(interactive: bool):
    """Questions read from stdin, one per line; on a terminal with a ``you> `` prompt, until EOF or Ctrl-C."""
    while True:
        try:
            line = input("you> ") if interactive else sys.stdin.readline()
        except (EOFError, KeyboardInterrupt):
            return
        if not interactive and not line:
            return
        yield line.rstrip("\n")


def _recovery_line(turn) -> str:
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


@app.command()
def demo(
    db: Optional[str] = typer.Option(
        None,
        "--demo-db",
        callback=_sqlite_only,
        help="Where to build the demo database, a SQLite file (default: a temp dir).",
    ),
    show_block: bool = typer.Option(
        False, "--show-block/--no-show-block", help="Also print each injected block, after its session's story."
    ),
) -> None:
    """Archive real aider sessions, compact them, and show what each compaction lost and what recovery brought
    back (one line per fact), then the figures. No network, no LLM."""
    from lantern.demo import run as run_demo

    _guard(lambda: run_demo(_db_location(db), show_block=show_block, console=_stdout_console()), db or None)


def _missing_extra(command: str, extra: str, error: object) -> str:
    from lantern.errors import install_command

    command_line = install_command(extra)
    return f"lantern {command} needs the {extra} extra ({error}). Install it into this environment: {command_line}"


@app.command()
def mcp() -> None:
    """Run the MCP server on stdio (tools archive, recover, search, forget, feedback, stats); needs the `mcp` extra."""
    try:
        from lantern.integrations.mcp import serve
    except ImportError as e:
        _fail(_missing_extra("mcp", "mcp", e))
    _guard(lambda: serve(state.db, state.embedder))


@app.command()
def serve(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind (loopback by default)."),
    port: int = typer.Option(8765, "--port", "-p", min=1, max=65535, help="Port to listen on."),
    token: Optional[str] = typer.Option(
        None, "--token", envvar="LANTERN_TOKEN", help="Require Authorization: Bearer TOKEN."
    ),
    max_body_bytes: int = typer.Option(
        8 * 1024 * 1024, "--max-body-bytes", min=1, help="Larger request bodies get 413."
    ),
    upstream: Optional[str] = typer.Option(
        None,
        "--upstream",
        envvar="LANTERN_UPSTREAM",
        help="OpenAI-compatible base URL (e.g. https://api.openai.com/v1): proxy /v1/chat/completions and /v1/* to it.",
    ),
    upstream_timeout: float = typer.Option(
        600.0, "--upstream-timeout", min=0.001, help="Seconds before an upstream call gets 504."
    ),
    upstream_key: Optional[str] = typer.Option(
        None,
        "--upstream-key",
        envvar="LANTERN_UPSTREAM_KEY",
        help="Send upstream as Authorization: Bearer KEY (default: forward the client's; needed with --token).",
    ),
    upstream_key_file: Optional[Path] = typer.Option(
        None,
        "--upstream-key-file",
        envvar="LANTERN_UPSTREAM_KEY_FILE",
        help="Read --upstream-key from this file (not visible in ps).",
    ),
    token_file: Optional[Path] = typer.Option(
        None, "--token-file", envvar="LANTERN_TOKEN_FILE", help="Read --token from this file (not visible in ps)."
    ),
    rerank: bool = typer.Option(
        False,
        "--rerank",
        help="LANTERN-Rerank for the proxy's compaction recoveries: through --llm-base-url, else through the "
        "upstream with each request's model.",
    ),
    llm_base_url: Optional[str] = _llm_url_option(),
    llm_model: Optional[str] = _llm_model_option(),
) -> None:
    """Serve the memory REST API (/v1/memory/...; OpenAPI at /docs) and, with --upstream, the OpenAI-compatible
    chat-completions proxy that archives turns and re-injects what a compaction lost; needs the `proxy` extra."""
    token = _secret(ctx, "token", token, token_file)
    upstream_key = _secret(ctx, "upstream_key", upstream_key, upstream_key_file)
    try:
        from lantern.integrations.proxy import serve as serve_api
    except ImportError as e:
        _fail(_missing_extra("serve", "proxy", e))
    from lantern.integrations.service import is_loopback

    if token is None and not is_loopback(host):
        typer.secho(
            f"warning: serving {host} without --token: anyone who reaches it can read the archive",
            err=True,
            fg=typer.colors.YELLOW,
        )
    if token is not None and upstream and not upstream_key:
        typer.secho(
            "warning: with --token the client's Authorization header is not forwarded; set --upstream-key "
            "(or $LANTERN_UPSTREAM_KEY) if the upstream needs a key",
            err=True,
            fg=typer.colors.YELLOW,
        )
    if upstream is not None and not upstream.startswith(("http://", "https://")):
        _fail(f"--upstream must be an http(s) URL, got {upstream!r}")
    rerank_llm = _proxy_rerank(rerank, llm_base_url, llm_model, upstream)
    docs = "docs /docs" if token is None else "no /docs or /openapi.json with --token"
    typer.echo(f"lantern memory API on http://{host}:{port}/v1/memory ({docs})", err=True)
    if upstream:
        typer.echo(f"chat-completions proxy: OPENAI_BASE_URL=http://{host}:{port}/v1 -> {upstream}", err=True)
    _guard(
        lambda: serve_api(
            state.db,
            state.embedder,
            host=host,
            port=port,
            token=token,
            max_body_bytes=max_body_bytes,
            upstream=upstream,
            upstream_timeout=upstream_timeout,
            upstream_key=upstream_key,
            rewound=state.rewound or "skip",
            rerank=rerank_llm,
        )
    )


def _proxy_rerank(rerank: bool, base_url: Optional[str], model: Optional[str], upstream: Optional[str]):
    """``serve``'s rerank endpoint: the LLM settings given (options, environment), else the upstream itself
    (``proxy.UPSTREAM``); None without --rerank. A usage error when --rerank has neither."""
    if not rerank:
        return None
    from lantern.llm import settings

    try:
        chosen = settings(None, base_url, model)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="'--llm-model'") from None
    if chosen is not None:
        return chosen
    if upstream:
        from lantern.integrations.proxy import UPSTREAM

        return UPSTREAM
    raise typer.BadParameter(
        "--rerank needs an LLM endpoint: --upstream URL, or --llm-base-url URL and --llm-model NAME",
        param_hint="'--rerank'",
    )


@app.command()
def ui(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind (loopback; another needs --token)."),
    port: int = typer.Option(8766, "--port", "-p", min=1, max=65535, help="Port to listen on."),
    token: Optional[str] = typer.Option(
        None, "--token", envvar="LANTERN_UI_TOKEN", help="Require this token (open /?token=TOKEN once)."
    ),
    token_file: Optional[Path] = typer.Option(
        None, "--token-file", envvar="LANTERN_UI_TOKEN_FILE", help="Read --token from this file (not visible in ps)."
    ),
    open_browser: bool = typer.Option(False, "--open", help="Open the inspector in the default browser."),
) -> None:
    """Inspect the memory in a browser: sessions, timelines, compaction events, explain, facts, stats, forget.

    A local web app on 127.0.0.1 (no network, no script); needs the `ui` extra. Another interface needs --token."""
    from lantern.integrations.service import is_loopback

    token = _secret(ctx, "token", token, token_file)

    if token is None and not is_loopback(host):
        _fail(f"--host {host} needs --token: the inspector shows the whole archive to whoever reaches it")
    try:
        from lantern.integrations.ui import serve as serve_ui
    except ImportError as e:
        _fail(_missing_extra("ui", "ui", e))

    def run():
        from lantern.config import default_db_path, redact_url
        from lantern.errors import LanternError

        path = state.db or default_db_path()
        if isinstance(path, str):  # a server URL: opened here so that its backend can refuse the inspector
            from lantern.api import Lantern

            with Lantern(path, embedder=state.embedder) as lantern:
                lantern.require("lantern ui")
        elif not path.exists() or _empty_file(path):
            raise LanternError(
                f"no database at {redact_url(str(path))}: archive something first (lantern ingest FILE), "
                "or lantern demo"
            )
        shown_host = f"[{host}]" if ":" in host else host
        url = f"http://{shown_host}:{port}/"
        login = " (with --token: open /?token=TOKEN once, or log in on the page)" if token else ""
        typer.echo(f"lantern inspector on {url}{login}; Ctrl-C stops it", err=True)
        if open_browser:
            import webbrowser
            from urllib.parse import quote

            webbrowser.open(url + (f"?token={quote(token)}" if token else ""))
        serve_ui(path, state.embedder, host=host, port=port, token=token)

    _guard(run)


@app.command("eval")
def eval_(
    dataset: str = typer.Argument(
        ...,
        metavar="DATASET",
        help="realcompact (real Claude Code compactions), locomo, memdaily, aider (look-ahead facts) or jsonl "
        "(docs/eval-format.md).",
    ),
    data: Path = typer.Option(..., "--data", help="The dataset file or folder (read only)."),
    out: Path = typer.Option(..., "--out", help="Output folder: results.json, facts.jsonl, report.md, PNG plots."),
    split: str = typer.Option("report", "--split", help="tune, report or all (never tune on report)."),
    budget: int = typer.Option(6000, "--budget", help="Characters injected, the same for every system."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Evaluate at most N histories of the split."),
    keep: Optional[int] = typer.Option(
        None, "--keep", help="Turns the compaction keeps verbatim (default 20; aider 4)."
    ),
    compaction: Optional[str] = typer.Option(
        None,
        "--compaction",
        help="truncation (default), gist (aider's default), session_summary (LoCoMo) or llm_summary.",
    ),
    system: Optional[list[str]] = typer.Option(None, "--system", help="Systems to run (repeatable; default all)."),
    cache: Optional[Path] = typer.Option(
        None, "--cache", help="Archive cache folder (default $LANTERN_EVAL_CACHE or ~/.cache/lantern/eval)."
    ),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="Write PNG plots (matplotlib)."),
    budgets: str = typer.Option(
        "1000,2000,3000,6000,9000,12000",
        "--budgets",
        help="Budget curve points in characters, comma-separated ('' skips).",
    ),
    ratios: str = typer.Option(
        "0.25,0.5,0.75,0.9",
        "--ratios",
        help="Compaction-ratio curve points (share of turns compacted), comma-separated ('' skips).",
    ),
    llm_base_url: Optional[str] = typer.Option(
        None,
        "--llm-base-url",
        help=(
            "OpenAI-compatible endpoint (…/v1) for the llm_summary compaction, or with --qa for the answers; key "
            "from $LANTERN_LLM_API_KEY."
        ),
    ),
    llm_model: Optional[str] = typer.Option(None, "--llm-model", help="Model name for --llm-base-url."),
    qa: bool = typer.Option(
        False,
        "--qa",
        help=(
            "Also measure answer accuracy: the LLM answers each lost fact from the compacted context, + Lantern, "
            "+ LANTERN-Rerank, the full history, + MemGPT-Faithful (docs/evaluation.md)."
        ),
    ),
    qa_limit: Optional[int] = typer.Option(
        None, "--qa-limit", min=1, help="With --qa: at most N questions per history (evenly spaced)."
    ),
    qa_context_chars: int = typer.Option(
        12_000,
        "--qa-context-chars",
        min=0,
        help="With --qa: the full-history condition applies when the history has at most this many characters.",
    ),
    qa_calibration: int = typer.Option(
        10,
        "--qa-calibration",
        min=1,
        help=(
            "With --qa: build the judge's calibration (answers whose verdict is known) from N of the dataset's "
            "questions; the judge column is reported only when it passes (docs/evaluation.md)."
        ),
    ),
    second_embedder: Optional[str] = typer.Option(
        None,
        "--second-embedder",
        callback=_embedder_name,
        help=(
            "Also build stores with this embedder (e.g. use) and add lantern+<id>: its semantic ranking as a fifth "
            "RRF signal."
        ),
    ),
    min_score: Optional[float] = typer.Option(
        None,
        "--min-score",
        min=0.0,
        help="Relevance floor of the pipeline systems' questions (default: the configured one; 0 turns it off). "
        "The report's floor sweep shows every floor at or above it, read off the stored scores.",
    ),
    workers: Optional[int] = typer.Option(
        None,
        "--workers",
        min=1,
        help=(
            "Processes the per-history jobs run in (default: the usable CPUs, at most 8; 1: this process). Same "
            "numbers either way."
        ),
    ),
    fit: bool = typer.Option(
        False,
        "--fit",
        help="realcompact: also refit the loss model's weights (fit.json) and report them leave-one-repository-out.",
    ),
) -> None:
    """Measure fact recovery after compaction on a dataset: Lantern vs ablations and baselines, paired statistics.
    Needs the `eval` extra (scipy, matplotlib); without it the command prints the one that installs it."""
    from lantern.eval.datasets import DATASETS

    if dataset not in DATASETS:  # a usage error first: no extra makes an unknown name work
        raise typer.BadParameter(f"unknown dataset {dataset!r}; one of {', '.join(DATASETS)}", param_hint="DATASET")
    missing = [m for m in ("scipy", *(("matplotlib",) if plots else ())) if not _importable(m)]
    try:
        from lantern.eval.run import main as run_eval
    except ImportError as e:  # scipy / matplotlib are the `eval` extra
        missing.append(str(e))
    if missing:  # checked before any work: the statistics and plots come last, after minutes of recovery
        _fail(_missing_extra("eval", "eval", ", ".join(missing)))

    if dataset == "realcompact":
        return _eval_realcompact(data, out, limit, system, fit, workers)

    def run() -> None:
        try:
            results = run_eval(
                dataset,
                data,
                out,
                split=split,
                budget=budget,
                limit=limit,
                keep=keep,
                compaction=compaction,
                systems=system or None,
                embedder=state.embedder,
                cache_dir=cache,
                plots=plots,
                budgets=[int(x) for x in budgets.split(",") if x.strip()],
                ratios=[float(x) for x in ratios.split(",") if x.strip()],
                llm_base_url=llm_base_url,
                llm_model=llm_model,
                second_embedder=second_embedder,
                workers=workers,
                qa=qa,
                qa_limit=qa_limit,
                qa_context_chars=qa_context_chars,
                qa_calibration=qa_calibration,
                command="lantern " + shlex.join(sys.argv[1:]),
                min_score=min_score,
            )
        except ValueError as e:
            _fail(str(e))
        except KeyboardInterrupt:
            typer.secho(
                f"interrupted: nothing was written to {out}; the archive cache keeps the histories already "
                "built, so the same command starts faster",
                err=True,
                fg=typer.colors.YELLOW,
            )
            raise typer.Exit(130) from None
        head = results["systems"].get("lantern", next(iter(results["systems"].values())))["overall"]
        typer.echo(
            f"{head['n']} lost facts; lantern recovered {100 * head['recovered']:.1f}%, recall@10 "
            f"{head['recall@10']:.3f}"
        )
        if results.get("qa"):
            cond = results["qa"]["conditions"]
            calibration = results["qa"].get("judge_calibration")
            if calibration is not None and not calibration["reported"]:
                typer.echo(f"judge not reported: {calibration['reason']}")
                typer.echo("answer F1: " + ", ".join(f"{c} {cond[c]['f1']:.3f} (n={cond[c]['n']})" for c in cond))
            else:
                typer.echo(
                    "answer accuracy: "
                    + ", ".join(f"{c} {100 * cond[c]['correct']:.1f}% (n={cond[c]['n']})" for c in cond)
                )
        typer.echo(f"wrote {out / 'report.md'} and {out / 'results.json'}")

    # its stores are in the archive cache (eval/run.py default_cache_dir), not at the global --db
    _guard(run, cache or os.environ.get("LANTERN_EVAL_CACHE") or "~/.cache/lantern/eval")


def _eval_realcompact(
    data: Path, out: Path, limit: Optional[int], system: Optional[list[str]], fit: bool, workers: Optional[int]
) -> None:
    """``eval realcompact``: one call of ``lantern.eval.realcompact.main``."""
    from rich.console import Console
    from rich.progress import Progress

    from lantern.eval.realcompact import main as run_realcompact

    console = Console(stderr=True)

    def run() -> None:
        with Progress(transient=True, console=console, disable=not console.is_terminal) as bar:
            task = bar.add_task("compactions", total=None)
            table = run_realcompact(
                data,
                out,
                limit=limit,
                systems=system or None,
                fit=fit,
                workers=workers,
                command="lantern " + shlex.join(sys.argv[1:]),
                progress=lambda done, total: bar.update(task, completed=done, total=total),
            )
        mid = table["budgets"][4000]["systems"]
        typer.echo(
            f"{table['events']} compactions, {table['facts']} lost facts; at 4,000 characters "
            + ", ".join(f"{name} {row['macro']:.1f}%" for name, row in mid.items())
        )
        typer.echo(f"wrote {out / 'report.md'} and {out / 'results.json'}")

    _guard(run)


hook_app = typer.Typer(no_args_is_help=True, help="Hook entry points that agents run (stdin JSON -> stdout JSON).")
install_app = typer.Typer(no_args_is_help=True, help="Install Lantern's hooks into an agent's settings.")
app.add_typer(hook_app, name="hook")
app.add_typer(install_app, name="install")


@hook_app.command("claude-code")
def hook_claude_code() -> None:
    """Claude Code hook: reads the hook JSON on stdin; archives on PreCompact/Stop, injects recovered turns on
    SessionStart(compact) and back-referencing prompts. Always exits 0 (errors go to ~/.lantern/logs/)."""
    from lantern.integrations.claude_code import main as hook_main

    raise typer.Exit(hook_main(state.db, rewound=state.rewound))


def _uninstall_option() -> Any:
    return typer.Option(False, "--uninstall", help="Remove Lantern's hooks only.")


def _pinned_db_option() -> Any:
    """``install``'s ``--db``: the database pinned in the hook command."""
    return typer.Option(
        None,
        "--db",
        help=(
            "Database the hooks write to, pinned in the hook command (default: the global --db, else $LANTERN_DB at "
            "install time; with neither, the hooks use $LANTERN_DB or ~/.lantern/lantern.db when they run)."
        ),
    )


@install_app.command("claude-code")
def install_claude_code(
    user: bool = typer.Option(False, "--user", help="~/.claude/settings.json instead of the project's."),
    project: bool = typer.Option(False, "--project", help=".claude/settings.json of the current directory (default)."),
    uninstall: bool = _uninstall_option(),
    db: Optional[str] = _pinned_db_option(),
) -> None:
    """Write Lantern's hooks into Claude Code's settings.json, merged with the hooks already there."""
    from lantern.integrations.claude_code_settings import install

    if user and project:
        _fail("give at most one of --project or --user")

    def run():
        pinned = _db_location(db) or state.db
        path, changed = install("user" if user else "project", uninstall=uninstall, db=pinned, rewound=state.rewound)
        _installed(path, changed, uninstall, pinned)

    _guard(run)


def _installed(path: Path, changed: bool, uninstall: bool, pinned: Any) -> None:
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


@hook_app.command("codex")
def hook_codex() -> None:
    """Codex hook: reads the hook JSON on stdin; archives the rollout on PreCompact/Stop/PostCompact, injects what
    the compaction lost on SessionStart(compact) and what a later prompt asks for on UserPromptSubmit. Always exits 0
    (errors go to ~/.lantern/logs/codex.log)."""
    from lantern.integrations.codex import main as hook_main

    raise typer.Exit(hook_main(state.db))


@install_app.command("codex")
def install_codex(
    user: bool = typer.Option(False, "--user", help="$CODEX_HOME/hooks.json (default ~/.codex/hooks.json)."),
    project: bool = typer.Option(False, "--project", help=".codex/hooks.json of the current directory (default)."),
    uninstall: bool = _uninstall_option(),
    db: Optional[str] = _pinned_db_option(),
) -> None:
    """Write Lantern's hooks into Codex's hooks.json, merged with the hooks already there. Codex runs a new hook
    only once you trust it (/hooks in Codex)."""
    from lantern.integrations.claude_code_settings import install_codex as install

    if user and project:
        _fail("give at most one of --project or --user")

    def run():
        pinned = _db_location(db) or state.db
        path, changed = install("user" if user else "project", uninstall=uninstall, db=pinned)
        _installed(path, changed, uninstall, pinned)
        if changed and not uninstall:
            print("in Codex, open /hooks and trust the new hooks: Codex runs a hook only once it is trusted")

    _guard(run)


def _flowed(doc: str, markup: bool) -> str:
    """A docstring as command help: each paragraph's lines joined into one line, paragraphs kept. Typer (rich markup
    mode) keeps the single line breaks of the source in the command list of ``lantern --help`` and in every
    paragraph after the first, so a docstring wrapped at 120 columns would print stray line breaks mid-sentence.
    ``markup``: the help is read as rich markup, where ``[eval]`` is a style tag and would vanish
    from ``pip install 'lantern-memory[eval]'``: such a bracket is escaped."""
    import inspect
    import re

    text = "\n\n".join(
        " ".join(line.strip() for line in paragraph.splitlines()) for paragraph in inspect.cleandoc(doc).split("\n\n")
    )
    return re.sub(r"\[(?=[A-Za-z#/@])", r"\\[", text) if markup else text


def _flow_help(*typers: typer.Typer) -> None:
    """Give every command of ``typers`` its docstring ``_flowed`` as its help (a help given explicitly is kept)."""
    for group in typers:
        for info in group.registered_commands:
            if info.help is None and info.callback is not None and info.callback.__doc__:
                info.help = _flowed(info.callback.__doc__, markup=group.rich_markup_mode == "rich")


_flow_help(app, hook_app, install_app)


def _ignore_ctrl_c() -> None:
    """From here on Ctrl-C is ignored: the command has decided to exit 130. The interpreter's shutdown (closing
    databases, joining threads) can take seconds on a loaded machine, and Python resets its own SIGINT handler to
    the default action for it: one more Ctrl-C then would kill the process by the signal (exit -2) instead of
    letting it finish with 130. An ignored SIGINT stays ignored through that shutdown."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


_GLOBAL_VALUE_OPTIONS = ("--db", "--embedder", "--rewound")


def globals_first(argv: list[str]) -> list[str]:
    """``argv`` with the global options (``--db``, ``--embedder``, ``--rewound``, each with its value, ``--opt=value``
    too) that were given after the command moved before it, where the CLI reads them: ``lantern recover Q --db X``
    is ``lantern --db X recover Q``. An option the command defines itself (``install claude-code --db``) stays
    where it is, and so does everything after ``--``. Any other ``argv`` is returned unchanged."""
    group: Any = typer.main.get_command(app)
    i = 0
    while i < len(argv) and argv[i].startswith("-"):  # the global options already in front
        i += 1 if "=" in argv[i] or argv[i] not in _GLOBAL_VALUE_OPTIONS else 2
    command, start = group, i
    while isinstance(getattr(command, "commands", None), dict) and i < len(argv) and argv[i] in command.commands:
        command = command.commands[argv[i]]
        i += 1
    if command is group:
        return argv
    own = {name for p in command.params for name in getattr(p, "opts", [])}
    moved: list[str] = []
    rest: list[str] = []
    j = i
    while j < len(argv):
        token = argv[j]
        if token == "--":
            rest += argv[j:]
            break
        name = token.partition("=")[0]
        if name in _GLOBAL_VALUE_OPTIONS and name not in own:
            take = 1 if "=" in token or j + 1 >= len(argv) else 2
            moved += argv[j : j + take]
            j += take
            continue
        rest.append(token)
        j += 1
    return argv[:start] + moved + argv[start:i] + rest if moved else argv


def main() -> None:
    sys.argv[1:] = globals_first(sys.argv[1:])
    try:
        app()  # typer turns a KeyboardInterrupt into exit code 130 (SystemExit)
    except SystemExit as e:
        if e.code == 130:
            _ignore_ctrl_c()
        raise
    except KeyboardInterrupt:
        _ignore_ctrl_c()
        sys.exit(130)


if __name__ == "__main__":
    main()
