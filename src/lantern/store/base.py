"""What both stores do the same way, written once (docs/architecture.md §2.9, §9): ``BaseStore`` holds every
operation of the store protocol (store/protocol.py) whose rule does not depend on the backend, over the
connection-shaped ``db`` (``?`` placeholders, portable SQL); a backend (store/sqlite.py ``Store``,
store/postgres/store.py ``PostgresStore``) adds its connection, its transactions and locks, its full-text index and
its vector column, and says how its SQL differs in a ``Dialect``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lantern.errors import EmbedderMismatchError, LanternError, MissingVectorError, UnsupportedBackendError
from lantern.model import Entry, Tag, content_hash
from lantern.scope import Scope, scope_where, selection_where
from lantern.store import events as event_rows
from lantern.store import facts as fact_rows
from lantern.store import overview, transfer
from lantern.store import reinforcement as reinforcement_rows
from lantern.store.events import forget_events
from lantern.store.facts import delete_facts, fact_scope, write_facts
from lantern.store.packed import unpack, unpack_hash
from lantern.store.plan import Last, plan_rows, unstored_conversations
from lantern.store.reinforcement import forget_pending
from lantern.store.rewinds import RewindRecords
from lantern.store.times import from_epoch

if TYPE_CHECKING:  # numpy is imported where a vector is read or written: a text-first write never loads it
    import numpy as np

__all__ = ["ERASE_PENDING", "UNEMBEDDED", "VECTOR_BLOCKS", "BaseStore", "Dialect", "Erasure", "NewEntry"]

VECTOR_BLOCKS = "vector_blocks"  # meta key: JSON [[start, stop], ...], the layout of the stored vectors
# ``entries.e5_pending``: 0 the vector is whole, 1 its deferred block (e5) is still to be filled, UNEMBEDDED it has
# none yet (stored text-first: ``add(rows, None)``; ``put_vectors`` writes it)
UNEMBEDDED = 2
ERASE_PENDING = "erase_pending"  # meta key: a forget's erase that a reader kept from completing (its time)
ENTRY_COLUMNS = (
    "id, session, turn, time, archived_at, text, summary, tags, memory_type, importance, content_hash, "
    "confidence, success, access_count, tool_count, file_count, meta, category, user_id, agent_id, project"
)
_COMPACT = (",", ":")  # JSON separators of the tags and hints columns: no space after each comma (~2 bytes a term)


@dataclass(frozen=True)
class Dialect:
    """How a backend's SQL differs where the shared operations meet it.

    - ``true``: the literal of an always-true condition (SQLite ``1``, PostgreSQL ``TRUE``);
    - ``for_update``: the suffix that locks the rows a read-then-write selects (PostgreSQL ``FOR UPDATE``; SQLite's
      ``BEGIN IMMEDIATE`` runs every writer alone);
    - ``ids_per_query``: how many ids one ``col IN (?, ...)`` takes (SQLite, at most 999 variables before 3.32),
      or None for one ``col = ANY(?)`` array parameter (PostgreSQL);
    - ``json_separators``: of the tags and hints columns (SQLite's compact ones, ~2 bytes a term);
    - ``nul_free``: text columns cannot hold U+0000 (PostgreSQL): it is dropped from text and summary;
    - ``layout_in_meta``: the vectors' block layout is recorded in meta ``vector_blocks`` (SQLite's int8 blocks,
      store/vectors.py; pgvector stores float32 whatever the blocks);
    - ``changes_counted``: each change a row's stamps do not show bumps meta ``generation`` (store/snapshot.py:
      the SQLite index snapshots; PostgreSQL counts every transaction in its ``changes`` table instead);
    - ``cli_location``: how a command names this store in advice (the file's path, or ``URL``: a server URL may
      carry a password);
    - ``text_first``: ``add`` may store rows without their vectors (``add(rows, None)``: SQLite)."""

    true: str = "1"
    for_update: str = ""
    ids_per_query: int | None = 500
    json_separators: tuple[str, str] | None = _COMPACT
    nul_free: bool = False
    layout_in_meta: bool = True
    changes_counted: bool = True
    cli_location: str | None = None
    text_first: bool = True

    def in_ids(self, column: str, ids: Sequence[Any]) -> Iterator[tuple[str, list[Any]]]:
        """(condition, parameters) selecting rows whose ``column`` is one of ``ids``, one pair per query."""
        if self.ids_per_query is None:
            if len(ids):
                yield f"{column} = ANY(?)", [list(ids)]
            return
        for start in range(0, len(ids), self.ids_per_query):
            chunk = list(ids[start : start + self.ids_per_query])
            yield f"{column} IN ({','.join('?' * len(chunk))})", chunk


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


@dataclass(frozen=True)
class Erasure:
    """What ``erase_free_space`` achieved. ``complete``: no byte of the deleted text is left in the store (SQLite:
    the file rewritten, the WAL emptied; PostgreSQL: the tables rewritten). Else ``remaining_bytes``: what still
    holds pages from before the delete (the database file and its WAL; the tables), and ``holders``: who keeps them
    (``(pid, name)``: the other processes that have the file open, Linux, else empty; the server sessions holding a
    lock on the tables)."""

    complete: bool
    remaining_bytes: int = 0
    holders: tuple[tuple[int, str], ...] = ()


def tags_of(stored: str | bytes) -> list[Tag]:
    """The tags of a stored ``entries.tags`` value (store/packed.py: JSON ``[[kind, value], ...]``, maybe deflated)."""
    if stored == "[]":  # no parse for the empty list, and the stand-in of a read without tags
        return []
    return [Tag(k, v) for k, v in json.loads(unpack(stored))]


def entry_of(row: tuple) -> Entry:
    """An ``Entry`` from a row of ``ENTRY_COLUMNS`` (packed columns inflated: store/packed.py)."""
    return Entry(
        id=row[0],
        session=row[1],
        turn=row[2],
        time=from_epoch(row[3]),
        archived_at=from_epoch(row[4]),
        text=row[5],
        summary=unpack(row[6]),
        tags=tags_of(row[7]),
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


class BaseStore(RewindRecords):
    """The operations both backends share. A backend sets ``db`` (connection-shaped), ``path``, ``readonly``,
    ``schema_version`` and the embedder's attributes, and provides ``transaction``, ``snapshot``, the codecs
    (``stored_value`` / ``entry_value``, ``encode_vector`` / ``decode_vectors`` / ``vector_decodable``), the
    full-text index and the hooks named below (``_write_grown``, ``_insert_new``, ``_drop_rows``, ``_erase_step``,
    ...)."""

    dialect = Dialect()
    db: Any
    path: str
    readonly: bool
    schema_version: int

    def _init_embedder(self) -> None:
        self.embedder_id: str | None = None
        self.embedder_name: str | None = None
        self.dim = 0
        self.blocks: list[tuple[int, int]] = []  # the embedder's blocks (store/vectors.py); set by check_embedder
        self.deferred: tuple[int, int] | None = None  # the block filled after the commit (e5 of English turns)

    # hooks a backend provides
    def transaction(self, wait: float | None = None) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def stored_value(self, column: str, value: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def new_entry_id(db: Any) -> int | None:
        """The id the entry inserted next in ``db``'s transaction takes, never one given before; None: the
        backend's default gives it (PostgreSQL's identity sequence never gives a value twice)."""
        return None

    def entry_value(self, column: str, stored: Any) -> Any:
        raise NotImplementedError

    def encode_vector(self, vector: np.ndarray) -> Any:
        raise NotImplementedError

    def decode_vectors(self, blobs: Sequence[Any]) -> np.ndarray:
        raise NotImplementedError

    def vector_decodable(self, blob: Any) -> bool:
        raise NotImplementedError

    def _changed(self, db: Any) -> None:
        """Count one more change that rows' stamps do not show (a delete, a move, a re-embedding), inside the
        writer's transaction, where the dialect counts them (``changes_counted``: meta ``generation``)."""
        if self.dialect.changes_counted:
            db.execute(
                "INSERT INTO meta(key, value) VALUES ('generation', '1') "
                "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
            )

    def _where(self, scope: Scope | None, alias: str = "") -> tuple[str, list[Any]]:
        """(SQL condition, parameters) of ``scope`` (lantern/scope.py); None: every row."""
        return scope_where(alias, scope) if scope is not None else (self.dialect.true, [])

    # ------------------------------------------------------------------ meta and embedder
    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def put_meta(self, values: dict[str, str | None]) -> None:
        """Set each meta ``key`` to its value (None: remove the key), all in one transaction."""
        with self.transaction() as db:
            for key, value in values.items():
                if value is None:
                    db.execute("DELETE FROM meta WHERE key = ?", (key,))
                else:
                    db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def meta_default(self, key: str, value: str) -> str:
        """The value of meta ``key``, set to ``value`` first when the key is absent (one transaction; when another
        process set it meanwhile, its value is kept and returned)."""
        with self.transaction() as db:
            db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (key, value))
        stored = self.get_meta(key)
        return value if stored is None else stored

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
        ``deferred``: the block a row may lack until ``fill_vectors`` adds it (``pending_vectors``). Recording the
        first embedder is the backend's ``_first_embedder`` (PostgreSQL also fixes the vector column's dimension)."""
        stored = self._recorded_embedder(self.db)
        given = [tuple(b) for b in blocks] if blocks else [(0, dim)]
        if not stored and self.readonly:  # no embedder recorded: no entry was ever stored, nothing to decode
            stored = {"embedder": embedder_id, "dim": str(dim)}
        if not stored:
            with self.transaction() as db:
                self._lock_meta(db)
                stored = self._recorded_embedder(db)
                if not stored:
                    self._first_embedder(db, embedder_id, dim, given)
                    stored = self._recorded_embedder(db)
        self.embedder_id, self.dim, self.embedder_name = embedder_id, dim, name or embedder_id
        self._verify_embedder(stored)
        # the stored bytes are decoded by the layout they were written in, whatever the embedder object says (a
        # wrapper without ``blocks`` would otherwise read int8 rows as one block); a store written before the layout
        # was recorded takes the embedder's (compact_vectors records it)
        recorded = stored.get(VECTOR_BLOCKS)
        self.blocks = self._recorded_layout(recorded, dim) if recorded else given
        self.deferred = deferred

    def holds_vectors(self) -> bool:
        """Whether any entry has a stored vector (a new database, or one holding only turns stored text-first, has
        none: there is nothing yet to decode or to check an embedder against)."""
        return self.db.execute("SELECT 1 FROM embeddings LIMIT 1").fetchone() is not None

    def use_recorded_embedder(self) -> bool:
        """Take the embedder id, dimension and vector layout the database recorded (meta) as this handle's, with no
        embedder object: what reading the stored vectors' layout needs (``undecodable_count``) and what writes
        are checked against (``verify_embedder``), before any model is loaded. ``check_embedder`` replaces them,
        and adds the deferred block, once the embedder is loaded. False (nothing set) when none is recorded."""
        stored = self._recorded_embedder(self.db)
        if not stored.get("embedder") or not (stored.get("dim") or "").isdigit():
            return False
        dim = int(stored["dim"])
        recorded = stored.get(VECTOR_BLOCKS)
        self.blocks = self._recorded_layout(recorded, dim) if recorded else [(0, dim)]
        self.embedder_id, self.dim, self.embedder_name = stored["embedder"], dim, stored["embedder"]
        return True

    def _lock_meta(self, db: Any) -> None:
        """Make the open transaction the only one recording a first embedder: nothing to do where every writer
        runs alone (SQLite)."""

    def _first_embedder(self, db: Any, embedder_id: str, dim: int, blocks: Sequence[tuple[int, int]]) -> None:
        self.set_embedder(db, embedder_id, dim, blocks)

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

    def _recorded_embedder(self, db: Any) -> dict[str, str]:
        """meta's ``embedder``, ``dim`` and (``layout_in_meta``) ``vector_blocks`` (the JSON ``[[start, stop], ...]``
        layout the vectors are stored in, store/vectors.py), those present."""
        keys = ("embedder", "dim", VECTOR_BLOCKS) if self.dialect.layout_in_meta else ("embedder", "dim")
        return dict(db.execute(f"SELECT key, value FROM meta WHERE key IN ({','.join('?' * len(keys))})", keys))

    def verify_embedder(self, db: Any = None) -> None:
        """Raise EmbedderMismatchError when the recorded embedder is no longer the one this handle checked."""
        if getattr(self, "embedder_id", None) is not None:
            self._verify_embedder(self._recorded_embedder(db or self.db))

    def _verify_embedder(self, stored: dict[str, str]) -> None:
        if stored.get("embedder") != self.embedder_id or stored.get("dim") != str(self.dim):
            raise EmbedderMismatchError(
                f"{self.path} was created with embedder {stored.get('embedder')!r} ({stored.get('dim')}-d), "
                f"not {self.embedder_id!r} ({self.dim}-d). Open it with that embedder, or run "
                f"`lantern --db {self.dialect.cli_location or self.path} reindex --embedder {self.embedder_name}` to "
                "re-embed every entry with the one you asked for."
            )

    def set_embedder(
        self, db: Any, embedder_id: str, dim: int, blocks: Sequence[tuple[int, int]] | None = None
    ) -> None:
        """Record the embedder and (``layout_in_meta``) the block layout of its stored vectors (default one block of
        ``dim``)."""
        rows = [("embedder", embedder_id), ("dim", str(dim))]
        if self.dialect.layout_in_meta:
            rows.append((VECTOR_BLOCKS, json.dumps([list(b) for b in blocks] if blocks else [[0, dim]])))
        db.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", rows)

    # ------------------------------------------------------------------ write
    def add(
        self,
        rows: Sequence[NewEntry],
        vectors: Any,
        after: Callable[[Any, list[tuple[int, bool]]], None] | None = None,
    ) -> list[tuple[int, bool]]:
        """Store prepared turns and their embeddings in ONE transaction.

        Returns ``(entry_id, added)`` per row, in order; ``added`` is False for a duplicate (same content hash).
        ``vectors``: an array of shape ``(len(rows), dim)`` or a list of vectors where a row known to be stored may
        have None (``MissingVectorError``, nothing written, if it is not stored after all); or None: the rows are
        stored text-first, with their full-text rows, tags and facts but no vector (``Dialect.text_first``, else
        UnsupportedBackendError), marked ``UNEMBEDDED`` until ``put_vectors`` gives them one (``unembedded``).
        A turn that extends the session's latest stored turn (a live turn that grew: the user message first,
        the assistant reply later) replaces it in place instead of adding a second entry. Turn numbers continue
        the session's numbering (store/plan.py). ``after(db, result)``, when given, runs inside the same
        transaction once the rows are written (reinforce.py resolves pending recoveries there). Raises the
        driver's errors; on any error nothing is written.
        """
        if vectors is None:
            if not self.dialect.text_first:
                raise UnsupportedBackendError("a text-first archive", type(self).__name__.lower().replace("store", ""))
            vectors = [None] * len(rows)
            has_vector = [True] * len(rows)  # no row waits for one: each is written without it
        else:
            if len(rows) != len(vectors):
                raise ValueError(f"{len(rows)} rows but {len(vectors)} vectors")
            has_vector = [v is not None for v in vectors]
        return self._retrying(lambda: self._add(rows, vectors, has_vector, after))

    def _retrying(self, write: Callable[[], Any]) -> Any:
        """Run ``add``'s transaction ``write``: once where no writer can roll another back (SQLite)."""
        return write()

    def _add(
        self,
        rows: Sequence[NewEntry],
        vectors: Any,
        has_vector: Sequence[bool],
        after: Callable[[Any, list[tuple[int, bool]]], None] | None,
    ) -> list[tuple[int, bool]]:
        """``add``'s transaction: the backend's locks (``_lock_rows``), the plan (store/plan.py, from two reads:
        the stored hashes, each conversation's last turn), the grown turns rewritten and the new ones inserted (the
        backend's ``_write_grown`` / ``_insert_new``; a vector None: stored text-first), the facts of each written
        row in row order, as the chains expect (a grown turn's facts replace those of the entry it extends), then
        ``after``."""
        now = time.time()
        with self.transaction() as db:
            self._lock_rows(db, rows, after)
            if any(v is not None for v in vectors):  # a text-first write stores no vector to check
                self.verify_embedder(db)
            stored = self._stored_ids(db, list(dict.fromkeys(r.content_hash for r in rows)))
            last = self._last_turns(db, unstored_conversations(rows, stored))
            plan = plan_rows(rows, has_vector, stored, last, _missing_vector)
            if plan.grown:
                self._write_grown(db, [(rows[i], self._vector(vectors[i]), e) for i, e in plan.grown], now)
            ids = self._insert_new(db, [(rows[i], turn, self._vector(vectors[i])) for i, turn in plan.new], now)
            out = plan.resolve(ids)
            replaced = {i for i, _ in plan.grown}
            for i, (row, (entry_id, added)) in enumerate(zip(rows, out)):
                if added and (row.facts or i in replaced):
                    write_facts(db, entry_id, row.facts, now, fact_scope(row))
            if after is not None:
                after(db, out)
        return out

    def _lock_rows(self, db: Any, rows: Sequence[NewEntry], after: Any) -> None:
        """Make ``add``'s transaction the only writer of its rows' conversations and fact chains: nothing to do
        where every writer runs alone (SQLite)."""

    @staticmethod
    def _vector(vector: Any) -> np.ndarray | None:
        """``vector`` as float32; None stays None (a row stored text-first)."""
        if vector is None:
            return None
        import numpy as np

        return np.asarray(vector, np.float32)

    def _pending(self, vector: np.ndarray | None) -> int:
        """The ``e5_pending`` value of an entry stored with ``vector``: ``UNEMBEDDED`` for None (stored
        text-first), 1 when its deferred block (the routed embedder's e5 part) is still all zeros, else 0."""
        if vector is None:
            return UNEMBEDDED
        import numpy as np

        return int(self.deferred is not None and not np.asarray(vector)[slice(*self.deferred)].any())

    def _stored_ids(self, db: Any, hashes: Sequence[str]) -> dict[str, int]:
        """{content hash: entry id} of those of ``hashes`` that are stored."""
        out: dict[str, int] = {}
        stored = [self.stored_value("content_hash", h) for h in hashes]
        for where, params in self.dialect.in_ids("content_hash", stored):
            for h, entry_id in db.execute(f"SELECT content_hash, id FROM entries WHERE {where}", params):
                out[self.entry_value("content_hash", h)] = entry_id
        return out

    def _last_turns(self, db: Any, convs: Sequence[tuple[str, str, str, str]]) -> dict[Any, Last]:
        """Each conversation's last stored turn (``plan.Last``), those that have one."""
        out = {}
        for conv in convs:
            row = db.execute(
                "SELECT id, turn, text, content_hash FROM entries WHERE user_id = ? AND session = ? AND agent_id = ? "
                "AND project = ? ORDER BY turn DESC LIMIT 1",
                conv,
            ).fetchone()
            if row:
                out[conv] = Last(row[0], row[1], row[2], self.entry_value("content_hash", row[3]))
        return out

    def _values(self, row: NewEntry) -> tuple:
        """The column values ``add`` writes: text, summary, tags, hints, memory_type, importance, content_hash,
        tool_count, file_count, meta, category, each in its stored form (``stored_value``; U+0000 dropped where
        text cannot hold it, ``Dialect.nul_free``)."""
        sep = self.dialect.json_separators
        text, summary = row.text, row.summary
        if self.dialect.nul_free:
            text, summary = text.replace("\x00", ""), summary.replace("\x00", "")
        tags = json.dumps([[t.kind, t.value] for t in row.tags], ensure_ascii=False, separators=sep)
        return (
            text,
            self.stored_value("summary", summary),
            self.stored_value("tags", tags),
            json.dumps(row.hints, ensure_ascii=False, separators=sep),
            row.memory_type,
            float(row.importance),
            self.stored_value("content_hash", row.content_hash),
            row.tool_count,
            row.file_count,
            json.dumps(row.meta, default=str),  # ASCII escapes: a lone surrogate in a transcript id cannot break it
            row.category,
        )

    def delete(
        self,
        *,
        entry: int | None = None,
        session: str | None = None,
        scope: Scope | None = None,
        erase: bool = False,
    ) -> int:
        """Delete entries by id, by session (with its sub-sessions ``session/...``), and/or by ``scope`` (the
        conditions combine with AND; ``scope`` None: any user), in one transaction: the entry rows, their full-text
        rows, and the rows of every table that refers to them (``_drop_rows``), with facts chains re-linked first
        (store/facts.py), out of the pending recoveries, and the compaction events they are part of
        (store/events.py ``forget_events``). ``erase`` (a forget): the same transaction records that the deleted
        text is still to be erased (``_owe_erase``), so that a process killed before its ``erase_free_space``
        leaves the erase to the next open, close or forget. Returns the count. Raises ValueError when nothing
        selects."""
        where, args = selection_where(entry, session, scope)
        with self._deleting():
            with self.transaction() as db:
                rows = db.execute(
                    f"SELECT id, user_id, session, archived_at FROM entries WHERE {where}{self.dialect.for_update}",
                    args,
                ).fetchall()
                ids = [r[0] for r in rows]
                forget_events(db, rows, session=session, scope=scope, whole=entry is None)
                delete_facts(db, ids)  # re-links each key's chain around the deleted versions
                forget_pending(db, ids)  # and out of the pending recoveries
                self._forget_rewinds(db, ids)  # and out of the open rewind candidates
                self._drop_rows(db, ids)
                if ids:
                    self._changed(db)
                    if erase:
                        self._owe_erase(db)
            if ids:
                self._deleted()
        return len(ids)

    def count_selected(
        self, *, entry: int | None = None, session: str | None = None, scope: Scope | None = None
    ) -> int:
        """How many entries ``delete`` with these selectors would delete now (one COUNT, nothing written)."""
        where, args = selection_where(entry, session, scope)
        return self.db.execute(f"SELECT count(*) FROM entries WHERE {where}", args).fetchone()[0]

    def _owe_erase(self, db: Any) -> None:
        """Record in the open transaction ``db`` (a forget's delete) that the deleted text is still to be erased:
        ``ERASE_PENDING`` with the time (SQLite adds ``ERASE_REWRITE``). The mark commits or rolls back with the
        delete itself: there is no moment at which the rows are gone and the erase is not owed."""
        db.execute("DELETE FROM meta WHERE key = ?", (ERASE_PENDING,))
        db.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (ERASE_PENDING, str(time.time())))

    def _deleting(self) -> AbstractContextManager[Any]:
        """Around a delete's transaction (SQLite: ``secure_delete``)."""
        return nullcontext()

    def _deleted(self) -> None:
        """After a delete that removed entries committed (SQLite: the index snapshots holding them go)."""

    def move_entries(self, moves: Sequence[tuple[int, str]], drop_facts: bool = False) -> int:
        """Move entries to another session, in one transaction: ``(entry id, new session)`` pairs (the rows locked,
        ``Dialect.for_update``). Each gets the content hash of its text in the new session (``model.content_hash``,
        its own scope); an entry whose new hash is already stored (the same turn archived there before) is deleted
        instead, as ``delete`` does. ``drop_facts``: their facts are deleted too (chains re-linked). Returns the
        number moved or merged."""
        done = 0
        duplicates = []
        with self.transaction() as db:
            for entry_id, session in moves:
                row = db.execute(
                    f"SELECT text, user_id, agent_id, project FROM entries WHERE id = ?{self.dialect.for_update}",
                    (entry_id,),
                ).fetchone()
                if row is None:
                    continue
                h = self.stored_value("content_hash", content_hash(session, row[0], *row[1:]))
                if db.execute("SELECT 1 FROM entries WHERE content_hash = ?", (h,)).fetchone():
                    duplicates.append(entry_id)
                    continue
                db.execute("UPDATE entries SET session = ?, content_hash = ? WHERE id = ?", (session, h, entry_id))
                self._changed(db)
                done += 1
            if drop_facts:
                delete_facts(db, [i for i, _ in moves])
        for entry_id in duplicates:
            done += self.delete(entry=entry_id)
        return done

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
        ``deferred``: the new embedder's, as ``check_embedder`` takes them. The backend's ``_vectors_replaced``
        frames the writes (PostgreSQL: the vector column takes the new dimension, its HNSW index rebuilt)."""
        blocks = [tuple(b) for b in blocks] if blocks else [(0, dim)]
        n = 0
        now = time.time()
        pairs = list(pairs)
        with self.transaction() as db:
            with self._vectors_replaced(db, dim):
                import numpy as np

                for entry_id, vec in pairs:
                    pending = int(deferred is not None and not np.asarray(vec)[slice(*deferred)].any())
                    self._put_vector(db, entry_id, vec, blocks)
                    db.execute(
                        "UPDATE entries SET e5_pending = ?, vector_at = ? WHERE id = ?", (pending, now, entry_id)
                    )
                    n += 1
                self.set_embedder(db, embedder_id, dim, blocks)
                self._changed(db)
        self.embedder_id, self.dim, self.embedder_name = embedder_id, dim, name or embedder_id
        self.blocks, self.deferred = blocks, deferred
        return n

    def _vectors_replaced(self, db: Any, dim: int) -> AbstractContextManager[Any]:
        return nullcontext()

    def _put_vector(self, db: Any, entry_id: int, vector: np.ndarray, blocks: Sequence[tuple[int, int]]) -> None:
        raise NotImplementedError

    def vectors_compacted(self) -> bool:
        """Whether the stored vectors are in this backend's current format (``compact_vectors`` has nothing to do):
        always, unless the backend says otherwise (SQLite: vectors written before its int8 format)."""
        return True

    def fill_vectors(self, parts: Sequence[tuple[int, str, np.ndarray]], wait: float | None = None) -> list[int]:
        """Add the deferred block to stored vectors, in one transaction: each (entry id, the summary the block was
        computed from, float32 block vector of the deferred block's width). An entry forgotten or re-archived
        meanwhile is skipped, and so is one whose summary is no longer the one embedded (a turn that grew while the
        block was computed: the block would be another text's; the entry stays pending for the next fill) or whose
        stored vector is not ``vector_decodable`` (reindex recomputes it whole). The summary is checked on the row
        read locked inside the write transaction, so no write can come between the check and the update. Returns
        the ids filled, in order; their ``vector_at`` tells the in-process indexes to re-read them. ``wait``: as
        ``transaction``."""
        if self.deferred is None or not parts:
            return []
        a, b = self.deferred
        now = time.time()
        filled = []
        with self.transaction(wait) as db:
            for entry_id, summary, part in parts:
                row = db.execute(
                    "SELECT v.vector, e.summary FROM embeddings v JOIN entries e ON e.id = v.entry_id "
                    f"WHERE v.entry_id = ? AND e.e5_pending = 1{self.dialect.for_update}",
                    (entry_id,),
                ).fetchone()
                if row is None or not self._holds(row[1], summary) or not self.vector_decodable(row[0]):
                    continue
                full = self._decode_one(row[0])
                full[a:b] = part
                db.execute("UPDATE embeddings SET vector = ? WHERE entry_id = ?", (self.encode_vector(full), entry_id))
                db.execute("UPDATE entries SET e5_pending = 0, vector_at = ? WHERE id = ?", (now, entry_id))
                filled.append(entry_id)
        return filled

    def _holds(self, stored: Any, summary: str) -> bool:
        """Whether an entry's stored ``summary`` column (as read by SQL) is ``summary``: the text a vector filled
        after the commit was computed from is still the entry's."""
        return stored is not None and self.entry_value("summary", stored) == summary

    def _decode_one(self, blob: Any) -> np.ndarray:
        """A writable float32 (dim,) copy of one stored vector."""
        import numpy as np

        return np.array(self.decode_vectors([blob])[0], np.float32)

    def bump_access(self, ids: Sequence[int], db: Any = None, wait: float | None = None) -> None:
        """access_count += 1 for entries packed into a recovery (the a of F(e), paper eq. 2); inside the open
        transaction ``db`` when given (after the backend's ``_reinforcement_lock``), else in its own (``wait``: as
        ``transaction``)."""
        if db is not None:
            self._reinforcement_lock(db)
            for where, params in self.dialect.in_ids("id", sorted(ids)):
                db.execute(f"UPDATE entries SET access_count = access_count + 1 WHERE {where}", params)
            return
        if not ids:
            return
        with self.transaction(wait) as db:
            self.bump_access(ids, db)

    def _reinforcement_lock(self, db: Any) -> None:
        """Make the open transaction the only one writing a recovery's reinforcement: nothing to do where every
        writer runs alone (SQLite)."""

    # ------------------------------------------------------------------ erase
    def erase_free_space(self, wait: float | None = None, on_wait: Callable[[Erasure], None] | None = None) -> Erasure:
        raise NotImplementedError

    def finish_pending_erase(self, wait: float = 0.0, on_wait: Callable[[Erasure], None] | None = None) -> Erasure:
        """Finish an erase an earlier forget could not complete (``ERASE_PENDING`` in meta), waiting at most
        ``wait`` seconds for readers; a no-op (complete) when none is pending. Never raises for a database it
        cannot write now (``_erase_errors``: a read-only file, a server gone): the erase stays pending."""
        try:
            if self.get_meta(ERASE_PENDING) is None:
                return Erasure(True)
            return self._erase(wait, on_wait)
        except self._erase_errors:
            return self._erase_failed()

    _erase_errors: tuple[type[BaseException], ...] = ()

    def _erase_failed(self) -> Erasure:
        """What ``finish_pending_erase`` says when the store cannot be written or reached now."""
        return Erasure(False, self.file_bytes(), self._erase_holders())

    def _erase(self, wait: float, on_wait: Callable[[Erasure], None] | None) -> Erasure:
        """Run the backend's ``_erase_step`` at once and, when blocked, again for ``wait`` seconds (``on_wait``
        told who blocks it first); an incomplete erase is recorded in meta (``ERASE_PENDING``), a complete one
        clears that record (and erases the marker's own page or row when it can)."""
        done = self._erase_step(0.0)
        if not done and wait > 0:
            if on_wait is not None:
                on_wait(Erasure(False, self.file_bytes(), self._erase_holders()))
            done = self._erase_step(wait)
        if not done:
            if self.get_meta(ERASE_PENDING) is None:
                with self.transaction() as db:
                    db.execute(
                        "INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (ERASE_PENDING, str(time.time()))
                    )
            return Erasure(False, self.file_bytes(), self._erase_holders())
        if self.get_meta(ERASE_PENDING) is not None:
            with self.transaction() as db:
                db.execute("DELETE FROM meta WHERE key = ?", (ERASE_PENDING,))
            self._erase_step(0.0, marker=True)  # the marker's own page or row: no forgotten text in it
        return Erasure(True)

    def _erase_step(self, wait: float, marker: bool = False) -> bool:
        raise NotImplementedError

    def _erase_holders(self) -> tuple[tuple[int, str], ...]:
        return ()

    def file_bytes(self) -> int:
        raise NotImplementedError

    # ------------------------------------------------------------------ vectors filled after the commit
    def pending_vectors(self, limit: int, scope: Scope | None = None) -> list[tuple[int, str]]:
        """(id, summary) of up to ``limit`` entries still lacking their deferred block, newest first (the ones a
        recovery is likeliest to need); within ``scope`` when given. An entry with no vector at all (stored
        text-first) is ``unembedded``'s, not this."""
        if self.deferred is None or limit <= 0:
            return []
        where, params = self._where(scope)
        rows = self.db.execute(
            f"SELECT id, summary FROM entries WHERE e5_pending = 1 AND {where} ORDER BY id DESC LIMIT ?",
            (*params, limit),
        ).fetchall()
        return [(entry_id, self.entry_value("summary", summary)) for entry_id, summary in rows]

    def pending_count(self) -> int:
        """How many entries still lack their deferred block."""
        return self.db.execute("SELECT count(*) FROM entries WHERE e5_pending = 1").fetchone()[0]

    def unembedded(self, limit: int | None = None, scope: Scope | None = None) -> list[tuple[int, str]]:
        """(id, summary) of up to ``limit`` (None: all) entries stored text-first (``add(rows, None)``) that have
        no vector yet (``e5_pending = UNEMBEDDED``), newest first (after a compaction, the turns a prompt refers to
        are the newest); within ``scope`` when given. Read through their
        own partial index (SQLite migration m012), so it costs the entries it finds, not the store."""
        if not self.dialect.text_first:
            return []
        where, params = self._where(scope)
        rows = self.db.execute(
            f"SELECT id, summary FROM entries WHERE e5_pending = {UNEMBEDDED} AND {where} ORDER BY id DESC LIMIT ?",
            (*params, -1 if limit is None else limit),
        ).fetchall()
        return [(entry_id, self.entry_value("summary", summary)) for entry_id, summary in rows]

    def put_vectors(self, triples: Sequence[tuple[int, str, np.ndarray]], wait: float | None = None) -> list[int]:
        """Give entries stored text-first their vector, in one transaction: each (entry id, the summary it was
        computed from, float32 (dim,) vector of the recorded embedder). An entry forgotten meanwhile, that has a
        vector already (another process filled it, or it grew into a turn stored with one), or whose summary is no
        longer the one embedded (it grew into a turn stored text-first while the vector was computed: the vector
        would be the old text's; it stays unembedded for the next fill) is skipped. The summary is checked on the
        row read locked inside the write transaction, so no write can come between the check and the update. The
        entry stays ``e5_pending`` only when the vector's deferred block is all zeros (``fill_vectors`` adds it
        later). Stamped ``vector_at``, so every in-process index reads it again. Returns the ids written, in order.
        ``wait``: as ``transaction``."""
        if not triples:
            return []
        now = time.time()
        done = []
        with self.transaction(wait) as db:
            self.verify_embedder(db)
            for entry_id, summary, vector in triples:
                row = db.execute(
                    f"SELECT summary FROM entries WHERE id = ? AND e5_pending = {UNEMBEDDED}{self.dialect.for_update}",
                    (entry_id,),
                ).fetchone()
                if row is None or not self._holds(row[0], summary):
                    continue
                vec = self._vector(vector)
                self._put_vector(db, entry_id, vec, self.blocks)
                db.execute(
                    "UPDATE entries SET e5_pending = ?, vector_at = ? WHERE id = ?", (self._pending(vec), now, entry_id)
                )
                done.append(entry_id)
            if done:
                self._changed(db)
        return done

    # ------------------------------------------------------------------ export, import, copy (store/transfer.py)
    def export_rows(
        self, scope: Scope | None, session: str | None, columns: Sequence[str]
    ) -> Iterator[tuple[dict[str, Any], Any, list[dict[str, Any]]]]:
        """store/transfer.py ``export_rows``: the entries an export writes, read in the caller's ``snapshot``."""
        return transfer.export_rows(self, scope, session, columns)

    def write_imported(self, db: Any, record: dict[str, Any]) -> tuple[str, int | None]:
        """store/transfer.py ``write_imported``: one import record, in the open transaction ``db``."""
        return transfer.write_imported(self, db, record)

    def event_rows(self) -> list[tuple]:
        """store/transfer.py ``event_rows``: every compaction event, oldest first, as ``copy_events`` takes them."""
        return transfer.event_rows(self)

    def copy_events(self, rows: list[tuple], entry_ids: dict[int, int], lock: str) -> tuple[int, int]:
        """store/transfer.py ``copy_events``: another store's events, their entry ids mapped; (copied, present)."""
        return transfer.copy_events(self, rows, entry_ids, lock)

    # ------------------------------------------------------------------ read
    def known_hashes(self, hashes: Sequence[str], chunk: int = 500) -> set[str]:
        """The content hashes among ``hashes`` that the store already holds."""
        return set(self._stored_ids(self.db, list(dict.fromkeys(hashes))))

    def entries(self, ids: Iterable[int], *, text: bool = True, tags: bool = True) -> dict[int, Entry]:
        """Entries by id (missing ids are absent from the result). ``text=False`` / ``tags=False`` leave
        ``Entry.text`` empty / ``Entry.tags`` empty: the read path ranks on summaries and fetches full texts only
        for what it packs."""
        chosen = {"text": "text" if text else "''", "tags": "tags" if tags else "'[]'"}  # empty stand-ins when skipped
        columns = ", ".join(chosen.get(c, c) for c in ENTRY_COLUMNS.split(", "))
        out: dict[int, Entry] = {}
        for where, params in self.dialect.in_ids("id", list(ids)):
            for row in self.db.execute(f"SELECT {columns} FROM entries WHERE {where}", params):
                out[row[0]] = entry_of(row)
        return out

    def tags(self, ids: Iterable[int]) -> dict[int, list[Tag]]:
        """The tags of each entry, by id (missing ids are absent), for entries read with ``entries(...,
        tags=False)`` (the candidates of ``explain``)."""
        out: dict[int, list[Tag]] = {}
        for where, params in self.dialect.in_ids("id", list(ids)):
            for entry_id, tags in self.db.execute(f"SELECT id, tags FROM entries WHERE {where}", params):
                out[entry_id] = tags_of(tags)
        return out

    def text_heads(self, ids: Iterable[int], chars: int) -> dict[int, str]:
        """The first ``chars`` characters of each entry's text, by id (missing ids are absent)."""
        out: dict[int, str] = {}
        for where, params in self.dialect.in_ids("id", list(ids)):
            out.update(self.db.execute(f"SELECT id, substr(text, 1, ?) FROM entries WHERE {where}", (chars, *params)))
        return out

    def texts(self) -> Iterator[tuple[int, str]]:
        """(id, summary) of every entry, in id order: the embedder's input, for ``reindex``."""
        for entry_id, summary in self.db.execute("SELECT id, summary FROM entries ORDER BY id").fetchall():
            yield entry_id, self.entry_value("summary", summary)

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

    # ------------------------------------------------------------------ reads the layers above ask for (their SQL here)
    def places(self, ids: Iterable[int], scope: Scope | None = None) -> dict[int, tuple[str, str, str, str, int]]:
        """(user, agent, project, session, turn) of each of ``ids`` that is stored (within ``scope`` when given):
        where an entry stands in its conversation (recover/local.py, recover/neighbours.py, memory/context.py,
        ``Lantern.drop_rewound``); an id not stored is absent."""
        where, params = self._where(scope)
        out: dict[int, tuple[str, str, str, str, int]] = {}
        for cond, chunk in self.dialect.in_ids("id", list(ids)):
            for entry_id, *place in self.db.execute(
                f"SELECT id, user_id, agent_id, project, session, turn FROM entries WHERE {cond} AND {where}",
                (*chunk, *params),
            ):
                out[entry_id] = tuple(place)
        return out

    def window_ids(self, places: Sequence[tuple[str, str, str, str, int]], width: int) -> list[int]:
        """Ids of the entries within ``width`` turns (inclusive) of each (user, agent, project, session, turn)
        place, in its own conversation (recover/local.py); one statement."""
        if not places:
            return []
        cond = " OR ".join(  # = on the NOT NULL scope columns: both backends' (user_id, session, turn) index serves it
            "(session = ? AND turn BETWEEN ? AND ? AND user_id = ? AND agent_id = ? AND project = ?)" for _ in places
        )
        params = [x for u, a, p, s, t in places for x in (s, t - width, t + width, u, a, p)]
        return [r[0] for r in self.db.execute(f"SELECT id FROM entries WHERE {cond}", params)]

    def turn_ids(self, keys: Sequence[tuple[str, str, str, str, int]]) -> dict[tuple[str, str, str, str, int], int]:
        """The entry at each (user, agent, project, session, turn) key that has one (a turn split into several
        entries: the first one), 150 keys a statement (SQLite's default limit is 999 host parameters in older
        builds): recover/neighbours.py."""
        found: dict[tuple[str, str, str, str, int], int] = {}
        for start in range(0, len(keys), 150):
            part = keys[start : start + 150]
            cond = " OR ".join(  # = on the NOT NULL scope columns: the (user_id, session, turn) index serves it
                "(user_id = ? AND agent_id = ? AND project = ? AND session = ? AND turn = ?)" for _ in part
            )
            params = [x for key in part for x in key]
            for entry_id, *key in self.db.execute(
                f"SELECT id, user_id, agent_id, project, session, turn FROM entries WHERE {cond} ORDER BY id", params
            ):
                found.setdefault(tuple(key), entry_id)
        return found

    def scope_counts(self, scope: Scope, session: str | None = None) -> tuple[int, int, int, int]:
        """(entries, those of ``scope``'s user, those inside its agent / project filters too, those in ``session``
        as well: the session or its sub-sessions, as recovery reads it), in one statement (``lantern recover``'s
        advice on an empty result)."""
        mine, params = "user_id = ?", [scope.user]
        filtered, fparams = mine, list(params)
        if scope.agent is not None:
            filtered, fparams = filtered + " AND agent_id = ?", fparams + [scope.agent]
        if scope.project is not None:
            filtered, fparams = filtered + " AND project = ?", fparams + [scope.project]
        inside, iparams = filtered, list(fparams)
        if session is not None:
            inside, iparams = (
                inside + " AND (session = ? OR substr(session, 1, length(?) + 1) = ? || '/')",
                iparams + [session] * 3,
            )
        return tuple(  # CASE: no boolean sum in PostgreSQL
            self.db.execute(
                f"SELECT count(*), coalesce(sum(CASE WHEN {mine} THEN 1 ELSE 0 END), 0), "
                f"coalesce(sum(CASE WHEN {filtered} THEN 1 ELSE 0 END), 0), "
                f"coalesce(sum(CASE WHEN {inside} THEN 1 ELSE 0 END), 0) FROM entries",
                [*params, *fparams, *iparams],
            ).fetchone()
        )

    def _session_where(self, session: str, scope: Scope) -> tuple[str, list[Any]]:
        where, params = scope_where("", scope)
        return f"session = ? AND {where}", [session, *params]

    def session_rows(
        self, session: str, scope: Scope, since: float | None = None, ids: Sequence[int] | None = None
    ) -> list[tuple[int, int, str, str]]:
        """(id, turn, text, content hash as hex) of the entries of exactly ``session`` within ``scope``: those
        archived at or after ``since`` (unix seconds; the ``archived_at`` index), or those of ``ids`` (any session),
        or all of them (compaction.py ``SessionArchive``)."""
        if ids is not None:
            rows = []
            for cond, chunk in self.dialect.in_ids("id", list(ids)):
                rows += self.db.execute(f"SELECT id, turn, text, content_hash FROM entries WHERE {cond}", chunk)
        elif since is not None:
            where, params = self._session_where(session, scope)
            rows = self.db.execute(
                f"SELECT id, turn, text, content_hash FROM entries INDEXED BY entries_archived_at "
                f"WHERE archived_at >= ? AND {where}",
                (since, *params),
            ).fetchall()
        else:
            where, params = self._session_where(session, scope)
            rows = self.db.execute(f"SELECT id, turn, text, content_hash FROM entries WHERE {where}", params)
        return [(i, turn, text, self.entry_value("content_hash", h)) for i, turn, text, h in rows]

    def session_tally(self, session: str, scope: Scope) -> tuple[int, float]:
        """(entries, sum of their ids) of exactly ``session`` within ``scope``: what tells a ``SessionArchive``
        that read only the rows archived since its last sync whether it missed one."""
        where, params = self._session_where(session, scope)
        count, id_sum = self.db.execute(f"SELECT count(*), total(id) FROM entries WHERE {where}", params).fetchone()
        return count, id_sum

    def session_hashes(self, session: str, scope: Scope) -> dict[int, str]:
        """{id: content hash as hex} of the entries of exactly ``session`` within ``scope``."""
        where, params = self._session_where(session, scope)
        rows = self.db.execute(f"SELECT id, content_hash FROM entries WHERE {where}", params).fetchall()
        return {i: self.entry_value("content_hash", h) for i, h in rows}

    def events(
        self,
        *,
        scope: Scope | None = None,
        session: str | None = None,
        event_id: int | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[event_rows.EventRecord]:
        """store/events.py ``events``: compaction events within ``scope`` (None: every user) and ``session`` (with
        the sessions it is a sub-session of), newest first, at most ``limit`` after the first ``offset``."""
        return event_rows.events(self.db, scope=scope, session=session, event_id=event_id, limit=limit, offset=offset)

    def event_count(self) -> int:
        """store/events.py ``event_count``: the events of every user."""
        return event_rows.event_count(self.db)

    def events_per_day(self, scope: Scope | None = None) -> list[tuple[str, int]]:
        """store/events.py ``events_per_day``: (YYYY-MM-DD, events) per UTC day that has any, oldest first."""
        return event_rows.events_per_day(self.db, scope)

    def fact_records(self, **filters: Any) -> list[fact_rows.FactRecord]:
        """store/facts.py ``records`` (key, as_of, history, where, params): versioned facts."""
        return fact_rows.records(self.db, **filters)

    def facts_of_entries(
        self, entry_ids: Sequence[int], where: str = "", params: Sequence[Any] = ()
    ) -> list[fact_rows.FactRecord]:
        """store/facts.py ``facts_of_entries``: the fact records stated in the entries, in entry then statement
        order (``where``/``params``: a filter on their source entries ``e``)."""
        return fact_rows.facts_of_entries(self.db, entry_ids, where, params)

    def fact_values_at(
        self, keys: Sequence[tuple[str, str]], at: float | None, where: str = "", params: Sequence[Any] = ()
    ) -> dict[tuple[str, str], fact_rows.FactRecord]:
        """store/facts.py ``values_at``: the record valid at ``at`` of each (scope, key)."""
        return fact_rows.values_at(self.db, keys, at, where, params)

    def fact_changed_at(
        self, record: fact_rows.FactRecord, where: str = "", params: Sequence[Any] = ()
    ) -> float | None:
        """store/facts.py ``changed_at``: when ``record``'s value stopped holding (None: it still holds)."""
        return fact_rows.changed_at(self.db, record, where, params)

    def read_columns(self, ids: Sequence[int], columns: str) -> list[tuple]:
        """store/reinforcement.py ``read_columns``: ``(id, *columns)`` of the entries among ``ids``."""
        return reinforcement_rows.read_columns(self.db, ids, columns)

    def pruned_count(self, prune_below: float, where: tuple[str, list] | None = None) -> int:
        """store/reinforcement.py ``pruned_count``: entries whose c is below ``prune_below`` (among those ``where``,
        a ``scope_where``, selects; None: all)."""
        return reinforcement_rows.pruned_count(self.db, prune_below, where or (self.dialect.true, []))

    def pending_recovery_count(self, user: str | None = None) -> int:
        """store/reinforcement.py ``pending_count``: recoveries still waiting for their session's next assistant
        message (of ``user``; None: any)."""
        return reinforcement_rows.pending_count(self.db, user)

    def session_overview(
        self, query: str | None = None, limit: int = 1000, offset: int = 0
    ) -> list[overview.SessionRow]:
        """store/overview.py ``sessions``: one row per (user, session), newest first, a page of ``limit`` after
        ``offset`` (the inspector)."""
        return overview.sessions(self.db, query, limit, offset)

    def session_entry_ids(self, session: str, user: str) -> list[int]:
        """store/overview.py ``session_entry_ids``: the entries of one user's session, in turn order."""
        return overview.session_entry_ids(self.db, session, user)

    def entries_per_day(self) -> list[tuple[str, int]]:
        """store/overview.py ``entries_per_day``: (YYYY-MM-DD, entries archived) per UTC day, oldest first."""
        return overview.entries_per_day(self.db)

    def table_bytes(self) -> list[tuple[str, int]] | None:
        """store/overview.py ``table_bytes``: bytes per table, largest first (None where unknown)."""
        return overview.table_bytes(self.db)

    @staticmethod
    def database_identity() -> tuple[Any, ...] | None:
        """Which database this is, whatever location named it, where a server can say (``lantern copy`` refuses to
        copy a database into itself): None here (a SQLite file is compared by its path)."""
        return None

    def own_changes(self) -> int:
        """Rows this handle has written since it opened (its connection's ``total_changes``): with ``data_version``,
        whether anything changed since a reader last looked."""
        return self.db.total_changes

    def count(self) -> int:
        return self.db.execute("SELECT count(*) FROM entries").fetchone()[0]

    def sessions(self, scope: Scope | None = None) -> list[str]:
        """The session names stored (``scope``: those of its user, inside its agent / project filters), sorted."""
        where, params = self._where(scope)
        rows = self.db.execute(f"SELECT DISTINCT session FROM entries WHERE {where} ORDER BY session", params)
        return [r[0] for r in rows]

    def stats(self, scope: Scope | None = None, by_table: bool = True) -> dict[str, Any]:
        """Counts and sizes. ``scope``: count only its entries (entries, sessions, text_chars, vectors_pending: those
        still without their deferred block; vectors_missing: those with no vector yet, stored text-first;
        ``vectors_undecodable``: stored vectors whose byte length fits no
        layout, ``undecodable_count``); None counts every user's (an administrator's view), with ``users``
        (distinct users) besides. Sessions are distinct (user, session) pairs: two users' sessions of the same name
        are two sessions. The store's own figures are the store's whatever the scope: embedder, schema version
        (this backend's migration series), ``database_bytes``, ``bytes_per_turn`` (database bytes over every user's
        archived turns) and, unless ``by_table`` is false, ``bytes_per_turn_by_table``: the backend's ``_sizes``
        (and, for an administrator's view where the backend knows them, ``free_bytes``)."""
        where, args = self._where(scope)
        n, chars = self.db.execute(
            f"SELECT count(*), coalesce(sum(length(text)), 0) FROM entries WHERE {where}", args
        ).fetchone()
        n_sessions = self.db.execute(
            f"SELECT count(*) FROM (SELECT DISTINCT user_id, session FROM entries WHERE {where}) s", args
        ).fetchone()[0]
        size, sizes, free = self._sizes(scope, by_table)
        out: dict[str, Any] = {"path": self.path, **self._stats_head()}
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
            vectors_missing=self.db.execute(
                f"SELECT count(*) FROM entries WHERE e5_pending = {UNEMBEDDED} AND {where}", args
            ).fetchone()[0],
            vectors_undecodable=self.undecodable_count(scope),
        )
        turns = n if scope is None else self.count()
        out["bytes_per_turn"] = round(size / turns) if turns else 0
        if by_table:
            out["bytes_per_turn_by_table"] = {k: round(v / turns) for k, v in sizes.items()} if turns else {}
        if free is not None:
            out["free_bytes"] = free
        return out

    def _stats_head(self) -> dict[str, Any]:
        """What ``stats`` shows after the path (PostgreSQL: the backend)."""
        return {}

    def _sizes(self, scope: Scope | None, by_table: bool) -> tuple[int, dict[str, int], int | None]:
        """(database bytes, {table: bytes} largest first when ``by_table``, free bytes or None) for ``stats``."""
        raise NotImplementedError

    def undecodable_count(self, scope: Scope | None = None) -> int:
        """How many stored vectors (of ``scope``'s entries, or of every entry) fit no layout: none by default."""
        return 0


def _missing_vector(content_hash: str) -> MissingVectorError:
    # planned as stored (archive/embed_ahead.py), deleted since: the caller re-embeds
    return MissingVectorError(f"no vector for the new row {content_hash}")
