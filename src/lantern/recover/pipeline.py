"""The read path as one pipeline (docs/architecture.md §3). Zero LLM calls; each stage is its own module.

    candidates = rank(query)            recover/rank.py       masks, signals (semantic, BM25, keyword, importance
                                                              and ours), RRF fusion (Cormack et al. 2009; paper eq. 3)
    order      = diversify(candidates)  recover/diversify.py  MMR, λ = 0.85 (the paper's 0.7), near-duplicates cut
    block      = pack(order, budget)    recover/pack.py       whole entries, excerpts, cuts; within the budget
                                        recover/facts_note.py values changed since, noted in the block
    verdicts   = why each candidate was packed or cut (``explain``)

Entries still in the live context are never candidates. Pruned entries (c < 0.15, reinforce.py) get no importance
rank; a proactive recovery (at compaction) leaves them out unless the query names one of their lookup hints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice

from lantern import lazy_re
from lantern.config import Config
from lantern.embed import Embedder, signal_blocks
from lantern.llm import LLMClient
from lantern.model import Candidate, Entry, Hit, RecoveredEntry, Recovery
from lantern.recover import empty, relevance
from lantern.recover.diversify import diversify
from lantern.recover.facts_note import pack_with_notes
from lantern.recover.pack import PackResult, pack
from lantern.recover.rank import rank
from lantern.recover.rerank import RerankResult, rerank
from lantern.recover.signals import FTS_SAMPLE_ROWS, quote
from lantern.scope import Scope
from lantern.store.index import MemoryIndex
from lantern.store.protocol import StoreProtocol

__all__ = ["packer", "recover", "search", "set_verdicts"]

_WORD = lazy_re.compile(r"\w")


def recover(
    store: StoreProtocol,
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
    llm: LLMClient | None = None,
    top_k: int | None = None,
    min_score: float = 0.0,
) -> Recovery:
    """Rank, diversify with MMR, pack into ``budget`` characters. Returns a Recovery whose ``candidates`` carry
    the verdict of every entry considered (``explain``). ``now``: the time recency is measured from (default the
    clock; ``as_of``). ``notes``: packed entry ids -> superseded-fact notes, inserted in the block within the budget
    (recover/facts_note.py). ``extra_rankings``: as in ``rank``. MMR and the duplicate check run lazily, as far as
    packing reads; ``complete`` (explain, evaluation) runs them over every candidate afterwards, so each has its MMR
    order and duplicate verdict; without it, candidates packing never examined (read ahead in a batch or never
    reached) are ``cut:budget`` with no MMR order.
    The packed block is the same either way. ``llm``: rerank the fused top ``Config.rerank_top_n`` with one call
    (recover/rerank.py) and pack in its order; on any failure of the LLM the fused order is kept and
    ``Recovery.rerank.warning`` says why. ``top_k``: at most that many entries packed (None: as many as fit).
    ``min_score``: the injection decision's floor (recover/relevance.py ``decide``, with ``Config.clear_score`` and
    ``Config.short_budget``; 0: off, the full budget): below it nothing is injected and every candidate is
    ``cut:floor`` (no rerank call is made); below ``clear_score`` the block takes at most ``short_budget``
    characters. ``Recovery.reason`` says why a block is empty or shortened."""
    candidates, terms, positions, evidence = rank(
        store,
        index,
        embedder,
        config,
        query,
        session=session,
        exclude_ids=exclude_ids,
        live_text=live_text,
        now=now,
        proactive=proactive,
        scope=scope,
        extra_rankings=extra_rankings,
    )
    ranked = [c for c in candidates if not c.verdict.startswith("excluded:")]
    decision = relevance.decide(
        evidence,
        budget,
        min_score=min_score,
        clear_score=config.clear_score,
        short_budget=config.short_budget,
        candidates=len(ranked),
    )
    if decision.tier == "none":
        for c in ranked:  # nothing matches well enough: inject nothing (docs/architecture.md §3.6)
            c.verdict, c.reason = "cut:floor", decision.detail
        return Recovery(
            query=query,
            text="",
            entries=[],
            chars=0,
            budget=budget,
            candidates=candidates,
            relevance=evidence,
            min_score=min_score,
            reason=decision.reason,
            detail=decision.detail,
        )
    reranked = rerank_stage(store, llm, query, ranked, terms, config) if llm is not None else None
    explicit = None
    if reranked is not None and reranked.reranked:
        at = {c.entry.id: i for i, c in enumerate(ranked)}
        explicit = [at[i] for i in reranked.order] + [
            i for i in range(len(ranked)) if ranked[i].entry.id not in set(reranked.order)
        ]
        for pos, entry_id in enumerate(reranked.named, 1):
            ranked[at[entry_id]].rerank = pos
    order = diversify(ranked, index.vectors(positions, drop=signal_blocks(embedder).values()), config, explicit)
    pack_at = packer(store, ranked, order, terms, config, top_k)
    result, fact_notes = pack_with_notes(pack_at, decision.budget, notes) if notes else (pack_at(decision.budget), [])
    least = None
    if not result.text:  # the budget held no entry: the least one that does, packing the same order again

        def packs(b: int) -> bool:
            room = relevance.decide(
                evidence,
                b,
                min_score=min_score,
                clear_score=config.clear_score,
                short_budget=config.short_budget,
                candidates=len(ranked),
            )
            return room.tier != "none" and bool(pack_at(room.budget).text)

        least = empty.least_budget(packs, budget)
    set_verdicts(ranked, order, result, complete)
    by_id = {c.entry.id: c for c in ranked}
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
        query=query,
        text=result.text,
        entries=recovered,
        chars=len(result.text),
        budget=budget,
        candidates=candidates,
        facts=fact_notes,
        rerank=reranked,
        relevance=evidence,
        min_score=min_score,
        reason=decision.reason if result.text else relevance.BUDGET,
        detail=decision.detail if result.text else f"no candidate fits in {decision.budget} characters",
        least_budget=least,
    )


def rerank_stage(
    store: StoreProtocol, llm: LLMClient, query: str, ranked: list[Candidate], terms: list[str], config: Config
) -> RerankResult:
    """The rerank stage over the fused candidates, their full texts read for the top ``Config.rerank_top_n``."""
    top = [c.entry.id for c in ranked[: config.rerank_top_n]]
    texts = {i: e.text for i, e in store.entries(top, tags=False).items()}
    return rerank(
        llm,
        query,
        ranked,
        texts,
        terms,
        top_n=config.rerank_top_n,
        excerpt_chars=config.rerank_excerpt_chars,
        prompt_chars=config.rerank_prompt_chars,
    )


def packer(
    store: StoreProtocol,
    ranked: list[Candidate],
    order: Iterable[int],
    terms: list[str],
    config: Config,
    top_k: int | None = None,
) -> Callable[[int], PackResult]:
    """``pack_at(room)``: the candidates in ``order`` (diversify; re-iterable) packed into ``room`` characters, their
    full texts read in small batches as packing asks for them, and kept for the next call."""
    sessions = {c.entry.session for c in ranked}
    one_session = sessions.pop() if len(sessions) == 1 else None
    # each term's share of the store's rows, for excerpts around the rarest terms (cached: the full-text signal
    # asked for the same terms)
    fractions = store.term_fractions([quote(t) for t in terms if _WORD.search(t)], FTS_SAMPLE_ROWS)
    read: dict[int, Entry] = {}  # full texts read by one packing, kept for the next (pack_with_notes packs again)

    def pack_at(room: int) -> PackResult:
        return pack(
            _full_texts(store, (ranked[i].entry.id for i in order), read),
            room,
            terms,
            config.min_excerpt_chars,
            config.entry_share,
            session=one_session,
            group=config.pack_group_sessions,
            max_entries=top_k,
            fractions=fractions,
            lookahead=config.pack_lookahead,
        )

    return pack_at


def set_verdicts(ranked: list[Candidate], order: Iterable[int], result: PackResult, complete: bool) -> None:
    """Each candidate's verdict (packed, excerpt, cut and why) and packed characters, for ``explain``. With
    ``complete`` every candidate is run through MMR and the duplicate check first, as if packing had read them all."""
    by_id = {c.entry.id: c for c in ranked}
    for p in result.packed:
        by_id[p.entry.id].entry = p.entry
    if complete:
        for _ in order:
            pass
    else:  # entries read ahead in a batch (_full_texts) but never examined by packing were not reached
        reached = max((by_id[i].mmr_order or 0 for i in result.verdicts), default=0)
        for c in ranked:
            if c.mmr_order is not None and c.mmr_order > reached:
                c.mmr_order, c.verdict, c.reason = None, "", ""
    for c in ranked:
        if not c.verdict and c.entry.id not in result.verdicts:
            c.verdict, c.reason = (
                "cut:budget",
                "budget exhausted" if c.mmr_order else "budget exhausted before MMR reached it",
            )
    for entry_id, (verdict, reason) in result.verdicts.items():
        by_id[entry_id].verdict, by_id[entry_id].reason = verdict, reason
    for p in result.packed:
        by_id[p.entry.id].chars = len(p.text)


def _full_texts(store: StoreProtocol, ids: Iterable[int], read: dict[int, Entry], batch: int = 16) -> Iterator[Entry]:
    """Entries with their full text, in ``ids`` order, read in small batches as packing asks for them; those in
    ``read`` (id -> entry) are not read again, and those read are added to it."""
    pending = iter(ids)
    while chunk := list(islice(pending, batch)):
        missing = [i for i in chunk if i not in read]
        if missing:
            read.update(store.entries(missing, tags=False))
        yield from (read[i] for i in chunk if i in read)


def search(
    store: StoreProtocol,
    index: MemoryIndex,
    embedder: Embedder,
    config: Config,
    query: str,
    *,
    k: int = 10,
    session: str | None = None,
    scope: Scope | None = None,
    min_score: float = 0.0,
) -> list[Hit]:
    """The fused ranking itself, without MMR or packing: the top ``k`` entries by RRF score, within ``scope``;
    none when the best candidates' ``Relevance.score`` is below ``min_score`` (recover/relevance.py)."""
    candidates, _, _, evidence = rank(store, index, embedder, config, query, session=session, scope=scope)
    if min_score > 0 and evidence.score < min_score:
        return []
    full = store.entries([c.entry.id for c in candidates[:k]])
    return [Hit(entry=full[c.entry.id], score=c.rrf, ranks=dict(c.ranks)) for c in candidates[:k] if c.entry.id in full]
