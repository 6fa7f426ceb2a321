"""Claude Code: the session JSONL parser on our fixture of the real shape, and the hooks end to end (`lantern hook
claude-code` with the payload on stdin, a temporary HOME and LANTERN_DB, the fake embedder; in-process through
tests/clirun.py, and the installed hook command and a transcript that would block as real processes), plus
`lantern install claude-code` merging into an existing settings.json."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from budget import examples
from clirun import lantern, whole_environment
from lantern import Lantern
from lantern.archive.chunk import chunk
from lantern.archive.parse import detect_format, parse
from lantern.archive.parse.claude_code import read_claude_code
from lantern.errors import TranscriptFormatError

FIXTURE = Path(__file__).parent / "fixtures" / "claude_code_session.jsonl"
SID = "7f3c2a10-5b1e-4c8e-9d2a-1e6f0b7c9a41"
CWD = "/home/dev/billing"


# ------------------------------------------------------------------------------------------------ parser


def test_fixture_is_detected_and_streamed_pieces_are_archived_once():
    result = parse(FIXTURE)
    assert result.format == "claude-code" and result.skipped == 0
    rendered = "\n".join(m.render() for m in result.messages)
    # message msg_01A7bQx2 was written as 3 records (thinking, text, tool_use) and its tool_use record twice
    first = [m for m in result.messages if m.role == "assistant" and "host port 5433" in m.text]
    assert len(first) == 1 and [c.name for c in first[0].tool_calls] == ["Bash"]
    assert rendered.count("docker run -d --name billing-db") == 1
    assert "Port 5432 is taken, so map another host port" not in rendered  # thinking is dropped
    # images: a placeholder, never the base64 data
    assert "[image image/png]" in rendered and "iVBORw0KGgo" not in rendered
    # meta: uuid and cwd of the record
    assert result.messages[0].meta["cwd"] == CWD and result.messages[0].meta["uuid"]


def test_tool_results_are_named_after_their_tool_use():
    result = parse(FIXTURE, "claude-code")
    results = {r.name: r.content for m in result.messages for r in m.tool_results}
    assert results["Bash"] == "127.0.0.1:5433 - accepting connections"  # the last Bash result
    assert results["Write"].endswith("migrations/0001_invoices.sql")
    assert "statement_timeout is 2500 ms" in results["Task"]  # list-form tool_result content


def test_sidechain_is_a_sub_session_and_does_not_split_the_main_turn():
    result = parse(FIXTURE)
    side = [m for m in result.messages if m.session is not None]
    assert {m.session for m in side} == {"sidechain-a91f3c"}
    assert result.messages[-len(side) :] == side  # after the main conversation
    turns = chunk(result.messages)
    report = next(t for t in turns if "invoice report on the dashboard" in t.text)
    assert "tool result Task: statement_timeout is 2500 ms" in report.text and report.session is None
    assert any(t.session == "sidechain-a91f3c" and "billing/db/pool.py:14" in t.text for t in turns)


def test_compact_summary_and_boundary_are_recognized_not_archived():
    transcript = read_claude_code(FIXTURE.read_text(encoding="utf-8"))
    assert [trigger for _, _, trigger in transcript.boundaries] == ["manual"]
    (summary,) = transcript.summaries
    assert summary.text.startswith("This session is being continued") and summary.position == len(transcript.messages)
    assert "5433" not in summary.text  # the detail the summary dropped (the worked example relies on it)
    assert not any("being continued" in m.text for m in parse(FIXTURE).messages)


def test_bad_lines_are_skipped_and_counted_with_their_line(tmp_path):
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    lines.insert(3, '{"type": "user", "uuid": "broken-1", "sessionId": "s"')  # cut short
    lines.insert(5, json.dumps({"type": "user", "uuid": "no-message", "sessionId": SID}))
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = parse(path)
    assert result.format == "claude-code" and result.skipped == 2
    assert any(w.startswith("line 4: invalid JSON") for w in result.warnings)
    assert any(w.startswith("line 6: field 'message'") for w in result.warnings)
    assert len(result.messages) == len(parse(FIXTURE).messages)


def test_other_jsonl_is_not_claude_code():
    plain = '{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "hello"}\n'
    assert detect_format(plain) == "jsonl"
    with pytest.raises(TranscriptFormatError) as err:
        parse(plain, "claude-code")
    assert err.value.line == 1 and err.value.field == "type"


def test_ingest_archives_sidechain_as_sub_session_and_is_idempotent(tmp_path):
    with Lantern(tmp_path / "m.db") as memory:
        first = memory.ingest(FIXTURE, session=SID)
        again = memory.ingest(FIXTURE, session=SID)
        sessions = memory.store.sessions()
    assert first.added >= 5 and again.added == 0 and again.duplicates == first.added
    assert f"{SID}/sidechain-a91f3c" in sessions and SID in sessions


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
    max_leaves=8,
)
_block = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.one_of(st.text(max_size=30), _json)}),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_use"),
            "id": st.one_of(st.text(max_size=6), _json),
            "name": st.one_of(st.sampled_from(["Bash", "Read"]), _json),
            "input": _json,
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_result"),
            "tool_use_id": st.one_of(st.text(max_size=6), _json),
            "content": _json,
            "is_error": _json,
        }
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["image", "thinking", "document", "weird"]), "source": _json}),
    _json,
)
_record = st.fixed_dictionaries(
    {"type": st.one_of(st.sampled_from(["user", "assistant", "system", "summary"]), _json)},
    optional={
        "uuid": st.one_of(st.sampled_from(["u1", "u2", "u3"]), _json),
        "sessionId": st.one_of(st.just(SID), _json),
        "isSidechain": _json,
        "agentId": _json,
        "isCompactSummary": _json,
        "isMeta": _json,
        "subtype": st.one_of(st.just("compact_boundary"), _json),
        "compactMetadata": _json,
        "timestamp": st.one_of(st.just("2026-11-20T09:00:00Z"), _json),
        "cwd": _json,
        "message": st.one_of(
            st.fixed_dictionaries(
                {"role": _json, "content": st.one_of(st.lists(_block, max_size=4), st.text(max_size=40), _json)},
                optional={"id": st.one_of(st.sampled_from(["m1", "m2"]), _json)},
            ),
            _json,
        ),
    },
)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_record.map(json.dumps), st.text(max_size=30)), min_size=1, max_size=8))
def test_fuzz_claude_code_parser_raises_only_transcript_format_error(lines):
    text = "\n".join(lines) + "\n"
    try:
        result = parse(text, "claude-code")
    except TranscriptFormatError as e:
        if "not a Claude Code" in str(e):  # a document of records: names the first record's line and 'type'
            assert e.field == "type" and e.line is not None
        return
    for m in result.messages:
        assert m.role in ("user", "assistant", "tool") and (m.text.strip() or m.tool_calls or m.tool_results)
    chunk(result.messages)  # the next stage takes whatever the parser returns


# ------------------------------------------------------------------------------------------------ hooks


@pytest.fixture
def env(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    e = {k: v for k, v in os.environ.items() if k not in ("LANTERN_DB", "HOME")}
    e.update(HOME=str(home), LANTERN_DB=str(tmp_path / "db" / "lantern.db"))
    return e


def hook(env: dict, payload: dict | str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``lantern hook claude-code`` with ``payload`` on stdin, ``env`` its whole environment, in-process
    (tests/clirun.py; the installed hook command runs as a real process below); text output."""
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return _text(lantern("hook", "claude-code", input=data, env=whole_environment(env), cwd=cwd))


