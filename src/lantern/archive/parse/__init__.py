"""The parse stage of the write path: a transcript in any supported format -> ``list[Message]``.

    result = parse("chat.jsonl")                 # path, bytes, text, or a live list of message dicts
    result.messages, result.skipped, result.warnings, result.format

Formats: ``openai``, ``anthropic``, ``jsonl`` (plain ``{role, content}``), ``codex`` (Codex CLI rollout JSONL),
``claude-code`` (Claude Code session JSONL), ``sharegpt``, ``swe_agent`` (SWE-agent ``.traj``), ``aider`` (markdown chat
log), ``locomo`` (LoCoMo benchmark
JSON). Bad input raises only ``TranscriptFormatError``; bad items inside an otherwise good transcript are
skipped, counted in ``skipped`` and explained in ``warnings``. ``stream`` reads JSONL files line by line
(``stream.py``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from lantern import lazy_re
from lantern.archive.parse.aider import parse_aider
from lantern.archive.parse.anthropic import AnthropicItems, parse_anthropic
from lantern.archive.parse.claude_code import is_claude_code, parse_claude_code
from lantern.archive.parse.codex import CodexItems, is_codex_record, parse_codex
from lantern.archive.parse.jsonl import (
    NESTED_TOO_DEEPLY,
    ParseResult,
    PlainItems,
    decode,
    kind_of,
    load_json,
    message_items,
    parse_jsonl,
    read_source,
    unwrap,
)
from lantern.archive.parse.locomo import is_locomo_sample, parse_locomo
from lantern.archive.parse.openai import OpenAIItems, parse_openai
from lantern.archive.parse.sharegpt import ShareGPTItems, is_sharegpt, parse_sharegpt
from lantern.archive.parse.swe_agent import is_swe_agent, parse_swe_agent
from lantern.errors import TranscriptFormatError
from lantern.text.clean import clean_text

__all__ = [
    "FORMATS",
    "ITEM_PARSERS",
    "ParseResult",
    "clean_text",
    "detect_format",
    "item_hint",
    "parse",
    "parse_aider",
    "parse_anthropic",
    "parse_claude_code",
    "parse_codex",
    "parse_jsonl",
    "parse_locomo",
    "parse_openai",
    "parse_sharegpt",
    "parse_swe_agent",
]

FORMATS: dict[str, Callable[..., ParseResult]] = {
    "openai": parse_openai,
    "anthropic": parse_anthropic,
    "jsonl": parse_jsonl,
    "aider": parse_aider,
    "locomo": parse_locomo,
    "claude-code": parse_claude_code,
    "codex": parse_codex,
    "sharegpt": parse_sharegpt,
    "swe_agent": parse_swe_agent,
}

# formats that can be read one JSONL record at a time (streaming ingest, stream.py): a class whose
# ``feed(where, record, result)`` keeps the document's state (tool names by call id, duplicates seen)
ITEM_PARSERS: dict[str, Callable[..., Any]] = {
    "openai": OpenAIItems,
    "anthropic": AnthropicItems,
    "jsonl": PlainItems,
    "codex": CodexItems,
    "sharegpt": ShareGPTItems,
}

_AIDER = lazy_re.compile(r"^(?:# aider chat started at |#### )", re.M)


def _looks_like_aider(text: str) -> bool:
    return not text.lstrip().startswith(("{", "[")) and _AIDER.search(text) is not None


def item_hint(m: Any) -> str | None:
    """What one record says about its format: ``codex``, ``sharegpt``, ``openai``, ``anthropic``, ``text_parts``
    (list content of plain text parts: OpenAI style) or None (plain, or not a message). Rules as in
    ``detect_format``."""
    if not isinstance(m, dict):
        return None
    if is_codex_record(m):
        return "codex"
    if isinstance(m.get("conversations"), list):
        return "sharegpt"
    m = unwrap(m)
    if m.get("tool_calls") or "function_call" in m or "tool_call_id" in m:
        return "openai"
    if m.get("role") in ("tool", "function", "developer"):
        return "openai"
    content = m.get("content")
    text_parts = False
    for block in content if isinstance(content, list) else []:
        kind = kind_of(block)
        if kind in ("tool_use", "tool_result", "thinking", "redacted_thinking"):
            return "anthropic"
        if kind == "image" and "source" in block:
            return "anthropic"
        if kind in ("image_url", "input_audio"):
            return "openai"
        text_parts = text_parts or kind == "text"
    return "text_parts" if text_parts else None


def detect_records(records: Any) -> str:
    """The format of a sequence of records (a JSON list, JSONL objects, or a live iterator of them): the first
    decisive ``item_hint`` (codex, sharegpt, openai, anthropic) wins; else ``openai`` when any record has text
    parts, else ``jsonl``. Stops at the first decisive record."""
    decisive, text_parts = _first_hint(records)
    return decisive or ("openai" if text_parts else "jsonl")


def _first_hint(records: Any) -> tuple[str | None, bool]:
    text_parts = False
    for m in records:
        hint = item_hint(m)
        if hint == "text_parts":
            text_parts = True
        elif hint is not None:
            return hint, text_parts
    return None, text_parts


def detect_format(data: Any) -> str:
    """The format name of a transcript given as text, bytes or a loaded object (list/dict).

    aider: text with a ``# aider chat started at`` or ``#### `` line. locomo: a sample (or list of samples) whose
    ``conversation`` holds ``session_1``. claude-code: records of type user/assistant with a ``message`` object and
    ``uuid``/``sessionId``, or a ``compact_boundary`` record (``claude_code.is_claude_code``). swe_agent: an object with
    a ``trajectory`` list, or a ``history`` of
    messages carrying ``agent``/``message_type``. sharegpt: an object (or list of objects) with a
    ``conversations`` list. codex: rollout records ``{"type": "session_meta"|"response_item"|..., "payload"}`` or
    bare Responses items (``function_call``, ``message`` with ``input_text``/``output_text`` parts ...).
    openai: messages with ``tool_calls``, ``tool_call_id``, role tool/function/developer, or list content with
    ``image_url``/``text`` parts. anthropic: content blocks ``tool_use``/``tool_result``/``thinking``, or a
    top-level ``system`` beside ``messages``. Otherwise ``jsonl``.
    Raises TranscriptFormatError when text is neither aider nor JSON/JSONL, or no message list is found."""
    if isinstance(data, (bytes, bytearray)):
        data = decode(bytes(data))
    if isinstance(data, str):
        if _looks_like_aider(data):
            return "aider"
        data = load_json(data)[0]
    if is_locomo_sample(data) or (isinstance(data, list) and data and is_locomo_sample(data[0])):
        return "locomo"
    if is_claude_code(data):
        return "claude-code"
    if is_swe_agent(data):
        return "swe_agent"
    if is_sharegpt(data):
        return "sharegpt"
    if isinstance(data, list) and any(is_codex_record(m) for m in data):
        return "codex"
    if is_codex_record(data):
        return "codex"
    items, _ = message_items(data)
    decisive, text_parts = _first_hint(m for _, m in items)
    if decisive:
        return decisive
    if isinstance(data, dict) and data.get("system") is not None:
        return "anthropic"
    return "openai" if text_parts else "jsonl"


def parse(source: Any, format: str = "auto", *, name: str | None = None) -> ParseResult:
    """Parse a transcript -> ParseResult(messages, skipped, warnings, format).

    ``source``: a path (``str``/``Path``), bytes, the file content as ``str``, or a loaded object: a live list of
    message dicts, ``{"messages": [...]}``, or LoCoMo samples. A JSON document may be a list of messages, an object
    with ``messages``, or JSONL. ``format``: ``auto`` (see ``detect_format``) or a key of ``FORMATS``. ``name``
    labels the source in errors (default: the path).

    Raises TranscriptFormatError (and nothing else for bad input) for: an unknown ``format``, a missing or
    unreadable file, binary data or invalid UTF-8, empty text, a JSON syntax error (with ``line``),
    a JSONL file with no valid line, data holding no message list, or a value nested deeper than Python can walk
    (about 1,000 levels, ``json``'s own limit: ``NESTED_TOO_DEEPLY``, for a file as for a live object).
    Malformed JSONL lines, items without a role, unknown roles and empty messages are skipped, counted and named in
    ``warnings``."""
    if format != "auto" and format not in FORMATS:
        raise TranscriptFormatError(
            f"unknown format {format!r}; expected auto or one of {', '.join(FORMATS)}", field="format", source=name
        )
    if name is None and isinstance(source, os.PathLike):
        name = os.fspath(source)
    data = read_source(source, name)
    skipped, warnings = 0, []
    if isinstance(data, str):
        if format == "aider" or (format == "auto" and _looks_like_aider(data)):
            return parse_aider(data, name)
        data, skipped, warnings = load_json(data, name)
    try:
        fmt = detect_format(data) if format == "auto" else format
        result = FORMATS[fmt](data, source=name)
    except RecursionError:  # a value (content, tool arguments, a block) deeper than the parser can walk
        raise TranscriptFormatError(NESTED_TOO_DEEPLY, source=name) from None
    except TranscriptFormatError as e:  # every error names the file, once, whichever parser raised it
        named = e.named(name)
        if named is e:
            raise
        raise named from e.__cause__
    result.skipped += skipped
    result.warnings[:0] = warnings
    return result
