"""Extractive summary of a turn (docs/architecture.md §2.4): the text that gets embedded. Deterministic, no LLM.

Layout (one line each, in this order)::

    user: <text cut to message_chars>
    assistant: <text cut to message_chars>
    ...
    bash -> <head of a tool call's arguments>          (only if room)
    result bash: <head of a tool result>               (only if room)
    tools: bash, edit
    files: a.py, b/c.md

* Each message's text has its whitespace collapsed, then is cut to at most ``message_chars`` (500) characters,
  at a sentence end (``. ! ? 。 ！ ？ ; ；``) if one falls in the second half of the window, else at a word
  boundary (space, CJK comma), else hard; a cut text ends with "…" (counted in the 500). The prefix is the role,
  with the speaker or tool name if the message has one (``user (Caroline): ...``). Characters are code points, so
  Chinese counts the same as English.
* The ``tools:`` and ``files:`` lines are always kept (each at most 1/4 of ``max_chars``, with "(+N more)" when
  cut): the message lines get the room left in ``max_chars`` (1,200). When that room runs out, the message
  being written is cut to what is left (if at least 40 characters are left) and later messages are dropped, so
  the user's message, which comes first, is kept whole.
* Tool output (a ``tool`` message's text, a tool call's arguments, a tool result) is not a message line: only a
  piece of at most 160 characters of each, in order, and only while room is left after the message lines. The
  full text is stored verbatim elsewhere; the summary is for the embedder. A tool result or ``tool`` message
  longer than that shows its head and its last line (``head … tail``, the tail at most 70 characters): a test run,
  a build or a log ends with its verdict ("1 failed, 2391 passed"), which is as findable as its command (ours).
* The whole is at most ``max_chars`` characters (hard guard at the end).
"""

from __future__ import annotations

from lantern import lazy_re
from lantern.model import Turn

__all__ = ["summarize", "cut"]

ELLIPSIS = "…"
TOOL_HEAD_CHARS = 160  # head of a tool call / tool result shown if room (ours)
TOOL_TAIL_CHARS = 70  # of those 160, the last line of a long tool result (ours)
MIN_PIECE_CHARS = 40  # a message cut shorter than this is dropped instead (ours)

_WS = lazy_re.compile(r"\s+")
_SENTENCE_END = lazy_re.compile(r"[.!?;](?=\s)|[。！？；]")
_CJK_BREAK = lazy_re.compile(r"[，、：,]")


def _squash(text: str) -> str:
    return _WS.sub(" ", text).strip()


def cut(text: str, limit: int) -> str:
    """``text`` (whitespace already collapsed) cut to at most ``limit`` characters, "…" included, at a sentence
    end in the second half of the window, else at a word boundary there, else hard."""
    if len(text) <= limit:
        return text
    if limit <= 1:
        return ELLIPSIS[:limit]
    window = text[: limit - 1]
    half = (limit - 1) // 2
    best = -1
    for m in _SENTENCE_END.finditer(window):
        if m.end() >= half:
            best = m.end()
    if best < 0:
        sp = window.rfind(" ")
        if sp >= half:
            best = sp
        else:
            for m in _CJK_BREAK.finditer(window):
                if m.end() >= half:
                    best = m.end()
    piece = window[:best] if best > 0 else window
    return piece.rstrip() + ELLIPSIS


def _who(role: str, name: str | None) -> str:
    return f"{role} ({name})" if name else role


def _list_line(label: str, items: list[str], limit: int) -> str:
    """``label: a, b, c`` within ``limit`` chars, ending ``(+N more)`` if not every item fits."""
    if not items:
        return ""
    line = f"{label}: "
    shown = 0
    for i, item in enumerate(items):
        piece = item if i == 0 else ", " + item
        rest = len(items) - i - 1
        tail = f" (+{rest} more)" if rest else ""
        if len(line) + len(piece) + len(tail) > limit:
            break
        line += piece
        shown += 1
    if shown < len(items):
        more = f" (+{len(items) - shown} more)"
        if shown == 0:
            line = cut(f"{label}: {items[0]}", max(limit - len(more), 1))
            shown = 1
            more = f" (+{len(items) - 1} more)" if len(items) > 1 else ""
        line += more
    return line[:limit]


def _output(label: str, raw: str) -> str:
    """``label`` + a tool output within ``TOOL_HEAD_CHARS``: whole when it fits, else its head, `` … `` and its last
    non-blank line (cut to ``TOOL_TAIL_CHARS``, from its end)."""
    text = _squash(raw)
    if len(label) + len(text) <= TOOL_HEAD_CHARS:
        return label + text
    last = next((_squash(line) for line in reversed(raw.rstrip().splitlines()) if line.strip()), "")
    if not last or len(last) >= len(text):
        return cut(label + text, TOOL_HEAD_CHARS)
    tail = last if len(last) <= TOOL_TAIL_CHARS else ELLIPSIS + last[-(TOOL_TAIL_CHARS - 1) :]
    head = cut(label + text, TOOL_HEAD_CHARS - len(tail) - 1)
    return head + " " + tail


def summarize(turn: Turn, message_chars: int = 500, max_chars: int = 1200) -> str:
    """The extractive summary of ``turn`` (layout and caps in the module docstring). Deterministic."""
    primary: list[str] = []
    secondary: list[str] = []
    for m in turn.messages:
        text = _squash(m.text) if m.text else ""
        if text:
            if m.role == "tool":
                secondary.append(_output(f"result {m.name}: " if m.name else "result: ", m.text))
            else:
                primary.append(f"{_who(m.role, m.name)}: {cut(text, message_chars)}")
        for call in m.tool_calls:
            args = _squash(call.arguments) if call.arguments else ""
            if args:
                secondary.append(cut(f"{call.name or 'tool'} -> {args}", TOOL_HEAD_CHARS))
        for res in m.tool_results:
            if res.content and res.content.strip():
                secondary.append(_output(f"result {res.name}: " if res.name else "result: ", res.content))

    quarter = max(max_chars // 4, 1)
    tail = [x for x in (_list_line("tools", turn.tool_names, quarter), _list_line("files", turn.files, quarter)) if x]
    room = max_chars - sum(len(x) + 1 for x in tail)  # +1: the newline before each tail line

    lines: list[str] = []
    used = -1  # no newline before the first line
    for line in primary:
        left = room - used - 1
        if len(line) <= left:
            lines.append(line)
            used += len(line) + 1
            continue
        if left >= MIN_PIECE_CHARS:
            lines.append(cut(line, left))
            used += len(lines[-1]) + 1
        room = used  # nothing more fits: stop adding message lines
        break
    for line in secondary:
        left = room - used - 1
        if left < MIN_PIECE_CHARS:
            break
        piece = line if len(line) <= left else cut(line, left)
        lines.append(piece)
        used += len(piece) + 1

    out = "\n".join(lines + tail) if lines else "\n".join(tail)
    if len(out) > max_chars:
        out = cut(out, max_chars)
    return out
