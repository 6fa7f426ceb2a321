"""Answer accuracy in the evaluation (issue #18 item 4; eval/qa.py, eval/memgpt.py): the scoring functions on
generated inputs, the judge, letter, memory and query parsers on every answer shape, the statistics wiring on
hand-computed rows, failure shapes through the local fake endpoint (tests/openai_fake.py), a whole free-text run
through it, and one small real run against SmolLM2 (tests/llm_server.py) whose every condition carries its
costs."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from lantern.eval import qa
from lantern.eval.answers import abstained, exact_match, normalize, parse_letter, token_f1, tokens
from lantern.eval.judge import parse_judge
from lantern.eval.memgpt import memory_block, parse_memories, parse_queries, round_robin
from lantern.eval.qa import compare_qa, pick, summarize_qa

FIX = Path(__file__).parent / "fixtures" / "eval"
WORD = st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=8).filter(lambda w: w not in ("a", "an", "the"))
HAN = st.text(alphabet="北京深圳上海豆豆狗名字", min_size=1, max_size=6)


# ---------------------------------------------------------------- normalization, EM, F1
@given(st.lists(WORD, min_size=1, max_size=6), st.data())
def test_exact_match_ignores_case_punctuation_articles_and_spacing(words, data):
    gold = " ".join(words)
    noisy = []
    for w in words:
        if data.draw(st.booleans()):
            noisy.append(data.draw(st.sampled_from(["the", "a", "An", "THE"])))
        w = w.upper() if data.draw(st.booleans()) else w.capitalize()
        noisy.append(w + data.draw(st.sampled_from(["", ".", ",", "!", "?", "'", '"', ";", "…", "，"])))
    pred = data.draw(st.sampled_from(["", "  ", "\t"])) + "  ".join(noisy) + data.draw(st.sampled_from(["", ".", " !"]))
    assert exact_match(pred, gold)
    assert token_f1(pred, gold) == 1.0


@given(st.lists(WORD, min_size=1, max_size=5), st.lists(WORD, min_size=1, max_size=5))
def test_token_f1_is_symmetric_bounded_and_one_only_for_the_same_bag(a, b):
    p, g = " ".join(a), " ".join(b)
    f = token_f1(p, g)
    assert 0.0 <= f <= 1.0 and f == pytest.approx(token_f1(g, p))
    assert (f == 1.0) == (sorted(tokens(p)) == sorted(tokens(g)))
    assert exact_match(p, g) <= (f == 1.0)  # exact match implies F1 1, not the other way (word order)


@given(HAN, HAN)
def test_cjk_is_scored_per_character(a, b):
    assert tokens(a) == list(a)
    assert exact_match(a + "。", a) and exact_match(f"“{a}”！", a)
    shared = sum(min(a.count(c), b.count(c)) for c in set(a))
    expected = 0.0 if shared == 0 else 2 * (shared / len(a)) * (shared / len(b)) / (shared / len(a) + shared / len(b))
    assert token_f1(a, b) == pytest.approx(expected)


def test_normalization_by_hand():
    assert normalize("The  Answer: 7 May, 2023!") == "answer 7 may 2023"
    assert normalize("２０２３年") == "2023年"  # NFKC: full-width digits
    assert normalize("$5.00 + tax") == "500 tax"  # symbols (S*) go as SQuAD's string.punctuation does
    assert normalize("Theater, an opera") == "theater opera"  # articles as words only
    assert token_f1("the cat sat", "cat sat down") == pytest.approx(0.8)
    assert token_f1("广东深圳", "深圳") == pytest.approx(2 / 3)
    assert token_f1("北京 Beijing", "Beijing") == pytest.approx(2 * (1 / 3) / (1 / 3 + 1))
    assert token_f1("", "") == 1.0 and token_f1("", "x") == 0.0 and token_f1("...", "x") == 0.0
    assert not exact_match("7 May 2023", "May 7 2023") and token_f1("7 May 2023", "May 7 2023") == 1.0


@pytest.mark.parametrize(
    "answer",
    [
        "no answer",
        "No answer.",
        "NO ANSWER",
        "The conversation does not say.",
        "It is not mentioned.",
        "I don't know",
        "Unknown",
        "This cannot be determined from the context.",
        "",
        "   ",
        "没有答案",
        "不知道。",
        "对话中没有提到。",
        "无法确定",
        "None.",
    ],
)
def test_abstentions(answer):
    assert abstained(answer)


@pytest.mark.parametrize("answer", ["a red bicycle", "7 May 2023", "北京", "Pixel", "the known address", "nonetheless"])
def test_answers_that_do_not_abstain(answer):
    assert not abstained(answer)


# ---------------------------------------------------------------- the judge's answer
@pytest.mark.parametrize(
    "text, verdict",
    [
        ('{"label": "CORRECT"}', True),
        ('{"label": "WRONG"}', False),
        ('{"label":"correct"}', True),
        ('{"verdict": "Wrong"}', False),
        ("CORRECT", True),
        ("WRONG", False),
        ("INCORRECT", False),
        ("  correct.  ", True),
        ("**Correct**", True),
        ("The answer is correct.", True),
        ("The answer is WRONG because the gold answer says Paris, which is the correct city.", False),  # capitals first
        ("label: wrong", False),
        ('"CORRECT"', True),
        ("正确", True),
        ("错误", False),
        ("不正确", False),
        ("CORRECT or WRONG", None),
        ("I am not sure.", None),
        ("", None),
        ('{"label": ""}', None),
        ('{"a": "CORRECT", "b": "WRONG"}', None),
        ("[1, 2]", None),
    ],
)
def test_parse_judge(text, verdict):
    assert parse_judge(text) is verdict


# ---------------------------------------------------------------- the chosen letter
CHOICES = {"A": "广东珠海", "B": "广东深圳", "C": "深圳", "D": "福建厦门"}


@pytest.mark.parametrize(
    "text, letter",
    [
        ('{"choice": "B"}', "B"),
        ('{"choice": "b"}', "B"),
        ('{"answer": "D."}', "D"),
        ('"C"', "C"),
        ("B", "B"),
        ("B.", "B"),
        ("(B)", "B"),
        ("**D**", "D"),
        ("B) 广东深圳", "B"),
        ("B 广东深圳", "B"),
        ("A. 广东珠海", "A"),
        ("答案是C", "C"),
        ("答案：D", "D"),
        ("我选B。", "B"),
        ("The answer is D.", "D"),
        ("Answer: (A)", "A"),
        ("I think option C is right", "C"),
        ("广东深圳", "B"),  # the option's text, the longest of those it holds (深圳 is C's)
        ("福建厦门吧", "D"),
        ("A or B", None),
        ("E", None),
        ("I do not know", None),
        ("", None),
        ('{"choice": "E"}', None),
    ],
)
def test_parse_letter(text, letter):
    assert parse_letter(text, CHOICES) == letter


def test_an_english_article_is_not_a_letter():
    choices = {"A": "a dog", "B": "a cat", "C": "a bird", "D": "a fish"}
    assert parse_letter("A cat, I think.", choices) == "B"
    assert parse_letter("A", choices) == "A"


# ---------------------------------------------------------------- MemGPT parsers
@pytest.mark.parametrize(
    "text, memories",
    [
        ('{"memories": ["Ada adopted a cat.", "Ben paints."]}', ["Ada adopted a cat.", "Ben paints."]),
        ('{"memories": []}', []),
        ('["one", "two", "three", "four"]', ["one", "two", "three"]),
        ('{"memories": ["Ada adopted a cat.", "Ben is', ["Ada adopted a cat.", "Ben is"]),  # cut by the token cap
        ("- Ada adopted a cat\n2. Ben paints\n\n", ["Ada adopted a cat", "Ben paints"]),
        ('```json\n{"memories": ["x"]}\n```', ["x"]),
        ('{"memories": "one fact"}', ["one fact"]),
        ('{"memories": [1, "  a   b ", "a b"]}', ["a b"]),
        ('{"other": ["x"]}', []),
    ],
)
def test_parse_memories(text, memories):
    assert parse_memories(text) == memories


def test_parse_queries_and_union():
    assert parse_queries('{"queries": ["Ada cat", "Pixel"]}') == ["Ada cat", "Pixel"]
    assert parse_queries("Ada cat name\nPixel") == ["Ada cat name", "Pixel"]
    assert parse_queries('{"queries": []}') == []
    assert round_robin([[1, 2, 3], [4, 2], [5]]) == [1, 4, 5, 2, 3]
    assert round_robin([]) == []
    memories = {1: ("2023-05-08", "a" * 10), 2: ("", "b" * 50), 3: ("", "c" * 5)}
    block, n = memory_block([1, 2, 3], memories, 33)  # 25 + newline + 7: the 52-character line is skipped
    assert block == f"- [2023-05-08] {'a' * 10}\n- {'c' * 5}" and n == 2 and len(block) == 33
    assert memory_block([1, 2, 3], memories, 32) == (f"- [2023-05-08] {'a' * 10}", 1)


@given(st.integers(0, 300), st.integers(1, 50))
@settings(max_examples=examples(200))
def test_pick_spreads_over_the_history(n, limit):
    idx = pick(n, limit)
    assert idx == sorted(set(idx)) and all(0 <= i < n for i in idx)
    assert len(idx) == min(n, limit)
    if n > limit:
        assert idx[0] == 0 and idx[-1] >= n - n // limit - 1  # reaches the end, not only the start
    assert pick(n, None) == list(range(n))


# ---------------------------------------------------------------- statistics wiring
def _row(history, fact, condition, correct, f1=None, category="single-hop", applicable=True, **extra):
    r = {
        "history": history,
        "fact": fact,
        "category": category,
        "condition": condition,
        "applicable": applicable,
        "correct": correct,
        "em": correct,
        "f1": float(correct) if f1 is None else f1,
        "error": None,
        "block_chars": 0,
        "calls": 1,
        "tokens_in": 10,
        "tokens_out": 2,
        "ms": 5.0,
    }
    return {**r, **extra}


def _rows(pattern):
    """pattern: condition -> per (history, fact) correctness."""
    return [_row(h, f"{h}#{i}", c, v) for c, per in pattern.items() for (h, i), v in per.items()]


def test_compare_qa_mcnemar_wilcoxon_and_holm_by_hand():
    keys = [(f"h{h}", i) for h in range(6) for i in range(2)]
    rows = _rows(
        {
            "compacted": {k: False for k in keys},
            "lantern": {k: k[1] == 0 for k in keys},  # right on one question of each history
            "rerank": {k: k[1] == 0 for k in keys},
            "memgpt": {k: k == ("h0", 0) for k in keys},
        }
    )
    rows += [_row(h, f"{h}#{i}", "full", False, applicable=False) for h, i in keys]
    tables = compare_qa(rows)
    assert set(tables) == {"judge", "F1", "EM"}
    judge = {(r["x"], r["y"]): r for r in tables["judge"]}
    assert ("full", "lantern") not in judge  # (d) applies to no question: no pair
    lc = judge[("lantern", "compacted")]
    assert (lc["mcnemar_x_only"], lc["mcnemar_y_only"]) == (6, 0)
    assert lc["mcnemar_p"] == pytest.approx(2 / 2**6)  # exact binomial, two-sided
    assert lc["wilcoxon_p"] == pytest.approx(2 / 2**6) and lc["min_wilcoxon_p"] == pytest.approx(2 / 2**6)
    assert lc["diff_pp"] == pytest.approx(50.0) and lc["n_questions"] == 12 and lc["n_histories"] == 6
    rl = judge[("rerank", "lantern")]
    assert (rl["mcnemar_x_only"], rl["mcnemar_y_only"], rl["mcnemar_p"], rl["wilcoxon_p"]) == (0, 0, 1.0, 1.0)
    ps = [r["mcnemar_p"] for r in tables["judge"]]
    holm = [r["mcnemar_p_holm"] for r in tables["judge"]]
    assert all(h >= p for h, p in zip(holm, ps))
    assert min(holm) == pytest.approx(min(ps) * len(ps))  # m = the pairs of the table
    assert "mcnemar_p" not in tables["F1"][0] and "wilcoxon_p_holm" in tables["F1"][0]


def test_summarize_qa_counts_not_applicable_errors_and_separate_questions():
    rows = [
        _row("h", "q1", "compacted", True),
        _row("h", "q2", "compacted", False, error="timeout"),
        _row("h", "q3", "compacted", True, category="adversarial"),
        _row("h", "q1", "full", False, applicable=False),
        _row("h", "q2", "full", True),
        _row("h", "q3", "full", False, category="adversarial"),
    ]
    for c in qa.CONDITIONS:
        if c not in ("compacted", "full"):
            rows += [
                _row("h", q, c, False, category="adversarial" if q == "q3" else "single-hop")
                for q in ("q1", "q2", "q3")
            ]
    s = summarize_qa(rows)
    assert s["compacted"]["n"] == 2 and s["compacted"]["correct"] == 0.5 and s["compacted"]["errors"] == 1
    assert s["compacted"]["separate"] == {"adversarial": {"n": 1, "abstained": 1.0}}
    assert s["full"]["n"] == 1 and s["full"]["not_applicable"] == 1 and s["full"]["correct"] == 1.0
    assert s["full"]["calls"] == 3 and s["full"]["tokens_in"] == 30  # every row's cost, n/a ones included
    kinds = [_row("h", "q", "compacted", True, letter="B")]
    assert qa.kind_of(kinds) == "choice" and list(compare_qa(kinds)) == ["choice accuracy"]


# ---------------------------------------------------------------- failure shapes (local fake endpoint)
def test_judge_and_answer_failure_shapes(tmp_path):
    from lantern.eval.datasets import Fact
    from lantern.llm import LLMClient
    from openai_fake import FakeLLM, answer, status

    fact = Fact("f", "What did Ada adopt?", "a cat", [], "single-hop")
    with FakeLLM([answer("Maybe, hard to say"), status(500), answer("a kitten")]) as fake:
        client = LLMClient(fake.settings())
        row = {"answer": "a tabby cat", "error": None}
        qa.judge(client, row, fact, fact.question)
        assert row["judge"] is None and row["judge_unparsed"] and row["correct"] is False and row["judge_calls"] == 1
        assert row["judge_tokens_in"] == 11 and row["judge_tokens_out"] == 7
        schema = fake.requests[0]["response_format"]["json_schema"]["schema"]
        assert schema["properties"]["label"]["enum"] == ["CORRECT", "WRONG"]
        text, error = qa.ask(client, fact.question, "context", None)
        assert text == "" and "HTTP 500" in error
        row = {"answer": "", "error": error}
        qa.judge(client, row, fact, fact.question)  # no call for a failed answer: WRONG
        assert row["judge"] is False and row["judge_calls"] == 0 and len(fake.requests) == 2
        qa.score(row, fact, None)
        assert row["em"] is False and row["f1"] == 0.0
        text, error = qa.ask(client, fact.question, "context", None)
        assert text == "a kitten" and error is None and fake.requests[-1]["max_tokens"] == qa.ANSWER_TOKENS
        assert "response_format" not in fake.requests[-1]  # a free-text answer is not constrained


def test_query_writing_falls_back_to_the_question():
    from lantern.eval.memgpt import write_queries
    from lantern.llm import LLMClient
    from openai_fake import FakeLLM, answer, status

    with FakeLLM([answer('{"queries": []}'), status(503), answer('{"queries": ["Ada cat", "Pixel"]}')]) as fake:
        client = LLMClient(fake.settings())
        assert write_queries(client, "What cat?")[0::2] == (["What cat?"], "the answer held no query")
        queries, usage, why = write_queries(client, "What cat?")
        assert queries == ["What cat?"] and "query call failed" in why and usage.calls == 1
        assert write_queries(client, "What cat?")[0::2] == (["Ada cat", "Pixel"], None)


def test_extraction_is_cached_with_its_cost(tmp_path):
    from lantern.eval.cases import history_turns
    from lantern.eval.datasets import load
    from lantern.eval.memgpt import Extractor
    from lantern.llm import LLMClient
    from openai_fake import FakeLLM, answer, status

    turns = history_turns(load("locomo", FIX / "locomo_mini.json").histories[1])[:2]
    with FakeLLM([answer('{"memories": ["Ben restores bicycles."]}', 40, 9), status(500)]) as fake:
        ex = Extractor(LLMClient(fake.settings()), tmp_path)
        assert ex(turns[0]).memories == ["Ben restores bicycles."]
        failed = ex(turns[1])
        assert failed.memories == [] and "HTTP 500" in failed.error
        again = Extractor(LLMClient(fake.settings()), tmp_path)
        hit = again(turns[0])
        assert hit.cached and hit.memories == ["Ben restores bicycles."]
        assert (hit.usage.tokens_in, hit.usage.tokens_out) == (40, 9)
        assert len(fake.requests) == 2  # the cached turn made no call; the failed one was not cached
        assert again.describe()["from_cache"] == 1 and again.describe()["calls_made_now"] == 0
        assert again.describe()["tokens_in"] == 40


def test_qa_refuses_what_it_cannot_run(tmp_path, monkeypatch):
    from lantern.eval.run import main

    monkeypatch.delenv("LANTERN_LLM_BASE_URL", raising=False)
    kw = dict(split="all", cache_dir=tmp_path / "cache", plots=False, budgets=[], ratios=[], workers=1)
    with pytest.raises(ValueError, match="--qa needs an LLM"):
        main("locomo", FIX / "locomo_mini.json", tmp_path / "o", qa=True, **kw)
    with pytest.raises(ValueError, match="look-ahead tokens"):
        main(
            "aider",
            FIX / "aider_mini.md",
            tmp_path / "o",
            qa=True,
            llm_base_url="http://127.0.0.1:9/v1",
            llm_model="m",
            **kw,
        )
    with pytest.raises(ValueError, match="keep it among --system"):
        main(
            "locomo",
            FIX / "locomo_mini.json",
            tmp_path / "o",
            qa=True,
            llm_base_url="http://127.0.0.1:9/v1",
            llm_model="m",
            systems=["bm25"],
            **kw,
        )
    with pytest.raises(ValueError, match="qa-limit"):
        main("locomo", FIX / "locomo_mini.json", tmp_path / "o", qa=True, qa_limit=0, **kw)


def test_memdaily_loader_keeps_the_choices():
    from lantern.eval.datasets import load

    facts = load("memdaily", FIX / "memdaily").histories[0].facts
    assert facts[0].choices == {"A": "北京", "B": "x", "C": "y", "D": "z"} and facts[0].gold_choice == "A"


# ---------------------------------------------------------------- real runs (SmolLM2)
def _check_run(results, out, n_questions, choice):
    from lantern.eval.report import render

    section = results["qa"]
    cond = section["conditions"]
    assert list(cond) == list(qa.CONDITIONS) and section["questions"] == n_questions
    assert section["kind"] == ("choice" if choice else "free")
    lines = [json.loads(x) for x in (out / "qa.jsonl").read_text().splitlines()]
    assert len(lines) == n_questions * len(qa.CONDITIONS)
    for c in qa.CONDITIONS:
        s = cond[c]
        applied = [r for r in lines if r["condition"] == c and r["applicable"]]
        assert s["n"] + s["not_applicable"] + sum(v["n"] for v in s["separate"].values()) == n_questions
        # each applicable question: one answer call, plus the rerank call (c) or the query call (e)
        per = 2 if c in ("rerank", "memgpt") else 1
        assert s["calls"] == per * len(applied), c
        assert s["tokens_in"] > 0 and s["tokens_out"] > 0 and s["ms"] > 0, c
        for r in applied:
            if choice:
                assert r["letter"] in (None, "A", "B", "C", "D") and "judge" not in r
            else:
                assert isinstance(r["f1"], float)
                # a calibrated judge sees every answered question that has a gold answer, and no other;
                # a judge that failed its calibration sees none
                judged = r["category"] != "adversarial" and bool(r["answer"].strip()) and not r["error"]
                assert r.get("judge_calls", 0) == int(judged and section["judge_calibration"]["reported"]), r
    assert all(r["block_chars"] > 0 for r in lines if r["condition"] in ("lantern", "rerank"))
    assert section["memgpt"]["turns"] > 0 and section["memgpt"]["calls"] == section["memgpt"]["turns"]
    report = (out / "report.md").read_text()
    assert render(json.loads((out / "results.json").read_text())) == report
    assert "## Answer accuracy (--qa)" in report and section["llm"]["model"] in report
    for label in qa.LABELS.values():
        assert f"| {label} |" in report
    return section


def test_qa_on_locomo_fixture_through_a_fake_endpoint(tmp_path, monkeypatch):
    """The free-text run's wiring (every condition's calls and costs, the calibrated judge's calls, the report, the
    rerun from the extraction cache) through the real client against a fake endpoint that answers each request in
    the shape it asks for (tests/openai_fake.py ``shaped``, its judge ``sensible_judge``). The
    real model keeps its runs: the whole --qa run on SmolLM2 in test_qa_on_memdaily_fixture_chooses_letters (every
    condition, rerank, MemGPT extraction and queries), its judge calibration in test_eval_judge.py
    test_smollm2_calibration_on_the_locomo_fixture, its free-text answers in tests/test_llm_real.py's chat tests."""
    from lantern.eval.run import main
    from openai_fake import FakeLLM, sensible_judge, shaped

    monkeypatch.setenv("LANTERN_LLM_API_KEY", "sk-never-in-a-report")
    kw = dict(
        split="all",
        keep=2,
        systems=["lantern"],
        cache_dir=tmp_path / "cache",
        plots=False,
        budgets=[],
        ratios=[],
        workers=1,
        llm_model="fake-model",
        qa=True,
        qa_limit=1,
        qa_calibration=2,
        budget=1500,
    )
    with FakeLLM([shaped(sensible_judge)]) as fake:
        kw["llm_base_url"] = fake.base_url
        results = main("locomo", FIX / "locomo_mini.json", tmp_path / "o", **kw, command="lantern eval locomo --qa")
        section = _check_run(results, tmp_path / "o", 2, choice=False)  # one question from each conversation
        assert section["judge_calibration"]["reported"]  # the sensible judge passes: every answer judged
        sent = [{k.lower(): v for k, v in h.items()}.get("authorization") for h in fake.headers]
        assert set(sent) == {"Bearer sk-never-in-a-report"}  # the key goes to the endpoint, and nowhere else
        assert section["conditions"]["full"]["not_applicable"] == 0  # the fixture's transcript fits in 12,000 chars
        written = (tmp_path / "o" / "report.md").read_text() + (tmp_path / "o" / "results.json").read_text()
        assert "sk-never" not in written
        assert "`lantern eval locomo --qa`" in written and "llm_summary | skipped: --qa" in written
        # a rerun reads every memory from the cache: no extraction call; (d) can be made not applicable
        extractions = sum("memories" in str(r.get("response_format")) for r in fake.requests)
        assert extractions == section["memgpt"]["turns"]
        again = main("locomo", FIX / "locomo_mini.json", tmp_path / "o2", **{**kw, "qa_context_chars": 10})
        assert sum("memories" in str(r.get("response_format")) for r in fake.requests) == extractions
    memgpt = again["qa"]["memgpt"]
    assert memgpt["calls_made_now"] == 0 and memgpt["from_cache"] == section["memgpt"]["turns"]
    full = again["qa"]["conditions"]["full"]
    assert (full["calls"], full["n"], full["not_applicable"]) == (0, 0, 2)
    assert again["qa"]["conditions"]["lantern"]["n"] == section["conditions"]["lantern"]["n"]  # never dropped elsewhere


