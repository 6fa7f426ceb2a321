"""A write that fills the database (SQLITE_FULL) fails with its own error, stores nothing of the transaction it
was in, leaves the handle usable, and a run again once there is room completes without duplicates. SQLite's
``PRAGMA max_page_count`` makes the real SQLITE_FULL on demand, at every point of a write the generator picks: the
real store, the real model, no mocks. A real full disk (a tmpfs) is the command-line test at the end."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from lantern import Lantern
from lantern.archive.pipeline import INGEST_BATCH_TURNS
from lantern.portability import BATCH_LINES

TURNS = INGEST_BATCH_TURNS + 40  # two transactions of ingest and of import


def _messages(n: int, tag: str) -> list[dict]:
    out = []
    for i in range(n):
        out.append({"role": "user", "content": f"{tag} turn {i}: service {i} listens on port {5000 + i}, key k{i}"})
        out.append({"role": "assistant", "content": f"noted: the port of service {i} is {5000 + i}"})
    return out


def _pages(lt: Lantern) -> int:
    return lt.store.db.execute("PRAGMA page_count").fetchone()[0]


def _limit(lt: Lantern, pages: int) -> None:
    """At most ``pages`` pages in the file, for this connection: SQLITE_FULL past them (``0`` lifts it)."""
    lt.store.db.execute(f"PRAGMA max_page_count = {pages if pages else 1 << 30}")


def _state(lt: Lantern) -> dict:
    """What the store holds, and that it is whole: entries, their vectors and facts, the file's integrity."""
    db = lt.store.db
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    assert not db.in_transaction
    entries = db.execute("SELECT count(*) FROM entries").fetchone()[0]
    hashes = db.execute("SELECT count(DISTINCT content_hash) FROM entries").fetchone()[0]
    assert hashes == entries, "a turn stored twice"
    return {
        "entries": entries,
        "vectors": db.execute("SELECT count(*) FROM embeddings").fetchone()[0],
        "facts": db.execute("SELECT count(*) FROM facts").fetchone()[0],
    }


def _source(kind: str, tmp: Path) -> tuple:
    """What the operation ``kind`` writes: its argument, and how to run it on a handle."""
    if kind == "archive":
        msgs = _messages(60, "archived")
        return msgs, lambda lt: lt.archive(msgs, session="s")
    transcript = tmp / "t.jsonl"
    transcript.write_text("".join(json.dumps(m) + "\n" for m in _messages(TURNS, kind)))
    if kind == "ingest":
        return transcript, lambda lt: lt.ingest(transcript, session="s")
    dump = tmp / "dump.jsonl"
    with Lantern(tmp / "source.db", embedder="fake") as src:
        src.ingest(transcript, session="s")
        src.export(dump)
    assert sum(1 for _ in dump.open()) > BATCH_LINES
    return dump, lambda lt: lt.import_(dump)


