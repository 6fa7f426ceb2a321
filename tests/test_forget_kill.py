"""A forget killed right after its delete committed (issue 38, item 4): a real ``SIGKILL`` of a real process at
that point, then the raw bytes. Before, the forgotten words stayed in the full-text index (SQLite: FTS5 segments;
PostgreSQL: the heap and GIN pages) and neither the next open nor the same forget again erased them, only
``vacuum``. Now the delete's own transaction records the erase it owes (``erase_rewrite`` / ``erase_pending`` in
meta), and the next open, close or forget does it. Secrets are generated: Latin words, digits, CJK runs (indexed
as character bigrams)."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lantern import Lantern

KILLED_FORGET = r"""
import os, signal, sys
from lantern import Lantern
from lantern.store.sqlite import Store
def die(self, *args, **kwargs):  # the delete has committed; the erase would start here
    os.kill(os.getpid(), signal.SIGKILL)
Store.erase_free_space = die
try:
    from lantern.store.postgres.store import PostgresStore
    PostgresStore.erase_free_space = die
except ImportError:
    pass
Lantern(sys.argv[1]).forget(session="secret")
"""
KILLED_OPEN = r"""
import os, signal, sys
from lantern import Lantern
Lantern(sys.argv[1]).stats()
os.kill(os.getpid(), signal.SIGKILL)  # no close: only the open may have finished the erase
"""
CJK = "甲乙丙丁戊己庚辛壬癸子丑寅卯辰巳午未申酉戌亥"


def _secret(rnd: random.Random) -> tuple[str, list[bytes]]:
    """A secret phrase and the byte forms to look for (each word; for CJK, each bigram as FTS5 indexes it)."""
    word = "".join(rnd.choice("bcdfghjklmnpqrstvwxz") for _ in range(10)) + str(rnd.randint(1000, 9999))
    han = "".join(rnd.choice(CJK) for _ in range(4))
    forms = [word.encode(), word.lower().encode()] + [han[i : i + 2].encode() for i in range(3)]
    return f"The vault phrase is {word} {han}, keep it.", forms


def _run(script: str, location: str) -> int:
    proc = subprocess.run([sys.executable, "-c", script, location], capture_output=True, text=True, timeout=300)
    return proc.returncode


def _sqlite_copies(path: Path, forms: list[bytes]) -> int:
    data = b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())
    return sum(data.count(f) for f in forms)


def _archive(location, phrase: str) -> None:
    with Lantern(location) as lt:
        lt.archive([{"role": "user", "content": phrase}, {"role": "assistant", "content": "Noted."}], session="secret")
        lt.archive([{"role": "user", "content": "The billing db listens on 5433."}], session="kept")


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("finisher", ["open", "forget again", "close"])
def test_a_killed_forget_is_erased_by_the_next_open_forget_or_close(tmp_path, finisher, seed):
    path = tmp_path / "k.db"
    phrase, forms = _secret(random.Random(seed))
    _archive(path, phrase)
    assert _run(KILLED_FORGET, str(path)) == -signal.SIGKILL
    import sqlite3

    with sqlite3.connect(path) as c:
        assert c.execute("SELECT count(*) FROM entries WHERE session = 'secret'").fetchone()[0] == 0  # committed
    assert _sqlite_copies(path, forms) > 0  # killed before its erase: the words are still in the file
    if finisher == "open":
        assert _run(KILLED_OPEN, str(path)) == -signal.SIGKILL
    elif finisher == "forget again":
        proc = subprocess.run(
            [sys.executable, "-m", "lantern.cli", "--db", str(path), "forget", "--yes", "--session", "secret"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
    else:  # a handle opened while a reader held the file (the open could not finish it), then closed
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM entries").fetchone()
        lt = Lantern(path)
        reader.execute("COMMIT")
        reader.close()
        lt.close()
    assert _sqlite_copies(path, forms) == 0
    with Lantern(path) as lt:
        assert lt.store.get_meta("erase_rewrite") is None and lt.store.get_meta("erase_pending") is None
        assert lt.search("billing db", k=5)  # the rest is intact


def test_a_killed_forget_on_postgresql_is_vacuumed_by_the_next_open(pg_url, pg_server):
    """The same gap on PostgreSQL: the deleted rows' bytes (text, tsvector) stay in the table and index files
    until ``VACUUM FULL``. The delete records ``erase_pending``; the next open rewrites the tables."""
    import psycopg

    url = pg_url()
    phrase, forms = _secret(random.Random(3))
    _archive(url, phrase)
    assert _run(KILLED_FORGET, url) == -signal.SIGKILL

    def files_holding() -> int:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
            oid = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()[0]
        folder = Path(pg_server.pgdata) / "base" / str(oid)
        return sum(p.read_bytes().count(f) for p in folder.iterdir() if p.is_file() for f in forms)

    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM entries WHERE session = 'secret'").fetchone()[0] == 0
    assert files_holding() > 0
    assert _run(KILLED_OPEN, url) == -signal.SIGKILL
    assert files_holding() == 0
    with Lantern(url) as lt:
        assert lt.store.get_meta("erase_pending") is None
