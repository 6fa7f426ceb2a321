"""store/plan.py: the one rule of where a written turn goes (dedup, grown turns, turn numbers), checked against a
model that applies it row by row to a dict of stored entries (what the SQLite store's ``add`` did statement by
statement before both stores planned a batch at once), for generated batches; then on the real stores of both
backends: the same batch into each gives the same entries."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from lantern.errors import MissingVectorError
from lantern.model import content_hash, extends
from lantern.store.plan import SOURCE_TURN, Last, place_import, plan_rows, unstored_conversations


@dataclass
class Row:
    session: str
    text: str
    user: str = ""
    agent: str = ""
    project: str = ""

    @property
    def content_hash(self) -> str:
        return content_hash(self.session, self.text, self.user, self.agent, self.project)


def _conv(r):
    return (r.user, r.session, r.agent, r.project)


def _sequential(stored: list[dict], rows: list[Row], vectors: list[bool]) -> list[tuple[int, bool]]:
    """The rule applied one row at a time to ``stored`` (a list of {id, conv, turn, text, hash}), in place."""
    out, written = [], set()
    next_id = max((e["id"] for e in stored), default=0) + 1
    for row, vec in zip(rows, vectors):
        found = next((e for e in stored if e["hash"] == row.content_hash), None)
        if found:
            out.append((found["id"], False))
            continue
        mine = [e for e in stored if e["conv"] == _conv(row)]
        last = max(mine, key=lambda e: e["turn"]) if mine else None
        if not vec:
            raise MissingVectorError(row.content_hash)
        if last and last["id"] not in written and extends(row.text, last["text"]):
            last.update(text=row.text, hash=row.content_hash)
            entry_id = last["id"]
        else:
            entry_id = next_id
            next_id += 1
            stored.append(
                {"id": entry_id, "conv": _conv(row), "turn": last["turn"] + 1 if last else 0, "text": row.text}
                | {"hash": row.content_hash}
            )
        written.add(entry_id)
        out.append((entry_id, True))
    return out


def _planned(stored: list[dict], rows: list[Row], vectors: list[bool]) -> list[tuple[int, bool]]:
    """``plan_rows`` from the two reads a store makes, its plan applied to ``stored``."""
    hashes = {e["hash"]: e["id"] for e in stored}
    known = {r.content_hash: hashes[r.content_hash] for r in rows if r.content_hash in hashes}
    last = {}
    for conv in unstored_conversations(rows, known):
        mine = [e for e in stored if e["conv"] == conv]
        if mine:
            e = max(mine, key=lambda e: e["turn"])
            last[conv] = Last(e["id"], e["turn"], e["text"], e["hash"])
    plan = plan_rows(rows, vectors, known, last, MissingVectorError)
    for i, entry_id in plan.grown:
        next(e for e in stored if e["id"] == entry_id).update(text=rows[i].text, hash=rows[i].content_hash)
    next_id = max((e["id"] for e in stored), default=0) + 1
    ids = list(range(next_id, next_id + len(plan.new)))
    for (i, turn), entry_id in zip(plan.new, ids):
        stored.append({"id": entry_id, "conv": _conv(rows[i]), "turn": turn, "text": rows[i].text})
        stored[-1]["hash"] = rows[i].content_hash
    return plan.resolve(ids)


# texts that often extend each other: a few lines from a small alphabet
_texts = st.lists(st.sampled_from(["a", "b", "a b"]), min_size=1, max_size=3).map("\n".join)
_rows = st.builds(Row, session=st.sampled_from(["s", "t"]), text=_texts, user=st.sampled_from(["", "u"]))


@settings(max_examples=examples(400), deadline=None)
@given(
    st.lists(st.lists(_rows, max_size=6), min_size=1, max_size=4),
    st.lists(st.booleans(), min_size=30, max_size=30),
)
def test_a_planned_batch_stores_what_the_row_by_row_rule_stores(batches, missing):
    """Batch after batch into one store: the same (id, added) per row, the same entries (turns, texts), and
    MissingVectorError for the same batches, before anything of them is written."""
    seq, planned = [], []
    k = 0
    for rows in batches:
        vectors = []
        for _ in rows:
            vectors.append(not missing[k % len(missing)] or k % 3 != 0)
            k += 1
        before = [dict(e) for e in seq]
        try:
            expected = _sequential(seq, rows, vectors)
        except MissingVectorError:
            seq[:] = before  # the transaction rolled back
            with pytest.raises(MissingVectorError):
                _planned([dict(e) for e in planned], rows, vectors)
            continue
        assert _planned(planned, rows, vectors) == expected
        key = sorted((e["id"], e["conv"], e["turn"], e["text"]) for e in seq)
        assert sorted((e["id"], e["conv"], e["turn"], e["text"]) for e in planned) == key


def test_a_grown_turn_replaces_the_last_one_once_per_batch():
    rows = [Row("s", "q"), Row("s", "q\nreply"), Row("s", "q\nreply\nmore")]
    plan = plan_rows(rows, [True] * 3, {}, {}, MissingVectorError)
    assert plan.new == [(0, 0), (1, 1), (2, 2)] and plan.grown == []  # written in this batch: never grown into
    stored = Last(7, 4, "q", rows[0].content_hash)
    plan = plan_rows(rows[1:], [True, True], {}, {_conv(rows[0]): stored}, MissingVectorError)
    assert plan.grown == [(0, 7)] and plan.new == [(1, 5)]


def test_an_imported_turn_keeps_its_number_or_moves_after_the_last():
    none = list
    assert place_import("q", 3, None, None, none, lambda: 9).turn == 3  # its place is free
    grown = place_import("q\nreply", 3, None, (11, "q", "{}"), none, lambda: 9)
    assert (grown.kind, grown.entry_id) == ("grown", 11)
    shorter = place_import("q", 3, None, (11, "q\nreply", "{}"), none, lambda: 9)
    assert (shorter.kind, shorter.entry_id) == ("duplicate", 11)
    taken = place_import("other", 3, {"x": 1}, (11, "q", "{}"), none, lambda: 9)
    assert (taken.kind, taken.turn, taken.meta) == ("insert", 10, {"x": 1, SOURCE_TURN: 3})
    # an entry an earlier import appended for source turn 3 is this turn's stored form, found by its meta
    moved = place_import("other\nreply", 3, None, (11, "q", "{}"), lambda: [(12, "other", '{"source_turn": 3}')], int)
    assert (moved.kind, moved.entry_id) == ("grown", 12)
    # one appended for another source turn holding this number is not this turn
    held = (12, "other", '{"source_turn": 5}')
    assert place_import("other\nreply", 3, None, held, lambda: [held], lambda: 9).kind == "insert"


def test_the_old_form_of_a_turn_grown_in_this_batch_is_new_again():
    """The grown entry's old hash is stored no more: a repeat of the old text after it is a new turn."""
    first = Row("s", "q")
    stored = [{"id": 1, "conv": _conv(first), "turn": 0, "text": "q", "hash": first.content_hash}]
    rows = [Row("s", "q\nreply"), Row("s", "q")]
    expected = _sequential([dict(e) for e in stored], rows, [True, True])
    assert expected == [(1, True), (2, True)]
    assert _planned(stored, rows, [True, True]) == expected
