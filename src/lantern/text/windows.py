"""Windows of a long text (docs/architecture.md §2.9): the full-text index holds a long turn as a few thousand
characters at a time, so BM25 ranks its tail against ordinary turns, not against its own length.

A 115 KB ``pytest -v`` output is one turn. Indexed as one row, BM25's length normalization (b = 0.75) divides the
weight of its one "FAILED" line by ~100 against a turn of ordinary length: the line that matters could not rank.
Indexed in windows of ``WINDOW_CHARS``, each window is a row of ordinary length.
"""

from __future__ import annotations

from lantern import lazy_re

__all__ = [
    "ESCAPED_LINE_MIN",
    "MAX_WINDOWS",
    "WINDOWED_FROM",
    "WINDOW_CHARS",
    "WINDOW_LEAD_CHARS",
    "WINDOW_OVERLAP",
    "unescaped",
    "windows",
]

WINDOW_CHARS = 2_000  # characters per window (ours: a few coding turns' worth; about what an excerpt shows)
WINDOW_OVERLAP = 200  # consecutive windows share this much, so a line at a boundary is whole in one (ours)
WINDOWED_FROM = 2 * WINDOW_CHARS  # texts longer than this are indexed in windows (ours)
WINDOW_LEAD_CHARS = 200  # each window's row starts with the turn's opening line, at most this long (ours)
MAX_WINDOWS = 4_095  # windows per text at most: past ~7 MB the windows grow instead (store/sqlite.py rowids)
ESCAPED_LINE_MIN = 3  # literal \n sequences that make a line a JSON-escaped run (ours; a file has one a line)
_ESCAPE = lazy_re.compile(r"\\[ntr]")


def unescaped(text: str) -> str:
    """``text`` as the full-text index reads it: on a line holding at least ``ESCAPED_LINE_MIN`` literal ``\\n``
    sequences (a JSON-escaped run: a tool call's arguments carrying a whole file as one string), each ``\\n``,
    ``\\t`` and ``\\r`` becomes a space. FTS5's tokenizer would otherwise glue the escape's letter to the next word:
    ``\\nRETENTION_DAYS = 45`` indexed ``nretention_days``, which no query names. Other lines are unchanged (a Windows
    path ``C:\\new\\data`` keeps its ``new``); the archived text itself is never changed."""
    if "\\" not in text:
        return text
    return "\n".join(
        _ESCAPE.sub(" ", line) if line.count("\\n") >= ESCAPED_LINE_MIN else line for line in text.split("\n")
    )


def windows(
    text: str, size: int = WINDOW_CHARS, overlap: int = WINDOW_OVERLAP, most: int = MAX_WINDOWS
) -> list[tuple[int, int]]:
    """(start, end) of the windows covering ``text``: ``size`` characters each (the last may be shorter), each one
    starting ``overlap`` characters before the previous one ended; a window ends after the last newline of its last
    ``overlap`` characters when there is one, so lines are cut as rarely as possible. At most ``most`` windows:
    for a longer text every window is wider. One window for a text of at most ``size`` characters."""
    n = len(text)
    if n <= size:
        return [(0, n)]
    if n > most * max(size - 2 * overlap, 1):  # a window advances at least size - 2 * overlap
        size = -(-n // most) + 2 * overlap
    out: list[tuple[int, int]] = []
    start = 0
    while True:
        end = min(start + size, n) if len(out) < most - 1 else n
        if end < n:
            line = text.rfind("\n", end - overlap, end)
            if line > start:
                end = line + 1
        out.append((start, end))
        if end >= n:
            return out
        start = max(end - overlap, start + 1)
