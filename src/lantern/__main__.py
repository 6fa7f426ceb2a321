"""The ``lantern`` command's entry point (``python -m lantern`` too): the CLI (``lantern.cli``), except that the
agents' hooks, ``lantern [--db PATH] [--rewound MODE] hook claude-code`` and ``lantern [--db PATH] hook codex``,
run without loading the CLI.

A hook is a new process on every event, and ``UserPromptSubmit`` blocks the user's prompt until it exits. The CLI
imports typer, click, rich and pydantic (about 200 ms of a hook's 400 ms on an idle machine, more under load:
BENCHMARKS.md §7), and a prompt with no back-reference needs none of them. Any other argument list, or a hook
command with an option this parser does not know, goes to the CLI unchanged. The hook goes through the warm
daemon when it can (integrations/daemon.py: a Python start and one round trip), in-process when it cannot."""

from __future__ import annotations

import sys

_HOSTS = ("claude-code", "codex")
_VALUE_OPTIONS = ("--db", "--rewound")  # the global options a hook command carries (install claude-code writes them)


def hook_options(argv: list[str]) -> dict[str, str] | None:
    """The global options of a hook command line (``--db PATH --rewound MODE hook claude-code``, ``--opt=value``
    too, the agent last: claude-code or codex) as ``{"--db": PATH, ...}``; None when ``argv`` is anything else (the
    CLI parses it then)."""
    if len(argv) < 2 or argv[-2] != "hook" or argv[-1] not in _HOSTS:
        return None
    options: dict[str, str] = {}
    rest = argv[:-2]
    i = 0
    while i < len(rest):
        name, eq, value = rest[i].partition("=")
        if name not in _VALUE_OPTIONS:
            return None
        if not eq:
            if i + 1 >= len(rest):
                return None
            value = rest[i + 1]
            i += 1
        options[name] = value
        i += 1
    return options


def hook(host: str, db: str | None, rewound: str | None) -> int:
    """One hook event: through the warm daemon (integrations/daemon.py; started when absent), else in-process.
    Exit code 0 always (a hook never breaks the host's session)."""
    try:
        text = sys.stdin.read()
    except BaseException:  # noqa: BLE001 - the in-process hook reads and logs it
        text = None
    started, no_model = False, False
    if text is not None:
        from lantern.integrations import daemon

        out, started = daemon.hook(host, text, db, rewound)
        if out is not None:
            if out:
                sys.stdout.write(out + "\n")
                sys.stdout.flush()
            return 0
        # no daemon answered; one starts after this answer (start_after): a prompt is answered with no model
        no_model = daemon.enabled()
    if host == "codex":
        from lantern.integrations.codex import main as codex_main

        code = codex_main(db, text=text, no_model=no_model)
    else:
        from lantern.integrations.claude_code import main as hook_main

        code = hook_main(db, rewound=rewound, text=text, no_model=no_model)
    if text is not None and not started:  # an event answered first (daemon.ANSWER_FIRST_EVENTS): the daemon now
        from lantern.integrations import daemon

        daemon.start_after(text, db)
    return code


def main() -> None:
    options = hook_options(sys.argv[1:])
    host = sys.argv[-1]
    if options is not None and host == "codex" and "--rewound" not in options:
        sys.exit(hook("codex", options.get("--db"), None))
    if options is not None and host == "claude-code" and options.get("--rewound", "skip") in ("skip", "mark"):
        sys.exit(hook("claude-code", options.get("--db"), options.get("--rewound")))
    from lantern.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
