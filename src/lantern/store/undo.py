"""What a command that may create a database (``lantern ingest``, ``lantern import``) undoes when it fails: a
SQLite file it created, or a zero-byte file it turned into a database, and nothing else (``creation_undo``)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from lantern.config import empty_file, is_server_url
from lantern.store.sqlite import alone_and_empty

__all__ = ["Before", "NothingToUndo", "creation_undo", "empty_file"]


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


def creation_undo(location: str | os.PathLike[str]) -> Before | NothingToUndo:
    """What a command that may create the database at ``location`` (a path, or a ``postgresql://`` URL) must be
    able to undo when it fails: ``Before`` for a SQLite file, ``NothingToUndo`` for a server. Call it before the
    database is opened."""
    return NothingToUndo() if is_server_url(location) else Before(Path(location))


class Before:
    """What is at ``path`` before a command that may create the database there (ingest, import) opens it, so that a
    failure undoes exactly what the command made and nothing else: a database it created is removed with its WAL
    and shared-memory files and the folders made for it; a zero-byte file it turned into a database is made a
    zero-byte file again (its -wal / -shm removed when they were not there before); a database that was there is
    left alone. A database that holds entries is never undone: turns committed before a failure (an ingest's
    earlier slices or files) stay, and ``ingest`` resumes from them. Nor is one another process has open (a
    concurrent ingest into the same new path: ``alone_and_empty``). Through a symlink, the file it
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
