"""Fusion of the ranked signals and diversification (docs/architecture.md §3.3–3.4)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence

import numpy as np


def rrf(
    rankings: Mapping[str, Sequence[Hashable]], k: int = 60, weights: Mapping[str, float] | None = None
) -> dict[Hashable, float]:
    """Reciprocal rank fusion: RRF(e) = Σ_L w_L / (k + rank_L(e)), ranks 1-based (Cormack, Clarke & Büttcher 2009;
    paper eq. 3, k = 60, every w_L = 1). ``weights`` (signal name -> w_L, default 1) gives weighted RRF.
    Returns item -> fused score; an item absent from a ranking gets nothing from it."""
    fused: dict[Hashable, float] = {}
    for name, ranking in rankings.items():
        w = 1.0 if weights is None else weights.get(name, 1.0)
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + w / (k + rank)
    return fused


def score_sum(scores: Mapping[str, Mapping[Hashable, float]]) -> dict[Hashable, float]:
    """Ablation baseline for RRF: the sum of each signal's scores min-max normalized to [0, 1] over the items it
    ranked (CombSUM, Fox & Shaw 1994)."""
    fused: dict[Hashable, float] = {}
    for per_item in scores.values():
        if not per_item:
            continue
        values = np.asarray(list(per_item.values()), dtype=np.float64)
        lo, span = values.min(), values.max() - values.min()
        for item, v in per_item.items():
            fused[item] = fused.get(item, 0.0) + ((v - lo) / span if span > 0 else 1.0)
    return fused


def mmr(relevance: np.ndarray, similarity: np.ndarray | Callable[[int], np.ndarray], lam: float = 0.7) -> Iterator[int]:
    """Maximal marginal relevance (Carbonell & Goldstein 1998; λ = 0.7 as in the paper): repeatedly pick
    argmax_i λ·rel(i) − (1 − λ)·max_{j picked} sim(i, j). ``relevance`` (n,) is scaled to [0, 1] by its max;
    ``similarity``: the (n, n) cosines between candidates, or a function i -> row i, shape (n,), called once per
    picked i (so a caller that stops after m picks computes m rows, not n²: packing stops when the budget is
    full). Yields the n indices in selection order, lazily."""
    n = len(relevance)
    if n == 0:
        return
    row = similarity if callable(similarity) else similarity.__getitem__
    rel = relevance / relevance.max() if relevance.max() > 0 else relevance
    remaining = np.ones(n, dtype=bool)
    max_sim = np.full(n, -np.inf)
    for _ in range(n):
        redundancy = np.where(np.isfinite(max_sim), max_sim, 0.0)
        gain = np.where(remaining, lam * rel - (1 - lam) * redundancy, -np.inf)
        best = int(np.argmax(gain))
        yield best
        remaining[best] = False
        max_sim = np.maximum(max_sim, row(best))
