"""Live compaction detection (docs/architecture.md §5.3): did the application compact the conversation it sends?

``detect(lantern, session, messages)`` compares the message list an application is about to send (OpenAI chat dicts,
or any format ``Lantern.archive`` reads) with what the archive holds for ``session``. A compaction is, in order:

- ``summary``: a message that is a compaction summary: Claude Code's compact summary ("This session is being
  continued from a previous conversation ..."), or a system/user message starting with ``[Summary``,
  ``Summary of the conversation`` or ``<summary>``;
- ``dropped``: archived turns of the session are no longer in the live context while newer archived turns are
  (the live list starts after archived turn 0, or has a hole);
- ``size_drop``: the live context is much smaller than the archived session (under ``DROP_RATIO`` of its
  characters, the archive holding at least ``DROP_MIN_CHARS``) while still sharing turns with it.

A rewind is not a compaction. Archived turns newer than the newest one still in the live context are **abandoned**:
the application resent the conversation with its later part changed (a message edited, a reply regenerated, the
last turns deleted), or sent a side request that holds only the conversation's start (a title request). A
compaction drops older turns and keeps the newest ones; it never keeps the old and drops the new. Abandoned turns
are not "lost" (``Compaction.abandoned_entry_ids``), do not count towards a size drop, and are never recovered into
that live context. When no archived turn is in the live context at all, nothing is abandoned: that is a new
conversation under the same session id. One request is no evidence that the conversation went on without them:
``Tracker`` keeps each such request as a rewind candidate (``Rewind``) and acts only on one a later request
confirms (``confirmed_rewinds``): that request holds the candidate request's reply (the archived turn carrying the
candidate's last message and what came after it: the client kept the new branch and built on it) and none of the
abandoned turns. A request that holds any of them again refutes the candidate. A side request (a chat UI's title
request), a retry or a duplicate is sent once and never built on, so it never confirms anything, however often it is
sent. The proxy then moves the confirmed turns into ``<session>/abandoned-<id>``, never deleting them. Turns a
compaction already took out of the context are not rewound by a later request (the client holds them as its
summary): they stay lost, to be recovered, not abandoned.

Call it BEFORE archiving the list it is given: a list that merely starts a new conversation under the same
session id then shares no archived turn and is not a compaction. (Called after, the summary rule still works.)

The recovery to inject (``Compaction.recover``) queries with the live tail (last user message) plus the summary, and
passes the live messages as ``exclude``: turns still in the context are never re-injected.
"""

from __future__ import annotations

import bisect
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from lantern import lazy_re
from lantern.errors import LanternError
from lantern.model import Message, Recovery
from lantern.text.clean import normalize_space

DROP_RATIO = 0.5  # ours
DROP_MIN_CHARS = 4000  # ours: below this a "drop" is noise
SUMMARY_QUERY_CHARS = 2000  # ours: how much of a long summary goes into the query
# ours: the longest compaction summary a recovery reads. Real ones are far shorter (realcompact: 115 Claude Code
# summaries, median 12,108 characters, longest 24,528); a text 40 times the longest is a wrong file or a transcript
MAX_SUMMARY_CHARS = 1_000_000
SUMMARY_CUT_SLACK = 1000  # ours: a longer summary is cut at a whitespace this close to the limit, else at it
SUMMARY_CUT = "summary_cut"  # Recovery.reason of a full block read against a summary cut to MAX_SUMMARY_CHARS

_SUMMARY_START = lazy_re.compile(r"^\s*(\[summary|summary of the conversation|<summary>)", re.IGNORECASE)
_SUMMARY_MARKUP = lazy_re.compile(r"^\s*(\[summary|<summary>)", re.IGNORECASE)  # the markup forms of _SUMMARY_START
_CLAUDE_CODE = "this session is being continued from a previous conversation"
# Claude Code's fixed opening ("This session is being continued from a previous conversation that ran out of
# context. The conversation is summarized below:") and a "Summary:" label: words of the template, not of the work
_TEMPLATE_OPENING = lazy_re.compile(  # the literal sentence only: words after it may be the summary's own
    r"^\s*this session is being continued from a previous conversation(?: that ran out of context)?\s*[.:]?\s*"
    r"(?:(?:the conversation is )?summari[sz]ed below:|summary:)?\s*",
    re.IGNORECASE,
)

__all__ = [
    "Compaction",
    "Rewind",
    "Tracker",
    "abandoned_after",
    "confirmed_rewinds",
    "detect",
    "is_runtime_summary",
    "runtime_summaries",
    "is_summary",
    "message_text",
    "read_summary",
    "summary_text",
    "summary_query",
    "summary_query_text",
]


