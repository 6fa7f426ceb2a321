"""Live compaction detection (issue 4, part 2): did the application compact the conversation it is about to send?

``detect(lantern, session, messages)`` compares the message list an application is about to send (OpenAI chat dicts,
or any format ``Lantern.archive`` reads) with what the archive holds for ``session``. A compaction is, in order:

- ``summary``: a message that is a compaction summary: Claude Code's compact summary ("This session is being
  continued from a previous conversation ..."), or a system/user message starting with ``[Summary``,
  ``Summary of the conversation`` or ``<summary>``;
- ``dropped``: archived turns of the session are no longer in the live context while newer archived turns are
  (the live list starts after archived turn 0, or has a hole);
- ``size_drop``: the live context is much smaller than the archived session (under ``DROP_RATIO`` of its
  characters, the archive holding at least ``DROP_MIN_CHARS``) while still sharing turns with it.

Call it BEFORE archiving the list it is given: a list that merely starts a new conversation under the same
session id then shares no archived turn and is not a compaction. (Called after, the summary rule still works.)

The recovery to inject (``Compaction.recover``) queries with the live tail (last user message) plus the summary, and
passes the live messages as ``exclude``: turns still in the context are never re-injected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .recover.pipeline import normalize_space
from .model import Recovery

DROP_RATIO = 0.5  # ours
DROP_MIN_CHARS = 4000  # ours: below this a "drop" is noise
SUMMARY_QUERY_CHARS = 2000  # ours: how much of a long summary goes into the query

_SUMMARY_START = re.compile(r"^\s*(\[summary|summary of the conversation|<summary>)", re.IGNORECASE)
_CLAUDE_CODE = "this session is being continued from a previous conversation"

__all__ = ["Compaction", "detect", "is_summary", "message_text"]


@dataclass
class Compaction:
    """A detected compaction: why (``reason``: summary, dropped or size_drop), the archived entries whose text is
    no longer in the live context (``lost_entry_ids``, in turn order), and the summary text if one was found."""

    reason: str
    lost_entry_ids: list[int] = field(default_factory=list)
    summary: str | None = None
    query: str = ""
    session: str | None = None
    messages: list[Any] = field(default_factory=list, repr=False)
    scope: Any = None  # the lantern.scope.Scope detection ran in

    def recover(self, lantern: Any, budget: int | None = None) -> Recovery:
        """The block to inject: ``lantern.recover(query, session, budget, exclude=live messages, proactive=True)``
        in the scope the compaction was detected in (a proactive recovery: pruned entries stay out unless the
        query names them; reinforce.py)."""
        scope = self.scope or lantern.scope
        return lantern.recover(self.query, session=self.session, budget=budget, exclude=list(self.messages),
                               proactive=True, user=scope.user, agent=scope.agent, project=scope.project)


def message_text(m: Any) -> str:
    """The plain text of a chat message dict: string content, or the text parts of a list content."""
    if not isinstance(m, dict):
        return ""
    content = m.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict) and isinstance(p.get("text"), str):
                parts.append(p["text"])
        return "\n".join(parts)
    return ""


def is_summary(m: Any) -> bool:
    """Whether a message is a compaction summary (see the module docstring)."""
    if not isinstance(m, dict):
        return False
    if m.get("isCompactSummary"):
        return True
    text = message_text(m)
    if _CLAUDE_CODE in text[:400].lower():
        return True
    return m.get("role") in ("system", "user", "developer") and bool(_SUMMARY_START.match(text))


def _query(messages: list[Any], summary: str | None) -> str:
    last_user = next((message_text(m) for m in reversed(messages)
                      if isinstance(m, dict) and m.get("role") == "user" and not is_summary(m) and message_text(m).strip()), "")
    parts = [last_user.strip()]
    if summary:
        parts.append(summary.strip()[:SUMMARY_QUERY_CHARS])
    return "\n".join(p for p in parts if p)


def detect(lantern: Any, session: str | None, messages: list[Any], *, user: str | None = None,
           agent: str | None = None, project: str | None = None) -> Compaction | None:
    """A ``Compaction`` when ``messages`` (about to be sent) look compacted relative to ``session``'s archive
    within the scope (default: the handle's; lantern/scope.py), else None. Reads the archive only."""
    from .api import DEFAULT_SESSION
    from .scope import resolve

    scope = resolve(lantern.scope, user, agent, project)
    session = session or DEFAULT_SESSION
    messages = list(messages or [])
    summary = next((message_text(m) for m in messages if is_summary(m)), None)
    rows = lantern.store.session_turns(session, scope)
    lost: list[int] = []
    reason: str | None = None
    if rows:
        live = lantern.live_text(messages)
        present_turns = []
        lost_rows = []
        for entry_id, turn, text in rows:
            if normalize_space(text) in live:
                present_turns.append(turn)
            else:
                lost_rows.append((entry_id, turn))
        lost = [i for i, _ in lost_rows]
        newest_present = max(present_turns) if present_turns else None
        archived_chars = sum(len(r[2]) for r in rows)
        if newest_present is not None and any(turn < newest_present for _, turn in lost_rows):
            reason = "dropped"
        elif present_turns and archived_chars >= DROP_MIN_CHARS and len(live) < DROP_RATIO * archived_chars:
            reason = "size_drop"
    if summary is not None:
        reason = "summary"
    if reason is None:
        return None
    return Compaction(reason=reason, lost_entry_ids=lost, summary=summary, query=_query(messages, summary),
                      session=session, messages=messages, scope=scope)
