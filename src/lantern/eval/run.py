"""``lantern eval``: archive a dataset (cached per dataset checksum and embedder id), compact every history, and
measure how many of the facts the compaction lost each system brings back within the budget.

    histories --archive (cached)--> store
    per history: compaction (keep last k turns) -> lost facts (evidence outside the window, answer not in context)
    per system, per lost fact: ranking + packed block -> metrics row
    rows -> per system / category / history summaries -> paired statistics vs Lantern -> results.json, report.md
    with --qa: per picked lost fact, an LLM answers under each condition (eval/qa.py) -> results.json "qa", qa.jsonl
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from lantern.config import DEFAULT, Config
from lantern.eval import metrics, stats
from lantern.eval.cases import Case, build, config_json, history_paths, history_turns
from lantern.eval.compaction import METHODS
from lantern.eval.datasets import SEPARATE_CATEGORIES, Dataset, load
from lantern.eval.jobs import NO_ANSWER, Job, Phase, default_workers, run_jobs
from lantern.eval.outcome import System
from lantern.eval.systems import (
    FAILURE_CAUSES,
    dual_system,
    for_embedder,
    memo_embedder,
    select,
)

DEFAULT_KEEP = 20  # turns kept verbatim by the compaction (ours: about one LoCoMo session)
REFERENCE = "lantern"
COMPARED = ("recovered", "recall@10")
CURVE_SYSTEMS = ("lantern", "bm25", "dense", "grep", "recency")  # the systems of the robustness curves
COMPACTION_SYSTEMS = ("lantern", "bm25")  # the systems of the compaction-method comparison
DEFAULT_BUDGETS = (1000, 2000, 3000, 6000, 9000, 12000)  # characters
DEFAULT_RATIOS = (0.25, 0.5, 0.75, 0.9)  # share of each history's turns compacted
NO_ANSWER_QUESTIONS = 200  # questions of the next history asked of each history's store (evenly spaced; ours)
# min_score values of the eval report's sweep
SWEEP_FLOORS = (0.0, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2, 1.3, 1.5, 2.0)
# the report's floor sweep reads off the stored scores (those at or above the run's own floor)


def foreign_questions(histories: Sequence, i: int) -> list[tuple[str, str]]:
    """(fact id, question) of the headline facts of the history after ``histories[i]`` (cyclic), at most
    ``NO_ANSWER_QUESTIONS`` evenly spaced: questions whose answer was never said in history i (LoCoMo: another
    pair of speakers' conversation). None for a single history or a look-ahead dataset."""
    if len(histories) < 2 or histories[i].query != "question":
        return []
    other = histories[(i + 1) % len(histories)]
    asked = [(f.id, f.question) for f in other.facts if f.category not in SEPARATE_CATEGORIES]
    step = max(1, -(-len(asked) // NO_ANSWER_QUESTIONS))
    return asked[::step]


def nothing_expected(rows: Sequence[dict]) -> dict[str, Any]:
    """What was injected for questions that have no answer in the store: how many (``n``), the mean and median
    characters, and the share with nothing injected (``empty``)."""
    chars = sorted(r["chars"] for r in rows)
    return {
        "n": len(rows),
        "chars": sum(chars) / len(chars) if chars else 0.0,
        "chars_p50": metrics.percentile(chars, 50) if chars else 0.0,
        "empty": sum(c == 0 for c in chars) / len(chars) if chars else 0.0,
    }


def floor_sweep(
    answerable: Sequence[dict],
    unanswerable: dict[str, Sequence[dict]],
    run_floor: float,
    clear_score: float = 1.0,
    short_budget: int = 800,
) -> list[dict[str, Any]]:
    """What the injection decision (recover/relevance.py ``decide``) at each ``min_score`` in ``SWEEP_FLOORS`` at or
    above ``run_floor`` (the run's) would give, ``clear_score`` and ``short_budget`` as the run's config, read off
    the rows' stored ``relevance["score"]``: below the floor nothing, from it up to ``clear_score`` the short block,
    at or above it the block the run measured. A run with the decision on measured its short blocks; a run with
    it off (``run_floor`` 0) gave full blocks, so the short block's figures are the estimate stored with each row
    (``recovered_short``, eval/outcome.py ``short_prefix``; characters capped at ``short_budget``); the "nothing"
    figures are exact either way. Rows whose ``relevance`` is None (a compaction's recovery, never held back) count
    as they are. Per floor: ``min_score``; ``recovered`` (answerable facts recovered, a count), ``n``; ``empty``
    (share of answerable questions given nothing); per ``unanswerable`` kind (``adversarial``, ``no-answer``):
    ``nothing_expected``."""

    def tier(r: dict, floor: float) -> str:
        if r.get("relevance") is None or floor <= 0:
            return "full"
        score = r["relevance"]["score"]
        if score < floor:
            return "none"
        return "short" if score < clear_score and run_floor <= 0 else "full"

    def recovered(r: dict, floor: float) -> int:
        t = tier(r, floor)
        return 0 if t == "none" else int(r.get("recovered_short", r["recovered"]) if t == "short" else r["recovered"])

    def chars(r: dict, floor: float) -> int:
        t = tier(r, floor)
        return 0 if t == "none" else min(r["chars"], short_budget) if t == "short" else r["chars"]

    out = []
    for floor in sorted({run_floor, *(f for f in SWEEP_FLOORS if f >= run_floor)}):
        point: dict[str, Any] = {
            "min_score": floor,
            "recovered": sum(recovered(r, floor) for r in answerable),
            "n": len(answerable),
            "empty": sum(tier(r, floor) == "none" for r in answerable) / len(answerable) if answerable else 0.0,
        }
        for kind, rows in unanswerable.items():
            point[kind] = nothing_expected([{"chars": chars(r, floor)} for r in rows])
        out.append(point)
    return out


def default_cache_dir() -> Path:
    env = os.environ.get("LANTERN_EVAL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "lantern" / "eval"


def _point(rows: dict[str, list[dict]]) -> dict[str, dict]:
    """A curve point: per system, facts recovered / recall@10 / n over the headline facts."""
    out = {}
    for name, rs in rows.items():
        s = metrics.summarize([r for r in rs if r["category"] not in SEPARATE_CATEGORIES])
        out[name] = {"recovered": s["recovered"], "recall@10": s["recall@10"], "n": s["n"]}
    return out


def _curve(points: Sequence, per_point: dict) -> dict[str, Any]:
    names = list(next(iter(per_point.values()))) if per_point else []
    return {
        "points": list(points),
        "systems": {
            n: {k: [per_point[x][n][k] for x in points] for k in ("recovered", "recall@10", "n")} for n in names
        },
    }


def evaluate(
    dataset: Dataset,
    *,
    out_dir: Path,
    systems: Sequence[System] | None = None,
    budget: int = DEFAULT.budget,
    keep: int = DEFAULT_KEEP,
    compaction: str = "truncation",
    split: str = "report",
    limit: int | None = None,
    embedder: str | None = None,
    cache_dir: Path | None = None,
    console=None,
    plots: bool = True,
    budgets: Sequence[int] | None = DEFAULT_BUDGETS,
    ratios: Sequence[float] | None = DEFAULT_RATIOS,
    summarizer=None,
    second_embedder: str | None = None,
    workers: int | None = None,
    qa=None,
) -> dict[str, Any]:
    """Run the evaluation and write ``out_dir/results.json``, ``facts.jsonl``, ``report.md`` (and PNG plots).
    Besides the main table: robustness curves of the ``CURVE_SYSTEMS`` over ``budgets`` (characters) and over
    ``ratios`` (share of each history's turns compacted; [] skips a curve), and a comparison of the compaction
    methods for the ``COMPACTION_SYSTEMS`` (``llm_summary`` only with a ``summarizer``, ``llm.Summarizer``; else
    listed as skipped). ``second_embedder``: also build the stores with that embedder and add the system
    ``lantern+<its id>`` (its semantic ranking as one more RRF signal; ``systems.dual_system``). ``workers``:
    processes the per-history jobs run in (eval/jobs.py; default: the usable CPUs, at most 8; 1 = in this process; the
    rows are the same either way; a ``summarizer`` runs in this process). ``qa``: a ``qa.QAOptions``: also measure
    answer accuracy (eval/qa.py) over the main table's lost facts, in this process after the jobs, and write its
    rows to ``out_dir/qa.jsonl``. Returns the results dict."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from lantern.text.terminal import console as terminal_console

    console = console or terminal_console(stderr=True)
    chosen = dataset.select(split, limit)  # DatasetError when the split holds no history: no report
    systems = list(systems or select(None))
    cache_dir = cache_dir or default_cache_dir()
    _check(dataset, chosen, systems, budgets, ratios, qa)
    out_dir.mkdir(parents=True, exist_ok=True)  # after every check: a refused run leaves no folder behind
    qa_rows: list[dict] = []
    qa_section: Any = None
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as bar:
        memo, systems, folder, second_folder, archive_ms = _archive(
            bar, chosen, systems, cache_dir, embedder, second_embedder
        )
        phases = _phases(chosen, systems, compaction, keep, budget, budgets, ratios, summarizer)
        jobs = _jobs(chosen, phases, folder, embedder, second_folder, second_embedder, summarizer)
        tasks: dict[str, Any] = {}

        def advance(label: str, total: int, done: int) -> None:
            if label not in tasks:
                tasks[label] = bar.add_task(label, total=0)
            bar.update(tasks[label], total=bar.tasks[tasks[label]].total + total, advance=done)

        workers = _workers(workers, summarizer, embedder, second_embedder)
        results_of = run_jobs(jobs, workers, advance)
        if qa is not None:
            from lantern.eval import qa as qa_mod

            lantern_system = next(s for s in systems if s.name == REFERENCE)
            qa_rows, qa_section = qa_mod.run(
                chosen, folder, memo, lantern_system, compaction, keep, budget, qa, cache_dir, summarizer, advance
            )

    def merged(phase: str, point: Any) -> tuple[dict[str, list[dict]], list[Case], dict[str, dict[str, int]]]:
        return _merged(chosen, results_of, phase, point)

    rows, all_cases, counts = merged("main", None)
    rows = {s.name: rows.get(s.name, []) for s in systems}
    base = systems[0].config or Config()
    results = aggregate(rows, all_cases, systems)
    no_answer = merged(NO_ANSWER, None)[0].get(REFERENCE, [])
    results["unanswerable"] = _unanswerable(rows, no_answer, base)
    results["curves"] = _curves(merged, rows, systems, budget, budgets, ratios)
    results["compactions"] = _compactions(
        merged, rows, all_cases, systems, compaction, summarizer, qa, any(h.summaries for h in chosen.histories)
    )
    if summarizer is not None:
        results["llm"] = summarizer.describe()
    results["dataset"] = _dataset_section(dataset, chosen, split, limit, counts)
    results["config"] = _config_section(systems, base, budget, keep, compaction, memo.id, workers)
    results["archive_latency_ms"] = {
        "turns_timed": len(archive_ms),
        "p50": metrics.percentile(archive_ms, 50),
        "p95": metrics.percentile(archive_ms, 95),
        "note": "per turn, batches of 64 turns; empty when every history came from the cache",
    }
    if qa is not None:
        results["qa"] = qa_section
    _write(out_dir, results, rows, no_answer, qa_rows if qa is not None else None, plots)
    return results


def _check(dataset: Dataset, chosen, systems: Sequence[System], budgets, ratios, qa) -> None:
    """The argument checks of ``evaluate``, before anything is written. ValueError names the bad argument."""
    if any(not 0 < r <= 1 for r in ratios or ()):
        raise ValueError(f"compaction ratios must lie in (0, 1], got {list(ratios or ())}")
    if any(b <= 0 for b in budgets or ()):
        raise ValueError(f"budgets must be positive numbers of characters, got {list(budgets or ())}")
    if qa is not None and any(h.query == "context" for h in chosen.histories):
        raise ValueError(f"--qa needs questions: the {dataset.name} facts are look-ahead tokens, not questions")
    if qa is not None and not any(s.kind == "lantern" and s.name == REFERENCE for s in systems):
        raise ValueError("--qa compares against the lantern system: keep it among --system")


def _archive(bar, chosen, systems: list[System], cache_dir: Path, embedder, second_embedder):
    """Archive every chosen history (cached) under ``bar``'s "archive" task; with ``second_embedder`` a second
    set of stores and the dual system inserted after the first. Returns (memo embedder, systems, store folder,
    second folder or None, archive latencies in ms). RuntimeError when the two sets' entry ids differ."""
    task = bar.add_task("archive", total=sum(len(history_turns(h)) for h in chosen.histories))
    offsets: dict[str, int] = {}

    def tick(hid: str, done: int, total: int) -> None:
        offsets[hid] = done
        bar.update(task, completed=sum(offsets.values()))

    memo = memo_embedder(embedder)
    systems = for_embedder(systems, memo)
    archive_ms: list[float] = []
    folder = build(chosen, cache_dir, memo, tick, archive_ms)
    bar.update(task, completed=bar.tasks[task].total)
    second_folder = None
    if second_embedder:
        offsets.clear()
        bar.update(task, completed=0, description="archive (2nd embedder)")
        memo2 = memo_embedder(second_embedder)
        second_folder = build(chosen, cache_dir, memo2, tick, [])
        for h in chosen.histories:
            if json.loads(history_paths(folder, h)[1].read_text()) != json.loads(
                history_paths(second_folder, h)[1].read_text()
            ):
                raise RuntimeError(f"{h.id}: the two embedders' stores hold different entry ids; clear the cache")
        dual = dual_system(memo2.id, systems[0].config) if chosen.histories else None
        if dual and dual.name not in {s.name for s in systems}:
            systems.insert(1, dual)
    return memo, systems, folder, second_folder, archive_ms


def _workers(workers: int | None, summarizer, embedder, second_embedder) -> int:
    """The processes the jobs run in: 1 when a summarizer or an Embedder object is given (the LLM summary's request
    counter and an Embedder object stay in this process), else ``workers`` or ``jobs.default_workers()``."""
    if (
        summarizer is not None
        or not (embedder is None or isinstance(embedder, str))
        or second_embedder
        and not isinstance(second_embedder, str)
    ):
        workers = 1
    return workers if workers is not None else default_workers()


def _phases(chosen, systems: Sequence[System], compaction: str, keep, budget, budgets, ratios, summarizer):
    """The phases every history runs: the main table, the budget and ratio curve points, the other compaction
    methods, and the no-answer questions when some history has foreign questions."""
    curve_systems = [s for s in systems if s.name in CURVE_SYSTEMS]
    comp_systems = [s for s in systems if s.name in COMPACTION_SYSTEMS]
    has_summaries = any(h.summaries for h in chosen.histories)
    methods = [
        m
        for m in METHODS
        if m != compaction
        and comp_systems
        and not (m == "session_summary" and not has_summaries)
        and not (m == "llm_summary" and summarizer is None)
    ]
    phases = [Phase("main", None, systems, compaction, keep, None, budget, "", second=True)]
    phases += [
        Phase("budget", b, curve_systems, compaction, keep, None, b, f"budget {b:>6,} ")
        for b in budgets or ()
        if b != budget
    ]
    phases += [Phase("ratio", r, curve_systems, compaction, None, r, budget, f"ratio {r:.2f} ") for r in ratios or ()]
    phases += [Phase("method", m, comp_systems, m, keep, None, budget, f"{m} ") for m in methods]
    reference = [s for s in systems if s.name == REFERENCE]
    if reference and any(foreign_questions(chosen.histories, i) for i in range(len(chosen.histories))):
        phases += [Phase(NO_ANSWER, None, reference, compaction, keep, None, budget, "no answer ")]
    return phases


def _jobs(chosen, phases, folder: Path, embedder, second_folder, second_embedder, summarizer) -> list[Job]:
    """One job per history (its questions are embedded once, in one process), the longest first."""
    return sorted(
        (
            Job(
                h,
                phases,
                str(folder),
                embedder,
                str(second_folder) if second_folder else None,
                second_embedder,
                summarizer,
                foreign_questions(chosen.histories, i),
            )
            for i, h in enumerate(chosen.histories)
        ),
        key=lambda j: -len(j.history.messages) * max(1, len(j.history.facts)),
    )


def _merged(
    chosen, results_of, phase: str, point: Any
) -> tuple[dict[str, list[dict]], list[Case], dict[str, dict[str, int]]]:
    """One phase's rows, cases and counts, histories in dataset order."""
    rows: dict[str, list[dict]] = {}
    cases: list[Case] = []
    counts: dict[str, dict[str, int]] = {}
    order = {h.id: i for i, h in enumerate(chosen.histories)}
    for r in sorted(results_of, key=lambda r: order[r.history]):  # dataset order
        if r.phase == phase and r.point == point:
            for name, rs in r.rows.items():
                rows.setdefault(name, []).extend(rs)
            cases.extend(r.cases)
            counts[r.history] = r.counts
    return rows, cases, counts


def _curves(merged, rows, systems: Sequence[System], budget, budgets, ratios) -> dict[str, Any]:
    """results["curves"]: the curve systems' points over ``budgets`` (the main budget's from the main rows) and
    over ``ratios`` (with the facts lost at each ratio)."""
    curve_systems = [s for s in systems if s.name in CURVE_SYSTEMS]
    by_budget = {}
    for b in budgets or ():
        by_budget[b] = _point(
            {s.name: rows[s.name] for s in curve_systems}
            if b == budget
            else {s.name: merged("budget", b)[0].get(s.name, []) for s in curve_systems}
        )
    by_ratio, ratio_lost = {}, []
    for r in ratios or ():
        sub, _, cn = merged("ratio", r)
        by_ratio[r] = _point({s.name: sub.get(s.name, []) for s in curve_systems})
        ratio_lost.append(sum(c["lost"] for c in cn.values()))
    curves: dict[str, Any] = {}
    if by_budget:
        curves["budget"] = _curve(list(by_budget), by_budget)
    if by_ratio:
        curves["ratio"] = {**_curve(list(by_ratio), by_ratio), "lost": ratio_lost}
    return curves


def _compactions(
    merged, rows, all_cases, systems: Sequence[System], compaction: str, summarizer, qa, has_summaries: bool
) -> dict[str, Any]:
    """results["compactions"]: per compaction method, the facts it lost and the compaction systems' point, or
    why it was skipped."""
    comp_systems = [s for s in systems if s.name in COMPACTION_SYSTEMS]
    compactions: dict[str, Any] = {}
    for method in METHODS:
        if method == "session_summary" and not has_summaries:
            compactions[method] = {"skipped": "the data has no session summaries"}
        elif method == "llm_summary" and summarizer is None:
            compactions[method] = {
                "skipped": "no --llm-base-url / --llm-model given"
                if qa is None
                else "--qa: the endpoint answers the questions (run without --qa for this comparison)"
            }
        elif method == compaction:
            compactions[method] = {
                "lost": len(all_cases),
                "systems": _point({s.name: rows[s.name] for s in comp_systems}),
            }
        elif comp_systems:
            sub, cs, _ = merged("method", method)
            compactions[method] = {
                "lost": len(cs),
                "systems": _point({s.name: sub.get(s.name, []) for s in comp_systems}),
            }
    return compactions


def _unanswerable(rows: dict[str, list[dict]], no_answer: list[dict], base: Config) -> dict[str, Any]:
    """results["unanswerable"]: what each system returns for questions with nothing to find (adversarial,
    no-answer) vs answerable ones, and the relevance-floor sweep when Lantern's rows carry relevance."""
    out: dict[str, Any] = {
        "adversarial": {
            name: nothing_expected([r for r in rs if r["category"] in SEPARATE_CATEGORIES])
            for name, rs in rows.items()
            if any(r["category"] in SEPARATE_CATEGORIES for r in rs)
        },
        NO_ANSWER: {REFERENCE: nothing_expected(no_answer)} if no_answer else {},
        "answerable": {
            name: nothing_expected([r for r in rs if r["category"] not in SEPARATE_CATEGORIES])
            for name, rs in rows.items()
        },
        "min_score": base.min_score,
    }
    lantern_rows = rows.get(REFERENCE, [])
    if any(r.get("relevance") is not None for r in lantern_rows):
        out["sweep"] = floor_sweep(
            [r for r in lantern_rows if r["category"] not in SEPARATE_CATEGORIES],
            {
                kind: rs
                for kind, rs in (
                    ("adversarial", [r for r in lantern_rows if r["category"] in SEPARATE_CATEGORIES]),
                    (NO_ANSWER, no_answer),
                )
                if rs
            },
            base.min_score,
            base.clear_score,
            base.short_budget,
        )
    return out


def _dataset_section(dataset: Dataset, chosen, split: str, limit, counts) -> dict[str, Any]:
    """results["dataset"]: the data's identity, the chosen histories and the per-history fact counts."""
    return {
        "name": dataset.name,
        "path": dataset.path,
        "sha256": dataset.sha256,
        "split": split,
        "limit": limit,
        "histories": [h.id for h in chosen.histories],
        "facts": chosen.n_facts,
        "unresolved_evidence_ids": dataset.unresolved_ids,
        "dropped_items": dataset.dropped,
        "notes": list(dataset.notes),
        "per_history": counts,
        "lost": sum(c["lost"] for c in counts.values()),
        "kept": sum(c["kept"] for c in counts.values()),
        "no_evidence": sum(c["no_evidence"] for c in counts.values()),
    }


def _config_section(
    systems: Sequence[System], base: Config, budget, keep, compaction: str, embedder_id: str, workers
) -> dict[str, Any]:
    """results["config"]: the run's settings, every system's kind and configuration, the processes used."""
    return {
        "budget": budget,
        "keep": keep,
        "compaction": compaction,
        "embedder": embedder_id,
        "systems": {
            s.name: {
                "kind": s.kind,
                "note": s.note,
                "config": config_json(s.config) if s.kind in ("lantern", "dual") else None,
            }
            for s in systems
        },
        "lantern_config": config_json(base),
        "workers": workers,
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
    }


def _write(out_dir: Path, results: dict, rows, no_answer: list[dict], qa_rows, plots: bool) -> None:
    """Write no_answer.jsonl (when any), qa.jsonl (``qa_rows`` not None), results.json, facts.jsonl, the plots
    (their names into ``results["plots"]``) and report.md into ``out_dir``."""
    from lantern.eval.report import render, write_plots

    if no_answer:
        with (out_dir / "no_answer.jsonl").open("w", encoding="utf-8") as f:
            for r in no_answer:
                f.write(json.dumps({"system": REFERENCE, **r}, ensure_ascii=False) + "\n")
    if qa_rows is not None:
        with (out_dir / "qa.jsonl").open("w", encoding="utf-8") as f:
            for r in qa_rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    (out_dir / "results.json").write_text(json.dumps(results, indent=1, ensure_ascii=False))
    with (out_dir / "facts.jsonl").open("w", encoding="utf-8") as f:
        for name, rs in rows.items():
            for r in rs:
                f.write(json.dumps({"system": name, **r}, ensure_ascii=False) + "\n")
    if plots:
        results["plots"] = write_plots(results, out_dir)
        (out_dir / "results.json").write_text(json.dumps(results, indent=1, ensure_ascii=False))
    (out_dir / "report.md").write_text(render(results), encoding="utf-8")


def aggregate(rows: dict[str, list[dict]], cases: Sequence[Case], systems: Sequence[System]) -> dict[str, Any]:
    """Per-fact rows -> per system: headline (categories not reported separately), per category, per history;
    paired comparisons of every system against Lantern, Holm-corrected within each table; failure causes."""
    out: dict[str, Any] = {"systems": {}, "comparisons": {}, "failures": {}}
    categories = sorted({c.category for c in cases})
    for name, rs in rows.items():
        head = [r for r in rs if r["category"] not in SEPARATE_CATEGORIES]
        per_history = {}
        for hid in dict.fromkeys(r["history"] for r in head):
            per_history[hid] = metrics.summarize([r for r in head if r["history"] == hid])
        out["systems"][name] = {
            "overall": metrics.summarize(head),
            "by_category": {c: metrics.summarize([r for r in rs if r["category"] == c]) for c in categories},
            "per_history": per_history,
        }
        if any(r["cause"] for r in rs):
            causes = {c: 0 for c in FAILURE_CAUSES}
            for r in head:
                if r["cause"]:
                    causes[r["cause"]] += 1
            out["failures"][name] = causes
    if REFERENCE in rows:
        out["comparisons"] = compare(rows, REFERENCE)
    return out


def compare(rows: dict[str, list[dict]], reference: str) -> dict[str, list[dict]]:
    """For each metric in COMPARED, every system against ``reference`` on the headline facts: difference in
    percentage points with its cluster bootstrap 95% CI (conversations / history files resampled, all their facts
    kept), paired Wilcoxon and Cohen's d over per-history
    means, exact McNemar per fact (binary ``recovered`` only); Holm across the systems of the table."""
    ref = [r for r in rows[reference] if r["category"] not in SEPARATE_CATEGORIES]
    tables: dict[str, list[dict]] = {}
    for metric in COMPARED:
        table = []
        for name, rs in rows.items():
            if name == reference:
                continue
            other = [r for r in rs if r["category"] not in SEPARATE_CATEGORIES]
            a = [float(r[metric]) for r in ref]
            b = [float(r[metric]) for r in other]
            histories = list(dict.fromkeys(r["history"] for r in ref))
            ha = [_mean([float(r[metric]) for r in ref if r["history"] == h]) for h in histories]
            hb = [_mean([float(r[metric]) for r in other if r["history"] == h]) for h in histories]
            diff, low, high = stats.bootstrap_ci_clustered(a, b, [r["history"] for r in ref])
            row = {
                "system": name,
                "reference": reference,
                "metric": metric,
                "n_facts": len(a),
                "n_histories": len(histories),
                "reference_mean": _mean(a),
                "system_mean": _mean(b),
                "diff_pp": diff,
                "ci_low_pp": low,
                "ci_high_pp": high,
                "wilcoxon_p": stats.wilcoxon_p(ha, hb),
                "cohens_d": stats.cohens_d_paired(ha, hb),
                "min_wilcoxon_p": 2.0 / 2 ** len(histories) if histories else 1.0,
            }
            if metric == "recovered":
                row["mcnemar_reference_only"], row["mcnemar_system_only"], row["mcnemar_p"] = stats.mcnemar_exact(
                    [bool(x) for x in a], [bool(x) for x in b]
                )
            table.append(row)
        for key in ("wilcoxon_p", "mcnemar_p"):
            if table and key in table[0]:
                for row, adj in zip(table, stats.holm([r[key] for r in table])):
                    row[key + "_holm"] = adj
        tables[metric] = table
    return tables


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def main(
    dataset: str,
    data: Path,
    out: Path,
    *,
    split: str = "report",
    budget: int = DEFAULT.budget,
    limit: int | None = None,
    keep: int | None = None,
    compaction: str | None = None,
    systems: Sequence[str] | None = None,
    embedder: str | None = None,
    cache_dir: Path | None = None,
    plots: bool = True,
    budgets: Sequence[int] | None = DEFAULT_BUDGETS,
    ratios: Sequence[float] | None = DEFAULT_RATIOS,
    llm_base_url: str | None = None,
    llm_model: str | None = None,
    second_embedder: str | None = None,
    workers: int | None = None,
    qa: bool = False,
    qa_limit: int | None = None,
    qa_context_chars: int | None = None,
    qa_calibration: int | None = None,
    command: str | None = None,
    min_score: float | None = None,
) -> dict[str, Any]:
    """Entry point of ``lantern eval``. ``keep`` / ``compaction`` default to the dataset's own (aider: gist, 4
    turns kept) or to truncation keeping ``DEFAULT_KEEP`` turns. ``llm_base_url`` + ``llm_model``: an
    OpenAI-compatible endpoint for the ``llm_summary`` compaction (key from ``LANTERN_LLM_API_KEY``). ``qa``:
    answer accuracy (eval/qa.py) through that endpoint (or ``$LANTERN_LLM_BASE_URL`` / ``_MODEL``; timeout
    ``$LANTERN_LLM_TIMEOUT``, default 120 s; JSON mode ``$LANTERN_LLM_JSON_MODE``), ``qa_limit`` questions per
    history, ``qa_context_chars`` for the full-history condition, ``qa_calibration`` questions for the judge's
    calibration (eval/judge.py; default 10); with ``qa`` the endpoint does not also write
    the llm_summary comparison (unless ``compaction="llm_summary"``). ``command``: named in the report.
    ``min_score``: the relevance floor of every pipeline system's questions (``Config.min_score``; default the
    configured one)."""
    from lantern.eval.judge import CALIBRATION_QUESTIONS
    from lantern.eval.qa import DEFAULT_CONTEXT_CHARS, DEFAULT_TIMEOUT_S, QAOptions
    from lantern.llm import settings as llm_settings

    if qa_limit is not None and qa_limit < 1:
        raise ValueError(f"--qa-limit must be at least 1 question, got {qa_limit}")
    if qa_context_chars is not None and qa_context_chars < 0:
        raise ValueError(f"--qa-context-chars must be a number of characters, got {qa_context_chars}")
    if qa_calibration is not None and qa_calibration < 1:
        raise ValueError(f"--qa-calibration must be at least 1 question, got {qa_calibration}")
    options = None
    if qa:
        chosen = llm_settings(Config(llm_timeout_s=DEFAULT_TIMEOUT_S), llm_base_url, llm_model)
        if chosen is None:
            raise ValueError("--qa needs an LLM: give --llm-base-url URL --llm-model NAME (or $LANTERN_LLM_BASE_URL)")
        options = QAOptions(
            chosen,
            qa_limit,
            DEFAULT_CONTEXT_CHARS if qa_context_chars is None else qa_context_chars,
            command or "",
            CALIBRATION_QUESTIONS if qa_calibration is None else qa_calibration,
        )
    ds = load(dataset, data)
    keep = keep if keep is not None else ds.keep or DEFAULT_KEEP
    compaction = compaction or ds.compaction or "truncation"
    summarizer = None
    if (llm_base_url or llm_model) and (not qa or compaction == "llm_summary"):
        from lantern.eval.llm import Summarizer

        summarizer = Summarizer(
            llm_base_url or "", llm_model or "", cache_dir=(cache_dir or default_cache_dir()) / "llm"
        )
    return evaluate(
        ds,
        out_dir=out,
        systems=select(systems, Config() if min_score is None else replace(Config(), min_score=min_score)),
        budget=budget,
        keep=keep,
        compaction=compaction,
        split=split,
        limit=limit,
        embedder=embedder,
        cache_dir=cache_dir,
        plots=plots,
        budgets=budgets,
        ratios=ratios,
        summarizer=summarizer,
        second_embedder=second_embedder,
        workers=workers,
        qa=options,
    )
