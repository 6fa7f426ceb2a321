"""``lantern install claude-code [--project|--user] [--uninstall]``: our hooks in Claude Code's ``settings.json``.

Claude Code reads hooks from ``.claude/settings.json`` (project) and ``~/.claude/settings.json`` (user) in the shape
``{"hooks": {EVENT: [{"matcher": M, "hooks": [{"type": "command", "command": C, "timeout": S}]}]}}``. We add one
matcher group per event (``PreCompact``, ``SessionStart`` with matcher ``compact``, ``UserPromptSubmit``, ``Stop``)
whose command ends with ``hook claude-code``; that suffix is how ours are recognised. Installing merges into the
existing structure (other hooks and every other setting untouched, key order kept), is idempotent (a second
install changes nothing; an install with another command replaces ours), and ``--uninstall`` removes only our
commands, then any group or event list left empty. A settings file that is not a JSON object raises
``LanternError`` and is left untouched. Writes are atomic (temporary file + rename; the temporary file is removed
whatever fails). A symlinked settings.json (dotfiles kept in a repository) is updated through the link: its target
is rewritten, the link stays. A file starting with a UTF-8 byte order mark is read (``utf-8-sig``) and written back
WITHOUT the mark (ours: JSON text must not begin with one, RFC 8259 §8.1, and a strict JSON reader rejects it).

Codex reads ``hooks.json`` in the same shape (``~/.codex/hooks.json``, or ``$CODEX_HOME/hooks.json``, and
``<project>/.codex/hooks.json``; developers.openai.com/codex/hooks): ``install_codex`` merges ours there the same
way (``merge_hooks``), with commands ending in ``hook codex``.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from lantern.errors import LanternError
from lantern.integrations.claude_code import TIMEOUT_S

MARKER = "hook claude-code"
EVENTS: dict[str, str | None] = {"PreCompact": None, "SessionStart": "compact", "UserPromptSubmit": None, "Stop": None}
CODEX_MARKER = "hook codex"
# Codex: PreCompact archives before the history is rewritten, SessionStart(compact) injects, UserPromptSubmit injects
# for a prompt after a compaction, Stop archives each turn
CODEX_EVENTS: dict[str, str | None] = {
    "PreCompact": None,
    "SessionStart": "compact",
    "UserPromptSubmit": None,
    "Stop": None,
}


def settings_path(scope: str, project_dir: str | os.PathLike[str] | None = None) -> Path:
    """``<project>/.claude/settings.json`` for ``project`` (default: the current directory), ``~/.claude/settings.json``
    for ``user``."""
    if scope == "user":
        return Path.home() / ".claude" / "settings.json"
    if scope == "project":
        return Path(project_dir or os.getcwd()) / ".claude" / "settings.json"
    raise ValueError(f"scope must be 'project' or 'user', got {scope!r}")


def codex_hooks_path(scope: str, project_dir: str | os.PathLike[str] | None = None) -> Path:
    """``<project>/.codex/hooks.json`` for ``project`` (default: the current directory); ``$CODEX_HOME/hooks.json``
    (default ``~/.codex/hooks.json``) for ``user``."""
    if scope == "user":
        return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex").expanduser() / "hooks.json"
    if scope == "project":
        return Path(project_dir or os.getcwd()) / ".codex" / "hooks.json"
    raise ValueError(f"scope must be 'project' or 'user', got {scope!r}")


def hook_command(host: str, db: str | os.PathLike[str] | None = None, rewound: str | None = None) -> str:
    """The command the agent (``host``: claude-code, codex) runs: this environment's ``lantern`` executable
    (absolute path, so the hook works whatever the agent's PATH), with ``--db`` when a database is given and
    ``--rewound`` when a mode is."""
    exe = Path(sys.executable).parent / "lantern"
    base = [str(exe)] if exe.exists() else [shutil.which("lantern") or "lantern"]
    if not exe.exists() and base[0] == "lantern":
        base = [sys.executable, "-m", "lantern"]
    if db is not None:
        from lantern.config import is_server_url
        from lantern.integrations.claude_code import hooks_unsupported

        if is_server_url(db):
            raise hooks_unsupported(host)
        base += ["--db", str(Path(db).expanduser().resolve())]
    if rewound is not None:
        base += ["--rewound", rewound]
    return shlex.join([*base, "hook", host])


def _is_ours(hook: Any, marker: str = MARKER) -> bool:
    return isinstance(hook, dict) and isinstance(hook.get("command"), str) and hook["command"].rstrip().endswith(marker)


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        text = path.read_text(encoding="utf-8-sig")  # a leading BOM is dropped
    except UnicodeDecodeError as e:
        raise LanternError(
            f"{path} is not UTF-8 (byte {e.start}): left untouched; save it as UTF-8, then run this again"
        ) from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as e:
        raise LanternError(
            f"{path} is not valid JSON (line {getattr(e, 'lineno', '?')}): left untouched; "
            "fix it or move it away, then run this again"
        ) from None
    if not isinstance(data, dict):
        raise LanternError(f"{path} does not hold a JSON object: left untouched")
    hooks = data.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise LanternError(f"{path}: 'hooks' is not an object: left untouched")
    for event, groups in (hooks or {}).items():
        if not isinstance(groups, list):
            raise LanternError(f"{path}: hooks.{event} is not a list: left untouched")
    return data


def _remove_ours(hooks: dict[str, Any], marker: str = MARKER) -> int:
    """Remove our commands from every event of ``hooks`` (in place), then empty groups and event lists that we
    emptied. Returns the number of commands removed."""
    removed = 0
    for event in list(hooks):
        groups = hooks[event]
        kept_groups = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list):
                kept_groups.append(group)
                continue
            kept = [h for h in inner if not _is_ours(h, marker)]
            removed += len(inner) - len(kept)
            if kept or len(kept) == len(inner):
                kept_groups.append({**group, "hooks": kept})
        if kept_groups or not groups:
            hooks[event] = kept_groups
        else:
            del hooks[event]
    return removed


def _write(path: Path, data: dict[str, Any]) -> None:
    """Atomically replace ``path`` (through a symlink: its final target) with ``data`` as UTF-8 JSON without BOM,
    keeping the file's mode. The temporary file is removed when anything fails."""
    target = Path(os.path.realpath(path))  # a symlink stays a symlink: its target gets the new content
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        if target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o777)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def install(
    scope: str = "project",
    *,
    uninstall: bool = False,
    project_dir: str | os.PathLike[str] | None = None,
    command: str | None = None,
    db: str | os.PathLike[str] | None = None,
    rewound: str | None = None,
) -> tuple[Path, bool]:
    """Install (or with ``uninstall`` remove) our hooks in the settings file of ``scope``. ``command`` defaults to
    ``hook_command("claude-code", db)``. Returns ``(settings path, whether the file changed)``. Raises LanternError
    for a settings file that is not valid JSON or not of Claude Code's shape (file untouched), ValueError for a bad
    scope."""
    path = settings_path(scope, project_dir)
    cmd = None if uninstall else command or hook_command("claude-code", db, rewound)
    return path, merge_hooks(path, EVENTS, cmd, MARKER)


