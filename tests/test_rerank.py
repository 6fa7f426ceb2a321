"""LANTERN-Rerank (recover/rerank.py): the listwise call, its parsing, its bounds, and every fallback shape.

Failure shapes come from a local server speaking the OpenAI API (tests/openai_fake.py); the working path runs
against the real local model in tests/test_llm_real.py.
"""

from __future__ import annotations

import json
import random
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from lantern import Lantern
from lantern.config import Config
from lantern.llm import LLMClient, LLMSettings
from lantern.recover.rerank import language, parse_ids, prompt
from openai_fake import FakeLLM, answer, raw, slow, status

TURNS = [
    {"role": "user", "content": "Which port does the billing database listen on?"},
    {"role": "assistant", "content": "The billing database listens on port 5433 in docker-compose.yml."},
    {"role": "user", "content": "And the cache?"},
    {"role": "assistant", "content": "Redis runs on port 6380 with maxmemory 2gb."},
    {"role": "user", "content": "Where are the migrations?"},
    {"role": "assistant", "content": "The migrations live in db/migrations/0001_init.sql."},
    {"role": "user", "content": "What did we name the queue?"},
    {"role": "assistant", "content": "The queue is called invoices-out on RabbitMQ port 5672."},
]
QUERY = "which port does the billing database use?"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("rerank") / "m.db"
    with Lantern(path, config=Config(reinforce=False)) as lt:
        lt.archive(TURNS, session="s1")
    return path


@pytest.fixture()
def lantern(store):
    with Lantern(store, config=Config(reinforce=False)) as lt:
        yield lt


def _ids(rec) -> list[int]:
    return [e.id for e in rec.entries]


# ------------------------------------------------------------------------------------------------ parsing
SHOWN = {3, 7, 12}


@pytest.mark.parametrize(
    "text, ids",
    [
        ('{"ids": [12, 3]}', [12, 3]),
        ("[7, 12, 3]", [7, 12, 3]),
        ('Sure! Here is the order: {"ids": ["12", "7"]} hope this helps', [12, 7]),
        ("The most useful are [12, 3].", [12, 3]),
        ('{"ids": []}', []),
    ],
)
def test_answers_that_name_shown_ids_parse(text, ids):
    assert parse_ids(text, SHOWN) == ids


@pytest.mark.parametrize(
    "text, why",
    [
        ("I think turn twelve is best.", "no list"),
        ('{"order": "12, 3"}', "no list"),
        ('{"ids": [12, 99]}', "not a candidate"),
        ('{"ids": [12, 12]}', "twice"),
        ('{"ids": [true]}', "not a candidate"),
        ('{"ids": [1.5]}', "not a candidate"),
        ("", "no list"),
    ],
)
def test_answers_that_do_not_parse_say_why(text, why):
    with pytest.raises(ValueError, match=why):
        parse_ids(text, SHOWN)


def test_generated_answers_parse_exactly_when_they_name_distinct_shown_ids():
    """The class: any list of ids, wrapped any way; valid iff every id was shown and none repeats."""
    rnd = random.Random(7)
    shown = set(range(1, 30))
    for _ in range(2000):
        ids = [rnd.randint(1, 40) for _ in range(rnd.randint(0, 8))]
        body = rnd.choice(['{{"ids": {}}}', "{}", "Answer: {} done", '```json\n{{"ids": {}}}\n```'])
        text = body.format(json.dumps(ids))
        valid = all(i in shown for i in ids) and len(set(ids)) == len(ids)
        if valid:
            assert parse_ids(text, shown) == ids
        else:
            with pytest.raises(ValueError):
                parse_ids(text, shown)


_OPEN_CLOSE = {"[": "]", "{": "}"}


@settings(max_examples=examples(200), deadline=None)
@given(
    opens=st.lists(st.sampled_from(["[", '{"ids": ', '{"a": [', '["', "[[", "{"]), min_size=0, max_size=40),
    depth=st.sampled_from([1, 10, 63, 64, 65, 500, 5_000, 100_000]),
    closed=st.booleans(),
    inner=st.sampled_from(["[12, 3]", '"12"', "", "7", '{"ids": [3]}']),
    tail=st.text(max_size=20),
)
def test_hostile_answers_parse_to_shown_ids_or_a_valueerror_and_nothing_else(opens, depth, closed, inner, tail):
    """The class of issue 38, item 5: nesting of any depth (100,000 brackets raised RecursionError and lost the
    block), opened any way, closed or not, with text around it. ``parse_ids`` returns shown ids or raises
    ValueError; the answer's nesting is bounded (``lantern.llm.MAX_ANSWER_DEPTH``)."""
    prefix = "".join(opens) + "[" * depth
    closing = "]" * depth + "".join(_OPEN_CLOSE.get(o[0], "") for o in reversed(opens)) if closed else ""
    text = prefix + inner + closing + tail
    try:
        ids = parse_ids(text, SHOWN)
    except ValueError:
        return
    assert set(ids) <= SHOWN


