"""Fuzz every parser with hypothesis: near-valid documents of each format (built from the format's real shape),
then randomly mutated — fields dropped, values of the wrong type, huge strings, odd unicode (lone surrogates, NUL,
RTL, CJK, emoji), deep nesting — given as objects, JSON text, JSONL text and bytes, parsed forced and auto, and
streamed from a file. The only exception allowed is TranscriptFormatError; every message produced must be
strictly UTF-8 encodable. Parse only (no embedding), so a few thousand documents run in well under a minute."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from lantern.archive.parse import FORMATS, ParseResult, parse
from lantern.archive.parse.stream import open_stream
from lantern.errors import TranscriptFormatError

EXAMPLES = examples(300)  # per format (8 formats + mixed: ~3,000 documents, each parsed several ways)
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

# --- leaves: odd text and junk values ------------------------------------------------------------------------

_ODD = st.sampled_from(
    [
        "\ud800",
        "\udfff",
        "a\x00b",
        "\u202eRTL override\u202c",
        "مرحبا بالعالم",
        "שלום",
        "端口 5433 在哪里",
        "日本語テキスト",
        "😀👩‍💻",
        "\r\n",
        "\ufeff",
        "\u0301",
        "e\u0301",
        "\t",
        "",
        " ",
        "null",
        "{",
        "data:image/png;base64,iVBORw0KGgo=",
    ]
)
_TEXT = st.one_of(
    st.text(max_size=40),
    _ODD,
    st.lists(_ODD | st.text(max_size=5), max_size=6).map("".join),
    st.integers(1_000, 120_000).map(lambda n: "x y " * (n // 4)),  # huge strings
    st.integers(1_100, 5_000).map(lambda n: "QUJD" * n),  # a base64-looking blob
)


def _nested(depth: int) -> object:
    value: object = "bottom"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


_JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    _TEXT,
    st.lists(st.integers() | _TEXT, max_size=3),
    st.dictionaries(st.text(max_size=6), st.integers() | _TEXT, max_size=3),
    st.integers(1, 400).map(_nested),  # deep nesting
)

# --- mutation -------------------------------------------------------------------------------------------------


@st.composite
def mutated(draw, base, rate=0.15):
    """``base`` drawn, then walked: each dict key may be dropped or replaced by junk, each list may lose or gain
    items, each string may become odd text; nesting is kept shallow enough for json.dumps."""
    doc = draw(base)

    def hit(p: float) -> bool:  # True with about probability p; shrinks toward False (the valid document)
        return draw(st.integers(0, 999)) >= 1000 * (1 - p)

    def walk(x, depth=0):
        if depth > 30:
            return x
        if hit(rate / 3 if depth else rate / 10):
            return draw(_JUNK)  # a value of the wrong type
        if isinstance(x, dict):
            out = {k: walk(v, depth + 1) for k, v in x.items() if not hit(rate / 2)}  # missing fields
            if hit(rate / 3):
                out[draw(st.text(max_size=8))] = draw(_JUNK)
            return out
        if isinstance(x, list):
            items = [walk(v, depth + 1) for v in x if not hit(rate / 3)]
            if hit(rate / 3):
                items.insert(draw(st.integers(0, len(items))), draw(_JUNK))
            return items
        if isinstance(x, str) and hit(rate):
            return draw(_TEXT)
        return x

    return walk(doc)


# --- near-valid documents of each real shape -------------------------------------------------------------------

_ROLE = st.sampled_from(["user", "assistant", "system", "tool", "developer", "human", "gpt", "model", "function"])
_ID = st.sampled_from(["c1", "c2", "call_x", "toolu_1", ""]) | st.text(max_size=6)

_openai_call = st.fixed_dictionaries(
    {
        "id": _ID,
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {"name": _TEXT, "arguments": _TEXT | st.dictionaries(st.text(max_size=4), _TEXT, max_size=2)}
        ),
    }
)
_openai_part = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT}),
    st.fixed_dictionaries(
        {
            "type": st.just("image_url"),
            "image_url": st.fixed_dictionaries(
                {"url": st.sampled_from(["https://x.test/a.png", "data:image/png;base64," + "iVBO" * 400])},
                optional={"detail": st.just("high"), "alt": _TEXT},
            ),
        }
    ),
)
_openai_msg = st.fixed_dictionaries(
    {"role": _ROLE, "content": st.none() | _TEXT | st.lists(_openai_part, max_size=3)},
    optional={
        "tool_calls": st.lists(_openai_call, max_size=3),
        "tool_call_id": _ID,
        "name": _TEXT,
        "timestamp": st.sampled_from(["2025-01-02T03:04:05Z", "yesterday", 1_700_000_000, 1.7e12]),
    },
)
OPENAI = st.one_of(
    st.lists(_openai_msg, max_size=6), st.fixed_dictionaries({"messages": st.lists(_openai_msg, max_size=6)})
)

_anth_block = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT}),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_use"),
            "id": _ID,
            "name": _TEXT,
            "input": st.dictionaries(st.text(max_size=5), _TEXT, max_size=3),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_result"),
            "tool_use_id": _ID,
            "content": _TEXT | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT}), max_size=2),
        },
        optional={"is_error": st.booleans()},
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("image"),
            "source": st.fixed_dictionaries(
                {"type": st.just("base64"), "media_type": st.just("image/png"), "data": st.just("iVBO" * 500)}
            ),
        }
    ),
    st.fixed_dictionaries({"type": st.just("thinking"), "thinking": _TEXT, "signature": st.just("sig")}),
)
_anth_msg = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant"]), "content": _TEXT | st.lists(_anth_block, max_size=4)}
)
ANTHROPIC = st.fixed_dictionaries(
    {"messages": st.lists(_anth_msg, max_size=6)},
    optional={
        "system": _TEXT | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT}), max_size=2),
        "model": st.just("claude-x"),
    },
)

PLAIN = st.lists(
    st.fixed_dictionaries({"role": _ROLE, "content": _TEXT}, optional={"name": _TEXT, "time": _TEXT}),
    min_size=1,
    max_size=8,
)


def _line(kind, payload):
    return st.fixed_dictionaries(
        {
            "timestamp": st.sampled_from(["2025-10-29T00:59:38.317Z", "bad", ""]),
            "type": st.just(kind),
            "payload": payload,
        }
    )


_codex_item = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("message"),
            "role": st.sampled_from(["user", "assistant", "developer"]),
            "content": st.lists(
                st.one_of(
                    st.fixed_dictionaries({"type": st.sampled_from(["input_text", "output_text"]), "text": _TEXT}),
                    st.fixed_dictionaries(
                        {"type": st.just("input_image"), "image_url": st.just("data:image/png;base64," + "iVBO" * 300)}
                    ),
                ),
                max_size=3,
            ),
        }
    ),
    st.fixed_dictionaries({"type": st.just("function_call"), "name": _TEXT, "arguments": _TEXT, "call_id": _ID}),
    st.fixed_dictionaries(
        {
            "type": st.just("function_call_output"),
            "call_id": _ID,
            "output": st.one_of(
                _TEXT,
                st.lists(st.fixed_dictionaries({"type": st.just("input_text"), "text": _TEXT}), max_size=3),
                st.fixed_dictionaries({"content": _TEXT, "success": st.booleans()}),
            ),
        }
    ),
    st.fixed_dictionaries({"type": st.just("custom_tool_call"), "call_id": _ID, "name": _TEXT, "input": _TEXT}),
    st.fixed_dictionaries({"type": st.just("custom_tool_call_output"), "call_id": _ID, "output": _TEXT}),
    st.fixed_dictionaries(
        {
            "type": st.just("local_shell_call"),
            "call_id": _ID,
            "status": st.just("completed"),
            "action": st.fixed_dictionaries({"type": st.just("exec"), "command": st.lists(_TEXT, max_size=3)}),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("reasoning"),
            "summary": st.lists(st.fixed_dictionaries({"type": st.just("summary_text"), "text": _TEXT}), max_size=2),
            "encrypted_content": st.just("gAAA"),
        }
    ),
)
CODEX = st.lists(
    st.one_of(
        _line(
            "session_meta",
            st.fixed_dictionaries(
                {"id": _ID, "cwd": _TEXT, "cli_version": st.just("0.46.0")}, optional={"instructions": _TEXT}
            ),
        ),
        _line("response_item", _codex_item),
        _line("turn_context", st.fixed_dictionaries({"model": st.just("gpt-5-codex")})),
        _line("event_msg", st.fixed_dictionaries({"type": st.just("agent_message"), "message": _TEXT})),
        _line("compacted", st.fixed_dictionaries({"message": _TEXT})),
        _codex_item,
    ),
    min_size=1,
    max_size=8,
)

_sg_turn = st.fixed_dictionaries(
    {
        "from": st.sampled_from(
            ["human", "gpt", "system", "function_call", "observation", "tool", "user", "assistant", "bot?"]
        ),
        "value": _TEXT
        | st.builds(
            lambda n, a: json.dumps({"name": n, "arguments": a}),
            _TEXT,
            st.dictionaries(st.text(max_size=4), _TEXT, max_size=2),
        ),
    }
)
_sg_conv = st.fixed_dictionaries(
    {"conversations": st.lists(_sg_turn, max_size=6)},
    optional={"id": _ID | st.integers(), "system": _TEXT, "tools": _TEXT},
)
SHAREGPT = _sg_conv | st.lists(_sg_conv, min_size=1, max_size=4)

_swe_hist = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool"]), "content": _TEXT, "agent": st.just("primary")},
    optional={
        "thought": _TEXT,
        "action": _TEXT,
        "message_type": st.sampled_from(["observation", "action"]),
        "is_demo": st.booleans(),
        "tool_calls": st.lists(_openai_call, max_size=2),
        "tool_call_ids": st.lists(_ID, max_size=2),
    },
)
_swe_step = st.fixed_dictionaries(
    {"action": _TEXT, "observation": _TEXT, "response": _TEXT, "thought": _TEXT, "state": st.just("{}")},
    optional={"execution_time": st.floats(0, 10)},
)
SWE = st.fixed_dictionaries(
    {"history": st.lists(_swe_hist, max_size=6)},
    optional={
        "trajectory": st.lists(_swe_step, max_size=5),
        "environment": st.just("swe_main"),
        "info": st.fixed_dictionaries({"exit_status": st.just("submitted")}),
    },
)

_loco_turn = st.fixed_dictionaries(
    {
        "speaker": st.sampled_from(["Caroline", "Melanie"]),
        "dia_id": st.sampled_from(["D1:1", "D1:2", "D2:1"]),
        "text": _TEXT,
    },
    optional={"blip_caption": _TEXT, "img_url": st.lists(_TEXT, max_size=1)},
)
LOCOMO = st.fixed_dictionaries(
    {
        "sample_id": st.just("conv-1"),
        "conversation": st.fixed_dictionaries(
            {
                "speaker_a": st.just("Caroline"),
                "speaker_b": st.just("Melanie"),
                "session_1": st.lists(_loco_turn, max_size=4),
                "session_1_date_time": st.just("1:56 pm on 8 May, 2023"),
            },
            optional={"session_2": st.lists(_loco_turn, max_size=3), "session_2_date_time": _TEXT},
        ),
    }
)

_aider_line = st.one_of(
    st.builds(lambda t: f"# aider chat started at {t}", st.sampled_from(["2024-05-01 10:00:00", "?", ""])),
    st.builds(lambda t: f"#### {t}", _TEXT),
    st.builds(lambda t: f"> {t}", _TEXT),
    _TEXT,
)
AIDER = st.lists(_aider_line, min_size=1, max_size=10).map("\n".join)

_cc_block = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT}),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_use"),
            "id": _ID,
            "name": st.sampled_from(["Bash", "Edit", "Task"]),
            "input": st.dictionaries(st.text(max_size=5), _TEXT, max_size=3),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_result"),
            "tool_use_id": _ID,
            "content": _TEXT | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT}), max_size=2),
        },
        optional={"is_error": st.booleans()},
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("image"),
            "source": st.fixed_dictionaries(
                {"type": st.just("base64"), "media_type": st.just("image/png"), "data": st.just("iVBO" * 500)}
            ),
        }
    ),
    st.fixed_dictionaries({"type": st.just("thinking"), "thinking": _TEXT, "signature": st.just("sig")}),
)
_cc_record = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["user", "assistant", "system", "summary"]),
        "uuid": _ID,
        "sessionId": st.just("7f3c2a10"),
        "timestamp": st.sampled_from(["2026-11-20T09:00:00Z", "bad", ""]),
        "message": st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "assistant"]), "content": _TEXT | st.lists(_cc_block, max_size=4)},
            optional={"id": st.sampled_from(["msg_1", "msg_2"])},
        ),
    },
    optional={
        "parentUuid": _ID | st.none(),
        "isSidechain": st.booleans(),
        "agentId": _ID,
        "isCompactSummary": st.booleans(),
        "subtype": st.just("compact_boundary"),
        "cwd": _TEXT,
    },
)
CLAUDE_CODE = st.lists(_cc_record, min_size=1, max_size=8)

STRATEGIES = {
    "openai": OPENAI,
    "anthropic": ANTHROPIC,
    "jsonl": PLAIN,
    "codex": CODEX,
    "sharegpt": SHAREGPT,
    "swe_agent": SWE,
    "locomo": LOCOMO,
    "claude-code": CLAUDE_CODE,
}
assert set(STRATEGIES) | {"aider"} >= set(FORMATS)

# --- the property -----------------------------------------------------------------------------------------------


def _ok_or_format_error(source, fmt="auto") -> ParseResult | None:
    try:
        result = parse(source, fmt)
    except TranscriptFormatError as e:
        assert str(e)
        return None
    assert isinstance(result, ParseResult)
    for m in result.messages:
        m.render().encode("utf-8")  # strictly encodable: no lone surrogates survive
        assert "\x00" not in m.render()
    return result


def _forms(doc):
    """The document as an object, JSON text, bytes, and (for lists) JSONL text."""
    yield doc
    try:
        text = json.dumps(doc, ensure_ascii=False)
    except (ValueError, RecursionError):
        return
    yield text
    yield text.encode("utf-8", "surrogatepass")
    if isinstance(doc, list) and len(doc) > 1:
        yield "\n".join(json.dumps(x, ensure_ascii=False) for x in doc)


def _streamed(doc, fmt):
    """Stream the document from a JSONL file (forced and auto): only TranscriptFormatError may escape."""
    if not isinstance(doc, list) or len(doc) < 2:
        return
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "doc.jsonl"
        path.write_bytes("\n".join(json.dumps(x, ensure_ascii=False) for x in doc).encode("utf-8", "surrogatepass"))
        for f in (fmt, "auto"):
            try:
                s = open_stream(path, f)
                for piece in s.slices(lines=3) if s else []:
                    for m in piece.messages:
                        m.render().encode("utf-8")
            except TranscriptFormatError:
                pass


def _check(doc, fmt):
    for source in _forms(doc):
        _ok_or_format_error(source, fmt)
        _ok_or_format_error(source, "auto")
    _streamed(doc, fmt)


@SETTINGS
@given(doc=mutated(OPENAI))
def test_fuzz_openai(doc):
    _check(doc, "openai")


@SETTINGS
@given(doc=mutated(ANTHROPIC))
def test_fuzz_anthropic(doc):
    _check(doc, "anthropic")


@SETTINGS
@given(doc=mutated(PLAIN))
def test_fuzz_plain_jsonl(doc):
    _check(doc, "jsonl")


@SETTINGS
@given(doc=mutated(CODEX))
def test_fuzz_codex(doc):
    _check(doc, "codex")


@SETTINGS
@given(doc=mutated(SHAREGPT))
def test_fuzz_sharegpt(doc):
    _check(doc, "sharegpt")


@SETTINGS
@given(doc=mutated(SWE))
def test_fuzz_swe_agent(doc):
    _check(doc, "swe_agent")


@SETTINGS
@given(doc=mutated(LOCOMO))
def test_fuzz_locomo(doc):
    _check(doc, "locomo")


@SETTINGS
@given(text=AIDER)
def test_fuzz_aider(text):
    _ok_or_format_error(text, "aider")
    _ok_or_format_error(text, "auto")
    _ok_or_format_error(text.encode("utf-8", "surrogatepass"), "auto")


@settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(doc=st.one_of(*[mutated(s, rate=0.4) for s in STRATEGIES.values()]), fmt=st.sampled_from(sorted(FORMATS)))
def test_fuzz_any_document_under_any_forced_format(doc, fmt):
    """Every format's documents, heavily mutated, forced through every parser (the wrong-format path)."""
    for source in _forms(doc):
        _ok_or_format_error(source, fmt)


@settings(max_examples=EXAMPLES, deadline=None)
@given(depth=st.integers(50, 3000), kind=st.sampled_from(["[", '{"a":', '{"messages":[']))
def test_fuzz_deeply_nested_text(depth, kind):
    _ok_or_format_error(kind * depth, "auto")
    _ok_or_format_error(kind * depth + "1" + ("]" if kind == "[" else "}") * depth, "auto")