# trajectories of each MemDaily fixture file up to its first lost fact with ``keep=1`` (the last turn stays in
# context): 01's first trajectory asks about its turn 1 of 3; 02's first asks about its turn 1 of 2, which only its
# second trajectory's turn pushes out of the window
MEMDAILY_SLICE = {"01_simple_roles_mini.json": 1, "02_conditional_items_mini.json": 2}


def _memdaily_slice(folder: Path) -> Path:
    """The MemDaily fixture cut to ``MEMDAILY_SLICE``: the question ``qa_limit=1`` picks per history (its first
    lost fact) is the whole file's, with fewer turns for MemGPT's per-turn extraction calls and shorter contexts
    for the answer calls."""
    folder.mkdir()
    for name, n in MEMDAILY_SLICE.items():
        trajectories = json.loads((FIX / "memdaily" / name).read_text(encoding="utf-8"))
        (folder / name).write_text(json.dumps(trajectories[:n], ensure_ascii=False), encoding="utf-8")
    return folder


@pytest.mark.real_models  # the rerank condition reranks only what the injection decision lets through: real vectors
def test_qa_on_memdaily_fixture_chooses_letters(local_llm, tmp_path, monkeypatch):
    """The whole --qa run on the real model, over two histories: every condition's call, MemGPT's extraction and
    queries, the rerank call, the letters parsed from what SmolLM2 says."""
    from lantern.eval.run import main

    monkeypatch.setenv("LANTERN_LLM_JSON_MODE", "object")
    results = main(
        "memdaily",
        _memdaily_slice(tmp_path / "memdaily"),
        tmp_path / "o",
        split="all",
        keep=1,
        systems=["lantern"],
        cache_dir=tmp_path / "cache",
        plots=False,
        budgets=[],
        ratios=[],
        workers=1,
        llm_base_url=local_llm.settings.base_url,
        llm_model="smollm2",
        qa=True,
        qa_limit=1,
        budget=600,
    )
    section = _check_run(results, tmp_path / "o", results["qa"]["questions"], choice=True)
    assert section["questions"] == 2 and section["memgpt"]["turns"] == 6  # one question per history; 3 + 3 turns
    assert section["conditions"]["compacted"]["judge_calls"] == 0  # letters need no judge
    assert list(section["comparisons"]) == ["choice accuracy"] and "judge_calibration" not in section
    report = (tmp_path / "o" / "report.md").read_text()
    assert "| condition | n | n/a | accuracy | unparsed | errors |" in report and "- Judge:" not in report


DOCS = Path(__file__).resolve().parents[1] / "docs" / "results"


@pytest.mark.parametrize("name, kind", [("qa-locomo-smollm2", "free"), ("qa-memdaily-smollm2", "choice")])
def test_the_published_qa_runs_are_rendered_from_their_results(name, kind):
    """docs/results/qa-*/report.md are render(results.json), and the run says its model, command, date and load."""
    from lantern.eval.report import render

    results = json.loads((DOCS / name / "results.json").read_text(encoding="utf-8"))
    report = (DOCS / name / "report.md").read_text(encoding="utf-8")
    assert render(results) == report
    run = results["qa"]["run"]
    assert results["qa"]["kind"] == kind and run["command"].startswith("lantern eval ") and "--qa" in run["command"]
    assert run["date"] in report and str(run["load_start"]) in report and "smollm2" in report
    assert "api_key" not in json.dumps(results).lower()
