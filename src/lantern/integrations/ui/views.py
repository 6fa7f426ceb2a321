"""What each inspector page shows, computed from a ``Lantern`` handle: plain values for the templates (no HTML here;
the templates escape every text, charts.py builds the SVG)."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from lantern.llm import parse_answer
from lantern.model import split_rendered

FOLD_CHARS = 600  # ours: a tool call's arguments or a tool result longer than this is folded (<details>)
FOLD_LINES = 12
FOLD_MESSAGE_CHARS = 1500  # ours: a message (assistant or user text) longer than this is folded, its head shown
FOLD_MESSAGE_LINES = 30
PREVIEW_CHARS = 400  # the head of a folded message shown in its summary line
SUMMARY_CHARS = 240  # characters of an entry's summary shown in lists


@dataclass
class Block:
    """One rendered message of a turn (model.Message.render): ``kind`` message, call or result."""

    kind: str
    role: str
    name: str
    text: str

    @property
    def lines(self) -> int:
        return self.text.rstrip("\n").count("\n") + 1

    @property
    def folded(self) -> bool:
        """Whether the page folds it (``<details>``, the whole text one click away): a tool call or result over
        ``FOLD_CHARS`` or ``FOLD_LINES``, a message over ``FOLD_MESSAGE_CHARS`` or ``FOLD_MESSAGE_LINES``."""
        if self.kind == "message":
            return len(self.text) > FOLD_MESSAGE_CHARS or self.lines > FOLD_MESSAGE_LINES
        return len(self.text) > FOLD_CHARS or self.lines > FOLD_LINES

    @property
    def preview(self) -> str:
        """The head of a folded message: its first ``PREVIEW_CHARS`` characters and at most 6 lines, cut at a
        space when one is near the end."""
        head = "\n".join(self.text[:PREVIEW_CHARS].split("\n")[:6])
        if len(head) < len(self.text):
            space = head.rfind(" ", len(head) - 60)
            head = (head[:space] if space > 0 else head).rstrip() + " …"
        return head


def blocks(text: str) -> list[Block]:
    """An entry's verbatim text split back into its messages, tool calls and tool results (model.split_rendered)."""
    return [Block(b.kind, b.role, b.name, b.text) for b in split_rendered(text)]


@dataclass
class Mark:
    """A lost turn's mark on the timeline: lost in event ``event``, injected again or not."""

    event: int
    recovered: bool


@dataclass
class TimelineItem:
    entry: Any = None  # model.Entry
    blocks: list[Block] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    tags: list[tuple[str, str]] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    event: Any = None  # an EventRecord placed here instead of an entry


def timeline(lantern: Any, session: str, user: str) -> tuple[list[TimelineItem], list[Any]]:
    """The session's turns in order, each with its blocks and labels, and its compaction events placed after the
    last turn archived before them; returns (items, events)."""
    ids = lantern.store.session_entry_ids(session, user)
    entries = lantern.store.entries(ids)
    events = sorted(lantern.events(session, limit=None, user=user), key=lambda e: (e.time, e.id))
    marks: dict[int, list[Mark]] = {}
    for ev in events:
        recovered = set(ev.recovered)
        for i in ev.lost:
            marks.setdefault(i, []).append(Mark(ev.id, i in recovered))
    items: list[TimelineItem] = []
    pending = list(events)
    for entry_id in ids:
        e = entries.get(entry_id)
        if e is None:
            continue
        archived = e.archived_at or datetime.max.replace(tzinfo=timezone.utc)
        while pending and pending[0].time < archived:
            items.append(TimelineItem(event=pending.pop(0)))
        bs = blocks(e.text)
        items.append(
            TimelineItem(
                entry=e,
                blocks=bs,
                roles=list(dict.fromkeys(b.role for b in bs if b.role)),
                tools=list(dict.fromkeys(b.name for b in bs if b.kind == "call" and b.name)),
                files=[t.value for t in e.tags if t.kind == "path"],
                tags=[(t.kind, t.value) for t in e.tags if t.kind != "path"],
                marks=marks.get(e.id, []),
            )
        )
    items += [TimelineItem(event=ev) for ev in pending]
    return items, events


@dataclass
class EventView:
    event: Any
    lost: list[tuple[int, Any, bool]]  # (id, Entry or None when forgotten since, recovered)
    injected: list[tuple[int, int, bool, Any, bool]]  # (id, chars, excerpt, Entry or None, was lost)


