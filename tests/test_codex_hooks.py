"""Codex: `lantern hook codex` end to end on rollouts of the real shape (tests/fixtures/codex: a session written as
Codex CLI 0.63 writes it, serde's compact JSON, then the ``compacted`` record of a local compaction, whose summary
is text, or of a remote one, whose summary is encrypted), with a temporary HOME and LANTERN_DB and the real model;
in-process through tests/clirun.py, and the installed hook command as a real process. Plus `lantern install codex`
merging into an existing hooks.json, the receipts the hook leaves (`lantern events`), and the host's output cap."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from clirun import lantern, whole_environment
from lantern import Lantern
from lantern.integrations import codex

FIXTURES = Path(__file__).parent / "fixtures" / "codex"
BEFORE = FIXTURES / "rollout-before-compaction.jsonl"
LOCAL = FIXTURES / "compacted-local.jsonl"  # the summary as text (local compaction)
REMOTE = FIXTURES / "compacted-remote.jsonl"  # the summary encrypted (remote compaction): message ""
SID = "019b0c3e-7a21-7d40-9a55-3c1f0e8d2b64"
CWD = "/home/dev/payments"
# specifics of the archived turns that the summary of compacted-local.jsonl does not state
DROPPED = ("55432", "RETRY_BACKOFF_MS", "services/payments/retry.py")


@pytest.fixture
def env(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    e = {k: v for k, v in os.environ.items() if k not in ("LANTERN_DB", "HOME", "CODEX_HOME")}
    e.update(HOME=str(home), LANTERN_DB=str(tmp_path / "db" / "lantern.db"))
    return e


def hook(env: dict, payload: dict | str) -> subprocess.CompletedProcess:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    proc = lantern("hook", "codex", input=data, env=whole_environment(env))
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def payload(event: str, rollout: Path | None, **extra) -> dict:
    """The hook input Codex sends (codex-rs/hooks/schema/generated/*.command.input.schema.json)."""
    base = {
        "session_id": SID,
        "transcript_path": None if rollout is None else str(rollout),
        "cwd": CWD,
        "hook_event_name": event,
        "model": "gpt-5.1-codex",
    }
    if event in ("PreCompact", "PostCompact"):
        base |= {"turn_id": "3", "trigger": "auto"}
    if event == "Stop":
        base |= {"turn_id": "2", "permission_mode": "default", "stop_hook_active": False, "last_assistant_message": ""}
    if event == "SessionStart":
        base |= {"permission_mode": "default", "source": "compact"}
    if event == "UserPromptSubmit":
        base |= {"turn_id": "4", "permission_mode": "default", "prompt": ""}
    return base | extra


def events(env: dict) -> list[dict]:
    r = lantern("events", "--json", env=whole_environment(env))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def compacted_rollout(tmp_path: Path, env: dict, compaction: Path) -> Path:
    """The rollout archived by a PreCompact (as Codex runs it before compacting), then the compaction written."""
    rollout = tmp_path / "rollout-2026-11-24T14-10-00-019b0c3e.jsonl"
    rollout.write_bytes(BEFORE.read_bytes())
    r = hook(env, payload("PreCompact", rollout))
    assert r.returncode == 0 and r.stdout == "", r.stderr
    with open(rollout, "ab") as f:
        f.write(compaction.read_bytes())
    return rollout


def test_stop_and_precompact_archive_the_new_lines_once_and_print_nothing(env, tmp_path):
    lines = BEFORE.read_bytes().splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(lines) if b"test_refund_retry is flaky" in ln and b"response_item" in ln)
    rollout = tmp_path / "rollout.jsonl"
    rollout.write_bytes(b"".join(lines[:cut]))
    r = hook(env, payload("Stop", rollout))
    assert r.returncode == 0 and r.stdout == ""  # Codex rejects JSON a Stop hook is not expected to print
    with Lantern(env["LANTERN_DB"]) as memory:
        first = memory.stats()["entries"]
    assert first >= 1
    with open(rollout, "ab") as f:
        f.write(b"".join(lines[cut:]))
    for event in ("PreCompact", "PostCompact", "PreCompact"):  # again: nothing new, nothing twice
        r = hook(env, payload(event, rollout))
        assert r.returncode == 0 and r.stdout == "", r.stderr
    with Lantern(tmp_path / "whole.db") as whole:
        expected = whole.ingest(BEFORE, session=SID, format="codex").added
    with Lantern(env["LANTERN_DB"]) as memory:
        assert memory.stats()["entries"] == expected  # the same turns as one ingest of the whole file
    offsets = json.loads((Path(env["HOME"]) / ".lantern" / "codex" / "offsets.json").read_text())
    (state,) = offsets.values()
    assert state["offset"] == rollout.stat().st_size


@pytest.mark.parametrize("compaction", [LOCAL, REMOTE], ids=["summary", "encrypted"])
def test_session_start_compact_injects_what_the_compaction_lost_and_leaves_a_receipt(env, tmp_path, compaction):
    rollout = compacted_rollout(tmp_path, env, compaction)
    r = hook(env, payload("SessionStart", rollout))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "SessionStart" and set(out) == {"hookEventName", "additionalContext"}
    block = out["additionalContext"]
    assert all(value in block for value in DROPPED), block
    assert len(block.encode("utf-8")) <= codex.OUTPUT_CAP_BYTES
    (event,) = events(env)
    assert event["source"] == "codex" and event["session"] == SID
    assert event["reason"] == ("compacted" if compaction is LOCAL else "compacted_encrypted")
    assert event["empty_reason"] is None and event["chars"] == len(block) and event["latency_ms"] > 0
    loss = event["loss"]
    assert sum(row["lost"] for row in loss["by_type"].values()) == loss["lost"] > 0
    assert sum(row["packed"] for row in loss["by_type"].values()) == loss["packed"] > 0
    assert len(loss["items"]) == min(loss["packed"], 30) and len(loss["cut"]) == min(loss["lost"] - loss["packed"], 10)
    assert all(item["value"].rstrip("…") in block for item in loss["items"])  # what it reports back came back
    if compaction is LOCAL:  # what the summary states is not lost
        assert "refund webhook" in event["query"]
    else:  # no summary text: the query is the task alone
        assert "Another language model" not in event["query"]
    shown = lantern("events", env=whole_environment(env)).stdout.decode()
    assert f"event {event['id']}: the summary lost {loss['lost']} specifics" in shown
    first = loss["items"][0]
    assert f"  back  {first['type']}" in shown and f"(turn {first['turn']})" in shown
    again = hook(env, payload("SessionStart", rollout))  # the same compaction again: no second block or event
    assert again.returncode == 0 and again.stdout == "" and len(events(env)) == 1


def test_the_user_messages_codex_kept_are_live_not_lost(env, tmp_path):
    """A compaction keeps the user's messages in its replacement history: their words are live, so a value only
    a kept user message states is never reported lost."""
    rollout = compacted_rollout(tmp_path, env, REMOTE)
    compacted = codex.read_last_compaction(rollout)
    assert compacted is not None and compacted.summary is None
    live_text = "\n".join(m.text for m in compacted.live)
    assert "default postgres port is taken" in live_text and "refund webhook" in live_text
    with Lantern(env["LANTERN_DB"]) as memory:
        rec = memory.recover_compaction(None, live=compacted.live, session=SID, budget=6000)
    assert not any(item.value == "postgres" for item in rec.loss.items if item.last.side == "user")


def test_no_compaction_in_the_rollout_injects_nothing_and_says_why(env, tmp_path):
    rollout = tmp_path / "rollout.jsonl"
    rollout.write_bytes(BEFORE.read_bytes())
    r = hook(env, payload("SessionStart", rollout))
    assert r.returncode == 0 and r.stdout == ""
    (event,) = events(env)
    assert event["empty_reason"] == "no_compaction" and event["injected"] == [] and event["source"] == "codex"


def test_bad_input_exits_0_prints_nothing_and_logs_one_line(env, tmp_path):
    log = Path(env["HOME"]) / ".lantern" / "logs" / "codex.log"
    not_rollout = tmp_path / "notes.jsonl"
    not_rollout.write_text('{"hello": "world"}\n{"x": 1}\n', encoding="utf-8")
    for data in ("not json", json.dumps({"session_id": SID}), json.dumps(payload("Stop", not_rollout))):
        r = hook(env, data)
        assert r.returncode == 0 and r.stdout == "" and "Traceback" not in r.stderr
    assert len(log.read_text().splitlines()) == 3 and "world" not in log.read_text()
    r = hook(env, payload("SessionStart", None))  # an ephemeral session: Codex sends transcript_path null
    assert r.returncode == 0 and r.stdout == ""
    assert not Path(env["LANTERN_DB"]).exists()  # nothing archived, nothing created


def test_an_error_at_session_start_leaves_an_error_receipt(env, tmp_path):
    rollout = compacted_rollout(tmp_path, env, LOCAL)
    broken = tmp_path / "dir.jsonl"
    broken.mkdir()  # not a regular file: skipped (logged), no output
    assert hook(env, payload("SessionStart", broken)).stdout == ""
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(b"\x00\xff" * 10 + b"\n")
    r = hook(env, payload("SessionStart", garbage))
    assert r.returncode == 0 and r.stdout == ""
    assert [e["empty_reason"] for e in events(env)] == ["error"]
    assert rollout.exists()


@settings(max_examples=examples(8), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    words=st.lists(
        st.text(alphabet=st.sampled_from("数据库端口超时配置路径错误abcXYZ_/.-0123456789"), min_size=3, max_size=14),
        min_size=30,
        max_size=120,
    ),
    budget=st.integers(2_000, 40_000),
)
def test_the_block_never_exceeds_codex_output_cap_whatever_the_budget_and_script(tmp_path_factory, words, budget):
    """Codex spills hook text over 2,500 approximate tokens (4 bytes each) to a file: the block is held below
    ``OUTPUT_CAP_BYTES`` in UTF-8 bytes, which a budget in characters does not bound for CJK text (3 bytes each)."""
    tmp = tmp_path_factory.mktemp("cap")
    lines = [json.loads(x) for x in BEFORE.read_text(encoding="utf-8").splitlines()]
    for i, w in enumerate(words):  # more turns whose specifics the summary never states
        text = f"路径 /srv/{w}/配置_{i}.toml 端口 {7000 + i} 标志 --{w.strip('/.-') or 'x'}-{i}"
        lines.append(
            {
                "timestamp": "2026-11-24T14:30:00.000Z",
                "type": "response_item",
                "payload": {
                    "type": "message",
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": [{"type": "input_text" if i % 2 == 0 else "output_text", "text": text}],
                },
            }
        )
    rollout = tmp / "rollout.jsonl"
    rollout.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    with open(rollout, "ab") as f:
        f.write(REMOTE.read_bytes())
    ctx = codex.HookContext(db=tmp / "m.db", offsets=codex.Offsets(tmp / "offsets.json"), budget=budget, host="codex")
    out = codex.handle(payload("SessionStart", rollout), ctx)
    with Lantern(ctx.db) as memory:
        (event,) = memory.events()
    if out is None:
        assert event.empty_reason == "host_cap"
    else:
        block = out["hookSpecificOutput"]["additionalContext"]
        assert len(block.encode("utf-8")) <= codex.OUTPUT_CAP_BYTES and event.chars == len(block)


# ------------------------------------------------------------------------------------------------ prompts


def test_a_prompt_after_a_compaction_gets_what_it_asks_for_and_the_evidence_decides(env, tmp_path):
    """UserPromptSubmit, Codex's input schema (prompt, turn_id, permission_mode): before any archive a prompt
    touches no database; before a compaction it gets nothing (all is still in Codex's context); after one, a
    question naming an archived fact with no cue and a back-reference in natural words get it (the output schema's
    two keys, within the byte cap, a receipt each); a prompt about nothing archived gets nothing, its reason in
    codex.log and no event."""
    rollout = tmp_path / "rollout.jsonl"
    rollout.write_bytes(BEFORE.read_bytes())
    r = hook(env, payload("UserPromptSubmit", rollout, prompt="which host port does the payments database use?"))
    assert r.returncode == 0 and r.stdout == ""
    assert not Path(env["LANTERN_DB"]).exists()  # nothing archived yet: no database touched
    assert hook(env, payload("Stop", rollout)).returncode == 0
    r = hook(env, payload("UserPromptSubmit", rollout, prompt="which host port does the payments database use?"))
    assert r.returncode == 0 and r.stdout == ""  # never compacted
    with open(rollout, "ab") as f:
        f.write(REMOTE.read_bytes())
    asked = {
        "which host port does the payments database use?": "55432",
        "remind me, what was that retry backoff constant called again?": "RETRY_BACKOFF_MS",
    }
    for prompt, value in asked.items():
        r = hook(env, payload("UserPromptSubmit", rollout, prompt=prompt))
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)["hookSpecificOutput"]
        assert set(out) == {"hookEventName", "additionalContext"} and out["hookEventName"] == "UserPromptSubmit"
        assert value in out["additionalContext"], (prompt, out["additionalContext"])
        assert len(out["additionalContext"].encode("utf-8")) <= codex.OUTPUT_CAP_BYTES
    recorded = events(env)
    assert [e["reason"] for e in recorded] == ["back_reference", "prompt"]
    assert all(e["source"] == "codex" and e["session"] == SID and e["chars"] > 0 for e in recorded)
    r = hook(env, payload("UserPromptSubmit", rollout, prompt="write a haiku about autumn leaves in Kyoto"))
    assert r.returncode == 0 and r.stdout == ""
    log = (Path(env["HOME"]) / ".lantern" / "logs" / "codex.log").read_text()
    assert "hook UserPromptSubmit: below_floor: best relevance" in log, log
    assert "haiku" not in log and "Kyoto" not in log  # the log never quotes the prompt
    assert len(events(env)) == 2


def test_a_prompt_recovery_leaves_out_what_is_live_after_the_compaction(env, tmp_path):
    """What Codex kept (the replacement history) and every line after the compaction are in the model's context:
    a prompt's block never repeats a turn whose words are live."""
    rollout = compacted_rollout(tmp_path, env, LOCAL)
    compacted = codex.read_last_compaction(rollout)
    ctx = codex.HookContext(db=Path(env["LANTERN_DB"]), offsets=codex.Offsets(tmp_path / "offsets.json"), host="codex")
    out = codex.handle(payload("UserPromptSubmit", rollout, prompt="which port is the payments postgres on?"), ctx)
    assert out is not None
    with Lantern(ctx.db) as memory:
        (event,) = memory.events()
        live = memory.live_text(compacted.live)
        injected = [e.text for e in memory.store.entries(i for i, *_ in event.injected).values()]
    assert injected and not any(text.strip() in live for text in injected)


@settings(max_examples=examples(12), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    prompt=st.text(
        alphabet=st.sampled_from(list("端口数据库重试 abcPORTxyz_/.-?!0123456789\n\t\"'{}") + ["\u0000", "🙂"]),
        max_size=80,
    )
)
def test_any_prompt_after_a_compaction_prints_nothing_or_the_schema_within_the_cap(tmp_path_factory, prompt):
    """Whatever the prompt (CJK, punctuation only, control characters, JSON-looking text, empty), the hook returns
    nothing or exactly Codex's UserPromptSubmit output shape within ``OUTPUT_CAP_BYTES``, and records an event
    exactly when it injected something."""
    tmp = tmp_path_factory.mktemp("prompt")
    rollout = tmp / "rollout.jsonl"
    rollout.write_bytes(BEFORE.read_bytes() + LOCAL.read_bytes())
    ctx = codex.HookContext(db=tmp / "m.db", offsets=codex.Offsets(tmp / "offsets.json"), host="codex")
    codex.handle(payload("Stop", rollout), ctx)
    text = codex.run(json.dumps(payload("UserPromptSubmit", rollout, prompt=prompt)), db=ctx.db, offsets=ctx.offsets)
    with Lantern(ctx.db) as memory:
        recorded = memory.events()
    if not text:
        assert recorded == [] or recorded[0].empty_reason == "host_cap"
        return
    out = json.loads(text)
    assert set(out) == {"hookSpecificOutput"}
    assert set(out["hookSpecificOutput"]) == {"hookEventName", "additionalContext"}
    block = out["hookSpecificOutput"]["additionalContext"]
    assert block and len(block.encode("utf-8")) <= codex.OUTPUT_CAP_BYTES
    (event,) = recorded
    assert event.chars == len(block) and event.source == "codex"


# ------------------------------------------------------------------------------------------------ install


def install(env: dict, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    proc = lantern("install", "codex", *args, env=whole_environment(env), cwd=cwd)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def test_install_merges_into_hooks_json_is_idempotent_and_uninstall_removes_only_ours(env, tmp_path):
    project = tmp_path / "proj"
    (project / ".codex").mkdir(parents=True)
    theirs = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done", "timeout": 5}]}]}}
    hooks_json = project / ".codex" / "hooks.json"
    hooks_json.write_text(json.dumps(theirs), encoding="utf-8")
    r = install(env, cwd=project)
    assert r.returncode == 0, r.stderr
    assert f"installed in {hooks_json}" in r.stdout and "the hooks write to" in r.stdout and "/hooks" in r.stdout
    data = json.loads(hooks_json.read_text())
    assert data["hooks"]["SessionStart"] == [
        {
            "matcher": "compact",
            "hooks": [
                {"type": "command", "command": data["hooks"]["SessionStart"][0]["hooks"][0]["command"], "timeout": 30}
            ],
        }
    ]
    assert set(data["hooks"]) == {"Stop", "PreCompact", "SessionStart", "UserPromptSubmit"}
    assert data["hooks"]["Stop"][0] == theirs["hooks"]["Stop"][0]
    ours = [h["command"] for groups in data["hooks"].values() for g in groups for h in g["hooks"]][1:]
    assert all(shlex.split(c)[-2:] == ["hook", "codex"] for c in ours) and len(ours) == 4
    assert "already up to date" in install(env, cwd=project).stdout
    r = install(env, "--uninstall", cwd=project)
    assert r.returncode == 0 and json.loads(hooks_json.read_text()) == theirs


def test_user_install_goes_to_codex_home_and_pins_the_database(env, tmp_path):
    codex_home = tmp_path / "codex-home"
    db = tmp_path / "pinned" / "memory.db"
    r = install({**env, "CODEX_HOME": str(codex_home)}, "--user", "--db", str(db), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"the hooks write to {db}" in r.stdout
    data = json.loads((codex_home / "hooks.json").read_text())
    (group,) = data["hooks"]["PreCompact"]
    command = group["hooks"][0]["command"]
    assert shlex.split(command)[-4:] == ["--db", str(db), "hook", "codex"]
    rollout = tmp_path / "rollout.jsonl"
    rollout.write_bytes(BEFORE.read_bytes())
    other = {k: v for k, v in env.items() if k != "LANTERN_DB"}
    done = subprocess.run(  # the installed command as Codex runs it: a real process, the fast entry point
        command,
        shell=True,
        input=json.dumps(payload("PreCompact", rollout)),
        env=other,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout == "", done.stderr
    with Lantern(db) as memory:
        assert memory.stats()["entries"] >= 4


_PG_URLS = st.builds(
    lambda scheme, user, host, db: f"{scheme}://{user}@{host}/{db}",
    st.sampled_from(["postgresql", "postgres", "POSTGRESQL"]),
    st.from_regex(r"[a-z]{1,8}(:[a-z0-9]{1,8})?", fullmatch=True),
    st.sampled_from(["localhost", "db.internal:5432", "127.0.0.1:6543"]),
    st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True),
)


@given(url=_PG_URLS, host=st.sampled_from(["claude-code", "codex"]))
@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_hooks_server_url_refusal_names_the_host_asked_for(tmp_path, url, host):
    """Every message of a host's install and hook names that host's commands, never another host's: ``lantern
    install codex --db postgresql://...`` said "lantern hook claude-code is not supported"."""
    from lantern.integrations import claude_code

    other = {"claude-code": "codex", "codex": "claude-code"}[host]
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(home), "LANTERN_DB": None, "CODEX_HOME": None}
    r = lantern("install", host, "--db", url, env=whole_environment(env), cwd=tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback" not in err, err
    assert f"lantern hook {host} is not supported" in err and f"lantern install {host} --db FILE" in err, err
    assert other not in err, err
    payload = {"hook_event_name": "Stop", "session_id": "s", "transcript_path": str(tmp_path / "t.jsonl")}
    runner = {"claude-code": claude_code.run, "codex": codex.run}[host]
    old = os.environ.get("HOME")
    os.environ["HOME"] = str(home)
    try:
        assert runner(json.dumps(payload), db=url) == ""
    finally:
        os.environ["HOME"] = old
    logs = home / ".lantern" / "logs"
    assert sorted(p.name for p in logs.iterdir()) == [f"{host}.log"]
    log = (logs / f"{host}.log").read_text(encoding="utf-8")
    assert f"lantern hook {host} is not supported" in log and other not in log, log
    (logs / f"{host}.log").unlink()
