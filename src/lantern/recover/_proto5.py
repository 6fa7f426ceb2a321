"""TEMPORARY round-5 prototypes (removed before merge): vector PRF and session-level signals, read from
``config.extra``. Each returns (positions best first, scores)."""

from __future__ import annotations

import numpy as np

from ..store.index import MemoryIndex
from . import neighbours, signals


def vprf(index: MemoryIndex, vector, found, config, allowed, opts):
    """Rocchio on the query vector: q' = q + beta * mean(top-k feedback rows); cosine ranking top-N."""
    k, beta, src = opts.get("k", 5), opts.get("beta", 0.5), opts.get("src", "fused")
    if vector is None:
        return None
    if src == "semantic":
        seeds = list(found["semantic"][0][:k]) if "semantic" in found else []
    else:
        seeds = neighbours.seeds({n: v[0].tolist() for n, v in found.items()}, config.rrf_k, config.signal_weights, k)
    if not seeds:
        return None
    columns, matrix = index._view
    q = vector if len(columns) == index.dim else vector[columns]
    fb = matrix[np.asarray(seeds, np.int64)]
    if opts.get("weighted"):  # feedback rows weighted by rank 1/r
        w = 1.0 / np.arange(1, len(seeds) + 1)
        centroid = (fb * w[:, None]).sum(0) / w.sum()
    else:
        centroid = fb.mean(0)
    q2 = q.astype(np.float32) + np.float32(beta) * centroid
    q2 /= max(float(np.linalg.norm(q2)), 1e-9)
    cos = signals.cosines(matrix, q2) if hasattr(signals, "cosines") else np.einsum("ij,j->i", matrix, q2)
    top = signals._top(cos, allowed, config.signal_top_n)
    return top, cos[top]


def session_signal(index: MemoryIndex, vector, found, config, allowed, opts):
    """Hierarchical: score sessions, rank the turns of the best sessions by cosine to the query."""
    if vector is None or not len(index.ids):
        return None
    cos = index.cosines(vector)
    mode, top_s, agg_n = opts.get("mode", "max"), opts.get("sessions", 3), opts.get("agg", 3)
    ok = np.ones(len(cos), bool) if allowed is None else allowed
    sess = index.session
    codes = np.unique(sess[ok])
    if len(codes) < 2:  # one session: the signal would be the semantic ranking again
        return None
    if mode == "fused":  # sessions voted by the fused ranking so far: sum of RRF scores of their turns
        fused = neighbours.seeds({n: v[0].tolist() for n, v in found.items()}, config.rrf_k, config.signal_weights, opts.get("depth", 50))
        score = {}
        for r, p in enumerate(fused, 1):
            score[int(sess[p])] = score.get(int(sess[p]), 0.0) + 1.0 / (config.rrf_k + r)
        best = sorted(score, key=lambda c: (-score[c], c))[:top_s]
        sscore = score
    else:
        sscore = {}
        for c in codes:
            vals = np.sort(cos[ok & (sess == c)])[::-1]
            sscore[int(c)] = float(vals[0]) if mode == "max" else float(vals[:agg_n].mean())
        best = sorted(sscore, key=lambda c: (-sscore[c], c))[:top_s]
    rows = np.flatnonzero(ok & np.isin(sess, np.asarray(best, sess.dtype)))
    if opts.get("interp") is not None:  # turn score interpolated with its session's score
        a = opts["interp"]
        s = np.asarray([sscore[int(sess[r])] for r in rows], np.float32)
        sc = (1 - a) * cos[rows] + a * s
    else:
        sc = cos[rows]
    order = np.argsort(-sc, kind="stable")[: config.signal_top_n]
    return rows[order], sc[order].astype(np.float32)
