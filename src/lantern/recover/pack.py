"""Packing into a character budget (docs/architecture.md §3.5).

In MMR order, whole entries that fit; an entry longer than what is left of the budget (a 100 KB tool log) is packed
as its most relevant excerpt around the matched query terms, not dropped. Every entry is headed with its session,
turn and time so the model can cite it. All lengths are in characters (Python ``len``), budget included.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache

from lantern import lazy_re
from lantern.model import Entry
from lantern.text.cjk import CJK_CLASS

# one title for every block: "earlier in this conversation" would be wrong of an earlier session's turns, "earlier
# sessions" of this session's; the session lines and headers name where each turn comes from
TITLE = "[Recovered by Lantern from earlier turns: verbatim archived turns, oldest facts may be outdated]"
ELLIPSIS = "…"
FULL_BELOW = 80  # with fewer characters left than this, packing stops (no header + excerpt fits) (ours)
FIRST_EXCERPT_MIN = 40  # the first entry is excerpted into as little room as this (ours)
ELLIPSIS_WIDEN = 80  # a window may move back this far to start at a line (ours)
FRAGMENT_JOIN = "\n…\n"  # between two fragments of one excerpt
MIN_FRAGMENT = 160  # two fragments only when each gets at least this many characters (ours)
TWO_FRAGMENTS_GAIN = 0.10  # two fragments when they cover 10% more weight than one window (ours)
TERM_POSITIONS = 256  # occurrences of one term recorded (its count goes on): bounds work on a 1 MB entry (ours)
# a term is matched by at most its first this many characters: the scan compares at most this many per position
# and term, so it stays linear in the text whatever the term's length (a 5,000-character token in the query);
# longer than the paths and identifiers of ordinary turns (ours)
MATCH_CHARS = 128
_WORD_START = r"(?<![0-9A-Za-z])"
_SUFFIXES = ("ation", "ing", "ed", "es", "s", "ly")


def header(entry: Entry, with_session: bool = True) -> str:
    """``[session S · turn N · 2024-08-05 12:34]`` (time omitted when unknown or when the session's name shows it,
    ``_shown_when``; session omitted when the title names the one session every packed entry comes from)."""
    if not with_session:
        return f"[turn {entry.turn}{_when(entry)}]"
    return f"[session {entry.session} · turn {entry.turn}{_shown_when(entry)}]"


def title(session: str | None = None) -> str:
    """The block's first line: ``TITLE``, naming the one ``session`` every packed turn comes from when given (its
    turns then carry no session in their headers)."""
    return TITLE if session is None else TITLE[:-1] + f", all from session {session}]"


def excerpt(text: str, terms: list[str], width: int, fractions: dict[str, float] | None = None) -> str:
    """At most ``width`` characters of ``text`` around the query's RAREST matched terms, with ``…`` marking each
    cut; the head of the text when no term matches. Case-insensitive; a word term also matches its inflections at a
    word start ("failing" matches "FAILED", ``stem_prefix``).

    Each matched term weighs its rarity in the entry times its rarity in the store (``term_weights``): in a 115 KB
    pytest log "test" is on every line and weighs ~0, the one "FAILED" line weighs most. The excerpt is one window
    covering the most weight, or two half-width fragments (joined by ``FRAGMENT_JOIN``) when two covers more: the
    user's request at the head of a turn and the failing test at the end of its output. Each window is widened to
    a line start when that costs little. ``fractions``: each term's share of the store's rows (``Store.
    term_fractions``, keyed by quoted term); without it every term is equally rare in the store."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    inner = width - 2 * len(ELLIPSIS)
    if inner <= 0:
        return text[:width]
    matches, counts, words = _matches(text, terms)
    if not matches:
        return _render(text, [(0, inner)])
    weights = term_weights(counts, words, len(text), inner, fractions)
    one = _best_window(matches, weights, inner, set())
    windows = [(one[1], inner)]
    half = (width - 2 * len(ELLIPSIS) - len(FRAGMENT_JOIN)) // 2
    if half >= MIN_FRAGMENT:
        first = _best_window(matches, weights, half, set())
        covered = {t for p, e, t in matches if first[1] <= p and min(e, p + half) <= first[1] + half}
        second = _best_window(matches, weights, half, covered)
        apart = abs(second[1] - first[1]) >= half + len(FRAGMENT_JOIN)
        if apart and second[0] > 0 and first[0] + second[0] > one[0] * (1 + TWO_FRAGMENTS_GAIN):
            windows = sorted([(first[1], half), (second[1], half)])
    return _render(text, windows)


