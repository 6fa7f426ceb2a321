"""The ``time`` signal: a query that names a calendar date ranks the turns of that date (ours).

"What did we decide on 7 July, 2023?", "What happened in January 2022?", "2023年5月8日说了什么": the date is in
the entries' timestamps (a chat turn says "yesterday", the session it belongs to carries the day), not in their
words, so neither BM25 nor the embedding finds it. Each absolute date the query names becomes a window (a day, or
a whole month; widened by ``slack_days`` on both sides, since a turn often tells what happened a few days
before); the entries whose time falls in a window are ranked by their cosine to the query. Fused by RRF with its
own weight. A query without an absolute date (or with a bare year, too wide to help) adds no ranking. Relative
dates ("last Friday") are not resolved: the query has no reference time of its own.
"""

from __future__ import annotations

import calendar
import re
from datetime import datetime, timezone

import numpy as np

from lantern import lazy_re
from lantern.store.index import MemoryIndex

TIME = "time"  # the signal's name in rankings, weights and explain output
SECONDS_PER_DAY = 86_400.0

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_M = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_PATTERNS = [
    lazy_re.compile(rf"\b{_YEAR}-(?P<month>[01]?\d)-(?P<day>[0-3]?\d)(?!\d)"),  # 2023-07-07, 2023-07-07T10:00Z
    lazy_re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_M},?\s+{_YEAR}\b", re.IGNORECASE),  # 7 July, 2023
    lazy_re.compile(rf"\b{_M}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE),  # July 7, 2023
    lazy_re.compile(rf"\b{_M},?\s+{_YEAR}\b", re.IGNORECASE),  # July 2023
    lazy_re.compile(
        r"(?P<year>(?:19|20)\d\d)\s*年\s*(?P<month>[01]?\d)\s*月(?:\s*(?P<day>[0-3]?\d)\s*[日号])?"
    ),  # 2023年7月7日
]


def _month(value: str) -> int:
    return int(value) if value.isdigit() else _MONTHS[value.lower().rstrip(".")]


def query_windows(text: str) -> list[tuple[float, float]]:
    """The absolute dates ``text`` names, as [start, end) windows in unix seconds (UTC): a day when the day is
    given, else the whole month. Overlapping mentions are read once (the first, most specific pattern wins);
    an impossible day (31 February, 2023) falls back to its month. Returns windows in order of appearance."""
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, tuple[float, float]]] = []
    for pattern in _PATTERNS:
        for m in pattern.finditer(text):
            if any(m.start() < e and s < m.end() for s, e in taken):
                continue
            try:
                year, month = int(m.group("year")), _month(m.group("month"))
                start = datetime(year, month, 1, tzinfo=timezone.utc)
                end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=timezone.utc).timestamp()
            except (ValueError, KeyError):
                continue
            day = m.groupdict().get("day")
            if day:
                try:
                    start = datetime(year, month, int(day), tzinfo=timezone.utc)
                    end = start.timestamp() + SECONDS_PER_DAY
                except ValueError:
                    pass  # an impossible day: the month
            taken.append((m.start(), m.end()))
            found.append((m.start(), (start.timestamp(), end)))
    return [w for _, w in sorted(found)]


def time_ranking(
    index: MemoryIndex,
    query_vector: np.ndarray,
    windows: list[tuple[float, float]],
    allowed: np.ndarray | None,
    n: int,
    slack_days: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose time lies in a window widened by ``slack_days`` on both sides, best ``n`` by cosine to the query
    (rows L2-normalized). Returns (positions best first, cosines); empty without windows or rows."""
    if not windows or not len(index.ids):
        return np.empty(0, np.int64), np.empty(0, np.float32)
    slack = slack_days * SECONDS_PER_DAY
    inside = np.zeros(len(index.ids), bool)
    for start, end in windows:
        inside |= (index.time >= start - slack) & (index.time < end + slack)
    if allowed is not None:
        inside &= allowed
    embedded = index.embedded()  # a row with no vector yet has no cosine to rank by (signals.semantic)
    if embedded is not None:
        inside &= embedded
    rows = np.flatnonzero(inside)
    if not len(rows):
        return np.empty(0, np.int64), np.empty(0, np.float32)
    cos = index.cosines(query_vector, rows)
    order = np.argsort(-cos, kind="stable")[:n]
    return rows[order], cos[order]
