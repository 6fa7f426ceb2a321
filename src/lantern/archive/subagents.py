"""Claude Code subagent transcripts: where a session's subagent (Task tool) conversations are on disk, and how their
messages are named in the store (used by ``lantern hook claude-code`` and ``Lantern.ingest``).

The layout (Claude Code 2.1.2 and later; checked against public readers of the format, Anthropic publishes no
schema)::

    ~/.claude/projects/<project>/<session-id>.jsonl                        the session transcript
    ~/.claude/projects/<project>/<session-id>/subagents/agent-<id>.jsonl   one subagent's conversation
    ~/.claude/projects/<project>/<session-id>/subagents/agent-<id>.meta.json   {"agentType", "description", ...}

Workflow runs (Claude Code's ``Workflow`` tool, which starts several agents from one script) put their agents one or
more folders deeper, beside a run journal::

    ~/.claude/projects/<project>/<session-id>/subagents/workflows/<run-id>/agent-<id>.jsonl
    ~/.claude/projects/<project>/<session-id>/subagents/workflows/<run-id>/journal.jsonl    (not a transcript)

so every ``agent-<id>.jsonl`` under ``subagents/`` is read, down to MAX_DEPTH folders below it (directly inside
first, then deeper, each level sorted by path); symlinked folders are not followed (a loop cannot trap the walk).

Each subagent file holds records of the session transcript's shape with ``"isSidechain": true``, ``"agentId":
"<id>"`` and the parent's ``sessionId``. Before 2.1.2 the same ``agent-<id>.jsonl`` files lay flat in the project
directory beside every session's transcript, told apart only by their records' ``sessionId``.
``agent-acompact-<id>.jsonl`` is Claude Code's own compaction agent: it re-reads the whole conversation to write
the summary, so it holds nothing the session transcript does not; it is skipped.

Naming (ours, the same as an inline sidechain in ``parse/claude_code.py``): every message of ``agent-<id>.jsonl``
belongs to the sub-session ``sidechain-<id>``, stored as ``<session>/sidechain-<id>``, whatever its records say.
Only regular files are listed (a FIFO, a device, a directory named like one is skipped).
"""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

from lantern import lazy_re
from lantern.model import Message

__all__ = ["agent_id", "as_sidechain", "parent_session", "sidechain_name", "subagent_files"]

COMPACTION_AGENT_PREFIX = "acompact-"  # agent-acompact-<id>.jsonl: Claude Code's compaction agent, skipped
_NAME = lazy_re.compile(r"^agent-(?P<id>[^/\\]+)\.jsonl$")
_HEAD_BYTES = 65536  # bytes read of a legacy flat file to find its first record's sessionId (ours)
MAX_DEPTH = 4  # folders below subagents/ searched for agent files (workflows/<run-id>/ is 2; ours)


def agent_id(path: str | os.PathLike[str]) -> str | None:
    """The agent id of a subagent transcript file name ``agent-<id>.jsonl`` (``"a91f3c"``); None for any other
    name and for the compaction agent ``agent-acompact-<id>.jsonl``."""
    m = _NAME.match(Path(path).name)
    if m is None or m.group("id").startswith(COMPACTION_AGENT_PREFIX):
        return None
    return m.group("id")


def sidechain_name(agent: str) -> str:
    """The sub-session name of a subagent: ``sidechain-<agent id>`` (as an inline sidechain record's)."""
    return f"sidechain-{agent}"


def parent_session(path: str | os.PathLike[str]) -> str | None:
    """The parent session id of a file at ``<session-id>/subagents/[<folder>/...]agent-<id>.jsonl`` (at most
    MAX_DEPTH folders between ``subagents`` and the file); None for any other path."""
    p = Path(path)
    if agent_id(p) is None:
        return None
    for folder in list(p.parents)[: MAX_DEPTH + 1]:
        if folder.name == "subagents":
            return folder.parent.name or None
    return None


def as_sidechain(messages: list[Message], agent: str) -> list[Message]:
    """``messages`` of subagent ``agent``'s file, each put in the sub-session ``sidechain-<agent>`` (new objects;
    the input is not changed)."""
    name = sidechain_name(agent)
    return [replace(m, session=name) for m in messages]


def _regular_files(folder: Path) -> list[tuple[str, Path]]:
    """``(agent id, path)`` of the regular ``agent-<id>.jsonl`` files directly in ``folder``, sorted by name."""
    found = []
    try:
        with os.scandir(folder) as it:
            for entry in it:
                aid = agent_id(entry.name)
                if aid is None:
                    continue
                try:
                    if entry.is_file():  # follows a symlink; a FIFO, a device or a directory is not a file
                        found.append((aid, Path(entry.path)))
                except OSError:
                    continue
    except OSError:  # missing, not a folder, unreadable, a symlink loop (ELOOP): no subagent files
        return []
    return sorted(found, key=lambda f: f[1].name)


def _nested_files(subagents: Path) -> list[tuple[str, Path]]:
    """``(agent id, path)`` of the regular ``agent-<id>.jsonl`` files in ``subagents`` and its folders down to
    MAX_DEPTH, shallower first, each level sorted by path. Symlinked folders are not entered; unreadable ones are
    skipped."""
    found = [(0, "", aid, p) for aid, p in _regular_files(subagents)]
    for root, dirs, _ in os.walk(subagents, onerror=lambda e: None):  # followlinks=False: no loop through a link
        here = Path(root)
        depth = len(here.relative_to(subagents).parts)
        if depth >= MAX_DEPTH:
            dirs[:] = []
        for name in sorted(dirs):
            if os.path.islink(here / name):
                continue
            found += [(depth + 1, str(p.relative_to(subagents)), aid, p) for aid, p in _regular_files(here / name)]
    found.sort(key=lambda f: (f[0], f[1]))
    return [(aid, p) for _, _, aid, p in found]


def _first_record_session(path: Path) -> str | None:
    """The ``sessionId`` written in the first ``_HEAD_BYTES`` of ``path`` (its first record carries it), read
    without blocking from a regular file only; None when absent or unreadable."""
    from lantern.archive.parse.jsonl import loads

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        head = os.read(fd, _HEAD_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    for raw in head.split(b"\n")[:-1] or [head]:
        try:
            rec = loads(raw)
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("sessionId"), str):
            return rec["sessionId"]
    return None


def subagent_files(transcript: str | os.PathLike[str], session: str | None = None) -> list[tuple[str, Path]]:
    """``(agent id, path)`` of the subagent transcripts of the session whose transcript is ``transcript``
    (``<dir>/<session-id>.jsonl``): the regular files ``<dir>/<session-id>/subagents/agent-<id>.jsonl`` and those
    in its folders (workflow runs: ``subagents/workflows/<run-id>/agent-<id>.jsonl``; ``_nested_files``), then,
    for the layout before Claude Code 2.1.2, the flat ``<dir>/agent-<id>.jsonl`` whose first record's
    ``sessionId`` is ``session`` (only when ``session`` is given). The compaction agent is never listed; an
    absent folder gives []. Never raises for a missing or unreadable folder."""
    transcript = Path(transcript)
    nested = _nested_files(transcript.parent / transcript.stem / "subagents")
    if not session:
        return nested
    seen = {aid for aid, _ in nested}
    flat = [
        (aid, p)
        for aid, p in _regular_files(transcript.parent)
        if aid not in seen and p != transcript and _first_record_session(p) == session
    ]
    return nested + flat
