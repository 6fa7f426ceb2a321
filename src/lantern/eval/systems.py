"""The systems compared (docs/architecture.md §6): Lantern, its ablations, and simple baselines.

Every system sees the same candidates (the history's archived turns minus the kept live window), gets the same
character budget, and is packed by the same ``pack`` (recover/pack.py), so only the ordering differs.

- ``lantern``: the default pipeline (``Config.signals``: the paper's four + prf, time, neighbour, local, speaker,
  semantic_e5; weighted RRF, MMR, pack).
- Ablations and variants, as Config variants: ``paper-rrf`` (every signal weighted 1), ``-<signal>`` for each
  signal of ``Config.signals`` (that signal removed), ``no-mmr`` (fused order packed as is), ``sum-fusion``
  (score sum instead of RRF).
- Baselines on the same store: ``bm25`` (full-text signal only, no MMR), ``dense`` (semantic and semantic_e5 only,
  no MMR); and outside the pipeline: ``recency`` (newest turns first: a bigger live window), ``grep`` (turns containing
  query terms as substrings, most distinct terms first), ``keyword-overlap`` (top-k by count of query words shared,
  the retrieval of the layered-memory write-ups), ``random`` (seeded by the query).
- ``lantern+reinforce`` and ``lantern+reinforce+answers``: ``recover`` with reinforcement over each history's
  question stream, in order, on a copy of its store (eval/reinforced.py).
"""

from __future__ import annotations

import hashlib
import random
import re
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from lantern import lazy_re
from lantern.config import Config
from lantern.eval.outcome import Outcome, Pool, System, outcome_of
from lantern.model import Entry
from lantern.recover.pack import pack
from lantern.text.cjk import cjk_bigrams
from lantern.text.tags import STOPWORDS, query_terms


def all_systems(base: Config | None = None) -> list[System]:
    """Every system, Lantern first. Pipeline systems are ``base`` (default ``Config()``) variants."""
    base = base or Config()
    out = [System("lantern", "lantern", base, "four signals + prf, time, neighbour, local, speaker; weighted RRF; MMR")]
    paper = {name: 1.0 for name in base.signal_weights}
    if base.signal_weights != paper:
        out.append(
            System(
                "paper-rrf",
                "lantern",
                replace(base, signal_weights=paper),
                "every signal weighted 1 (plain RRF, paper eq. 3), MMR",
            )
        )
    for s in base.signals:
        out.append(
            System(
                f"-{s}",
                "lantern",
                replace(base, signals=tuple(x for x in base.signals if x != s)),
                f"without the {s} signal",
            )
        )
    out += [
        System(
            "lantern+reinforce",
            "reinforce",
            replace(base, reinforce=True),
            "recover with reinforcement (c), questions in order",
        ),
        System(
            "lantern+reinforce+answers",
            "reinforce+answers",
            replace(base, reinforce=True),
            "as lantern+reinforce, the reference answer judged as the next assistant message (σ)",
        ),
        System("no-mmr", "lantern", replace(base, use_mmr=False), "fused order, no MMR"),
        System("sum-fusion", "lantern", replace(base, fusion="sum"), "score sum instead of RRF"),
        System("bm25", "lantern", replace(base, signals=("fulltext",), use_mmr=False), "FTS5 BM25 only"),
        System(
            "dense",
            "lantern",
            replace(base, signals=("semantic", "semantic_e5"), use_mmr=False),
            "embedding cosine only (with e5, both rankings fused by RRF)",
        ),
        System("recency", "recency", base, "newest archived turns first"),
        System("grep", "grep", base, "substring match of query terms"),
        System("keyword-overlap", "overlap", base, "top-k by query-word overlap"),
        System("random", "random", base, "random order (seeded by the query)"),
    ]
    return out


