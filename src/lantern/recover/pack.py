"""Packing into a character budget (docs/architecture.md §3.5).

In MMR order, whole entries that fit; an entry longer than what is left of the budget (a 100 KB tool log) is packed
as its most relevant excerpt around the matched query terms, not dropped. Every entry is headed with its session,
turn and time so the model can cite it. All lengths are in characters (Python ``len``), budget included.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from lantern.model import Entry

# one title for every block: "earlier in this conversation" would be wrong of an earlier session's turns, "earlier
# sessions" of this session's; the session lines and headers name where each turn comes from
TITLE = "[Recovered by Lantern from earlier turns: verbatim archived turns, oldest facts may be outdated]"
ELLIPSIS = "…"
FULL_BELOW = 80  # with fewer characters left than this, packing stops (no header + excerpt fits) (ours)
FIRST_EXCERPT_MIN = 40  # the first entry is excerpted into as little room as this (ours)
MAX_MATCHES = 5_000  # occurrences considered when choosing an excerpt (ours; bounds work on a 1 MB entry)


def header(entry: Entry, with_session: bool = True) -> str:
    """``[session S · turn N · 2024-08-05 12:34]`` (time omitted when unknown; session omitted when the title
    names the one session every packed entry comes from)."""
    when = f" · {entry.time.strftime('%Y-%m-%d %H:%M')}" if entry.time else ""
    where = f"session {entry.session} · " if with_session else ""
    return f"[{where}turn {entry.turn}{when}]"


def title(session: str | None = None) -> str:
    """The block's first line: ``TITLE``, naming the one ``session`` every packed turn comes from when given (its
    turns then carry no session in their headers)."""
    return TITLE if session is None else TITLE[:-1] + f", all from session {session}]"


def excerpt(text: str, terms: list[str], width: int) -> str:
    """The ``width``-character window of ``text`` holding the most distinct query terms (then the most matches),
    widened to line boundaries when that costs little, with ``…`` marking each cut. Case-insensitive. With no match,
    the head of the text. Returns at most ``width`` characters."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    inner = width - 2 * len(ELLIPSIS)
    if inner <= 0:
        return text[:width]
    words = sorted({t.lower() for t in terms if t.strip()}, key=len, reverse=True)
    matches: list[tuple[int, str]] = []
    if words:
        pattern = re.compile("|".join(re.escape(w) for w in words), re.IGNORECASE)
        for m in pattern.finditer(text):
            matches.append((m.start(), m.group(0).lower()))
            if len(matches) >= MAX_MATCHES:
                break
    start = _best_window(matches, inner) if matches else 0
    start = max(0, min(start, len(text) - inner))
    line = text.rfind("\n", max(0, start - 80), start + 1)
    if line != -1 and line + 1 <= start:
        start = line + 1
    body = text[start : start + inner]
    prefix = ELLIPSIS if start > 0 else ""
    suffix = ELLIPSIS if start + inner < len(text) else ""
    return prefix + body + suffix


