"""SWE-agent trajectories (``.traj``, one JSON object; SWE-agent ``trajectories/`` and ``tests/test_data``).

Shape: ``{"environment", "trajectory", "history", "info", "replay_config"?}``.
``history``: the chat sent to the model, ``{"role": system|user|assistant|tool, "content", "agent",
"message_type"?, "is_demo"?}``; function-calling runs add ``thought``/``action``/``tool_calls`` (OpenAI shape) on
assistant messages and ``tool_call_ids`` on tool messages; older text-format runs return observations as
``user`` messages. ``trajectory``: one step per agent action, ``{"thought", "action", "observation",
"response", "state", "execution_time"?}``.
"""

from __future__ import annotations

from typing import Any

from lantern.archive.parse.jsonl import ParseResult, blank, content_text, load_json, norm_role, read_source
from lantern.archive.parse.openai import _call
from lantern.errors import TranscriptFormatError
from lantern.model import Message, ToolCall, ToolResult
from lantern.text.clean import clean_text


def is_swe_agent(data: Any) -> bool:
    """True for an object with a ``trajectory`` list, or a ``history`` list of SWE-agent messages (their
    ``agent`` or ``message_type`` key)."""
    if not isinstance(data, dict):
        return False
    if isinstance(data.get("trajectory"), list) and ("history" in data or "info" in data or "environment" in data):
        return True
    history = data.get("history")
    first = next((m for m in history if isinstance(m, dict)), None) if isinstance(history, list) else None
    return first is not None and "role" in first and ("agent" in first or "message_type" in first)


def _str(value: Any) -> str:
    return clean_text(value) if isinstance(value, str) else ""


def _command_name(action: str) -> str:
    """The tool name of an action: its first word (``edit 1:1 ...`` -> ``edit``), else ``action``."""
    words = action.split(None, 1)
    return words[0][:80] if words else "action"


def _preamble(history: list, result: ParseResult) -> tuple[list[Message], int]:
    """The messages before the agent's first action (system prompt, task) -> Messages, and the index where the
    agent loop starts. Demonstrations (``is_demo``) are example runs of other tasks: not archived."""
    out: list[Message] = []
    for i, m in enumerate(history):
        where = f"history[{i}]"
        if not isinstance(m, dict):
            result.skip(f"{where}: not an object; skipped")
            continue
        role = norm_role(m.get("role"))
        if role == "assistant":
            return out, i
        if m.get("is_demo") is True:
            continue
        if role not in ("system", "user"):
            result.skip(f"{where}: unexpected role {str(m.get('role'))[:40]!r} before the first action; skipped")
            continue
        text = clean_text(content_text(m.get("content")))
        if not blank(text):
            out.append(Message(role=role, text=text, meta={"agent": _str(m.get("agent"))} if m.get("agent") else {}))
        else:
            result.skip(f"{where}: empty content; skipped")
    return out, len(history)


def _steps(steps: list, result: ParseResult) -> list[Message]:
    """Trajectory steps -> per step an assistant Message (thought; the action as one ToolCall named by the
    command's first word, id ``step-<n>``; ``meta["step"] = n``, so the step opens a turn of its own: chunk.py
    rule 4) and a tool Message (the observation as its ToolResult)."""
    out: list[Message] = []
    for i, step in enumerate(steps):
        where = f"trajectory[{i}]"
        if not isinstance(step, dict):
            result.skip(f"{where}: not an object; skipped")
            continue
        thought, action = _str(step.get("thought")), _str(step.get("action"))
        if blank(thought) and blank(action):
            thought = _str(step.get("response"))
        if blank(thought) and blank(action):
            result.skip(f"{where}: no thought, action or response; skipped")
            continue
        call_id = f"step-{i + 1}"
        calls = [ToolCall(name=_command_name(action), arguments=action, id=call_id)] if not blank(action) else []
        out.append(Message(role="assistant", text=thought, tool_calls=calls, meta={"step": i + 1}))
        if calls and "observation" in step:
            observation = clean_text(content_text(step.get("observation")))
            out.append(Message(role="tool", tool_results=[ToolResult(observation, call_id, calls[0].name)]))
    return out