@settings(max_examples=examples(200), deadline=None)
@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
        max_leaves=30,
    ),
    wraps=st.integers(0, 80),
)
def test_parse_answer_is_json_loads_within_its_bounds(value, wraps):
    from lantern.llm import MAX_ANSWER_DEPTH, parse_answer

    text = "[" * wraps + json.dumps(value) + "]" * wraps

    def depth(v) -> int:
        if isinstance(v, list):
            return 1 + max(map(depth, v), default=0)
        if isinstance(v, dict):
            return 1 + max(map(depth, v.values()), default=0)
        return 0

    if wraps + depth(value) <= MAX_ANSWER_DEPTH:
        assert parse_answer(text) == json.loads(text)
    else:
        with pytest.raises(ValueError, match="nested deeper"):
            parse_answer(text)
    with pytest.raises(ValueError, match="over 10 bytes"):
        parse_answer(" " * 11, max_bytes=10)


# ------------------------------------------------------------------------------------------------ the prompt
def test_the_prompt_stays_within_its_bound_however_many_and_long_the_candidates():
    rnd = random.Random(3)
    for n in (1, 5, 20, 60):
        shown = [(i, "word " * rnd.randint(10, 3000)) for i in range(n)]
        messages = prompt("what port " * 50, shown, 8_000)
        total = sum(len(m["content"]) for m in messages)
        assert total <= 8_000 + 40 * n  # each excerpt keeps at least 40 characters
        assert all(f"[{i}]" in messages[1]["content"] for i, _ in shown)


def test_a_chinese_query_gets_the_chinese_prompt_and_an_english_one_the_english_prompt():
    assert language("我们之前用的数据库端口是多少？") == "zh"
    assert language("which port did we use?") == "en"
    zh = prompt("我们之前用的数据库端口是多少？", [(1, "端口是 5433")], 8000)
    en = prompt("which port did we use?", [(1, "port 5433")], 8000)
    assert "问题" in zh[1]["content"] and "记录" in zh[0]["content"]
    assert "Question" in en[1]["content"] and "turns" in en[0]["content"]


# ------------------------------------------------------------------------------------------------ the stage
def test_a_valid_answer_reorders_the_block_and_counts_one_call(lantern):
    plain = lantern.recover(QUERY, budget=6000)
    order = list(reversed(_ids(plain)))
    with FakeLLM([answer(json.dumps({"ids": order}), 120, 9)]) as fake:
        rec = lantern.recover(QUERY, budget=6000, rerank=True, llm=fake.settings())
    assert rec.reranked and rec.rerank.usage.calls == 1
    assert rec.rerank.usage.tokens_in == 120 and rec.rerank.usage.tokens_out == 9
    assert _ids(rec)[: len(order)] == order
    body = fake.requests[0]
    assert body["model"] == "fake-model" and body["response_format"]["type"] == "json_schema"
    shown_ids = body["response_format"]["json_schema"]["schema"]["properties"]["ids"]["items"]["enum"]
    assert set(order) <= set(shown_ids) and len(shown_ids) <= lantern.config.rerank_top_n
    out = rec.to_json()
    assert out["reranked"] is True and out["llm_calls"] == 1
    cands = {c.entry.id: c for c in rec.candidates}
    assert [cands[i].rerank for i in order] == list(range(1, len(order) + 1))


