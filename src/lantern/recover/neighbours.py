"""Neighbour expansion: the turns next to a well-ranked turn, as one more ranked signal (ours).

In a conversation the answer to a question is often in the turn that follows it ("What did you do last
weekend?" -> "We went camping"), and a short answer is only intelligible with the turn before it. When the query
matches one turn, its neighbours are candidates too, even when they share no word with the query. The
``neighbour`` ranking lists, for each seed in the order of the query signals' own fusion (RRF), the turn after it
and then the turn before it (same session, turn number ± 1). It is fused like the other signals, with its own
RRF weight, so a neighbour of the best seed ranks like a good hit of a weak signal; neighbours inside the live
window, outside the scope or explicitly excluded are never added.

Sentence-window retrieval (a hit widened to the sentences around it; LlamaIndex's ``SentenceWindowNodeParser``)
and the "expand to the adjacent chunk" step of long-conversation memory systems are the closest published
practice; as a separately weighted RRF signal over turns this is our design.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from lantern.recover.fusion import rrf
from lantern.store.index import MemoryIndex
from lantern.store.protocol import StoreProtocol

NEIGHBOUR = "neighbour"  # the signal's name in rankings, weights and explain output


def seeds(rankings: Mapping[str, Sequence[int]], k: int, weights: Mapping[str, float] | None, depth: int) -> list[int]:
    """The ``depth`` best row positions of the RRF fusion of ``rankings`` (signal name -> positions, best first),
    best first (ties: the lower position first)."""
    fused = rrf(rankings, k, weights)
    return [p for p, _ in sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:depth]]


def neighbour_ranking(
    store: StoreProtocol, index: MemoryIndex, seed_positions: Sequence[int], allowed: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """For each seed (row positions, best first): the next turn of its session, then the previous one; each
    neighbour listed once, at its first (best) seed. A seed may be listed as the neighbour of a better seed (a
    reply that is itself a weak hit). ``allowed``: boolean row mask (None: every row). Returns (positions best
    first, score 1/rank)."""
    if not len(seed_positions):
        return np.empty(0, np.int64), np.empty(0, np.float32)
    ids = [int(index.ids[p]) for p in seed_positions]
    # a neighbour is the next/previous turn of the same session *within the seed's scope* (user, agent, project):
    # two users may both have a session named "default"
    where = store.places(ids)
    wanted = [(*where[i][:4], where[i][4] + d) for i in ids if i in where for d in (1, -1)]
    if not wanted:
        return np.empty(0, np.int64), np.empty(0, np.float32)
    found = store.turn_ids(wanted)  # a turn split into several entries: the first one
    seen: set[int] = set()
    out: list[int] = []
    for key in wanted:
        entry_id = found.get(key)
        if entry_id is None or entry_id in seen:
            continue
        seen.add(entry_id)
        out.append(entry_id)
    out_ids = np.asarray(out, np.int64)
    known = out_ids[np.isin(out_ids, index.ids)]  # rows committed by another process since the last refresh wait
    pos = index.positions(known) if len(known) else np.empty(0, np.int64)
    if allowed is not None and len(pos):
        pos = pos[allowed[pos]]
    return pos, 1.0 / np.arange(1, len(pos) + 1, dtype=np.float32)
