"""A hook finishes within the host's timeout whoever holds the database (store/sqlite.py ``lock_deadline``,
claude_code.py ``bounded_run``): its lock waits, all together, end ``HOOK_DB_WAIT_S`` after it starts, below the
``timeout`` ``lantern install claude-code`` writes; then it gives up cleanly (exit 0, nothing printed, a log line)
and writes nothing, on the real SQLite store with a real second writer holding the lock."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from lantern import Lantern
from lantern.deadline import lock_deadline
from lantern.integrations.claude_code import HOOK_DB_WAIT_S, TIMEOUT_S

FIXTURE = Path(__file__).parent / "fixtures" / "claude_code_session.jsonl"
SID = "7f3c2a10-5b1e-4c8e-9d2a-1e6f0b7c9a41"


def _held(db: Path) -> sqlite3.Connection:
    """Another writer holding the write lock of ``db`` until closed."""
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    return holder


@settings(max_examples=examples(10), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seconds=st.floats(0.0, 0.6), writes=st.integers(1, 3))
def test_every_lock_wait_inside_a_deadline_ends_with_it_and_writes_nothing(tmp_path, seconds, writes):
    db = tmp_path / "m.db"  # the examples share it: each writes its own turns
    tag = uuid.uuid4().hex
    with Lantern(db) as lt:
        lt.archive([{"role": "user", "content": "warm"}], session="warm")
        before = lt.stats()["entries"]
        holder = _held(db)
        try:
            started = time.monotonic()
            with lock_deadline(seconds):
                for n in range(writes):  # every wait counts against the same deadline
                    with pytest.raises(sqlite3.OperationalError, match="locked"):
                        lt.archive([{"role": "user", "content": f"turn {n} {tag}"}], session=tag, text_first=True)
            assert time.monotonic() - started < seconds + 1.0
        finally:
            holder.rollback()
            holder.close()
        assert lt.stats()["entries"] == before  # nothing half-written
        lt.archive(
            [{"role": "user", "content": f"after {tag}"}], session=tag, text_first=True
        )  # outside: waits as usual
        assert lt.stats()["entries"] == before + 1


def test_the_hook_deadline_is_below_the_installed_timeout():
    assert 0 < HOOK_DB_WAIT_S < TIMEOUT_S - 5


def test_a_cold_session_start_compact_gives_up_before_the_host_timeout_while_another_writer_holds_the_database(
    tmp_path,
):
    db = tmp_path / "m.db"
    with Lantern(db) as lt:
        lt.archive([{"role": "user", "content": "warm"}], session="another-project")
    transcript = tmp_path / "session.jsonl"
    transcript.write_bytes(FIXTURE.read_bytes())
    payload = {
        "session_id": SID,
        "transcript_path": str(transcript),
        "hook_event_name": "SessionStart",
        "source": "compact",
        "cwd": "/home/dev/billing",
    }
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "LANTERN_DAEMON": "off"}
    holder = _held(db)
    try:
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "lantern", "--db", str(db), "hook", "claude-code"],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            env=env,
            timeout=TIMEOUT_S + 30,
        )
        took = time.monotonic() - started
    finally:
        holder.rollback()
        holder.close()
    assert done.returncode == 0 and done.stdout == "", (done.stdout, done.stderr[-2000:])
    assert took < TIMEOUT_S, took
    log = (home / ".lantern" / "logs" / "claude-code.log").read_text()
    assert log.count("\n") == 1 and "OperationalError" in log  # one line
    with Lantern(db) as lt:
        assert lt.stats()["entries"] == 1  # the session was not half-archived
