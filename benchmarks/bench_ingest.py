"""Large-file ingest benchmark: throughput (turns/s, batch embedding) and peak memory (RSS) of ``lantern ingest``
on a generated JSONL transcript of ~100k turns / ~200 MB, against the same ingest of a 10x smaller prefix: with
streaming, peak RSS must not grow with the file.

    .venv/bin/python benchmarks/bench_ingest.py [--turns 100000] [--mb 200] [--parse-only] [--excerpt]

Data: the real aider turns (../shared/data/aider_chat_history when present, else the shipped excerpt), each
written as OpenAI-format JSONL messages (user, assistant with a tool call, the tool result, the assistant's
reply), cycled with the cycle number in the user message so no turn is a duplicate, and padded in the tool
result (a real log line repeated) to reach ``--mb`` megabytes over ``--turns`` turns. Each ingest runs in its own
process (``python -m lantern.cli ingest``), so its peak RSS is its own (``getrusage(RUSAGE_CHILDREN)`` read after
each). ``--parse-only`` runs the write path's streaming front only (read, parse, redact, chunk: the part
whose memory depends on the file) on both files, in minutes instead of hours on a loaded machine. Databases and
transcripts are temporary files, deleted at the end. Target: >= 100 turns/s.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import begin  # noqa: E402

TARGET_TURNS_PER_S = 100.0


def user_text(turn) -> str:
    return "\n".join(m.text for m in turn.messages if m.role == "user" and m.text.strip()) or "continue"


def reply_text(turn) -> str:
    return "\n".join(m.text for m in turn.messages if m.role == "assistant" and m.text.strip()) or "ok"


def write_transcript(path: Path, turns, n: int, target_bytes: int) -> int:
    """Write ``n`` turns of OpenAI JSONL built from the real ``turns`` (cycled), padded to about
    ``target_bytes``. Returns the bytes written."""
    base = sum(len(user_text(t)) + len(reply_text(t)) for t in turns) / max(len(turns), 1)
    pad_chars = max(int(target_bytes / n - base - 400), 0)  # ~400 bytes of JSON keys and the tool call
    pad_line = "2024-05-01 10:00:00 INFO worker-3 processed batch 1187 in 41 ms (queue 12, port 5433)\n"
    pad = (pad_line * (pad_chars // len(pad_line) + 1))[:pad_chars]
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            t = turns[i % len(turns)]
            cycle = i // len(turns)
            rows = [
                {"role": "user", "content": f"[run {cycle}] {user_text(t)}"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"c{i}",
                            "type": "function",
                            "function": {"name": "read_log", "arguments": json.dumps({"turn": i})},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": f"c{i}", "content": f"log of turn {i}\n{pad}"},
                {"role": "assistant", "content": reply_text(t)},
            ]
            f.write("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    return path.stat().st_size


def ingest(db: Path, transcript: Path) -> tuple[float, int, int]:
    """Run ``lantern ingest`` in a child process -> (seconds, turns added, the child's peak RSS in bytes).
    Children are run one at a time, so RUSAGE_CHILDREN's maximum after each is the largest child so far."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "lantern.cli", "--db", str(db), "ingest", str(transcript), "--json"],
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"ingest failed: {proc.stderr}")
    added = json.loads(proc.stdout)["added"]
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
    return seconds, added, peak


FRONT = """
import sys
from pathlib import Path
from lantern.archive.ingest import Slices, TurnBatches
from lantern.archive.redact import make_policy, redact_messages
policy = make_policy(b"bench")
n = sum(len(b) for b in TurnBatches(Slices(Path(sys.argv[1]), "auto"), lambda m: redact_messages(m, policy),
                                    256, lambda piece, redacted: None))
print(n)
"""


def front(transcript: Path) -> tuple[float, int, int]:
    """Parse, redact and chunk ``transcript`` as ``Lantern.ingest`` does (streamed), in a child process ->
    (seconds, turns, the child's peak RSS in bytes)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", FRONT, str(transcript)], capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"parse failed: {proc.stderr}")
    return seconds, int(proc.stdout), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--turns",
        type=int,
        default=10_000,
        help="turns in the large transcript (default 10000; 100000 with --parse-only shows memory at scale)",
    )
    ap.add_argument("--mb", type=float, default=20.0, help="size of the large transcript in MB (default 20)")
    ap.add_argument("--parse-only", action="store_true", help="read+parse+redact+chunk only (no embedding, no store)")
    args, console, meter, label, turns, _ = begin(ap, width=110)
    console.print(f"data: {label}, {len(turns)} real turns, cycled")
    rows = []
    with tempfile.TemporaryDirectory(prefix="lantern-bench-ingest-") as d:
        tmp = Path(d)
        # the small run first: RUSAGE_CHILDREN is a running maximum, so its peak is its own
        for name, n in (("small (1/10)", max(args.turns // 10, 1)), ("large", args.turns)):
            transcript = tmp / f"{n}.jsonl"
            size = write_transcript(transcript, turns, n, int(args.mb * 1e6 * n / args.turns))
            seconds, added, peak = front(transcript) if args.parse_only else ingest(tmp / f"{n}.db", transcript)
            rows.append((name, n, size, added, seconds, peak))
            transcript.unlink()
    what = (
        "parse+redact+chunk (streamed, no embedding)"
        if args.parse_only
        else "lantern ingest (streamed, batch embedding)"
    )
    table = Table(title=f"{what} of a generated OpenAI JSONL transcript")
    for col in ("run", "turns", "file MB", "turns added", "seconds", "turns/s", "peak RSS MB"):
        table.add_column(col, justify="right")
    for name, n, size, added, seconds, peak in rows:
        table.add_row(
            name,
            f"{n:,}",
            f"{size / 1e6:.1f}",
            f"{added:,}",
            f"{seconds:.1f}",
            f"{added / seconds:.1f}",
            f"{peak / 1e6:.0f}",
        )
    console.print(table)
    large = rows[-1]
    rate = large[3] / large[4]
    verdict = (
        "(parse only: not the ingest target)"
        if args.parse_only
        else (f"(target >= {TARGET_TURNS_PER_S:.0f}): {'met' if rate >= TARGET_TURNS_PER_S else 'NOT met'}")
    )
    console.print(
        f"throughput {rate:.1f} turns/s {verdict}; peak RSS large/small = "
        f"{rows[1][5] / rows[0][5]:.2f} (bounded memory: close to 1)"
    )
    console.print(meter.report())


if __name__ == "__main__":
    main()