def _loop(history: list, start: int, result: ParseResult) -> list[Message]:
    """The agent loop from ``history`` (when there is no trajectory): assistant messages with ``tool_calls``
    (OpenAI shape) or an ``action``; ``tool`` messages (``tool_call_ids``) and, in text-format runs, ``user``
    observations -> ToolResults of the pending call. Each kept assistant message is a step (``meta["step"]``,
    1-based)."""
    out: list[Message] = []
    names: dict[str, str] = {}
    pending: list[str] = []
    step = 0
    for i in range(start, len(history)):
        m, where = history[i], f"history[{i}]"
        role = norm_role(m.get("role")) if isinstance(m, dict) else None
        if role is None:
            result.skip(f"{where}: not a message with a known role; skipped")
            continue
        if m.get("is_demo") is True:
            continue
        text = clean_text(content_text(m.get("content")))
        if role == "assistant":
            thought = _str(m.get("thought")) or text
            raw = m.get("tool_calls") if isinstance(m.get("tool_calls"), list) else []
            calls = [c for c in map(_call, raw) if c is not None]
            action = _str(m.get("action"))
            if not calls and not blank(action):
                calls = [ToolCall(name=_command_name(action), arguments=action, id=f"history-{i}")]
            for c in calls:
                names[c.id or ""] = c.name
            pending = [c.id or "" for c in calls]
            if not blank(thought) or calls:
                step += 1
                out.append(Message(role="assistant", text=thought, tool_calls=calls, meta={"step": step}))
            else:
                result.skip(f"{where}: empty assistant message; skipped")
        elif role in ("tool", "user"):
            ids = m.get("tool_call_ids")
            call_id = ids[0] if isinstance(ids, list) and ids and isinstance(ids[0], str) else None
            call_id = call_id or (pending.pop(0) if pending else None)
            out.append(Message(role="tool", tool_results=[ToolResult(text, call_id, names.get(call_id or ""))]))
        else:
            if not blank(text):
                out.append(Message(role=role, text=text))
    return out


def parse_swe_agent(data: Any, source: str | None = None) -> ParseResult:
    """A SWE-agent ``.traj`` -> Messages. ``data``: a path, bytes, JSON text or the loaded object.

    The history before the agent's first action (system prompt, the task) -> system/user Messages
    (demonstrations, ``is_demo``, are not archived). Then each ``trajectory`` step -> an assistant Message with
    the thought as text (the ``response`` when there is neither thought nor action) and the action as one
    ToolCall (name: the command's first word, arguments: the action verbatim, id ``step-<n>``), followed by a
    ``tool`` Message holding the observation verbatim as its ToolResult. Without a trajectory (history-only
    files) the rest of the history is read instead (``tool_calls``/``action``; tool and user observations as
    results). Every step's assistant Message carries ``meta["step"]`` (1-based), so ``chunk`` makes each step
    (thought/action -> observation) a turn of its own after the task's turn, and retrieval finds the step that
    mattered (ours; the paper does not specify). Non-object items and empty steps are skipped and
    counted. Raises TranscriptFormatError for non-JSON text, a top level that is not an object, ``history``/
    ``trajectory`` that are not lists (naming the field), or neither being present."""
    result = ParseResult(format="swe_agent")
    data = read_source(data, source)
    if isinstance(data, str):
        data, result.skipped, result.warnings = load_json(data, source)
    if not isinstance(data, dict):
        raise TranscriptFormatError(f"a .traj file is a JSON object, got a {type(data).__name__}", source=source)
    history, steps = data.get("history"), data.get("trajectory")
    for key, value in (("history", history), ("trajectory", steps)):
        if value is not None and not isinstance(value, list):
            raise TranscriptFormatError(f"expected a list, got a {type(value).__name__}", field=key, source=source)
    if history is None and steps is None:
        raise TranscriptFormatError("no 'history' or 'trajectory' list", field="trajectory", source=source)
    result.messages, start = _preamble(history or [], result)
    if steps:
        result.messages += _steps(steps, result)
    else:
        result.messages += _loop(history or [], start, result)
    return result
