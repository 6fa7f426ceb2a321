"""Numbered schema migrations. The schema lives here, in one place; ``PRAGMA user_version`` records the last
migration applied. Append new migrations; never edit an applied one."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from lantern.store import fulltext, packed

MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = []


def migration(fn: Callable[[sqlite3.Connection], None]) -> Callable[[sqlite3.Connection], None]:
    MIGRATIONS.append(fn)
    return fn


@migration
def m001_initial(db: sqlite3.Connection) -> None:
    _run(
        db,
        """
        CREATE TABLE meta (
            key   TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        -- one row per archived turn
        CREATE TABLE entries (
            id           INTEGER PRIMARY KEY,
            session      TEXT NOT NULL,
            turn         INTEGER NOT NULL,
            time         REAL,              -- event time, unix seconds UTC; NULL when the transcript has none
            archived_at  REAL NOT NULL,     -- unix seconds UTC
            text         TEXT NOT NULL,     -- full verbatim turn: tool arguments and results included
            summary      TEXT NOT NULL,     -- extractive, <= 1,200 characters
            tags         TEXT NOT NULL,     -- JSON [[kind, value], ...]
            hints        TEXT NOT NULL,     -- JSON [term, ...]: lookup hints of the keyword signal
            memory_type  TEXT NOT NULL,     -- episodic | semantic | procedural
            importance   REAL NOT NULL,     -- write-time prior in [0, 1]
            content_hash TEXT NOT NULL UNIQUE,
            confidence   REAL NOT NULL,     -- c (paper Appendix D)
            success      REAL NOT NULL,     -- sigma (paper Appendix D)
            access_count INTEGER NOT NULL DEFAULT 0,
            tool_count   INTEGER NOT NULL DEFAULT 0,
            file_count   INTEGER NOT NULL DEFAULT 0,
            meta         TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX entries_session_turn ON entries(session, turn);
        CREATE INDEX entries_archived_at ON entries(archived_at);
        -- float32 little-endian vectors: the source of truth of the in-process matrix
        CREATE TABLE embeddings (
            entry_id INTEGER PRIMARY KEY REFERENCES entries(id) ON DELETE CASCADE,
            vector   BLOB NOT NULL
        );
        -- body = summary + text, tags = tag values; both with CJK runs rewritten as character bigrams
        CREATE VIRTUAL TABLE entries_fts USING fts5(
            body, tags, tokenize = 'unicode61 remove_diacritics 2'
        );
        """,
    )


@migration
def m002_scopes(db: sqlite3.Connection) -> None:
    """Scopes (lantern/scope.py): the user is an isolation boundary, agent and project are filters. Existing rows
    belong to the default user, agent and project ``""``."""
    _run(
        db,
        """
        ALTER TABLE entries ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
        ALTER TABLE entries ADD COLUMN agent_id TEXT NOT NULL DEFAULT '';
        ALTER TABLE entries ADD COLUMN project TEXT NOT NULL DEFAULT '';
        -- every read filters on the user; a conversation is (scope, session)
        CREATE INDEX entries_user_session_turn ON entries(user_id, session, turn);
        """,
    )


@migration
def m003_reinforcement(db: sqlite3.Connection) -> None:
    """Reinforcement state (paper Appendix D; architecture §4; lantern/reinforce.py) and the write-time category
    (architecture §2.6; archive/classify.py). Entries archived before this migration keep category NULL."""
    _run(
        db,
        """
        -- category: fact | decision | preference | process | tool_call | system
        ALTER TABLE entries ADD COLUMN category TEXT;
        -- recoveries waiting for the next assistant message of their session, to judge usefulness (sigma)
        CREATE TABLE recoveries (
            id        INTEGER PRIMARY KEY,
            session   TEXT,                -- the session recovered for; NULL: any session's next assistant message
            user_id   TEXT NOT NULL DEFAULT '',  -- the user recovered for: only that user's replies judge it
            entry_ids TEXT NOT NULL,       -- JSON [id, ...] of the recovered (packed) entries
            time      REAL NOT NULL,       -- unix seconds UTC
            resolved  INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX recoveries_pending ON recoveries(resolved, session)
        """,
    )


@migration
def m004_facts(db: sqlite3.Connection) -> None:
    """Bi-temporal fact records (store/facts.py; docs/architecture.md §5.4)."""
    _run(
        db,
        """
        CREATE TABLE facts (
            id            INTEGER PRIMARY KEY,
            entry_id      INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,  -- source turn
            scope         TEXT NOT NULL DEFAULT '',  -- chain scope: the user ('' = whole database)
            key           TEXT NOT NULL,             -- normalized (memory/facts.py normalize_key)
            key_text      TEXT NOT NULL,             -- as written
            value         TEXT,                      -- as written; NULL = retracted ("no longer use A")
            value_norm    TEXT,                      -- casefolded, unquoted: for comparisons
            replaces      TEXT,                      -- the old value a switch / retraction named
            valid_from    REAL NOT NULL,             -- event time of the source turn, unix seconds UTC
            valid_to      REAL,                      -- next version's valid_from; NULL = current
            recorded_at   REAL NOT NULL,             -- when Lantern stored it
            superseded_by INTEGER REFERENCES facts(id) ON DELETE SET NULL
        );
        CREATE INDEX facts_chain ON facts(scope, key, valid_from);
        CREATE INDEX facts_entry ON facts(entry_id);
        CREATE INDEX facts_value ON facts(scope, value_norm);
        CREATE INDEX facts_superseded_by ON facts(superseded_by)
        """,
    )


@migration
def m005_fts_porter(db: sqlite3.Connection) -> None:
    """The full-text index with the Porter stemmer over unicode61 (FTS5's ``porter`` tokenizer; Porter 1980), so a
    question's "screenplays", "writes", "visited" match a turn's "screenplay", "write", "visit". Tokens with
    non-ASCII letters (CJK bigrams) pass through unstemmed. Measured on the tune split (LoCoMo conversations 1-5):
    BM25 alone 59.9% -> 63.9% facts recovered, recall@10 0.591 -> 0.627 (ours). The rows are copied over."""
    _run(
        db,
        """
        CREATE VIRTUAL TABLE entries_fts_porter USING fts5(
            body, tags, tokenize = 'porter unicode61 remove_diacritics 2'
        );
        INSERT INTO entries_fts_porter(rowid, body, tags) SELECT rowid, body, tags FROM entries_fts;
        DROP TABLE entries_fts;
        ALTER TABLE entries_fts_porter RENAME TO entries_fts
        """,
    )


@migration
def m006_events(db: sqlite3.Connection) -> None:
    """Compaction events (store/events.py): one small row per compaction detected and recovered for, by the proxy,
    the Claude Code hooks or the Python API. Entry ids and counts only, no turn text; the query is redacted."""
    _run(
        db,
        """
        CREATE TABLE events (
            id        INTEGER PRIMARY KEY,
            time      REAL NOT NULL,             -- unix seconds UTC
            session   TEXT NOT NULL,             -- the session recovered for (with its sub-sessions)
            user_id   TEXT NOT NULL DEFAULT '',  -- the scope detection ran in (lantern/scope.py)
            agent_id  TEXT,                      -- NULL: any agent
            project   TEXT,                      -- NULL: any project
            source    TEXT NOT NULL,             -- proxy | claude-code | api | demo
            reason    TEXT NOT NULL,             -- how it was detected: summary | dropped | size_drop | ...
            lost      TEXT NOT NULL,             -- JSON [entry id, ...]: archived turns no longer live, turn order
            query     TEXT NOT NULL,             -- the recovery's query, redacted, <= 4,000 characters
            injected  TEXT NOT NULL,             -- JSON [[entry id, characters, excerpt], ...], block order
            chars     INTEGER NOT NULL,          -- characters of the injected block
            budget    INTEGER NOT NULL,
            rerank    INTEGER NOT NULL DEFAULT 0 -- 1 when an LLM rerank ran
        );
        CREATE INDEX events_user_session ON events(user_id, session, time);
        CREATE INDEX events_time ON events(time)
        """,
    )


@migration
def m007_vector_state(db: sqlite3.Connection) -> None:
    """Vectors stored compactly (store/vectors.py: int8 per block, no all-zero blocks; the rows already stored are
    re-encoded by ``Store.compact_vectors`` once the embedder's blocks are known) and filled after the archive
    commit: ``e5_pending`` marks an entry whose deferred block (the routed embedder's e5 part of an English turn) is
    still to be computed, ``vector_at`` when its vector last changed (the in-process index re-reads such rows)."""
    _run(
        db,
        """
        ALTER TABLE entries ADD COLUMN vector_at REAL;
        ALTER TABLE entries ADD COLUMN e5_pending INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX entries_vector_at ON entries(vector_at) WHERE vector_at IS NOT NULL;
        CREATE INDEX entries_e5_pending ON entries(id) WHERE e5_pending = 1
        """,
    )


@migration
def m008_fewer_bytes(db: sqlite3.Connection) -> None:
    """Fewer bytes per turn (issue #23). The full-text index without its own copy of the text: a contentless FTS5
    table (store/fulltext.py), its rows built again from ``entries`` (same tokenizer, same rows; the format recorded
    in meta). And no index on (session, turn): every query on a session also names its user, which
    ``entries_user_session_turn`` (m002) serves."""
    db.execute("DROP INDEX IF EXISTS entries_session_turn")
    db.execute("DROP TABLE entries_fts")
    db.execute(fulltext.CREATE_TABLE)
    fulltext.rebuild(db)


@migration
def m009_packed_columns(db: sqlite3.Connection) -> None:
    """Fewer bytes per turn in ``entries`` (store/packed.py; issue #23): summary and tags deflated where that is
    shorter, the content hash as its 32-byte digest instead of 64 hex characters (in the row and in its UNIQUE
    index). Every row is rewritten in this migration's one transaction, so a store is wholly in the old form or
    wholly in the new; a value already packed is left as it is. The file keeps its size until a VACUUM: the pages
    freed are reused by later writes (``lantern stats --all-users`` shows them as ``free_bytes``; ``lantern vacuum``
    gives them back)."""
    db.create_function("lantern_pack", 1, packed.pack, deterministic=True)
    db.create_function("lantern_pack_hash", 1, packed.pack_hash, deterministic=True)
    try:
        db.execute(
            "UPDATE entries SET summary = lantern_pack(summary), tags = lantern_pack(tags), "
            "content_hash = lantern_pack_hash(content_hash)"
        )
    finally:
        db.create_function("lantern_pack", 1, None)
        db.create_function("lantern_pack_hash", 1, None)


@migration
def m010_text_last(db: sqlite3.Connection) -> None:
    """The ``entries`` columns reordered so that ``text`` comes last. SQLite stores a row's columns in order, and a
    text longer than a page spills into a chain of overflow pages: reading any column stored after it walks that
    chain (SQLite file format §1.6, "Overflow pages"). The read path reads summaries, scopes and reinforcement
    columns of hundreds of candidates per recovery, and the index load reads every row's hints; none of them needs
    the text. The table is rebuilt by SQLite's documented procedure for schema changes ALTER TABLE cannot make
    (SQLite "ALTER TABLE" §7: a new table, the rows copied, the old table dropped, the new one renamed, its
    indexes created again), with foreign keys off around the transaction (``migrate``: a DROP TABLE with them on
    deletes the rows of the tables that reference it) and ``PRAGMA foreign_key_check`` before the commit."""
    _run(
        db,
        f"""
        CREATE TABLE entries_new (
            id           INTEGER PRIMARY KEY,
            session      TEXT NOT NULL,
            turn         INTEGER NOT NULL,
            time         REAL,              -- event time, unix seconds UTC; NULL when the transcript has none
            archived_at  REAL NOT NULL,     -- unix seconds UTC
            user_id      TEXT NOT NULL DEFAULT '',  -- scope (lantern/scope.py)
            agent_id     TEXT NOT NULL DEFAULT '',
            project      TEXT NOT NULL DEFAULT '',
            memory_type  TEXT NOT NULL,     -- episodic | semantic | procedural
            category     TEXT,              -- fact | decision | preference | process | tool_call | system
            importance   REAL NOT NULL,     -- write-time prior in [0, 1]
            confidence   REAL NOT NULL,     -- c (paper Appendix D)
            success      REAL NOT NULL,     -- sigma (paper Appendix D)
            access_count INTEGER NOT NULL DEFAULT 0,
            tool_count   INTEGER NOT NULL DEFAULT 0,
            file_count   INTEGER NOT NULL DEFAULT 0,
            vector_at    REAL,              -- when the vector last changed (m007)
            e5_pending   INTEGER NOT NULL DEFAULT 0,
            content_hash TEXT NOT NULL UNIQUE,
            meta         TEXT NOT NULL DEFAULT '{{}}',
            hints        TEXT NOT NULL,     -- JSON [term, ...]: lookup hints of the keyword signal
            tags         TEXT NOT NULL,     -- JSON [[kind, value], ...]
            summary      TEXT NOT NULL,     -- extractive, <= 1,200 characters
            text         TEXT NOT NULL      -- full verbatim turn, last: see above
        );
        INSERT INTO entries_new({_ENTRY_ORDER}) SELECT {_ENTRY_ORDER} FROM entries ORDER BY id;
        DROP TABLE entries;
        ALTER TABLE entries_new RENAME TO entries;
        CREATE INDEX entries_archived_at ON entries(archived_at);
        CREATE INDEX entries_user_session_turn ON entries(user_id, session, turn);
        CREATE INDEX entries_vector_at ON entries(vector_at) WHERE vector_at IS NOT NULL;
        CREATE INDEX entries_e5_pending ON entries(id) WHERE e5_pending = 1
        """,
    )
    if db.execute("PRAGMA foreign_key_check").fetchone() is not None:
        raise sqlite3.IntegrityError("entries rebuilt with the text last: a row references an entry that is not there")


m010_text_last.foreign_keys_off = True  # type: ignore[attr-defined]
_ENTRY_ORDER = (
    "id, session, turn, time, archived_at, user_id, agent_id, project, memory_type, category, importance, "
    "confidence, success, access_count, tool_count, file_count, vector_at, e5_pending, content_hash, meta, hints, "
    "tags, summary, text"
)


@migration
def m011_event_receipts(db: sqlite3.Connection) -> None:
    """Each compaction event is a receipt (store/events.py): why nothing was injected, how long the recovery took,
    and what the compaction lost (the loss report, bounded). Three nullable columns: rows recorded before have none.
    Each is added only when missing, so the migration may run again on a file whose version was set back."""
    have = {row[1] for row in db.execute("PRAGMA table_info(events)")}
    for column, kind in (("empty_reason", "TEXT"), ("latency_ms", "REAL"), ("loss", "TEXT")):
        if column not in have:  # why nothing was injected (NULL: a block was); wall time; the JSON loss report
            db.execute(f"ALTER TABLE events ADD COLUMN {column} {kind}")


@migration
def m012_text_first(db: sqlite3.Connection) -> None:
    """Entries stored text-first (archive/pipeline.py: a hook that answers before any model is loaded) have no
    vector yet: ``e5_pending`` 2 marks them (1: the deferred block only is missing), and this index finds them, so
    the process that loads the models fills them (``Store.unembedded``) at the cost of the few it finds."""
    db.execute("CREATE INDEX IF NOT EXISTS entries_unembedded ON entries(id) WHERE e5_pending = 2")


ENTRY_ID_FLOOR = "entry_id_floor"  # meta key: no entry id at or below it is given again (``m013_ids_once``)


@migration
def m013_ids_once(db: sqlite3.Connection) -> None:
    """An entry id names one entry for good: a form, a feedback or a forget that holds it never reaches another
    turn. SQLite gives a new row the largest rowid + 1 (sqlite.org/autoinc.html), so forgetting the newest entry
    handed its id to the next turn; AUTOINCREMENT would need the table rebuilt. Instead meta ``ENTRY_ID_FLOOR``
    holds the largest id deleted (a trigger, whatever the delete), every insert takes an id above it
    (``Store.new_entry_id``), and a second trigger refuses an insert at or below it. One ``max(id)`` read: cheap on
    any store (ids deleted before this migration may have been given again already; nothing tells them).
    A migration that rebuilds ``entries`` must create both triggers again."""
    db.execute("INSERT OR REPLACE INTO meta(key, value) SELECT ?, coalesce(max(id), 0) FROM entries", (ENTRY_ID_FLOOR,))
    db.execute(  # one statement each: a trigger's body holds semicolons (``_run`` splits on them)
        "CREATE TRIGGER IF NOT EXISTS entries_id_floor AFTER DELETE ON entries BEGIN "
        f"UPDATE meta SET value = OLD.id WHERE key = '{ENTRY_ID_FLOOR}' AND CAST(value AS INTEGER) < OLD.id; END"
    )
    db.execute(
        "CREATE TRIGGER IF NOT EXISTS entries_id_once AFTER INSERT ON entries "
        f"WHEN NEW.id <= (SELECT CAST(value AS INTEGER) FROM meta WHERE key = '{ENTRY_ID_FLOOR}') BEGIN "
        "SELECT RAISE(ABORT, 'entry id given before: an entry id is never given twice'); END"
    )


def _run(db: sqlite3.Connection, script: str) -> None:
    """Execute a script statement by statement (``executescript`` would commit the open transaction)."""
    for statement in script.split(";\n"):
        if statement.strip():
            db.execute(statement)


def roll_back(db: sqlite3.Connection) -> None:
    """End ``db``'s open transaction after an error, keeping that error the one raised: SQLite has already rolled
    the transaction back itself after some errors (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM, SQLITE_BUSY at COMMIT;
    sqlite.org/lang_transaction.html "Response To Errors Within A Transaction"), and a ROLLBACK then would raise
    "cannot rollback - no transaction is active" in its place. A ROLLBACK that fails itself (an I/O error) leaves
    the journal to roll the transaction back when the file is next opened; its error is not the one to report."""
    if db.in_transaction:
        try:
            db.execute("ROLLBACK")
        except sqlite3.Error:
            pass


def migrate(db: sqlite3.Connection) -> int:
    """Apply every migration not yet applied, each in its own transaction. Returns the schema version."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    for number, fn in enumerate(MIGRATIONS, start=1):
        if number <= version:
            continue
        rebuild = getattr(fn, "foreign_keys_off", False)  # a table rebuild: foreign keys off outside the transaction
        if rebuild:
            db.execute("PRAGMA foreign_keys = OFF")
        db.execute("BEGIN IMMEDIATE")
        try:
            # re-read under the write lock: another process may have migrated meanwhile
            if db.execute("PRAGMA user_version").fetchone()[0] >= number:
                db.execute("ROLLBACK")
                continue
            fn(db)
            db.execute(f"PRAGMA user_version = {number}")
            db.execute("COMMIT")
        except BaseException:
            roll_back(db)
            raise
        finally:
            if rebuild:
                db.execute("PRAGMA foreign_keys = ON")
        version = number
    return max(version, db.execute("PRAGMA user_version").fetchone()[0])


# ---------------------------------------------------------------------------------------------- names
NAMES_FORM = "names_form"  # meta: the form (archive/redact.py ``names_form``) every stored name was last written in


def rewrite_names(store: Any, form: Callable[[str], str], form_id: str) -> int:
    """Rewrite every name a store holds through ``form`` (archive/redact.py ``redact_name``, for the facade), in one
    transaction of ``store`` (SQLite or PostgreSQL: shared SQL through ``Store.transaction``), and record
    ``form_id`` in meta ``NAMES_FORM``: a store written before names were redacted (or under older redaction
    rules) keeps secrets in its session, user, agent and project names, which reads and ``forget`` no longer
    match (they look names up in their redacted form). Idempotent: a name already in its form is left as it is.

    Rewritten: ``entries`` (session, user_id, agent_id, project, with the content hash of the turn under its new
    names), ``facts.scope`` (the user), ``recoveries`` (session, user_id), ``events`` (session, user_id,
    agent_id, project and the labels source, reason, empty_reason) and the open rewind candidates (meta rows
    keyed by a hash of the conversation). Where two conversations collapse into one (two names whose secrets
    get one placeholder, or a session archived in clear by an older version and continued under its redacted
    form), their entries merge: the later conversation's turns, when their numbers overlap the earlier's, are
    renumbered after them (earlier: the least ``archived_at``); a turn whose new content hash is already
    stored (the same text in the same conversation) is the same turn, and only one copy stays. Re-checks
    ``NAMES_FORM`` under the write lock (another process may have done it). The rewritten rows' old text is
    owed an erase (``_owe_erase``: the next open, close or forget makes it unrecoverable from the file).
    Returns the number of entries rewritten or merged."""
    from lantern.model import content_hash
    from lantern.store.facts import delete_facts
    from lantern.store.reinforcement import forget_pending

    done = 0
    with store.transaction() as db:
        # the meta row exists and is locked before it is read (PostgreSQL; SQLite's BEGIN IMMEDIATE runs alone)
        db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, '')", (NAMES_FORM,))
        row = db.execute(f"SELECT value FROM meta WHERE key = ?{store.dialect.for_update}", (NAMES_FORM,)).fetchone()
        if row is not None and row[0] == form_id:
            return 0
        changed = False
        conversations = [
            tuple(r) for r in db.execute("SELECT DISTINCT user_id, agent_id, project, session FROM entries").fetchall()
        ]
        target = {c: tuple(form(x) for x in c) for c in conversations}
        groups: dict[tuple, list[tuple]] = {}
        for old, new in target.items():
            groups.setdefault(new, []).append(old)
        taken: set[Any] = set()
        duplicates: list[int] = []
        for new, sources in groups.items():
            if all(old == new for old in sources):
                continue
            shifts = _turn_shifts(db, sources)
            rows = {  # each conversation's rows, read before any of them moves into ``new``
                old: db.execute(
                    "SELECT id, turn, text FROM entries WHERE user_id = ? AND agent_id = ? AND project = ? "
                    f"AND session = ? ORDER BY id{store.dialect.for_update}",
                    old,
                ).fetchall()
                for old in sources
                if old != new or shifts.get(old)
            }
            for old, its_rows in rows.items():
                shift = shifts.get(old, 0)
                for entry_id, turn, text in its_rows:
                    h = store.stored_value("content_hash", content_hash(new[3], text, *new[:3]))
                    stored = db.execute("SELECT id FROM entries WHERE content_hash = ?", (h,)).fetchone()
                    if (stored is not None and stored[0] != entry_id) or h in taken:
                        duplicates.append(entry_id)  # the same turn, already stored in this conversation
                        continue
                    taken.add(h)
                    db.execute(
                        "UPDATE entries SET user_id = ?, agent_id = ?, project = ?, session = ?, turn = ?, "
                        "content_hash = ? WHERE id = ?",
                        (*new, turn + shift, h, entry_id),
                    )
                    done += 1
                changed = True
            for old in sources:
                if old != new:
                    _move_rewinds(store, db, old, new)
        if duplicates:
            delete_facts(db, duplicates)
            forget_pending(db, duplicates)
            store._forget_rewinds(db, duplicates)
            store._drop_rows(db, duplicates)
            done += len(duplicates)
        for table, columns in _NAME_COLUMNS:
            for column in columns:
                for (name,) in db.execute(f"SELECT DISTINCT {column} FROM {table}").fetchall():
                    if name and form(name) != name:
                        db.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", (form(name), name))
                        changed = True
        if changed:
            store._changed(db)
            store._owe_erase(db)
        db.execute("UPDATE meta SET value = ? WHERE key = ?", (form_id, NAMES_FORM))
    if changed:
        store._deleted()  # index snapshots on disk hold the old names
    return done


# the name columns outside ``entries`` (whose conversations ``rewrite_names`` merges): each rewritten value by value
_NAME_COLUMNS = (
    ("facts", ("scope",)),
    ("recoveries", ("session", "user_id")),
    ("events", ("session", "user_id", "agent_id", "project", "source", "reason", "empty_reason")),
)


def _turn_shifts(db: Any, sources: list[tuple]) -> dict[tuple, int]:
    """How much to add to the turn numbers of each conversation of ``sources`` merging into one: the earliest
    (least ``archived_at``) keeps its numbers, each later one whose numbers overlap those kept so far moves after
    them."""
    spans = []
    for old in sources:
        lo, hi, first = db.execute(
            "SELECT min(turn), max(turn), min(archived_at) FROM entries WHERE user_id = ? AND agent_id = ? "
            "AND project = ? AND session = ?",
            old,
        ).fetchone()
        spans.append((first, old, lo, hi))
    shifts, top = {}, None
    for _, old, lo, hi in sorted(spans, key=lambda s: (s[0], s[1])):
        shift = top + 1 - lo if top is not None and lo <= top else 0
        shifts[old] = shift
        top = hi + shift if top is None else max(top, hi + shift)
    return shifts


def _move_rewinds(store: Any, db: Any, old: tuple, new: tuple) -> None:
    """The open rewind candidates recorded for conversation ``old`` (user, agent, project, session), now ``new``'s:
    the meta row is keyed by a hash of the conversation's names."""
    before, after = store._rewinds_key(old), store._rewinds_key(new)
    row = db.execute("SELECT value FROM meta WHERE key = ?", (before,)).fetchone()
    if row is None:
        return
    kept = db.execute("SELECT value FROM meta WHERE key = ?", (after,)).fetchone()
    try:
        merged = (json.loads(kept[0]) if kept else []) + json.loads(row[0])
    except (ValueError, TypeError, RecursionError):
        merged = json.loads(kept[0]) if kept else []
    db.execute("DELETE FROM meta WHERE key = ?", (before,))
    db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (after, json.dumps(merged)))


# ---------------------------------------------------------------------------------------------- texts
TEXTS_FORM = "texts_form"  # meta: the redaction form (archive/redact.py ``names_form``) every text was checked under
TEXTS_CURSOR = "texts_cursor"  # meta: "FORM:ID", the last entry checked by a ``rewrite_texts`` run under FORM
TEXTS_BATCH = 256  # ours: entries per transaction of ``rewrite_texts``
_TEXT_COLUMNS = (
    "id, session, user_id, agent_id, project, time, text, summary, tags, hints, memory_type, importance, "
    "tool_count, file_count, meta, category"
)


def rewrite_texts(
    store: Any,
    redact: Callable[[dict[str, Any]], dict[str, Any]],
    form_id: str,
    batch: int = TEXTS_BATCH,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[int, int]:
    """Re-apply redaction to every archived text in place (``lantern redact``): an entry archived by an older
    Lantern, under older rules, or while redaction was off keeps in clear what today's rules redact, in its text,
    summary, tags, hints, meta and facts. ``redact`` maps ``{"text", "summary", "tags", "hints", "meta"`` (JSON
    text), ``"facts"``: ``[(fact id, key, key_text, value, replaces)]}`` to the same shape redacted (the facade:
    archive/redact.py). Names are ``rewrite_names``'s.

    One transaction of ``store`` per ``batch`` entries, in id order, each recording its last id in meta
    ``TEXTS_CURSOR`` with ``form_id``: a run stopped part way (killed, Ctrl-C, a lock it could not get) resumes
    after it; a run under another form starts over. An entry whose redacted form differs is rewritten in place
    (its id, turn, scope and reinforcement state kept; backend ``_write_grown``: the full-text rows written
    again; the vector dropped, so the entry is re-embedded from the redacted text as a text-first one is:
    ``Store.unembedded``, except where every entry must hold one, PostgreSQL, which keeps the stored one), its
    content hash recomputed; one whose new hash another entry holds (the same turn stored
    twice, once in clear) is dropped as that duplicate; its facts rewritten value by value (each chain kept). The
    compaction events' queries and loss reports are redacted in the last transaction, which records ``form_id`` in
    meta ``TEXTS_FORM`` (a later run with the same form does nothing) and owes the erase of the old text's bytes
    (``_owe_erase``). ``progress(done, total)`` after each batch. Returns (entries checked, entries rewritten or
    dropped)."""
    from lantern.model import content_hash
    from lantern.store.base import NewEntry, tags_of
    from lantern.store.facts import delete_facts
    from lantern.store.reinforcement import forget_pending
    from lantern.store.times import from_epoch
    from lantern.text.fact_keys import normalize_value

    if store.get_meta(TEXTS_FORM) == form_id:
        return 0, 0
    total = store.db.execute("SELECT count(*) FROM entries").fetchone()[0]
    checked = rewritten = 0
    while True:
        changed = False
        with store.transaction() as db:
            db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, '')", (TEXTS_CURSOR,))
            mark = db.execute(
                f"SELECT value FROM meta WHERE key = ?{store.dialect.for_update}", (TEXTS_CURSOR,)
            ).fetchone()[0]
            form, _, last = (mark or "").partition(":")
            after = int(last) if form == form_id and last.isdigit() else 0
            rows = db.execute(
                f"SELECT {_TEXT_COLUMNS} FROM entries WHERE id > ? ORDER BY id LIMIT ?", (after, batch)
            ).fetchall()
            now = time.time()
            for row in rows:
                entry_id, session, user, agent, project, at = row[:6]
                facts = db.execute(
                    "SELECT id, key, key_text, value, replaces FROM facts WHERE entry_id = ? ORDER BY id", (entry_id,)
                ).fetchall()
                old = {
                    "text": row[6],
                    "summary": store.entry_value("summary", row[7]),
                    "tags": store.entry_value("tags", row[8]),
                    "hints": row[9],
                    "meta": row[14],
                    "facts": [tuple(f) for f in facts],
                }
                new = redact(old)
                if new == old:
                    continue
                changed = True
                rewritten += 1
                h = content_hash(session, new["text"], user, agent, project)
                held = db.execute(
                    "SELECT id FROM entries WHERE content_hash = ? AND id <> ?",
                    (store.stored_value("content_hash", h), entry_id),
                ).fetchone()
                if held is not None:  # the same turn, already stored in its redacted form: this copy goes
                    delete_facts(db, [entry_id])
                    forget_pending(db, [entry_id])
                    store._forget_rewinds(db, [entry_id])
                    store._drop_rows(db, [entry_id])
                    continue
                entry = NewEntry(
                    session=session,
                    text=new["text"],
                    summary=new["summary"],
                    tags=tags_of(new["tags"]),
                    hints=json.loads(new["hints"]),
                    memory_type=row[10],
                    importance=row[11],
                    content_hash=h,
                    time=None if at is None else from_epoch(at),
                    tool_count=row[12],
                    file_count=row[13],
                    meta=json.loads(new["meta"]),
                    category=row[15],
                    user=user,
                    agent=agent,
                    project=project,
                )
                vector = None  # re-embedded from the redacted text, as a text-first entry is
                if not store.dialect.text_first:  # every entry keeps a vector there (PostgreSQL): the stored one
                    blob = db.execute("SELECT vector FROM embeddings WHERE entry_id = ?", (entry_id,)).fetchone()
                    vector = None if blob is None else store._decode_one(blob[0])
                store._write_grown(db, [(entry, vector, entry_id)], now)
                for before, (fact_id, key, key_text, value, replaces) in zip(old["facts"], new["facts"]):
                    if before[1:] != (key, key_text, value, replaces):
                        db.execute(
                            "UPDATE facts SET key = ?, key_text = ?, value = ?, value_norm = ?, replaces = ? "
                            "WHERE id = ?",
                            (key, key_text, value, normalize_value(value), replaces, fact_id),
                        )
            if rows:
                db.execute("UPDATE meta SET value = ? WHERE key = ?", (f"{form_id}:{rows[-1][0]}", TEXTS_CURSOR))
            else:
                changed = _redact_events(db, redact) or changed
                db.execute("DELETE FROM meta WHERE key = ?", (TEXTS_CURSOR,))
                db.execute("DELETE FROM meta WHERE key = ?", (TEXTS_FORM,))
                db.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (TEXTS_FORM, form_id))
            if changed:
                store._changed(db)
                store._owe_erase(db)
        if changed:
            store._deleted()  # index snapshots on disk hold the old text
        checked += len(rows)
        if progress is not None:
            progress(min(checked, total), total)
        if not rows:
            return checked, rewritten


def _redact_events(db: Any, redact: Callable[[dict[str, Any]], dict[str, Any]]) -> bool:
    """The compaction events' queries and loss reports through ``redact`` (as texts: the query as ``text``, the loss
    report as ``meta``, JSON). Returns whether any changed."""
    changed = False
    for event_id, query, loss in db.execute("SELECT id, query, loss FROM events").fetchall():
        old = {"text": query or "", "summary": "", "tags": "[]", "hints": "[]", "meta": loss or "null", "facts": []}
        new = redact(old)
        if new != old:
            db.execute(
                "UPDATE events SET query = ?, loss = ? WHERE id = ?",
                (new["text"], None if loss is None else new["meta"], event_id),
            )
            changed = True
    return changed