@dataclass
class Compaction:
    """A detected compaction: why (``reason``: summary, dropped or size_drop), the archived entries whose text is
    no longer in the live context (``lost_entry_ids``, in turn order), and the summary text if one was found."""

    reason: str
    lost_entry_ids: list[int] = field(default_factory=list)
    abandoned_entry_ids: list[int] = field(default_factory=list)  # rewound away, not lost (module docstring)
    summary: str | None = None
    query: str = ""
    session: str | None = None
    messages: list[Any] = field(default_factory=list, repr=False)
    scope: Any = None  # the lantern.scope.Scope detection ran in

    def recover(
        self,
        lantern: Any,
        budget: int | None = None,
        *,
        source: str = "api",
        record: bool = True,
        rerank: bool = False,
        llm: Any = None,
    ) -> Recovery:
        """The block to inject: ``lantern.recover_compaction(summary, live=live messages, session=...)`` in the scope
        the compaction was detected in: the specifics the summary and the live context lost (recover/loss.py);
        turns rewound away (``abandoned_entry_ids``) count as live, never as lost. ``rerank``: one LLM call through
        ``llm`` puts first the lost items the task needs most (``Lantern.recover_compaction``). With
        ``record`` (default) the compaction is stored as one event (``Lantern.record_compaction``: ``lantern
        events``, the inspector) with ``source`` naming who detected it."""
        scope = self.scope or lantern.scope
        live = [m for m in self.messages if not is_summary(m)]
        started = time.perf_counter()
        recovery = lantern.recover_compaction(
            self.summary,
            live=live + list(self.abandoned_entry_ids),
            session=self.session,
            budget=budget,
            user=scope.user,
            agent=scope.agent,
            project=scope.project,
            rerank=rerank,
            llm=llm,
        )
        if record:
            lantern.record_compaction(
                recovery,
                session=self.session,
                reason=self.reason,
                lost=self.lost_entry_ids,
                source=source,
                user=scope.user,
                agent=scope.agent,
                project=scope.project,
                latency_ms=1000 * (time.perf_counter() - started),
            )
        return recovery


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


def is_runtime_summary(m: Any, opening: bool = False) -> bool:
    """Whether a message can only be a runtime's compaction summary, stricter than ``is_summary`` (which decides
    detection, where a false alarm costs one recovery): Claude Code's flag ``isCompactSummary``, a message that
    starts with Claude Code's "This session is being continued from a previous conversation", a system /
    developer message that starts like a summary ("[Summary", "Summary of the conversation", "<summary>"), or,
    when it ``opening`` the conversation (no assistant message before it, where a runtime puts the summary that
    replaces the turns), a user message that starts with a summary's markup ("[Summary", "<summary>"). A user
    message that merely starts like a summary in words ("Summary of the conversation I had with my landlord: ...")
    or that comes after a reply ("[Summary] of my meds: ...") is the user's own words. The proxy does not
    archive runtime summaries (ours; ``runtime_summaries``)."""
    if not isinstance(m, dict):
        return False
    if m.get("isCompactSummary") is True:
        return True
    text = message_text(m).lstrip()
    if text[: len(_CLAUDE_CODE)].lower() == _CLAUDE_CODE:
        return True
    if m.get("role") == "user" and opening:
        return bool(_SUMMARY_MARKUP.match(text))
    return m.get("role") in ("system", "developer") and bool(_SUMMARY_START.match(text))


def runtime_summaries(messages: list[Any]) -> list[bool]:
    """``is_runtime_summary`` of each message of a request, each user message judged ``opening`` when no
    assistant message comes before it."""
    out, replied = [], False
    for m in messages:
        out.append(is_runtime_summary(m, opening=not replied))
        replied = replied or (isinstance(m, dict) and m.get("role") == "assistant")
    return out


def summary_query(messages: list[Any]) -> tuple[str, str] | None:
    """``(summary, query)`` of a message list holding a compaction summary: the query a compaction detected in it
    recovers with (``Compaction.query``), known before detection runs (the proxy embeds it ahead:
    recover/query_vectors.py). None when no message is a summary."""
    summary = next((message_text(m) for m in messages if is_summary(m)), None)
    return None if summary is None else (summary, _query(messages, summary))


def last_user_text(messages: Sequence[Any]) -> str:
    """The text of the last user message of ``messages`` that is no compaction summary (``Message`` objects and
    message dicts; anything else, an entry id, skipped), "" if none."""
    for m in reversed(messages):
        if isinstance(m, Message) and m.role == "user" and m.text.strip():
            return m.text
        if isinstance(m, dict) and m.get("role") == "user" and not is_summary(m) and message_text(m).strip():
            return message_text(m)
    return ""


def _query(messages: list[Any], summary: str | None) -> str:
    parts = [last_user_text(messages).strip()]
    if summary:
        parts.append(summary_query_text(summary))
    return "\n".join(p for p in parts if p)