def install_codex(
    scope: str = "project",
    *,
    uninstall: bool = False,
    project_dir: str | os.PathLike[str] | None = None,
    command: str | None = None,
    db: str | os.PathLike[str] | None = None,
) -> tuple[Path, bool]:
    """``install`` for Codex: our hooks (``CODEX_EVENTS``, commands ending in ``hook codex``) in the ``hooks.json``
    of ``scope`` (``codex_hooks_path``). Same returns and errors."""
    path = codex_hooks_path(scope, project_dir)
    cmd = None if uninstall else command or hook_command("codex", db)
    return path, merge_hooks(path, CODEX_EVENTS, cmd, CODEX_MARKER)


def merge_hooks(path: Path, events: dict[str, str | None], command: str | None, marker: str) -> bool:
    """Remove our commands (ending in ``marker``) from the hooks file ``path``, then, unless ``command`` is None
    (uninstall), add one matcher group per event of ``events`` (event -> matcher, None: no matcher) running it.
    Writes only when something changed (and never creates a file to uninstall from). Returns whether it changed."""
    data = _load(path)
    before = json.dumps(data, sort_keys=True)
    hooks = data.get("hooks") if isinstance(data.get("hooks"), dict) else {}
    removed = _remove_ours(hooks, marker)
    if command is not None:
        for event, matcher in events.items():
            group: dict[str, Any] = {"hooks": [{"type": "command", "command": command, "timeout": TIMEOUT_S}]}
            if matcher is not None:
                group = {"matcher": matcher, **group}
            hooks.setdefault(event, []).append(group)
    if hooks or not removed:
        if hooks or "hooks" in data:
            data["hooks"] = hooks
    else:
        data.pop("hooks", None)  # we emptied it
    changed = json.dumps(data, sort_keys=True) != before
    if changed and (path.exists() or command is not None):
        _write(path, data)
    return changed
