"""The block a compaction recovery injects (docs/architecture.md §3.8): what the summary lost, dense and readable,
within a character budget. Zero LLM calls.

1. **Items**: the lost specifics (recover/loss.py), on the line of the turn they were last seen in::

       - turn 148: /repo/apps/web/src/services/device-registry.service.ts · fetchRegistry · --dry-run

   heaviest first, each packed while it (and its line's header, when it opens a line) fits; an item another
   packed item holds (``device-registry.service.ts`` inside its path) is covered, never packed twice, whichever
   of the two is heavier (a heavier flag packed first gives its room back to the command line holding it). Items
   get at most ``ITEM_SHARE`` of the budget. Weight order, not weight per character: the weights rank, they are not
   calibrated probabilities, and per character favoured short, unused names (docs/results/realcompact.md).
2. **Excerpts**: the rest of the budget holds the lines the heaviest items were seen in, with their turn and
   tool, so the model reads what each item is (the command around a flag, the call around a path); a line that
   adds no word the block does not already hold is left out::

       - turn 147 · Bash: {"command": "pnpm test --filter web -- --dry-run", "description": "web unit tests"}

When every lost message, tool call and tool result fits in the budget whole, the block is simply those, verbatim
(``VERBATIM``), each on a line headed the same way: nothing needs choosing.

Every line is headed ``- turn N: `` (items of one turn) or ``- turn N · where: `` (one message, tool call or tool
output; ``head``), in both forms. All lengths are characters (Python ``len``); the block is never longer than the
budget.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from lantern.recover.loss import Loss, LostItem, Seen, _automaton, _parts

__all__ = ["TITLE", "ITEM_SHARE", "LossBlock", "head", "pack_loss"]

TITLE = "[Recovered by Lantern: specifics from before the compaction that its summary lacks, by turn last seen]"
EXCERPTS = "[Where the first of them were seen]"
VERBATIM = "[Recovered by Lantern: the turns the compaction replaced, verbatim]"
ITEM_SHARE = 0.9  # ours: share of the budget the items may take; the excerpts get the rest (docs/results)
CANDIDATES = 400  # ours: the heaviest items considered for packing (bounds the coverage test's work)
SEPARATOR = " · "
MIN_EXCERPT = 40  # ours: a shorter room left takes no excerpt line


@dataclass
class LossBlock:
    """The packed block: ``text``, the items packed (``items``, in the block's order), the archived entries it
    cites (``cited``: entry id -> turn, in first-cited order) and, per cited entry, the block's lines that come from
    it (``lines``: entry id -> lines, in block order): every packed item and excerpt traces to its entry."""

    text: str
    items: list[LostItem] = field(default_factory=list)
    cited: dict[int, int] = field(default_factory=dict)
    lines: dict[int, list[str]] = field(default_factory=dict)

    def cite(self, seen: Seen, line: str) -> None:
        self.cited.setdefault(seen.entry_id, seen.turn)
        self.lines.setdefault(seen.entry_id, []).append(line)


def _label(seen: Seen) -> str:
    """Where an item was seen, as its line's header names it: the tool of a call or result, else the speaker."""
    if seen.side == "call":
        return seen.tool or "tool call"
    if seen.side == "result":
        return f"{seen.tool} output" if seen.tool else "tool output"
    return seen.side or "message"


def head(turn: int, where: str = "") -> str:
    """The head of a line of the block: ``- turn N: `` (the items of turn N, which may come from several of its
    messages and tool calls) or ``- turn N · where: `` (one message, tool call or tool output of it)."""
    return f"- turn {turn} · {where}: " if where else f"- turn {turn}: "


def _line(item: LostItem) -> tuple[int, int]:
    """The line an item goes on: the turn (and entry) it was last seen in."""
    return item.last.turn, item.last.entry_id


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
    block = LossBlock("", chosen)
    lines: dict[tuple[int, int], list[LostItem]] = {}
    for it in chosen:
        lines.setdefault(_line(it), []).append(it)
    body = [TITLE]
    for key in sorted(lines):
        group = lines[key]
        body.append(head(key[0]) + SEPARATOR.join(i.value for i in group))
        block.cite(group[0].last, body[-1])
    block.text = "\n".join(body)
    _excerpts(loss, items, block, budget)
    return block


def _verbatim(loss: Loss, budget: int) -> LossBlock | None:
    """Every lost block whole, in order, each on a line headed ``- turn N · where: ``, when that fits in ``budget``;
    else None. Marks every item packed."""
    if not loss.places or len(loss.places) != len(loss.texts):
        return None
    lines = [VERBATIM]
    used = len(VERBATIM)
    for place, text in zip(loss.places, loss.texts):
        line = head(place.turn, _label(place)) + text.strip()
        used += len(line) + 1
        if used > budget:
            return None
        lines.append(line)
    block = LossBlock("\n".join(lines), list(loss.items))
    for place, line in zip(loss.places, lines[1:]):
        block.cite(place, line)
    for it in loss.items:
        it.packed = True
    return block


def _choose(items: list[LostItem], room: int) -> list[LostItem]:
    """Items in weight order, each packed when its text (and its line's header, when it opens a line) still fits
    in ``room``; an item a packed one holds is covered instead, and a packed item a later one holds is unpacked,
    covered by it, its room given back (module docstring). Which items a value holds: one Aho-Corasick automaton
    over the candidates' values, run over each value (not a substring test per pair)."""
    by_value = {it.value: it for it in items}
    automaton = _automaton(by_value)
    used = 0
    chosen: list[LostItem] = []
    on_line: dict[tuple[int, int], int] = {}  # line -> chosen items on it

    def line_cost(line: tuple[int, int], others: int) -> int:  # an item's share of its line, ``others`` beside it
        return len(SEPARATOR) if others else len(head(line[0])) + 1  # +1: the line break

    for it in items:
        if it.covered_by is not None:
            continue
        inside = [by_value[v] for _, (v, _, _) in automaton.iter(it.value) if v != it.value]
        held = list({id(c): c for c in inside if c.packed}.values())  # packed items it holds: it replaces them
        gone: dict[tuple[int, int], int] = {}
        cost = 0
        for c in held:
            line = _line(c)
            gone[line] = gone.get(line, 0) + 1
            cost -= len(c.value) + line_cost(line, on_line[line] - gone[line])
        line = _line(it)
        cost += len(it.value) + line_cost(line, on_line.get(line, 0) - gone.get(line, 0))
        if used + cost > room:
            continue
        used += cost
        it.packed = True
        if held:  # it takes the place of the heaviest item it holds
            first = next(c for c in chosen if any(c is h for h in held))
            for c in held:
                c.packed, c.covered_by = False, it.value
                on_line[_line(c)] -= 1
            chosen = [it if c is first else c for c in chosen if c is first or not any(c is h for h in held)]
        else:
            chosen.append(it)
        on_line[line] = on_line.get(line, 0) + 1
        for other in inside:
            if not other.packed and other.covered_by is None:
                other.covered_by = it.value
    return chosen


def _excerpts(loss: Loss, items: list[LostItem], block: LossBlock, budget: int) -> None:
    """``block`` followed by the lines the heaviest items were last seen in, within ``budget``: each archived
    line once (two items seen on one line share it), and only when it adds a word (``loss._parts``) the block does
    not hold yet."""
    out = [block.text]
    used = len(block.text)
    title = "\n" + EXCERPTS
    shown = set(_parts(block.text + title))
    seen_lines: set[tuple[int, int]] = set()  # (lost block, line offset) of the archived lines shown
    if budget - used - len(title) - 1 < MIN_EXCERPT:
        return
    for it, (line, key) in _lines(loss, items):
        room = budget - used - (len(title) if len(out) == 1 else 0) - 1
        if room < MIN_EXCERPT:
            break
        if not line or key in seen_lines:
            continue
        entry = head(it.last.turn, _label(it.last)) + line
        new = _parts(line) - shown
        if len(entry) > room or not new:
            continue
        if len(out) == 1:
            out.append(title[1:])
            used += len(title)
        out.append(entry)
        used += len(entry) + 1
        shown |= _parts(entry)
        seen_lines.add(key)
        block.cite(it.last, entry)
    block.text = "\n".join(out)


def _lines(loss: Loss, items: list[LostItem], batch: int = 16) -> Iterator[tuple[LostItem, tuple[str, Any]]]:
    """``(item, (the line it was last seen in, its key))``, read ``batch`` items at a time as the excerpts ask for
    them (``Loss.lines``: each block of a batch read once)."""
    for k in range(0, len(items), batch):
        chunk = items[k : k + batch]
        yield from zip(chunk, loss.lines([(it.last, it.value) for it in chunk]))
