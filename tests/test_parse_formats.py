"""The transcript formats of issue 4 on fixtures of their real shapes (written by us), the real SWE-agent
trajectories in ../shared/data, images, format mismatches, encodings, and streaming ingest on the real store."""

from __future__ import annotations

import base64
import glob
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lantern import Lantern
from lantern.archive.chunk import chunk
from lantern.archive.parse import detect_format, parse
from lantern.archive.parse import stream as stream_mod
from lantern.archive.parse.stream import open_stream
from lantern.errors import TranscriptFormatError
from lantern.model import Message, ToolCall

FIXTURES = Path(__file__).parent / "fixtures" / "parse"
SWE_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "swe_agent_trajectories"
LANTERN = [sys.executable, "-m", "lantern.cli"]


def calls(r):
    return [c for m in r.messages for c in m.tool_calls]


def results(r):
    return [x for m in r.messages for x in m.tool_results]


# --- Codex CLI rollout --------------------------------------------------------------------------------------


def test_codex_rollout_fixture():
    r = parse(FIXTURES / "codex_rollout.jsonl")
    assert r.format == "codex" == detect_format((FIXTURES / "codex_rollout.jsonl").read_text())
    # the truncated line and the re-recorded function_call are skipped, counted and named by line
    assert r.skipped == 2
    assert r.warnings[0].startswith("line 11: invalid JSON")
    assert r.warnings[1] == "line 20: repeated call_id 'call_A1'; skipped"
    assert [c.name for c in calls(r)] == ["shell", "apply_patch", "view_image", "local_shell"]
    assert calls(r)[0].id == "call_A1" and '"grep -rn PAYMENTS_PORT config/"' in calls(r)[0].arguments
    assert calls(r)[3].arguments == "pytest -q tests/checkout_test.py"
    res = {x.call_id: x for x in results(r)}
    assert "PAYMENTS_PORT=7411" in res["call_A1"].content and res["call_A1"].name == "shell"
    # list-form output: its text, the image as a placeholder, no base64
    assert res["call_C3"].content == "screenshots/checkout.png (1280x720)\n[image]"
    failed = next(m for m in r.messages if m.tool_results and m.tool_results[0].call_id == "call_D4")
    assert failed.meta == {"is_error": True} and "expected 200, got 502" in failed.tool_results[0].content
    roles = [m.role for m in r.messages]
    assert roles[0] == "system" and "<environment_context>" in r.messages[0].text  # injected context, not the user
    user = [m.text for m in r.messages if m.role == "user"]
    assert user == [
        "The checkout test fails with ECONNREFUSED; which port does the payments stub use?",
        "Thanks. Now look at the 502.",
    ]
    # event_msg repeats the user and agent messages: archived once; reasoning is not archived
    texts = [m.text for m in r.messages]
    assert sum("payments stub listens on port 7411" in t for t in texts) == 1
    assert not any("Inspecting the stub config" in t for t in texts)
    summary = [m for m in r.messages if m.meta.get("compact_summary")]
    assert len(summary) == 1 and summary[0].role == "system" and "7411" in summary[0].text
    assert r.messages[1].time.isoformat() == "2025-10-29T00:59:03.317000+00:00"


def test_codex_bare_response_items_and_old_rollouts():
    items = [
        {"id": "s1", "timestamp": "2025-05-01T10:00:00Z", "instructions": "Always run the linter."},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "rename the flag"}]},
        {"type": "function_call", "name": "shell", "arguments": '{"command": ["ls"]}', "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "README.md\nsrc"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Renamed."}]},
    ]
    text = "\n".join(json.dumps(x) for x in items)
    r = parse(text)
    assert r.format == "codex" and r.skipped == 0
    assert [m.role for m in r.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert r.messages[0].text == "Always run the linter." and results(r)[0].content == "README.md\nsrc"


# --- ShareGPT -----------------------------------------------------------------------------------------------


def test_sharegpt_fixture_sub_sessions_and_tool_calls():
    r = parse(FIXTURES / "sharegpt.json")
    assert r.format == "sharegpt"
    assert {m.session for m in r.messages} == {"identity_0", "identity_1"}
    first = [m for m in r.messages if m.session == "identity_0"]
    assert [m.role for m in first] == ["system", "user", "assistant", "user", "assistant", "tool", "assistant"]
    (call,) = calls(r)
    assert call.name == "book_table" and json.loads(call.arguments) == {
        "restaurant": "Taberna 1143",
        "time": "20:00",
        "party": 2,
    }
    res = results(r)
    assert res[0].call_id == call.id and res[0].name == "book_table" and "TB-55821" in res[0].content
    assert res[1].call_id is None  # an observation with no pending call is kept, unmatched
    assert r.skipped == 2
    assert r.warnings == [
        "record 2, conversations[3]: unknown role 'narrator'; skipped",
        "record 2, conversations[4]: empty value; skipped",
    ]
    assert any("CA1234" in m.text for m in r.messages)


def test_sharegpt_single_conversation_jsonl_and_role_content_keys():
    one = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}
    r = parse(json.dumps(one))
    assert r.format == "sharegpt" and [m.session for m in r.messages] == [None, None]
    lines = [
        {
            "conversations": [
                {"role": "user", "content": f"question {i}"},
                {"role": "assistant", "content": f"answer {i}"},
            ]
        }
        for i in range(3)
    ]
    r = parse("\n".join(json.dumps(x) for x in lines))
    assert r.format == "sharegpt"
    assert [m.session for m in r.messages] == ["conversation-1"] * 2 + ["conversation-2"] * 2 + ["conversation-3"] * 2


