"""What a Claude Code hook process loads (issue #19, item 5): ``UserPromptSubmit`` blocks the user's prompt, so its
hook must not pay for what it does not use. The timings themselves are in BENCHMARKS.md §7
(benchmarks/bench_hook.py, with CPU-busy processes beside it); these tests pin what makes them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lantern import Lantern

pytestmark = pytest.mark.real_models  # which models a hook process loads: the real ones

REPO = Path(__file__).resolve().parents[1]


def _modules_after_hook(tmp_path: Path, prompt: str) -> set[str]:
    """The modules a ``lantern hook claude-code`` process (the installed entry point's code, lantern.__main__) has
    imported once it answered a UserPromptSubmit with ``prompt``."""
    payload = json.dumps(
        {
            "hook_event_name": "UserPromptSubmit",
            "session_id": "s",
            "transcript_path": str(tmp_path / "none.jsonl"),
            "prompt": prompt,
        }
    )
    code = (
        "import sys, json\n"
        "sys.argv = ['lantern', '--db', sys.argv[1], 'hook', 'claude-code']\n"
        "from lantern.__main__ import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write(json.dumps(sorted(sys.modules)))\n"
    )
    env = {**os.environ, "HOME": str(tmp_path), "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "m.db")],
        input=payload,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout == "", done.stderr[-2000:]
    return set(json.loads(done.stderr))


def test_a_prompt_without_back_reference_loads_no_cli_no_model_no_numpy(tmp_path):
    loaded = _modules_after_hook(tmp_path, "add type hints to pool.py")
    for heavy in ("typer", "click", "rich", "pydantic", "numpy", "onnxruntime", "lantern.cli", "lantern.api"):
        assert heavy not in loaded, heavy


def test_a_back_reference_in_a_session_never_compacted_opens_nothing(tmp_path):
    loaded = _modules_after_hook(tmp_path, "as I said earlier, what was the port?")
    assert "numpy" not in loaded and "lantern.api" not in loaded


def test_an_english_recovery_in_an_english_session_loads_no_chinese_model(tmp_path):
    """One database for every project (~/.lantern/lantern.db): another session holds Chinese turns. A recovery
    limited to an English session leaves the Chinese models' blocks of its query empty, so it never loads them;
    its ranking among that session's turns is the same."""
    db = tmp_path / "shared.db"
    with Lantern(db) as memory:
        memory.archive(
            [
                {"role": "user", "content": "缓存服务用 Redis，端口是 6380。"},
                {"role": "assistant", "content": "好的，Redis 缓存端口设置为 6380。"},
            ],
            session="zh",
        )
        memory.archive(
            [
                {"role": "user", "content": "Start postgres for billing."},
                {"role": "assistant", "content": "Started: docker run -p 5433:5432 postgres:16, listening on 5433."},
                {"role": "user", "content": "Now add a README section."},
                {"role": "assistant", "content": "Added a Deployment section."},
            ],
            session="en",
        )
    with Lantern(db) as memory:
        english = memory.recover("which port is the billing database on?", session="en", budget=1000)
        use = memory.embedder.use
        assert use._model is None  # USE-multilingual never loaded
        assert "5433" in english.text
        chinese = memory.recover("缓存端口是多少？", session="zh", budget=1000)
        assert "6380" in chinese.text and use._model is not None
