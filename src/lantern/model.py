"""Dataclasses shared by the write path (archive) and the read path (recover).

Write path:  Message -> Turn -> (summary, tags, type, importance, embedding) -> Entry
Read path:   query -> Candidate (ranks per signal, RRF score, MMR order, verdict) -> Recovery
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lantern import lazy_re


@dataclass
class ToolCall:
    """A tool invocation made by the assistant. ``arguments`` is kept verbatim (JSON text as sent)."""

    name: str
    arguments: str = ""
    id: str | None = None


@dataclass
class ToolResult:
    """The output of a tool, kept verbatim: this is where ports, paths and hashes live."""

    content: str
    call_id: str | None = None
    name: str | None = None


@dataclass
class Message:
    """One message of a conversation, normalized from any transcript format (docs/architecture.md §2.1).

    ``role`` is one of ``user``, ``assistant``, ``system``, ``tool``. ``name`` keeps a speaker name
    (LoCoMo) or a tool name. ``meta`` carries format-specific ids (e.g. LoCoMo ``dia_id``).
    ``session`` is set by formats that hold several sessions in one file (aider, LoCoMo).
    """

    role: str
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    time: datetime | None = None
    name: str | None = None
    session: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def render(self) -> str:
        """Full verbatim text of the message: text, then each tool call's arguments and each tool result."""
        who = self.role if not self.name else f"{self.role} ({self.name})"
        parts = []
        if self.text:
            parts.append(f"{who}: {self.text}")
        for call in self.tool_calls:
            parts.append(f"{who} -> tool call {call.name}({call.arguments})")
        for res in self.tool_results:
            label = f"tool result {res.name}" if res.name else "tool result"
            parts.append(f"{label}: {res.content}")
        if not parts:
            parts.append(f"{who}:")
        return "\n".join(parts)


_ROLES = "user|assistant|system|tool|developer|function"
_MESSAGE = lazy_re.compile(rf"^(?P<role>{_ROLES})(?: \((?P<name>[^)\n]*)\))?: ?", re.M)
_CALL = lazy_re.compile(rf"^(?P<role>{_ROLES})(?: \((?P<name>[^)\n]*)\))? -> tool call (?P<tool>[^(\n]*)\(", re.M)
_RESULT = lazy_re.compile(r"^tool result(?: (?P<tool>[^:\n]+))?: ?", re.M)
_STARTS = tuple(_ROLES.split("|"))  # every prefix above starts with a role name ("tool result" with "tool")


@dataclass
class RenderedBlock:
    """One message of an entry's verbatim text, split back out (``split_rendered``): ``kind`` message, call or
    result; ``role``; ``name`` (the speaker's name of a message, the tool's name of a call or result)."""

    kind: str
    role: str
    name: str
    text: str
    start: int = 0  # offset of the block's first line in the entry's text


def split_rendered(text: str) -> list[RenderedBlock]:
    """Split an entry's verbatim text back into its messages, tool calls and tool results, by the line prefixes
    ``Message.render`` writes ("user: ", "assistant -> tool call NAME(", "tool result NAME: "): its inverse. A line
    without such a prefix continues the block before it (a message quoting such a line splits there). A call's text
    is its arguments, without the closing parenthesis. Linear in ``text``: each block's text is one slice of it."""
    out: list[RenderedBlock] = []
    spans: list[list[int]] = []  # per block: [start of its text in ``text``, end of its last line]
    at = 0
    for line in text.split("\n"):
        start, at = at, at + len(line) + 1
        if out and not line.startswith(_STARTS):  # a continuation line: no prefix can match (the common case)
            spans[-1][1] = start + len(line)
            continue
        m = _CALL.match(line)
        if m:
            out.append(RenderedBlock("call", m["role"], m["tool"], "", start))
        elif m := _RESULT.match(line):
            out.append(RenderedBlock("result", "tool", m["tool"] or "", "", start))
        elif m := _MESSAGE.match(line):
            out.append(RenderedBlock("message", m["role"], m["name"] or "", "", start))
        elif out:
            spans[-1][1] = start + len(line)
            continue
        else:
            out.append(RenderedBlock("message", "", "", "", start))
        spans.append([start + (m.end() if m else 0), start + len(line)])
    for b, (begin, end) in zip(out, spans):
        b.text = text[begin:end]
        if b.kind == "call" and b.text.endswith(")"):
            b.text = b.text[:-1]
    return out


