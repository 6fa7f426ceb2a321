"""What the commands share: the global options' values (``state``), the database they name (``open_db``), the warm
daemon's answer (``warm_answer``), what a failed command that created the database undoes (``before_open``), and
``guard``: Lantern's errors as one red line and exit code 1, never a traceback."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from lantern.text.terminal import shown


class State:
    db: Optional[Path] = None
    embedder: Optional[str] = None
    rewound: Optional[str] = None  # --rewound / $LANTERN_REWOUND; None: the default, skip


state = State()


def warm_answer(op: str, args: dict, kwargs: dict, user: Optional[str]):
    """The warm daemon's answer to ``op`` (integrations/daemon.py) when one of this identity runs, else None: the
    command works in-process (no daemon, a global ``--embedder`` or ``--rewound`` it does not use, a database not
    there yet, whose error ``open_db`` words). The CLI never starts the daemon."""
    from lantern.config import default_db_path
    from lantern.integrations import daemon

    if state.embedder is not None or state.rewound is not None:
        return None
    path = state.db or default_db_path()
    if not isinstance(path, str):
        if not path.exists() or empty_file(path):
            return None
        path = str(path.resolve())
    try:
        return daemon.call(op, {**args, "db": path, "user": user, "kwargs": kwargs})
    except daemon.Unavailable:
        return None


def open_db(create: bool = False, own_embedder: bool = False):
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
    if not create and empty_file(path):  # SQLite would take it for a new database and this command would make one
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


def empty_file(path: Path) -> bool:
    """Whether ``path`` (or the file a symlink points to) is a zero-byte regular file. A WAL beside it does not
    make it a database: SQLite deletes the WAL of a zero-page database when it opens it."""
    try:
        return path.is_file() and path.resolve().stat().st_size == 0
    except OSError:
        return False


def remove_database(path: Path) -> None:
    """Delete the database file at ``path`` with its WAL and shared-memory files (a database this command created
    and that must not stay behind empty, tied to an embedder)."""
    for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        leftover.unlink(missing_ok=True)


class NothingToUndo:
    """``Before`` of a PostgreSQL database: nothing is created on a server that a failure should remove (an
    ingest that fails wrote nothing past its last committed batch)."""

    def undo(self) -> None:
        pass


def before_open():
    """What a command that may create the database must be able to undo (``Before``), for ``--db``."""
    from lantern.config import default_db_path

    location = state.db or default_db_path()
    return NothingToUndo() if isinstance(location, str) else Before(location)


class Before:
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
        self.was_empty = empty_file(path)
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
        if not self.real.exists() or not (self.created or (self.was_empty and not empty_file(self.path))):
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
            remove_database(self.real)
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


def importable(module: str) -> bool:
    """Whether ``module`` can be found (without importing it)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def fail(message: str) -> None:
    """One red ``error:`` line on stderr, exit 1. The message may quote the input (a file name, a session): on a
    terminal its control and bidi characters are shown as escapes (``shown``), so a file named with an escape
    sequence cannot drive the terminal; to a pipe it is written as is."""
    typer.secho(
        f"error: {shown(message, keep_lines=True) if sys.stderr.isatty() else message}", fg=typer.colors.RED, err=True
    )
    raise typer.Exit(1)


STATE_DB = object()  # ``guard``'s default ``db``: the global --db (state.db)


def guard(fn, db: Any = STATE_DB, *, also: tuple[Any, ...] = ()):
    """Run a command body; Lantern's own errors become one red line and exit code 1, never a traceback. ``db``:
    the database the command works on, named by a driver's error (``database DB: ...``; default the global
    ``--db``, else ``~/.lantern/lantern.db``): a command whose store is not the global --db gives its own (None:
    the line names none). The passwords of ``db``, of the global --db and of the ``also`` locations are scrubbed
    from every line (config.scrub: a driver may quote a URL or part of it)."""
    import sqlite3

    from lantern.config import is_server_url, redact_url, scrub
    from lantern.errors import LanternError

    location = (state.db or "~/.lantern/lantern.db") if db is STATE_DB else db
    urls = [str(u) for u in (state.db, location, *also) if u is not None]

    def say(message: str, about_db: bool = False) -> None:
        if about_db and location is not None:
            shown_db = redact_url(str(location)) if is_server_url(str(location)) else location
            message = f"database {shown_db}: {message}"
        fail(scrub(message, *urls))

    try:
        return fn()
    except typer.Exit:
        raise
    except LanternError as e:
        say(str(e))
    except sqlite3.OperationalError as e:  # locked beyond busy_timeout, read-only file, directory as --db, full disk
        from lantern.store.sqlite import write_error_words

        say(write_error_words(None if is_server_url(str(location)) else location, e), about_db=True)
    except BrokenPipeError:  # `lantern export - | head`: the reader left; not an error of ours
        quiet_broken_pipe()
    except OSError as e:
        say(f"{e.strerror or e}: {getattr(e, 'filename', '') or ''}".rstrip(": "))
    except (ValueError, TypeError) as e:
        say(str(e))
    except Exception as e:  # never a traceback for a user; LANTERN_DEBUG=1 shows it
        if os.environ.get("LANTERN_DEBUG"):
            raise
        if type(e).__module__.startswith("psycopg"):  # the PostgreSQL server refused or lost the command
            say((str(e).strip().splitlines() or [type(e).__name__])[0], about_db=True)
        say(f"internal error {type(e).__name__}: {e} (set LANTERN_DEBUG=1 for the traceback)")


def quiet_broken_pipe() -> None:
    """Exit quietly after the reader of our stdout went away (``| head``): point stdout at /dev/null so the
    interpreter's final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    raise typer.Exit(0)


def iso_time(value: Optional[str], option: str):
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


def read_text(path: Path, option: str) -> str:
    """A UTF-8 text file's content; a clear error naming ``option`` when it cannot be read."""
    from lantern.errors import LanternError

    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise LanternError(f"{option} {path}: cannot read it ({e.strerror or e})") from None


def missing_extra(command: str, extra: str, error: object) -> str:
    from lantern.errors import install_command

    command_line = install_command(extra)
    return f"lantern {command} needs the {extra} extra ({error}). Install it into this environment: {command_line}"
