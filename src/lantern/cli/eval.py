"""``lantern eval``: lantern/eval/run.py, and lantern/eval/realcompact.py for ``eval realcompact``."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Optional

import typer

from lantern.cli.common import fail, guard, importable, missing_extra, state
from lantern.cli.options import embedder_name
from lantern.cli.render import eval_lines, note, progress_bar, realcompact_lines
from lantern.config import DEFAULT


def eval_(
    dataset: str = typer.Argument(
        ...,
        metavar="DATASET",
        help="realcompact (real Claude Code compactions), locomo, memdaily, aider (look-ahead facts) or jsonl "
        "(docs/eval-format.md).",
    ),
    data: Path = typer.Option(..., "--data", help="The dataset file or folder (read only)."),
    out: Path = typer.Option(..., "--out", help="Output folder: results.json, facts.jsonl, report.md, PNG plots."),
    split: str = typer.Option("report", "--split", help="tune, report or all (never tune on report)."),
    budget: int = typer.Option(DEFAULT.budget, "--budget", help="Characters injected, the same for every system."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Evaluate at most N histories of the split."),
    keep: Optional[int] = typer.Option(
        None, "--keep", help="Turns the compaction keeps verbatim (default 20; aider 4)."
    ),
    compaction: Optional[str] = typer.Option(
        None,
        "--compaction",
        help="truncation (default), gist (aider's default), session_summary (LoCoMo) or llm_summary.",
    ),
    system: Optional[list[str]] = typer.Option(None, "--system", help="Systems to run (repeatable; default all)."),
    cache: Optional[Path] = typer.Option(
        None, "--cache", help="Archive cache folder (default $LANTERN_EVAL_CACHE or ~/.cache/lantern/eval)."
    ),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="Write PNG plots (matplotlib)."),
    budgets: str = typer.Option(
        "1000,2000,3000,6000,9000,12000",
        "--budgets",
        help="Budget curve points in characters, comma-separated ('' skips).",
    ),
    ratios: str = typer.Option(
        "0.25,0.5,0.75,0.9",
        "--ratios",
        help="Compaction-ratio curve points (share of turns compacted), comma-separated ('' skips).",
    ),
    llm_base_url: Optional[str] = typer.Option(
        None,
        "--llm-base-url",
        help=(
            "OpenAI-compatible endpoint (…/v1) for the llm_summary compaction, or with --qa for the answers; key "
            "from $LANTERN_LLM_API_KEY."
        ),
    ),
    llm_model: Optional[str] = typer.Option(None, "--llm-model", help="Model name for --llm-base-url."),
    qa: bool = typer.Option(
        False,
        "--qa",
        help=(
            "Also measure answer accuracy: the LLM answers each lost fact from the compacted context, + Lantern, "
            "+ LANTERN-Rerank, the full history, + MemGPT-Faithful (docs/evaluation.md)."
        ),
    ),
    qa_limit: Optional[int] = typer.Option(
        None, "--qa-limit", min=1, help="With --qa: at most N questions per history (evenly spaced)."
    ),
    qa_context_chars: int = typer.Option(
        12_000,
        "--qa-context-chars",
        min=0,
        help="With --qa: the full-history condition applies when the history has at most this many characters.",
    ),
    qa_calibration: int = typer.Option(
        10,
        "--qa-calibration",
        min=1,
        help=(
            "With --qa: build the judge's calibration (answers whose verdict is known) from N of the dataset's "
            "questions; the judge column is reported only when it passes (docs/evaluation.md)."
        ),
    ),
    second_embedder: Optional[str] = typer.Option(
        None,
        "--second-embedder",
        callback=embedder_name,
        help=(
            "Also build stores with this embedder (e.g. use) and add lantern+<id>: its semantic ranking as a fifth "
            "RRF signal."
        ),
    ),
    min_score: Optional[float] = typer.Option(
        None,
        "--min-score",
        min=0.0,
        help="Relevance floor of the pipeline systems' questions (default: the configured one; 0 turns it off). "
        "The report's floor sweep shows every floor at or above it, read off the stored scores.",
    ),
    workers: Optional[int] = typer.Option(
        None,
        "--workers",
        min=1,
        help=(
            "Processes the per-history jobs run in (default: the usable CPUs, at most 8; 1: this process). Same "
            "numbers either way."
        ),
    ),
    fit: bool = typer.Option(
        False,
        "--fit",
        help="realcompact: also refit the loss model's weights (fit.json) and report them leave-one-repository-out.",
    ),
) -> None:
    """Measure fact recovery after compaction on a dataset: Lantern vs ablations and baselines, paired statistics.
    Needs the `eval` extra (scipy, matplotlib); without it the command prints the one that installs it."""
    from lantern.eval.datasets import DATASETS

    if dataset not in DATASETS:  # a usage error first: no extra makes an unknown name work
        raise typer.BadParameter(f"unknown dataset {dataset!r}; one of {', '.join(DATASETS)}", param_hint="DATASET")
    missing = [m for m in ("scipy", *(("matplotlib",) if plots else ())) if not importable(m)]
    try:
        from lantern.eval.run import main as run_eval
    except ImportError as e:  # scipy / matplotlib are the `eval` extra
        missing.append(str(e))
    if missing:  # checked before any work: the statistics and plots come last, after minutes of recovery
        fail(missing_extra("eval", "eval", ", ".join(missing)))

    if dataset == "realcompact":
        return _eval_realcompact(data, out, limit, system, fit, workers)

    options = dict(
        split=split,
        budget=budget,
        limit=limit,
        keep=keep,
        compaction=compaction,
        systems=system or None,
        embedder=state.embedder,
        cache_dir=cache,
        plots=plots,
        llm_base_url=llm_base_url,
        llm_model=llm_model,
        second_embedder=second_embedder,
        workers=workers,
        qa=qa,
        qa_limit=qa_limit,
        qa_context_chars=qa_context_chars,
        qa_calibration=qa_calibration,
        command="lantern " + shlex.join(sys.argv[1:]),
        min_score=min_score,
    )
    # its stores are in the archive cache (eval/run.py default_cache_dir), not at the global --db
    guard(
        lambda: _run_eval(run_eval, dataset, data, out, budgets, ratios, options),
        cache or os.environ.get("LANTERN_EVAL_CACHE") or "~/.cache/lantern/eval",
    )


def _run_eval(run_eval, dataset: str, data: Path, out: Path, budgets: str, ratios: str, options: dict) -> None:
    """``eval DATASET`` (every dataset but realcompact): one call of ``lantern.eval.run.main`` with the curve points
    of ``budgets`` / ``ratios`` (comma-separated) and ``options``, then its summary lines; a ValueError (a bad curve
    point among them) is a one-line error, Ctrl-C exits 130 saying nothing was written."""
    try:
        results = run_eval(
            dataset,
            data,
            out,
            budgets=[int(x) for x in budgets.split(",") if x.strip()],
            ratios=[float(x) for x in ratios.split(",") if x.strip()],
            **options,
        )
    except ValueError as e:
        fail(str(e))
    except KeyboardInterrupt:
        note(
            f"interrupted: nothing was written to {out}; the archive cache keeps the histories already "
            "built, so the same command starts faster"
        )
        raise typer.Exit(130) from None
    for line in eval_lines(results, out):
        typer.echo(line)


def _eval_realcompact(
    data: Path, out: Path, limit: Optional[int], system: Optional[list[str]], fit: bool, workers: Optional[int]
) -> None:
    """``eval realcompact``: one call of ``lantern.eval.realcompact.main``."""
    from lantern.eval.realcompact import main as run_realcompact
    from lantern.text.terminal import console

    console = console(stderr=True)

    def run() -> None:
        command = "lantern " + shlex.join(sys.argv[1:])
        with progress_bar(console, "compactions", elapsed=False) as update:
            table = run_realcompact(
                data,
                out,
                limit=limit,
                systems=system or None,
                fit=fit,
                workers=workers,
                command=command,
                progress=update,
            )
        for line in realcompact_lines(table, out):
            typer.echo(line)

    guard(run)
