"""The rows an export reads and an import writes (lantern/portability.py holds the JSONL format; the SQL is here).

An import record is a dict of ``entries`` columns by name (JSON columns ``tags``, ``hints``, ``meta`` as values)
with ``_vector`` (float32 (dim,)), ``_facts`` ([(ExtractedFact, recorded_at or None)]) and ``_id`` (its exported
id or None) besides; where it goes follows store/plan.py ``place_import``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from typing import Any

from lantern.scope import Scope
from lantern.store.events import add_event
from lantern.store.facts import write_facts
from lantern.store.plan import place_import

__all__ = ["JSON_COLUMNS", "copy_events", "event_rows", "export_rows", "write_imported"]

JSON_COLUMNS = ("tags", "hints", "meta")
_CONVERSATION = "user_id = ? AND agent_id = ? AND project = ? AND session = ?"
# an entry's reinforcement state: the destination's is kept when a record replaces its grown turn, as ``add`` keeps it
_KEPT_ON_GROWTH = ("turn", "confidence", "success", "access_count")
_EVENT_COLUMNS = (
    "time, session, user_id, agent_id, project, source, reason, lost, query, injected, chars, budget, rerank, "
    "empty_reason, latency_ms, loss"
)


def export_rows(
    store: Any, scope: Scope | None, session: str | None, columns: Sequence[str]
) -> Iterator[tuple[dict[str, Any], Any, list[dict[str, Any]]]]:
    """Every entry inside ``scope`` (None: every user) and ``session`` (with its sub-sessions; None: every session)
    in id order, each as ({column: value in the form the rest of Lantern uses (``store.entry_value``), JSON
    columns as text}, its stored vector or None, its facts as exported: key, key as written, value (None:
    retracted), the value a switch replaced, when Lantern recorded them). Read in the caller's snapshot."""
    where, params = store._where(scope, "e")
    parts = [where]
    if session is not None:
        parts.append("(e.session = ? OR substr(e.session, 1, length(?) + 1) = ? || '/')")
        params = [*params, session, session, session]
    select = ", ".join(f'e."{c}"' for c in columns)
    rows = store.db.execute(
        f"SELECT {select}, v.vector FROM entries e LEFT JOIN embeddings v ON v.entry_id = e.id "
        f"WHERE {' AND '.join(parts)} ORDER BY e.id",
        params,
    )
    for row in rows:
        values = {name: store.entry_value(name, value) for name, value in zip(columns, row)}
        facts = [
            {"key": k, "key_text": kt, "value": v, "replaces": r, "recorded_at": at}
            for k, kt, v, r, at in store.db.execute(
                "SELECT key, key_text, value, replaces, recorded_at FROM facts WHERE entry_id = ? ORDER BY id",
                (values["id"],),
            )
        ]
        yield values, row[-1], facts


def write_imported(store: Any, db: Any, rec: dict[str, Any]) -> tuple[str, int | None]:
    """Write one import record in the open transaction ``db``; returns (what happened, the entry id it maps to):

    - "duplicate": its content hash stored (found by the look-up, or committed by another writer since: the
      insert's ``ON CONFLICT (content_hash) DO NOTHING`` skips it, PostgreSQL waiting for that writer's commit
      first, and the row is read again), or a grown form of it stored (store/plan.py ``place_import``);
    - "grown": the turn it grew from replaced in place, its id and reinforcement state kept;
    - "added": inserted, at its turn number or, when another turn holds it, after the conversation's last turn."""
    stored_hash = store.stored_value("content_hash", rec["content_hash"])
    found = db.execute("SELECT id FROM entries WHERE content_hash = ?", (stored_hash,)).fetchone()
    if found:
        return "duplicate", found[0]
    conversation = (rec["user_id"], rec["agent_id"], rec["project"], rec["session"])
    at = db.execute(
        f"SELECT id, text, meta FROM entries WHERE {_CONVERSATION} AND turn = ? ORDER BY id LIMIT 1",
        (*conversation, rec["turn"]),
    ).fetchone()

    def appended() -> list[tuple[int, str, Any]]:  # either text a prefix of the other, followed by a new line
        return db.execute(
            f"SELECT id, text, meta FROM entries WHERE {_CONVERSATION} AND (substr(?, 1, length(text) + 1) = text "
            "|| ? OR substr(text, 1, length(?) + 1) = ?) ORDER BY turn DESC",
            (*conversation, rec["text"], "\n", rec["text"], rec["text"] + "\n"),
        ).fetchall()

    def last_turn() -> int:
        return db.execute(f"SELECT max(turn) FROM entries WHERE {_CONVERSATION}", conversation).fetchone()[0]

    place = place_import(rec["text"], rec["turn"], rec.get("meta"), at, appended, last_turn)
    if place.kind == "grown":
        _replace_grown(store, db, place.entry_id, rec)
        return "grown", place.entry_id
    if place.kind == "duplicate":
        return "duplicate", place.entry_id
    rec["turn"] = place.turn
    if place.meta is not None:
        rec["meta"] = place.meta
    values = _column_values(rec)
    entry_id = store.new_entry_id(db)
    if entry_id is not None:
        values = {"id": entry_id, **values}
    names = list(values)
    cur = db.execute(
        f"INSERT INTO entries({', '.join(f'{chr(34)}{n}{chr(34)}' for n in names)}) VALUES "
        f"({', '.join('?' * len(names))}) ON CONFLICT (content_hash) DO NOTHING",
        [store.stored_value(k, values[k]) for k in names],
    )
    if cur.rowcount == 0:  # stored by another writer since the look-up: read as it was committed
        found = db.execute("SELECT id FROM entries WHERE content_hash = ?", (stored_hash,)).fetchone()
        if found:
            return "duplicate", found[0]
    entry_id = cur.lastrowid
    vector = store.encode_vector(rec["_vector"])
    db.execute("INSERT INTO embeddings(entry_id, vector) VALUES (?, ?)", (entry_id, vector))
    _index(store, db, entry_id, rec)
    return "added", entry_id


