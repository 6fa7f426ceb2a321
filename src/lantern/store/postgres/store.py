"""The PostgreSQL store: the SQLite store's contract (store/protocol.py) on a server, with psycopg 3, a connection
pool (psycopg_pool) and pgvector (docs/postgres.md).

Every write is one transaction; concurrent writers are serialized where SQLite's single write lock serialized
them and order matters: ``pg_advisory_xact_lock`` per conversation (scope + session: turn numbers, a growing turn)
and per fact chain scope (store/facts.py links versions by reading the chain), taken in sorted order so two
batches cannot deadlock; dedup is the ``content_hash`` unique index (``ON CONFLICT DO NOTHING``). Full text is a
``tsvector`` column under GIN, built from the same text as the SQLite FTS5 row (CJK runs as character bigrams,
text/cjk.py) with every non-alphanumeric character a separator, as FTS5's unicode61 tokenizer splits, ranked by
``ts_rank`` (not BM25: PostgreSQL has no BM25; the rankings use only the order, and the injection decision
reads no full-text score on either backend: recover/relevance.py). Vectors are float32 in a
pgvector column with an HNSW cosine index (Malkov & Yashunin 2018; pgvector's ``vector_cosine_ops``).
"""

from __future__ import annotations

import json
import logging
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool, PoolTimeout

from lantern import lazy_re
from lantern.config import redact_url, scrub, server_url
from lantern.errors import DatabaseUnavailableError, LanternError, StoreVersionError
from lantern.scope import Scope, scope_where
from lantern.store.base import BaseStore, Dialect, Erasure, NewEntry
from lantern.store.facts import fact_scope
from lantern.store.plan import Last
from lantern.store.postgres.schema import MIGRATIONS, TS_CONFIG, migrate
from lantern.store.postgres.sql import PgConnection
from lantern.store.sqlite import BUSY_TIMEOUT_MS
from lantern.store.times import to_epoch
from lantern.text.cjk import cjk_bigrams
from lantern.text.windows import unescaped

__all__ = ["PostgresStore", "fts_document"]

POOL_MAX = 4  # connections per store handle (ours): a handle's reads, its writes and a background fill at once
CONNECT_TIMEOUT_S = 10
FTS_MAX_CHARS = 200_000  # characters of a turn's summary + text indexed; a tsvector holds at most 1 MB (ours)
_NON_WORD = lazy_re.compile(r"[\W_]+", re.UNICODE)

_INDEX_SELECT = (
    "SELECT e.id, e.session, coalesce(e.time, e.archived_at), "
    "greatest(e.archived_at, coalesce(e.vector_at, e.archived_at)), e.importance, e.tool_count, e.file_count, "
    "e.hints, v.vector, e.user_id, e.agent_id, e.project "
    "FROM entries e JOIN embeddings v ON v.entry_id = e.id"
)
# an entry's tsvector from its two texts (``PostgresStore._fts_texts``: body, then tag values)
_FTS_SQL = f"to_tsvector('{TS_CONFIG}', {{body}}) || to_tsvector('{TS_CONFIG}', {{tags}})"
# ``add``'s new rows, one array per column in binary (``_insert_new``), inserted in the arrays' order (ids ascending)
_INSERT_SQL = (
    "INSERT INTO entries(session, turn, time, archived_at, text, summary, tags, hints, memory_type, importance, "
    "content_hash, tool_count, file_count, meta, category, confidence, success, user_id, agent_id, project, "
    "e5_pending, fts) "
    "SELECT session, turn, time, %s, text, summary, tags, hints, memory_type, importance, content_hash, tool_count, "
    "file_count, meta, category, 0.5, 0.5, user_id, agent_id, project, e5_pending, "
    + _FTS_SQL.format(body="body", tags="tag_text")
    + " FROM unnest(%b::text[], %b::int[], %b::float8[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], "
    "%b::float8[], %b::text[], %b::int[], %b::int[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], "
    "%b::int[], %b::text[], %b::text[]) WITH ORDINALITY AS r(session, turn, time, text, summary, tags, hints, "
    "memory_type, importance, content_hash, tool_count, file_count, meta, category, user_id, agent_id, project, "
    "e5_pending, body, tag_text, i) ORDER BY i "
    "ON CONFLICT (content_hash) DO NOTHING RETURNING content_hash, id"
)
_QUOTED = lazy_re.compile(r'"((?:[^"]|"")*)"')

# what this backend does not do yet, with the way round it (store/protocol.py ``require``; docs/postgres.md)
UNSUPPORTED = {
    "lantern ui": "its pages read SQLite-only views (store/overview.py); `lantern copy` the server to a SQLite file "
    "and inspect that",
}


def fts_document(text: str) -> str:
    """The text the full-text index holds for ``text`` (and a query term is matched as): CJK runs as character
    bigrams (text/cjk.py), every run of non-alphanumeric characters (underscore included) one space, as FTS5's
    unicode61 tokenizer separates tokens, so ``src/db_config.py`` is the words src, db, config, py on both
    backends."""
    return _NON_WORD.sub(" ", cjk_bigrams(text)).strip()


ROLLBACK_RETRIES = 5  # an archive transaction the server rolled back (deadlock, serialization) is run again (ours)
REINFORCEMENT_LOCK = "lantern:reinforcement"  # advisory lock: one recovery's reinforcement write at a time (ours)
# psycopg_pool logs each connection it discards or fails to open (a server restart: one line per attempt); the
# error that reaches the caller names the cause once (``_connection_lost``), so the pool's lines stay out of stderr
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
NEWEST_ID_TTL_S = 5.0  # term_fractions re-reads the newest entry id after this many seconds (ours)
IDLE_CHECK_S = 1.0  # a pooled connection idle this long is checked (one round trip) before use (ours)
POOL_STEP_S = 0.25  # a wait for a pooled connection, cut in steps this long: a connection found lost ends it (ours)


def _check_if_idle(conn: psycopg.Connection) -> None:
    """psycopg_pool's check: ``ConnectionPool.check_connection`` (raises for a connection the server dropped, which
    the pool then replaces) on a connection idle for over ``IDLE_CHECK_S``. A connection handed back moments ago
    is used as it is: a recovery takes ~20 connections from the pool, and checking each cost ~1 ms on a loaded
    2-core machine (bench_postgres.py profile)."""
    if time.monotonic() - getattr(conn, "_lantern_returned", 0.0) > IDLE_CHECK_S:
        ConnectionPool.check_connection(conn)


