"""ShareGPT conversations: ``{"conversations": [{"from": "human", "value": "..."}, ...], "system"?, "id"?}``.

Role aliases (ShareGPT, and the LLaMA-Factory / function-calling variants): ``human``/``user`` -> user,
``gpt``/``assistant``/``chatgpt``/``bard``/``bing``/``model`` -> assistant, ``system`` -> system,
``function_call`` -> an assistant tool call (value: JSON ``{"name", "arguments"}`` or a list of them),
``observation``/``tool``/``function_response``/``function`` -> the result of the pending tool call.
Some dumps use ``role``/``content`` instead of ``from``/``value``; both are read.
"""

from __future__ import annotations

from typing import Any

from lantern.archive.parse.jsonl import ParseResult, blank, content_text, dumps, loads, records
from lantern.errors import TranscriptFormatError
from lantern.model import Message, ToolCall, ToolResult
from lantern.text.clean import clean_text

ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "bing": "assistant",
    "model": "assistant",
    "system": "system",
    "function_call": "call",
    "observation": "tool",
    "tool": "tool",
    "function_response": "tool",
    "function": "tool",
}


def is_sharegpt(data: Any) -> bool:
    """True for a conversation object (a ``conversations`` list) or a list whose first object is one."""
    if isinstance(data, list):
        data = next((x for x in data if isinstance(x, dict)), None)
    return isinstance(data, dict) and isinstance(data.get("conversations"), list)


def _calls(value: str, first_id: int) -> list[ToolCall]:
    """A ``function_call`` value -> ToolCalls: JSON ``{"name", "arguments"}`` (or a list of them; arguments kept
    as JSON text); anything else -> one call named ``function_call`` with the value as its arguments."""
    try:
        parsed = loads(value)
    except (ValueError, RecursionError):
        parsed = None
    items = parsed if isinstance(parsed, list) else [parsed]
    calls = []
    for i, c in enumerate(items):
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            return [ToolCall(name="function_call", arguments=clean_text(value), id=f"call-{first_id}")]
        args = c.get("arguments", c.get("parameters", ""))
        args = args if isinstance(args, str) else dumps(args)
        calls.append(ToolCall(name=clean_text(c["name"]), arguments=clean_text(args), id=f"call-{first_id + i}"))
    return calls


class ShareGPTItems:
    """ShareGPT conversations one at a time (used by ``parse_sharegpt`` and streaming ingest of JSONL, one
    conversation per line). ``many``: each conversation is its own sub-session (``id``, else
    ``conversation-<k>``, k counting conversations from 1)."""

    fmt = "sharegpt"

    def __init__(self, source: str | None = None, many: bool = True):
        self.source = source
        self.many = many
        self.count = 0

    def feed(self, where: str, conv: Any, result: ParseResult) -> None:
        self.count += 1
        if not isinstance(conv, dict) or not isinstance(conv.get("conversations"), list):
            result.skip(f"{where}: missing field 'conversations' (a list); skipped")
            return
        session = None
        if self.many:
            cid = conv.get("id")
            ok = isinstance(cid, (str, int)) and not isinstance(cid, bool) and str(cid).strip()
            session = clean_text(str(cid))[:200] if ok else f"conversation-{self.count}"
        if isinstance(conv.get("system"), str) and not blank(conv["system"]):
            result.messages.append(Message(role="system", text=clean_text(conv["system"]), session=session))
        pending: list[ToolCall] = []
        next_id = 1
        for j, turn in enumerate(conv["conversations"]):
            at = f"{where}, conversations[{j}]"
            if not isinstance(turn, dict):
                result.skip(f"{at}: not an object; skipped")
                continue
            who = turn.get("from", turn.get("role"))
            if who is None:
                result.skip(f"{at}: missing field 'from'; skipped")
                continue
            role = ROLES.get(who.strip().lower()) if isinstance(who, str) else None
            if role is None:
                result.skip(f"{at}: unknown role {str(who)[:40]!r}; skipped")
                continue
            value = turn.get("value", turn.get("content"))
            text = clean_text(content_text(value))
            if blank(text) and role != "tool":
                result.skip(f"{at}: empty value; skipped")
                continue
            if role == "call":
                calls = _calls(text, next_id)
                next_id += len(calls)
                pending.extend(calls)
                result.messages.append(Message(role="assistant", tool_calls=calls, session=session))
            elif role == "tool":
                call = pending.pop(0) if pending else None
                res = ToolResult(content=text, call_id=call.id if call else None, name=call.name if call else None)
                result.messages.append(Message(role="tool", tool_results=[res], session=session))
            else:
                result.messages.append(Message(role=role, text=text, session=session))


def parse_sharegpt(data: Any, source: str | None = None) -> ParseResult:
    """ShareGPT -> Messages. ``data``: one conversation object, a JSON list of them, or JSONL (one per line);
    text, a path, bytes or the loaded object.

    One conversation -> its messages (no sub-session; a list or JSONL of one conversation alike); several -> each its
    own sub-session ``<id>`` or
    ``conversation-<k>`` (archived as ``<session>/<id>``). A top-level ``system`` str -> a system Message first.
    ``function_call`` turns -> assistant ToolCalls (ids ``call-<n>`` per conversation); observation turns ->
    ToolResults matched to pending calls in order. Conversations without a ``conversations`` list, turns
    without ``from``, with an unknown role or an empty value are skipped and counted. Raises
    TranscriptFormatError for text that is not JSON/JSONL, a JSON scalar, or a single object without a
    ``conversations`` list (field ``conversations``)."""
    items, result = records(data, "sharegpt", source)
    if len(items) == 1 and not is_sharegpt(items[0][1]):
        raise TranscriptFormatError("expected a list of ShareGPT turns", field="conversations", source=source)
    feeder = ShareGPTItems(source, many=len(items) > 1)
    for where, conv in items:
        feeder.feed(where, conv, result)
    return result
