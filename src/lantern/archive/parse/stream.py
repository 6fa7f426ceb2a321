"""Streaming parse of a JSONL transcript file: records read line by line, parsed in slices, so a file of any size
is read in bounded memory (ours; used by ``Lantern.ingest``).

    s = open_stream(path)            # None: not streamable (parse it whole)
    for piece in s.slices():         # ParseResult of up to SLICE_LINES lines; s.bytes_done after each
        ...

Streamable: a UTF-8 file whose first non-empty line is a JSON object and which has a second non-empty line, in
a format of ``ITEM_PARSERS`` (openai, anthropic, jsonl, codex, sharegpt). The messages, skips and warnings are
those of ``parse`` on the whole file, in order (the same per-record parsers, with the same document state).
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lantern.archive.parse.jsonl import (
    NESTED_TOO_DEEPLY,
    ParseResult,
    check_foreign,
    loads,
    unwrap,
)
from lantern.archive.parse.locomo import is_locomo_sample
from lantern.errors import TranscriptFormatError

SLICE_LINES = 2000  # JSONL lines per parsed slice (ours)
HEAD_RECORDS = 200  # records given to detect_format when streaming with format auto (ours)
_HEAD_BYTES = 65536
_MESSAGE_FORMATS = {"openai", "anthropic", "jsonl"}  # their records may be wrapped {"message": {...}}


def _records(path: Path, sizes: list[int] | None = None) -> Iterator[tuple[int, Any, str | None]]:
    """``(line number, record or None, warning or None)`` for every line of a UTF-8 file (empty lines give
    ``(n, None, None)``). When ``sizes`` is given, ``sizes[0]`` is kept at the bytes read so far."""
    n = 0
    with open(path, "rb") as f:
        for raw in f:
            if sizes is not None:
                sizes[0] += len(raw)
            if n == 0 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]
            raw = raw[:-1] if raw.endswith(b"\n") else raw
            raw = raw[:-1] if raw.endswith(b"\r") else raw
            # a lone CR ends a line too (CR-only or mixed files; a raw CR cannot be inside a JSON string), and
            # line numbers count it, as parse's do
            for piece in raw.split(b"\r") if b"\r" in raw else (raw,):
                n += 1
                yield _record(n, piece)


def _record(n: int, raw: bytes) -> tuple[int, Any, str | None]:
    if not raw.strip():
        return n, None, None
    try:
        obj = loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        return n, None, f"line {n}: invalid UTF-8 at byte {e.start}; skipped"
    except RecursionError:
        return n, None, f"line {n}: {NESTED_TOO_DEEPLY}; skipped"
    except ValueError as e:
        return n, None, f"line {n}: invalid JSON ({getattr(e, 'msg', e)}); skipped"
    if isinstance(obj, dict):
        return n, obj, None
    return n, None, f"line {n}: not a JSON object; skipped"


def _is_jsonl(path: Path) -> bool:
    """True when the file is UTF-8 (no NUL, no UTF-16 BOM), its first non-empty line parses as a JSON object and
    a second non-empty line exists."""
    with open(path, "rb") as f:
        head = f.read(_HEAD_BYTES)
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or b"\x00" in head:  # UTF-16/32: parsed whole
        return False
    seen = 0
    for _, obj, warning in _records(path):
        if obj is None and warning is None:
            continue
        if seen == 0 and (obj is None or is_locomo_sample(obj)):
            return False
        seen += 1
        if seen == 2:
            return True
    return False


class Stream:
    """An open streamable JSONL file: ``format``, ``bytes_total``, ``bytes_done`` (updated as ``slices()`` runs)."""

    def __init__(self, path: Path, fmt: str, source: str | None):
        from lantern.archive.parse import ITEM_PARSERS

        self.path, self.format, self.source = path, fmt, source
        self.bytes_total = os.path.getsize(path)
        self.bytes_done = 0
        self._feeder = ITEM_PARSERS[fmt](source)

    def slices(self, lines: int | None = None) -> Iterator[ParseResult]:
        """Parse the file in slices of ``lines`` lines (default SLICE_LINES) -> one ParseResult each (messages,
        skipped, warnings). Raises TranscriptFormatError when a record is structurally wrong for the format (as
        ``parse`` does)."""
        lines = lines or SLICE_LINES
        piece = ParseResult(format=self.format)
        unwrap_items = self.format in _MESSAGE_FORMATS
        read = [0]
        for n, obj, warning in _records(self.path, read):
            if warning:
                piece.skip(warning)
            elif obj is not None:
                try:
                    self._feeder.feed(f"line {n}", unwrap(obj) if unwrap_items else obj, piece)
                except RecursionError:  # a line json read but deeper than the parser can walk: as a bad line
                    piece.skip(f"line {n}: {NESTED_TOO_DEEPLY}; skipped")
            if n % lines == 0:
                self.bytes_done = min(read[0], self.bytes_total)
                yield piece
                piece = ParseResult(format=self.format)
        self.bytes_done = self.bytes_total
        yield piece


def _detect(path: Path, detect_format: Any, detect_records: Any) -> str:
    """``auto`` for a JSONL file: ``detect_format`` on its first HEAD_RECORDS records (so every document-level
    detector, e.g. Codex or ShareGPT, sees them as it would the whole file); when that finds only plain or
    text-part messages, ``detect_records`` over the whole file (a tool call may come late), stopping at the
    first decisive record."""
    head = []
    for _, obj, _ in _records(path):
        if obj is not None:
            head.append(obj)
            if len(head) >= HEAD_RECORDS:
                break
    fmt = detect_format(head)
    if fmt in ("jsonl", "openai"):
        fmt = detect_records(obj for _, obj, _ in _records(path) if obj is not None)
    return fmt


def _check_all(path: Path, fmt: str, source: str) -> None:
    """A pass over every record before anything is archived: raise TranscriptFormatError (naming the line and
    field) for tool structure the ``fmt`` parser would drop (``check_foreign``), so a wrong or mixed format
    fails before the first batch is written, not halfway through the file."""
    for n, obj, _ in _records(path):
        if obj is not None:
            check_foreign(fmt, unwrap(obj), f"line {n}", source)


def open_stream(path: str | os.PathLike[str], format: str = "auto", name: str | None = None) -> Stream | None:
    """A ``Stream`` over ``path`` when it is a streamable JSONL file (module docstring), else None (parse the
    file whole with ``parse``). ``format``: ``auto`` (``detect_records`` over the records, stopping at the first
    decisive one) or a format name; a format that cannot stream gives None. Raises TranscriptFormatError for an
    unreadable file, and (after a check of every record) for tool structure the chosen message format would
    drop, so such a file fails before anything is archived."""
    from lantern.archive.parse import FORMATS, ITEM_PARSERS, detect_format, detect_records

    if format != "auto" and format not in FORMATS:
        raise TranscriptFormatError(
            f"unknown format {format!r}; expected auto or one of {', '.join(FORMATS)}", field="format", source=name
        )
    path = Path(path)
    if format != "auto" and format not in ITEM_PARSERS:
        return None
    try:
        if not path.is_file() or not _is_jsonl(path):
            return None
        fmt = format if format != "auto" else _detect(path, detect_format, detect_records)
        if fmt in _MESSAGE_FORMATS:
            _check_all(path, fmt, name or str(path))
    except OSError as e:
        raise TranscriptFormatError(f"cannot read file: {e.strerror or e}", source=name or str(path)) from e
    except RecursionError:
        raise TranscriptFormatError(NESTED_TOO_DEEPLY, source=name or str(path)) from None
    return Stream(path, fmt, name or str(path)) if fmt in ITEM_PARSERS else None
