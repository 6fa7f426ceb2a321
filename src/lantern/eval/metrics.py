"""Per-fact retrieval metrics (docs/architecture.md §6). Each takes the system's ranking (entry ids, best first)
and the set of relevant entry ids (the evidence turns the compaction lost); binary relevance throughout."""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Sequence


def fact_recovered(packed: Collection[int], relevant: Collection[int]) -> bool:
    """True when every relevant entry is inside the packed block (the paper's fact recovery: all evidence of a lost
    fact injected). A fact with no relevant entry is not recoverable: False."""
    return bool(relevant) and all(r in packed for r in relevant)


def recall_at_k(ranking: Sequence[int], relevant: Collection[int], k: int) -> float:
    """|relevant ∩ top-k| / |relevant| (Manning, Raghavan & Schütze 2008, §8.1). 0.0 when nothing is relevant."""
    if not relevant:
        return 0.0
    top = set(ranking[:k])
    return sum(1 for r in set(relevant) if r in top) / len(set(relevant))


def hit_at_k(ranking: Sequence[int], relevant: Collection[int], k: int) -> float:
    """1.0 when some relevant entry is in the top k, else 0.0 (success@k): recall@k when the relevant entries are
    alternatives (any one of them answers, as for a look-ahead token held by several turns)."""
    rel = set(relevant)
    return 1.0 if any(e in rel for e in ranking[:k]) else 0.0


def session_recall_at_k(
    ranking_sessions: Sequence[Collection[str]], relevant_sessions: Collection[str], k: int
) -> float:
    """Recall@k at session level: the share of the evidence's distinct sessions that some top-k entry belongs to.
    ``ranking_sessions``: per ranked entry, its session labels (an entry can belong to several: a deduplicated
    turn). 0.0 when there is no relevant session."""
    rel = set(relevant_sessions)
    if not rel:
        return 0.0
    seen = set().union(*ranking_sessions[:k]) if ranking_sessions[:k] else set()
    return len(rel & seen) / len(rel)


def ndcg_at_k(ranking: Sequence[int], relevant: Collection[int], k: int = 10, alternatives: bool = False) -> float:
    """nDCG@k with binary gains, DCG = Σ rel_i / log2(i + 1) over ranks i = 1..k, divided by the ideal DCG of
    min(|relevant|, k) relevant items at the top (Järvelin & Kekäläinen 2002). ``alternatives``: the relevant
    entries are interchangeable (any one answers): only the first one ranked gains, the ideal DCG is 1."""
    rel = set(relevant)
    if not rel:
        return 0.0
    if alternatives:
        return next((1.0 / math.log2(i + 2) for i, e in enumerate(ranking[:k]) if e in rel), 0.0)
    dcg = sum(1.0 / math.log2(i + 2) for i, e in enumerate(ranking[:k]) if e in rel)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(rel), k)))
    return dcg / ideal


def reciprocal_rank(ranking: Sequence[int], relevant: Collection[int]) -> float:
    """1 / rank of the first relevant entry, 0.0 when none is ranked (Voorhees 1999, TREC-8 QA; MRR is its mean)."""
    rel = set(relevant)
    for i, e in enumerate(ranking, 1):
        if e in rel:
            return 1.0 / i
    return 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0–100), linear interpolation between closest ranks (numpy's default, Hyndman & Fan
    1996 type 7). 0.0 for no values."""
    vals = sorted(values)
    if not vals:
        return 0.0
    if len(vals) == 1:
        return float(vals[0])
    pos = (len(vals) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(vals) - 1)
    return float(vals[lo] + (vals[hi] - vals[lo]) * (pos - lo))


METRICS = ("recovered", "recall@5", "recall@10", "session_recall@5", "session_recall@10", "ndcg@10", "mrr", "chars")


def summarize(rows: Sequence[dict]) -> dict:
    """Mean of every metric over per-fact rows (micro average), plus latency p50/p95 in ms and the count ``n``."""
    out: dict = {"n": len(rows)}
    for m in METRICS:
        out[m] = statistics.fmean(float(r[m]) for r in rows) if rows else 0.0
    ms = [r["ms"] for r in rows]
    out["latency_p50_ms"] = percentile(ms, 50)
    out["latency_p95_ms"] = percentile(ms, 95)
    return out
