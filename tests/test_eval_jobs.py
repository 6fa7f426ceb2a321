"""The evaluation's jobs in worker processes (eval/jobs.py, issue 3's runtime target) give the same per-fact rows
as the plain in-process path, on a small slice of the real LoCoMo data (two conversations, so the merge order of
histories matters; a reinforce system, whose state carries from question to question, included)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clirun import lantern
from lantern.eval.cases import cases_of, prepare, run_cases
from lantern.eval.datasets import load
from lantern.eval.run import evaluate
from lantern.eval.systems import select

FIX = Path(__file__).parent / "fixtures" / "eval"
LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"
SYSTEMS = ["lantern", "-prf", "lantern+reinforce", "bm25", "dense", "grep", "recency"]
TIMINGS = {
    "ms",
    "latency_p50_ms",
    "latency_p95_ms",
    "archive_latency_ms",
    "plots",
    "workers",
}  # "workers": how they ran


def _strip(x):
    """``x`` without its timings (wall-clock latencies differ from run to run; every other number must not)."""
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if k not in TIMINGS}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return x


def _slice():
    """conv-26 and conv-30 (tune split), their first four sessions, and the questions answered inside them."""
    ds = load("locomo", LOCOMO).select("tune", limit=2)
    for h in ds.histories:
        h.messages = [m for m in h.messages if int(m.session.split("_")[1]) <= 4]
        known = {m.meta["dia_id"] for m in h.messages}
        h.facts = [f for f in h.facts if f.evidence and set(f.evidence) <= known]
    return ds


@pytest.mark.skipif(not LOCOMO.exists(), reason="../shared/data/locomo not present")
def test_workers_give_the_rows_of_the_plain_path(tmp_path):
    ds = _slice()
    cache = tmp_path / "cache"
    kw = dict(
        split="tune", keep=8, systems=select(SYSTEMS), cache_dir=cache, plots=False, budgets=[1500, 6000], ratios=[0.5]
    )
    parallel = evaluate(ds, out_dir=tmp_path / "w2", workers=2, **kw)
    serial = evaluate(ds, out_dir=tmp_path / "w1", workers=1, **kw)
    assert parallel["dataset"]["histories"] == ["conv-26", "conv-30"] and parallel["dataset"]["lost"] >= 20
    assert set(parallel["curves"]) == {"budget", "ratio"} and "gist" in parallel["compactions"]
    assert _strip(parallel) == _strip(serial)
    rows = {
        d: [_strip(json.loads(line)) for line in (tmp_path / d / "facts.jsonl").read_text().splitlines()]
        for d in ("w1", "w2")
    }
    assert rows["w1"] == rows["w2"] and len(rows["w1"]) == len(SYSTEMS) * parallel["dataset"]["lost"]

    # the plain path: every history's store open in this process, every system over all cases in dataset order
    prepared, _ = prepare(ds, cache, None)
    try:
        cases, pools, _ = cases_of(prepared, ds.histories, "truncation", lambda p: 8)
        plain = run_cases(select(SYSTEMS), cases, pools, prepared, 6000)
    finally:
        for p in prepared.values():
            p.lantern.close()
    assert [_strip({"system": name, **r}) for name, rs in plain.items() for r in rs] == rows["w2"]
    recovered = [r["recovered"] for r in rows["w2"] if r["system"] == "lantern"]
    assert 0 < sum(recovered) < len(recovered)  # a slice on which the systems differ, not a trivial one


def test_cli_workers_option(tmp_path):
    """``lantern eval --workers 2`` on the two-history JSONL fixture: the same numbers as ``--workers 1`` (in-process:
    tests/clirun.py; the workers are real processes either way)."""
    env = {"LANTERN_EVAL_CACHE": str(tmp_path / "cache")}
    out = {}
    for n in ("1", "2"):
        proc = lantern(
            "eval",
            "jsonl",
            "--data",
            str(FIX / "facts.jsonl"),
            "--out",
            str(tmp_path / n),
            "--split",
            "all",
            "--keep",
            "1",
            "--system",
            "lantern",
            "--system",
            "grep",
            "--no-plots",
            "--workers",
            n,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr.decode()
        out[n] = json.loads((tmp_path / n / "results.json").read_text())
    assert out["1"]["dataset"]["histories"] == ["proj-1", "proj-2"] and out["1"]["dataset"]["lost"] >= 2
    assert _strip(out["1"]) == _strip(out["2"])
    bad = lantern(
        "eval", "jsonl", "--data", str(FIX / "facts.jsonl"), "--out", str(tmp_path / "0"), "--workers", "0", env=env
    )
    assert bad.returncode != 0 and not (tmp_path / "0" / "results.json").exists()
