"""``report.md`` and PNG plots, rendered from ``results.json`` alone (so every number in the report can be
re-derived from the JSON: ``render(json.load(open("results.json"))) == report.md``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lantern.eval.datasets import SEPARATE_CATEGORIES
from lantern.text.names import plural

SPLITS = {  # each dataset's own tune / report split (datasets.py)
    "locomo": {"report": "LoCoMo conversations 6–10", "tune": "LoCoMo conversations 1–5"},
    "memdaily": {"report": "MemDaily types other than 01", "tune": "MemDaily type 01"},
    "aider": {"report": "the second half of the aider sessions", "tune": "the first half of the aider sessions"},
    "jsonl": {
        "report": 'the histories whose "split" is "report" or not given',
        "tune": 'the histories whose "split" is "tune"',
    },
}


def split_note(dataset: str, split: str, limit: int | None = None) -> str:
    """The Data line's words for ``split`` of ``dataset`` (that dataset's definition of it only) and ``limit``."""
    own = SPLITS.get(dataset, {}).get(split)
    first = f", first {histories(limit)}" if limit else ""
    if split == "report":
        return f"report split{f' ({own})' if own else ''}{first}; no parameter was tuned on it"
    if split == "tune":
        return f"tune split{f' ({own})' if own else ''}{first}: parameters may be tuned here; not for claims"
    if split == "all":
        return f"all histories (tune and report splits together){first}: not for claims"
    return split + first


def histories(n: int) -> str:
    return plural(n, "history", "histories")


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def num(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}f}"


def pval(p: float) -> str:
    if p != p:  # NaN
        return "—"
    return f"{p:.2g}" if p >= 0.001 else f"{p:.1e}"


def _unanswerable(results: dict[str, Any]) -> list[str]:
    """The section "Injected characters when nothing should be injected": Lantern's block on questions whose answer
    the store does not hold (LoCoMo's adversarial category; another history's questions), beside the answerable
    ones."""
    un = results.get("unanswerable") or {}
    kinds = [
        ("adversarial", 'adversarial (LoCoMo category 5: the answer is "not mentioned")'),
        ("no-answer", "another history's questions (their answer was never said in this store)"),
        ("answerable", "answerable: the headline facts, for comparison"),
    ]
    rows = []
    for key, label in kinds:
        s = (un.get(key) or {}).get("lantern")
        if s and s["n"]:
            rows.append([label, str(s["n"]), f"{s['chars']:,.0f}", f"{s['chars_p50']:,.0f}", pct(s["empty"])])
    if len(rows) < 2:  # only the answerable row: nothing to report
        return []
    floor = un.get("min_score", 0.0)
    return [
        "",
        "## Injected characters when nothing should be injected",
        "",
        "Lantern's block for questions whose answer is not in the store, which should get nothing, beside the "
        f"answerable ones. Injection decision `min_score` {floor:g} (`Config.min_score`; docs/architecture.md §3.6): "
        "below it a recovery injects nothing, up to `Config.clear_score` a short block. LoCoMo's adversarial "
        "questions name the wrong speaker for something that was said: their evidence turns match them as well as "
        "an answer would.",
        "",
        *_table(["questions", "n", "chars injected (mean)", "median", "nothing injected"], rows),
        *_sweep(un.get("sweep") or []),
    ]


def _sweep(points: list[dict[str, Any]]) -> list[str]:
    """The floor sweep (run.floor_sweep): facts recovered and injected characters at each ``min_score``."""
    if not points:
        return []
    kinds = [k for k in ("adversarial", "no-answer") if k in points[0]]
    header = ["min_score", "facts recovered", "answerable given nothing"]
    for k in kinds:
        header += [f"{k}: chars (mean)", f"{k}: nothing injected"]
    rows = []
    for p in points:
        row = [f"{p['min_score']:g}", f"{p['recovered']} / {p['n']}", pct(p["empty"])]
        for k in kinds:
            row += [f"{p[k]['chars']:,.0f}", pct(p[k]["empty"])]
        rows.append(row)
    return [
        "",
        "Every floor at or above this run's, read off the stored per-question scores (a recovery below the floor "
        "injects nothing, one from it up to `clear_score` the short block, one above it the block measured here; "
        "from a run with the decision off, the short block's figures are an estimate: eval/run.py floor_sweep):",
        "",
        *_table(header, rows),
    ]


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def render(results: dict[str, Any]) -> str:
    """report.md from the results dict (eval/run.py): the run's description, the headline table, the paired
    comparisons, the unanswerable questions, the per-category tables, the curves, the compaction methods, the
    failure causes, archive latency, answer accuracy (with ``--qa``) and the plots."""
    # the categories reported apart from the headline that this run has (LoCoMo's adversarial; none elsewhere)
    separate = sorted(SEPARATE_CATEGORIES & {c for s in results["systems"].values() for c in s["by_category"]})
    out = _description(results)
    out += _headline(results, separate)
    out += _comparisons(results, separate)
    out += _unanswerable(results)
    out += _categories(results)
    out += _curves(results)
    out += _compactions(results)
    out += _failures(results)
    out += _archive_latency_qa_plots(results)
    return "\n".join(out) + "\n"


def _description(results: dict[str, Any]) -> list[str]:
    """The title and the bullets saying what was run on which data."""
    ds, cfg = results["dataset"], results["config"]
    out = [
        f"# Lantern evaluation: {ds['name']}",
        "",
        f"- Data: `{ds['path']}` (sha256 `{ds['sha256']}`); {split_note(ds['name'], ds['split'], ds.get('limit'))}.",
        f"- Histories: {len(ds['histories'])} ({', '.join(ds['histories'])}); facts {ds['facts']}, lost to the "
        "compaction "
        f"{ds['lost']}, kept by it {ds['kept']}, without resolvable evidence {ds['no_evidence']}; unresolved evidence "
        f"ids in the whole file {ds['unresolved_evidence_ids']}; dropped items {ds['dropped_items']}.",
        *([f"- Skipped by the loader: {'; '.join(ds['notes'])}."] if ds.get("notes") else []),
        f"- Compaction: {cfg['compaction']}, last {plural(cfg['keep'], 'turn')} kept verbatim (excluded from "
        "recovery). "
        f"Budget {cfg['budget']:,} characters for every system. Embedder `{cfg['embedder']}`. "
        + (
            "Zero LLM calls in retrieval; the llm_summary compaction called the endpoint below."
            if results.get("llm")
            else "Zero LLM calls."
        ),
        *(
            [
                f"- Latencies (p50 / p95 ms) measured with {cfg['workers']} worker "
                f"process{'' if cfg['workers'] == 1 else 'es'} "
                f"on {cfg['cpus']} CPUs"
                + (
                    ": more processes than CPUs, so they include waiting for a CPU."
                    if cfg["workers"] > cfg["cpus"]
                    else "."
                )
            ]
            if cfg.get("workers")
            else []
        ),
        "- A fact is lost when an evidence turn is outside the kept window and its answer is not in the compacted "
        "context; it is recovered when every lost evidence turn is inside the packed block. Rankings are scored on "
        "the lost evidence turns.",
    ]
    if ds["name"] == "aider":
        out += [
            "- Look-ahead facts (no labels; `lantern.eval.lookahead`): each history is an aider session up to its "
            "compaction point t* (60% of its turns); a fact is a token (path, number, identifier, error, name, date, "
            "decision) that the 10 turns after t* use again and the compacted context lost. It is recovered when the "
            "token is inside the block; any turn holding it counts (recall@k = hit@k). Every fact is asked with the "
            "compacted context's tail (last kept user message + summary); recovery searches the session's own store."
        ]
    return out


def _headline(results: dict[str, Any], separate: list[str]) -> list[str]:
    """The headline table: every system's overall metrics over the facts not reported separately."""
    out: list[str] = []
    out += [
        "",
        "## Headline"
        + (
            f" ({'category' if len(separate) == 1 else 'categories'} {', '.join(separate)} reported separately)"
            if separate
            else ""
        ),
        "",
    ]
    header = [
        "system",
        "facts recovered",
        "recall@5",
        "recall@10",
        "session R@10",
        "nDCG@10",
        "MRR",
        "chars",
        "p50 ms",
        "p95 ms",
        "n",
    ]
    rows = []
    for name, s in results["systems"].items():
        o = s["overall"]
        rows.append(
            [
                name,
                pct(o["recovered"]),
                num(o["recall@5"]),
                num(o["recall@10"]),
                num(o["session_recall@10"]),
                num(o["ndcg@10"]),
                num(o["mrr"]),
                f"{o['chars']:,.0f}",
                f"{o['latency_p50_ms']:.1f}",
                f"{o['latency_p95_ms']:.1f}",
                str(o["n"]),
            ]
        )
    out += _table(header, rows)
    return out


