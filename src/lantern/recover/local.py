"""Local search: the turns near the best hits, ranked by their similarity to the query, as one more ranked signal
(ours).

A question often needs several turns said close together: a fact and the remark that names it ("My phone is an
iPhone 13" ... "the iPhone 13 takes great photos"), or, in a two-part question ("What does my boss do? And where
is the fintech forum?"), a distinctive part that the query signals find at rank 1 and a generic part ("my boss's
job") that many other conversations also answer. The generic part's own turn is then one of dozens of look-alikes
across the store, but the only one *near* the distinctive hit. The ``local`` ranking lists the turns within
``width`` turns of each of the best ``depth`` fused hits (same session and scope; the hits themselves included),
ordered by the cosine of their embedding to the query's, and is fused like the other signals with its own RRF
weight. It adds candidates that no global top-N reached (a look-alike ranked 300th in the store can rank 2nd
among the 16 turns around the best hit) and lifts the ones near the best hits.

Closest published practice: the cluster hypothesis (van Rijsbergen 1979) and score regularization over a
document's neighbourhood (Diaz 2005, "Regularizing ad hoc retrieval scores"); "expand to the surrounding chunks"
of long-conversation memory systems. As a turn-window re-search fused by RRF, this is our design.

Tune split (LoCoMo conversations 1-5, MemDaily type 01): see ``docs/results/recall-tuning.md``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lantern.store.index import MemoryIndex
from lantern.store.protocol import StoreProtocol
from lantern.store.vectors import distinct

LOCAL = "local"  # the signal's name in rankings, weights and explain output
_EMPTY = (np.empty(0, np.int64), np.empty(0, np.float32))


def window_rows(store: StoreProtocol, index: MemoryIndex, seed_positions: Sequence[int], width: int) -> np.ndarray:
    """Row positions of the entries within ``width`` turns (inclusive) of each seed (row positions), in the seed's
    own session and scope (user, agent, project), each row once, sorted; every seed is in its own window, a turn
    alone in its session too (left out, it would lose to any turn of a longer session: a one-turn session ranked
    1st by semantic, full text and prf would come 7th). Rows not yet in the in-process index (committed by
    another process since its last refresh) are left out."""
    if not len(seed_positions) or width < 0:
        return np.empty(0, np.int64)
    seeds = list(store.places(int(index.ids[p]) for p in seed_positions).values())
    if not seeds:
        return np.empty(0, np.int64)
    found = np.fromiter(store.window_ids(seeds, width), np.int64)
    known = distinct(found[np.isin(found, index.ids)])
    return index.positions(known) if len(known) else np.empty(0, np.int64)


def local_ranking(
    store: StoreProtocol,
    index: MemoryIndex,
    query_vector: np.ndarray | None,
    seed_positions: Sequence[int],
    allowed: np.ndarray | None,
    width: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``window_rows(seed_positions, width)`` that ``allowed`` (boolean row mask, None: all) keeps,
    ordered by cosine to ``query_vector`` (rows are L2-normalized), best first (ties: the lower row first). Returns
    (positions, cosines); empty without a query vector or seeds.

    ``query_vector`` may be a matrix, one row per part of a multi-part question (recover/decompose.py): the rows
    are then ranked by each part's cosine and the per-part orders merged round-robin (the best row of each part,
    then the second of each, ...; each row once, at its first place), so every part's best turn near the hits
    ranks early whichever part dominates the whole query (ours); the score is the row's best cosine to any part."""
    if query_vector is None:
        return _EMPTY
    rows = window_rows(store, index, seed_positions, width)
    if allowed is not None and len(rows):
        rows = rows[allowed[rows]]
    embedded = index.embedded()  # a row with no vector yet has no cosine to rank by (signals.semantic)
    if embedded is not None and len(rows):
        rows = rows[embedded[rows]]
    if not len(rows):
        return _EMPTY
    vectors = np.atleast_2d(query_vector)
    cos = np.stack([index.cosines(v, rows) for v in vectors])  # (parts, rows)
    if len(vectors) == 1:
        order = np.argsort(-cos[0], kind="stable")
        return rows[order], cos[0][order].astype(np.float32)
    merged = round_robin([np.argsort(-c, kind="stable") for c in cos])
    return rows[merged], cos.max(axis=0)[merged].astype(np.float32)


def round_robin(orders: Sequence[np.ndarray]) -> np.ndarray:
    """Several orders of the same items merged by taking each order's next unseen item in turn (the first of
    each, then the second of each, ...), each item once at its first place: interleaving, as in team-draft
    interleaving without the coin toss (Radlinski et al. 2008)."""
    seen: set[int] = set()
    out: list[int] = []
    for column in _columns(orders):
        for item in column:
            if int(item) not in seen:
                seen.add(int(item))
                out.append(int(item))
    return np.asarray(out, np.int64)


def _columns(orders: Sequence[np.ndarray]):
    """The items at rank 1 of every order, then at rank 2, ... (orders may differ in length)."""
    for r in range(max((len(o) for o in orders), default=0)):
        yield [o[r] for o in orders if r < len(o)]
