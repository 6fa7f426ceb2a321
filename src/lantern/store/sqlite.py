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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lantern.deadline import seconds_left
from lantern.errors import LanternError, StoreVersionError
from lantern.scope import Scope, scope_where
from lantern.store import fulltext, snapshot
from lantern.store import vectors as codec
from lantern.store.base import ERASE_PENDING, VECTOR_BLOCKS, BaseStore, Dialect, Erasure, NewEntry
from lantern.store.fulltext import WINDOW_BITS, entry_of_row
from lantern.store.migrations import ENTRY_ID_FLOOR, MIGRATIONS, migrate, roll_back
from lantern.store.packed import PACKED_COLUMNS, pack, pack_hash, unpack, unpack_hash
from lantern.store.times import to_epoch

if TYPE_CHECKING:  # numpy is imported where a vector is read or written: a text-first write never loads it
    import numpy as np

__all__ = [
    "BUSY_TIMEOUT_MS",
    "ERASE_PENDING",
    "VECTOR_BLOCKS",
    "Erasure",
    "NewEntry",
    "Store",
    "alone_and_empty",
    "entry_count",
    "holders",
    "is_unwritable",
    "write_error_words",
]

BUSY_TIMEOUT_MS = 10_000
ERASE_REWRITE = "erase_rewrite"  # meta key: a forget's FTS5 merge and VACUUM not run yet (set with its delete)

# the columns the in-process index reads per entry (rows_since); the stamp is the later of archived_at and vector_at;
# an entry stored text-first has no vector yet (NULL): it is indexed for every signal but the semantic ones
_INDEX_SELECT = (
    "SELECT e.id, e.session, coalesce(e.time, e.archived_at), "
    "max(e.archived_at, coalesce(e.vector_at, e.archived_at)), e.importance, e.tool_count, e.file_count, e.hints, "
    "v.vector, e.user_id, e.agent_id, e.project "
    "FROM entries e LEFT JOIN embeddings v ON v.entry_id = e.id"
)
_ENTRY_OF_ROW = f"(CASE WHEN f.rowid < 0 THEN (-f.rowid) >> {WINDOW_BITS} ELSE f.rowid END)"
BUSY_RETRIES, BUSY_BACKOFF_S = 6, 0.05  # BEGIN IMMEDIATE retried with backoff 0.05 .. 1.6 s after busy_timeout (ours)


def _busy_ms() -> int:
    """The busy timeout a lock wait may use now: ``BUSY_TIMEOUT_MS``, or less when a ``lock_deadline`` (lantern/
    deadline.py) is nearer."""
    left = seconds_left()
    return BUSY_TIMEOUT_MS if left is None else min(BUSY_TIMEOUT_MS, int(left * 1000))


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


