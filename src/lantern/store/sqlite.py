"""The SQLite store: one class owning the tables of ``migrations.py`` (docs/architecture.md §2.9).

WAL journal, ``busy_timeout``, one transaction per ``add`` call, content-hash dedup, embeddings as float32 BLOBs,
a contentless FTS5 index over summary + text + tags with CJK runs indexed as character bigrams (store/fulltext.py).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time as _time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from lantern.errors import EmbedderMismatchError, LanternError, MissingVectorError, StoreVersionError
from lantern.model import Entry, Tag, extends
from lantern.scope import Scope, scope_where
from lantern.store import fulltext, snapshot
from lantern.store import vectors as codec
from lantern.store.events import forget_events
from lantern.store.facts import delete_facts, fact_scope, write_facts
from lantern.store.fulltext import WINDOW_BITS, entry_of_row
from lantern.store.migrations import MIGRATIONS, migrate, roll_back
from lantern.store.packed import PACKED_COLUMNS, pack, pack_hash, unpack, unpack_hash
from lantern.store.reinforcement import forget_pending
from lantern.store.times import from_epoch, to_epoch

BUSY_TIMEOUT_MS = 10_000

# the columns the in-process index reads per entry (rows_since); the stamp is the later of archived_at and vector_at
_INDEX_SELECT = (
    "SELECT e.id, e.session, coalesce(e.time, e.archived_at), "
    "max(e.archived_at, coalesce(e.vector_at, e.archived_at)), e.importance, e.tool_count, e.file_count, e.hints, "
    "v.vector, e.user_id, e.agent_id, e.project "
    "FROM entries e JOIN embeddings v ON v.entry_id = e.id"
)
_ENTRY_COLUMNS = (
    "id, session, turn, time, archived_at, text, summary, tags, memory_type, importance, content_hash, "
    "confidence, success, access_count, tool_count, file_count, meta, category, user_id, agent_id, project"
)
_ENTRY_OF_ROW = f"(CASE WHEN f.rowid < 0 THEN (-f.rowid) >> {WINDOW_BITS} ELSE f.rowid END)"
_COMPACT = (",", ":")  # JSON separators of the tags and hints columns: no space after each comma (~2 bytes a term)
BUSY_RETRIES, BUSY_BACKOFF_S = 6, 0.05  # BEGIN IMMEDIATE retried with backoff 0.05 .. 1.6 s after busy_timeout (ours)


@dataclass
class NewEntry:
    """A prepared turn ready to be stored (output of the write path's stages 1–6)."""

    session: str
    text: str
    summary: str
    tags: list[Tag]
    hints: list[str]
    memory_type: str
    importance: float
    content_hash: str
    time: datetime | None = None
    tool_count: int = 0
    file_count: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    facts: list[Any] = field(default_factory=list)  # model.ExtractedFact, stored in the same transaction
    category: str | None = None  # archive/classify.py (fact, decision, preference, process, tool_call, system)
    user: str = ""  # scope (lantern/scope.py)
    agent: str = ""
    project: str = ""


def _file_state(path: Path, wal: Path) -> tuple[Any, ...]:
    """(device, inode, size, mtime) of the database file and of its ``-wal`` (None when it has none)."""
    st = path.stat()
    try:
        w = wal.stat()
        wal_state: tuple[int, int] | None = (w.st_size, w.st_mtime_ns)
    except FileNotFoundError:
        wal_state = None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, wal_state


def _private_file(path: Path) -> None:
    """Create the database file mode 0600 inside a 0700 directory when they do not exist yet."""
    if not path.parent.exists():
        path.parent.mkdir(parents=True, mode=0o700)
    if not path.exists():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)


