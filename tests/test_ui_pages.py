"""The inspector on a large store (issue 37, item 5): the sessions and compactions lists paged, newest first, pages
that neither repeat nor skip a row; long messages folded with the whole text one click away; the facts page legible
with thousands of fact versions (one page of keys, value labels that never overprint); the Explain page showing the
injection decision and taking another floor. The real app (TestClient) over a real SQLite file with the fake
embedder (tests/conftest.py); the same pages in a real browser are in test_ui_browser.py."""

from __future__ import annotations

import html
import re
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples

pytest.importorskip("fastapi")
pytest.importorskip("jinja2")
from fastapi.testclient import TestClient  # noqa: E402

from lantern import Lantern  # noqa: E402
from lantern.integrations.ui import app as ui_app  # noqa: E402
from lantern.integrations.ui import build_app  # noqa: E402
from lantern.integrations.ui.charts import VALUE_PX, fact_axis, text_width  # noqa: E402
from lantern.integrations.ui.views import PREVIEW_CHARS  # noqa: E402

ORIGIN = "http://127.0.0.1"
T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
SESSIONS = 123
LONG_ANSWER = "\n".join(f"Step {i}: rebuilt shard {i} of the 订单 index and verified {i * 7} rows." for i in range(80))


def _at(minutes: float) -> str:
    return (T0 + timedelta(minutes=minutes)).isoformat()


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """``SESSIONS`` sessions whose last turns are at shuffled times (archived in another order than their times),
    one with a long assistant answer; compactions recorded for 130 of its recoveries."""
    path = tmp_path_factory.mktemp("pages") / "pages.db"
    order = [(i * 37) % SESSIONS for i in range(SESSIONS)]  # a permutation: archive order is not time order
    with Lantern(path) as lt:
        for rank in order:
            lt.archive(
                [
                    {"role": "user", "content": f"Deploy service {rank} to staging", "timestamp": _at(rank * 10)},
                    {
                        "role": "assistant",
                        "content": f"Service {rank} is up on port {7000 + rank}.",
                        "timestamp": _at(rank * 10 + 1),
                    },
                ],
                session=f"s{rank:03d}",
            )
        lt.archive(
            [{"role": "user", "content": "Rebuild the order index."}, {"role": "assistant", "content": LONG_ANSWER}],
            session="long",
        )
        rec = lt.recover("which port is service 5 on", session="s005")
        for _ in range(130):
            lt.record_compaction(rec, session="s005", reason="test", lost=[], source="test")
    return path


@pytest.fixture(scope="module")
def client(db):
    with TestClient(build_app(db), base_url=ORIGIN) as c:
        yield c


def _listed(text: str) -> list[str]:
    return re.findall(r'<td class="name"><a href="/session\?s=([^&"]+)&amp;user=">', text)