def _comparisons(results: dict[str, Any], separate: list[str]) -> list[str]:
    """One table per compared metric: the reference against each system (eval/run.py ``compare``)."""
    ds = results["dataset"]
    out: list[str] = []
    for metric, table in results.get("comparisons", {}).items():
        if not table:
            continue
        n_h = table[0]["n_histories"]  # the histories with a lost headline fact: the others have no paired value
        left_out = (
            f" {histories(len(ds['histories']))}, {n_h} with lost {'headline ' if separate else ''}facts: "
            f"{'a history' if len(ds['histories']) - n_h == 1 else 'the histories'} without one "
            f"{'is' if len(ds['histories']) - n_h == 1 else 'are'} left out of these statistics."
            if n_h != len(ds["histories"])
            else ""
        )
        out += [
            "",
            f"## {table[0]['reference']} vs each system: {metric}",
            "",
            f"Δ = {table[0]['reference']} − system in percentage points, cluster bootstrap 95% CI (the "
            f"{histories(n_h)} "
            f"resampled with all {'its' if n_h == 1 else 'their'} facts); Wilcoxon "
            f"signed-rank and Cohen's d over the {plural(n_h, 'per-history mean')} (smallest attainable p with "
            f"{histories(n_h)}: {pval(table[0]['min_wilcoxon_p'])}); Holm-corrected across this table.{left_out}",
            "",
        ]
        header = ["system", "Δ pp", "95% CI", "Wilcoxon p", "Holm p", "Cohen's d"]
        if "mcnemar_p" in table[0]:
            header += ["McNemar ref-only/sys-only", "McNemar p", "Holm p"]
        rows = []
        for r in table:
            row = [
                r["system"],
                f"{r['diff_pp']:+.1f}",
                f"[{r['ci_low_pp']:+.1f}, {r['ci_high_pp']:+.1f}]",
                pval(r["wilcoxon_p"]),
                pval(r["wilcoxon_p_holm"]),
                f"{r['cohens_d']:+.2f}",
            ]
            if "mcnemar_p" in r:
                row += [
                    f"{r['mcnemar_reference_only']}/{r['mcnemar_system_only']}",
                    pval(r["mcnemar_p"]),
                    pval(r["mcnemar_p_holm"]),
                ]
            rows.append(row)
        out += _table(header, rows)
    return out


