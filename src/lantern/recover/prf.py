"""Pseudo-relevance feedback for the full-text signal: the query expanded with terms of its own best hits.

RM3 (Lavrenko & Croft 2001; Abdul-Jaleel et al. 2004): the top ``docs`` BM25 hits are taken as relevant; each term
of theirs is weighted by the relevance model p(w|R) ∝ Σ_D p(D|Q) · tf(w, D) / |D| (p(D|Q): the hits' BM25 scores
normalized to sum to one); the ``terms`` best terms not already in the query are added to it. FTS5 cannot weight
the terms of one query, so RM3's interpolation with the original query is done in the fusion instead: the
expanded query's BM25 ranking is its own signal, ``prf``, fused by RRF with its own weight next to the plain
``fulltext`` ranking. Our addition: p(w|R) is multiplied by the term's idf (ln 1/df-fraction, df estimated as
``signals.select_terms`` does), since chat turns share many frequent words ("great", "really") that a
stopword list misses.
"""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np

from lantern import lazy_re
from lantern.recover import signals
from lantern.scope import Scope
from lantern.store.index import MemoryIndex
from lantern.store.protocol import StoreProtocol
from lantern.text.cjk import cjk_bigrams
from lantern.text.tags import STOPWORDS

PRF = "prf"  # the signal's name in rankings, weights and explain output
TEXT_CHARS = 2_000  # characters of a feedback entry read for its terms (ours: bounds the work on long tool logs)
CANDIDATES = 40  # terms by p(w|R) whose document frequency is looked up (ours)


_WORD = lazy_re.compile(r"\w+", re.UNICODE)
_CJK = lazy_re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def words(text: str) -> list[str]:
    """The terms of ``text`` with repeats, as the full-text query uses them: lowercased words of >= 3 characters
    that are not stopwords, and the character bigrams of CJK runs."""
    return [
        w for w in _WORD.findall(cjk_bigrams(text.lower())) if (len(w) >= 3 and w not in STOPWORDS) or _CJK.search(w)
    ]


def relevance_model(texts: list[str], scores: list[float], exclude: set[str]) -> dict[str, float]:
    """p(w|R) ∝ Σ_D p(D|Q) · tf(w, D) / |D| over the feedback texts (terms as ``words`` makes them),
    ``scores`` (higher is better, > 0) normalized into p(D|Q). Terms in ``exclude`` are left out. Returns
    {term: weight}, weights summing to at most 1."""
    total = sum(scores)
    if not texts or total <= 0:
        return {}
    out: Counter[str] = Counter()
    for text, score in zip(texts, scores):
        counts = Counter(words(text[:TEXT_CHARS]))
        size = sum(counts.values())
        if not size:
            continue
        for term, tf in counts.items():
            if term not in exclude:
                out[term] += (score / total) * tf / size
    return dict(out)


def expansion(store: StoreProtocol, model: dict[str, float], n_terms: int) -> list[str]:
    """The ``n_terms`` terms of highest p(w|R) · idf, idf = ln(1 / df-fraction) over the newest
    ``signals.FTS_SAMPLE_ROWS`` entries; terms in no sampled entry or in over ``signals.FTS_MAX_FRACTION`` of them
    are skipped."""
    top = sorted(model, key=lambda t: (-model[t], t))[:CANDIDATES]
    usable = [t for t in top if signals._TOKEN.search(t)]
    fractions = store.term_fractions([signals.quote(t) for t in usable], signals.FTS_SAMPLE_ROWS)
    weighted = []
    for t in usable:
        f = fractions.get(signals.quote(t), 0.0)
        if 0.0 < f <= signals.FTS_MAX_FRACTION:
            weighted.append((model[t] * math.log(1.0 / f), t))
    weighted.sort(key=lambda x: (-x[0], x[1]))
    return [t for _, t in weighted[:n_terms]]


def prf_ranking(
    store: StoreProtocol,
    index: MemoryIndex,
    terms: list[str],
    fulltext: tuple[np.ndarray, np.ndarray],
    sessions: list[str] | None,
    n: int,
    scope: Scope | None,
    allowed: np.ndarray | None,
    docs: int,
    n_terms: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The BM25 ranking of ``terms`` + RM3 expansion terms taken from the top ``docs`` rows of the ``fulltext``
    ranking (positions, scores higher-is-better). Empty when there is no hit or no expansion term."""
    positions, scores = fulltext
    if not len(positions) or docs <= 0 or n_terms <= 0:
        return np.empty(0, np.int64), np.empty(0, np.float32)
    head = positions[:docs]
    ids = [int(index.ids[p]) for p in head]
    entries = store.entries(ids, tags=False)
    raw = np.asarray(scores[:docs], np.float64)
    weights = np.exp(raw - raw.max())  # higher is better; a softmax keeps every weight positive
    texts = [entries[i].text if i in entries else "" for i in ids]
    extra = expansion(store, relevance_model(texts, weights.tolist(), set(terms)), n_terms)
    if not extra:
        return np.empty(0, np.int64), np.empty(0, np.float32)
    pos, sc = signals.fulltext(store, index, list(terms) + extra, sessions, n, scope)
    if allowed is not None and len(pos):
        keep = allowed[pos]
        pos, sc = pos[keep], sc[keep]
    return pos, sc
