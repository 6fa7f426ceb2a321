"""The eval's account of questions with no answer (issue #19, item 3): the ``no-answer`` phase (another
conversation's questions asked of each store), the report's "Injected characters when nothing should be injected"
section, and the floor sweep read off the stored per-question scores, on a real LoCoMo slice."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from lantern.config import Config
from lantern.eval.datasets import load
from lantern.eval.run import evaluate
from lantern.eval.systems import select

LOCOMO = Path("/work/shared/data/locomo/locomo10.json")


def slice_of_two(sessions: int = 6):
    """conv-26 and conv-30 (tune split), their first ``sessions`` sessions and the questions whose evidence lies in
    them (adversarial ones included)."""
    ds = load("locomo", LOCOMO).select("tune", limit=2)
    for h in ds.histories:
        h.messages = [m for m in h.messages if int(m.session.split("_")[1]) <= sessions]
        known = {m.meta["dia_id"] for m in h.messages}
        h.facts = [f for f in h.facts if f.evidence and set(f.evidence) <= known]
    return ds


def run_at(tmp_path, cache: Path, floor: float) -> dict:
    return evaluate(
        slice_of_two(),
        out_dir=tmp_path / f"out-{floor:g}",
        split="tune",
        keep=10,
        systems=select(["lantern"], replace(Config(), min_score=floor)),
        cache_dir=cache,
        plots=False,
        budgets=[],
        ratios=[],
        workers=1,
    )


@pytest.mark.real_models  # the floor's cosines are calibrated on the real models
@pytest.mark.skipif(not LOCOMO.exists(), reason="needs ../shared/data/locomo")
def test_the_floor_sweep_gives_the_figures_of_a_run_at_that_floor(tmp_path, eval_cache):
    """A run with the decision off reports every floor's figures. At the default floor, what gets nothing is exactly
    what a run at that floor measures (below the floor nothing, on either run); the short blocks between the floor
    and ``clear_score`` are estimated from the full ones (eval/outcome.py short_prefix), so the facts they keep
    are within a few of the measured ones; the report names the section."""
    off, on = run_at(tmp_path, eval_cache, 0.0), run_at(tmp_path, eval_cache, Config().min_score)
    un = off["unanswerable"]
    assert un["min_score"] == 0.0 and un["no-answer"]["lantern"]["n"] > 0 and un["adversarial"]["lantern"]["n"] > 0
    assert un["no-answer"]["lantern"]["empty"] == 0.0  # without the decision every question gets a block
    sweep = {p["min_score"]: p for p in un["sweep"]}
    assert sweep[0.0]["recovered"] == round(off["systems"]["lantern"]["overall"]["recovered"] * sweep[0.0]["n"])
    at = sweep[Config().min_score]
    measured = round(on["systems"]["lantern"]["overall"]["recovered"] * at["n"])
    assert abs(at["recovered"] - measured) <= max(2, 0.02 * at["n"]), (at["recovered"], measured)
    assert at["no-answer"]["empty"] == on["unanswerable"]["no-answer"]["lantern"]["empty"]
    assert at["adversarial"]["empty"] == on["unanswerable"]["adversarial"]["lantern"]["empty"]
    assert at["no-answer"]["chars"] < 0.6 * un["no-answer"]["lantern"]["chars"]  # short blocks for most
    points = [sweep[f] for f in sorted(sweep)]
    assert all(a["recovered"] >= b["recovered"] for a, b in zip(points, points[1:]))
    assert all(a["no-answer"]["empty"] <= b["no-answer"]["empty"] for a, b in zip(points, points[1:]))
    assert [p["min_score"] for p in on["unanswerable"]["sweep"]][0] == Config().min_score  # only floors above its own
    report = (tmp_path / "out-0" / "report.md").read_text(encoding="utf-8")
    assert "## Injected characters when nothing should be injected" in report
    assert "| min_score | facts recovered |" in report
    assert (tmp_path / "out-0" / "no_answer.jsonl").stat().st_size > 0