def _text(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def payload(event: str, transcript: Path, **extra) -> dict:
    return {
        "session_id": SID,
        "transcript_path": str(transcript),
        "cwd": CWD,
        "permission_mode": "default",
        "hook_event_name": event,
        **extra,
    }


def entries(env: dict) -> int:
    with Lantern(env["LANTERN_DB"]) as memory:
        return memory.stats()["entries"]


def test_precompact_archives_incrementally(env, tmp_path):
    lines = FIXTURE.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(lines) if "Write the first migration" in ln)  # a turn boundary
    transcript = tmp_path / "session.jsonl"
    transcript.write_text("".join(lines[:cut]), encoding="utf-8")
    r = hook(env, payload("Stop", transcript, stop_hook_active=False))
    assert r.returncode == 0 and r.stdout == ""
    after_stop = entries(env)
    assert after_stop == 1  # the first turn

    with open(transcript, "a", encoding="utf-8") as f:
        f.write("".join(lines[cut:]))
    r = hook(env, payload("PreCompact", transcript, trigger="auto", custom_instructions=None))
    assert r.returncode == 0 and r.stdout == ""
    with Lantern(tmp_path / "whole.db") as whole:
        expected = whole.ingest(FIXTURE, session=SID).added
    assert entries(env) == expected  # the same turns as a whole-file ingest: nothing twice, nothing missed
    offsets = json.loads((Path(env["HOME"]) / ".lantern" / "claude-code" / "offsets.json").read_text())
    (state,) = offsets.values()
    assert state["offset"] == transcript.stat().st_size and state["line"] == len(lines) + 1
    assert hook(env, payload("PreCompact", transcript, trigger="manual")).returncode == 0
    assert entries(env) == expected


def test_session_start_after_compaction_recovers_what_the_summary_dropped(env, tmp_path):
    transcript = tmp_path / "session.jsonl"
    text = FIXTURE.read_text(encoding="utf-8")
    transcript.write_text(text, encoding="utf-8")
    assert hook(env, payload("PreCompact", transcript, trigger="manual")).returncode == 0
    # a turn after the compaction is live: it must never be re-injected
    live = [
        {
            "type": "user",
            "uuid": "post-1",
            "parentUuid": "cb000001-0000-4000-8000-00000000c0b1",
            "sessionId": SID,
            "cwd": CWD,
            "timestamp": "2026-11-20T09:06:00Z",
            "message": {"role": "user", "content": "Use redis on port 6380 for the job queue."},
        },
        {
            "type": "assistant",
            "uuid": "post-2",
            "parentUuid": "post-1",
            "sessionId": SID,
            "cwd": CWD,
            "timestamp": "2026-11-20T09:06:05Z",
            "message": {
                "id": "msg_post",
                "role": "assistant",
                "content": [{"type": "text", "text": "Noted: redis on 6380."}],
            },
        },
    ]
    with open(transcript, "a", encoding="utf-8") as f:
        f.write("".join(json.dumps(x) + "\n" for x in live))

    r = hook(env, payload("SessionStart", transcript, source="compact", model="claude-sonnet-4-5"))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = out["hookSpecificOutput"]["additionalContext"]
    summary = read_claude_code(text).summaries[-1].text
    for detail in ("5433", "0001_invoices.sql", "statement_timeout=2500"):
        assert detail in context and detail not in summary
    assert "6380" not in context  # live after the compaction: excluded
    assert len(context) <= 6000

    assert hook(env, payload("SessionStart", transcript, source="startup")).stdout == ""
    with Lantern(env["LANTERN_DB"]) as memory:  # the receipt: latency, the loss report, nothing to excuse
        (event,) = memory.events()
    assert event.source == "claude-code" and event.reason == "compact_boundary" and event.chars == len(context)
    assert event.latency_ms > 0 and event.empty_reason is None
    assert event.loss["packed"] > 0 and all(i["value"].rstrip("…") in context for i in event.loss["items"])


