"""The evaluation framework (issue 3): loaders on tiny fixtures of the real formats (written by us), metrics and
statistics against hand-computed cases, compaction, baselines, and end-to-end runs whose report is reproduced
from results.json."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clirun import lantern
from lantern.archive.chunk import chunk
from lantern.eval import metrics, stats
from lantern.eval.compaction import answer_in, compact, lost_turns
from lantern.eval.datasets import load, split_evidence
from lantern.eval.report import render
from lantern.eval.systems import all_systems, baseline_order, select
from lantern.model import Entry

FIX = Path(__file__).parent / "fixtures" / "eval"
LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"


# ---------------------------------------------------------------- loaders
def test_split_evidence_handles_multi_id_strings():
    assert split_evidence(["D8:6; D9:17", "D9:1 D4:4,D4:6", ""]) == ["D8:6", "D9:17", "D9:1", "D4:4", "D4:6"]


def test_locomo_loader():
    ds = load("locomo", FIX / "locomo_mini.json")
    assert [h.id for h in ds.histories] == ["conv-a", "conv-b"]
    assert all(h.split == "tune" for h in ds.histories)  # samples 1-5 are the tune split
    a = ds.histories[0]
    assert len(a.messages) == 10 and a.messages[0].meta["dia_id"] == "D1:1" and a.messages[0].session == "session_1"
    facts = {f.question: f for f in a.facts}
    assert facts["What colour did Ben paint the bicycle he restored?"].evidence == ["D1:2", "D2:2"]
    assert facts["What colour did Ben paint the bicycle he restored?"].category == "multi-hop"
    run = facts["When did Ben run 18 kilometres?"]
    assert run.evidence == ["D2:4"] and run.unresolved == 1
    assert ds.unresolved_ids == 1
    adv = facts["What did Ada's dog break?"]
    assert adv.category == "adversarial" and adv.answer == ""
    assert facts["What might Ada enjoy doing with clay?"].answer == "2023"  # int answers become text
    assert set(a.summaries) == {"session_1", "session_2", "session_3"}
    assert len(ds.sha256) == 64


def test_locomo_loader_skips_and_counts_what_is_malformed(tmp_path):
    """A sample whose conversation is not an object, a session that is not a list, turns without text and a
    question that is not an object are skipped, counted in ``dropped`` and named in the notes, which results.json
    and the report carry (breaker finding: they were accepted silently)."""
    good = json.loads((FIX / "locomo_mini.json").read_text())[1]
    conv = dict(good["conversation"], session_9="oops")
    conv["session_1"] = [*conv["session_1"], {"speaker": "Ada", "dia_id": "D1:99"}, "not a turn"]
    data = [
        dict(good, conversation=conv, qa=[*good["qa"], "not a question"]),
        {"sample_id": "broken", "conversation": ["a", "list"], "qa": [{"question": "q?"}, {"question": "r?"}]},
    ]
    (tmp_path / "l.json").write_text(json.dumps(data))
    ds = load("locomo", tmp_path / "l.json")
    assert [h.id for h in ds.histories] == [good["sample_id"]]
    assert len(ds.histories[0].messages) == len(load("locomo", FIX / "locomo_mini.json").histories[1].messages)
    assert ds.dropped == 1 + 1 + 2 + 3  # session_9, the question, the two turns, the broken sample and its 2 questions
    assert ds.notes == [
        f"{good['sample_id']} session_9 skipped: a string, not a list of turns",
        f"{good['sample_id']} question {len(good['qa']) + 1} skipped: a string, not an object",
        "sample broken skipped: its conversation is an array, not an object (2 questions with it)",
        f"turns without text or with a repeated dia_id skipped: {good['sample_id']} 2",
    ]


@pytest.mark.parametrize(
    "sample, dropped, note",
    [
        ("not a sample", 1, "sample 2 skipped: a string, not an object"),
        (
            {"sample_id": "z", "conversation": {"session_01": [{"dia_id": "D1:1", "text": "hi"}]}, "qa": "junk"},
            1,
            "z questions skipped: its qa is a string, not an array",
        ),
        (
            {
                "sample_id": "z",
                "conversation": {
                    "session_1": [{"dia_id": "D1:1", "text": "hi"}],
                    "session_01": [{"dia_id": "D1:1", "text": "hi"}],
                },
            },
            1,
            "turns without text or with a repeated dia_id skipped: z 1",
        ),
        (
            {
                "sample_id": "z",
                "conversation": {"session_1": [{"dia_id": "D1:1", "text": "hi"}]},
                "qa": [{"question": None}, {"question": "q?", "category": [1], "evidence": ["D1:1"]}],
            },
            1,
            "z question 1 skipped: no question text",
        ),
    ],
)
def test_locomo_loader_counts_odd_shapes(tmp_path, sample, dropped, note):
    """Breaker findings: a zero-padded session key raised KeyError, a list category TypeError; a qa that is not a
    list, a repeated dia_id, a null question and a non-object sample were lost or doubled without a count."""
    good = json.loads((FIX / "locomo_mini.json").read_text())[1]
    (tmp_path / "l.json").write_text(json.dumps([good, sample]))
    ds = load("locomo", tmp_path / "l.json")
    assert ds.dropped == dropped and ds.notes == [note]
    assert all(len({m.meta["dia_id"] for m in h.messages}) == len(h.messages) for h in ds.histories)


def test_locomo_split_of_ten_samples(tmp_path):
    sample = json.loads((FIX / "locomo_mini.json").read_text())[1]
    data = [dict(sample, sample_id=f"c{i}") for i in range(10)]
    (tmp_path / "l.json").write_text(json.dumps(data))
    ds = load("locomo", tmp_path / "l.json")
    assert [h.split for h in ds.histories] == ["tune"] * 5 + ["report"] * 5
    assert [h.id for h in ds.select("report", limit=2).histories] == ["c5", "c6"]


def test_memdaily_loader_concatenates_and_drops_errors():
    ds = load("memdaily", FIX / "memdaily")
    assert [h.id for h in ds.histories] == ["01_simple_roles_mini", "02_conditional_items_mini"]
    assert [h.split for h in ds.histories] == ["tune", "report"]
    roles = ds.histories[0]
    assert len(roles.messages) == 6  # three trajectories, one history
    assert [m.meta["dia_id"] for m in roles.messages][:4] == ["0:0", "0:1", "0:2", "1:0"]
    assert roles.messages[0].time.year == 2024 and roles.messages[3].session is None
    assert [f.evidence for f in roles.facts] == [["0:1"], ["1:0"]]  # the [ERRORQ] item is dropped
    assert roles.facts[0].category == "simple"
    items = ds.histories[1]
    assert len(items.facts) == 1 and items.facts[0].evidence == ["0:1"]  # [ERRORA] dropped; mid 7 unresolved
    assert ds.dropped == 2 and ds.unresolved_ids == 1


def test_jsonl_loader():
    ds = load("jsonl", FIX / "facts.jsonl")
    p1, p2 = ds.histories
    assert p1.split == "tune" and p2.split == "report"
    assert p1.facts[0].id == "port" and p1.facts[0].category == "number"
    assert p1.facts[1].evidence == ["m3"] and p1.facts[1].unresolved == 1
    assert p1.messages[0].time.hour == 10
    turns = chunk(p1.messages, None)
    assert [t.meta["dia_ids"] for t in turns] == [["m1", "m2"], ["m3", "m4"], ["m5"]]


def test_unknown_dataset_and_split():
    with pytest.raises(ValueError):
        load("nope", FIX)
    with pytest.raises(ValueError):
        load("jsonl", FIX / "facts.jsonl").select("dev")


# ---------------------------------------------------------------- metrics (hand-computed)
def test_ndcg_known_value():
    # relevant at ranks 1 and 3: DCG = 1 + 1/log2(4) = 1.5; IDCG = 1 + 1/log2(3) = 1.63093
    assert metrics.ndcg_at_k([1, 9, 2], {1, 2}, 10) == pytest.approx(1.5 / (1 + 1 / math.log2(3)))
    assert metrics.ndcg_at_k([1, 2], {1, 2}) == pytest.approx(1.0)
    assert metrics.ndcg_at_k([5, 6], {1}) == 0.0


def test_recall_mrr_recovery():
    assert metrics.recall_at_k([3, 1, 4, 2], {1, 2}, 2) == 0.5
    assert metrics.recall_at_k([3, 1, 4, 2], {1, 2}, 10) == 1.0
    assert metrics.reciprocal_rank([3, 1, 4], {1, 4}) == 0.5
    assert metrics.reciprocal_rank([3], {1}) == 0.0
    assert metrics.fact_recovered({1, 2, 3}, [1, 2]) and not metrics.fact_recovered({1}, [1, 2])
    assert not metrics.fact_recovered({1}, [])
    assert metrics.session_recall_at_k([{"s1"}, {"s1"}, {"s2"}], {"s2", "s3"}, 10) == 0.5


def test_percentile_matches_numpy_linear():
    assert metrics.percentile([1, 2, 3, 4], 50) == 2.5
    assert metrics.percentile([10, 20, 30, 40, 50], 95) == pytest.approx(48.0)


# ---------------------------------------------------------------- statistics (hand-computed)
def test_wilcoxon_known_exact_p():
    # five positive differences: W- = 0, exact two-sided p = 2 / 2**5
    assert stats.wilcoxon_p([2, 3, 4, 5, 6], [1, 1, 1, 1, 1]) == pytest.approx(0.0625)
    # differences 1,-2,3,4,5,6: W- = 2; subsets of {1..6} summing <= 2: {}, {1}, {2} -> p = 2 * 3/64
    assert stats.wilcoxon_p([1, -2, 3, 4, 5, 6], [0] * 6) == pytest.approx(6 / 64)
    assert stats.wilcoxon_p([1, 2], [1, 2]) == 1.0


def test_mcnemar_exact_known_p():
    a = [True] * 8 + [False] * 2 + [True] * 5
    b = [False] * 8 + [True] * 2 + [True] * 5
    only_a, only_b, p = stats.mcnemar_exact(a, b)
    assert (only_a, only_b) == (8, 2)
    assert p == pytest.approx(2 * (1 + 10 + 45) / 1024)  # two-sided binomial tail P(X <= 2 | n=10, 1/2)
    assert stats.mcnemar_exact([True], [True])[2] == 1.0


def test_holm_cohen_bootstrap():
    assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert stats.holm([0.5, float("nan")])[0] == 0.5
    assert stats.cohens_d_paired([2, 4, 6], [1, 2, 3]) == pytest.approx(2.0)  # diffs 1,2,3: mean 2, sd 1
    assert stats.bootstrap_ci([1, 1, 0], [0.9, 0.9, -0.1]) == pytest.approx((10.0, 10.0, 10.0))
    diff, low, high = stats.bootstrap_ci([1, 0, 1, 1, 0, 1], [0, 0, 1, 0, 0, 1], seed=1)
    assert diff == pytest.approx(100 * 2 / 6) and low <= diff <= high


# ---------------------------------------------------------------- compaction
def test_truncation_and_summary_compaction():
    h = load("locomo", FIX / "locomo_mini.json").histories[0]
    turns = chunk(h.messages, None)
    turn_of = {m.meta["dia_id"]: i for i, t in enumerate(turns) for m in t.messages}
    comp = compact("truncation", turns, 2, h.summaries)
    assert comp.kept == [8, 9]
    facts = {f.question: f for f in h.facts}
    assert lost_turns(facts["What is the name of Ada's cat?"], turn_of, comp) == [0]
    assert lost_turns(facts["What colour did Ben paint the bicycle he restored?"], turn_of, comp) == [1, 5]
    keep_all = compact("truncation", turns, 100)
    assert lost_turns(facts["What is the name of Ada's cat?"], turn_of, keep_all) == []
    summ = compact("session_summary", turns, 2, h.summaries)
    assert "Ada adopted a cat" in summ.context and "weather" not in summ.context.split("\n")[0]
    gist = compact("gist", turns, 2)
    # the extractive gist keeps the first 100 characters of each turn: "Pixel" survives, so the fact is not lost
    assert answer_in("Pixel", gist.context)
    assert lost_turns(facts["What is the name of Ada's cat?"], turn_of, gist) == []
    with pytest.raises(ValueError):
        compact("session_summary", turns, 2, {})


# ---------------------------------------------------------------- systems
def _entries(texts):
    return [
        Entry(
            id=i + 1,
            session="s",
            turn=i,
            text=t,
            summary=t,
            tags=[],
            memory_type="fact",
            importance=0.5,
            content_hash=str(i),
        )
        for i, t in enumerate(texts)
    ]


def test_baselines_order_the_same_candidates():
    es = _entries(["the staging port is 5433", "lunch talk", "port 5433 staging database config", "weather"])
    q = "staging database port"
    assert [e.id for e in baseline_order("recency", q, es)] == [4, 3, 2, 1]
    assert [e.id for e in baseline_order("grep", q, es)] == [3, 1]
    assert [e.id for e in baseline_order("overlap", q, es)] == [3, 1]
    r1, r2 = baseline_order("random", q, es), baseline_order("random", q, es)
    assert r1 == r2 and sorted(e.id for e in r1) == [1, 2, 3, 4]


def test_system_catalogue():
    names = [s.name for s in all_systems()]
    assert names[0] == "lantern"
    assert {
        "-semantic",
        "-fulltext",
        "-keyword",
        "-importance",
        "no-mmr",
        "sum-fusion",
        "bm25",
        "dense",
        "recency",
        "grep",
        "keyword-overlap",
        "random",
    } <= set(names)
    bm25 = select(["bm25"])[0]
    assert bm25.config.signals == ("fulltext",) and not bm25.config.use_mmr
    with pytest.raises(ValueError):
        select(["nope"])


def test_unknown_system_error_lists_the_known_names_sorted(tmp_path):
    """Newcomer finding: the known names came from a set, in a different order in every process (string hashing
    is seeded per process); they are sorted, so two runs print the same line."""
    with pytest.raises(ValueError) as info:
        select(["nope", "-semantic"])
    known = str(info.value).split("; known: ")[1].split(", ")
    assert str(info.value).startswith("unknown system(s) nope; known: ") and known == sorted(
        s.name for s in all_systems()
    )
    lines = set()
    for seed in ("1", "2", "3"):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "lantern.cli",
                "eval",
                "jsonl",
                "--data",
                str(FIX / "facts.jsonl"),
                "--out",
                str(tmp_path / "o"),
                "--system",
                "nope",
                "--no-plots",
            ],
            capture_output=True,
            timeout=120,
            env={
                **os.environ,
                "PYTHONHASHSEED": seed,
                "COLUMNS": "2000",
                "LANTERN_EVAL_CACHE": str(tmp_path / "cache"),
            },
        )
        assert proc.returncode == 1
        lines.add(proc.stderr.decode().strip())
    assert lines == {f"error: {info.value}"}


# ---------------------------------------------------------------- end to end
def _check_report(out: Path) -> dict:
    results = json.loads((out / "results.json").read_text())
    report = (out / "report.md").read_text()
    assert render(results) == report  # every number of the report comes from results.json
    for name, s in results["systems"].items():
        assert f"| {name} | {100 * s['overall']['recovered']:.1f}% |" in report
    return results


def test_eval_end_to_end_on_fixture(tmp_path):
    from lantern.eval.run import main

    out = tmp_path / "out"
    results = main(
        "locomo",
        FIX / "locomo_mini.json",
        out,
        split="all",
        keep=2,
        systems=["lantern", "bm25", "grep", "recency"],
        cache_dir=tmp_path / "cache",
        plots=False,
    )
    assert results["dataset"]["lost"] >= 4 and set(results["systems"]) == {"lantern", "bm25", "grep", "recency"}
    assert results["systems"]["lantern"]["overall"]["chars"] <= 6000
    assert "adversarial" in results["systems"]["lantern"]["by_category"]
    cmp = {r["system"]: r for r in results["comparisons"]["recovered"]}
    assert set(cmp) == {"bm25", "grep", "recency"} and "mcnemar_p_holm" in cmp["grep"]
    _check_report(out)
    # a rerun reuses the cached archive (no new batches timed) and gives the same numbers
    again = main(
        "locomo",
        FIX / "locomo_mini.json",
        tmp_path / "out2",
        split="all",
        keep=2,
        systems=["lantern", "bm25", "grep", "recency"],
        cache_dir=tmp_path / "cache",
        plots=False,
    )
    assert again["archive_latency_ms"]["turns_timed"] == 0
    assert again["systems"]["lantern"]["overall"]["recovered"] == results["systems"]["lantern"]["overall"]["recovered"]


def test_cli_eval_on_jsonl(tmp_path):
    proc = lantern(
        "eval",
        "jsonl",
        "--data",
        str(FIX / "facts.jsonl"),
        "--out",
        str(tmp_path / "o"),
        "--split",
        "all",
        "--keep",
        "1",
        "--system",
        "lantern",
        "--system",
        "grep",
        "--no-plots",
        columns=200,
        env={"LANTERN_EVAL_CACHE": str(tmp_path / "cache")},
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert "lantern recovered" in proc.stdout.decode()
    _check_report(tmp_path / "o")


@pytest.mark.real_models  # a figure of the real pipeline: the real models
@pytest.mark.skipif(not LOCOMO.exists(), reason="../shared/data/locomo not present")
def test_eval_on_real_locomo_slice(tmp_path, eval_cache):
    """The first six sessions of conv-26 (tune split) and the questions whose evidence lies in them: small enough
    to archive in a few seconds, real enough to exercise every stage."""
    from lantern.eval.run import evaluate

    ds = load("locomo", LOCOMO)
    assert ds.sha256 == "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4" and ds.unresolved_ids == 5
    ds = ds.select("tune", limit=1)
    h = ds.histories[0]
    h.messages = [m for m in h.messages if int(m.session.split("_")[1]) <= 6]
    known = {m.meta["dia_id"] for m in h.messages}
    h.facts = [f for f in h.facts if f.evidence and set(f.evidence) <= known]
    out = tmp_path / "out"
    results = evaluate(
        ds,
        out_dir=out,
        split="tune",
        keep=10,
        systems=select(["lantern", "bm25", "dense"]),
        cache_dir=eval_cache,  # conv-26's store, shared with test_eval_floor.py
    )
    assert results["dataset"]["histories"] == ["conv-26"] and results["dataset"]["lost"] >= 30
    assert (out / "recovered.png").stat().st_size > 1000
    r = _check_report(out)
    assert r["systems"]["lantern"]["overall"]["recovered"] > 0.3
    assert r["comparisons"]["recall@10"][0]["n_histories"] == 1


def test_eval_measures_recency_from_the_compaction_not_the_wall_clock(tmp_path, monkeypatch):
    """Each pool's ``as_of`` is one second after its history's latest turn, and every system's recovery takes it:
    the importance scores of a question are then the same whatever the clock says (sum-fusion adds them, min-max
    scaled from float32, and its rows once changed run to run). Without ``as_of`` they change with the clock."""
    import types
    from datetime import timezone

    from lantern.eval.cases import cases_of, prepare
    from lantern.eval.systems import run_system, select
    from lantern.recover import rank as pipeline

    ds = load("locomo", FIX / "locomo_mini.json")
    prepared, _ = prepare(ds, tmp_path / "cache")
    cases, pools, _ = cases_of(prepared, ds.histories, "truncation", lambda _: 2)
    h = ds.histories[0]
    lantern = prepared[h.id].lantern
    latest = max(e.time for e in lantern.store.entries(sorted(set(prepared[h.id].entry_ids))).values())
    pool = pools[h.id]
    assert pool.as_of is not None and pool.as_of.tzinfo is timezone.utc
    assert pool.as_of.timestamp() == pytest.approx(latest.timestamp() + 1.0)
    question = next(c.question for c in cases if c.history == h.id)

    def importance(clock: float, as_of) -> dict[int, float]:
        monkeypatch.setattr(pipeline, "time", types.SimpleNamespace(time=lambda: clock))
        rec = lantern.explain(question, exclude=pool.excluded, as_of=as_of)
        return {c.entry.id: c.scores["importance"] for c in rec.candidates if "importance" in c.scores}

    now = time.time()
    assert importance(now, None) != importance(now + 3 * 365 * 86400, None)  # the clock moves the scores
    assert importance(now, pool.as_of) == importance(now + 3 * 365 * 86400, pool.as_of)
    seen = []
    real = type(lantern).explain
    monkeypatch.setattr(
        type(lantern), "explain", lambda self, *a, **kw: seen.append(kw.get("as_of")) or real(self, *a, **kw)
    )
    run_system(select(["sum-fusion"])[0], lantern, question, pool, 6000)
    assert seen == [pool.as_of]


def _slow_dataset(path: Path, histories: int = 2, turns: int = 200) -> Path:
    """A generic JSONL fact set big enough that each history's job runs for seconds (a fact per user turn)."""
    with path.open("w", encoding="utf-8") as f:
        for h in range(histories):
            messages, facts = [], []
            for t in range(turns):
                messages += [
                    {
                        "id": f"u{t}",
                        "role": "user",
                        "content": f"Service {h}-{t} listens on port {5000 + t} in rack R{t % 17}.",
                    },
                    {"id": f"a{t}", "role": "assistant", "content": f"Noted: service {h}-{t} on port {5000 + t}."},
                ]
                facts.append(
                    {
                        "id": f"f{t}",
                        "question": f"Which port does service {h}-{t} use?",
                        "answer": str(5000 + t),
                        "evidence": [f"u{t}"],
                    }
                )
            f.write(json.dumps({"id": f"h{h}", "split": "report", "messages": messages, "facts": facts}) + "\n")
    return path