def _check_is_lantern(db: sqlite3.Connection, path: str) -> None:
    """Refuse a SQLite file that is not a Lantern database, or one written by a newer Lantern (LanternError)."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > len(MIGRATIONS):
        raise StoreVersionError(path, len(MIGRATIONS), version, on_open=True)
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if version < 0:  # no Lantern writes one: another program's file, or a damaged header
        raise LanternError(f"{path}: schema version {version} is not one Lantern writes; not a Lantern database")
    if version == 0 and tables:
        raise LanternError(
            f"{path} is a SQLite database but not a Lantern one (it has tables {', '.join(sorted(tables)[:5])})"
        )


class Store:
    """SQLite tables of one Lantern database. ``path`` may be ``":memory:"`` (tests only; no WAL there).
    ``readonly``: opened to be read only (``lantern copy``'s source, ``_open_readonly``): nothing is created, migrated
    or written, and a file that is not a Lantern store of this schema version raises LanternError."""

    def __init__(self, path: str | os.PathLike[str], readonly: bool = False):
        self.path = str(path)
        self.readonly = readonly
        if readonly:
            self._open_readonly()
            return
        if self.path != ":memory:":
            _private_file(Path(self.path))
        try:
            self.db = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
            )
        except sqlite3.DatabaseError as e:
            raise _open_error(self.path, e) from None
        self.db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        try:
            _check_is_lantern(self.db, self.path)
        except sqlite3.DatabaseError as e:
            self.db.close()
            raise _open_error(self.path, e) from None
        except LanternError:
            self.db.close()
            raise
        if self.path != ":memory:":
            mode = self.db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal":  # pragma: no cover - only on filesystems without shared memory
                raise sqlite3.OperationalError(f"could not enable WAL on {self.path} (got {mode})")
        self.db.execute("PRAGMA synchronous = NORMAL")
        self.db.execute("PRAGMA foreign_keys = ON")
        self.embedder_id: str | None = None
        self.dim = 0
        self.blocks: list[tuple[int, int]] = []  # the embedder's blocks (store/vectors.py); set by check_embedder
        self.deferred: tuple[int, int] | None = None  # the block filled after the commit (e5 of English turns)
        created = self.db.execute("PRAGMA user_version").fetchone()[0] == 0
        self.schema_version = migrate(self.db)
        if self.schema_version > len(MIGRATIONS):  # a newer Lantern migrated it between the check and here
            self.db.close()
            raise StoreVersionError(self.path, len(MIGRATIONS), self.schema_version, on_open=True)
        self._check_fulltext_format()
        self.finish_pending_erase()
        if created and self.path != ":memory:":
            snapshot.store_id(self, create=True)  # the id an index snapshot is tied to (store/snapshot.py)
        if self.path != ":memory:":
            snapshot.tidy(self.path, snapshot.store_id(self))  # snapshots of a renamed file, of killed saves

    def _open_readonly(self) -> None:
        """Open the file read-only (SQLite ``mode=ro``): a missing path, a folder, an empty file, a file of another
        program or of another schema version raise LanternError (``{path} is not a Lantern store: ...``) before
        anything is created. A file whose ``-wal`` is absent (no connection has it open, none crashed) is opened
        ``immutable`` as well: a read-only connection would otherwise leave new ``-wal`` / ``-shm`` files beside
        it, or fail in a folder it cannot write; ``unchanged`` then says whether a writer came meanwhile."""
        path = Path(self.path)
        why = (
            "no such file"
            if not path.exists()
            else "it is a directory"
            if path.is_dir()
            else "it is not a regular file"
            if not path.is_file()
            else "it is an empty file (0 bytes)"
            if path.stat().st_size == 0
            else None
        )
        if why:
            raise LanternError(f"{self.path} is not a Lantern store: {why}")
        wal = path.with_name(path.name + "-wal")
        self._stat = _file_state(path, wal)
        uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"
        if self._stat[-1] is None:
            uri += "&immutable=1"
        self.db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        self.db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        try:
            _check_is_lantern(self.db, self.path)
            self.schema_version = self.db.execute("PRAGMA user_version").fetchone()[0]
            if self.schema_version == 0:
                raise LanternError(f"{self.path} is not a Lantern store: an empty SQLite database (no tables)")
        except sqlite3.DatabaseError as e:
            self.db.close()
            raise _open_error(self.path, e) from None
        except LanternError:
            self.db.close()
            raise
        if self.schema_version < len(MIGRATIONS):
            self.db.close()
            raise LanternError(
                f"{self.path}: its schema version {self.schema_version} is older than this Lantern's "
                f"({len(MIGRATIONS)}), and it is opened read-only here; upgrade it first by opening it once (`lantern "
                f"--db {self.path} stats`), or copy it with the Lantern that wrote it"
            )
        self.db.execute("PRAGMA query_only = ON")
        self.embedder_id = None
        self.dim = 0
        self.blocks = []
        self.deferred = None

    def unchanged(self) -> bool:
        """Whether a store opened ``readonly`` is as it was when opened (an ``immutable`` one: its file and its
        ``-wal`` unchanged): True for any other."""
        if not getattr(self, "readonly", False) or self._stat[-1] is not None:
            return True
        path = Path(self.path)
        return _file_state(path, path.with_name(path.name + "-wal")) == self._stat

    def _check_fulltext_format(self) -> None:
        """Rebuild the full-text index from ``entries`` (one transaction) when its rows were written in another
        format than this code's (store/fulltext.py ``stale``): deletes send this code's rows. A database that
        cannot be written keeps its index (nothing can be deleted from it either)."""
        try:
            if not fulltext.stale(self.db):
                return
            with self.transaction() as db:
                if fulltext.stale(db):
                    fulltext.rebuild(db)
        except sqlite3.Error as e:
            if not is_unwritable(e):
                raise

    # ------------------------------------------------------------------ plumbing
    @contextmanager
    def transaction(self, wait: float | None = None) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``; any exception rolls the whole transaction back. Taking the write
        lock waits ``busy_timeout`` (10 s), then is retried ``BUSY_RETRIES`` times with doubling backoff before
        "database is locked" reaches the caller (many processes share one file: docs/python-api.md). ``wait``: seconds
        to wait for the write lock instead, once, without retries (a write that may be skipped: reinforcement).
        Raises StoreVersionError, before anything is written, when the file's schema version (``PRAGMA user_version``,
        read under the write lock: no migration can commit meanwhile) is no longer ``schema_version``, the one this
        handle opened or migrated the file to: another process of another Lantern version migrated it.
        An error in the block or in the COMMIT (SQLITE_FULL, SQLITE_IOERR, SQLITE_BUSY, ...) is raised as it is,
        after the rollback (``roll_back``): nothing of the transaction is stored."""
        self._begin_immediate(wait)
        try:
            found = self.db.execute("PRAGMA user_version").fetchone()[0]
            if found != self.schema_version:
                raise StoreVersionError(self.path, self.schema_version, found)
            yield self.db
            self.db.execute("COMMIT")
        except BaseException:
            roll_back(self.db)
            raise

    def _begin_immediate(self, wait: float | None = None) -> None:
        if wait is not None:
            usual = self.db.execute("PRAGMA busy_timeout").fetchone()[0]
            self.db.execute(f"PRAGMA busy_timeout = {max(0, int(wait * 1000))}")
            try:
                self.db.execute("BEGIN IMMEDIATE")
            finally:
                self.db.execute(f"PRAGMA busy_timeout = {usual}")
            return
        for attempt in range(BUSY_RETRIES + 1):
            try:
                self.db.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as e:
                if attempt == BUSY_RETRIES or not _is_busy(e):
                    raise
                _time.sleep(BUSY_BACKOFF_S * 2**attempt)

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """One read transaction (``BEGIN`` ... ``COMMIT``): the reads in the block see one snapshot of the file.
        Inside an open transaction, that one. Raises StoreVersionError when the snapshot's schema version is not
        ``schema_version`` (another Lantern version migrated the file since this handle opened it: its rows may be
        in a form this code misreads, such as m009's deflated columns); the in-process index refreshes in one."""
        if self.db.in_transaction:
            yield self.db
            return
        self.db.execute("BEGIN")
        try:
            found = self.db.execute("PRAGMA user_version").fetchone()[0]
            if found != self.schema_version:
                raise StoreVersionError(self.path, self.schema_version, found)
            yield self.db
        finally:
            if self.db.in_transaction:
                self.db.execute("COMMIT")

    scope_where = staticmethod(scope_where)  # (alias, Scope) -> (SQL condition, params); see lantern/scope.py

    @staticmethod
    def serialize(db: Any, key: str) -> None:
        """Make the open write transaction ``db`` the only one of the writers naming ``key`` (an import) until it
        ends. Nothing to do here: ``BEGIN IMMEDIATE`` already runs every write transaction of the file alone."""

    @staticmethod
    def rolled_back(e: BaseException) -> bool:
        """Whether ``e`` says the database rolled the transaction back to break a deadlock, so that running it again
        whole may succeed: never here (one writer at a time, no deadlock between writers)."""
        return False

    def data_version(self) -> int:
        """Changes when another connection commits (SQLite ``PRAGMA data_version``)."""
        return self.db.execute("PRAGMA data_version").fetchone()[0]

    def close(self) -> None:
        if not self.readonly:
            self.finish_pending_erase()  # a forget that a reader kept from erasing its text: done now if it can be
        self.db.close()

    # ------------------------------------------------------------------ meta
    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def check_embedder(
        self,
        embedder_id: str,
        dim: int,
        name: str | None = None,
        blocks: Sequence[tuple[int, int]] | None = None,
        deferred: tuple[int, int] | None = None,
    ) -> None:
        """Record the embedder of a new database; raise EmbedderMismatchError when it differs from the one given.
        Every later write checks it again inside its transaction (another process may have run ``reindex``).
        ``name``: the embedder's CLI name ("routed"), which the error's ``reindex`` advice uses (default the id).
        ``blocks``: its disjoint dims (default one block of ``dim``), how vectors are stored (store/vectors.py);
        ``deferred``: the block a row may lack until ``fill_vectors`` adds it (``pending_vectors``)."""
        stored = self._recorded_embedder(self.db)
        given = [tuple(b) for b in blocks] if blocks else [(0, dim)]
        if not stored and self.readonly:  # no embedder recorded: no entry was ever stored, nothing to decode
            stored = {"embedder": embedder_id, "dim": str(dim)}
        if not stored:
            with self.transaction() as db:
                stored = self._recorded_embedder(db)
                if not stored:
                    self.set_embedder(db, embedder_id, dim, given)
                    stored = self._recorded_embedder(db)
        self.embedder_id, self.dim, self.embedder_name = embedder_id, dim, name or embedder_id
        self._verify_embedder(stored)
        # the stored bytes are decoded by the layout they were written in, whatever the embedder object says (a
        # wrapper without ``blocks`` would otherwise read int8 rows as one block); a store written before the layout
        # was recorded takes the embedder's (compact_vectors records it)
        recorded = stored.get(VECTOR_BLOCKS)
        self.blocks = self._recorded_layout(recorded, dim) if recorded else given
        self.deferred = deferred

    def _recorded_layout(self, value: str, dim: int) -> list[tuple[int, int]]:
        """The block layout meta ``vector_blocks`` records: a JSON list of ``[start, stop]`` integer pairs that tile
        ``0 .. dim`` (store/vectors.py: a dim outside every block would not be stored). Raises LanternError for any
        other value (a damaged or hand-edited row): rows written by it could not be read once the value is right
        again, and rows read by it fail or decode wrong."""
        try:
            blocks = json.loads(value)
        except ValueError:
            blocks = None
        pairs = (
            isinstance(blocks, list)
            and bool(blocks)
            and all(
                isinstance(b, list)
                and len(b) == 2
                and all(type(x) is int and 0 <= x <= dim for x in b)
                and b[0] <= b[1]
                for b in blocks
            )
        )
        edges = [x for b in sorted(tuple(b) for b in blocks) for x in b] if pairs else []
        if not pairs or edges[0] != 0 or edges[-1] != dim or edges[1:-1:2] != edges[2:-1:2]:
            raise LanternError(
                f"{self.path}: meta 'vector_blocks' is damaged ({value[:80]!r}; expected a JSON list of [start, stop] "
                f"pairs that tile 0..{dim}), so the stored vectors cannot be read by it; nothing was "
                f"written. Delete that row (sqlite3 {self.path} \"DELETE FROM meta WHERE key = 'vector_blocks'\") to "
                f"read them in the embedder's layout, and run `lantern --db {self.path} reindex` if they still fail."
            )
        return [tuple(b) for b in blocks]

    @staticmethod
    def _recorded_embedder(db: sqlite3.Connection) -> dict[str, str]:
        """meta's ``embedder``, ``dim`` and ``vector_blocks`` (the JSON ``[[start, stop], ...]`` layout the vectors
        are stored in, store/vectors.py), those present."""
        return dict(
            db.execute("SELECT key, value FROM meta WHERE key IN ('embedder', 'dim', ?)", (VECTOR_BLOCKS,)).fetchall()
        )

    def verify_embedder(self, db: sqlite3.Connection | None = None) -> None:
        """Raise EmbedderMismatchError when the recorded embedder is no longer the one this handle checked."""
        if getattr(self, "embedder_id", None) is not None:
            self._verify_embedder(self._recorded_embedder(db or self.db), self.embedder_id, self.dim)

    def _verify_embedder(self, stored: dict[str, str], embedder_id: str | None = None, dim: int | None = None) -> None:
        embedder_id = embedder_id or self.embedder_id
        dim = dim or self.dim
        if stored.get("embedder") != embedder_id or stored.get("dim") != str(dim):
            raise EmbedderMismatchError(
                f"{self.path} was created with embedder {stored.get('embedder')!r} ({stored.get('dim')}-d), "
                f"not {embedder_id!r} ({dim}-d). Open it with that embedder, or run "
                f"`lantern --db {self.path} reindex --embedder {self.embedder_name}` to re-embed every entry with the "
                "one you asked for."
            )

    def set_embedder(
        self, db: sqlite3.Connection, embedder_id: str, dim: int, blocks: Sequence[tuple[int, int]] | None = None
    ) -> None:
        """Record the embedder and the block layout of its stored vectors (default one block of ``dim``)."""
        layout = json.dumps([list(b) for b in blocks] if blocks else [[0, dim]])
        db.executemany(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
            [("embedder", embedder_id), ("dim", str(dim)), (VECTOR_BLOCKS, layout)],
        )

    # ------------------------------------------------------------------ write
    def add(
        self,
        rows: Sequence[NewEntry],
        vectors: np.ndarray,
        after: Callable[[sqlite3.Connection, list[tuple[int, bool]]], None] | None = None,
    ) -> list[tuple[int, bool]]:
        """Store prepared turns and their embeddings in ONE transaction.

        Returns ``(entry_id, added)`` per row, in order; ``added`` is False for a duplicate (same content hash).
        ``vectors``: an array of shape ``(len(rows), dim)`` or a list of vectors where a row known to be stored may
        have None (``MissingVectorError``, nothing written, if it is not stored after all).
        A turn that extends the session's latest stored turn (a live turn that grew: the user message first,
        the assistant reply later) replaces it in place instead of adding a second entry. Turn numbers continue
        the session's numbering. ``after(db, result)``, when given, runs inside the same transaction once the rows
        are written (reinforce.py resolves pending recoveries there). Raises sqlite3 errors; on any error nothing
        is written.
        """
        if len(rows) != len(vectors):
            raise ValueError(f"{len(rows)} rows but {len(vectors)} vectors")
        out: list[tuple[int, bool]] = []
        now = _time.time()
        with self.transaction() as db:
            self.verify_embedder(db)
            written: set[int] = set()
            for row, vec in zip(rows, vectors):
                found = db.execute(
                    "SELECT id FROM entries WHERE content_hash = ?", (pack_hash(row.content_hash),)
                ).fetchone()
                if found:
                    out.append((found[0], False))
                    continue
                last = db.execute(  # the conversation is (scope, session): another user's session never grows
                    "SELECT id, turn, text FROM entries WHERE user_id = ? AND session = ? AND agent_id = ? "
                    "AND project = ? ORDER BY turn DESC LIMIT 1",
                    (row.user, row.session, row.agent, row.project),
                ).fetchone()
                if vec is None:  # planned as stored (archive/embed_ahead.py), deleted since: the caller re-embeds
                    raise MissingVectorError(f"no vector for the new row {row.content_hash}")
                blob = codec.encode(vec, self.blocks)
                pending = int(self.deferred is not None and not np.asarray(vec)[slice(*self.deferred)].any())
                if last and last[0] not in written and extends(row.text, last[2]):
                    entry_id = last[0]
                    self._delete_fts(db, entry_id)
                    db.execute(
                        "UPDATE entries SET time = coalesce(time, ?), archived_at = ?, text = ?, summary = ?, "
                        "tags = ?, hints = ?, memory_type = ?, importance = ?, content_hash = ?, tool_count = ?, "
                        "file_count = ?, meta = ?, category = ?, e5_pending = ?, vector_at = NULL WHERE id = ?",
                        (to_epoch(row.time), now, *self._values(row), pending, entry_id),
                    )
                    db.execute("UPDATE embeddings SET vector = ? WHERE entry_id = ?", (blob, entry_id))
                    write_facts(
                        db, entry_id, row.facts, now, fact_scope(row)
                    )  # the grown turn's facts replace its old ones
                else:
                    turn = last[1] + 1 if last else 0
                    cur = db.execute(
                        "INSERT INTO entries(session, turn, time, archived_at, text, summary, tags, hints, "
                        "memory_type, importance, content_hash, tool_count, file_count, meta, category, confidence, "
                        "success, user_id, agent_id, project, e5_pending) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0.5, 0.5, ?, ?, ?, ?)",
                        (
                            row.session,
                            turn,
                            to_epoch(row.time),
                            now,
                            *self._values(row),
                            row.user,
                            row.agent,
                            row.project,
                            pending,
                        ),
                    )
                    entry_id = cur.lastrowid
                    db.execute("INSERT INTO embeddings(entry_id, vector) VALUES (?, ?)", (entry_id, blob))
                    if row.facts:
                        write_facts(db, entry_id, row.facts, now, fact_scope(row))
                written.add(entry_id)
                self.index_fulltext(db, entry_id, row.summary, row.text, [t.value for t in row.tags])
                out.append((entry_id, True))
            if after is not None:
                after(db, out)
        return out

    @staticmethod
    def _values(row: NewEntry) -> tuple:
        return (
            row.text,
            pack(row.summary),
            pack(json.dumps([[t.kind, t.value] for t in row.tags], ensure_ascii=False, separators=_COMPACT)),
            json.dumps(row.hints, ensure_ascii=False, separators=_COMPACT),
            row.memory_type,
            float(row.importance),
            pack_hash(row.content_hash),
            row.tool_count,
            row.file_count,
            json.dumps(row.meta, default=str),  # ASCII escapes: a lone surrogate in a transcript id cannot break it
            row.category,
        )

    @staticmethod
    def index_fulltext(
        db: sqlite3.Connection, entry_id: int, summary: str, text: str, tag_values: Sequence[str]
    ) -> None:
        """The FTS5 rows of an entry (store/fulltext.py ``fts_rows``: CJK runs as character bigrams, a long text in
        windows). The values must be those of its ``entries`` row, written in the same transaction (a delete sends
        the row's values back to the contentless index)."""
        fulltext.check_current(db)
        fulltext.index_entry(db, entry_id, summary, text, tag_values)

    @classmethod
    def unindex_fulltext(cls, db: sqlite3.Connection, entry_id: int) -> None:
        """Remove an entry's full-text rows before other code (an import replacing a grown turn) rewrites its
        ``entries`` row; ``index_fulltext`` adds the new ones after."""
        cls._delete_fts(db, entry_id)

    @staticmethod
    def lock_conversations(db: sqlite3.Connection, conversations: Iterable[tuple[str, str, str, str]]) -> None:
        """Make the open write transaction the only writer of these (user, agent, project, session) conversations
        (turn numbers, a grown turn) until it ends. Nothing to do here: ``BEGIN IMMEDIATE`` runs every writer
        alone."""

    @staticmethod
    def _delete_fts(db: sqlite3.Connection, entry_id: int) -> None:
        """An entry's FTS5 rows, its own and its windows', built from its ``entries`` row: before the row changes."""
        fulltext.check_current(db)
        fulltext.unindex_entry(db, entry_id)

    def delete(
        self,
        *,
        entry: int | None = None,
        session: str | None = None,
        scope: Scope | None = None,
        erase: bool = False,
    ) -> int:
        """Delete entries by id, by session (with its sub-sessions ``session/...``), and/or by ``scope`` (the
        conditions combine with AND; ``scope`` None: any user), in one transaction: the entry rows, their FTS5 rows,
        and the rows of EVERY table with a foreign key to ``entries`` (embeddings, and any table a later migration
        adds that way), with facts chains re-linked first (store/facts.py), and the compaction events they are part
        of (store/events.py ``forget_events``). ``erase`` (a forget): the same transaction records that the
        deleted text is still to be erased (``mark_erase``), so that a process killed before its
        ``erase_free_space`` leaves the erase to the next open, close or forget. Returns the count. Raises
        ValueError when nothing selects."""
        if entry is None and session is None and scope is None:
            raise ValueError("give entry=, session= or a scope")
        parts, args = [], []
        if entry is not None:
            parts.append("id = ?")
            args.append(entry)
        if session is not None:  # the session and its sub-sessions (``session/...``, as ingest names them)
            parts.append("(session = ? OR substr(session, 1, length(?) + 1) = ? || '/')")
            args += [session, session, session]
        if scope is not None:
            sql, params = scope_where("", scope)
            parts.append(sql)
            args += params
        self.db.execute("PRAGMA secure_delete = ON")  # deleted cells are zeroed in the pages written (SQLite)
        try:
            return self._delete(parts, args, session=session, scope=scope, whole=entry is None, erase=erase)
        finally:
            self.db.execute("PRAGMA secure_delete = OFF")

    def _delete(
        self,
        parts: list[str],
        args: list[Any],
        *,
        session: str | None,
        scope: Scope | None,
        whole: bool,
        erase: bool = False,
    ) -> int:
        """``delete``'s transaction: the entries ``parts``/``args`` select, and the events of ``session``/``scope``
        (``whole``: a whole session or scope goes, not single entries)."""
        with self.transaction() as db:
            rows = db.execute(
                f"SELECT id, user_id, session, archived_at FROM entries WHERE {' AND '.join(parts)}", args
            ).fetchall()
            ids = [r[0] for r in rows]
            marks = [(i,) for i in ids]
            forget_events(db, rows, session=session, scope=scope, whole=whole)
            for entry_id in ids:
                self._delete_fts(db, entry_id)
            delete_facts(db, ids)  # re-links each key's chain around the deleted versions
            forget_pending(db, ids)  # and out of the pending recoveries
            for table, column in _referencing(db):  # one statement per 500 ids: the column may lack an index
                for start in range(0, len(ids), 500):
                    chunk = ids[start : start + 500]
                    db.execute(f'DELETE FROM "{table}" WHERE "{column}" IN ({",".join("?" * len(chunk))})', chunk)
            db.executemany("DELETE FROM entries WHERE id = ?", marks)
            if ids:
                bump_generation(db)
                if erase:
                    mark_erase(db, ERASE_REWRITE)
        if ids and self.path != ":memory:":
            snapshot.remove(self.path, snapshot.store_id(self))  # they hold the deleted rows' vectors and terms
        return len(ids)

    def erase_free_space(self, wait: float | None = None, on_wait: Callable[[Erasure], None] | None = None) -> Erasure:
        """Make deleted text unrecoverable from the file: merge FTS5 segments (old segments keep deleted terms),
        VACUUM (rewrites the file without free pages), then a TRUNCATE checkpoint, which copies the rewritten
        pages over the old ones and empties the WAL (which holds old page images). A reader holding a read
        transaction (another process, or another connection) pins the old pages: the checkpoint cannot complete
        until it ends. It is tried at once; when blocked, ``on_wait`` is told who holds the file, and it is tried
        again for ``wait`` seconds (default the busy timeout, 10 s). Returns the ``Erasure``; an incomplete one is
        recorded in the meta table (``ERASE_PENDING``) and finished by the next ``finish_pending_erase`` that can
        (every open and close of a Store, every forget)."""
        self.db.execute("INSERT INTO entries_fts(entries_fts) VALUES ('optimize')")
        self.db.execute("VACUUM")
        if self.get_meta(ERASE_REWRITE) is not None:  # merged and rewritten: what is left is the checkpoint
            with self.transaction() as db:
                db.execute("DELETE FROM meta WHERE key = ?", (ERASE_REWRITE,))
        return self._checkpoint_erase(BUSY_TIMEOUT_MS / 1000 if wait is None else wait, on_wait)

    def finish_pending_erase(self, wait: float = 0.0, on_wait: Callable[[Erasure], None] | None = None) -> Erasure:
        """Finish an erase an earlier forget could not complete, waiting at most ``wait`` seconds for readers: the
        whole ``erase_free_space`` when the forget's process ended before it (``ERASE_REWRITE`` in meta, written by
        the delete's own transaction), else the checkpoint a reader held up (``ERASE_PENDING``); a no-op
        (complete) when none is pending. Never raises for a database it cannot write (a read-only file): the erase
        stays pending."""
        try:
            if self.path == ":memory:":
                return Erasure(True)
            if self.get_meta(ERASE_REWRITE) is not None:
                return self.erase_free_space(wait, on_wait)
            if self.get_meta(ERASE_PENDING) is None:
                return Erasure(True)
            return self._checkpoint_erase(wait, on_wait)
        except sqlite3.Error:
            return Erasure(False, self.file_bytes(), holders(self.path))

    def _checkpoint_erase(self, wait: float, on_wait: Callable[[Erasure], None] | None) -> Erasure:
        if self.path == ":memory:":
            return Erasure(True)
        done = self._checkpoint(0.0)
        if not done and wait > 0:
            if on_wait is not None:
                on_wait(Erasure(False, self.file_bytes(), holders(self.path)))
            done = self._checkpoint(wait)
        if not done:
            if self.get_meta(ERASE_PENDING) is None:
                with self.transaction() as db:
                    db.execute(
                        "INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (ERASE_PENDING, str(_time.time()))
                    )
            return Erasure(False, self.file_bytes(), holders(self.path))
        if self.get_meta(ERASE_PENDING) is not None:
            with self.transaction() as db:
                db.execute("DELETE FROM meta WHERE key = ?", (ERASE_PENDING,))
            self._checkpoint(0.0)  # the marker's own page: no forgotten text in it, emptied when it can be
        return Erasure(True)

    def _checkpoint(self, wait: float) -> bool:
        """A TRUNCATE checkpoint waiting at most ``wait`` seconds for readers; True when it completed (every page
        copied into the database file, the WAL emptied)."""
        usual = self.db.execute("PRAGMA busy_timeout").fetchone()[0]
        self.db.execute(f"PRAGMA busy_timeout = {max(0, int(wait * 1000))}")
        try:
            busy, log, copied = self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            self.db.execute(f"PRAGMA busy_timeout = {usual}")
        return busy == 0 and log <= 0 and copied <= 0  # -1, -1: not in WAL mode

    def file_bytes(self) -> int:
        """Bytes of the database file and its WAL."""
        return sum(os.path.getsize(p) for p in (self.path, self.path + "-wal") if os.path.exists(p))

    def replace_vectors(
        self,
        pairs: Iterable[tuple[int, np.ndarray]],
        embedder_id: str,
        dim: int,
        name: str | None = None,
        blocks: Sequence[tuple[int, int]] | None = None,
        deferred: tuple[int, int] | None = None,
    ) -> int:
        """Overwrite every embedding and the recorded embedder in one transaction (``reindex``). ``blocks`` /
        ``deferred``: the new embedder's, as ``check_embedder`` takes them."""
        blocks = list(blocks) if blocks else [(0, dim)]
        n = 0
        now = _time.time()
        with self.transaction() as db:
            for entry_id, vec in pairs:
                pending = int(deferred is not None and not np.asarray(vec)[slice(*deferred)].any())
                db.execute(
                    "INSERT OR REPLACE INTO embeddings(entry_id, vector) VALUES (?, ?)",
                    (entry_id, codec.encode(vec, blocks)),
                )
                db.execute("UPDATE entries SET e5_pending = ?, vector_at = ? WHERE id = ?", (pending, now, entry_id))
                n += 1
            self.set_embedder(db, embedder_id, dim, blocks)
            bump_generation(db)
        self.embedder_id, self.dim, self.embedder_name = embedder_id, dim, name or embedder_id
        self.blocks, self.deferred = [tuple(b) for b in blocks], deferred
        return n

    def encode_vector(self, vector: np.ndarray) -> bytes:
        """The stored form of a float32 vector (dim,) for the ``embeddings`` table (store/vectors.py)."""
        return codec.encode(vector, self.blocks)

    def entry_columns(self) -> list[str]:
        """Columns of ``entries`` in table order (migrations may have added some): what an export carries."""
        return [r[1] for r in self.db.execute("PRAGMA table_info(entries)")]

    @staticmethod
    def entry_value(column: str, stored: Any) -> Any:
        """The value of an ``entries`` column as read by SQL, in the form the rest of Lantern uses (store/packed.py:
        summary and tags inflated, the content hash as hex); other columns as they are. For raw reads of the row
        (an export, the compaction detector's change check)."""
        if column == "content_hash" and stored is not None:
            return unpack_hash(stored)
        return unpack(stored) if column in PACKED_COLUMNS and stored is not None else stored

    @staticmethod
    def stored_value(column: str, value: Any) -> Any:
        """The form in which a column value is written to, or looked up in, ``entries`` by SQL (``entry_value``'s
        inverse): summary and tags (JSON text) deflated when that is shorter, the content hash as its digest. For
        raw writes of the row (an import)."""
        if column == "content_hash":
            return pack_hash(value)
        return pack(value) if column in PACKED_COLUMNS and isinstance(value, str) else value

    def decode_vectors(self, blobs: Sequence[bytes]) -> np.ndarray:
        """float32 (len(blobs), dim): stored vector blobs (store/vectors.py) decoded, each block of norm ~1. Raises
        ValueError when one is not ``vector_decodable``."""
        return codec.decode_many(blobs, self.dim, self.blocks)

    def vector_decodable(self, blob: Any) -> bool:
        """Whether a stored vector blob has a byte length of the recorded layout (meta ``vector_blocks``, or raw
        float32 of ``dim``): store/vectors.py ``decodable``. One cut short or written by another tool is not."""
        return codec.decodable(blob, self.dim, self.blocks)

    def _undecodable_sql(self, alias: str) -> str:
        """A SQL condition true for the rows of ``embeddings`` (as ``alias``) whose vector is not ``vector_decodable``:
        the same length rule, in SQL, so counting them reads no blob into Python."""
        parts = " + ".join(
            f"CASE substr({alias}.vector, {2 + i}, 1) WHEN x'01' THEN {4 + b - a} WHEN x'00' THEN 0 ELSE -1e9 END"
            for i, (a, b) in enumerate(self.blocks)
        )
        head = f"substr({alias}.vector, 1, 1) = x'{codec.FORMAT:02x}'"
        compact = f"({head} AND length({alias}.vector) = {1 + len(self.blocks)} + {parts})"
        return f"NOT (typeof({alias}.vector) = 'blob' AND (length({alias}.vector) = {4 * self.dim} OR {compact}))"

    def undecodable_count(self, scope: Scope | None = None) -> int:
        """How many stored vectors (of ``scope``'s entries, or of every entry) are not ``vector_decodable``: entries
        the in-process index leaves out (no recovery finds them) until ``lantern reindex`` recomputes them. One scan
        of ``embeddings``; 0 before the embedder is known."""
        if not self.blocks:
            return 0
        where, params = scope_where("e", scope) if scope is not None else ("1", [])
        return self.db.execute(
            f"SELECT count(*) FROM embeddings v JOIN entries e ON e.id = v.entry_id "
            f"WHERE {self._undecodable_sql('v')} AND {where}",
            params,
        ).fetchone()[0]

    # ------------------------------------------------------------------ vectors filled after the commit
    def pending_vectors(self, limit: int, scope: Scope | None = None) -> list[tuple[int, str]]:
        """(id, summary) of up to ``limit`` entries still lacking their deferred block, newest first (the ones a
        recovery is likeliest to need); within ``scope`` when given."""
        if self.deferred is None or limit <= 0:
            return []
        where, params = scope_where("", scope) if scope is not None else ("1", [])
        rows = self.db.execute(
            f"SELECT id, summary FROM entries WHERE e5_pending = 1 AND {where} ORDER BY id DESC LIMIT ?",
            (*params, limit),
        ).fetchall()
        return [(entry_id, unpack(summary)) for entry_id, summary in rows]

    def pending_count(self) -> int:
        """How many entries still lack their deferred block."""
        return self.db.execute("SELECT count(*) FROM entries WHERE e5_pending = 1").fetchone()[0]

    def fill_vectors(self, parts: Sequence[tuple[int, np.ndarray]], wait: float | None = None) -> int:
        """Add the deferred block to stored vectors, in one transaction: each (entry id, float32 block vector of the
        deferred block's width). An entry forgotten or re-archived meanwhile is skipped. Returns how many were filled;
        their ``vector_at`` tells the in-process indexes to re-read them. ``wait``: as ``transaction``."""
        if self.deferred is None or not parts:
            return 0
        a, b = self.deferred
        now = _time.time()
        filled = 0
        with self.transaction(wait) as db:
            for entry_id, part in parts:
                row = db.execute(
                    "SELECT v.vector FROM embeddings v JOIN entries e ON e.id = v.entry_id "
                    "WHERE v.entry_id = ? AND e.e5_pending = 1",
                    (entry_id,),
                ).fetchone()
                if row is None or not self.vector_decodable(row[0]):  # undecodable: reindex recomputes it whole
                    continue
                full = codec.decode(row[0], self.dim, self.blocks)
                full[a:b] = part
                db.execute(
                    "UPDATE embeddings SET vector = ? WHERE entry_id = ?", (codec.encode(full, self.blocks), entry_id)
                )
                db.execute("UPDATE entries SET e5_pending = 0, vector_at = ? WHERE id = ?", (now, entry_id))
                filled += 1
        return filled

    def compact_vectors(self, batch: int = 2_000) -> int:
        """Re-encode the vectors stored as raw float32 (written before store/vectors.py) and mark the entries that
        lack the deferred block as pending; once per database (meta ``vectors_format``). One transaction per
        ``batch`` rows. Returns the rows re-encoded."""
        if self.get_meta("vectors_format") == str(codec.FORMAT) or not self.blocks:
            return 0
        n, last = 0, -1
        while True:
            with self.transaction() as db:
                rows = db.execute(
                    "SELECT entry_id, vector FROM embeddings WHERE entry_id > ? ORDER BY entry_id LIMIT ?",
                    (last, batch),
                ).fetchall()
                for entry_id, blob in rows:
                    if len(blob) == 4 * self.dim:
                        vec = np.frombuffer(blob, "<f4")
                        db.execute(
                            "UPDATE embeddings SET vector = ? WHERE entry_id = ?",
                            (codec.encode(vec, self.blocks), entry_id),
                        )
                        if self.deferred is not None and not vec[slice(*self.deferred)].any():
                            db.execute("UPDATE entries SET e5_pending = 1 WHERE id = ?", (entry_id,))
                        bump_generation(db)
                        n += 1
                if not rows:
                    db.executemany(
                        "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                        [
                            ("vectors_format", str(codec.FORMAT)),
                            (VECTOR_BLOCKS, json.dumps([list(b) for b in self.blocks])),
                        ],
                    )
                    return n
                last = rows[-1][0]

    def known_hashes(self, hashes: Sequence[str], chunk: int = 500) -> set[str]:
        """The content hashes among ``hashes`` that the store already holds (``chunk`` hashes per SQL IN (...))."""
        found: set[str] = set()
        distinct = list(dict.fromkeys(hashes))
        for start in range(0, len(distinct), chunk):
            part = distinct[start : start + chunk]
            marks = ",".join("?" * len(part))
            stored = [pack_hash(h) for h in part]
            found.update(
                unpack_hash(h)
                for (h,) in self.db.execute(f"SELECT content_hash FROM entries WHERE content_hash IN ({marks})", stored)
            )
        return found

    def bump_access(self, ids: Sequence[int], db: sqlite3.Connection | None = None, wait: float | None = None) -> None:
        """access_count += 1 for entries packed into a recovery (the a of F(e), paper eq. 2); inside the open
        transaction ``db`` when given, else in its own (``wait``: as ``transaction``)."""
        if not ids:
            return
        if db is not None:
            db.executemany("UPDATE entries SET access_count = access_count + 1 WHERE id = ?", [(i,) for i in ids])
            return
        with self.transaction(wait) as db:
            self.bump_access(ids, db)

    # ------------------------------------------------------------------ read
    def entries(self, ids: Iterable[int], *, text: bool = True, tags: bool = True) -> dict[int, Entry]:
        """Entries by id (missing ids are absent from the result). ``text=False`` / ``tags=False`` leave
        ``Entry.text`` empty / ``Entry.tags`` empty: the read path ranks on summaries and fetches full texts only
        for what it packs."""
        ids = list(ids)
        chosen = {"text": "text" if text else "''", "tags": "tags" if tags else "'[]'"}  # empty stand-ins when skipped
        columns = ", ".join(chosen.get(c, c) for c in _ENTRY_COLUMNS.split(", "))
        out: dict[int, Entry] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.db.execute(f"SELECT {columns} FROM entries WHERE id IN ({marks})", chunk):
                out[row[0]] = _entry(row)
        return out

    def tags(self, ids: Iterable[int]) -> dict[int, list[Tag]]:
        """The tags of each entry, by id (missing ids are absent): one query per 500 ids, for entries read with
        ``entries(..., tags=False)`` (the candidates of ``explain``)."""
        ids = list(ids)
        out: dict[int, list[Tag]] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for entry_id, tags in self.db.execute(f"SELECT id, tags FROM entries WHERE id IN ({marks})", chunk):
                out[entry_id] = _tags(tags)
        return out

    def text_heads(self, ids: Iterable[int], chars: int) -> dict[int, str]:
        """The first ``chars`` characters of each entry's text, by id (missing ids are absent)."""
        ids = list(ids)
        out: dict[int, str] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            out.update(
                self.db.execute(f"SELECT id, substr(text, 1, ?) FROM entries WHERE id IN ({marks})", (chars, *chunk))
            )
        return out

    def texts(self) -> Iterator[tuple[int, str]]:
        """(id, summary) of every entry, in id order: the embedder's input, for ``reindex``."""
        for entry_id, summary in self.db.execute("SELECT id, summary FROM entries ORDER BY id").fetchall():
            yield entry_id, unpack(summary)

    def rows_since(self, archived_at: float, after_id: int | None = None) -> list[tuple]:
        """Static columns + vector of entries archived (or grown, or given a filled vector) at or after
        ``archived_at``, or with an id above ``after_id`` (imported rows keep their old archived_at), for the
        in-process index: (id, session, event time or archived_at, stamp = the later of archived_at and vector_at,
        importance, tool_count, file_count, hints JSON, vector BLOB (``decode_vectors``), user_id, agent_id,
        project), in id order."""
        return self.db.execute(
            f"{_INDEX_SELECT} WHERE e.id IN (SELECT id FROM entries WHERE archived_at >= ? "
            "UNION SELECT id FROM entries WHERE vector_at >= ? "
            "UNION SELECT id FROM entries WHERE id > ?) ORDER BY e.id",  # all indexed; a plain OR scans the table
            (archived_at, archived_at, after_id if after_id is not None else 2**63 - 1),
        ).fetchall()

    def stamps_since(self, archived_at: float, after_id: int | None = None) -> list[tuple[int, float]]:
        """(id, stamp) of the rows ``rows_since`` would return, without their vectors: the index reads the full rows
        only of those that are new or whose stamp changed (a grown turn, a filled vector)."""
        return self.db.execute(
            "SELECT id, max(archived_at, coalesce(vector_at, archived_at)) FROM entries WHERE id IN "
            "(SELECT id FROM entries WHERE archived_at >= ? UNION SELECT id FROM entries WHERE vector_at >= ? "
            "UNION SELECT id FROM entries WHERE id > ?) ORDER BY id",
            (archived_at, archived_at, after_id if after_id is not None else 2**63 - 1),
        ).fetchall()

    def rows_by_id(self, ids: Sequence[int]) -> list[tuple]:
        """The ``rows_since`` columns of the entries ``ids``, in id order."""
        out: list[tuple] = []
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            out += self.db.execute(f"{_INDEX_SELECT} WHERE e.id IN ({marks}) ORDER BY e.id", chunk).fetchall()
        return out

    def session_turns(self, session: str, scope: Scope | None = None) -> list[tuple[int, int, str]]:
        """(id, turn, text) of every entry of one session within ``scope`` (default: the default user), in turn
        order."""
        where, params = scope_where("", scope or Scope())
        return self.db.execute(
            f"SELECT id, turn, text FROM entries WHERE session = ? AND {where} ORDER BY turn", (session, *params)
        ).fetchall()

    def session_meta(self, session: str, scope: Scope | None = None) -> list[tuple[int, dict[str, Any]]]:
        """(id, meta) of every entry of one session (exactly that session, no sub-session) within ``scope``
        (default: the default user), in turn order."""
        where, params = scope_where("", scope or Scope())
        rows = self.db.execute(
            f"SELECT id, meta FROM entries WHERE session = ? AND {where} ORDER BY turn", (session, *params)
        ).fetchall()
        out = []
        for i, meta in rows:
            try:
                loaded = json.loads(meta) if meta else {}
            except ValueError:
                loaded = {}
            out.append((i, loaded if isinstance(loaded, dict) else {}))
        return out

    def move_entries(self, moves: Sequence[tuple[int, str]], drop_facts: bool = False) -> int:
        """Move entries to another session, in one transaction: ``(entry id, new session)`` pairs. Each gets the
        content hash of its text in the new session (``model.content_hash``, its own scope); an entry whose new
        hash is already stored (the same turn archived there before) is deleted instead, as ``delete`` does.
        ``drop_facts``: their facts are deleted too (chains re-linked). Returns the number moved or merged."""
        from lantern.model import content_hash

        done = 0
        duplicates = []
        with self.transaction() as db:
            for entry_id, session in moves:
                row = db.execute(
                    "SELECT text, user_id, agent_id, project FROM entries WHERE id = ?", (entry_id,)
                ).fetchone()
                if row is None:
                    continue
                h = pack_hash(content_hash(session, row[0], *row[1:]))
                if db.execute("SELECT 1 FROM entries WHERE content_hash = ?", (h,)).fetchone():
                    duplicates.append(entry_id)
                    continue
                db.execute("UPDATE entries SET session = ?, content_hash = ? WHERE id = ?", (session, h, entry_id))
                bump_generation(db)
                done += 1
            if drop_facts:
                delete_facts(db, [i for i, _ in moves])
        for entry_id in duplicates:
            done += self.delete(entry=entry_id)
        return done

    def count(self) -> int:
        return self.db.execute("SELECT count(*) FROM entries").fetchone()[0]

    def fulltext(
        self, match: str, limit: int, sessions: Sequence[str] | None = None, scope: Scope | None = None
    ) -> list[tuple[int, float]]:
        """FTS5 ``bm25()`` search. ``match`` must be a safe MATCH expression (see recover.signals.fts_query).
        ``sessions`` / ``scope``: only entries of these sessions / within this scope (None: no condition).
        Returns ``(entry_id, bm25)`` best first (bm25 is negative: lower is better, SQLite's convention), one row per
        entry: a windowed entry (``index_fulltext``) scores its best row."""
        if not match:
            return []
        if not self.has_windows():
            return self._fulltext(match, limit, sessions, scope)
        want = limit * 2
        while True:  # a windowed entry's rows may take several places: ask for more until `limit` entries are found
            rows = self._fulltext(match, want, sessions, scope)
            best: dict[int, float] = {}
            for rowid, score in rows:
                best.setdefault(entry_of_row(rowid), score)
            if len(best) >= limit or len(rows) < want:
                return list(best.items())[:limit]
            want *= 4

    def has_windows(self) -> bool:
        """Whether any entry is indexed in windows (a window row has a negative rowid: one index probe)."""
        row = self.db.execute("SELECT rowid FROM entries_fts ORDER BY rowid LIMIT 1").fetchone()
        return bool(row) and row[0] < 0

    def _fulltext(
        self, match: str, limit: int, sessions: Sequence[str] | None, scope: Scope | None
    ) -> list[tuple[int, float]]:
        """``fulltext``'s rows, window rows included (rowid, bm25)."""
        if scope is not None:
            where, params = scope_where("e", scope)
            marks = ",".join("?" * len(sessions)) if sessions is not None else ""
            in_sessions = f" AND e.session IN ({marks})" if sessions is not None else ""
            return self.db.execute(  # CROSS JOIN: see below
                f"SELECT f.rowid, bm25(entries_fts) AS s FROM entries_fts AS f CROSS JOIN entries AS e ON e.id = "
                f"{_ENTRY_OF_ROW} WHERE entries_fts MATCH ? AND {where}{in_sessions} ORDER BY s LIMIT ?",
                (match, *params, *(sessions or ()), limit),
            ).fetchall()
        if sessions is None:
            return self.db.execute(
                "SELECT rowid, bm25(entries_fts) AS s FROM entries_fts WHERE entries_fts MATCH ? ORDER BY s LIMIT ?",
                (match, limit),
            ).fetchall()
        marks = ",".join("?" * len(sessions))
        # CROSS JOIN keeps the FTS5 match as the outer loop (entries looked up by primary key): the planner's
        # own choice, `rowid IN (subquery)`, measured 35x slower on 5,880 LoCoMo turns
        return self.db.execute(
            f"SELECT f.rowid, bm25(entries_fts) AS s FROM entries_fts AS f CROSS JOIN entries AS e ON e.id = "
            f"{_ENTRY_OF_ROW} WHERE entries_fts MATCH ? AND e.session IN ({marks}) ORDER BY s LIMIT ?",
            (match, *sessions, limit),
        ).fetchall()

    def term_fractions(self, match_terms: Sequence[str], sample: int) -> dict[str, float]:
        """Estimated share of entries matching each MATCH term (a quoted FTS5 string), counted in the ``sample``
        newest entries' first FTS5 rows (a rowid range: FTS5 seeks into its doclists, so the cost follows the
        sample, not the corpus; window rows are counted by ``term_postings`` only). Returns {term: fraction in
        [0, 1]}."""
        return {t: first for t, (first, _) in self._term_counts(match_terms, sample).items()}

    def term_postings(self, match_terms: Sequence[str], sample: int) -> dict[str, float]:
        """Estimated full-text rows matching each MATCH term, per entry: its first rows and its window rows
        (``fulltext.fts_rows``), counted in the ``sample`` newest entries. This is the length of the term's doclist
        over the entry count, what an OR query pays per term (``signals.select_terms``); a term of long code or
        logs, indexed in many windows, can exceed 1. Returns {term: rows per entry >= 0}."""
        return {t: first + windows for t, (first, windows) in self._term_counts(match_terms, sample).items()}

    def _term_counts(self, match_terms: Sequence[str], sample: int) -> dict[str, tuple[float, float]]:
        """{term: (first rows, window rows) matching it per sampled entry}. The sample: the entries with an id in
        ``(top - sample, top]`` (top: the newest entry id when the cache was made); window rows of entry e have the
        rowids ``-(e << WINDOW_BITS | k)``, one range for the whole sample. Cached per term until the newest id
        moves by 10% (or 100,000 terms are cached)."""
        top = self.db.execute("SELECT max(rowid) FROM entries_fts").fetchone()[0] or 0
        cache = getattr(self, "_fractions", None)
        if cache is None or abs(top - cache[0]) > 0.1 * max(cache[0], 1) or len(cache[2]) > 100_000:
            low = max(top - sample, 0)
            n = self.db.execute("SELECT count(*) FROM entries_fts WHERE rowid > ?", (low,)).fetchone()[0]
            cache = self._fractions = (top, (low, max(n, 1)), {})
        top, (low, n), counts = cache
        ranges = (low + 1, top, -((top << WINDOW_BITS) | ((1 << WINDOW_BITS) - 1)), -((low + 1) << WINDOW_BITS))
        for term in match_terms:
            if term not in counts:
                first, windows = self.db.execute(
                    "SELECT (SELECT count(*) FROM entries_fts WHERE entries_fts MATCH ?1 AND rowid BETWEEN ?2 AND ?3), "
                    "(SELECT count(*) FROM entries_fts WHERE entries_fts MATCH ?1 AND rowid BETWEEN ?4 AND ?5)",
                    (term, *ranges),
                ).fetchone()
                counts[term] = (min(first / n, 1.0), windows / n)
        return {t: counts[t] for t in match_terms}

    def sessions(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT DISTINCT session FROM entries ORDER BY session")]

    def stats(self, scope: Scope | None = None, by_table: bool = True) -> dict[str, Any]:
        """Counts and sizes. ``scope``: count only its entries (entries, sessions, text_chars, vectors_pending: those
        still without their deferred block); None counts every user's (an administrator's view), with ``users``
        (distinct users) besides. Sessions are distinct (user, session) pairs: two users' sessions of the same name
        are two sessions. The file's own figures are the file's whatever the scope: embedder, schema version
        (this backend's migration series, store/migrations.py), database bytes (page_count × page_size, every
        user's entries included), ``bytes_per_turn`` (database bytes over every user's archived turns: text,
        indexes and free space) and, unless ``by_table`` is false (a pass over every page), ``bytes_per_turn_by_table``
        (``bytes_by_table``). The administrator's view
        adds ``free_bytes``: the bytes of the
        file that hold no row, free pages (``freelist_count``) and the unused bytes of pages in use (``dbstat``),
        left by deleted, moved or rewritten rows. Later writes reuse them; a VACUUM (``lantern vacuum``) gives most
        of them back to the filesystem (a B-tree keeps some slack in its pages). ``vectors_undecodable``: the scope's
        stored vectors whose byte length fits no layout (``undecodable_count``; no recovery finds them until
        ``lantern reindex``)."""
        where, args = scope_where("", scope) if scope is not None else ("1", [])
        every = self.count() if scope is not None else None
        n, chars = self.db.execute(
            f"SELECT count(*), coalesce(sum(length(text)), 0) FROM entries WHERE {where}", args
        ).fetchone()
        n_sessions = self.db.execute(
            f"SELECT count(*) FROM (SELECT DISTINCT user_id, session FROM entries WHERE {where})", args
        ).fetchone()[0]
        # logical size (committed pages, WAL included), not the file sizes: the WAL holds rewritten pages twice
        page = self.db.execute("PRAGMA page_size").fetchone()[0]
        size = self.db.execute("PRAGMA page_count").fetchone()[0] * page
        out: dict[str, Any] = {"path": self.path}
        if scope is None:
            out["users"] = self.db.execute("SELECT count(DISTINCT user_id) FROM entries").fetchone()[0]
        out.update(
            entries=n,
            sessions=n_sessions,
            text_chars=chars,
            embedder=self.get_meta("embedder"),
            dim=int(self.get_meta("dim") or 0),
            schema_version=self.schema_version,
            database_bytes=size,
            vectors_pending=self.db.execute(
                f"SELECT count(*) FROM entries WHERE e5_pending = 1 AND {where}", args
            ).fetchone()[0],
            vectors_undecodable=self.undecodable_count(scope),
        )
        sizes, unused = self._page_use() if by_table or scope is None else ({}, 0)
        turns = n if every is None else every
        out["bytes_per_turn"] = round(size / turns) if turns else 0
        if by_table:
            out["bytes_per_turn_by_table"] = {k: round(v / turns) for k, v in sizes.items()} if turns else {}
        if scope is None:
            out["free_bytes"] = self.db.execute("PRAGMA freelist_count").fetchone()[0] * page + unused
        return out

    def bytes_by_table(self, entries: int | None = None) -> dict[str, int]:
        """Bytes per archived turn of each table and each index (each its own b-tree, its pages from SQLite's
        ``dbstat``: whole pages, so a table of one row costs a page), largest first; FTS5's shadow tables under their
        virtual table's name. {} where ``dbstat`` is not compiled in."""
        n = entries if entries is not None else self.count()
        sizes, _ = self._page_use()
        return {k: round(v / n) for k, v in sizes.items()} if n else {}

    def _page_use(self) -> tuple[dict[str, int], int]:
        """From one pass of ``dbstat`` over the pages in use: the bytes of each table and index (FTS5's shadow
        tables under their virtual table's name), largest first, and the bytes of those pages that hold nothing.
        ({}, 0) where ``dbstat`` is not compiled in."""
        try:
            rows = self.db.execute("SELECT name, sum(pgsize), sum(unused) FROM dbstat GROUP BY name").fetchall()
        except sqlite3.OperationalError:
            return {}, 0
        sizes: dict[str, int] = {}
        for name, size, _ in rows:
            key = "entries_fts" if name.startswith("entries_fts") else name
            sizes[key] = sizes.get(key, 0) + size
        return dict(sorted(sizes.items(), key=lambda kv: -kv[1])), sum(r[2] for r in rows)


def bump_generation(db: sqlite3.Connection) -> None:
    """Count one more change that rows' stamps do not show (a delete, a move, a re-embedding, a re-encoding), inside
    the writer's transaction: the ``generation`` meta key an index snapshot is valid for (store/snapshot.py)."""
    db.execute(
        "INSERT INTO meta(key, value) VALUES ('generation', '1') "
        "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
    )


VECTOR_BLOCKS = "vector_blocks"  # meta key: JSON [[start, stop], ...], the layout of the stored vectors
ERASE_PENDING = "erase_pending"  # meta key: a forget's erase that a reader kept from completing (its time)
ERASE_REWRITE = "erase_rewrite"  # meta key: a forget's FTS5 merge and VACUUM not run yet (set with its delete)


def mark_erase(db: Any, *keys: str) -> None:
    """Record in the open transaction ``db`` (a forget's delete) that the deleted text is still to be erased: the
    ``keys`` (``ERASE_REWRITE`` on SQLite) and ``ERASE_PENDING``, valued with the time. The marks commit or roll
    back with the delete itself: there is no moment at which the rows are gone and the erase is not owed."""
    now = str(_time.time())
    for key in (*keys, ERASE_PENDING):
        db.execute("DELETE FROM meta WHERE key = ?", (key,))
        db.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (key, now))


