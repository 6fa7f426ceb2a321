"""What a cold hook's prompt answer costs in quality: the first prompt after each real compaction of the realcompact
dev set (../shared/data/realcompact), recovered as the warm daemon answers it (``Lantern.recover``: every signal, the
query embedded, the injection decision on cosine and coverage) and as a cold hook answers it with no model
(``Config.without_models``: the signals that need no query vector, the decision on coverage alone;
docs/daemon.md "Cold start").

    .venv/bin/python benchmarks/bench_cold_prompt.py [--events 40] [--budget 6000]

Per event (a compaction whose first prompt after it has a word, and which has look-ahead facts): the store holds the
session's turns before the compaction (archived with their vectors, one call per compaction as ``lantern eval
realcompact`` does), the live context is the last 4 turns (excluded), the query is the first user turn of ``after``
(the prompt the hook sees). Both answers through ``explain`` (no reinforcement between them). Reported: the
decision (nothing / short block / full block) of each and how often they agree; the look-ahead facts (the tokens
the agent went on to use, which the summary lost) in each block, macro and pooled; characters injected; the share of
the warm block's entries the cold block holds; the time of each recovery in this process (models loaded).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, print_machine  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "realcompact"


def first_prompt(after: list[dict]) -> str | None:
    for t in after:
        if t.get("role") == "user" and not t.get("tool") and any(c.isalnum() for c in t.get("text") or ""):
            return t["text"]
    return None


def decision(rec) -> str:
    if not rec.text:
        return "nothing"
    return "short" if rec.reason == "uncertain" else "full"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=40, help="events with facts and a first prompt (default 40)")
    ap.add_argument("--budget", type=int, default=None, help="characters (default: Config.budget, the hooks')")
    args = ap.parse_args()
    console = Console(width=120)
    print_machine(console)
    sys.path.insert(0, str(REPO / "src"))
    from dataclasses import replace

    from lantern.api import Lantern
    from lantern.config import DEFAULT
    from lantern.eval.realcompact import LIVE, messages

    if not (DATA / "sessions").is_dir():
        raise SystemExit(f"{DATA}: not found (the realcompact dev set)")
    warm_cfg = replace(DEFAULT, reinforce=False)
    cold_cfg = replace(DEFAULT.without_models(), reinforce=False)
    budget = args.budget or DEFAULT.budget
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-cold-prompt-") as tmp:
        for path in sorted((DATA / "sessions").glob("*.json")):
            if len(rows) >= args.events:
                break
            doc = json.loads(path.read_text(encoding="utf-8"))
            db = Path(tmp) / f"{path.stem}.db"
            archived: list = []
            with Lantern(db, config=warm_cfg) as warm, Lantern(db, config=cold_cfg) as cold:
                session = doc["id"]
                for ev in doc["events"]:
                    if len(rows) >= args.events:
                        break
                    before = ev["before"]
                    if before[: len(archived)] != archived:
                        session, archived = f"{doc['id']}#{ev['k']}", []
                    if before[len(archived) :]:
                        warm.archive(messages(before[len(archived) :]), session=session)
                    archived = list(before)
                    prompt = first_prompt(ev.get("after") or [])
                    facts = [f["token"] for f in ev.get("facts") or []]
                    if prompt is None or not facts:
                        continue
                    live = messages(before[-LIVE:])
                    got = {}
                    for name, handle in (("warm", warm), ("cold", cold)):
                        t0 = time.perf_counter()
                        rec = handle.explain(prompt, session, budget, live)
                        got[name] = (rec, (time.perf_counter() - t0) * 1000)
                    (w, w_ms), (c, c_ms) = got["warm"], got["cold"]
                    w_ids, c_ids = {e.id for e in w.entries}, {e.id for e in c.entries}
                    rows.append(
                        {
                            "decision": (decision(w), decision(c)),
                            "facts": len(facts),
                            "hit": (sum(f in w.text for f in facts), sum(f in c.text for f in facts)),
                            "chars": (w.chars, c.chars),
                            "overlap": len(w_ids & c_ids) / len(w_ids) if w_ids else float("nan"),
                            "ms": (w_ms, c_ms),
                        }
                    )
    n = len(rows)
    t = Table(
        title=f"First prompt after a real compaction, warm (models) vs cold (no model): {n} events, budget {budget}"
    )
    t.add_column("", justify="left")
    t.add_column("warm", justify="right")
    t.add_column("cold", justify="right")
    for d in ("nothing", "short", "full"):
        t.add_row(f"decision: {d}", *(str(sum(r["decision"][i] == d for r in rows)) for i in (0, 1)))
    t.add_row("decisions agree", f"{sum(r['decision'][0] == r['decision'][1] for r in rows)} of {n}", "")
    macro = [np.mean([r["hit"][i] / r["facts"] for r in rows]) for i in (0, 1)]
    pooled = [sum(r["hit"][i] for r in rows) / sum(r["facts"] for r in rows) for i in (0, 1)]
    t.add_row("look-ahead facts in the block, macro", *(f"{m:.1%}" for m in macro))
    t.add_row("look-ahead facts in the block, pooled", *(f"{p:.1%}" for p in pooled))
    t.add_row("characters injected, mean", *(f"{np.mean([r['chars'][i] for r in rows]):,.0f}" for i in (0, 1)))
    ov = [r["overlap"] for r in rows if r["overlap"] == r["overlap"]]
    t.add_row("warm block's entries the cold block holds, mean", "", f"{np.mean(ov):.1%} ({len(ov)} events)")
    t.add_row(
        "recovery ms p50 (in-process, models loaded)", *(f"{np.median([r['ms'][i] for r in rows]):.0f}" for i in (0, 1))
    )
    console.print(t)


if __name__ == "__main__":
    main()
