"""``Message`` objects handed to the API directly get the checks dict input gets (ours)."""

from __future__ import annotations

import json
from dataclasses import replace

from lantern.archive.parse.jsonl import NESTED_TOO_DEEPLY, ParseResult, blank, norm_role
from lantern.errors import TranscriptFormatError
from lantern.model import Message


def check_messages(messages: list[Message]) -> ParseResult:
    """Caller-built Messages -> ParseResult(format="messages"): roles normalized as for dicts (``human`` ->
    ``user``, ``developer`` -> ``system`` ...); a Message with an unknown or non-str role, or with no text (``blank``:
    only whitespace or invisible
    Default_Ignorable characters), tool calls or tool results, is skipped, counted and named in ``warnings`` (``message
    N``, 1-based) — exactly as
    the same message given as a dict would be. Messages are copied, never changed in place. Raises
    TranscriptFormatError(NESTED_TOO_DEEPLY) for a ``meta`` nested deeper than Python can walk (the store writes
    it as JSON), as ``parse`` does for such content."""
    result = ParseResult(format="messages")
    for i, m in enumerate(messages, 1):
        if m.meta:
            try:
                json.dumps(m.meta, default=str)
            except RecursionError:
                raise TranscriptFormatError(NESTED_TOO_DEEPLY, field=f"messages[{i - 1}].meta") from None
            except (TypeError, ValueError):
                pass  # a cycle or an odd object: not a question of depth
        role = norm_role(m.role)
        if role is None:
            result.skip(f"message {i}: unknown role {str(m.role)[:40]!r}; skipped")
            continue
        if blank(m.text) and not m.tool_calls and not m.tool_results:
            result.skip(f"message {i}: empty content; skipped")
            continue
        result.messages.append(m if role == m.role else replace(m, role=role))
    return result