def _note_returned(conn: psycopg.Connection) -> None:
    """psycopg_pool's reset hook: when the connection came back to the pool (``_check_if_idle``)."""
    conn._lantern_returned = time.monotonic()


def _array(value: Any) -> np.ndarray:
    """A pgvector value as float32 (dim,): psycopg's pgvector loader gives a ``Vector`` (``to_numpy``)."""
    to_numpy = getattr(value, "to_numpy", None)
    return np.asarray(to_numpy() if to_numpy is not None else value, np.float32)


def _terms(match: str) -> list[str]:
    """The terms of an FTS5 MATCH expression of double-quoted strings joined by OR (recover/signals.fts_query)."""
    return [t.replace('""', '"') for t in _QUOTED.findall(match)]


def _conversation_key(user: str, agent: str, project: str, session: str) -> str:
    """The advisory lock key of a conversation: a JSON array, unambiguous whatever the names hold."""
    return json.dumps(["conv", user, agent, project, session])


class _Raced(Exception):
    """Another writer committed one of a batch's new rows (same content hash) while it was being written: ``add``
    rolls the batch back and runs it again, when that row is read as stored."""


def _roll_back(conn: psycopg.Connection) -> None:
    """End the open transaction of ``conn`` after an error. A connection the server dropped is left as it is: the
    pool discards a broken connection it gets back, and the server has rolled the transaction back."""
    if conn.info.transaction_status in (psycopg.pq.TransactionStatus.INTRANS, psycopg.pq.TransactionStatus.INERROR):
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:
            pass


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _connection_lost(e: psycopg.OperationalError) -> bool:
    """Whether ``e`` says the connection itself failed: no SQLSTATE (the client saw the socket close), class 08
    (connection exception) or 57P (the server shut down or restarts: operator intervention)."""
    state = e.sqlstate or ""
    return not state or state.startswith(("08", "57P"))


# the server's words for a table (or its identity sequence) the user has no privilege on: the tables exist already
_NO_TABLE_PRIVILEGE = lazy_re.compile(r"permission denied for (table|relation|sequence) ")


def _connect_error(url: str, e: Exception) -> LanternError:
    """One line naming why the server could not be used: unreachable, refused login, missing database or
    pgvector; the URL without its password, and the driver's words without anything of it (``config.scrub``:
    libpq quotes what it could not parse, the URL or its userinfo among it)."""
    shown = redact_url(url)
    words = scrub(str(e).strip().splitlines()[0], url) if str(e).strip() else type(e).__name__
    if isinstance(e, psycopg.errors.FeatureNotSupported) or "vector" in words and "extension" in words:
        return LanternError(
            f"{shown}: the pgvector extension is not available in this database ({words}); install pgvector on the "
            "server and run `CREATE EXTENSION vector;` in it as a user allowed to (docs/postgres.md)"
        )
    if isinstance(e, psycopg.errors.InsufficientPrivilege) and _NO_TABLE_PRIVILEGE.search(words):
        return LanternError(
            f"{shown}: Lantern's tables exist here but this user may not read or write them ({words}); connect as "
            "their owner (the user that created them), or have it grant this user SELECT, INSERT, UPDATE and DELETE "
            "on them (docs/postgres.md)"
        )
    if isinstance(e, psycopg.errors.InsufficientPrivilege):
        return LanternError(f"{shown}: the user may not create Lantern's tables here ({words}); docs/postgres.md")
    if "password authentication failed" in words or "no password supplied" in words:
        return LanternError(f"{shown}: the server refused the login: wrong user or password ({words})")
    if "does not exist" in words and "database" in words:
        return LanternError(f"{shown}: no such database on the server ({words}); create it first")
    said = _SERVER_SAID.search(words)
    if said:  # the server answered and refused the session (a bad options= setting, a role limit, ...)
        return LanternError(f"{shown}: the server refused the connection: {said.group(1)}")
    if isinstance(e, psycopg.ProgrammingError) or _BAD_OPTION.search(words):  # libpq could not read the URL
        return LanternError(f"{shown}: the URL is not valid: {words}")
    return LanternError(f"{shown}: cannot connect to the PostgreSQL server ({words})")


# the server's own words in a libpq connection error: the server was reached and said why it refused
_SERVER_SAID = lazy_re.compile(r"\b(?:FATAL|ERROR):\s+(.*)")
# libpq's words for a URL option it cannot read (an unknown parameter, a bad value)
_BAD_OPTION = lazy_re.compile(r"invalid (?:URI query parameter|connection option|\w+ value)|unrecognized \w+ value")