def summary_text(summary: Any) -> tuple[str, str]:
    """A compaction summary as the recovery reads it (``Lantern.recover_compaction``, so every caller: the API, the
    CLI, MCP, REST, the hooks, the proxy): ``(text, detail)``. ``text`` is ``summary`` itself, "" for None (an
    encrypted or absent summary); a summary over ``MAX_SUMMARY_CHARS`` characters is cut to its first
    ``MAX_SUMMARY_CHARS`` (at the last whitespace within ``SUMMARY_CUT_SLACK`` characters before the limit, so no
    word is cut in two) and ``detail`` says so in words ("" when nothing was cut): the recovery still runs, and an
    item stated only past the cut counts as lost (injected again rather than lost). Raises TypeError for a
    non-string."""
    if summary is None:
        return "", ""
    if not isinstance(summary, str):
        raise TypeError(f"summary must be a string or None, got {type(summary).__name__}")
    if len(summary) <= MAX_SUMMARY_CHARS:
        return summary, ""
    end = MAX_SUMMARY_CHARS
    space = max(summary.rfind(c, end - SUMMARY_CUT_SLACK, end + 1) for c in " \n\t")
    text = summary[: space if space > 0 else end]
    return text, (
        f"summary of {len(summary):,} characters read up to {len(text):,} (the limit is {MAX_SUMMARY_CHARS:,}): "
        "what it states past there counts as lost"
    )


def read_summary(path: Path | str, stdin: IO[bytes] | None = None) -> str:
    """The text of a summary file (``"-"``: ``stdin``, default the process's standard input), read at most
    ``4 * MAX_SUMMARY_CHARS + 1`` bytes (UTF-8 takes at most 4 per character), never the whole of a larger file.
    An empty file gives "" (no summary). Raises LanternError naming the file when it cannot be read, is over
    ``MAX_SUMMARY_CHARS`` characters, holds a NUL byte (binary data) or is not UTF-8 (the offset of the first bad
    byte)."""
    limit = 4 * MAX_SUMMARY_CHARS
    name = "standard input" if str(path) == "-" else str(path)
    try:
        if str(path) == "-":
            data = (stdin or sys.stdin.buffer).read(limit + 1)
        else:
            with open(path, "rb") as f:
                data = f.read(limit + 1)
    except OSError as e:
        raise LanternError(f"summary {name}: cannot read it ({e.strerror or e})") from None
    if b"\x00" in data:
        at = data.index(b"\x00")
        raise LanternError(f"summary {name}: binary data (a NUL byte at offset {at:,}), not a summary's text")
    try:
        text = data.decode("utf-8").removeprefix("\ufeff") if len(data) <= limit else ""  # a BOM is no text
    except UnicodeDecodeError as e:
        raise LanternError(
            f"summary {name}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start:,}); convert it first"
        ) from None
    if len(data) > limit or len(text) > MAX_SUMMARY_CHARS:
        raise LanternError(
            f"summary {name}: over the limit of {MAX_SUMMARY_CHARS:,} characters (give the summary, not the transcript)"
        )
    return text


def summary_query_text(summary: str) -> str:
    """The part of a compaction summary that goes into the recovery's query: the summary without Claude Code's
    fixed opening sentence ("This session is being continued from a previous conversation that ran out of
    context. The conversation is summarized below:", or a "Summary:" label after it), whose words match any
    turn about a session or a conversation and cost a full-text term each; cut to ``SUMMARY_QUERY_CHARS``."""
    return _TEMPLATE_OPENING.sub("", summary, count=1).strip()[:SUMMARY_QUERY_CHARS]


def detect(
    lantern: Any,
    session: str | None,
    messages: list[Any],
    *,
    user: str | None = None,
    agent: str | None = None,
    project: str | None = None,
) -> Compaction | None:
    """A ``Compaction`` when ``messages`` (about to be sent) look compacted relative to ``session``'s archive
    within the scope (default: the handle's; lantern/scope.py), else None. Reads the archive only. Stateless:
    every call reads the session's archived texts (``Tracker`` keeps them between calls and only checks what
    changed)."""
    from lantern.config import DEFAULT_SESSION
    from lantern.scope import resolve

    scope = resolve(lantern.scope, user, agent, project)
    session = scope.name(session or DEFAULT_SESSION)  # its stored form
    messages = list(messages or [])
    archive = SessionArchive(lantern.store, session, scope)
    live = lantern.live_text(messages) if archive.ids else ""
    present = archive.present_in(live)
    return _verdict(archive, session, messages, live, present, _abandoned(lantern, archive, present, messages))


