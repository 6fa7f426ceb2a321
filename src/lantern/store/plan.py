"""Where each turn of a write goes: the one rule both stores' ``add`` and the importer follow (docs/architecture.md
§2.9). A turn is one entry per conversation (scope and session) and turn number:

- a turn whose content hash is stored already is a duplicate (``model.content_hash``), and so is a repeat of a turn
  written earlier in the same batch;
- a turn that grew (``model.extends``: the user message archived first, the reply later) replaces the stored form
  it extends, in place: its id, turn number and reinforcement state kept;
- any other turn is new, numbered after its conversation's last turn.

The functions here read nothing: the stores read what they need (the stored hashes, each conversation's last turn,
the entries at an imported turn's place) and pass it in, so each rule is written once and tested alone
(tests/test_plan.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lantern.model import extends

__all__ = [
    "SOURCE_TURN",
    "Conversation",
    "Last",
    "Placement",
    "RowPlan",
    "conversation",
    "place_import",
    "plan_rows",
    "source_turn",
    "unstored_conversations",
]

Conversation = tuple[str, str, str, str]  # (user, session, agent, project): another user's session never grows
#: ``meta`` key of an entry an import appended because its turn number was taken in the destination's conversation:
#: the turn number it had in its source, the one identity a later import of that turn's grown form is matched by
SOURCE_TURN = "source_turn"


def conversation(row: Any) -> Conversation:
    """The conversation of a ``NewEntry``-shaped row (``user``, ``session``, ``agent``, ``project``)."""
    return (row.user, row.session, row.agent, row.project)


@dataclass(frozen=True)
class Last:
    """A conversation's last stored turn: entry id, turn number, text, content hash (as ``model.content_hash``)."""

    id: int
    turn: int
    text: str
    content_hash: str


@dataclass
class RowPlan:
    """What ``add`` does with each row of a batch. ``out``: per row, ``(entry id, False)`` for a row stored already,
    the index of the earlier row of the batch that writes the same turn (a repeat), or None for a row this batch
    writes; ``grown``: (row index, entry id) of a row that replaces the stored entry it extends; ``new``: (row
    index, turn number) of a row inserted as a new entry. ``resolve(ids)`` fills ``out`` once the new rows' ids are
    known."""

    out: list[Any]
    grown: list[tuple[int, int]] = field(default_factory=list)
    new: list[tuple[int, int]] = field(default_factory=list)

    def resolve(self, new_ids: Sequence[int]) -> list[tuple[int, bool]]:
        """``(entry id, added)`` per row, given the ids of the ``new`` rows in their order."""
        out = list(self.out)
        for i, entry_id in self.grown:
            out[i] = (entry_id, True)
        for (i, _), entry_id in zip(self.new, new_ids):
            out[i] = (entry_id, True)
        for i, slot in enumerate(out):
            if isinstance(slot, int):
                out[i] = (out[slot][0], False)
        return out


def unstored_conversations(rows: Iterable[Any], stored: dict[str, int]) -> list[Conversation]:
    """The conversations, in first-seen order, of the rows whose content hash is not in ``stored``: those whose last
    turn ``plan_rows`` needs."""
    return list(dict.fromkeys(conversation(r) for r in rows if r.content_hash not in stored))


def plan_rows(
    rows: Sequence[Any],
    has_vector: Sequence[bool],
    stored: dict[str, int],
    last: dict[Conversation, Last],
    missing: Callable[[str], Exception],
) -> RowPlan:
    """Plan a batch of ``NewEntry``-shaped rows (``content_hash``, ``text`` and the conversation's fields) in order.
    ``stored``: {content hash: entry id} of the batch's hashes already stored; ``last``: each conversation's last
    stored turn (absent: a new conversation). A row extends only a stored turn not yet written by this batch; a
    grown entry's old hash is stored no more, so a later repeat of the old text is new. Raises ``missing(hash)``
    for a row to write whose vector is missing (``has_vector`` false), before anything is written."""
    stored = dict(stored)
    # conversation -> [last entry id (None: written by this batch), turn, text, written by this batch, content hash]
    state: dict[Conversation, list[Any]] = {c: [x.id, x.turn, x.text, False, x.content_hash] for c, x in last.items()}
    plan = RowPlan(out=[None] * len(rows))
    here: dict[str, int] = {}  # content hash -> index of the row of this batch that writes it
    for i, (row, vector) in enumerate(zip(rows, has_vector)):
        if row.content_hash in stored:
            plan.out[i] = (stored[row.content_hash], False)
            continue
        if row.content_hash in here:
            plan.out[i] = here[row.content_hash]
            continue
        if not vector:
            raise missing(row.content_hash)
        conv = conversation(row)
        now = state.get(conv)
        if now and not now[3] and extends(row.text, now[2]):
            plan.grown.append((i, now[0]))
            now[3] = True
            stored.pop(now[4], None)
        else:
            plan.new.append((i, now[1] + 1 if now else 0))
            state[conv] = [None, plan.new[-1][1], row.text, True, row.content_hash]
        here[row.content_hash] = i
    return plan


@dataclass(frozen=True)
class Placement:
    """Where an imported turn goes (``place_import``): ``kind`` "grown" (replaces entry ``entry_id``), "duplicate"
    (entry ``entry_id`` holds a grown form of it) or "insert" (a new entry at ``turn``; ``meta``, when not None,
    replaces the record's)."""

    kind: str
    entry_id: int | None = None
    turn: int | None = None
    meta: dict[str, Any] | None = None


def source_turn(meta: Any) -> int | None:
    """``meta[SOURCE_TURN]`` of a stored ``meta`` value (JSON text, or a dict as a driver may give it), else None."""
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except ValueError:
            return None
    value = meta.get(SOURCE_TURN) if isinstance(meta, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def place_import(
    text: str,
    turn: int,
    meta: dict[str, Any] | None,
    at: tuple[int, str, Any] | None,
    appended: Callable[[], Iterable[tuple[int, str, Any]]],
    last_turn: Callable[[], int],
) -> Placement:
    """Place an imported turn (its ``text``, source ``turn`` number and ``meta``) whose content hash is not stored,
    by the same rule as ``plan_rows``, keeping the source's turn number where it is free. ``at``: (id, text, meta)
    of the entry at its conversation and turn number (None: free); ``appended()``: (id, text, meta) of the
    conversation's entries either of whose text extends the other, latest turn first; ``last_turn()``: the
    conversation's largest turn number. Its stored form (the entry at its place, else one an earlier import
    appended for that source turn, ``meta[SOURCE_TURN]``, never another turn whose text it merely starts with):
    grown into this turn, it is replaced; grown beyond it, this turn is a duplicate of it. With none and its number
    taken by another turn, it is appended after the conversation's last turn, its source number in
    ``meta[SOURCE_TURN]``; else inserted at its number."""
    held: tuple[int, str] | None = None
    if at is not None:
        moved = source_turn(at[2])  # an entry appended for another source turn holds this number: not this turn
        if (moved is None or moved == turn) and (extends(text, at[1]) or extends(at[1], text)):
            held = at[0], at[1]
        else:
            held = next(((i, t) for i, t, m in appended() if source_turn(m) == turn), None)
            if held is None:
                return Placement("insert", turn=last_turn() + 1, meta={**(meta or {}), SOURCE_TURN: turn})
    if held is None:
        return Placement("insert", turn=turn)
    if extends(text, held[1]):
        return Placement("grown", entry_id=held[0])
    return Placement("duplicate", entry_id=held[0])
