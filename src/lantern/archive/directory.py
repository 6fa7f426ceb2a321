"""Ingesting a directory of transcripts (``Lantern.ingest(DIR)``, ``lantern ingest DIR``). Ours.

The walk (``walk``) lists every regular file under the directory, recursively, in sorted order (each folder's files
by name, then its subfolders by name, depth first). Symlinks are followed, but each folder and each file is read
once: a folder reached again (a symlink loop, or a second link to it) is not entered again, a file reached again
(a hard link, or a symlink to a file already listed) is not read again. FIFOs, devices, sockets and broken links
are not regular files: they are skipped with their reason and never opened. Version-control and dependency folders
(``SKIPPED_FOLDERS``: ``.git``, ``node_modules``, ``__pycache__`` ..., and any folder holding ``pyvenv.cfg``, a
Python virtual environment) are not entered: each is listed once as skipped, with its reason; given as the
directory itself, such a folder is walked. A Claude Code session's own folder
(``<session-id>/`` beside ``<session-id>.jsonl``: its subagent transcripts, their ``.meta.json`` files, workflow
journals) is read with the session transcript (archive/subagents.py), not file by file.

Each file is then ingested as ``Lantern.ingest`` ingests one file — format auto-detected per file (or the forced
one), its own transactions of 256 turns, session by default the file's path under the folder without extension
(``repoA/.aider.chat.history``: same-named files of different folders stay apart; a file named by a session id,
as Claude Code's ``<uuid>.jsonl``, and a subagent file keep that id, as the hooks name them), so ingesting a folder
twice, or again after an interruption, adds no duplicates. A file that
is not a transcript of any supported format (``TranscriptFormatError``) or holds no turn is skipped with its
reason; a file that cannot be read (``OSError``: permission, vanished) is a failure with its reason; the folder's
other files are ingested either way. Any other error (the database, Ctrl-C) stops the walk: the files ingested
before it stay committed.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lantern import lazy_re
from lantern.errors import TranscriptFormatError
from lantern.model import ArchiveResult
from lantern.text.names import file_name_text, given_name, plural
from lantern.text.terminal import shown

__all__ = ["DirectoryResult", "FileOutcome", "ingest_directory", "summary_lines", "walk"]


@dataclass
class FileOutcome:
    """One file of a directory ingest: ``path`` (under the directory), ``result`` when it was ingested (at least one
    turn, new or already archived), else ``reason`` why it was skipped or failed."""

    path: Path
    result: ArchiveResult | None = None
    reason: str = ""


@dataclass
class DirectoryResult:
    """What ``Lantern.ingest(DIR)`` did. ``ingested``: files with turns, in walk order; ``skipped``: files that are
    not transcripts, hold no turn, or are not regular files (each with its reason); ``failed``: files that could
    not be read (each with its reason). ``added`` / ``duplicates`` / ``skipped_items`` / ``warnings`` sum the
    ingested files' ``ArchiveResult``."""

    root: Path
    ingested: list[FileOutcome] = field(default_factory=list)
    skipped: list[FileOutcome] = field(default_factory=list)
    failed: list[FileOutcome] = field(default_factory=list)

    @property
    def added(self) -> int:
        return sum(f.result.added for f in self.ingested if f.result)

    @property
    def duplicates(self) -> int:
        return sum(f.result.duplicates for f in self.ingested if f.result)

    @property
    def skipped_items(self) -> int:
        return sum(f.result.skipped for f in self.ingested if f.result)

    @property
    def warnings(self) -> int:
        return sum(len(f.result.warnings) for f in self.ingested if f.result)

    def to_json(self) -> dict[str, Any]:
        def rel(p: Path) -> str:
            return str(_relative(p, self.root))

        return {
            "root": str(self.root),
            "added": self.added,
            "duplicates": self.duplicates,
            "ingested": [
                {
                    "path": rel(f.path),
                    "session": f.result.session,
                    "added": f.result.added,
                    "duplicates": f.result.duplicates,
                    "skipped": f.result.skipped,
                    "redacted": f.result.redacted,
                    "warnings": f.result.warnings,
                }
                for f in self.ingested
                if f.result
            ],
            "skipped": [{"path": rel(f.path), "reason": f.reason} for f in self.skipped],
            "failed": [{"path": rel(f.path), "reason": f.reason} for f in self.failed],
        }