def abandoned_after(archive: SessionArchive, present: set[int], questions: Sequence[str] = ()) -> list[int]:
    """The archived entries newer than the newest one ``present`` in the live context, in turn order: turns the
    application rewound away (module docstring). None when nothing is present (a new conversation). The newest
    present entry is taken among those that mark a point of the conversation (``_newest``: a question a side
    request sent without its reply is present wherever the full exchange is, and marks none).

    ``questions``: user messages of the request (``_abandoned``: those after its newest present entry), each as
    ``Lantern.live_text`` renders it alone. A newer entry that opens with one of them is a turn whose question the
    client still holds with another reply (a regenerate): the newest such is where the request branched off, and
    the entries before it are not rewound but out of the context (a compaction that kept that question and
    dropped what came before). Only when the newest present entry is no answered exchange (the system prompt): a
    compaction keeps the newest turns, so a request that holds an older exchange and asks a newer question again
    (a side request sent twice) dropped nothing."""
    if not present:
        return []
    newest = _newest(archive, present)
    at = bisect.bisect_right(archive.turns_sorted, archive.turn[newest])
    after = [i for i in archive.order[at:] if i not in present]
    if after and questions and newest not in archive.answered:
        by_key: dict[str, list[str]] = {}
        for q in questions:
            by_key.setdefault(q[:KEY_CHARS], []).append(q)
        opened = [
            i
            for i in after
            for text in [archive.norm[i]]
            if any(text == q or text.startswith(q + " ") for q in by_key.get(text[:KEY_CHARS], ()))
        ]
        if opened:
            after = [i for i in after if archive.turn[i] >= archive.turn[opened[-1]]]
    return after


def _newest(archive: SessionArchive, present: set[int]) -> int:
    """The newest entry of ``present`` (not empty) that marks a point of the conversation: not a question archived
    without a reply (``SessionArchive.unanswered``: a side request's first question alone, a summary sent as a user
    message before the turns it kept) nor a fragment of another entry (``part_of``); the newest of all when every
    one is."""
    newest = max(present, key=archive.turn.__getitem__)
    if not archive.no_point(newest):
        return newest
    whole = [i for i in present if not archive.no_point(i)]
    return max(whole, key=archive.turn.__getitem__) if whole else newest


def _abandoned(lantern: Any, archive: SessionArchive, present: set[int], messages: list[Any]) -> list[int]:
    """``abandoned_after`` with the request's user messages after its newest present entry as its ``questions``
    (read back from the end up to a message that entry holds), rendered only when some archived entry is newer
    than that one (a rewind-like request; a growing conversation renders nothing)."""
    if not abandoned_after(archive, present):
        return []
    held = archive.norm[_newest(archive, present)]
    questions = []
    for m in reversed(messages):
        text = lantern.live_text([m])
        if text and text in held:
            break
        if text and _role(m) == "user":
            questions.append(text)
    return abandoned_after(archive, present, questions)


def _role(m: Any) -> str | None:
    return m.get("role") if isinstance(m, dict) else getattr(m, "role", None)


