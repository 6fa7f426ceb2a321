"""``lantern eval realcompact``: the protocol of the realcompact dataset (eval/realcompact.py), on a small dataset
written here in its format, and on the real one when ``../shared/data/realcompact`` is present."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clirun import lantern
from lantern.eval import realcompact as rc

REAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "realcompact"


def turn(role: str, text: str, tool: str | None = None) -> dict:
    return {"role": role, "text": text, "tool": tool}


def dataset(root: Path) -> Path:
    """Two sessions; the second compacts twice. Each compaction's summary keeps one specific and loses another,
    which the turns after it use (the dataset's fact). Small enough that every lost specific fits in 4,000
    characters: the test checks the protocol, not the ranking."""
    root.mkdir(parents=True)
    (root / "sessions").mkdir()
    docs = []
    for s in range(2):
        before = []
        events = []
        for k in range(1 + s):
            for i in range(5):
                n = 100 * s + 20 * k + i
                before += [
                    turn("user", f"Fix the handler in pkg/svc_{n}/handler_{n}.go, then run the tests."),
                    turn("assistant", json.dumps({"command": f"go test ./pkg/svc_{n}/... --run Test{n}"}), "Bash"),
                    turn("tool", f"ok pkg/svc_{n} 0.{n}s"),
                    turn("assistant", f"Fixed handler_{n}.go; the flag --retries-{n} is now honoured."),
                ]
            lost = f"pkg/svc_{100 * s + 20 * k}/handler_{100 * s + 20 * k}.go"
            kept = f"--retries-{100 * s + 20 * k + 1}"
            events.append(
                {
                    "k": k,
                    "summary": f"This session is being continued. The user fixed handlers; {kept} honoured.",
                    "before": list(before),
                    "after": [],
                    "facts": [{"token": lost, "type": "path", "before_idx": [0]}],
                    "kept": [{"token": kept, "type": "flag"}],
                }
            )
        docs.append({"id": f"repo__s{s}", "source": {"repo": f"o/r{s}"}, "events": events})
    for doc in docs:
        (root / "sessions" / f"{doc['id']}.json").write_text(json.dumps(doc))
    (root / "sessions" / "broken.json").write_text("{not json")
    return root


def test_the_protocol_runs_every_system_and_recovers_the_lost_path(tmp_path):
    data = dataset(tmp_path / "rc")
    results, skipped = rc.run(data)
    assert [name for name, _ in skipped] == ["broken.json"]
    assert len(results) == 3  # every compaction with a fact
    for r in results:
        assert set(r.recovered) == {(s, b) for s in rc.SYSTEMS for b in rc.BUDGETS}
        assert r.recovered["lantern", 4000] == [r.event.facts[0]["token"]]  # the lost path came back
        assert r.event.kept[0]["token"] not in {it.value for it in r.loss.items}  # what the summary kept is not lost
        assert all(r.chars[s, b] <= b for s in rc.SYSTEMS for b in rc.BUDGETS)
    table = rc.summary_table(results, rc.BUDGETS, rc.SYSTEMS)
    assert table["budgets"][4000]["systems"]["lantern"]["macro"] == 100.0
    text = rc.render(results, rc.BUDGETS, rc.SYSTEMS, {"seconds": 1.0})
    assert "## Budget 4,000 characters" in text and "o/r1" in text and "not a candidate" in text


def test_worker_processes_give_the_same_figures(tmp_path):
    data = dataset(tmp_path / "rc")
    one, _ = rc.run(data, workers=1, systems=("lantern", "newest-turns"))
    two, _ = rc.run(data, workers=2, systems=("lantern", "newest-turns"))
    assert [(r.event.session, r.event.k, r.recovered, r.chars) for r in one] == [
        (r.event.session, r.event.k, r.recovered, r.chars) for r in two
    ]


def test_the_cli_writes_the_report_and_the_fit(tmp_path):
    data = dataset(tmp_path / "rc")
    out = tmp_path / "out"
    proc = lantern("eval", "realcompact", "--data", str(data), "--out", str(out), "--fit", "--system", "lantern")
    assert proc.returncode == 0, proc.stderr.decode()
    assert "3 compactions, 3 lost facts" in proc.stdout.decode()
    assert (out / "report.md").read_text().startswith("# Recovery after real Claude Code compactions")
    fit = json.loads((out / "fit.json").read_text())
    assert set(fit["weights"]) == set(rc.FEATURES)


def test_a_folder_without_sessions_is_one_clear_error(tmp_path):
    proc = lantern("eval", "realcompact", "--data", str(tmp_path), "--out", str(tmp_path / "o"))
    assert proc.returncode == 1 and "no sessions/ folder" in proc.stderr.decode()


@pytest.mark.skipif(not REAL.is_dir(), reason="../shared/data/realcompact is absent")
def test_on_a_real_session_lantern_finds_what_the_summary_lost():
    """The smallest real session: every fact the dataset labels is among the lost items (candidate recall), and
    the block at 6,000 characters holds at least one."""
    with_facts = [p for p in (REAL / "sessions").glob("*.json") if '"facts": [{' in p.read_text()]
    small = min(with_facts, key=lambda p: p.stat().st_size)
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        one = Path(tmp) / "one"
        (one / "sessions").mkdir(parents=True)
        shutil.copy(small, one / "sessions" / small.name)
        results, _ = rc.run(one, systems=("lantern",), workers=1)
    assert results
    for r in results:
        values = [it.value for it in r.loss.items]
        found = sum(any(f["token"] in v for v in values) for f in r.event.facts)
        assert found >= len(r.event.facts) * 0.5
