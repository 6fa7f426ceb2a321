"""Huge single turns (issue #19, item 1), on transcripts in real formats (tests/long_turns.py builds them): a Claude
Code session whose ``pytest -v`` output is ~115 KB with the failing test at its end, an OpenAI ``write_file`` call
whose 24 KB arguments set ``RETENTION_DAYS`` deep inside, a 4 KB task statement against the short turn that answers.

- the full-text index holds a long turn in windows (text/windows.py, store/sqlite.py), so its tail and middle rank
  against ordinary turns; deleting the entry deletes its windows;
- the excerpt of a long entry is chosen around the query's rarest matched terms (recover/pack.py ``excerpt``);
- packing is length-aware: at a small budget a short answer is packed before a long entry's excerpt;
- a block never exceeds its budget, tool-call arguments and results included (property tests, budgets 0-20,000).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from lantern import Lantern
from lantern.model import Entry
from lantern.recover.pack import (
    FRAGMENT_JOIN,
    TERM_POSITIONS,
    _matches,
    _pattern,
    excerpt,
    pack,
    stem_prefix,
    term_weights,
)
from lantern.store.fulltext import entry_of_row, window_rowid
from lantern.text.windows import WINDOW_CHARS, unescaped, windows
from long_turns import (
    FAILING_TEST,
    RETENTION,
    claude_code_pytest,
    openai_write_file,
    pytest_output,
    settings_module,
    task_statement,
)

BUDGETS = (1000, 1500, 6000)


# ------------------------------------------------------------------------------------------------ windows
def test_windows_cover_the_text_overlap_and_end_at_lines():
    text = "\n".join(f"line {i}: " + "x" * (i % 97) for i in range(4000))
    spans = windows(text)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    for (a, b), (c, d) in zip(spans, spans[1:]):
        assert c < b <= d and b - a <= WINDOW_CHARS  # consecutive windows overlap: no line is lost at a seam
        assert text[b - 1] == "\n"  # each ends after a newline of its last 200 characters
    assert windows("short") == [(0, 5)]


def test_json_escaped_runs_are_read_as_words_and_other_backslashes_are_not():
    """A line holding a JSON-escaped file (a tool call's arguments) is indexed with its escapes as spaces, so
    ``\\nRETENTION_DAYS`` is the word RETENTION_DAYS; a Windows path on a line of its own keeps its words."""
    args = '{"path": "config/settings.py", "content": "# settings\\nimport os\\nRETENTION_DAYS = 45\\n\\tpass"}'
    assert "RETENTION_DAYS = 45" in unescaped(args) and "\\n" not in unescaped(args)
    path = "opened C:\\new\\tables\\report.txt"
    assert unescaped(path) == path
    assert unescaped("line one\nline two") == "line one\nline two"


def test_windows_are_bounded_in_number():
    spans = windows("y" * 3_000_000, most=100)
    assert len(spans) <= 100 and spans[-1][1] == 3_000_000


# ------------------------------------------------------------------------------------------------ excerpt
def test_stem_prefix_matches_inflections():
    assert stem_prefix("failing") == "fail" and stem_prefix("stopped") == "stop"
    assert stem_prefix("settings") == "setting" and stem_prefix("test") == "test" and stem_prefix("uses") == "uses"
    assert stem_prefix("retention_days") == "retention_days" and stem_prefix("数据") == "数据"


def test_excerpt_goes_to_the_rare_term_not_the_common_one():
    """ "test" is on every line of a pytest log; the one FAILED line is what the question is about."""
    log = pytest_output(115_000)
    out = excerpt(log, ["test", "failing", "run"], 800)
    assert len(out) <= 800 and "test_retry_gives_up_after_five_attempts" in out
    assert "test session starts" not in out  # not the head
    assert FAILING_TEST in excerpt(log, ["test", "failing", "run", "summary"], 800)


def test_excerpt_finds_a_value_deep_inside_long_arguments_and_keeps_the_head():
    """Two fragments when one window cannot cover both: the request at the head, the value deep inside."""
    args = json.dumps({"path": "config/settings.py", "content": settings_module()})
    text = "user: Split the settings into config/settings.py.\nassistant -> tool call write_file(" + args + ")"
    out = excerpt(text, ["retention_days", "retention", "days", "value", "set", "settings", "file"], 1000)
    assert len(out) <= 1000 and "RETENTION_DAYS = 45" in out
    assert out.startswith("user: Split the settings") and FRAGMENT_JOIN in out


def test_store_rarity_weighs_in():
    counts = Counter({0: 1, 1: 1})
    words = ["port", "5433"]
    even = term_weights(counts, words, 10_000, 500)
    assert even[0] == even[1]
    rare = term_weights(counts, words, 10_000, 500, {'"port"': 0.6, '"5433"': 0.001})
    assert rare[1] > 3 * rare[0]


def test_excerpt_without_a_match_is_the_head():
    assert excerpt("alpha beta gamma " * 100, ["zeta"], 60).startswith("alpha beta")


@settings(max_examples=examples(200), deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(list("ab cd\nFAILED_x.é数据")), min_size=0, max_size=3000),
    terms=st.lists(st.sampled_from(["ab", "failed", "cd", "x", "数据", "é", "a b", "zz"]), max_size=5),
    width=st.integers(-5, 1200),
)
def test_excerpt_never_exceeds_its_width(text, terms, width):
    out = excerpt(text, terms, width)
    assert len(out) <= max(width, 0)
    if len(text) <= width:
        assert out == text


_WORDS = st.text(alphabet=st.sampled_from(list('abcxyz0_.:"/数据')), min_size=1, max_size=18)


@settings(max_examples=examples(200), deadline=None)
@given(
    words=st.lists(st.tuples(_WORDS, st.sampled_from([" ", "  ", "\n", "\t"])), min_size=1, max_size=300),
    terms=st.lists(_WORDS, max_size=4),
    width=st.integers(40, 900),
)
def test_an_excerpt_cuts_no_word_in_two(words, terms, width):
    """Each fragment of an excerpt starts at a word's first character and ends after a word's last one (words here
    are shorter than pack.WORD_WIDEN; next to a Chinese character every place is a word's edge): no "…tgres 16" out
    of "postgres 16"."""
    text = "".join(w + sep for w, sep in words)
    out = excerpt(text, terms + [words[len(words) // 2][0]], width)
    assert len(out) <= width
    for fragment in out.split(FRAGMENT_JOIN):
        body = fragment.removeprefix("…").removesuffix("…")
        if not body.strip():
            continue
        at = text.find(body)
        assert at >= 0, (body, text)
        end = at + len(body)
        assert at == 0 or _boundary(text[at - 1], body[0]), (text[max(0, at - 20) : at], body[:20])
        assert end == len(text) or _boundary(body[-1], text[end]), (body[-20:], text[end : end + 20])


def _boundary(left: str, right: str) -> bool:
    """A place between two characters where a word may end: a space on either side, or a Chinese character."""
    return any(c.isspace() or "\u4e00" <= c <= "\u9fff" for c in (left, right))


@settings(max_examples=examples(300), deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(list("abSsßẞſKk\u212aİıiµμΜθϑΣσς _.-\nFAILEDfailing数据é")), max_size=400),
    terms=st.lists(
        st.sampled_from(
            ["ab", "failing", "failed", "ss", "ß", "ẞ", "s", "ſ", "k", "\u212a", "i", "ı", "İ", "µ", "μ", "ϑ", "θ"]
            + ["σ", "ς", "Σς", "数据", "é", "a_b", "ab.s", "kk", "sſs"]
        ),
        max_size=6,
    ),
)
def test_excerpt_term_filter_loses_no_match(text, terms):
    """_matches drops the terms whose literal is not in the text (casefolded) before its one regex pass: the
    matches must be those of the regex over every term (case folding, ß, the Kelvin sign, dotted İ included)."""
    words = sorted({t.lower() for t in terms if t.strip()}, key=len, reverse=True)
    want: list[tuple[int, int, str]] = []
    if words:
        every = re.compile("|".join(f"(?P<t{i}>{_pattern(w)})" for i, w in enumerate(words)), re.IGNORECASE)
        want = [(m.start(), m.end(), words[int(m.lastgroup[1:])]) for m in every.finditer(text)]
    seen: Counter[str] = Counter(w for *_, w in want)
    want = [m for i, m in enumerate(want) if sum(1 for x in want[: i + 1] if x[2] == m[2]) <= TERM_POSITIONS]
    found, counts, kept = _matches(text, terms)
    assert [(a, b, kept[k]) for a, b, k in found] == want
    assert {kept[k]: n for k, n in counts.items()} == dict(seen)


# ------------------------------------------------------------------------------------------------ packing
def _entry(i: int, text: str, session: str = "s", turn: int | None = None) -> Entry:
    return Entry(
        id=i,
        session=session,
        turn=i if turn is None else turn,
        text=text,
        summary=text[:200],
        tags=[],
        memory_type="episodic",
        importance=0.5,
        content_hash=str(i),
        time=datetime(2026, 11, 20, 9, i % 60, tzinfo=timezone.utc),
    )


def test_a_short_answer_is_packed_before_a_long_entry_is_excerpted():
    statement = task_statement().messages[0]["content"]
    answer = "user: Platform finished provisioning. Connection details: db-stg-2.internal, port 6432."
    entries = [_entry(1, statement), _entry(2, "user: Freeze is in place."), _entry(3, answer)]
    for budget in (1000, 1500):
        res = pack(iter(entries), budget, ["staging", "database", "connection"], group=True)
        assert "port 6432" in res.text and len(res.text) <= budget
        assert res.verdicts[1][0] == "excerpt" and res.verdicts[3][0] == "packed"
        before = pack(iter(entries), budget, ["staging", "database", "connection"], group=True, lookahead=0)
        assert "port 6432" not in before.text  # what it did before: the statement's excerpt filled the block
    whole = pack(iter(entries), 6000, ["staging"], group=True)
    assert all(v == "packed" for v, _ in whole.verdicts.values())  # at the default budget everything fits whole


_huge = st.builds(
    lambda unit, n: unit * n,
    st.sampled_from(["tests/a.py::test_x PASSED [ 1%]\n", '{"content": "RETENTION_DAYS = 45\\n', "数据库端口 5433。"]),
    st.integers(0, 6000),
)


@settings(max_examples=examples(150), deadline=None)
@given(
    texts=st.lists(st.one_of(_huge, st.text(max_size=300)), min_size=0, max_size=8),
    budget=st.integers(0, 20_000),
    group=st.booleans(),
    one_session=st.booleans(),
    lookahead=st.integers(0, 4),
)
def test_pack_never_exceeds_the_budget(texts, budget, group, one_session, lookahead):
    entries = [_entry(i + 1, t, session="s" if one_session else f"s{i % 3}") for i, t in enumerate(texts)]
    res = pack(
        iter(entries), budget, ["test", "retention_days", "端口"], group=group, lookahead=lookahead,
        session="s" if one_session and not group else None,
    )  # fmt: skip
    assert len(res.text) <= budget
    for p in res.packed:
        assert p.text in res.text and res.verdicts[p.entry.id][0] in ("packed", "excerpt")
        assert p.excerpt == (res.verdicts[p.entry.id][0] == "excerpt")


# ------------------------------------------------------------------------------------------------ the store
def _run(call_id: str, output: str, command: str = "pytest -v") -> list[dict]:
    """An OpenAI tool call and its result."""
    call = {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"cmd": command})}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": output},
    ]


def _windows_in_store(memory: Lantern) -> int:
    return memory.store.db.execute("SELECT count(*) FROM entries_fts WHERE rowid < 0").fetchone()[0]


def test_long_text_is_indexed_in_windows_and_forgotten_with_its_entry(tmp_path):
    assert entry_of_row(window_rowid(77, 5)) == 77 and entry_of_row(77) == 77
    with Lantern(tmp_path / "w.db", embedder="minilm") as memory:
        messages = [{"role": "user", "content": f"note {i}: the webhook tests pass, retry is fine"} for i in range(6)]
        messages += [{"role": "user", "content": "run the full suite"}, *_run("c1", pytest_output(60_000))]
        long_id = memory.archive(messages, session="s").entry_ids[-1]
        assert _windows_in_store(memory) == len(windows(memory.store.entries([long_id])[long_id].text)) - 1
        hits = memory.store.fulltext('"retry" OR "gives" OR "five" OR "attempts"', 3)
        assert hits[0][0] == long_id and len({i for i, _ in hits}) == len(hits)  # one row per entry, best first
        assert memory.store.term_fractions(['"attempts"'], 2000)['"attempts"'] == 1 / 7  # windows not counted
        memory.export(tmp_path / "w.jsonl")
        with Lantern(tmp_path / "copy.db", embedder="minilm") as copy:  # an import indexes the windows again
            copy.import_(tmp_path / "w.jsonl")
            assert _windows_in_store(copy) == _windows_in_store(memory)
        memory.forget(entry=long_id)
        assert _windows_in_store(memory) == 0 and not memory.store.fulltext('"attempts"', 3)


def test_a_grown_long_turn_is_windowed_again(tmp_path):
    with Lantern(tmp_path / "g.db", embedder="minilm") as memory:
        first = [{"role": "user", "content": "run the suite"}]
        memory.archive(first, session="s")
        (entry_id,) = memory.archive(first + _run("c1", pytest_output(30_000)), session="s").entry_ids
        assert memory.store.count() == 1 and entry_id == 1
        assert _windows_in_store(memory) == len(windows(memory.store.entries([1])[1].text)) - 1


def test_a_long_tool_output_is_summarized_with_its_head_and_its_last_line():
    from lantern.archive.chunk import chunk
    from lantern.archive.parse import parse
    from lantern.archive.summarize import TOOL_HEAD_CHARS, summarize

    messages = [{"role": "user", "content": "run the full suite"}, *_run("c1", pytest_output(115_000))]
    (turn,) = chunk(parse(messages).messages)
    line = next(x for x in summarize(turn).split("\n") if x.startswith("result"))
    assert len(line) <= TOOL_HEAD_CHARS and "test session starts" in line and "1 failed" in line


def test_a_long_entry_is_not_buried_by_its_hint_count(tmp_path):
    """Jaccard counts at most KEYWORD_HINT_CAP hints of an entry: a 115 KB log holds ~1,200."""
    from lantern.recover.signals import KEYWORD_HINT_CAP

    with Lantern(tmp_path / "k.db", embedder="minilm") as memory:
        memory.archive([{"role": "user", "content": "full run"}, *_run("c1", pytest_output(115_000))], session="s")
        c = next(c for c in memory.explain("tests/billing/test_webhooks.py", budget=2000).candidates)
        assert c.scores["keyword"] >= 1 / (3 + KEYWORD_HINT_CAP)  # 3 query terms; uncapped it was <= 3 / 1,200


# ------------------------------------------------------------------------------------------------ end to end
@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    folder = tmp_path_factory.mktemp("long-turns")
    out = {}
    for sc in (claude_code_pytest(folder), openai_write_file(), task_statement()):
        memory = Lantern(folder / f"{len(out)}.db")
        if sc.path is not None:
            memory.ingest(sc.path)
        else:
            memory.archive(sc.messages, session="s")
        out[sc.name] = (memory, sc)
    yield out
    for memory, _ in out.values():
        memory.close()


@pytest.mark.parametrize("budget", BUDGETS)
def test_the_failing_test_at_the_end_of_a_115_kb_pytest_output_is_recovered(stores, budget):
    memory, sc = stores["claude-code pytest -v, 115 KB output"]
    assert sc.long_chars > 110_000
    for question, expect in sc.asks:
        rec = memory.recover(question, budget=budget)
        assert expect in rec.text and rec.chars <= budget, (question, rec.text[:600])


@pytest.mark.parametrize("budget", BUDGETS)
def test_a_value_deep_inside_24_kb_write_file_arguments_is_recovered(stores, budget):
    memory, sc = stores["openai write_file, 24 KB arguments"]
    assert sc.long_chars > 23_000
    for question, _ in sc.asks:
        rec = memory.recover(question, budget=budget)
        assert RETENTION in rec.text and rec.chars <= budget, (question, rec.text[:600])


def test_a_value_inside_json_escaped_arguments_clears_the_relevance_floor_in_a_large_store(tmp_path):
    """In a large store (the shipped aider excerpt beside the transcript), the retention question is recovered
    under the default injection decision: its identifier is a word of the full-text index (the escape before it no
    longer glued to it), so the turn holding it is read and its coverage of the query clears the decision."""
    sc = openai_write_file()
    aider = Path(__file__).resolve().parents[1] / "src/lantern/data/demo/aider-chat-excerpt.md"
    with Lantern(tmp_path / "m.db") as memory:
        memory.ingest(aider, format="aider")
        memory.archive(sc.messages, session="s")
        assert memory.stats()["entries"] >= 50
        hits = memory.store.db.execute("SELECT rowid FROM entries_fts WHERE entries_fts MATCH ?", ('"retention_days"',))
        assert hits.fetchall()
        question, _ = sc.asks[0]
        for budget in BUDGETS:
            rec = memory.recover(question, budget=budget)
            assert RETENTION in rec.text and rec.chars <= budget, (budget, rec.relevance)


@pytest.mark.parametrize("budget", BUDGETS)
def test_a_short_answer_beats_a_4_kb_task_statement_at_small_budgets(stores, budget):
    memory, sc = stores["4 KB task statement vs a short answer"]
    question, expect = sc.asks[0]  # the second question shares no word with its answer: see BENCHMARKS.md §13
    rec = memory.recover(question, budget=budget)
    assert expect in rec.text and rec.chars <= budget, rec.text


@settings(max_examples=examples(40), deadline=None)
@given(
    budget=st.integers(0, 20_000),
    question=st.sampled_from(
        [
            "Which test was failing at the end of the full test run?",
            "What retention_days value did we set?",
            "staging database connection details",
            "webhook retry backoff",
        ]
    ),
)
def test_a_recovered_block_never_exceeds_its_budget(stores, budget, question):
    """Every character injected counts against the budget, the tool calls' arguments and results included."""
    for memory, _ in stores.values():
        rec = memory.recover(question, budget=budget)
        assert rec.chars == len(rec.text) <= budget


_turn = st.tuples(
    st.sampled_from(["output", "arguments", "statement"]),
    st.integers(0, 60_000),
    st.sampled_from(["webhook", "settings", "staging"]),
)


@settings(max_examples=examples(15), deadline=None)
@given(turns=st.lists(_turn, min_size=1, max_size=4), budgets=st.lists(st.integers(0, 20_000), min_size=3, max_size=3))
def test_turns_with_huge_arguments_and_outputs_never_overflow_a_block(tmp_path_factory, turns, budgets):
    """Turns with tool outputs and tool-call arguments of up to 60 KB each, any budget from 0 to 20,000."""
    messages: list[dict] = []
    for n, (kind, size, topic) in enumerate(turns):
        messages.append({"role": "user", "content": f"{topic}: step {n}"})
        if kind == "output":
            messages += _run(f"c{n}", pytest_output(size, seed=n)[:size])
        elif kind == "arguments":
            args = json.dumps({"path": f"config/{topic}.py", "content": settings_module(size, seed=n)[:size]})
            call = {"id": f"w{n}", "type": "function", "function": {"name": "write_file", "arguments": args}}
            messages += [
                {"role": "assistant", "content": "writing", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"w{n}", "content": "ok"},
            ]
        else:
            messages.append({"role": "assistant", "content": (f"the {topic} database port is 6432. " * 400)[:size]})
    with Lantern(tmp_path_factory.mktemp("huge") / "h.db", embedder="minilm") as memory:
        memory.archive(messages, session="s")
        for budget, question in zip(budgets, ("webhook test failed", "retention_days setting", "staging port")):
            rec = memory.recover(question, budget=budget)
            assert rec.chars == len(rec.text) <= budget