@dataclass
class Rewind:
    """An open rewind candidate: a request left the archived entries ``ids`` (turn order) out of its history
    (``abandoned_after``). ``branch`` is the evidence a later request must hold to confirm it: the candidate
    request's last message as archived text renders it (``Lantern.live_text``, whitespace collapsed), known by its
    sha256 (first 16 hex digits), length and role prefix (``"user: "``), so the store keeps no text of it; ``since``:
    the newest archived turn when the candidate was made (the candidate's reply is archived after it)."""

    ids: list[int]
    branch: str
    length: int
    prefix: str
    since: int

    @classmethod
    def of(cls, ids: list[int], last: str, since: int) -> Rewind:
        """The candidate of a request whose last message renders as ``last`` (``live_text``)."""
        return cls(list(ids), _digest(last), len(last), last[: last.find(": ") + 2], since)

    def evidence(self) -> dict[str, Any]:
        """What the store keeps of it besides the ids (store ``save_rewinds``; no text)."""
        return {"branch": self.branch, "length": self.length, "prefix": self.prefix, "since": self.since}

    @classmethod
    def from_evidence(cls, ids: list[int], evidence: dict[str, Any]) -> Rewind | None:
        try:
            branch, length, prefix = str(evidence["branch"]), int(evidence["length"]), str(evidence["prefix"])
            r = cls(ids, branch, length, prefix, int(evidence["since"]))
        except (KeyError, TypeError, ValueError):
            return None  # a record of another shape: no evidence can confirm it, so it is no candidate
        return r if r.prefix and r.length > 0 else None

    def replied_in(self, text: str) -> bool:
        """Whether the archived turn ``text`` (whitespace collapsed) holds the candidate request's last message
        with something after it (its reply): the message is looked for at each occurrence of its role prefix."""
        at = text.find(self.prefix)
        while 0 <= at and at + self.length < len(text):
            if _digest(text[at : at + self.length]) == self.branch:
                return True
            at = text.find(self.prefix, at + 1)
        return False


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def confirmed_rewinds(
    archive: SessionArchive, present: set[int], candidates: list[Rewind]
) -> tuple[list[int], list[Rewind]]:
    """Settle the rewinds earlier requests suggested (``candidates``) against this request's ``present`` entries:
    ``(confirmed candidates, candidates still open)``.

    One request that holds only the start of a conversation is no evidence of a rewind: a side request (a chat
    UI's "generate a title" carries the first exchange, or the first question alone, and a new instruction), a
    retry, a duplicate or a request of another client under the same session look the same, and so do their
    repeats. A candidate is **refuted** (dropped) when a later request holds any of its entries again: the
    conversation still has them. It is **confirmed** only when a later request holds none of them and holds the
    candidate request's reply: an entry archived after the candidate was made (``Rewind.since``) that carries the
    candidate's last message and what followed it (``Rewind.replied_in``): the client kept the new branch's reply
    and went on from it. A request sent once and never built on confirms nothing. Otherwise it stays open (entries
    forgotten or moved meanwhile are left out; a candidate left with none is dropped)."""
    confirmed: list[Rewind] = []
    still: list[Rewind] = []
    oldest = min((c.since for c in candidates), default=None)
    at = len(archive.order) if oldest is None else bisect.bisect_right(archive.turns_sorted, oldest)
    fresh = [i for i in archive.order[at:] if i in present]  # present entries archived after some candidate
    for c in candidates:
        ids = [i for i in c.ids if i in archive.hash]
        if not ids or not present.isdisjoint(ids):
            continue
        c.ids = ids
        if any(c.replied_in(archive.norm[i]) for i in fresh if archive.turn[i] > c.since):
            confirmed.append(c)
        else:
            still.append(c)
    gone = {i for c in confirmed for i in c.ids}
    for c in still:  # an entry leaves the session with the confirmed rewind, and every candidate with it
        c.ids = [i for i in c.ids if i not in gone]
    return confirmed, [c for c in still if c.ids]


def _verdict(
    archive: SessionArchive,
    session: str,
    messages: list[Any],
    live: str,
    present: set[int],
    abandoned: list[int] | None = None,
) -> Compaction | None:
    """The rules of the module docstring, given which archived entries are ``present`` in ``live``.
    ``abandoned``: the entries that are not this context's history (default ``abandoned_after``; ``Tracker``
    adds the rewinds it confirmed)."""
    summary = next((message_text(m) for m in messages if is_summary(m)), None)
    reason: str | None = None
    if abandoned is None:
        abandoned = abandoned_after(archive, present)
    gone = set(abandoned)
    if present:
        # the turns before the branch point must all be here: the newest present one, or the first abandoned one
        # when the request regenerated a reply past a compaction (``abandoned_after``'s ``questions``)
        newest = max(archive.turn[_newest(archive, present)], min((archive.turn[i] for i in gone), default=-1))
        older_present = sum(1 for i in present if archive.turn[i] < newest)
        older_gone = sum(1 for i in gone if archive.turn[i] < newest)
        kept_chars = archive.chars - sum(archive.raw_chars[i] for i in abandoned)
        if bisect.bisect_left(archive.turns_sorted, newest) - older_gone > older_present:  # an older turn is missing
            reason = "dropped"
        elif kept_chars >= DROP_MIN_CHARS and len(live) < DROP_RATIO * kept_chars:
            reason = "size_drop"
    if summary is not None:
        reason = "summary"
    if reason is None:
        return None
    lost = [i for i in archive.order if i not in present and i not in gone]
    return Compaction(
        reason=reason,
        lost_entry_ids=lost,
        abandoned_entry_ids=abandoned,
        summary=summary,
        query=_query(messages, summary),
        session=session,
        messages=messages,
        scope=archive.scope,
    )


# ---------------------------------------------------------------------------------------------- presence
KEY_CHARS = 16  # ours: an archived text is looked up in the live context by its last 16 characters first
SYNC_OVERLAP_S = 5.0  # ours: rows archived this long before the last sync are read again (clock granularity)
TRACKED_SESSIONS = 64  # ours: sessions a Tracker keeps in memory (least recently seen dropped first)
# a line of an archived turn (model.Message.render) that is no user message: an answer, a tool call or result
_ANSWER = lazy_re.compile(r"^(?:assistant|tool|function|system|developer)\b|^user(?: \([^)\n]*\))? -> tool call", re.M)
DIRECT_SEARCH_MAX = 64  # ours: up to this many entries are searched for directly, without the key lookup


