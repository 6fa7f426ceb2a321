"""Calibration of the injection decision (recover/relevance.py ``decide``) on labelled questions, tune split only.

    .venv/bin/python benchmarks/injection_calibration.py --sets OUT.jsonl            # measure the written sets
    lantern eval locomo --data .../locomo10.json --split tune --system lantern --min-score 0 --out RUN ...
    .venv/bin/python benchmarks/injection_calibration.py --rows OUT.jsonl --runs RUN [RUN...] [--split tune]

Two sources of labelled questions:

- the written sets (tests/injection_sets.py): English and Chinese conversations, paraphrases, back-references in
  natural words, verbatim quotes, questions in a third language; asked of stores of one conversation (small), of
  two, of the shipped aider excerpt with two (97 real turns more), and, when ../shared/data holds aider's chat log,
  of the whole log with two (thousands of real turns: large). Unanswerable: the other conversations' questions and
  each conversation's never-answered ones. Each question is recovered once at the full budget and once at the
  short budget with the decision off (``min_score=0``), so every decision follows from the rows exactly: the
  evidence (``relevance``), whether the answer is in each block, and its characters;
- eval runs made with ``--min-score 0`` (LoCoMo and MemDaily, tune split): per answerable question the facts the
  full block recovered and an estimate of what the short block would (``recovered_short``: eval/outcome.py), per
  question of another history (``no_answer.jsonl``) the characters injected.

For every combination of the cosine floors, the coverage floor, ``min_score`` and ``clear_score`` it computes, per
source, the answers withheld (answerable questions whose answer the full block held and the decision's block does
not) and the characters injected on questions with no answer (mean and p90). Decision rule: on the tune split,
answers withheld at most 2% on the written sets (English and Chinese each) and no fact lost on each eval run
(``MAX_WITHHELD``, ``MAX_LOST``); among those, the least mean characters on unanswerable questions (mean over the
sources); ties: the lower thresholds.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import injection_sets as sets  # noqa: E402

AIDER_EXCERPT = ROOT / "src/lantern/data/demo/aider-chat-excerpt.md"
AIDER_LOG = ROOT.parent / "shared/data/aider_chat_history/chat-history.md"
STORES = {  # name -> (conversations, aider log to add: None, "excerpt" or "log")
    "one-deploy": (["deploy"], None),
    "one-life": (["life"], None),
    "one-etl": (["etl"], None),
    "one-family": (["family"], None),
    "two": (["deploy", "family"], None),
    "excerpt": (["life", "etl"], "excerpt"),
    "large": (["deploy", "etl"], "log"),
}
LANGUAGE = {"deploy": "en", "life": "en", "etl": "zh", "family": "zh"}


def build(path: Path, names: list[str], aider: str | None) -> None:
    from lantern import Lantern

    with Lantern(path) as memory:
        if aider == "excerpt":
            memory.ingest(AIDER_EXCERPT, format="aider")
        elif aider == "log":
            memory.ingest(AIDER_LOG, format="aider")
        for name in names:
            memory.archive(sets.conversation(name), session=name)


def measure_sets(out: Path, cache: Path, short_budget: int, budget: int = 6000) -> None:
    """Recover every labelled question of every store at both budgets with the decision off; one JSON row each."""
    from lantern import Lantern

    rows = []
    for store, (names, aider) in STORES.items():
        if aider == "log" and not AIDER_LOG.exists():
            print(f"{store}: skipped, {AIDER_LOG} absent", file=sys.stderr)
            continue
        path = cache / f"{store}.db"
        if not path.exists():
            build(path, names, aider)
        asked = []
        for name, i, fact in sets.answerable(names):
            for kind in ("question", "back", "quote"):
                asked.append((name, i, kind, getattr(fact, kind), fact.answer))
        for name, i, question in sets.THIRD:
            if name in names:
                asked.append((name, i, "third", question, sets.CONVERSATIONS[name][i].answer))
        for name, i, question in sets.unanswerable(names):
            asked.append((name, i, "unanswerable", question, None))
        with Lantern(path) as memory:
            for name, i, kind, question, answer in asked:
                full = memory.explain(question, budget=budget, min_score=0)
                short = memory.explain(question, budget=short_budget, min_score=0)
                rows.append(
                    {
                        "store": store,
                        "entries": full.relevance.entries,
                        "conversation": name,
                        "language": LANGUAGE[name],
                        "kind": kind,
                        "split": sets.split(i),
                        "question": question,
                        "answerable": answer is not None,
                        "relevance": full.relevance.to_json(),
                        "full": answer is not None and answer in full.text,
                        "full_chars": full.chars,
                        "short": answer is not None and answer in short.text,
                        "short_chars": short.chars,
                    }
                )
        print(f"{store}: {len(asked)} questions", file=sys.stderr)
    with out.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def load_run(out: Path, split: str) -> dict:
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    if results["dataset"]["split"] != split:
        raise SystemExit(f"{out}: split {results['dataset']['split']!r}, not {split!r}")
    facts = [json.loads(line) for line in (out / "facts.jsonl").open(encoding="utf-8")]
    main = [r for r in facts if r["system"] == "lantern" and r.get("relevance") and r["category"] != "adversarial"]
    no_answer = [json.loads(line) for line in (out / "no_answer.jsonl").open(encoding="utf-8")]
    return {"name": results["dataset"]["name"], "answerable": main, "no_answer": no_answer}


def scores(rels: list[dict], minilm: float, use: float, coverage: float) -> np.ndarray:
    cos = np.array([r["cosine"] / (use if r["model"] == "use" else minilm) for r in rels])
    cov = np.array([r.get("coverage", 0.0) / coverage for r in rels])
    return np.maximum(cos, cov)


def clear(rels: list[dict], floors: tuple[float, float, float], threshold: float) -> np.ndarray:
    """Whether each evidence gets the full block: a score at ``threshold`` or above and no name the query holds
    left unheld by every best candidate (relevance.py's names rule; rows recorded before it carry no
    ``unheld_names``)."""
    return (scores(rels, *floors) >= threshold) & ~np.array([bool(r.get("unheld_names")) for r in rels], bool)


def evaluate(data: dict, floors: tuple[float, float, float], low: float, clear_score: float) -> dict:
    """Per source: answers withheld (share), no-answer characters (mean, p90) under the decision."""
    out = {}
    for source, rows in data["sets"].items():
        ans, una = rows["answerable"], rows["unanswerable"]
        s = scores([r["relevance"] for r in ans], *floors)
        full = clear([r["relevance"] for r in ans], floors, clear_score)
        given = np.where(full, [r["full"] for r in ans], np.where(s >= low, [r["short"] for r in ans], False))
        had = np.array([r["full"] for r in ans])
        su = scores([r["relevance"] for r in una], *floors)
        fu = clear([r["relevance"] for r in una], floors, clear_score)
        chars = np.where(fu, [r["full_chars"] for r in una], np.where(su >= low, [r["short_chars"] for r in una], 0))
        out[source] = {
            "withheld": float((had & ~given).sum() / max(had.sum(), 1)),
            "answered": float(given.sum() / max(len(ans), 1)),
            "chars_mean": float(chars.mean()) if len(chars) else 0.0,
            "chars_p90": float(np.percentile(chars, 90)) if len(chars) else 0.0,
            "nothing": float((chars == 0).mean()) if len(chars) else 0.0,
        }
    for run in data["runs"]:
        ans, una = run["answerable"], run["no_answer"]
        s = scores([r["relevance"] for r in ans], *floors)
        full = clear([r["relevance"] for r in ans], floors, clear_score)
        rec = np.array([r["recovered"] for r in ans], float)
        short = np.array([r.get("recovered_short", r["recovered"]) for r in ans], float)
        kept = np.where(full, rec, np.where(s >= low, short, 0.0))
        rels = [r["relevance"] or {"cosine": 0, "model": ""} for r in una]
        su, fu = scores(rels, *floors), clear(rels, floors, clear_score)
        full_chars = np.array([r["chars"] for r in una], float)
        chars = np.where(fu, full_chars, np.where(su >= low, np.minimum(full_chars, SHORT), 0))
        out[run["name"]] = {
            "lost": float((rec.sum() - kept.sum()) / max(rec.sum(), 1)),
            "recovered": int(kept.sum()),
            "of": int(rec.sum()),
            "chars_mean": float(chars.mean()),
            "chars_p90": float(np.percentile(chars, 90)),
            "nothing": float((chars == 0).mean()),
        }
    return out


SHORT = 800
MAX_WITHHELD = 0.02  # answers the full block held that the decision's block does not, on each written set
# facts lost on each eval run (an estimate: eval/outcome.py short_prefix): the report split must not fall below its
# figure without the decision. A first choice allowed 0.002 (1 of LoCoMo's 599) and lost 3 facts on the report split
# (docs/results/injection.md)
MAX_LOST = 0.0


def load_sets(path: Path, split: str) -> dict:
    rows = [json.loads(line) for line in path.open(encoding="utf-8")]
    rows = [r for r in rows if r["split"] == split or not r["answerable"] and r["kind"] == "unanswerable"]
    out: dict[str, dict] = {}
    for lang in ("en", "zh"):
        mine = [r for r in rows if r["language"] == lang and r["kind"] != "third"]
        out[f"sets-{lang}"] = {
            "answerable": [r for r in mine if r["answerable"]],
            "unanswerable": [r for r in mine if not r["answerable"]],
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", type=Path, help="measure the written sets into this JSONL file")
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "lantern-injection")
    ap.add_argument("--rows", type=Path, help="the written sets' rows (--sets output) to calibrate on")
    ap.add_argument("--runs", type=Path, nargs="*", default=[], help="eval runs made with --min-score 0")
    ap.add_argument("--split", default="tune")
    ap.add_argument("--json", type=Path, help="write every combination's figures here")
    a = ap.parse_args()
    if a.sets:
        a.cache.mkdir(parents=True, exist_ok=True)
        measure_sets(a.sets, a.cache, SHORT)
        return
    data = {"sets": load_sets(a.rows, a.split) if a.rows else {}, "runs": [load_run(r, a.split) for r in a.runs]}
    grid = itertools.product(
        (0.38, 0.40, 0.42, 0.44, 0.46, 0.48, 0.50),
        (0.28, 0.30, 0.32, 0.34),
        (0.7, 0.8, 0.9, 1.0),
        (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7),
        (0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2, 1.3),
    )
    table = []
    for minilm, use, cov, low, high in grid:
        if low > high:
            continue
        figures = evaluate(data, (minilm, use, cov), low, high)
        ok = all(f["withheld"] <= MAX_WITHHELD for k, f in figures.items() if k.startswith("sets-")) and all(
            f["lost"] <= MAX_LOST for k, f in figures.items() if not k.startswith("sets-")
        )
        p90 = max(f["chars_p90"] for f in figures.values())
        mean = sum(f["chars_mean"] for f in figures.values()) / len(figures)
        table.append(
            {
                "floors": [minilm, use, cov],
                "min_score": low,
                "clear_score": high,
                "ok": ok,
                "p90": p90,
                "mean": mean,
                "figures": figures,
            }
        )
    passing = sorted((t for t in table if t["ok"]), key=lambda t: (t["mean"], t["min_score"], t["clear_score"]))
    if a.json:
        a.json.write_text(json.dumps(table, indent=1))
    print(f"{len(passing)} of {len(table)} combinations pass")
    for t in passing[:10]:
        print(json.dumps({k: v for k, v in t.items() if k != "figures"}), json.dumps(t["figures"]))


if __name__ == "__main__":
    main()