class Store(BaseStore):
    """SQLite tables of one Lantern database (the operations both stores share: store/base.py). ``path`` may be
    ``":memory:"`` (tests only; no WAL there).
    ``readonly``: opened to be read only (``lantern copy``'s source, ``_open_readonly``): nothing is created, migrated
    or written, and a file that is not a Lantern store of this schema version raises LanternError."""

    dialect = Dialect()  # ``?`` lists of 500 ids, no row locks (one writer at a time), compact JSON, packed columns

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
                self.path, isolation_level=None, check_same_thread=False, timeout=_busy_ms() / 1000
            )
        except sqlite3.DatabaseError as e:
            raise _open_error(self.path, e) from None
        self.db.execute(f"PRAGMA busy_timeout = {_busy_ms()}")
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
        self._init_embedder()
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
        self._init_embedder()

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
        if seconds_left() is not None:  # within a lock_deadline: one wait, of at most the time left
            wait = _busy_ms() / 1000 if wait is None else min(wait, _busy_ms() / 1000)
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

    # the errors a skippable write (reinforcement, an event, a fill before a recovery) may meet: is_unwritable
    write_errors = (sqlite3.OperationalError,)

    @staticmethod
    def is_unwritable(e: BaseException) -> bool:
        """Whether ``e`` says the file cannot take this write now (module ``is_unwritable``)."""
        return is_unwritable(e)

    # ------------------------------------------------------------------ write (the rules: store/base.py)
    def _write_grown(
        self, db: sqlite3.Connection, items: Sequence[tuple[NewEntry, np.ndarray | None, int]], now: float
    ) -> None:
        """Replace each entry with the (row, vector, entry id) turn that extends it: its full-text rows removed
        before the row changes, written again after; its vector replaced (the entry may have had none: stored
        text-first), or dropped when the row is stored text-first (vector None: the old one is another text's)."""
        for row, vec, entry_id in items:
            self._delete_fts(db, entry_id)
            db.execute(
                "UPDATE entries SET time = coalesce(time, ?), archived_at = ?, text = ?, summary = ?, "
                "tags = ?, hints = ?, memory_type = ?, importance = ?, content_hash = ?, tool_count = ?, "
                "file_count = ?, meta = ?, category = ?, e5_pending = ?, vector_at = NULL WHERE id = ?",
                (to_epoch(row.time), now, *self._values(row), self._pending(vec), entry_id),
            )
            if vec is None:
                db.execute("DELETE FROM embeddings WHERE entry_id = ?", (entry_id,))
            else:
                db.execute(
                    "INSERT OR REPLACE INTO embeddings(entry_id, vector) VALUES (?, ?)",
                    (entry_id, self.encode_vector(vec)),
                )
            self.index_fulltext(db, entry_id, row.summary, row.text, [t.value for t in row.tags])

    def _insert_new(
        self, db: sqlite3.Connection, items: Sequence[tuple[NewEntry, int, np.ndarray | None]], now: float
    ) -> list[int]:
        """Insert the (row, turn number, vector) entries, their vectors (None: none yet, stored text-first) and
        full-text rows; their ids, in order."""
        ids = []
        for row, turn, vec in items:
            cur = db.execute(
                "INSERT INTO entries(id, session, turn, time, archived_at, text, summary, tags, hints, "
                "memory_type, importance, content_hash, tool_count, file_count, meta, category, confidence, "
                "success, user_id, agent_id, project, e5_pending) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0.5, 0.5, ?, ?, ?, ?)",
                (
                    self.new_entry_id(db),
                    row.session,
                    turn,
                    to_epoch(row.time),
                    now,
                    *self._values(row),
                    row.user,
                    row.agent,
                    row.project,
                    self._pending(vec),
                ),
            )
            entry_id = cur.lastrowid
            if vec is not None:
                db.execute(
                    "INSERT INTO embeddings(entry_id, vector) VALUES (?, ?)", (entry_id, self.encode_vector(vec))
                )
            self.index_fulltext(db, entry_id, row.summary, row.text, [t.value for t in row.tags])
            ids.append(entry_id)
        return ids

    @staticmethod
    def new_entry_id(db: sqlite3.Connection) -> int:
        """The id of the entry inserted next in the open write transaction ``db``: one above every id given before,
        stored or deleted (meta ``ENTRY_ID_FLOOR``, migrations.py ``m013_ids_once``), so an id held by a form,
        a feedback or a forget never names another entry."""
        return db.execute(
            "SELECT max(coalesce((SELECT max(id) FROM entries), 0), "
            "coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE key = ?), 0)) + 1",
            (ENTRY_ID_FLOOR,),
        ).fetchone()[0]

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

    @contextmanager
    def _deleting(self) -> Iterator[None]:
        """Deleted cells are zeroed in the pages written (SQLite ``secure_delete``)."""
        self.db.execute("PRAGMA secure_delete = ON")
        try:
            yield
        finally:
            self.db.execute("PRAGMA secure_delete = OFF")

    def _drop_rows(self, db: sqlite3.Connection, ids: list[int]) -> None:
        """The entries ``ids``: their FTS5 rows, the rows of EVERY table with a foreign key to ``entries``
        (embeddings, and any table a later migration adds that way), then the entries."""
        for entry_id in ids:
            self._delete_fts(db, entry_id)
        for table, column in _referencing(db):  # one statement per 500 ids: the column may lack an index
            for where, params in self.dialect.in_ids(f'"{column}"', ids):
                db.execute(f'DELETE FROM "{table}" WHERE {where}', params)
        db.executemany("DELETE FROM entries WHERE id = ?", [(i,) for i in ids])

    def _deleted(self) -> None:
        if self.path != ":memory:":
            snapshot.remove(self.path, snapshot.store_id(self))  # they hold the deleted rows' vectors and terms

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
        return self._erase(BUSY_TIMEOUT_MS / 1000 if wait is None else wait, on_wait)

    def finish_pending_erase(self, wait: float = 0.0, on_wait: Callable[[Erasure], None] | None = None) -> Erasure:
        """As ``BaseStore.finish_pending_erase``, and the whole ``erase_free_space`` first when a forget's process
        ended before it (``ERASE_REWRITE`` in meta, written by the delete's own transaction: its FTS5 segments still
        hold the deleted terms)."""
        try:
            if self.path != ":memory:" and self.get_meta(ERASE_REWRITE) is not None:
                return self.erase_free_space(wait, on_wait)
        except self._erase_errors:
            return self._erase_failed()
        return super().finish_pending_erase(wait, on_wait)

    def _owe_erase(self, db: sqlite3.Connection) -> None:
        super()._owe_erase(db)
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (ERASE_REWRITE, str(_time.time())))

    _erase_errors = (sqlite3.Error,)

    def _erase_holders(self) -> tuple[tuple[int, str], ...]:
        return holders(self.path)

    def _erase_step(self, wait: float, marker: bool = False) -> bool:
        """A TRUNCATE checkpoint waiting at most ``wait`` seconds for readers; True when it completed (every page
        copied into the database file, the WAL emptied)."""
        if self.path == ":memory:":
            return True
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

    @staticmethod
    def _put_vector(
        db: sqlite3.Connection, entry_id: int, vector: np.ndarray, blocks: Sequence[tuple[int, int]]
    ) -> None:
        db.execute(
            "INSERT OR REPLACE INTO embeddings(entry_id, vector) VALUES (?, ?)",
            (entry_id, codec.encode(vector, blocks)),
        )

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

    def _decode_one(self, blob: bytes) -> np.ndarray:
        return codec.decode(blob, self.dim, self.blocks)

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
        where, params = self._where(scope, "e")
        return self.db.execute(
            f"SELECT count(*) FROM embeddings v JOIN entries e ON e.id = v.entry_id "
            f"WHERE {self._undecodable_sql('v')} AND {where}",
            params,
        ).fetchone()[0]

    # ------------------------------------------------------------------ vectors filled after the commit
    def vectors_compacted(self) -> bool:
        """Whether ``compact_vectors`` has nothing to do here (meta ``vectors_format`` is the current format): one
        meta read, no vector read."""
        return self.get_meta("vectors_format") == str(codec.FORMAT)

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
                        import numpy as np

                        vec = np.frombuffer(blob, "<f4")
                        db.execute(
                            "UPDATE embeddings SET vector = ? WHERE entry_id = ?",
                            (codec.encode(vec, self.blocks), entry_id),
                        )
                        if self.deferred is not None and not vec[slice(*self.deferred)].any():
                            db.execute("UPDATE entries SET e5_pending = 1 WHERE id = ?", (entry_id,))
                        self._changed(db)
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

    # ------------------------------------------------------------------ read
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
        for where, params in self.dialect.in_ids("e.id", ids):
            out += self.db.execute(f"{_INDEX_SELECT} WHERE {where} ORDER BY e.id", params).fetchall()
        return out

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

    def _sizes(self, scope: Scope | None, by_table: bool) -> tuple[int, dict[str, int], int | None]:
        """``stats``' sizes: database bytes (page_count × page_size: the logical size, committed pages, WAL
        included, not the file sizes, as the WAL holds rewritten pages twice), bytes per table (``bytes_by_table``,
        a pass over every page) and, for the administrator's view, ``free_bytes``: the bytes of the file that hold
        no row, free pages (``freelist_count``) and the unused bytes of pages in use (``dbstat``), left by deleted,
        moved or rewritten rows. Later writes reuse them; a VACUUM (``lantern vacuum``) gives most of them back to
        the filesystem (a B-tree keeps some slack in its pages)."""
        page = self.db.execute("PRAGMA page_size").fetchone()[0]
        size = self.db.execute("PRAGMA page_count").fetchone()[0] * page
        sizes, unused = self._page_use() if by_table or scope is None else ({}, 0)
        free = self.db.execute("PRAGMA freelist_count").fetchone()[0] * page + unused if scope is None else None
        return size, sizes, free

    def backup(self, path: str | os.PathLike[str]) -> None:
        """Copy the database, as one snapshot, into a new SQLite file at ``path`` (SQLite's online backup)."""
        dst = sqlite3.connect(path)
        try:
            self.db.backup(dst)
        finally:
            dst.close()

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


