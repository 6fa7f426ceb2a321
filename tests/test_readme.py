"""The README's quickstart as a newcomer runs it: each ``lantern`` command of its first ``sh`` block under
"Quickstart", in order, in a fresh folder, on the shipped fixture, with the default (real) embedder. A newcomer found
the block the quickstart's ``recover`` printed opening mid-JSON at ``--budget 400``; the README is read here, so a
command that fails, or a recover whose block lacks the fixture's answer (port 5433), fails this test."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from clirun import lantern

ROOT = Path(__file__).resolve().parents[1]


def quickstart_commands() -> list[list[str]]:
    """The argument lists of the quickstart block's ``.venv/bin/lantern`` lines (comments dropped)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Quickstart\n+```sh\n(.*?)```", readme, re.S)
    assert block is not None, "README.md has no Quickstart sh block"
    lines = [line for line in block.group(1).splitlines() if line.startswith(".venv/bin/lantern ")]
    return [shlex.split(line, comments=True)[1:] for line in lines]


def test_the_readme_quickstart_runs_as_written_and_recovers_the_port(tmp_path):
    commands = quickstart_commands()
    assert [c[2] for c in commands] == ["ingest", "recover", "search", "stats"]
    for args in commands:
        args = [str(ROOT / a) if a.startswith("tests/") else a for a in args]
        proc = lantern(*args, cwd=tmp_path, env={"LANTERN_EMBEDDER": None}, columns=120)
        assert proc.returncode == 0, (args, proc.stderr.decode())
        if args[2] == "recover":
            block = proc.stdout.decode()
            assert "5433" in block and "\n…" not in block, block  # the answer, and no excerpt cut mid-line
