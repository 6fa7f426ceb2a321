"""The warm path (issue 37 item 2; integrations/daemon.py): a Claude Code or Codex hook event as a new process, the
way the agent runs it, with the daemon warm, with none running (cold: the hook spawns it; docs/daemon.md "Cold
start" says what each event does then), and switched off (``LANTERN_DAEMON=off``: in-process), beside
``python -c pass``.

    .venv/bin/python benchmarks/bench_warm.py [--runs 15] [--cold-runs 3] [--bytecode source|cached]

``--bytecode cached`` (default) runs every process with a private ``PYTHONPYCACHEPREFIX`` that an untimed run has
filled, as an installed package has its ``.pyc`` files; ``source`` keeps ``PYTHONDONTWRITEBYTECODE`` as this
checkout's environment sets it, so Lantern's modules are compiled at every start (BENCHMARKS.md §24, §24b).

Each timed hook run is preceded by a ``python -c pass`` run of the same interpreter, so both see the same machine
load; the table gives p50 / p95 of the hook, the p50 of those ``python -c pass`` runs and the ratio of the two p50s
(what the hook costs in Python starts, a figure a loaded machine moves less than milliseconds). Targets: warm p50
<= 100 ms, cold p50 <= 400 ms.

The store: the Claude Code fixture session (tests/fixtures/claude_code_session.jsonl, compacted at its end)
archived by the hook itself, beside the shipped aider excerpt (97 turns) in another session, and the Codex fixture
rollout (tests/fixtures/codex, archived by a PreCompact, then its local compaction). Events: a prompt in a session
never compacted (the cheap checks alone); a prompt with no back-reference and one with (after the compaction every
prompt is a candidate: archive of new lines, recovery, the injection decision); Stop with one new real-shape turn
appended before each run (outside the timing); SessionStart with source compact (archive, the summary's loss,
injection), for a session archived before the compaction and for one met for the first time (a new copy of the
fixture under a new session id each run: every turn archived by that event); Codex's SessionStart(compact). A cold
run is timed from a state with no daemon; the daemon it spawns is awaited and stopped (by its pid) outside the
timing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import EXCERPT, REPO, VENV_BIN, pct, print_machine, unmark_compactions  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "claude_code_session.jsonl"
SID = "7f3c2a10-5b1e-4c8e-9d2a-1e6f0b7c9a41"
CODEX = REPO / "tests" / "fixtures" / "codex"
CODEX_SID = "019b0c3e-7a21-7d40-9a55-3c1f0e8d2b64"


def hook_command(db: Path, host: str = "claude-code") -> list[str]:
    exe = VENV_BIN / "lantern"  # the command `lantern install claude-code` / `install codex` writes
    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "lantern"]
    return [*base, "--db", str(db), "hook", host]


def timed(cmd: list[str], stdin: str, env: dict) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, timeout=600)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{cmd} failed: {done.stderr[-2000:]}")
    return took, done.stdout


def new_turn(n: int, parent: str) -> str:
    """One user + assistant record pair in Claude Code's shape, going on from the record ``parent``."""
    user = {
        "type": "user",
        "uuid": f"bench-u{n}",
        "parentUuid": parent,
        "sessionId": SID,
        "cwd": "/home/dev/billing",
        "timestamp": "2026-11-20T10:00:00Z",
        "message": {"role": "user", "content": f"Step {n}: add a retry to the invoice export job."},
    }
    reply = {
        "type": "assistant",
        "uuid": f"bench-a{n}",
        "parentUuid": f"bench-u{n}",
        "sessionId": SID,
        "cwd": "/home/dev/billing",
        "timestamp": "2026-11-20T10:00:05Z",
        "message": {
            "id": f"msg_bench_{n}",
            "role": "assistant",
            "content": [{"type": "text", "text": f"Added retry #{n} with backoff 2s to jobs/export.py."}],
        },
    }
    return json.dumps(user) + "\n" + json.dumps(reply) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15, help="timed runs per event, warm and switched off")
    ap.add_argument("--cold-runs", type=int, default=3, help="timed runs per event with no daemon running")
    ap.add_argument("--bytecode", choices=("cached", "source"), default="cached", help="see the module docstring")
    args = ap.parse_args()
    console = Console(width=130)
    print_machine(console)
    console.print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    sys.path.insert(0, str(REPO / "src"))
    from lantern.integrations import daemon

    tmp = Path(tempfile.mkdtemp(prefix="bench-warm-"))
    run_dir = Path(tempfile.mkdtemp(prefix="bw", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANTERN_")}
    env |= {
        "HOME": str(tmp / "home"),
        "XDG_RUNTIME_DIR": str(run_dir),
        "PYTHONPATH": str(REPO / "src"),
        "LANTERN_DAEMON": "on",
    }
    if args.bytecode == "cached":  # as installed: the .pyc files written once, by the untimed runs below
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    console.print(f"bytecode: {args.bytecode}")
    (tmp / "home").mkdir()
    os.environ.clear()
    os.environ.update(env)  # daemon.socket_path() here names the hooks' daemon
    db = tmp / "bench.db"
    transcript = tmp / "session.jsonl"
    transcript.write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    off = {**env, "LANTERN_DAEMON": "off"}
    subprocess.run(
        [sys.executable, "-m", "lantern", "--db", str(db), "ingest", str(EXCERPT), "--session", "aider"],
        env=off,
        check=True,
        capture_output=True,
    )
    cmd = hook_command(db)
    codex_cmd = hook_command(db, "codex")

    def payload(event: str, path: Path = transcript, sid: str = SID, **extra) -> str:
        return json.dumps({"session_id": sid, "transcript_path": str(path), "hook_event_name": event, **extra})

    timed(cmd, payload("PreCompact", trigger="manual"), off)  # the session archived, as a compaction would
    lines = FIXTURE.read_text(encoding="utf-8").splitlines(keepends=True)
    fresh = tmp / "never-compacted.jsonl"  # the session before its compaction
    fresh.write_text("".join(lines[: next(i for i, x in enumerate(lines) if "compact_boundary" in x)]))
    rollout = tmp / "rollout-2026-11-24T14-10-00-019b0c3e.jsonl"
    rollout.write_bytes((CODEX / "rollout-before-compaction.jsonl").read_bytes())
    timed(codex_cmd, payload("PreCompact", rollout, CODEX_SID, trigger="auto", turn_id="3"), off)
    with open(rollout, "ab") as f:
        f.write((CODEX / "compacted-local.jsonl").read_bytes())
    copies = [0]

    def first_met() -> str:
        """SessionStart(compact) of a session none of whose lines is archived: a new copy under a new id."""
        copies[0] += 1
        sid = f"{SID[:-6]}{copies[0]:06d}"
        path = tmp / f"first-met-{copies[0]}.jsonl"
        path.write_text(FIXTURE.read_text(encoding="utf-8").replace(SID, sid), encoding="utf-8")
        return payload("SessionStart", path, sid, source="compact")

    def same(text: str):
        return lambda: text

    events = {  # name -> (hook command, its stdin, made before each run outside the timing)
        "UserPromptSubmit, never compacted": (cmd, same(payload("UserPromptSubmit", fresh, prompt="which port?"))),
        "UserPromptSubmit, no back-reference": (cmd, same(payload("UserPromptSubmit", prompt="add type hints"))),
        "UserPromptSubmit, back-reference": (
            cmd,
            same(payload("UserPromptSubmit", prompt="as I said earlier, which port does the billing database use?")),
        ),
        "Stop (1 new turn)": (cmd, same(payload("Stop", stop_hook_active=False))),
        "SessionStart source=compact": (cmd, same(payload("SessionStart", source="compact"))),
        "SessionStart compact, session first met": (cmd, first_met),
        "Codex SessionStart source=compact": (
            codex_cmd,
            same(payload("SessionStart", rollout, CODEX_SID, source="compact", model="gpt-5.1-codex")),
        ),
    }
    for command, stdin_of in events.values():  # untimed: every path's modules compiled once (--bytecode cached)
        timed(command, stdin_of(), off)
    last = json.loads(FIXTURE.read_text(encoding="utf-8").splitlines()[-1])["uuid"]
    turns = [0]

    def before(event: str) -> None:
        if "SessionStart" in event:  # outside the timing: each run recovers, none is a repeat's no-op
            unmark_compactions(tmp / "home")
        if event.startswith("Stop"):  # the live branch goes on: no rewind
            n = turns[0]
            with open(transcript, "a", encoding="utf-8") as f:
                f.write(new_turn(n, f"bench-a{n - 1}" if n else last))
            turns[0] += 1

    def daemon_pid() -> int | None:
        try:
            text = Path(daemon.socket_path()[: -len(".sock")] + ".lock").read_text().strip()
        except OSError:
            return None
        return int(text) if text.isdigit() else None

    def served() -> bool:
        try:
            daemon.call("events", {"db": str(db), "kwargs": {"limit": 1}}, timeout=300)
            return True
        except daemon.Unavailable:
            return False

    def wait_served() -> None:
        deadline = time.monotonic() + 300
        while not served():
            if time.monotonic() > deadline:
                raise SystemExit("the daemon did not come up within 300 s")
            time.sleep(0.1)

    def stop_daemon() -> None:
        pid = daemon_pid()
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 60
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    rows = []
    try:
        for mode in ("warm", "cold", "off"):
            for event, (command, stdin_of) in events.items():
                hooks, passes, chars = [], [], 0
                n = args.cold_runs if mode == "cold" else args.runs
                for i in range(n + (0 if mode == "cold" else 1)):  # warm and off: one untimed run first
                    if mode == "cold":
                        stop_daemon()
                    elif mode == "warm" and i == 0:
                        daemon.spawn()
                        wait_served()
                    before(event)
                    stdin = stdin_of()
                    p, _ = timed([sys.executable, "-c", "pass"], "", env)
                    t, out = timed(command, stdin, off if mode == "off" else env)
                    if mode == "cold":
                        wait_served()  # outside the timing: the spawned daemon is up, then stopped
                    if mode == "cold" or i > 0:
                        hooks.append(t)
                        passes.append(p)
                    if out.strip():
                        chars = len(json.loads(out)["hookSpecificOutput"]["additionalContext"])
                rows.append((mode, event, hooks, passes, chars))
            if mode == "warm":
                stop_daemon()
    finally:
        stop_daemon()
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(run_dir, ignore_errors=True)

    table = Table(title="a hook event as a new process (ms); `pass`: python -c pass just before each run")
    for col in ("mode", "event", "runs", "p50", "p95", "pass p50", "p50 / pass p50", "injected chars"):
        table.add_column(col, justify="left" if col in ("mode", "event") else "right")
    for mode, event, hooks, passes, chars in rows:
        h50, p50 = pct(hooks, 50), pct(passes, 50)
        table.add_row(
            mode,
            event,
            str(len(hooks)),
            f"{h50 * 1000:.0f}",
            f"{pct(hooks, 95) * 1000:.0f}",
            f"{p50 * 1000:.0f}",
            f"{h50 / p50:.1f}",
            f"{chars:,}",
        )
    console.print(table)
    console.print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