def test_sharegpt_bad_document_names_the_field():
    with pytest.raises(TranscriptFormatError) as e:
        parse({"conversations": "not a list"}, "sharegpt")
    assert e.value.field == "conversations"
    r = parse([{"conversations": [{"value": "no from"}]}, {"nope": 1}], "sharegpt")
    assert (
        r.skipped == 2 and "missing field 'from'" in r.warnings[0] and "missing field 'conversations'" in r.warnings[1]
    )


# --- SWE-agent ----------------------------------------------------------------------------------------------


def test_swe_agent_fixture():
    r = parse(FIXTURES / "swe_agent.traj")
    assert r.format == "swe_agent" and r.skipped == 0
    assert [m.role for m in r.messages] == ["system", "user"] + ["assistant", "tool"] * 3
    assert not any("DEMONSTRATION" in m.text for m in r.messages)  # demonstrations are not archived
    assert [(c.name, c.id) for c in calls(r)] == [("find_file", "step-1"), ("edit", "step-2"), ("submit", "step-3")]
    assert calls(r)[1].arguments == "edit 12:12\nCACHE_TTL = 900\nend_of_edit"
    assert "15 minutes (900 s)" in r.messages[4].text
    assert results(r)[2].content.endswith("+CACHE_TTL = 900") and results(r)[2].call_id == "step-3"
    turns = chunk(r.messages)  # the system prompt, the task, then one turn per step (thought/action -> observation)
    assert len(turns) == 5 and [t.tool_names for t in turns[2:]] == [["find_file"], ["edit"], ["submit"]]
    assert [m.role for m in turns[3].messages] == ["assistant", "tool"] and turns[3].meta["step"] == 2
    assert "CACHE_TTL = 900" in turns[3].text and "15 minutes (900 s)" in turns[3].text


@pytest.mark.parametrize(
    "doc, field",
    [
        ({"history": "x"}, "history"),
        ({"trajectory": {"a": 1}, "history": []}, "trajectory"),
    ],
)
def test_swe_agent_bad_document_names_the_field(doc, field):
    with pytest.raises(TranscriptFormatError) as e:
        parse(doc, "swe_agent")
    assert e.value.field == field


def _independent_counts(doc: dict) -> tuple[int, int]:
    """Turns and tool calls of a .traj counted straight from its JSON: a turn per non-demo system block and per
    task (user) message before the first assistant message, then a turn per distinct agent step (a trajectory step
    with a thought, action or response; without a trajectory, a non-demo history assistant message with text, a tool
    call
    or an action); a tool call per trajectory step with an action, or, without a trajectory, per history tool call
    (or action)."""
    history = doc.get("history", [])
    first = next(i for i, m in enumerate(history) if m["role"] == "assistant")
    pre = [m for m in history[:first] if not m.get("is_demo")]
    turns = int(any(m["role"] == "system" for m in pre)) + sum(m["role"] == "user" for m in pre)
    if doc.get("trajectory"):  # a step repeated verbatim (same thought, action, observation) is one turn
        steps = {
            (s["thought"], s["action"], s.get("observation") if s["action"].strip() else None)
            if (s["thought"] + s["action"]).strip()
            else ("", "", s.get("response") or "")
            for s in doc["trajectory"]
        }
        turns += sum(any(x.strip() for x in step if isinstance(x, str)) for step in steps)
        tool_calls = sum(bool(action.strip()) for _, action, _ in steps)
    else:
        agent = [m for m in history[first:] if m["role"] == "assistant" and not m.get("is_demo")]
        turns += sum(
            bool(
                (m.get("thought") or m.get("content") or "").strip()
                or m.get("tool_calls")
                or (m.get("action") or "").strip()
            )
            for m in agent
        )
        tool_calls = sum(len(m.get("tool_calls") or []) or bool((m.get("action") or "").strip()) for m in agent)
    return turns, tool_calls


