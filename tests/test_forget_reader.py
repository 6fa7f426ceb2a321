"""``forget`` with another process reading the database (issue 20, item 3): the raw bytes of the .db, -wal and -shm
files, with a reader holding a read transaction in another process.

A reader's snapshot pins the pages from before the forget: no writer may overwrite them while it reads. So
``forget`` waits for it (``--wait``); a reader that ends in time leaves no byte of the forgotten text; one that
does not makes the command say exactly what remains, where and until when (exit 3), and the next command on the
database after the reader ends finishes the erase. The Python API says the same in its result, REST in its reply.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lantern import Lantern

LANTERN = [sys.executable, "-m", "lantern.cli"]
MARK = "WombatZanzibar7731"  # in a message, a tool call's arguments and a tool result of the forgotten session
FORMS = (MARK.encode(), MARK.lower().encode(), b"zanzibar7731")
READER = r"""
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN")
db.execute("SELECT count(*), max(length(text)) FROM entries").fetchone()
print("reading", flush=True)
sys.stdin.readline()  # hold the read transaction until told
db.execute("COMMIT")
print("done", flush=True)
sys.stdin.readline()  # the connection stays open: SQLite's last-close checkpoint must not do our work
"""


def copies(path: Path) -> int:
    """Occurrences of the forgotten text in the raw bytes of the database file, its WAL and its shared memory."""
    data = b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists())
    return sum(data.count(f) for f in FORMS)


def make_db(path: Path) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "vault", "arguments": json.dumps({"code": MARK})}}
    with Lantern(path) as lt:
        lt.archive(
            [
                {"role": "user", "content": f"The vault codename is {MARK}; keep it."},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": f"stored {MARK}"},
                {"role": "assistant", "content": f"Stored {MARK}."},
            ],
            session="secret",
        )
        lt.archive(
            [{"role": "user", "content": "The billing db listens on 5433."}, {"role": "assistant", "content": "Ok."}],
            session="kept",
        )
    assert copies(path) > 0


class Reader:
    """A process holding a read transaction on ``path`` until ``release``."""

    def __init__(self, path: Path):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", READER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout.readline().strip() == "reading"

    def release(self) -> None:
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "done"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


@pytest.fixture()
def db(tmp_path):
    path = tmp_path / "f.db"
    make_db(path)
    return path


def run(db: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "300"}
    return subprocess.run([*LANTERN, "--db", str(db), *args], capture_output=True, text=True, env=env, timeout=120)


def test_cli_forget_with_a_reader_says_what_remains_then_the_next_command_erases_it(db):
    reader = Reader(db)
    try:
        start = time.monotonic()
        proc = run(db, "forget", "--yes", "--session", "secret", "--wait", "1")
        assert time.monotonic() - start < 60
        assert proc.returncode == 3, proc.stderr
        assert proc.stdout.strip() == "1 entry forgotten from the index"
        remaining = copies(db)
        assert remaining > 0  # true while the reader reads: said, not hidden
        err = " ".join(proc.stderr.split())
        assert f"process {reader.proc.pid} (python" in err and "waiting up to 1 s" in err, err
        size = sum(os.path.getsize(p) for p in (db, f"{db}-wal") if os.path.exists(p))
        assert f"({size:,} bytes, pages from before the forget)" in err, err
        assert "next lantern command on this database after that finishes the erase" in err
        reader.release()  # the read ends; the reader keeps its connection open
        assert run(db, "stats").returncode == 0
        assert copies(db) == 0
        with Lantern(db) as lt:
            assert lt.stats()["entries"] == 1 and lt.store.get_meta("erase_pending") is None
    finally:
        reader.close()


def test_a_reader_that_ends_within_the_wait_leaves_no_byte(db):
    reader = Reader(db)
    try:
        with Lantern(db) as lt:
            seen = []

            def released(erasure):
                seen.append(erasure)
                reader.release()  # the reader finishes while forget waits

            n = lt.forget(session="secret", wait=30, on_wait=released)
            assert n == 1 and n.erased and n.remaining_bytes == 0
            assert len(seen) == 1 and not seen[0].complete and reader.proc.pid in [p for p, _ in seen[0].holders]
            assert copies(db) == 0
    finally:
        reader.close()


def test_python_api_and_rest_report_an_unfinished_erase(db, tmp_path, monkeypatch):
    # REST's forget waits the default (the busy timeout, 10 s) for the reader, which holds on here: what is tested
    # is the reply after the wait, not its length
    monkeypatch.setattr("lantern.store.sqlite.BUSY_TIMEOUT_MS", 1000)
    reader = Reader(db)
    try:
        with Lantern(db) as lt:
            n = lt.forget(session="secret", wait=0)
            assert n == 1 and not n.erased and n.remaining_bytes > 0
            assert reader.proc.pid in [pid for pid, _ in n.holders]
            assert lt.forget(session="secret", wait=0) == 0  # nothing more to delete; still not erased
        assert copies(db) > 0
        pytest.importorskip("fastapi")
        from fastapi.testclient import TestClient

        from lantern.integrations.proxy import build_app

        other = tmp_path / "rest.db"
        make_db(other)
        second = Reader(other)
        try:
            with TestClient(build_app(other), raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
                r = client.post("/v1/memory/forget", json={"session": "secret", "confirm": True}).json()
                assert r["forgotten"] == 1 and r["erased"] is False and r["remaining_bytes"] > 0
                second.release()
                assert client.post("/v1/memory/forget", json={"session": "secret", "confirm": True}).json() == {
                    "forgotten": 0
                }
            assert copies(other) == 0
        finally:
            second.close()
        reader.release()
        with Lantern(db):
            pass
        assert copies(db) == 0
    finally:
        reader.close()


def test_without_a_reader_forget_leaves_no_byte_and_says_forgotten(db):
    proc = run(db, "forget", "--yes", "--session", "secret")
    assert proc.returncode == 0 and proc.stdout.strip() == "1 entry forgotten" and not proc.stderr
    assert copies(db) == 0
