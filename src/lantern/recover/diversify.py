"""Diversify (docs/architecture.md §3.4): candidates in maximal-marginal-relevance order, near-duplicates cut.

MMR (Carbonell & Goldstein 1998) with λ = ``Config.mmr_lambda`` over the candidates' RRF scores, similarity =
cosine of the main embeddings. Both run lazily: packing pulls only as many candidates as fit the budget, and the
cosines of a candidate to the others are computed when it is first needed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np

from lantern import lazy_re
from lantern.config import Config
from lantern.model import Candidate
from lantern.recover.fusion import mmr
from lantern.store.index import cosines

DUPLICATE_COSINE = (
    0.98  # a candidate this close to one already packed adds nothing (ours), unless it states a new number
)
_NUMBER = lazy_re.compile(r"\d+")

__all__ = ["DUPLICATE_COSINE", "diversify"]


def diversify(
    ranked: list[Candidate], vectors: np.ndarray, config: Config, order: list[int] | None = None
) -> Iterable[int]:
    """The indices of ``ranked`` (best RRF first) in MMR order (fused order when ``config.use_mmr`` is off; the
    given ``order`` of indices when there is one, e.g. the rerank stage's), near-duplicates left out (verdict
    ``cut:duplicate``), each candidate's ``mmr_order`` set as it is reached.
    ``vectors``: float32 (len(ranked), d), L2-normalized, aligned with ``ranked``. Lazy, and replayable: a second
    iteration (packing again to make room for fact notes) sees the same indices without recomputing them."""
    rows: dict[int, np.ndarray] = {}

    def similarity(i: int) -> np.ndarray:  # cosines of candidate i to every candidate, computed when first needed
        if i not in rows:
            rows[i] = cosines(vectors, vectors[i])
        return rows[i]

    if order is not None:
        return _Replay(_distinct(ranked, iter(order), similarity))
    relevance = np.asarray([c.rrf for c in ranked])
    mmr_order = mmr(relevance, similarity, config.mmr_lambda) if config.use_mmr else iter(range(len(ranked)))
    return _Replay(_distinct(ranked, mmr_order, similarity))


def _distinct(ranked: list[Candidate], order: Iterable[int], similarity: Callable[[int], np.ndarray]) -> Iterator[int]:
    """The indices of ``order`` (MMR order) that are no near-duplicate of one yielded before it: a candidate whose
    cosine to an earlier kept one is >= DUPLICATE_COSINE, and whose summary states no number that one's does not,
    gets the verdict ``cut:duplicate`` naming the first such kept candidate ("the port is 5434" and "the port is
    5435" embed almost alike but are two facts; ours). Sets each candidate's ``mmr_order`` as it goes."""
    twin = np.full(len(ranked), -1, np.int64)  # per candidate: the first kept candidate it nearly repeats
    kept: list[int] = []
    numbers: dict[int, set[str]] = {}

    def repeats(i: int, k: int) -> bool:  # i states no number that k does not
        for j in (i, k):
            if j not in numbers:
                numbers[j] = set(_NUMBER.findall(ranked[j].entry.summary))
        return numbers[i] <= numbers[k]

    for n, i in enumerate(order, start=1):
        ranked[i].mmr_order = n
        k = int(twin[i])
        if k >= 0 and not repeats(i, k):  # rare: look for another kept twin it does repeat
            k = next((k for k in kept if similarity(k)[i] >= DUPLICATE_COSINE and repeats(i, k)), -1)
        if k >= 0:
            ranked[i].verdict, ranked[i].reason = (
                "cut:duplicate",
                f"cosine ≥ {DUPLICATE_COSINE} to entry {ranked[k].entry.id}",
            )
            continue
        twin[(twin < 0) & (similarity(i) >= DUPLICATE_COSINE)] = i
        kept.append(i)
        yield i


class _Replay:
    """An iterator's items, read from it once and replayed to every later iteration (packing may run twice:
    facts_note.pack_with_notes)."""

    def __init__(self, items: Iterator[int]) -> None:
        self._items, self._seen = items, []

    def __iter__(self) -> Iterator[int]:
        n = 0
        while True:
            if n == len(self._seen):
                item = next(self._items, None)
                if item is None:
                    return
                self._seen.append(item)
            yield self._seen[n]
            n += 1
