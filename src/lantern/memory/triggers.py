"""Retrieval triggers (docs/architecture.md §5.3): should this turn recover from the archive?

Two cue families, English and Chinese, as precompiled regexes:

- **back-references** in the user's question ("之前", "刚才", "上次", "你提到", "as I said", "earlier", "the one we
  used", "what was the port again?") — the user points at something said before;
- **low-confidence drafts** in the model's draft answer ("我不确定", "大概", "I'm not sure", "I don't have that
  information") — the model is missing something the archive may hold.

``should_recover(question, draft)`` fires when either family matches and names every cue that matched;
``recovery_query(question, gist)`` is the query to recover with: the question plus the core gist (architecture §5.3).

Cue list and its exclusions are ours (the write-ups name a handful of cues, not a list): each was kept,
narrowed or dropped by measuring precision/recall on the tune half of a labelled set built from LoCoMo,
MemDaily, MemoryBank and aider turns (``benchmarks/bench_triggers.py``, ``lantern.memory.triggers_eval``;
BENCHMARKS.md). The version pinning cues ("which version did we pin", "the version we pinned",
我们锁定的/你固定过的……版本) cover a question the set does not hold; they fire on no text of either half of it, so its
precision and recall do not depend on them. A cue-based trigger cannot see a question that needs memory but
carries no cue ("When did Caroline go to the support group?"): those are misses by construction, and the
compaction-time recovery covers them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from lantern import lazy_re

__all__ = ["Trigger", "should_recover", "recovery_query", "BACK_REFERENCE_CUES", "LOW_CONFIDENCE_CUES"]

_I = re.IGNORECASE


def _any(*words: str) -> str:
    """A non-capturing alternation of ``words`` for a re.VERBOSE pattern (their spaces written as ``[ ]``)."""
    return "(?:" + "|".join(w.replace(" ", "[ ]") for w in words) + ")"


def _verbose(pattern: str) -> lazy_re.LazyPattern:
    """A cue pattern written with re.VERBOSE (one alternative per line), case-insensitive, compiled at its first
    use."""
    return lazy_re.compile(pattern, re.VERBOSE | _I)


# what a user asks back for by name: "remind me the port", "what was the path again?"
_ATTRIBUTES = _any(
    "port",
    "path",
    "file",
    "command",
    "name",
    "version",
    "url",
    "host",
    "password",
    "key",
    "id",
    "number",
    "value",
    "flag",
    "option",
    "setting",
    "config",
    "branch",
    "error",
    "table",
    "database",
    "endpoint",
    "address",
    "token",
    "model",
    "library",
    "package",
    "directory",
    "folder",
    "script",
    "repo",
    "server",
    "username",
    "email",
    "link",
    "timeout",
)
_ASKED_ATTRIBUTES = _any(
    "port",
    "path",
    "file",
    "command",
    "name",
    "version",
    "url",
    "host",
    "password",
    "key",
    "id",
    "number",
    "value",
    "flag",
    "option",
    "setting",
    "config",
    "branch",
    "error",
    "table",
    "database",
    "db",
    "endpoint",
    "address",
    "ip",
    "token",
    "model",
    "library",
    "package",
    "directory",
    "folder",
    "script",
    "function",
    "class",
    "method",
    "variable",
    "repo",
    "server",
    "username",
    "email",
    "link",
    "limit",
    "timeout",
    "size",
    "deadline",
    "budget",
)
_THINGS = _any(
    "one",
    "ones",
    "thing",
    "method",
    "approach",
    "command",
    "file",
    "fix",
    "option",
    "setting",
    "version",
    "tool",
    "library",
    "model",
    "port",
    "trick",
    "solution",
    "query",
    "script",
    "config",
)
_CLAUSE = r"[^.?!\n]"  # any character but a sentence end

# (label, pattern). The label is what ``Trigger.reasons`` reports after the family name.
# English: word boundaries everywhere; "before"/"again"/"remind me" only in the narrow forms that refer back.
_BACK_EN: list[tuple[str, str | re.Pattern[str]]] = [
    ("as I said", r"\bas (?:I|we) (?:said|mentioned|told you|noted|explained|discussed)\b"),
    ("as you said", r"\bas you (?:said|mentioned|suggested|recommended|told me|noted)\b"),
    (
        "you said",
        _verbose(rf"""
              \byou(?:'ve|[ ]have|[ ]had)?[ ]{_any("said", "mentioned", "suggested", "recommended", "told me")}\b
            | \b(?:have|had|did)[ ]you[ ](?:ever[ ])?
              {
            _any(
                "say",
                "said",
                "mention",
                "mentioned",
                "suggest",
                "suggested",
                "recommend",
                "recommended",
                "tell",
                "told",
                "share",
                "shared",
                "give",
                "gave",
            )
        }
              \b{_CLAUSE}{{0,50}}\b(?:me|us)\b
        """),
    ),
    (
        "I told you",
        r"\bI (?:told you|mentioned|shared with you|said to you|asked you)\b|\bdid I "
        r"(?:ask|tell|mention|say|share|show)\b",
    ),
    ("we discussed", r"\bwe (?:discussed|talked about|spoke about|chatted about|agreed on|decided on|went over)\b"),
    ("earlier", r"\bearlier\b(?!\s+(?:this|today|in the day|than|versions?|releases?|builds?)\b)"),
    (
        "before",
        r"\b(?:said|told|mentioned|recommended|suggested|used|discussed|shared|asked|gave|pinned)\b[^.?!\n]{0,40}\bbefore\b\s*(?:[,.?!]|$)",
    ),
    ("previously", r"\bpreviously\b"),
    ("last time", r"(?<!since )(?<!the )\blast time\b"),
    (
        "the one we used",
        _verbose(rf"""
            \bthe[ ]{_THINGS}[ ](?:we|you|I)[ ]
            {
            _any(
                "used",
                "tried",
                "chose",
                "picked",
                "discussed",
                "mentioned",
                "set",
                "had",
                "wrote",
                "added",
                "suggested",
                "recommended",
                "pinned",
            )
        }\b
        """),
    ),
    (
        "again?",
        r"\b(?:what|which|where|who|when|how)(?:'s| is| was| are| were| did| do)\b[^.?!\n]{0,60}\bagain"
        r"(?:\s*\?|\s+(?:when|for|with|about|from|that|of)\b)|\btell me again\b",
    ),
    # a past act of the conversation named in a question: "what was that command you gave me", "what did you say
    # the timeout should be", "the script you wrote for me"
    (
        "what you said",
        _verbose(rf"""
              \b(?:what|which|where|who|how)\b{_CLAUSE}{{0,40}}\b(?:you|we)[ ]
              {
            _any(
                "gave",
                "listed",
                "wrote",
                "edited",
                "pasted",
                "changed",
                "hit",
                "did",
                "found",
                "fixed",
                "ran",
                "recommended",
                "suggested",
                "showed",
                "sent",
                "booked",
                "made",
            )
        }\b
            | \bwhat[ ]did[ ](?:you|we)[ ](?:say|call|name|recommend|suggest|mention|end[ ]up|find|conclude)\b
            | \b(?:the|that)[ ]{_THINGS}[ ](?:you|we)[ ](?:gave|wrote|showed|sent|pasted|listed)\b
        """),
    ),
    (
        "going back",
        r"\b(?:going |get(?:ting)? )?back to (?:the|that|our)\b|\brefresh my memory\b|\brecall (?:the|what|which|how)\b"
        r"|\bdo you still have (?:the|that)\b|\bdidn't we already\b|\bbefore the break\b"
        r"|\bthe (?:conclusion|outcome|original plan)\b|\bfrom (?:this morning|yesterday|earlier)\b"
        r"|\b(?:what|which) was the \w+(?:'s)? old\b",
    ),
    (
        "remind me",
        _verbose(rf"""
            (?:^|[,.!?;]\s*|\b(?:can|could|would|will)[ ]you[ ]|\bplease[ ]|\bpls[ ])
            remind[ ]me[,:]?[ ]
            (?:   what|which|where|when|who|why|how[ ](?:we|you|I)
                | of[ ](?:the|what|which|how)[ ](?:we|you|I)\b
                | (?:of[ ])?(?:the|our|my)[ ](?:[\w.-]+\s+){{0,2}}{_ATTRIBUTES}s?\b
            )
        """),
    ),
    (
        "remember",
        r"\b(?:do|did|can|could) you (?:still )?(?:remember|recall)\b|\byou remember "
        r"(?:what|which|when|where|how|the)\b",
    ),
    (
        "what was the",
        _verbose(rf"""
            \bwhat[ ](?:was|were)[ ](?:the|that|those|my|our)\b{_CLAUSE}{{0,60}}\b(?:we|you|I)\b{_CLAUSE}{{0,30}}
            \b{
            _any(
                "used",
                "said",
                "mentioned",
                "recommended",
                "suggested",
                "discussed",
                "chose",
                "picked",
                "set",
                "had",
                "tried",
                "talked",
                "pinned",
            )
        }\b
        """),
    ),
    (
        "which did we",
        _verbose(rf"""
            \bwhich\b{_CLAUSE}{{0,50}}\b(?:did|have|had)[ ](?:we|you|I)\b{_CLAUSE}{{0,30}}
            \b{
            _any(
                "use",
                "used",
                "say",
                "mention",
                "recommend",
                "suggest",
                "choose",
                "pick",
                "discuss",
                "try",
                "settle",
                "decide",
                "agree",
                "share",
                "tell",
                "pin",
            )
        }
        """),
    ),
    ("once mentioned", r"\b(?:once|ever|already) (?:recommended|mentioned|told|shared|said|suggested|discussed)\b"),
    (
        "our last conversation",
        r"(?<!since )\b(?:our|the) (?:last|previous|earlier|prior) (?:conversation|chat|session|discussion|talk)\b",
    ),
    (
        "what was the X?",
        _verbose(rf"""
            ^\W*(?:(?:so|ok|okay|and|hey|wait|sorry),?\s+)?
            what[ ](?:was|were)[ ](?:the|our|my)[ ](?:[\w.-]+\s+){{0,2}}{_ASKED_ATTRIBUTES}s?
            \s*(?:again\s*)?\?\s*$
        """),
    ),
    (
        "what did we decide",
        r"\bwhat (?:did|have|had) (?:we|you|I) (?:decide|agree|settle|conclude|choose|pick)(?:d)?\b",
    ),
    ("what was its name", r"\bwhat (?:was|were) (?:its|their|his|her) (?:name|names|title)\b"),
    ("right?", r"\bI\b[^.?!\n]{0,60},\s*(?:right|correct)\s*\?"),
    ("fill-in question", r"\b(?:was|were)\s*\?\s*$"),
    (
        "question about me",
        _verbose(rf"""
              \b(?:what|which|where|when|who|how[ ](?:long|many|much|old|often))\b{_CLAUSE}{{0,40}}
              \b(?:do|did|was|were|have|had|am)[ ]I\b{_CLAUSE}{{0,60}}\?
            | \b(?:what|which|who|where)(?:'s|[ ]is|[ ]was|[ ]are|[ ]were)[ ]my\b{_CLAUSE}{{0,60}}\?
        """),
    ),
]

# Chinese: no word boundaries exist; exclusions are lookarounds measured on MemDaily/MemoryBank text
# ("之前" as "before X" in "会议之前" is excluded by requiring it to start a clause or follow 我/你/我们).
_BACK_ZH: list[tuple[str, str | re.Pattern[str]]] = [
    ("之前", r"(?:^|[，。？！,.?!\s]|我|你|我们|咱们)之前(?!的?[一-龥]{0,4}(?:之前)|的?版本)"),
    (
        "以前",
        _verbose(r"""
              (?:我们|咱们|你|我)以前(?:说|提|讲|聊)(?:过|的)
            | (?:我们|咱们|你|我)以前(?:用|定|设|选|配)的
            | (?:我们|咱们)以前[^。！？]{0,20}(?:什么|哪|多少|几)[^。！？]{0,10}[？?]
        """),
    ),
    (
        "刚才",
        r"(?:刚才|刚刚)(?:说|提|讲|问|聊|告诉|推荐|建议|给的|用的|那|的|你|我们|改|跑|贴)|回到(?:刚才|之前|前面)",
    ),
    ("当时", r"(?:我们|咱们|你)当时|当时(?:怎么|是怎么|为什么|说)"),
    ("来着", r"来着\s*[？?]|(?:什么|哪|多少|谁|几|啥|怎么)[^。！，]{0,12}来着"),
    ("对吗", r"我[^。！？]{0,30}[，,]\s*(?:对吗|是吗|对吧|是吧|没错吧)[？?]"),
    ("填空问", r"(?:是|叫)[？?]\s*$"),
    (
        "问我自己",
        r"我(?:(?!该|应该|要|能|可以|想|需要|怎么)[^，。！？]){0,24}(?:什么|哪|多久|多少|谁|几)[^。！，]{0,10}？",
    ),
    ("上次", r"(?:上次|上回)(?!(?:更新|修改|登录|访问|同步)(?:时间|日期))"),
    ("你提到", r"你(?:曾经|之前|刚才|上次)?(?:提到|提过|说过|讲过|推荐过?|建议过?|告诉过?我|分享过)"),
    ("我提到", r"我(?:曾经|之前|刚才|上次)?(?:和|跟|向|给)你(?:提到|提过|说过|讲过|推荐过?|推过荐|分享过?|聊过|讲过)"),
    ("我说过", r"我(?:曾经|之前|刚才|上次)?(?:提到过|说过|讲过|提过)"),
    ("那个方法", r"那个(?:方法|办法|命令|文件|方案|工具|端口|配置|版本|设置)"),
    ("我们用的", r"我们(?:之前|上次|刚才)?(?:用的|用过的|选的|定的|说的|聊的|讨论的)"),
    ("前面说的", r"前面(?:说|提|讲|聊|推荐|贴|给|发)(?:的|过|到)"),
    ("锁定的版本", r"(?:我们|咱们|你)(?:之前|上次|刚才|当时)?(?:固定|锁定)(?:过|了)?的[^。！？，]{0,12}版本"),
    ("还记得", r"还记得|记得吗|记不记得"),
    ("曾经", r"曾经(?:和|跟|向|给)你|你曾经|我曾经[^。！？]*[？?]"),
    ("先前", r"先前"),
]

_LOW_EN: list[tuple[str, str | re.Pattern[str]]] = [
    ("I'm not sure", r"\bI(?:'m| am) not (?:sure|certain)\b"),
    (
        "I don't have that information",
        _verbose(rf"""
            \bI[ ](?:do[ ]not|don't)[ ]have[ ](?:that|this|any|enough|the|access[ ]to[ ](?:that|this|your|the|any))
            \b{_CLAUSE}{{0,30}}\b{
            _any("information", "info", "details", "context", "record", "data", "conversation", "history")
        }\b
        """),
    ),
    ("I don't recall", r"\bI (?:do not|don't|can't|cannot|can not|couldn't) (?:recall|remember)\b"),
    (
        "as an AI",
        _verbose(rf"""
            \bas[ ]an[ ]AI\b{_CLAUSE}{{0,40}}\b(?:don't|do[ ]not|can't|cannot)[ ]
            {_any("have access to", "access", "remember", "recall", "retain", "store", "see")}[ ]
            {_any("your", "our", "previous", "past", "earlier", "personal", "that", "this", "the", "any")}\b
        """),
    ),
    ("no record", r"\b(?:no|don't have a) record of\b|\bI have no (?:memory|information|record) of\b"),
]

_LOW_ZH: list[tuple[str, str | re.Pattern[str]]] = [
    ("我不确定", r"我(?:不|不太|并不)(?:确定|清楚)"),
    ("可能", r"(?:^|[，。？！,.?!\s])(?:可能是|也许是)|我(?:可能|也许)记"),
    ("大概", r"(?:^|[，。？！,.?!\s])大概是"),
    ("不记得", r"不记得|记不(?:清|起|太清)|想不起"),
    ("没有相关信息", r"我?没有(?:关于|相关|这方面的?|那方面的?|你说的)[一-龥]{0,6}(?:信息|记录|资料|记忆)"),
    (
        "作为AI",
        _verbose(r"""
              作为(?:一个|一名)?(?:AI|人工智能|语言模型)[^。！？]{0,20}(?:无法|不能)(?:记住|访问|获取|回忆|查看|保存)
            | 作为(?:一个|一名)?(?:AI|人工智能|语言模型)[^。！？]{0,20}没有(?:记忆|之前|过去|你的|相关)
        """),
    ),
]


def _compile(cues: list[tuple[str, Any]], flags: int = 0) -> list[tuple[str, Any]]:
    """The cues with each pattern string compiled at its first use (lantern/lazy_re.py)."""
    return [(label, p if not isinstance(p, str) else lazy_re.compile(p, flags)) for label, p in cues]


BACK_REFERENCE_CUES = _compile(_BACK_EN, _I) + _compile(_BACK_ZH, _I)
LOW_CONFIDENCE_CUES = _compile(_LOW_EN, _I) + _compile(_LOW_ZH, _I)


@dataclass
class Trigger:
    """Whether to recover, and why: ``reasons`` names each matched cue ("back-reference: 之前",
    "low-confidence draft: I'm not sure"). Truthy when it fires."""

    fire: bool
    reasons: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.fire


def _matches(text: str, cues: list[tuple[str, re.Pattern[str]]], family: str) -> list[str]:
    return [f"{family}: {label}" for label, rx in cues if rx.search(text)]


def back_references(text: str) -> list[str]:
    """Back-reference cues in ``text``, as reasons."""
    return _matches(text or "", BACK_REFERENCE_CUES, "back-reference")


def low_confidence(text: str) -> list[str]:
    """Low-confidence cues in a draft answer, as reasons."""
    return _matches(text or "", LOW_CONFIDENCE_CUES, "low-confidence draft")


def should_recover(question: str, draft: str | None = None) -> Trigger:
    """Fire a recovery when ``question`` refers back to earlier conversation, or when the model's ``draft``
    answer to it signals missing knowledge. Pure regex, no model: well under a millisecond per turn."""
    reasons = back_references(question)
    if draft:
        reasons += low_confidence(draft)
    return Trigger(bool(reasons), reasons)


def recovery_query(question: str, gist: str = "") -> str:
    """The query a triggered recovery uses: the question, then the core gist (docs/architecture.md §5.3)."""
    parts = [p.strip() for p in (question or "", gist or "") if p and p.strip()]
    return "\n".join(parts)
