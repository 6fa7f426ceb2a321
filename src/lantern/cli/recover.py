"""The read path's commands: ``recover`` (``Lantern.recover`` / ``recover_compaction``), ``search``
(``Lantern.search`` / ``explain``), ``facts``, ``events`` and ``feedback``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from lantern.cli.common import guard, iso_time, open_db, read_text, warm_answer
from lantern.cli.options import (
    agent_option,
    iso_option,
    live_messages,
    live_option,
    llm_model_option,
    llm_url_option,
    project_option,
    rerank_option,
    rerank_settings,
    user_option,
    utf8,
)
from lantern.cli.render import on_terminal, print_json, print_search_table, stdout_console, warnings_on_stderr
from lantern.config import DEFAULT
from lantern.text.names import plural


def recover(
    query: Optional[str] = typer.Argument(
        None, metavar="QUERY", help="The question (not with --summary: a compaction's recovery needs none)."
    ),
    budget: int = typer.Option(DEFAULT.budget, "--budget", "-b", min=0, help="Characters to inject."),
    session: Optional[str] = typer.Option(None, "--session", "-s", callback=utf8, help="Only this session."),
    as_json: bool = typer.Option(
        False,
        "--json",
        help='Print {"text", "chars", "reason", "detail", "relevance", "entries": [...]}; with --rerank also '
        '"reranked", "llm_calls", "tokens_in", "tokens_out"; with --summary "loss" (when the session was read).',
    ),
    as_of: Optional[str] = typer.Option(
        None, "--as-of", callback=iso_option, help="ISO 8601 time (naive = UTC): answer as of then."
    ),
    rerank: bool = rerank_option(),
    llm_base_url: Optional[str] = llm_url_option(),
    llm_model: Optional[str] = llm_model_option(),
    min_score: Optional[float] = typer.Option(
        None,
        "--min-score",
        min=0.0,
        help="Relevance floor: inject nothing when no turn matches at least this well (best cosine, or best "
        "coverage of the query's terms; a short block up to the clear score). Default: the configured one; 0 turns "
        "the decision off (the full budget).",
    ),
    live: Optional[Path] = live_option(),
    summary: Optional[Path] = typer.Option(
        None,
        "--summary",
        help="A compaction summary file ('-': stdin; an empty file: none): recover what it and --live lost from "
        "--session (Lantern.recover_compaction) instead of answering QUERY.",
    ),
    user: Optional[str] = user_option(),
    agent: Optional[str] = agent_option(),
    project: Optional[str] = project_option(),
) -> None:
    """Recover archived turns for QUERY within a character budget, or what a compaction lost (--summary)."""
    llm = rerank_settings(rerank, llm_base_url, llm_model)
    if summary is not None:
        if query is not None:
            raise typer.BadParameter("give QUERY or --summary, not both", param_hint="QUERY")
        for given, name in ((as_of, "--as-of"), (min_score, "--min-score")):
            if given is not None:  # a compaction's block is the loss now: no past time, never held to a floor
                raise typer.BadParameter(f"{name} applies to a QUERY's recovery, not to --summary", param_hint=name)
        return _recover_compaction(summary, budget, session, as_json, live, user, agent, project, rerank, llm)
    if query is None:
        raise typer.BadParameter("missing QUERY (or --summary FILE for a compaction's recovery)", param_hint="QUERY")

    def run():
        when = iso_time(as_of, "--as-of")
        exclude = live_messages(live)
        if not rerank and when is None and exclude is None:
            kwargs = {"session": session, "budget": budget, "agent": agent, "project": project, "min_score": min_score}
            warm = warm_answer("recover", {"query": query}, kwargs, user)
            if warm is not None and (as_json or warm["text"]):  # an empty block: in-process, which says why
                if as_json:
                    print_json(warm)
                else:
                    print(on_terminal()(warm["text"]))
                return
        with open_db() as lantern, warnings_on_stderr():
            result = lantern.recover(
                query,
                session=session,
                budget=budget,
                as_of=when,
                rerank=rerank,
                llm=llm,
                user=user,
                agent=agent,
                project=project,
                min_score=min_score,
                exclude=exclude,
            )
            if as_json:
                print_json(result.to_json())
            elif result.text:  # a terminal gets archived control characters as visible escapes; a pipe the text as is
                print(on_terminal()(result.text))
                if result.reason:  # a short block: the evidence was uncertain (recover/relevance.py)
                    typer.secho(
                        f"short block ({result.reason}): {result.detail}; --min-score 0 gives the full budget",
                        err=True,
                        fg=typer.colors.YELLOW,
                    )
            else:
                why = lantern.why_empty(
                    result,
                    session=session,
                    user=user,
                    agent=agent,
                    project=project,
                    as_of=as_of if when is not None else None,
                )
                typer.secho(f"nothing recovered{why}", err=True, fg=typer.colors.YELLOW)

    guard(run)


COMPACTION_EMPTY = {
    "nothing_archived": "the session has no archived turn (ingest its transcript first, or check --session/--user)",
    "nothing_lost": "every specific of the archived turns is in the summary or the live context",
    "budget": "the budget is too small for one item",
}


def _recover_compaction(
    summary: Path,
    budget: int,
    session: Optional[str],
    as_json: bool,
    live: Optional[Path],
    user: Optional[str],
    agent: Optional[str],
    project: Optional[str],
    rerank: bool = False,
    llm: Any = None,
) -> None:
    """``recover --summary``: one call of ``Lantern.recover_compaction``."""

    def run():
        text = sys.stdin.read() if str(summary) == "-" else read_text(summary, "--summary")
        if live is None and not rerank:
            kwargs = {"session": session, "budget": budget, "agent": agent, "project": project}
            warm = warm_answer("recover_compaction", {"summary": text}, kwargs, user)
            if warm is not None and (as_json or warm["text"]):
                if as_json:
                    print_json(warm)
                else:
                    print(on_terminal()(warm["text"]))
                return
        with open_db() as lantern, warnings_on_stderr():
            result = lantern.recover_compaction(
                text,
                live=live_messages(live),
                session=session,
                budget=budget,
                user=user,
                agent=agent,
                project=project,
                rerank=rerank,
                llm=llm,
            )
        if as_json:
            print_json(result.to_json())
        elif result.text:
            print(on_terminal()(result.text))
        else:
            why = COMPACTION_EMPTY.get(result.reason or "", result.reason or "")
            typer.secho(f"nothing recovered: {why}", err=True, fg=typer.colors.YELLOW)

    guard(run)


def search(
    query: str = typer.Argument(..., metavar="QUERY", help="What to look for."),
    k: int = typer.Option(10, "-k", min=1, help="Results."),
    session: Optional[str] = typer.Option(
        None, "--session", "-s", callback=utf8, help="Only this session (and its sub-sessions)."
    ),
    explain: bool = typer.Option(False, "--explain", help="Every candidate: rank per signal, RRF score, verdict."),
    budget: int = typer.Option(DEFAULT.budget, "--budget", "-b", min=0, help="Budget used by --explain."),
    as_json: bool = typer.Option(
        False, "--json", help="Print the results as JSON (with --explain: every candidate's ranks and verdict)."
    ),
    rerank: bool = rerank_option(),
    llm_base_url: Optional[str] = llm_url_option(),
    llm_model: Optional[str] = llm_model_option(),
    min_score: Optional[float] = typer.Option(
        None,
        "--min-score",
        min=0.0,
        help="Relevance floor: list nothing when no turn matches at least this well (as recover's). Default: none; "
        "with --explain, the configured one.",
    ),
    live: Optional[Path] = live_option(),
    user: Optional[str] = user_option(),
    agent: Optional[str] = agent_option(),
    project: Optional[str] = project_option(),
) -> None:
    """Search the archive (fused ranking); --explain shows why each candidate was packed or cut (with --rerank,
    the LLM's place of each beside its fused rank)."""
    llm = rerank_settings(rerank, llm_base_url, llm_model)
    if rerank and not explain:
        raise typer.BadParameter(
            "--rerank goes with --explain (search alone shows the fused ranking)", param_hint="'--rerank'"
        )
    if live is not None and not explain:
        raise typer.BadParameter(
            "--live goes with --explain (search alone ranks every archived turn; recover takes --live too)",
            param_hint="'--live'",
        )

    def run():
        exclude = live_messages(live)
        with open_db() as lantern, warnings_on_stderr():
            if explain:
                cands = lantern.explain(
                    query,
                    session=session,
                    budget=budget,
                    rerank=rerank,
                    llm=llm,
                    user=user,
                    agent=agent,
                    project=project,
                    min_score=min_score,
                    exclude=exclude,
                ).candidates
                rows = [
                    {
                        "id": c.entry.id,
                        "session": c.entry.session,
                        "turn": c.entry.turn,
                        "ranks": c.ranks,
                        "rrf": round(c.rrf, 5),
                        "mmr": c.mmr_order,
                        "rerank": c.rerank,
                        "verdict": c.verdict,
                        "reason": c.reason,
                        "category": c.entry.category,
                        "confidence": round(c.entry.confidence, 3),
                        "success": round(c.entry.success, 3),
                        "summary": c.entry.summary[:100],
                    }
                    for c in cands
                ]
            else:
                rows = [
                    {
                        "id": h.entry.id,
                        "session": h.entry.session,
                        "turn": h.entry.turn,
                        "ranks": h.ranks,
                        "score": round(h.score, 5),
                        "summary": h.entry.summary[:160],
                    }
                    for h in lantern.search(
                        query, k=k, session=session, user=user, agent=agent, project=project, min_score=min_score
                    )
                ]
        if as_json:
            print_json(rows)
            return
        if not rows and min_score and not explain:
            typer.secho(
                f"nothing found: no archived turn matches at least --min-score {min_score:g}",
                err=True,
                fg=typer.colors.YELLOW,
            )
            return
        print_search_table(rows, explain)

    guard(run)


def facts(
    key: Optional[str] = typer.Argument(
        None, metavar="KEY", callback=utf8, help="One key (normalized: case, 'the', 的, _ . - ignored); default all."
    ),
    as_of: Optional[str] = typer.Option(
        None, "--as-of", callback=iso_option, help="ISO 8601 time (naive = UTC): the values valid then."
    ),
    history: bool = typer.Option(False, "--history", help="Every version, not only the valid one."),
    as_json: bool = typer.Option(False, "--json", help="Print the FactRecord rows as JSON."),
    user: Optional[str] = user_option(),
    agent: Optional[str] = agent_option(),
    project: Optional[str] = project_option(),
) -> None:
    """Versioned facts extracted from the archive: current values, as of a time, or their history."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    def run():
        when = iso_time(as_of, "--as-of")
        with open_db() as lantern:
            rows = lantern.facts(key, when, history=history, user=user, agent=agent, project=project)
        if as_json:
            print_json([r.to_json() for r in rows])
            return
        if not rows:
            typer.secho("no facts", err=True, fg=typer.colors.YELLOW)
            return
        safe = on_terminal()  # archived keys, values and sessions as visible escapes on a terminal
        table = Table()
        for col in ("key", "value", "valid from", "valid to", "current", "source"):
            table.add_column(col, overflow="fold")
        for r in rows:
            table.add_row(
                escape(safe(r.key)),
                escape(safe(r.value if r.value is not None else "(retracted)")),
                r.valid_from.strftime("%Y-%m-%d %H:%M"),
                r.valid_to.strftime("%Y-%m-%d %H:%M") if r.valid_to else "–",
                "yes" if r.current else "",
                escape(safe(f"{r.session} · turn {r.turn} (entry {r.entry_id})")),
            )
        Console(width=max(Console().width, 120)).print(table)

    guard(run)


def events(
    session: Optional[str] = typer.Option(
        None, "--session", "-s", callback=utf8, help="Only this session's events (and its parent sessions')."
    ),
    limit: int = typer.Option(50, "--limit", "-n", min=1, help="At most this many, newest first."),
    as_json: bool = typer.Option(False, "--json", help="Print the events as JSON."),
    user: Optional[str] = user_option(),
    agent: Optional[str] = agent_option(),
    project: Optional[str] = project_option(),
) -> None:
    """Compaction events: when a compaction was detected (proxy, hooks, API), the turns it lost, what was injected.

    Each event names its session, how it was detected, the lost entries (recovered: injected again; not recovered),
    the injected entries and characters, the latency, and why nothing was injected when nothing was.

    Under the table: what each compaction's summary lost, by type, and the specifics that came back, each with its
    turn. `lantern ui` shows them on the session's timeline."""
    from rich.markup import escape
    from rich.table import Table

    from lantern.model import loss_lines

    def run():
        kwargs = {"session": session, "limit": limit, "agent": agent, "project": project}
        warm = warm_answer("events", {}, kwargs, user)
        if warm is not None:
            from datetime import datetime
            from types import SimpleNamespace

            rows = [SimpleNamespace(**{**r, "time": datetime.fromisoformat(r["time"])}) for r in warm]
        else:
            with open_db() as lantern:
                rows = lantern.events(session, limit=limit, user=user, agent=agent, project=project)
        if as_json:
            print_json(warm if warm is not None else [r.to_json() for r in rows])
            return
        if not rows:
            typer.secho("no compaction events", err=True, fg=typer.colors.YELLOW)
            return
        safe = on_terminal()
        table = Table()
        columns = ("id", "time (UTC)", "session", "source", "reason", "lost", "recovered", "injected", "chars", "ms")
        for col in columns:
            table.add_column(col, overflow="fold", justify="right" if col in ("id", "lost", "chars", "ms") else "left")
        for r in rows:
            table.add_row(
                str(r.id),
                r.time.strftime("%Y-%m-%d %H:%M:%S"),
                escape(safe(r.session)),
                escape(r.source),
                escape(r.reason),
                str(len(r.lost)),
                f"{len(r.recovered)} of {len(r.lost)}",
                plural(len(r.injected), "entry", "entries")
                if r.injected
                else f"none: {escape(r.empty_reason or 'nothing_relevant')}",
                f"{r.chars:,}",
                "–" if r.latency_ms is None else f"{r.latency_ms:,.0f}",
            )
        console = stdout_console()
        console.print(table)
        for r in rows:
            for line in loss_lines(r.loss, head=f"event {r.id}: "):
                console.print(escape(safe(line)), soft_wrap=True, highlight=False)

    guard(run)


def feedback(
    ctx: typer.Context,
    ids: list[int] = typer.Argument(..., metavar="ID", help="Entry ids (as shown by recover --json or search)."),
    useful: Optional[bool] = typer.Option(
        None,
        "--useful/--not-useful",
        show_default=False,
        help="Whether the recovered entries helped (one of the two is required).",
    ),
    user: Optional[str] = user_option(
        'Only this user\'s entries are updated (default $LANTERN_USER, else the default user "").'
    ),
    agent: Optional[str] = typer.Option(
        None, "--agent", callback=utf8, help="Only this agent's entries are updated (default any)."
    ),
    project: Optional[str] = typer.Option(
        None, "--project", callback=utf8, help="Only this project's entries are updated (default any)."
    ),
) -> None:
    """Tell Lantern whether recovered entries were useful (updates their success rate σ; reinforce.py)."""
    if useful is None:
        ctx.fail("give --useful or --not-useful")

    def run():
        with open_db() as lantern:
            n = lantern.feedback(ids, useful, user=user, agent=agent, project=project)
            asked = list(dict.fromkeys(ids))
            missing = lantern.outside_scope(asked, user=user, agent=agent, project=project) if n < len(asked) else []
        print(f"{plural(n, 'entry', 'entries')} marked {'useful' if useful else 'not useful'}")
        if missing:
            scope = (
                ("this user" if user is None else f"user {user!r}")
                + (f" under agent {agent!r}" if agent is not None else "")
                + (f" in project {project!r}" if project is not None else "")
            )
            if len(missing) == 1:
                line = f"entry {missing[0]} is not an entry of {scope}; nothing changed for it"
            else:
                listed = ", ".join(map(str, missing[:10])) + (", …" if len(missing) > 10 else "")
                line = f"{len(missing)} of the ids are not entries of {scope} ({listed}); nothing changed for them"
            typer.secho(f"warning: {line}", err=True, fg=typer.colors.YELLOW)

    guard(run)
