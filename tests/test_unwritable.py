"""store/protocol.py ``unless_unwritable``: the one rule of a write that may be skipped (reinforcement, a compaction
event, a fill before a recovery, rewind candidates). An error the backend says means "cannot be written now" is
handed to ``skipped`` and the caller goes on; any other error propagates, whatever backend raised it."""

from __future__ import annotations

import sqlite3

import pytest

from lantern.store.protocol import unless_unwritable
from lantern.store.sqlite import Store

# (error, skipped?) for the SQLite store: its words when the error carries no code (Python 3.10), a bug propagates
SQLITE_CASES = [
    (sqlite3.OperationalError("database is locked"), True),
    (sqlite3.OperationalError("attempt to write a readonly database"), True),
    (sqlite3.OperationalError("database or disk is full"), True),
    (sqlite3.OperationalError("disk I/O error"), True),
    (sqlite3.OperationalError("no such table: entries"), False),
    (sqlite3.IntegrityError("UNIQUE constraint failed: entries.content_hash"), False),
    (ValueError("budget must be a finite number"), False),
]


def _run(store, error):
    seen = []
    after = []
    try:
        with unless_unwritable(store, seen.append):
            raise error
        after.append("went on")
    except BaseException as e:  # noqa: BLE001 - what propagated is the result
        return seen, after, e
    return seen, after, None


@pytest.mark.parametrize(("error", "skipped"), SQLITE_CASES, ids=[str(e) for e, _ in SQLITE_CASES])
def test_sqlite_skips_only_what_cannot_be_written_now(tmp_path, error, skipped):
    store = Store(tmp_path / "a.db")
    try:
        seen, after, raised = _run(store, error)
    finally:
        store.close()
    if skipped:
        assert (seen, after, raised) == ([error], ["went on"], None)
    else:
        assert (seen, after, raised) == ([], [], error)


def test_postgres_names_its_own_errors():
    psycopg = pytest.importorskip("psycopg")
    from lantern.store.postgres.store import PostgresStore

    locked = psycopg.errors.LockNotAvailable("canceling statement due to lock timeout")
    assert _run(PostgresStore, locked)[:2] == ([locked], ["went on"])
    bug = psycopg.errors.UndefinedTable('relation "entries" does not exist')
    assert _run(PostgresStore, bug) == ([], [], bug)  # a bug, not a write the server cannot take now: propagates


def test_rewind_candidates_the_store_cannot_take_now_stay_in_memory(tmp_path, monkeypatch, caplog):
    """compaction.py ``_save_rewinds`` while another connection holds the write lock past the wait: one warning, no
    error, the candidates kept in memory and not marked saved; the next observation writes them."""
    from lantern import Lantern, reinforce
    from lantern.compaction import Tracker

    monkeypatch.setattr(reinforce, "WRITE_WAIT_S", 0.05)
    db = tmp_path / "a.db"
    msgs = [{"role": "user", "content": "Start postgres for billing."}, {"role": "assistant", "content": "On 5433."}]
    for i in range(4):
        msgs += [
            {"role": "user", "content": f"Refactor module number {i} of the invoice renderer."},
            {"role": "assistant", "content": f"Refactored renderer module {i}; all {10 + i} tests pass."},
        ]
    edited = [*msgs[:3], {"role": "user", "content": "Refactor module number 0 differently: split it in two."}]
    with Lantern(db) as lt:
        lt.archive(msgs, session="s", text_first=True)
        tracker, key = Tracker(lt), (lt.scope.user, "", "", "s")
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            tracker.observe("s", edited)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        state = tracker.seen[tracker.key("s", lt.scope)]
        assert "rewind candidates not recorded" in caplog.text and "locked" in caplog.text
        assert state.rewinds and state.saved == [] and lt.store.open_rewinds(key) == []
        tracker.observe("s", edited)
        assert state.saved == state.rewinds and lt.store.open_rewinds(key)