FAILURES = {
    "not parseable": [answer("I cannot decide.")],
    "not a candidate": [answer('{"ids": [999999]}')],
    "duplicate": [answer('{"ids": [1, 1]}')],
    "HTTP 500": [status(500)],
    "HTTP 503": [status(503)],
    "HTTP 429": [status(429)],
    "HTTP 401": [status(401)],
    "not JSON": [raw(b"<html>gateway</html>")],
    "no choices": [raw(b'{"object": "error"}')],
    "content not text": [raw(b'{"choices": [{"message": {"content": 5}}]}')],
    "timeout": [slow(3.0)],
    # hostile answers (issue 38, item 5): nesting beyond any parser's recursion, a body over the size bound
    "content nested 100,000 deep": [answer("[" * 100_000)],
    "body nested 100,000 deep": [raw(b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")],
    "body over 16 MiB": [raw(b'{"choices": [], "pad": "' + b"x" * (17 << 20) + b'"}')],
}
# too deep to parse whole; the first flat [...] inside is read instead (here "[]": no id named, the fused order)
DEEP_CLOSED = {
    "content nested 100,000 deep, closed": [answer("[" * 100_000 + "]" * 100_000)],
    "content nested 100 deep": [answer('{"ids": ' + "[" * 100 + "]" * 100 + "}")],
}


@pytest.mark.parametrize("shape", sorted(DEEP_CLOSED))
def test_a_closed_deep_answer_keeps_the_block(lantern, shape):
    plain = lantern.recover(QUERY, budget=6000)
    with FakeLLM(DEEP_CLOSED[shape]) as fake:
        rec = lantern.recover(QUERY, budget=6000, rerank=True, llm=fake.settings(timeout_s=5.0))
    assert rec.text == plain.text and _ids(rec) == _ids(plain) and rec.rerank.named == []


@pytest.mark.parametrize("shape", sorted(FAILURES))
def test_every_failure_shape_keeps_the_fused_order_with_one_warning(lantern, shape, caplog):
    plain = lantern.recover(QUERY, budget=6000)
    with FakeLLM(FAILURES[shape]) as fake:
        with caplog.at_level("WARNING", logger="lantern"):
            rec = lantern.recover(QUERY, budget=6000, rerank=True, llm=fake.settings(timeout_s=1.0))
    assert not rec.reranked and rec.rerank.warning
    assert rec.text == plain.text and _ids(rec) == _ids(plain)
    assert rec.rerank.usage.calls == 1 and len(fake.requests) == 1
    warnings = [r for r in caplog.records if "rerank skipped" in r.getMessage()]
    assert len(warnings) == 1
    assert rec.to_json()["reranked"] is False and rec.to_json()["llm_calls"] == 1


def test_a_refused_connection_keeps_the_fused_order(lantern):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    plain = lantern.recover(QUERY, budget=6000)
    rec = lantern.recover(QUERY, budget=6000, rerank=True, llm=LLMSettings(f"http://127.0.0.1:{port}/v1", "m"))
    assert not rec.reranked and "unreachable" in rec.rerank.warning and rec.text == plain.text


def test_the_key_goes_only_to_the_endpoint_and_appears_in_no_error(lantern, monkeypatch):
    monkeypatch.setenv("LANTERN_LLM_API_KEY", "sk-test-not-a-real-key-1234567890")
    with FakeLLM([status(500)]) as fake:
        rec = lantern.recover(QUERY, rerank=True, llm=fake.settings())
    assert fake.headers[0].get("authorization") == "Bearer sk-test-not-a-real-key-1234567890"
    assert "sk-test" not in rec.rerank.warning and "sk-test" not in repr(LLMClient(fake.settings()))


def test_explain_shows_the_llm_place_beside_the_fused_rank(lantern):
    with FakeLLM([answer('{"ids": []}')]) as fake:
        first = lantern.explain(QUERY, rerank=True, llm=fake.settings())
    top = [c.entry.id for c in first.candidates if not c.verdict.startswith("excluded")][:3]
    named = list(reversed(top))
    with FakeLLM([answer(json.dumps({"ids": named}))]) as fake:
        rec = lantern.explain(QUERY, rerank=True, llm=fake.settings())
    by = {c.entry.id: c for c in rec.candidates}
    assert [by[i].rerank for i in named] == [1, 2, 3]
    assert all(by[i].rrf > 0 and by[i].ranks for i in named)  # the fused rank stays beside it


def test_rerank_without_an_endpoint_is_a_clear_error(lantern, monkeypatch):
    monkeypatch.delenv("LANTERN_LLM_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="no LLM configured"):
        lantern.recover(QUERY, rerank=True)


def test_no_rerank_makes_no_request(lantern):
    with FakeLLM([answer('{"ids": []}')]) as fake:
        lantern.recover(QUERY)
        lantern.explain(QUERY)
    assert fake.requests == []