def _column_values(rec: dict[str, Any]) -> dict[str, Any]:
    """The record's ``entries`` columns as stored (JSON columns as text)."""
    return {
        k: (json.dumps(v, ensure_ascii=k != "tags" and k != "hints") if k in JSON_COLUMNS else v)
        for k, v in rec.items()
        if not k.startswith("_")
    }


def _replace_grown(store: Any, db: Any, entry_id: int, rec: dict[str, Any]) -> None:
    """Rewrite entry ``entry_id`` as the record, the turn it grew into: every column but its turn number and
    reinforcement state, its vector, full-text rows and facts; stamped (``vector_at``) so that every in-process
    index reads it again (its ``archived_at`` is the source's)."""
    values = {k: v for k, v in _column_values(rec).items() if k not in _KEPT_ON_GROWTH}
    if "vector_at" in values:
        values["vector_at"] = time.time()
    store.unindex_fulltext(db, entry_id)
    db.execute(
        f"UPDATE entries SET {', '.join(f'{chr(34)}{n}{chr(34)} = ?' for n in values)} WHERE id = ?",
        [*(store.stored_value(k, v) for k, v in values.items()), entry_id],
    )
    db.execute("UPDATE embeddings SET vector = ? WHERE entry_id = ?", (store.encode_vector(rec["_vector"]), entry_id))
    _index(store, db, entry_id, rec, replace=True)


def _index(store: Any, db: Any, entry_id: int, rec: dict[str, Any], replace: bool = False) -> None:
    """What an entry row written by the import needs besides itself: its pending deferred block, full-text rows
    and facts (``replace``: those of the turn it grew from are replaced, none left)."""
    import numpy as np

    if store.deferred is not None and not np.asarray(rec["_vector"])[slice(*store.deferred)].any():
        db.execute("UPDATE entries SET e5_pending = 1 WHERE id = ?", (entry_id,))
    store.index_fulltext(db, entry_id, rec["summary"], rec["text"], [value for _, value in rec["tags"]])
    if rec["_facts"] or replace:  # linked into their key's chain by the entry's event time
        recorded = next((at for _, at in rec["_facts"] if at is not None), rec["archived_at"])
        write_facts(db, entry_id, [f for f, _ in rec["_facts"]], recorded, rec["user_id"])


def event_rows(store: Any) -> list[tuple]:
    """Every compaction event of ``store``, oldest first, as ``copy_events`` writes them."""
    return store.db.execute(f"SELECT {_EVENT_COLUMNS} FROM events ORDER BY id").fetchall()


def copy_events(store: Any, rows: list[tuple], entry_ids: dict[int, int], lock: str) -> tuple[int, int]:
    """Copy the compaction events ``rows`` (``event_rows`` of another store) into ``store``, in one transaction
    serialized on ``lock`` (``store.serialize``), oldest first, with the entry ids each names (``lost``,
    ``injected``) mapped through ``entry_ids`` (source id -> id here); an id it does not know is left out, as
    ``forget`` leaves a forgotten entry out of an event. An event already here (same time, session, scope, source,
    reason and query) is skipped. Returns (copied, already there)."""
    copied = present = 0
    if not rows:
        return 0, 0
    with store.transaction() as db:
        store.serialize(db, lock)  # two copies at once: each event looked up after the other's commit
        for row in rows:
            when, session, user, agent, project, src, reason, lost, query, injected, chars, budget, rerank = row[:13]
            empty_reason, latency_ms, loss = row[13:16] if len(row) > 13 else (None, None, None)
            if db.execute(
                "SELECT 1 FROM events WHERE time = ? AND session = ? AND user_id = ? AND agent_id IS ? "
                "AND project IS ? AND source = ? AND reason = ? AND query = ?",
                (when, session, user, agent, project, src, reason, query),
            ).fetchone():
                present += 1
                continue
            add_event(
                db,
                time=when,
                session=session,
                scope=Scope(user, agent, project),
                source=src,
                reason=reason,
                lost=[entry_ids[i] for i in json.loads(lost) if i in entry_ids],
                query=query,
                injected=[(entry_ids[i], c, x) for i, c, x in json.loads(injected) if i in entry_ids],
                chars=chars,
                budget=budget,
                rerank=bool(rerank),
                empty_reason=empty_reason,
                latency_ms=latency_ms,
                loss=_mapped_loss(loss, entry_ids),
            )
            copied += 1
    return copied, present


def _mapped_loss(loss: str | None, entry_ids: dict[int, int]) -> dict[str, Any] | None:
    """An event's stored loss report (JSON) with each item's entry id mapped through ``entry_ids``; an item whose
    entry is not known here is left out (its counts stay)."""
    if not loss:
        return None
    report = json.loads(loss)
    for key in ("items", "cut"):
        report[key] = [
            {**i, "entry": entry_ids[i["entry"]]} for i in report.get(key, []) if i.get("entry") in entry_ids
        ]
    return report
