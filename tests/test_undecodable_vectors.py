"""A stored vector whose byte length fits no layout of the store (meta ``vector_blocks``; store/vectors.py): cut short
by a disk fault, or written by another tool. The in-process index leaves such entries out, counts them and names them in
one warning; recoveries work on the rest; ``lantern stats`` counts them; an export leaves their embedding out; ``lantern
reindex`` repairs them. Real store, the fake embedder (tests/conftest.py), the aider demo excerpt."""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from clirun import lantern as cli
from lantern import Lantern
from lantern.store import snapshot
from lantern.store import vectors as codec

EXCERPT = Path(__file__).resolve().parents[1] / "src" / "lantern" / "data" / "demo" / "aider-chat-excerpt.md"
NEEDLE = "the staging database listens on port 6543 behind pgbouncer"
QUERY = "which port does the staging database listen on?"


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("undecodable") / "t.db"
    with Lantern(path) as lt:
        lt.ingest(EXCERPT, session="aider", format="aider")
        lt.archive([{"role": "user", "content": NEEDLE}], session="needle")
    return path


def _copy(template: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "t.db"
    shutil.copy(template, path)
    return path


def _rows(path: Path) -> list[tuple[int, bytes]]:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT entry_id, vector FROM embeddings ORDER BY entry_id").fetchall()
    finally:
        db.close()


def _layout(path: Path) -> tuple[int, list[tuple[int, int]]]:
    db = sqlite3.connect(path)
    try:
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    finally:
        db.close()
    return int(meta["dim"]), [tuple(b) for b in json.loads(meta["vector_blocks"])]


def wrong(blob: bytes, dim: int, kind: str, k: int) -> bytes | str:
    """A value of the ``embeddings.vector`` column no layout decodes, made from a good ``blob``: empty, one byte, cut
    short by ``k`` bytes, ``k`` bytes too long (never exactly the raw float32 length), raw float32 of a wrong
    dimension (another model's, or one dim off), or text."""
    if kind == "empty":
        return b""
    if kind == "one byte":
        return blob[:1]
    if kind == "short":
        return blob[: max(len(blob) - k, 0)]
    if kind == "long":
        extra = k if len(blob) + k != 4 * dim else k + 1
        return blob + bytes(range(256)) * (extra // 256) + bytes(range(extra % 256))  # exactly ``extra`` more
    if kind == "wrong dim":
        others = [d for d in (384, 512, 768, dim - 1, dim + 1, 2 * dim) if d != dim]  # never the store's own
        other = others[k % len(others)]
        return np.ones(other, "<f4").tobytes()
    return "not a vector"


KINDS = ["empty", "one byte", "short", "long", "wrong dim", "text"]


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    damage=st.lists(
        st.tuples(st.integers(0, 10_000), st.sampled_from(KINDS), st.integers(1, 600)), min_size=1, max_size=4
    ),
    example=st.uuids(),
)
def test_undecodable_vectors_are_left_out_counted_named_and_repaired(template, tmp_path, caplog, damage, example):
    path = _copy(template, tmp_path / str(example))
    dim, blocks = _layout(path)
    rows = _rows(path)
    bad: dict[int, bytes | str] = {}
    for pick, kind, k in damage:
        entry_id, blob = rows[pick % (len(rows) - 1)]  # never the needle's
        bad[entry_id] = wrong(blob, dim, kind, k)
    assert not any(codec.decodable(v, dim, blocks) for v in bad.values())
    db = sqlite3.connect(path)
    db.executemany("UPDATE embeddings SET vector = ? WHERE entry_id = ?", [(v, i) for i, v in bad.items()])
    db.commit()
    db.close()

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lantern.store.index"), Lantern(path) as lt:
        assert lt.stats()["vectors_undecodable"] == len(bad)
        block = lt.recover(QUERY, budget=600).text  # no reshape error: the rest is searched
        assert "6543" in block
        assert set(lt.index.undecodable) == set(bad)
        assert not set(lt.index.ids.tolist()) & set(bad) and len(lt.index.ids) == len(rows) - len(bad)
        warnings = [r.getMessage() for r in caplog.records if "cannot be decoded" in r.getMessage()]
        assert len(warnings) == 1 and str(sorted(bad)[0]) in warnings[0] and "reindex" in warnings[0]
        loaded = lt.index.ids.copy()
        lt.archive([{"role": "user", "content": "the cache is redis on port 6380"}], session="later")
        lt.recover(QUERY, budget=600)
        assert len(lt.index.ids) == len(loaded) + 1  # a refresh reads the new row only, the bad ones not again
        assert len([r for r in caplog.records if "cannot be decoded" in r.getMessage()]) == 1

        assert lt.reindex() == len(rows) + 1  # recomputes every vector, the undecodable ones included
        assert lt.stats()["vectors_undecodable"] == 0
        lt.recover(QUERY, budget=600)
        assert lt.index.undecodable == {} and set(bad) <= set(lt.index.ids.tolist())


def test_a_vector_damaged_after_the_load_takes_its_entry_out_at_the_next_refresh(template, tmp_path):
    path = _copy(template, tmp_path)
    rows = _rows(path)
    victim = rows[3][0]
    with Lantern(path) as lt:
        lt.recover(QUERY)
        assert victim in lt.index.ids
        db = sqlite3.connect(path)  # another tool rewrites the row, stamping it as Lantern would
        db.execute("UPDATE embeddings SET vector = ? WHERE entry_id = ?", (b"\x01\x01", victim))
        db.execute("UPDATE entries SET vector_at = ? WHERE id = ?", (1e12, victim))
        db.commit()
        db.close()
        assert "6543" in lt.recover(QUERY, budget=600).text
        assert victim not in lt.index.ids and set(lt.index.undecodable) == {victim}


def test_the_snapshot_keeps_the_entries_left_out(template, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(snapshot, "MIN_ROWS", 1)
    path = _copy(template, tmp_path)
    rows = _rows(path)
    victim = rows[5][0]
    db = sqlite3.connect(path)
    db.execute("UPDATE embeddings SET vector = substr(vector, 1, 7) WHERE entry_id = ?", (victim,))
    db.commit()
    db.close()
    with Lantern(path) as lt:
        lt.recover(QUERY)
        lt.index.save()
    assert (Path(str(path) + snapshot.SUFFIX) / "meta.json").is_file()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lantern.store.index"), Lantern(path) as lt:
        assert "6543" in lt.recover(QUERY, budget=600).text
        assert lt.index._unsaved == 0  # opened from the snapshot, not reloaded for the count that differs
        assert set(lt.index.undecodable) == {victim} and victim not in lt.index.ids
        assert not [r for r in caplog.records if "cannot be decoded" in r.getMessage()]


def test_stats_export_and_reindex_through_the_cli(template, tmp_path):
    path = _copy(template, tmp_path)
    victim = _rows(path)[2][0]
    db = sqlite3.connect(path)
    db.execute("UPDATE embeddings SET vector = zeroblob(13) WHERE entry_id = ?", (victim,))
    db.commit()
    db.close()
    stats = json.loads(cli("stats", "--json", db=path).stdout)
    assert stats["vectors_undecodable"] == 1
    out = tmp_path / "export.jsonl"
    assert cli("export", str(out), db=path).returncode == 0
    records = [json.loads(line) for line in out.read_text().splitlines()[1:]]
    assert [r["id"] for r in records if "embedding" not in r] == [victim]
    result = cli("recover", QUERY, db=path)
    assert result.returncode == 0 and "6543" in result.stdout.decode()
    assert cli("reindex", db=path).returncode == 0
    assert json.loads(cli("stats", "--json", db=path).stdout)["vectors_undecodable"] == 0


def test_the_codec_refuses_what_it_cannot_decode_with_a_clear_error():
    blocks = [(0, 4), (4, 8)]
    good = codec.encode(np.arange(8, dtype=np.float32), blocks)
    for blob in (b"", good[:-1], good + b"\x00", np.ones(7, "<f4").tobytes()):
        assert not codec.decodable(blob, 8, blocks)
        with pytest.raises(ValueError, match="cannot be decoded"):
            codec.decode_many([good, blob], 8, blocks)
        with pytest.raises(ValueError, match="cannot be decoded"):
            codec.decode(blob, 8, blocks)
    assert codec.decode_many([good, np.ones(8, "<f4").tobytes()], 8, blocks).shape == (2, 8)
