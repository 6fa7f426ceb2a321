"""Why a recovery's block is empty, read off the one recovery that came back empty (its verdicts, its ``reason``, and
the two figures the read path notes when it is empty: ``Recovery.least_budget`` and ``Recovery.later_from``), never
by running it again. ``Lantern.why_empty`` words it for ``lantern recover``'s line on stderr.

    the query is empty                        -> say so
    no candidate, an as_of time asked         -> the turns the scope holds all came later: when they start
    no candidate                              -> the filter (user, agent / project, session) that left every entry out
    every candidate under the relevance floor -> the best relevance and the floor
    every candidate cut for the budget        -> the least budget that packs an entry (``least_budget``)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone

from lantern.model import Recovery
from lantern.recover.pack import FULL_BELOW, title
from lantern.recover.rank import candidate_mask
from lantern.scope import Scope
from lantern.store.index import MemoryIndex
from lantern.text.names import plural

__all__ = ["BUDGET_LIMIT", "ScopeCounts", "earliest_after", "least_budget", "why_empty"]

BUDGET_LIMIT = 1_000_000  # characters: past this, no least budget is named (ours)


def least_budget(packs: Callable[[int], bool], budget: int, limit: int = BUDGET_LIMIT) -> int | None:
    """The least budget above ``budget`` at which ``packs(b)`` (the same ranked candidates, packed into ``b``
    characters, give an entry) holds: doubling, then bisection (packing more room never packs less); None past
    ``limit`` characters. Each call of ``packs`` packs again; nothing is ranked again."""
    lo, hi = budget, max(budget * 2, budget + 64)
    while not packs(hi):
        lo, hi = hi, hi * 2
        if hi > limit:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if packs(mid) else (mid, hi)
    return hi


def earliest_after(
    index: MemoryIndex, session: str | None, scope: Scope, exclude_ids: Iterable[int], at: float
) -> datetime | None:
    """When the earliest turn inside ``session`` and ``scope`` (not in ``exclude_ids``) after the Unix time ``at``
    happened (the index's time, as the as-of filter reads it; a UTC datetime), or None when there is none: why a
    recovery ``as_of`` ``at`` found no candidate. One pass over the index's columns."""
    index.refresh()
    allowed = candidate_mask(index, session, scope, exclude_ids).allowed
    later = index.time > at if allowed is None else allowed & (index.time > at)
    return datetime.fromtimestamp(float(index.time[later].min()), tz=timezone.utc) if later.any() else None


@dataclass(frozen=True)
class ScopeCounts:
    """How many entries the store holds (``total``), how many of them are the ``scope``'s user's (``user``), inside
    its agent / project filters too (``filtered``), and in ``session`` as well (``in_session``: the session or its
    sub-sessions, as recovery reads it): ``Store.scope_counts``."""

    total: int
    user: int
    filtered: int
    in_session: int
    scope: Scope
    session: str | None
    near: tuple[str, ...] = ()  # the scope's sessions named closest to ``session`` (``Lantern.sessions_like``)


def why_empty(recovery: Recovery, counts: Callable[[], ScopeCounts] | None = None, as_of: str | None = None) -> str:
    """Why the empty ``recovery`` is empty, one sentence in words (``as_of``: the time it was asked as of, as the
    caller wrote it; ``counts``: called only when no turn was a candidate); "" when its verdicts say nothing more.
    The options named are ``lantern recover``'s (cli/render.py ``print_recovery`` makes it the rest of its
    "nothing recovered" line)."""
    ranked = [c for c in recovery.candidates if not c.verdict.startswith("excluded:")]
    if not (recovery.query or "").strip():
        return "the query is empty (give the question, or the live context's tail after a compaction)"
    if not ranked and as_of is not None and recovery.later_from is not None:
        return (
            f"no archived turn is older than the --as-of time {as_of} (without --as-of the candidates date "
            f"from {recovery.later_from.astimezone(timezone.utc):%Y-%m-%d %H:%M} UTC on)"
        )
    if not ranked:
        named = filtered_out(counts()) if counts is not None else ""
        return "no archived turn is a candidate" + (named or " (all excluded or none archived)")
    if recovery.held_by_floor:
        return (
            f"no archived turn matches well enough (best relevance "
            f"{recovery.relevance.score:.2f}, below the relevance floor {recovery.min_score:g}); --min-score 0 "
            "recovers anyway"
        )
    if any(c.verdict == "cut:budget" for c in ranked):
        sessions = {c.entry.session for c in ranked}
        top = len(title(sessions.pop() if len(sessions) == 1 else None))
        least = recovery.least_budget
        advice = f"use --budget {least} or more" if least is not None else "use a larger --budget"
        return (
            f"--budget {recovery.budget} leaves no room for an entry after the block's title line ({top} "
            f"characters; an entry needs {FULL_BELOW} or more): {advice}"
        )
    return ""


def filtered_out(counts: ScopeCounts) -> str:
    """The words after "no archived turn is a candidate" naming the filter that left every entry of the store out
    (the user, then agent / project, then the session), or "" when the scope holds entries (or the store none)."""
    scope = counts.scope

    def entries(n: int) -> str:
        return plural(n, "entry is", "entries are")

    if not counts.total:
        return " (the database holds no entry)"
    if not counts.user:
        who = f"user {scope.user!r}" if scope.user else 'the default user ""'
        return f" for {who} ({entries(counts.total)} under other users: --user or $LANTERN_USER picks the user)"
    if not counts.filtered:
        named = [
            f"{kind} {value!r}"
            for kind, value in (("agent", scope.agent), ("project", scope.project))
            if value is not None
        ]
        return (
            f" for {' and '.join(named)} (this user's {entries(counts.user)} outside "
            f"{'it' if len(named) == 1 else 'them'})"
        )
    if not counts.in_session:
        closest = f"; the closest: {', '.join(map(repr, counts.near))}" if counts.near else ""
        return f" in session {counts.session!r} ({entries(counts.filtered)} in other sessions{closest})"
    return ""
