"""Retrieval triggers (issue 6 part 5): cue-level positives and negatives in English and Chinese, the draft path,
the recovery query, and a floor on the precision measured on the report half of the labelled set (skipped when
../shared/data is absent)."""

from __future__ import annotations

import pytest

from lantern.memory import triggers_eval
from lantern.memory.triggers import Trigger, recovery_query, should_recover

BACK_POSITIVE = [
    ("As I said, the staging DB is on another host.", "as I said"),
    ("as I mentioned, we deploy on Fridays", "as I said"),
    ("Which port did you suggest for postgres?", "which did we"),
    ("You mentioned a flag for the linter, which one?", "you said"),
    ("What photography tips have you shared with me?", "you said"),
    ("Use the command we discussed earlier.", "earlier"),
    ("Run it the way I told you before.", "before"),
    ("Previously you set the timeout to 30s.", "previously"),
    ("Do it like last time.", "last time"),
    ("Apply the fix we used for the login bug.", "the one we used"),
    ("What was the port again?", "again?"),
    ("Can you remind me what the deploy command was?", "remind me"),
    ("Do you remember the name of that library?", "remember"),
    ("What was the migration we used for the users table?", "what was the"),
    ("Which flag did we settle on for the build?", "which did we"),
    ("I read a novel in the library. What was its name?", "what was its name"),
    ("What type of music do I like to listen to?", "question about me"),
    ("I don't like comedy movies, right?", "right?"),
    ("你之前说的那个端口是多少？", "之前"),
    ("我们以前用的端口是多少？", "以前"),  # newcomer: 以前 did not fire
    ("你以前说的那个版本号", "以前"),
    ("What did we decide about the cache?", "what did we decide"),  # newcomer: did not fire
    ("remind me the redis port", "remind me"),  # newcomer: did not fire
    ("what was the port?", "what was the X?"),  # newcomer: a bare "what was the port?" did not fire
    ("So, what was the database name again?", "what was the X?"),
    ("刚才说的命令再发一遍", "刚才"),
    ("上次那个报错怎么解决的？", "上次"),
    ("你提到的那个库叫什么？", "你提到"),
    ("用那个方法再试一次", "那个方法"),
    ("我们用的是哪个版本？", "我们用的"),
    ("前面说的配置文件在哪里？", "前面说的"),
    ("你还记得我的生日吗？", "还记得"),
    ("我上司的邮箱地址是多少来着？", "来着"),
    ("我曾经和你推荐过一部科幻电影，它的名字是？", "曾经"),
    ("我喜欢哪些菜系？", "问我自己"),
    ("我不喜欢看喜剧片，对吗？", "对吗"),
    ("Which numpy version did we pin before?", "which did we"),
    ("Use the numpy version I pinned before.", "before"),
    ("Use the version we pinned for the CI image.", "the one we used"),
    ("What was the numpy version you pinned?", "what was the"),
    ("我们锁定的 numpy 版本是什么", "锁定的版本"),
    ("用你之前固定过的那个 torch 版本", "锁定的版本"),
]

BACK_NEGATIVE = [
    "我以前住在北京，后来搬到了上海。",  # 以前 as "in the past", no question
    "What was the capital of France during the war of 1870?",  # longer than a back-reference's noun phrase
    # breaker: the first versions of the "what was the X?" and 以前 cues fired on these
    "What was the capital of France?",
    "What was the Renaissance?",
    "What was the weather like?",
    "What were the causes of WW2?",
    "你以前去过北京吗？",
    "以前的人怎么生活？",
    "我以前是老师，你呢？",
    "以前设计的 API 太复杂了。",
    "我以前用 Windows，现在用 Mac。",
    "Before you start, make sure the tests pass.",
    "Add a check before the loop.",
    "Have you tried it before?",
    "Make the timeout configurable.",
    "Thanks again for the help!",
    "What made you decide to run again?",
    "These moments remind me why I love this job.",
    "Since our last chat I've been busy.",
    "The last time I played slots my wallet got stolen.",
    "Let's meet earlier this week.",
    "How do I run the test suite?",
    "这种可能性很小，不用担心。",
    "会议之前要准备材料。",
    "我刚才路过的那个公园是儿童公园。",
    "金融科技精英论坛的地点是北京。",
    "我该从哪里开始呢？",
    "你认为我应该注意些什么方面的饮食？",
    "把端口改成 5433。",
    "Pin numpy to 1.26 before the release.",
    "Should we pin numpy before upgrading?",
    "Let's pin it before.",
    "请把 numpy 锁定在 1.26 版本。",
    "固定版本号有什么好处？",
]

DRAFT_POSITIVE = [
    ("I'm not sure which port you configured.", "I'm not sure"),
    ("I don't have that information in our conversation.", "I don't have that information"),
    ("I don't recall the exact flag.", "I don't recall"),
    ("I cannot recall which version you picked.", "I don't recall"),
    ("As an AI, I don't have access to your previous sessions.", "as an AI"),
    ("我不确定你用的是哪个版本。", "我不确定"),
    ("可能是 5433 吧。", "可能"),
    ("大概是上周三。", "大概"),
    ("我不记得你说过这个。", "不记得"),
    ("我没有关于这个项目的信息。", "没有相关信息"),
]

