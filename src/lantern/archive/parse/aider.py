"""aider's markdown chat log (``.aider.chat.history.md``).

``# aider chat started at YYYY-MM-DD HH:MM:SS`` opens a session; ``#### `` lines are the user; ``> `` lines are
aider's own output (commands, lint/test output, commits) shown as tool output; other lines are the assistant.
aider ends ``####`` and ``>`` lines with two spaces (a markdown line break); that break is removed.
"""

from __future__ import annotations

import re
from typing import Any

from lantern import lazy_re
from lantern.archive.parse.jsonl import ParseResult, blank, parse_time, read_source
from lantern.errors import TranscriptFormatError
from lantern.model import Message, ToolResult
from lantern.text.clean import clean_text

SESSION_HEADER = "# aider chat started at "

_TOOL_FILES = lazy_re.compile(
    r"^(?:Added (.+?) to the chat\.?|Added (.+?) to read-only(?: files)?\.?"
    r"|Removed (.+?) from the chat|Applied edit to (.+)|Creating empty file (.+)"
    r"|Added clipboard image to the chat: (.+))$",
    re.M,
)
_USER_FILES = lazy_re.compile(r"^/(?:add|drop|read-only|read)[ \t]+(.+)$", re.M)
_EDIT_FILES = lazy_re.compile(r"^([^\s`]+)\n```[^\n]*\n<<<<<<< SEARCH$", re.M)


def _files(kind: str, text: str) -> list[str]:
    if kind == "tool":
        found = [next(g for g in m.groups() if g) for m in _TOOL_FILES.finditer(text)]
    elif kind == "user":
        found = [f for m in _USER_FILES.finditer(text) for f in m.group(1).split()]
    else:
        found = _EDIT_FILES.findall(text)
    return list(dict.fromkeys(f.strip() for f in found if f.strip()))


def parse_aider(data: Any, source: str | None = None) -> ParseResult:
    """aider chat history markdown -> Messages.

    ``data``: the markdown text, a path or bytes. Each ``# aider chat started at <ts>`` header starts a session:
    its messages get ``session=<ts>`` (e.g. ``"2024-08-05 19:33:02"``) and ``time`` = that timestamp (turns have
    no time of their own). Consecutive ``#### `` lines -> one ``user`` Message; consecutive ``> `` lines -> one
    ``tool`` Message whose ToolResult holds the lines with ``> `` stripped; other lines (blank lines inside
    included) -> one ``assistant`` Message. Blank lines around a block are dropped. ``files`` lists obvious paths:
    ``Added/Removed <f> to/from the chat``, ``Applied edit to <f>``, ``/add <f>``, edit-block file names.
    ``meta["line"]`` is the 1-based line where the message starts. Lines before the first header (a file that
    starts mid-session) get ``session=None``; an Emacs ``-*- mode -*-`` first line is ignored. Blocks with no
    text are counted as skipped. Raises TranscriptFormatError for a loaded JSON object or binary data."""
    text = read_source(data, source)
    if not isinstance(text, str):
        raise TranscriptFormatError("a JSON object, where an aider chat history is markdown text", source=source)
    result = ParseResult(format="aider")
    lines = clean_text(text).split("\n")
    if lines and re.fullmatch(r"\s*-\*-.*-\*-\s*", lines[0]):
        lines[0] = ""
    session, when = None, None
    kind, buf, start = None, [], 0

    def flush() -> None:
        nonlocal kind, buf
        body = "\n".join(buf).strip("\n")
        if kind is not None and blank(body):
            result.skip(f"line {start}: empty {kind} block; skipped")
        elif kind is not None:
            msg = Message(role=kind, session=session, time=when, files=_files(kind, body), meta={"line": start})
            if kind == "tool":
                msg.tool_results = [ToolResult(content=body)]
            else:
                msg.text = body
            result.messages.append(msg)
        kind, buf = None, []

    for n, line in enumerate(lines, 1):
        if line.startswith(SESSION_HEADER):
            flush()
            session = line[len(SESSION_HEADER) :].strip()
            when = parse_time(session)
            continue
        bare = line[:-2] if line.endswith("  ") else line
        if bare.startswith("#### ") or bare == "####":
            this, body = "user", bare[5:]
        elif bare.startswith("> ") or bare == ">":
            this, body = "tool", bare[2:]
        elif not line.strip():
            if kind == "assistant":
                buf.append("")
            else:
                flush()
            continue
        else:
            this, body = "assistant", line
        if this != kind:
            flush()
            kind, start = this, n
        buf.append(body)
    flush()
    return result
