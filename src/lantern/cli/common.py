"""What the commands share: the global options' values (``state``), the database they name (``open_db``), the warm
daemon's answer (``warm_answer``), what a failed command that created the database undoes (``before_open``:
store/undo.py), and ``guard``: Lantern's errors as one red line and exit code 1, never a traceback."""

from __future__ import annotations

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
    from lantern.config import default_db_path, empty_file
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
    from lantern.config import default_db_path, empty_file, redact_url
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


def before_open():
    """What a command that may create the database must be able to undo (``creation_undo``), for ``--db``."""
    from lantern.api import creation_undo
    from lantern.config import default_db_path

    return creation_undo(state.db or default_db_path())


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
        from lantern.api import write_error_words

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


def missing_extra(command: str, extra: str, error: object) -> str:
    from lantern.errors import install_command

    command_line = install_command(extra)
    return f"lantern {command} needs the {extra} extra ({error}). Install it into this environment: {command_line}"