def test_every_real_swe_agent_trajectory(tmp_path):
    files = sorted(glob.glob(str(SWE_DATA / "**" / "*.traj"), recursive=True))
    if not files:
        pytest.skip("../shared/data/swe_agent_trajectories is absent")
    assert len(files) >= 21  # SOURCE.md says 21; the folder holds 22
    with Lantern(tmp_path / "swe.db") as lantern:
        for i, f in enumerate(files):
            doc = json.loads(Path(f).read_text(encoding="utf-8"))
            want_turns, want_calls = _independent_counts(doc)
            result = lantern.ingest(f, session=f"traj-{i}")
            assert result.skipped == 0, (f, result.warnings)
            assert result.added == want_turns, f  # a step repeated verbatim is counted in duplicates
            rows = lantern.store.db.execute(
                "SELECT count(*), sum(tool_count) FROM entries WHERE session = ?", (f"traj-{i}",)
            ).fetchone()
            assert rows == (want_turns, want_calls), f
            steps = doc.get("trajectory") or []
            if steps:  # every observation is archived verbatim
                text = "\n".join(e.text for e in lantern.store.entries(result.entry_ids).values())
                last = steps[-1]["observation"].replace("\r\n", "\n").strip()
                assert last[:200] in text, f


# --- OpenAI / Anthropic -------------------------------------------------------------------------------------


def test_openai_null_content_parallel_results_in_any_order():
    r = parse(FIXTURES / "openai_parallel.json")
    assert r.format == "openai"
    assert [c.id for c in calls(r)] == ["call_x", "call_y", "call_z"]
    by_id = {x.call_id: x for x in results(r)}
    assert by_id["call_z"].name == "get_version" and by_id["call_z"].content == "v2.14.3"
    assert by_id["call_x"].name == "get_status" and by_id["call_x"].content == "staging: DOWN since 14:02 UTC"
    assert by_id["call_y"].name == "get_logs"
    assert r.skipped == 1 and "duplicate result for tool_call_id 'call_y'" in r.warnings[0]
    assert r.messages[1].text == "Here is the dashboard; why is staging red?\n[image]"


def test_anthropic_messages_with_image_and_tool_blocks():
    png = base64.b64encode(os.urandom(3000)).decode()
    doc = {
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": png},
                        "alt": "error dialog",
                    },
                    {"type": "text", "text": "What does this error mean?"},
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "tu1", "name": "search_docs", "input": {"q": "E1234"}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "tu1",
                        "content": [{"type": "text", "text": "E1234: disk quota exceeded"}],
                    }
                ],
            },
            {"role": "assistant", "content": "Your disk quota is exceeded (E1234)."},
        ],
    }
    r = parse(doc)
    assert r.format == "anthropic"
    assert r.messages[1].text == "[image: error dialog]\nWhat does this error mean?"
    assert results(r)[0].name == "search_docs" and results(r)[0].content == "E1234: disk quota exceeded"
    assert all(png[:40] not in m.render() for m in r.messages)


def test_image_placeholders_use_caption_alt_or_url():
    r = parse(
        [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "alt": "a cat\non a mat"}},
                    {"type": "image", "caption": "  the architecture diagram "},
                    {"type": "input_image", "image_url": "data:image/jpeg;base64,AAAA"},
                ],
            }
        ]
    )
    assert r.messages[0].text == (
        "[image: https://example.com/cat.png]\n[image: a cat on a mat]\n[image: the architecture diagram]\n[image]"
    )


def test_200kb_base64_image_leaves_no_base64_in_the_index(tmp_path):
    blob = base64.b64encode(os.urandom(150_000)).decode()  # 200 KB of base64
    assert len(blob) == 200_000
    probe = blob[5000:5032]
    conversation = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Here is the screenshot of the failing build."},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{blob}"}},
            ],
        },
        {
            "role": "assistant",
            "content": "The build fails at step 7, see ![build log](data:image/png;base64," + blob + ")",
        },
        {"role": "user", "content": "and the raw dump: " + blob},
        {"role": "assistant", "content": "Noted."},
    ]
    with Lantern(tmp_path / "img.db") as lantern:
        r = lantern.archive(conversation, session="img")
        entries = lantern.store.entries(r.entry_ids).values()
        for e in entries:
            assert probe not in e.text and probe not in e.summary and len(e.text) < 2000
        texts = "\n".join(e.text for e in entries)
        assert "[image]" in texts and "[image: build log]" in texts and "[base64 data: 200000 chars]" in texts
        fts = lantern.store.db.execute(
            "SELECT count(*) FROM entries_fts WHERE entries_fts MATCH ?", (f'"{probe}"',)
        ).fetchone()[0]
        assert fts == 0
        assert lantern.search("screenshot of the failing build", k=1)


