"""Database-wide read queries for the inspector (``lantern ui``, integrations/ui): sessions with their counts and
time spans, entries per day, bytes per table. Read only; every function takes an open connection ``db``.

These reads cross users on purpose: the inspector is the database owner's local view of the whole file (as
``lantern stats`` and ``lantern export`` without a user are). Each row names its user.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime

from lantern.store.times import from_epoch

__all__ = ["SessionRow", "entries_per_day", "session_entry_ids", "sessions", "table_bytes"]


@dataclass
class SessionRow:
    """One session of one user: its entries, characters, the agents / projects its entries carry, the event times
    of its first and last entry (event time, else archive time), and its compaction events."""

    user: str
    session: str
    entries: int
    chars: int
    agents: list[str]
    projects: list[str]
    first: datetime | None
    last: datetime | None
    events: int = 0


def sessions(db: sqlite3.Connection, query: str | None = None, limit: int = 1000, offset: int = 0) -> list[SessionRow]:
    """(user, session) rows, the most recent first: by the event time (else archive time) of the session's last
    turn, then user and session, an order that pages (``limit`` rows after ``offset``) neither repeat nor skip.
    ``query``: only sessions whose name or one of whose turns contains it (case-insensitive for ASCII letters)."""
    where, args = "", []
    if query:
        where = (
            "WHERE (user_id, session) IN (SELECT user_id, session FROM entries "
            "WHERE instr(lower(session), lower(?)) > 0 OR instr(lower(text), lower(?)) > 0)"
        )
        args = [query, query]
    rows = db.execute(
        "SELECT user_id, session, count(*), coalesce(sum(length(text)), 0), group_concat(DISTINCT agent_id), "
        "group_concat(DISTINCT project), min(coalesce(time, archived_at)), max(coalesce(time, archived_at)) "
        f"FROM entries {where} GROUP BY user_id, session "
        "ORDER BY max(coalesce(time, archived_at)) DESC, user_id, session LIMIT ? OFFSET ?",
        [*args, limit, offset],
    ).fetchall()
    counts = dict(
        ((u, s), n) for u, s, n in db.execute("SELECT user_id, session, count(*) FROM events GROUP BY user_id, session")
    )
    out = []
    for user, session, n, chars, agents, projects, first, last in rows:
        events = sum(c for (u, s), c in counts.items() if u == user and (s == session or session.startswith(s + "/")))
        out.append(
            SessionRow(
                user=user,
                session=session,
                entries=n,
                chars=chars,
                agents=[a for a in (agents or "").split(",") if a],
                projects=[p for p in (projects or "").split(",") if p],
                first=from_epoch(first),
                last=from_epoch(last),
                events=events,
            )
        )
    return out


def session_entry_ids(db: sqlite3.Connection, session: str, user: str) -> list[int]:
    """The ids of the entries of ``session`` and of its sub-sessions (``session/...``) of ``user``: in turn order
    for one session, by event time (else archive time) then turn when sub-sessions are mixed in."""
    rows = db.execute(
        "SELECT id, session, turn, coalesce(time, archived_at) FROM entries WHERE user_id = ? "
        "AND (session = ? OR substr(session, 1, length(?) + 1) = ? || '/')",
        (user, session, session, session),
    ).fetchall()
    if len({r[1] for r in rows}) > 1:
        rows.sort(key=lambda r: (r[3], r[1] != session, r[1], r[2]))
    else:
        rows.sort(key=lambda r: r[2])
    return [r[0] for r in rows]


def entries_per_day(db: sqlite3.Connection) -> list[tuple[str, int]]:
    """``(YYYY-MM-DD, entries)`` per UTC day of the entries' event time (else archive time), oldest first."""
    return db.execute(
        "SELECT date(coalesce(time, archived_at), 'unixepoch') AS day, count(*) FROM entries GROUP BY day ORDER BY day"
    ).fetchall()


def table_bytes(db: sqlite3.Connection) -> list[tuple[str, int]] | None:
    """``(table, bytes)`` per table, its indexes and (for the full-text index) its shadow tables counted with it,
    largest first; None when SQLite was built without the ``dbstat`` table."""
    try:
        pages = db.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
    except sqlite3.OperationalError:
        return None
    owner = dict(db.execute("SELECT name, tbl_name FROM sqlite_master"))
    sizes: dict[str, int] = {}
    for name, size in pages:
        table = owner.get(name, name)
        if table.startswith("entries_fts_"):
            table = "entries_fts"
        elif table.startswith("sqlite_autoindex_"):
            table = table[len("sqlite_autoindex_") :].rsplit("_", 1)[0]
        sizes[table] = sizes.get(table, 0) + int(size or 0)
    return sorted(sizes.items(), key=lambda kv: -kv[1])
