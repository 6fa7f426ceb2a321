"""The ``lantern`` command: a typer app mirroring the Python API one to one.

    lantern [--db PATH] ingest FILE|DIR [--format auto|...] [--session ID] -> Lantern.ingest
    lantern [--db PATH] recover QUERY [--budget N] [--session ID] [--as-of ISO] [--json] -> Lantern.recover
    lantern [--db PATH] search QUERY [-k N] [--explain] [--json]           -> Lantern.search / Lantern.explain
    lantern [--db PATH] forget (--entry ID | --session ID | --user U) [--wait S] -> Lantern.forget
    lantern [--db PATH] export FILE [--user U] [--session ID]              -> Lantern.export
    lantern [--db PATH] import FILE [--user U] [--no-embeddings]           -> Lantern.import_
    lantern [--db PATH] stats [--user U | --all-users] [--json]             -> Lantern.stats
    lantern [--db PATH] facts [KEY] [--as-of ISO] [--history] [--json]     -> Lantern.facts
    lantern [--db PATH] events [--session ID] [--json]                     -> Lantern.events
    lantern [--db PATH] ui [--host H] [--port N] [--token T] [--open]      -> lantern.integrations.ui
    lantern [--db PATH] feedback ID... (--useful | --not-useful)           -> Lantern.feedback
    lantern [--db PATH] reindex [--embedder NAME]                          -> Lantern.reindex
    lantern [--db PATH] redact                                             -> Lantern.redact_stored
    lantern demo                                                           -> lantern.demo.run
    lantern eval DATASET --data PATH --out DIR                             -> lantern.eval.run.main
    lantern hook claude-code  /  lantern install claude-code [--user]      -> lantern.integrations.claude_code
    lantern hook codex  /  lantern install codex [--user]                  -> lantern.integrations.codex

Heavy imports (numpy, onnxruntime) happen inside the commands, so ``lantern --help`` stays instant.

Every memory command takes the scope options --user (default $LANTERN_USER, else the default user ""), --agent and
--project (lantern/scope.py).
"""

from __future__ import annotations

import sys
from typing import Any, Optional

import typer

from lantern.cli.common import state
from lantern.cli.options import (
    Group,
    db_location,
    embedder_name,
    rewound_mode,
    version_option,
    warn_password,
)


