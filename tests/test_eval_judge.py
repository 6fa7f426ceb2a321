"""The judge of ``eval --qa`` and its calibration (issue #34 item 5; eval/judge.py): the known answers are right or
wrong by construction for any gold, in English and Chinese; a judge that calls everything CORRECT (or everything
WRONG, or nothing readable) is refused and its column is not printed; a sensible judge is reported. The judges are
fake endpoints reached through the real client (tests/openai_fake.py), and the real SmolLM2 (tests/llm_server.py)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from lantern.eval import judge
from lantern.eval.answers import tokens
from lantern.eval.datasets import Fact

FIX = Path(__file__).parent / "fixtures" / "eval"


# ---------------------------------------------------------------- fake judges (through the real client)
def _is_judge(request: dict) -> bool:
    return request["messages"][0]["content"] in judge.JUDGE.values()


# ---------------------------------------------------------------- the known answers
_WORD = st.sampled_from(
    "pixel lisbon dark green cat the a know i don t sunday before june may two three one seven twelve yes no "
    "Ada Ben Cy Lisbon Matt Patterson and , ; . 2023 07 9 19 北京 上海 豆豆 商场 我 不 知道 三".split()
)
_GOLD = st.lists(_WORD, min_size=1, max_size=6).map(" ".join)
_QUESTION = st.sampled_from(
    ["What did Ada adopt?", "Where did Ben go with Cy?", "When did Ada meet Ben?", "我的上司是哪里人？", "狗叫什么？"]
)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(_QUESTION, _GOLD), min_size=1, max_size=8))
def test_known_answers_are_right_or_wrong_by_construction(pairs):
    """Every known-right answer holds every token of its gold; every known-wrong one misses one (so no fair judge
    calls it CORRECT); the wrong kinds are present when they can be built; items are in the question's language."""
    facts = [Fact(f"f{i}", q, g, [], "single-hop") for i, (q, g) in enumerate(pairs)]
    items = judge.calibration_set(facts, facts)
    graded = [f for f in facts if judge.gradable(f)]
    assert Counter(i.kind for i in items)["gold"] == len(graded)
    for it in items:
        gold, said = Counter(tokens(it.gold)), Counter(tokens(it.answer))
        if it.right:
            assert not gold - said, it
        else:
            assert gold - said, it
        if it.kind == "abstention":
            assert it.answer == judge.ABSTENTION["zh" if re.search(r"[\u4e00-\u9fff]", it.question) else "en"]
    for f in graded:  # an abstention exists unless the gold is all abstention words
        mine = [i for i in items if i.question == f.question and i.gold == f.answer.strip()]
        if set(tokens(f.answer)) - set(tokens(judge.ABSTENTION[judge.language(f.question)])):
            assert any(i.kind == "abstention" for i in mine)


@pytest.mark.parametrize(
    "gold, names, expected",
    [
        ("7 May 2023", [], "8 May 2024"),
        ("the Sunday before 09 June 2023", [], "the Sunday before 10 June 2024"),
        ("Three times a week", [], "Four times a week"),
        ("Yes, she is supportive", [], "No, she is supportive"),
        ("no", [], "yes"),
        ("Lisbon", ["Ada"], "Ada"),
        ("Matt Patterson", ["Matt", "Ada"], "Ada Patterson"),  # a name the gold holds is not used
        ("Brave by Sara Bareilles", ["Ben"], "Brave by Ben Bareilles"),
        ("Read a book", ["Ben"], None),  # a capitalized opening word is not a name
        ("Spain, England", ["Ben"], None),  # a list would stay partly right
        ("dark green", ["Ben"], None),
        ("this one went badly", [], None),  # "one" is a pronoun here
        ("2023年5月7日", [], "2024年6月8日"),
        ("北京", ["Ben"], None),
    ],
)
def test_changed_values(gold, names, expected):
    assert judge.changed(gold, names) == expected


def test_calibration_set_on_the_locomo_fixture():
    from lantern.eval.datasets import load

    facts = [f for h in load("locomo", FIX / "locomo_mini.json").histories for f in h.facts]
    items = judge.calibration_set(facts, facts)
    by = {(i.gold, i.kind): i.answer for i in items}
    assert by[("Pixel", "paraphrase")] == "The answer is: Pixel."
    assert by[("Pixel", "other_gold")] == "Lisbon"  # the next question's gold shares no token
    assert by[("Pixel", "changed")] in ("Ada", "Ben", "Cy")
    assert by[("the Sunday before 27 June 2023", "changed")] == "the Sunday before 28 June 2024"
    assert by[("three", "changed")] == "four"
    assert ("dark green", "changed") not in by
    assert not any(i.gold == "" for i in items)  # the adversarial question (no gold) is not graded


