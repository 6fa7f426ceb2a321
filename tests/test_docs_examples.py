"""The worked example of docs/claude-code.md run as written: the PreCompact and SessionStart(compact) hooks on the
shipped Claude Code fixture, in a fresh HOME, with the daemon off as the example sets it. A newcomer found the
page still showing the block of an older recovery (3,627 characters of query-ranked turns where the hook now
injects 2,985 of what the compaction lost); the page's block is compared with the hook's output here."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from clirun import lantern, whole_environment

ROOT = Path(__file__).resolve().parents[1]
SESSION = "7f3c2a10-5b1e-4c8e-9d2a-1e6f0b7c9a41"


def _hook(payload: dict, cwd: Path, env: dict) -> str:
    """``lantern hook claude-code`` with ``payload`` on stdin in ``cwd`` and the whole environment ``env``, in-process
    (tests/clirun.py, as tests/test_claude_code.py runs its hooks)."""
    proc = lantern("hook", "claude-code", input=json.dumps(payload), env=whole_environment(env), cwd=cwd)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def test_the_claude_code_worked_example_prints_the_block_the_page_shows(tmp_path):
    page = (ROOT / "docs/claude-code.md").read_text(encoding="utf-8")
    heading = "The output, the block Claude Code adds to the compacted context:"
    shown = re.search(re.escape(heading) + r"\n\n```text\n(.*?)\n```", page, re.S)
    assert shown is not None
    shutil.copy(ROOT / "tests/fixtures/claude_code_session.jsonl", tmp_path / "session.jsonl")
    env = {**os.environ, "HOME": str(tmp_path / "home"), "LANTERN_DAEMON": "off"}
    env.pop("LANTERN_DB", None)
    common = {"session_id": SESSION, "transcript_path": "session.jsonl", "cwd": "/home/dev/billing"}
    assert _hook({**common, "hook_event_name": "PreCompact", "trigger": "manual"}, tmp_path, env) == ""
    out = json.loads(_hook({**common, "hook_event_name": "SessionStart", "source": "compact"}, tmp_path, env))
    block = out["hookSpecificOutput"]["additionalContext"]
    assert f"SessionStart {len(block)}\n{block}" == shown.group(1)
