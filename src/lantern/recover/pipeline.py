"""The read path as one straight pipeline (DESIGN §3): query -> four signals -> RRF -> MMR -> pack.

    terms, vector  = query_terms(query), embed(query)
    rankings       = semantic, fulltext, keyword (each top-N), importance (over their pool)
                     + ours: time (the date the query names), prf (RM3-expanded full text), neighbour (the turns
                     next to the best hits of the others), local (the turns near the best hits, by cosine), speaker
                     (the candidates of a speaker the query names); each on when named in config.signals
                     (a multi-part question, recover/decompose.py: each part's own vector ranks the local window,
                     the local ranking fused with one vote per part)
    live entries   = dropped from every ranking (still in the context: never re-injected)
    fused          = rrf(rankings, k=60)               (or score_sum: ablation)
    order          = mmr(fused, cosine, λ=0.85)         (or fused order: ablation; the paper's λ is 0.7)
    block          = pack(order, budget)                whole entries, excerpts, cuts

Pruned entries (c < 0.15, reinforce.py) get no importance rank; a proactive recovery (at compaction) leaves them
out unless the query names one of their lookup hints.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator
from itertools import islice

import numpy as np

from lantern import reinforce
from lantern.text.tags import query_terms
from lantern.config import Config
from lantern.embed import Embedder, embed_query, main_part, signal_blocks
from lantern.model import Candidate, Entry, Hit, RecoveredEntry, Recovery
from lantern.scope import Scope
from lantern.store.index import MemoryIndex, cosines
from lantern.store.sqlite import Store
from lantern.recover import decompose, local, neighbours, prf, signals, speaker, timeframe
from lantern.recover.facts_note import pack_with_notes
from lantern.recover.fusion import mmr, rrf, score_sum
from lantern.recover.pack import pack

SIGNAL_ORDER = ("semantic", timeframe.TIME, "fulltext", prf.PRF, "keyword")  # the order rankings are fused in
LIVE_HEAD_CHARS = 200  # characters of a candidate's text read first to test it against the live context (ours)
DUPLICATE_COSINE = 0.98  # a candidate this close to one already packed adds nothing (ours), unless it states a new number
_NUMBER = re.compile(r"\d+")


def normalize_space(text: str) -> str:
    """Whitespace runs collapsed to one space: how archived texts are compared with the live context."""
    return " ".join(text.split())


def rank(
    store: Store,
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
) -> tuple[list[Candidate], list[str], np.ndarray]:
    """Every candidate for ``query``, fused and sorted by RRF score (best first), with its per-signal ranks and
    scores. Entries whose full text is still inside ``live_text`` get the verdict ``excluded:live`` and no rank.
    Pruned entries (reinforce.py) get no importance rank; with ``proactive`` they get the verdict
    ``excluded:pruned`` and no rank unless the query names one of their lookup hints. Only entries inside
    ``scope`` (default: the default user; lantern/scope.py) are ever considered: every signal gets the scope mask,
    full text also the scope in SQL. ``extra_rankings``: further signals computed elsewhere (name -> entry ids,
    best first; e.g. a second embedder's semantic ranking, used by the evaluation), fused like the others (weight
    ``signal_weights[name]``, default 1), masked by the same scope.
    Returns (candidates, query terms, positions of the ranked candidates aligned with the ranked part)."""
    index.refresh()
    scope = scope or Scope()
    terms = query_terms(query)[: config.max_query_terms]
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
    n = config.signal_top_n
    enabled = set(config.signals)
    found: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    windows = timeframe.query_windows(query) if timeframe.TIME in enabled else []
    apart = {name: dims for name, dims in signal_blocks(embedder).items() if name in enabled}  # e.g. semantic_e5
    needs_vector = "semantic" in enabled or bool(windows) or local.LOCAL in enabled or bool(apart)
    if needs_vector and hasattr(embedder, "prefetch"):  # embedded in a worker thread while the full text runs
        embedder.prefetch(query)
    if "fulltext" in enabled:
        found["fulltext"] = signals.fulltext(
            store, index, terms, sessions, n, scope if in_scope is not None else None
        )
        if allowed is not None and len(found["fulltext"][0]):
            keep = allowed[found["fulltext"][0]]
            found["fulltext"] = (found["fulltext"][0][keep], found["fulltext"][1][keep])
    if prf.PRF in enabled and "fulltext" in found:  # RM3 expansion of the full-text query (recover/prf.py)
        found[prf.PRF] = prf.prf_ranking(store, index, terms, found["fulltext"], sessions, n,
                                         scope if in_scope is not None else None, allowed, config.prf_docs, config.prf_terms)
    if "keyword" in enabled:
        found["keyword"] = signals.keyword(index, terms, allowed, n, config.keyword_score)
    vector = embed_query(embedder, [query], index.block_occupied)[0] if needs_vector else None
    for name, (start, stop) in apart.items():  # a block ranked as a semantic signal of its own (embed.signal_blocks)
        if vector[start:stop].any():
            found[name] = signals.semantic(index, vector - main_part(vector, {name: (start, stop)}), allowed, n,
                                           skip_blank=True)  # entries without that block (English ones) get no rank
    vector = main_part(vector, signal_blocks(embedder)) if vector is not None else None
    if "semantic" in enabled:
        found["semantic"] = signals.semantic(index, vector, allowed, n)
    # a user's multi-part question, never a proactive recovery's query (a compaction's live tail + summary: its
    # sentences are not questions asked together, and splitting them cost the proxy ~8 ms per compaction)
    questions = decompose.parts(query) if config.decompose and local.LOCAL in enabled and not proactive else []
    if questions:  # one batched call; the parts rank by the main vector only, so the blocks ranked apart stay empty
        main = signal_blocks(embedder).values()
        part_vectors = embed_query(embedder, questions, lambda a, b: (a, b) not in main and index.block_occupied(a, b))
    else:
        part_vectors = None
    if windows:  # the query names a date: the turns of that date (recover/timeframe.py)
        found[timeframe.TIME] = timeframe.time_ranking(index, vector, windows, allowed, n, config.time_slack_days)
    found = {**{name: found[name] for name in SIGNAL_ORDER if name in found}, **found}  # one fusion order, whatever ran first
    for name, ids in (extra_rankings or {}).items():
        ids = np.asarray(ids, np.int64)
        pos = index.positions(ids[np.isin(ids, index.ids)]) if len(ids) else np.empty(0, np.int64)
        pos = pos[allowed[pos]] if allowed is not None and len(pos) else pos
        found[name] = (pos, 1.0 / np.arange(1, len(pos) + 1, dtype=np.float32))  # score: reciprocal rank
    if neighbours.NEIGHBOUR in enabled and found:  # needs the other query signals' rankings: computed last
        seed = neighbours.seeds({k: v[0].tolist() for k, v in found.items()}, config.rrf_k, config.signal_weights, config.neighbour_seeds)
        found[neighbours.NEIGHBOUR] = neighbours.neighbour_ranking(store, index, seed, allowed)
    if local.LOCAL in enabled and found:  # the turns near the best hits, by cosine to the query (recover/local.py)
        top = neighbours.seeds({k: v[0].tolist() for k, v in found.items()}, config.rrf_k, config.signal_weights, config.local_seeds)
        by = vector if part_vectors is None else part_vectors  # a multi-part question: each part ranks the window
        found[local.LOCAL] = local.local_ranking(store, index, by, top, allowed, config.local_turns)
    pool = np.unique(np.concatenate([p for p, _ in found.values()])) if found else np.empty(0, np.int64)
    if allowed is not None:  # every signal is masked already; the pool (importance, explain) is checked once more
        pool = pool[allowed[pool]]
    live = live_text  # already whitespace-normalized (Lantern.live_text)
    entries = store.entries(index.ids[pool].tolist(), text=False, tags=False)  # candidates carry their summary
    excluded = still_live(store, list(entries), live) if live else set()
    if excluded:
        pool = np.asarray([p for p in pool if int(index.ids[p]) not in excluded], np.int64)
    prune = reinforce.pruned(index.confidence[pool], config.prune_below)
    dropped: set[int] = set()
    if proactive and prune.any():
        named = {p for t in terms for p in index.postings.get(t, ())}  # exact lookup-hint matches
        drop = np.asarray([bool(pr) and int(p) not in named for p, pr in zip(pool, prune)], bool)
        dropped = {int(index.ids[p]) for p in pool[drop]}
        pool, prune = pool[~drop], prune[~drop]
    if "importance" in enabled:
        found["importance"] = signals.importance(index, pool[~prune], now or time.time(), config.half_life_days)

    rankings: dict[str, list[int]] = {}
    scores: dict[str, dict[int, float]] = {}
    for name, (positions, values) in found.items():
        ids = [int(index.ids[p]) for p in positions]
        kept = [(i, float(v)) for i, v in zip(ids, values) if i not in excluded and i not in dropped and i in entries]
        rankings[name] = [i for i, _ in kept]
        scores[name] = dict(kept)
    if speaker.SPEAKER in enabled:  # the candidates of a speaker the query names (recover/speaker.py)
        rankings[speaker.SPEAKER] = speaker.speaker_ranking(query, rankings, entries, config.rrf_k, config.signal_weights)
        scores[speaker.SPEAKER] = {i: 1.0 / r for r, i in enumerate(rankings[speaker.SPEAKER], 1)}
    weights = config.signal_weights
    if part_vectors is not None and local.LOCAL in rankings:  # the per-part local orders, one vote per part (ours)
        weights = {**weights, local.LOCAL: weights.get(local.LOCAL, 1.0) * len(part_vectors)}
    fused = rrf(rankings, config.rrf_k, weights) if config.fusion == "rrf" else score_sum(scores)

    candidates = []
    rank_of = {name: _first_ranks(ranking) for name, ranking in rankings.items()}
    for entry_id, score in sorted(fused.items(), key=lambda kv: (-kv[1], kv[0])):
        cand = Candidate(entry=entries[entry_id], rrf=score)
        for name, ranks in rank_of.items():
            if entry_id in ranks:
                cand.ranks[name] = ranks[entry_id]
                cand.scores[name] = scores[name][entry_id]
        candidates.append(cand)
    for entry_id in sorted(excluded):
        candidates.append(Candidate(entry=entries[entry_id], verdict="excluded:live", reason="still in the live context"))
    for entry_id in sorted(dropped):
        candidates.append(Candidate(entry=entries[entry_id], verdict="excluded:pruned",
                                    reason=f"confidence {entries[entry_id].confidence:.2f} < {config.prune_below} (pruned)"))
    ranked_positions = index.positions([c.entry.id for c in candidates if not c.verdict.startswith("excluded:")])
    return candidates, terms, ranked_positions


def still_live(store: Store, ids: list[int], live: str, head_chars: int = LIVE_HEAD_CHARS) -> set[int]:
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


def recover(
    store: Store,
    index: MemoryIndex,
    embedder: Embedder,
    config: Config,
    query: str,
    *,
    budget: int,
    session: str | None = None,
    exclude_ids: Iterable[int] = (),
    live_text: str = "",
    now: float | None = None,
    notes: Callable[[list[int]], list] | None = None,
    proactive: bool = False,
    scope: Scope | None = None,
    extra_rankings: dict[str, list[int]] | None = None,
    complete: bool = True,
) -> Recovery:
    """Rank, diversify with MMR, pack into ``budget`` characters. Returns a Recovery whose ``candidates`` carry
    the verdict of every entry considered (``explain``). ``now``: the time recency is measured from (default the
    clock; ``as_of``). ``notes``: packed entry ids -> superseded-fact notes, inserted in the block within the budget
    (recover/facts_note.py). ``extra_rankings``: as in ``rank``. MMR and the duplicate check run lazily, as far as
    packing reads; ``complete`` (explain, evaluation) runs them over every candidate afterwards, so each has its MMR
    order and duplicate verdict; without it, candidates packing never examined (read ahead in a batch or never
    reached) are ``cut:budget`` with no MMR order.
    The packed block is the same either way."""
    candidates, terms, positions = rank(
        store, index, embedder, config, query, session=session, exclude_ids=exclude_ids, live_text=live_text, now=now,
        proactive=proactive, scope=scope, extra_rankings=extra_rankings,
    )
    ranked = [c for c in candidates if not c.verdict.startswith("excluded:")]
    if not ranked:
        return Recovery(query=query, text="", entries=[], chars=0, budget=budget, candidates=candidates)
    vectors = index.vectors(positions, drop=signal_blocks(embedder).values())  # MMR, duplicates: the main vector
    rows: dict[int, np.ndarray] = {}

    def similarity(i: int) -> np.ndarray:  # cosines of candidate i to every candidate, computed when first needed
        if i not in rows:
            rows[i] = cosines(vectors, vectors[i])
        return rows[i]

    relevance = np.asarray([c.rrf for c in ranked])
    order = mmr(relevance, similarity, config.mmr_lambda) if config.use_mmr else iter(range(len(ranked)))
    kept = _Replay(_distinct(ranked, order, similarity))  # lazy: packing pulls only as many as fit the budget
    sessions = {c.entry.session for c in ranked}
    one_session = sessions.pop() if len(sessions) == 1 else None

    def pack_at(room: int):
        return pack(_full_texts(store, (ranked[i].entry.id for i in kept)), room, terms, config.min_excerpt_chars,
                    config.entry_share, session=one_session, group=config.pack_group_sessions)

    result, fact_notes = pack_with_notes(pack_at, budget, notes) if notes else (pack_at(budget), [])
    by_id = {c.entry.id: c for c in ranked}
    for p in result.packed:
        by_id[p.entry.id].entry = p.entry
    if complete:  # every candidate gets its MMR order and duplicate check, as if packing had read them all
        for _ in kept:
            pass
    else:  # entries read ahead in a batch (_full_texts) but never examined by packing were not reached
        reached = max((by_id[i].mmr_order or 0 for i in result.verdicts), default=0)
        for c in ranked:
            if c.mmr_order is not None and c.mmr_order > reached:
                c.mmr_order, c.verdict, c.reason = None, "", ""
    for c in ranked:
        if not c.verdict and c.entry.id not in result.verdicts:
            c.verdict, c.reason = "cut:budget", "budget exhausted" if c.mmr_order else "budget exhausted before MMR reached it"
    for entry_id, (verdict, reason) in result.verdicts.items():
        by_id[entry_id].verdict, by_id[entry_id].reason = verdict, reason
    for p in result.packed:
        by_id[p.entry.id].chars = len(p.text)
    recovered = [
        RecoveredEntry(
            id=p.entry.id,
            session=p.entry.session,
            turn=p.entry.turn,
            score=by_id[p.entry.id].rrf,
            text=p.text,
            excerpt=p.excerpt,
            time=p.entry.time,
        )
        for p in result.packed
    ]
    return Recovery(
        query=query, text=result.text, entries=recovered, chars=len(result.text), budget=budget, candidates=candidates,
        facts=fact_notes,
    )


def _full_texts(store: Store, ids: Iterable[int], batch: int = 16) -> Iterator[Entry]:
    """Entries with their full text, in ``ids`` order, read in small batches as packing asks for them."""
    pending = iter(ids)
    while chunk := list(islice(pending, batch)):
        found = store.entries(chunk, tags=False)
        yield from (found[i] for i in chunk if i in found)


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
            ranked[i].verdict, ranked[i].reason = "cut:duplicate", f"cosine ≥ {DUPLICATE_COSINE} to entry {ranked[k].entry.id}"
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


def search(
    store: Store, index: MemoryIndex, embedder: Embedder, config: Config, query: str, *, k: int = 10,
    session: str | None = None, scope: Scope | None = None,
) -> list[Hit]:
    """The fused ranking itself, without MMR or packing: the top ``k`` entries by RRF score, within ``scope``."""
    candidates, _, _ = rank(store, index, embedder, config, query, session=session, scope=scope)
    full = store.entries([c.entry.id for c in candidates[:k]])
    return [Hit(entry=full[c.entry.id], score=c.rrf, ranks=dict(c.ranks)) for c in candidates[:k] if c.entry.id in full]