@pytest.mark.parametrize("width, eol", [(76, "\n"), (64, "\r\n")])
def test_line_wrapped_base64_leaves_no_base64_in_the_index(tmp_path, width, eol):
    """``base64 shot.png`` (coreutils wraps at 76 columns), a MIME part or a PEM-style dump (64) in a tool result:
    each line alone is under BLOB_MIN_CHARS, so before this the whole dump (40 KB) was archived verbatim, into
    the full text, the summary, the FTS index and the embedding input. The text around it stays."""
    blob = base64.b64encode(os.urandom(30_000)).decode()
    wrapped = eol.join(blob[i : i + width] for i in range(0, len(blob), width))
    probe = blob[width * 3 : width * 3 + 24]
    conversation = [
        {"role": "user", "content": "Send me the screenshot as text."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"cmd": "base64 shot.png"})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": f"$ base64 shot.png{eol}{wrapped}{eol}exit 0"},
        {"role": "assistant", "content": "Done, screenshot shot.png encoded."},
    ]
    with Lantern(tmp_path / "wrapped.db") as lantern:
        r = lantern.archive(conversation, session="wrapped")
        entries = lantern.store.entries(r.entry_ids).values()
        texts = "\n".join(e.text for e in entries)
        assert probe not in texts and all(probe not in e.summary for e in entries)
        assert f"[base64 data: {len(blob)} chars]" in texts
        assert "$ base64 shot.png" in texts and "exit 0" in texts
        fts = lantern.store.db.execute(
            "SELECT count(*) FROM entries_fts WHERE entries_fts MATCH ?", (f'"{probe}"',)
        ).fetchone()[0]
        assert fts == 0


def test_short_wrapped_base64_and_prose_lines_are_kept():
    """Below BLOB_MIN_CHARS in all (a PEM public key of a few lines), or lines of prose, nothing is replaced."""
    from lantern.text.media import scrub_inline_data

    key = base64.b64encode(os.urandom(300)).decode()
    pem = (
        "-----BEGIN PUBLIC KEY-----\n"
        + "\n".join(key[i : i + 64] for i in range(0, len(key), 64))
        + "\n-----END PUBLIC KEY-----"
    )
    assert scrub_inline_data(pem) == pem
    prose = "\n".join(["the quick brown fox jumps over the lazy dog again and again and again"] * 40)
    assert scrub_inline_data(prose) == prose


# --- mismatches, encodings, Message objects -----------------------------------------------------------------


def test_forcing_anthropic_on_openai_tool_calls_is_an_error_not_a_silent_drop(tmp_path):
    with pytest.raises(TranscriptFormatError) as e:
        parse(FIXTURES / "openai.json", "anthropic")
    assert e.value.field == "messages[2].tool_calls" and "use format 'openai'" in str(e.value)
    with pytest.raises(TranscriptFormatError) as e:
        parse(FIXTURES / "anthropic.json", "openai")
    assert "'tool_use' block" in str(e.value) and e.value.field.endswith(".content")
    lines = [{"role": "user", "content": "go"}] * 3 + [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        }
    ]
    path = tmp_path / "oa.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    for fmt in ("anthropic", "jsonl"):
        with pytest.raises(TranscriptFormatError) as e:
            parse(path, fmt)
        assert (e.value.line, e.value.field) == (4, "tool_calls")
    # the streamed ingest refuses before writing anything
    with Lantern(tmp_path / "mm.db") as lantern:
        with pytest.raises(TranscriptFormatError) as e:
            lantern.ingest(path, format="anthropic")
        assert e.value.line == 4 and lantern.store.count() == 0


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_without_bom_is_text(codec, tmp_path):
    doc = json.dumps(
        [{"role": "user", "content": "一个端口 5433 question"}, {"role": "assistant", "content": "answer"}],
        ensure_ascii=False,
    )
    path = tmp_path / "u16.json"
    path.write_bytes(doc.encode(codec))
    r = parse(path)
    assert [m.text for m in r.messages] == ["一个端口 5433 question", "answer"]
    with pytest.raises(TranscriptFormatError, match="binary data|invalid UTF-8"):
        parse(bytes(range(256)) * 8)