class SessionArchive:
    """The archived entries of one session as the detector needs them: per entry id its turn, its text with
    whitespace collapsed (``norm``) and that text's last ``KEY_CHARS`` characters (``by_key``: key -> ids).

    ``sync()`` brings it up to date with SQLite: nothing is read when neither another connection committed
    (``PRAGMA data_version``) nor this connection wrote (``total_changes``) since the last sync; when only this
    connection wrote, the session's rows archived since the last sync are read (``archived_at`` index), checked by
    the session's entry count and id sum; otherwise (another connection committed, or a deletion) the session's
    (id, content hash) pairs are compared and only new or rewritten entries are read; deleted ones are dropped.
    Returns the ids whose text is new or changed since the previous sync."""

    def __init__(self, store: Any, session: str, scope: Any = None):
        from lantern.scope import Scope

        self.store, self.session = store, session
        self.scope = scope or Scope()  # only this scope's entries of the session (lantern/scope.py)
        self.hash: dict[int, str] = {}
        self.turn: dict[int, int] = {}
        self.norm: dict[int, str] = {}
        self.raw_chars: dict[int, int] = {}
        self.by_key: dict[str, set[int]] = {}
        self.by_head: dict[str, set[int]] = {}  # the first KEY_CHARS characters of ``norm`` -> ids
        self.unanswered: set[int] = set()  # turns of user messages only: a question archived without its reply
        self.answered: set[int] = set()  # turns that open with a user message and hold an answer
        self.short: set[int] = set()  # texts shorter than KEY_CHARS: checked directly
        self.turns_sorted: list[int] = []
        self.order: list[int] = []  # ids in turn order
        self.chars = 0
        self._stamp: tuple[int, int] | None = None
        self._synced_at = float("-inf")
        self.sync()

    @property
    def ids(self) -> list[int]:
        return list(self.hash)

    def _now(self) -> tuple[int, int]:
        return self.store.data_version(), self.store.own_changes()

    def sync(self) -> set[int]:
        import time

        stamp = self._now()
        if stamp == self._stamp:
            return set()
        now = time.time()
        if self._stamp is not None and stamp[0] == self._stamp[0]:  # only this connection wrote: read what it wrote
            since = self._synced_at - SYNC_OVERLAP_S
            changed = self._apply(self.store.session_rows(self.session, self.scope, since=since))
            count, id_sum = self.store.session_tally(self.session, self.scope)
            if count == len(self.hash) and id_sum == float(sum(self.hash)):
                self._stamp, self._synced_at = stamp, now
                return changed
        current = self.store.session_hashes(self.session, self.scope)  # hex on every backend
        for gone in [i for i in self.hash if i not in current]:
            self._drop(gone)
        changed = [i for i, h in current.items() if self.hash.get(i) != h]
        found = self.store.session_rows(self.session, self.scope, ids=changed)
        self._stamp, self._synced_at = stamp, now
        return self._apply(found)

    def _apply(self, rows: list[tuple]) -> set[int]:
        changed = set()
        for i, turn, text, h in rows:
            if self.hash.get(i) != h:
                self._drop(i)
                self._add(i, turn, text, h)
                changed.add(i)
        self._reorder(changed)
        return changed

    def _reorder(self, changed: set[int]) -> None:
        """Keep ``order`` / ``turns_sorted`` in turn order: appended when only new, later turns came in."""
        new = sorted(changed, key=self.turn.__getitem__)
        last = self.turns_sorted[-1] if self.turns_sorted else None
        if (
            new
            and len(self.order) + len(new) == len(self.hash)
            and (last is None or self.turn[new[0]] > last)
            and not set(new) & set(self.order[-len(new) :])
        ):
            self.order += new
            self.turns_sorted += [self.turn[i] for i in new]
        elif changed or len(self.order) != len(self.hash):
            self.order = sorted(self.turn, key=self.turn.__getitem__)
            self.turns_sorted = [self.turn[i] for i in self.order]

    def _add(self, i: int, turn: int, text: str, h: str) -> None:
        norm = normalize_space(text)
        self.hash[i], self.turn[i], self.norm[i], self.raw_chars[i] = h, turn, norm, len(text)
        self.chars += len(text)
        if len(norm) < KEY_CHARS:
            self.short.add(i)
        else:
            self.by_key.setdefault(norm[-KEY_CHARS:], set()).add(i)
        self.by_head.setdefault(norm[:KEY_CHARS], set()).add(i)
        if text.startswith("user"):
            (self.answered if _ANSWER.search(text) else self.unanswered).add(i)

    def _drop(self, i: int) -> None:
        if i not in self.hash:
            return
        norm = self.norm.pop(i)
        self.chars -= self.raw_chars.pop(i)
        del self.hash[i], self.turn[i]
        self.short.discard(i)
        self.unanswered.discard(i)
        self.answered.discard(i)
        for index, key in ((self.by_key, norm[-KEY_CHARS:]), (self.by_head, norm[:KEY_CHARS])):
            ids = index.get(key)
            if ids is not None:
                ids.discard(i)
                if not ids:
                    del index[key]

    def no_point(self, i: int) -> bool:
        """Whether entry ``i`` is ``unanswered`` or ``part_of`` another."""
        return i in self.unanswered or self.part_of(i)

    def part_of(self, i: int) -> bool:
        """Whether entry ``i``'s text opens the text of another entry (followed by more of that turn: ``user: Q``
        archived alone, and ``user: Q assistant: A``)."""
        text = self.norm[i]
        return any(j != i and self.norm[j].startswith(text + " ") for j in self.by_head.get(text[:KEY_CHARS], ()))

    def present_in(self, live: str, start: int = 0, only: set[int] | None = None) -> set[int]:
        """Ids whose text occurs in ``live`` ending after position ``start`` (``start=0``: anywhere), restricted
        to ``only`` when given. The last ``KEY_CHARS`` characters of an occurrence lie in ``live[start-15:]``: only
        entries whose key is found there are searched for (``str.find``, exact)."""
        if not live or not self.hash:
            return set()
        if only is not None and len(only) <= DIRECT_SEARCH_MAX:  # a few entries: search for each directly
            return {
                i
                for i in only
                if i in self.norm and live.find(self.norm[i], max(0, start - len(self.norm[i]) + 1)) >= 0
            }
        lo = max(0, start - KEY_CHARS + 1)
        grams = {live[j : j + KEY_CHARS] for j in range(lo, len(live) - KEY_CHARS + 1)}
        keys = grams & self.by_key.keys() if len(grams) < len(self.by_key) else {k for k in self.by_key if k in grams}
        candidates = {i for k in keys for i in self.by_key[k]} | self.short
        if only is not None:
            candidates &= only
        return {i for i in candidates if live.find(self.norm[i], max(0, start - len(self.norm[i]) + 1)) >= 0}


