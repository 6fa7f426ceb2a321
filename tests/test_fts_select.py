"""Full-text term selection (recover/signals.py select_terms, Store.term_fractions) on a real store."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lantern import Lantern
from lantern.recover import signals


@pytest.fixture()
def lt(tmp_path):
    with Lantern(tmp_path / "f.db") as lt:
        msgs = []
        for i in range(40):  # "renderer" in every turn, "invoice" in a quarter, "quokka" in one
            extra = " invoice" if i % 4 == 0 else ""
            extra += " quokka shard" if i == 17 else ""
            msgs += [
                {"role": "user", "content": f"Turn {i}: check the renderer{extra}."},
                {"role": "assistant", "content": f"Checked renderer part {i}{extra}."},
            ]
        lt.archive(msgs, session="s")
        yield lt


def test_term_fractions_count_matching_rows(lt):
    q = [signals.quote(t) for t in ("renderer", "invoice", "quokka", "absent-word")]
    f = lt.store.term_fractions(q, 2000)
    assert f[q[0]] == 1.0 and f[q[1]] == pytest.approx(10 / 40) and f[q[2]] == pytest.approx(1 / 40) and f[q[3]] == 0.0
    # the newest rows only: a sample of 4 rows holds no quokka (turn 17) and one invoice (turn 36)
    small = Lantern(lt.path)
    g = small.store.term_fractions(q, 4)
    assert g[q[2]] == 0.0 and g[q[1]] == pytest.approx(1 / 4) and g[q[0]] == 1.0
    small.close()


def test_select_terms_drops_common_terms_keeps_order_and_budget():
    f = {signals.quote(t): v for t, v in {"a1": 0.9, "b2": 0.3, "c3": 0.01, "d4": 0.2, "e5": 0.02, "f6": 0.1}.items()}
    kept = signals.select_terms(["a1", "b2", "c3", "d4", "e5", "f6", "***"], f)
    assert "a1" not in kept and "***" not in kept  # over half the rows; no word character
    assert kept == [t for t in ["b2", "c3", "d4", "e5", "f6"] if t in kept]  # query order
    assert {"c3", "e5", "f6", "d4"} <= set(kept)  # the rarest FTS_MIN_TERMS always
    assert sum(f[signals.quote(t)] for t in kept) <= max(signals.FTS_POSTINGS_BUDGET, 0.33)
    assert signals.select_terms(["x9"], {}) == ["x9"]  # unknown fraction: kept


def test_fulltext_ranks_the_rare_term_first(lt):
    lt.index.refresh()
    terms = ["renderer", "quokka", "check"]
    positions, _ = signals.fulltext(lt.store, lt.index, terms, None, 10)
    top = lt.store.entries([int(lt.index.ids[positions[0]])])
    assert "quokka" in next(iter(top.values())).text
    # "renderer" is in every row: it was not part of the query, so rows matching only it are not ranked
    assert len(positions) < lt.store.count()


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.from_regex(r"[a-z]{1,3}[0-9]", fullmatch=True), st.floats(0.0, 1.0), min_size=1, max_size=12),
    st.integers(1, 10_000_000),
)
def test_select_terms_bounds_the_postings_at_every_corpus_size(fractions, rows):
    """The kept terms match at most FTS_MAX_POSTINGS rows (estimated) whatever the corpus size; where that bound
    does not bind (a small corpus), the selection is the corpus-relative one."""
    terms = list(fractions)
    f = {signals.quote(t): v for t, v in fractions.items()}
    kept = signals.select_terms(terms, f, rows)
    assert kept == [t for t in terms if t in kept]
    assert sum(f[signals.quote(t)] for t in kept) * rows <= signals.FTS_MAX_POSTINGS * (1 + 1e-9)
    unbounded = signals.select_terms(terms, f)
    assert set(kept) <= set(unbounded)
    if sum(f[signals.quote(t)] for t in unbounded) * rows <= signals.FTS_MAX_POSTINGS:
        assert kept == unbounded
    rarest = sorted(unbounded, key=lambda t: f[signals.quote(t)])  # kept: a prefix of the rarest first
    assert set(kept) == set(rarest[: len(kept)])


VOCAB = [f"w{i}" for i in range(12)]


@settings(max_examples=12, deadline=None)
@given(
    docs=st.lists(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=12), min_size=3, max_size=25),
    plain=st.sets(st.sampled_from(VOCAB[:6]), min_size=1, max_size=3),
    extra=st.sets(st.sampled_from(VOCAB[6:]), min_size=1, max_size=3),
    n=st.integers(1, 30),
)
def test_the_expanded_query_is_the_sum_of_its_two_halves(tmp_path_factory, docs, plain, extra, n):
    """prf.expanded: BM25 sums over a query's terms, so adding the expansion terms' scores to the plain query's gives
    the expanded query's scores; every row of the expanded top ``n`` that both halves' top ``n`` hold scores exactly
    as in the one expanded query (term selection off: every term searched)."""
    from lantern.recover import prf

    with Lantern(tmp_path_factory.mktemp("prf") / "p.db", embedder="minilm") as lt:
        lt.archive([{"role": "user", "content": " ".join(d)} for d in docs], session="s")
        lt.index.refresh()
        everything = 10_000
        old, signals.FTS_SELECT_MIN_ROWS = signals.FTS_SELECT_MIN_ROWS, 10**9
        try:
            whole = signals.fulltext(lt.store, lt.index, sorted(plain | extra), None, everything)
            halves = [signals.fulltext(lt.store, lt.index, sorted(t), None, n) for t in (plain, extra)]
            full_halves = [signals.fulltext(lt.store, lt.index, sorted(t), None, everything) for t in (plain, extra)]
        finally:
            signals.FTS_SELECT_MIN_ROWS = old
        exact = dict(zip(whole[0].tolist(), whole[1].tolist()))
        summed = prf.expanded(*full_halves, everything)
        assert dict(zip(summed[0].tolist(), summed[1].tolist())) == pytest.approx(exact, rel=1e-4, abs=1e-5)
        top = prf.expanded(*halves, n)
        assert len(top[0]) <= n
        in_both = set(halves[0][0].tolist()) & set(halves[1][0].tolist())
        for pos, score in zip(*top):
            if int(pos) in in_both:
                assert score == pytest.approx(exact[int(pos)], rel=1e-4, abs=1e-5)