def event_view(lantern: Any, event_id: int) -> EventView | None:
    found = lantern.store.events(event_id=event_id)
    if not found:
        return None
    ev = found[0]
    entries = lantern.store.entries([*ev.lost, *(i for i, _, _ in ev.injected)])
    recovered, lost = set(ev.recovered), set(ev.lost)
    return EventView(
        ev,
        [(i, entries.get(i), i in recovered) for i in ev.lost],
        [(i, c, x, entries.get(i), i in lost) for i, c, x in ev.injected],
    )


def live_at(lantern: Any, ev: Any) -> list[int]:
    """The entries of the event's session (and sub-sessions) archived by the event's time and not lost: the turns
    still in the live context then, excluded when the recovery is explained again."""
    lost = set(ev.lost)
    return [
        e.id
        for e in session_entries(lantern, ev.session, ev.user)
        if e.archived_at is not None and e.archived_at <= ev.time and e.id not in lost
    ]


def session_entries(lantern: Any, session: str, user: str) -> list[Any]:
    """The entries of ``session`` and its sub-sessions, without text or tags."""
    ids = lantern.store.session_entry_ids(session, user)
    return list(lantern.store.entries(ids, text=False, tags=False).values())


@dataclass
class Decision:
    """The injection decision as the Explain page shows it (recover/relevance.py ``decide``): ``tier`` full, short
    or none; the ``reason`` word and ``detail`` figures the Recovery carries (None / "" for a full block); the
    evidence (``score`` in multiples of the calibrated floors, ``cosine`` and its ``model``, ``coverage``; None
    when none was read) against the floor ``min_score`` (0: no floor, as for a compaction's recovery) and
    ``clear_score``; ``short_budget`` the characters of a short block."""

    tier: str
    reason: str | None
    detail: str
    score: float | None
    cosine: float | None
    coverage: float | None
    model: str
    min_score: float
    clear_score: float
    short_budget: int


def decision(recovery: Any, config: Any) -> Decision:
    """The ``Decision`` behind ``recovery`` (a ``Recovery`` from ``Lantern.explain``) under ``config``
    (``Config``: its ``clear_score`` and ``short_budget``)."""
    ev = recovery.relevance
    return Decision(
        tier="short" if recovery.reason == "uncertain" else "full" if recovery.text else "none",
        reason=recovery.reason,
        detail=recovery.detail,
        score=None if ev is None else ev.score,
        cosine=None if ev is None else ev.cosine,
        coverage=None if ev is None else ev.coverage,
        model="" if ev is None else ev.model,
        min_score=recovery.min_score,
        clear_score=float(config.clear_score),
        short_budget=int(config.short_budget),
    )


@dataclass
class Explained:
    recovery: Any
    rows: list[Any]  # model.Candidate, MMR order first
    signals: list[str]
    pool: int
    counts: dict[str, int]
    decision: Decision | None = None


def explained(recovery: Any, config: Any) -> Explained:
    """The Explain page's figures for ``recovery`` under ``config`` (``Config``: its signal order and the
    decision's thresholds)."""
    config_signals = tuple(config.signals)
    cands = list(recovery.candidates)
    seen = {s for c in cands for s in c.ranks}
    signals = [s for s in config_signals if s in seen] + sorted(seen - set(config_signals))
    pool = max((r for c in cands for r in c.ranks.values()), default=1)
    order = {"packed": 0, "excerpt": 0}
    cands.sort(
        key=lambda c: (
            order.get(c.verdict, 1),
            c.mmr_order if c.mmr_order is not None else 10**9,
            -c.rrf,
        )
    )
    counts: dict[str, int] = {}
    for c in cands:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    return Explained(recovery, cands, signals, pool, counts, decision(recovery, config))


def per_day(points: list[tuple[str, int]], max_days: int = 120) -> list[tuple[str, int]]:
    """Counts per UTC day (``YYYY-MM-DD``, only days that have some) as a chart's bars: every day from the first to
    the last, zero where none; per month (``YYYY-MM``) when that spans more than ``max_days`` days."""
    if not points:
        return []
    days = {datetime.strptime(d, "%Y-%m-%d").date(): n for d, n in points if d}
    if not days:
        return []
    first, last = min(days), max(days)
    if (last - first).days <= max_days:
        return [
            (str(day), days.get(day, 0)) for day in (first + timedelta(days=k) for k in range((last - first).days + 1))
        ]
    months: dict[str, int] = {}
    for day, n in days.items():
        months[day.strftime("%Y-%m")] = months.get(day.strftime("%Y-%m"), 0) + n
    out, (y, m) = [], (first.year, first.month)
    while (y, m) <= (last.year, last.month):
        key = f"{y:04d}-{m:02d}"
        out.append((key, months.get(key, 0)))
        y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    return out


