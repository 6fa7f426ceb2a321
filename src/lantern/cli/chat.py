"""``chat`` (lantern/memory/agent.py over the configured LLM) and ``demo`` (lantern/demo.py)."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from lantern.cli.common import guard, open_db
from lantern.cli.options import (
    db_location,
    llm_model_option,
    llm_settings,
    llm_url_option,
    sqlite_only,
    user_option,
    utf8,
)
from lantern.cli.render import print_turn, stdout_console, warnings_on_stderr


def chat(
    session: str = typer.Option("chat", "--session", "-s", callback=utf8, help="Session the turns are archived in."),
    once: Optional[str] = typer.Option(None, "--once", metavar="QUESTION", help="Ask one question, answer, exit."),
    system: Optional[str] = typer.Option(None, "--system", help="System prompt (default: the agent's)."),
    budget: int = typer.Option(16000, "--budget", "-b", min=1, help="Characters of the whole context sent."),
    top_k: int = typer.Option(2, "--top-k", min=1, help="Recovered entries per turn."),
    rerank: bool = typer.Option(False, "--rerank", help="LANTERN-Rerank each recovery (one more LLM call)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per answer (answer, recovery, costs)."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", min=1, help="Cap of each answer (default 256)."),
    llm_base_url: Optional[str] = llm_url_option(),
    llm_model: Optional[str] = llm_model_option(),
    user: Optional[str] = user_option("User id the turns belong to (default $LANTERN_USER)."),
) -> None:
    """Chat with the configured LLM over Lantern's memory: every turn archived; when a question refers back or the
    draft answer is unsure, lost turns are recovered and the answer regenerated (shown on stderr: which cue).
    Questions come from --once, else one per line on stdin (interactive on a terminal). Needs an LLM endpoint;
    it receives the conversation and what is recovered."""
    llm = llm_settings(llm_base_url, llm_model)
    if llm is None:
        raise typer.BadParameter(
            "chat needs an LLM endpoint: give --llm-base-url URL and --llm-model NAME", param_hint="'--llm-base-url'"
        )

    def run():
        from lantern.memory.agent import SYSTEM_PROMPT, MemoryAgent
        from lantern.scope import resolve

        interactive = once is None and sys.stdin.isatty()
        with open_db(create=True) as lantern, warnings_on_stderr():
            if user is not None:
                lantern.scope = resolve(lantern.scope, user, None, None)
            agent = MemoryAgent(
                lantern,
                session,
                llm,
                system_prompt=system if system is not None else SYSTEM_PROMPT,
                budget=budget,
                top_k=top_k,
                rerank=rerank,
                max_tokens=max_tokens,
            )
            for question in [once] if once is not None else _questions(interactive):
                if question.strip():
                    print_turn(agent.ask(question), as_json)

    guard(run)


def _questions(interactive: bool):
    """Questions read from stdin, one per line; on a terminal with a ``you> `` prompt, until EOF or Ctrl-C."""
    while True:
        try:
            line = input("you> ") if interactive else sys.stdin.readline()
        except (EOFError, KeyboardInterrupt):
            return
        if not interactive and not line:
            return
        yield line.rstrip("\n")


def demo(
    db: Optional[str] = typer.Option(
        None,
        "--demo-db",
        callback=sqlite_only,
        help="Where to build the demo database, a SQLite file (default: a temp dir).",
    ),
    show_block: bool = typer.Option(
        False, "--show-block/--no-show-block", help="Also print each injected block, after its session's story."
    ),
) -> None:
    """Archive real aider sessions, compact them, and show what each compaction lost and what recovery brought
    back (one line per fact), then the figures. No network, no LLM."""
    from lantern.demo import run as run_demo

    guard(lambda: run_demo(db_location(db), show_block=show_block, console=stdout_console()), db or None)
