"""Claude Code hooks (docs/claude-code.md): ``lantern hook claude-code`` reads the hook's JSON on stdin.

Hook input fields used (Claude Code hooks reference; the same names as the Agent SDK's hook input types):
``hook_event_name``, ``session_id``, ``transcript_path``, ``cwd``; ``source`` (SessionStart: startup, resume,
clear, compact), ``trigger`` (PreCompact/PostCompact: manual, auto), ``prompt`` (UserPromptSubmit). Output, for the
two events that may add context: ``{"hookSpecificOutput": {"hookEventName": E, "additionalContext": TEXT}}``.

What each event does:

- ``PreCompact``, ``Stop``, ``PostCompact``, ``SessionEnd``: archive the transcript's new lines (incremental: the
  byte offset reached in each transcript is kept per database in ``~/.lantern/claude-code/offsets.json``, written
  only after the archive transaction commits; a file that shrank is read again from the start, and duplicates
  are never stored twice anyway). The session's subagent transcripts (``<session-id>/subagents/agent-<id>.jsonl``,
  archive/subagents.py) are archived the same way, into ``<session>/sidechain-<id>``, in the same transaction.
  No output. (PostCompact, in newer Claude Code versions, also carries
  ``compact_summary``, but it cannot add context, so the recovery happens at the SessionStart(compact) that follows;
  ``install`` registers only PreCompact, SessionStart(compact), UserPromptSubmit and Stop.)
- ``SessionStart`` with ``source: compact``: archive the new lines, read the last compact summary from the
  transcript, and recover what it lost: query = the last user message + the summary (first 2,000 characters),
  restricted to this session (and its sidechains), excluding the turns still live after the compaction. Prints the
  hook output with the recovered block as ``additionalContext``, and records the compaction as an event
  (``lantern events``; the prompt recovery below records one too).
- ``UserPromptSubmit``: once the transcript has been compacted, every prompt is a candidate: recover with the
  prompt as query (same scope and exclusion); the injection decision (recover/relevance.py) gives the full block,
  a short one or nothing, and says why. Cheap checks first: a prompt with no word, a missing database or a
  transcript never compacted costs no model load and no database access. An injected block is recorded as an
  event (reason ``back_reference`` when the prompt holds a back-reference cue, ``memory/triggers.py``, else
  ``prompt``); an empty or shortened one writes its reason and figures to the log.

Session id = Claude Code's ``session_id``; the record's ``cwd`` is kept in each entry's meta. Entries are archived
and recovered in the scope of user ``$LANTERN_USER`` (default ""). Only a regular file of at most 1 GiB is read as
the transcript (a FIFO, a device, a directory or a larger file is skipped with a log line). A hook never breaks
the user's session: any internal error exits 0 with nothing printed on stdout and one line (time, event, error
type, where; never message text) appended to ``~/.lantern/logs/claude-code.log``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import sys
import time
import traceback
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any

from lantern import lazy_re
from lantern.config import is_server_url
from lantern.errors import UnsupportedBackendError

ARCHIVE_EVENTS = ("PreCompact", "Stop", "PostCompact", "SessionEnd")
INJECT_EVENTS = ("SessionStart", "UserPromptSubmit")
# a compaction leaves a compact_boundary system record, then the summary (``isCompactSummary``) in the file
COMPACTION_MARKERS = (b'"compact_boundary"', b'"isCompactSummary":true', b'"isCompactSummary": true')
# Claude Code 2.1.89: a hook output over 50,000 characters is written to a file and only a preview reaches the
# model; ours: the whole JSON output is held 1,000 characters below that
OUTPUT_CAP_CHARS = 49_000
TIMEOUT_S = 30  # ours: the hooks' "timeout" lantern install writes; far above the measured p95 (Claude Code's is 60 s)
HOOK_DB_WAIT_S = TIMEOUT_S - 10  # ours: a hook's database waits, all together, end this long before the host kills it
HOST = "claude-code"  # names this host's log file, its events' source and its commands in messages
MAX_TRANSCRIPT_BYTES = 1 << 30  # ours: a transcript over 1 GiB is skipped (logged), never read into memory
# ours: a hook reads at most 8 MiB of new transcript per transaction, and starts no new 8 MiB once 15 s have gone
# (Claude Code kills a hook after its timeout, 60 s by default): a long session met for the first time is archived
# over several hooks, each keeping what it committed, instead of every hook redoing it all and being killed
ARCHIVE_CHUNK_BYTES = 8 << 20
ARCHIVE_TIME_BUDGET_S = 15.0

_WORD = lazy_re.compile(r"\w")  # a prompt without a word character asks nothing


class TranscriptSkipped(Exception):
    """The transcript is not something a hook reads: not a regular file (a FIFO, a device such as /dev/zero, a
    directory) or over ``MAX_TRANSCRIPT_BYTES``. ``run`` logs it (the reason only) and exits 0 with no output."""


def lantern_home() -> Path:
    return Path.home() / ".lantern"


# --------------------------------------------------------------------------------------- logging


def log_error(event: str, e: BaseException, host: str) -> None:
    """Append one line to ``~/.lantern/logs/<host>.log`` (0700 directory, 0600 file): UTC time, the event,
    the exception type and the innermost frame (file:line). Never the exception message: it may quote the
    transcript. Never raises."""
    try:
        frames = traceback.extract_tb(e.__traceback__)
        ours = [f for f in frames if f"{os.sep}lantern{os.sep}" in f.filename] or frames
        where = (
            ", ".join(
                f"{Path(f.filename).name}:{f.lineno}" for f in {id(x): x for x in (ours[-1], frames[-1])}.values()
            )
            if frames
            else "?"
        )
        log_line(event, f"{type(e).__name__} at {where}", host)
    except Exception:
        pass


def log_line(event: str, text: str, host: str) -> None:
    """Append ``UTC-time hook EVENT: text`` to ``~/.lantern/logs/<host>.log``. Never raises."""
    try:
        folder = lantern_home() / "logs"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(folder / f"{host}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            f.write(f"{stamp} hook {event or '?'}: {text}\n")
    except Exception:
        pass


# --------------------------------------------------------------------------------------- offsets


@dataclass
class Offset:
    """Where the last archive of a transcript stopped: byte ``offset`` (always after a newline), the 1-based
    ``line`` number found there, and ``leaf``, the uuid of the live branch's last record before it (a rewind shows
    as new lines whose chain does not go on from there: ``archive_new``)."""

    offset: int = 0
    line: int = 1
    leaf: str | None = None
    # the byte offset in the transcript of the last compaction whose block a SessionStart(compact) injected and
    # recorded (``injected_already``): a repeated SessionStart for it injects nothing again
    compaction: int | None = None


USER_KEY_PREFIX = "user-sha256:"  # a user's part of an offsets key: this prefix and a SHA-256 of the name (hex)


def user_key(user: str) -> str:
    """A user's part of an offsets key: ``USER_KEY_PREFIX`` and the first 32 hex digits of the name's SHA-256, so
    the file never holds a user name (``$LANTERN_USER``), which the store keeps redacted (a secret it holds never
    stored: archive/redact.py ``redact_name``) and this file needs only to tell apart."""
    import hashlib

    return USER_KEY_PREFIX + hashlib.sha256(user.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class Offsets:
    """The per-database, per-transcript ``Offset`` map in a small JSON file, written atomically (0600). Its keys
    hold no user name (``user_key``); a file an older Lantern wrote with names in clear is read as it is and
    rewritten without them at its next write (``_hashed``)."""

    def __init__(self, path: Path | None = None):
        self.path = path or lantern_home() / "claude-code" / "offsets.json"

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    @staticmethod
    def key(db: Path, transcript: Path, user: str | None = None) -> str:
        """Per database and transcript, and per user when one is set (each user archives into its own scope; the
        user as ``user_key``, never by name)."""
        return f"{db.resolve()}\n{transcript.resolve()}" + (f"\n{user_key(user)}" if user else "")

    @staticmethod
    def _legacy(db: Path, transcript: Path, user: str | None) -> str | None:
        """The key an older Lantern wrote for a user (the name in clear); None without a user."""
        return f"{db.resolve()}\n{transcript.resolve()}\n{user}" if user else None

    @staticmethod
    def _hashed(data: dict[str, Any]) -> dict[str, Any]:
        """``data`` with every key whose user part is a name in clear (an older Lantern's) under its ``user_key``
        form instead; a key of both forms keeps the newer value (the hashed one's)."""
        out: dict[str, Any] = {}
        for key, value in data.items():
            parts = key.split("\n", 2)
            if len(parts) == 3 and not parts[2].startswith(USER_KEY_PREFIX):
                out.setdefault(f"{parts[0]}\n{parts[1]}\n{user_key(parts[2])}", value)
            else:
                out[key] = value
        return out

    def get(self, db: Path, transcript: Path, user: str | None = None) -> Offset:
        """Where the last archive of ``transcript`` into ``db`` stopped; the start when ``db`` does not exist (it
        was deleted since: its turns are archived again, not only the lines added after)."""
        if not db.exists():
            return Offset()
        data = self._load()
        v = data.get(self.key(db, transcript, user))
        if v is None and user:  # written by an older Lantern, the name in clear
            v = data.get(self._legacy(db, transcript, user) or "")
        if isinstance(v, dict) and isinstance(v.get("offset"), int) and isinstance(v.get("line"), int):
            leaf = v["leaf"] if isinstance(v.get("leaf"), str) else None
            at = v.get("compaction")
            return Offset(
                v["offset"], v["line"], leaf, at if isinstance(at, int) and not isinstance(at, bool) else None
            )
        return Offset()

    def set(self, db: Path, transcript: Path, offset: Offset, user: str | None = None) -> None:
        self.set_many(db, [(transcript, offset)], user)

    def set_many(self, db: Path, moved: list[tuple[Path, Offset]], user: str | None = None) -> None:
        """Record the ``(transcript, Offset)`` pairs in one atomic rewrite of the file (a transcript's compaction
        mark, ``Offset.compaction``, is kept as it is unless the pair sets one)."""
        data = self._hashed(self._load())
        for transcript, offset in moved:
            key = self.key(db, transcript, user)
            old = data.get(key) if isinstance(data.get(key), dict) else {}
            at = offset.compaction if offset.compaction is not None else old.get("compaction")
            data[key] = (
                {"offset": offset.offset, "line": offset.line}
                | ({"leaf": offset.leaf} if offset.leaf else {})
                | ({"compaction": at} if isinstance(at, int) else {})
            )
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, self.path)


# --------------------------------------------------------------------------------------- transcript reads


def read_transcript(transcript: Path, offset: int = 0, max_bytes: int | None = None) -> tuple[bytes, int]:
    """``(bytes of transcript from byte offset on, file size)``, at most ``max_bytes`` of them; the whole file when
    it is shorter than ``offset`` (the caller compares the size with its offset). Only a regular file is read: it is
    opened
    non-blocking (a FIFO with no writer cannot hang the open) and checked on the open descriptor (``fstat``, so a
    file swapped after a check cannot slip through). Raises ``TranscriptSkipped`` for anything else or a file
    over ``MAX_TRANSCRIPT_BYTES``, OSError when it cannot be opened."""
    fd = os.open(transcript, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise TranscriptSkipped("transcript_path is not a regular file")
        if info.st_size > MAX_TRANSCRIPT_BYTES:
            raise TranscriptSkipped(f"transcript over {MAX_TRANSCRIPT_BYTES} bytes ({info.st_size})")
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        if offset > info.st_size:
            offset = 0
        f.seek(offset)
        want = info.st_size - offset
        return f.read(want if max_bytes is None else min(want, max_bytes)), info.st_size


def read_new_lines(transcript: Path, start: Offset):
    """The complete lines of ``transcript`` after ``start`` (a partly written last line waits for the next call),
    parsed -> ``(ClaudeCodeTranscript, Offset reached)``. A file shorter than ``start`` is read from the start.
    Raises ``TranscriptFormatError`` when a first read finds no Claude Code record, OSError when unreadable."""
    parsed, reached, _ = read_chunk(transcript, start)
    return parsed, reached


def read_chunk(transcript: Path, start: Offset, max_bytes: int | None = None, known: dict[str, str] | None = None):
    """``read_new_lines`` reading at most ``max_bytes`` (None: all): ``(ClaudeCodeTranscript, Offset reached,
    more)``. When the file goes on past them (``more``), the chunk ends before the last user prompt in it
    (``_turn_start``), so no turn is cut in two; a chunk holding no whole line is read to the file's end instead.
    The chunk's branches go on from ``start.leaf``; ``known``: the abandoned records of the whole file, when
    ``reconcile`` read it."""
    from lantern.archive.parse.claude_code import read_claude_code

    data, size = read_transcript(transcript, start.offset, max_bytes)
    if size < start.offset:  # the file shrank: read_transcript read it from its start
        start = Offset()
    more = start.offset + len(data) < size
    end = data.rfind(b"\n") + 1
    if more and end == 0:  # one line longer than max_bytes: read it whole
        data, size = read_transcript(transcript, start.offset)
        more, end = False, data.rfind(b"\n") + 1
    if more:  # stop before the chunk's last turn, which may go on past it
        end = _turn_start(data, end) or end
    data = data[:end]
    parsed = read_claude_code(
        data.decode("utf-8", errors="replace"),
        first_line=start.line,
        source=transcript.name,
        strict=start.offset == 0,
        continues=start.leaf,
        known=known,
    )
    return parsed, Offset(start.offset + end, start.line + data.count(b"\n"), parsed.leaf or start.leaf), more


def _turn_start(data: bytes, end: int) -> int:
    """The byte offset in ``data[:end]`` (whole lines) of the last line that is a user prompt record (``"type":
    "user"`` whose content is text, not tool results): where a new turn begins. 0 when there is none after the
    first line."""
    from lantern.archive.parse.jsonl import loads  # an integer longer than Python converts does not hide a prompt

    at = end
    while at > 0:
        begin = data.rfind(b"\n", 0, at - 1) + 1
        if begin == 0:
            return 0
        line = data[begin:at]
        if b'"user"' in line:
            try:
                rec = loads(line)
            except (ValueError, RecursionError):
                rec = None
            content = (
                rec.get("message", {}).get("content")
                if isinstance(rec, dict) and isinstance(rec.get("message"), dict)
                else None
            )
            if (
                rec is not None
                and rec.get("type") == "user"
                and (
                    isinstance(content, str)
                    or (
                        isinstance(content, list)
                        and not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
                    )
                )
            ):
                return begin
        at = begin
    return 0


def read_since_last_compaction(transcript: Path):
    """The transcript from its last compact boundary on, parsed (``summaries[-1]`` is that compaction's summary and
    ``messages`` after its position the live context; ``compaction_at``: the byte offset of that compaction's
    first line, which names it: the file only grows); None when the transcript was never compacted."""
    from lantern.archive.parse.claude_code import read_claude_code

    data, _ = read_transcript(transcript)
    at = max(data.rfind(m) for m in COMPACTION_MARKERS)
    if at < 0:
        return None
    start = data.rfind(b"\n", 0, at) + 1
    parsed = read_claude_code(
        data[start:].decode("utf-8", errors="replace"),
        first_line=data.count(b"\n", 0, start) + 1,
        source=transcript.name,
        strict=False,
    )
    parsed.compaction_at = start
    return parsed if parsed.summaries else None


# --------------------------------------------------------------------------------------- the hook


@dataclass
class HookContext:
    """Where a hook reads and writes: the database (``db``, default ``$LANTERN_DB`` or ``~/.lantern/lantern.db``),
    the offsets file, the character ``budget`` of an injected block, and the ``user`` whose scope every archive
    and recovery stays in (lantern/scope.py; default ``$LANTERN_USER``). ``host``: the agent (claude-code, codex),
    which names the log file and the events' source. ``text_first``: this hook loads no model: its archives store
    the turns without their vectors (``Lantern.archive(text_first=True)``) and its handle ranks with no query vector
    (``Config.without_models``); set for the events that answer in-process with no model: SessionStart(compact) run
    in-process, and a prompt when ``no_model`` (docs/daemon.md, "Cold start"). ``no_model``: no daemon answered and
    one is started after this answer (lantern/__main__.py), so a prompt is answered with no model (its receipt's
    source says so: ``<host>:text-first``); False (the daemon switched off, or in the daemon) answers it with the
    models."""

    db: Path
    offsets: Offsets
    budget: int | None = None  # characters of an injected block (None: the database's Config.budget)
    user: str | None = None  # the scope's user (``$LANTERN_USER``; None: the default user "")
    rewound: str = "skip"  # turns of a rewound branch: "skip" or "mark" (Config.rewound; lantern --rewound)
    # how the hook gets its Lantern handle: ctx -> a context manager yielding one (None: open ``db`` and close it
    # after; the warm daemon passes its open handle: integrations/daemon.py)
    opener: Any = None
    _: KW_ONLY
    host: str  # required: every message and log line names the host that ran
    text_first: bool = False
    no_model: bool = False


def _payload(stdin_text: str) -> dict[str, Any]:
    payload = json.loads(stdin_text)
    if not isinstance(payload, dict):
        raise ValueError("hook input is not a JSON object")
    for key in ("hook_event_name", "session_id", "transcript_path"):
        if not isinstance(payload.get(key), str) or not payload[key]:
            raise ValueError(f"hook input field {key!r} missing")
    return payload


def archive_new(ctx: HookContext, session: str, transcript: Path, lantern: Any = None, event: str = "") -> int:
    """Archive the lines not archived yet of the transcript and of its subagent transcripts
    (``archive/subagents.py``: ``<session-id>/subagents/agent-<id>.jsonl`` beside it, each into the sub-session
    ``<session>/sidechain-<id>``) in ONE transaction, then move each file's offset. A backlog of the main
    transcript longer than ``ARCHIVE_CHUNK_BYTES`` (a long session met for the first time) is archived a chunk per
    transaction, each chunk's offset kept as it commits, and a hook past ``ARCHIVE_TIME_BUDGET_S`` leaves the
    rest (and the subagents) to the next hooks. A subagent file that cannot
    be read (not a regular file, not Claude Code, unreadable) is skipped with a log line naming its agent id and
    read again next time; the main transcript's errors propagate. ``lantern``: an open handle, or None to open
    (and create) ``ctx.db`` only when there is something to archive. Returns the number of turns added."""
    deadline = time.monotonic() + ARCHIVE_TIME_BUDGET_S
    start = ctx.offsets.get(ctx.db, transcript, ctx.user)
    with _Handles() as stack:
        first = _read_checked(ctx, session, transcript, start, lantern, stack)
        if not first[2]:
            return _archive_rest(ctx, session, transcript, lantern or stack.lantern, event, start, first)
        lantern = lantern or stack.lantern or stack.enter_context(_open(ctx))  # one handle (one model load)
        added, (parsed, reached, more) = 0, first
        while more:  # one transaction per chunk, its offset kept, while the time lasts
            added += _archive(ctx, lantern, _messages(ctx, parsed), session)
            ctx.offsets.set_many(ctx.db, [(transcript, reached)], ctx.user)
            start = reached
            if time.monotonic() > deadline:
                done = f"transcript backlog: archived up to byte {reached.offset}, the rest in the next hooks"
                log_line(event, done, ctx.host)
                return added
            parsed, reached, more = _read_checked(ctx, session, transcript, start, lantern, stack)
        return added + _archive_rest(ctx, session, transcript, lantern, event, start, (parsed, reached, more))


class _Handles(contextlib.ExitStack):
    lantern: Any = None  # a handle ``_read_checked`` opened to reconcile, closed with the stack


def _messages(ctx: HookContext, parsed: Any) -> list:
    """The messages of a parsed slice to archive, abandoned branches dropped or kept as ``ctx.rewound`` says."""
    from lantern.archive.parse.claude_code import apply_rewound

    return apply_rewound(parsed.to_archive(), ctx.rewound)


def forked(parsed: Any, start: Offset) -> bool:
    """Whether new lines read from ``start`` show a rewind into what was archived before: their live chain does
    not go on from the leaf the offset recorded (it starts a new first record, or continues from another record,
    or the offset was written before leaves were kept)."""
    if start.offset == 0 or parsed.leaf is None:
        return False
    return parsed.rooted or (parsed.joins is not None and parsed.joins != start.leaf)


def _read_checked(ctx: HookContext, session: str, transcript: Path, start: Offset, lantern: Any, stack: Any):
    """``read_chunk`` from ``start``; when its lines show a rewind into the archived part (``forked``), the whole
    transcript is read once to know its branches, the archived turns of abandoned ones are taken off the session
    (``reconcile``), and the chunk is read again with the whole file's verdict."""
    chunk = read_chunk(transcript, start, ARCHIVE_CHUNK_BYTES)
    if not forked(chunk[0], start):
        return chunk
    if lantern is None:
        lantern = getattr(stack, "lantern", None)
        if lantern is None:
            lantern = stack.enter_context(_open(ctx))
            stack.lantern = lantern
    known = reconcile(ctx, lantern, session, transcript)
    return read_chunk(transcript, start, ARCHIVE_CHUNK_BYTES, known=known)


def reconcile(ctx: HookContext, lantern: Any, session: str, transcript: Path) -> dict[str, str]:
    """Read the whole transcript's branches and take the session's archived turns that lie on abandoned ones off
    its history (``Lantern.abandon``: deleted with ``rewound`` skip, moved to ``<session>/abandoned-<id>`` with
    mark). A turn is matched by the uuid of its first record (``Entry.meta["uuid"]``). Returns the abandoned
    records (uuid -> sub-session name)."""
    from lantern.archive.parse.claude_code import read_claude_code

    data, _ = read_transcript(transcript)
    whole = read_claude_code(data.decode("utf-8", errors="replace"), source=transcript.name, strict=False)
    gone = whole.abandoned
    if gone:
        stored = lantern.store.session_meta(lantern.scope.name(session), lantern.scope)
        hit = {i: gone[m["uuid"]] for i, m in stored if m.get("uuid") in gone}
        if hit:
            lantern.abandon(hit, keep=ctx.rewound == "mark")
    return gone


def _archive_rest(
    ctx: HookContext, session: str, transcript: Path, lantern: Any, event: str, start: Offset, chunk: tuple
) -> int:
    """The last chunk of the main transcript (``read_chunk``'s result from ``start``) and the new lines of every
    subagent transcript, in one transaction; then each file's offset moves. Returns the turns added."""
    from lantern.archive.subagents import as_sidechain, subagent_files
    from lantern.errors import TranscriptFormatError

    parsed, reached, _ = chunk
    messages = _messages(ctx, parsed)
    moved = [(transcript, start, reached)]
    for agent, path in subagent_files(transcript, session):
        begin = ctx.offsets.get(ctx.db, path, ctx.user)
        try:
            sub, end = read_new_lines(path, begin)
        except (TranscriptSkipped, TranscriptFormatError, OSError) as e:
            log_line(
                event,
                f"subagent {agent} skipped: {e if isinstance(e, TranscriptSkipped) else type(e).__name__}",
                ctx.host,
            )
            continue
        messages += as_sidechain(sub.to_archive(), agent)
        moved.append((path, begin, end))
    added = _archive(ctx, lantern, messages, session)
    changed = [(path, end) for path, begin, end in moved if end != begin]
    if changed:
        ctx.offsets.set_many(ctx.db, changed, ctx.user)
    return added


def _archive(ctx: HookContext, lantern: Any, messages: list, session: str) -> int:
    """Archive ``messages`` in one transaction (opening ``ctx.db`` when ``lantern`` is None); turns added."""
    if not messages:
        return 0
    if lantern is None:
        with _open(ctx) as own:
            return own.archive(messages, session=session, text_first=ctx.text_first).added
    return lantern.archive(messages, session=session, text_first=ctx.text_first).added


def _open(ctx: HookContext):
    if ctx.opener is not None:
        return ctx.opener(ctx)
    from lantern.api import Lantern
    from lantern.config import DEFAULT

    return Lantern(ctx.db, user=ctx.user, config=DEFAULT.without_models() if ctx.text_first else DEFAULT)


def recover_after_compaction(
    lantern: Any, ctx: HookContext, session: str, transcript: Path, question: str | None = None, record: bool = True
):
    """The ``Recovery`` for a compacted session: query = ``question`` if given (UserPromptSubmit: the injection
    decision applies, docs/architecture.md §3.6), else what the summary lost (``Lantern.recover_compaction``, never
    held back); excluding the live messages after the last compaction. None if never compacted. With ``record`` the
    recovery is stored as a compaction event (``Lantern.record_compaction``, source ``claude-code``; reason
    ``compact_boundary`` at SessionStart(compact); for a prompt ``back_reference`` when it holds a back-reference
    cue, else ``prompt``, and only when something was injected) whose lost turns are the session's archived entries
    not in the live messages: a receipt with the latency and why nothing was injected. The block fits the hook
    output cap (``fit_output``)."""
    started = time.perf_counter()
    parsed = read_since_last_compaction(transcript)
    if parsed is None:
        return None
    summary = parsed.summaries[-1]
    live = [m for m in parsed.messages[summary.position :] if not m.meta.get("abandoned")] + parsed.sidechain
    event = "SessionStart" if question is None else "UserPromptSubmit"

    def size(text: str) -> int:
        return len(_printed(_output(event, text)))

    if question is not None:  # a prompt after the compaction: the question's own recovery, under the decision
        return prompt_recovery(lantern, ctx, session, question, live, size, OUTPUT_CAP_CHARS, started, record)
    if record and injected_already(ctx, transcript, parsed.compaction_at):
        return once_only(lantern, ctx, parsed.compaction_at)

    def run(budget: int):  # SessionStart(compact): what the summary lost (recover/loss.py)
        return lantern.recover_compaction(summary.text, live=live, session=session, budget=budget)

    recovery, empty = fit_output(run, ctx.budget, size, OUTPUT_CAP_CHARS)
    if record:
        recorded = lantern.record_compaction(
            recovery,
            session=session,
            reason="compact_boundary",
            lost=_lost(lantern, session, live),
            source=ctx.host,
            latency_ms=1000 * (time.perf_counter() - started),
            empty_reason=empty,
        )
        mark_injected(ctx, transcript, parsed.compaction_at, recorded)
    return recovery


def injected_already(ctx: HookContext, transcript: Path, at: int) -> bool:
    """Whether the compaction at byte ``at`` of ``transcript`` had its block injected and recorded by an earlier
    SessionStart(compact) into ``ctx.db`` (the offsets file's mark, ``Offset.compaction``): the host fires
    SessionStart again for the same compaction (a resumed or repeated start), and one compaction is one injection
    and one event."""
    return ctx.offsets.get(ctx.db, transcript, ctx.user).compaction == at


def mark_injected(ctx: HookContext, transcript: Path, at: int, recorded: int | None) -> None:
    """Mark the compaction at byte ``at`` of ``transcript`` injected once its event is recorded (``recorded``: the
    event id; None, not recorded, leaves no mark: the same compaction is injected again rather than lost, which is
    how a daemon run whose client gave up, its write refused past the client's deadline, leaves the client's own
    run to inject it)."""
    if recorded is None:
        return
    start = ctx.offsets.get(ctx.db, transcript, ctx.user)
    ctx.offsets.set_many(ctx.db, [(transcript, Offset(start.offset, start.line, start.leaf, at))], ctx.user)


def once_only(lantern: Any, ctx: HookContext, at: int):
    """The empty ``Recovery`` of a SessionStart(compact) for a compaction injected already (``injected_already``):
    reason ``injected_already``, nothing printed and no second event."""
    from lantern.model import Recovery

    budget = lantern.config.budget if ctx.budget is None else ctx.budget
    return Recovery(
        query="",
        text="",
        entries=[],
        chars=0,
        budget=budget,
        reason="injected_already",
        detail=f"the compaction at byte {at:,} of the transcript was injected and recorded before",
    )


def prompt_recovery(
    lantern: Any,
    ctx: HookContext,
    session: str,
    question: str,
    live: list,
    size: Any,
    cap: int,
    started: float,
    record: bool = True,
):
    """The ``Recovery`` for a prompt submitted after a compaction, the same for every host: ``Lantern.recover`` with
    the prompt as query in ``session``, excluding the ``live`` messages (still in the agent's context), under the
    injection decision (recover/relevance.py: full block, short one or nothing, its ``reason``/``detail`` say why),
    held to the host's output cap (``fit_output`` with ``size``, ``cap``). With ``record``, a recovery that injected
    something or was dropped at the cap is stored as a compaction event (reason ``back_reference`` when the prompt
    holds a back-reference cue, memory/triggers.py, else ``prompt``; source ``ctx.host``; latency from
    ``started``, a ``time.perf_counter()`` value); one that injected nothing by the decision is not an event (the
    hook's log line says why)."""
    from lantern.memory.triggers import should_recover

    def run(budget: int):
        return lantern.recover(question, session=session, budget=budget, exclude=live)

    recovery, empty = fit_output(run, ctx.budget, size, cap)
    if record and (recovery.text or empty is not None):
        lantern.record_compaction(
            recovery,
            session=session,
            reason="back_reference" if should_recover(question) else "prompt",
            lost=_lost(lantern, session, live),
            source=f"{ctx.host}:text-first" if ctx.text_first else ctx.host,  # which path answered
            latency_ms=1000 * (time.perf_counter() - started),
            empty_reason=empty,
        )
    return recovery


def fit_output(run: Any, budget: int | None, size: Any, cap: int) -> tuple[Any, str | None]:
    """The recovery ``run(budget)`` returns (None: the database's ``Config.budget``), held to a host's output cap:
    when ``size(recovery.text)`` (the host's measure: characters, bytes) is over ``cap``, the recovery runs once more
    with its budget scaled down to fit (with a tenth to spare); when that is over too, its text is dropped. Returns
    ``(recovery, "host_cap")`` then, else ``(recovery, None)``."""
    recovery = run(budget)
    over = size(recovery.text) if recovery.text else 0
    if over <= cap:
        return recovery, None
    recovery = run(max(1, int(recovery.budget * cap / over * 0.9)))
    if recovery.text and size(recovery.text) > cap:
        recovery.text, recovery.chars, recovery.entries = "", 0, []
        return recovery, "host_cap"
    return recovery, None


def _lost(lantern: Any, session: str, live: list) -> list[int]:
    """The archived entries of ``session`` (not its sidechains) whose text is not in the ``live`` messages, in turn
    order: what the compaction dropped (compaction.py's presence test)."""
    from lantern.compaction import SessionArchive

    archive = SessionArchive(lantern.store, session, lantern.scope)
    present = archive.present_in(lantern.live_text(live)) if archive.ids else set()
    return [i for i in archive.order if i not in present]


def _why(rec: Any) -> str:
    """The log line of an empty or shortened recovery: its reason, the figures behind it, what was injected."""
    return f"{rec.reason}{f': {rec.detail}' if rec.detail else ''}; {rec.chars} characters injected"


def _printed(out: dict[str, Any]) -> str:
    """The hook's stdout for ``out``: what Claude Code measures against its output cap."""
    return json.dumps(out, ensure_ascii=False)


def _output(event: str, text: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def handle(payload: dict[str, Any], ctx: HookContext) -> dict[str, Any] | None:
    """Run one hook event; returns the JSON to print, or None to print nothing. Raises on internal errors
    (``run`` turns them into exit 0, a log line and an ``error`` receipt: ``record_failure``)."""
    event = payload["hook_event_name"]
    session = payload["session_id"]
    transcript = Path(payload["transcript_path"]).expanduser()
    if event in ARCHIVE_EVENTS:
        archive_new(ctx, session, transcript, event=event)
        return None
    if event == "SessionStart":
        if payload.get("source") != "compact":
            return None
        # in-process (no warm daemon): archive text-first and answer with what the summary lost, which reads no
        # vector, so no model and no numpy is loaded; the vectors are filled by the daemon the hook started, or by
        # the next process that loads the models (docs/daemon.md, "Cold start")
        ctx.text_first = ctx.opener is None
        with _open(ctx) as lantern:
            archive_new(ctx, session, transcript, lantern, event)
            rec = recover_after_compaction(lantern, ctx, session, transcript)
            if rec is None:  # a SessionStart(compact) whose transcript shows no compaction
                record_empty(lantern, session, "compact_boundary", "no_compaction", ctx.host, ctx.budget)
        if rec is not None and rec.reason:
            log_line(event, _why(rec), ctx.host)
        return _output(event, rec.text) if rec is not None and rec.text else None
    if event == "UserPromptSubmit":
        prompt = payload.get("prompt")
        if not isinstance(prompt, str) or not _WORD.search(prompt) or not ctx.db.exists():
            return None
        if read_since_last_compaction(transcript) is None:
            return None  # never compacted: everything the prompt refers to is still in Claude's context
        ctx.text_first = ctx.no_model and ctx.opener is None  # cold: no model, the daemon starts after the answer
        with _open(ctx) as lantern:
            archive_new(ctx, session, transcript, lantern, event)
            rec = recover_after_compaction(lantern, ctx, session, transcript, question=prompt)
        if rec is not None and rec.reason:
            log_line(event, _why(rec), ctx.host)
        return _output(event, rec.text) if rec is not None and rec.text else None
    return None


def record_empty(lantern: Any, session: str, reason: str, why: str, source: str, budget: int | None) -> None:
    """Record a receipt of a hook run that injected nothing before any recovery ran (``why``: no_compaction,
    error): an event with no lost entries and an empty block of ``budget`` characters (None: ``Config.budget``)."""
    from lantern.model import Recovery

    budget = lantern.config.budget if budget is None else budget
    empty = Recovery(query="", text="", entries=[], chars=0, budget=budget)
    lantern.record_compaction(empty, session=session, reason=reason, lost=[], source=source, empty_reason=why)


def record_failure(payload: dict[str, Any], ctx: HookContext, reason: str) -> None:
    """The ``error`` receipt of an injecting hook run that failed (SessionStart(compact)): recorded when the
    database exists and opens; never raises (the failure is logged already)."""
    try:
        if payload.get("hook_event_name") != "SessionStart" or payload.get("source") != "compact":
            return
        if not ctx.db.exists():
            return
        with _open(ctx) as lantern:
            record_empty(lantern, payload["session_id"], reason, "error", ctx.host, ctx.budget)
    except BaseException:  # noqa: BLE001 - a receipt must never break the user's session
        pass


def run(
    stdin_text: str,
    db: str | os.PathLike[str] | None = None,
    offsets: Offsets | None = None,
    rewound: str | None = None,
    opener: Any = None,
    no_model: bool = False,
) -> str:
    """The whole hook: parse ``stdin_text``, handle the event, return what to print on stdout ("" for nothing).
    ``rewound``: "skip" (default) or "mark", what becomes of the turns of a rewound branch (``Config.rewound``);
    ``opener``, ``no_model``: ``HookContext``'s. Never raises: an internal error returns "" and is logged
    (``log_error``)."""
    event, payload, ctx = "", None, None
    try:
        from lantern.config import default_db_path

        payload = _payload(stdin_text)
        event = payload["hook_event_name"]
        location = db if db is not None else default_db_path()
        if is_server_url(location):  # the hooks' offsets and checks are per SQLite file (HookContext.db is a path)
            log_line(event, f"skipped: {hooks_unsupported(HOST)}", HOST)
            return ""
        ctx = HookContext(
            db=Path(location),
            offsets=offsets or Offsets(),
            user=os.environ.get("LANTERN_USER") or None,
            rewound=rewound or "skip",
            opener=opener,
            host=HOST,
            no_model=no_model,
        )
        with contextlib.redirect_stdout(io.StringIO()):  # stdout is Claude Code's: only our JSON goes there
            out = handle(payload, ctx)
        return _printed(out) if out else ""
    except TranscriptSkipped as e:
        log_line(event, f"skipped: {e}", HOST)
        return ""
    except BaseException as e:  # noqa: BLE001 - a hook must never break the user's session
        if isinstance(e, KeyboardInterrupt):
            return ""
        log_error(event, e, HOST)
        if payload is not None and ctx is not None:
            record_failure(payload, ctx, "compact_boundary")
        return ""


def bounded_run(run_hook: Any, *args: Any, **kwargs: Any) -> str:
    """``run_hook(*args, **kwargs)`` (a host's ``run``) with all its database lock waits bounded together by
    ``HOOK_DB_WAIT_S`` (lantern/deadline.py ``lock_deadline``), below the ``timeout`` ``lantern install`` gives
    the host: a hook that cannot get the database in time gives up as on any internal error (nothing printed, a
    log line, its transaction rolled back whole) instead of being killed by the host."""
    from lantern.deadline import lock_deadline

    with lock_deadline(HOOK_DB_WAIT_S):
        return run_hook(*args, **kwargs)


def hooks_unsupported(host: str) -> UnsupportedBackendError:
    """The error of ``host``'s hooks (claude-code, codex) pointed at a PostgreSQL URL: they keep per-file offsets
    and check the file exists. It names that host's commands."""
    return UnsupportedBackendError(
        f"lantern hook {host}", "postgresql", f"point the hooks at a SQLite file (lantern install {host} --db FILE)"
    )


def main(
    db: str | os.PathLike[str] | None = None,
    rewound: str | None = None,
    text: str | None = None,
    no_model: bool = False,
) -> int:
    """Entry point of ``lantern hook claude-code``, in-process: stdin (or ``text``, already read) -> stdout, exit
    code 0 always. ``no_model``: ``HookContext.no_model`` (lantern/__main__.py sets it when no daemon answered and
    one starts after this answer)."""
    if text is None:
        try:
            text = sys.stdin.read()
        except BaseException as e:  # noqa: BLE001
            log_error("", e, HOST)
            return 0
    out = bounded_run(run, text, db, rewound=rewound, no_model=no_model)
    if out:
        sys.stdout.write(out + "\n")
        sys.stdout.flush()
    return 0