def test_sessions_are_paged_newest_first_and_pages_neither_repeat_nor_skip(client, db):
    seen, url, pages = [], "/", 0
    while url:
        text = client.get(html.unescape(url)).text
        pages += 1
        seen += _listed(text)
        older = re.search(r'<a class="button ghost" rel="next" href="([^"]+)">older', text)
        url = older.group(1) if older else None
        assert pages < 10
    assert pages == -(-(SESSIONS + 1) // ui_app.PAGE_SESSIONS)
    assert len(seen) == len(set(seen)) == SESSIONS + 1
    with Lantern(db) as lt:
        last = {r.session: r.last for r in lt.store.session_overview(limit=10_000)}
    times = [last[s] for s in seen]
    assert times == sorted(times, reverse=True)  # newest first, by the session's last turn
    assert seen[1:4] == ["s122", "s121", "s120"]  # "long" (archived now) first, then the latest in time
    for far in (10**30, -5):  # past the end, before the start: a page, never an error
        assert client.get("/", params={"page_no": far}).status_code == 200
        assert client.get("/events", params={"page_no": far}).status_code == 200
        assert client.get("/facts", params={"page_no": far}).status_code == 200
    second = client.get("/", params={"page_no": 1}).text
    assert 'rel="prev" href="/"' in second and f"sessions {ui_app.PAGE_SESSIONS + 1}–" in second


@settings(max_examples=examples(25), deadline=None, suppress_health_check=list(HealthCheck))
@given(limit=st.integers(1, 40), query=st.sampled_from([None, "service", "deploy", "端口", "s01", "nothing-here"]))
def test_session_overview_pages_cover_every_row_once_in_order(db, limit, query):
    """Whatever the page size and filter, the pages joined are the one listing, in its order."""
    with Lantern(db) as lt:
        whole = [(r.user, r.session) for r in lt.store.session_overview(query, limit=10_000)]
        paged, offset = [], 0
        while True:
            page = lt.store.session_overview(query, limit=limit, offset=offset)
            paged += [(r.user, r.session) for r in page]
            if len(page) < limit:
                break
            offset += limit
    assert paged == whole and len(set(whole)) == len(whole)


def test_compactions_are_paged_newest_first(client, db):
    first = client.get("/events").text
    ids = [int(x) for x in re.findall(r'<td class="num"><a href="/event/(\d+)">', first)]
    assert len(ids) == ui_app.PAGE_EVENTS and ids == sorted(ids, reverse=True)
    assert f"compactions 1–{ui_app.PAGE_EVENTS} of 130" in first
    second = client.get("/events", params={"page_no": 1}).text
    rest = [int(x) for x in re.findall(r'<td class="num"><a href="/event/(\d+)">', second)]
    assert sorted(ids + rest) == list(range(1, 131)) and 'rel="next"' not in second


def test_a_long_message_is_folded_with_its_head_shown_and_the_whole_text_one_click_away(client):
    text = client.get("/session", params={"s": "long"}).text
    folded = re.search(
        r'<details class="long"><summary><span class="preview text">(.*?)</span>.*?</summary>'
        r'<div class="text">(.*?)</div></details>',
        text,
        re.S,
    )
    assert folded, text
    preview, whole = html.unescape(folded.group(1)), html.unescape(folded.group(2))
    assert whole == LONG_ANSWER  # the whole text, verbatim, inside the fold
    assert preview.endswith(" …") and LONG_ANSWER.startswith(preview[:-2]) and len(preview) <= PREVIEW_CHARS + 2
    assert f"{len(LONG_ANSWER):,} chars, 80 lines · show all" in text
    assert text.count('<details class="long">') == 1  # the short prompt is not folded


def test_explain_shows_the_injection_decision_and_takes_another_floor(client):
    unrelated = "a haiku about autumn leaves in Kyoto"
    text = client.get("/explain", params={"q": unrelated}).text
    assert "Injection decision: nothing" in text and "below_floor" in text and "min_score 0.4" in text
    assert "empty: nothing would be injected" in text
    off = client.get("/explain", params={"q": unrelated, "min_score": "0"}).text
    assert "Injection decision: the full block" in off and "the decision is off" in off
    assert 'name="min_score" value="0"' in off and '<pre class="block">' in off
    assert client.get("/explain", params={"q": unrelated, "min_score": "-1"}).status_code == 400
    assert client.get("/explain", params={"q": unrelated, "min_score": "x"}).status_code == 400
    ev = client.get("/explain", params={"event": 1}).text  # a compaction's recovery: no floor
    assert "<dt>floor</dt><dd>0: the decision is off</dd>" in ev and 'placeholder="0.0"' in ev
    assert "no_match" in ev  # every turn of its session was live then: excluded


# ------------------------------------------------------------------------------------------------ facts


def _labels(svg: str) -> list[tuple[float, float, float]]:
    """(x, baseline y, estimated width) of every value label of a facts axis."""
    return [
        (float(x), float(y), text_width(html.unescape(t), VALUE_PX))
        for x, y, t in re.findall(r'<text class="value" x="([\d.]+)" y="([\d.]+)">(.*?)</text>', svg)
    ]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    rows=st.lists(
        st.lists(
            st.tuples(
                st.integers(0, 10_000),  # minutes after T0
                st.text(
                    alphabet=st.sampled_from(list("0123456789.:/abcWM_端口地址")),
                    min_size=1,
                    max_size=40,
                ),
            ),
            min_size=1,
            max_size=60,
        ),
        min_size=1,
        max_size=12,
    )
)
def test_fact_value_labels_never_overprint_however_dense(rows):
    """Any number of versions at any times (many in the same minute): in each row the labels, at their estimated
    widths, neither overlap each other nor run past the chart."""
    keys = []
    for k, versions in enumerate(rows):
        versions = sorted(versions)
        vs = []
        for n, (minute, value) in enumerate(versions):
            to = T0 + timedelta(minutes=versions[n + 1][0]) if n + 1 < len(versions) else None
            vs.append((T0 + timedelta(minutes=minute), to, value, to is None))
        keys.append((f"key {k}", vs))
    start, end = T0 - timedelta(hours=1), T0 + timedelta(minutes=11_000)
    svg = str(fact_axis(keys, start, end, None, width=1180))
    by_row: dict[float, list] = {}
    for x, y, w in _labels(svg):
        by_row.setdefault(y, []).append((x, x + w))
    for spans in by_row.values():
        spans.sort()
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:])), spans
        assert spans[-1][1] <= 1180


def test_the_facts_page_pages_thousands_of_versions_by_key(tmp_path):
    """Thousands of versions of hundreds of keys: a page holds ``PAGE_FACT_KEYS`` keys (the changed-last first)
    and their versions only, its chart as tall as that, and the pages together hold every key once."""
    path = tmp_path / "facts.db"
    with Lantern(path) as lt:
        for m in range(10):
            lines = "\n".join(f"SVC_{k}_PORT={5000 + m * 300 + k}" for k in range(300))
            lt.archive([{"role": "user", "content": lines, "timestamp": _at(m * 60)}], session="config")
        records = lt.facts(history=True)
    versions: dict[str, int] = {}
    for r in records:
        versions[r.key_text] = versions.get(r.key_text, 0) + 1
    assert len(records) >= 2000 and len(versions) > 4 * ui_app.PAGE_FACT_KEYS
    with TestClient(build_app(path), base_url=ORIGIN) as c:
        keys, page_no = [], 0
        while True:
            text = c.get("/facts", params={"page_no": page_no}).text
            shown = re.findall(r'<text class="label" x="\d+" y="\d+" text-anchor="end">(.*?)<title>', text)
            assert 0 < len(shown) <= ui_app.PAGE_FACT_KEYS
            height = float(re.search(r'viewBox="0 0 1180 (\d+)"', text).group(1))
            assert height <= 24 + 30 * ui_app.PAGE_FACT_KEYS + 8
            table = text[text.index("<tbody>") : text.index("</tbody>")]
            assert table.count("<tr") == sum(versions[k] for k in shown)  # the shown keys' versions only
            keys += shown
            if 'rel="next"' not in text:
                break
            page_no += 1
    assert len(keys) == len(set(keys)) and set(keys) == set(versions)