def _categories(results: dict[str, Any]) -> list[str]:
    """Facts recovered and recall@10 per category (none when the data has no categories)."""
    out: list[str] = []
    cats = sorted({c for s in results["systems"].values() for c in s["by_category"]})
    if cats:
        out += ["", "## Facts recovered by category", ""]
        header = ["system"] + [
            f"{c} (n={next(iter(results['systems'].values()))['by_category'][c]['n']})" for c in cats
        ]
        out += _table(
            header, [[n] + [pct(s["by_category"][c]["recovered"]) for c in cats] for n, s in results["systems"].items()]
        )
        out += ["", "## Recall@10 by category", ""]
        out += _table(
            ["system"] + cats,
            [[n] + [num(s["by_category"][c]["recall@10"]) for c in cats] for n, s in results["systems"].items()],
        )
    return out


def _failures(results: dict[str, Any]) -> list[str]:
    """The failure causes of the pipeline systems' unrecovered headline facts."""
    out: list[str] = []
    if results.get("failures"):
        causes = list(next(iter(results["failures"].values())))
        out += ["", "## Why facts were not recovered (pipeline systems, headline facts; one cause each)", ""]
        out += _table(["system"] + causes, [[n] + [str(f[c]) for c in causes] for n, f in results["failures"].items()])
    return out


def _archive_latency_qa_plots(results: dict[str, Any]) -> list[str]:
    """Archive latency per turn (when any turn was timed), answer accuracy (``--qa``) and the plots' images."""
    out: list[str] = []
    lat = results.get("archive_latency_ms") or {}
    if lat.get("turns_timed"):
        out += [
            "",
            f"Archive latency per turn (batches of 64): p50 {lat['p50']:.1f} ms, p95 {lat['p95']:.1f} ms over "
            f"{plural(lat['turns_timed'], 'batch', 'batches')}.",
        ]
    if results.get("qa"):
        from lantern.eval.qa import render_qa

        out += render_qa(results["qa"])
    for title, path in (results.get("plots") or {}).items():
        out += ["", f"![{title}]({path})"]
    return out


