"""OpenAI Chat Completions transcripts: ``{"role", "content", "tool_calls", "tool_call_id"}`` messages."""

from __future__ import annotations

from typing import Any

from lantern.archive.parse.jsonl import (
    ParseResult,
    blank,
    check_foreign,
    check_item,
    content_text,
    dumps,
    message_time,
    start,
    str_or_none,
)
from lantern.model import Message, ToolCall, ToolResult
from lantern.text.clean import clean_text


def _call(c: Any) -> ToolCall | None:
    """``{"id", "type": "function", "function": {"name", "arguments"}}`` (or legacy ``function_call``) -> ToolCall."""
    if not isinstance(c, dict):
        return None
    f = c.get("function") if isinstance(c.get("function"), dict) else c
    name = f.get("name")
    args = f.get("arguments", "")
    if not isinstance(args, str):
        args = dumps(args)
    call_id = c.get("id")
    return ToolCall(
        name=clean_text(name) if isinstance(name, str) else "",
        arguments=clean_text(args),
        id=str(call_id) if isinstance(call_id, (str, int)) else None,
    )


class OpenAIItems:
    """OpenAI chat messages one at a time (used by ``parse_openai`` and streaming ingest). State across a
    document: the tool name of each call id (so results in any order get their call's name) and the
    ``(tool_call_id, content)`` of results already seen (a repeated result is a duplicate, skipped and counted)."""

    fmt = "openai"

    def __init__(self, source: str | None = None):
        self.source = source
        self.names: dict[str, str] = {}
        self.results_seen: set[tuple[str, int]] = set()  # (call id, hash of content): small per result

    def feed(self, where: str, m: Any, result: ParseResult) -> None:
        role = check_item(m, where, result)
        if role is None:
            return
        check_foreign(self.fmt, m, where, self.source)
        text = clean_text(content_text(m.get("content")))
        raw_calls = m.get("tool_calls") if isinstance(m.get("tool_calls"), list) else []
        if isinstance(m.get("function_call"), dict):
            raw_calls = raw_calls + [m["function_call"]]
        calls = [c for c in map(_call, raw_calls) if c is not None]
        for c in calls:
            if c.id and c.name:
                self.names[c.id] = c.name
        msg = Message(role=role, text=text, tool_calls=calls, time=message_time(m), name=str_or_none(m.get("name")))
        if role == "tool":
            call_id = m.get("tool_call_id")
            call_id = (
                clean_text(str(call_id)) if isinstance(call_id, (str, int)) and not isinstance(call_id, bool) else None
            )
            if m.get("content") is None and call_id is None:
                result.skip(f"{where}: tool message without content or tool_call_id; skipped")
                return
            if call_id is not None:
                if (call_id, hash(text)) in self.results_seen:
                    result.skip(f"{where}: duplicate result for tool_call_id {call_id[:40]!r}; skipped")
                    return
                self.results_seen.add((call_id, hash(text)))
            name = msg.name or self.names.get(call_id or "")
            msg.text, msg.name = "", name
            msg.tool_results = [ToolResult(content=text, call_id=call_id, name=name)]
        elif blank(text) and not calls:
            result.skip(f"{where}: empty content; skipped")
            return
        result.messages.append(msg)


def parse_openai(data: Any, source: str | None = None) -> ParseResult:
    """OpenAI chat messages -> Messages.

    ``data``: JSON/JSONL text, a path, bytes, a live message list, or ``{"messages": [...]}``. Roles
    system/developer -> ``system``, user, assistant, tool/function -> ``tool``. ``content`` may be a str, a list
    of parts (``text``; ``image_url`` -> ``[image: caption]``/``[image]``) or null beside ``tool_calls``. Each tool
    call becomes a ToolCall with ``arguments`` verbatim; a ``tool`` message becomes ``Message(role="tool",
    tool_results=[ToolResult(content, tool_call_id, name)])`` with the content verbatim and the name taken from
    the message or the earlier tool call of the same id (parallel results may come in any order). Items without
    a role, with an unknown role, with no content and no tool calls, or repeating a tool result (same
    ``tool_call_id`` and content) are skipped and counted. Raises TranscriptFormatError for text that is not
    JSON/JSONL or holds no message list, and for Anthropic ``tool_use``/``tool_result`` blocks (``check_foreign``:
    this parser would drop them)."""
    items, _, result = start(data, "openai", source)
    feeder = OpenAIItems(source)
    for where, m in items:
        feeder.feed(where, m, result)
    return result
