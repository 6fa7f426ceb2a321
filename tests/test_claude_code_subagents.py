"""Claude Code subagent transcripts (``<session-id>/subagents/agent-<id>.jsonl``): ``Lantern.ingest`` of the session
file brings them in, and the hooks (in-process through tests/clirun.py, a real process where a FIFO could block;
temporary HOME and
LANTERN_DB, the fake embedder) archive them
incrementally, on our fixture of the real 2.1.2+ layout (tests/fixtures/claude_code_project/)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clirun import lantern, whole_environment
from lantern import Lantern
from lantern.archive.subagents import agent_id, parent_session, subagent_files

PROJECT = Path(__file__).parent / "fixtures" / "claude_code_project"
SID = "3b9e5d24-8c1f-4a6e-b0d7-5f2a9c41e803"
AGENT = "a3c7e91"
SUB = f"{SID}/sidechain-{AGENT}"
DETAIL = "maxmemory 512mb"  # only the subagent's transcript has it; the Task result in the session does not
COMPACTION_TEXT = "create a detailed summary of the conversation"  # only the compaction agent's file has it


@pytest.fixture
def project(tmp_path) -> Path:
    dest = tmp_path / "-home-dev-api"
    shutil.copytree(PROJECT, dest)
    return dest


def texts(memory: Lantern, session: str) -> str:
    return "\n".join(t for _, _, t in memory.store.session_turns(session, memory.scope))


# ------------------------------------------------------------------------------------------------ layout


def test_agent_ids_and_parent_session_follow_the_layout():
    assert agent_id("agent-a3c7e91.jsonl") == "a3c7e91"
    assert agent_id("agent-acompact-5d21f0.jsonl") is None  # Claude Code's compaction agent
    assert agent_id("agent-a3c7e91.meta.json") is None and agent_id(f"{SID}.jsonl") is None
    assert parent_session(PROJECT / SID / "subagents" / "agent-a3c7e91.jsonl") == SID
    assert parent_session(PROJECT / f"{SID}.jsonl") is None
    assert subagent_files(PROJECT / f"{SID}.jsonl") == [(AGENT, PROJECT / SID / "subagents" / "agent-a3c7e91.jsonl")]


def test_legacy_flat_agent_files_are_matched_by_their_session_id(project):
    nested = project / SID / "subagents" / "agent-a3c7e91.jsonl"
    flat = project / "agent-b51e0a2.jsonl"  # the layout before 2.1.2: beside every session's transcript
    flat.write_text(nested.read_text(encoding="utf-8").replace(AGENT, "b51e0a2"), encoding="utf-8")
    other = project / "agent-c88d113.jsonl"
    other.write_text(
        nested.read_text(encoding="utf-8").replace(SID, "11111111-2222-4333-8444-555555555555"), encoding="utf-8"
    )
    os.mkfifo(project / "agent-fifo01.jsonl")  # never opened: a FIFO is not a regular file
    found = subagent_files(project / f"{SID}.jsonl", SID)
    assert [a for a, _ in found] == [AGENT, "b51e0a2"]


# ------------------------------------------------------------------------------------------------ ingest


WF_AGENT = "a9d8e7f6b5c4d3e2f"
WF_SUB = f"{SID}/sidechain-{WF_AGENT}"
WF_DETAIL = "vm.overcommit_memory = 1"


def add_workflow_run(project: Path) -> Path:
    """Our fixture of a Workflow run's layout: ``subagents/workflows/<run-id>/`` holding a run journal (not a
    transcript), an agent transcript (the subagent fixture re-labelled, with its own finding) and its meta file;
    plus an agent two levels deeper still and a folder symlinked to its own parent (a loop)."""
    run = project / SID / "subagents" / "workflows" / "wf_5c2e9a41-7b3"
    run.mkdir(parents=True)
    base = (project / SID / "subagents" / f"agent-{AGENT}.jsonl").read_text(encoding="utf-8")
    (run / "journal.jsonl").write_text(
        json.dumps({"type": "started", "agentId": WF_AGENT, "label": "verify", "phase": "check"}) + "\n",
        encoding="utf-8",
    )
    (run / f"agent-{WF_AGENT}.jsonl").write_text(
        base.replace(AGENT, WF_AGENT).replace(DETAIL, WF_DETAIL), encoding="utf-8"
    )
    (run / f"agent-{WF_AGENT}.meta.json").write_text('{"agentType": "workflow", "label": "verify"}', encoding="utf-8")
    deeper = run / "retry" / "1"
    deeper.mkdir(parents=True)
    (deeper / "agent-d33p001.jsonl").write_text(base.replace(AGENT, "d33p001"), encoding="utf-8")
    (run / "loop").symlink_to(run.parent)  # workflows/<run>/loop -> workflows: never walked into
    return run


def test_workflow_agents_nested_under_subagents_are_found_once_in_order(project):
    run = add_workflow_run(project)
    found = subagent_files(project / f"{SID}.jsonl", SID)
    assert found == [
        (AGENT, project / SID / "subagents" / f"agent-{AGENT}.jsonl"),
        (WF_AGENT, run / f"agent-{WF_AGENT}.jsonl"),
        ("d33p001", run / "retry" / "1" / "agent-d33p001.jsonl"),
    ]
    assert parent_session(run / f"agent-{WF_AGENT}.jsonl") == SID
    assert parent_session(run / "retry" / "1" / "agent-d33p001.jsonl") == SID
    assert parent_session(run / "journal.jsonl") is None


def test_ingest_and_hooks_read_workflow_agents(project, tmp_path, env):
    run = add_workflow_run(project)
    with Lantern(tmp_path / "m.db") as memory:
        result = memory.ingest(project / f"{SID}.jsonl")
        assert WF_SUB in memory.store.sessions() and WF_DETAIL in texts(memory, WF_SUB)
        alone = memory.ingest(run / f"agent-{WF_AGENT}.jsonl")  # given alone: the same sub-session, nothing new
    assert result.added > 0 and not any("journal" in w for w in result.warnings)
    assert alone.session == SID and alone.added == 0 and alone.duplicates >= 1
    assert hook(env, "Stop", project / f"{SID}.jsonl", stop_hook_active=False).returncode == 0
    with Lantern(env["LANTERN_DB"]) as memory:
        assert WF_DETAIL in texts(memory, WF_SUB) and f"{SID}/sidechain-d33p001" in memory.store.sessions()


def test_ingest_of_the_session_file_brings_its_subagents_once(tmp_path):
    with Lantern(tmp_path / "m.db") as memory:
        first = memory.ingest(PROJECT / f"{SID}.jsonl")
        sessions = memory.store.sessions()
        sub_text, main_text = texts(memory, SUB), texts(memory, SID)
        again = memory.ingest(PROJECT / f"{SID}.jsonl")
        alone = memory.ingest(PROJECT / SID / "subagents" / "agent-a3c7e91.jsonl")  # the same turns, same place
        hits = memory.search("how much memory may Redis use", session=SID, k=3)
    assert first.session == SID and sessions == [SID, SUB]
    assert DETAIL in sub_text and DETAIL not in main_text
    assert "Grep" in sub_text and "allkeys-lru" in main_text
    assert COMPACTION_TEXT not in sub_text + main_text
    assert again.added == 0 and again.duplicates == first.added
    assert alone.session == SID and alone.added == 0 and alone.duplicates >= 1
    assert any(h.entry.session == SUB and DETAIL in h.entry.text for h in hits)  # a session search sees it


def test_a_subagent_file_that_is_not_claude_code_is_skipped_with_a_warning(project, tmp_path):
    (project / SID / "subagents" / "agent-d00d001.jsonl").write_text(
        '{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "yo"}\n'
    )
    with Lantern(tmp_path / "m.db") as memory:
        result = memory.ingest(project / f"{SID}.jsonl")
        sessions = memory.store.sessions()
    assert sessions == [SID, SUB]  # the session and the good subagent are archived
    assert result.skipped >= 1 and any("agent-d00d001.jsonl skipped" in w for w in result.warnings)


# ------------------------------------------------------------------------------------------------ hooks


@pytest.fixture
def env(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    e = {k: v for k, v in os.environ.items() if k not in ("LANTERN_DB", "HOME", "LANTERN_USER")}
    e.update(HOME=str(home), LANTERN_DB=str(tmp_path / "db" / "lantern.db"))
    return e


def hook(env: dict, event: str, transcript: Path, process: bool = False, **extra) -> subprocess.CompletedProcess:
    """``lantern hook claude-code`` with ``env`` its whole environment: in-process (tests/clirun.py), or as a real
    process (``process``: where a hang must fail the test by a timeout, not stop the run); text output."""
    payload = {
        "session_id": SID,
        "transcript_path": str(transcript),
        "cwd": "/home/dev/api",
        "permission_mode": "default",
        "hook_event_name": event,
        **extra,
    }
    if process:
        return subprocess.run(
            [sys.executable, "-m", "lantern.cli", "hook", "claude-code"],
            input=json.dumps(payload),
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    proc = lantern("hook", "claude-code", input=json.dumps(payload), env=whole_environment(env))
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def test_stop_and_precompact_archive_subagent_transcripts_incrementally(env, project):
    transcript = project / f"{SID}.jsonl"
    sub = project / SID / "subagents" / "agent-a3c7e91.jsonl"
    lines = sub.read_text(encoding="utf-8").splitlines(keepends=True)
    sub.write_text("".join(lines[:2]) + lines[2][:40], encoding="utf-8")  # the subagent is still writing
    r = hook(env, "Stop", transcript, stop_hook_active=False)
    assert r.returncode == 0 and r.stdout == ""
    with Lantern(env["LANTERN_DB"]) as memory:
        assert DETAIL not in texts(memory, SUB) and memory.store.session_turns(SUB, memory.scope)
        first = memory.stats()["entries"]

    sub.write_text("".join(lines), encoding="utf-8")  # the subagent finished
    assert hook(env, "PreCompact", transcript, trigger="auto", custom_instructions=None).returncode == 0
    with Lantern(env["LANTERN_DB"]) as memory:
        archived = memory.stats()["entries"]
        sub_text = texts(memory, SUB)
    assert DETAIL in sub_text and archived > first
    assert COMPACTION_TEXT not in sub_text
    offsets = json.loads((Path(env["HOME"]) / ".lantern" / "claude-code" / "offsets.json").read_text())
    reached = {k.split("\n")[1]: v for k, v in offsets.items()}
    assert reached[str(sub.resolve())] == {"offset": sub.stat().st_size, "line": len(lines) + 1}
    assert reached[str(transcript.resolve())]["offset"] == transcript.stat().st_size

    assert hook(env, "Stop", transcript, stop_hook_active=False).returncode == 0  # nothing new: nothing added
    with Lantern(env["LANTERN_DB"]) as memory:
        assert memory.stats()["entries"] == archived
    # every subagent record archived exactly once across the two reads (prompt, Grep call, result, answer)
    assert sub_text.count("Find where the Redis memory limit") == 1 and sub_text.count("tool call Grep") == 1
    assert sub_text.count(DETAIL) == 2  # the Grep result and the answer


def test_a_fifo_or_bad_subagent_file_never_blocks_or_breaks_the_hook(env, project):
    folder = project / SID / "subagents"
    os.mkfifo(folder / "agent-f1f0f1f.jsonl")  # a FIFO with no writer: opening it for reading could block
    (folder / "agent-e44e44e.jsonl").write_text('{"role": "user", "content": "secret words"}\n', encoding="utf-8")
    (folder / "agent-b0b0b0b.jsonl").mkdir()  # a directory with a subagent's name
    r = hook(env, "Stop", project / f"{SID}.jsonl", process=True, stop_hook_active=False)
    assert r.returncode == 0 and r.stdout == ""
    with Lantern(env["LANTERN_DB"]) as memory:
        assert memory.store.sessions() == [SID, SUB]
    log = (Path(env["HOME"]) / ".lantern" / "logs" / "claude-code.log").read_text(encoding="utf-8")
    assert "subagent e44e44e skipped" in log and "f1f0f1f" not in log and "secret" not in log


def test_a_subagents_folder_that_is_a_symlink_loop_is_skipped_and_the_session_archived(project, tmp_path):
    """ELOOP is a plain OSError: the subagents folder is treated as absent, the session's own turns still land."""
    sub = project / SID / "subagents"
    shutil.rmtree(sub)
    sub.symlink_to(sub)  # a link to itself: every open gives "Too many levels of symbolic links"
    assert subagent_files(project / f"{SID}.jsonl", SID) == []
    memory = Lantern(tmp_path / "loop.db", embedder="minilm")
    try:
        result = memory.ingest(project / f"{SID}.jsonl")
        assert result.added > 0 and texts(memory, SID)
    finally:
        memory.close()
