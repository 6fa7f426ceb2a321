"""Codex CLI hooks (docs/codex.md): ``lantern hook codex`` reads the hook's JSON on stdin.

Hook input (openai/codex ``codex-rs/hooks/schema/generated/*.command.input.schema.json``): ``hook_event_name``,
``session_id``, ``transcript_path`` (the rollout JSONL; may be null), ``cwd``, ``model``; ``turn_id`` and ``trigger``
(manual, auto) on PreCompact / PostCompact; ``source`` (startup, resume, clear, compact) on SessionStart; ``prompt``
and ``turn_id`` on UserPromptSubmit. Output: only SessionStart and UserPromptSubmit may add context,
``{"hookSpecificOutput": {"hookEventName": E, "additionalContext": TEXT}}``; PreCompact, PostCompact and Stop print
nothing (their output schemas have no ``additionalContext``, and Codex rejects JSON it does not expect).

What each event does:

- ``PreCompact``, ``Stop``, ``PostCompact``: archive the rollout's new lines (``archive/parse/codex.py``), a chunk of
  at most ``ARCHIVE_CHUNK_BYTES`` per transaction, each chunk's byte offset kept per database in
  ``~/.lantern/codex/offsets.json`` once it commits (a rollout that shrank is read again from the start; a turn
  already archived is never stored twice). No output.
- ``SessionStart`` with ``source: compact`` (Codex queues it at the compaction and runs it before the next model
  request, openai/codex PR #21272): archive the new lines, read the rollout's last ``compacted`` record, and inject
  ``Lantern.recover_compaction``'s block: the summary is the record's ``message``; the live context is its
  ``replacement_history`` (the messages Codex kept) and every line after it. A remote compaction stores its summary
  encrypted (a ``compaction`` item with ``encrypted_content`` and an empty ``message``): the summary is then None and
  everything archived that is not live counts as lost. The recovery is recorded as a compaction event, its receipt
  (source ``codex``; reason ``compacted``, or ``compacted_encrypted``; the latency; why nothing was injected).

- ``UserPromptSubmit`` (input: ``prompt``, ``turn_id``, ``transcript_path``; its output schema takes
  ``additionalContext``, added to the model's context for that turn): once the rollout holds a compaction, every
  prompt is a candidate, as for Claude Code (``claude_code.prompt_recovery``): recover with the prompt as query in
  this session, excluding what is live after the last compaction; the injection decision gives the full block, a
  short one or nothing. Cheap checks first: a prompt with no word, a missing database or a rollout never compacted
  costs no model load and no database access. An injected block is recorded as an event (reason
  ``back_reference`` or ``prompt``); an empty or shortened one writes its reason and figures to the log.

The block is held below Codex's hook output cap (``OUTPUT_CAP_BYTES``). Session id = Codex's ``session_id``; scope
user ``$LANTERN_USER``. A hook never breaks the user's session: any internal error exits 0 with nothing on stdout
and one line (time, event, error type, where; never text) in ``~/.lantern/logs/codex.log``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lantern.config import is_server_url
from lantern.integrations.claude_code import (
    _WORD,
    ARCHIVE_CHUNK_BYTES,
    ARCHIVE_TIME_BUDGET_S,
    HookContext,
    Offset,
    Offsets,
    TranscriptSkipped,
    _lost,
    _open,
    _why,
    bounded_run,
    fit_output,
    hooks_unsupported,
    injected_already,
    lantern_home,
    log_error,
    log_line,
    mark_injected,
    once_only,
    prompt_recovery,
    read_transcript,
    record_empty,
    record_failure,
)

HOST = "codex"
ARCHIVE_EVENTS = ("PreCompact", "Stop", "PostCompact")
# codex-rs/hooks/src/output_spill.rs: hook text over HOOK_OUTPUT_TOKEN_LIMIT = 2,500 approximate tokens (4 bytes
# each: codex-utils approx_token_count) is written to a file and only a preview reaches the model; ours: 1,000 bytes
# below that
OUTPUT_CAP_BYTES = 9_000
_COMPACTED = (b'"type":"compacted"', b'"type": "compacted"')  # serde_json writes the first, json.dumps the second


def offsets_path() -> Path:
    return lantern_home() / "codex" / "offsets.json"


def _payload(stdin_text: str) -> dict[str, Any]:
    payload = json.loads(stdin_text)
    if not isinstance(payload, dict):
        raise ValueError("hook input is not a JSON object")
    for key in ("hook_event_name", "session_id"):
        if not isinstance(payload.get(key), str) or not payload[key]:
            raise ValueError(f"hook input field {key!r} missing")
    return payload


def _parse(data: bytes, source: str, strict: bool) -> list:
    """The messages of whole rollout lines ``data``. With ``strict`` (a read from the file's start), a text holding
    no Codex record at all raises TranscriptFormatError: the file is not a rollout."""
    from lantern.archive.parse.codex import parse_codex
    from lantern.errors import TranscriptFormatError

    if not data.strip():
        return []
    result = parse_codex(data.decode("utf-8", errors="replace"), source=source)
    if strict and not result.messages and not any(_is_rollout_line(line) for line in data.splitlines()[:50]):
        raise TranscriptFormatError("no Codex rollout record in the first lines", source=source)
    return result.messages


def _is_rollout_line(line: bytes) -> bool:
    from lantern.archive.parse.codex import is_codex_record
    from lantern.archive.parse.jsonl import loads

    try:
        return is_codex_record(loads(line))
    except (ValueError, RecursionError):
        return False


def archive_new(ctx: HookContext, session: str, rollout: Path, lantern: Any = None, event: str = "") -> int:
    """Archive the rollout's lines after the stored offset: whole lines only (a line still being written waits for
    the next hook), at most ``ARCHIVE_CHUNK_BYTES`` per transaction, each chunk's offset moved after its commit; a
    hook past ``ARCHIVE_TIME_BUDGET_S`` leaves the rest to the next hooks. ``lantern``: an open handle, or None to
    open (and create) ``ctx.db`` only when there is something to archive. Returns the turns added. Raises
    TranscriptSkipped, TranscriptFormatError (a first read that finds no rollout), OSError."""
    deadline = time.monotonic() + ARCHIVE_TIME_BUDGET_S
    start = ctx.offsets.get(ctx.db, rollout, ctx.user)
    added = 0
    with contextlib.ExitStack() as stack:
        while True:
            data, size = read_transcript(rollout, start.offset, ARCHIVE_CHUNK_BYTES)
            if size < start.offset:  # the file shrank: read_transcript read it from its start
                start = Offset()
            more = start.offset + len(data) < size
            end = data.rfind(b"\n") + 1
            if more and end == 0:  # one line longer than a chunk: read it whole
                data, size = read_transcript(rollout, start.offset)
                more, end = False, data.rfind(b"\n") + 1
            if end == 0:
                return added
            messages = _parse(data[:end], rollout.name, strict=start.offset == 0)
            if messages:
                if lantern is None:
                    lantern = stack.enter_context(_open(ctx))
                added += lantern.archive(messages, session=session, text_first=ctx.text_first).added
            start = Offset(start.offset + end, start.line + data.count(b"\n", 0, end))
            ctx.offsets.set(ctx.db, rollout, start, ctx.user)
            if not more:
                return added
            if time.monotonic() > deadline:
                log_line(
                    event, f"rollout backlog: archived up to byte {start.offset}, the rest in the next hooks", HOST
                )
                return added


@dataclass
class Compacted:
    """The rollout's last compaction: its ``summary`` (None when Codex stored it encrypted), the ``live``
    messages after it (the replacement history Codex kept, then every later line) and ``at``, the byte offset of
    its ``compacted`` line, which names it (the rollout only grows)."""

    summary: str | None
    live: list
    at: int = 0


def read_last_compaction(rollout: Path) -> Compacted | None:
    """The last ``compacted`` record of the rollout and what is live after it; None when there is none."""
    from lantern.archive.parse.codex import CodexItems
    from lantern.archive.parse.jsonl import ParseResult, loads

    data, _ = read_transcript(rollout)
    at = len(data)
    while True:
        at = max(data.rfind(m, 0, at) for m in _COMPACTED)
        if at < 0:
            return None
        begin = data.rfind(b"\n", 0, at) + 1
        stop = data.find(b"\n", at)
        stop = len(data) if stop < 0 else stop
        try:
            rec = loads(data[begin:stop])
        except (ValueError, RecursionError):
            rec = None
        payload = rec.get("payload") if isinstance(rec, dict) and rec.get("type") == "compacted" else None
        if isinstance(payload, dict):
            break
        at = begin  # the marker was inside another record's text: look further back
    message = payload.get("message")
    summary = message.strip() if isinstance(message, str) and message.strip() else None
    kept = ParseResult(format="codex")
    items = CodexItems(rollout.name)
    history = payload.get("replacement_history")
    for i, item in enumerate(history if isinstance(history, list) else []):
        if isinstance(item, dict):
            items.feed(f"replacement item {i + 1}", {"type": "response_item", "payload": item}, kept)
    after = _parse(data[stop + 1 :], rollout.name, strict=False) if stop + 1 < len(data) else []
    return Compacted(summary, kept.messages + after, begin)


def recover_after_compaction(lantern: Any, ctx: HookContext, session: str, rollout: Path):
    """The block for the rollout's last compaction (``Lantern.recover_compaction`` with its summary, None when
    encrypted, and its live messages), held to ``OUTPUT_CAP_BYTES`` (``fit_output``) and recorded as a compaction
    event (source ``codex``). None when the rollout shows no compaction (a ``no_compaction`` receipt is recorded)."""
    started = time.perf_counter()
    compacted = read_last_compaction(rollout)
    reason = "compacted" if compacted is None or compacted.summary is not None else "compacted_encrypted"
    if compacted is None:
        record_empty(lantern, session, reason, "no_compaction", HOST, ctx.budget)
        return None
    if injected_already(ctx, rollout, compacted.at):
        return once_only(lantern, ctx, compacted.at)

    def run(budget: int):
        return lantern.recover_compaction(compacted.summary, live=compacted.live, session=session, budget=budget)

    recovery, empty = fit_output(run, ctx.budget, _bytes, OUTPUT_CAP_BYTES)
    recorded = lantern.record_compaction(
        recovery,
        session=session,
        reason=reason,
        lost=_lost(lantern, session, compacted.live),
        source=HOST,
        latency_ms=1000 * (time.perf_counter() - started),
        empty_reason=empty,
    )
    mark_injected(ctx, rollout, compacted.at, recorded)
    return recovery


def handle(payload: dict[str, Any], ctx: HookContext) -> dict[str, Any] | None:
    """Run one hook event; returns the JSON to print, or None to print nothing. Raises on internal errors."""
    event = payload["hook_event_name"]
    session = payload["session_id"]
    path = payload.get("transcript_path")
    if not isinstance(path, str) or not path:  # Codex sends null when the session keeps no rollout (ephemeral)
        if event == "SessionStart" and payload.get("source") == "compact":
            log_line(event, "no transcript_path: nothing to recover from", HOST)
        return None
    rollout = Path(path).expanduser()
    if event in ARCHIVE_EVENTS:
        archive_new(ctx, session, rollout, event=event)
        return None
    if event == "SessionStart" and payload.get("source") == "compact":
        ctx.text_first = ctx.opener is None  # in-process: no model loaded, as claude_code.handle's SessionStart
        with _open(ctx) as lantern:
            archive_new(ctx, session, rollout, lantern, event)
            rec = recover_after_compaction(lantern, ctx, session, rollout)
        if rec is not None and rec.reason:
            log_line(event, _why(rec), HOST)
        if rec is None or not rec.text:
            return None
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": rec.text}}
    if event == "UserPromptSubmit":
        prompt = payload.get("prompt")
        if not isinstance(prompt, str) or not _WORD.search(prompt) or not ctx.db.exists():
            return None  # cheap checks first: no model load, no database access
        started = time.perf_counter()
        compacted = read_last_compaction(rollout)
        if compacted is None:
            return None  # never compacted: everything the prompt refers to is still in Codex's context
        ctx.text_first = ctx.no_model and ctx.opener is None  # as claude_code.handle's prompt
        with _open(ctx) as lantern:
            archive_new(ctx, session, rollout, lantern, event)
            rec = prompt_recovery(lantern, ctx, session, prompt, compacted.live, _bytes, OUTPUT_CAP_BYTES, started)
        if rec.reason:
            log_line(event, _why(rec), HOST)
        if not rec.text:
            return None
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": rec.text}}
    return None


def _bytes(text: str) -> int:
    """Codex's measure of hook text against its cap: UTF-8 bytes (``OUTPUT_CAP_BYTES``)."""
    return len(text.encode("utf-8"))