def test_a_summary_over_a_million_characters_still_gets_its_injection_and_says_it_was_cut(env, tmp_path):
    """A compaction summary past ``compaction.MAX_SUMMARY_CHARS`` (a runaway summary) is read up to the limit: the
    hook injects what the cut summary lost and logs why (it was a ValueError: nothing injected, an error receipt)."""
    records = [json.loads(x) for x in FIXTURE.read_text(encoding="utf-8").splitlines()]
    for rec in records:
        if rec.get("isCompactSummary"):
            content = rec["message"]["content"]
            text = content if isinstance(content, str) else content[0]["text"]
            long = text + "\n" + "padding words " * 80_000
            rec["message"]["content"] = long if isinstance(content, str) else [{"type": "text", "text": long}]
    assert len(long) > 1_000_000
    transcript = tmp_path / "session.jsonl"
    transcript.write_text("".join(json.dumps(x) + "\n" for x in records), encoding="utf-8")
    r = hook(env, payload("SessionStart", transcript, source="compact"))
    assert r.returncode == 0 and r.stdout, r.stderr
    context = json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "5433" in context and "0001_invoices.sql" in context
    log = (Path(env["HOME"]) / ".lantern" / "logs" / "claude-code.log").read_text()
    assert "summary_cut: summary of" in log and "Error" not in log
    with Lantern(env["LANTERN_DB"]) as memory:
        (event,) = memory.events()
    assert event.empty_reason is None and event.chars == len(context)


def test_session_start_compact_without_a_compaction_or_with_an_error_leaves_a_receipt_saying_why(env, tmp_path):
    lines = FIXTURE.read_text(encoding="utf-8").splitlines(keepends=True)
    transcript = tmp_path / "session.jsonl"
    transcript.write_text("".join(x for x in lines if "compact" not in x.lower()), encoding="utf-8")  # never compacted
    r = hook(env, payload("SessionStart", transcript, source="compact"))
    assert r.returncode == 0 and r.stdout == ""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"hello": 1}\n', encoding="utf-8")  # not a Claude Code transcript: the hook fails and says so
    r = hook(env, payload("SessionStart", bad, source="compact"))
    assert r.returncode == 0 and r.stdout == ""
    with Lantern(env["LANTERN_DB"]) as memory:
        reasons = [e.empty_reason for e in memory.events()]
    assert reasons == ["error", "no_compaction"]


@settings(max_examples=examples(5), deadline=None, suppress_health_check=list(HealthCheck))
@given(budget=st.integers(40_000, 200_000), wide=st.sampled_from(["x", "端", "\n"]))
def test_the_hook_output_stays_under_claude_codes_50000_characters_whatever_the_budget(tmp_path_factory, budget, wide):
    """Claude Code writes a hook output over 50,000 characters to a file and shows the model a preview: the whole
    JSON output (newlines escaped, so a block of newlines doubles) is held under ``OUTPUT_CAP_CHARS``."""
    from lantern.integrations import claude_code as cc

    tmp = tmp_path_factory.mktemp("cap")
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    filler = [  # many earlier turns whose specifics the summary never states
        json.dumps(
            {
                "type": "user",
                "uuid": f"fill-{i}",
                "parentUuid": None if i == 0 else f"fill-{i - 1}",
                "sessionId": SID,
                "cwd": CWD,
                "timestamp": "2026-11-20T08:00:00Z",
                "message": {
                    "role": "user",
                    "content": f"note {i}: /srv/app{i}/conf_{i}.toml port {9000 + i} " + wide * 300,
                },
            }
        )
        for i in range(120)
    ]
    first = next(i for i, x in enumerate(lines) if '"parentUuid":null' in x)  # the fixture's chain goes on from them
    lines[first] = lines[first].replace('"parentUuid":null', '"parentUuid":"fill-119"', 1)
    transcript = tmp / "session.jsonl"
    transcript.write_text("\n".join(filler + lines) + "\n", encoding="utf-8")
    ctx = cc.HookContext(db=tmp / "m.db", offsets=cc.Offsets(tmp / "offsets.json"), budget=budget, host="claude-code")
    out = cc.handle(payload("SessionStart", transcript, source="compact"), ctx)
    with Lantern(ctx.db) as memory:
        (event,) = memory.events()
        assert memory.stats()["entries"] > 120  # the filler turns are on the live branch, archived
    if out is None:
        assert event.empty_reason == "host_cap"
    else:
        assert len(json.dumps(out, ensure_ascii=False)) <= cc.OUTPUT_CAP_CHARS and event.empty_reason is None