def stem_prefix(term: str) -> str:
    """The prefix a word term matches at a word start: the term without one inflection suffix (``ing``, ``ed``,
    ``s`` ...; a doubled last consonant undone), when at least 4 letters are left; else the term. "failing" ->
    "fail", "stopped" -> "stop", "settings" -> "setting". A light stand-in for the Porter stemmer the full-text
    index uses (store/migrations.py m005)."""
    if not (term.isascii() and term.isalpha()):
        return term
    for suffix in _SUFFIXES:
        if term.endswith(suffix) and len(term) - len(suffix) >= 4:
            stem = term[: -len(suffix)]
            if len(stem) >= 5 and stem[-1] == stem[-2] and stem[-1] not in "lsz":
                stem = stem[:-1]
            return stem
    return term


def _pattern(term: str) -> str:
    """The regex of one query term: a word term (ASCII letters, digits, ``_``) as a stem prefix at a word start
    (``_`` counts as a boundary: "retention" matches in "RETENTION_DAYS"), anything else (paths, CJK bigrams) as a
    plain substring; either cut to ``MATCH_CHARS`` characters (``_literal``)."""
    return (_WORD_START if _is_word(term) else "") + re.escape(_literal(term))


def _is_word(term: str) -> bool:
    return term.isascii() and term[:1].isalnum() and all(c.isalnum() or c == "_" for c in term)


def _literal(term: str) -> str:
    """The characters every match of ``_pattern(term)`` consists of: the stem prefix of a word term, else the term,
    at most its first ``MATCH_CHARS``."""
    return (stem_prefix(term) if _is_word(term) else term)[:MATCH_CHARS]


def _matches(text: str, terms: list[str]) -> tuple[list[tuple[int, int, int]], Counter[int], list[str]]:
    """(start, end, term index) of the query terms' occurrences in ``text``, in text order (at most
    ``TERM_POSITIONS`` per term, so a term on every line of a 1 MB log cannot crowd out the rare ones), each
    term's full count, and the terms (lowercased, longest first: the longer term wins at the same position)."""
    words = sorted({t.lower() for t in terms if t.strip()}, key=len, reverse=True)
    # a term whose literal part is nowhere in the text cannot match: dropped before the one alternation pass, whose
    # cost grows with the number of alternatives at every position. upper() then casefold() puts the characters
    # re.IGNORECASE treats as one (ı and I, ſ and s, ß and ẞ, µ and μ) on the same form, so no match is lost
    folded = text.upper().casefold()
    words = [w for w in words if _literal(w).upper().casefold() in folded]
    if not words:
        return [], Counter(), words
    pattern = re.compile("|".join(f"(?P<t{i}>{_pattern(w)})" for i, w in enumerate(words)), re.IGNORECASE)
    matches: list[tuple[int, int, int]] = []
    counts: Counter[int] = Counter()
    for m in pattern.finditer(text):
        key = int(m.lastgroup[1:])
        counts[key] += 1
        if counts[key] <= TERM_POSITIONS:
            matches.append((m.start(), m.end(), key))
    return matches, counts, words


def term_weights(
    counts: Counter[int], words: list[str], length: int, inner: int, fractions: dict[str, float] | None = None
) -> dict[int, float]:
    """Weight of each matched term: its idf inside the entry, ln(1 + length / (inner · count)) (the windows of the
    entry as documents: a term on every line weighs ~0, one seen once in a 115 KB log ~4.7), times its idf in the
    store, ln(1 + 1 / (fraction + 0.01)) (1.1 for a term in half the rows, 4.6 for one in none), 1 without
    ``fractions``. Ours: IDF-like weighting (Spärck Jones 1972) of the excerpt's window."""
    out = {}
    for key, n in counts.items():
        inside = math.log1p(length / (inner * n))
        store = 1.0
        if fractions is not None:
            store = math.log1p(1.0 / (fractions.get(quote_term(words[key]), 0.0) + 0.01))
        out[key] = inside * store
    return out


