"""Two processes writing the same rows into one database at once (breaker finding F8, issue #23): two `lantern
import` of one export, and two `lantern copy` of one store, both succeed on both backends, every entry and event
stored once (``ON CONFLICT (content_hash)`` and a re-read, as ``add`` does; the batches and the events serialized
per database: portability.py). Real processes, a real server (conftest.py ``db_location``)."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from lantern import Lantern

SRC = str(Path(__file__).resolve().parents[1] / "src")
ENTRIES = 1_000  # 4 import batches of 256: the two processes' batches overlap


def _export(path: Path, embedder_id: str, dim: int) -> None:
    """An export of ``ENTRIES`` entries with their embeddings (random unit vectors: nothing to embed on import)."""
    rng = np.random.default_rng(7)
    lines = [{"type": "header", "format": "lantern-export", "version": 1, "embedder": embedder_id, "dim": dim}]
    lines[0]["embeddings"] = True
    for i in range(ENTRIES):
        vector = rng.standard_normal(dim).astype("<f4")
        vector /= np.linalg.norm(vector)
        lines.append(
            {
                "type": "entry",
                "session": f"s{i % 7}",
                "turn": i // 7,
                "archived_at": 1_700_000_000.0 + i,
                "text": f"service {i} listens on port {10_000 + i}",
                "summary": f"service {i} port {10_000 + i}",
                "embedding": base64.b64encode(vector.tobytes()).decode("ascii"),
            }
        )
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def _twice(*args: str) -> list[tuple[int, str, str]]:
    """``lantern ARGS`` in two processes started together: (exit code, stdout, stderr) of each."""
    env = {**os.environ, "PYTHONPATH": SRC}
    cmd = [sys.executable, "-m", "lantern.cli", *args]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    return [(p.returncode, out.decode(), err.decode()) for p, (out, err) in zip(procs, outs)]


def _sum(pattern: str, results: list[tuple[int, str, str]]) -> list[int]:
    """The numbers ``pattern`` (a regex of int groups) finds in the two processes' outputs, summed group-wise."""
    found = [re.search(pattern, out + err) for _, out, err in results]
    assert all(found), results
    return [sum(int(m.group(i).replace(",", "")) for m in found) for i in range(1, found[0].re.groups + 1)]


def _counts(location) -> tuple[int, int, int]:
    """(entries, distinct content hashes, compaction events) in the store at ``location``."""
    with Lantern(location) as lt:
        db = lt.store.db
        return (
            db.execute("SELECT count(*) FROM entries").fetchone()[0],
            db.execute("SELECT count(DISTINCT content_hash) FROM entries").fetchone()[0],
            db.execute("SELECT count(*) FROM events").fetchone()[0],
        )


def test_two_imports_of_one_export_at_once_both_succeed_and_store_each_entry_once(db_location, tmp_path):
    path = tmp_path / "big.jsonl"
    with Lantern(db_location) as lt:  # the schema and embedder recorded once, before the race
        _export(path, lt.embedder.id, lt.embedder.dim)
    results = _twice("--db", str(db_location), "import", str(path))
    assert [code for code, _, _ in results] == [0, 0], results
    assert _counts(db_location) == (ENTRIES, ENTRIES, 0)
    assert _sum(r"([\d,]+) entr(?:y|ies) imported, ([\d,]+) already stored", results) == [ENTRIES, ENTRIES]


def test_two_copies_of_one_store_at_once_both_succeed_and_store_each_entry_and_event_once(db_location, tmp_path):
    source, path = tmp_path / "src.db", tmp_path / "big.jsonl"
    with Lantern(source) as lt:
        _export(path, lt.embedder.id, lt.embedder.dim)
        lt.import_(path)
        recovery = lt.recover("which port does service 7 listen on", session="s0", budget=500)
        lt.record_compaction(recovery, session="s0", reason="summary", lost=[1, 2], source="proxy")
    with Lantern(db_location):
        pass
    results = _twice("copy", str(source), str(db_location))
    assert [code for code, _, _ in results] == [0, 0], results
    assert _counts(db_location) == (ENTRIES, ENTRIES, 1)
    assert _sum(r"([\d,]+) copied, ([\d,]+) already there", results) == [ENTRIES, ENTRIES]


def test_an_import_batch_the_server_rolls_back_to_break_a_deadlock_is_run_again(pg_url, tmp_path):
    """An import and another writer storing the same two turns in opposite orders: each waits for the row the
    other wrote, the server breaks the deadlock by rolling back the import's batch (the import's session detects
    it first: its ``deadlock_timeout`` is the shorter), and the import runs the batch again: both turns counted as
    duplicates, stored once, no error."""
    import threading

    import psycopg

    from lantern.model import content_hash

    url = pg_url()
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {url.split('?')[0].rsplit('/', 1)[1]} SET deadlock_timeout = '3s'")
    texts = ["the staging Redis listens on port 6380", "LOG_LEVEL=debug in .env.staging"]
    path = tmp_path / "two.jsonl"
    header = {"type": "header", "format": "lantern-export", "version": 1, "embeddings": False}
    records = [
        {"type": "entry", "session": "s", "turn": i, "text": t, "summary": t, "archived_at": 1.7e9 + i}
        for i, t in enumerate(texts)
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in (header, *records)))

    def insert(conn: psycopg.Connection, text: str) -> None:  # another writer's row of the same turn
        conn.execute(
            "INSERT INTO entries(session, turn, archived_at, text, summary, tags, hints, memory_type, importance, "
            "content_hash, confidence, success) VALUES ('s', 9, 0, %s, %s, '[]', '[]', 'episodic', 0.5, %s, 0.5, 0.5)",
            (text, text, content_hash("s", text, "", "", "")),
        )

    with Lantern(url) as lt, psycopg.connect(url) as other:
        other.execute("SET deadlock_timeout = '60s'")  # this session never detects it: the import's does
        insert(other, texts[1])  # the second turn, uncommitted: the import's batch waits for it
        out: dict = {}
        importer = threading.Thread(target=lambda: out.setdefault("result", lt.import_(path)))
        importer.start()
        with psycopg.connect(url, autocommit=True) as watch:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                waiting = watch.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO entries%%'"
                ).fetchone()[0]
                if waiting:
                    break
                time.sleep(0.02)
        assert waiting, "the import should wait for the other writer's row"
        insert(other, texts[0])  # the first turn, which the import wrote: a deadlock, the import rolled back
        other.commit()
        importer.join(60)
    assert out["result"].added == 0 and out["result"].duplicates == 2
    assert _counts(url) == (2, 2, 0)