# ---------------------------------------------------------------------------------------------- the walk
# folders a walk never enters below the root (ours): version control, dependencies, caches. Their files are
# repository objects or installed packages, never a user's transcript; a walk of a home folder or a repository
# spent its time listing them one by one as "not a transcript".
SKIPPED_FOLDERS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".bzr",
        "node_modules",
        "__pycache__",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".cache",
        ".npm",
        ".yarn",
        "bower_components",
    }
)
VENV_MARKER = "pyvenv.cfg"  # a folder holding it is a Python virtual environment (PEP 405)


def skipped_folder_reason(folder: Path) -> str:
    """Why ``walk`` does not enter ``folder`` (below its root), or "" when it does."""
    if folder.name in SKIPPED_FOLDERS:
        return (
            f"folder not walked: {folder.name} is a version-control, dependency or cache folder (give it as the "
            "directory to read it)"
        )
    if (folder / VENV_MARKER).is_file():
        return "folder not walked: a Python virtual environment (holds pyvenv.cfg; give it as the directory to read it)"
    return ""


def walk(root: str | os.PathLike[str]) -> tuple[list[Path], list[FileOutcome]]:
    """(regular files under ``root`` in sorted walk order, files and folders skipped with their reason). Never
    opens a file; never enters a folder twice (symlink loops end). Raises NotADirectoryError / OSError only for
    ``root`` itself."""
    root = Path(root)
    top = os.stat(root)
    if not stat.S_ISDIR(top.st_mode):
        raise NotADirectoryError(f"{root} is not a directory")
    files: list[Path] = []
    skipped: list[FileOutcome] = []
    seen_dirs: set[tuple[int, int]] = set()
    seen_files: dict[tuple[int, int], Path] = {}

    def visit(folder: Path, info: os.stat_result) -> None:
        if (info.st_dev, info.st_ino) in seen_dirs:
            skipped.append(FileOutcome(folder, reason="folder already read (a symlink loop or a second link to it)"))
            return
        seen_dirs.add((info.st_dev, info.st_ino))
        try:
            names = sorted(os.listdir(folder))
        except OSError as e:
            skipped.append(FileOutcome(folder, reason=f"folder not readable: {e.strerror or e}"))
            return
        subfolders: list[tuple[Path, os.stat_result]] = []
        for name in names:
            path = folder / name
            try:
                st = os.stat(path)  # follows symlinks
            except OSError as e:
                reason = (
                    "broken symlink or symlink loop" if os.path.islink(path) else f"not readable: {e.strerror or e}"
                )
                skipped.append(FileOutcome(path, reason=reason))
                continue
            if stat.S_ISDIR(st.st_mode):
                subfolders.append((path, st))
            elif not stat.S_ISREG(st.st_mode):
                skipped.append(FileOutcome(path, reason=f"not a regular file ({_kind(st.st_mode)})"))
            elif (st.st_dev, st.st_ino) in seen_files:
                skipped.append(
                    FileOutcome(path, reason=f"same file as {_relative(seen_files[st.st_dev, st.st_ino], root)}")
                )
            else:
                seen_files[st.st_dev, st.st_ino] = path
                files.append(path)
        for path, st in subfolders:
            reason = skipped_folder_reason(path)
            if reason:
                skipped.append(FileOutcome(path, reason=reason))
            else:
                visit(path, st)

    visit(root, top)
    return _claude_code_session_folders(files, skipped, root)


def _kind(mode: int) -> str:
    return (
        "FIFO"
        if stat.S_ISFIFO(mode)
        else "socket"
        if stat.S_ISSOCK(mode)
        else "device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "special file"
    )