@pytest.mark.parametrize(
    "eols", [("\r", "\r", "\r"), ("\n", "\r", "\r\n"), ("\r\n", "\n", "\r")], ids=["cr-only", "mixed", "mixed-crlf"]
)
def test_jsonl_with_cr_and_mixed_line_ends(eols, tmp_path):
    """Old-Mac CR line ends, or a file concatenated from CRLF and LF and CR pieces: a raw CR cannot occur inside
    a JSON string, so it ends a record like LF. Before, a CR-only file was refused ("line 1: invalid JSON: Extra
    data") and in a mixed one every record behind a lone CR was skipped. Line numbers count every line end, as an
    editor shows them, whole parse and streamed ingest alike."""
    records = [
        {"role": "user", "content": "Start postgres on port 5433."},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "Now the cache on 6380."},
        {"role": "assistant", "content": "Redis up."},
    ]
    lines = [json.dumps(r) for r in records]
    text = lines[0] + eols[0] + lines[1] + eols[1] + "{broken" + eols[2] + lines[2] + "\n" + lines[3] + "\n"
    path = tmp_path / "ends.jsonl"
    path.write_bytes(text.encode())
    r = parse(path)
    assert [m.text for m in r.messages] == [x["content"] for x in records]
    assert r.skipped == 1 and r.warnings[0].startswith("line 3:")
    with Lantern(tmp_path / "ends.db") as lantern:
        result = lantern.ingest(path)
        assert result.added == 2 and result.skipped == 1 and result.warnings[0].startswith("line 3:")


def test_message_objects_get_the_role_and_empty_checks(tmp_path):
    msgs = [
        Message(role="human", text="Remember: the staging DB is on port 5433."),
        Message(role="wizard", text="abracadabra"),
        Message(role="assistant", text="   "),
        Message(role="assistant", tool_calls=[ToolCall("run", "{}", "c1")]),
        Message(role="assistant", text="Noted, 5433."),
    ]
    with Lantern(tmp_path / "m.db") as lantern:
        r = lantern.archive(msgs, session="objs")
        assert r.skipped == 2
        assert r.warnings == ["message 2: unknown role 'wizard'; skipped", "message 3: empty content; skipped"]
        dict_r = lantern.archive([{"role": m.role, "content": m.text} for m in msgs[:3]], session="dicts")
        assert dict_r.skipped == 2
        (entry,) = lantern.store.entries(r.entry_ids).values()
        assert entry.text.startswith("user: Remember") and "abracadabra" not in entry.text
    assert msgs[0].role == "human"  # the caller's objects are not changed


ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"  # ZWSP, ZWNJ, ZWJ, word joiner, BOM: invisible, and not whitespace
# other Default_Ignorable_Code_Point characters: Mongolian vowel separator, combining grapheme joiner, function
# application .. invisible plus, LRM / RLM, soft hyphen, variation selector 16, tag letter A, Hangul filler
OTHER_INVISIBLE = "\u180e\u034f\u2061\u2062\u2063\u2064\u200e\u200f\u00ad\ufe0f\U000e0041\u3164"