@dataclass
class TableSize:
    """One row of the Stats page's bytes table: a table (its indexes and shadow tables counted with it), its
    ``bytes`` and their ``share`` of the database file, in [0, 1]."""

    table: str
    bytes: int
    share: float

    @property
    def size(self) -> str:
        """The bytes in the largest unit that keeps 3 significant digits: "1.23 MB"."""
        for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
            if self.bytes >= scale:
                return f"{self.bytes / scale:.3g} {unit}"
        return f"{self.bytes} B"


def table_sizes(sizes: list[tuple[str, int]], file_bytes: int) -> list[TableSize]:
    """``Store.table_bytes``'s ``(table, bytes)`` rows (largest first) as ``TableSize`` rows, each with its share of
    ``file_bytes`` (of their sum when the file size is unknown or smaller)."""
    whole = max(file_bytes, sum(b for _, b in sizes), 1)
    return [TableSize(name, int(b), b / whole) for name, b in sizes]


@dataclass
class FactPage:
    """One page of the facts page: ``keys`` (key text, [(valid_from, valid_to, value, current)] in time order) for
    the time axis from ``start`` to ``end``; ``records`` the FactRecords of those keys; ``total`` keys in all."""

    keys: list[tuple[str, list]]
    start: datetime
    end: datetime
    records: list[Any]
    total: int


def fact_page(records: list[Any], as_of: datetime | None, page_no: int = 0, per_page: int = 40) -> FactPage:
    """Facts grouped by key, the keys changed most recently first (their last version's time, then key), page
    ``page_no`` of ``per_page`` keys, and the axis ends for that page: from its first version's time to its last
    change (or ``as_of``), padded; a version still valid runs on to the right edge."""
    keys: dict[str, list] = {}
    of_key: dict[str, list] = {}
    for r in records:
        name = r.key_text or r.key
        keys.setdefault(name, []).append(
            (r.valid_from, r.valid_to, r.value if r.value is not None else "(retracted)", r.current)
        )
        of_key.setdefault(name, []).append(r)
    order = sorted(keys, key=lambda k: (-max(v[0].timestamp() for v in keys[k]), k))
    shown = order[page_no * per_page : (page_no + 1) * per_page]
    rows = [(k, sorted(keys[k], key=lambda v: v[0])) for k in shown]
    times = [t for _, vs in rows for v in vs for t in v[:2] if t is not None]
    if as_of is not None:
        times.append(as_of)
    if not times:
        now = datetime.now(timezone.utc)
        return FactPage([], now, now + timedelta(days=1), [], len(order))
    start, end = min(times), max(times)  # the axis spans the changes, not the years since (the newest runs on)
    pad = max((end - start) * 0.08, timedelta(hours=1))
    try:
        start, end = start - pad / 4, end + pad
    except OverflowError:
        pass
    return FactPage(rows, start, end, [r for k in shown for r in of_key[k]], len(order))


def scope_id(session: str | None, user: str) -> str:
    """The opaque id a form carries for a (session, user) target: base64url of ``[user, session]`` as ASCII JSON
    (every other character escaped). A browser rewrites names in form fields (CR to LF in a hidden field, line
    breaks and NUL dropped or replaced in a text input); it never changes ``[A-Za-z0-9_-]``. Forms post this back,
    never the names (``scope_of``)."""
    raw = json.dumps([user, session], ensure_ascii=True)
    return base64.urlsafe_b64encode(raw.encode("ascii")).decode("ascii").rstrip("=")


def scope_of(value: str) -> tuple[str | None, str]:
    """``(session, user)`` of a ``scope_id``. Raises ValueError for anything that is not one."""
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        user, session = parse_answer(raw.decode("ascii"), max_depth=2)  # posted text: the one bounded parse
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError):
        raise ValueError("not a target id of this inspector: reload the page") from None
    if not isinstance(user, str) or not (session is None or isinstance(session, str)):
        raise ValueError("not a target id of this inspector: reload the page")
    return session, user
