"""Chunk a message list into turns (docs/architecture.md §2.3). Deterministic, no LLM.

A ``Turn`` is one user message with the assistant messages, tool calls and tool results that follow it, plus the
file paths they reference. The rules, in order, for each message:

1. **Session change.** A message whose session (``message.session or session``) differs from the current turn's
   starts a new turn, which carries that session.
2. **User message with content.** A ``user`` message starts a new turn. Exception: a ``user`` message that holds
   only tool results and no text (the Anthropic / Claude Code way of returning ``tool_result`` blocks) continues
   the current turn, like a ``tool`` message.
3. **System message.** System messages form turns of their own (our choice; paper does not specify): a system
   message starts a new turn unless the current turn holds only system messages, in which case it joins it. So a
   leading system prompt is turn 0 and is *not* attached to the first user turn: it keeps the system prompt's
   importance (1.0, see ``classify``) off the user's content, and keeps the first user turn's summary about the
   user's question. A mid-conversation system message (a compaction notice, a reminder) is likewise its own turn.
4. **Agent step.** A non-user message carrying ``meta["step"]`` (set by formats that record an agent's steps,
   such as SWE-agent: one thought/action and its observation per step) starts a new turn, so each step is a turn
   of its own and retrieval can find the step that mattered (ours; paper does not specify).
5. **Anything else** (``assistant``, ``tool``, unknown roles) continues the current turn. Messages before the first
   user message form a turn of their own (e.g. an assistant greeting), and so do non-user messages that follow a
   system turn.

``Turn.index`` is the 0-based position in the returned list. ``Turn.files`` is, per message in order,
``Message.files`` then the paths found by ``tags.extract_paths`` in the message text, tool call arguments and tool
results; unique, first appearance first.
"""

from __future__ import annotations

from lantern.model import Message, Turn
from lantern.text.tags import extract_paths

__all__ = ["chunk", "turn_files"]


def _starts_turn(m: Message) -> bool:
    if m.role != "user":
        return False
    return bool(m.text.strip()) or not m.tool_results


def _starts_step(m: Message) -> bool:
    return m.role != "user" and m.meta.get("step") is not None


def _message_paths(m: Message) -> list[str]:
    out = list(m.files)
    if m.text:
        out.extend(extract_paths(m.text))
    for call in m.tool_calls:
        if call.arguments:
            out.extend(extract_paths(call.arguments))
    for res in m.tool_results:
        if res.content:
            out.extend(extract_paths(res.content))
    return out


def turn_files(messages: list[Message]) -> list[str]:
    """The file paths referenced by ``messages``: ``Message.files`` plus paths in their text, tool arguments and
    tool results; unique, in order of first appearance."""
    seen: set[str] = set()
    files: list[str] = []
    for m in messages:
        for p in _message_paths(m):
            if p and p not in seen:
                seen.add(p)
                files.append(p)
    return files


def chunk(messages: list[Message], session: str | None = None) -> list[Turn]:
    """Group ``messages`` into turns (rules in the module docstring). ``session`` is the session of messages
    that carry none."""
    groups: list[tuple[str | None, list[Message]]] = []
    current: list[Message] | None = None
    current_session: str | None = None
    for m in messages:
        sess = m.session if m.session is not None else session
        new = current is None or sess != current_session
        if not new:
            assert current is not None
            only_system = all(x.role == "system" for x in current)
            if m.role == "system":
                new = not only_system
            elif _starts_turn(m) or _starts_step(m):
                new = True
            else:
                new = only_system  # an assistant/tool message after a system turn opens a turn of its own
        if new:
            current = [m]
            current_session = sess
            groups.append((sess, current))
        else:
            assert current is not None
            current.append(m)
    return [Turn(messages=msgs, index=i, session=sess, files=turn_files(msgs)) for i, (sess, msgs) in enumerate(groups)]