# ---------------------------------------------------------------- the decision
def test_decide_by_hand():
    assert judge.decide(10, 10, 0, 15)[0]
    assert judge.decide(10, 10, 3, 15)[0]  # 20% of the known-wrong may pass
    ok, why, _ = judge.decide(10, 10, 4, 15)
    assert not ok and why == "the judge called 4 of 15 known-wrong answers CORRECT"
    ok, why, p = judge.decide(0, 10, 0, 15)  # WRONG to everything
    assert not ok and "no better than chance" in why and p == 1.0
    ok, why, p = judge.decide(2, 4, 0, 6)  # too few to tell from chance: C(4,2) / C(10,2)
    assert not ok and p == pytest.approx(6 / 45)
    assert not judge.decide(0, 0, 0, 0)[0]


def _questions(lang: str) -> list[Fact]:
    if lang == "zh":
        pairs = [("我的上司是哪里人？", "北京"), ("我同事的狗叫什么名字？", "豆豆"), ("我们哪一年见面？", "2023年")]
    else:
        pairs = [("What is Ada's cat called?", "Pixel"), ("When did Ben run?", "7 May 2023"), ("Colour?", "dark green")]
    return [Fact(f"f{i}", q, a, [], "single-hop") for i, (q, a) in enumerate(pairs)]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_fake_judges_through_the_client(lang):
    from lantern.llm import LLMClient
    from openai_fake import FakeLLM, answer, sensible_judge, status

    facts = _questions(lang)
    items = judge.calibration_set(facts, facts)
    with FakeLLM([sensible_judge]) as fake:
        cal = judge.calibrate(LLMClient(fake.settings()), items)
        assert {r["messages"][0]["content"] for r in fake.requests} == {judge.JUDGE[lang]}
    assert cal["reported"] and cal["reason"] == "" and cal["known_wrong"]["called_correct"] == 0
    assert cal["known_right"]["called_correct"] == cal["known_right"]["n"] == 2 * len(facts)
    assert cal["calls"] == len(items) == len(cal["items"]) and cal["accuracy"] == 1.0 and cal["fisher_p"] < 0.05
    assert "reported." in judge.render_calibration(cal)
    with FakeLLM([answer('{"label": "CORRECT"}')]) as fake:
        cal = judge.calibrate(LLMClient(fake.settings()), items)
    n = cal["known_wrong"]["n"]
    assert not cal["reported"] and cal["reason"] == f"the judge called {n} of {n} known-wrong answers CORRECT"
    assert judge.render_calibration(cal).startswith(f"- Judge column not reported: the judge called {n} of {n} ")
    with FakeLLM([answer("I would say it depends")]) as fake:  # unreadable: no better than chance
        cal = judge.calibrate(LLMClient(fake.settings()), items)
    assert not cal["reported"] and "no better than chance" in cal["reason"] and cal["unparsed"] == len(items)
    with FakeLLM([status(500)]) as fake:
        cal = judge.calibrate(LLMClient(fake.settings(timeout_s=2)), items)
    assert not cal["reported"] and cal["errors"] == len(items) and cal["calls"] == len(items)


# ---------------------------------------------------------------- a whole --qa run
def _main(tmp_path, fake, out: str):
    from lantern.eval.run import main

    return main(
        "locomo",
        FIX / "locomo_mini.json",
        tmp_path / out,
        split="all",
        keep=2,
        systems=["lantern"],
        cache_dir=tmp_path / "cache",
        plots=False,
        budgets=[],
        ratios=[],
        workers=1,
        llm_base_url=fake.base_url,
        llm_model="fake-model",
        qa=True,
        qa_limit=1,
        budget=1500,
    )