def _curves(results: dict[str, Any]) -> list[str]:
    out: list[str] = []
    curves = results.get("curves") or {}
    for key, title, unit in (
        ("budget", "Robustness: facts recovered vs budget", "characters"),
        ("ratio", "Robustness: facts recovered vs compaction ratio", "share of each history's turns compacted"),
    ):
        c = curves.get(key)
        if not c or not c["systems"]:
            continue
        heads = [f"{x:,}" if key == "budget" else f"{x:.2f}" for x in c["points"]]
        out += [
            "",
            f"## {title}",
            "",
            f"Points: {unit}; facts recovered (recall@10 in brackets) over the headline facts"
            + (f"; facts lost at each ratio: {', '.join(str(n) for n in c['lost'])}" if key == "ratio" else "")
            + (f"; budget {results['config']['budget']:,} characters" if key == "ratio" else "")
            + ".",
            "",
        ]
        rows = [
            [name] + [f"{pct(v)} ({num(r)})" for v, r in zip(m["recovered"], m["recall@10"])]
            for name, m in c["systems"].items()
        ]
        out += _table(["system"] + heads, rows)
    return out


def _compactions(results: dict[str, Any]) -> list[str]:
    comps = results.get("compactions") or {}
    if not comps:
        return []
    names = sorted({n for c in comps.values() for n in c.get("systems", {})}, key=lambda n: (n != "lantern", n))
    out = [
        "",
        "## Compaction methods",
        "",
        f"Each method keeps the last {plural(results['config']['keep'], 'turn')}; the facts it loses are asked with "
        "the same "
        f"budget ({results['config']['budget']:,} characters). Facts lost: every category; recovered: the headline "
        f"facts. Skipped methods say why.",
    ]
    llm = results.get("llm")
    if llm:
        out += [
            f"LLM summary: `{llm['model']}` at `{llm['url']}`, {plural(llm['calls'], 'call')} made, {llm['cached']} "
            "answered from the cache."
        ]
    out += [""]
    rows = []
    for method, c in comps.items():
        if "skipped" in c:
            rows.append([method, "skipped: " + c["skipped"]] + ["—"] * len(names))
        else:
            rows.append(
                [method, str(c["lost"])]
                + [pct(c["systems"][n]["recovered"]) if n in c["systems"] else "—" for n in names]
            )
    return out + _table(["compaction", "facts lost"] + [f"{n} recovered" for n in names], rows)


def write_plots(results: dict[str, Any], out_dir: Path) -> dict[str, str]:
    """PNG plots (matplotlib, Agg): bar charts of facts recovered and recall@10 per system, line plots of the
    robustness curves (when present). Returns {title: file name};
    empty when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}
    names = list(results["systems"])
    made = {}
    for key, title, fname in (
        ("recovered", "Facts recovered", "recovered.png"),
        ("recall@10", "Recall@10", "recall10.png"),
    ):
        values = [results["systems"][n]["overall"][key] for n in names]
        fig, ax = plt.subplots(figsize=(8, 0.35 * len(names) + 1.2))
        ax.barh(names[::-1], values[::-1], color=["#d98c1f" if n == "lantern" else "#7a8ca3" for n in names[::-1]])
        ax.set_xlim(0, 1)
        ax.set_xlabel(title)
        ax.set_title(
            f"{title} ({results['dataset']['name']}, {results['dataset']['split']} split, budget "
            f"{results['config']['budget']:,})"
        )
        fig.tight_layout()
        fig.savefig(out_dir / fname, dpi=110)
        plt.close(fig)
        made[title] = fname
    for key, title, xlabel, fname in (
        ("budget", "Facts recovered vs budget", "budget (characters)", "curve_budget.png"),
        ("ratio", "Facts recovered vs compaction ratio", "share of turns compacted", "curve_ratio.png"),
    ):
        c = (results.get("curves") or {}).get(key)
        if not c or not c["systems"]:
            continue
        fig, ax = plt.subplots(figsize=(7, 4))
        for name, m in c["systems"].items():
            ax.plot(c["points"], m["recovered"], marker="o", label=name, linewidth=2.5 if name == "lantern" else 1.2)
        ax.set_ylim(0, 1)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("facts recovered")
        ax.set_title(f"{title} ({results['dataset']['name']}, {results['dataset']['split']} split)")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out_dir / fname, dpi=110)
        plt.close(fig)
        made[title] = fname
    return made