def test_every_prompt_after_a_compaction_is_a_candidate_and_the_evidence_decides(env, tmp_path):
    """Issue 35: no cue grammar decides. Before anything is archived a prompt touches no database; once the session
    is compacted and archived, a question that names an archived fact with no back-reference cue gets it, a
    back-reference in natural words gets it, and a prompt about nothing archived gets nothing, with its reason in
    the log and no compaction event."""
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    plain = hook(env, payload("UserPromptSubmit", transcript, prompt="add a docstring to pool.py"))
    assert plain.returncode == 0 and plain.stdout == ""
    assert not Path(env["LANTERN_DB"]).exists()  # nothing archived yet: no database touched

    assert hook(env, payload("Stop", transcript, stop_hook_active=False)).returncode == 0
    for prompt in ("which port is postgres on?", "remind me, what was the port again?"):
        r = hook(env, payload("UserPromptSubmit", transcript, prompt=prompt))
        assert r.returncode == 0
        out = json.loads(r.stdout)["hookSpecificOutput"]
        assert out["hookEventName"] == "UserPromptSubmit" and "5433" in out["additionalContext"], prompt
    with Lantern(env["LANTERN_DB"]) as memory:
        before = len(memory.events(limit=None))
    r = hook(env, payload("UserPromptSubmit", transcript, prompt="write a haiku about autumn leaves in Kyoto"))
    assert r.returncode == 0 and r.stdout == ""
    log = (Path(env["HOME"]) / ".lantern" / "logs" / "claude-code.log").read_text()
    assert "hook UserPromptSubmit: below_floor: best relevance" in log, log
    with Lantern(env["LANTERN_DB"]) as memory:
        assert len(memory.events(limit=None)) == before >= 2


def test_bad_payloads_exit_0_print_nothing_and_log_without_text(env, tmp_path):
    secret_prompt = "as I said earlier the password is hunter2-xyz"
    cases = [
        "this is not json {",
        json.dumps(["a", "list"]),
        json.dumps(payload("Stop", tmp_path / "missing.jsonl")),
        json.dumps(payload("UserPromptSubmit", tmp_path / "missing.jsonl", prompt=secret_prompt)),
    ]
    Path(env["LANTERN_DB"]).parent.mkdir()
    with Lantern(env["LANTERN_DB"]) as memory:  # a database exists, so the prompt case reaches the transcript
        memory.archive([{"role": "user", "content": "hello"}], session=SID)
    for stdin in cases:
        r = hook(env, stdin)
        assert r.returncode == 0 and r.stdout == "", (stdin, r.stdout)
    not_claude = tmp_path / "other.jsonl"
    not_claude.write_text('{"role": "user", "content": "hi"}\n', encoding="utf-8")
    r = hook(env, payload("PreCompact", not_claude, trigger="auto"))
    assert r.returncode == 0 and r.stdout == ""
    log = (Path(env["HOME"]) / ".lantern" / "logs" / "claude-code.log").read_text()
    assert log.count("\n") == 5
    assert "JSONDecodeError" in log and "FileNotFoundError" in log and "TranscriptFormatError" in log
    assert "hunter2" not in log and "not json" not in log


