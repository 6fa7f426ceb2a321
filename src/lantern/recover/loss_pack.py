"""The block a compaction recovery injects (docs/architecture.md §3.8): what the summary lost, dense and readable,
within a character budget. Zero LLM calls.

1. **Items**: the lost specifics (recover/loss.py), each on the line of the place it was last seen::

       - turn 148 · Read: /repo/apps/web/src/services/device-registry.service.ts · fetchRegistry

   chosen by budgeted greedy coverage: the next item is the one with the most weight per character it costs (its
   text and separator, plus its line's header when it opens a new line); an item another packed item holds
   (``device-registry.service.ts`` inside its path) is covered, never packed twice. Items get at most
   ``ITEM_SHARE`` of the budget. The budgeted maximum-coverage greedy (Khuller, Moss & Naor 1999), unit weights
   replaced by the items' weights.
2. **Excerpts**: the rest of the budget holds the lines the heaviest items were seen in, with their turn, so the
   model reads what each item is (the command around a flag, the call around a path).

All lengths are characters (Python ``len``); the block is never longer than the budget.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from lantern.recover.loss import Loss, LostItem, Seen

__all__ = ["TITLE", "ITEM_SHARE", "LossBlock", "pack_loss"]

TITLE = (
    "[Recovered by Lantern after the compaction: specifics from earlier turns that the summary does not state, "
    "each on the line of the turn where it was last seen]"
)
EXCERPTS = "[Where the first of them were seen]"
ITEM_SHARE = 0.75  # ours: share of the budget the items may take; the excerpts get the rest (docs/results)
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
    return f"- turn {seen.turn} · {_label(seen)}: "


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
    chosen = _choose(items, min(room, int(budget * item_share)))
    if not chosen:
        return LossBlock("")
    lines: dict[int, list[LostItem]] = {}
    for it in chosen:
        lines.setdefault(it.last.block, []).append(it)
    body = [_header(group[0].last) + SEPARATOR.join(i.value for i in group) for _, group in sorted(lines.items())]
    text = "\n".join([TITLE, *body])
    cited = {}
    for _, group in sorted(lines.items()):
        cited.setdefault(group[0].last.entry_id, group[0].last.turn)
    text = _excerpts(loss, items, text, budget, cited)
    return LossBlock(text, chosen, cited)


def _choose(items: list[LostItem], room: int) -> list[LostItem]:
    """Budgeted greedy coverage (module docstring): items in packing order, their lines' text within ``room``."""
    opened: set[int] = set()
    used = 0
    chosen: list[LostItem] = []
    by_line: dict[int, list[int]] = {}
    for k, it in enumerate(items):
        by_line.setdefault(it.last.block, []).append(k)

    def cost(k: int) -> int:
        it = items[k]
        extra = len(SEPARATOR) if it.last.block in opened else len(_header(it.last)) + 1  # +1: the line break
        return len(it.value) + extra

    heap = [(-items[k].weight / cost(k), k) for k in range(len(items))]
    heapq.heapify(heap)
    while heap:
        neg, k = heapq.heappop(heap)
        it = items[k]
        if it.packed or it.covered_by is not None:
            continue
        c = cost(k)
        if -neg != it.weight / c:  # its line opened since it was pushed: cheaper now
            heapq.heappush(heap, (-it.weight / c, k))
            continue
        if used + c > room:
            continue
        it.packed = True
        used += c
        chosen.append(it)
        for other in items:
            if other is not it and not other.packed and other.covered_by is None and other.value in it.value:
                other.covered_by = it.value
        if it.last.block not in opened:
            opened.add(it.last.block)
            for j in by_line[it.last.block]:
                if not items[j].packed and items[j].covered_by is None:
                    heapq.heappush(heap, (-items[j].weight / cost(j), j))
    return chosen


def _excerpts(loss: Loss, items: list[LostItem], text: str, budget: int, cited: dict[int, int]) -> str:
    """``text`` followed by the lines the heaviest items were last seen in, each once, within ``budget``."""
    seen_lines: set[str] = set()
    out = [text]
    used = len(text)
    head = "\n" + EXCERPTS
    for it in items:
        room = budget - used - (len(head) if len(out) == 1 else 0) - 1
        if room < MIN_EXCERPT:
            break
        line = loss.line(it.last, it.value)
        if not line or line in seen_lines:
            continue
        seen_lines.add(line)
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
