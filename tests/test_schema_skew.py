"""Two processes of different Lantern versions on one SQLite file: when one migrates the schema (``PRAGMA
user_version``) while the other runs, every write of the other is refused with StoreVersionError before anything
is written (store/sqlite.py ``Store.transaction``), and a file newer than the code is refused on open. The second
handle stands for the other process: its own connection to the same file, migrating as migrations.py does."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from clirun import lantern as cli
from lantern import Lantern, LanternError, StoreVersionError
from lantern.store.migrations import MIGRATIONS

TURN = [{"role": "user", "content": "The billing database listens on port 5433; which port should the replica use?"}]
GROWN = [*TURN, {"role": "assistant", "content": "Give the replica port 5434."}]  # the same turn, grown


def _migrate_as_newer_code(path, version: int) -> None:
    """What a newer Lantern's migration does from its own connection: a schema change and ``user_version`` in one
    write transaction."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    db.execute("ALTER TABLE entries ADD COLUMN from_the_future TEXT")
    db.execute(f"PRAGMA user_version = {version}")
    db.execute("COMMIT")
    db.close()


def _snapshot(path) -> tuple:
    db = sqlite3.connect(path)
    try:
        return (
            db.execute("SELECT id, text, archived_at FROM entries ORDER BY id").fetchall(),
            db.execute("SELECT entry_id, vector FROM embeddings ORDER BY entry_id").fetchall(),
            db.execute("SELECT key, value FROM meta ORDER BY key").fetchall(),
            db.execute("SELECT count(*) FROM facts").fetchone(),
        )
    finally:
        db.close()


# every kind of write a long-running process makes: a new turn, a grown turn, a forget, feedback, a recovery's
# reinforcement, an import
WRITES = {
    "archive a new turn": lambda lt: lt.archive(
        [{"role": "user", "content": "The cache runs on redis port 6380."}], session="other"
    ),
    "archive a grown turn": lambda lt: lt.archive(GROWN, session="s"),
    "forget": lambda lt: lt.forget(session="s"),
    "feedback": lambda lt: lt.feedback([1], True),
    "recover (reinforcement)": lambda lt: lt.recover("which port does the billing database use?"),
}


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(write=st.sampled_from(sorted(WRITES)), ahead=st.integers(1, 50))
def test_a_write_after_another_process_migrated_is_refused_and_writes_nothing(tmp_path_factory, write, ahead):
    path = tmp_path_factory.mktemp("skew") / "m.db"
    with Lantern(path) as old:
        old.archive(TURN, session="s")
        old.recover("which port does the billing database use?")  # the index loaded, as in a running process
        newer = len(MIGRATIONS) + ahead
        _migrate_as_newer_code(path, newer)
        before = _snapshot(path)
        with pytest.raises(StoreVersionError) as info:
            WRITES[write](old)
        e = info.value
        assert (e.expected, e.found) == (len(MIGRATIONS), newer)
        assert f"version {newer}" in str(e) and f"version {len(MIGRATIONS)}" in str(e) and "Restart" in str(e)
        assert _snapshot(path) == before  # nothing half-written
        assert not old.store.db.in_transaction  # rolled back, the connection usable
    # a process started after the migration, with this (older) code, is refused at open
    with pytest.raises(StoreVersionError, match="newer than this Lantern"):
        Lantern(path)


def test_a_file_replaced_by_an_older_schema_is_refused_too(tmp_path):
    path = tmp_path / "m.db"
    with Lantern(path) as lt:
        lt.archive(TURN, session="s")
        db = sqlite3.connect(path, isolation_level=None)
        db.execute(f"PRAGMA user_version = {len(MIGRATIONS) - 1}")
        db.close()
        with pytest.raises(StoreVersionError, match="older than the version") as info:
            lt.archive(GROWN, session="s")
        assert (info.value.expected, info.value.found) == (len(MIGRATIONS), len(MIGRATIONS) - 1)


