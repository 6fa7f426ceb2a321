"""Superseded-fact notes in a recovered block (docs/architecture.md §3.5 and §5.4 "In recovery").

A packed turn may state a value that was later changed ("the staging DB port is 5433", changed to 5434 the next
day). The block then carries one line per such (key, value), right under its title:

    [Fact versions: values stated in the turns below that changed later; the current value follows "now"]
    - staging db port: 5433 until 14 Mar 2026, now 5434

"now" is the time asked about: the present, or ``as_of`` ("as of 13 Mar 2026: 5433"). The notes count against the
budget: when block + notes would exceed it, the entries are packed again into what the notes leave (ours).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from lantern.recover.pack import PackResult
from lantern.text.fact_keys import normalize_value

HEADING = '[Fact versions: values stated in the turns below that changed later; the current value follows "now"]'


@dataclass
class FactNote:
    """A value stated in a packed entry that no longer held at the time asked about. ``current`` is the value then
    (None: retracted, or the key's history holds no valid value); ``until`` when the stated value stopped holding."""

    key: str
    value: str | None
    until: datetime | None
    current: str | None
    entry_id: int
    as_of: datetime | None = None

    @property
    def line(self) -> str:
        was = self.value if self.value is not None else "(not used)"
        now = self.current if self.current is not None else "no longer used"
        until = f" until {when(self.until)}" if self.until else ""
        at = f"as of {when(self.as_of)}:" if self.as_of else "now"
        return f"- {self.key}: {was}{until}, {at} {now}"


def when(dt: datetime) -> str:
    """``14 Mar 2026``, with ``HH:MM`` (UTC) unless it is midnight."""
    dt = dt.astimezone(timezone.utc)
    clock = "" if (dt.hour, dt.minute) == (0, 0) else f" {dt:%H:%M}"
    return f"{dt.day} {dt:%b %Y}{clock}"


def notes_for(
    store: Any, at: float | None, where: str = "", params: Sequence[Any] = ()
) -> Callable[[list[int]], list[FactNote]]:
    """A function from packed entry ids to their notes, reading ``store``'s facts valid at ``at`` (unix seconds;
    None = now) through the ``where``/``params`` filter on the source entries. Each key's valid value (one query for
    the keys of a call: ``fact_values_at``) and each record's end are looked up once for the function's life: make
    one per recovery."""
    as_of = datetime.fromtimestamp(at, tz=timezone.utc) if at is not None else None

    valid: dict[tuple[str, str], Any] = {}  # (scope, key) -> the record valid at `at` (None: none), per recovery
    until: dict[int, float | None] = {}  # fact id -> when its value stopped holding

    def notes(entry_ids: list[int]) -> list[FactNote]:
        out: list[FactNote] = []
        seen: set[tuple[str, str, str | None]] = set()
        found = store.facts_of_entries(entry_ids, where, params)
        unknown = list(dict.fromkeys((r.scope, r.key) for r in found if (r.scope, r.key) not in valid))
        if unknown:  # one query for the keys a packing adds (pack_with_notes asks again after each re-packing)
            current = store.fact_values_at(unknown, at, where, params)
            valid.update({pair: current.get(pair) for pair in unknown})
        for record in found:
            ident = (record.scope, record.key, normalize_value(record.value))
            if ident in seen:
                continue
            seen.add(ident)
            now = valid[record.scope, record.key]
            if now is None or normalize_value(now.value) == normalize_value(record.value):
                continue  # still holds (or nothing holds then: nothing to correct it with)
            if record.id not in until:
                until[record.id] = store.fact_changed_at(record, where, params)
            out.append(
                FactNote(
                    record.key_text or record.key,
                    record.value,
                    _dt(until[record.id]),
                    now.value,
                    record.entry_id,
                    as_of,
                )
            )
        return out

    return notes


def _dt(ts: float | None) -> datetime | None:
    return datetime.fromtimestamp(ts, tz=timezone.utc) if ts is not None else None


def render(notes: Sequence[FactNote]) -> str:
    return HEADING + "\n" + "\n".join(n.line for n in notes) if notes else ""


NOTES_SHARE = 0.5  # ours: the notes take at most half of the budget (dropped last first); the turns keep the rest
MAX_PACKINGS = 5  # ours: packings tried while the room left beside the notes settles


def pack_with_notes(
    pack_at: Callable[[int], PackResult], budget: int, notes: Callable[[list[int]], list[FactNote]]
) -> tuple[PackResult, list[FactNote]]:
    """Pack into ``budget`` characters with the superseded-fact notes inserted after the block's title. The notes
    take at most ``NOTES_SHARE`` of the budget (dropped last first). When block + notes do not fit, the entries are
    packed again into what the notes leave; fewer entries state fewer superseded values, so the room is recomputed
    from the new packing's own notes, up to ``MAX_PACKINGS`` times, and the fitting packing with the most characters
    is kept. (A room fixed by the first packing's notes is too small: on MemDaily, whose trajectories restate the
    same keys, 50 notes of 77 packed turns left 1,288 characters for turns whose own notes then took 300: a block of
    2,000 characters out of 6,000.) When the notes would leave room for no entry at all, the first packing is
    returned without notes (a small budget brings back the turn itself rather than nothing)."""
    first = pack_at(budget)
    found = _capped(notes([p.entry.id for p in first.packed]), budget)
    if not found:
        return first, []
    if len(first.text) + len(render(found)) + 2 <= budget:  # the common case: the notes fit beside the full packing
        return _with_notes(first, found)
    best: tuple[PackResult, list[FactNote]] | None = None
    result, room, tried = first, budget, {budget}
    for _ in range(MAX_PACKINGS):
        need = len(render(found)) + 2 if found else 0
        if result.packed and len(result.text) + need <= budget:
            if best is None or len(result.text) + need > len(best[0].text) + len(render(best[1])):
                best = (result, found)
        room = max(0, budget - need)
        if room in tried:
            break
        tried.add(room)
        result = pack_at(room)
        found = _capped(notes([p.entry.id for p in result.packed]), budget)
    if best is None:
        return first, []
    return _with_notes(*best)


def _with_notes(result: PackResult, found: list[FactNote]) -> tuple[PackResult, list[FactNote]]:
    """``result`` with the rendered ``found`` inserted after the block's title line."""
    if not found or not result.text:
        return result, []
    title, _, body = result.text.partition("\n\n")
    result.text = f"{title}\n\n{render(found)}\n\n{body}"
    return result, found


def _capped(found: list[FactNote], budget: int) -> list[FactNote]:
    """``found`` without its last notes while they take more than ``NOTES_SHARE`` of ``budget``."""
    while found and len(render(found)) + 2 > budget * NOTES_SHARE:
        found.pop()
    return found
