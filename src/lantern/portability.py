"""Export and import a Lantern database as JSONL (the format is ours).

One JSON object per line, each with a ``"type"``:

    {"type": "header", "format": "lantern-export", "version": 1, "embedder": "minilm-l6-int8", "dim": 384,
     "embeddings": true}
    {"type": "entry", "id": 7, "session": "s1", "turn": 0, "time": 1700000000.0, "archived_at": ..., "text": ...,
     "summary": ..., "tags": [["port", "5433"]], "hints": ["5433"], "memory_type": "episodic", ...,
     "user_id": "", "agent_id": "", "project": "", "embedding": "<base64 float32 little-endian>",
     "facts": [{"key": "staging port", "key_text": "staging port", "value": "5433", "replaces": null,
                "recorded_at": ...}]}

The header comes first. An ``entry`` record carries every column of the ``entries`` table by name (JSON columns
``tags``, ``hints``, ``meta`` as JSON values) and, unless exported with ``embeddings=False``, its embedding (none
for a stored vector that cannot be decoded: the import recomputes it), and the
versioned facts stated in the turn (``facts``, store/facts.py: key, value and
the value a switch replaced; their validity chains are rebuilt on import from the entries' event times). Other
tables get their own record types later (``fact``, reinforcement state, ...): add a reader to ``RECORD_READERS``
and a writer to ``RECORD_WRITERS``; a record refers to an entry by its exported ``id``, which the import maps to
the new id (``ImportResult.entry_ids``).

Round trip: export -> import into an empty database -> export gives the same bytes, except ``id`` (entries are
renumbered from 1 in file order when the source had gaps). ``content_hash`` is always recomputed on import from
the scope, session and text (lantern/scope.py), so a record cannot smuggle in a hash of another user's turn.

Import redacts every record under the destination's policy as ``archive`` redacts a turn (its text, summary, tags,
hints, meta and facts; archive/redact.py), since an export may come from a database with redaction off, an older
Lantern or another tool; an embedding recorded for a summary that changed is recomputed. ``content_hash`` is then
computed from the redacted text. ``lantern copy`` redacts the events' queries the same way.

Import: the whole file is read and checked first, then written in one transaction per batch of ``BATCH_LINES``
lines. A bad line anywhere (a truncated or corrupt export, bytes that are not UTF-8) raises ``ExportFormatError``
naming the line (and field) and nothing is written (a stream that cannot be read twice, such as a pipe, is copied to
a temporary file as it is checked) (besides types: ``turn`` and the counts are integers in [0, 2**53),
``importance`` / ``confidence`` / ``success`` within [0, 1], ``time`` / ``archived_at`` unix seconds within years
1..9999, an ``embedding`` of the embedder's dimension, finite, its L2 norm within [``MIN_NORM``, ``MAX_NORM``]). An
import stopped part way (killed, disk full, another process's write lock past its retries) keeps the batches
committed; importing again adds only the rest, because a turn already stored — same content hash — is counted as a
duplicate, never stored twice). A turn is one entry per conversation and turn number, as ``add`` keeps it: a
record of a turn stored in a shorter form replaces it (store/plan.py ``place_import``). Two imports (or ``lantern
copy``) into one database at once both succeed: their batches run one at a time (``store.serialize``), and a turn
another writer stored since the look-up is counted as a duplicate (``ON CONFLICT``). Embeddings recorded with
another embedder raise ``EmbedderMismatchError``: import with
``embeddings=False`` (CLI ``--no-embeddings``) to recompute them.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

import numpy as np

from lantern import lazy_re
from lantern.config import is_server_url, redact_url
from lantern.embed import get_embedder, store_record
from lantern.errors import EmbedderMismatchError, ExportFormatError, LanternError
from lantern.model import ExtractedFact, content_hash
from lantern.scope import MAX_ID_CHARS, MAX_SESSION_CHARS, Scope
from lantern.store.facts import MAX_FACT_BYTES, fact_too_long
from lantern.store.open import open_store
from lantern.store.transfer import JSON_COLUMNS

FORMAT = "lantern-export"
VERSION = 1
BATCH_LINES = 256  # records per import transaction (ours; the same as ingest's batch)
ROLLBACK_RETRIES = 5  # a batch the server rolled back (a deadlock) is written again this many times at most (ours)
IMPORT_LOCK = "lantern:import"  # the key imports and copies serialize their write transactions on (store.serialize)

__all__ = [
    "BATCH_LINES",
    "FORMAT",
    "VERSION",
    "ImportResult",
    "copy_events",
    "export_jsonl",
    "import_jsonl",
    "read_events",
]


@dataclass
class ImportResult:
    """What an import did: records ``added``, ``duplicates`` (already stored: same content hash, or the same turn
    grown since), ``grown`` (a stored turn this record extends, replaced in place: ``_write_entry``), the ``lines``
    read, and ``entry_ids`` mapping each exported entry id to the id it has in this database."""

    added: int = 0
    duplicates: int = 0
    grown: int = 0
    lines: int = 0
    entry_ids: dict[int, int] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------- export
def export_jsonl(
    lantern: Any,
    dest: str | os.PathLike[str] | IO[str],
    *,
    scope: Scope | None,
    session: str | None = None,
    embeddings: bool = True,
) -> int:
    """Write the header and every entry inside ``scope`` (None: every user) and ``session`` (with its
    sub-sessions; None: every session) to ``dest`` (a path, or a text file object), in id order, from one
    consistent snapshot. Returns the number of entry records written."""
    store = lantern.store
    columns = store.entry_columns()
    header = {
        "type": "header",
        "format": FORMAT,
        "version": VERSION,
        "embedder": lantern.embedder.id,
        "dim": lantern.embedder.dim,
        "embeddings": embeddings,
    }
    n = 0
    with _text_out(dest) as out, store.snapshot():
        out.write(_line(header))
        for values, vector, facts in store.export_rows(scope, session, columns):
            record: dict[str, Any] = {"type": "entry"}
            for name, value in values.items():
                record[name] = json.loads(value) if name in JSON_COLUMNS else value
            # an undecodable stored vector (store.vector_decodable) is left out: the import recomputes it
            if embeddings and vector is not None and store.vector_decodable(vector):
                vector = np.asarray(store.decode_vectors([vector])[0], dtype="<f4")  # stored int8: exported float32
                record["embedding"] = base64.b64encode(vector.tobytes()).decode("ascii")
            record["facts"] = facts
            out.write(_line(record))
            n += 1
    return n


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n"


@contextmanager
def _text_out(dest: str | os.PathLike[str] | IO[str]) -> Iterator[IO[str]]:
    if hasattr(dest, "write"):
        yield dest  # type: ignore[misc]
        return
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # an export holds the memory: private like the db
    with open(fd, "w", encoding="utf-8", newline="\n") as f:
        yield f


@contextmanager
def _text_in(src: str | os.PathLike[str] | IO[str]) -> Iterator[IO[str]]:
    if hasattr(src, "read"):
        yield src  # type: ignore[misc]
        return
    # undecodable bytes become lone surrogates, which valid UTF-8 never gives: _numbered names their line
    with open(src, encoding="utf-8", errors="surrogateescape", newline="") as f:
        yield f


# ---------------------------------------------------------------------------------------------- import
def import_jsonl(
    lantern: Any,
    src: str | os.PathLike[str] | IO[str],
    *,
    scope: Scope | None = None,
    embeddings: bool = True,
    progress: Callable[[int], None] | None = None,
) -> ImportResult:
    """Read an export (see the module docstring) into ``lantern``'s database. ``scope``: put every record into
    this scope (its user; its agent / project when not None) instead of the one recorded. ``embeddings=False``:
    ignore recorded embeddings and recompute them with the database's embedder. ``progress(lines)`` after each
    batch. Raises ``ExportFormatError`` (bad line: ``.line``, ``.field``), ``EmbedderMismatchError``."""
    name = str(src) if not hasattr(src, "read") else getattr(src, "name", "<stream>")
    columns = lantern.store.entry_columns()
    result = ImportResult()
    with _text_in(src) as f, _checked(f, name, columns, lantern.embedder, embeddings) as f:
        lines = _numbered(f, name)
        header = _read_header(lines, name)
        use_vectors = embeddings and bool(header.get("embeddings"))
        if use_vectors and (header.get("embedder") != lantern.embedder.id or header.get("dim") != lantern.embedder.dim):
            from lantern.embed import EMBEDDERS

            theirs = next((n for n, cls in EMBEDDERS.items() if cls.id == header.get("embedder")), "NAME")
            raise EmbedderMismatchError(
                f"{name}: its embeddings were made with {header.get('embedder')!r} ({header.get('dim')}-d), this "
                "database "
                f"uses {lantern.embedder.id!r} ({lantern.embedder.dim}-d); import with --no-embeddings "
                "(Python: embeddings=False) to recompute them, or into a new database made with that embedder "
                f"(`lantern --embedder {theirs} --db NEW import FILE`; embedders: {', '.join(EMBEDDERS)})"
            )
        batch: list[tuple[int, str, dict[str, Any]]] = []
        for number, raw in lines:
            result.lines = number
            if not raw.strip():
                continue
            batch.append(_read_record(number, raw, name, columns, lantern.embedder.dim, use_vectors))
            if len(batch) >= BATCH_LINES:
                _write_batch(lantern, batch, scope, result)
                batch = []
                if progress:
                    progress(number)
        if batch:
            _write_batch(lantern, batch, scope, result)
        if progress:
            progress(result.lines)
    lantern.index.mark_dirty()
    return result


_UNDECODED = lazy_re.compile("[\udc80-\udcff]")  # surrogateescape's stand-ins for bytes that are not UTF-8


def _numbered(f: IO[str], name: str) -> Iterator[tuple[int, str]]:
    """``enumerate(f, start=1)``, with bytes that are not UTF-8 an ExportFormatError naming their line (a stream
    opened with errors="surrogateescape", as ``_text_in`` and the CLI's stdin are; a strict stream's decoder reads
    ahead, so its error names the line being read when the decoder failed)."""
    number = 0
    while True:
        try:
            raw = f.readline()
        except UnicodeDecodeError as e:
            raise ExportFormatError(
                f"not UTF-8 ({e.reason}) at or after this line", line=number + 1, source=name
            ) from None
        if not raw:
            return
        number += 1
        bad = _UNDECODED.search(raw)
        if bad:
            raise ExportFormatError(
                f"not UTF-8 (byte 0x{ord(bad.group()) - 0xDC00:02x} at character {bad.start() + 1})",
                line=number,
                source=name,
            )
        yield number, raw


@contextmanager
def _checked(f: IO[str], name: str, columns: list[str], embedder: Any, embeddings: bool) -> Iterator[IO[str]]:
    """``f`` rewound after every line of it was read and checked (header, then each record as the import will
    read it), so that a bad line anywhere raises before anything is written; a stream that cannot seek is copied
    to a temporary file while it is checked, and that file is yielded."""
    import tempfile

    copy = None if f.seekable() else tempfile.TemporaryFile("w+", encoding="utf-8", newline="")
    try:
        start = f.tell() if copy is None else 0
        lines = _numbered(f, name)
        if copy is not None:
            lines = ((n, copy.write(raw) and raw) for n, raw in lines)
        header = _read_header(lines, name)
        # recorded vectors of another embedder: the import raises EmbedderMismatchError before reading a record
        use_vectors = (
            embeddings
            and bool(header.get("embeddings"))
            and header.get("embedder") == embedder.id
            and header.get("dim") == embedder.dim
        )
        for number, raw in lines:
            if raw.strip():
                _read_record(number, raw, name, columns, embedder.dim, use_vectors)
        if copy is not None:
            copy.seek(0)
            yield copy
        else:
            f.seek(start)
            yield f
    finally:
        if copy is not None:
            copy.close()


def _read_header(lines: Iterator[tuple[int, str]], name: str) -> dict[str, Any]:
    for number, raw in lines:
        if not raw.strip():
            continue
        try:
            header = json.loads(raw)
        except ValueError as e:
            raise ExportFormatError(f"not JSON ({e})", line=number, source=name) from None
        if not isinstance(header, dict) or header.get("type") != "header" or header.get("format") != FORMAT:
            raise ExportFormatError(
                f'the first record must be the header {{"type": "header", "format": "{FORMAT}", ...}}',
                line=number,
                source=name,
            )
        version = header.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise ExportFormatError("version must be a positive integer", line=number, field="version", source=name)
        if version > VERSION:
            raise ExportFormatError(
                f"format version {version} is newer than this Lantern's ({VERSION}); upgrade lantern-memory",
                line=number,
                field="version",
                source=name,
            )
        return header
    raise ExportFormatError("empty file: no header", line=1, source=name)


def _read_record(
    number: int, raw: str, name: str, columns: list[str], dim: int, use_vectors: bool
) -> tuple[int, str, dict[str, Any]]:
    """(line number, record type, validated record) or ExportFormatError naming the line and field."""
    try:
        record = json.loads(raw)
    except ValueError as e:
        raise ExportFormatError(f"not JSON ({e})", line=number, source=name) from None
    if not isinstance(record, dict):
        raise ExportFormatError("a record must be a JSON object", line=number, source=name)
    kind = record.get("type")
    reader = RECORD_READERS.get(kind)  # type: ignore[arg-type]
    if reader is None:
        known = ", ".join(sorted(RECORD_READERS))
        raise ExportFormatError(
            f"unknown record type {kind!r} (known: {known})", line=number, field="type", source=name
        )
    try:
        return number, kind, reader(record, columns, dim, use_vectors)
    except _BadField as e:
        raise ExportFormatError(e.message, line=number, field=e.field, source=name) from None


class _BadField(Exception):
    def __init__(self, field_name: str, message: str):
        self.field, self.message = field_name, message


_STR = ("session", "text", "summary", "memory_type", "user_id", "agent_id", "project", "content_hash")
_IDS = ("session", "user_id", "agent_id", "project")  # at most MAX_SESSION_CHARS / MAX_ID_CHARS characters
_INT = ("turn", "access_count", "tool_count", "file_count")
_NUM = ("importance", "confidence", "success", "archived_at")
_UNIT = ("importance", "confidence", "success")  # scores and rates: within [0, 1]
_COUNT = (
    "turn",
    "access_count",
    "tool_count",
    "file_count",
)  # 0 <= n < 2**53 (exact in a float, as JSON readers keep it)
MAX_COUNT = 2**53
# an imported vector's L2 norm (ours): every embedder normalizes each of its blocks, so a vector Lantern wrote has
# norm 1 to sqrt(blocks) (~1.7); one far outside (all zero, subnormal, 1e30s) would make cosines divide by ~0 or
# overflow
MIN_NORM, MAX_NORM = 1e-3, 1e3
# unix seconds a datetime can hold (years 1..9999, UTC): a time outside cannot be shown or compared as a date
MIN_TIME = datetime(1, 1, 1, tzinfo=timezone.utc).timestamp()
MAX_TIME = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc).timestamp()
_REQUIRED = ("session", "turn", "text", "summary", "archived_at")
_DEFAULTS: dict[str, Any] = {
    "tags": [],
    "hints": [],
    "memory_type": "episodic",
    "importance": 0.5,
    "confidence": 0.5,
    "success": 0.5,
    "access_count": 0,
    "tool_count": 0,
    "file_count": 0,
    "meta": {},
    "time": None,
    "user_id": "",
    "agent_id": "",
    "project": "",
}


def _read_entry(record: dict[str, Any], columns: list[str], dim: int, use_vectors: bool) -> dict[str, Any]:
    """Validate an ``entry`` record against the columns of ``entries``; returns column values (JSON columns as
    JSON values) plus ``_vector`` (float32 array, or None to recompute) and ``_id`` (the exported id or None)."""
    known = set(columns) | {"type", "embedding", "facts"}
    for key in record:
        if key not in known:
            raise _BadField(key, f"unknown field {key!r} (not a column of entries in this database)")
    for key in _REQUIRED:
        if key not in record:
            raise _BadField(key, "missing")
    out = {**_DEFAULTS, **{k: v for k, v in record.items() if k not in ("type", "embedding", "facts")}}
    for key, value in out.items():
        _check(key, value)
    out["_facts"] = _read_facts(record.get("facts", []))
    out["_id"] = out.pop("id", None)
    out["_vector"] = None
    if use_vectors and "embedding" in record:
        out["_vector"] = _vector(record["embedding"], dim)
    return out


def _read_facts(value: Any) -> list[tuple[ExtractedFact, float | None]]:
    """Validate an entry record's ``facts``: a list of objects with string ``key`` / ``key_text``, string-or-null
    ``value`` / ``replaces`` and a number-or-null ``recorded_at``."""
    if not isinstance(value, list):
        raise _BadField("facts", "must be a list")
    out = []
    for f in value:
        if not isinstance(f, dict) or not isinstance(f.get("key"), str) or not f["key"]:
            raise _BadField("facts", "each fact must be an object with a non-empty string key")
        for name in ("value", "replaces"):
            if f.get(name) is not None and not isinstance(f[name], str):
                raise _BadField("facts", f"{name} must be a string or null")
        at = f.get("recorded_at")
        if at is not None and (
            isinstance(at, bool)
            or not isinstance(at, (int, float))
            or not math.isfinite(at)
            or not MIN_TIME <= at <= MAX_TIME
        ):
            raise _BadField("facts", "recorded_at must be unix seconds within years 1..9999, or null")
        key_text = f.get("key_text") if isinstance(f.get("key_text"), str) else f["key"]
        for text in (f["key"], key_text, f.get("value"), f.get("replaces")):
            if text is not None and ("\x00" in text or _LONE_SURROGATE.search(text)):  # as _check's strings
                raise _BadField("facts", "must not contain NUL characters or lone surrogates (U+D800..U+DFFF)")
        fact = ExtractedFact(key=f["key"], value=f.get("value"), key_text=key_text, replaces=f.get("replaces"))
        if (field := fact_too_long(fact)) is not None:
            raise _BadField(
                "facts",
                f"{field} is over {MAX_FACT_BYTES} bytes in UTF-8 (the limit on both backends: a fact is a "
                "short key and value)",
            )
        out.append((fact, at))
    return out


_LONE_SURROGATE = lazy_re.compile("[\ud800-\udfff]")


def _check(key: str, value: Any) -> None:
    is_int = isinstance(value, int) and not isinstance(value, bool)
    is_num = (is_int or isinstance(value, float)) and math.isfinite(value)
    if key in _STR and not isinstance(value, str):
        raise _BadField(key, "must be a string")
    if key in _STR and "\x00" in value:
        raise _BadField(key, "must not contain NUL characters")
    if key in _STR and _LONE_SURROGATE.search(
        value
    ):  # a JSON escape such as "\ud800": no UTF-8 for SQLite or the models
        raise _BadField(key, "must not contain lone surrogates (U+D800..U+DFFF)")
    if key in _IDS and len(value) > (limit := MAX_SESSION_CHARS if key == "session" else MAX_ID_CHARS):
        raise _BadField(key, f"is {len(value):,} characters long; at most {limit} are stored (lantern/scope.py)")
    if key in (*_INT, "id") and not (is_int and -(2**63) <= value < 2**63):
        raise _BadField(key, "must be an integer")
    if key in _NUM and not is_num:
        raise _BadField(key, "must be a finite number")
    if key == "time" and value is not None and not is_num:
        raise _BadField(key, "must be a finite number (unix seconds) or null")
    if key in _COUNT and not 0 <= value < MAX_COUNT:
        raise _BadField(key, f"must be an integer from 0 to 2**53 - 1, got {value}")
    if key in _UNIT and not 0 <= value <= 1:
        raise _BadField(key, f"must be within [0, 1], got {value}")
    if key in ("time", "archived_at") and value is not None and not MIN_TIME <= value <= MAX_TIME:
        raise _BadField(key, f"must be unix seconds within years 1..9999, got {value}")
    if key == "tags" and not (
        isinstance(value, list)
        and all(isinstance(t, list) and len(t) == 2 and all(isinstance(x, str) for x in t) for t in value)
    ):
        raise _BadField(key, 'must be a list of ["kind", "value"] pairs')
    if key == "hints" and not (isinstance(value, list) and all(isinstance(h, str) for h in value)):
        raise _BadField(key, "must be a list of strings")
    if key == "meta" and not isinstance(value, dict):
        raise _BadField(key, "must be an object")
    if key not in (*_STR, *_INT, *_NUM, "id", "time", *JSON_COLUMNS) and not (
        value is None or isinstance(value, (str, int, float))
    ):  # a column added by a later migration: a plain SQLite value
        raise _BadField(key, "must be a string, a number or null")


def _vector(value: Any, dim: int) -> np.ndarray:
    if not isinstance(value, str):
        raise _BadField("embedding", "must be a base64 string")
    try:
        blob = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise _BadField("embedding", "is not valid base64") from None
    if len(blob) != 4 * dim:
        raise _BadField("embedding", f"has {len(blob) // 4} float32 values, the embedder gives {dim}")
    vec = np.frombuffer(blob, dtype="<f4")
    if not np.isfinite(vec).all():
        raise _BadField("embedding", "holds NaN or infinite values")
    norm = float(np.linalg.norm(vec.astype(np.float64)))  # float64: a float32 norm of 1e20s overflows to inf
    if not MIN_NORM <= norm <= MAX_NORM:
        raise _BadField(
            "embedding",
            f"has L2 norm {norm:.3g}, outside [{MIN_NORM:g}, {MAX_NORM:g}]: no embedder of Lantern's wrote it",
        )
    return vec


RECORD_READERS: dict[str, Callable[[dict[str, Any], list[str], int, bool], dict[str, Any]]] = {"entry": _read_entry}


def _write_batch(
    lantern: Any, batch: list[tuple[int, str, dict[str, Any]]], scope: Scope | None, result: ImportResult
) -> None:
    """Embed what needs embedding, then write the whole batch in ONE transaction."""
    entries = [rec for _, kind, rec in batch if kind == "entry"]
    for rec in entries:
        _redact_entry(rec, lantern.redaction)
        if scope is not None:  # re-homed: the recorded scope is replaced
            rec["user_id"] = scope.user
            if scope.agent is not None:
                rec["agent_id"] = scope.agent
            if scope.project is not None:
                rec["project"] = scope.project
        rec["content_hash"] = content_hash(rec["session"], rec["text"], rec["user_id"], rec["agent_id"], rec["project"])
    missing = [rec for rec in entries if rec["_vector"] is None]
    if missing:
        for rec, vec in zip(missing, lantern.embedder.embed([rec["summary"] for rec in missing])):
            rec["_vector"] = vec
    store = lantern.store
    for attempt in range(ROLLBACK_RETRIES + 1):
        before = (result.added, result.duplicates, result.grown, dict(result.entry_ids))
        try:
            with store.transaction() as db:
                store.serialize(db, IMPORT_LOCK)  # one import's batch at a time (SQLite's write lock does it already)
                # turn numbers and grown turns: an ``add`` of the same conversations waits, as it waits for another
                store.lock_conversations(
                    db, {(r["user_id"], r["agent_id"], r["project"], r["session"]) for r in entries}
                )
                store.verify_embedder(db)
                for _, kind, rec in batch:
                    RECORD_WRITERS[kind](store, db, rec, result)
            return
        except Exception as e:
            # the server broke a deadlock with another writer (an ``add`` of the same turns) by rolling this batch
            # back: run it again whole, its counts as before it, as ``add`` runs its batch again
            if attempt == ROLLBACK_RETRIES or not store.rolled_back(e):
                raise
            result.added, result.duplicates, result.grown, result.entry_ids = before


def _redact_entry(rec: dict[str, Any], policy: Any) -> None:
    """Redact an entry record in place under the destination's redaction policy (archive/redact.py), as ``archive``
    redacts a turn: its names (session and scope), text, summary, tags, hints, meta and facts. An export may come
    from a database with redaction switched off, an older Lantern or another tool; a recorded embedding of a
    summary that changed is dropped (recomputed from the redacted summary)."""
    from lantern.archive.redact import redact_json, redact_name, redact_text

    for column in ("session", "user_id", "agent_id", "project"):  # names: in the form reads match (Scope.name)
        rec[column] = redact_name(rec[column], policy)
    rec["text"], _ = redact_text(rec["text"], policy)
    rec["summary"], n_summary = redact_text(rec["summary"], policy)
    for column in JSON_COLUMNS:
        rec[column], _ = redact_json(rec[column], policy)
    facts = []
    for fact, at in rec["_facts"]:
        key, key_text, value, replaces = (
            None if t is None else redact_text(t, policy)[0]
            for t in (fact.key, fact.key_text, fact.value, fact.replaces)
        )
        facts.append((replace(fact, key=key, key_text=key_text, value=value, replaces=replaces), at))
    rec["_facts"] = facts
    if n_summary:
        rec["_vector"] = None


def _write_entry(store: Any, db: Any, rec: dict[str, Any], result: ImportResult) -> None:
    """Write one entry record in the open transaction ``db`` (store/transfer.py ``write_imported``: a turn is one
    entry per conversation and turn number, as ``add`` keeps it, store/plan.py) and count it."""
    kind, entry_id = store.write_imported(db, rec)
    if kind == "grown":
        result.grown += 1
    elif kind == "duplicate":
        result.duplicates += 1
    else:
        result.added += 1
    if rec["_id"] is not None:
        result.entry_ids[rec["_id"]] = entry_id


RECORD_WRITERS: dict[str, Callable[[Any, Any, dict[str, Any], ImportResult], None]] = {"entry": _write_entry}


# ---------------------------------------------------------------------------------------------- events (copy)
def read_events(store: Any) -> list[tuple]:
    """Every compaction event of ``store``, oldest first, as ``copy_events`` writes them."""
    return store.event_rows()


def _redacted_loss(loss: str | None, redaction: Any) -> str | None:
    """An event's stored loss report (JSON) with each item's value redacted under ``redaction`` (a source with
    redaction off kept them in clear)."""
    from lantern.archive.redact import redact_text

    if not loss:
        return loss
    report = json.loads(loss)
    for key in ("items", "cut"):
        report[key] = [{**i, "value": redact_text(str(i.get("value", "")), redaction)[0]} for i in report.get(key, [])]
    return json.dumps(report, ensure_ascii=False)


def copy_events(rows: list[tuple], target: Any, entry_ids: dict[int, int]) -> tuple[int, int]:
    """Copy the compaction events ``rows`` (``read_events`` of the source's store) into ``target``'s store
    (``lantern copy``), in one transaction, oldest first, with the entry ids each names (``lost``, ``injected``)
    mapped through ``entry_ids`` (source id -> target id, ``ImportResult.entry_ids``); an id the copy does not know is
    left out, as ``forget`` leaves a forgotten entry out of an event. An event already in ``target`` (same time,
    session, scope, source, reason and query) is skipped, so a copy run again adds none twice. Returns (copied,
    already there)."""
    from lantern.archive.redact import redact_name, redact_text

    # a source with redaction off kept the names, the queries and the loss reports' values
    # in clear: redacted under the target's policy
    def name(value: str | None) -> str | None:
        return redact_name(value, target.redaction) if value else value

    rows = [
        (
            r[0],
            *(name(v) for v in r[1:5]),
            *r[5:8],
            redact_text(r[8] or "", target.redaction)[0],
            r[9],
            *r[10:15],
            _redacted_loss(r[15], target.redaction),
        )
        for r in rows
    ]
    return target.store.copy_events(rows, entry_ids, IMPORT_LOCK)


# ---------------------------------------------------------------------------------------------- copy (lantern copy)
def copy_store(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    open_target: Callable[[Any], Any],
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, int]:
    """Copy every entry of the store at ``src`` into the store at ``dst`` (each a SQLite path or a ``postgresql://``
    URL: SQLite -> PostgreSQL and back), with its scope, reinforcement state (confidence, success, access count),
    embedding (kept, not recomputed: ``dst`` is opened with ``src``'s embedder) and facts, through the export format
    (this module) in a private temporary file; ``open_target(embedder)`` opens ``dst`` as a Lantern handle with that
    embedder (``Lantern.import_`` writes it). Entries already in ``dst`` (same content hash) are skipped, so a copy
    stopped part way is resumed by running it again. ``progress(done, total)`` in entries after each batch. Then
    verified: every source entry has an entry with its embedding in ``dst``. Then the compaction events, their entry
    ids mapped to ``dst``'s (``copy_events``; one already there is skipped). Not copied: pending recoveries (a
    recovery waiting for its usefulness check on the source's live conversation). A turn is one entry per
    conversation and turn number in ``dst`` too (``_write_entry``): a source turn that grew since an earlier copy
    replaces its shorter form there (``grown``), one that grew in ``dst`` is already there, and one whose turn
    number ``dst`` gave to a turn of its own is appended after that conversation's last turn. Returns {"entries":
    source entries, "added", "grown", "duplicates", "events": source events, "events_added"}. Raises LanternError
    when the verification fails, when ``src`` is a path with no file, when ``src`` and ``dst`` are the same database
    (the same file by any path; the same database of the same server by any URL) before anything is written, and for
    a driver's or the file system's error, naming the store it is about (``database SRC: ...`` or ``database DST:
    ...``, a URL without its password); EmbedderMismatchError when ``dst`` holds another embedder's vectors."""
    import tempfile

    if (
        not is_server_url(src)
        and not is_server_url(dst)
        and Path(src).exists()
        and Path(dst).exists()
        and os.path.samefile(src, dst)
    ):
        raise _CopyError(f"copy {src} -> {dst}: both name the same database file; nothing copied")
    where: Any = ("SRC", src)  # the end of the copy the next error is about (``_named``, ``_located``)
    try:
        source = _Source(src)
        try:
            with tempfile.TemporaryFile("w+", encoding="utf-8", newline="") as tmp:
                where = _TEMPORARY
                total = export_jsonl(source, tmp, scope=None)
                where = ("SRC", src)
                events_of_source = read_events(source.store)
                if not source.store.unchanged():
                    raise LanternError(
                        f"{source.path}: another process wrote to it while it was read; nothing was copied, run the "
                        "copy again"
                    )
                tmp.seek(0)
                where = ("DST", dst)
                with open_target(source.embedder) as target:
                    same = source.store.database_identity()
                    if same is not None and same == target.store.database_identity():
                        raise _CopyError(
                            f"copy {source.path} -> {target.path}: both name the same database on the same server; "
                            "nothing copied"
                        )

                    def report(line: int) -> None:  # import counts lines: the header is line 1
                        if progress:
                            progress(min(max(line - 1, 0), total), total)

                    result = target.import_(tmp, progress=report)
                    new_ids = list(result.entry_ids.values())
                    found = target.store.entries(new_ids, text=False, tags=False)
                    with_vectors = {r[0] for r in target.store.rows_by_id(sorted(set(new_ids)))}
                    if (
                        result.added + result.grown + result.duplicates != total
                        or len(found) != len(set(new_ids))
                        or len(with_vectors) != len(set(new_ids))
                        or len(result.entry_ids) != total
                    ):
                        raise _CopyError(
                            f"copy {source.path} -> {target.path}: {total} entries read, {result.added} added, "
                            f"{result.grown} grown, {result.duplicates} already there, {len(found)} found after the "
                            f"copy, {len(with_vectors)} with their embedding: the counts disagree; run the copy again "
                            "(it skips what is there)"
                        )
                    events = copy_events(events_of_source, target, result.entry_ids)
        finally:
            source.close()
    except _CopyError:
        raise
    except LanternError as e:  # the store's own line, named SRC or DST
        raise _named(e, where) from None
    except Exception as e:
        if not isinstance(e, (sqlite3.Error, OSError)) and not type(e).__module__.startswith("psycopg"):
            raise
        if where is _TEMPORARY and not isinstance(e, OSError):  # reading the source failed, not the file
            where = ("SRC", src)
        raise _located(e, where) from e
    return {
        "entries": total,
        "added": result.added,
        "grown": result.grown,
        "duplicates": result.duplicates,
        "events": sum(events),
        "events_added": events[0],
    }


class _Source:
    """``copy_store``'s source: its store opened read-only (nothing created, migrated or written: a path or database
    that is not a Lantern store is refused) and the embedder its vectors were made with, as ``export_jsonl`` and
    ``Lantern(dst, embedder=...)`` read them."""

    def __init__(self, location: str | os.PathLike[str]):
        server = is_server_url(location)
        self.store = open_store(location if server else Path(location), readonly=True)
        try:
            self.path = self.store.path if server else location
            self.embedder = get_embedder(self.store.get_meta("embedder") or None)
            self.store.check_embedder(*store_record(self.embedder))
        except BaseException:
            self.store.close()
            raise

    def close(self) -> None:
        self.store.close()


class _CopyError(LanternError):
    """An error of ``copy_store`` that names both stores already (a LanternError when raised to the caller)."""


_TEMPORARY = object()  # copy_store's temporary file, as ``_located``'s ``where``


def _shown(where: Any) -> str:
    return redact_url(str(where))


def _named(e: BaseException, where: Any) -> BaseException:
    """The LanternError ``e`` of one end of a copy (``where``: ("SRC" or "DST", its location); the temporary file's
    errors are OSErrors, never here), its line saying which end: ``SRC PATH ...`` or ``DST URL: ...``, its type
    kept."""
    end, location = where if where is not _TEMPORARY else ("SRC", "")
    said, shown = str(e), _shown(location)
    if not said.startswith(shown):
        said = f"{shown}: {said}"
    e.args = (f"{end} {said}",)
    return e


def _located(e: BaseException, where: Any) -> Exception:
    """``e`` (a driver's or the file system's error during ``copy_store``) as a LanternError naming the end it is
    about, ``where`` (("SRC" or "DST", a path or a URL shown without its password, the driver's words scrubbed of
    it: config.scrub), or the copy's temporary file for ``_TEMPORARY``)."""
    from lantern.config import scrub

    location = where[1] if where is not _TEMPORARY else None
    said = (str(e).strip().splitlines() or [type(e).__name__])[0]
    words = scrub(said, location if isinstance(location, str) else None)
    if isinstance(e, OSError) and e.strerror:
        words = e.strerror
    if where is _TEMPORARY:
        import tempfile

        return LanternError(f"the copy's temporary file in {tempfile.gettempdir()}: {words}")
    return LanternError(f"{where[0]} {_shown(location)}: {words}")