def quote_term(term: str) -> str:
    """A term as the FTS5 string ``Store.term_fractions`` keys it by (recover/signals.py ``quote``)."""
    return '"' + term.replace('"', '""') + '"'


def _best_window(
    matches: list[tuple[int, int, int]], weights: dict[int, float], inner: int, covered: set[int]
) -> tuple[float, int]:
    """(weight covered, start offset) of the ``inner``-character window covering the most weight of distinct terms
    not in ``covered`` (each term counted once; more matches break ties), by two pointers over the matches in
    text order; the window is centred on the matches it covers. A match longer than the window (a long path's
    ``MATCH_CHARS`` in a 40-character excerpt) counts as covered by the window that starts where it starts: its
    end is taken as at most ``inner`` past its start, so every window holds at least the match it ends at."""
    best = (0.0, 0, matches[0][0], min(matches[0][1], matches[0][0] + inner))  # (weight, count, first, last)
    inside: Counter[int] = Counter()
    weight = 0.0
    lo = 0
    # the matches do not overlap (one regex pass), so their starts and clipped ends both grow: a match the window
    # left behind never fits again, and the left pointer never passes the right one
    for hi, (start, end, term) in enumerate(matches):
        end = min(end, start + inner)
        inside[term] += 1
        if inside[term] == 1 and term not in covered:
            weight += weights.get(term, 0.0)
        while end - matches[lo][0] > inner:
            old = matches[lo][2]
            inside[old] -= 1
            if not inside[old]:
                del inside[old]
                if old not in covered:
                    weight -= weights.get(old, 0.0)
            lo += 1
        if (weight, hi - lo + 1) > best[:2] and weight > 1e-12:
            best = (weight, hi - lo + 1, matches[lo][0], end)
    first, last = best[2], best[3]
    return best[0], max(0, first - (inner - (last - first)) // 2)


def _render(text: str, windows: list[tuple[int, int]]) -> str:
    """The windows ((start, size), in text order, not overlapping) of ``text``, each moved back to a line start
    within ``ELLIPSIS_WIDEN`` characters, its cut words' parts dropped (``_word_edges``), with ``…``
    at each cut and ``FRAGMENT_JOIN`` between two. Each window keeps at most ``size`` characters."""
    parts: list[str] = []
    prev_end = 0
    for n, (start, size) in enumerate(windows):
        start = max(prev_end, min(start, len(text) - size))
        line = text.rfind("\n", max(prev_end, start - ELLIPSIS_WIDEN), start + 1)
        if line != -1 and line + 1 <= start:
            start = line + 1
        elif line == -1 and start - ELLIPSIS_WIDEN <= prev_end:  # the text's start (or the previous window's end)
            start = prev_end
        start, end = _word_edges(text, start, start + size, prev_end)
        body = text[start:end]
        if n == 0:
            parts.append((ELLIPSIS if start > 0 else "") + body)
        else:
            parts.append((FRAGMENT_JOIN if start > prev_end else "") + body)
        prev_end = end
    return "".join(parts) + (ELLIPSIS if prev_end < len(text) else "")


WORD_WIDEN = 24  # a cut inside a word moves to the word's edge when it is this close (ours)


def _word_edges(text: str, start: int, end: int, floor: int) -> tuple[int, int]:
    """``text[start:end]`` without the parts of words cut at its edges: the start moved forward, the end back, to the
    nearest place that is no word cut (``_inside_word``: a space, or next to a CJK character), each only within
    ``WORD_WIDEN`` characters (a 2 KB line of base64 is cut where it is). Only characters of a cut word are dropped,
    so every whole word the window held is kept (an answer that fitted still does). ``floor``: the previous
    window's end (a start there is no cut)."""
    end = min(end, len(text))
    if floor < start < end and _inside_word(text, start):
        edge = next((i for i in range(start + 1, min(end, start + WORD_WIDEN)) if not _inside_word(text, i)), None)
        if edge is not None:
            start = edge + 1 if text[edge].isspace() else edge
    if start < end < len(text) and _inside_word(text, end):
        edge = next((i for i in range(end - 1, max(start, end - WORD_WIDEN), -1) if not _inside_word(text, i)), None)
        if edge is not None:
            end = edge - 1 if text[edge - 1].isspace() else edge
    return start, max(start, end)


_CJK_CHAR = lazy_re.compile(f"[{CJK_CLASS}]")


def _inside_word(text: str, cut: int) -> bool:
    """Whether a cut before ``text[cut]`` splits a word: both neighbours are non-space and neither is a CJK
    character (Chinese and Japanese write no spaces: every character boundary may end a word)."""
    left, right = text[cut - 1], text[cut]
    if left.isspace() or right.isspace():
        return False
    return not (_CJK_CHAR.match(left) or _CJK_CHAR.match(right))


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
    opened it (omitted when unknown or when the session's name shows it, ``_shown_when``)."""
    return f"[session {entry.session}{_shown_when(entry)}]"


def turn_header(entry: Entry, opened: str) -> str:
    """``[turn N]`` under a session line whose time ``opened`` (``" · YYYY-MM-DD HH:MM"`` or ``""``) is the
    entry's own; ``[turn N · 12:34]`` on the same day; else ``[turn N · 2024-08-05 12:34]``."""
    own = _when(entry)
    if own == opened or not own:
        return f"[turn {entry.turn}]"
    return f"[turn {entry.turn} · {own[-5:]}]" if own[:13] == opened[:13] else f"[turn {entry.turn}{own}]"


def _when(entry: Entry) -> str:
    return _stamp(entry.time) if entry.time else ""


def _shown_when(entry: Entry) -> str:
    """``_when`` for a header that names the entry's session: "" when the name already holds that time (an aider
    session is named by the time it started, "2024-08-06 08:47:10"), so a header never says one value twice."""
    when = _when(entry)
    return "" if when and when[3:] in entry.session else when


@lru_cache(maxsize=4096)
def _stamp(time: datetime) -> str:
    """`` · YYYY-MM-DD HH:MM`` of ``time``: packing asks for each entry's several times per header it weighs."""
    return f" · {time.strftime('%Y-%m-%d %H:%M')}"


def pack(
    entries: Iterable[Entry],
    budget: int,
    terms: list[str],
    min_excerpt: int = 200,
    entry_share: float = 1.0,
    session: str | None = None,
    group: bool = False,
    max_entries: int | None = None,
    fractions: dict[str, float] | None = None,
    lookahead: int = 3,
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
    third of the budget on full headers; grouped, a question and its answer in the next turn also read in order.

    Length-aware (ours): an entry that does not fit whole would be excerpted into what is left. Before that, the
    next ``lookahead`` entries in MMR order that fit whole in at most ``SHORT_SHARE`` of that room are packed
    first; the long entry's excerpt gets the rest. At a small budget, a short turn that answers is not crowded
    out by the excerpt of a 4 KB task statement that merely matches; at the default budget the block barely changes
    (few entries are excerpted, and only short ones are moved ahead). ``fractions``: the terms' shares of the store's
    rows, for choosing excerpts (``excerpt``)."""
    block = _Block(budget, terms, min_excerpt, entry_share, session, group and session is None, fractions)
    pending = iter(entries)
    ahead: list[Entry] = []
    while block.room_left() >= FULL_BELOW and (max_entries is None or len(block.out.packed) < max_entries):
        entry = ahead.pop(0) if ahead else next(pending, None)
        if entry is None:
            break
        if not block.fits_whole(entry) and lookahead > 0:
            room = block.room(entry)
            while len(ahead) < lookahead and (more := next(pending, None)) is not None:
                ahead.append(more)
            for short in list(ahead):
                if max_entries is not None and len(block.out.packed) >= max_entries - 1:
                    break  # the long entry keeps its place among the max_entries
                if block.fits_whole(short) and block.cost(short) <= SHORT_SHARE * room:
                    block.add(short)
                    ahead.remove(short)
        block.add(entry)
    for entry in ahead:  # read for the look-ahead, too long to go first, and the budget ran out before its turn
        block.out.verdicts[entry.id] = (
            "cut:budget",
            f"passed over for shorter entries; {max(block.room(entry), 0)} characters left, entry has "
            f"{len(entry.text)}",
        )
    return block.result()


SHORT_SHARE = 0.25  # an entry packed ahead of a long one's excerpt takes at most this share of its room (ours)


class _Block:
    """The block being packed: its text so far, what is left of the budget, and each entry's cost and room (a
    header, a session line for a session's first entry in a grouped block, the separators)."""

    def __init__(
        self,
        budget: int,
        terms: list[str],
        min_excerpt: int,
        entry_share: float,
        session: str | None,
        grouped: bool,
        fractions: dict[str, float] | None,
    ) -> None:
        self.budget, self.terms, self.min_excerpt, self.share = budget, terms, min_excerpt, entry_share
        self.session, self.grouped, self.fractions = session, grouped, fractions
        self.top = title(session)
        self.used = len(self.top)
        self.parts: list[tuple[Entry, str]] = []  # ungrouped: (entry, header + body)
        self.groups: dict[str, tuple[str, str, list[tuple[Entry, str]]]] = {}  # session -> (line, opened, parts)
        self.out = PackResult(text="")

    def room_left(self) -> int:
        return self.budget - self.used

    def _head(self, entry: Entry) -> tuple[str, int]:
        """(the entry's header line with its newline, the characters it costs beyond header and body)."""
        if not self.grouped:
            return header(entry, with_session=self.session is None) + "\n", 2  # two newlines separate blocks
        if entry.session in self.groups:
            return turn_header(entry, self.groups[entry.session][1]) + "\n", 1  # one newline after the entry
        line = group_header(entry)
        return turn_header(entry, _when(entry)) + "\n", len(line) + 2 + 1  # the session line, a blank line

    def room(self, entry: Entry) -> int:
        """Characters its body may take."""
        head, extra = self._head(entry)
        if self.grouped:
            return min(self.budget - self.used - (extra - 1), int(self.budget * self.share)) - len(head) - 1
        return min(self.budget - self.used, int(self.budget * self.share)) - len(head) - extra

    def fits_whole(self, entry: Entry) -> bool:
        return len(entry.text) <= self.room(entry)

    def cost(self, entry: Entry) -> int:
        """Characters it costs packed whole."""
        head, extra = self._head(entry)
        return len(head) + len(entry.text) + extra

    def add(self, entry: Entry) -> None:
        """Pack it whole or as its excerpt, or cut it (verdicts in ``out``)."""
        head, extra = self._head(entry)
        floor = self.min_excerpt if self.out.packed else FIRST_EXCERPT_MIN
        body = _fit(entry, self.room(entry), self.terms, floor, self.out, self.fractions)
        if body is None:
            return
        self.used += len(head) + len(body) + extra
        if not self.grouped:
            self.parts.append((entry, head + body))
            return
        if entry.session not in self.groups:
            self.groups[entry.session] = (group_header(entry), _when(entry), [])
        self.groups[entry.session][2].append((entry, head + body))

    def result(self) -> PackResult:
        in_order = sorted if self.grouped or self.session is not None else lambda parts, key: parts
        if self.grouped and self.groups:  # sessions in the order they were opened; turns in conversation order
            blocks = [
                line + "\n" + "\n".join(text for _, text in in_order(members, key=_turn_order))
                for line, _, members in self.groups.values()
            ]
            self.out.text = self.top + "\n\n" + "\n\n".join(blocks)
        elif self.parts:  # one session: its turns in conversation order, as in a grouped block; else MMR order
            self.out.text = self.top + "\n\n" + "\n\n".join(text for _, text in in_order(self.parts, key=_turn_order))
        return self.out


def _turn_order(part: tuple[Entry, str]) -> tuple[int, int]:
    return part[0].turn, part[0].id


def _fit(
    entry: Entry, room: int, terms: list[str], floor: int, result: PackResult, fractions: dict[str, float] | None
) -> str | None:
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
        body, cut = excerpt(entry.text, terms, room, fractions), True
        result.verdicts[entry.id] = ("excerpt", f"{len(body)} of {len(entry.text)} characters around the rarest terms")
    result.packed.append(Packed(entry, body, cut))
    return body