@pytest.mark.parametrize("nothing", [ZERO_WIDTH, OTHER_INVISIBLE], ids=["zero-width", "default-ignorable"])
def test_zero_width_only_content_is_empty_content(tmp_path, nothing):
    """A message holding only zero-width or other invisible characters (Unicode Default_Ignorable_Code_Point) and
    whitespace says nothing: skipped and counted with the warning empty content gets, in Message objects, dicts and
    every transcript format, never archived as a turn; such characters inside real text stay. (Before, U+180E,
    U+034F, U+2061..U+2064, LRM / RLM ... alone were archived as a turn.)"""
    with Lantern(tmp_path / "zw.db") as lantern:
        msgs = [
            Message(role="user", text="the staging DB is on port 5433"),
            Message(role="assistant", text=nothing),
            Message(role="user", text=f" {nothing[0]}\n{nothing[-1]} "),
            Message(role="assistant", text="noted: 5433\u200d"),
        ]
        r = lantern.archive(msgs, session="objs")
        assert (r.added, r.skipped) == (1, 2)
        assert r.warnings == ["message 2: empty content; skipped", "message 3: empty content; skipped"]
        assert (
            lantern.store.entries(r.entry_ids)[r.entry_ids[0]].text
            == "user: the staging DB is on port 5433\nassistant: noted: 5433\u200d"
        )
        only = lantern.archive(
            [
                {"role": "user", "content": nothing},
                {"role": "assistant", "content": [{"type": "text", "text": nothing[1]}]},
            ],
            session="dicts",
        )
        assert (only.added, only.skipped, only.warnings) == (
            0,
            2,
            ["message 1: empty content; skipped", "message 2: empty content; skipped"],
        )

        real = {"role": "user", "content": "which port is staging on?"}
        files = {
            "plain.jsonl": "\n".join(json.dumps(m) for m in [real, {"role": "assistant", "content": nothing}]) + "\n",
            "openai.json": json.dumps(
                [
                    real,
                    {"role": "assistant", "content": nothing, "tool_calls": None},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
                        ],
                    },
                ]
            ),
            "anthropic.json": json.dumps(
                {
                    "system": nothing,
                    "messages": [real, {"role": "assistant", "content": [{"type": "text", "text": nothing}]}],
                }
            ),
            "sharegpt.json": json.dumps(
                {"conversations": [{"from": "human", "value": real["content"]}, {"from": "gpt", "value": nothing}]}
            ),
            "codex.jsonl": "\n".join(
                json.dumps(
                    {
                        "type": "response_item",
                        "payload": {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]},
                    }
                )
                for role, text in [("user", real["content"]), ("assistant", nothing)]
            )
            + "\n",
            "claude.jsonl": "\n".join(
                json.dumps(
                    {"type": role, "uuid": f"u{i}", "sessionId": "s1", "message": {"role": role, "content": text}}
                )
                for i, (role, text) in enumerate(
                    [("user", real["content"]), ("assistant", [{"type": "text", "text": nothing}]), ("user", nothing)]
                )
            )
            + "\n",
            "aider.md": f"# aider chat started at 2024-08-06 08:47:10\n\n#### {real['content']}\n\n{nothing}\n\n#### {nothing[0]}\n",  # noqa: E501
        }
        for name, text in files.items():
            path = tmp_path / name
            path.write_text(text, encoding="utf-8")
            r = lantern.ingest(path, session=name)
            turns = [e.text for e in lantern.store.entries(r.entry_ids).values()]
            assert r.skipped >= 1 and all("empty" in w for w in r.warnings), (name, r.warnings)
            assert not any(c in t for t in turns for c in nothing), (name, turns)
            assert any("which port is staging on?" in t for t in turns), (name, turns)


def test_default_ignorable_ranges_are_the_ucd_ones():
    """DEFAULT_IGNORABLE holds the 4,174 code points of DerivedCoreProperties.txt (Unicode 14.0), in sorted
    disjoint ranges, each assigned one of the categories the file gives them (Cf, Mn, Lo; Cn unassigned); letters,
    digits and visible marks outside it are not invisible."""
    import unicodedata

    from lantern.archive.parse.jsonl import DEFAULT_IGNORABLE, invisible

    assert sum(last - first + 1 for first, last in DEFAULT_IGNORABLE) == 4174
    assert all(a[1] < b[0] - 1 for a, b in zip(DEFAULT_IGNORABLE, DEFAULT_IGNORABLE[1:]))  # sorted, merged
    inside = {chr(c) for first, last in DEFAULT_IGNORABLE for c in range(first, last + 1)}
    assert {unicodedata.category(c) for c in inside} == {"Cf", "Mn", "Lo", "Cn"}
    assert all(map(invisible, inside)) and all(map(invisible, " \t\n\u00a0\u2028\u3000"))
    assert not any(map(invisible, "a5é\u0301\u2013端\U0001f600\u115e\u1161\ue000\U000e1000"))
    # every format character (Cf) is Default_Ignorable but those the property's derivation takes out: the
    # interlinear annotation characters, the Egyptian hieroglyph format controls and the prepended concatenation
    # marks (Arabic number signs, Syriac abbreviation mark ...), which are visible
    visible_cf = {
        *range(0xFFF9, 0xFFFC),
        *range(0x13430, 0x13441),
        *range(0x600, 0x606),
        0x6DD,
        0x70F,
        0x890,
        0x891,
        0x8E2,
        0x110BD,
        0x110CD,
    }
    cf = {c for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf"}
    assert {c for c in cf if not invisible(chr(c))} == cf & visible_cf


# --- streaming ingest ---------------------------------------------------------------------------------------


def _chat_lines(n_turns: int, bad_every: int = 0) -> list[str]:
    out = []
    for i in range(n_turns):
        out.append(json.dumps({"role": "user", "content": f"Question {i}: which port does service-{i} use?"}))
        out.append(
            json.dumps(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"c{i}",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": json.dumps({"svc": i})},
                        }
                    ],
                }
            )
        )
        out.append(json.dumps({"role": "tool", "tool_call_id": f"c{i}", "content": f"service-{i} port {10000 + i}"}))
        out.append(json.dumps({"role": "assistant", "content": f"service-{i} listens on {10000 + i}."}))
        if bad_every and i % bad_every == 0:
            out.append('{"role": "user", "content": "truncated')
    return out


