"""Questions with no answer (issue #19, item 3): what ``recover`` injects for them, without and with the injection
decision (recover/relevance.py), beside answerable ones.

    .venv/bin/python benchmarks/bench_unanswerable.py [--min-score 0.4] [--json PATH]

Stores: the shipped aider excerpt (97 real coding turns) plus some of tests/unanswerable.py's conversations (a
developer's infrastructure notes, a person's home life, a researcher's lab notes; the decision was calibrated by
benchmarks/injection_calibration.py on other sets). Each store is asked the questions of the conversations it holds
(answerable: found when the answer's string is in the block) and those of the others (unanswerable: their answer
was never said there). Per store and floor: answerable found, unanswerable given nothing, and the mean characters
injected: a second look, on conversations nothing was tuned on.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from _common import EXCERPT, CpuMeter, print_machine  # noqa: E402
from lantern import Config, Lantern  # noqa: E402
from unanswerable import answerable, conversation, unanswerable  # noqa: E402

STORES = (("infra", "home"), ("lab",), ("infra",))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--min-score", type=float, default=Config().min_score, help="the floor to compare with none")
    ap.add_argument("--json", type=Path, help="also write every row as JSON here")
    args = ap.parse_args()
    console = Console(width=150)
    print_machine(console)
    meter = CpuMeter()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, archived in enumerate(STORES):
            with Lantern(Path(tmp) / f"{n}.db") as memory:
                memory.ingest(EXCERPT, format="aider")
                for name in archived:
                    memory.archive(conversation(name), session=name)
                for kind, facts in (
                    ("answerable", answerable(list(archived))),
                    ("unanswerable", unanswerable(list(archived))),
                ):
                    for fact in facts:
                        for floor in (0.0, args.min_score):
                            rec = memory.explain(fact.question, min_score=floor)
                            rows.append(
                                {
                                    "store": "aider + " + " + ".join(archived),
                                    "kind": kind,
                                    "question": fact.question,
                                    "min_score": floor,
                                    "found": fact.answer in rec.text,
                                    "chars": rec.chars,
                                    "score": round(rec.relevance.score, 4),
                                }
                            )
    table = Table(title=f"without the floor / with min_score {args.min_score:g}")
    for col in ("store", "answerable found", "unanswerable given nothing", "unanswerable chars (mean)"):
        table.add_column(col)
    for store in dict.fromkeys(r["store"] for r in rows):

        def pick(kind: str, floor: float, store: str = store) -> list[dict]:
            return [r for r in rows if r["store"] == store and r["kind"] == kind and r["min_score"] == floor]

        cells = []
        for metric in ("found", "empty", "chars"):
            parts = []
            for floor in (0.0, args.min_score):
                rs = pick("answerable" if metric == "found" else "unanswerable", floor)
                if metric == "found":
                    parts.append(f"{sum(r['found'] for r in rs)}/{len(rs)}")
                elif metric == "empty":
                    parts.append(f"{sum(r['chars'] == 0 for r in rs)}/{len(rs)}")
                else:
                    parts.append(f"{sum(r['chars'] for r in rs) / len(rs):,.0f}")
            cells.append(" / ".join(parts))
        table.add_row(store, *cells)
    console.print(table)
    console.print(meter.report())
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