@pytest.mark.parametrize("group", [False, True], ids=["parent-only", "process-group"])
def test_ctrl_c_stops_eval_workers_at_once_without_tracebacks(tmp_path, group):
    """SIGINT during the jobs, to the parent alone (``kill -INT``) or to the whole process group (Ctrl-C in a
    terminal): the parent terminates the workers (which ignore SIGINT) at once instead of waiting for their running
    jobs (~10 s each here; before, the parent-only case waited them out); one line, exit 130, no report, no worker
    traceback."""
    import signal
    import time

    data = _slow_dataset(tmp_path / "slow.jsonl")
    env = {**os.environ, "LANTERN_EVAL_CACHE": str(tmp_path / "cache")}
    args = [
        sys.executable,
        "-m",
        "lantern.cli",
        "eval",
        "jsonl",
        "--data",
        str(data),
        "--split",
        "all",
        "--keep",
        "2",
        "--system",
        "lantern",
        "--no-plots",
        "--budgets",
        "",
        "--ratios",
        "",
        "--workers",
        "2",
    ]
    proc = subprocess.Popen(
        [*args, "--out", str(tmp_path / "o")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
        preexec_fn=_sigint_default,
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None and len(_children(proc.pid)) < 2:
        time.sleep(0.2)  # the cache is built in the parent first; then the two workers start
    assert proc.poll() is None, proc.communicate()[1].decode()
    time.sleep(1.5)  # both workers are inside their jobs
    (os.killpg if group else os.kill)(proc.pid, signal.SIGINT)
    started = time.monotonic()
    out, err = proc.communicate(timeout=120)
    assert time.monotonic() - started < 5  # the running jobs are not waited for
    assert proc.returncode == 130, err.decode()
    assert "Traceback" not in err.decode() and "interrupted: nothing was written" in err.decode()
    assert not (tmp_path / "o" / "results.json").exists()


def _sigint_default() -> None:
    """In the child before exec: SIGINT back to its default, so Python installs its KeyboardInterrupt handler even
    when this test runs from a shell's background job (which starts with SIGINT ignored, inherited by children)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _children(pid: int) -> list[int]:
    """Process ids of the multiprocessing workers whose parent is ``pid`` (Linux /proc)."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == pid and b"spawn_main" in cmdline:
            kids.append(int(stat.parent.name))
    return kids


def test_a_history_without_messages_is_evaluated_not_a_missing_cache_file(tmp_path):
    """A JSONL history with no message (beside others that have some) got no cached entry-id sidecar, and the run
    failed with 'No such file or directory: <cache>/empty.json'; it is archived as an empty store and counted."""
    from lantern.eval.run import main

    data = tmp_path / "mixed.jsonl"
    data.write_text(
        (FIX / "facts.jsonl").read_text().splitlines()[0]
        + "\n"
        + json.dumps({"id": "empty", "messages": [], "facts": []})
        + "\n"
    )
    results = main(
        "jsonl",
        data,
        tmp_path / "out",
        split="all",
        keep=1,
        systems=["lantern", "grep"],
        cache_dir=tmp_path / "cache",
        plots=False,
        budgets=[],
        ratios=[],
    )
    assert results["dataset"]["histories"] == ["proj-1", "empty"] and results["dataset"]["lost"] >= 1
    assert results["dataset"]["per_history"]["empty"] == {"facts": 0, "no_evidence": 0, "kept": 0, "lost": 0}
