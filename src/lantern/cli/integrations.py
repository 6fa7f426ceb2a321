"""The commands that start Lantern's faces: ``mcp``, ``serve`` (REST and the proxy), ``ui`` (the inspector), and
the agents' ``hook`` and ``install`` commands (lantern/integrations/)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from lantern.cli.common import fail, guard, missing_extra, state
from lantern.cli.options import (
    db_location,
    llm_model_option,
    llm_settings,
    llm_url_option,
    pinned_db_option,
    secret,
    uninstall_option,
    warn_password,
)
from lantern.cli.render import installed, serve_banner, serve_warnings


def mcp() -> None:
    """Run the MCP server on stdio (tools archive, recover, recover_compaction, search, forget, feedback, stats); needs
    the `mcp` extra."""
    try:
        from lantern.integrations.mcp import serve
    except ImportError as e:
        fail(missing_extra("mcp", "mcp", e))
    guard(lambda: serve(state.db, state.embedder))


def serve(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind (loopback by default)."),
    port: int = typer.Option(8765, "--port", "-p", min=1, max=65535, help="Port to listen on."),
    token: Optional[str] = typer.Option(
        None, "--token", envvar="LANTERN_TOKEN", help="Require Authorization: Bearer TOKEN."
    ),
    max_body_bytes: int = typer.Option(
        8 * 1024 * 1024, "--max-body-bytes", min=1, help="Larger request bodies get 413."
    ),
    upstream: Optional[str] = typer.Option(
        None,
        "--upstream",
        envvar="LANTERN_UPSTREAM",
        callback=warn_password,
        help="OpenAI-compatible base URL (e.g. https://api.openai.com/v1): proxy /v1/chat/completions and /v1/* to it.",
    ),
    upstream_timeout: float = typer.Option(
        600.0, "--upstream-timeout", min=0.001, help="Seconds before an upstream call gets 504."
    ),
    upstream_key: Optional[str] = typer.Option(
        None,
        "--upstream-key",
        envvar="LANTERN_UPSTREAM_KEY",
        help="Send upstream as Authorization: Bearer KEY (default: forward the client's; needed with --token).",
    ),
    upstream_key_file: Optional[Path] = typer.Option(
        None,
        "--upstream-key-file",
        envvar="LANTERN_UPSTREAM_KEY_FILE",
        help="Read --upstream-key from this file (not visible in ps).",
    ),
    token_file: Optional[Path] = typer.Option(
        None, "--token-file", envvar="LANTERN_TOKEN_FILE", help="Read --token from this file (not visible in ps)."
    ),
    rerank: bool = typer.Option(
        False,
        "--rerank",
        help="LANTERN-Rerank for the proxy's compaction recoveries: through --llm-base-url, else through the "
        "upstream with each request's model.",
    ),
    llm_base_url: Optional[str] = llm_url_option(),
    llm_model: Optional[str] = llm_model_option(),
) -> None:
    """Serve the memory REST API (/v1/memory/...; OpenAPI at /docs) and, with --upstream, the OpenAI-compatible
    chat-completions proxy that archives turns and re-injects what a compaction lost; needs the `proxy` extra."""
    token = secret(ctx, "token", token, token_file)
    upstream_key = secret(ctx, "upstream_key", upstream_key, upstream_key_file)
    try:
        from lantern.integrations.proxy import serve as serve_api
    except ImportError as e:
        fail(missing_extra("serve", "proxy", e))
    from lantern.integrations.service import is_loopback

    serve_warnings(host, token, upstream, upstream_key, is_loopback(host))
    if upstream is not None and not upstream.startswith(("http://", "https://")):
        fail(f"--upstream must be an http(s) URL, got {upstream!r}")
    rerank_llm = _proxy_rerank(rerank, llm_base_url, llm_model, upstream)
    serve_banner(host, port, token, upstream)
    options = {"host": host, "port": port, "token": token, "max_body_bytes": max_body_bytes, "upstream": upstream}
    options |= {"upstream_timeout": upstream_timeout, "upstream_key": upstream_key, "rerank": rerank_llm}
    guard(lambda: serve_api(state.db, state.embedder, rewound=state.rewound or "skip", **options))


def _proxy_rerank(rerank: bool, base_url: Optional[str], model: Optional[str], upstream: Optional[str]):
    """``serve``'s rerank endpoint: the LLM settings given (options, environment), else the upstream itself
    (``proxy.UPSTREAM``); None without --rerank. A usage error when --rerank has neither."""
    if not rerank:
        return None
    chosen = llm_settings(base_url, model)
    if chosen is not None:
        return chosen
    if upstream:
        from lantern.integrations.forward import UPSTREAM

        return UPSTREAM
    raise typer.BadParameter(
        "--rerank needs an LLM endpoint: --upstream URL, or --llm-base-url URL and --llm-model NAME",
        param_hint="'--rerank'",
    )


def ui(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind (loopback; another needs --token)."),
    port: int = typer.Option(8766, "--port", "-p", min=1, max=65535, help="Port to listen on."),
    token: Optional[str] = typer.Option(
        None, "--token", envvar="LANTERN_UI_TOKEN", help="Require this token (open /?token=TOKEN once)."
    ),
    token_file: Optional[Path] = typer.Option(
        None, "--token-file", envvar="LANTERN_UI_TOKEN_FILE", help="Read --token from this file (not visible in ps)."
    ),
    open_browser: bool = typer.Option(False, "--open", help="Open the inspector in the default browser."),
) -> None:
    """Inspect the memory in a browser: sessions, timelines, compaction events, explain, facts, stats, forget.

    A local web app on 127.0.0.1 (no network, no script); needs the `ui` extra. Another interface needs --token."""
    from lantern.integrations.service import is_loopback

    token = secret(ctx, "token", token, token_file)

    if token is None and not is_loopback(host):
        fail(f"--host {host} needs --token: the inspector shows the whole archive to whoever reaches it")
    try:
        from lantern.integrations.ui import serve as serve_ui
    except ImportError as e:
        fail(missing_extra("ui", "ui", e))

    def run():
        from lantern.config import default_db_path, empty_file, redact_url
        from lantern.errors import LanternError

        path = state.db or default_db_path()
        if isinstance(path, str):  # a server URL: opened here so that its backend can refuse the inspector
            from lantern.api import Lantern

            with Lantern(path, embedder=state.embedder) as lantern:
                lantern.require("lantern ui")
        elif not path.exists() or empty_file(path):
            raise LanternError(
                f"no database at {redact_url(str(path))}: archive something first (lantern ingest FILE), "
                "or lantern demo"
            )
        shown_host = f"[{host}]" if ":" in host else host
        url = f"http://{shown_host}:{port}/"
        login = " (with --token: open /?token=TOKEN once, or log in on the page)" if token else ""
        typer.echo(f"lantern inspector on {url}{login}; Ctrl-C stops it", err=True)
        if open_browser:
            import webbrowser
            from urllib.parse import quote

            webbrowser.open(url + (f"?token={quote(token)}" if token else ""))
        serve_ui(path, state.embedder, host=host, port=port, token=token)

    guard(run)


def hook_claude_code() -> None:
    """Claude Code hook: reads the hook JSON on stdin; archives on PreCompact/Stop, injects recovered turns on
    SessionStart(compact) and back-referencing prompts. Always exits 0 (errors go to ~/.lantern/logs/)."""
    from lantern.integrations.claude_code import main as hook_main

    raise typer.Exit(hook_main(state.db, rewound=state.rewound))


def install_claude_code(
    user: bool = typer.Option(False, "--user", help="~/.claude/settings.json instead of the project's."),
    project: bool = typer.Option(False, "--project", help=".claude/settings.json of the current directory (default)."),
    uninstall: bool = uninstall_option(),
    db: Optional[str] = pinned_db_option(),
) -> None:
    """Write Lantern's hooks into Claude Code's settings.json, merged with the hooks already there."""
    from lantern.integrations.claude_code_settings import install

    if user and project:
        fail("give at most one of --project or --user")

    def run():
        pinned = db_location(db) or state.db
        path, changed = install("user" if user else "project", uninstall=uninstall, db=pinned, rewound=state.rewound)
        installed(path, changed, uninstall, pinned)

    guard(run)


def hook_codex() -> None:
    """Codex hook: reads the hook JSON on stdin; archives the rollout on PreCompact/Stop/PostCompact, injects what
    the compaction lost on SessionStart(compact) and what a later prompt asks for on UserPromptSubmit. Always exits 0
    (errors go to ~/.lantern/logs/codex.log)."""
    from lantern.integrations.codex import main as hook_main

    raise typer.Exit(hook_main(state.db))


def install_codex(
    user: bool = typer.Option(False, "--user", help="$CODEX_HOME/hooks.json (default ~/.codex/hooks.json)."),
    project: bool = typer.Option(False, "--project", help=".codex/hooks.json of the current directory (default)."),
    uninstall: bool = uninstall_option(),
    db: Optional[str] = pinned_db_option(),
) -> None:
    """Write Lantern's hooks into Codex's hooks.json, merged with the hooks already there. Codex runs a new hook
    only once you trust it (/hooks in Codex)."""
    from lantern.integrations.claude_code_settings import install_codex as install

    if user and project:
        fail("give at most one of --project or --user")

    def run():
        pinned = db_location(db) or state.db
        path, changed = install("user" if user else "project", uninstall=uninstall, db=pinned)
        installed(path, changed, uninstall, pinned)
        if changed and not uninstall:
            print("in Codex, open /hooks and trust the new hooks: Codex runs a hook only once it is trusted")

    guard(run)
