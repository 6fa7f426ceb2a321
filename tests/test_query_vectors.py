"""Query vectors embedded ahead (recover/query_vectors.py): the prefetched vector is the one embedding the query
gives, bit for bit; it is taken once; a recovery using it equals one without; errors reach the taker unchanged."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from lantern import Lantern
from lantern.embed import MiniLMEmbedder
from lantern.recover.query_vectors import QueryVectors
from samples import PORT_CONVERSATION

MODEL = MiniLMEmbedder()


class Recording:
    def __init__(self, inner, error: BaseException | None = None):
        self.inner, self.id, self.dim, self.error = inner, inner.id, inner.dim, error
        self.calls: list[tuple[str, list[str]]] = []

    def embed(self, texts):
        self.calls.append((threading.current_thread().name, list(texts)))
        if self.error is not None:
            raise self.error
        return self.inner.embed(texts)


def test_prefetched_vector_is_the_embedding_and_is_taken_once():
    rec = Recording(MODEL)
    q = QueryVectors(lambda: rec)
    text = "Which port does the billing database listen on?"
    q.prefetch(text)
    q.prefetch(text)  # already prefetched: not embedded twice
    got = q.embed_query([text])
    assert got.shape == (1, 384) and np.array_equal(got[0], MODEL.embed([text])[0])
    assert len(rec.calls) == 1 and rec.calls[0][0].startswith("lantern-query")
    again = q.embed_query([text])  # taken: a repeated query is embedded again, in the caller's thread
    assert np.array_equal(again, got) and len(rec.calls) == 2 and rec.calls[1][0] == threading.current_thread().name
    many = q.embed([text, "other"])  # more than one text: straight to the embedder
    assert np.array_equal(many, MODEL.embed([text, "other"])) and len(rec.calls) == 3
    with pytest.raises(TypeError):
        q.embed(text)  # a bare string is refused as the embedder refuses it
    q.close()


def test_prefetch_error_reaches_the_embed_that_takes_it():
    error = RuntimeError("model crashed")
    q = QueryVectors(lambda: Recording(MODEL, error))
    q.prefetch("a query")
    with pytest.raises(RuntimeError) as info:
        q.embed_query(["a query"])
    assert info.value is error
    q.close()


def test_prefetches_waiting_are_bounded():
    q = QueryVectors(lambda: MODEL, size=2)
    for t in ("one", "two", "three", "four"):
        q.prefetch(t)
    q.close()  # let the worker finish
    assert len(q._prefetched) <= 2


def test_recovery_with_a_prefetched_query_equals_one_without(tmp_path):
    with Lantern(tmp_path / "q.db", embedder=MODEL) as lt:
        lt.archive(PORT_CONVERSATION, session="s")
        query = "which port does postgres listen on"
        plain = lt.explain(query, session="s")
        lt.queries.prefetch(query)
        ahead = lt.explain(query, session="s")
        assert not lt.queries._prefetched  # the prefetched vector was taken
        assert ahead.text == plain.text and "5433" in ahead.text
        assert [(c.entry.id, c.rrf, c.verdict) for c in ahead.candidates] == [
            (c.entry.id, c.rrf, c.verdict) for c in plain.candidates
        ]


def test_prefetch_concurrent_with_a_batch_embedding_gives_the_same_vectors():
    """The proxy embeds a query ahead while the previous request's archive embeds its turns in another thread:
    one MiniLM session used by two threads at once gives the vectors each gives alone."""
    texts = [f"turn {i}: the billing database listens on port {5400 + i}." for i in range(48)]
    queries = [f"which port does service {i} use?" for i in range(6)]
    alone_batch, alone_queries = MODEL.embed(texts), [MODEL.embed([q])[0] for q in queries]
    q = QueryVectors(lambda: MODEL)
    for text in queries:
        q.prefetch(text)
    together = MODEL.embed(texts)  # runs while the worker embeds the queries
    assert np.array_equal(together, alone_batch)
    assert all(np.array_equal(q.embed_query([t])[0], v) for t, v in zip(queries, alone_queries))
    q.close()


def test_routed_store_queries_fill_both_blocks_through_the_prefetch(tmp_path):
    """With the routed embedder, the read path's query vector is embed_query's (both blocks once the store holds
    Chinese and English entries), and a prefetched query is the same vector as one computed on demand."""
    from lantern import Lantern
    from lantern.embed import RoutedEmbedder, embed_query

    lt = Lantern(tmp_path / "r.db", embedder="routed")
    try:
        lt.archive(
            [
                {"role": "user", "content": "the staging database listens on port 5433"},
                {"role": "user", "content": "测试数据库的端口是 6543，密码在保险箱里"},
            ],
            session="s",
        )
        lt.index.refresh()
        q = "which port did we use for the database?"
        expected = embed_query(lt.embedder, [q], lt.index.block_occupied)[0]
        a, b = RoutedEmbedder.blocks["use"]
        assert np.any(expected[a:b] != 0)  # the English query reaches the Chinese block too
        lt.queries.prefetch(q)
        assert np.array_equal(lt.queries.embed_query([q], lt.index.block_occupied)[0], expected)
        assert np.array_equal(lt.queries.embed_query([q], lt.index.block_occupied)[0], expected)  # on demand
    finally:
        lt.close()


def test_a_recovery_embeds_its_query_in_the_worker_while_the_full_text_runs(tmp_path):
    """``rank.rank`` starts the query embedding in the worker thread before the full-text signals and takes it
    after them; the ranking equals the one of the plain embedder called in the calling thread."""
    from lantern.recover import pipeline

    rec = Recording(MODEL)
    with Lantern(tmp_path / "w.db", embedder=rec) as lt:
        lt.archive(PORT_CONVERSATION, session="s")
        query = "which port does postgres listen on"
        rec.calls.clear()
        ahead = lt.explain(query, session="s")
        assert [c[1] for c in rec.calls] == [[query]] and rec.calls[0][0].startswith("lantern-query")
        plain = pipeline.recover(lt.store, lt.index, MODEL, lt.config, query, budget=lt.config.budget, session="s")
        assert ahead.text == plain.text and "5433" in ahead.text
        assert [(c.entry.id, c.rrf, c.ranks) for c in ahead.candidates] == [
            (c.entry.id, c.rrf, c.ranks) for c in plain.candidates
        ]


def test_a_split_prefetch_embeds_e5_in_the_worker_and_the_main_part_in_the_taker(tmp_path):
    """routed, a store with e5 rows: the worker embeds the e5 block only, ``first_stage`` the main part in the
    calling thread (once), ``vector`` joins them into embed_query's vector bit for bit; a Chinese recovery ranking
    the main part early equals one computed without the prefetch, candidate for candidate."""
    from lantern.embed import RoutedE5Embedder, embed_query
    from lantern.recover import pipeline

    class Threads(RoutedE5Embedder):
        def __init__(self):
            super().__init__()
            self.seen = []

        def embed_query_main(self, texts, occupied=None):
            self.seen.append(("main", threading.current_thread().name))
            return super().embed_query_main(texts, occupied)

        def embed_query_apart(self, texts, occupied=None):
            self.seen.append(("apart", threading.current_thread().name))
            return super().embed_query_apart(texts, occupied)

    routed = Threads()
    q = QueryVectors(lambda: routed)
    text = "测试数据库的端口是多少？"
    assert q.first_stage(text) is None  # not prefetched
    q.prefetch(text)
    first = q.first_stage(text)
    assert q.first_stage(text) is first  # embedded once
    whole = q.vector(text)
    a, b = RoutedE5Embedder.blocks["e5"]
    assert not first[a:b].any() and whole[a:b].any() and np.array_equal(first[:a], whole[:a])
    assert np.array_equal(whole, embed_query(routed, [text])[0]) and not q._prefetched
    me = threading.current_thread().name
    assert routed.seen[0][0] == "apart" and routed.seen[0][1].startswith("lantern-query")
    assert ("main", me) in routed.seen[:2]
    assert q.first_stage(text) is None  # taken
    q.prefetch(text, lambda start, stop: (start, stop) != (a, b))  # no e5 rows: not split, one vector
    assert q.first_stage(text, lambda start, stop: (start, stop) != (a, b)) is None
    assert not q.vector(text, lambda start, stop: (start, stop) != (a, b))[a:b].any()
    q.close()

    conversation = [
        {"role": "user", "content": "测试数据库的端口是 6543，密码在保险箱里"},
        {"role": "assistant", "content": "好的，测试库用 6543 端口。"},
        {"role": "user", "content": "生产数据库在 10.0.0.5 上，端口 5433"},
        {"role": "user", "content": "明天下午三点开会讨论迁移计划"},
    ]
    with Lantern(tmp_path / "zh.db", embedder=routed) as lt:
        lt.archive(conversation, session="s")
        query = "之前说的测试数据库端口是多少？"
        ahead = lt.explain(query, session="s")
        plain = pipeline.recover(lt.store, lt.index, routed, lt.config, query, budget=lt.config.budget, session="s")
        assert "6543" in ahead.text and ahead.text == plain.text
        assert [(c.entry.id, c.rrf, c.ranks) for c in ahead.candidates] == [
            (c.entry.id, c.rrf, c.ranks) for c in plain.candidates
        ]


def test_a_failed_split_prefetch_still_gives_the_main_part_and_raises_to_the_taker():
    from lantern.embed import E5Embedder, RoutedE5Embedder

    error = RuntimeError("engine failed")

    class Broken(E5Embedder):
        def embed_query(self, texts, occupied=None):
            raise error

    q = QueryVectors(lambda: RoutedE5Embedder(e5=Broken()))
    q.prefetch("端口是多少？")
    first = q.first_stage("端口是多少？")  # the main part is the taker's own
    assert first is not None and first.any()
    with pytest.raises(RuntimeError) as info:
        q.vector("端口是多少？")
    assert info.value is error
    q.close()


def test_the_read_path_prefetches_for_its_own_block_occupancy(tmp_path):
    """A store with an English and a Chinese session, an English query in the English session: the read path embeds
    only the blocks that session uses (MiniLM), and prefetches for that same occupancy, so the prefetched vector is
    the one taken and neither USE's nor e5's block is embedded (a prefetch for the whole store's blocks would embed
    both, in vain, and the query again)."""
    from lantern.embed import E5Embedder, RoutedE5Embedder

    class Counting(E5Embedder):
        calls = 0

        def embed_query(self, texts, occupied=None):
            Counting.calls += 1
            return super().embed_query(texts, occupied)

    routed = RoutedE5Embedder(e5=Counting())
    with Lantern(tmp_path / "mixed.db", embedder=routed) as lt:
        lt.archive([{"role": "user", "content": "the staging database listens on port 5433"}], session="en")
        lt.archive([{"role": "user", "content": "测试数据库的端口是 6543，密码在保险箱里"}], session="zh")
        Counting.calls = 0
        taken = []
        vector = lt.queries.vector

        def take(text, occupied=None):
            taken.append(bool(lt.queries._prefetched))
            return vector(text, occupied)

        lt.queries.vector = take
        rec = lt.recover("which port does the staging database use?", session="en")
        assert "5433" in rec.text and taken == [True] and not lt.queries._prefetched
        assert Counting.calls == 0
        lt.recover("which port does the staging database use?")  # the whole store: e5 reaches the Chinese turn
        assert Counting.calls == 1