@dataclass
class Turn:
    """One user message with the assistant messages, tool calls and tool results that follow it
    (docs/architecture.md §2.3).

    ``index`` is the 0-based position within the chunked message list. ``files`` are the paths referenced.
    """

    messages: list[Message]
    index: int = 0
    session: str | None = None
    files: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The verbatim full text of the turn (every message rendered, tool arguments and results included)."""
        return "\n".join(m.render() for m in self.messages)

    @property
    def time(self) -> datetime | None:
        for m in self.messages:
            if m.time is not None:
                return m.time
        return None

    @property
    def tool_names(self) -> list[str]:
        names: list[str] = []
        for m in self.messages:
            for c in m.tool_calls:
                if c.name and c.name not in names:
                    names.append(c.name)
        return names

    @property
    def meta(self) -> dict[str, Any]:
        """Merged ``meta`` of the messages; list-valued keys (e.g. ``dia_ids``) are concatenated."""
        out: dict[str, Any] = {}
        for m in self.messages:
            for k, v in m.meta.items():
                if k == "dia_id":
                    out.setdefault("dia_ids", []).append(v)
                else:
                    out.setdefault(k, v)
        return out


@dataclass(frozen=True)
class Tag:
    """A lookup hint found by pattern (docs/architecture.md §2.5): ``kind`` in path, error, identifier, port, url,
    version, hash, number, date, quoted; ``value`` exactly as it appears in the text."""

    kind: str
    value: str


@dataclass
class Entry:
    """A stored, archived turn (one row of ``entries``)."""

    id: int
    session: str
    turn: int
    text: str
    summary: str
    tags: list[Tag]
    memory_type: str
    importance: float
    content_hash: str
    time: datetime | None = None
    archived_at: datetime | None = None
    confidence: float = 0.5
    success: float = 0.5
    access_count: int = 0
    tool_count: int = 0
    file_count: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    category: str | None = (
        None  # fact, decision, preference, process, tool_call, system (archive/classify.py); None before schema m003
    )
    user: str = ""  # scope (lantern/scope.py)
    agent: str = ""
    project: str = ""


@dataclass
class ArchiveResult:
    """What one ``Lantern.archive`` call did. ``entry_ids`` lists the ids of every turn of the call, new or
    deduplicated, in turn order. ``skipped`` counts input items dropped with a warning. ``redacted`` counts the
    secrets replaced by placeholders and the private spans removed before storing (archive/redact.py)."""

    session: str
    added: int = 0
    duplicates: int = 0
    skipped: int = 0
    entry_ids: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    redacted: int = 0


@dataclass
class Candidate:
    """One entry considered by a recovery, with everything ``explain`` shows.

    ``ranks`` maps signal name (``Config.signals``: semantic, fulltext, keyword, importance and ours) to a 1-based
    rank, absent when the signal did not rank the entry. ``verdict`` is one of ``packed``, ``excerpt`` (packed as
    its most relevant excerpt), ``cut:budget`` (its MMR turn came after the budget ran out), ``cut:duplicate``
    (near-duplicate of a better candidate), ``excluded:live`` (still in the live context), ``excluded:pruned``
    (confidence below the prune threshold, left out of a proactive recovery: reinforce.py); ``reason`` says why.
    ``entry`` carries its summary; its ``text`` is filled for packed entries; its ``tags`` are loaded by
    ``explain``, not by ``recover`` (the read path ranks without them).
    """

    entry: Entry
    ranks: dict[str, int] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    rrf: float = 0.0
    mmr_order: int | None = None
    rerank: int | None = None  # 1-based place the rerank stage's LLM gave it; None: not named (or no rerank)
    verdict: str = ""
    reason: str = ""
    chars: int = 0


@dataclass
class Hit:
    """One search result: an entry and its fused score (RRF) with the per-signal ranks."""

    entry: Entry
    score: float
    ranks: dict[str, int] = field(default_factory=dict)


@dataclass
class RecoveredEntry:
    """An entry as packed into a recovery block: ``text`` is what was injected (whole or excerpt)."""

    id: int
    session: str
    turn: int
    score: float
    text: str
    excerpt: bool = False
    time: datetime | None = None


@dataclass
class Recovery:
    """The result of ``Lantern.recover``: the block to inject (``text``, ``chars`` characters, never more than
    ``budget``), the packed entries, every candidate for ``explain``, the best candidates' ``relevance`` and the floor
    ``min_score`` it was held to (recover/relevance.py). ``reason``: None for a full block, else a short machine word
    saying why it is empty or shortened ("empty_query", "nothing_archived", "no_match", "below_floor", "uncertain",
    "budget": recover/relevance.py; a compaction's "nothing_lost", or "summary_cut" for a full block read against a
    summary cut to its limit: Lantern.recover_compaction), with ``detail``, the figures behind it in words."""

    query: str
    text: str
    entries: list[RecoveredEntry]
    chars: int
    budget: int
    candidates: list[Candidate] = field(default_factory=list)
    facts: list[Any] = field(default_factory=list)  # recover.facts_note.FactNote: superseded values in the block
    relevance: Any = None  # recover.relevance.Relevance: how well the best candidates match (the relevance floor)
    min_score: float = 0.0  # the relevance floor this recovery was held to (0: none)
    rerank: Any = None  # recover.rerank.RerankResult when a rerank was asked for
    loss: Any = None  # recover.loss.Loss: what a compaction lost, packed or cut (Lantern.recover_compaction)
    reason: str | None = None  # why the block is empty or shortened (None: a full block); see the producer's docstring
    detail: str = ""  # the figures behind ``reason``, in words ("best relevance 0.35 < min_score 0.4")
    # an empty block's figures (recover/empty.py): the least budget that packs an entry, when the budget held none
    # (None: not empty for the budget, or none up to 1,000,000 characters); asked as of a time with no candidate,
    # when the earliest turn after that time happened (UTC; None: none, or not asked as of a time)
    least_budget: int | None = None
    later_from: datetime | None = None

    @property
    def held_by_floor(self) -> bool:
        """Whether every ranked candidate (not excluded) was cut by the relevance floor, and there was one."""
        ranked = [c for c in self.candidates if not c.verdict.startswith("excluded:")]
        return bool(ranked) and all(c.verdict == "cut:floor" for c in ranked)

    @property
    def reranked(self) -> bool:
        """Whether the block follows an LLM's order (False: no rerank asked, or it fell back to the fused order)."""
        return bool(self.rerank is not None and self.rerank.reranked)

    def to_json(self) -> dict[str, Any]:
        """{"text", "chars", "reason", "detail", "relevance", "entries": [{id, session, turn, score, text}]};
        "reason" is None for a full block, else why it is empty or shortened, "detail" the figures in words and
        "relevance" the evidence behind it (``Relevance.to_json`` with "min_score"; None when no evidence was read);
        when a rerank was asked for, also "reranked" (bool: its order was used), "llm_calls", "tokens_in" and
        "tokens_out"; "loss" (``Loss.to_json``: counts by type, the items packed and the best ones cut) for a
        compaction recovery."""
        out: dict[str, Any] = {"text": self.text, "chars": self.chars, "reason": self.reason, "detail": self.detail}
        out["relevance"] = (
            {**self.relevance.to_json(), "min_score": self.min_score} if self.relevance is not None else None
        )
        if self.rerank is not None:
            usage = self.rerank.usage
            out |= {
                "reranked": self.reranked,
                "llm_calls": usage.calls if usage else 0,
                "tokens_in": usage.tokens_in if usage else 0,
                "tokens_out": usage.tokens_out if usage else 0,
            }
        out["entries"] = [
            {"id": e.id, "session": e.session, "turn": e.turn, "score": e.score, "text": e.text} for e in self.entries
        ]
        if self.loss is not None:
            out["loss"] = self.loss.to_json()
        return out


