"""Why a recovery is empty, read off that one recovery (recover/empty.py): the least budget that packs an entry is
found by packing again, O(log budget) packings, and is exact; an as-of time before every turn names when they
start; no candidate names the filter that left every entry out. The CLI's words for them: tests/test_cli.py."""

from __future__ import annotations

import math
from datetime import datetime, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from lantern import Lantern
from lantern.recover.empty import BUDGET_LIMIT, least_budget


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(0, 50_000), st.integers(1, 2 * BUDGET_LIMIT))
def test_the_least_budget_is_the_threshold_of_any_monotone_packing(budget, threshold):
    """For every packing that holds from some budget on (packing more room never packs less) and did not hold at
    ``budget``, the answer is that threshold exactly, found in O(log) packings; None only past the limit."""
    threshold = max(threshold, budget + 1)  # the recovery at ``budget`` came back empty
    calls: list[int] = []

    def packs(b: int) -> bool:
        calls.append(b)
        return b >= threshold

    got = least_budget(packs, budget)
    assert got == threshold or (got is None and threshold > BUDGET_LIMIT // 2), (budget, threshold, got)
    assert len(calls) <= 2 * math.ceil(math.log2(BUDGET_LIMIT)) + 2, len(calls)


def test_an_empty_recovery_carries_its_own_diagnosis_without_a_second_recovery(tmp_path, monkeypatch):
    """One ``recover`` at a budget too small for any entry carries the least budget that packs one, and
    ``why_empty`` reads it without ranking again; asked as of a time before every turn, the recovery carries when
    the turns start; a session that holds nothing is named."""
    from lantern.recover import pipeline

    with Lantern(tmp_path / "e.db") as lt:
        for n in range(4):
            lt.archive([{"role": "user", "content": f"service{n} listens on port {7000 + n}"}], f"s{n}")
        ranked = []
        real = pipeline.rank
        monkeypatch.setattr(pipeline, "rank", lambda *a, **k: ranked.append(1) or real(*a, **k))
        small = lt.recover("which port does service2 listen on?", budget=60)
        assert not small.text and small.reason == "budget" and small.least_budget is not None
        assert len(ranked) == 1
        assert f"use --budget {small.least_budget} or more" in lt.why_empty(small)
        assert len(ranked) == 1  # the diagnosis ranked nothing again
        assert lt.recover("which port does service2 listen on?", budget=small.least_budget).text

        then = datetime(2001, 1, 1, tzinfo=timezone.utc)
        early = lt.recover("service2 port", as_of=then)
        assert not early.text and early.later_from is not None and early.later_from > then
        said = lt.why_empty(early, as_of="2001-01-01")
        assert "no archived turn is older than the --as-of time 2001-01-01" in said, said

        nowhere = lt.recover("service2 port", session="nope")
        assert "in session 'nope' (4 entries are in other sessions)" in lt.why_empty(nowhere, session="nope")


QUERIES = st.one_of(st.just(""), st.just("   "), st.sampled_from(["service2 port", "which port?", "zebra quartz"]))


@settings(max_examples=examples(40), deadline=None)
@given(
    QUERIES,
    st.sampled_from([None, "s1", "nope"]),
    st.sampled_from([None, 20, 60, 6000]),
    st.sampled_from([None, 0.0, 0.99]),
    st.booleans(),
)
def test_why_empty_is_a_sentence_of_its_own_and_the_cli_line_is_built_from_it(
    tmp_path_factory, query, session, budget, floor, early
):
    """For every empty recovery (an empty query, a session holding nothing, a budget too small, a floor above every
    candidate, an as-of time before every turn): ``Lantern.why_empty`` is a sentence of its own (no leading
    separator or space, no trailing space), and ``continuation`` makes the CLI's "nothing recovered" line from it
    (": WHY", or " (REASON): WHY" when the floor held everything back)."""
    from lantern.cli.render import continuation

    path = tmp_path_factory.getbasetemp() / "why_empty.db"
    with Lantern(path) as lt:
        if not lt.stats()["entries"]:
            for n in range(4):
                lt.archive([{"role": "user", "content": f"service{n} listens on port {7000 + n}"}], f"s{n}")
        as_of = datetime(2001, 1, 1, tzinfo=timezone.utc) if early else None
        rec = lt.recover(query, session=session, budget=budget, min_score=floor, as_of=as_of)
        if rec.text:
            return
        why = lt.why_empty(rec, session=session, as_of="2001-01-01" if early else None)
    assert why == why.strip() and not why.startswith((":", "(")), repr(why)
    line = continuation(rec, why)
    assert line in ("", f": {why}", f" ({rec.reason}): {why}") and (line == "") == (why == "")
