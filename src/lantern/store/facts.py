"""Bi-temporal fact records in the ``facts`` table (migration ``m004_facts``; docs/architecture.md §5.4).

One row per stated fact: ``valid_from`` is the event time of its source turn (the entry's ``time``, else its
``archived_at``), ``recorded_at`` when Lantern stored it, ``valid_to`` the ``valid_from`` of the next record of the
same key (NULL: the current value), ``superseded_by`` that record's id. A key's records form one chain per
*scope* ordered by event time, not arrival: an insert is linked in at its event-time position (its neighbours
re-linked), a delete joins its neighbours, so a replayed or imported old message slots into its place in history
instead of becoming "current". Nothing is ever
deleted by a contradiction; only ``forget`` of the source entry removes a fact (and re-links its chain).

Scope (ours): a chain spans every session of one user — people change their minds across sessions. ``fact_scope``
is the source entry's user (``""`` for the default user): one chain per key and user.

Every read joins ``entries e`` on ``entry_id`` and takes an explicit ``where`` SQL fragment on ``e`` with its
``params`` (e.g. ``"e.user_id = ?"``, ``("u1",)``), so a scope filter applies to facts exactly as to entries.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lantern import lazy_re
from lantern.model import ExtractedFact
from lantern.scope import clean_name
from lantern.store.times import from_epoch
from lantern.text.fact_keys import normalize_key, normalize_value

__all__ = ["FactRecord", "fact_scope", "write_facts", "delete_facts", "records", "facts_of_entries", "values_at"]


@dataclass
class FactRecord:
    """One version of a fact. ``value`` None: retracted ("no longer use A"). ``replaces``: the old value a switch or
    retraction named. Times are UTC datetimes; ``valid_to`` None while current. ``current``: valid at the time the
    read asked about (now, or ``as_of``). ``entry_id``/``session``/``turn``: the source turn."""

    id: int
    key: str
    key_text: str
    value: str | None
    replaces: str | None
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    superseded_by: int | None
    entry_id: int
    session: str
    turn: int
    scope: str = ""
    current: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "key": self.key,
            "key_text": self.key_text,
            "value": self.value,
            "replaces": self.replaces,
            "valid_from": self.valid_from.isoformat(),
            "valid_to": self.valid_to.isoformat() if self.valid_to else None,
            "recorded_at": self.recorded_at.isoformat(),
            "superseded_by": self.superseded_by,
            "entry_id": self.entry_id,
            "session": self.session,
            "turn": self.turn,
            "scope": self.scope,
            "current": self.current,
        }


def fact_scope(row: Any) -> str:
    """The chain scope of a prepared entry: its user (lantern/scope.py; ``""`` is the default user)."""
    return str(getattr(row, "user", None) or "")


# ----------------------------------------------------------------------------------------------- write
#: The longest fact key, key text, value or replaced value stored, in UTF-8 bytes, on both backends: with a scope
#: (a user id, at most 256 characters) it keeps each row of the indexes on (scope, key) and (scope, value_norm)
#: under PostgreSQL's 2,704-byte B-tree limit. Extraction keeps far below (archive/facts.py: values of at most 80
#: characters); an import is refused beyond it (portability.py).
MAX_FACT_BYTES = 1024


def fact_too_long(fact: ExtractedFact) -> str | None:
    """The first field of ``fact`` (key, key_text, value, replaces, or the normalized value) longer than
    ``MAX_FACT_BYTES`` in UTF-8, None when none is."""
    fields = {"key": fact.key, "key_text": fact.key_text, "value": fact.value, "replaces": fact.replaces}
    if fact.value is not None:
        fields["value (normalized)"] = normalize_value(fact.value)
    for name, text in fields.items():
        if text is not None and len(text) * 4 > MAX_FACT_BYTES and len(text.encode("utf-8")) > MAX_FACT_BYTES:
            return name
    return None


def write_facts(
    db: sqlite3.Connection, entry_id: int, facts: Sequence[ExtractedFact], recorded_at: float, scope: str = ""
) -> None:
    """Replace the facts of ``entry_id`` (inside the caller's transaction), each linked into its key's chain.

    A fact without a key (a switch or retraction that names only the old value A) takes the key whose value was A
    at the turn's event time in this scope, before this turn's own facts; failing that, A itself (normalized) is
    the key. A retraction whose key this same turn sets to a new value is not stored ("端口改为 9443，不再用 8443",
    "set the port to 9443, we no longer use 8443"): the new value already ends A, in one version (ours). Nor is a
    retraction of a bare number no key held ("set the port to 5434, we no longer use 5433" where 5433 was never
    archived): its key would be the number itself, listed by ``facts`` as a current "5433: (retracted)"
    (ours). A retracted name no key held keeps itself as the key ("we no longer use Redis"). A fact with a field
    over ``MAX_FACT_BYTES`` is not stored."""
    _remove(db, [entry_id])
    facts = [f for f in facts if fact_too_long(f) is None]  # no fact states a kilobyte as its key or value
    if not facts:
        return
    event = db.execute("SELECT coalesce(time, archived_at) FROM entries WHERE id = ?", (entry_id,)).fetchone()[0]
    resolved = [
        (f, *_resolve_key(db, scope, f, event)) for f in facts
    ]  # all before any insert: the state before this turn
    set_here = {key for f, key, _ in resolved if f.value is not None}
    for f, key, key_text in resolved:
        if not key or (f.value is None and key in set_here):
            continue
        cur = db.execute(
            "INSERT INTO facts(entry_id, scope, key, key_text, value, value_norm, replaces, valid_from, recorded_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (entry_id, scope, key, key_text, f.value, normalize_value(f.value), f.replaces, event, recorded_at),
        )
        _link(db, cur.lastrowid, scope, key, event)


_BARE_NUMBER = lazy_re.compile(r"[\d.,:_-]*\d[\d.,:_-]*")  # 5433, 8,443, 10.0.0.1, 2026-03-14: no letters


def delete_facts(db: sqlite3.Connection, entry_ids: Sequence[int]) -> None:
    """Delete the facts of entries being forgotten, re-linking their chains (the previous value becomes current
    again), inside the caller's transaction."""
    _remove(db, entry_ids)


def _neighbours(
    db: sqlite3.Connection, scope: str, key: str, valid_from: float, fid: int
) -> tuple[tuple | None, tuple | None]:
    """The records just before and just after (valid_from, id) in the key's chain: (id, valid_from) or None."""
    before = db.execute(
        "SELECT id, valid_from FROM facts WHERE scope = ? AND key = ? AND (valid_from < ? OR (valid_from = ? AND id < "
        "?)) "
        "ORDER BY valid_from DESC, id DESC LIMIT 1",
        (scope, key, valid_from, valid_from, fid),
    ).fetchone()
    after = db.execute(
        "SELECT id, valid_from FROM facts WHERE scope = ? AND key = ? AND (valid_from > ? OR (valid_from = ? AND id > "
        "?)) "
        "ORDER BY valid_from, id LIMIT 1",
        (scope, key, valid_from, valid_from, fid),
    ).fetchone()
    return before, after


def _link(db: sqlite3.Connection, fid: int, scope: str, key: str, valid_from: float) -> None:
    """Insert record ``fid`` into its chain by event time (then id: the later statement of one moment wins): it
    ends where its successor starts, and its predecessor now ends where it starts. Two indexed look-ups, so a
    long-lived key costs the same as a new one."""
    before, after = _neighbours(db, scope, key, valid_from, fid)
    db.execute(
        "UPDATE facts SET valid_to = ?, superseded_by = ? WHERE id = ?",
        (after[1] if after else None, after[0] if after else None, fid),
    )
    if before:
        db.execute("UPDATE facts SET valid_to = ?, superseded_by = ? WHERE id = ?", (valid_from, fid, before[0]))


def _remove(db: sqlite3.Connection, entry_ids: Sequence[int]) -> None:
    """Delete the facts of ``entry_ids`` one by one, joining each one's predecessor to its successor."""
    for start in range(0, len(entry_ids), 500):
        chunk = list(entry_ids[start : start + 500])
        marks = ",".join("?" * len(chunk))
        for fid, scope, key, valid_from in db.execute(
            f"SELECT id, scope, key, valid_from FROM facts WHERE entry_id IN ({marks}) ORDER BY id", chunk
        ).fetchall():
            before, after = _neighbours(db, scope, key, valid_from, fid)
            if before:
                db.execute(
                    "UPDATE facts SET valid_to = ?, superseded_by = ? WHERE id = ?",
                    (after[1] if after else None, after[0] if after else None, before[0]),
                )
            db.execute("DELETE FROM facts WHERE id = ?", (fid,))


def _resolve_key(db: sqlite3.Connection, scope: str, f: ExtractedFact, event: float) -> tuple[str, str]:
    """(key, key as written) of ``f``: its own, else the key holding its ``replaces`` value at ``event``, else that
    value itself (normalized), except for a retracted bare number: ("", "")."""
    if f.key:
        return f.key, f.key_text
    held = _key_holding(db, scope, normalize_value(f.replaces), event)
    if held:
        return held, held
    if f.value is None and _BARE_NUMBER.fullmatch((f.replaces or "").strip()):
        return "", ""  # a retracted bare number no key held: no key, so no fact (write_facts)
    return normalize_key(f.replaces or ""), f.replaces or ""


def _key_holding(db: sqlite3.Connection, scope: str, value_norm: str | None, at: float) -> str | None:
    row = db.execute(
        "SELECT key FROM facts WHERE scope = ? AND value_norm = ? AND valid_from <= ? AND (valid_to IS NULL OR "
        "valid_to > ?) "
        "ORDER BY valid_from DESC, id DESC LIMIT 1",
        (scope, value_norm, at, at),
    ).fetchone()
    return row[0] if row else None


# ----------------------------------------------------------------------------------------------- read
_COLUMNS = (
    "f.id, f.key, f.key_text, f.value, f.replaces, f.valid_from, f.valid_to, f.recorded_at, f.superseded_by, "
    "f.entry_id, e.session, e.turn, f.scope"
)


def _facts_join(db: Any) -> str:
    """``facts f`` joined to its source ``entries e``, facts the outer loop. On SQLite a ``CROSS JOIN`` (SQLite's
    manual control of the join order: https://sqlite.org/optoverview.html#crossjoin): with a scope condition on
    ``e`` (``e.user_id = ?``) its planner otherwise walks every entry of the user through the
    ``entries_user_session_turn`` index and probes facts per entry, all 10,000 rows of a 10k store for the default
    user to find the facts of 100 packed entries (1.3 ms instead of 0.3; linear in the store). PostgreSQL plans by
    its statistics and takes no ``ON`` after ``CROSS JOIN``."""
    join = "CROSS JOIN" if isinstance(db, sqlite3.Connection) else "JOIN"
    return f"facts f {join} entries e ON e.id = f.entry_id"


def _select(db: Any) -> str:
    return f"SELECT {_COLUMNS} FROM {_facts_join(db)}"


def _valid_at(at: float | None) -> tuple[str, tuple]:
    if at is None:
        return "f.valid_to IS NULL", ()
    return "f.valid_from <= ? AND (f.valid_to IS NULL OR f.valid_to > ?)", (at, at)


def records(
    db: sqlite3.Connection,
    *,
    key: str | None = None,
    as_of: float | None = None,
    history: bool = False,
    where: str = "",
    params: Sequence[Any] = (),
) -> list[FactRecord]:
    """Fact records, ordered by key then event time. ``key``: one key (normalized here), None for all.
    ``history``: every version (``current`` marks the one valid at ``as_of``/now); else only the versions valid at
    ``as_of`` (unix seconds; None = now). ``where``/``params``: extra SQL condition on ``e`` (the source entry)."""
    clauses, args = [], []
    if key is not None:
        key = clean_name(key)  # as every stored key: NUL and lone surrogates as U+FFFD
        # the normalized form of what was asked, or the key exactly as ``facts`` shows it: normalizing is not
        # idempotent ("MY_KEY" is stored as "my key", which normalizes again to "key")
        clauses.append("f.key IN (?, ?)")
        args += [normalize_key(key), key.strip().casefold()]
    if as_of is not None:
        clauses.append("f.valid_from <= ?")  # nothing stated after the asked time exists yet
        args.append(as_of)
    if not history:
        cond, cargs = _valid_at(as_of)
        clauses.append(cond)
        args.extend(cargs)
    if where:
        clauses.append(f"({where})")
        args.extend(params)
    sql = _select(db) + (" WHERE " + " AND ".join(clauses) if clauses else "") + " ORDER BY f.key, f.valid_from, f.id"
    out = [_record(r) for r in db.execute(sql, args)]
    for r in out:
        r.current = _is_valid(r, as_of)
    return out


def facts_of_entries(
    db: sqlite3.Connection, entry_ids: Sequence[int], where: str = "", params: Sequence[Any] = ()
) -> list[FactRecord]:
    """The fact records stated in the given entries, in entry order then statement order."""
    if not entry_ids:
        return []
    marks = ",".join("?" * len(entry_ids))
    extra = f" AND ({where})" if where else ""
    rows = db.execute(
        f"{_select(db)} WHERE f.entry_id IN ({marks}){extra} ORDER BY f.entry_id, f.id", (*entry_ids, *params)
    )
    return [_record(r) for r in rows]


def values_at(
    db: sqlite3.Connection,
    keys: Sequence[tuple[str, str]],
    at: float | None,
    where: str = "",
    params: Sequence[Any] = (),
    chunk: int = 500,
) -> dict[tuple[str, str], FactRecord]:
    """The record valid at ``at`` (unix seconds; None = now) of each (scope, key) in ``keys``: the latest by event
    time (then id) when several are; a pair with none is absent. One query per scope and ``chunk`` keys (the index
    ``facts_chain`` on (scope, key, valid_from) answers it)."""
    by_scope: dict[str, list[str]] = {}
    for scope, key in dict.fromkeys(keys):
        by_scope.setdefault(scope, []).append(key)
    cond, cargs = _valid_at(at)
    extra = f" AND ({where})" if where else ""
    out: dict[tuple[str, str], FactRecord] = {}
    for scope, names in by_scope.items():
        for start in range(0, len(names), chunk):
            part = names[start : start + chunk]
            rows = db.execute(
                f"{_select(db)} WHERE f.scope = ? AND f.key IN ({','.join('?' * len(part))}) AND {cond}{extra} "
                "ORDER BY f.valid_from DESC, f.id DESC",
                (scope, *part, *cargs, *params),
            )
            for row in rows:
                out.setdefault((scope, row[1]), _record(row))
    return out


def changed_at(db: sqlite3.Connection, record: FactRecord, where: str = "", params: Sequence[Any] = ()) -> float | None:
    """When ``record``'s value stopped holding: the event time of the first later record of its key with another
    value (a repeat of the same value does not end it). None while it still holds."""
    extra = f" AND ({where})" if where else ""
    row = db.execute(
        f"SELECT min(f.valid_from) FROM {_facts_join(db)} WHERE f.scope = ? AND f.key = ? "
        f"AND (f.valid_from > ? OR (f.valid_from = ? AND f.id > ?)) AND f.value_norm IS NOT ?{extra}",
        (
            record.scope,
            record.key,
            _ts(record.valid_from),
            _ts(record.valid_from),
            record.id,
            normalize_value(record.value),
            *params,
        ),
    ).fetchone()
    return row[0] if row else None


def _ts(dt: datetime) -> float:
    return dt.timestamp()


def _is_valid(r: FactRecord, at: float | None) -> bool:
    if at is None:
        return r.valid_to is None
    return r.valid_from.timestamp() <= at and (r.valid_to is None or r.valid_to.timestamp() > at)


def _record(row: tuple) -> FactRecord:

    return FactRecord(
        id=row[0],
        key=row[1],
        key_text=row[2],
        value=row[3],
        replaces=row[4],
        valid_from=from_epoch(row[5]),
        valid_to=from_epoch(row[6]),
        recorded_at=from_epoch(row[7]),
        superseded_by=row[8],
        entry_id=row[9],
        session=row[10],
        turn=row[11],
        scope=row[12],
    )
