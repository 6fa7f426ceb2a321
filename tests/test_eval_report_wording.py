"""report.md's wording follows the run it reports (newcomer findings): singular and plural by the count ("the 1
histories resampled" was printed), a statistics section that says when it leaves out histories without a lost
fact, a headline that mentions the separately reported adversarial category only when the run has it (aider and
MemDaily reports said "categories adversarial reported separately"), and a Data line giving only this dataset's
split (it listed the LoCoMo, MemDaily and aider splits in every report)."""

from __future__ import annotations

import json
from pathlib import Path

from clirun import lantern
from lantern.eval.report import render
from lantern.eval.run import main

FIX = Path(__file__).parent / "fixtures" / "eval"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "results"


def history(hid: str, evidence: str) -> dict:
    """Two turns; the fact's evidence is message ``evidence`` (m1: the first turn, lost with ``--keep 1``; m3: the
    last turn, kept)."""
    return {
        "id": hid,
        "messages": [
            {"id": "m1", "role": "user", "content": f"In {hid} the staging database listens on port 5433."},
            {"id": "m2", "role": "assistant", "content": "Noted."},
            {"id": "m3", "role": "user", "content": f"In {hid} deploy keys live in ops/keys/{hid}_ed25519."},
            {"id": "m4", "role": "assistant", "content": "OK."},
        ],
        "facts": [
            {
                "id": "f",
                "question": "Which port does the staging database use?"
                if evidence == "m1"
                else "Where do the deploy keys live?",
                "answer": "5433" if evidence == "m1" else f"ops/keys/{hid}_ed25519",
                "evidence": [evidence],
            }
        ],
    }


def run_cli(tmp_path: Path, data: Path, *extra: str) -> str:
    out = tmp_path / "out"
    proc = lantern(
        "eval",
        "jsonl",
        "--data",
        str(data),
        "--out",
        str(out),
        "--keep",
        "1",
        "--system",
        "lantern",
        "--system",
        "grep",
        "--budgets",
        "",
        "--ratios",
        "",
        "--no-plots",
        *extra,
        columns=200,
        env={"LANTERN_EVAL_CACHE": str(tmp_path / "cache")},
    )
    assert proc.returncode == 0, proc.stderr.decode()
    report = (out / "report.md").read_text(encoding="utf-8")
    assert render(json.loads((out / "results.json").read_text())) == report
    return report


def test_one_history_with_lost_facts_of_two_is_said_in_the_singular_and_the_other_named_left_out(tmp_path):
    data = tmp_path / "two.jsonl"
    data.write_text("\n".join(json.dumps(h) for h in (history("alpha", "m1"), history("beta", "m3"))) + "\n")
    report = run_cli(tmp_path, data)
    assert "lost to the compaction 1, kept by it 1" in report
    stats = [line for line in report.splitlines() if line.startswith("Δ = ")]
    assert len(stats) == 2
    for line in stats:
        assert "(the 1 history resampled with all its facts)" in line, line
        assert "over the 1 per-history mean (smallest attainable p with 1 history: 1)" in line, line
        assert line.endswith(
            "2 histories, 1 with lost facts: a history without one is left out of these statistics."
        ), line
        assert "histories resampled" not in line and "1 histories" not in line
    assert "\n## Headline\n" in report  # a JSONL fact set has no adversarial category
    data_line = next(line for line in report.splitlines() if line.startswith("- Data: "))
    assert data_line.endswith(
        '; report split (the histories whose "split" is "report" or not given); no parameter was tuned on it.'
    ), data_line
    assert "last 1 turn kept verbatim" in report and "1 turns" not in report


def test_the_counts_agree_with_the_histories_when_every_history_lost_a_fact(tmp_path):
    data = tmp_path / "two.jsonl"
    data.write_text("\n".join(json.dumps(h) for h in (history("alpha", "m1"), history("beta", "m1"))) + "\n")
    report = run_cli(tmp_path, data, "--limit", "2")
    line = next(line for line in report.splitlines() if line.startswith("Δ = "))
    assert "(the 2 histories resampled with all their facts)" in line and "over the 2 per-history means" in line
    assert "with 2 histories: 0.5" in line and "left out" not in line, line
    assert ", first 2 histories; no parameter was tuned on it." in report


def test_headline_and_data_line_follow_the_dataset(tmp_path):
    locomo = main(
        "locomo",
        FIX / "locomo_mini.json",
        tmp_path / "l",
        split="tune",
        keep=2,
        systems=["lantern", "grep"],
        cache_dir=tmp_path / "cache",
        plots=False,
        budgets=[],
        ratios=[],
    )
    report = render(locomo)
    assert "adversarial" in locomo["systems"]["lantern"]["by_category"]
    assert "\n## Headline (category adversarial reported separately)\n" in report
    assert "; tune split (LoCoMo conversations 1–5): parameters may be tuned here; not for claims." in report
    assert "MemDaily" not in report and "aider" not in report

    aider = render(
        main(
            "aider",
            FIX / "aider_mini.md",
            tmp_path / "a",
            split="all",
            systems=["lantern", "grep"],
            cache_dir=tmp_path / "cache",
            plots=False,
            budgets=[],
            ratios=[],
        )
    )
    assert "\n## Headline\n" in aider and "adversarial" not in aider and "LoCoMo" not in aider

    memdaily = render(
        main(
            "memdaily",
            FIX / "memdaily",
            tmp_path / "m",
            split="report",
            keep=1,
            systems=["lantern", "grep"],
            cache_dir=tmp_path / "cache",
            plots=False,
            budgets=[],
            ratios=[],
        )
    )
    assert "\n## Headline\n" in memdaily and "adversarial" not in memdaily
    assert "; report split (MemDaily types other than 01); no parameter was tuned on it." in memdaily
    assert "LoCoMo" not in memdaily and "aider" not in memdaily


def test_the_published_reports_are_rendered_from_their_results():
    """docs/results/*/report.md are render(results.json), as every report is."""
    for name in ("locomo", "memdaily"):
        report = (DOCS / name / "report.md").read_text(encoding="utf-8")
        assert render(json.loads((DOCS / name / "results.json").read_text(encoding="utf-8"))) == report, name
    assert "## Headline (category adversarial reported separately)" in (DOCS / "locomo" / "report.md").read_text()
    assert "\n## Headline\n" in (DOCS / "memdaily" / "report.md").read_text()