def run(
    stdin_text: str,
    db: str | os.PathLike[str] | None = None,
    offsets: Offsets | None = None,
    rewound: str | None = None,
    opener: Any = None,
    no_model: bool = False,
) -> str:
    """The whole hook: parse ``stdin_text``, handle the event, return what to print on stdout ("" for nothing).
    ``rewound`` is not used (a rollout has no branches; the daemon passes it to every host); ``opener``,
    ``no_model``: ``HookContext``'s (the warm daemon's open handle; a prompt answered with no model).
    Never raises: an internal error returns "", is logged (``~/.lantern/logs/codex.log``) and, at a
    SessionStart(compact), leaves an ``error`` receipt."""
    event, payload, ctx = "", None, None
    try:
        from lantern.config import default_db_path

        payload = _payload(stdin_text)
        event = payload["hook_event_name"]
        location = db if db is not None else default_db_path()
        if is_server_url(location):
            log_line(event, f"skipped: {hooks_unsupported(HOST)}", HOST)
            return ""
        ctx = HookContext(
            db=Path(location),
            offsets=offsets or Offsets(offsets_path()),
            user=os.environ.get("LANTERN_USER") or None,
            host=HOST,
            opener=opener,
            no_model=no_model,
        )
        with contextlib.redirect_stdout(io.StringIO()):  # stdout is Codex's: only our JSON goes there
            out = handle(payload, ctx)
        return json.dumps(out, ensure_ascii=False) if out else ""
    except TranscriptSkipped as e:
        log_line(event, f"skipped: {e}", HOST)
        return ""
    except BaseException as e:  # noqa: BLE001 - a hook must never break the user's session
        if isinstance(e, KeyboardInterrupt):
            return ""
        log_error(event, e, HOST)
        if payload is not None and ctx is not None:
            record_failure(payload, ctx, "compacted")
        return ""


def main(db: str | os.PathLike[str] | None = None, text: str | None = None, no_model: bool = False) -> int:
    """Entry point of ``lantern hook codex``, in-process: stdin (or ``text``, already read) -> stdout, exit code 0
    always. ``no_model``: as ``claude_code.main``'s."""
    if text is None:
        try:
            text = sys.stdin.read()
        except BaseException as e:  # noqa: BLE001
            log_error("", e, HOST)
            return 0
    out = bounded_run(run, text, db, no_model=no_model)
    if out:
        sys.stdout.write(out + "\n")
        sys.stdout.flush()
    return 0
