"""The read path's commands: ``recover`` (``Lantern.recover`` / ``recover_compaction``), ``search``
(``Lantern.search`` / ``explain``), ``facts``, ``events`` and ``feedback``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from lantern.cli.common import guard, iso_time, open_db, warm_answer
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
from lantern.cli.render import (
    explain_rows,
    note,
    outside_scope_line,
    print_events,
    print_facts,
    print_json,
    print_recovery,
    print_search_table,
    print_warm,
    search_rows,
    warnings_on_stderr,
)
from lantern.config import DEFAULT, DEFAULT_SESSION
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
        '"reranked", "llm_calls", "tokens_in", "tokens_out"; with --summary "loss" (always; zero counts when '
        "nothing was archived).",
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
        help="A compaction summary file, UTF-8 text up to 1,000,000 characters ('-': stdin; an empty file: none): "
        "recover what it and --live lost from "
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
    scope = {"user": user, "agent": agent, "project": project}

    def run():
        when, exclude = iso_time(as_of, "--as-of"), live_messages(live)
        asked = {"session": session, "budget": budget, "min_score": min_score}
        if not rerank and when is None and exclude is None:
            warm = warm_answer("recover", {"query": query}, {**asked, "agent": agent, "project": project}, user)
            if print_warm(warm, as_json):  # an empty block: in-process, which says why
                return
        with open_db() as lantern, warnings_on_stderr():
            result = lantern.recover(query, **asked, as_of=when, rerank=rerank, llm=llm, exclude=exclude, **scope)
            as_asked = as_of if when is not None else None
            print_recovery(result, as_json, lambda: lantern.why_empty(result, session=session, as_of=as_asked, **scope))

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
        from lantern.compaction import read_summary

        text = read_summary(summary)
        kwargs = {"session": session, "budget": budget, "agent": agent, "project": project}
        if (
            live is None
            and not rerank
            and print_warm(warm_answer("recover_compaction", {"summary": text}, kwargs, user), as_json)
        ):
            return
        with open_db() as lantern, warnings_on_stderr():
            result = lantern.recover_compaction(
                text, live=live_messages(live), user=user, rerank=rerank, llm=llm, **kwargs
            )
        why = COMPACTION_EMPTY.get(result.reason or "", result.reason or "")
        if result.reason == "nothing_archived":  # which session was read, as given or the default
            why = why.replace("the session", f"session {session!r}" if session else f"the {DEFAULT_SESSION!r} session")
        print_recovery(result, as_json, lambda: why, short=False)

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
    scope = {"session": session, "user": user, "agent": agent, "project": project, "min_score": min_score}

    def run():
        exclude = live_messages(live)
        with open_db() as lantern, warnings_on_stderr():
            if explain:
                result = lantern.explain(query, budget=budget, rerank=rerank, llm=llm, exclude=exclude, **scope)
                rows = explain_rows(result.candidates)
            else:
                rows = search_rows(lantern.search(query, k=k, **scope))
            why = "" if rows else lantern.why_none(session=session, user=user, agent=agent, project=project)
        if as_json:
            print_json(rows)
        elif not rows and why:
            note(f"nothing found {why}")
        elif not rows and min_score and not explain:
            note(f"nothing found: no archived turn matches at least --min-score {min_score:g}")
        else:
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

    def run():
        with open_db() as lantern:
            rows = lantern.facts(
                key, iso_time(as_of, "--as-of"), history=history, user=user, agent=agent, project=project
            )
        if as_json:
            print_json([r.to_json() for r in rows])
        elif not rows:
            note("no facts")
        else:
            print_facts(rows)

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
        elif not rows:
            why = ""
            if session is not None:  # a session that names nothing: say so, with the closest names
                with open_db() as lantern:
                    why = lantern.why_none(session=session, user=user, agent=agent, project=project)
            note(
                f"no compaction events {why}"
                if why
                else "no compaction events (the hooks, the proxy, MCP, REST and recover_compaction(record=True) "
                "record them; recover --summary does not)"
            )
        else:
            print_events(rows)

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
            note(outside_scope_line(missing, user, agent, project))

    guard(run)