@dataclass(frozen=True)
class Erasure:
    """What ``Store.erase_free_space`` achieved. ``complete``: no byte of the deleted text is left in the file
    (the file rewritten, the WAL emptied). Else ``remaining_bytes``: the size of the database file and its WAL,
    which still hold pages from before the delete, and ``holders``: the other processes that have the file open
    (``(pid, name)``; Linux, else empty), one of which holds the read transaction that keeps those pages."""

    complete: bool
    remaining_bytes: int = 0
    holders: tuple[tuple[int, str], ...] = ()


def holders(path: str) -> tuple[tuple[int, str], ...]:
    """The other processes (pid, short name from /proc/PID/comm) that have ``path``, its -wal or its -shm open:
    Linux's /proc, the processes this user may inspect; empty elsewhere. The command line is not shown (it may
    hold a secret)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return ()
    targets = {os.path.realpath(path + suffix) for suffix in ("", "-wal", "-shm")}
    me, found = os.getpid(), []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            fds = list((entry / "fd").iterdir())
        except OSError:  # gone, or another user's
            continue
        links = set()
        for fd in fds:
            try:
                links.add(os.readlink(fd))
            except OSError:  # closed meanwhile
                pass
        if targets & links:
            try:
                name = (entry / "comm").read_text(encoding="utf-8", errors="replace").strip()
            except OSError:
                name = "?"
            found.append((int(entry.name), name))
    return tuple(sorted(found))


def _is_busy(e: sqlite3.OperationalError) -> bool:
    code = getattr(e, "sqlite_errorcode", None)
    return code in (5, 6) or "locked" in str(e) or "busy" in str(e)  # SQLITE_BUSY, SQLITE_LOCKED


# SQLITE_PERM, BUSY, LOCKED, READONLY, IOERR, FULL, CANTOPEN (primary codes; extended codes keep them in the low byte)
_UNWRITABLE_CODES = frozenset({3, 5, 6, 8, 10, 13, 14})
_UNWRITABLE_WORDS = (
    "readonly",
    "read-only",
    "disk i/o",
    "is full",
    "unable to open",
    "access permission",
)  # + _is_busy


def is_unwritable(e: sqlite3.Error) -> bool:
    """Whether ``e`` says the database cannot be written right now: a read-only file or directory, the write lock
    held by another connection, a full disk, an I/O error (not a bug such as a missing table)."""
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _UNWRITABLE_CODES
    # Python 3.10: no error code on the exception
    return _is_busy(e) or any(w in str(e).lower() for w in _UNWRITABLE_WORDS)


# free bytes below which an I/O error on open is put down to a full disk: SQLite grows the -shm file 32 KiB at a
# time and writes WAL frames of a page each; a disk with less than this left cannot hold them
_NEARLY_FULL_BYTES = 1 << 20


def _free_bytes(folder: Path) -> int | None:
    """Bytes an unprivileged user may still write on the filesystem holding ``folder``; None when unknown."""
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):  # AttributeError: no statvfs (Windows)
        return None
    return st.f_bavail * st.f_frsize


def _open_error(path: str, e: sqlite3.DatabaseError) -> LanternError:
    """The error for a database that could not be opened (``Store.__init__``), naming its cause: a directory SQLite
    cannot create the ``-wal`` / ``-shm`` files in (such a file reads as "readonly"); a path that is a directory; a
    lock another process holds
    (SQLITE_BUSY / SQLITE_LOCKED after the busy timeout: retry); a full disk (SQLITE_FULL, or an I/O error with
    less than ``_NEARLY_FULL_BYTES`` free: the ``-shm`` file could not be created or grown); another I/O error.
    Only what is none of these is "not a readable SQLite database"."""
    real = Path(path).resolve()  # SQLite puts -wal and -shm beside the file a symlink points to
    if real.is_dir():
        return LanternError(f"{path} is a directory, not a database file; give the path of a file in it")
    folder, shm = real.parent, real.with_name(real.name + "-shm")
    code = getattr(e, "sqlite_errorcode", None)
    primary = code & 0xFF if code is not None else None
    words = str(e).lower()
    if is_unwritable(e):
        if not os.access(folder, os.W_OK | os.X_OK) and not (shm.exists() and os.access(shm, os.R_OK | os.W_OK)):
            return LanternError(
                f"{path}: cannot open it: its directory {folder} is not writable, and SQLite must create the "
                f"database's -wal and -shm files beside it (WAL journal); make the directory writable, or copy the "
                f"database into a writable one"
            )
        if shm.exists() and not os.access(shm, os.R_OK | os.W_OK):
            return LanternError(f"{path}: cannot open it: {shm} is not readable and writable by this user ({e})")
    if primary in (5, 6) or (primary is None and _is_busy(e)):  # SQLITE_BUSY, SQLITE_LOCKED
        return LanternError(
            f"{path}: the database is locked: another process holds an exclusive lock on it (still held after "
            f"{BUSY_TIMEOUT_MS // 1000} s: a connection in locking_mode EXCLUSIVE, a backup, a long write); retry "
            f"when it is done ({e})"
        )
    io_error = primary == 10 or (primary is None and "disk i/o" in words)  # SQLITE_IOERR
    free = _free_bytes(folder) if io_error else None
    if primary == 13 or (primary is None and "is full" in words) or (free is not None and free < _NEARLY_FULL_BYTES):
        left = f"; {free:,} bytes free" if free is not None else ""  # SQLITE_FULL, or no room for the -shm file
        return LanternError(
            f"{path}: cannot open it: the disk holding {folder} is full (SQLite must create and grow the database's "
            f"-shm and -wal files beside it{left}); free some space and retry ({e})"
        )
    if io_error:
        return LanternError(
            f"{path}: cannot open it: an I/O error reading the database or its -wal / -shm files, not a problem of "
            f"its content ({e}); check the disk and the filesystem (e.g. dmesg) and retry"
        )
    return LanternError(f"{path} is not a readable SQLite database ({e})")


def write_error_words(path: str | os.PathLike[str] | None, e: sqlite3.Error) -> str:
    """What a command says of SQLite's error ``e`` on the database file at ``path`` (None: a server's): for a full
    disk or database (SQLITE_FULL: the filesystem is full, or the file reached ``PRAGMA max_page_count``), the
    folder to free space in, and that the write in progress was rolled back whole (``Store.transaction``); else
    SQLite's own words."""
    code = getattr(e, "sqlite_errorcode", None)
    if not (code is not None and code & 0xFF == 13 or code is None and "is full" in str(e).lower()):
        return str(e)
    where = f" on the disk holding {Path(path).resolve().parent}" if path is not None else ""
    return (
        f"{e}: the write in progress was rolled back whole, what earlier transactions stored is kept; free some "
        f"space{where} and run the command again"
    )


