"""``lantern --help`` and each command's ``--help`` as a user reads them: the real process, a wide terminal."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

LANTERN = [sys.executable, "-m", "lantern.cli"]


def help_text(*command: str, columns: int = 400) -> str:
    proc = subprocess.run([*LANTERN, *command, "--help"], capture_output=True, timeout=120,
                          env={**os.environ, "COLUMNS": str(columns)})
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


@pytest.mark.parametrize("command, placeholder", [
    ("recover", "QUERY"), ("search", "QUERY"), ("ingest", "FILE|DIR"), ("export", "FILE|-"), ("import", "FILE|-"),
    ("facts", "KEY"), ("feedback", "ID"), ("eval", "DATASET"),
])
def test_usage_line_names_the_argument_as_the_help_text_does(command, placeholder):
    """Newcomer finding: the usage line said ``recover [OPTIONS] {query}`` where the help text and the README say
    QUERY; every positional argument is written in capitals, in the usage line and in the Arguments panel."""
    text = help_text(command)
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    assert f"{command} [OPTIONS] " in usage and placeholder in usage, usage
    assert not any(c.islower() for c in usage.split("[OPTIONS]", 1)[1]), usage
    assert f" {placeholder} " in text.split("Arguments", 1)[1], text

