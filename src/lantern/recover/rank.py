"""The ranking half of the read path (docs/architecture.md §3): a query -> every candidate, fused by RRF.

    mask       = candidate_mask(index, session, scope, exclude_ids)     who may be a candidate at all
    weights    = query_weights(config, query)                           per signal; a signal of weight 0 is off
    query      = plan_query(query, embedder, config, proactive, weights) terms, dates named, sub-questions, blocks
    found      = query_signals(...)                                      semantic, fulltext (BM25), prf, keyword,
                                                                          time, a block's own semantic (semantic_e5);
                                                                          candidates read while the vector embeds
    found     += given_rankings(...), then context_signals(...)         extra rankings; neighbour, local (from
                                                                          the others)
    pool       = candidate_pool(...)                                     live entries out; pruned entries marked
    found     += importance over the pool                                I(e) = R·F·D·c·σ (paper eq. 2)
    fused      = rrf(rankings, k=60, weights)                            (Cormack et al. 2009; paper eq. 3) + speaker
    candidates = sorted by RRF score, with each signal's rank and score; excluded ones last

Each ranking is (index positions, scores), best first, masked by the same ``Mask`` so no signal can reach an entry
outside the session, the scope, or the excluded ids. The signals themselves are in signals.py, prf.py,
timeframe.py, neighbours.py, local.py and speaker.py; fusion in fusion.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from lantern import reinforce
from lantern.config import Config
from lantern.embed import Embedder, RoutedEmbedder, cjk_share, embed_query, main_part, signal_blocks
from lantern.model import Candidate, Entry
from lantern.recover import decompose, local, neighbours, prf, relevance, signals, speaker, timeframe
from lantern.recover.fusion import rrf, score_sum
from lantern.scope import Scope
from lantern.store.index import MemoryIndex
from lantern.store.protocol import StoreProtocol
from lantern.store.vectors import distinct
from lantern.text.clean import normalize_space
from lantern.text.tags import query_terms

SIGNAL_ORDER = ("semantic", timeframe.TIME, "fulltext", prf.PRF, "keyword")  # the order rankings are fused in
LIVE_HEAD_CHARS = 200  # characters of a candidate's text read first to test it against the live context (ours)

Ranking = tuple[np.ndarray, np.ndarray]  # (index positions, scores), best first

__all__ = ["Mask", "QueryPlan", "SIGNAL_ORDER", "rank", "still_live"]


@dataclass
class Mask:
    """Which index positions may be candidates. ``allowed``: bool per position, None for every row. ``sessions``:
    the session names full text filters on in SQL (None: any). ``scope``: the scope full text applies in SQL, None
    when every row is in it."""

    allowed: np.ndarray | None
    sessions: list[str] | None
    scope: Scope | None

    def keep(self, ranking: Ranking) -> Ranking:
        """``ranking`` without the positions the mask forbids."""
        if self.allowed is None or not len(ranking[0]):
            return ranking
        ok = self.allowed[ranking[0]]
        return ranking[0][ok], ranking[1][ok]


@dataclass
class QueryPlan:
    """What a query asks of the signals: its ``terms`` (text/tags.py ``query_terms``), the date ``windows`` it
    names (timeframe.py), its sub-``questions`` (decompose.py), the embedding blocks ranked ``apart`` as signals of
    their own (name -> dims), and whether it needs a vector at all."""

    text: str
    terms: list[str]
    windows: list = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    apart: dict[str, tuple[int, int]] = field(default_factory=dict)
    needs_vector: bool = False


@dataclass
class Pool:
    """The candidates every ranking found, as index ``positions``, their ``entries`` (summaries, no text), the
    ids ``excluded`` because still in the live context and ``dropped`` because pruned in a proactive recovery,
    and per position whether it is ``pruned`` (c below the threshold)."""

    positions: np.ndarray
    entries: dict[int, Entry]
    excluded: set[int]
    dropped: set[int]
    pruned: np.ndarray


def rank(
    store: StoreProtocol,
    index: MemoryIndex,
    embedder: Embedder,
    config: Config,
    query: str,
    *,
    session: str | None = None,
    exclude_ids: Iterable[int] = (),
    live_text: str = "",
    now: float | None = None,
    proactive: bool = False,
    scope: Scope | None = None,
    extra_rankings: dict[str, list[int]] | None = None,
) -> tuple[list[Candidate], list[str], np.ndarray, relevance.Relevance]:
    """Every candidate for ``query``, fused and sorted by RRF score (best first), with its per-signal ranks and
    scores. Entries whose full text is still inside ``live_text`` get the verdict ``excluded:live`` and no rank.
    Pruned entries (reinforce.py) get no importance rank; with ``proactive`` they get the verdict
    ``excluded:pruned`` and no rank unless the query names one of their lookup hints. Only entries inside
    ``scope`` (default: the default user; lantern/scope.py) are ever considered: every signal gets the scope mask,
    full text also the scope in SQL. ``extra_rankings``: further signals computed elsewhere (name -> entry ids,
    best first; e.g. a second embedder's semantic ranking, used by the evaluation), fused like the others (weight
    ``signal_weights[name]``, default 1), masked by the same scope.
    Returns (candidates, query terms, positions of the ranked candidates aligned with the ranked part, the
    best candidates' ``relevance.Relevance``: how well anything matches, on a scale comparable across queries)."""
    index.refresh()
    mask = candidate_mask(index, session, scope or Scope(), exclude_ids)
    weights = query_weights(config, query)
    plan = plan_query(query, embedder, config, proactive, weights)
    found, vector, part_vectors, read = query_signals(store, index, embedder, config, plan, mask)
    found.update(given_rankings(index, extra_rankings or {}, mask))
    found = {name: ranked for name, ranked in found.items() if weights.get(name, 1.0) != 0}  # weight 0: off
    found.update(context_signals(store, index, config, found, vector, part_vectors, mask))
    pool = candidate_pool(store, index, config, plan, found, mask, live_text, proactive, read)
    evidence = relevance.assess(
        store, index, embedder.id, plan.terms, found, pool.entries, pool.excluded | pool.dropped, query
    )
    if "importance" in config.signals:
        found["importance"] = signals.importance(
            index, pool.positions[~pool.pruned], now or time.time(), config.half_life_days
        )
    rankings, scores = entry_rankings(index, found, pool)
    if speaker.SPEAKER in config.signals:  # the candidates of a speaker the query names (recover/speaker.py)
        rankings[speaker.SPEAKER] = speaker.speaker_ranking(
            query, rankings, pool.entries, config.rrf_k, config.signal_weights
        )
        scores[speaker.SPEAKER] = {i: 1.0 / r for r, i in enumerate(rankings[speaker.SPEAKER], 1)}
    if part_vectors is not None and local.LOCAL in rankings:  # the per-part local orders, one vote per part (ours)
        weights = {**weights, local.LOCAL: weights.get(local.LOCAL, 1.0) * len(part_vectors)}
    fused = rrf(rankings, config.rrf_k, weights) if config.fusion == "rrf" else score_sum(scores)
    candidates = candidate_list(fused, rankings, scores, pool, config)
    ranked_positions = index.positions([c.entry.id for c in candidates if not c.verdict.startswith("excluded:")])
    return candidates, plan.terms, ranked_positions, evidence


# ------------------------------------------------------------------------------------------------- the stages
def query_weights(config: Config, query: str) -> dict[str, float]:
    """Each signal's RRF weight for ``query``: ``Config.signal_weights``, with ``semantic_e5`` at
    ``Config.e5_english_weight`` for a query the routed embedder reads with MiniLM (less than
    ``RoutedEmbedder.CJK_THRESHOLD`` of CJK) once English turns have e5 blocks (a weight above 0; at 0 they have
    none, and e5 reaches only CJK turns, from any query). A signal of weight 0 is off: it neither votes nor adds
    candidates."""
    weights = dict(config.signal_weights)
    if config.e5_english_weight > 0 and cjk_share(query) < RoutedEmbedder.CJK_THRESHOLD:
        weights["semantic_e5"] = config.e5_english_weight
    return weights


def apart_rows(
    index: MemoryIndex, embedder: Embedder, config: Config, name: str, allowed: np.ndarray | None
) -> np.ndarray | None:
    """The rows a block ranked apart may rank: ``allowed``; for ``semantic_e5`` while English e5 is off
    (``Config.e5_english_weight`` 0) only the CJK-routed rows (those with a USE block), so e5 vectors an English
    turn was given earlier (a store filled while it was on) vote for nothing: the ranking is the same whether
    they are filled or not."""
    use = (getattr(embedder, "blocks", None) or {}).get("use")
    if name != "semantic_e5" or config.e5_english_weight > 0 or use is None:
        return allowed
    routed = index.rows_with(*use)
    if routed is None:
        return allowed
    return routed if allowed is None else allowed & routed


def candidate_mask(index: MemoryIndex, session: str | None, scope: Scope, exclude_ids: Iterable[int]) -> Mask:
    """The positions inside ``session`` (and its sub-sessions), inside ``scope``, and not in ``exclude_ids``."""
    allowed = index.session_mask(session)
    if allowed is not None and allowed.all():  # every row is in the session: full text needs no condition in SQL
        allowed = None
    sessions = index.sessions_matching(session) if allowed is not None else None
    in_scope = index.scope_mask(scope)
    if in_scope is not None:
        allowed = in_scope if allowed is None else allowed & in_scope
    exclude_ids = list(exclude_ids)
    if exclude_ids and len(index.ids):
        present = np.isin(index.ids, np.asarray(exclude_ids, np.int64))
        allowed = ~present if allowed is None else allowed & ~present
    return Mask(allowed, sessions, scope if in_scope is not None else None)


def plan_query(
    query: str, embedder: Embedder, config: Config, proactive: bool, weights: dict[str, float] | None = None
) -> QueryPlan:
    """What ``query`` asks of the enabled signals (``Config.signals`` less those of weight 0 in ``weights``: a block
    ranked apart at weight 0 is not even embedded). Sub-questions only for a user's multi-part question, never a
    proactive recovery's query (a compaction's live tail + summary: its sentences are not questions asked together)."""
    enabled = {name for name in config.signals if (weights or {}).get(name, 1.0) != 0}
    plan = QueryPlan(query, query_terms(query)[: config.max_query_terms])
    plan.windows = timeframe.query_windows(query) if timeframe.TIME in enabled else []
    plan.apart = {name: dims for name, dims in signal_blocks(embedder).items() if name in enabled}  # e.g. semantic_e5
    plan.needs_vector = "semantic" in enabled or bool(plan.windows) or local.LOCAL in enabled or bool(plan.apart)
    if config.decompose and local.LOCAL in enabled and not proactive:
        plan.questions = decompose.parts(query)
    return plan


def query_signals(
    store: StoreProtocol,
    index: MemoryIndex,
    embedder: Embedder,
    config: Config,
    plan: QueryPlan,
    mask: Mask,
) -> tuple[dict[str, Ranking], np.ndarray | None, np.ndarray | None, dict[int, Entry]]:
    """The rankings computed from the query alone, each the top ``signal_top_n``: full text (BM25 in SQL), its
    RM3 expansion (prf.py), keyword (lookup hints), semantic (main vector), each block ranked apart, and the
    turns of a date the query names. Returns (rankings, the query's main vector, the sub-questions' vectors, the
    candidates read ahead: id -> entry as ``candidate_pool`` reads them, those found while the query's vector was
    still being embedded in the worker thread, read then rather than after it)."""
    n, enabled = config.signal_top_n, set(config.signals)
    found: dict[str, Ranking] = {}
    # a block no candidate uses is left empty (ours): an English query in an English session of a store that also
    # holds Chinese sessions loads no Chinese model; the ranking among the candidates is the same either way. A
    # block ranked apart whose signal is off for this query (weight 0) is not embedded either.
    apart_blocks, wanted = set(signal_blocks(embedder).values()), set(plan.apart.values())
    in_use: dict[tuple[int, int], bool] = {}

    def occupied(start: int, stop: int) -> bool:
        if (start, stop) in apart_blocks and (start, stop) not in wanted:
            return False
        if (start, stop) not in in_use:  # asked again for the prefetch key: the answer holds for this query
            in_use[start, stop] = index.block_occupied_among(start, stop, mask.allowed)
        return in_use[start, stop]

    if plan.needs_vector and hasattr(embedder, "prefetch"):  # embedded in a worker thread while the full text runs
        embedder.prefetch(plan.text, occupied)
    if "fulltext" in enabled:
        found["fulltext"] = mask.keep(signals.fulltext(store, index, plan.terms, mask.sessions, n, mask.scope))
    if prf.PRF in enabled and "fulltext" in found:
        found[prf.PRF] = prf.prf_ranking(
            store,
            index,
            plan.terms,
            found["fulltext"],
            mask.sessions,
            n,
            mask.scope,
            mask.allowed,
            config.prf_docs,
            config.prf_terms,
        )
    if "keyword" in enabled:
        found["keyword"] = signals.keyword(index, plan.terms, mask.allowed, n, config.keyword_score)
    first = getattr(embedder, "first_stage", None)
    if "semantic" in enabled and plan.apart and first is not None and (early := first(plan.text, occupied)) is not None:
        # the main part, ranked while the blocks apart are still being embedded (query_vectors.py)
        found["semantic"] = signals.semantic(index, main_part(early, signal_blocks(embedder)), mask.allowed, n)
    read: dict[int, Entry] = {}
    pending = getattr(embedder, "pending", None)
    if plan.needs_vector and pending is not None and pending(plan.text, occupied):  # the thread would wait: read
        read = read_candidates(store, index, pool_positions(found, mask))
    vector = embed_query(embedder, [plan.text], occupied)[0] if plan.needs_vector else None
    for name, (start, stop) in plan.apart.items():  # a block ranked as a semantic signal of its own
        if vector[start:stop].any():  # entries without that block (English ones) get no rank
            found[name] = signals.semantic(
                index,
                vector - main_part(vector, {name: (start, stop)}),
                apart_rows(index, embedder, config, name, mask.allowed),
                n,
                skip_blank=True,
            )
    vector = main_part(vector, signal_blocks(embedder)) if vector is not None else None
    if "semantic" in enabled and "semantic" not in found:
        found["semantic"] = signals.semantic(index, vector, mask.allowed, n)
    part_vectors = None
    if plan.questions:  # one batched call; the parts rank by the main vector only, so the blocks apart stay empty
        main = signal_blocks(embedder).values()
        part_vectors = embed_query(embedder, plan.questions, lambda a, b: (a, b) not in main and occupied(a, b))
    if plan.windows:
        found[timeframe.TIME] = timeframe.time_ranking(
            index, vector, plan.windows, mask.allowed, n, config.time_slack_days
        )
    ordered = {name: found[name] for name in SIGNAL_ORDER if name in found}  # one fusion order, whatever ran first
    return {**ordered, **found}, vector, part_vectors, read


def pool_positions(found: dict[str, Ranking], mask: Mask) -> np.ndarray:
    """Every index position some ranking in ``found`` holds, once, ascending, that ``mask`` allows."""
    pool = distinct(np.concatenate([p for p, _ in found.values()])) if found else np.empty(0, np.int64)
    if mask.allowed is not None:  # every signal is masked already; the pool (importance, explain) is checked once more
        pool = pool[mask.allowed[pool]]
    return pool


def read_candidates(
    store: StoreProtocol, index: MemoryIndex, positions: np.ndarray, read: dict[int, Entry] | None = None
) -> dict[int, Entry]:
    """The entries (summaries, no text or tags) at index ``positions`` (``pool_positions``), id -> entry; those
    already in ``read`` are not read again. The pool's read (``candidate_pool``)."""
    ids = index.ids[positions].tolist()
    read = read or {}
    missing = [i for i in ids if i not in read]
    fresh = store.entries(missing, text=False, tags=False) if missing else {}
    return {i: e for i in ids if (e := read.get(i) or fresh.get(i)) is not None}


def given_rankings(index: MemoryIndex, extra: dict[str, list[int]], mask: Mask) -> dict[str, Ranking]:
    """Rankings computed elsewhere (name -> entry ids, best first), masked like the others; score = 1 / rank."""
    out: dict[str, Ranking] = {}
    for name, ids in extra.items():
        ids = np.asarray(ids, np.int64)
        pos = index.positions(ids[np.isin(ids, index.ids)]) if len(ids) else np.empty(0, np.int64)
        pos = pos[mask.allowed[pos]] if mask.allowed is not None and len(pos) else pos
        out[name] = (pos, 1.0 / np.arange(1, len(pos) + 1, dtype=np.float32))
    return out


def context_signals(
    store: StoreProtocol,
    index: MemoryIndex,
    config: Config,
    found: dict[str, Ranking],
    vector: np.ndarray | None,
    part_vectors: np.ndarray | None,
    mask: Mask,
) -> dict[str, Ranking]:
    """The signals seeded by the others' best hits: neighbour (the turns next to them) and local (the turns near
    them, by cosine to the query; each sub-question ranks the window of a multi-part question)."""
    enabled = set(config.signals)
    out: dict[str, Ranking] = {}
    if not found:
        return out
    ranked = {k: v[0].tolist() for k, v in found.items()}
    if neighbours.NEIGHBOUR in enabled:
        seed = neighbours.seeds(ranked, config.rrf_k, config.signal_weights, config.neighbour_seeds)
        out[neighbours.NEIGHBOUR] = neighbours.neighbour_ranking(store, index, seed, mask.allowed)
        ranked[neighbours.NEIGHBOUR] = out[neighbours.NEIGHBOUR][0].tolist()
    if local.LOCAL in enabled:
        top = neighbours.seeds(ranked, config.rrf_k, config.signal_weights, config.local_seeds)
        by = vector if part_vectors is None else part_vectors
        out[local.LOCAL] = local.local_ranking(store, index, by, top, mask.allowed, config.local_turns)
    return out


def candidate_pool(
    store: StoreProtocol,
    index: MemoryIndex,
    config: Config,
    plan: QueryPlan,
    found: dict[str, Ranking],
    mask: Mask,
    live_text: str,
    proactive: bool,
    read: dict[int, Entry] | None = None,
) -> Pool:
    """Every position some ranking found, minus the entries still in the live context; with ``proactive``, minus
    the pruned entries the query does not name by one of their lookup hints. ``read``: entries read ahead
    (``query_signals``), not read again."""
    pool = pool_positions(found, mask)
    entries = read_candidates(store, index, pool, read)  # candidates carry their summary
    index.note_mutable(entries)  # their c, σ and access counts as stored now (another process may have changed them)
    excluded = still_live(store, list(entries), live_text) if live_text else set()
    if excluded:
        pool = np.asarray([p for p in pool if int(index.ids[p]) not in excluded], np.int64)
    prune = reinforce.pruned(index.confidence[pool], config.prune_below)
    dropped: set[int] = set()
    if proactive and prune.any():
        rows = [index.postings.rows(t) for t in plan.terms]
        named = np.isin(pool, np.concatenate(rows)) if rows else np.zeros(len(pool), bool)  # exact hint matches
        drop = prune & ~named
        dropped = {int(index.ids[p]) for p in pool[drop]}
        pool, prune = pool[~drop], prune[~drop]
    return Pool(pool, entries, excluded, dropped, prune)


def entry_rankings(
    index: MemoryIndex, found: dict[str, Ranking], pool: Pool
) -> tuple[dict[str, list[int]], dict[str, dict[int, float]]]:
    """Each ranking as entry ids (best first) and their scores, without the excluded and dropped entries."""
    rankings: dict[str, list[int]] = {}
    scores: dict[str, dict[int, float]] = {}
    for name, (positions, values) in found.items():
        ids = [int(index.ids[p]) for p in positions]
        kept = [
            (i, float(v))
            for i, v in zip(ids, values)
            if i not in pool.excluded and i not in pool.dropped and i in pool.entries
        ]
        rankings[name] = [i for i, _ in kept]
        scores[name] = dict(kept)
    return rankings, scores


def candidate_list(
    fused: dict[int, float],
    rankings: dict[str, list[int]],
    scores: dict[str, dict[int, float]],
    pool: Pool,
    config: Config,
) -> list[Candidate]:
    """The candidates by RRF score (ties by id), each with its rank and score per signal; then the excluded ones."""
    candidates = []
    rank_of = {name: _first_ranks(ranking) for name, ranking in rankings.items()}
    for entry_id, score in sorted(fused.items(), key=lambda kv: (-kv[1], kv[0])):
        cand = Candidate(entry=pool.entries[entry_id], rrf=score)
        for name, ranks in rank_of.items():
            if entry_id in ranks:
                cand.ranks[name] = ranks[entry_id]
                cand.scores[name] = scores[name][entry_id]
        candidates.append(cand)
    for entry_id in sorted(pool.excluded):
        candidates.append(
            Candidate(entry=pool.entries[entry_id], verdict="excluded:live", reason="still in the live context")
        )
    for entry_id in sorted(pool.dropped):
        candidates.append(
            Candidate(
                entry=pool.entries[entry_id],
                verdict="excluded:pruned",
                reason=f"confidence {pool.entries[entry_id].confidence:.2f} < {config.prune_below} (pruned)",
            )
        )
    return candidates


def still_live(store: StoreProtocol, ids: list[int], live: str, head_chars: int = LIVE_HEAD_CHARS) -> set[int]:
    """The entries among ``ids`` whose whitespace-collapsed full text lies inside ``live`` (the live context,
    already collapsed: Lantern.live_text). Only the first ``head_chars`` characters of each text are read first:
    an entry whose collapsed head is not inside ``live`` cannot be (the collapsed head is a prefix of the collapsed
    text); the full text is read for the rest only."""
    heads = store.text_heads(ids, head_chars)
    maybe = [i for i, head in heads.items() if normalize_space(head) in live]
    if not maybe:
        return set()
    return {i for i, e in store.entries(maybe, tags=False).items() if normalize_space(e.text) in live}


def _first_ranks(ranking: list[int]) -> dict[int, int]:
    """Entry id -> its 1-based rank in ``ranking`` (the first place when it appears twice)."""
    ranks: dict[int, int] = {}
    for r, entry_id in enumerate(ranking, start=1):
        ranks.setdefault(entry_id, r)
    return ranks
