"""Full-text term selection (recover/signals.py select_terms, Store.term_fractions) on a real store."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
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


@settings(max_examples=examples(300), deadline=None)
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
