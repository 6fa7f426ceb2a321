"""Errors raised by Lantern. Every one derives from ``LanternError``. ``install_command``: what a message about a
missing extra tells the user to run."""

from __future__ import annotations

import json
import shlex
import sys


def install_command(extra: str) -> str:
    """The exact command that installs the ``extra`` of Lantern into the environment this process runs in: this
    Python's pip (``python -m pip``), with ``-e CHECKOUT[extra]`` when Lantern was installed from a checkout
    (``make demo`` / ``pip install -e .``: pip's ``direct_url.json`` names the folder), else the distribution
    ``lantern-memory[extra]`` (a wheel or an index)."""
    from importlib.metadata import distributions
    from urllib.parse import unquote, urlparse

    pip = f"{shlex.quote(sys.executable)} -m pip install"
    found = list(distributions(name="lantern-memory"))
    if not found:
        return f"pip install -e '.[{extra}]' in Lantern's checkout"
    info = None
    for dist in found:  # a checkout's src/*.egg-info may come first on sys.path: the installed one says how
        try:
            info = json.loads(dist.read_text("direct_url.json") or "null")
        except ValueError:
            info = None
        if info:
            break
    url = info.get("url", "") if isinstance(info, dict) else ""
    if url.startswith("file://"):
        folder = unquote(urlparse(url).path)
        editable = "-e " if (info.get("dir_info") or {}).get("editable") else ""
        return f"{pip} {editable}{shlex.quote(f'{folder}[{extra}]')}"
    return f"{pip} {shlex.quote(f'lantern-memory[{extra}]')}"


class LanternError(Exception):
    """Base class of every error Lantern raises on purpose."""


class TranscriptFormatError(LanternError):
    """A transcript could not be parsed. ``line`` (1-based, or None) and ``field`` name where."""

    def __init__(self, message: str, *, line: int | None = None, field: str | None = None, source: str | None = None):
        self.message = message  # the reason alone: what was found, never "not a ... transcript" (the caller says that)
        self.line = line
        self.field = field
        self.source = source
        where = []
        if source:
            where.append(str(source))
        if line is not None:
            where.append(f"line {line}")
        if field:
            where.append(f"field {field!r}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)

    def named(self, source: str | None) -> TranscriptFormatError:
        """This error naming ``source`` when it names no file yet (a parser deep down that was not told it)."""
        if self.source or not source:
            return self
        return type(self)(self.message, line=self.line, field=self.field, source=source)


class EmbedderMismatchError(LanternError):
    """The database was created with another embedder (id or dimension); run ``lantern reindex``."""


class ModelNotFoundError(LanternError):
    """The embedding model file is missing or its sha256 does not match."""


class ExportFormatError(TranscriptFormatError):
    """A line of a Lantern export (JSONL) is malformed; ``line`` (1-based) and ``field`` name where. Nothing of
    the batch holding that line was written."""


class MissingVectorError(LanternError):
    """A row planned as already stored (no vector) was not found in the store's transaction (deleted since)."""


class UnsupportedBackendError(LanternError):
    """The store's backend does not support this operation yet (docs/postgres.md lists what each backend does).
    ``operation``: what was asked (``"export"``, ``"lantern ui"``, ...); ``backend``: ``"postgresql"``. Raised
    before anything is read or written."""

    def __init__(self, operation: str, backend: str, hint: str = ""):
        self.operation, self.backend = operation, backend
        super().__init__(
            f"{operation} is not supported on the {backend} backend yet (docs/postgres.md, 'What is supported')"
            + (f"; {hint}" if hint else "")
        )


class StoreVersionError(LanternError):
    """The database's schema version is not the one this process works with: a newer Lantern migrated it while
    this process ran (or opened it first), or the file was replaced by an older one. ``path``: the database;
    ``expected``: the version this process opened or migrated it to (for a file found newer on open, the newest
    this Lantern knows); ``found``: the version the file records (SQLite ``PRAGMA user_version``). Raised on open,
    and inside a write transaction before anything is written (the transaction is rolled back)."""

    def __init__(self, path: str, expected: int, found: int, *, on_open: bool = False):
        self.path, self.expected, self.found = path, expected, found
        if on_open:
            message = f"{path}: schema version {found} is newer than this Lantern ({expected}); upgrade lantern-memory"
        elif found > expected:
            message = (
                f"{path}: the database's schema is version {found}, newer than the version {expected} this process "
                f"opened it at (a newer Lantern migrated it while this process ran); nothing was written. Restart "
                f"this process with the newer lantern-memory."
            )
        else:
            message = (
                f"{path}: the database's schema is version {found}, older than the version {expected} this process "
                f"opened it at (the file was replaced while this process ran); nothing was written. Restart this "
                f"process."
            )
        super().__init__(message)


class DatabaseUnavailableError(LanternError):
    """The database server cannot be used now: it does not answer, or the connection to it was lost (a stop, a
    restart, a network failure). The message names the cause and the database (URL without its password); what
    was not committed was rolled back. A later call works once the server is back (the store replaces its
    connections)."""


class NameTooLongError(LanternError, ValueError):
    """A user, agent, project or session id longer than Lantern stores (lantern/scope.py ``MAX_ID_CHARS``,
    ``MAX_SESSION_CHARS``: the same on both backends). Raised before anything is read or written."""