def test_streamed_ingest_equals_whole_archive(tmp_path, monkeypatch):
    monkeypatch.setattr(stream_mod, "SLICE_LINES", 7)  # slices cut through turns: the carry-over is exercised
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(_chat_lines(40, bad_every=9)) + "\n", encoding="utf-8")
    s = open_stream(path)
    assert s is not None and s.format == "openai"
    seen = []
    with Lantern(tmp_path / "a.db") as a, Lantern(tmp_path / "b.db") as b:
        streamed = a.ingest(path, session="s", progress=lambda d, t: seen.append((d, t)))
        whole = b.archive(path.read_text(encoding="utf-8"), session="s")
        assert streamed.added == whole.added == 40
        assert streamed.skipped == whole.skipped == 5
        assert streamed.warnings == whole.warnings and streamed.warnings[0].startswith("line 5: invalid JSON")
        ta = [e.text for e in a.store.entries(streamed.entry_ids).values()]
        tb = [e.text for e in b.store.entries(whole.entry_ids).values()]
        assert ta == tb
        assert [tc for (tc,) in a.store.db.execute("SELECT tool_count FROM entries ORDER BY id")] == [1] * 40
        again = a.ingest(path, session="s")
        assert again.added == 0 and again.duplicates == 40
    assert seen[-1] == (40, 40) and [d for d, _ in seen] == sorted(d for d, _ in seen)


