"""Claude Code session transcripts: ``~/.claude/projects/<project>/<session-id>.jsonl``, one record per line.

The shape (checked against public reverse-engineered references of the format; Anthropic publishes no schema):

- ``{"type": "user" | "assistant", "uuid", "parentUuid", "sessionId", "timestamp", "cwd", "isSidechain",
  "message": {"role", "content": str | [blocks], "id" (assistant)}}``. Blocks are the Anthropic ones: ``text``,
  ``thinking``, ``tool_use`` {id, name, input}, ``tool_result`` {tool_use_id, content, is_error} (in ``user``
  records), ``image`` {source: {type: base64, media_type, data}}.
- Streaming: one assistant API message is written as several records that share ``message.id`` (one content
  block each: thinking, text, tool_use ...), and a record may be written again with the same ``uuid``.
- ``{"type": "system", "subtype": "compact_boundary", "compactMetadata": {"trigger", "preTokens"}}`` marks a
  compaction; the next ``user`` record with ``"isCompactSummary": true`` holds the summary ("This session is
  being continued from a previous conversation ..."). The old lines stay in the file.
- Other records (``summary``, ``file-history-snapshot``, ``queue-operation``, ``attachment``, other ``system``
  subtypes such as ``turn_duration`` or ``api_error``) are Claude Code's bookkeeping, not conversation.

How we archive it (our choices; the paper does not cover this format):

- ``user`` text -> a user message; ``tool_result`` blocks -> a ``tool`` message (tool name from the matching
  ``tool_use``, ``meta["is_error"]`` when any result is an error); ``assistant`` records -> one assistant message
  per ``message.id`` (streamed pieces merged, an identical repeated block or a repeated ``uuid`` kept once);
  ``thinking`` blocks dropped; images -> ``[image image/png]`` (never their base64 data).
- **Sidechains** (``isSidechain: true``, a subagent's own conversation) are archived as a sub-session
  ``sidechain-<agentId>`` (``<session>/sidechain-<agentId>`` in the store): they stay searchable and a
  session-scoped recovery still sees them, but they never merge into the main conversation's turns.
- **Compact summaries** are not archived (the turns they summarize are); they are returned in
  ``ClaudeCodeTranscript.summaries`` with the position in ``messages`` where they stand, and compact boundaries
  in ``boundaries``. ``isMeta`` user records (command caveats Claude Code writes for itself) and bookkeeping
  records are ignored without a warning.
- **Rewound branches.** Each record names the one before it (``parentUuid``; a ``compact_boundary`` has none and
  names it in ``logicalParentUuid``). A rewind writes nothing of its own: the next prompt names an earlier record,
  and the abandoned branch stays in the file. The live branch is the chain from the last record back to the
  first; records off it are abandoned (``branches``), except the parallel tool calls and results a one-parent
  chain skips (they share the ``message.id`` of a live reply, or answer one of its calls). Abandoned messages get
  ``meta["abandoned"] = True`` and the sub-session ``abandoned-<first 8 of the branch's first uuid>``; the writer
  then drops them (``Config.rewound = "skip"``, the default) or archives them there (``"mark"``). A chain that
  cannot be followed (a loop) marks nothing; a chain that stops at a record whose parent is not in the text (a
  resumed file, a slice) or at a boundary without ``logicalParentUuid`` marks only records after that point.
- Message ``meta``: ``uuid`` and ``cwd`` of the record.
- A line that is not JSON, not an object, or a ``user``/``assistant`` record without a ``message`` object is
  skipped, counted, and named by its line in ``warnings``. A document with no Claude Code record at all raises
  ``TranscriptFormatError`` naming the first line and the field ``type``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from lantern.archive.parse.jsonl import ParseResult, blank, decode, dumps, loads, parse_time, read_source
from lantern.errors import TranscriptFormatError
from lantern.model import Message, ToolCall, ToolResult
from lantern.text.clean import clean_text

__all__ = [
    "ABANDONED",
    "ClaudeCodeTranscript",
    "CompactSummary",
    "apply_rewound",
    "is_claude_code",
    "parse_claude_code",
    "read_claude_code",
    "SUMMARY_PREFIX",
]

SUMMARY_PREFIX = "this session is being continued from a previous conversation"
ABANDONED = "abandoned"  # the meta key, and the sub-session prefix, of a message off the live branch
REWOUND_MODES = ("skip", "mark")
_MESSAGE_TYPES = ("user", "assistant")
_BOOKKEEPING = {
    "summary",
    "file-history-snapshot",
    "queue-operation",
    "custom-title",
    "attachment",
    "progress",
    "system",
    "last-prompt",
    "tag",
    "agent-name",
    "pr-link",
    "mode",
}


@dataclass
class CompactSummary:
    """A compaction summary found in the transcript: its ``text``, its 1-based ``line``, and ``position``, the
    index in ``ClaudeCodeTranscript.messages`` of the first message after it (the live context after that
    compaction is the summary plus ``messages[position:]``)."""

    text: str
    line: int
    position: int


@dataclass
class ClaudeCodeTranscript:
    """A parsed Claude Code transcript (or a slice of one): ``messages`` of the main conversation and
    ``sidechain`` messages of subagents (``Message.session`` set), ``summaries`` and
    ``boundaries`` (``(line, position, trigger)``) of compactions, ``skipped``/``warnings`` for bad lines,
    ``records`` the number of JSON records read, and ``session_id`` / ``cwd`` of the last record carrying them."""

    messages: list[Message] = field(default_factory=list)
    sidechain: list[Message] = field(default_factory=list)
    summaries: list[CompactSummary] = field(default_factory=list)
    boundaries: list[tuple[int, int, str | None]] = field(default_factory=list)
    skipped: int = 0
    warnings: list[str] = field(default_factory=list)
    records: int = 0
    claude_records: int = 0
    session_id: str | None = None
    cwd: str | None = None
    # the branches (see the module docstring): the live leaf's uuid, the uuid outside the text its chain continues
    # from (None when it reached a first record in the text), whether that was a true first record, and the
    # abandoned records (uuid -> the branch's sub-session name)
    leaf: str | None = None
    joins: str | None = None
    rooted: bool = False
    # where this slice starts in the file, in bytes, when it was read from a compaction on (the hooks'
    # ``read_since_last_compaction``: it names that compaction)
    compaction_at: int | None = None
    abandoned: dict[str, str] = field(default_factory=dict)

    def skip(self, why: str) -> None:
        self.skipped += 1
        self.warnings.append(why)

    def to_archive(self) -> list[Message]:
        """The messages to archive: the main conversation's live branch, then the sidechains (so a subagent's
        records never split a main turn), then the abandoned branches (``meta["abandoned"]``, each in its
        sub-session), each without messages left empty (a thinking-only piece)."""
        live = [m for m in self.messages if not m.meta.get(ABANDONED)]
        gone = [m for m in self.messages if m.meta.get(ABANDONED)]
        return [m for m in live + self.sidechain + gone if not blank(m.text) or m.tool_calls or m.tool_results]

    def last_user_text(self) -> str:
        """The text of the last user message of the main conversation's live branch (not a tool result, not a
        summary, not an abandoned prompt)."""
        for m in reversed(self.messages):
            if m.role == "user" and not blank(m.text) and not m.meta.get(ABANDONED):
                return m.text
        return ""


def apply_rewound(messages: list[Message], mode: str) -> list[Message]:
    """``messages`` as the write path archives them under ``Config.rewound``: ``"skip"`` drops the messages of
    abandoned branches (``meta["abandoned"]``), ``"mark"`` keeps them (in their ``abandoned-...`` sub-session)."""
    if mode not in REWOUND_MODES:
        raise ValueError(f"rewound must be one of {', '.join(REWOUND_MODES)}, got {mode!r}")
    if mode == "mark":
        return messages
    return [m for m in messages if not m.meta.get(ABANDONED)]


def is_claude_code(data: Any) -> bool:
    """Whether loaded JSON (a record list or one record) looks like a Claude Code transcript: some record of
    type ``user``/``assistant`` has a ``message`` object and one of ``uuid``/``parentUuid``/``sessionId``, or a
    ``system`` record is a ``compact_boundary``."""
    items = data if isinstance(data, list) else [data]
    for rec in items:
        if not isinstance(rec, dict):
            continue
        if (
            rec.get("type") in _MESSAGE_TYPES
            and isinstance(rec.get("message"), dict)
            and ("uuid" in rec or "parentUuid" in rec or "sessionId" in rec)
        ):
            return True
        if rec.get("type") == "system" and rec.get("subtype") == "compact_boundary":
            return True
    return False


def _block_text(block: Any) -> str | None:
    """Text of a content block that is neither a tool block nor thinking; None to drop it."""
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return dumps(block)
    kind = block.get("type")
    if kind == "text":
        return block.get("text") if isinstance(block.get("text"), str) else ""
    if kind in ("thinking", "redacted_thinking"):
        return None
    if kind in ("image", "document"):
        source = block.get("source") if isinstance(block.get("source"), dict) else {}
        media = source.get("media_type") if isinstance(source.get("media_type"), str) else ""
        return f"[{kind} {media}]".replace(" ]", "]")
    return dumps(block)  # an unknown block is kept as JSON, never dropped


def _result_text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(t for t in (_block_text(b) for b in content) if t)
    if content is None:
        return ""
    return content if isinstance(content, str) else dumps(content)


class _Graph:
    """The ``uuid`` -> parent links of a transcript's records, in file order, and what the branches are
    (``branches``). ``continues``: the live leaf of the lines before this text (the hooks read a transcript in
    slices), whose chain may go on here."""

    def __init__(self, continues: str | None = None):
        self.continues = continues
        self.parent: dict[str, str | None] = {}
        self.position: dict[str, int] = {}
        self.kind: dict[str, str] = {}  # user / assistant / other, of main-conversation records only
        self.first: dict[str, bool] = {}  # a record with no parent that can start a conversation (not a boundary)
        self.message_id: dict[str, str] = {}  # assistant record -> its message.id
        self.calls: dict[str, list[str]] = {}  # assistant record -> the tool_use ids it issued
        self.answers: dict[str, list[str]] = {}  # user record -> the tool_use ids its results answer
        self.leaves: list[str] = []  # main-conversation chain participants, in file order

    def add(self, rec: dict, kind: str | None) -> None:
        uuid = rec.get("uuid")
        if (
            not isinstance(uuid, str)
            or uuid in self.parent
            or ("parentUuid" not in rec and "logicalParentUuid" not in rec)
        ):
            return  # a record that names no parent (not even null: a hand-written file) is on no branch we can see
        parent = rec.get("parentUuid") if isinstance(rec.get("parentUuid"), str) else None
        logical = rec.get("logicalParentUuid") if isinstance(rec.get("logicalParentUuid"), str) else None
        self.parent[uuid] = parent or logical
        self.position[uuid] = len(self.position)
        if rec.get("isSidechain") is True:
            return
        self.kind[uuid] = kind if kind in _MESSAGE_TYPES else "other"
        boundary = kind == "system" and rec.get("subtype") == "compact_boundary"
        self.first[uuid] = (
            parent is None and logical is None and not boundary and rec.get("isCompactSummary") is not True
        )
        if kind != "progress":
            self.leaves.append(uuid)
        message = rec.get("message") if isinstance(rec.get("message"), dict) else {}
        content = message.get("content") if isinstance(message.get("content"), list) else []
        if kind == "assistant":
            if isinstance(message.get("id"), str):
                self.message_id[uuid] = message["id"]
            self.calls[uuid] = [b["id"] for b in content if isinstance(b, dict) and isinstance(b.get("id"), str)]
        elif kind == "user":
            self.answers[uuid] = [
                b["tool_use_id"]
                for b in content
                if isinstance(b, dict) and b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str)
            ]

    def branches(self) -> tuple[str | None, str | None, bool, dict[str, str]]:
        """``(leaf, joins, rooted, abandoned)`` (``ClaudeCodeTranscript``'s fields of the same names)."""
        if not self.leaves:
            return None, None, False, {}
        leaf = self.leaves[-1]
        chain: list[str] = []
        seen: set[str] = set()
        at: str | None = leaf
        while at is not None and at in self.parent:
            if at in seen:
                return leaf, None, False, {}  # a loop: no branch can be trusted
            seen.add(at)
            chain.append(at)
            at = self.parent[at]
        joins = at  # None: the chain reached a record with no parent
        start = chain[-1]
        rooted = joins is None and self.first.get(start, False)
        trusted = rooted or (joins is not None and joins == self.continues)
        live = set(chain)
        replies = {self.message_id[u] for u in chain if u in self.message_id}
        live |= {u for u, mid in self.message_id.items() if mid in replies}
        calls = {c for u in live for c in self.calls.get(u, ())}
        live |= {u for u, answered in self.answers.items() if answered and set(answered) <= calls}
        begin = -1 if trusted else self.position[start]
        off = {
            u for u, kind in self.kind.items() if kind in _MESSAGE_TYPES and u not in live and self.position[u] > begin
        }
        return leaf, joins, rooted, {u: f"{ABANDONED}-{self._branch(u, off)[:8]}" for u in off}

    def _branch(self, uuid: str, off: set[str]) -> str:
        """The first record of the abandoned branch ``uuid`` is on: its farthest ancestor that is abandoned too."""
        seen = {uuid}
        while (up := self.parent.get(uuid)) in off and up not in seen:
            seen.add(up)
            uuid = up
        return uuid


class _Reader:
    """Turns records into messages; keeps the state that spans records (tool names, streamed message ids)."""

    def __init__(self, out: ClaudeCodeTranscript, continues: str | None = None, known: dict[str, str] | None = None):
        self.out = out
        self.known = known
        self.tool_names: dict[str, str] = {}
        self.uuids: set[str] = set()
        self.by_message_id: dict[str, tuple[Message, set[str]]] = {}
        self.graph = _Graph(continues)
        self.origin: dict[int, list[str]] = {}  # id(Message) -> the uuids of the records it was made from

    def record(self, rec: Any, line: int) -> None:
        out = self.out
        if not isinstance(rec, dict):
            out.skip(f"line {line}: not a JSON object; skipped")
            return
        out.records += 1
        kind = rec.get("type") if isinstance(rec.get("type"), str) else None
        self.graph.add(rec, kind)
        if isinstance(rec.get("sessionId"), str):
            out.session_id = rec["sessionId"]
        if isinstance(rec.get("cwd"), str):
            out.cwd = rec["cwd"]
        if kind == "system" and rec.get("subtype") == "compact_boundary":
            out.claude_records += 1
            meta = rec.get("compactMetadata") if isinstance(rec.get("compactMetadata"), dict) else {}
            trigger = meta.get("trigger") if isinstance(meta.get("trigger"), str) else None
            out.boundaries.append((line, len(out.messages), trigger))
            return
        if kind not in _MESSAGE_TYPES:
            if kind in _BOOKKEEPING:
                out.claude_records += 1
            elif kind is None:
                out.skip(f"line {line}: field 'type' missing or not a string; skipped")
            return  # an unknown record type of a newer Claude Code: not conversation
        out.claude_records += 1
        message = rec.get("message")
        if not isinstance(message, dict):
            out.skip(f"line {line}: field 'message' missing or not an object; skipped")
            return
        uuid = rec.get("uuid") if isinstance(rec.get("uuid"), str) else None
        if uuid is not None:
            if uuid in self.uuids:
                return  # the same record written again
            self.uuids.add(uuid)
        if rec.get("isMeta") is True:
            return
        when = parse_time(rec.get("timestamp"))
        meta = {k: v for k, v in (("uuid", uuid), ("cwd", rec.get("cwd"))) if isinstance(v, str)}
        session = None
        if rec.get("isSidechain") is True:
            agent = rec.get("agentId") if isinstance(rec.get("agentId"), str) else ""
            session = clean_text(f"sidechain-{agent}" if agent else "sidechain")
        content = message.get("content")
        blocks = content if isinstance(content, list) else [content] if content is not None else []
        if kind == "assistant":
            self._assistant(message, blocks, when, meta, session, line)
        else:
            self._user(rec, blocks, when, meta, session, line)

    def _list(self, session: str | None) -> list[Message]:
        return self.out.sidechain if session is not None else self.out.messages

    def _from(self, message: Message, meta: dict) -> Message:
        """Note that ``message`` holds the record whose meta is ``meta`` (its uuid)."""
        if "uuid" in meta:
            self.origin.setdefault(id(message), []).append(meta["uuid"])
        return message

    def finish(self) -> None:
        """Work out the branches once every record is read, and mark the abandoned messages (module docstring)."""
        out = self.out
        out.leaf, out.joins, out.rooted, out.abandoned = self.graph.branches()
        if self.known is not None:
            out.abandoned = {u: self.known[u] for u in self.graph.parent if u in self.known}
        if not out.abandoned:
            return
        for m in out.messages:
            uuids = self.origin.get(id(m), [])
            if uuids and all(u in out.abandoned for u in uuids):
                m.meta[ABANDONED] = True
                m.session = out.abandoned[uuids[0]]

    def _assistant(self, message: dict, blocks: list, when, meta: dict, session, line: int) -> None:
        mid = message.get("id") if isinstance(message.get("id"), str) else None
        if mid is not None and mid in self.by_message_id:
            target, seen = self.by_message_id[mid]
        else:
            target, seen = Message(role="assistant", time=when, meta=meta, session=session), set()
        added = False
        for b in blocks:
            key = json.dumps(b, sort_keys=True, default=str)
            if key in seen:
                continue  # a streamed block written twice
            seen.add(key)
            if isinstance(b, dict) and b.get("type") in ("tool_use", "server_tool_use"):
                call_id = b.get("id") if isinstance(b.get("id"), str) else None
                name = clean_text(b.get("name")) if isinstance(b.get("name"), str) else ""
                target.tool_calls.append(
                    ToolCall(name=name, arguments=clean_text(dumps(b.get("input", {}))), id=call_id)
                )
                if call_id and name:
                    self.tool_names[call_id] = name
                added = True
            else:
                text = _block_text(b)
                if not blank(text):
                    target.text = clean_text(f"{target.text}\n{text}" if target.text else text)
                    added = True
        self._from(target, meta)
        if mid is not None and mid in self.by_message_id:
            return
        if added:
            self._list(session).append(target)
            if mid is not None:
                self.by_message_id[mid] = (target, seen)
        elif not any(isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking") for b in blocks):
            self.out.skip(f"line {line}: assistant record with empty content; skipped")
        elif mid is not None:  # a thinking-only piece: later pieces of the same message still merge
            self.by_message_id[mid] = (target, seen)
            self._list(session).append(target)

    def _user(self, rec: dict, blocks: list, when, meta: dict, session, line: int) -> None:
        results: list[ToolResult] = []
        texts: list[str] = []
        is_error = False
        for b in blocks:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                call_id = b.get("tool_use_id") if isinstance(b.get("tool_use_id"), str) else None
                results.append(
                    ToolResult(
                        content=clean_text(_result_text(b.get("content"))),
                        call_id=call_id,
                        name=self.tool_names.get(call_id or ""),
                    )
                )
                is_error = is_error or b.get("is_error") is True
            else:
                text = _block_text(b)
                if text:
                    texts.append(text)
        text = clean_text("\n".join(t for t in texts if t))
        if rec.get("isCompactSummary") is True or (
            not results and text.lstrip()[:200].lower().startswith(SUMMARY_PREFIX)
        ):
            self.out.summaries.append(CompactSummary(text=text, line=line, position=len(self.out.messages)))
            return
        if results:
            self._list(session).append(
                self._from(
                    Message(
                        role="tool",
                        tool_results=results,
                        time=when,
                        meta={**meta, "is_error": True} if is_error else dict(meta),
                        session=session,
                    ),
                    meta,
                )
            )
        if not blank(text):
            self._list(session).append(
                self._from(Message(role="user", text=text, time=when, meta=dict(meta), session=session), meta)
            )
        elif not results:
            self.out.skip(f"line {line}: user record with empty content; skipped")


def read_claude_code(
    text: str,
    first_line: int = 1,
    source: str | None = None,
    *,
    strict: bool = True,
    continues: str | None = None,
    known: dict[str, str] | None = None,
) -> ClaudeCodeTranscript:
    """Parse Claude Code JSONL ``text`` (a whole file or a slice starting at 1-based line ``first_line``) into a
    ``ClaudeCodeTranscript``. Bad lines are skipped and counted (``warnings`` name their line). With ``strict``,
    text holding JSON records but none of Claude Code's raises ``TranscriptFormatError`` (line of the first
    record, field ``type``); an empty slice is never an error. ``continues``: the live leaf of the lines before a
    slice (a chain of the slice that goes on from it is followed into the slice's start). ``known``: the abandoned
    records as the whole file says (``abandoned`` of a read of it), used instead of what the slice alone shows."""
    out = ClaudeCodeTranscript()
    reader = _Reader(out, continues, known)
    first_record_line = None
    for n, raw in enumerate(text.split("\n"), first_line):
        if not raw.strip():
            continue
        try:
            rec = loads(raw)
        except (ValueError, RecursionError) as e:
            out.skip(f"line {n}: invalid JSON ({getattr(e, 'msg', e)}); skipped")
            continue
        first_record_line = first_record_line or n
        reader.record(rec, n)
    reader.finish()
    if strict and out.records and not out.claude_records:
        raise TranscriptFormatError(
            "no Claude Code user or assistant record with a 'message' object",
            line=first_record_line,
            field="type",
            source=source,
        )
    return out


def parse_claude_code(data: Any, source: str | None = None) -> ParseResult:
    """Claude Code session JSONL -> ``ParseResult`` (the messages to archive; see the module docstring).

    ``data``: a path, bytes, JSONL text, or records already loaded (a list, e.g. ``load_json``'s ``JsonLines``
    whose ``line_numbers`` are kept in warnings). Compact summaries are not among the messages; use
    ``read_claude_code`` to get them. Raises TranscriptFormatError when the input holds no Claude Code record."""
    if data is None or isinstance(data, (bool, int, float)):  # a one-line JSON document holding a scalar
        raise TranscriptFormatError(
            f"no Claude Code record: a JSON {type(data).__name__}", line=1, field="type", source=source
        )
    data = read_source(data, source)
    if isinstance(data, (bytes, bytearray)):
        data = decode(bytes(data), source)
    if isinstance(data, str):
        if not data.strip():
            raise TranscriptFormatError("empty", source=source)
        transcript = read_claude_code(data, source=source)
    else:
        records = data if isinstance(data, list) else [data]
        lines = getattr(records, "line_numbers", None) or list(range(1, len(records) + 1))
        transcript = ClaudeCodeTranscript()
        reader = _Reader(transcript)
        for rec, n in zip(records, lines):
            reader.record(rec, n)
        reader.finish()
        if not transcript.claude_records:
            raise TranscriptFormatError(
                "no Claude Code user or assistant record with a 'message' object",
                line=lines[0] if lines else None,
                field="type",
                source=source,
            )
    if not transcript.records and not transcript.skipped:
        raise TranscriptFormatError("empty", source=source)
    if not transcript.claude_records:
        raise TranscriptFormatError("no line parses as a Claude Code record", line=1, field="type", source=source)
    return ParseResult(
        messages=transcript.to_archive(), skipped=transcript.skipped, warnings=transcript.warnings, format="claude-code"
    )