def _claude_code_session_folders(
    files: list[Path], skipped: list[FileOutcome], root: Path
) -> tuple[list[Path], list[FileOutcome]]:
    """Files under ``<dir>/<session-id>/subagents/`` whose ``<dir>/<session-id>.jsonl`` is listed leave the list:
    the subagent transcripts the session's ingest reads (archive/subagents.py ``subagent_files``) are skipped as
    "read with its session transcript"; the others in that folder (deeper than ``subagents.MAX_DEPTH`` folders,
    under a symlinked folder, workflow journals, metadata) as not read, with that reason."""
    from lantern.archive.subagents import subagent_files

    listed = set(files)
    read: dict[Path, set[Path]] = {}
    kept: list[Path] = []
    for path in files:
        session_file = _session_transcript(path)
        if session_file is None or session_file not in listed:
            kept.append(path)
            continue
        if session_file not in read:
            read[session_file] = {p for _, p in subagent_files(session_file)}
        where = _relative(session_file, root)
        if path in read[session_file]:
            skipped.append(FileOutcome(path, reason=f"read with its session transcript {where}"))
        else:
            skipped.append(FileOutcome(path, reason=_unread_reason(path, where)))
    return kept, skipped


def _unread_reason(path: Path, where: str) -> str:
    """Why a file in a session transcript's folder was not read with it: Claude Code's compaction agent (its
    re-reading of the conversation, docs/claude-code.md), or not a subagent transcript where one is looked for."""
    from lantern.archive.subagents import COMPACTION_AGENT_PREFIX, MAX_DEPTH

    if path.name.startswith("agent-" + COMPACTION_AGENT_PREFIX):
        return (
            f"in the folder of session transcript {where}, not read: Claude Code's compaction agent (it re-reads "
            "the conversation to write its summary; archiving it would store every turn twice)"
        )
    return (
        f"in the folder of session transcript {where}, not read: not a subagent transcript, deeper than {MAX_DEPTH} "
        "folders under subagents/, or under a symlinked folder"
    )


def _session_transcript(path: Path) -> Path | None:
    """``<dir>/<session-id>.jsonl`` when ``path`` lies under ``<dir>/<session-id>/subagents/``, else None."""
    for folder in path.parents:
        if folder.name == "subagents" and folder.parent.name:
            return folder.parent.parent / f"{folder.parent.name}.jsonl"
    return None


def _relative(path: Path, root: Path) -> Path:
    try:
        return path.relative_to(root)
    except ValueError:
        return path


