"""Shared helpers of the benchmarks: the real data (with the shipped excerpt as fallback), percentiles, the
machine description, and the synthetic-but-real-stage store filler of bench_recover / bench_cold_start.

Nothing here is timed by itself; every figure a benchmark prints is measured by that benchmark.
"""

from __future__ import annotations

import os
import platform
import re
import sqlite3
import subprocess
import sys
from dataclasses import replace
from datetime import date
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED_AIDER = REPO.parent / "shared" / "data" / "aider_chat_history" / "chat-history.md"
EXCERPT = REPO / "src" / "lantern" / "data" / "demo" / "aider-chat-excerpt.md"
VENV_BIN = Path(sys.executable).parent


def begin(ap, width: int):
    """The common start of a benchmark: adds ``--excerpt`` to the parser ``ap``, parses the arguments, prints the
    machine, starts the CPU meter and loads the aider turns. Returns (args, console, meter, label, turns, markdown)."""
    from rich.console import Console

    ap.add_argument("--excerpt", action="store_true", help="use the shipped demo excerpt even if ../shared/data exists")
    args = ap.parse_args()
    console = Console(width=width)
    print_machine(console)
    meter = CpuMeter()
    source, label = aider_source(args.excerpt)
    turns, markdown = load_turns(source)
    return args, console, meter, label, turns, markdown


def aider_source(force_excerpt: bool = False) -> tuple[Path, str]:
    """The aider chat log to benchmark on: ../shared/data's full log when present, else the shipped excerpt.
    Returns (path, label)."""
    if not force_excerpt and SHARED_AIDER.is_file():
        return SHARED_AIDER, "aider chat-history.md (../shared/data, full log)"
    return EXCERPT, "shipped demo excerpt aider-chat-excerpt.md (../shared/data not found or --excerpt)"


def load_turns(path: Path):
    """Parse + chunk an aider log exactly as ``Lantern.ingest`` does. Returns (turns, markdown text)."""
    from lantern.archive.chunk import chunk
    from lantern.archive.parse import parse

    parsed = parse(path, "aider")
    return chunk(parsed.messages, None), path.read_text(encoding="utf-8")


def markdown_prefix(text: str, turns, n: int) -> str:
    """The aider markdown up to (not including) the line where turn ``n`` starts: a real transcript holding
    the first ``n`` turns. With n >= len(turns), the whole text."""
    if n >= len(turns):
        return text
    line = turns[n].messages[0].meta["line"]  # 1-based line of the turn's first message
    return "\n".join(text.split("\n")[: line - 1]) + "\n"


def user_text(turn) -> str:
    return "\n".join(m.text for m in turn.messages if m.role == "user" and m.text.strip())


def pool_and_queries(turns, pool: int, n_queries: int) -> tuple[int, list[str]]:
    """The split every recovery benchmark makes: the first ``pool`` turns (at most 80% of them) fill the store, and
    the queries are the distinct user messages of at least 3 words among the turns after them, the first
    ``n_queries``. Returns (pool size, queries)."""
    n_pool = min(pool, int(len(turns) * 0.8))
    queries = dict.fromkeys(q for q in (user_text(t) for t in turns[n_pool:]) if len(q.split()) >= 3)
    return n_pool, list(queries)[:n_queries]


def pct(values, q: float) -> float:
    """Percentile ``q`` (0-100) with linear interpolation (numpy's default)."""
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if len(values) else float("nan")


def phase_table(console, title: str, phase_runs: list[dict]) -> None:
    """Print the median of each phase (seconds -> ms) over fresh-process runs; keys starting with "_" are not phases."""
    from rich.table import Table

    table = Table(title=f"{title} (median of {len(phase_runs)} processes, ms)")
    table.add_column("phase", justify="left")
    table.add_column("p50", justify="right")
    for key in phase_runs[0]:
        if not key.startswith("_"):
            table.add_row(key, f"{1000 * float(np.median([r[key] for r in phase_runs])):.0f}")
    console.print(table)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


# ---------------------------------------------------------------------------------------------- machine
def _lscpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        m = re.search(r"^Model name:\s*(.+)$", out, re.M)
        return m.group(1).strip() if m else platform.processor() or "unknown"
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or "unknown"


def _git() -> str:
    try:
        sha = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--", "src"], capture_output=True, text=True
        ).stdout
        return f"{sha}{' + uncommitted changes in src/' if dirty.strip() else ''}" if sha else "unknown"
    except OSError:
        return "unknown"


def machine_info() -> dict[str, str]:
    import onnxruntime

    return {
        "cpu": _lscpu_model(),
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "onnxruntime": onnxruntime.__version__,
        "numpy": np.__version__,
        "git": _git(),
        "date": date.today().isoformat(),
    }


