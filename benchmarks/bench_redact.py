"""Redaction benchmark: the cost per turn of the redaction stage on real aider turns, against the whole
``Lantern.archive`` call and the tagging stage of the same turns as baselines; what it finds in the real log; and
its detection and false-positive rates on the corpora of tests/fixtures/secrets/, next to detect-secrets'
high-entropy detectors used naively.

    .venv/bin/python benchmarks/bench_redact.py [--archive-turns 300] [--repeat 3] [--excerpt]

Data: ../shared/data/aider_chat_history/chat-history.md when present (read-only), else the shipped demo excerpt.
Per turn (all turns of the log, ``--repeat`` passes, the fastest pass per turn kept to drop scheduler noise):
``redact_messages(turn.messages, policy)`` — the exact call ``Lantern`` makes between parse and chunk — and its two
parts, ``remove_private`` and ``find_secrets``, over the same fields. Baselines, interleaved turn by turn on the
first ``--archive-turns`` turns: ``Lantern.archive(turn.messages)`` (one call per turn, redaction included, on a
temporary database) and ``extract_tags`` of the turn's text (the other regex stage of the write path).
Target: redaction adds <= 2 ms per turn.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, begin, pct  # noqa: E402
from lantern.api import Lantern  # noqa: E402
from lantern.archive.chunk import chunk  # noqa: E402
from lantern.archive.parse import parse  # noqa: E402
from lantern.archive.redact import find_secrets, make_policy, redact_messages, redact_text, remove_private  # noqa: E402
from lantern.text.tags import extract_tags  # noqa: E402

TARGET_MS = 2.0
FIXTURES = REPO / "tests" / "fixtures" / "secrets"


def fields(turn):
    """Every text field redaction reads: message text, tool-call arguments, tool results, file names."""
    for m in turn.messages:
        yield m.text or ""
        for c in m.tool_calls:
            yield c.arguments or ""
        for r in m.tool_results:
            yield r.content or ""
        yield from m.files


def naive_high_entropy(text: str, quoted_only: bool) -> list[str]:
    """detect-secrets' HexHighEntropyString (limit 3.0) and Base64HighEntropyString (limit 4.5) as a file scan
    applies them (quoted strings, ``quoted_only``) or over every token of the text (what a naive scan of chat text
    does, the plugins' non-quoted regex). Returns the flagged strings."""
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString, HexHighEntropyString

    out = []
    for plugin in (HexHighEntropyString(), Base64HighEntropyString()):
        if quoted_only:
            found = list(plugin.analyze_string(text))
        else:
            with plugin.non_quoted_string_regex(is_exact_match=False):
                found = list(plugin.analyze_string(text))
        out += [s for s in found if plugin.calculate_shannon_entropy(s) > plugin.entropy_limit]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--archive-turns", type=int, default=300, help="turns archived one call each as the baseline (default 300)"
    )
    ap.add_argument(
        "--repeat", type=int, default=3, help="passes over every turn; the fastest per turn is kept (default 3)"
    )
    args, console, meter, label, turns, _ = begin(ap, width=130)
    chars = np.array([sum(len(f) for f in fields(t)) for t in turns], dtype=np.float64)
    console.print(
        f"data: {label}: {len(turns):,} turns, mean {chars.mean():,.0f} / median {np.median(chars):,.0f} / "
        f"max {chars.max():,.0f} characters of text per turn"
    )

    policy = make_policy(os.urandom(16))
    t0 = time.perf_counter()
    find_secrets("warm up: password=x", policy)  # imports detect-secrets and builds the detector table
    import_ms = (time.perf_counter() - t0) * 1000

    # ------------------------------------------------------------------ per-turn cost, every turn
    pc = time.perf_counter
    whole = np.full(len(turns), np.inf)
    private = np.full(len(turns), np.inf)
    detect = np.full(len(turns), np.inf)
    kinds: Counter[str] = Counter()
    examples: dict[str, str] = {}
    salt = policy.salt
    for rep in range(args.repeat):
        policy = make_policy(salt)  # a fresh policy each pass: its memo must not answer a pass from the one before
        for i, t in enumerate(turns):
            t0 = pc()
            red, n = redact_messages(t.messages, policy)
            t1 = pc()
            for f in fields(t):
                remove_private(f, policy.private)
            t2 = pc()
            found = [(f, x) for f in fields(t) for x in find_secrets(f, policy)]
            t3 = pc()
            whole[i] = min(whole[i], t1 - t0)
            private[i] = min(private[i], t2 - t1)
            detect[i] = min(detect[i], t3 - t2)
            if rep == 0:
                for f, x in found:
                    kinds[x.kind] += 1
                    ctx = f[max(0, x.start - 40) : x.start] + "<" + x.kind + ">" + f[x.end : x.end + 20]
                    examples.setdefault(x.kind + ":" + ctx[:40], re.sub(r"\s+", " ", ctx))

    # ------------------------------------------------------------------ baselines, interleaved
    n_arch = min(args.archive_turns, len(turns))
    arch = np.zeros(n_arch)
    tags = np.zeros(n_arch)
    red_same = np.zeros(n_arch)
    with tempfile.TemporaryDirectory(prefix="lantern-bench-redact-") as tmp:
        with Lantern(Path(tmp) / "warm.db") as warm:
            for t in turns[-20:]:
                warm.archive(t.messages, session="warm")
        with Lantern(Path(tmp) / "bench.db") as lantern:
            for i, t in enumerate(turns[:n_arch]):
                t0 = pc()
                redact_messages(t.messages, lantern.redaction)
                t1 = pc()
                lantern.archive(t.messages, session="bench")
                t2 = pc()
                extract_tags(t.text)
                t3 = pc()
                red_same[i], arch[i], tags[i] = t1 - t0, t2 - t1, t3 - t2

    # ------------------------------------------------------------------ report: cost
    def row(name, values, ref_mean):
        a = np.asarray(values) * 1000
        return [
            name,
            f"{pct(a, 50):.3f}",
            f"{pct(a, 95):.3f}",
            f"{pct(a, 99):.3f}",
            f"{a.max():.2f}",
            f"{a.mean():.3f}",
            f"{1000 * a.sum() / chars.sum() * 1000:.1f}" if len(a) == len(turns) else "",
            f"{a.mean() / ref_mean:.3f}x" if ref_mean else "",
        ]

    arch_mean = float(arch.mean()) * 1000
    t1 = Table(
        title=f"Redaction cost per turn, {len(turns):,} real turns (ms; fastest of {args.repeat} passes per turn)"
    )
    for col in ("measurement", "p50", "p95", "p99", "max", "mean", "µs per 1,000 chars", "mean / archive mean"):
        t1.add_column(col, justify="left" if col == "measurement" else "right")
    t1.add_row(*row("redact_messages (the stage Lantern runs)", whole, arch_mean), style="bold")
    t1.add_row(*row("  private spans (remove_private)", private, arch_mean), style="dim")
    t1.add_row(*row("  secret detection (find_secrets)", detect, arch_mean), style="dim")
    console.print(t1)
    t2 = Table(title=f"Baselines, the first {n_arch} turns, interleaved turn by turn (ms)")
    for col in ("measurement", "p50", "p95", "p99", "max", "mean", "", "mean / archive mean"):
        t2.add_column(col, justify="left" if col == "measurement" else "right")
    t2.add_row(*row("redact_messages, same turns", red_same, arch_mean), style="bold")
    t2.add_row(*row("baseline: Lantern.archive (whole call, redaction included)", arch, arch_mean))
    t2.add_row(*row("baseline: extract_tags (tagging stage)", tags, arch_mean))
    console.print(t2)
    mean_ms, p95_ms = float(whole.mean()) * 1000, pct(whole, 95) * 1000
    verdict = "meets" if mean_ms <= TARGET_MS and p95_ms <= TARGET_MS else "MISSES"
    console.print(
        f"redaction: mean {mean_ms:.3f} ms, p95 {p95_ms:.3f} ms per turn: {verdict} the <= {TARGET_MS:.0f} ms target; "
        f"{100 * red_same.mean() / arch.mean():.1f}% of the archive call; {red_same.mean() / tags.mean():.2f}x "
        "tagging. "
        f"One-off: importing detect-secrets and building the detectors {import_ms:.0f} ms (first archive of a process)."
    )
    slow = np.argsort(-whole)[:3]
    console.print("slowest turns: " + ", ".join(f"{whole[i] * 1000:.1f} ms ({chars[i]:,.0f} chars)" for i in slow))

    # ------------------------------------------------------------------ report: what it finds in the real log
    console.print(
        f"\nfound in the real log: {sum(kinds.values())} secrets in "
        f"{sum(1 for t in turns if any(find_secrets(f, policy) for f in fields(t)))} of {len(turns):,} turns: "
        + ", ".join(f"{k} {v}" for k, v in kinds.most_common())
    )
    for ctx in list(examples.values())[:12]:
        console.print(f"  …{ctx}…", markup=False)

    # ------------------------------------------------------------------ report: corpora
    cases = [json.loads(x) for x in (FIXTURES / "secrets.jsonl").read_text(encoding="utf-8").splitlines() if x]
    looks = [json.loads(x) for x in (FIXTURES / "lookalikes.jsonl").read_text(encoding="utf-8").splitlines() if x]
    removed = kind_ok = n_secrets = 0
    for c in cases:
        msgs, _ = redact_messages(parse(c["messages"], "auto").messages, policy)
        text = "\n".join(t.text for t in chunk(msgs, None))
        for s in c["secrets"]:
            n_secrets += 1
            removed += s not in text and json.dumps(s)[1:-1] not in text
        kind_ok += f"[secret:{c['kind']} " in text
    console.print(
        f"\nsecret corpus: {len(cases)} cases, {n_secrets} secrets: {removed} removed "
        f"({100 * removed / n_secrets:.0f}%), "
        f"expected kind named in {kind_ok}/{len(cases)} cases"
    )
    t3 = Table(title="Look-alike corpus: strings changed or flagged (false positives) per category")
    for col in (
        "category",
        "strings",
        "ours (redact_text)",
        "detect-secrets high-entropy, quoted strings",
        "detect-secrets high-entropy, every token",
    ):
        t3.add_column(col, justify="left" if col == "category" else "right")
    total, ours, naive_q, naive_all = Counter(), Counter(), Counter(), Counter()
    for lk in looks:
        red, _ = redact_text(lk["text"], policy)
        flagged_q = naive_high_entropy(lk["text"], True)
        flagged_all = naive_high_entropy(lk["text"], False)
        for k in lk["keep"]:
            c = lk["category"]
            total[c] += 1
            ours[c] += k not in red
            naive_q[c] += any(k in s or s in k for s in flagged_q if len(s) >= 6)
            naive_all[c] += any(k in s or s in k for s in flagged_all if len(s) >= 6)
    for c in sorted(total):
        t3.add_row(
            c,
            str(total[c]),
            f"{ours[c]} ({100 * ours[c] / total[c]:.0f}%)",
            f"{naive_q[c]} ({100 * naive_q[c] / total[c]:.0f}%)",
            f"{naive_all[c]} ({100 * naive_all[c] / total[c]:.0f}%)",
        )
    n = sum(total.values())
    t3.add_row(
        "all",
        str(n),
        f"{sum(ours.values())} ({100 * sum(ours.values()) / n:.1f}%)",
        f"{sum(naive_q.values())} ({100 * sum(naive_q.values()) / n:.1f}%)",
        f"{sum(naive_all.values())} ({100 * sum(naive_all.values()) / n:.1f}%)",
        style="bold",
    )
    console.print(t3)
    console.print(meter.report())


if __name__ == "__main__":
    main()
