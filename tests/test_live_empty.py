"""``--live FILE`` (``lantern recover``, ``lantern search --explain``) holding no message: refused with one line and
exit code 1, whatever the format and whether it comes from a file or a pipe (archive/parse reads every format
``ingest`` does), as ``ingest`` refuses a transcript with no turn. A live context always holds messages: an empty
one is the wrong file, and accepting it silently would recover turns that are still live."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from clirun import lantern

FIXTURE = Path(__file__).parent / "fixtures" / "claude_code_session.jsonl"

# documents of several formats that parse to no message at all
EMPTY_DOCUMENTS = [
    "[]",
    '{"messages": []}',
    '[{"conversations": []}]',  # ShareGPT
    '{"conversations": [{"from": "human", "value": ""}]}',
    '{"type": "session_meta", "payload": {"id": "x"}}\n',  # Codex
    "# aider chat started at 2024-01-01 10:00:00\n\n",  # aider
]
_EMPTY_MESSAGE = st.fixed_dictionaries(  # an empty tool result is a message (a command that printed nothing)
    {
        "role": st.sampled_from(["user", "assistant", "system"]),
        "content": st.sampled_from(["", " ", "\n\t", None, []]),
    }
)
_EMPTY_MESSAGES = st.lists(_EMPTY_MESSAGE, max_size=5).flatmap(
    lambda ms: st.sampled_from(
        [json.dumps(ms), json.dumps({"messages": ms}), "".join(json.dumps(m) + "\n" for m in ms) or "[]"]
    )
)


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("live") / "a.db"
    assert lantern("ingest", str(FIXTURE), db=path).returncode == 0
    return path


def _refused(result: subprocess.CompletedProcess) -> str:
    err = result.stderr.decode()
    assert result.returncode == 1 and result.stdout == b"", err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: no messages in the --live file"), err
    return err


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=st.sampled_from(EMPTY_DOCUMENTS) | _EMPTY_MESSAGES, command=st.sampled_from(["recover", "search"]))
def test_a_live_file_with_no_message_is_refused_in_every_format(db, tmp_path, document, command):
    live = tmp_path / "live.txt"
    live.write_text(document)
    args = ["recover", "which port?"] if command == "recover" else ["search", "which port?", "--explain"]
    _refused(lantern(*args, "--live", str(live), db=db))


def test_a_pipe_with_no_message_is_refused_the_same_way(db):
    read_end, write_end = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(write_end, b"[]"), os.close(write_end)))
    writer.start()
    try:
        _refused(lantern("recover", "which port?", "--live", f"/dev/fd/{read_end}", db=db))
    finally:
        writer.join()
        os.close(read_end)


def test_stdin_with_no_message_is_refused_in_a_real_process(db):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    proc = subprocess.run(
        [sys.executable, "-m", "lantern", "--db", str(db), "recover", "which port?", "--live", "/dev/stdin"],
        input=b'{"messages": [{"role": "user", "content": "  "}]}',
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert "(1 item skipped)" in _refused(proc)


def test_a_live_file_with_messages_still_works(db, tmp_path):
    live = tmp_path / "live.json"
    live.write_text(json.dumps([{"role": "user", "content": "Let us look at the billing service."}]))
    result = lantern("recover", "which port does postgres use?", "--live", str(live), db=db)
    assert result.returncode == 0 and "5433" in result.stdout.decode()