def print_machine(console) -> None:
    info = machine_info()
    console.print(
        f"machine: {info['cpu']}, {info['cores']} cores; Python {info['python']}, SQLite {info['sqlite']}, "
        f"onnxruntime {info['onnxruntime']}, numpy {info['numpy']}; lantern @ {info['git']}; {info['date']}"
    )
    threads = {
        k: v for k, v in os.environ.items() if k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    }
    if threads:
        console.print("thread settings: " + ", ".join(f"{k}={v}" for k, v in threads.items()))


class CpuMeter:
    """CPU used on the whole machine (/proc/stat) vs by this process and its waited-for children (os.times)
    between construction and ``report()``: the rest is other processes sharing the machine during the run."""

    def __init__(self) -> None:
        self.t0, self.machine0, self.own0 = self._now()

    @staticmethod
    def _now() -> tuple[float, float, float]:
        import time

        try:
            with open("/proc/stat") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
            busy = (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # minus idle, iowait
        except (OSError, ValueError):
            busy = float("nan")
        t = os.times()
        return time.perf_counter(), busy, t.user + t.system + t.children_user + t.children_system

    def report(self) -> str:
        t1, machine1, own1 = self._now()
        wall, machine, own = t1 - self.t0, machine1 - self.machine0, own1 - self.own0
        other = max(machine - own, 0.0)
        return (
            f"CPU during the run: {wall:.0f} s wall; this benchmark {own / wall:.2f} cores on average, "
            f"other processes {other / wall:.2f} cores on average (of {os.cpu_count()}); "
            f"load average now {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )


# ---------------------------------------------------------------------------------------------- store filler
class Pool:
    """Real turns run through the real write-path stages once (``Writer.prepare``: summarize, tags, hints,
    classify, content hash) and their summaries embedded once (batched). ``rows[i]`` / ``vectors[i]``."""

    def __init__(self, lantern, turns, session: str = "bench"):
        self.rows = [lantern.writer.prepare(t, session, lantern.scope) for t in turns]
        self.vectors = lantern.embedder.embed([r.summary for r in self.rows])

    def __len__(self) -> int:
        return len(self.rows)


def clean_pool(turns, lantern, session: str = "bench"):
    """The turns that ``Store.add`` would neither dedupe (same content hash) nor merge into the previous entry
    (a turn whose text extends the previous turn of its session) when added in order."""
    keep, seen, last_text = [], set(), {}
    for t in turns:
        row = lantern.writer.prepare(t, session, lantern.scope)
        prev = last_text.get(row.session)
        if row.content_hash in seen or (prev is not None and row.text.startswith(prev + "\n")):
            continue
        seen.add(row.content_hash)
        last_text[row.session] = row.text
        keep.append(t)
    return keep


def fill_store(store, pool: Pool, start: int, stop: int, *, sigma: float, seed: int = 0, batch: int = 2_000) -> None:
    """Add entries ``start..stop-1`` to ``store`` through ``Store.add`` (the real store stage: one transaction
    per ``batch`` rows, FTS5 rows, vector BLOBs). Entry i is pool row ``i % P`` of copy round ``k = i // P``:
    round 0 is the real turn with its real vector; round k >= 1 gets `` [copy k]`` appended to its text (so the
    content hash differs) and session ``<session>~k``, and its vector is the pool vector plus Gaussian noise of
    standard deviation ``sigma`` per nonzero component (a block embedder's unused block stays zero;
    lantern.embed RoutedEmbedder), re-normalized to unit length."""
    from lantern.model import content_hash

    rng = np.random.default_rng(seed + start)
    p = len(pool)
    for lo in range(start, stop, batch):
        hi = min(stop, lo + batch)
        rows, vecs = [], []
        for i in range(lo, hi):
            base, vec, k = pool.rows[i % p], pool.vectors[i % p], i // p
            if k:
                session = f"{base.session}~{k}"
                text = f"{base.text}\n[copy {k}]"
                base = replace(base, session=session, text=text, content_hash=content_hash(session, text))
                vec = vec + (rng.normal(0.0, sigma, vec.shape) * (vec != 0)).astype(np.float32)
                vec = vec / np.linalg.norm(vec)
            rows.append(base)
            vecs.append(vec)
        store.add(rows, np.asarray(vecs, dtype=np.float32))


def unmark_compactions(home: Path) -> None:
    """Take the marks of the compactions already injected off the hooks' offsets files under ``home``
    (integrations/claude_code.py ``injected_already``): a benchmark that repeats one SessionStart(compact) times
    its whole recovery each run, not the answer to a repeat (which injects nothing again)."""
    import json

    for host in ("claude-code", "codex"):
        path = home / ".lantern" / host / "offsets.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        marks = {k: {f: v for f, v in x.items() if f != "compaction"} for k, x in data.items() if isinstance(x, dict)}
        path.write_text(json.dumps(marks))
