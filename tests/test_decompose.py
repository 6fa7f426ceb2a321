"""Query decomposition (recover/decompose.py) and the per-part local ranking (recover/local.py), on a real store
with the real (routed) embedder."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from lantern import Lantern
from lantern.config import Config
from lantern.model import Message
from lantern.recover import decompose, local
from lantern.recover.local import LOCAL

pytestmark = pytest.mark.real_models  # which part of a query ranks which turn: by meaning, the real models


# ---------------------------------------------------------------- pure parts
def test_parts_split_two_questions_in_one_chinese_and_english():
    assert decompose.parts("我同事有多高来着？另外，模型艺术盛宴的时间是什么？") == [
        "我同事有多高来着？",
        "模型艺术盛宴的时间是什么？",
    ]
    assert decompose.parts("我上司是做什么的，另外论坛在哪里？") == ["我上司是做什么的", "论坛在哪里？"]
    assert decompose.parts("Where does my boss work? Also, when is the fintech forum?") == [
        "Where does my boss work?",
        "when is the fintech forum?",
    ]


def test_parts_leave_single_questions_and_instructions_whole():
    assert decompose.parts("What books has John read?") == []
    assert decompose.parts("我上司的生日到底是啥时候呢？") == []
    assert (
        decompose.parts("Was August a good month for Nate? Answer yes or no.") == []
    )  # an instruction, not a question
    assert decompose.parts("Where is Andrew? Andrew said he would come.") == []  # "And" of "Andrew" is no connective
    assert decompose.parts("Hi? What is my boss's job?") == []  # a part needs MIN_PART_CHARS word characters
    assert decompose.parts("") == []
    assert len(decompose.parts("A one? B two? C three? D four? E five?".replace(" ", "aaaa "))) == decompose.MAX_PARTS


def test_round_robin_interleaves_each_order_once():
    merged = local.round_robin([np.array([3, 1, 2]), np.array([2, 3]), np.array([5])])
    assert merged.tolist() == [3, 2, 5, 1]


# ---------------------------------------------------------------- on a real store
def _trajectory(boss_job: str, event: str | None) -> list[str]:
    """One user's stretch of a shared store: a boss's job, four remarks, then (maybe) an event and its details."""
    lines = [
        f"我的上司是做{boss_job}的。",
        "今天天气不错。",
        "我中午吃了面条。",
        "周末打算去爬山。",
        "最近在看一本小说。",
    ]
    if event:
        lines += [
            f"我将要参加{event}。",
            f"{event}的地点是北京。",
            f"{event}的规模是九百人。",
            f"{event}的时间是下周一晚上七点。",
            f"{event}的持续时间是三天。",
        ]
    else:
        lines += ["我的手机是新买的。", "晚上要去超市。", "我喜欢喝绿茶。", "明天要早起。", "最近工作挺忙的。"]
    return lines


TEXTS = (
    _trajectory("厨师", None)
    + _trajectory("建筑工人", "金融科技精英论坛")
    + _trajectory("医生", None)
    + _trajectory("销售", None)
    + _trajectory("律师", None)
)
QUESTION = "我上司是做什么工作的呢？另外，金融科技精英论坛的地点是什么？"


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    with Lantern(tmp_path_factory.mktemp("decompose") / "d.db") as lt:
        lt.archive([Message(role="user", text=t) for t in TEXTS], session="s")
        yield lt


def _fused(lt: Lantern, config: Config) -> list[str]:
    lt.config = config
    rec = lt.explain(QUESTION, budget=6000)
    return [c.entry.text for c in rec.candidates if not c.verdict.startswith("excluded:")]


def test_each_part_ranks_the_local_window_and_the_right_boss_wins(shared):
    """The event is said only in the second user's stretch; its boss line is 5 turns before the event's first
    line, and four other stretches say what their boss does. With decomposition the second stretch's boss line
    ranks above every other boss line in the fused order, and above where the whole-query vector put it."""
    on = _fused(shared, replace(Config(), decompose=True))
    off = _fused(shared, replace(Config(), decompose=False))
    right = next(t for t in on if "建筑工人" in t)
    bosses = [t for t in on if "我的上司是做" in t]
    assert bosses[0] == right
    assert on.index(right) < off.index(right)
    assert any("金融科技精英论坛的地点" in t for t in on[:3])  # the distinctive part keeps its place


def test_single_question_gets_one_vector_and_the_same_ranking(shared):
    shared.config = Config()
    one = shared.explain("金融科技精英论坛的地点是什么？", budget=6000)
    shared.config = replace(Config(), decompose=False)
    two = shared.explain("金融科技精英论坛的地点是什么？", budget=6000)
    assert [c.entry.id for c in one.candidates] == [c.entry.id for c in two.candidates]
    assert any(LOCAL in c.ranks for c in one.candidates)


def test_the_eval_memo_embeds_a_split_questions_parts_once_for_every_system():
    """The evaluation asks every question once per system: a split question's parts (one batched call) are
    memoized as that batch, like a whole question, so 21 systems embed them once (MemDaily's report run spent
    minutes re-embedding them)."""
    import numpy as np

    from lantern.embed import get_embedder
    from lantern.eval.systems import MemoEmbedder

    class Counting:  # the real model, calls counted
        def __init__(self, inner):
            self.inner, self.id, self.dim, self.calls = inner, inner.id, inner.dim, 0

        def embed(self, texts):
            self.calls += 1
            return self.inner.embed(texts)

    inner = Counting(get_embedder("minilm"))
    memo = MemoEmbedder(inner)
    asked = ["Where does my boss work?", "When is the fintech forum?"]
    first = memo.embed_query(asked)
    again = memo.embed_query(asked)
    assert inner.calls == 1 and first.shape == (2, inner.dim) and np.array_equal(first, again)
    assert np.array_equal(memo.embed_query(asked[:1])[0], get_embedder("minilm").embed(asked[:1])[0])
    assert inner.calls == 2  # a single text is its own key


def test_a_proactive_recovery_is_never_decomposed(shared):
    """A compaction's query is the live tail plus the summary: split at its question marks it gave a 'question'
    and a 'summary' part, one more embedding per compaction for parts nobody asked (the proxy's compaction overhead
    rose 33 -> 41 ms). A proactive recovery ranks as with decomposition off; a question asked still splits."""
    shared.config = Config()
    proactive = shared.explain(QUESTION, budget=6000, proactive=True)
    shared.config = replace(Config(), decompose=False)
    plain = shared.explain(QUESTION, budget=6000, proactive=True)
    assert [(c.entry.id, c.rrf) for c in proactive.candidates] == [(c.entry.id, c.rrf) for c in plain.candidates]
    shared.config = Config()
    asked = shared.explain(QUESTION, budget=6000)
    assert [c.entry.id for c in asked.candidates] != [c.entry.id for c in plain.candidates]