def loss_lines(loss: dict[str, Any] | None, items: int = 10, head: str = "") -> list[str]:
    """A loss report (``Loss.to_json`` or an event's bounded one) as lines a person reads: one line of what the
    compaction lost, by type, with how many came back; then one line per specific that came back (its type, its
    value, the turn it was last seen in), at most ``items`` of them; then how many were cut for the budget, with the
    best-weighted ones. ``head`` starts the first line (``"event 12: "``). [] for no report."""
    if not loss:
        return []
    by_type = loss.get("by_type") or {}
    kinds = ", ".join(
        f"{t} {row.get('lost', 0)}" + (f" ({row['packed']} back)" if row.get("packed") else "")
        for t, row in by_type.items()
    )
    lost, packed = int(loss.get("lost", 0)), int(loss.get("packed", 0))
    lines = [f"{head}the summary lost {lost} specifics" + (f": {kinds}" if kinds else "") + f"; {packed} came back"]
    back = list(loss.get("items") or [])
    width = max((len(str(i.get("type", ""))) for i in back[:items]), default=0)
    for item in back[:items]:
        lines.append(
            f"  back  {str(item.get('type', '')):<{width}}  {item.get('value', '')}  (turn {item.get('turn')})"
        )
    if packed > min(items, len(back)):
        lines.append(f"  ... {packed - min(items, len(back))} more came back")
    cut = list(loss.get("cut") or [])
    if lost > packed:
        best = ", ".join(f"{i.get('value', '')} (turn {i.get('turn')})" for i in cut[:3])
        lines.append(f"  cut   {lost - packed} for the budget" + (f", best: {best}" if best else ""))
    return lines