def select(names: Sequence[str] | None, base: Config | None = None) -> list[System]:
    """The systems named (all when None), in the canonical order; unknown names raise ValueError."""
    systems = all_systems(base)
    if not names:
        return systems
    known = {s.name for s in systems}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown system(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return [s for s in systems if s.name in names]


def for_embedder(systems: Sequence[System], embedder: Any) -> list[System]:
    """``systems`` without the ablations of block signals (``embed.signal_blocks``: ``semantic_e5``) that
    ``embedder`` does not have: there the ablation would rank exactly as Lantern does."""
    from lantern.embed import RoutedE5Embedder, signal_blocks

    missing = set(RoutedE5Embedder.signal_blocks) - set(signal_blocks(embedder))
    return [s for s in systems if not (s.name.startswith("-") and s.name[1:] in missing)]


class MemoEmbedder:
    """Wraps an embedder and memoizes single-text calls (the query), so every system embeds a question once."""

    def __init__(self, inner):
        self.inner, self.id, self.dim = inner, inner.id, inner.dim
        self.signal_blocks = getattr(inner, "signal_blocks", None) or {}  # embed.signal_blocks
        self.blocks = getattr(inner, "blocks", None)  # the models' dims: how the store lays out its vectors
        self._cache: dict[str, np.ndarray] = {}

    def embed(self, texts):
        texts = list(texts)
        if len(texts) != 1:
            return self.inner.embed(texts)
        if texts[0] not in self._cache:
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[texts[0]] = self.inner.embed(texts)
        return self._cache[texts[0]]

    def embed_deferred(self, texts):
        """The inner embedder's deferred block (embed.embed_deferred); not memoized (each entry is filled once)."""
        from lantern.embed import embed_deferred

        return embed_deferred(self.inner, texts)

    def embed_query(self, texts, occupied=None):
        """The inner embedder's query vectors (embed.embed_query), memoized per (text, occupied blocks), or per
        batch of texts."""
        from lantern.embed import embed_query, query_key

        texts = list(texts)
        if not texts:
            return embed_query(self.inner, texts, occupied)
        # one text: the question; several: the parts of a split question (recover/decompose.py), one batched call,
        # memoized as that batch (every system asks the same parts)
        key = (
            ("query", *query_key(self.inner, texts[0], occupied))
            if len(texts) == 1
            else ("parts", *(query_key(self.inner, t, occupied) for t in texts))
        )
        if key not in self._cache:
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[key] = embed_query(self.inner, texts, occupied)
        return self._cache[key]


_WORD = lazy_re.compile(r"\w+", re.UNICODE)


_CJK = lazy_re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def _words(text: str) -> set[str]:
    """Lowercased words of >= 3 characters that are not stopwords, and the CJK bigrams of CJK runs."""
    return {
        w for w in _WORD.findall(cjk_bigrams(text.lower())) if (len(w) >= 3 and w not in STOPWORDS) or _CJK.search(w)
    }


def baseline_order(kind: str, query: str, entries: list[Entry]) -> list[Entry]:
    """The baselines' orderings of ``entries`` (conversation order, oldest first) for ``query``."""
    if kind == "recency":
        return entries[::-1]
    if kind == "grep":
        terms = [t.lower() for t in query_terms(query)]
        scored = [(sum(1 for t in terms if t in e.text.lower()), i, e) for i, e in enumerate(entries)]
        return [e for s, i, e in sorted(scored, key=lambda x: (-x[0], -x[1])) if s > 0]
    if kind == "overlap":
        q = _words(query)
        scored = [(len(q & _words(e.text)), i, e) for i, e in enumerate(entries)]
        return [e for s, i, e in sorted(scored, key=lambda x: (-x[0], -x[1])) if s > 0]
    if kind == "random":
        seed = int.from_bytes(hashlib.sha256(query.encode("utf-8", "surrogatepass")).digest()[:8], "big")
        shuffled = list(entries)
        random.Random(seed).shuffle(shuffled)
        return shuffled
    raise ValueError(f"unknown baseline kind {kind!r}")


SECOND_SEMANTIC = "second_semantic"


def dual_system(second_id: str, base: Config | None = None) -> System:
    """Lantern's signals (``base``, default ``Config()``) plus the semantic ranking of a second embedder
    (``second_id``) as one more RRF signal (weight 1): the "both embedders" setup, measured by fusing two
    separately built stores in the evaluation."""
    return System(
        f"lantern+{second_id}", "dual", base or Config(), f"four signals + {second_id} semantic ranking (RRF)"
    )


def second_semantic(pool: Pool, query: str, config: Config) -> list[int]:
    """The second store's semantic ranking (entry ids, best first; live window excluded); for an embedder with
    blocks ranked apart (``embed.signal_blocks``, e.g. ``routed``'s e5 block) the RRF of its semantic rankings, as
    the ``dense`` system fuses them (so the e5 block is not left unused)."""
    from lantern.embed import signal_blocks

    second = pool.second
    second.config = replace(config, signals=("semantic", *signal_blocks(second.embedder)), use_mmr=False)
    cands = _rank(second, query, pool)[0]
    return [c.entry.id for c in cands if c.verdict != "excluded:live"]


def _rank(lantern, query: str, pool: Pool):
    from lantern.recover.rank import rank
    from lantern.text.clean import clean_text

    return rank(
        lantern.store,
        lantern.index,
        lantern.embedder,
        lantern.config,
        clean_text(query),
        session=pool.session,
        exclude_ids=pool.excluded,
    )


def run_system(system: System, lantern, query: str, pool: Pool, budget: int, reply: str | None = None) -> Outcome:
    """Run ``system`` on one query. Pipeline systems go through ``Lantern.explain`` (no side effects: access counts
    are not bumped, so systems and reruns do not influence each other); the reinforce systems through ``recover``
    on a copy of the store (eval/reinforced.py), ``reply`` being the reference answer."""
    config = system.config or Config()
    if system.kind in ("reinforce", "reinforce+answers"):
        from lantern.eval.reinforced import run

        return run(system, lantern, query, pool, budget, reply)
    if system.kind in ("lantern", "dual"):
        start = time.perf_counter()
        extra = {SECOND_SEMANTIC: second_semantic(pool, query, config)} if system.kind == "dual" else None
        lantern.config = config
        rec = lantern.explain(
            query,
            session=pool.session,
            budget=budget,
            exclude=pool.excluded,
            extra_rankings=extra,
            as_of=pool.as_of,
            min_score=pool.min_score,
        )
        return outcome_of(rec, (time.perf_counter() - start) * 1000, config.short_budget)
    start = time.perf_counter()
    ordered = baseline_order(system.kind, query, pool.entries)
    result = pack(
        iter(ordered),
        budget,
        query_terms(query),
        config.min_excerpt_chars,
        config.entry_share,
        group=config.pack_group_sessions,
        lookahead=config.pack_lookahead,
    )
    ms = (time.perf_counter() - start) * 1000
    return Outcome(
        ranking=[e.id for e in ordered],
        packed=[p.entry.id for p in result.packed],
        chars=len(result.text),
        ms=ms,
        text=result.text,
    )


FAILURE_CAUSES = (
    "never archived",
    "outside every signal's top-N",
    "below the relevance floor",
    "deduplicated away",
    "removed by MMR",
    "cut by the budget",
)


def failure_cause(outcome: Outcome, relevant: Sequence[int], system: System, alternatives: bool = False) -> str | None:
    """One cause for an unrecovered fact (pipeline systems only; None otherwise or when recovered): the earliest
    pipeline stage that lost one of its relevant turns. ``removed by MMR``: cut by the budget although its fused
    rank was within the number of entries packed (it would have fit without MMR's re-ordering).
    ``alternatives`` (any relevant turn answers): the furthest stage any of them reached; a packed one whose
    excerpt left the answer out counts as cut by the budget."""
    if system.kind not in ("lantern", "dual", "reinforce", "reinforce+answers"):
        return None
    missing = [r for r in relevant if r not in outcome.packed]
    if alternatives and len(missing) < len(relevant):
        return FAILURE_CAUSES[-1]
    if not missing:
        return None
    causes = []
    for r in missing:
        verdict = outcome.verdicts.get(r)
        if r < 0:
            causes.append(0)
        elif verdict is None:
            causes.append(1)
        elif verdict == "cut:floor":
            causes.append(2)
        elif verdict == "cut:duplicate":
            causes.append(3)
        elif (
            system.config is not None
            and system.config.use_mmr
            and r in outcome.fused
            and outcome.fused.index(r) < len(outcome.packed)
        ):
            causes.append(4)
        else:
            causes.append(5)
    return FAILURE_CAUSES[max(causes) if alternatives else min(causes)]


_MEMOS: dict[Any, MemoEmbedder] = {}  # embedder name -> this process's memoizing embedder (model loaded once)


def memo_embedder(name: str | None) -> MemoEmbedder:
    """This process's memoizing wrapper of the embedder ``name`` (made once per process and name)."""
    from lantern.embed import default_embedder_name, get_embedder

    name = name or default_embedder_name()  # by the embedder's name, not None: $LANTERN_EMBEDDER may change
    if name not in _MEMOS:
        _MEMOS[name] = MemoEmbedder(get_embedder(name))
    return _MEMOS[name]
