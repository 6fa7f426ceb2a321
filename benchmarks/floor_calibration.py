"""Calibration of the relevance floor (recover/relevance.py) from eval runs made without it.

    lantern eval locomo --data .../locomo10.json --split tune --system lantern --min-score 0 --out OUT1 ...
    lantern eval memdaily --data .../memdaily --split tune --system lantern --min-score 0 --out OUT2 ...
    .venv/bin/python benchmarks/floor_calibration.py OUT1 OUT2 [--json PATH]

Each run's ``facts.jsonl`` holds, per question, Lantern's block (``chars``, ``recovered``) and the best candidates'
evidence (``relevance``: ``cosine`` and the ``model`` whose scale it is on, ``bm25`` over the query's ideal); its
``no_answer.jsonl`` the same for questions of another history asked of each store (their answer was never said
there). A floor only removes whole blocks, so any floor's figures follow from these rows exactly: a question whose
evidence does not clear it gets nothing, the others the block measured.

Every combination of a cosine floor per model (``--cosines``) and a BM25 floor (``--bm25``) is scored. Decision
rule (docs/results/recall-tuning.md, round 7, says when it was written): on every run, the floor may cost at most
``--noise`` of the answerable facts recovered (default 0.5%: LoCoMo's 728 tune facts allow 3, MemDaily's 454 allow
2; a loss that small, all one way, is McNemar p >= 0.125, not told apart from noise); among the floors that pass,
the one that leaves the most questions of another history with nothing (mean share over the runs); ties: the lower
floors. Only the tune split may be given to it (the runs' results.json name their split; a report-split run is
refused), and only runs made without a floor.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
from pathlib import Path

DEFAULT_COSINES = tuple(round(0.24 + 0.02 * i, 2) for i in range(12))  # 0.24 .. 0.46
DEFAULT_BM25 = (0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.5, math.inf)


def rows(path: Path, name: str) -> list[dict]:
    f = path / name
    return [json.loads(line) for line in f.open(encoding="utf-8")] if f.exists() else []


def load(out: Path) -> dict:
    """One run: its dataset, the answerable / adversarial rows of the lantern system and the no-answer rows."""
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    split = results["dataset"]["split"]
    if split != "tune":
        raise SystemExit(f"{out}: split {split!r}; the floor is calibrated on the tune split only")
    main = [r for r in rows(out, "facts.jsonl") if r["system"] == "lantern" and r.get("relevance")]
    if not main:
        raise SystemExit(f"{out}: no lantern rows with relevance; run the eval with --system lantern --min-score 0")
    if results.get("unanswerable", {}).get("min_score", 0) != 0:
        raise SystemExit(f"{out}: run with a floor already; calibrate on a run made with --min-score 0")
    return {
        "out": str(out),
        "dataset": results["dataset"]["name"],
        "answerable": [r for r in main if r["category"] != "adversarial"],
        "adversarial": [r for r in main if r["category"] == "adversarial"],
        "no_answer": rows(out, "no_answer.jsonl"),
    }


def clears(rel: dict, cosines: dict[str, float], bm25: float) -> bool:
    floor = cosines.get(rel.get("model") or "", cosines.get("minilm", 0.0))
    return rel["cosine"] >= floor or rel["bm25"] >= bm25


def score(run: dict, cosines: dict[str, float], bm25: float) -> dict:
    ans = run["answerable"]
    lost = sum(r["recovered"] and not clears(r["relevance"], cosines, bm25) for r in ans)

    def nothing(rs: list[dict]) -> tuple[float, float]:
        if not rs:
            return 0.0, 0.0
        kept = [r["chars"] if clears(r["relevance"], cosines, bm25) else 0 for r in rs]
        return sum(c == 0 for c in kept) / len(kept), sum(kept) / len(kept)

    na_empty, na_chars = nothing(run["no_answer"])
    adv_empty, adv_chars = nothing(run["adversarial"])
    return {
        "recovered": sum(r["recovered"] for r in ans) - lost,
        "lost": lost,
        "n": len(ans),
        "no_answer_empty": na_empty,
        "no_answer_chars": na_chars,
        "adversarial_empty": adv_empty,
        "adversarial_chars": adv_chars,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="eval --out folders (tune split, --min-score 0)")
    ap.add_argument("--cosines", default=",".join(map(str, DEFAULT_COSINES)), help="cosine floors to try")
    ap.add_argument("--bm25", default="0.8,0.9,1.0,1.1,1.2,1.3,1.5,inf", help="BM25 floors to try")
    ap.add_argument("--noise", type=float, default=0.005, help="facts a floor may cost per run (share)")
    ap.add_argument("--json", type=Path, help="write every combination's figures here")
    args = ap.parse_args()
    runs = [load(p) for p in args.runs]
    models = sorted({r["relevance"]["model"] for run in runs for r in run["answerable"] if r["relevance"]["model"]})
    cos_grid = [float(x) for x in args.cosines.split(",")]
    bm_grid = [float(x) for x in args.bm25.split(",")]
    table = []
    for combo in itertools.product(cos_grid, repeat=len(models)):
        cosines = dict(zip(models, combo))
        for b in bm_grid:
            per = [score(run, cosines, b) for run in runs]
            ok = all(p["lost"] <= math.floor(args.noise * p["n"]) for p in per)
            gain = sum(p["no_answer_empty"] for p in per) / len(per)
            table.append({"cosines": cosines, "bm25": b, "ok": ok, "gain": gain, "runs": per})
    passing = [t for t in table if t["ok"]]
    best = max(passing, key=lambda t: (t["gain"], -sum(t["cosines"].values()), -t["bm25"])) if passing else None
    print("models:", ", ".join(models), "| runs:", ", ".join(r["dataset"] for r in runs))
    header = "cosine floors".ljust(28) + "bm25   " + " | ".join(r["dataset"][:22].ljust(44) for r in runs)
    print(header)
    shown = sorted(passing, key=lambda t: -t["gain"])[:15]
    for t in shown + ([best] if best and best not in shown else []):
        cells = [
            f"lost {p['lost']:2d}/{p['n']} no-answer empty {100 * p['no_answer_empty']:4.1f}% "
            f"adv {100 * p['adversarial_empty']:4.1f}%"
            for p in t["runs"]
        ]
        label = " ".join(f"{m} {c:.2f}" for m, c in t["cosines"].items())
        print(f"{label:28}{t['bm25']:<7g}" + " | ".join(cells))
    if best is None:
        print("no combination passes the decision rule")
    else:
        print("chosen:", json.dumps({"cosines": best["cosines"], "bm25": best["bm25"]}))
        for run, p in zip(runs, best["runs"]):
            print(f"  {run['dataset']}: {json.dumps(p)}")
    if args.json:
        args.json.write_text(json.dumps({"chosen": best, "table": table}, default=str, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