def test_a_transcript_that_is_not_a_regular_file_is_skipped_without_hanging(env, tmp_path):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)  # no writer: opening it for reading blocks, reading it waits forever
    folder = tmp_path / "folder.jsonl"
    folder.mkdir()
    cases = [
        payload("Stop", fifo, stop_hook_active=False),
        payload("PreCompact", Path("/dev/zero"), trigger="auto"),
        payload("Stop", folder, stop_hook_active=False),
    ]
    for p in cases:
        r = subprocess.run(
            [sys.executable, "-m", "lantern.cli", "hook", "claude-code"],
            input=json.dumps(p),
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0 and r.stdout == "", p
    log = (Path(env["HOME"]) / ".lantern" / "logs" / "claude-code.log").read_text()
    assert log.count("skipped: transcript_path is not a regular file") == 3
    assert not Path(env["LANTERN_DB"]).exists()


def test_a_transcript_over_the_cap_is_skipped(tmp_path, monkeypatch):
    from lantern.integrations import claude_code

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(claude_code, "MAX_TRANSCRIPT_BYTES", 100)
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    db = tmp_path / "m.db"
    out = claude_code.run(json.dumps(payload("Stop", transcript)), db, claude_code.Offsets(tmp_path / "offsets.json"))
    assert out == "" and not db.exists()
    log = (tmp_path / "home" / ".lantern" / "logs" / "claude-code.log").read_text()
    assert "skipped: transcript over 100 bytes" in log


def test_the_hook_archives_and_recovers_in_the_lantern_user_scope(env, tmp_path):
    import sqlite3

    alice = {**env, "LANTERN_USER": "alice"}
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    assert hook(alice, payload("PreCompact", transcript, trigger="manual")).returncode == 0
    with sqlite3.connect(env["LANTERN_DB"]) as db:
        assert {u for (u,) in db.execute("SELECT DISTINCT user_id FROM entries")} == {"alice"}
    with Lantern(env["LANTERN_DB"]) as default_user:
        assert default_user.search("postgres port 5433", k=5) == []
    r = hook(alice, payload("SessionStart", transcript, source="compact"))
    assert r.returncode == 0 and "5433" in json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"]
    # the default user's hook has archived nothing yet: its own offset starts at 0, and it reads into its own scope
    assert hook(env, payload("Stop", transcript)).returncode == 0
    with sqlite3.connect(env["LANTERN_DB"]) as db:
        users = dict(db.execute("SELECT user_id, count(*) FROM entries GROUP BY user_id").fetchall())
    assert users == {"alice": 5, "": 5}


# ------------------------------------------------------------------------------------------------ install


def install(env: dict, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``lantern install claude-code ARGS`` in ``cwd``, ``env`` its whole environment, in-process; text output."""
    return _text(lantern("install", "claude-code", *args, env=whole_environment(env), cwd=cwd))


def test_install_merges_is_idempotent_and_uninstall_removes_only_ours(env, tmp_path):
    project = tmp_path / "proj"
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    original = {
        "permissions": {"allow": ["Bash(npm test)"]},
        "hooks": {
            "PreCompact": [{"matcher": "manual", "hooks": [{"type": "command", "command": 'cp "$T" backup.jsonl'}]}],
            "PostToolUse": [{"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "ruff format"}]}],
        },
    }
    settings.write_text(json.dumps(original, indent=2), encoding="utf-8")

    r = install(env, "--project", cwd=project)
    assert r.returncode == 0, r.stderr
    data = json.loads(settings.read_text())
    assert data["permissions"] == original["permissions"]
    assert data["hooks"]["PostToolUse"] == original["hooks"]["PostToolUse"]
    assert data["hooks"]["PreCompact"][0] == original["hooks"]["PreCompact"][0]
    for event in ("PreCompact", "SessionStart", "UserPromptSubmit", "Stop"):
        ours = [h for g in data["hooks"][event] for h in g["hooks"] if h["command"].endswith("hook claude-code")]
        assert len(ours) == 1 and ours[0]["type"] == "command"
    assert [g.get("matcher") for g in data["hooks"]["SessionStart"]] == ["compact"]
    installed = settings.read_bytes()

    r = install(env, cwd=project)  # --project is the default; again: nothing changes
    assert r.returncode == 0 and "already up to date" in r.stdout and settings.read_bytes() == installed

    r = install(env, "--uninstall", cwd=project)
    assert r.returncode == 0
    assert json.loads(settings.read_text()) == original


def test_install_user_scope_and_malformed_settings_left_untouched(env, tmp_path):
    r = install(env, "--user", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    user_settings = Path(env["HOME"]) / ".claude" / "settings.json"
    assert "hook claude-code" in user_settings.read_text()
    assert install(env, "--user", "--uninstall", cwd=tmp_path).returncode == 0
    assert json.loads(user_settings.read_text()) == {}

    project = tmp_path / "broken"
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    bad = b'{"hooks": {"Stop": [ }\n'
    settings.write_bytes(bad)
    r = install(env, cwd=project)
    assert r.returncode == 1 and "not valid JSON" in r.stderr and "untouched" in r.stderr
    assert settings.read_bytes() == bad


def test_installed_command_runs_the_hook_against_its_database(env, tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    db = tmp_path / "chosen" / "memory.db"
    r = _text(lantern("--db", str(db), "install", "claude-code", env=whole_environment(env), cwd=project))
    assert r.returncode == 0, r.stderr
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    (group,) = settings["hooks"]["PreCompact"]
    command = group["hooks"][0]["command"]
    assert str(db) in command
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    other = {k: v for k, v in env.items() if k != "LANTERN_DB"}  # Claude Code's environment need not have it
    done = subprocess.run(
        command,
        shell=True,
        input=json.dumps(payload("PreCompact", transcript, trigger="auto")),
        env=other,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout == ""
    with Lantern(db) as memory:
        assert memory.stats()["entries"] == 5


def test_install_db_option_pins_the_database_and_uninstall_still_finds_the_hooks(env, tmp_path):
    """`lantern install claude-code --db PATH` (the option after the command) pins PATH in every hook command: the
    hooks write there even when Claude Code's environment has another $LANTERN_DB. Installing again with another
    PATH replaces ours (never two), and --uninstall removes them whatever PATH they carry."""
    project = tmp_path / "my proj"
    project.mkdir()
    settings = project / ".claude" / "settings.json"
    first, pinned = tmp_path / "first.db", tmp_path / "pinned dir" / "memory.db"
    assert install(env, "--db", str(first), cwd=project).returncode == 0
    r = install(env, "--db", str(pinned), cwd=project)
    assert r.returncode == 0, r.stderr
    data = json.loads(settings.read_text())
    commands = [h["command"] for groups in data["hooks"].values() for g in groups for h in g["hooks"]]
    assert len(commands) == 4 and all(
        shlex.split(c)[-4:] == ["--db", str(pinned), "hook", "claude-code"] for c in commands
    )
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    elsewhere = {**env, "LANTERN_DB": str(tmp_path / "env.db")}  # the hook's own environment points elsewhere
    (group,) = data["hooks"]["PreCompact"]
    done = subprocess.run(
        group["hooks"][0]["command"],
        shell=True,
        env=elsewhere,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        input=json.dumps(payload("PreCompact", transcript, trigger="auto")),
    )
    assert done.returncode == 0 and done.stdout == ""
    with Lantern(pinned) as memory:
        assert memory.stats()["entries"] == 5
    assert not (tmp_path / "env.db").exists() and not first.exists()
    r = install(env, "--uninstall", cwd=project)
    assert r.returncode == 0 and "removed from" in r.stdout
    assert json.loads(settings.read_text()) == {}


def test_a_rewritten_shorter_transcript_is_read_again_without_duplicates(tmp_path):
    from lantern.integrations.claude_code import HookContext, Offsets, archive_new

    ctx = HookContext(db=tmp_path / "m.db", offsets=Offsets(tmp_path / "offsets.json"), host="claude-code")
    transcript = tmp_path / "session.jsonl"
    lines = FIXTURE.read_text(encoding="utf-8").splitlines(keepends=True)
    transcript.write_text("".join(lines), encoding="utf-8")
    with Lantern(ctx.db) as memory:
        assert archive_new(ctx, SID, transcript, memory) == 5
        assert archive_new(ctx, SID, transcript, memory) == 0  # nothing new
        cut = next(i for i, ln in enumerate(lines) if "Write the first migration" in ln)  # a turn boundary
        transcript.write_text("".join(lines[:cut]) + '{"type": "user", "uuid": "half', encoding="utf-8")  # shorter
        assert archive_new(ctx, SID, transcript, memory) == 0  # read again from the start: all already archived
        assert ctx.offsets.get(ctx.db, transcript).line == cut + 1  # the partial last line waits
        assert memory.stats()["entries"] == 5


def test_install_through_a_symlinked_settings_file_keeps_the_link(tmp_path):
    from lantern.integrations.claude_code_settings import install as install_hooks

    dotfiles = tmp_path / "dotfiles" / "claude-settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text(json.dumps({"permissions": {"allow": ["Bash(ls)"]}}), encoding="utf-8")
    link = tmp_path / "proj" / ".claude" / "settings.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(dotfiles)
    path, changed = install_hooks("project", project_dir=tmp_path / "proj", command="lantern hook claude-code")
    assert changed and path == link
    assert link.is_symlink() and Path(os.readlink(link)) == dotfiles
    data = json.loads(dotfiles.read_text(encoding="utf-8"))
    assert data["permissions"] == {"allow": ["Bash(ls)"]} and "Stop" in data["hooks"]
    assert sorted(p.name for p in dotfiles.parent.iterdir()) == ["claude-settings.json"]
    assert sorted(p.name for p in link.parent.iterdir()) == ["settings.json"]


def test_a_failed_install_leaves_no_temporary_file(tmp_path, monkeypatch):
    from lantern.integrations import claude_code_settings

    settings_file = tmp_path / "proj" / ".claude" / "settings.json"
    settings_file.parent.mkdir(parents=True)
    settings_file.write_text("{}", encoding="utf-8")

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(claude_code_settings.os, "replace", failing_replace)
    with pytest.raises(OSError):
        claude_code_settings.install("project", project_dir=tmp_path / "proj", command="lantern hook claude-code")
    assert [p.name for p in settings_file.parent.iterdir()] == ["settings.json"]
    assert settings_file.read_text(encoding="utf-8") == "{}"


def test_install_reads_a_settings_file_with_a_bom_and_writes_it_without(tmp_path):
    from lantern.integrations.claude_code_settings import install as install_hooks

    settings_file = tmp_path / "proj" / ".claude" / "settings.json"
    settings_file.parent.mkdir(parents=True)
    settings_file.write_bytes(b"\xef\xbb\xbf" + json.dumps({"model": "opus"}).encode())
    path, changed = install_hooks("project", project_dir=tmp_path / "proj", command="lantern hook claude-code")
    assert changed
    raw = settings_file.read_bytes()
    assert not raw.startswith(b"\xef\xbb\xbf")
    data = json.loads(raw)
    assert data["model"] == "opus" and "PreCompact" in data["hooks"]


@pytest.mark.parametrize(
    "content", [b'{"model": "caf\xe9"}\n', '{"model": "x"}'.encode("utf-16")], ids=["latin-1", "utf-16"]
)
def test_install_on_settings_that_are_not_utf8_names_the_file_and_leaves_it(env, tmp_path, content):
    """A settings.json saved as latin-1 or UTF-16 by an editor: before, the error was a bare codec message
    ("'utf-8' codec can't decode byte 0xe9 in position 15") naming neither the file nor what to do."""
    project = tmp_path / "enc"
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_bytes(content)
    r = install(env, cwd=project)
    assert r.returncode == 1 and str(settings) in r.stderr and "not UTF-8" in r.stderr and "untouched" in r.stderr
    assert "Traceback" not in r.stderr
    assert settings.read_bytes() == content


def _long_session(path: Path, turns: int) -> None:
    """A Claude Code transcript of ``turns`` turns, each a user prompt, an assistant tool call, its result and the
    answer (records of the real shape), every turn naming its own port."""
    lines, parent = [], None
    for i in range(turns):
        ids = [f"00000000-0000-4000-8000-{i:08d}{k:04d}" for k in range(4)]
        stamp = f"2026-11-01T10:{i // 60 % 60:02d}:{i % 60:02d}.000Z"
        base = {"sessionId": SID, "cwd": CWD, "timestamp": stamp, "isSidechain": False}
        recs = [
            {
                "type": "user",
                "uuid": ids[0],
                "message": {"role": "user", "content": f"Start service {i} and tell me its port."},
            },
            {
                "type": "assistant",
                "uuid": ids[1],
                "message": {
                    "id": f"msg_{i}_a",
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": f"svc start {i}"}}
                    ],
                },
            },
            {
                "type": "user",
                "uuid": ids[2],
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": f"toolu_{i}",
                            "content": f"service {i} listening on {6000 + i}",
                        }
                    ],
                },
            },
            {
                "type": "assistant",
                "uuid": ids[3],
                "message": {
                    "id": f"msg_{i}_b",
                    "role": "assistant",
                    "content": [{"type": "text", "text": f"Service {i} is up on port {6000 + i}."}],
                },
            },
        ]
        for rec in recs:
            lines.append(json.dumps({**base, **rec, "parentUuid": parent}))
            parent = rec["uuid"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_a_long_backlog_is_archived_a_chunk_per_transaction_over_several_hooks(tmp_path, monkeypatch):
    """A long session met for the first time (Lantern installed mid-session): each hook commits chunk after chunk
    and stops starting new ones when its time is spent, keeping what it committed, so the next hooks go on where it
    stopped (before, one hook read everything in one transaction; killed by Claude Code's timeout, every later hook
    redid it all). Chunks end before a user prompt: the turns are those of one ingest of the whole file."""
    from lantern.integrations import claude_code

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    transcript = tmp_path / f"{SID}.jsonl"
    _long_session(transcript, 60)
    monkeypatch.setattr(claude_code, "ARCHIVE_CHUNK_BYTES", 4096)  # the file is ~60 KB: ~15 chunks
    monkeypatch.setattr(claude_code, "ARCHIVE_TIME_BUDGET_S", 0.0)  # every hook's time is spent after one chunk
    db, offsets = tmp_path / "m.db", claude_code.Offsets(tmp_path / "offsets.json")
    counts = []
    for _ in range(40):
        assert claude_code.run(json.dumps(payload("Stop", transcript)), db, offsets) == ""
        with Lantern(db) as memory:
            counts.append(memory.stats()["entries"])
        if len(counts) > 1 and counts[-1] == counts[-2]:
            break
    assert 8 <= len(counts) < 40 and counts == sorted(counts) and counts[0] < 10  # progress, hook after hook
    assert offsets.get(db, transcript).offset == transcript.stat().st_size
    with Lantern(db) as memory:
        hooked = sorted(text for _, text in memory.store.texts())
    with Lantern(tmp_path / "ingest.db") as memory:
        memory.ingest(transcript, SID)
        whole = sorted(text for _, text in memory.store.texts())
    assert len(hooked) == 60 and hooked == whole  # no turn cut at a chunk boundary, none twice
    log = (tmp_path / "home" / ".lantern" / "logs" / "claude-code.log").read_text()
    assert "transcript backlog: archived up to byte" in log


def test_a_deleted_database_is_filled_again_from_the_transcript_start(tmp_path, monkeypatch):
    """The offsets file outlives the database: after ``rm lantern.db`` the next hook archived only lines added
    later (a breaker's finding: 0 entries). An offset into a database that no longer exists is the start."""
    from lantern.integrations import claude_code

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    transcript = tmp_path / f"{SID}.jsonl"
    _long_session(transcript, 5)
    db, offsets = tmp_path / "m.db", claude_code.Offsets(tmp_path / "offsets.json")
    claude_code.run(json.dumps(payload("Stop", transcript)), db, offsets)
    with Lantern(db) as memory:
        assert memory.stats()["entries"] == 5
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    claude_code.run(json.dumps(payload("Stop", transcript)), db, offsets)
    with Lantern(db) as memory:
        assert memory.stats()["entries"] == 5


def test_every_way_of_naming_a_server_url_for_the_hooks_is_refused_and_nothing_is_written(env, tmp_path):
    """F7 (breaker-23): the hooks work on a SQLite file only. `install claude-code --db URL` (the command's own
    option) is refused as the global `--db URL install` and `LANTERN_DB=URL` are: the same one line, exit 1, no
    settings.json written (a URL taken as a relative path pinned the password in it, in a 0644 file), the password
    never shown; and whatever case the scheme is in."""
    project = tmp_path / "proj"
    project.mkdir()
    for url in ("postgresql://postgres:hunter2@/d8?host=/tmp/x", "POSTGRES://ann:hunter2@db.internal:5432/lantern"):
        runs = [
            install(env, "--db", url, cwd=project),
            install(env, "--db", url, "--user", cwd=project),
            _text(lantern("--db", url, "install", "claude-code", env=whole_environment(env), cwd=project)),
            install({**env, "LANTERN_DB": url}, cwd=project),
        ]
        # a --db URL on the command line (install's own or the global one) adds its one ps warning line
        # (docs/cli.md#secrets); LANTERN_DB does not
        warned = [r.stderr.startswith("warning: the password of a --db URL") for r in runs]
        assert warned == [True, True, True, False]
        errors = [r.stderr.split("\n", 1)[1] if w else r.stderr for r, w in zip(runs, warned)]
        for r, error in zip(runs, errors):
            assert r.returncode == 1, r.stdout + r.stderr
            assert error.count("\n") == 1 and "not supported on the postgresql backend" in error, r.stderr
            assert "hunter2" not in r.stdout + r.stderr and "Traceback" not in r.stderr
        assert len(set(errors)) == 1
        assert list(project.iterdir()) == [] and not (Path(env["HOME"]) / ".claude").exists()


def _records_of_turn(n: int, parent: str) -> list[dict]:
    user, reply = f"turn-{n}-u", f"turn-{n}-a"
    base = {"sessionId": SID, "cwd": CWD, "timestamp": f"2026-11-20T10:{n:02d}:00Z", "isSidechain": False}
    return [
        {
            **base,
            "type": "user",
            "uuid": user,
            "parentUuid": parent,
            "message": {"role": "user", "content": (f"Set the worker pool to {100 + n} threads in conf/pool_{n}.toml")},
        },
        {
            **base,
            "type": "assistant",
            "uuid": reply,
            "parentUuid": user,
            "message": {
                "id": f"msg_{n}",
                "role": "assistant",
                "content": [{"type": "text", "text": f"Done: pool_{n}.toml."}],
            },
        },
    ]


def _records_of_compaction(n: int, parent: str) -> list[dict]:
    base = {"sessionId": SID, "cwd": CWD, "timestamp": f"2026-11-20T11:{n:02d}:00Z", "isSidechain": False}
    boundary = f"cb-{n}"
    return [
        {
            **base,
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": boundary,
            "parentUuid": None,
            "logicalParentUuid": parent,
            "content": "Conversation compacted",
            "compactMetadata": {"trigger": "auto"},
        },
        {
            **base,
            "type": "user",
            "uuid": f"sum-{n}",
            "parentUuid": boundary,
            "isCompactSummary": True,
            "message": {
                "role": "user",
                "content": "This session is being continued from a previous conversation "
                "that ran out of context. The conversation is summarized below:\nSummary: worked on the pool.",
            },
        },
    ]


@settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["start", "start", "turn", "compact"]), min_size=2, max_size=9))
def test_one_compaction_is_one_injection_and_one_event_however_often_session_start_repeats(tmp_path_factory, steps):
    """Any sequence of SessionStart(compact) events, new turns and new compactions: a SessionStart for a
    compaction already injected prints nothing and records no event (its log line says so); each compaction is
    injected and recorded by the first SessionStart after it (before: every repeat injected again, one event
    each)."""
    tmp = tmp_path_factory.mktemp("once")
    home = tmp / "home"
    home.mkdir()
    e = {k: v for k, v in os.environ.items() if k not in ("LANTERN_DB", "HOME")}
    env = e | {"HOME": str(home), "LANTERN_DB": str(tmp / "m.db")}
    transcript = tmp / "session.jsonl"
    transcript.write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    last, turns, compactions, started = "0000001c-1c2d-4e5f-8a9b-00000000001c", 0, 1, set()
    for step in ["start", *steps]:
        if step == "turn":
            turns += 1
            records = _records_of_turn(turns, last)
        elif step == "compact":
            compactions += 1
            records = _records_of_compaction(compactions, last)
        if step != "start":
            last = records[-1]["uuid"]
            with open(transcript, "a", encoding="utf-8") as f:
                f.write("".join(json.dumps(x) + "\n" for x in records))
            continue
        r = hook(env, payload("SessionStart", transcript, source="compact"))
        assert r.returncode == 0, r.stderr
        first = compactions not in started
        started.add(compactions)
        if not first:
            assert r.stdout == "", (steps, compactions)
        elif compactions == 1:
            assert "5433" in json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"]
    with Lantern(env["LANTERN_DB"]) as memory:
        assert len([x for x in memory.events() if x.reason == "compact_boundary"]) == len(started), steps
    repeats = sum(1 for s in ["start", *steps] if s == "start") - len(started)
    log = home / ".lantern" / "logs" / "claude-code.log"
    assert (log.read_text().count("injected_already") if log.exists() else 0) == repeats