@pytest.mark.parametrize("kind", ["archive", "ingest", "import"])
def test_a_write_that_fills_the_store_stores_nothing_half_and_a_run_again_completes_it(kind, tmp_path):
    """For limits spread over the pages the whole write needs (the generator): SQLITE_FULL is the error raised (not
    "cannot rollback - no transaction is active"), the store holds whole transactions only, the handle works on,
    and the same write run again with room finishes with the reference's content, no turn twice."""
    _, run = _source(kind, tmp_path)
    seed = [{"role": "user", "content": "the seed turn: staging redis is on 6380"}]
    with Lantern(tmp_path / "ref.db", embedder="fake") as ref:
        ref.archive(seed, session="seed")
        start = _pages(ref)
        run(ref)
        expected, needed = _state(ref), _pages(ref) - start
    assert needed > 8
    limits = sorted({start + max(1, needed * k // 9) for k in range(9)})
    for i, pages in enumerate(limits):
        with Lantern(tmp_path / f"full{i}.db", embedder="fake") as lt:
            lt.archive(seed, session="seed")
            before = _state(lt)
            _limit(lt, max(pages, _pages(lt) + 1))
            with pytest.raises(sqlite3.OperationalError) as info:
                run(lt)
            assert "full" in str(info.value), info.value
            after = _state(lt)
            assert after["entries"] == after["vectors"]
            if kind == "archive":  # one transaction: all or nothing
                assert after == before
            else:  # whole batches: none, or the first
                assert after["entries"] - before["entries"] in (0, INGEST_BATCH_TURNS), after
            assert lt.search("staging redis port", k=1)  # the handle reads on
            _limit(lt, 0)
            again = run(lt)
            assert _state(lt) == expected
            stored = after["entries"] - before["entries"]
            if kind == "import":
                assert (again.added, again.duplicates) == (expected["entries"] - 1 - stored, stored)
            elif kind == "ingest":
                assert (again.added, again.duplicates) == (TURNS - stored, stored)


def test_a_full_disk_under_the_command_line_is_one_line_and_the_rerun_completes(tmp_path):
    """``lantern ingest`` on a real full disk (a tmpfs in a user and mount namespace, grown afterwards): one error
    line naming the full disk, exit 1; the same command after the disk is grown adds the rest, no turn twice."""
    import shutil

    from test_cli import LANTERN

    if (
        shutil.which("unshare") is None
        or subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True).returncode
    ):
        pytest.skip("no user and mount namespaces: cannot mount a small tmpfs to fill")
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("".join(json.dumps(m) + "\n" for m in _messages(TURNS * 3, "disk")))
    mnt = tmp_path / "disk"
    mnt.mkdir()
    lantern = " ".join(f"'{a}'" for a in LANTERN)
    script = f"""
        mount -t tmpfs -o size=600k tmpfs '{mnt}' || exit 77
        {lantern} --db '{mnt}/s.db' ingest '{transcript}' --json; echo "exit $?"
        mount -o remount,size=64m '{mnt}' || exit 78
        {lantern} --db '{mnt}/s.db' ingest '{transcript}' --json; echo "exit $?"
        {lantern} --db '{mnt}/s.db' stats --json; echo "exit $?"
    """
    proc = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
        capture_output=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "200"},
    )
    if proc.returncode in (77, 78):
        pytest.skip(f"could not mount or grow a tmpfs: {proc.stderr.decode()}")
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert "Traceback" not in err and "cannot rollback" not in err, err
    assert [line for line in out.splitlines() if line.startswith("exit")] == ["exit 1", "exit 0", "exit 0"], out
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "is full" in errors[0] and "rolled back whole" in errors[0], err
    assert f"free some space on the disk holding {mnt}" in errors[0], err
    docs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    rerun, stats = docs[-2], docs[-1]
    assert stats["entries"] == TURNS * 3 and rerun["added"] + rerun["duplicates"] == TURNS * 3, (rerun, stats)


def test_a_write_the_server_refuses_at_commit_stores_nothing_and_a_run_again_completes_it(pg_url, tmp_path):
    """PostgreSQL: the server refuses the COMMIT (a deferred constraint trigger raising, as a full disk at commit
    would): the server's error is the one raised, through the Python API and as one line of the command, nothing
    of the transaction is stored, the handle works on, and the write run again once the server takes it completes
    it, no turn twice."""
    psycopg = pytest.importorskip("psycopg")
    from clirun import lantern as cli

    url = pg_url()
    msgs = _messages(30, "server")
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("".join(json.dumps(m) + "\n" for m in msgs))
    with Lantern(url) as lt:
        lt.archive([{"role": "user", "content": "the seed turn: staging redis is on 6380"}], session="seed")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'refused at commit by the test trigger'; END $$"
        )
        conn.execute(
            "CREATE CONSTRAINT TRIGGER refuse AFTER INSERT ON entries DEFERRABLE INITIALLY DEFERRED "
            "FOR EACH ROW EXECUTE FUNCTION refuse()"
        )
    with Lantern(url) as lt:
        with pytest.raises(psycopg.Error, match="refused at commit by the test trigger"):
            lt.archive(msgs, session="s")
        assert lt.stats()["entries"] == 1 and not lt.store.db.in_transaction
        assert lt.search("staging redis port", k=1)
    proc = cli("ingest", str(transcript), db=url)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "refused at commit by the test trigger" in err, err
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER refuse ON entries")
    with Lantern(url) as lt:
        assert lt.stats()["entries"] == 1
        first = lt.archive(msgs, session="s")
        again = lt.ingest(transcript, session="s")
        assert (len(first.entry_ids), first.duplicates, again.added, again.duplicates) == (30, 0, 0, 30)
        assert lt.stats()["entries"] == 31
