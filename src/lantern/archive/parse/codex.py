"""Codex CLI rollout JSONL (``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``).

Shape (openai/codex ``codex-rs/protocol``: ``RolloutLine``/``RolloutItem``/``ResponseItem``): one JSON object per
line, ``{"timestamp", "type", "payload"}`` with ``type`` one of ``session_meta``, ``response_item``, ``compacted``,
``turn_context``, ``event_msg``. A ``response_item`` payload is a Responses API item tagged by ``type``:
``message`` {role, content: [{type: input_text|output_text, text} | {type: input_image, image_url}]},
``reasoning`` {summary, content?, encrypted_content}, ``function_call`` {name, arguments: str, call_id},
``function_call_output`` {call_id, output: str | [input_text/input_image items] | {content, success}},
``custom_tool_call`` {call_id, name, input}, ``custom_tool_call_output`` {call_id, output},
``local_shell_call`` {call_id, action: {type: exec, command: [...]}}, ``web_search_call`` {action}.
Older rollouts hold the payloads directly on each line (``{"type": "message", ...}``), with a first meta line
``{id, timestamp, instructions}`` and ``{"record_type": "state"}`` lines.
"""

from __future__ import annotations

from typing import Any

from lantern import lazy_re
from lantern.archive.parse.jsonl import (
    ParseResult,
    blank,
    content_text,
    dumps,
    kind_of,
    norm_role,
    parse_time,
    records,
)
from lantern.model import Message, ToolCall, ToolResult
from lantern.text.clean import clean_text

ROLLOUT_TYPES = {"session_meta", "response_item", "compacted", "turn_context", "event_msg"}
CALL_TYPES = {"function_call", "custom_tool_call", "local_shell_call", "web_search_call"}
OUTPUT_TYPES = {"function_call_output", "custom_tool_call_output"}
RESPONSE_TYPES = {"message", "reasoning", *CALL_TYPES, *OUTPUT_TYPES}
# records that are not conversation content (or repeat it, as event_msg does): read and ignored, not "skipped"
_IGNORED = {"turn_context", "event_msg", "reasoning", "ghost_snapshot", "compaction", "compaction_summary", "other"}
# user-role messages Codex injects (AGENTS.md, environment): archived as system messages (ours)
_INJECTED = lazy_re.compile(r"\s*(<environment_context>|<user_instructions>|# AGENTS\.md instructions|<INSTRUCTIONS>)")


def is_codex_record(m: Any) -> bool:
    """True for a rollout line (``type`` in ROLLOUT_TYPES with a ``payload``) or a bare Responses item of a
    Codex-only type (calls, outputs, reasoning), or a ``message`` item whose content holds input/output_text."""
    if not isinstance(m, dict) or not isinstance(m.get("type"), str):
        return False
    kind = m["type"]
    if kind in ROLLOUT_TYPES and isinstance(m.get("payload"), dict):
        return True
    if kind in CALL_TYPES or kind in OUTPUT_TYPES or kind == "reasoning":
        return "call_id" in m or "summary" in m or "action" in m
    if kind == "message" and isinstance(m.get("content"), list):
        return any(isinstance(p, dict) and kind_of(p) in ("input_text", "output_text") for p in m["content"])
    return False


def _output_text(output: Any) -> tuple[str, bool]:
    """A ``function_call_output.output`` -> (text, is_error): a str verbatim; a list of content items -> their
    texts (images as placeholders); ``{content, success}`` -> content, error when ``success`` is false."""
    if isinstance(output, dict) and ("content" in output or "success" in output):
        text, _ = _output_text(output.get("content"))
        return text, output.get("success") is False
    if isinstance(output, (str, list)) or output is None:
        return content_text(output), False
    return dumps(output), False


def _call(p: dict) -> ToolCall:
    kind = kind_of(p)
    call_id = p.get("call_id") if isinstance(p.get("call_id"), str) else None
    if kind == "function_call":
        args = p.get("arguments")
        name, args = p.get("name"), args if isinstance(args, str) else dumps(args) if args is not None else ""
    elif kind == "custom_tool_call":
        args = p.get("input")
        name, args = p.get("name"), args if isinstance(args, str) else dumps(args) if args is not None else ""
    elif kind == "local_shell_call":
        action = p.get("action") if isinstance(p.get("action"), dict) else {}
        command = action.get("command")
        name = "local_shell"
        args = " ".join(map(str, command)) if isinstance(command, list) else dumps(action)
    else:  # web_search_call
        name, args = "web_search", dumps(p.get("action", {}))
    return ToolCall(
        name=clean_text(name) if isinstance(name, str) else "",
        arguments=clean_text(args),
        id=clean_text(call_id) if call_id else None,
    )


