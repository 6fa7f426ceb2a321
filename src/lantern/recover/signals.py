"""The four ranked signals of the read path (docs/architecture.md §3.2; paper §3, eq. 2).

Each signal returns row positions of the in-process index (``MemoryIndex``), best first. ``allowed`` is a boolean
mask over rows (scope and explicit exclusions), or None for every row.
"""

from __future__ import annotations

import re

import numpy as np

from lantern import lazy_re
from lantern.scope import Scope
from lantern.store import ann
from lantern.store.index import MemoryIndex
from lantern.store.protocol import StoreProtocol
from lantern.store.vectors import distinct

LN2 = 0.693  # paper eq. 2 writes exp(-0.693 * dt / T_half)
SECONDS_PER_DAY = 86_400.0


def _top(scores: np.ndarray, allowed: np.ndarray | None, n: int) -> np.ndarray:
    """Positions of the ``n`` highest finite scores among allowed rows, best first."""
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    valid = np.isfinite(scores)
    k = min(n, int(valid.sum()))
    if k == 0:
        return np.empty(0, np.int64)
    part = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    part = part[np.isfinite(scores[part])]
    return part[np.argsort(-scores[part], kind="stable")]


# ---------------------------------------------------------------- semantic
def semantic(
    index: MemoryIndex, query_vector: np.ndarray, allowed: np.ndarray | None, n: int, skip_blank: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Cosine similarity between the query and every entry embedding (rows are L2-normalized, so a dot product;
    Reimers & Gurevych 2019). Returns (positions best first, their cosines). ``skip_blank``: rows whose cosine is
    exactly 0, i.e. rows with no value in the query vector's dims (a block ranked apart that only some entries have,
    embed.signal_blocks), are left out rather than ranked as arbitrary ties. A store past ``Config.ann_min_rows``
    takes its candidates from HNSW graphs and rescores them exactly (store/ann.py): the same positions and cosines
    up to the graphs' recall; every other case is the exact product over all rows. A row with no vector (stored
    text-first, not filled yet: ``index.embedded``) is never ranked: full text finds it until it is filled."""
    if not len(index.ids):
        return np.empty(0, np.int64), np.empty(0, np.float32)
    embedded = index.embedded()
    if embedded is not None:
        allowed = embedded if allowed is None else allowed & embedded
    if index.ann is not None:
        found = ann.nearest(index, query_vector, allowed, n, skip_blank)
        if found is not None:
            return found
    cos = index.cosines(query_vector)
    if skip_blank:
        cos = np.where(cos == 0.0, np.float32(-np.inf), cos)
    top = _top(cos, allowed, n)
    return top, cos[top]


# ---------------------------------------------------------------- full text
_TOKEN = lazy_re.compile(r"\w", re.UNICODE)
_FTS_TOKEN = lazy_re.compile(r"[^\W_]+")


# term selection (select_terms) on at every size, budget 0.25: ours, chosen on the LoCoMo tune split
# (docs/results/recall-tuning.md, "Parameter choices in config.py")
FTS_SELECT_MIN_ROWS = 0  # ours: below this many entries every term is kept
FTS_SAMPLE_ROWS = 2_000  # ours: newest rows in which a term's document frequency is estimated
FTS_MAX_FRACTION = 0.5  # FTS5's bm25 clamps idf to 1e-6 for terms in over half the rows: they add cost, not rank
FTS_POSTINGS_BUDGET = 0.25  # ours: the kept terms match at most ~this many corpus-sizes of rows in total
FTS_MAX_POSTINGS = 5_000  # ours: ... and at most this many rows in total, whatever the corpus size
FTS_MIN_TERMS = 4  # ours: the rarest 4 terms are kept whatever their frequency (up to FTS_MAX_FRACTION and
# FTS_MAX_POSTINGS)
# a row of a token's doclist walked to find a phrase, in rows matched and scored by bm25: measured, a term's query
# takes 0.81 us per matched row + 0.037 us per row of a phrase's token doclists (416 terms of 50 aider questions on
# 100k entries, R^2 0.98; benchmarks/bench_fts_cost.py, BENCHMARKS.md section 22)
FTS_TOKEN_SCAN = 0.05


def has_word(term: str) -> bool:
    """Whether ``term`` holds a word character (a term without one is never searched: ``fts_query``)."""
    return bool(_TOKEN.search(term))


def quote(term: str) -> str:
    """One term as a double-quoted FTS5 string (inner quotes doubled): operators and syntax become plain data."""
    return '"' + term.replace('"', '""') + '"'


def fts_query(terms: list[str]) -> str:
    """A MATCH expression that can never be a syntax error: every term is a double-quoted FTS5 string (inner
    quotes doubled), so ``AND``/``NOT``/``NEAR``, colons, parentheses and ``*`` from users are plain data; terms
    are joined with OR so bm25() ranks by how many and how rare. Terms without a word character are dropped."""
    return " OR ".join(quote(t) for t in terms if _TOKEN.search(t))


def select_terms(
    terms: list[str],
    fractions: dict[str, float],
    rows: int | None = None,
    postings: dict[str, float] | None = None,
) -> list[str]:
    """The terms worth an OR query over a large corpus, in their original order. ``fractions``: each quoted term's
    estimated share of matching entries; ``postings``: its estimated read cost, in full-text rows per entry: the rows
    it matches, windows of long texts included, and for a phrase a share of its tokens' rows (``read_costs``; None:
    the fractions); ``rows``: the entry count (None: unknown, no absolute bound). Terms in more than
    ``FTS_MAX_FRACTION`` of the entries are dropped (bm25's idf is clamped to ~0 there); of the rest, rarest first
    (by the share of entries: idf), terms are kept while the entries they match sum to at most
    ``FTS_POSTINGS_BUDGET`` corpus-sizes (the rarest ``FTS_MIN_TERMS`` past it) and their read cost to at most
    ``FTS_MAX_POSTINGS`` rows (never past it). The first bound is about rank: the common terms dropped weigh least in
    bm25 (idf = ln((N - n + 0.5) / (n + 0.5)); Robertson & Zaragoza 2009). The second is about cost: the OR query
    reads each term's whole doclist to rank by bm25, window rows of long texts included, and for a phrase (a term the
    tokenizer splits, such as ``aider/models.py``) the doclists of all its tokens, so it stays under
    ``FTS_MAX_POSTINGS`` rows however many rows hold a common query term or a common token of one. Ours; the paper
    does not specify term selection."""
    postings = fractions if postings is None else postings
    usable = [t for t in terms if _TOKEN.search(t) and fractions.get(quote(t), 0.0) <= FTS_MAX_FRACTION]
    cap = FTS_MAX_POSTINGS / rows if rows else float("inf")  # the absolute bound, in corpus-sizes
    kept: set[str] = set()
    matched, read = 0.0, 0.0
    for t in sorted(usable, key=lambda t: fractions.get(quote(t), 0.0)):  # stable: ties keep query order
        f, p = fractions.get(quote(t), 0.0), postings.get(quote(t), 0.0)
        if read + p > cap:
            continue  # a term with many window rows may be skipped while rarer-by-rows ones still fit
        if len(kept) >= FTS_MIN_TERMS and matched + f > FTS_POSTINGS_BUDGET:
            break
        kept.add(t)
        matched, read = matched + f, read + p
    return [t for t in usable if t in kept]


def fts_tokens(term: str) -> list[str]:
    """The tokens FTS5's unicode61 tokenizer makes of ``term``: runs of letters and digits (``_`` and every other
    punctuation character separate them), so ``src/db_config.py`` is the phrase src db config py."""
    return _FTS_TOKEN.findall(term)


def read_costs(store: StoreProtocol, terms: list[str]) -> dict[str, float]:
    """Each quoted term's estimated cost in an OR query, in full-text rows per entry: the rows it matches
    (``Store.term_postings``) and, for a term of several tokens (a phrase), ``FTS_TOKEN_SCAN`` times the rows of
    each of its tokens, since FTS5 finds a phrase by walking every token's doclist, twice (bm25 counts the phrase's
    rows for its idf, then the query matches them). Estimated in the newest ``FTS_SAMPLE_ROWS`` entries, cached
    per term as ``Store.term_postings`` caches. Returns {quoted term: cost}."""
    quoted = {t: quote(t) for t in terms if _TOKEN.search(t)}
    parts = {t: fts_tokens(t) for t in quoted}
    singles = [quote(tok) for toks in parts.values() if len(toks) > 1 for tok in toks]
    postings = store.term_postings(list(dict.fromkeys([*quoted.values(), *singles])), FTS_SAMPLE_ROWS)
    return {
        q: postings[q] + (FTS_TOKEN_SCAN * sum(postings[quote(tok)] for tok in parts[t]) if len(parts[t]) > 1 else 0.0)
        for t, q in quoted.items()
    }


def searched_terms(store: StoreProtocol, index: MemoryIndex, terms: list[str]) -> list[str]:
    """The terms ``fulltext`` searches for ``terms``: ``select_terms`` over the store's estimates."""
    if len(index.ids) < FTS_SELECT_MIN_ROWS:
        return [t for t in terms if _TOKEN.search(t)]
    quoted = [quote(t) for t in terms if _TOKEN.search(t)]
    fractions = store.term_fractions(quoted, FTS_SAMPLE_ROWS)
    return select_terms(terms, fractions, len(index.ids), read_costs(store, terms))


