"""Tests of the parse stage: transcripts in every format -> list[Message], and robustness to bad input."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from lantern.archive.parse import (
    FORMATS,
    ParseResult,
    detect_format,
    parse,
    parse_anthropic,
    parse_locomo,
)
from lantern.errors import TranscriptFormatError
from lantern.text.clean import clean_text

FIXTURES = Path(__file__).parent / "fixtures" / "parse"
DATA = Path(os.environ.get("LANTERN_DATA", "/work/shared/data"))


def test_clean_text():
    assert clean_text("a\r\nb\rc") == "a\nb\rc"
    assert clean_text("x\x00y") == "x\ufffdy"
    assert clean_text("bad \ud800 pair \udfff ok 😀") == "bad \ufffd pair \ufffd ok 😀"
    assert clean_text("plain") == "plain"


# --- per format -----------------------------------------------------------------------------------------------


def test_openai_fixture_round_trip():
    r = parse(FIXTURES / "openai.json")
    assert r.format == "openai" and r.skipped == 0 and r.warnings == []
    roles = [m.role for m in r.messages]
    assert roles == ["system", "user", "assistant", "tool", "tool", "assistant", "user", "assistant"]
    call_msg = r.messages[2]
    assert call_msg.text == ""
    assert [(c.name, c.arguments, c.id) for c in call_msg.tool_calls] == [
        ("read_file", '{"path": "src/db/config.py"}', "call_1"),
        ("run", '{"cmd": "pg_ctl status"}', "call_2"),
    ]
    res = r.messages[4].tool_results[0]
    assert res.content == "server is running (PID: 4121)\nlistening on 127.0.0.1:5433"
    assert (res.call_id, res.name) == ("call_2", "run")
    assert r.messages[3].tool_results[0].content == 'DB_PORT = 5433\nDB_HOST = "127.0.0.1"\n'  # verbatim
    assert r.messages[3].tool_results[0].name == "read_file"
    assert "listening on 127.0.0.1:5433" in r.messages[4].render()
    image_msg = r.messages[6]
    assert image_msg.text == "Here is the error dialog:\n[image]"
    assert "base64" not in "".join(m.render() for m in r.messages)


def test_openai_live_list_and_legacy_function_call():
    live = [
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": None, "function_call": {"name": "ls", "arguments": {"dir": "src"}}},
        {"role": "function", "name": "ls", "content": "src/db/config.py\nsrc/app.py"},
        {"role": "tool", "tool_call_id": "call_9", "content": None},
    ]
    r = parse(live)
    assert r.format == "openai"
    assert r.messages[1].tool_calls[0].name == "ls"
    assert json.loads(r.messages[1].tool_calls[0].arguments) == {"dir": "src"}
    assert r.messages[2].role == "tool"
    assert r.messages[2].tool_results[0].content == "src/db/config.py\nsrc/app.py"
    assert r.messages[2].tool_results[0].name == "ls"
    assert r.messages[3].tool_results[0].content == "" and r.messages[3].tool_results[0].call_id == "call_9"


def test_anthropic_fixture_round_trip():
    r = parse(FIXTURES / "anthropic.json")
    assert r.format == "anthropic" and r.skipped == 0
    roles = [m.role for m in r.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "user", "assistant"]
    assert r.messages[0].text == "You are a coding assistant."
    first = r.messages[2]
    assert first.text == "Let me check the config."  # thinking dropped
    assert "I should check" not in first.render()
    call = first.tool_calls[0]
    assert (call.name, call.id) == ("read_file", "toolu_01")
    assert call.arguments == '{"path": "src/db/config.py", "encoding": "utf-8"}'
    res = r.messages[3].tool_results[0]
    assert res.content == "PORT = 8080\n# café: listening on 127.0.0.1:5433"
    assert (res.call_id, res.name) == ("toolu_01", "read_file")
    # a user message holding a tool result and text is split: tool message first, then the user text
    assert r.messages[5].tool_results[0].content == "cat: missing.txt: No such file or directory"
    assert r.messages[5].meta == {"is_error": True}
    assert r.messages[6].text == "Also, here is a screenshot.\n[image]"
    assert "iVBOR" not in "".join(m.render() for m in r.messages)


def test_plain_jsonl():
    r = parse(FIXTURES / "plain.jsonl")
    assert r.format == "jsonl" and r.skipped == 0
    assert [m.role for m in r.messages] == ["user", "assistant", "user", "assistant"]
    assert r.messages[0].time == datetime(2024, 8, 5, 12, 0, tzinfo=timezone.utc)
    assert r.messages[1].text == "Noted: SQLite + FTS5, WAL mode."
    assert r.messages[1].time == datetime(2024, 8, 5, 12, 0, 5)
    assert r.messages[3].name == "lantern-bot"


def test_wrapped_agent_log_lines_are_unwrapped():
    lines = [
        {"type": "user", "timestamp": "2024-08-05T10:00:00Z", "message": {"role": "user", "content": "hi"}},
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}}],
            },
        },
    ]
    r = parse("\n".join(json.dumps(x) for x in lines))
    assert r.format == "anthropic"
    assert r.messages[0].time.year == 2024
    assert r.messages[1].tool_calls[0].arguments == '{"command": "ls"}'


def test_aider_fixture():
    r = parse(FIXTURES / "aider.md")
    assert r.format == "aider" and r.skipped == 0
    kinds = [(m.role, m.session) for m in r.messages]
    assert kinds == [
        ("tool", None),  # the file starts mid-session; the Emacs mode line is ignored
        ("tool", "2024-08-05 19:33:02"),
        ("user", "2024-08-05 19:33:02"),
        ("assistant", "2024-08-05 19:33:02"),
        ("tool", "2024-08-05 19:33:02"),
        ("user", "2024-08-05 19:33:02"),
        ("tool", "2024-08-05 19:33:02"),
        ("tool", "2024-08-06 09:00:00"),
        ("user", "2024-08-06 10:15:30"),
        ("user", "2024-08-06 10:15:30"),
        ("tool", "2024-08-06 10:15:30"),
        ("assistant", "2024-08-06 10:15:30"),
    ]
    banner, user, reply, applied = r.messages[1:5]
    assert banner.tool_results[0].content.splitlines()[-1] == "Added src/db/config.py to the chat."
    assert banner.files == ["src/db/config.py"]
    assert user.text == "Change the default port to 5433\nand keep the host."  # joined, line breaks removed
    assert user.time == datetime(2024, 8, 5, 19, 33, 2)
    assert ">>>>>>> REPLACE" in reply.text and reply.text.endswith("```")
    assert reply.files == ["src/db/config.py"]
    assert applied.tool_results[0].content == (
        "Applied edit to src/db/config.py\nCommit 1a2b3c4 feat: Change default port to 5433"
    )
    assert applied.files == ["src/db/config.py"]
    assert r.messages[5].files == ["tests/test_db.py"]
    assert r.messages[10].tool_results[0].content.endswith("AssertionError: 5432 != 5433")
    assert r.messages[11].text == "The test still expects 5432."
    assert r.messages[2].meta == {"line": 11}


def test_locomo_fixture():
    r = parse(FIXTURES / "locomo.json")
    assert r.format == "locomo" and r.skipped == 0
    assert [m.meta["dia_id"] for m in r.messages] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2", "D10:1", "D1:1", "D1:2"]
    assert {m.role for m in r.messages} == {"user"}
    m = r.messages[1]
    assert m.name == "Ben" and m.session == "conv-1:session_1"
    assert m.text == "Congrats! Look at my new bike. [image: a photo of a red bicycle]"
    assert m.time == datetime(2023, 5, 8, 13, 56)
    assert m.meta == {"dia_id": "D1:2", "sample_id": "conv-1"}
    assert r.messages[4].text == "Here is a photo. [image]"
    assert r.messages[5].session == "conv-1:session_10" and r.messages[5].time == datetime(2024, 1, 1, 21, 5)
    assert r.messages[6].time == datetime(2022, 3, 3, 0, 15)
    one = parse_locomo(FIXTURES / "locomo.json", sample="conv-2")
    assert [m.name for m in one.messages] == ["Cy", "Dee"]
    with pytest.raises(TranscriptFormatError):
        parse_locomo(FIXTURES / "locomo.json", sample="conv-99")


# --- detection and sources ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fixture,fmt",
    [
        ("openai.json", "openai"),
        ("anthropic.json", "anthropic"),
        ("plain.jsonl", "jsonl"),
        ("aider.md", "aider"),
        ("locomo.json", "locomo"),
    ],
)
def test_detect_format(fixture, fmt):
    text = (FIXTURES / fixture).read_text(encoding="utf-8")
    assert detect_format(text) == fmt
    assert detect_format(text.encode()) == fmt
    if fmt != "aider":
        assert (
            detect_format(json.loads(text) if fixture.endswith(".json") else [json.loads(x) for x in text.splitlines()])
            == fmt
        )
    assert parse(FIXTURES / fixture, fmt).format == fmt


def test_detect_format_small_objects():
    assert detect_format([{"role": "user", "content": "hi"}]) == "jsonl"
    assert detect_format({"role": "user", "content": "hi"}) == "jsonl"
    assert detect_format([{"role": "user", "content": [{"type": "text", "text": "hi"}]}]) == "openai"
    assert detect_format({"system": "s", "messages": [{"role": "user", "content": "hi"}]}) == "anthropic"
    assert detect_format("#### hello\n") == "aider"
    assert set(FORMATS) == {
        "openai",
        "anthropic",
        "jsonl",
        "aider",
        "locomo",
        "claude-code",
        "codex",
        "sharegpt",
        "swe_agent",
    }


def test_sources_path_bytes_text_object(tmp_path):
    text = (FIXTURES / "plain.jsonl").read_text()
    expected = [m.text for m in parse(text).messages]
    for source in (
        FIXTURES / "plain.jsonl",
        str(FIXTURES / "plain.jsonl"),
        text.encode(),
        text,
        [json.loads(x) for x in text.splitlines()],
    ):
        assert [m.text for m in parse(source).messages] == expected
    crlf = tmp_path / "crlf.jsonl"
    crlf.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())  # BOM + CRLF
    assert [m.text for m in parse(crlf).messages] == expected
    aider_crlf = (FIXTURES / "aider.md").read_bytes().replace(b"\n", b"\r\n")
    assert len(parse(aider_crlf).messages) == len(parse(FIXTURES / "aider.md").messages)


@pytest.mark.parametrize(
    "source",
    [
        "/no/such/dir/chat.jsonl",
        "missing.json",
        42,
        None,
        3.5,
        object(),
    ],
)
def test_bad_sources_raise_format_error(source):
    with pytest.raises(TranscriptFormatError):
        parse(source)


def test_directory_and_unknown_format(tmp_path):
    with pytest.raises(TranscriptFormatError, match="cannot read"):
        parse(tmp_path)
    with pytest.raises(TranscriptFormatError) as e:
        parse([], "yaml")
    assert e.value.field == "format"
    with pytest.raises(TranscriptFormatError):
        parse([{"role": "user", "content": "x"}], "aider")  # aider needs text


# --- robustness -----------------------------------------------------------------------------------------------


def test_malformed_jsonl_lines_skipped_and_counted():
    r = parse(FIXTURES / "broken.jsonl")
    assert [m.text for m in r.messages] == ["first good line", "mapped to assistant", "last good line"]
    assert [m.role for m in r.messages] == ["user", "assistant", "user"]
    # bad lines 2 ([truncated), 8 (not an object), 10 (not json); then unknown role, no role, 2 empty
    assert r.skipped == 7
    assert any(w.startswith("line 2: invalid JSON") for w in r.warnings)
    assert any(w.startswith("line 8: not a JSON object") for w in r.warnings)
    assert any(w.startswith("line 10: invalid JSON") for w in r.warnings)
    assert "line 4: unknown role 'narrator'; skipped" in r.warnings
    assert "line 5: missing field 'role'; skipped" in r.warnings
    assert {"line 6: empty content; skipped", "line 7: empty content; skipped"} <= set(r.warnings)


def test_all_jsonl_lines_bad_raises():
    with pytest.raises(TranscriptFormatError) as e:
        parse('{"role": "user", "content": \n{oops}\n{"also": broken\n')
    assert e.value.line is not None


def test_whole_document_syntax_error_has_line():
    doc = '[\n  {"role": "user", "content": "a"},\n  {"role": "assistant", "content": "b"\n]\n'
    with pytest.raises(TranscriptFormatError) as e:
        parse(doc)
    assert e.value.line == 4
    assert "line 4" in str(e.value)


def test_roles_mapped_or_skipped():
    r = parse(
        [
            {"role": "Human", "content": "a"},
            {"role": "model", "content": "b"},
            {"role": "AI", "content": "c"},
            {"role": "critic", "content": "d"},
            {"role": 7, "content": "e"},
            {"role": None, "content": "f"},
        ]
    )
    assert [m.role for m in r.messages] == ["user", "assistant", "assistant"]
    assert r.skipped == 3 and r.warnings[0] == "message 4: unknown role 'critic'; skipped"


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "jsonl"])
def test_empty_missing_and_non_dict_items_skipped(fmt):
    items = [
        {"role": "user", "content": ""},
        {"role": "user", "content": None},
        {"role": "assistant"},
        {"content": "no role"},
        "a string",
        None,
        {"role": "user", "content": "  \n"},
        {"role": "user", "content": "kept"},
    ]
    r = parse(items, fmt)
    assert [m.text for m in r.messages] == ["kept"]
    assert r.skipped == 7 and len(r.warnings) == 7


def test_content_as_list_of_blocks_in_plain_messages():
    r = parse(
        [{"role": "user", "content": [{"type": "text", "text": "one"}, "two", {"type": "text", "text": "three"}]}],
        "jsonl",
    )
    assert r.messages[0].text == "one\ntwo\nthree"


def test_lone_surrogates_and_nul_cleaned():
    raw = (
        '[{"role": "user", "content": "bad \\ud800 here \\u0000 there"}, '
        '{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", '
        '"function": {"name": "f\\udc00", "arguments": "{\\"x\\": \\"\\udfff\\"}"}}]}]'
    )
    r = parse(raw)
    assert r.messages[0].text == "bad \ufffd here \ufffd there"
    assert r.messages[1].tool_calls[0].name == "f\ufffd"
    assert r.messages[1].tool_calls[0].arguments == '{"x": "\ufffd"}'
    for m in r.messages:
        m.render().encode("utf-8")  # strictly encodable
    r = parse_anthropic(
        [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {"k": "\ud800"}}]}]
    )
    r.messages[0].tool_calls[0].arguments.encode("utf-8")


def test_one_megabyte_message_intact():
    big = "".join(f"line {i}: port 5433 path src/db/config.py\n" for i in range(25_000))
    assert len(big) > 1_000_000
    for source in (
        [{"role": "tool", "tool_call_id": "c1", "content": big}],
        json.dumps([{"role": "tool", "tool_call_id": "c1", "content": big}]),
    ):
        r = parse(source)
        assert r.messages[0].tool_results[0].content == big


@pytest.mark.parametrize(
    "blob",
    [
        bytes(range(256)) * 4,
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01",
        b'{"role": "user", "content": "caf\xe9"}',  # latin-1, invalid UTF-8
        b"\xff\xfe\xfd",
        b"text with a NUL \x00 byte",
    ],
)
def test_binary_input_is_format_error(blob, tmp_path):
    with pytest.raises(TranscriptFormatError, match="binary data|invalid UTF-8"):
        parse(blob)
    path = tmp_path / "blob.bin"
    path.write_bytes(blob)
    with pytest.raises(TranscriptFormatError, match="binary data|invalid UTF-8") as e:
        parse(path)
    assert e.value.source == str(path)


def test_not_a_transcript_text_and_empty():
    for text in (
        "hello world, this is prose\nwith two lines",
        "",
        "   \n",
        "42",
        '"just a string"',
        "{}",
        '{"foo": 1}',
        "[1, 2]",
    ):
        try:
            r = parse(text)
        except TranscriptFormatError:
            continue
        assert r.messages == []  # e.g. "[1, 2]": a list whose items are all skipped
    assert parse("[]").messages == []


def test_deep_nesting_is_format_error():
    with pytest.raises(TranscriptFormatError):
        parse("[" * 100_000 + "]" * 100_000)


# --- property: random input never escapes as anything but TranscriptFormatError -------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
_block = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "tool_use", "tool_result", "image_url", "image", "thinking", "x"])},
    optional={
        "text": _json,
        "content": _json,
        "input": _json,
        "id": _json,
        "name": _json,
        "tool_use_id": _json,
        "is_error": _json,
    },
)
_message = st.fixed_dictionaries(
    {},
    optional={
        "role": st.sampled_from(["user", "assistant", "tool", "system", "human", "weird"]) | _json,
        "content": st.none() | st.text() | st.lists(_block | _json, max_size=3) | _json,
        "tool_calls": st.lists(st.fixed_dictionaries({}, optional={"id": _json, "function": _json}), max_size=2)
        | _json,
        "tool_call_id": _json,
        "name": _json,
        "timestamp": _json,
        "text": _json,
    },
)
_document = (
    st.lists(_message | _json, max_size=5)
    | st.fixed_dictionaries({"messages": st.lists(_message, max_size=4)}, optional={"system": _json})
    | st.fixed_dictionaries(
        {
            "sample_id": _json,
            "conversation": st.dictionaries(
                st.sampled_from(["session_1", "session_2", "session_1_date_time", "speaker_a"]), _json
            ),
        }
    )
    | _json
)


def _ok_or_format_error(source, fmt="auto"):
    try:
        result = parse(source, fmt)
    except TranscriptFormatError:
        return
    assert isinstance(result, ParseResult)
    for m in result.messages:
        m.render().encode("utf-8")


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=_document, fmt=st.sampled_from(["auto", *FORMATS]), as_text=st.booleans())
def test_random_json_parses_or_raises_format_error(doc, fmt, as_text):
    _ok_or_format_error(json.dumps(doc) if as_text else doc, fmt)


@settings(max_examples=examples(300), deadline=None)
@given(text=st.text(), fmt=st.sampled_from(["auto", *FORMATS]))
def test_random_text_parses_or_raises_format_error(text, fmt):
    _ok_or_format_error(text, fmt)


@settings(max_examples=examples(200), deadline=None)
@given(blob=st.binary())
def test_random_bytes_parse_or_raise_format_error(blob):
    _ok_or_format_error(blob)


@settings(max_examples=examples(200), deadline=None)
@given(
    lines=st.lists(
        st.one_of(_message.map(json.dumps), st.text(alphabet='{}[]":, ab\\', max_size=20)), min_size=2, max_size=6
    )
)
def test_random_jsonl_parses_or_raises_format_error(lines):
    _ok_or_format_error("\n".join(lines))


# --- the real data sets (skipped when /work/shared/data is absent) ---------------------------------------------


def test_real_aider_chat_history():
    path = DATA / "aider_chat_history" / "chat-history.md"
    if not path.exists():
        pytest.skip("aider chat history not present")
    r = parse(path)
    assert r.format == "aider" and r.skipped == 0
    headers = sum(
        1 for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("# aider chat started at ")
    )
    assert headers == 1133
    sessions = {m.session for m in r.messages if m.session is not None}
    assert len(sessions) == 983  # 150 of the 1,133 sessions hold only their header
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", s) for s in sessions)
    users = [m for m in r.messages if m.role == "user"]
    assert len(users) == 1776  # the data README's count of user-message blocks
    assert len({m.session for m in users}) == 679  # sessions with at least one user message
    tool_lines = [ln for m in r.messages for res in m.tool_results for ln in res.content.split("\n")]
    assert sum(ln.startswith("Applied edit to ") for ln in tool_lines) == 413
    assert sum(re.match(r"Commit [0-9a-f]{7} ", ln) is not None for ln in tool_lines) == 667
    all_lines = tool_lines + [ln for m in r.messages for ln in m.text.split("\n")]
    assert sum("<<<<<<< SEARCH" in ln for ln in all_lines) == 789  # as many lines as `grep -c` finds
    assert all(m.time is not None for m in r.messages if m.session)
    assert any("aider/coders/base_coder.py" in m.files for m in r.messages)


def test_real_locomo():
    path = DATA / "locomo" / "locomo10.json"
    if not path.exists():
        pytest.skip("LoCoMo not present")
    r = parse(path)
    assert r.format == "locomo" and r.skipped == 0
    assert len(r.messages) == 5882
    assert len({m.session for m in r.messages}) == 272
    assert len({m.meta["sample_id"] for m in r.messages}) == 10
    assert all(m.time is not None and m.name for m in r.messages)
    assert sum("[image: " in m.text for m in r.messages) == 1226
    conv26 = parse_locomo(path, sample="conv-26")
    assert len(conv26.messages) == 419 and len({m.session for m in conv26.messages}) == 19
    assert conv26.messages[0].time == datetime(2023, 5, 8, 13, 56)


def test_unknown_blocks_and_object_content_are_kept_as_json_not_dropped():
    from lantern.archive.parse import parse

    r = parse(
        [
            {"role": "user", "content": {"query": "port of redis", "limit": 5}},
            {"role": "assistant", "content": [{"type": "mystery", "value": 6380}]},
        ],
        "jsonl",
    )
    assert r.skipped == 0
    assert '"query": "port of redis"' in r.messages[0].text
    assert "6380" in r.messages[1].text
    a = parse(
        [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": {"port": 6380}}]}],
        "anthropic",
    )
    assert "6380" in a.messages[0].tool_results[0].content


def test_an_integer_too_long_for_python_loses_neither_the_file_nor_the_line(tmp_path):
    """Python refuses to convert a 5,000-digit integer (int_max_str_digits); a metadata field holding one used to
    make the whole .json a format error and the JSONL line a skipped one. The digits are kept as text."""
    from lantern import Lantern
    from lantern.archive.parse.stream import open_stream

    big = "9" * 5000
    doc = (
        f'[{{"role": "user", "content": "the api runs on port 5433", "tokens": {big}}},'
        '{"role": "assistant", "content": "noted, port 5433"}]'
    )
    whole = parse(doc)
    assert [m.text for m in whole.messages] == ["the api runs on port 5433", "noted, port 5433"]
    assert whole.skipped == 0
    lines = (
        f'{{"role": "user", "content": "the api runs on port 5433", "usage": {{"n": {big}}}}}\n'
        '{"role": "assistant", "content": "noted"}\n'
    )
    assert [m.text for m in parse(lines).messages] == ["the api runs on port 5433", "noted"]
    path = tmp_path / "big.jsonl"
    path.write_text(lines, encoding="utf-8")
    stream = open_stream(path)
    assert stream is not None
    assert [m.text for part in stream.slices() for m in part.messages] == ["the api runs on port 5433", "noted"]
    lantern = Lantern(tmp_path / "db.sqlite")
    result = lantern.ingest(path)
    assert result.skipped == 0 and result.added >= 1
    assert "5433" in lantern.recover("which port does the api run on?").text


def test_a_latin1_file_is_refused_with_the_byte_and_a_conversion_hint(tmp_path):
    path = tmp_path / "notes.json"
    path.write_bytes('[{"role": "user", "content": "café on port 5433"}]'.encode("latin-1"))
    with pytest.raises(TranscriptFormatError) as e:
        parse(path)
    assert "byte 0xE9 at byte 33" in str(e.value) and "iconv -f cp1252 -t utf-8 FILE > FILE.utf8" in str(e.value)
    noise = tmp_path / "noise.bin"
    noise.write_bytes(bytes(range(1, 256)) * 4)
    with pytest.raises(TranscriptFormatError) as e:
        parse(noise)
    assert "iconv" not in str(e.value)