class _Pool:
    """The store's connections: a psycopg_pool ``ConnectionPool`` (``POOL_MAX`` connections, each checked before
    use when idle over ``IDLE_CHECK_S``) and the one place where a server that went away becomes
    ``DatabaseUnavailableError``, whatever the statement (every read and write of the store goes through
    ``connection``):

    - a statement or commit failing because the connection itself failed (``_connection_lost``: the server stopped,
      restarted or dropped the session) raises it naming the cause, the transaction rolled back by the server;
    - a wait for a pooled connection lasts at most ``CONNECT_TIMEOUT_S`` (psycopg_pool's own default is 30 s), cut
      in ``POOL_STEP_S`` steps; once a connection was found lost (a failed statement or idle check) or the wait ran
      out, the server is tried with a connection of our own: refused (a stopped server: at once) raises it naming
      why (``_connect_error``), accepted serves this call and the pool's dead connections are replaced at once
      (``ConnectionPool.check``), not after the back-off of its reconnection attempts."""

    def __init__(self, url: str, path: str, readonly: bool = False):
        self.url, self.path, self.readonly = url, path, readonly
        self.lost = False  # a connection was lost or a wait ran out: the next call tries the server first
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=POOL_MAX,
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S},
            configure=self._configure,
            check=self._check,  # a connection the server dropped (a restart) is replaced
            reset=_note_returned,
            timeout=CONNECT_TIMEOUT_S,
            reconnect_timeout=CONNECT_TIMEOUT_S,  # its back-off stays short: a restarted server is reached soon
            open=False,
        )

    def open(self) -> None:
        self._pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)

    def _configure(self, conn: psycopg.Connection) -> None:
        """A new connection: pgvector's types, and for a ``readonly`` store every transaction read-only (the server
        refuses any write)."""
        if self.readonly:
            conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
        register_vector(conn)

    def close(self) -> None:
        self._pool.close()

    def _check(self, conn: psycopg.Connection) -> None:
        try:
            _check_if_idle(conn)
        except psycopg.Error:
            self.lost = True
            raise

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A connection (autocommit, pgvector types registered) for the block, handed back after it (committed, or
        rolled back on an exception, as psycopg_pool's ``connection``). Raises DatabaseUnavailableError when the
        server cannot be reached or the connection was lost in the block (see the class)."""
        conn, own = self._get()
        try:
            with conn:
                yield conn
        except psycopg.OperationalError as e:
            if not _connection_lost(e):
                raise
            self.lost = True
            why = scrub(_first_line(e), self.url)
            raise DatabaseUnavailableError(
                f"{self.path}: the connection to the PostgreSQL server was lost ({why}); what was not "
                "committed was rolled back: run it again once the server is back"
            ) from None
        finally:
            if own:
                conn.close()
            else:
                self._pool.putconn(conn)

    def _get(self) -> tuple[psycopg.Connection, bool]:
        """(connection, whether it is our own rather than the pool's)."""
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while not self.lost:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                return self._pool.getconn(timeout=min(POOL_STEP_S, left)), False
            except PoolTimeout:
                continue
        try:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
            self._configure(conn)
        except psycopg.Error as e:
            said = str(_connect_error(self.url, e))
            if self.lost:  # a pooled connection was found dead: the server went away under this handle
                said = f"{self.path}: the connection to the PostgreSQL server was lost and reconnecting failed: " + (
                    said.removeprefix(f"{self.path}: ")
                )
            self.lost = True
            raise DatabaseUnavailableError(said) from None
        self.lost = False
        self._pool.check()  # the server answers: the pool's dead connections are replaced now
        return conn, True


class PostgresStore(BaseStore):
    """Lantern's tables in one PostgreSQL database. ``url``: a libpq connection URL
    (``postgresql://user:password@host:5432/db``). Creates the tables on first use (schema.py; the ``vector``
    extension must be installable by the user, or installed already). Raises LanternError naming the cause when
    the server cannot be used: DatabaseUnavailableError when it does not answer (then, or on any later call: the
    connection lost, ``_Pool``)."""

    backend = "postgresql"
    unsupported = UNSUPPORTED
    # what ``fulltext``'s scores are: -ts_rank, not FTS5's BM25 (only their order is used)
    fulltext_scores = "ts_rank"
    dialect = Dialect(
        true="TRUE",
        for_update=" FOR UPDATE",
        ids_per_query=None,  # one ``= ANY(?)`` array parameter
        json_separators=None,
        nul_free=True,
        layout_in_meta=False,
        changes_counted=False,
        cli_location="URL",  # never the URL itself in advice: it may carry a password
        text_first=False,  # every entry has its vector (embeddings.vector NOT NULL, the index joins it)
    )

    def __init__(self, url: str, readonly: bool = False):
        url = server_url(url)  # libpq knows the scheme in lower case only
        self.url = url
        self.path = redact_url(url)
        self.readonly = readonly
        self._init_embedder()
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn:
                self.schema_version = self._migrate(conn)
            self.pool = _Pool(url, self.path, readonly)
            self.pool.open()
        except psycopg.Error as e:
            error = _connect_error(url, e)
            if (
                isinstance(e, psycopg.OperationalError)
                and _connection_lost(e)
                and not any(w in str(error) for w in ("the server refused the connection:", "the URL is not valid:"))
            ):  # not answering: not a refusal of the session, nor a URL libpq cannot read
                error = DatabaseUnavailableError(str(error))
            raise error from None
        self.db = PgConnection(self.pool)
        self._own_lock = threading.Lock()
        if not readonly:
            self.finish_pending_erase()

    def _migrate(self, conn: psycopg.Connection) -> int:
        """The schema version, after applying the migrations missing; a ``readonly`` store applies none and refuses a
        database that is not a Lantern store of this version (LanternError), before anything is written."""
        if self.readonly:
            conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
        have = conn.execute(
            "SELECT to_regclass('schema_version') IS NOT NULL, to_regclass('entries') IS NOT NULL"
        ).fetchone()
        if not have[0] and have[1]:
            raise LanternError(f"{self.path}: this database has an entries table but is not a Lantern database")
        if have[0]:
            version = conn.execute("SELECT version FROM schema_version").fetchone()[0]
            if version > len(MIGRATIONS):
                raise StoreVersionError(self.path, len(MIGRATIONS), version, on_open=True)
        if self.readonly:
            if not have[0]:
                raise LanternError(f"{self.path} is not a Lantern store: the database has no Lantern tables")
            if version < len(MIGRATIONS):
                raise LanternError(
                    f"{self.path}: its schema version {version} is older than this Lantern's ({len(MIGRATIONS)}), and "
                    "it is opened read-only here; upgrade it first by opening it once (`lantern --db URL stats`)"
                )
            return version
        return migrate(conn)

    def _begin(self, conn: psycopg.Connection, begin: str) -> None:
        """Run ``begin`` (a ``BEGIN ...`` of one or more statements, no parameters) and read the schema version in
        the same round trip, inside the new transaction. Raises StoreVersionError, the transaction rolled back,
        when it is no longer ``schema_version`` (a newer Lantern migrated the database since this handle opened
        it: its rows may be in a form this code misreads)."""
        cur = conn.execute(f"{begin}; SELECT version FROM schema_version")
        while cur.nextset():
            pass
        found = cur.fetchone()[0]
        if found != self.schema_version:
            _roll_back(conn)
            raise StoreVersionError(self.path, self.schema_version, found)

    # ------------------------------------------------------------------ plumbing
    @contextmanager
    def transaction(self, wait: float | None = None) -> Iterator[PgConnection]:
        """One transaction on a pooled connection, yielding the connection-shaped ``db`` bound to it (this thread's
        statements run in it); any exception rolls it back. ``wait``: seconds a statement may wait for a row lock
        (``lock_timeout``; psycopg.errors.LockNotAvailable past it: ``is_unwritable``). Bumps the change counter
        that ``data_version`` reads, at the end, so its row lock is held only while committing. ``BEGIN`` with the
        ``SET LOCAL``, and the bump with ``COMMIT``, each go as one simple query (psycopg sends a statement without
        parameters so): two round trips less per write than psycopg's ``transaction()``, which sends each alone.
        Raises StoreVersionError, before anything is written, when the schema version read in the transaction is
        not ``schema_version`` (``_begin``)."""
        if self.db.in_transaction:  # nested: the outer transaction holds it
            yield self.db
            return
        with self.pool.connection() as conn:
            self._begin(
                conn, "BEGIN" if wait is None else f"BEGIN; SET LOCAL lock_timeout = {max(1, int(wait * 1000))}"
            )
            try:
                with self.db.bound(conn) as db:
                    yield db
                # a failed UPDATE skips the COMMIT after it (one simple query stops at its first error)
                conn.execute("UPDATE changes SET version = version + 1 WHERE id = 1; COMMIT")
            except BaseException:
                _roll_back(conn)
                raise
            with self._own_lock:  # committed: this handle's own write, which data_version leaves out
                self.db.total_changes += 1

    @contextmanager
    def snapshot(self) -> Iterator[PgConnection]:
        """One read-only REPEATABLE READ transaction: every read in the block sees one snapshot (the in-process
        index's refresh: the embedder check and the rows agree). Raises StoreVersionError as ``transaction``."""
        if self.db.in_transaction:
            yield self.db
            return
        with self.pool.connection() as conn:
            self._begin(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                with self.db.bound(conn) as db:
                    yield db
            except BaseException:
                _roll_back(conn)  # a COMMIT on a lost connection would raise in place of the error that ended it
                raise
            conn.execute("COMMIT")

    scope_where = staticmethod(scope_where)

    @staticmethod
    def serialize(db: PgConnection, key: str) -> None:
        """Make the open write transaction ``db`` the only one of the writers naming ``key`` (an import, ``lantern
        copy``'s events) until it ends, as SQLite's write lock runs every writer alone: a transaction-scoped
        advisory lock (``pg_advisory_xact_lock``) on the key's hash; another waits for it."""
        db.current.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))

    @staticmethod
    def rolled_back(e: BaseException) -> bool:
        """Whether the server rolled the transaction back to break a deadlock or a serialization conflict (SQLSTATE
        class 40; PostgreSQL manual §13.2: the client runs it again), as ``add`` retries."""
        return isinstance(e, psycopg.OperationalError) and (e.sqlstate or "").startswith("40")

    def data_version(self) -> int:
        """Changes when another handle commits a write, as SQLite's ``PRAGMA data_version`` does for another
        connection: the ``changes`` counter every write transaction bumps, less this handle's own committed writes
        (``db.total_changes``; the index mirrors those itself). Read before the count, so a write of this handle
        committing in between can only make it change once more (one extra refresh), never miss another's."""
        with self._own_lock:
            own = self.db.total_changes
        return self.db.execute("SELECT version FROM changes WHERE id = 1").fetchone()[0] - own

    @staticmethod
    def unchanged() -> bool:
        """As ``Store.unchanged``: a server's reads in one snapshot (``snapshot``) see one state, always True."""
        return True

    def close(self) -> None:
        if not self.readonly:
            self.finish_pending_erase()  # a forget that a reader kept from erasing its rows: done now if it can be
        self.pool.close()

    # the errors a skippable write (reinforcement, an event, a fill before a recovery) may meet: is_unwritable
    write_errors = (psycopg.OperationalError, psycopg.errors.ReadOnlySqlTransaction, DatabaseUnavailableError)

    @staticmethod
    def is_unwritable(e: BaseException) -> bool:
        """Whether ``e`` says the server cannot take this write now: a lock not obtained within the wait, a
        read-only transaction or server, a full disk, a server gone (a skippable write: reinforcement, events)."""
        return isinstance(
            e,
            (
                psycopg.errors.LockNotAvailable,
                psycopg.errors.ReadOnlySqlTransaction,
                psycopg.errors.DiskFull,
                psycopg.errors.QueryCanceled,
            ),
        ) or isinstance(e, (psycopg.OperationalError, DatabaseUnavailableError))

    # ------------------------------------------------------------------ meta (the rules: store/base.py)
    @staticmethod
    def _lock_meta(db: PgConnection) -> None:
        db.current.execute("LOCK TABLE meta IN SHARE ROW EXCLUSIVE MODE")

    def _first_embedder(self, db: PgConnection, embedder_id: str, dim: int, blocks: Sequence[tuple[int, int]]) -> None:
        """Record the first embedder, and fix the vector column's dimension and build its HNSW cosine index
        (pgvector indexes only vectors of a declared dimension)."""
        self.set_embedder(db, embedder_id, dim, blocks)
        self._vector_column(db, dim)

    @staticmethod
    def _vector_column(db: PgConnection, dim: int) -> None:
        conn = db.current
        conn.execute("DROP INDEX IF EXISTS embeddings_hnsw")
        conn.execute(f"ALTER TABLE embeddings ALTER COLUMN vector TYPE vector({int(dim)})")
        conn.execute("CREATE INDEX embeddings_hnsw ON embeddings USING hnsw (vector vector_cosine_ops)")

    # ------------------------------------------------------------------ write
    def _retrying(self, write: Callable[[], Any]) -> Any:
        """Run ``add``'s transaction ``write`` (store/base.py; when a pending recovery of the rows' users waits to
        be judged by ``after``, the reinforcement lock is taken first, ``_lock_rows``, so its row writes never
        interleave with a recovery's). A transaction the server rolled back to break a deadlock or a serialization
        conflict (SQLSTATE class 40) is run again whole, up to ``ROLLBACK_RETRIES`` times after a short random pause
        (PostgreSQL manual §13.2: such transactions are retried by the client); not inside an outer transaction,
        which the rollback has ended. So is a batch one of whose new rows another writer (one that takes no
        conversation lock: an import) committed while it was written; inside an outer transaction that raises
        LanternError instead. A connection lost meanwhile (a server restart) raises DatabaseUnavailableError saying
        so. Raises psycopg errors; on any error nothing is written."""
        for attempt in range(ROLLBACK_RETRIES + 1):
            try:
                return write()
            except _Raced:
                if attempt == ROLLBACK_RETRIES or self.db.in_transaction:
                    raise LanternError(
                        f"{self.path}: another writer stored the same turns while this batch was written; nothing of "
                        "it was written: run it again (turns already stored are skipped)"
                    ) from None
                continue
            except psycopg.OperationalError as e:
                if (e.sqlstate or "").startswith("40"):  # psycopg's DeadlockDetected is no TransactionRollback
                    if attempt == ROLLBACK_RETRIES or self.db.in_transaction:
                        raise
                    time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))
                    continue
                raise
            except DatabaseUnavailableError as e:  # the connection lost meanwhile (a server restart): _Pool says so
                raise DatabaseUnavailableError(
                    f"{e}; this write was rolled back whole, what was committed before is kept (turns already stored "
                    "are skipped)"
                ) from None
        raise AssertionError("unreachable")

    def _lock_rows(self, db: PgConnection, rows: Sequence[NewEntry], after: Any) -> None:
        """The advisory locks of the rows' conversations and fact chain scopes, in sorted order in one pipeline
        (the server takes them in this order: never a deadlock); and when a pending recovery of the rows' users
        waits to be judged by ``after`` (reinforce.resolve_pending), the reinforcement lock, so that their entries'
        rows are written after a recovery's, never interleaved with them."""
        conn = db.current
        keys = sorted(
            {_conversation_key(r.user, r.agent, r.project, r.session) for r in rows}
            | {json.dumps(["facts", fact_scope(r)]) for r in rows if r.facts}
        )
        with conn.pipeline():
            for key in keys:
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
        users = sorted({r.user for r in rows})
        if (
            after is not None
            and conn.execute(
                "SELECT 1 FROM recoveries WHERE resolved = 0 AND user_id = ANY(%s) LIMIT 1", (users,)
            ).fetchone()
        ):
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (REINFORCEMENT_LOCK,))

    @staticmethod
    def _last_turns(db: PgConnection, convs: Sequence[tuple[str, str, str, str]]) -> dict[Any, Last]:
        """Each conversation's last stored turn (``plan.Last``), those that have one, in one round trip."""
        if not convs:
            return {}
        found = db.current.execute(
            "SELECT c.i, l.id, l.turn, l.text, l.content_hash "
            "FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[]) WITH ORDINALITY AS c(u, s, a, p, i) "
            "CROSS JOIN LATERAL (SELECT id, turn, text, content_hash FROM entries WHERE user_id = c.u "
            "AND session = c.s AND agent_id = c.a AND project = c.p ORDER BY turn DESC LIMIT 1) l",
            [list(x) for x in zip(*convs)],
        ).fetchall()
        return {convs[i - 1]: Last(entry_id, turn, text, h) for i, entry_id, turn, text, h in found}

    def _write_grown(self, db: PgConnection, items: Sequence[tuple[NewEntry, np.ndarray, int]], now: float) -> None:
        """Replace each entry with the (row, vector, entry id) turn that extends it, in one pipeline."""
        conn = db.current
        fts = _FTS_SQL.format(body="%s", tags="%s")
        with conn.cursor() as cur:
            cur.executemany(
                "UPDATE entries SET time = coalesce(time, %s), archived_at = %s, text = %s, summary = %s, "
                "tags = %s, hints = %s, memory_type = %s, importance = %s, content_hash = %s, "
                "tool_count = %s, file_count = %s, meta = %s, category = %s, e5_pending = %s, "
                f"vector_at = NULL, fts = {fts} WHERE id = %s",
                [
                    (to_epoch(row.time), now, *self._values(row), self._pending(vec), *self._fts_texts(row), entry_id)
                    for row, vec, entry_id in items
                ],
            )
            cur.executemany(
                "UPDATE embeddings SET vector = %s WHERE entry_id = %s", [(vec, entry_id) for _, vec, entry_id in items]
            )

    def _insert_new(self, db: PgConnection, items: Sequence[tuple[NewEntry, int, np.ndarray]], now: float) -> list[int]:
        """Insert the (row, turn number, vector) entries in one statement (their tsvectors built by the server) and
        their vectors in one binary COPY; returns their ids, in order. Raises ``_Raced`` when a row's content hash
        was committed by another writer meanwhile (``ON CONFLICT DO NOTHING`` skipped it)."""
        if not items:
            return []
        conn = db.current
        columns = [
            (
                row.session,
                turn,
                to_epoch(row.time),
                *self._values(row),
                row.user,
                row.agent,
                row.project,
                self._pending(vec),
                *self._fts_texts(row),
            )
            for row, turn, vec in items
        ]
        got = dict(conn.execute(_INSERT_SQL, [now, *(list(c) for c in zip(*columns))]).fetchall())
        if len(got) < len(items):
            raise _Raced()
        ids = [got[row.content_hash] for row, _, _ in items]
        with conn.cursor().copy("COPY embeddings (entry_id, vector) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "vector"])
            for entry_id, (_, _, vec) in zip(ids, items):
                copy.write_row((entry_id, vec))
        return ids

    @staticmethod
    def _fts_texts(row: NewEntry) -> tuple[str, str]:
        """The two texts of an entry's tsvector (``_FTS_SQL``): body = summary + text (its first ``FTS_MAX_CHARS``
        characters, JSON escapes read as spaces), then the tag values; each as ``fts_document`` makes it."""
        body = fts_document(unescaped((row.summary + "\n" + row.text)[:FTS_MAX_CHARS]))
        return body, fts_document(" ".join(t.value for t in row.tags))

    @staticmethod
    def _fts(summary: str, text: str, tag_values: Sequence[str]) -> tuple[str, tuple[str, str]]:
        """(SQL expression, its two parameters) of an entry's tsvector: body = summary + text (its first
        ``FTS_MAX_CHARS`` characters), then the tag values."""
        body = fts_document(unescaped((summary + "\n" + text)[:FTS_MAX_CHARS]))
        tags = fts_document(" ".join(tag_values))
        return _FTS_SQL.format(body="%s", tags="%s"), (body, tags)

    def _drop_rows(self, db: PgConnection, ids: list[int]) -> None:
        """The entries ``ids`` (with their tsvector), their embeddings (and so the HNSW index) and facts, 1,000 ids a
        statement. No ``secure_delete`` here (a SQLite pragma): the deleted rows' bytes stay in the tables' pages
        until ``erase_free_space`` rewrites them."""
        for start in range(0, len(ids), 1000):
            chunk = ids[start : start + 1000]
            db.current.execute("DELETE FROM embeddings WHERE entry_id = ANY(%s)", (chunk,))
            db.current.execute("DELETE FROM facts WHERE entry_id = ANY(%s)", (chunk,))
            db.current.execute("DELETE FROM entries WHERE id = ANY(%s)", (chunk,))

    ERASED_TABLES = ("entries", "embeddings", "facts", "events", "recoveries", "meta")

    def erase_free_space(self, wait: float | None = None, on_wait: Callable[[Erasure], None] | None = None) -> Erasure:
        """As ``Store.erase_free_space``: ``VACUUM FULL`` of Lantern's tables rewrites them and their indexes
        (tsvector GIN, HNSW) without the deleted rows' bytes. Each table's rewrite needs its exclusive lock: a
        transaction of another session that has read or written the table (``holders``: its backend pid and
        application name) keeps it. It is tried at once; when blocked, ``on_wait`` is told who holds the tables, and
        it is tried again for ``wait`` seconds (``lock_timeout``; default the SQLite store's busy timeout, 10 s).
        An incomplete erase is recorded in meta (``ERASE_PENDING``) and finished by the next
        ``finish_pending_erase`` that can (every open and close of a store, every forget). Old page images may stay
        in the server's write-ahead log and its archive until they are recycled (docs/postgres.md): outside what a
        client can erase."""
        return self._erase(BUSY_TIMEOUT_MS / 1000 if wait is None else wait, on_wait)

    _erase_errors = (psycopg.Error, DatabaseUnavailableError)

    def _erase_failed(self) -> Erasure:
        return Erasure(False, self._bytes_or_zero(), ())

    def _erase_holders(self) -> tuple[tuple[int, str], ...]:
        return self.holders()

    def _erase_step(self, wait: float, marker: bool = False) -> bool:
        """``VACUUM FULL`` of Lantern's tables (``marker``: of ``meta`` alone, where the pending erase's row was)."""
        return self._vacuum_full(wait, ("meta",) if marker else self.ERASED_TABLES)

    def _vacuum_full(self, wait: float, tables: Sequence[str] = ERASED_TABLES) -> bool:
        """``VACUUM FULL`` of ``tables``, each waiting at most ``wait`` seconds for its lock (at least 1 ms:
        PostgreSQL reads a ``lock_timeout`` of 0 as no limit); False when a lock was not obtained in time."""
        with self.pool.connection() as conn:
            conn.execute(f"SET lock_timeout = {max(1, int(wait * 1000))}")
            try:
                for table in tables:
                    conn.execute(f"VACUUM FULL {table}")
            except psycopg.errors.LockNotAvailable:
                return False
            finally:
                conn.execute("RESET lock_timeout")
        return True

    def holders(self) -> tuple[tuple[int, str], ...]:
        """The other sessions holding a lock on one of Lantern's tables (``pg_locks``): (backend pid, its
        application name, else ``postgres``), the ones an erase waits for."""
        rows = self.db.execute(
            "SELECT DISTINCT l.pid, coalesce(nullif(a.application_name, ''), 'postgres') FROM pg_locks l "
            "JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.relation IN (SELECT c::regclass FROM unnest(?::text[]) AS c) AND l.pid <> pg_backend_pid() "
            "ORDER BY l.pid",
            (list(self.ERASED_TABLES),),
        ).fetchall()
        return tuple((int(pid), str(name)) for pid, name in rows)

    def file_bytes(self) -> int:
        """Bytes of Lantern's tables with their indexes and TOAST (``pg_total_relation_size``): what holds the
        deleted rows until ``erase_free_space`` rewrites them (the SQLite store's file and WAL)."""
        return sum(self._relation_bytes().values())

    def _bytes_or_zero(self) -> int:
        try:
            return self.file_bytes()
        except (psycopg.Error, DatabaseUnavailableError):
            return 0

    @contextmanager
    def _vectors_replaced(self, db: PgConnection, dim: int) -> Iterator[None]:
        """Around ``replace_vectors``' writes: the HNSW index dropped and the column of any dimension, then the
        column of the new dimension and its index rebuilt."""
        db.current.execute("DROP INDEX IF EXISTS embeddings_hnsw")
        db.current.execute("ALTER TABLE embeddings ALTER COLUMN vector TYPE vector")
        yield
        self._vector_column(db, dim)

    @staticmethod
    def _put_vector(db: PgConnection, entry_id: int, vector: np.ndarray, blocks: Sequence[tuple[int, int]]) -> None:
        db.current.execute(
            "INSERT INTO embeddings(entry_id, vector) VALUES (%s, %s) "
            "ON CONFLICT (entry_id) DO UPDATE SET vector = EXCLUDED.vector",
            (entry_id, np.asarray(vector, np.float32)),
        )

    def encode_vector(self, vector: np.ndarray) -> np.ndarray:
        """The stored form of a vector for the ``embeddings`` table: float32 (dim,), sent as a pgvector value."""
        return np.asarray(vector, np.float32)

    def entry_columns(self) -> list[str]:
        """Columns of ``entries`` in table order, without the full-text column (derived, never exported): the
        SQLite store's columns, in its order."""
        rows = self.db.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = 'entries' AND column_name <> 'fts' ORDER BY ordinal_position"
        )
        return [r[0] for r in rows]

    @staticmethod
    def entry_value(column: str, stored: Any) -> Any:
        """As ``Store.entry_value``: this schema stores every column as it is used, so ``stored`` itself."""
        return stored

    @staticmethod
    def stored_value(column: str, value: Any) -> Any:
        """As ``Store.stored_value``: ``value`` itself."""
        return value

    def index_fulltext(self, db: Any, entry_id: int, summary: str, text: str, tag_values: Sequence[str]) -> None:
        """Set the tsvector of an entry written by other code (an import): as ``add`` builds it."""
        sql, params = self._fts(summary, text, tag_values)
        db.current.execute(f"UPDATE entries SET fts = {sql} WHERE id = %s", (*params, entry_id))

    @staticmethod
    def unindex_fulltext(db: Any, entry_id: int) -> None:
        """As ``Store.unindex_fulltext``: nothing to do here, the tsvector is a column ``index_fulltext`` sets."""

    @staticmethod
    def lock_conversations(db: PgConnection, conversations: Iterable[tuple[str, str, str, str]]) -> None:
        """Make the open write transaction the only writer of these (user, agent, project, session) conversations
        (turn numbers, a grown turn) until it ends: the advisory locks ``add`` takes, in sorted order, one round
        trip."""
        conn = db.current
        with conn.pipeline():
            for key in sorted({_conversation_key(*c) for c in conversations}):
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))

    def decode_vectors(self, blobs: Sequence[Any]) -> np.ndarray:
        """float32 (len(blobs), dim) of vectors as ``rows_since`` returns them (pgvector values)."""
        if not len(blobs):
            return np.zeros((0, self.dim), np.float32)
        return np.stack([_array(b) for b in blobs])

    def vector_decodable(self, blob: Any) -> bool:
        """Whether a ``rows_since`` vector is one of ``dim`` values (a pgvector column of that dimension: always)."""
        return blob is not None and _array(blob).shape == (self.dim,)

    @staticmethod
    def _reinforcement_lock(db: PgConnection) -> None:
        """The reinforcement advisory lock, taken by the first write of a recovery's reinforcement
        (``bump_access`` in reinforce.record_recovery): two recoveries' read-then-write of c (confidence) run one
        after the other, as SQLite's write lock runs them: no lost update, and no deadlock between their row
        locks."""
        db.current.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (REINFORCEMENT_LOCK,))

    def compact_vectors(self, batch: int = 2_000) -> int:
        """Nothing to do: vectors are pgvector float32 from the first row (the int8 blobs are SQLite's format)."""
        return 0

    # ------------------------------------------------------------------ read
    def rows_since(self, archived_at: float, after_id: int | None = None) -> list[tuple]:
        """As ``Store.rows_since``; the vector column is a float32 numpy array (``decode_vectors`` stacks them)."""
        lo = archived_at if np.isfinite(archived_at) else -1e300
        return self.db.execute(
            f"{_INDEX_SELECT} WHERE e.archived_at >= ? OR e.vector_at >= ? OR e.id > ? ORDER BY e.id",
            (lo, lo, after_id if after_id is not None else 2**63 - 1),
            binary=True,
        ).fetchall()

    def stamps_since(self, archived_at: float, after_id: int | None = None) -> list[tuple[int, float]]:
        lo = archived_at if np.isfinite(archived_at) else -1e300
        return self.db.execute(
            "SELECT id, greatest(archived_at, coalesce(vector_at, archived_at)) FROM entries "
            "WHERE archived_at >= ? OR vector_at >= ? OR id > ? ORDER BY id",
            (lo, lo, after_id if after_id is not None else 2**63 - 1),
        ).fetchall()

    def rows_by_id(self, ids: Sequence[int]) -> list[tuple]:
        if not len(ids):
            return []
        return self.db.execute(
            f"{_INDEX_SELECT} WHERE e.id = ANY(?) ORDER BY e.id", (list(ids),), binary=True
        ).fetchall()

    @staticmethod
    def _tsquery(match: str) -> tuple[str, list[str]]:
        """(SQL tsquery expression, parameters) for an FTS5 MATCH of quoted terms: each term a phrase
        (``phraseto_tsquery``, as an FTS5 quoted string is a phrase), OR-ed. ('', []) when no term has a word."""
        terms = [d for d in (fts_document(t) for t in _terms(match)) if d]
        if not terms:
            return "", []
        return " || ".join(f"phraseto_tsquery('{TS_CONFIG}', %s)" for _ in terms), terms

    def fulltext(
        self, match: str, limit: int, sessions: Sequence[str] | None = None, scope: Scope | None = None
    ) -> list[tuple[int, float]]:
        """As ``Store.fulltext`` (same arguments), ranked by ``ts_rank`` with length normalization 1 (rank /
        (1 + ln(length))); returns ``(entry_id, -rank)`` best first, negative like FTS5's bm25."""
        query, terms = self._tsquery(match)
        if not query:
            return []
        where, params = ("TRUE", []) if scope is None else scope_where("", scope)
        in_sessions = " AND session = ANY(%s)" if sessions is not None else ""
        extra = [list(sessions)] if sessions is not None else []
        sql = (
            f"WITH q AS (SELECT ({query}) AS q) SELECT id, -ts_rank(fts, q.q, 1) AS s FROM entries, q "
            f"WHERE fts @@ q.q AND {where.replace('?', '%s')}{in_sessions} ORDER BY s, id LIMIT %s"
        )
        with self.pool.connection() as conn:
            return conn.execute(sql, (*terms, *params, *extra, limit)).fetchall()

    def term_fractions(self, match_terms: Sequence[str], sample: int) -> dict[str, float]:
        """As ``Store.term_fractions``: each quoted term's estimated share of the entries that match it. Read from
        the server's own statistics of the full-text column (``pg_stats.most_common_elems`` and
        ``most_common_elem_freqs``, which ANALYZE and autovacuum keep: the share of rows holding each frequent
        lexeme, what the planner reads for a tsquery's selectivity; PostgreSQL manual §53.2 / ``pg_stats``): a
        term's share is that of its rarest lexeme (a phrase matches no more rows than its rarest word), 0 for a
        lexeme too rare to be listed. The terms' lexemes come from the server's parser (one round trip for the
        uncached terms); the statistics are read once and again when the newest entry id (``_newest_id``) moves by
        10%. Before the table has statistics (a new or freshly filled table not yet analyzed), the shares are counted
        in the ``sample`` newest entries (``_counted_fractions``). Returns {term: fraction in [0, 1]}."""
        top = self._newest_id()
        cache = getattr(self, "_fractions", None)
        if cache is None or abs(top - cache[0]) > 0.1 * max(cache[0], 1) or len(cache[1]) > 100_000:
            cache = self._fractions = (top, {}, self._lexeme_frequencies())
        todo = [t for t in dict.fromkeys(match_terms) if t not in cache[1]]
        if todo and cache[2] is None:
            cache[1].update(self._counted_fractions(todo, top, sample))
        elif todo:
            docs = [" ".join(fts_document(t) for t in _terms(term)) for term in todo]
            rows = self.db.execute(
                "SELECT d.i, array(SELECT lexeme FROM unnest(to_tsvector(?::regconfig, d.t))) "
                "FROM unnest(?::text[]) WITH ORDINALITY AS d(t, i)",
                (TS_CONFIG, docs),
            ).fetchall()
            frequency = cache[2]
            for i, lexemes in rows:
                cache[1][todo[i - 1]] = min((frequency.get(x, 0.0) for x in lexemes), default=0.0)
        return {t: cache[1][t] for t in match_terms}

    def _newest_id(self) -> int:
        """The largest entry id, read from the server at most once per ``NEWEST_ID_TTL_S`` seconds (a recovery calls
        ``term_fractions`` up to three times; the id only decides when the statistics are read again)."""
        now = time.monotonic()
        cached = getattr(self, "_newest", None)
        if cached is None or now - cached[1] > NEWEST_ID_TTL_S:
            cached = self._newest = (self.db.execute("SELECT coalesce(max(id), 0) FROM entries").fetchone()[0], now)
        return cached[0]

    def term_postings(self, match_terms: Sequence[str], sample: int) -> dict[str, float]:
        """As ``Store.term_postings``: full-text rows per entry matching each term. One row per entry here (no
        windows), so it is ``term_fractions``."""
        return self.term_fractions(match_terms, sample)

    def _lexeme_frequencies(self) -> dict[str, float] | None:
        """{lexeme: share of rows holding it} of the full-text column from ``pg_stats`` (ANALYZE's sample), or None
        when the table has no statistics yet."""
        row = self.db.execute(
            "SELECT most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats "
            "WHERE schemaname = current_schema() AND tablename = 'entries' AND attname = 'fts'"
        ).fetchone()
        if row is None or row[0] is None:
            return None
        return dict(zip(row[0], row[1]))  # the frequencies' array ends with min, max and null share: zip drops them

    def _counted_fractions(self, terms: Sequence[str], top: int, sample: int) -> dict[str, float]:
        """Each term's share of matches among the ``sample`` newest entries, every term counted in one scan of those
        rows (``count(*) FILTER``)."""
        n = min(sample, top) or 1
        out: dict[str, float] = {}
        queries = [(t, *self._tsquery(t)) for t in terms]
        counted = [(t, q, p) for t, q, p in queries if q]
        for t, q, _ in queries:
            if not q:
                out[t] = 0.0
        if counted:
            filters = ", ".join(f"count(*) FILTER (WHERE fts @@ ({q}))" for _, q, _ in counted)
            params = [x for _, _, p in counted for x in p]
            with self.pool.connection() as conn:
                row = conn.execute(f"SELECT {filters} FROM entries WHERE id > %s", (*params, top - sample)).fetchone()
            for (t, _, _), hits in zip(counted, row):
                out[t] = min(hits / n, 1.0)
        return out

    def nearest(
        self, vector: np.ndarray, limit: int, scope: Scope | None = None, ef_search: int = 100
    ) -> list[tuple[int, float]]:
        """The ``limit`` entries whose vector is nearest ``vector`` (float32 (dim,)) by cosine distance, through
        the HNSW index (approximate: ``hnsw.ef_search`` candidates per search, pgvector's recall knob; pgvector
        0.6 filters ``scope`` after the index scan, so a scope holding a small share of the rows may return fewer
        than ``limit``). Returns ``(entry_id, cosine similarity)`` best first. The read path ranks on the in-process
        index (store/index.py); this is the server-side search for stores too large to load (docs/postgres.md)."""
        where, params = ("TRUE", []) if scope is None else scope_where("e", scope)
        with self.pool.connection() as conn, conn.transaction():
            conn.execute(f"SET LOCAL hnsw.ef_search = {max(1, int(ef_search))}")
            return conn.execute(
                "SELECT v.entry_id, 1 - (v.vector <=> %s) AS cos FROM embeddings v JOIN entries e ON e.id = v.entry_id "
                f"WHERE {where.replace('?', '%s')} ORDER BY v.vector <=> %s LIMIT %s",
                (np.asarray(vector, np.float32), *params, np.asarray(vector, np.float32), int(limit)),
            ).fetchall()

    def database_identity(self) -> tuple[Any, ...] | None:
        """Which database this is, whatever URL named it: the server cluster's system identifier and the
        database's name; None when the server does not let this user read them (the copy goes ahead)."""
        with self.pool.connection() as conn:
            try:
                row = conn.execute("SELECT system_identifier, current_database() FROM pg_control_system()").fetchone()
            except psycopg.Error:
                return None
        return tuple(row)

    def _stats_head(self) -> dict[str, Any]:
        return {"backend": self.backend}

    def _sizes(self, scope: Scope | None, by_table: bool) -> tuple[int, dict[str, int], int | None]:
        """``stats``' sizes: ``database_bytes`` is ``pg_total_relation_size`` of Lantern's tables (indexes and TOAST
        included, every user's rows) whatever the scope, and so is each table's; no free bytes (VACUUM's business)."""
        sizes = self._relation_bytes()
        return sum(sizes.values()), sizes, None

    def _relation_bytes(self) -> dict[str, int]:
        """Bytes of each Lantern table with its indexes and TOAST (``pg_total_relation_size``), largest first."""
        rows = self.db.execute(
            "SELECT c, pg_total_relation_size(c::regclass) FROM unnest(?::text[]) AS c",
            (["entries", "embeddings", "facts", "events", "recoveries", "meta"],),
        ).fetchall()
        return dict(sorted(((str(k), int(v)) for k, v in rows), key=lambda kv: -kv[1]))
