"""The SQLite full-text index ``entries_fts``: a contentless FTS5 table (``content=''``) over the entries' text.

The table holds the inverted index only, not a second copy of the text (SQLite FTS5 documentation, §4.4.3
"Contentless Tables"). A contentless table cannot look up what a row held, so deleting a row is FTS5's ``'delete'``
command given exactly the values that were inserted (§6.5): ``fts_rows`` builds those values from an ``entries``
row, and both ``index_entry`` and ``unindex_entry`` use it. Should ``fts_rows`` change (its CJK bigrams, escapes,
windows), ``fts_format`` changes with it and ``ensure_format`` rebuilds the whole index from ``entries`` on open:
a delete never sends values other than those of the insert.

Rows of an entry (docs/architecture.md §2.9): one row, rowid = the entry id, body = summary + the text (its first
window when the text is longer than ``WINDOWED_FROM``), tags = the tag values; each later window k of a long text is
a row of its own, rowid ``window_rowid(entry id, k)`` (negative: never an entry id), its body the turn's opening
line and the window. CJK runs as character bigrams (text/cjk.py), JSON escapes unescaped (text/windows.py).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from functools import cache

from lantern.errors import LanternError
from lantern.store.packed import unpack
from lantern.text.cjk import cjk_bigrams
from lantern.text.windows import (
    WINDOW_CHARS,
    WINDOW_LEAD_CHARS,
    WINDOW_OVERLAP,
    WINDOWED_FROM,
    unescaped,
    windows,
)

__all__ = [
    "CREATE_TABLE",
    "FORMAT_KEY",
    "WINDOW_BITS",
    "check_current",
    "entry_of_row",
    "fts_format",
    "fts_rows",
    "index_entry",
    "rebuild",
    "stale",
    "unindex_entry",
    "window_rowid",
]

TOKENIZE = "porter unicode61 remove_diacritics 2"  # migrations m005 (Porter stemmer) and m001 (unicode61)
CREATE_TABLE = f"CREATE VIRTUAL TABLE entries_fts USING fts5(body, tags, content = '', tokenize = '{TOKENIZE}')"
WINDOW_BITS = 12  # window k of entry e has the FTS5 rowid -(e << 12 | k), k < 4,096 (text/windows.py MAX_WINDOWS)
FORMAT_KEY = "fts_format"  # meta key: the ``fts_format`` the index rows were written in
ROW_VERSION = 1  # raise when fts_rows changes in a way the probe below may not show

# a probe for fts_format: CJK runs, JSON escapes, a tag, and a text long enough to be indexed in windows
_PROBE_SUMMARY = "数据库端口是5433 line\\nnext"
_PROBE_TEXT = "\n".join(f"line {i} 数据库 \\n esc \\t tab {'x' * (i % 50)}" for i in range(400))
_PROBE_TAGS = ("端口", "a.py")


def window_rowid(entry_id: int, k: int) -> int:
    """The FTS5 rowid of window ``k`` (1 ..) of an entry: negative, never an entry id."""
    return -((entry_id << WINDOW_BITS) | k)


def entry_of_row(rowid: int) -> int:
    """The entry an FTS5 row belongs to: its rowid, or the entry of a window row."""
    return (-rowid) >> WINDOW_BITS if rowid < 0 else rowid


def fts_rows(entry_id: int, summary: str, text: str, tag_values: Sequence[str]) -> list[tuple[int, str, str]]:
    """The FTS5 rows ``(rowid, body, tags)`` of an entry (see the module docstring): what ``index_entry`` inserts
    and ``unindex_entry`` deletes. A text longer than ``WINDOWED_FROM`` (a 115 KB tool log) is indexed in windows
    (text/windows.py), so BM25 ranks each part of it against turns of ordinary length; a window row's body starts
    with ``summary`` up to its first newline, at most ``WINDOW_LEAD_CHARS`` (what the window belongs to, as a
    passage carries its document's title)."""
    spans = windows(text) if len(text) > WINDOWED_FROM else [(0, len(text))]
    head = text[: spans[0][1]]
    out = [(entry_id, cjk_bigrams(unescaped(summary + "\n" + head)), cjk_bigrams(" ".join(tag_values)))]
    if len(spans) > 1:
        lead = summary.split("\n", 1)[0][:WINDOW_LEAD_CHARS]
        out += [
            (window_rowid(entry_id, k), cjk_bigrams(unescaped(lead + "\n" + text[a:b])), "")
            for k, (a, b) in enumerate(spans[1:], start=1)
        ]
    return out


@cache
def fts_format() -> str:
    """The format of the index rows: ``ROW_VERSION``, the window constants and a SHA-256 prefix of ``fts_rows``
    on a fixed probe (so a change of the CJK bigrams, the escapes or the windows shows without a version bump)."""
    probe = json.dumps(fts_rows(1, _PROBE_SUMMARY, _PROBE_TEXT, _PROBE_TAGS), ensure_ascii=False)
    digest = hashlib.sha256(probe.encode()).hexdigest()[:16]
    return f"{ROW_VERSION}:{WINDOW_CHARS}:{WINDOW_OVERLAP}:{WINDOWED_FROM}:{WINDOW_LEAD_CHARS}:{WINDOW_BITS}:{digest}"


def _tag_values(tags_json: str | bytes) -> list[str]:
    """The tag values of a stored ``entries.tags`` JSON ``[[kind, value], ...]`` (maybe deflated: store/packed.py)."""
    return [value for _, value in json.loads(unpack(tags_json))] if tags_json != "[]" else []


def index_entry(db: sqlite3.Connection, entry_id: int, summary: str, text: str, tag_values: Sequence[str]) -> None:
    """Insert the FTS5 rows of an entry. The values must be those of its ``entries`` row (summary, text, the values
    of its tags), written in the same transaction: ``unindex_entry`` deletes with the row's values."""
    db.executemany(
        "INSERT INTO entries_fts(rowid, body, tags) VALUES (?, ?, ?)", fts_rows(entry_id, summary, text, tag_values)
    )


def unindex_entry(db: sqlite3.Connection, entry_id: int) -> None:
    """Delete the FTS5 rows of an entry, built from its ``entries`` row as they were inserted (FTS5's ``'delete'``
    command); call it before the row is changed or deleted. No-op for an id with no row."""
    row = db.execute("SELECT summary, text, tags FROM entries WHERE id = ?", (entry_id,)).fetchone()
    if row is None:
        return
    db.executemany(
        "INSERT INTO entries_fts(entries_fts, rowid, body, tags) VALUES ('delete', ?, ?, ?)",
        fts_rows(entry_id, unpack(row[0]), row[1], _tag_values(row[2])),
    )


def rebuild(db: sqlite3.Connection, batch: int = 1_000) -> int:
    """Empty the index and insert every entry's rows again from ``entries``, inside the caller's transaction, and
    record ``fts_format`` in meta. Reads ``batch`` entries at a time (id order). Returns the entries indexed."""
    db.execute("INSERT INTO entries_fts(entries_fts) VALUES ('delete-all')")
    n, last = 0, -(2**63)
    while True:
        rows = db.execute(
            "SELECT id, summary, text, tags FROM entries WHERE id > ? ORDER BY id LIMIT ?", (last, batch)
        ).fetchall()
        if not rows:
            break
        for entry_id, summary, text, tags in rows:
            index_entry(db, entry_id, unpack(summary), text, _tag_values(tags))
        n += len(rows)
        last = rows[-1][0]
    db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (FORMAT_KEY, fts_format()))
    return n


def check_current(db: sqlite3.Connection) -> None:
    """Raise LanternError when the index rows were written in another ``fts_format`` than this code's: a process
    of another Lantern version rebuilt the index since this one opened the database (``Store`` rebuilds it on open
    only), so the values this process would insert or delete differ from those the index holds, and its deletes
    would leave terms behind without an error. Call it inside the write transaction, before the rows change."""
    if stale(db):
        raise LanternError(
            "the full-text index of this database was rebuilt by another Lantern version since this process opened "
            "it: restart this process (a long-running proxy, MCP server or Python program) with the Lantern now "
            "installed; nothing was written"
        )


def stale(db: sqlite3.Connection) -> bool:
    """Whether the index rows were written in another ``fts_format`` than this code's (or none is recorded): then
    ``rebuild`` must run before any ``unindex_entry``, which deletes with this code's rows."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", (FORMAT_KEY,)).fetchone()
    return row is None or row[0] != fts_format()
