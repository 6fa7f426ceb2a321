"""The rows reinforcement reads and writes: c and σ of entries, and the pending recoveries (table ``recoveries``).

SQL only; the rules that compute the values live in lantern/reinforce.py (paper Appendix D). Every function takes
the caller's open connection ``db`` and writes inside the caller's transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence

ID_CHUNK = 500  # entry ids per SQL IN (...) (ours; SQLite's default limit is 32,766)

__all__ = [
    "add_pending",
    "delete_pending",
    "forget_pending",
    "in_scope",
    "pending",
    "pending_count",
    "pruned_count",
    "read_columns",
    "write_confidence",
    "write_success",
]


def _chunks(ids: Sequence[int]) -> Iterable[list[int]]:
    for start in range(0, len(ids), ID_CHUNK):
        yield list(ids[start : start + ID_CHUNK])


def in_scope(db: sqlite3.Connection, ids: Sequence[int], where: tuple[str, Sequence]) -> list[int]:
    """The ids among ``ids`` whose entry satisfies ``where`` (an SQL condition on ``entries``, its parameters)."""
    sql, params = where
    out: list[int] = []
    for chunk in _chunks(ids):
        marks = ",".join("?" * len(chunk))
        out += [r[0] for r in db.execute(f"SELECT id FROM entries WHERE id IN ({marks}) AND {sql}", [*chunk, *params])]
    return out


def read_columns(db: sqlite3.Connection, ids: Sequence[int], columns: str) -> list[tuple]:
    """``(id, *columns)`` of the entries among ``ids`` (``columns``: e.g. ``"confidence, success"``)."""
    out: list[tuple] = []
    for chunk in _chunks(ids):
        marks = ",".join("?" * len(chunk))
        out += db.execute(f"SELECT id, {columns} FROM entries WHERE id IN ({marks})", chunk).fetchall()
    return out


def write_confidence(db: sqlite3.Connection, values: dict[int, float]) -> None:
    """Set c of each entry id to its value."""
    db.executemany("UPDATE entries SET confidence = ? WHERE id = ?", [(c, i) for i, c in values.items()])


def write_success(db: sqlite3.Connection, values: dict[int, float]) -> None:
    """Set σ of each entry id to its value."""
    db.executemany("UPDATE entries SET success = ? WHERE id = ?", [(s, i) for i, s in values.items()])


def add_pending(
    db: sqlite3.Connection, session: str | None, ids: Sequence[int], time: float, user: str, keep: int
) -> None:
    """Record a recovery waiting for its usefulness check; only the newest ``keep`` pending rows are kept (a
    recovery nobody answers must not grow the table forever)."""
    db.execute(
        "INSERT INTO recoveries(session, entry_ids, time, user_id) VALUES (?, ?, ?, ?)",
        (session, json.dumps(list(ids)), time, user),
    )
    db.execute(
        "DELETE FROM recoveries WHERE id <= (SELECT id FROM recoveries ORDER BY id DESC LIMIT 1 OFFSET ?)", (keep,)
    )


def pending(db: sqlite3.Connection) -> list[tuple[int, str | None, list[int], str]]:
    """The pending recoveries, oldest first: (id, session or None for any, entry ids, user)."""
    rows = db.execute("SELECT id, session, entry_ids, user_id FROM recoveries WHERE resolved = 0 ORDER BY id")
    return [(i, s, json.loads(ids), u) for i, s, ids, u in rows]


def delete_pending(db: sqlite3.Connection, ids: Sequence[int]) -> None:
    """Delete judged recoveries (their only use was the judgement)."""
    db.executemany("DELETE FROM recoveries WHERE id = ?", [(i,) for i in ids])


def forget_pending(db: sqlite3.Connection, entry_ids: Sequence[int]) -> None:
    """Remove deleted entries from the pending recoveries (``Store.delete``): their ids leave every row, and a row
    left empty is deleted. Forgetting leaves no reinforcement state behind."""
    gone = {int(i) for i in entry_ids}
    if not gone:
        return
    for rec_id, ids_json in db.execute("SELECT id, entry_ids FROM recoveries").fetchall():
        ids = json.loads(ids_json)
        kept = [i for i in ids if i not in gone]
        if not kept:
            db.execute("DELETE FROM recoveries WHERE id = ?", (rec_id,))
        elif len(kept) != len(ids):
            db.execute("UPDATE recoveries SET entry_ids = ? WHERE id = ?", (json.dumps(kept), rec_id))


def pruned_count(db: sqlite3.Connection, prune_below: float, where: tuple[str, list] = ("1 = 1", [])) -> int:
    """How many entries have c below ``prune_below`` (among those ``where`` selects: a ``scope_where``)."""
    sql, args = where
    return db.execute(f"SELECT count(*) FROM entries WHERE confidence < ? AND {sql}", (prune_below, *args)).fetchone()[
        0
    ]


def pending_count(db: sqlite3.Connection, user: str | None = None) -> int:
    """How many recoveries still wait for the next assistant message of their session (of ``user``; None: any)."""
    if user is None:
        return db.execute("SELECT count(*) FROM recoveries WHERE resolved = 0").fetchone()[0]
    return db.execute("SELECT count(*) FROM recoveries WHERE resolved = 0 AND user_id = ?", (user,)).fetchone()[0]
