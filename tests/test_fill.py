"""Vectors filled after the archive commit (archive/fill.py) and stored compactly (store/vectors.py), on the real
store with the real models: the e5 part of an English turn is never computed by the archive call, every path
that fills it (recovery, ingest, the servers' worker, ``reindex --fill``) gives the bytes a direct embedding gives,
and another process's index sees the filled rows."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import numpy as np
import pytest

from lantern import Lantern
from lantern.config import Config
from lantern.embed import E5Embedder
from lantern.store.packed import unpack
from lantern.store.vectors import decode, encode

pytestmark = pytest.mark.real_models  # the routed embedders and their blocks: the real models

EN = [
    {"role": "user", "content": "Which port does the billing database listen on?"},
    {"role": "assistant", "content": "The billing database listens on port 5433 (docker-compose maps 5432)."},
    {"role": "user", "content": "Where do the invoice exports go?"},
    {"role": "assistant", "content": "Exports are written to s3://acme-billing/exports with a 30 day retention."},
    {"role": "user", "content": "What broke the nightly job?"},
    {"role": "assistant", "content": "The nightly job failed on a UnicodeDecodeError in exporter/writer.py."},
]
ZH = [
    {"role": "user", "content": "数据库端口改成 5433 了，密码在保险库里。"},
    {"role": "assistant", "content": "好的，已记录。"},
]
E5_BLOCK = (896, 1280)
ON = Config(e5_english_weight=0.5)  # English turns get their e5 block (the default 0 gives them none)


def _pending(db) -> int:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT count(*) FROM entries WHERE e5_pending = 1").fetchone()[0]


def _vectors(db) -> dict[int, bytes]:
    with sqlite3.connect(db) as con:
        return dict(con.execute("SELECT entry_id, vector FROM embeddings").fetchall())


def test_the_archive_call_leaves_the_english_e5_part_pending_and_loads_no_e5(tmp_path):
    db = tmp_path / "a.db"
    with Lantern(db, config=Config(e5_english_weight=0.5, fill_on_recover=0)) as lt:
        lt.archive(EN + ZH, session="s")
        assert lt.embedder.loaded["e5"] is True  # the Chinese turn is embedded by e5 at archive time, as before
    with Lantern(db, config=Config(e5_english_weight=0.5, fill_on_recover=0)) as lt:
        lt.archive(EN[:2], session="t")
        assert lt.embedder.loaded["e5"] is False  # English turns alone: e5 is never loaded by an archive
    assert _pending(db) == 4  # the 3 English turns of s and the 1 of t; the Chinese turn has its e5 part
    for blob in _vectors(db).values():
        assert len(blob) < 1280 * 4  # int8 blocks, no all-zero blocks


def test_a_fill_stores_the_bytes_a_direct_embedding_stores(tmp_path):
    db = tmp_path / "f.db"
    with Lantern(db, config=ON) as lt:
        lt.archive(EN, session="s")
        summaries = {i: unpack(s) for i, s in lt.store.db.execute("SELECT id, summary FROM entries")}
        assert lt.fill_vectors() == 3 and lt.fill_vectors() == 0
        blocks, dim = lt.store.blocks, lt.store.dim
    e5 = E5Embedder()
    for entry_id, blob in _vectors(db).items():
        full = decode(blob, dim, blocks)
        direct = e5.embed([summaries[entry_id]])[0]
        expected = full.copy()
        expected[slice(*E5_BLOCK)] = direct
        assert blob == encode(expected, blocks)  # the main part untouched, the e5 part as embedded directly
    assert _pending(db) == 0


def test_a_recovery_fills_a_bounded_number_first_and_ranks_them_by_e5(tmp_path):
    db = tmp_path / "r.db"
    with Lantern(db, config=Config(e5_english_weight=0.5, fill_on_recover=2, reinforce=False)) as lt:
        lt.archive(EN, session="s")
        rec = lt.explain("where are the invoice exports written?")
        assert _pending(db) == 1  # 2 of 3 filled, the newest first
        e5_ranked = {c.entry.id for c in rec.candidates if "semantic_e5" in c.ranks}
        assert len(e5_ranked) == 2
        lt.explain("where are the invoice exports written?")
        assert _pending(db) == 0


def test_another_process_index_sees_the_filled_rows(tmp_path):
    db = tmp_path / "p.db"
    with Lantern(db, config=Config(e5_english_weight=0.5, fill_on_recover=0, reinforce=False)) as reader:
        reader.archive(EN, session="s")
        before = reader.explain("what broke the nightly job?")
        assert not any("semantic_e5" in c.ranks for c in before.candidates)
        subprocess.run(
            [sys.executable, "-m", "lantern.cli", "--db", str(db), "reindex", "--fill"],
            check=True,
            capture_output=True,
        )
        after = reader.explain("what broke the nightly job?")  # this handle refreshes: vector_at moved
        assert sum("semantic_e5" in c.ranks for c in after.candidates) == 3


def test_a_store_of_raw_float32_vectors_is_compacted_once_and_gains_its_e5_parts(tmp_path):
    db = tmp_path / "old.db"
    with Lantern(db, config=Config(e5_english_weight=0.5, fill_on_recover=0)) as lt:
        lt.archive(EN, session="s")
        dim, blocks = lt.store.dim, lt.store.blocks
        full = {i: decode(b, dim, blocks) for i, b in _vectors(db).items()}
    with sqlite3.connect(db) as con:  # as a version before the int8 format wrote it
        con.executemany(
            "UPDATE embeddings SET vector = ? WHERE entry_id = ?",
            [(v.astype("<f4").tobytes(), i) for i, v in full.items()],
        )
        con.execute("UPDATE entries SET e5_pending = 0")
        con.execute("DELETE FROM meta WHERE key = 'vectors_format'")
    with Lantern(db, config=Config(e5_english_weight=0.5, fill_on_recover=0)) as lt:
        assert lt.stats()["vectors_pending"] == 3
        assert all(len(b) < dim * 4 for b in _vectors(db).values())
        assert lt.fill_vectors() == 3


def test_a_read_only_store_recovers_without_filling(tmp_path, unprivileged):
    db = tmp_path / "ro.db"
    with Lantern(db, config=ON) as lt:
        lt.archive(EN, session="s")
    db.chmod(0o444)  # the file read-only; its folder writable (SQLite makes the -wal and -shm files there)
    try:
        code = (
            "import sys\nfrom lantern import Lantern\nfrom lantern.config import Config\n"
            "with Lantern(sys.argv[1], config=Config(e5_english_weight=0.5)) as lt:\n"
            "    print('5433' in lt.recover('which port does the billing database use?').text)\n"
        )
        r = subprocess.run([*unprivileged, sys.executable, "-c", code, str(db)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "True" and "Traceback" not in r.stderr
    finally:
        db.chmod(0o644)
    assert _pending(db) == 3


def test_the_servers_fill_in_the_background(tmp_path):
    from lantern.integrations.service import MemoryService

    service = MemoryService(tmp_path / "s.db", None, ON)
    try:
        service.archive(EN, session="s")
        service.start_filler(interval_s=0.05, batch=2)
        for _ in range(400):
            if _pending(tmp_path / "s.db") == 0:
                break
            import time

            time.sleep(0.05)
        assert _pending(tmp_path / "s.db") == 0
    finally:
        service.close()


def test_forgetting_a_pending_entry_leaves_nothing_to_fill(tmp_path):
    with Lantern(tmp_path / "g.db", config=Config(e5_english_weight=0.5, fill_on_recover=0)) as lt:
        lt.archive(EN, session="s")
        lt.archive(EN[:2], session="t")
        assert lt.forget(session="s") == 3
        assert lt.fill_vectors() == 1 and lt.stats()["vectors_pending"] == 0


@pytest.mark.parametrize("dim_blocks", [[(0, 384)], [(0, 384), (384, 896)], [(0, 384), (384, 896), (896, 1280)]])
def test_encoding_is_idempotent_and_close(dim_blocks):
    rng = np.random.default_rng(7)
    dim = dim_blocks[-1][1]
    for _ in range(200):
        v = np.zeros(dim, np.float32)
        for a, b in dim_blocks:
            if rng.random() < 0.6:
                part = rng.normal(size=b - a).astype(np.float32)
                v[a:b] = part / np.linalg.norm(part)
        blob = encode(v, dim_blocks)
        back = decode(blob, dim, dim_blocks)
        assert encode(back, dim_blocks) == blob  # a decoded vector stores the same bytes again
        assert np.abs(back - v).max() < 0.01 and len(blob) <= 1 + len(dim_blocks) + sum(
            4 + b - a for a, b in dim_blocks
        )
        assert np.array_equal(decode(v.tobytes(), dim, dim_blocks), v)  # raw float32 blobs still decode


def test_at_the_default_weight_english_turns_get_no_e5_block_and_recover_loads_no_e5(tmp_path):
    """e5_english_weight 0 (the default): nothing fills the English e5 block on its own — not an ingest batch, not a
    recovery, not the servers' worker — and an English recovery never loads e5; reindex --fill still fills."""
    from lantern.integrations.service import MemoryService

    db = tmp_path / "d.db"
    with Lantern(db) as lt:
        lt.archive(EN, session="s")
        rec = lt.recover("which port does the billing database listen on?")
        assert "5433" in rec.text and lt.embedder.loaded["e5"] is False
        assert "semantic_e5" not in {s for c in rec.candidates for s in c.ranks}
    assert _pending(db) == 3
    service = MemoryService(db)
    try:
        service.archive(EN[:2], session="t")
        assert service.fill_step(8) == 0
    finally:
        service.close()
    assert _pending(db) == 4
    with Lantern(db) as lt:
        assert lt.fill_vectors() == 4
    assert _pending(db) == 0