def _global(
    ctx: typer.Context,
    db: Optional[str] = typer.Option(
        None,
        "--db",
        metavar="<path|url>",
        help="Database file (default $LANTERN_DB or ~/.lantern/lantern.db), or a postgresql:// URL (docs/postgres.md).",
        envvar="LANTERN_DB",
        callback=warn_password,
    ),
    embedder: Optional[str] = typer.Option(
        None,
        "--embedder",
        callback=embedder_name,
        help="routed (a new database's default), routed-v1, minilm, use or e5 (default: the database's own).",
    ),
    rewound: Optional[str] = typer.Option(
        None,
        "--rewound",
        envvar="LANTERN_REWOUND",
        callback=rewound_mode,
        help=(
            "Turns of a rewound Claude Code branch: skip (default: not archived, and removed when the rewind shows "
            "later) or mark (kept in <session>/abandoned-<id>). The proxy (serve) always marks."
        ),
    ),
    _show_version: bool = typer.Option(
        False, "--version", callback=version_option, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    state.db = db_location(db)
    state.embedder = embedder
    state.rewound = rewound


# the commands, in the order ``lantern --help`` lists them: (group, command, module of lantern.cli, function)
COMMANDS = (
    ("", "ingest", "archive", "ingest"),
    ("", "recover", "recover", "recover"),
    ("", "search", "recover", "search"),
    ("", "forget", "store", "forget"),
    ("", "vacuum", "store", "vacuum"),
    ("", "export", "archive", "export"),
    ("", "import", "archive", "import_"),
    ("", "copy", "store", "copy"),
    ("", "stats", "store", "stats"),
    ("", "facts", "recover", "facts"),
    ("", "events", "recover", "events"),
    ("", "feedback", "recover", "feedback"),
    ("", "reindex", "store", "reindex"),
    ("", "redact", "store", "redact"),
    ("", "chat", "chat", "chat"),
    ("", "demo", "chat", "demo"),
    ("", "mcp", "integrations", "mcp"),
    ("", "serve", "integrations", "serve"),
    ("", "ui", "integrations", "ui"),
    ("", "eval", "eval", "eval_"),
    ("hook", "claude-code", "integrations", "hook_claude_code"),
    ("install", "claude-code", "integrations", "install_claude_code"),
    ("hook", "codex", "integrations", "hook_codex"),
    ("install", "codex", "integrations", "install_codex"),
)
_GROUPS = ("hook", "install")
_NAMES = frozenset(group or command for group, command, _, _ in COMMANDS)


def build(only: str | None = None) -> tuple[typer.Typer, typer.Typer, typer.Typer]:
    """The ``lantern`` app and its ``hook`` and ``install`` groups: every command, or with ``only`` (a command or
    group name of ``COMMANDS``) that one alone, so a run imports one command module and typer builds one command's
    parameters, not 23 (``main``; BENCHMARKS.md §27). Returns (app, hook_app, install_app)."""
    import importlib

    app = typer.Typer(
        cls=Group, add_completion=False, no_args_is_help=True, help="Archive every turn; recover what compaction lost."
    )
    app.callback()(_global)
    hook_app = typer.Typer(
        cls=Group, no_args_is_help=True, help="Hook entry points that agents run (stdin JSON -> stdout JSON)."
    )
    install_app = typer.Typer(cls=Group, no_args_is_help=True, help="Install Lantern's hooks into an agent's settings.")
    app.add_typer(hook_app, name="hook")
    app.add_typer(install_app, name="install")
    groups = {"": app, "hook": hook_app, "install": install_app}
    for group, command, module, function in COMMANDS:
        if only is None or (group or command) == only:
            groups[group].command(command)(getattr(importlib.import_module(f"lantern.cli.{module}"), function))
    _flow_help(app, hook_app, install_app)
    return app, hook_app, install_app


def command_named(argv: list[str]) -> str | None:
    """The command (or group) that ``argv`` runs, the first word after the global options in front; None when
    there is none or it is not one of ``COMMANDS`` (``--help``, a typo: the whole app answers)."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 1 if "=" in argv[i] or argv[i] not in _GLOBAL_VALUE_OPTIONS else 2
    return argv[i] if i < len(argv) and argv[i] in _NAMES else None


_built: dict[str, Any] = {}


def __getattr__(name: str) -> Any:
    """``app``, ``hook_app`` and ``install_app``: the whole app, built on first use (``build``)."""
    if name in ("app", "hook_app", "install_app"):
        if not _built:
            _built.update(zip(("app", "hook_app", "install_app"), build()))
        return _built[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _flowed(doc: str, markup: bool) -> str:
    """A docstring as command help: each paragraph's lines joined into one line, paragraphs kept. Typer (rich markup
    mode) keeps the single line breaks of the source in the command list of ``lantern --help`` and in every
    paragraph after the first, so a docstring wrapped at 120 columns would print stray line breaks mid-sentence.
    ``markup``: the help is read as rich markup, where ``[eval]`` is a style tag and would vanish
    from ``pip install 'lantern-memory[eval]'``: such a bracket is escaped."""
    import inspect
    import re

    text = "\n\n".join(
        " ".join(line.strip() for line in paragraph.splitlines()) for paragraph in inspect.cleandoc(doc).split("\n\n")
    )
    return re.sub(r"\[(?=[A-Za-z#/@])", r"\\[", text) if markup else text


def _flow_help(*typers: typer.Typer) -> None:
    """Give every command of ``typers`` its docstring ``_flowed`` as its help (a help given explicitly is kept)."""
    for group in typers:
        for info in group.registered_commands:
            if info.help is None and info.callback is not None and info.callback.__doc__:
                info.help = _flowed(info.callback.__doc__, markup=group.rich_markup_mode == "rich")


def _ignore_ctrl_c() -> None:
    """From here on Ctrl-C is ignored: the command has decided its exit code (130 after a Ctrl-C, 0 when it
    finished). The interpreter's shutdown (closing databases, joining threads) can take seconds on a loaded machine,
    and Python resets its own SIGINT handler to the default action for it: one more Ctrl-C then would kill the
    process by the signal (exit -2) instead of letting it finish with its code. An ignored SIGINT stays ignored
    through that shutdown."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


_GLOBAL_VALUE_OPTIONS = ("--db", "--embedder", "--rewound")


def globals_first(argv: list[str], app: Any = None) -> list[str]:
    """``argv`` with the global options (``--db``, ``--embedder``, ``--rewound``, each with its value, ``--opt=value``
    too) that were given after the command moved before it, where the CLI reads them: ``lantern recover Q --db X``
    is ``lantern --db X recover Q``. An option the command defines itself (``install claude-code --db``) stays
    where it is, and so does everything after ``--``. Any other ``argv`` is returned unchanged. ``app``: the app
    that runs it (default: the whole app)."""
    group: Any = typer.main.get_command(app if app is not None else __getattr__("app"))
    i = 0
    while i < len(argv) and argv[i].startswith("-"):  # the global options already in front
        i += 1 if "=" in argv[i] or argv[i] not in _GLOBAL_VALUE_OPTIONS else 2
    command, start = group, i
    while isinstance(getattr(command, "commands", None), dict) and i < len(argv) and argv[i] in command.commands:
        command = command.commands[argv[i]]
        i += 1
    if command is group:
        return argv
    own = {name for p in command.params for name in getattr(p, "opts", [])}
    moved: list[str] = []
    rest: list[str] = []
    j = i
    while j < len(argv):
        token = argv[j]
        if token == "--":
            rest += argv[j:]
            break
        name = token.partition("=")[0]
        if name in _GLOBAL_VALUE_OPTIONS and name not in own:
            take = 1 if "=" in token or j + 1 >= len(argv) else 2
            moved += argv[j : j + take]
            j += take
            continue
        rest.append(token)
        j += 1
    return argv[:start] + moved + argv[start:i] + rest if moved else argv


def _stdout_is_devnull() -> bool:
    import os

    try:
        out, null = os.fstat(sys.stdout.fileno()), os.stat(os.devnull)
    except (OSError, ValueError):
        return False
    return (out.st_dev, out.st_ino) == (null.st_dev, null.st_ino)


def main() -> None:
    only = command_named(sys.argv[1:])
    app = build(only)[0] if only is not None else __getattr__("app")
    sys.argv[1:] = globals_first(sys.argv[1:], app)
    devnull_before = _stdout_is_devnull()
    try:
        app()  # typer turns a KeyboardInterrupt into exit code 130 (SystemExit)
    except SystemExit as e:  # click ends every command so, 0 included: its exit code is decided
        _ignore_ctrl_c()
        if e.code == 1 and not devnull_before and _stdout_is_devnull():
            # rich's Console.on_broken_pipe: the reader of our stdout left (`lantern demo | head -1`); it points
            # stdout at /dev/null and exits 1. The output was read as far as wanted: not an error (as common.guard)
            raise SystemExit(0) from None
        raise
    except KeyboardInterrupt:
        _ignore_ctrl_c()
        sys.exit(130)