class CodexItems:
    """Codex rollout records one at a time (used by ``parse_codex`` and streaming ingest). State across a
    document: each call id's tool name, and the call ids / (call id, output) pairs already archived, so a
    repeated record (a resumed session re-recording its history) is archived once."""

    fmt = "codex"

    def __init__(self, source: str | None = None):
        self.source = source
        self.names: dict[str, str] = {}
        self.calls_seen: set[str] = set()
        self.outputs_seen: set[tuple[str, int]] = set()  # (call id, hash of output): small per output

    def feed(self, where: str, rec: Any, result: ParseResult) -> None:
        if not isinstance(rec, dict):
            result.skip(f"{where}: not an object; skipped")
            return
        kind, payload = kind_of(rec), rec.get("payload")
        when = parse_time(rec.get("timestamp"))
        if kind in ROLLOUT_TYPES:
            if not isinstance(payload, dict):
                result.skip(f"{where}: field 'payload' is not an object; skipped")
                return
        elif rec.get("record_type") is not None or (kind is None and "id" in rec and "instructions" in rec):
            kind, payload = "session_meta", rec  # older rollouts: state lines and a first meta line
        elif kind in RESPONSE_TYPES:
            kind, payload = "response_item", rec
        else:
            result.skip(f"{where}: unknown record type {str(kind)[:40]!r}; skipped")
            return
        if kind == "session_meta":
            text = payload.get("instructions")
            if isinstance(text, str) and not blank(text):
                result.messages.append(
                    Message(role="system", text=clean_text(text), time=when, meta={"codex": "instructions"})
                )
        elif kind == "compacted":
            text = payload.get("message")
            if isinstance(text, str) and not blank(text):
                result.messages.append(
                    Message(role="system", text=clean_text(text), time=when, meta={"compact_summary": True})
                )
        elif kind == "response_item":
            self._item(where, payload, when, result)

    def _item(self, where: str, p: dict, when: Any, result: ParseResult) -> None:
        kind = kind_of(p)
        if kind == "message":
            role = norm_role(p.get("role"))
            if role is None:
                result.skip(f"{where}: message with unknown or missing role {str(p.get('role'))[:40]!r}; skipped")
                return
            text = clean_text(content_text(p.get("content")))
            if blank(text):
                result.skip(f"{where}: empty message; skipped")
                return
            if role == "user" and _INJECTED.match(text):
                role = "system"
            result.messages.append(Message(role=role, text=text, time=when))
        elif kind in CALL_TYPES:
            call = _call(p)
            if call.id:
                if call.id in self.calls_seen:
                    result.skip(f"{where}: repeated call_id {call.id[:40]!r}; skipped")
                    return
                self.calls_seen.add(call.id)
                if call.name:
                    self.names[call.id] = call.name
            result.messages.append(Message(role="assistant", tool_calls=[call], time=when))
        elif kind in OUTPUT_TYPES:
            call_id = p.get("call_id") if isinstance(p.get("call_id"), str) else None
            text, is_error = _output_text(p.get("output"))
            text = clean_text(text)
            if call_id:
                call_id = clean_text(call_id)
                if (call_id, hash(text)) in self.outputs_seen:
                    result.skip(f"{where}: repeated output of call_id {call_id[:40]!r}; skipped")
                    return
                self.outputs_seen.add((call_id, hash(text)))
            res = ToolResult(content=text, call_id=call_id, name=self.names.get(call_id or ""))
            result.messages.append(
                Message(role="tool", tool_results=[res], time=when, meta={"is_error": True} if is_error else {})
            )
        elif kind not in _IGNORED:
            result.skip(f"{where}: unknown response item type {str(kind)[:40]!r}; skipped")


def parse_codex(data: Any, source: str | None = None) -> ParseResult:
    """Codex CLI rollout JSONL (or a JSON list of its records / of Responses API items) -> Messages.

    ``message`` items -> user/assistant/system messages (``developer`` -> system; the user-role AGENTS.md and
    ``<environment_context>`` injections -> system); ``function_call``/``custom_tool_call``/``local_shell_call``/
    ``web_search_call`` -> an assistant Message with one ToolCall (arguments verbatim; a shell command's argv
    joined by spaces); ``function_call_output``/``custom_tool_call_output`` -> a ``tool`` Message with one
    ToolResult (output verbatim; list-form output -> its texts, images as ``[image: ...]``; ``success: false``
    -> ``meta["is_error"]``); ``compacted`` -> a system Message with ``meta["compact_summary"]``;
    ``session_meta.instructions`` -> a system Message. ``reasoning`` (model reasoning, mostly encrypted),
    ``turn_context`` and ``event_msg`` (UI events repeating the items) are ignored. Times come from each line's
    ``timestamp``. Records that are not objects, of unknown type, without a role, empty, or repeating a call id
    or an output are skipped and counted. Raises TranscriptFormatError for text that is not JSON/JSONL."""
    items, result = records(data, "codex", source)
    feeder = CodexItems(source)
    for where, rec in items:
        feeder.feed(where, rec, result)
    return result