def extends(text: str, earlier: str) -> bool:
    """Whether ``text`` is the turn ``earlier`` grown: its text followed by more on a new line (a live turn archived
    first with the user message, later with the reply). The one rule of a turn's growth: ``add`` replaces the
    conversation's last turn with the turn that extends it, an import or ``lantern copy`` the turn it holds at the
    same place."""
    return text.startswith(earlier + "\n")


def content_hash(session: str, text: str, user: str = "", agent: str = "", project: str = "") -> str:
    """sha256 hex of a turn's session and full text, and of its scope (user, agent, project) when that is not the
    default ("", "", ""): the dedup key (the same turn archived twice is one entry; the same text said by two users
    is two). A default-scope hash covers session and text only, so databases made before scopes keep their hashes."""
    h = hashlib.sha256()
    h.update(session.encode("utf-8", "surrogatepass"))
    h.update(b"\x00")
    h.update(text.encode("utf-8", "surrogatepass"))
    if user or agent or project:
        for part in ("scope", user, agent, project):
            h.update(b"\x00" + part.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


@dataclass(frozen=True)
class ExtractedFact:
    """One fact stated in a turn. ``key``: normalized (``normalize_key``); ``key_text``: as written (empty when the
    sentence names no key: "switched from A to B" then takes the key of whatever currently holds A, resolved at
    store time). ``value``: as written, None for a retraction ("no longer use A"). ``replaces``: the old value a
    switch/retraction names (A), else None. ``family``: the pattern family that found it."""

    key: str
    value: str | None
    key_text: str = ""
    replaces: str | None = None
    family: str = ""


class Forgotten(int):
    """What ``Lantern.forget`` returns: the number of entries deleted (an ``int``), and whether their text is gone
    from the file too. ``erased``: True when no byte of it is left (the file rewritten, the WAL emptied; also when
    nothing was deleted). False when a reader (another process or connection in a read transaction) pins the
    old pages, or with ``vacuum=False``: then ``remaining_bytes`` is the size of the database file and its WAL,
    which still hold pages from before the delete, and ``holders`` the other processes (pid, name) that have the
    file open (Linux; else empty). The erase is finished by the first open, close or forget after the reader
    ends."""

    erased: bool
    remaining_bytes: int
    holders: tuple[tuple[int, str], ...]

    def __new__(cls, n: int, erased: bool = True, remaining_bytes: int = 0, holders: tuple = ()) -> Forgotten:
        out = super().__new__(cls, n)
        out.erased, out.remaining_bytes, out.holders = erased, remaining_bytes, tuple(holders)
        return out

    def __reduce__(self) -> tuple:
        return (Forgotten, (int(self), self.erased, self.remaining_bytes, self.holders))
