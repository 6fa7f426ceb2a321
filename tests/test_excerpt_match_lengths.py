"""Excerpts for matches of any length (recover/pack.py ``excerpt``): a query term longer than the excerpt's window
(a 5,000-character token without spaces, a long CJK run, a long path) still gives an excerpt, of that match; many
overlapping candidate terms, huge tokens and tiny windows never crash; the scan stays linear in the text whatever
the terms' lengths. Generated texts and terms, then ``pack`` directly, then a real ``Lantern.recover`` on each
backend.
"""

from __future__ import annotations

import random
import re
import time
from datetime import datetime, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from lantern import Lantern
from lantern.model import Entry
from lantern.recover.pack import (
    ELLIPSIS,
    ELLIPSIS_WIDEN,
    FRAGMENT_JOIN,
    MATCH_CHARS,
    WORD_WIDEN,
    _matches,
    excerpt,
    pack,
)

# the characters a window's start and end may move by when rendered: back to a line start, then off a cut word
SLACK = ELLIPSIS_WIDEN + WORD_WIDEN

_pieces = st.one_of(
    st.text(alphabet=st.sampled_from(list("ab cd\n_./:xyz")), max_size=40),
    st.builds(lambda c, n: c * n, st.sampled_from(["a", "x", "ab", "a/", "数", "数据", "é"]), st.integers(0, 6000)),
    st.text(alphabet=st.sampled_from(list("数据库端口服务器")), max_size=3000),  # a long CJK run
    st.just("\n"),
    st.just(" "),
)


@st.composite
def text_and_terms(draw):
    """A text of random pieces (huge tokens, CJK runs, short words) and terms mostly cut out of it, so they match:
    some longer than any window, some overlapping one another."""
    text = "".join(draw(st.lists(_pieces, min_size=1, max_size=8)))
    terms = []
    for _ in range(draw(st.integers(0, 5))):
        if text and draw(st.booleans()):
            start = draw(st.integers(0, len(text) - 1))
            terms.append(text[start : start + draw(st.integers(1, 7000))])
        else:
            terms.append(draw(st.sampled_from(["a", "aa", "aaa", "ab", "数据", "据库", "x" * 5000, "a/" * 300, "zz"])))
    return text, terms


def _fragments(out: str) -> list[str]:
    return [f.removeprefix(ELLIPSIS).removesuffix(ELLIPSIS) for f in out.split(FRAGMENT_JOIN)]


@settings(max_examples=examples(300), deadline=None)
@given(data=text_and_terms(), width=st.integers(-3, 7000))
def test_an_excerpt_of_any_match_lengths_fits_and_is_the_text(data, width):
    text, terms = data
    out = excerpt(text, terms, width)
    assert len(out) <= max(width, 0)
    if len(text) <= width:
        assert out == text
    for fragment in _fragments(out):
        assert fragment in text


@settings(max_examples=examples(300), deadline=None)
@given(data=text_and_terms(), width=st.integers(1, 7000))
def test_an_excerpt_shows_a_match_of_its_one_term_even_one_longer_than_the_window(data, width):
    """With one term that matches, the excerpt holds one of its matches: whole when the window has room for it and
    the rendering's slack on each side; else the window's worth of it from its start (short of that slack)."""
    text, terms = data
    if not terms or len(text) <= width:
        return
    matches, _, _ = _matches(text, terms[:1])
    inner = width - 2 * len(ELLIPSIS)
    if not matches or inner <= 0:
        return
    out = excerpt(text, terms[:1], width)
    shown = [text[s + WORD_WIDEN : max(s + WORD_WIDEN, min(e, s + inner) - SLACK)] for s, e, _ in matches]
    assert any(part in out for part in shown), (out[:80], len(text), width)
    if any(e - s <= inner - 2 * SLACK for s, e, _ in matches):
        assert any(text[s:e] in out for s, e, _ in matches if e - s <= inner - 2 * SLACK)