@contextmanager
def alone_and_empty(path: Path) -> Iterator[bool]:
    """Whether the SQLite file at ``path`` may be undone by the command that created it (cli/common.py ``Before``),
    decided and held for the block: True while a connection holds it exclusively (rollback-journal mode, an
    EXCLUSIVE transaction) and it holds no entry, or when SQLite cannot read it (not a database: the command's
    half-made file, which nobody else uses as one); False when it holds an entry, or when another connection has it
    open: leaving WAL mode needs every other connection closed, so a database another process is filling (a
    concurrent ``ingest`` into the same new path, which has committed nothing yet) is never taken for one to
    undo."""
    try:
        db = sqlite3.connect(f"{path.as_uri()}", uri=True, timeout=0, isolation_level=None)
    except (sqlite3.Error, OSError, ValueError):
        yield True
        return
    try:
        try:
            db.execute("PRAGMA journal_mode=DELETE").fetchone()
            db.execute("BEGIN EXCLUSIVE")
        except sqlite3.OperationalError as e:
            if "locked" in str(e).lower() or "busy" in str(e).lower():
                yield False  # another connection has it open: its database, not ours to undo
                return
            yield True
            return
        except sqlite3.DatabaseError:
            yield True
            return
        try:
            empty = db.execute("SELECT EXISTS (SELECT 1 FROM entries)").fetchone()[0] != 1
        except sqlite3.Error:
            empty = True
        yield empty
    finally:
        db.close()


def entry_count(path: str | os.PathLike[str]) -> int | None:
    """How many entries the SQLite file at ``path`` holds, read on a connection of its own (waiting at most 5 s for
    a writer); None when it cannot be read."""
    try:
        con = sqlite3.connect(path, timeout=5)
        try:
            return con.execute("SELECT count(*) FROM entries").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return None


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