# ---------------------------------------------------------------------------------------------- the ingest
def ingest_directory(
    ingest_file: Callable[..., ArchiveResult],
    root: str | os.PathLike[str],
    session: str | None = None,
    *,
    format: str = "auto",
    progress: Callable[[int, int], None] | None = None,
) -> DirectoryResult:
    """Ingest every file ``walk`` lists with ``ingest_file(path, session, format=, progress=)`` (``Lantern.ingest``
    for one file, scope already bound). ``session``: None gives each file its own default session; a name gives
    ``<name>/<file's default>``. ``progress(done, total)`` in bytes of the listed files (the file being read counts
    by its share of turns done). Returns ``DirectoryResult``."""
    root = Path(root)
    files, skipped = walk(root)
    out = DirectoryResult(root=root, skipped=skipped)
    sizes = [_size(p) for p in files]
    total, before = sum(sizes), 0
    for path, size in zip(files, sizes):
        report = None
        if progress is not None:

            def report(done: int, estimate: int, _before=before, _size=size) -> None:
                progress(_before + (min(_size, _size * done // estimate) if estimate else 0), total)

        own = _default_session(path, root)
        name = f"{session}/{own}" if given_name(session) else (own if "/" in own else None)
        try:
            if path.exists() and not path.is_file():  # replaced by a folder (a FIFO ...) since the walk listed it
                raise OSError(21, "no longer a regular file", str(path))
            result = ingest_file(path, name, format=format, progress=report)
        except TranscriptFormatError as e:
            if isinstance(e.__cause__, OSError):  # the file could not be read: not a question of format
                out.failed.append(FileOutcome(path, reason=e.__cause__.strerror or type(e.__cause__).__name__))
            else:
                out.skipped.append(
                    FileOutcome(
                        path,
                        reason=(
                            f"not a transcript{'' if format == 'auto' else ' in --format ' + format}: "
                            f"{_without_source(e)}"
                        ),
                    )
                )
        except OSError as e:
            out.failed.append(FileOutcome(path, reason=f"{e.strerror or type(e).__name__}"))
        else:
            if result.added or result.duplicates:
                out.ingested.append(FileOutcome(path, result=result))
            else:
                items = (
                    f" ({result.skipped} item{'' if result.skipped == 1 else 's'} skipped)" if result.skipped else ""
                )
                out.skipped.append(FileOutcome(path, reason=f"no turns found{items}"))
        before += size
        if progress is not None:
            progress(before, total)
    out.skipped.sort(key=lambda f: _walk_key(f.path, root))  # walk order, whichever stage skipped them
    return out


def _walk_key(path: Path, root: Path) -> list[tuple[int, str]]:
    """Sorts paths as ``walk`` lists them: in each folder its files (by name) before its subfolders (by name)."""
    rel = _relative(path, root)
    return [(1, part) for part in rel.parent.parts] + [(0, rel.name)]


_SESSION_ID = lazy_re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)


def _default_session(path: Path, root: Path) -> str:
    """A file's session: its folders under ``root`` and its name without extension (``repoA/.aider.chat.history``),
    so same-named files of different folders (every repository's ``.aider.chat.history.md``) stay apart. A file
    named by a session id (a Claude Code ``<uuid>.jsonl``) and a subagent file (its parent session's id) keep the
    bare id, the session the Claude Code hooks archive it under."""
    from lantern.archive.subagents import parent_session

    parent = parent_session(path)
    if parent or _SESSION_ID.fullmatch(path.stem):
        return parent or path.stem
    return file_name_text("/".join((*_relative(path, root).parent.parts, path.stem)))


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _without_source(e: TranscriptFormatError) -> str:
    """The error's message without its leading file path (the summary names the file)."""
    text = str(e)
    if e.source:
        for sep in (", ", ": "):
            if text.startswith(str(e.source) + sep):
                return text[len(str(e.source)) + len(sep) :]
    return text


# ---------------------------------------------------------------------------------------------- the summary
MAX_LISTED = 100  # files listed per group in the text summary; --json lists all (ours)


def summary_lines(result: DirectoryResult) -> list[str]:
    """The text summary ``lantern ingest DIR`` prints: a count line, then each ingested file, then each skipped and
    failed file with its reason (paths relative to the directory; past MAX_LISTED per group, a count)."""
    lines = [
        f"{shown(result.root)}: {plural(len(result.ingested), 'file')} ingested ({plural(result.added, 'turn')} "
        "archived, "
        f"{result.duplicates} already archived), {len(result.skipped)} skipped, {len(result.failed)} failed"
    ]
    groups = (
        (
            "ingested",
            result.ingested,
            lambda f: (
                f"{f.result.added} new, {f.result.duplicates} already archived, session {shown(f.result.session)}"
                + (f", {plural(f.result.skipped, 'item')} skipped" if f.result.skipped else "")
            ),
        ),
        ("skipped", result.skipped, lambda f: f.reason),
        ("failed", result.failed, lambda f: f.reason),
    )
    for title, outcomes, describe in groups:
        if not outcomes:
            continue
        lines.append(f"{title}:")
        lines += [f"  {shown(_relative(f.path, result.root))}: {describe(f)}" for f in outcomes[:MAX_LISTED]]
        if len(outcomes) > MAX_LISTED:
            lines.append(f"  … {len(outcomes) - MAX_LISTED} more (--json lists every file)")
    return lines