def test_qa_prints_no_judge_column_for_a_judge_that_cannot_judge(tmp_path, monkeypatch):
    from lantern.eval import qa
    from lantern.eval.report import render
    from openai_fake import FakeLLM, answer, sensible_judge, shaped

    monkeypatch.setenv("LANTERN_LLM_JSON_MODE", "object")
    monkeypatch.setenv("LANTERN_LLM_TIMEOUT", "10")
    with FakeLLM([shaped(answer('{"label": "CORRECT"}'))]) as fake:
        results = _main(tmp_path, fake, "yes-man")
        judged = [r for r in fake.requests if _is_judge(r)]
    section = results["qa"]
    cal = section["judge_calibration"]
    n = cal["known_wrong"]["n"]
    assert not cal["reported"] and cal["known_wrong"]["called_correct"] == n > 0
    assert len(judged) == cal["calls"] == len(cal["items"])  # the refused judge graded no answer
    assert all(section["conditions"][c]["correct"] is None for c in qa.CONDITIONS)
    assert all(section["conditions"][c]["judge_calls"] == 0 for c in qa.CONDITIONS)
    assert "judge" not in section["comparisons"] and "F1" in section["comparisons"]
    report = (tmp_path / "yes-man" / "report.md").read_text()
    assert render(json.loads((tmp_path / "yes-man" / "results.json").read_text())) == report
    assert f"- Judge column not reported: the judge called {n} of {n} known-wrong answers CORRECT" in report
    assert "| condition | n | n/a | EM | F1 | errors |" in report and "Paired comparisons: judge" not in report

    with FakeLLM([shaped(sensible_judge)]) as fake:
        results = _main(tmp_path, fake, "fair")
        judged = [r for r in fake.requests if _is_judge(r)]
    section = results["qa"]
    cal = section["judge_calibration"]
    assert cal["reported"] and cal["known_wrong"]["called_correct"] == 0 and cal["questions"] == 6
    answers_judged = sum(section["conditions"][c]["judge_calls"] for c in qa.CONDITIONS)
    assert answers_judged > 0 and len(judged) == cal["calls"] + answers_judged
    # every answer was "Pixel": correct exactly for the question whose gold is Pixel
    rows = [json.loads(x) for x in (tmp_path / "fair" / "qa.jsonl").read_text().splitlines()]
    assert all(r["correct"] == (r["gold"] == "Pixel") for r in rows if r["applicable"] and r["gold"])
    report = (tmp_path / "fair" / "report.md").read_text()
    assert "| condition | n | n/a | judge | EM | F1 | judge unparsed |" in report
    assert "- Judge calibration: " in report and "): reported." in report
    assert "Paired comparisons: judge" in report


# ---------------------------------------------------------------- the real model
def test_smollm2_calibration_on_the_locomo_fixture(local_llm):
    """What SmolLM2-135M does with the calibration: whatever it says, the counts add up and the decision follows
    ``decide``; the numbers are printed for docs/evaluation.md."""
    from lantern.eval.datasets import load
    from lantern.llm import LLMClient

    facts = [f for h in load("locomo", FIX / "locomo_mini.json").histories for f in h.facts]
    items = judge.calibration_set(facts[:3], facts)
    with LLMClient(local_llm.settings) as client:
        cal = judge.calibrate(client, items)
    kr, kw = cal["known_right"], cal["known_wrong"]
    # one call per item, and one refused probe when the server refuses json_schema (llm.py's fallback, counted)
    assert len(items) <= cal["calls"] <= len(items) + 1 and kr["n"] + kw["n"] == len(items) and cal["errors"] == 0
    decided = judge.decide(kr["called_correct"], kr["n"], kw["called_correct"], kw["n"])
    assert (cal["reported"], cal["reason"]) == decided[:2]
    print(judge.render_calibration(cal))
    for r in cal["items"]:
        print(r["kind"], repr(r["answer"]), r["verdict"])


def test_the_cli_says_why_the_judge_is_not_reported(tmp_path):
    """``lantern eval --qa`` prints the refusal and the F1 per condition (there is no judge share to print)."""
    import os
    import subprocess
    import sys

    from openai_fake import FakeLLM, answer, shaped

    with FakeLLM([shaped(answer('{"label": "CORRECT"}'))]) as fake:
        proc = subprocess.run(
            [sys.executable, "-m", "lantern.cli", "eval", "locomo", "--data", str(FIX / "locomo_mini.json")]
            + ["--out", str(tmp_path / "o"), "--split", "all", "--keep", "2", "--system", "lantern", "--no-plots"]
            + ["--budgets", "", "--ratios", "", "--budget", "1500", "--qa", "--qa-limit", "1", "--qa-calibration", "2"]
            + ["--llm-base-url", fake.base_url, "--llm-model", "fake-model"],
            capture_output=True,
            timeout=300,
            env={**os.environ, "LANTERN_EVAL_CACHE": str(tmp_path / "cache"), "LANTERN_LLM_JSON_MODE": "object"},
        )
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    cal = json.loads((tmp_path / "o" / "results.json").read_text())["qa"]["judge_calibration"]
    assert cal["questions"] == 2
    n = cal["known_wrong"]["n"]
    assert f"judge not reported: the judge called {n} of {n} known-wrong answers CORRECT" in out
    assert "answer F1: compacted " in out and "answer accuracy" not in out