def test_filled_english_e5_blocks_vote_for_nothing_while_english_e5_is_off(tmp_path):
    """A store filled while English e5 was on, read with it off (the default): semantic_e5 ranks the Chinese
    turns only, so the ranking is the one of a store never filled."""
    db = tmp_path / "m.db"
    with Lantern(db, config=ON) as lt:
        lt.archive(EN + ZH, session="s")
        assert lt.fill_vectors() == 3 and _pending(db) == 0
    with Lantern(db) as lt:
        for query in ("which port does the billing database listen on?", "数据库端口是多少？"):
            ranked = [c for c in lt.explain(query).candidates if "semantic_e5" in c.ranks]
            assert ranked and all("数据库" in c.entry.text for c in ranked), query
    with Lantern(db, config=ON) as lt:  # on again: the English turns rank by e5 too
        ranked = [c for c in lt.explain("which port does the billing database listen on?").candidates]
        assert any("5433 (docker" in c.entry.text and "semantic_e5" in c.ranks for c in ranked)


class _Bare:
    """An embedder object that has the store's embedder id and dims but no ``blocks`` (a user's wrapper)."""

    def __init__(self, inner):
        self.inner, self.id, self.dim = inner, inner.id, inner.dim

    def embed(self, texts):
        return self.inner.embed(texts)

    def embed_query(self, texts, occupied=None):
        return self.inner.embed_query(texts, occupied)


