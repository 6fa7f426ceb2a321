"""Memory type, category and write-time importance prior of a turn (docs/architecture.md §2.6). Patterns only, no LLM.

``classify_turn(turn) -> Classification(memory_type, category, prior)``; ``classify(turn) -> (memory_type, prior)``.

Cues are looked for in the *conversational* text of the turn: the text of its ``user``, ``assistant`` and
``system`` messages, each read up to its first 4,000 characters. Tool calls, tool results and ``tool`` messages
are not read for cues (an error saying "must be str" is not a decision). English cues are whole words or phrases,
case-insensitive (the text is lowercased and its punctuation turned into spaces once); Chinese cues are
substrings.

Memory type (our rule; paper does not specify)
==============  =====================================================================================
type            when
==============  =====================================================================================
procedural      procedure cues outnumber fact/decision cues, or there are at least 2 of them and at
                least as many: numbered steps (2+ lines starting ``1.`` / ``2)`` / ``Step 3``),
                "first ... then", "run `...`", "how to", "how do I", "step(s)", "instructions",
                "follow these", "to <do X>, run/use/open/...", "步骤", "先…然后/再/接着", "首先",
                "第一步", "如何", "怎么", "怎样", "运行", "执行", "安装"
semantic        otherwise, at least one fact or decision cue (lists below)
episodic        otherwise (what happened): the default
==============  =====================================================================================

Category and importance prior (our schedule; paper does not specify). The first row that holds gives both; the
prior is the write-time importance of the entry and enters the richness term D of I(e) (recover/signals.py).
=====================================================================  ===========  =======
condition (first that holds)                                           category     prior
=====================================================================  ===========  =======
the turn has a ``system`` message                                      system       1.00
a decision cue **and** a stated-fact cue                               decision     0.85
a preference cue **and** a stated-fact cue                             preference   0.85
a decision cue: "decide", "decided", "decision", "must", "don't",      decision     0.80
"do not", "never", "always", "remember", "from now on", "make sure",
"require(d)", "we chose", "let's use", "let's go with", "instead of",
"决定", "选择", "选用", "要求", "必须", "务必", "不要", "别再", "记住",
"以后", "一定要", "禁止"
a preference cue: "prefer(s/red)", "preference", "i like", "i love",   preference   0.80
"i hate", "i enjoy", "favorite", "favourite", "i'd rather",
"偏好", "喜欢", "讨厌", "更喜欢", "最爱", "宁可", "宁愿"
a stated-fact cue: "my name is", "my <x> is", "our <x> is",            fact         0.80
"the <port|host|password|database|url|path|version|...> is",
"i live in", "i work at", "is located", "is set to", "defaults to",
"we use", "we are using", "switched to", ``NAME=value`` lines,
"名字是", "名字叫", "我叫", "叫做", "地址是", "住在", "生日是", "电话是",
"号码是", "邮箱是", "密码是", "用的是", "我们用", "改为", "改成", "设置为",
"设为", "默认", "位于", "端口是", "版本是"
mostly tool output: >= 2/3 of the turn's characters are tool calls,    tool_call    0.30
tool results or ``tool`` messages
a procedure (memory type procedural)                                   process      0.60
otherwise (something said or done: an episodic statement)              fact         0.50
=====================================================================  ===========  =======

The priors per row live in ``PRIORS`` (keyed by row name); changing one changes the importance ranking of the
entries archived afterwards (the prior is stored with the entry).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from lantern import lazy_re
from lantern.model import Turn

__all__ = [
    "CATEGORIES",
    "Classification",
    "PRIORS",
    "classify",
    "classify_turn",
    "PRIOR_SYSTEM",
    "PRIOR_DECISION_AND_FACT",
    "PRIOR_DECISION",
    "PRIOR_FACT",
    "PRIOR_TOOL_CHATTER",
    "PRIOR_PROCEDURE",
    "PRIOR_DEFAULT",
]

PRIOR_SYSTEM = 1.0
PRIOR_DECISION_AND_FACT = 0.85
PRIOR_DECISION = 0.8
PRIOR_FACT = 0.8
PRIOR_TOOL_CHATTER = 0.3
PRIOR_PROCEDURE = 0.6
PRIOR_DEFAULT = 0.5
CATEGORIES = ("fact", "decision", "preference", "process", "tool_call", "system")
# row of the schedule -> (category, prior); read at classification time, so a change here shows in the ranking
PRIORS: dict[str, tuple[str, float]] = {
    "system": ("system", PRIOR_SYSTEM),
    "decision+fact": ("decision", PRIOR_DECISION_AND_FACT),
    "preference+fact": ("preference", PRIOR_DECISION_AND_FACT),
    "decision": ("decision", PRIOR_DECISION),
    "preference": ("preference", PRIOR_DECISION),
    "fact": ("fact", PRIOR_FACT),
    "tool_call": ("tool_call", PRIOR_TOOL_CHATTER),
    "process": ("process", PRIOR_PROCEDURE),
    "default": ("fact", PRIOR_DEFAULT),
}
TOOL_CHATTER_SHARE = 2 / 3
CUE_SCAN_CHARS = 4000

# English cues: matched as " phrase " in the normalized text (lowercase, runs of non-letters -> one space).
_DECISION_EN = tuple(
    f" {p} "
    for p in (
        "decide",
        "decided",
        "decides",
        "deciding",
        "decision",
        "must",
        "don't",
        "dont",
        "do not",
        "never",
        "always",
        "remember",
        "from now on",
        "make sure",
        "require",
        "required",
        "requirement",
        "we chose",
        "i chose",
        "we picked",
        "we agreed",
        "we settled on",
        "let's use",
        "lets use",
        "let's go with",
        "let's stick with",
        "going with",
        "instead of",
    )
)
_PREFERENCE_EN = tuple(
    f" {p} "
    for p in (
        "prefer",
        "prefers",
        "preferred",
        "preference",
        "i like",
        "i love",
        "i hate",
        "i enjoy",
        "favorite",
        "favourite",
        "i'd rather",
        "i would rather",
    )
)
_FACT_EN_PHRASES = tuple(
    f" {p} "
    for p in (
        "i live in",
        "i work at",
        "i work for",
        "i'm from",
        "i am from",
        "is located",
        "is set to",
        "are set to",
        "defaults to",
        "default is",
        "we use",
        "we are using",
        "we're using",
        "switched to",
        "is stored in",
        "is configured",
    )
)
_FACT_EN_RE = lazy_re.compile(
    r" (?:my|our) [a-z]+(?: [a-z]+)? (?:is|are|was) "
    r"| the (?:port|host|hostname|password|username|user|database|db|url|endpoint|path|key|version|branch|region"
    r"|bucket|address|name|default|model|api key|token|server|directory|folder|file) (?:is|are|was|number is) "
)
_ASSIGN_RE = lazy_re.compile(r"^[ \t]*(?:export[ \t]+)?[A-Z][A-Z0-9_]{2,}[ \t]*=[ \t]*\S", re.MULTILINE)
_PROC_EN = tuple(
    f" {p} " for p in ("how to", "how do i", "how do we", "how can i", "step", "steps", "instructions", "follow these")
)
_FIRST_THEN_RE = lazy_re.compile(r" first .{0,200}? then ")
_TO_DO_RE = lazy_re.compile(r" to [a-z]+(?: [a-z]+){0,5} (?:run|use|open|type|set|add|install|edit|call|create) ")
_NUMBERED_RE = lazy_re.compile(
    r"^[ \t]*(?:\d{1,2}[.)]|[Ss]tep \d+[:.)]?|第[一二三四五六七八九十\d]+步)[ \t]+\S", re.MULTILINE
)

_DECISION_ZH = ("决定", "选择", "选用", "要求", "必须", "务必", "不要", "别再", "记住", "以后", "一定要", "禁止")
_PREFERENCE_ZH = ("偏好", "喜欢", "讨厌", "最爱", "宁可", "宁愿")  # 更喜欢 is counted through 喜欢
_FACT_ZH = (
    "名字是",
    "名字叫",
    "我叫",
    "叫做",
    "地址是",
    "住在",
    "生日是",
    "电话是",
    "号码是",
    "邮箱是",
    "密码是",
    "用的是",
    "我们用",
    "改为",
    "改成",
    "设置为",
    "设为",
    "默认",
    "位于",
    "端口是",
    "版本是",
)
_PROC_ZH = ("步骤", "首先", "第一步", "如何", "怎么", "怎样", "运行", "执行", "安装")
_FIRST_THEN_ZH_RE = lazy_re.compile(r"先[^。\n]{0,30}?(?:然后|再|接着)")

_NON_WORD = lazy_re.compile(r"[^a-z0-9']+")
_HAS_CJK = lazy_re.compile(r"[\u4e00-\u9fff]")


def _count_phrases(norm: str, phrases: tuple[str, ...]) -> int:
    return sum(norm.count(p) for p in phrases if p in norm)


def _cues(text: str) -> tuple[int, int, int, int]:
    """(decision, preference, fact, procedure) cue counts of the conversational text."""
    low = text.lower().replace("\u2019", "'")
    norm = " " + _NON_WORD.sub(" ", low) + " "
    decision = _count_phrases(norm, _DECISION_EN)
    preference = _count_phrases(norm, _PREFERENCE_EN)
    fact = _count_phrases(norm, _FACT_EN_PHRASES) + len(_FACT_EN_RE.findall(norm))
    proc = _count_phrases(norm, _PROC_EN)
    if " then " in norm and " first " in norm:
        proc += len(_FIRST_THEN_RE.findall(norm))
    if " to " in norm:
        proc += len(_TO_DO_RE.findall(norm))
    if "run `" in low:
        proc += 1
    if "=" in text:
        fact += len(_ASSIGN_RE.findall(text))
    numbered = len(_NUMBERED_RE.findall(text)) if ("1." in text or "1)" in text or "tep" in text or "步" in text) else 0
    if numbered >= 2:
        proc += numbered
    if _HAS_CJK.search(text):
        decision += sum(text.count(p) for p in _DECISION_ZH)
        preference += sum(text.count(p) for p in _PREFERENCE_ZH)
        fact += sum(text.count(p) for p in _FACT_ZH)
        proc += sum(text.count(p) for p in _PROC_ZH) + len(_FIRST_THEN_ZH_RE.findall(text))
    return decision, preference, fact, proc


class Classification(NamedTuple):
    """What the classify stage stores: ``memory_type`` (episodic, semantic, procedural), ``category`` (one of
    ``CATEGORIES``) and ``prior`` (write-time importance in [0, 1])."""

    memory_type: str
    category: str
    prior: float


def classify(turn: Turn) -> tuple[str, float]:
    """(memory_type, importance_prior) of ``turn``: ``classify_turn`` without the category."""
    c = classify_turn(turn)
    return c.memory_type, c.prior


def classify_turn(turn: Turn) -> Classification:
    """Memory type, category and importance prior of ``turn`` (see the module docstring for the cues and the
    schedule). Never raises for any Turn; an empty turn is ("episodic", "fact", 0.5)."""
    talk: list[str] = []
    talk_chars = 0
    tool_chars = 0
    has_system = False
    for m in turn.messages:
        if m.role == "system":
            has_system = True
        if m.text:
            if m.role == "tool":
                tool_chars += len(m.text)
            else:
                talk.append(m.text[:CUE_SCAN_CHARS])
                talk_chars += len(m.text)
        for c in m.tool_calls:
            tool_chars += len(c.arguments) + len(c.name)
        for r in m.tool_results:
            tool_chars += len(r.content)

    decision, preference, fact, proc = _cues("\n".join(talk)) if talk else (0, 0, 0, 0)

    semantic_score = decision + preference + fact
    if proc and (proc > semantic_score or (proc >= 2 and proc >= semantic_score)):
        memory_type = "procedural"
    elif semantic_score:
        memory_type = "semantic"
    else:
        memory_type = "episodic"

    total = talk_chars + tool_chars
    if has_system:
        row = "system"
    elif decision and fact:
        row = "decision+fact"
    elif preference and fact:
        row = "preference+fact"
    elif decision:
        row = "decision"
    elif preference:
        row = "preference"
    elif fact:
        row = "fact"
    elif total and tool_chars >= TOOL_CHATTER_SHARE * total:
        row = "tool_call"
    elif memory_type == "procedural":
        row = "process"
    else:
        row = "default"
    category, prior = PRIORS[row]
    return Classification(memory_type, category, prior)
