"""The look-ahead protocol: label-free facts on a coding conversation (shared by ``lantern demo`` and the ``aider``
eval dataset). Ours, after the paper's §1 definition of the context cliff ΔF = F(C_t*) \\ F(C_t*+1).

1. Compact a session at t* = the turn ``COMPACT_AT`` (60%) of the way through it: the last ``KEEP`` turns before t*
   stay verbatim, every earlier turn is replaced by one extractive line (its first user line, 100 characters).
2. The *needed lost facts* are specific tokens (paths, numbers, identifiers, error strings, hashes, versions, URLs,
   dates, quoted names; found by ``extract_tags``) that the next ``LOOKAHEAD`` turns after t* use again, that
   appear in the compacted-away turns, and that are absent from the compacted context.
3. Recovery is queried with the compacted context's tail: the last user message of the kept turns followed by the
   compaction summary. A fact is recovered when its token is inside the injected block.

Fact types for stratification (``fact_type``): the tag kind mapped onto coding fact types (path, number,
identifier, error, name, date, decision). ``decision``: a token that a compacted-away *user* message names in a
sentence with a decision cue (use / switch to / instead / let's / don't / always / never / prefer / should, and
their Chinese counterparts); ours, a label-free proxy: the paper does not define fact types.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from lantern import lazy_re
from lantern.model import Turn
from lantern.text.tags import extract_tags

KEEP = 4  # turns kept verbatim after the compaction (ours)
LOOKAHEAD = 10  # turns after t* whose reuse of a fact makes it "needed"
COMPACT_AT = 0.6  # t* as a fraction of the session's turns
SUMMARY_LINE_CHARS = 100
MIN_TURNS = KEEP + 4  # shorter sessions are not compacted
FACT_KINDS = {"path", "error", "identifier", "port", "url", "version", "hash", "number", "quoted", "env", "date"}
# tag kind -> coding fact type (the strata of the report)
FACT_TYPES = {
    "path": "path",
    "url": "path",
    "number": "number",
    "port": "number",
    "version": "number",
    "identifier": "identifier",
    "env": "identifier",
    "hash": "identifier",
    "error": "error",
    "quoted": "name",
    "date": "date",
}
CODING_TYPES = ("path", "number", "identifier", "error", "name", "date", "decision")
_DECISION = lazy_re.compile(
    r"\b(?:use|using|switch(?:ed)? to|instead|let's|lets|don't|do not|always|never|prefer|should|must|go with|stick "
    r"with)\b"
    r"|改用|使用|不要|换成|总是|应该",
    re.IGNORECASE,
)
_SENTENCE = lazy_re.compile(r"(?<=[.!?。！？])\s+|\n")  # a sentence ends at . ! ? before a space, or a line break


def compaction_summary(turns: Sequence[Turn]) -> str:
    """The extractive compaction: one line per compacted turn, its first user line cut to 100 characters."""
    lines = []
    for turn in turns:
        user = next((m.text for m in turn.messages if m.role == "user" and m.text.strip()), "")
        first = user.strip().splitlines()[0] if user.strip() else "(no user message)"
        lines.append(f"- turn {turn.index}: {first[:SUMMARY_LINE_CHARS]}")
    return "[Summary of the earlier conversation]\n" + "\n".join(lines)


def t_star(n_turns: int) -> int | None:
    """The compaction point of a session of ``n_turns`` turns (turns ``[t* - KEEP, t*)`` are kept verbatim), or
    None when the session is shorter than ``MIN_TURNS``."""
    if n_turns < MIN_TURNS:
        return None
    return max(KEEP + 1, int(n_turns * COMPACT_AT))


def future_tags(future: Sequence[Turn]) -> list[tuple[str, str]]:
    """(value, tag kind) of the fact-kind tags the look-ahead turns use, unique by value, first use first; values of
    at least 3 characters."""
    out: dict[str, str] = {}
    for turn in future:
        for tag in extract_tags(turn.text):
            if tag.kind in FACT_KINDS and len(tag.value) >= 3 and tag.value not in out:
                out[tag.value] = tag.kind
    return list(out.items())


def needed_lost_facts(compacted: Sequence[Turn], context: str, future: Sequence[Turn]) -> list[str]:
    """Specific tokens used again after t* that were in compacted-away turns and are absent from the context."""
    gone = "\n".join(t.text for t in compacted)
    return [v for v, _ in future_tags(future) if v in gone and v not in context]


def recovery_query(kept: Sequence[Turn], summary: str) -> str:
    """The demo's query: the last user message of the kept turns, then the compaction summary."""
    live = [m for t in kept for m in t.messages]
    last_user = next((m.text for m in reversed(live) if m.role == "user" and m.text.strip()), "")
    return last_user + "\n" + summary


def is_decision(value: str, turns: Sequence[Turn]) -> bool:
    """True when a user message of ``turns`` names ``value`` in a sentence with a decision cue."""
    for turn in turns:
        for m in turn.messages:
            if m.role != "user" or value not in m.text:
                continue
            for s in _SENTENCE.split(m.text):
                if value in s and _DECISION.search(s.replace(value, " ")):
                    return True
    return False


def fact_type(value: str, kind: str, evidence: Sequence[Turn]) -> str:
    """The coding fact type of a look-ahead token: ``decision`` when a user message of its evidence turns states it
    with a decision cue, else its tag kind mapped by ``FACT_TYPES``."""
    return "decision" if is_decision(value, evidence) else FACT_TYPES.get(kind, kind)