LAYOUT_TURNS = [
    {"role": "user", "content": "Which port does the billing database listen on?"},
    {"role": "assistant", "content": "The billing database listens on port 5433."},
    {"role": "user", "content": "数据库的备份放在哪里？"},
    {"role": "assistant", "content": "备份放在 /srv/backup/billing 目录，每天凌晨两点执行。"},
    {"role": "user", "content": "And the cache?"},
    {"role": "assistant", "content": "Redis runs on port 6380 with maxmemory 2gb."},
]


def _rows(lt) -> np.ndarray:
    lt.index.refresh()
    out = np.zeros((len(lt.index.ids), lt.index.dim), np.float32)
    out[:, lt.index.columns] = lt.index.matrix
    return out


def test_stored_vectors_are_read_by_their_recorded_layout_whatever_the_embedder_object_says(tmp_path):
    """The int8 rows' block layout is recorded in meta (``vector_blocks``) when a store is created; a handle whose
    embedder object has no ``blocks`` decodes the rows by it (it raised a reshape ValueError) and writes new rows in
    it, so a later handle reads both alike."""
    import json

    from lantern.embed import get_embedder

    path = tmp_path / "m.db"
    routed = get_embedder("routed")
    blocks = sorted(routed.blocks.values())
    with Lantern(path, embedder=routed) as lt:
        lt.archive(LAYOUT_TURNS[:4], session="s")
        first = _rows(lt)
    meta = dict(sqlite3.connect(path).execute("SELECT key, value FROM meta").fetchall())
    assert [tuple(b) for b in json.loads(meta["vector_blocks"])] == blocks
    with Lantern(path, embedder=_Bare(routed)) as lt:
        assert lt.store.blocks == blocks
        assert np.allclose(_rows(lt), first, atol=1e-6)
        lt.archive(LAYOUT_TURNS[4:], session="s")
        assert "5433" in lt.recover("which port is the billing database on?", min_score=0).text
        written = _rows(lt)
    with Lantern(path, embedder=routed) as lt:
        again = _rows(lt)
    assert np.allclose(again, written, atol=1e-6) and len(again) == 3
    assert np.allclose(np.linalg.norm(again[:, : routed.main_dim], axis=1), 1.0, atol=0.01)