def test_two_handles_of_the_same_version_write_as_before(tmp_path):
    path = tmp_path / "m.db"
    with Lantern(path) as a, Lantern(path) as b:
        a.archive(TURN, session="s")
        assert b.archive(GROWN, session="s").added == 1  # grows a's turn in place
        assert a.stats()["entries"] == 1 and a.forget(session="s") == 1
    assert issubclass(StoreVersionError, LanternError)


def test_the_cli_prints_one_line_for_a_newer_file(tmp_path):
    path = tmp_path / "m.db"
    with Lantern(path) as lt:
        lt.archive(TURN, session="s")
    _migrate_as_newer_code(path, len(MIGRATIONS) + 1)
    for args in (("stats",), ("recover", "billing port"), ("forget", "--yes", "--session", "s"), ("ingest", str(path))):
        result = cli(*args, db=path)
        err = result.stderr.decode()
        assert result.returncode == 1, (args, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert err.startswith("error:") and "newer than this Lantern" in err and "upgrade lantern-memory" in err


def test_a_read_after_a_newer_migration_is_refused_too(tmp_path):
    """The in-process index refreshes in one read transaction (``Store.snapshot``): after another version migrated
    the file, a recovery or search stops with StoreVersionError instead of reading rows it may misread."""
    path = tmp_path / "r.db"
    with Lantern(path, embedder="fake") as old:
        old.archive(TURN, session="s")
        assert old.search("billing database port")
        _migrate_as_newer_code(path, len(MIGRATIONS) + 1)
        for read in (lambda: old.search("billing database port"), lambda: old.recover("which port?")):
            with pytest.raises(StoreVersionError):
                read()


def _pg_snapshot(url: str) -> tuple:
    with psycopg.connect(url) as conn:
        return (
            conn.execute("SELECT id, text, archived_at FROM entries ORDER BY id").fetchall(),
            conn.execute("SELECT entry_id, vector::text FROM embeddings ORDER BY entry_id").fetchall(),
            conn.execute("SELECT key, value FROM meta ORDER BY key").fetchall(),
            conn.execute("SELECT count(*) FROM facts").fetchone(),
        )


@pytest.mark.parametrize("write", sorted(WRITES))
def test_on_postgresql_a_write_or_read_after_a_newer_migration_is_refused(pg_url, write):
    """The PostgreSQL store reads ``schema_version`` in the round trip that begins each transaction and snapshot
    (store/postgres/store.py ``_begin``): the same refusals as on SQLite, nothing written."""
    from lantern.store.postgres.schema import MIGRATIONS as PG_MIGRATIONS

    url = pg_url()
    with Lantern(url, embedder="fake") as old:
        old.archive(TURN, session="s")
        old.recover("which port does the billing database use?")
        newer = len(PG_MIGRATIONS) + 3
        with psycopg.connect(url) as conn:  # a newer Lantern's migration: a schema change and the version, one commit
            conn.execute("ALTER TABLE entries ADD COLUMN from_the_future text")
            conn.execute("UPDATE schema_version SET version = %s", (newer,))
            conn.execute("UPDATE changes SET version = version + 1")
        before = _pg_snapshot(url)
        with pytest.raises(StoreVersionError) as info:
            WRITES[write](old)
        assert (info.value.expected, info.value.found) == (len(PG_MIGRATIONS), newer)
        assert "***" in info.value.path or "@" not in info.value.path  # the URL shown without its password
        assert _pg_snapshot(url) == before
        with pytest.raises(StoreVersionError):
            old.search("billing database port")
    with pytest.raises(StoreVersionError, match="newer than this Lantern"):
        Lantern(url)


@pytest.mark.parametrize("version", [-1, -(2**31)])
def test_a_negative_schema_version_is_refused_with_one_line(tmp_path, version):
    path = tmp_path / "n.db"
    with Lantern(path) as lt:
        lt.archive(TURN, session="s")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(f"PRAGMA user_version = {version}")
    db.close()
    before = path.read_bytes()
    with pytest.raises(LanternError, match="not a Lantern database"):
        Lantern(path)
    result = cli("stats", db=path)
    err = result.stderr.decode()
    assert result.returncode == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert path.read_bytes() == before
