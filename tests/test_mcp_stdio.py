"""MCP over stdio (a breaker's findings): pipelined requests are all answered at end of input, blank lines are no
messages, Ctrl-C with a
backlog exits 130, a second Ctrl-C leaves a server stuck writing to a client that reads nothing; ingest DIR's
error line escapes the directory name on a terminal."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

INIT = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
    )
    + "\n"
)
INITED = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"


def call(i, name, args):
    return (
        json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": args}})
        + "\n"
    )


def server(db):
    """``lantern mcp`` over pipes, SIGINT at its default in the child: a shell's background job (a CI runner's,
    ``make test &``) starts its children with SIGINT ignored, and the Ctrl-C tests would then wait in vain."""
    return subprocess.Popen(
        [sys.executable, "-m", "lantern.cli", "--db", str(db), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def test_every_pipelined_request_is_answered_at_end_of_input(tmp_path):
    proc = server(tmp_path / "m.db")
    data = INIT + INITED + "".join(call(i, "stats", {}) for i in range(1, 301))
    data += call(301, "stats", {}).rstrip("\n")  # a last line without its newline
    out, _ = proc.communicate(data.encode(), timeout=120)
    ids = {json.loads(line)["id"] for line in out.decode().splitlines() if '"id"' in line}
    assert ids == set(range(302)) and proc.returncode == 0


def test_blank_lines_are_no_messages(tmp_path):
    proc = server(tmp_path / "m.db")
    out, err = proc.communicate((INIT + INITED + "\n\r\n   \n" + call(1, "stats", {}) + "\n").encode(), timeout=60)
    lines = out.decode().splitlines()
    assert proc.returncode == 0, err.decode()[-500:]
    assert [json.loads(line).get("id") for line in lines] == [0, 1]  # no "Internal Server Error" notification


def _start_reading(proc):
    proc.stdin.write((INIT + INITED).encode())
    proc.stdin.flush()
    proc.stdout.readline()


def test_ctrl_c_with_a_pipelined_backlog_exits_130(tmp_path):
    proc = server(tmp_path / "m.db")
    proc.stdin.write(
        (
            INIT
            + INITED
            + call(
                1,
                "archive",
                {"messages": [{"role": "user", "content": "port?"}, {"role": "assistant", "content": "5433"}]},
            )
        ).encode()
    )
    proc.stdin.flush()
    proc.stdout.readline(), proc.stdout.readline()
    threading.Thread(target=lambda: [_ for _ in proc.stdout], daemon=True).start()
    proc.stdin.write("".join(call(i, "search", {"query": "port", "k": 50}) for i in range(2, 1000)).encode())
    proc.stdin.flush()
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) == 130
    assert "internal error" not in proc.stderr.read().decode()


def test_second_ctrl_c_leaves_a_server_whose_client_reads_nothing(tmp_path):
    proc = server(tmp_path / "m.db")
    _start_reading(proc)
    payload = "".join(call(i, "recover", {"query": "x " * 3000, "budget": 100}) for i in range(1, 400)).encode()
    threading.Thread(target=lambda: (proc.stdin.write(payload), proc.stdin.flush()), daemon=True).start()
    time.sleep(3)  # stdout's pipe is full: the server is blocked writing
    proc.send_signal(signal.SIGINT)
    time.sleep(1)
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        assert proc.wait(timeout=10) in (130, 1)
    finally:
        proc.kill()


def test_ingest_dir_error_line_escapes_the_name_on_a_terminal(tmp_path):
    pty = pytest.importorskip("pty")
    d = tmp_path / "dir\x1b]0;PWNED\x07"
    d.mkdir()
    (d / "notes.txt").write_text("hello")
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "lantern.cli", "--db", str(tmp_path / "c.db"), "ingest", str(d)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=dict(os.environ),
    )
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    assert proc.wait(timeout=60) == 1
    assert b"no transcript with turns found under" in out and b"\x1b]0;PWNED" not in out