def test_a_term_longer_than_the_window_at_the_end_of_the_text():
    """The case that raised IndexError: the last match of the text longer than the window. The window is centred
    on the term's start (its first MATCH_CHARS characters): half of it or more shows the term."""
    token = "k" * 5000
    for text in ("word " * 300 + token, token, "数据库" * 1000 + token, "x\n" * 50 + token + "\n"):
        for width in (1, 2, 3, 50, 300, 4999, 5001):
            out = excerpt(text, [token], width)
            assert len(out) <= width
            if width >= 300:
                assert "k" * ((width - 2 * len(ELLIPSIS)) // 2 - SLACK) in out
    cjk = "数据库端口服务器地址" * 800
    out = excerpt("前言。" * 200 + cjk, [cjk], 600)
    assert len(out) <= 600 and cjk[: (600 - 2 * len(ELLIPSIS)) // 2 - SLACK] in out


def test_many_overlapping_terms_on_a_run():
    text = "a" * 20_000 + " b " + "a" * 20_000
    terms = ["a" * n for n in (1, 2, 3, 5, 8, 13, 100, 500, 5000, 30_000)] + ["b"]
    for width in (1, 10, 200, 1000, 6000):
        out = excerpt(text, terms, width)
        assert len(out) <= width and all(f in text for f in _fragments(out))


def _cpu(fn, *args) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.thread_time()
        fn(*args)
        best = min(best, time.thread_time() - t0)
    return best


def test_the_match_scan_is_linear_in_the_text_whatever_the_term_length():
    """A long term whose every prefix recurs all over the text: a regex compares it at each position. Matched by
    its first MATCH_CHARS characters, 4x the text costs well under 16x the time (a scan quadratic in the text
    does), and a 5,000-character term costs about what a 200-character one does."""
    unit = "a/" * (MATCH_CHARS // 2 - 1) + "b/"  # MATCH_CHARS - 2 characters of the term's prefix, then a miss
    long_term, short_term = "a/" * 2500 + "c", "a/" * 100 + "c"

    def text(n: int) -> str:
        return unit * (n // len(unit)) + long_term

    small, large = _cpu(_matches, text(50_000), [long_term]), _cpu(_matches, text(200_000), [long_term])
    assert large < 0.008 or large / max(small, 0.002) < 8, (small, large)
    short = _cpu(_matches, text(200_000), [short_term])
    assert large < 0.008 or large / max(short, 0.002) < 4, (short, large)


# ------------------------------------------------------------------------------------------------ packing
def _entry(i: int, text: str) -> Entry:
    return Entry(
        id=i,
        session=f"s{i % 2}",
        turn=i,
        text=text,
        summary=text[:200],
        tags=[],
        memory_type="episodic",
        importance=0.5,
        content_hash=str(i),
        time=datetime(2026, 11, 20, 9, i % 60, tzinfo=timezone.utc),
    )


@settings(max_examples=examples(150), deadline=None)
@given(
    texts=st.lists(text_and_terms(), min_size=1, max_size=5),
    budget=st.integers(0, 8000),
    group=st.booleans(),
    lookahead=st.integers(0, 3),
)
def test_pack_with_any_match_lengths_stays_within_its_budget(texts, budget, group, lookahead):
    entries = [_entry(i + 1, text) for i, (text, _) in enumerate(texts)]
    terms = [t for _, ts in texts for t in ts]
    res = pack(iter(entries), budget, terms, group=group, lookahead=lookahead)
    assert len(res.text) <= budget
    for p in res.packed:
        assert p.text in res.text


# ------------------------------------------------------------------------------------------------ the store
def test_recover_a_turn_by_a_token_longer_than_the_budget(db_location):
    """A real store on each backend: a 5,000-character identifier (its ``_`` parts are query terms too) and a
    3,000-character CJK run, each asked for by a query holding it whole, recovered at budgets smaller than the
    turn: the block holds a long piece of it."""
    rng = random.Random(5)
    # 14 symbols: fewer than a base64 run has (text/media.py), so the archive keeps it as text
    token = "".join(rng.choice("acegikmoqsuwy_") for _ in range(5000))
    cjk = "".join(rng.choice("数据库端口服务器地址配置迁移集群") for _ in range(3000))
    turns = [
        ("Here is the build id, keep it.", f"The build id is {token} and it ends the log."),
        ("把这段记下来。", f"记录：{cjk}。"),
        ("Rename the helper in utils.", "Renamed format_money to format_amount."),
        ("What does the cron job do?", "It exports invoices nightly at 02:00 UTC."),
    ]
    messages = [{"role": r, "content": c} for q, a in turns for r, c in (("user", q), ("assistant", a))]
    with Lantern(db_location, embedder="minilm") as memory:
        memory.archive(messages, session="long")
        for query, long, run in (
            (f"which build id was {token}?", token, r"[a-y_]{60,}"),
            (f"{cjk}是什么？", cjk, r"[数据库端口服务器地址配置迁移集群]{60,}"),
        ):
            for budget in (300, 1000, 4000):
                rec = memory.recover(query, budget=budget, min_score=0)
                assert len(rec.text) <= budget
                pieces = re.findall(run, rec.text)
                assert pieces and all(p in long for p in pieces), (budget, rec.text[:300])