DRAFT_NEGATIVE = [
    "The port is 5433.",
    "Sure, here is the updated function.",
    "As an AI companion, I can't go for a walk in the park, but I can suggest routes.",
    "你可能会喜欢这本书。",
    "这种可能性不大。",
    "作为一个AI伴侣，我没有真实身体，所以无法参与户外活动。",
    "大概念和小细节都很重要。",
]


@pytest.mark.parametrize(("question", "cue"), BACK_POSITIVE)
def test_back_reference_fires_and_names_its_cue(question: str, cue: str) -> None:
    t = should_recover(question)
    assert t.fire and t
    assert f"back-reference: {cue}" in t.reasons, t.reasons


@pytest.mark.parametrize("question", BACK_NEGATIVE)
def test_ordinary_turn_does_not_fire(question: str) -> None:
    t = should_recover(question)
    assert not t.fire and not t and t.reasons == []


@pytest.mark.parametrize(("draft", "cue"), DRAFT_POSITIVE)
def test_low_confidence_draft_fires(draft: str, cue: str) -> None:
    t = should_recover("Which port is the database on?", draft=draft)
    assert t.fire
    assert t.reasons == [f"low-confidence draft: {cue}"], t.reasons


@pytest.mark.parametrize("draft", DRAFT_NEGATIVE)
def test_confident_draft_does_not_fire(draft: str) -> None:
    assert not should_recover("Which port is the database on?", draft=draft).fire


def test_both_paths_report_every_reason() -> None:
    t = should_recover("What was the port again?", draft="I'm not sure, maybe 5432.")
    assert t == Trigger(
        True, ["back-reference: again?", "back-reference: what was the X?", "low-confidence draft: I'm not sure"]
    )


def test_draft_cues_are_not_read_in_the_question() -> None:
    # "I'm not sure" in the user's own question is not a low-confidence draft
    assert not should_recover("I'm not sure this compiles, can you check?").fire
    assert not should_recover("Add a retry.", draft=None).fire
    assert not should_recover("", draft="").fire


def test_recovery_query_is_question_plus_gist() -> None:
    assert recovery_query("What was the port again?", "Set up postgres for billing.") == (
        "What was the port again?\nSet up postgres for billing."
    )
    assert recovery_query("  port?  ") == "port?"
    assert recovery_query("", "gist only") == "gist only"


def test_split_is_a_fixed_hash() -> None:
    assert triggers_eval.split_of("What was the port again?") == triggers_eval.split_of("What was the port again?")
    assert {triggers_eval.split_of(f"text {i}") for i in range(20)} == {"tune", "report"}


@pytest.mark.skipif(not triggers_eval.available(), reason="../shared/data not present")
def test_measured_precision_floor_on_report_half() -> None:
    ev = triggers_eval.evaluate(triggers_eval.load_items(), "report", timing=False)
    # floors set below the measured report-half figures recorded in BENCHMARKS.md, so a regression is caught
    assert ev.overall.precision >= 0.85, ev.overall
    assert ev.by_lang["zh"].precision >= 0.95, ev.by_lang["zh"]
    assert ev.by_lang["en"].precision >= 0.55, ev.by_lang["en"]
    for ds in ("MemoryBank-en", "MemoryBank-cn"):
        assert ev.by_dataset[ds].recall >= 0.6, (ds, ev.by_dataset[ds])
    assert ev.by_dataset["MemDaily"].recall >= 0.2, ev.by_dataset["MemDaily"]
    assert ev.by_source["aider-user"].fp / ev.by_source["aider-user"].n <= 0.01
    for src in ("memorybank-reply-en", "memorybank-reply-cn"):  # draft path on ordinary answers
        s = ev.by_source[src]
        assert s.fp / s.n <= 0.02, (src, s)


def test_lantern_delegates(tmp_path) -> None:
    from lantern import Lantern

    with Lantern(tmp_path / "m.db") as memory:
        assert memory.should_recover("你之前说的端口是多少？").reasons == ["back-reference: 之前"]
        assert not memory.should_recover("Add a retry.").fire


def test_natural_phrasings_of_both_languages_are_measured() -> None:
    """The written set of tests/trigger_prompts.py (230 prompts, English and Chinese, natural phrasings with and
    without a back-reference, many of the latter using the same words in another sense): recall and precision on
    each half (measured 2026-12-07: 0.983 / 1.000 on the tune half, 0.982 / 1.000 on the other; the miss classes
    were fixed as classes on both halves, so the second is no blind check; docs/results/injection.md)."""
    from trigger_prompts import BACK, PLAIN

    assert len(BACK) + len(PLAIN) >= 200
    for half in (0, 1):
        back = [p for i, p in enumerate(BACK) if i % 2 == half]
        plain = [p for i, p in enumerate(PLAIN) if i % 2 == half]
        tp = sum(bool(should_recover(p)) for p in back)
        fp = sum(bool(should_recover(p)) for p in plain)
        assert tp / len(back) >= 0.95 and tp / (tp + fp) >= 0.95, (half, tp, fp)