def _count(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
            return con.execute("SELECT count(*) FROM entries").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def _start_ingest(db: Path, path: Path, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [*LANTERN, "--db", str(db), "ingest", str(path), "--session", "big"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,
    )


def _wait_for_entries(proc: subprocess.Popen, db: Path, at_least: int) -> int:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        n = _count(db)
        if n >= at_least:
            return n
        time.sleep(0.05)
    raise AssertionError(f"ingest ended or stalled before {at_least} entries: {proc.poll()}")


@pytest.fixture()
def big_transcript(tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(_chat_lines(600)) + "\n", encoding="utf-8")
    return path


def test_killed_ingest_resumes_without_duplicates(tmp_path, big_transcript):
    db = tmp_path / "killed.db"
    proc = _start_ingest(db, big_transcript)
    n = _wait_for_entries(proc, db, 256)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    at_kill = _count(db)
    assert 256 <= at_kill < 600 and at_kill % 256 == 0  # only whole batches were committed
    with Lantern(db) as lantern:
        resumed = lantern.ingest(big_transcript, session="big")
        assert resumed.duplicates == at_kill and resumed.added == 600 - at_kill
    with Lantern(tmp_path / "clean.db") as clean:
        assert clean.ingest(big_transcript, session="big").added == 600
        clean_texts = {t for (t,) in clean.store.db.execute("SELECT text FROM entries")}
    assert _count(db) == 600 and n >= 256
    with sqlite3.connect(db) as con:
        assert {t for (t,) in con.execute("SELECT text FROM entries")} == clean_texts


def test_ctrl_c_reports_committed_turns_and_resume(tmp_path, big_transcript):
    db = tmp_path / "int.db"
    # SIGINT at its default in the child: a shell's background job starts with it ignored, and children inherit that
    proc = _start_ingest(db, big_transcript, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    _wait_for_entries(proc, db, 256)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    err = err.decode()
    assert proc.returncode == 130, err
    committed = _count(db)
    assert f"interrupted: {committed} turns committed" in err and "again to resume" in err


@pytest.mark.parametrize("name", ["codex_rollout.jsonl", "plain.jsonl", "broken.jsonl", "sharegpt.jsonl"])
def test_streamed_slices_equal_the_whole_parse(name, tmp_path, monkeypatch):
    monkeypatch.setattr(stream_mod, "SLICE_LINES", 2)
    path = FIXTURES / name
    if name == "sharegpt.jsonl":  # the ShareGPT fixture as JSONL, one conversation per line
        path = tmp_path / name
        path.write_text(
            "\n".join(
                json.dumps(c, ensure_ascii=False)
                for c in json.loads((FIXTURES / "sharegpt.json").read_text(encoding="utf-8"))
            )
            + "\n",
            encoding="utf-8",
        )
    whole = parse(path)
    s = open_stream(path)
    assert s is not None and s.format == whole.format
    pieces = list(s.slices())
    assert len(pieces) > 1
    streamed = [m for p in pieces for m in p.messages]
    assert [(m.render(), m.session, m.meta) for m in streamed] == [
        (m.render(), m.session, m.meta) for m in whole.messages
    ]
    # the same warnings; streamed ones come in line order (a whole parse lists bad JSON lines first)
    assert sorted(w for p in pieces for w in p.warnings) == sorted(whole.warnings)
    assert s.bytes_done == s.bytes_total == path.stat().st_size


def test_ingest_keeps_the_first_thousand_warnings_and_counts_the_rest(tmp_path):
    path = tmp_path / "noisy.jsonl"
    lines = [
        json.dumps({"role": "user", "content": "The deploy key lives in vault path secret/deploy."}),
        json.dumps({"role": "assistant", "content": "Noted: secret/deploy."}),
    ]
    lines += ['{"role": "user", "content": "cut' for _ in range(1200)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with Lantern(tmp_path / "noisy.db") as lantern:
        r = lantern.ingest(path)
    assert r.added == 1 and r.skipped == 1200
    assert len(r.warnings) == 1001 and r.warnings[0].startswith("line 3: invalid JSON")
    assert r.warnings[-1] == "... 200 more warnings"


def test_swe_agent_steps_are_turns_and_retrieval_finds_the_step(tmp_path):
    with Lantern(tmp_path / "m.db") as memory:
        result = memory.ingest(FIXTURES / "swe_agent.traj", session="cache-ttl")
        hits = memory.search("which file did the agent search for", k=5, session="cache-ttl")
        rows = memory.store.session_turns("cache-ttl", memory.scope)
    assert result.added == 5 and len(rows) == 5  # system prompt, task, three steps
    step_one = next(text for _, _, text in rows if "find_file settings.py" in text)
    assert "CACHE_TTL = 900" not in step_one  # the first step's turn holds only its own action and observation
    assert hits[0].entry.text == step_one and "/app/shop/settings.py" in hits[0].entry.text


@pytest.mark.parametrize("first", [b"", b'{"role": "user", "content": "hi"}\n'])
def test_a_large_binary_file_is_refused_by_its_head_without_being_read_whole(tmp_path, first):
    """A breaker's finding: a 4 GB sparse file (a VM image, a database kept in an ingested folder) was read whole
    before its NUL bytes were noticed. The first 4 KB decide now."""
    import tracemalloc

    path = tmp_path / "disk.img"
    with open(path, "wb") as f:
        f.write(first)
        f.truncate(300 * 1024 * 1024)  # sparse: NUL bytes after the first line
    tracemalloc.start()
    with pytest.raises(TranscriptFormatError, match="binary data"):
        parse(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 20 * 1024 * 1024, peak
    with (
        Lantern(tmp_path / "b.db", embedder="minilm") as memory,
        pytest.raises(TranscriptFormatError, match="binary data"),
    ):
        memory.ingest(path)


@pytest.mark.parametrize("nothing", [ZERO_WIDTH, OTHER_INVISIBLE], ids=["zero-width", "default-ignorable"])
def test_a_swe_agent_step_of_invisible_characters_is_skipped(nothing):
    """A trajectory step whose thought and action are only invisible characters was archived as a tool call
    named by them (the check was ``action.strip()``); it is now skipped and counted, in the trajectory and in an
    agent loop's ``history`` alike (breaker finding)."""
    real = {"thought": "find the port", "action": "grep -rn 5433 config/", "observation": "config/db.yml: port: 5433"}
    doc = {"trajectory": [real, {"thought": nothing, "action": nothing[::-1], "observation": nothing}], "history": []}
    r = parse(json.dumps(doc), format="swe_agent")
    assert r.skipped == 1 and [c.arguments for m in r.messages for c in m.tool_calls] == ["grep -rn 5433 config/"]
    loop = {
        "history": [
            {"role": "system", "content": "you are an agent"},
            {"role": "user", "content": "fix the port"},
            {"role": "assistant", "content": nothing, "action": nothing},
            {"role": "assistant", "content": "done", "action": "submit"},
        ]
    }
    r = parse(json.dumps(loop), format="swe_agent")
    assert [c.arguments for m in r.messages for c in m.tool_calls] == ["submit"] and r.skipped == 1
