"""`lantern copy SRC DST` only reads SRC: a source that is not a Lantern store (missing, a folder, an empty or
foreign file, an empty SQLite database, an empty or foreign PostgreSQL database) is refused with one line naming
SRC, nothing written to it nor to DST; a source on read-only media (a read-only file in a read-only folder) is
copied, and no file appears beside it. Errors say which end failed. Real stores, a real server."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import psycopg
import pytest

from clirun import lantern as cli
from lantern import Lantern, LanternError
from lantern.api import copy_store
from lantern.config import redact_url
from lantern.store.sqlite import Store

TURNS = [
    {"role": "user", "content": "Which port did we give the staging Redis?"},
    {"role": "assistant", "content": "Staging Redis listens on port 6380, set in deploy/staging/redis.conf."},
]


def _state(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder``: (size, mtime) by relative path."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _bad_files(folder: Path) -> dict[str, str]:
    """Paths under ``folder`` that are no Lantern store -> the words their error must hold."""
    (folder / "adir").mkdir()
    (folder / "empty.db").write_bytes(b"")
    (folder / "notes.txt").write_text("not a database, but a long enough text file " * 100)
    blank = sqlite3.connect(folder / "blank.db")  # a SQLite file with its header and no table
    blank.executescript("CREATE TABLE t(x); DROP TABLE t;")
    blank.close()
    other = sqlite3.connect(folder / "other.db")
    other.execute("CREATE TABLE notes(x)")
    other.commit()
    other.close()
    return {
        "missing.db": "is not a Lantern store: no such file",
        "adir": "is not a Lantern store: it is a directory",
        "empty.db": "is not a Lantern store: it is an empty file (0 bytes)",
        "blank.db": "is not a Lantern store",
        "notes.txt": "not a",
        "other.db": "not a Lantern one",
    }


def test_a_source_file_that_is_no_lantern_store_is_refused_naming_src_and_never_written(tmp_path):
    src_dir, out = tmp_path / "src", tmp_path / "out"
    src_dir.mkdir()
    out.mkdir()
    bad = _bad_files(src_dir)
    before = _state(src_dir)
    for name, words in bad.items():
        proc = cli("copy", str(src_dir / name), str(out / "b.db"))
        err = proc.stderr.decode()
        assert proc.returncode == 1 and err.count("\n") == 1 and "Traceback" not in err, (name, err)
        assert err.startswith(f"error: SRC {src_dir / name}") and words in err, (name, err)
        with pytest.raises(LanternError, match="^SRC "):
            copy_store(src_dir / name, out / "b.db")
        assert _state(src_dir) == before, name  # nothing created or changed beside it
        assert not (src_dir / "missing.db").exists()
        assert list(out.iterdir()) == [], name  # DST not created


def test_an_older_schema_source_is_refused_not_migrated(tmp_path):
    src = tmp_path / "a.db"
    with Lantern(src) as lt:
        lt.archive(TURNS, session="chat")
    db = sqlite3.connect(src)
    db.execute("PRAGMA user_version = 3")
    db.close()
    before = _state(tmp_path)
    with pytest.raises(LanternError, match="^SRC .*older than this Lantern"):
        copy_store(src, tmp_path / "b.db")
    assert _state(tmp_path) == before


def test_a_source_on_read_only_media_is_copied_and_nothing_appears_beside_it(tmp_path, unprivileged):
    """chmod 444 file in a chmod 555 folder, in a separate process where file modes hold (root: a user namespace):
    copied whole, the folder as it was. Then a writable folder: still no -wal / -shm left beside it."""
    import subprocess
    import sys

    folder = tmp_path / "media"
    folder.mkdir()
    src = folder / "a.db"
    with Lantern(src) as lt:
        lt.archive(TURNS, session="chat")
        lt.archive([{"role": "user", "content": "The staging database port is 5433."}], session="ops")
    assert sorted(p.name for p in folder.iterdir()) == ["a.db"]
    src.chmod(0o444)
    folder.chmod(0o555)
    before = _state(folder)
    try:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
        proc = subprocess.run(
            [*unprivileged, sys.executable, "-m", "lantern.cli", "copy", str(src), str(tmp_path / "b.db")],
            capture_output=True,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr.decode()
        assert b"2 entries verified, 2 copied" in proc.stdout
        assert _state(folder) == before
    finally:
        folder.chmod(0o755)
        src.chmod(0o644)
    assert copy_store(src, tmp_path / "c.db")["added"] == 2
    assert _state(folder) == before


def test_a_source_another_handle_has_open_is_read_through_its_log_and_a_write_meanwhile_is_seen(tmp_path):
    """A source open in another handle (its -wal holds committed turns) is read with them; an immutable read of a
    closed source whose file changes meanwhile is reported as changed (``Store.unchanged``)."""
    src = tmp_path / "a.db"
    with Lantern(src) as writer:
        writer.archive(TURNS, session="chat")
        assert (tmp_path / "a.db-wal").exists()
        assert copy_store(src, tmp_path / "b.db")["added"] == 1
    reader = Store(src, readonly=True)
    try:
        assert reader.unchanged()
        with Lantern(src) as writer:
            writer.archive([{"role": "user", "content": "The staging database port is 5433."}], session="ops")
        assert not reader.unchanged()
    finally:
        reader.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.db", "b.db"]


def test_an_empty_or_foreign_server_database_as_source_is_refused_and_left_as_it_was(pg_url, tmp_path):
    def objects(url: str) -> tuple:
        with psycopg.connect(url) as conn:
            return (
                conn.execute("SELECT extname FROM pg_extension ORDER BY 1").fetchall(),
                conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1"
                ).fetchall(),
            )

    empty, foreign = pg_url(), pg_url()
    with psycopg.connect(foreign, autocommit=True) as conn:
        conn.execute("CREATE TABLE entries(x int)")
    for url, words in (
        (empty, "is not a Lantern store: the database has no Lantern tables"),
        (foreign, "not a Lantern"),
    ):
        before = objects(url)
        proc = cli("copy", url, str(tmp_path / "b.db"))
        err = proc.stderr.decode()
        assert proc.returncode == 1 and err.count("\n") == 1, err
        assert err.startswith(f"error: SRC {redact_url(url)}") and words in err, err
        assert objects(url) == before
        assert not (tmp_path / "b.db").exists()


def test_a_server_source_is_read_in_read_only_transactions(pg_url, tmp_path):
    url = pg_url()
    with Lantern(url) as lt:
        lt.archive(TURNS, session="chat")
    with psycopg.connect(url) as conn:
        changes = conn.execute("SELECT version FROM changes").fetchone()
    assert copy_store(url, tmp_path / "b.db")["added"] == 1
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT version FROM changes").fetchone() == changes  # no write transaction ran
    from lantern.store.postgres import PostgresStore

    store = PostgresStore(url, readonly=True)
    try:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            store.db.execute("DELETE FROM entries")
    finally:
        store.close()
