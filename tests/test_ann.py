"""The semantic signal through HNSW graphs (store/ann.py) on the real store with the real models: the same positions
and cosines as exact search (the graphs hold a few thousand rows, where HNSW's recall is complete), under scope and
session masks, with a block embedder's blocks ranked apart, and kept consistent with the table through archive,
rewrite (a grown turn), forget and a worker-thread build."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from embed_once import remembering
from lantern import Lantern
from lantern.archive.chunk import chunk
from lantern.archive.parse import parse
from lantern.config import Config
from lantern.embed import MiniLMEmbedder, RoutedEmbedder, embed_query
from lantern.model import content_hash
from lantern.recover import signals
from lantern.store import ann
from lantern.store import index as index_module

pytestmark = pytest.mark.real_models  # the graphs of the routed embedders' blocks: the real models

EXCERPT = Path(__file__).resolve().parents[1] / "src" / "lantern" / "data" / "demo" / "aider-chat-excerpt.md"
FORCED = Config(ann_min_rows=0)  # the graphs on whatever the size
MINILM = remembering(MiniLMEmbedder())  # the tests ingest the same excerpt: its MiniLM vectors computed once
COPIES = 12  # noisy copies of each real turn: ~2,000 rows, enough that the graphs (not exact search) answer
ZH = [
    "测试环境的 Redis 端口改成了 6380",
    "周五下午三点和产品经理开会讨论新版本的发布计划",
    "数据库备份每天凌晨两点自动运行",
    "我同事的邮箱是 zhao_lihua1013@example.com",
]


MIN_RECALL = 0.9  # of the exact top n, at each n (HNSW is approximate; near-duplicate copies are its hard case)


def same_up_to_recall(index, vector, found, want, min_recall: float | None = MIN_RECALL) -> tuple[int, int]:
    """``found`` is what exact search would give up to the graphs' recall: each cosine is the exact one of its row
    (the same float32 product), best first, never above the exact result's at the same rank, and (unless
    ``min_recall`` is None: a caller that checks the recall over many calls) at least ``min_recall`` of the exact
    top n are found. Returns (exact top-n rows found, n)."""
    pos, cos = found
    assert len(pos) == len(want[0])
    np.testing.assert_array_equal(cos, index.cosines(vector, pos))
    assert (np.diff(cos) <= 0).all()
    assert (cos <= want[1] + 1e-7).all()
    hits = len(np.intersect1d(pos, want[0]))
    assert min_recall is None or hits >= min_recall * len(pos), (hits, len(pos))
    return hits, len(pos)


def exact(index, vector, allowed, n, skip_blank=False):
    """The semantic signal with the graphs set aside: the exact product over every row."""
    graphs, index.ann = index.ann, None
    try:
        return signals.semantic(index, vector, allowed, n, skip_blank)
    finally:
        index.ann = graphs


def fill(lantern: Lantern, copies: int, sigma: float = 0.02) -> None:
    """Copies of the excerpt's turns through ``Store.add`` (benchmarks/_common.fill_store's scheme): the real turn
    through the real write-path stages, its text marked and its session its own, its real vector plus Gaussian noise
    on the nonzero components, re-normalized."""
    parsed = parse(EXCERPT, "aider")
    rows = [lantern.writer.prepare(t, "aider", lantern.scope) for t in chunk(parsed.messages, None)]
    base = lantern.embedder.embed([r.summary for r in rows])
    rng = np.random.default_rng(0)
    news, vecs = [], []
    for k in range(1, copies + 1):
        for row, vec in zip(rows, base):
            session, text = f"{row.session}~{k}", f"{row.text}\n[copy {k}]"
            news.append(replace(row, session=session, text=text, content_hash=content_hash(session, text)))
            noisy = vec + (rng.normal(0.0, sigma, vec.shape) * (vec != 0)).astype(np.float32)
            vecs.append(noisy / np.linalg.norm(noisy))
    lantern.store.add(news, np.asarray(vecs, np.float32))
    lantern.index.mark_dirty()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("ann") / "ann.db"
    lantern = Lantern(path, embedder=RoutedEmbedder(minilm=MINILM), config=FORCED)  # "routed-v1"
    lantern.ingest(EXCERPT, session="aider", format="aider")
    for i, text in enumerate(ZH):
        lantern.archive([{"role": "user", "content": text}], session=f"zh-{i}")
    lantern.archive([{"role": "user", "content": "bob's note: the staging port is 8443"}], session="b", user="bob")
    fill(lantern, COPIES)
    lantern.index.refresh()
    lantern.index.wait_ann()
    yield lantern
    lantern.close()


def queries(lantern: Lantern) -> np.ndarray:
    texts = ["how do I run the tests?", "fix the failing lint error", "Redis 端口是多少？", "where is the config file"]
    return embed_query(lantern.embedder, texts, lantern.index.block_occupied)


def test_graphs_answer_with_the_exact_positions_and_cosines(store):
    idx = store.index
    assert idx.ann is not None and not idx.ann.building and idx.ann.covered == len(idx.ids) > 1_000
    assert set(idx.ann.graphs) == {(0, 384), (384, 896)}  # MiniLM's and USE's blocks, each its own graph
    hits = total = 0
    for v in queries(store):
        for n in (1, 10, 50):
            found = ann.nearest(idx, v, None, n, False)
            assert found is not None  # the graphs answered, not the exact fallback
            h, t = same_up_to_recall(idx, v, found, exact(idx, v, None, n), None)
            hits, total = hits + h, total + t
    assert hits >= MIN_RECALL * total, (hits, total)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(share=st.floats(0.0, 1.0), seed=st.integers(0, 2**31), n=st.integers(1, 120), q=st.integers(0, 3))
def test_any_mask_gives_the_exact_result(store, share, seed, n, q):
    idx = store.index
    allowed = np.random.default_rng(seed).random(len(idx.ids)) < share
    v = queries(store)[q]
    got, want = signals.semantic(idx, v, allowed, n), exact(idx, v, allowed, n)
    same_up_to_recall(idx, v, got, want, MIN_RECALL if n >= 20 else None)  # a short top n: all or nothing
    assert allowed[got[0]].all()


def test_scope_and_session_masks(store):
    idx = store.index
    v = queries(store)[0]
    for mask in (idx.scope_mask(replace(store.scope, user="bob")), idx.session_mask("aider"), idx.session_mask("zh-1")):
        got, want = signals.semantic(idx, v, mask, 10), exact(idx, v, mask, 10)
        same_up_to_recall(idx, v, got, want)
        assert mask is None or mask[got[0]].all()


def test_a_small_mask_is_searched_exactly_at_a_cost_proportional_to_it(store):
    idx = store.index
    mask = idx.session_mask("zh-1")
    forced = idx.ann.params
    assert ann.nearest(idx, queries(store)[2], mask, 10, False) is not None  # ann_min_rows 0: the graphs answer
    idx.ann.params = replace(forced, min_rows=1)
    try:
        assert ann.nearest(idx, queries(store)[2], mask, 10, False) is None  # exact over the mask's rows instead
    finally:
        idx.ann.params = forced


def test_new_rewritten_and_forgotten_rows_keep_the_graphs_in_step(tmp_path):
    with Lantern(tmp_path / "s.db", embedder=MINILM, config=FORCED) as lantern:
        lantern.build_graphs(background=True)  # as serve and mcp do: this handle keeps its graphs up to date
        lantern.ingest(EXCERPT, session="aider", format="aider")
        lantern.recover("warm up the index")
        idx = lantern.index
        graph = idx.ann.graphs[(0, 384)]
        assert len(graph) == len(idx.ids)
        # a new turn enters the graph at the next refresh
        lantern.archive([{"role": "user", "content": "the nightly build runs on the ci-runner-7 machine"}], "live")
        lantern.recover("which machine runs the nightly build?")
        new_id = int(idx.ids[-1])
        assert idx.ann.covered == len(idx.ids) and new_id in graph
        v = embed_query(lantern.embedder, ["ci-runner-7 nightly build machine"])[0]
        assert int(idx.ids[ann.nearest(idx, v, None, 1, False)[0][0]]) == new_id
        # the same turn grown (the reply arrives): rewritten in place, its vector in the graph replaced
        lantern.archive(
            [
                {"role": "user", "content": "the nightly build runs on the ci-runner-7 machine"},
                {"role": "assistant", "content": "Noted: ci-runner-7 also hosts the flaky GPU tests."},
            ],
            "live",
        )
        lantern.recover("gpu tests")
        assert int(idx.ids[-1]) == new_id  # same entry, rewritten in place: scored exactly from now on
        assert new_id in idx.ann.stale
        v = embed_query(lantern.embedder, ["ci-runner-7 also hosts the flaky GPU tests"])[0]
        got = ann.nearest(idx, v, None, 1, False)
        assert int(idx.ids[got[0][0]]) == new_id
        np.testing.assert_array_equal(got[1], idx.cosines(v, got[0]))  # its new vector
        # forgotten: out of the graphs
        lantern.forget(entry=new_id)
        lantern.recover("which machine runs the nightly build?")
        assert new_id not in idx.ids and all(new_id not in g for g in idx.ann.graphs.values())
        assert len(idx.ann.graphs[(0, 384)]) == len(idx.ids)


def test_a_worker_thread_build_answers_exactly_meanwhile(tmp_path, monkeypatch):
    monkeypatch.setattr(index_module, "ANN_BUILD_AHEAD", 10)
    with Lantern(tmp_path / "w.db", embedder=MINILM, config=FORCED) as lantern:
        lantern.build_graphs(background=True)
        lantern.ingest(EXCERPT, session="aider", format="aider")
        idx = lantern.index
        idx.refresh()
        v = embed_query(lantern.embedder, ["how do I run the tests?"])[0]
        assert idx.ann is not None
        if idx.ann.building:  # not yet done: exact search answers
            assert ann.nearest(idx, v, None, 5, False) is None
        idx.wait_ann()
        assert not idx.ann.building and idx.ann.covered == len(idx.ids)
        got = ann.nearest(idx, v, None, 5, False)
        same_up_to_recall(idx, v, got, exact(idx, v, None, 5))


def test_below_the_threshold_no_graph_is_built(tmp_path):
    with Lantern(tmp_path / "t.db", embedder=MINILM, config=Config(ann_min_rows=10_000)) as lantern:
        lantern.ingest(EXCERPT, session="aider", format="aider")
        lantern.recover("how do I run the tests?")
        assert lantern.index.ann is None


def test_blocks_ranked_apart_skip_blank_rows(tmp_path):
    """The default embedder's e5 block (semantic_e5): only the Chinese rows have it; skip_blank leaves the others
    out, through the graph as in exact search."""
    with Lantern(tmp_path / "e5.db", config=FORCED) as lantern:
        for i, text in enumerate(ZH * 3):
            lantern.archive([{"role": "user", "content": f"{text}（第{i}次）"}], session=f"zh-{i}")
        lantern.ingest(EXCERPT, session="aider", format="aider")
        idx = lantern.index
        idx.refresh()
        idx.wait_ann()
        e5 = lantern.embedder.signal_blocks["semantic_e5"]
        assert e5 in idx.ann.graphs
        v = embed_query(lantern.embedder, ["Redis 端口是多少？"], idx.block_occupied)[0]
        apart = np.zeros_like(v)
        apart[e5[0] : e5[1]] = v[e5[0] : e5[1]]
        got = ann.nearest(idx, apart, None, 5, True)
        want = exact(idx, apart, None, 5, skip_blank=True)
        assert got is not None
        same_up_to_recall(idx, apart, got, want)
        assert (idx.rows_with(*e5)[got[0]]).all()


def test_graphs_built_before_the_embedder_loads_do_not_crash_the_process(tmp_path):
    """usearch imported before onnxruntime crashes onnxruntime's import (a segfault): a new process whose first act
    on a large store is to open its graphs, then to embed the query, must survive."""
    code = (
        "from lantern.store.ann import AnnParams, BlockGraphs\n"
        "import numpy as np\n"
        "g = BlockGraphs([(0, 8)], AnnParams(min_rows=0))\n"
        "g.add_rows(np.arange(3), np.eye(3, 8, dtype=np.float32), np.arange(8), {(0, 8): np.ones(3, bool)}, 0, 3)\n"
        "from lantern.embed import MiniLMEmbedder\n"
        "print(MiniLMEmbedder().embed(['port 5433']).shape)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "(1, 384)" in done.stdout