def fulltext(
    store: StoreProtocol,
    index: MemoryIndex,
    terms: list[str],
    sessions: list[str] | None,
    n: int,
    scope: Scope | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """SQLite FTS5 ``bm25()`` over summary + text + tags (Robertson & Zaragoza 2009; FTS5's Okapi BM25 with
    k1 = 1.2, b = 0.75), within ``sessions`` and ``scope`` in SQL (None: no condition) so other users' entries
    never take the top-n places. From ``FTS_SELECT_MIN_ROWS`` entries on, the query's terms go through
    ``select_terms`` (the OR of every term scored nearly every row at 100k entries; the kept terms match at most
    ``FTS_MAX_POSTINGS`` rows, the window rows of long texts counted: ``Store.term_postings``). Returns (positions best
    first, bm25 scores negated so that higher is better)."""
    if sessions is not None and not sessions:
        return np.empty(0, np.int64), np.empty(0, np.float32)
    terms = searched_terms(store, index, terms)
    rows = store.fulltext(fts_query(terms), n, sessions, scope)
    if not rows or not len(index.ids):
        return np.empty(0, np.int64), np.empty(0, np.float32)
    ids = np.asarray([i for i, _ in rows], np.int64)
    scores = -np.asarray([s for _, s in rows], np.float32)
    pos = np.minimum(np.searchsorted(index.ids, ids), len(index.ids) - 1)
    keep = index.ids[pos] == ids  # rows committed by another process after our last refresh wait for the next
    return pos[keep], scores[keep]


# ---------------------------------------------------------------- keyword
def jaccard(intersection: np.ndarray, query_size: int, hint_size: np.ndarray) -> np.ndarray:
    """|Q ∩ H| / |Q ∪ H| (Jaccard 1901), with |Q ∪ H| = |Q| + |H| − |Q ∩ H|."""
    return intersection / np.maximum(query_size + hint_size - intersection, 1.0)


def overlap_coefficient(intersection: np.ndarray, query_size: int, hint_size: np.ndarray) -> np.ndarray:
    """|Q ∩ H| / min(|Q|, |H|) (Szymkiewicz–Simpson overlap coefficient; Vijaymeena & Kavitha 2016, §2): unlike
    Jaccard, an entry is not penalized for carrying many hints."""
    return intersection / np.maximum(np.minimum(query_size, hint_size), 1.0)


def idf(df: np.ndarray, n_rows: int) -> np.ndarray:
    """Robertson–Spärck Jones idf, ln(1 + (N − df + 0.5) / (df + 0.5)) (the BM25 form, always positive;
    Robertson & Zaragoza 2009, eq. 3.3)."""
    return np.log1p((n_rows - df + 0.5) / (df + 0.5))


def count_hits(hits: np.ndarray, n_rows: int, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(distinct positions ascending, how many times each is in ``hits``; with ``weights``, the sum of its hits'
    weights). ``np.unique`` sorts the hits, O(h log h); past an eighth of ``n_rows`` hits (a common hint of a large
    store) one ``np.bincount`` over the rows is cheaper, O(h + n). Both give the same arrays."""
    if len(hits) > n_rows // 8:
        counts = np.bincount(hits, minlength=n_rows)
        pos = np.flatnonzero(counts)
        if weights is None:
            return pos, counts[pos]
        return pos, np.bincount(hits, weights=weights, minlength=n_rows)[pos]
    if weights is None:
        return np.unique(hits, return_counts=True)
    pos, inverse = np.unique(hits, return_inverse=True)
    return pos, np.bincount(inverse, weights=weights)


KEYWORD_HINT_CAP = 64  # |H| counted at most as the hints of one 2,000-character window of code or logs (ours)


def keyword(
    index: MemoryIndex, terms: list[str], allowed: np.ndarray | None, n: int, score: str = "jaccard"
) -> tuple[np.ndarray, np.ndarray]:
    """Overlap between the query terms and each entry's lookup hints (tags, paths, tool names), through the
    inverted index built at archive time (architecture §3.2). ``score``: ``jaccard`` (§3.2), ``overlap`` (overlap
    coefficient), or ``idf`` (the sum of the idf of the shared terms: coordination-level matching weighted by idf,
    Spärck Jones 1972, so a generic hint term such as ``port`` weighs little). An entry's hint count |H| is capped
    at ``KEYWORD_HINT_CAP`` (a 2,000-character window of code or a log holds ~50 hints, median of the aider turns):
    a 115 KB test log carries ~1,200 hints, and its one matching hint would otherwise rank below any short turn's
    (ours; chat turns hold a few hints, so they are unaffected). Returns (positions best first, scores)."""
    query = set(terms)
    found = [(t, index.postings.rows(t)) for t in query]
    found = [(t, ps) for t, ps in found if len(ps)]
    if not found:
        return np.empty(0, np.int64), np.empty(0, np.float32)
    hits = np.concatenate([ps for _, ps in found])
    per_hit = None
    if score == "idf":
        weights = idf(np.asarray([len(distinct(ps)) for _, ps in found], np.float64), len(index.ids))
        per_hit = np.repeat(weights, [len(ps) for _, ps in found])
    pos, inter = count_hits(hits, len(index.ids), per_hit)
    if allowed is not None:
        keep = allowed[pos]
        pos, inter = pos[keep], inter[keep]
    hints = np.minimum(index.hint_count[pos], KEYWORD_HINT_CAP)
    if score == "idf":
        scores = inter.astype(np.float32)
    elif score == "overlap":
        scores = overlap_coefficient(inter.astype(np.float32), len(query), hints)
    else:
        scores = jaccard(inter.astype(np.float32), len(query), hints)
    order = np.argsort(-scores, kind="stable")[:n]
    return pos[order], scores[order]


# ---------------------------------------------------------------- importance, paper eq. 2
def recency(age_days: np.ndarray, half_life_days: float) -> np.ndarray:
    """ln R = −0.693 · Δt / T½ (paper eq. 2; returned as a logarithm so that years-old imports do not underflow
    to a tie at 0). Future times count as Δt = 0."""
    return -LN2 * np.maximum(age_days, 0.0) / half_life_days


def frequency(access_count: np.ndarray) -> np.ndarray:
    """ln F with F = log2(a + 1) + 1, a = times retrieved (paper eq. 2)."""
    return np.log(np.log2(access_count + 1.0) + 1.0)


def richness(prior: np.ndarray, tool_count: np.ndarray, file_count: np.ndarray) -> np.ndarray:
    """ln D with D = 0.5 + prior + 0.25·[has tool calls] + 0.25·[references files], so D ∈ [0.5, 2.0].
    Our schedule (the paper names D a bonus for tool calls and file references without values): the write-time
    importance prior (archive/classify.py) carries decisions, preferences and stated facts."""
    return np.log(0.5 + prior + 0.25 * (tool_count > 0) + 0.25 * (file_count > 0))


def importance_log(index: MemoryIndex, positions: np.ndarray, now: float, half_life_days: float) -> np.ndarray:
    """ln I(e) = ln R + ln F + ln D + ln c + ln σ (paper eq. 2) for the given rows."""
    age = (now - index.time[positions]) / SECONDS_PER_DAY
    return (
        recency(age, half_life_days)
        + frequency(index.access_count[positions])
        + richness(index.prior[positions], index.tool_count[positions], index.file_count[positions])
        + np.log(np.maximum(index.confidence[positions], 1e-6))
        + np.log(np.maximum(index.success[positions], 1e-6))
    )


def importance(
    index: MemoryIndex, pool: np.ndarray, now: float, half_life_days: float
) -> tuple[np.ndarray, np.ndarray]:
    """Orders the candidate pool gathered by the query signals by I(e). Our choice (the paper does not say which
    entries it ranks): importance re-orders candidates, it never adds an entry unrelated to the query."""
    if not len(pool):
        return np.empty(0, np.int64), np.empty(0, np.float32)
    scores = importance_log(index, pool, now, half_life_days)
    order = np.argsort(-scores, kind="stable")
    return pool[order], scores[order].astype(np.float32)


__all__ = [
    "fts_query",
    "fulltext",
    "has_word",
    "quote",
    "select_terms",
    "read_costs",
    "fts_tokens",
    "importance",
    "importance_log",
    "idf",
    "jaccard",
    "overlap_coefficient",
    "keyword",
    "recency",
    "frequency",
    "richness",
    "semantic",
]
