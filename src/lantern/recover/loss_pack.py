"""The block a compaction recovery injects (docs/architecture.md §3.8): what the summary lost, dense and readable,
within a character budget. Zero LLM calls.

1. **Items**: the lost specifics (recover/loss.py), on the line of the turn they were last seen in::

       - turn 148: /repo/apps/web/src/services/device-registry.service.ts · fetchRegistry · --dry-run

   heaviest first, each packed while it (and its line's header, when it opens a line) fits; an item another
   packed item holds (``device-registry.service.ts`` inside its path) is covered, never packed twice. Items get at
   most ``ITEM_SHARE`` of the budget. Weight order, not weight per character: the weights rank, they are not
   calibrated probabilities, and per character favoured short, unused names (docs/results/realcompact.md).
2. **Excerpts**: the rest of the budget holds the lines the heaviest items were seen in, with their turn, so the
   model reads what each item is (the command around a flag, the call around a path).

When every lost message, tool call and tool result fits in the budget whole, the block is simply those, verbatim
(``VERBATIM``), each headed by its turn and tool: nothing needs choosing.

All lengths are characters (Python ``len``); the block is never longer than the budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lantern.recover.loss import Loss, LostItem, Seen

__all__ = ["TITLE", "ITEM_SHARE", "LossBlock", "pack_loss"]

TITLE = "[Recovered by Lantern: specifics from before the compaction that its summary lacks, by turn last seen]"
EXCERPTS = "[Where the first of them were seen]"
VERBATIM = "[Recovered by Lantern: the turns the compaction replaced, verbatim]"
ITEM_SHARE = 0.9  # ours: share of the budget the items may take; the excerpts get the rest (docs/results)
CANDIDATES = 400  # ours: the heaviest items considered for packing (bounds the coverage test's work)
SEPARATOR = " · "
MIN_EXCERPT = 40  # ours: a shorter room left takes no excerpt line


@dataclass
class LossBlock:
    """The packed block: ``text``, the items packed (``items``, in the block's order) and the archived entries it
    cites (``cited``: entry id -> turn, in first-cited order)."""

    text: str
    items: list[LostItem] = field(default_factory=list)
    cited: dict[int, int] = field(default_factory=dict)


def _label(seen: Seen) -> str:
    """Where an item was seen, as its line's header names it: the tool of a call or result, else the speaker."""
    if seen.side == "call":
        return seen.tool or "tool call"
    if seen.side == "result":
        return f"{seen.tool} output" if seen.tool else "tool output"
    return seen.side or "message"


def _header(seen: Seen) -> str:
    return f"- turn {seen.turn}: "


def _line(item: LostItem) -> int:
    """The line an item goes on: the turn it was last seen in."""
    return item.last.turn


def pack_loss(loss: Loss, budget: int, item_share: float = ITEM_SHARE) -> LossBlock:
    """Pack ``loss`` into at most ``budget`` characters (module docstring). Marks each packed item ``packed`` and
    each item a packed one holds ``covered_by``. An empty loss, or a budget too small for the title and one item,
    gives an empty block."""
    items = loss.items[:CANDIDATES]
    for it in loss.items:
        it.packed, it.covered_by = False, None
    room = budget - len(TITLE) - 1
    if not items or room <= 0:
        return LossBlock("")
    whole = _verbatim(loss, budget)
    if whole is not None:
        return whole
    chosen = _choose(items, min(room, int(budget * item_share)))
    if not chosen:
        return LossBlock("")
    lines: dict[int, list[LostItem]] = {}
    for it in chosen:
        lines.setdefault(_line(it), []).append(it)
    body = [_header(group[0].last) + SEPARATOR.join(i.value for i in group) for _, group in sorted(lines.items())]
    text = "\n".join([TITLE, *body])
    cited = {}
    for _, group in sorted(lines.items()):
        cited.setdefault(group[0].last.entry_id, group[0].last.turn)
    text = _excerpts(loss, items, text, budget, cited)
    return LossBlock(text, chosen, cited)


def _verbatim(loss: Loss, budget: int) -> LossBlock | None:
    """Every lost block whole, in order, each headed ``[turn N · label]``, when that fits in ``budget``; else None.
    Marks every item packed."""
    if not loss.places or len(loss.places) != len(loss.texts):
        return None
    lines = [VERBATIM]
    used = len(VERBATIM)
    for place, text in zip(loss.places, loss.texts):
        line = f"[turn {place.turn} · {_label(place)}] {text.strip()}"
        used += len(line) + 1
        if used > budget:
            return None
        lines.append(line)
    cited: dict[int, int] = {}
    for place in loss.places:
        cited.setdefault(place.entry_id, place.turn)
    for it in loss.items:
        it.packed = True
    return LossBlock("\n".join(lines), list(loss.items), cited)


def _choose(items: list[LostItem], room: int) -> list[LostItem]:
    """Items in weight order, each packed when its text (and its line's header, when it opens a line) still fits
    in ``room``; an item a packed one holds is covered instead (module docstring)."""
    opened: set[int] = set()
    used = 0
    chosen: list[LostItem] = []
    for it in items:
        if it.covered_by is not None:
            continue
        line = _line(it)
        cost = len(it.value) + (len(SEPARATOR) if line in opened else len(_header(it.last)) + 1)  # +1: line break
        if used + cost > room:
            continue
        it.packed = True
        used += cost
        chosen.append(it)
        opened.add(line)
        for other in items:
            if other is not it and not other.packed and other.covered_by is None and other.value in it.value:
                other.covered_by = it.value
    return chosen


def _excerpts(loss: Loss, items: list[LostItem], text: str, budget: int, cited: dict[int, int]) -> str:
    """``text`` followed by the lines the heaviest items were last seen in, each once, within ``budget``."""
    seen_lines: set[tuple[int, int]] = set()  # archived lines shown, each once (two items on one line share it)
    out = [text]
    used = len(text)
    head = "\n" + EXCERPTS
    for it in items:
        room = budget - used - (len(head) if len(out) == 1 else 0) - 1
        if room < MIN_EXCERPT:
            break
        line, key = loss.line(it.last, it.value), loss.line_key(it.last, it.value)
        if not line or key in seen_lines:
            continue
        seen_lines.add(key)
        entry = f"[turn {it.last.turn} · {_label(it.last)}] {line}"
        if len(entry) > room:
            continue
        if len(out) == 1:
            out.append(head[1:])
            used += len(head)
        out.append(entry)
        used += len(entry) + 1
        cited.setdefault(it.last.entry_id, it.last.turn)
    return "\n".join(out)
