"""The open rewind candidates the proxy records per conversation (compaction.py ``Tracker``), kept in the ``meta``
table: written, read and pruned by a forget here, for both backends (``BaseStore`` inherits them)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

__all__ = ["MAX_OPEN_REWINDS", "REWINDS", "RewindRecords"]

REWINDS = "rewinds "  # meta key prefix of a conversation's open rewind candidates (``open_rewinds``)
MAX_OPEN_REWINDS = 32  # ours: open rewind candidates kept per conversation, the oldest dropped first


class RewindRecords:
    """Rewind candidates in ``meta`` rows keyed by a hash of the conversation. Needs the store's ``get_meta`` and
    ``transaction``."""

    @staticmethod
    def _rewinds_key(conversation: tuple[str, str, str, str]) -> str:
        return REWINDS + hashlib.sha256(json.dumps(list(conversation)).encode("utf-8", "surrogatepass")).hexdigest()

    def open_rewinds(
        self, conversation: tuple[str, str, str, str]
    ) -> list[tuple[list[tuple[int, str]], dict[str, Any]]]:
        """The open rewind candidates of ``conversation`` ``(user, agent, project, session)`` that
        ``save_rewinds`` recorded (compaction.py ``Tracker``): per candidate, its ``(entry id, first 8 hex digits
        of its content hash)`` pairs in turn order, so an id a later entry reuses is told apart, and the evidence
        that confirms it (``compaction.Rewind.evidence``: hashes and numbers, no text). A value that does not read
        as that shape reads as no candidate; so does a candidate of the earlier shape (pairs without evidence)."""
        stored = self.get_meta(self._rewinds_key(conversation))
        try:
            rows = json.loads(stored) if stored else []
            return [([(int(i), str(h)) for i, h in c["ids"]], dict(c["evidence"])) for c in rows if isinstance(c, dict)]
        except (ValueError, TypeError, KeyError, RecursionError):
            return []

    def _forget_rewinds(self, db: Any, ids: Sequence[int]) -> None:
        """Take the deleted entries ``ids`` out of every conversation's open rewind candidates, in the delete's
        transaction ``db``; a record left empty is deleted (a forget leaves no id or hash prefix behind)."""
        if not ids:
            return
        gone = set(ids)
        rows = db.execute("SELECT key, value FROM meta WHERE key LIKE ?", (REWINDS + "%",)).fetchall()
        for key, value in rows:
            try:
                candidates = json.loads(value)
                kept = [
                    {**c, "ids": ids_}
                    for c in candidates
                    if isinstance(c, dict) and (ids_ := [p for p in c["ids"] if p[0] not in gone])
                ]
            except (ValueError, TypeError, IndexError, KeyError, RecursionError):
                kept = []  # not the shape save_rewinds writes: nothing to keep
            if not kept:
                db.execute("DELETE FROM meta WHERE key = ?", (key,))
            elif kept != candidates:
                db.execute("UPDATE meta SET value = ? WHERE key = ?", (json.dumps(kept), key))

    def save_rewinds(
        self,
        conversation: tuple[str, str, str, str],
        candidates: Sequence[tuple[Sequence[tuple[int, str]], dict[str, Any]]],
        wait: float,
    ) -> None:
        """Record ``conversation``'s open rewind candidates (``open_rewinds``' shape; the newest
        ``MAX_OPEN_REWINDS``) in one transaction, in a ``meta`` row keyed by a hash of the conversation, so a
        restarted proxy settles the rewinds its previous run suggested; none deletes the row. Entry ids and hash
        prefixes and the evidence (hashes and numbers) only, no text. Waits at most ``wait`` seconds for the write
        lock (then the backend's busy error)."""
        key = self._rewinds_key(conversation)
        kept = [{"ids": [[int(i), h] for i, h in ids], "evidence": ev} for ids, ev in candidates if ids]
        kept = kept[-MAX_OPEN_REWINDS:]
        with self.transaction(wait=wait) as db:
            if kept:
                db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(kept)))
            else:
                db.execute("DELETE FROM meta WHERE key = ?", (key,))