@dataclass
class _Seen:
    """What a ``Tracker`` remembers of a session's previous request."""

    archive: SessionArchive
    live: str = ""
    present: set[int] = field(default_factory=set)
    summary: str | None = None
    compaction: Compaction | None = None  # the last compaction event, while its context lasts
    abandoned: list[int] = field(default_factory=list)  # rewound-away entries this request confirmed
    rewinds: list[Rewind] = field(default_factory=list)  # open rewind candidates (confirmed_rewinds)
    saved: list[Rewind] = field(default_factory=list)  # the candidates the store holds for it (save_rewinds)
    compacted: set[int] = field(default_factory=set)  # entries a compaction took out of the context, still out


class Tracker:
    """Incremental compaction detection for an application that sends its whole live context on every request
    (the proxy). Per session it keeps the archived texts (``SessionArchive``, synced with SQLite on each call, so
    a turn archived by another process is seen) and the previous request's live text and present entries.

    ``observe(session, messages)`` returns ``(event, current)``: ``current`` is what ``detect`` would return for
    the same input (same rules, same lost entries); ``event`` is the same object when it is a NEW compaction —
    the first request of the session this tracker sees, an entry present in the previous request's live context
    and now missing, or a summary message the previous request did not hold — and None otherwise (an ongoing
    compaction whose recovery was already injected). Checking is incremental: when the previous live text is a
    prefix of this one (a conversation that grew), previously present entries stay present and the others are
    only searched for in the new tail; entries archived or rewritten since the previous call are checked in full.
    At most ``max_sessions`` sessions are kept; one dropped is a first request again when it comes back. Our design; the
    paper does not specify live detection."""

    def __init__(self, lantern: Any, max_sessions: int = TRACKED_SESSIONS):
        from collections import OrderedDict

        self.lantern, self.max_sessions = lantern, max_sessions
        self.seen: OrderedDict[tuple, _Seen] = OrderedDict()  # (session, scope) -> state; least recently seen first

    @staticmethod
    def key(session: str | None, scope: Any) -> tuple:
        """The key of a tracked conversation: its session within its scope (another user's session of the same
        name is another conversation)."""
        from lantern.config import DEFAULT_SESSION

        return scope.name(session or DEFAULT_SESSION), scope  # the session in its stored form (Scope.name)

    @staticmethod
    def _conversation(archive: SessionArchive) -> tuple[str, str, str, str]:
        return archive.scope.user, archive.scope.agent or "", archive.scope.project or "", archive.session

    def _open_rewinds(self, archive: SessionArchive) -> tuple[list[Rewind], list[Rewind]]:
        """The open rewind candidates the store holds for ``archive``'s conversation (a previous run's, or this
        tracker's before it let the session go), each cut to the entries still in the session with the content
        hash recorded (an id a later entry reuses is another entry); and the record as stored, so that a cut
        one is written again. A record without the evidence ``Rewind`` needs is no candidate."""
        stored = self.lantern.store.open_rewinds(self._conversation(archive))
        out, saved = [], []
        for ids, evidence in stored:
            as_stored = Rewind.from_evidence([i for i, _ in ids], evidence)
            kept = Rewind.from_evidence([i for i, h in ids if archive.hash.get(i, "")[:8] == h], evidence)
            if as_stored is not None:
                saved.append(as_stored)
            if kept is not None and kept.ids:
                out.append(kept)
        return out, saved

    def _save_rewinds(self, state: _Seen, candidates: list[Rewind]) -> None:
        """Record ``candidates`` in the store when they differ from what it holds (store ``save_rewinds``: one
        transaction). A store that cannot be written now (locked past ``WRITE_WAIT_S``, read-only) keeps the
        previous record; the candidates stay in memory and the next request tries again."""
        import logging

        from lantern.reinforce import WRITE_WAIT_S
        from lantern.store.protocol import unless_unwritable

        if candidates == state.saved:
            return
        archive, store = state.archive, self.lantern.store
        rows = [([(i, archive.hash[i][:8]) for i in c.ids if i in archive.hash], c.evidence()) for c in candidates]

        def skipped(e: BaseException) -> None:
            logging.getLogger("lantern").warning("%s: rewind candidates not recorded (%s)", store.path, e)

        with unless_unwritable(store, skipped):
            store.save_rewinds(self._conversation(archive), rows, WRITE_WAIT_S)
            state.saved = [replace(c, ids=list(c.ids)) for c in candidates]

    def observe(
        self,
        session: str | None,
        messages: list[Any],
        live: str | None = None,
        *,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
    ) -> tuple[Compaction | None, Compaction | None]:
        from lantern.scope import resolve

        scope = resolve(self.lantern.scope, user, agent, project)
        key = self.key(session, scope)
        session = key[0]
        messages = list(messages or [])
        state = self.seen.get(key)
        first = state is None
        if first:
            state = self.seen[key] = _Seen(SessionArchive(self.lantern.store, session, scope))
            state.rewinds, state.saved = self._open_rewinds(state.archive)
            changed = set(state.archive.hash)
            while len(self.seen) > self.max_sessions:  # memory stays bounded: the oldest session starts over
                self.seen.popitem(last=False)
        else:
            self.seen.move_to_end(key)
            changed = state.archive.sync()
        archive = state.archive
        if live is None:
            live = self.lantern.live_text(messages) if archive.hash else ""
        if not first and state.live and live.startswith(state.live):
            kept = {i for i in state.present if i in archive.hash and i not in changed}
            old = set(archive.hash) - changed - kept  # absent last time, unchanged since: search the new tail only
            present = kept | archive.present_in(live, len(state.live), old) | archive.present_in(live, 0, changed)
        else:
            present = archive.present_in(live)
        done, state.rewinds = confirmed_rewinds(archive, present, state.rewinds)
        confirmed = sorted({i for c in done for i in c.ids}, key=archive.turn.__getitem__)
        state.compacted = {i for i in state.compacted if i in archive.hash and i not in present}
        after = [i for i in _abandoned(self.lantern, archive, present, messages) if i not in state.compacted]
        current = _verdict(archive, session, messages, live, present, confirmed + after)
        last = self.lantern.live_text(messages[-1:]) if after else ""
        if last:  # a last message that renders as nothing could never be seen replied to: no candidate
            from lantern.store.rewinds import MAX_OPEN_REWINDS

            candidate = Rewind.of(after, last, archive.turns_sorted[-1])
            if candidate not in state.rewinds:  # a repeated request (a retry, a duplicate) is one candidate
                state.rewinds = [*state.rewinds, candidate][-MAX_OPEN_REWINDS:]
        if current is not None:  # a compaction's lost turns are the client's summary: never rewound away later
            state.compacted |= set(current.lost_entry_ids)
        state.abandoned = confirmed
        # a confirmed rewind stays recorded until its entries have left the session (the proxy moves them after
        # this call): a restart in between confirms it again from the store
        self._save_rewinds(state, state.rewinds + done)
        gone = set(confirmed) | set(after)
        newly_lost = {i for i in state.present if i in archive.hash and i not in present and i not in gone}
        is_new = current is not None and (
            first or bool(newly_lost) or current.summary != state.summary or state.compaction is None
        )
        state.live, state.present = live, present
        state.summary = current.summary if current is not None else None
        if current is None:
            state.compaction = None
        elif is_new:
            state.compaction = current
        return (current if is_new else None), current