def _best_window(matches: list[tuple[int, str]], inner: int) -> int:
    """Start offset of a window of ``inner`` characters covering the most distinct terms (two pointers over the
    sorted match positions), centred on the covered matches."""
    best = (0, 0, 0, 0)  # (distinct, count, first, last)
    counts: Counter[str] = Counter()
    lo = 0
    for hi, (pos, term) in enumerate(matches):
        counts[term] += 1
        while pos + len(term) - matches[lo][0] > inner:
            old = matches[lo][1]
            counts[old] -= 1
            if not counts[old]:
                del counts[old]
            lo += 1
        score = (len(counts), hi - lo + 1)
        if score > best[:2]:
            best = (*score, matches[lo][0], pos + len(term))
    first, last = best[2], best[3]
    return max(0, first - (inner - (last - first)) // 2)


@dataclass
class Packed:
    """One packed entry: the text injected (whole or excerpt)."""

    entry: Entry
    text: str
    excerpt: bool


@dataclass
class PackResult:
    text: str
    packed: list[Packed] = field(default_factory=list)
    verdicts: dict[int, tuple[str, str]] = field(default_factory=dict)  # entry id -> (verdict, reason)


def group_header(entry: Entry) -> str:
    """``[session S · 2024-08-05 12:34]``: one line per session in a grouped block, with the time of the entry that
    opened it (omitted when unknown)."""
    return f"[session {entry.session}{_when(entry)}]"


def turn_header(entry: Entry, opened: str) -> str:
    """``[turn N]`` under a session line whose time ``opened`` (``" · YYYY-MM-DD HH:MM"`` or ``""``) is the
    entry's own; ``[turn N · 12:34]`` on the same day; else ``[turn N · 2024-08-05 12:34]``."""
    own = _when(entry)
    if own == opened or not own:
        return f"[turn {entry.turn}]"
    return f"[turn {entry.turn} · {own[-5:]}]" if own[:13] == opened[:13] else f"[turn {entry.turn}{own}]"


def _when(entry: Entry) -> str:
    return f" · {entry.time.strftime('%Y-%m-%d %H:%M')}" if entry.time else ""


def pack(
    entries: Iterable[Entry],
    budget: int,
    terms: list[str],
    min_excerpt: int = 200,
    entry_share: float = 1.0,
    session: str | None = None,
    group: bool = False,
    max_entries: int | None = None,
) -> PackResult:
    """Pack ``entries`` (already in MMR order) into at most ``budget`` characters, the title line included.
    No entry takes more than ``entry_share`` of the budget: a longer one is packed as its excerpt of that size, so
    one long tool log cannot crowd out every other entry (ours). Verdicts per entry id: ``packed``, ``excerpt``,
    ``cut:budget``. ``session``: the one session all entries come from, named once in the title instead of in
    every header (short turns would otherwise spend a third of the budget on headers), its turns rendered in
    conversation order (the selection is still made in MMR order). ``max_entries``: stop after that many entries
    are packed (the agent's top-k; None: as many as fit).
    ``group`` (ours): entries from several sessions are rendered grouped by session, each session named once on a
    ``group_header`` line (sessions in the order their first entry was packed; inside a session, turns in
    conversation order) with a short ``turn_header`` per entry; the selection is still made in MMR order, a
    session line counted when its first entry is packed. Turns of a few hundred characters (chat) spend about a
    third of the budget on full headers; grouped, a question and its answer in the next turn also read in order."""
    if group and session is None:
        return _pack_grouped(entries, budget, terms, min_excerpt, entry_share, max_entries)
    result = PackResult(text="")
    parts: list[str] = []
    top = title(session)
    used = len(top)
    for entry in entries:
        if budget - used < FULL_BELOW or (max_entries is not None and len(result.packed) >= max_entries):
            break  # the rest is cut unread: callers mark entries without a verdict as cut:budget
        head = header(entry, with_session=session is None) + "\n"
        room = min(budget - used, int(budget * entry_share)) - len(head) - 2  # two newlines separate blocks
        body = _fit(entry, room, terms, min_excerpt if parts else FIRST_EXCERPT_MIN, result)
        if body is None:
            continue
        parts.append((entry, head + body))
        used += len(head) + len(body) + 2
    if session is not None:  # one session: its turns in conversation order, as in a grouped block; else MMR order
        parts.sort(key=lambda p: (p[0].turn, p[0].id))
    if parts:
        result.text = top + "\n\n" + "\n\n".join(text for _, text in parts)
    return result


def _fit(entry: Entry, room: int, terms: list[str], floor: int, result: PackResult) -> str | None:
    """The body of ``entry`` within ``room`` characters (whole, or its excerpt), its verdict and Packed record
    added to ``result``; None (verdict ``cut:budget``) when an excerpt would be shorter than ``floor`` (an excerpt
    shorter than min_excerpt is not worth its header, unless nothing else was packed)."""
    if room <= 0 or (len(entry.text) > room and room < floor):
        result.verdicts[entry.id] = ("cut:budget", f"{max(room, 0)} characters left, entry has {len(entry.text)}")
        return None
    if len(entry.text) <= room:
        body, cut = entry.text, False
        result.verdicts[entry.id] = ("packed", f"whole, {len(body)} characters")
    else:
        body, cut = excerpt(entry.text, terms, room), True
        result.verdicts[entry.id] = ("excerpt", f"{len(body)} of {len(entry.text)} characters around the matched terms")
    result.packed.append(Packed(entry, body, cut))
    return body


def _pack_grouped(
    entries: Iterable[Entry],
    budget: int,
    terms: list[str],
    min_excerpt: int,
    entry_share: float,
    max_entries: int | None = None,
) -> PackResult:
    """``pack`` with ``group``: the same selection rule, the cost of a session line paid by its first entry."""
    result = PackResult(text="")
    used = len(TITLE)
    groups: dict[str, tuple[str, str, list[tuple[Entry, str]]]] = {}  # session -> (line, opened, [(entry, text)])
    for entry in entries:
        if budget - used < FULL_BELOW or (max_entries is not None and len(result.packed) >= max_entries):
            break
        new = entry.session not in groups
        line = group_header(entry) if new else groups[entry.session][0]
        opened = _when(entry) if new else groups[entry.session][1]
        head = turn_header(entry, opened) + "\n"
        extra = len(line) + 2 if new else 0  # a session line and the blank line before it
        room = min(budget - used - extra, int(budget * entry_share)) - len(head) - 1  # one newline after the entry
        body = _fit(entry, room, terms, min_excerpt if result.packed else FIRST_EXCERPT_MIN, result)
        if body is None:
            continue
        if new:
            groups[entry.session] = (line, opened, [])
        groups[entry.session][2].append((entry, head + body))
        used += extra + len(head) + len(body) + 1
    if groups:
        blocks = [
            line + "\n" + "\n".join(text for _, text in sorted(members, key=lambda m: (m[0].turn, m[0].id)))
            for line, _, members in groups.values()
        ]
        result.text = title() + "\n\n" + "\n\n".join(blocks)
    return result