USER_NAMES = st.one_of(
    st.from_regex(r"[a-z][a-z0-9._-]{2,14}", fullmatch=True),
    st.text(alphabet="abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=12, max_size=20).map(
        lambda s: f"ann password=Q7{s}!"
    ),
    st.text(alphabet="abcdefghijkmnpqrstuvwxyz0123456789", min_size=36, max_size=36).map(lambda s: "ghp_" + s),
    st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=4, max_size=12).filter(str.strip),
)


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(user=USER_NAMES, legacy=st.booleans())
def test_the_offsets_file_never_holds_a_user_name_and_an_older_file_is_rewritten_without_it(
    tmp_path_factory, monkeypatch, user, legacy
):
    """Whatever ``$LANTERN_USER`` is (a plain name, one holding a password or a token, any script), the hooks'
    offsets file keys the user by a hash, never the name (the store keeps names redacted); a file an older Lantern
    wrote with the name in clear is still read (no line archived again) and loses the name at its next write."""
    from lantern.integrations import claude_code

    tmp = tmp_path_factory.mktemp("offsets")
    assume(user not in FIXTURE.read_text(encoding="utf-8") + str(tmp))  # a name found only where it is written
    monkeypatch.setenv("HOME", str(tmp / "home"))
    monkeypatch.setenv("LANTERN_USER", user)
    lines = FIXTURE.read_text(encoding="utf-8").splitlines(keepends=True)
    transcript, db, path = tmp / "session.jsonl", tmp / "m.db", tmp / "offsets.json"
    transcript.write_text("".join(lines[:-3]), encoding="utf-8")
    offsets = claude_code.Offsets(path)
    assert claude_code.run(json.dumps(payload("Stop", transcript)), db, offsets) == ""
    reached = offsets.get(db, transcript, user)
    assert reached.offset == transcript.stat().st_size
    raw = path.read_bytes()
    assert user.encode() not in raw and json.dumps(user).encode() not in raw
    if legacy:  # the file as an older Lantern wrote it: the name in clear
        key = f"{db.resolve()}\n{transcript.resolve()}\n{user}"
        path.write_text(json.dumps({key: {"offset": reached.offset, "line": reached.line}}), encoding="utf-8")
        assert offsets.get(db, transcript, user).offset == reached.offset
    with Lantern(db, user=user) as memory:
        before = memory.stats()["entries"]
    with open(transcript, "a", encoding="utf-8") as f:
        f.write("".join(lines[-3:]))
    assert claude_code.run(json.dumps(payload("Stop", transcript)), db, offsets) == ""
    raw = path.read_bytes()
    assert user.encode() not in raw and json.dumps(user).encode() not in raw and len(json.loads(raw)) == 1
    with Lantern(db, user=user) as memory:
        assert memory.stats()["entries"] > before
