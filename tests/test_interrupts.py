"""Ctrl-C pressed again and again, as an impatient user does: every interrupted command ends with exit code 130 and
no traceback, whichever phase the later presses land in (the command's own handling, closing the database, the
interpreter's shutdown). The class: a second SIGINT while a process shuts down must not kill it by the signal."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

BURST = 12  # presses after the first
GAP_S = 0.04  # seconds between them: the burst spans the command's whole shutdown


def _chat_lines(n: int) -> list[str]:
    out = []
    for i in range(n):
        out.append(json.dumps({"role": "user", "content": f"Step {i}: run the migration for tenant {1000 + i}."}))
        out.append(json.dumps({"role": "assistant", "content": f"Tenant {1000 + i} migrated in {i % 50} s."}))
    return out


def _start(args: list[str], **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "lantern.cli", *args],
        stdin=kw.pop("stdin", subprocess.DEVNULL),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a shell's background job ignores it
        env={**os.environ, "COLUMNS": "200"},
        **kw,
    )


def _burst(proc: subprocess.Popen) -> tuple[int, str]:
    proc.send_signal(signal.SIGINT)
    for _ in range(BURST):
        time.sleep(GAP_S)
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err.decode()


def _count(db) -> int:
    try:
        with sqlite3.connect(db, timeout=5) as con:
            return con.execute("SELECT count(*) FROM entries").fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.mark.parametrize("after", [256, 512])
def test_ingest_interrupted_by_a_burst_exits_130(tmp_path, after):
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(_chat_lines(900)) + "\n", encoding="utf-8")
    db = tmp_path / "i.db"
    proc = _start(["--db", str(db), "ingest", str(path), "--session", "big"])
    deadline = time.monotonic() + 120
    while _count(db) < after and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if proc.poll() is not None:
        pytest.skip("the ingest finished before it could be interrupted")
    rc, err = _burst(proc)
    if rc == 0:  # every entry was committed as the count passed `after`: the burst found only the shutdown
        pytest.skip("the ingest finished before it could be interrupted")
    assert rc == 130, (rc, err)
    assert "Traceback" not in err and "interrupted:" in err


def test_mcp_idle_server_interrupted_by_a_burst_exits_130(tmp_path):
    pytest.importorskip("mcp")
    proc = _start(["--db", str(tmp_path / "m.db"), "mcp"], stdin=subprocess.PIPE)
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }
    proc.stdin.write(json.dumps(init).encode() + b"\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 0  # serving
    rc, err = _burst(proc)
    assert rc == 130, (rc, err)
    assert "Traceback" not in err


@pytest.mark.parametrize("args", [["--help"], ["stats", "--json"], ["recover", "--bogus"]])
def test_once_a_command_has_its_exit_code_ctrl_c_cannot_kill_the_shutdown(tmp_path, monkeypatch, args):
    """A burst that lands after the command finished (exit 0) or failed met Python's shutdown, which resets its
    SIGINT handler to the default action: the process died by the signal (-2) instead of exiting with its code.
    Whatever the code, main() leaves SIGINT ignored for the shutdown."""
    from lantern.cli import main

    monkeypatch.setattr(sys, "argv", ["lantern", "--db", str(tmp_path / "x.db"), *args])
    before = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(SystemExit):
            main()
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
