"""Compaction events in the ``events`` table (migration ``m006_events``): one row per compaction that an integration
(the proxy, the Claude Code hooks) or the Python API (``compaction.Compaction.recover``) detected and recovered for.

A row is small by design: entry ids and character counts, never a copy of a turn's text. The texts it keeps are
the recovery's query (redacted like archived text, at most ``QUERY_CHARS`` characters), so the inspector can
explain the recovery again, and the loss report of a compaction recovery (migration ``m011_event_receipts``:
``Loss.to_json`` bounded by ``bound_loss``: the counts by type, at most ``LOSS_PACKED`` items packed and
``LOSS_CUT`` cut, each a short value of an archived turn, which was redacted when it was archived). Each row is
also a receipt: ``empty_reason`` says why nothing was injected (None: a block was) and ``latency_ms`` how long the
recovery took. ``forget`` removes events with the entries they describe (``forget_events``, called by
``Store.delete`` in its transaction): the events of a forgotten session or user go; an event that listed a
forgotten entry loses that id, its query and its loss report (both may quote the forgotten turn), and goes when no
id is left.

SQL only; every function takes the caller's open connection ``db``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lantern.scope import Scope
from lantern.store.times import from_epoch

QUERY_CHARS = 4000  # ours: the query kept per event (the integrations' queries: a question + <= 2,000 of summary)
KEEP_EVENTS = 10_000  # ours: events kept per database; older ones are deleted as new ones come in
LOSS_PACKED = 30  # ours: packed items kept per event's loss report
LOSS_CUT = 10  # ours: cut items kept per event's loss report (the best-weighted ones)
LOSS_VALUE_CHARS = 200  # ours: a kept item's value is cut to this many characters
# why nothing was injected, besides ``Recovery.reason`` (nothing_archived, nothing_lost, budget): the receipts of
# the integrations
EMPTY_REASONS = ("no_compaction", "nothing_relevant", "host_cap", "error")

__all__ = [
    "EventRecord",
    "QUERY_CHARS",
    "add_event",
    "bound_loss",
    "events",
    "events_per_day",
    "forget_events",
    "event_count",
]

_COLUMNS = (
    "id, time, session, user_id, agent_id, project, source, reason, lost, query, injected, chars, budget, rerank, "
    "empty_reason, latency_ms, loss"
)


@dataclass
class EventRecord:
    """One recorded compaction. ``lost``: the archived entries of the session that were no longer in the live
    context (turn order). ``injected``: ``(entry id, characters, excerpt)`` per entry of the injected block, in
    block order. ``recovered`` / ``not_recovered``: the lost entries that were / were not injected. ``agent`` /
    ``project``: the scope's filters when detection ran (None: any). ``empty_reason``: why nothing was injected
    (``Recovery.reason`` or one of ``EMPTY_REASONS``; None when a block was); ``latency_ms``: the recovery's wall
    time in milliseconds (None: not measured); ``loss``: the bounded loss report (``bound_loss``; None: not a
    compaction recovery, or forgotten)."""

    id: int
    time: datetime
    session: str
    source: str
    reason: str
    lost: list[int]
    query: str
    injected: list[tuple[int, int, bool]]
    chars: int
    budget: int
    rerank: bool = False
    user: str = ""
    agent: str | None = None
    project: str | None = None
    recovered: list[int] = field(default_factory=list)
    not_recovered: list[int] = field(default_factory=list)
    empty_reason: str | None = None
    latency_ms: float | None = None
    loss: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "time": self.time.isoformat(),
            "session": self.session,
            "user": self.user,
            "agent": self.agent,
            "project": self.project,
            "source": self.source,
            "reason": self.reason,
            "lost": self.lost,
            "recovered": self.recovered,
            "not_recovered": self.not_recovered,
            "injected": [{"id": i, "chars": c, "excerpt": x} for i, c, x in self.injected],
            "chars": self.chars,
            "budget": self.budget,
            "rerank": self.rerank,
            "query": self.query,
            "empty_reason": self.empty_reason,
            "latency_ms": self.latency_ms,
            "loss": self.loss,
        }


def bound_loss(report: dict[str, Any] | None) -> dict[str, Any] | None:
    """A loss report (``Loss.to_json``: ``{"lost", "kept", "packed", "by_type", "items", "cut"}``) cut to what an
    event keeps: every count, the first ``LOSS_PACKED`` packed items and ``LOSS_CUT`` cut ones, each value at most
    ``LOSS_VALUE_CHARS`` characters. None stays None."""
    if report is None:
        return None

    def short(items: Any, n: int) -> list[dict[str, Any]]:
        kept = []
        for item in list(items or [])[:n]:
            value = str(item.get("value", ""))
            kept.append({**item, "value": value[:LOSS_VALUE_CHARS] + ("…" if len(value) > LOSS_VALUE_CHARS else "")})
        return kept

    return {
        **{k: report[k] for k in ("lost", "kept", "packed", "by_type") if k in report},
        "items": short(report.get("items"), LOSS_PACKED),
        "cut": short(report.get("cut"), LOSS_CUT),
    }


def add_event(
    db: sqlite3.Connection,
    *,
    time: float,
    session: str,
    scope: Scope,
    source: str,
    reason: str,
    lost: Sequence[int],
    query: str,
    injected: Sequence[tuple[int, int, bool]],
    chars: int,
    budget: int,
    rerank: bool = False,
    empty_reason: str | None = None,
    latency_ms: float | None = None,
    loss: dict[str, Any] | None = None,
) -> int:
    """Insert one event; only the newest ``KEEP_EVENTS`` are kept. ``lost`` is a set of entries: each id once, in
    first-given order (a repeated turn is stored once, so callers mapping turns to entries can name one twice).
    ``loss`` is stored as ``bound_loss`` cuts it. Returns its id."""
    bounded = bound_loss(loss)
    cur = db.execute(
        "INSERT INTO events(time, session, user_id, agent_id, project, source, reason, lost, query, injected, chars, "
        "budget, rerank, empty_reason, latency_ms, loss) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            time,
            session,
            scope.user,
            scope.agent,
            scope.project,
            source,
            reason,
            json.dumps(list(dict.fromkeys(int(i) for i in lost))),
            query[:QUERY_CHARS],
            json.dumps([[int(i), int(c), bool(x)] for i, c, x in injected]),
            int(chars),
            int(budget),
            int(bool(rerank)),
            empty_reason,
            None if latency_ms is None else round(float(latency_ms), 2),
            None if bounded is None else json.dumps(bounded, ensure_ascii=False),
        ),
    )
    db.execute(
        "DELETE FROM events WHERE id <= (SELECT id FROM events ORDER BY id DESC LIMIT 1 OFFSET ?)", (KEEP_EVENTS,)
    )
    return cur.lastrowid


def _where(scope: Scope | None, session: str | None, event_id: int | None) -> tuple[str, list[Any]]:
    parts, args = ["1 = 1"], []  # true on both backends (PostgreSQL has no integer truth)
    if scope is not None:
        parts.append("user_id = ?")
        args.append(scope.user)
        if scope.agent is not None:
            parts.append("agent_id = ?")
            args.append(scope.agent)
        if scope.project is not None:
            parts.append("project = ?")
            args.append(scope.project)
    if session is not None:  # events of the session, of its parent sessions (a recovery over the parent covers it)
        parts.append("(session = ? OR substr(?, 1, length(session) + 1) = session || '/')")
        args += [session, session]
    if event_id is not None:
        parts.append("id = ?")
        args.append(event_id)
    return " AND ".join(parts), args


def events(
    db: sqlite3.Connection,
    *,
    scope: Scope | None = None,
    session: str | None = None,
    event_id: int | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> list[EventRecord]:
    """Events within ``scope`` (None: every user; agent / project matched exactly when given), of ``session`` and
    of the sessions it is a sub-session of, newest first; at most ``limit`` of them after the first ``offset`` (a
    page: time and id order every event, so pages neither repeat nor skip one)."""
    where, args = _where(scope, session, event_id)
    sql = f"SELECT {_COLUMNS} FROM events WHERE {where} ORDER BY time DESC, id DESC"
    if limit is not None or offset:
        sql += " LIMIT ? OFFSET ?"
        args += [-1 if limit is None else int(limit), int(offset)]
    return [_record(row) for row in db.execute(sql, args)]


def event_count(db: sqlite3.Connection) -> int:
    return db.execute("SELECT count(*) FROM events").fetchone()[0]


def events_per_day(db: sqlite3.Connection, scope: Scope | None = None) -> list[tuple[str, int]]:
    """``(YYYY-MM-DD, events)`` per UTC day that has any, oldest first."""
    where, args = _where(scope, None, None)
    return db.execute(
        f"SELECT date(time, 'unixepoch') AS day, count(*) FROM events WHERE {where} GROUP BY day ORDER BY day", args
    ).fetchall()


def forget_events(
    db: sqlite3.Connection,
    deleted: Sequence[tuple[int, str, str]],
    *,
    session: str | None = None,
    scope: Scope | None = None,
    whole: bool = False,
) -> None:
    """The events' part of a deletion (``Store.delete``, in its transaction). ``deleted``: ``(entry id, user,
    session, archived_at)`` of every entry deleted (``archived_at`` in unix seconds). ``whole``: the deletion
    selected by session and/or scope (not one entry): the events those selectors name are deleted too
    (``session``: that session and its sub-sessions; ``scope``: its user, and its agent / project when given).
    Every other event of a deleted entry's user that lists a deleted id, or whose session is (a parent of) the
    session of a deleted entry archived before the event (its query may quote that turn; a turn archived later,
    such as the reply a rewind abandons, it cannot), loses those ids and its query; one left with no id at all is
    deleted."""
    if whole:
        parts, args = [], []
        if session is not None:
            parts.append("(session = ? OR substr(session, 1, length(?) + 1) = ? || '/')")
            args += [session, session, session]
        where, more = _where(scope, None, None)
        db.execute(f"DELETE FROM events WHERE {' AND '.join([*parts, where])}", [*args, *more])
    if not deleted:
        return
    gone = {int(i) for i, *_ in deleted}
    sessions: dict[str, dict[str, float]] = {}  # user -> session -> its oldest deleted entry's archived_at
    for _, user, sess, archived_at in deleted:
        oldest = sessions.setdefault(user, {})
        oldest[sess] = min(oldest.get(sess, archived_at), archived_at)
    for user, names in sessions.items():
        rows = db.execute("SELECT id, session, lost, injected, time FROM events WHERE user_id = ?", (user,)).fetchall()
        for event_id, sess, lost_json, injected_json, when in rows:
            lost, injected = json.loads(lost_json), json.loads(injected_json)
            kept_lost = [i for i in lost if i not in gone]
            kept_injected = [x for x in injected if x[0] not in gone]
            related = any((n == sess or n.startswith(sess + "/")) and t <= when for n, t in names.items())
            if len(kept_lost) == len(lost) and len(kept_injected) == len(injected) and not related:
                continue
            if not kept_lost and not kept_injected:
                db.execute("DELETE FROM events WHERE id = ?", (event_id,))
            else:
                db.execute(
                    "UPDATE events SET lost = ?, injected = ?, query = '', loss = NULL WHERE id = ?",
                    (json.dumps(kept_lost), json.dumps(kept_injected), event_id),
                )


def _record(row: tuple) -> EventRecord:
    lost = json.loads(row[8])
    injected = [(int(i), int(c), bool(x)) for i, c, x in json.loads(row[10])]
    injected_ids = {i for i, _, _ in injected}
    return EventRecord(
        id=row[0],
        time=from_epoch(row[1]),
        session=row[2],
        user=row[3],
        agent=row[4],
        project=row[5],
        source=row[6],
        reason=row[7],
        lost=lost,
        query=row[9],
        injected=injected,
        chars=row[11],
        budget=row[12],
        rerank=bool(row[13]),
        empty_reason=row[14],
        latency_ms=row[15],
        loss=json.loads(row[16]) if row[16] else None,
        recovered=[i for i in lost if i in injected_ids],
        not_recovered=[i for i in lost if i not in injected_ids],
    )
