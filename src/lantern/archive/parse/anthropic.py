"""Anthropic Messages transcripts: ``{"role", "content": str | [blocks]}`` with ``tool_use``/``tool_result`` blocks."""

from __future__ import annotations

from typing import Any

from lantern.archive.parse.jsonl import (
    ParseResult,
    blank,
    check_foreign,
    check_item,
    content_text,
    dumps,
    kind_of,
    message_time,
    start,
)
from lantern.model import Message, ToolCall, ToolResult
from lantern.text.clean import clean_text

_SKIPPED_BLOCKS = {"thinking", "redacted_thinking"}


class AnthropicItems:
    """Anthropic messages one at a time (used by ``parse_anthropic`` and streaming ingest); state across a
    document: the tool name of each ``tool_use`` id."""

    fmt = "anthropic"

    def __init__(self, source: str | None = None):
        self.source = source
        self.names: dict[str, str] = {}

    def feed(self, where: str, m: Any, result: ParseResult) -> None:
        role = check_item(m, where, result)
        if role is None:
            return
        check_foreign(self.fmt, m, where, self.source)
        names = self.names
        content = m.get("content")
        blocks = content if isinstance(content, list) else [content]
        texts: list[str] = []
        calls: list[ToolCall] = []
        results: list[ToolResult] = []
        is_error = False
        for b in blocks:
            kind = kind_of(b)
            if kind == "tool_use":
                args = dumps(b.get("input", {}))
                name = b.get("name") if isinstance(b.get("name"), str) else ""
                call_id = b.get("id") if isinstance(b.get("id"), str) else None
                calls.append(ToolCall(name=clean_text(name), arguments=clean_text(args), id=call_id))
                if call_id and name:
                    names[call_id] = clean_text(name)
            elif kind == "tool_result":
                call_id = b.get("tool_use_id") if isinstance(b.get("tool_use_id"), str) else None
                out = clean_text(content_text(b.get("content")))
                results.append(ToolResult(content=out, call_id=call_id, name=names.get(call_id or "")))
                is_error = is_error or b.get("is_error") is True
            elif kind not in _SKIPPED_BLOCKS:
                texts.append(content_text(b))
        text = clean_text("\n".join(t for t in texts if t))
        when = message_time(m)
        if results:
            meta = {"is_error": True} if is_error else {}
            result.messages.append(Message(role="tool", tool_results=results, time=when, meta=meta))
        if not blank(text) or calls:
            result.messages.append(Message(role=role, text=text, tool_calls=calls, time=when))
        elif not results:
            result.skip(f"{where}: empty content; skipped")


def parse_anthropic(data: Any, source: str | None = None) -> ParseResult:
    """Anthropic messages -> Messages.

    ``data``: JSON/JSONL text, a path, bytes, a live message list, or ``{"system": ..., "messages": [...]}``
    (the top-level ``system`` str or text blocks -> a ``system`` Message first). Blocks: ``text`` -> text;
    ``tool_use`` {id, name, input} -> ToolCall(name, json.dumps(input, ensure_ascii=False), id); ``tool_result``
    {tool_use_id, content: str | [text blocks], is_error} -> ToolResult (content verbatim, name from the matching
    tool_use); ``image``/``document`` -> ``[image: caption]`` (or ``[image]``)/``[document]``; ``thinking`` blocks are
    dropped.
    Tool results are split off into a ``role="tool"`` Message placed before the rest of their message (so a user
    message holding only tool results becomes a tool message); ``meta["is_error"]`` is set when any result is an
    error. Items without a role, with an unknown role or with nothing left are skipped and counted.
    Raises TranscriptFormatError for text that is not JSON/JSONL or holds no message list, and for OpenAI
    ``tool_calls``/``tool_call_id`` fields (``check_foreign``: this parser would drop them)."""
    items, system, result = start(data, "anthropic", source)
    system_text = clean_text(content_text(system))
    if not blank(system_text):
        result.messages.append(Message(role="system", text=system_text))
    feeder = AnthropicItems(source)
    for where, m in items:
        feeder.feed(where, m, result)
    return result
