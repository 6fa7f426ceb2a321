"""Compaction methods, and which facts a compaction loses (docs/architecture.md §6).

A compaction keeps the last ``keep`` turns verbatim (the live context; never re-injected) and replaces every
earlier turn by nothing (``truncation``), by one extractive line each (``gist``, the demo's compaction), or by
the data's own LLM-written session summaries (``session_summary``, LoCoMo), or by a summary an LLM writes now
through an OpenAI-compatible endpoint (``llm_summary``; ``llm.py``; only when an endpoint is configured).

A fact is *lost* when at least one of its evidence turns is outside the kept window and its answer does not
appear (case- and whitespace-insensitive substring) in the compacted context. Its *relevant* turns are the
evidence turns outside the window: recovery has to bring back exactly those.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lantern.eval.datasets import Fact
from lantern.eval.lookahead import compaction_summary
from lantern.model import Turn

METHODS = ("truncation", "gist", "session_summary", "llm_summary")


@dataclass
class Compaction:
    method: str
    kept: list[int]  # indices of the turns kept verbatim
    context: str  # the whole compacted context: summary text + kept turns
    summary: str = ""  # the text that replaces the compacted-away turns ("" for truncation)


def _kept(turns: Sequence[Turn], keep: int) -> list[int]:
    return list(range(max(0, len(turns) - keep), len(turns)))


def truncation(turns: Sequence[Turn], keep: int) -> Compaction:
    """Keep the last ``keep`` turns; drop the rest."""
    kept = _kept(turns, keep)
    return Compaction("truncation", kept, "\n".join(turns[i].text for i in kept))


def gist(turns: Sequence[Turn], keep: int) -> Compaction:
    """Keep the last ``keep`` turns; every earlier turn becomes one line (its first user line, 100 characters)."""
    kept = _kept(turns, keep)
    head = compaction_summary(list(turns[: kept[0] if kept else len(turns)]))
    return Compaction("gist", kept, head + "\n" + "\n".join(turns[i].text for i in kept), head)


def session_summary(turns: Sequence[Turn], keep: int, summaries: dict[str, str]) -> Compaction:
    """Keep the last ``keep`` turns; every session with a compacted-away turn is replaced by its summary (the
    data's own, LLM-written: LoCoMo ``session_summary``). Sessions without a summary leave nothing."""
    kept = _kept(turns, keep)
    first = kept[0] if kept else len(turns)
    sessions = list(dict.fromkeys(t.session for t in turns[:first]))
    head = "\n".join(f"[{s}] {summaries[s]}" for s in sessions if s in summaries)
    return Compaction("session_summary", kept, head + "\n" + "\n".join(turns[i].text for i in kept), head)


def llm_summary(turns: Sequence[Turn], keep: int, summarizer: Callable[[Sequence[Turn]], str]) -> Compaction:
    """Keep the last ``keep`` turns; the earlier ones are replaced by ``summarizer(turns)`` (an LLM's summary,
    ``llm.Summarizer``)."""
    kept = _kept(turns, keep)
    gone = list(turns[: kept[0] if kept else len(turns)])
    head = summarizer(gone) if gone else ""
    return Compaction("llm_summary", kept, head + "\n" + "\n".join(turns[i].text for i in kept), head)


def compact(
    method: str,
    turns: Sequence[Turn],
    keep: int,
    summaries: dict[str, str] | None = None,
    summarizer: Callable[[Sequence[Turn]], str] | None = None,
) -> Compaction:
    if method == "truncation":
        return truncation(turns, keep)
    if method == "gist":
        return gist(turns, keep)
    if method == "session_summary":
        if not summaries:
            raise ValueError("session_summary compaction needs the data's session summaries (LoCoMo)")
        return session_summary(turns, keep, summaries)
    if method == "llm_summary":
        if summarizer is None:
            raise ValueError(
                "llm_summary compaction needs an OpenAI-compatible endpoint: --llm-base-url and --llm-model"
            )
        return llm_summary(turns, keep, summarizer)
    raise ValueError(f"unknown compaction {method!r}; one of {', '.join(METHODS)}")


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


def answer_in(answer: str, context: str) -> bool:
    """True when the (non-empty) answer appears in the context, ignoring case and whitespace runs."""
    a = _norm(answer)
    return bool(a) and a in _norm(context)


def lost_turns(fact: Fact, turn_of: dict[str, int], compaction: Compaction) -> list[int]:
    """The evidence turns of ``fact`` that the compaction dropped, or [] when the fact is not lost (all evidence
    kept, no resolvable evidence, or the answer survives in the compacted context)."""
    kept = set(compaction.kept)
    turns = sorted({turn_of[e] for e in fact.evidence if e in turn_of})
    outside = [t for t in turns if t not in kept]
    if not outside or answer_in(fact.answer, compaction.context):
        return []
    return outside