def _referencing(db: sqlite3.Connection) -> list[tuple[str, str]]:
    """(table, column) of every foreign key that references ``entries``: what a deletion must also clear."""
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return [
        (table, fk[3])
        for table in tables
        for fk in db.execute(f'PRAGMA foreign_key_list("{table}")').fetchall()
        if fk[2] == "entries"
    ]


def _tags(stored: str | bytes) -> list[Tag]:
    """The tags of a stored ``entries.tags`` value (store/packed.py: JSON ``[[kind, value], ...]``, maybe deflated)."""
    if stored == "[]":  # no parse for the empty list, and the stand-in of a read without tags
        return []
    return [Tag(k, v) for k, v in json.loads(unpack(stored))]


def _entry(row: tuple) -> Entry:
    return Entry(
        id=row[0],
        session=row[1],
        turn=row[2],
        time=from_epoch(row[3]),
        archived_at=from_epoch(row[4]),
        text=row[5],
        summary=unpack(row[6]),
        tags=_tags(row[7]),
        memory_type=row[8],
        importance=row[9],
        content_hash=unpack_hash(row[10]),
        confidence=row[11],
        success=row[12],
        access_count=row[13],
        tool_count=row[14],
        file_count=row[15],
        meta=json.loads(row[16]) if row[16] != "{}" else {},
        category=row[17],
        user=row[18],
        agent=row[19],
        project=row[20],
    )
