"""The relevance floor (docs/architecture.md §3.6): does anything in the archive match the query at all?

A question whose answer was never said still gets a full block from the ranking: RRF (recover/fusion.py) sums
1 / (k + rank) over the rankings, so its value depends on ranks and on how many rankings are fused, never on how
well anything matched; the best candidate of a question with no answer scores about what the best candidate of an
answerable one does. The floor reads the raw evidence of the best candidates instead, on scales that mean the same
for every query and every signal list:

- ``cosine``: the best semantic cosine between the query and a candidate (the main vector; clipped at 0, so in
  [0, 1]). Its scale is the model's (MiniLM and USE give different cosines to equally good matches), so it is read
  against that model's floor ``COSINE_FLOORS`` (the model of the candidate it came from: ``cosine_model``);
- ``bm25``: the best FTS5 BM25 over the query's *ideal* one, Σ idf(t) over its searched terms (idf as FTS5 computes
  it, ln((N - n + 0.5) / (n + 0.5)), n estimated as term selection does, recover/signals.py): the BM25 of a row of
  average length holding each term once (tf = 1 makes BM25's saturation factor 1; Robertson & Zaragoza 2009). A
  ratio, no unit, from 0 (nothing matched) up: about 1 when every term is found once, more when a term is repeated
  or also among the row's tags, less in a row longer than the average (BM25's length normalization).

``Relevance.score`` = max(cosine / COSINE_FLOORS[model], bm25 / BM25_FLOOR): no unit, in multiples of the calibrated
floor (1.0 is the floor; ~0 to ~3 in practice). A recovery whose score is below ``Config.min_score`` (default 1.0)
injects nothing, in a store of at least ``MIN_ENTRIES`` entries. Source of the idea: the similarity cutoff of
retrieval-augmented generation frameworks (LlamaIndex's ``SimilarityPostprocessor(similarity_cutoff=...)`` drops
retrieved nodes below a fixed cosine), made per model and joined by a lexical score normalized by the query's own
attainable score, so one threshold means the same for every query (score thresholding on a normalized scale:
Arampatzis, Kamps & Robertson 2009, "Where to stop reading a ranked list?").

The floors were chosen on the tune split by benchmarks/floor_calibration.py (docs/results/recall-tuning.md, round 7):
the combination that leaves the most questions of another conversation with nothing while costing at most 0.5% of
the facts recovered on each dataset. What the floor does not catch: LoCoMo's adversarial questions (they name the
wrong speaker for something that was said, so their evidence matches as well as an answer's). What it costs: an
answer that neither signal sees well is held back with the rest; on MemDaily's report split (conditional and
comparative questions, absent from the tune split) 8 of 925 facts (docs/results/relevance-floor.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from lantern.embed import RoutedEmbedder, cjk_share
from lantern.model import Entry
from lantern.recover import signals
from lantern.store.index import MemoryIndex
from lantern.store.protocol import StoreProtocol

__all__ = ["BM25_FLOOR", "COSINE_FLOORS", "MIN_ENTRIES", "Relevance", "assess", "cosine_model", "ideal_bm25"]

# the best cosine below which nothing matches, per model (ours; tune split, round 7). A model not listed (e5 alone)
# has no calibrated floor and gets MiniLM's; e5's cosines are high for unrelated text too (its model card: they
# cluster around 0.7-1.0), so there the floor holds back little
COSINE_FLOORS = {"minilm": 0.40, "use": 0.32}
DEFAULT_COSINE_FLOOR = COSINE_FLOORS["minilm"]
BM25_FLOOR = 0.8  # the best BM25 over the query's ideal at which a lexical match counts on its own (ours; round 7)
# a store smaller than this has no term statistics to speak of (in a store of a few turns every query term is in a
# large share of them, so its idf is ~0 and term selection drops it) and little to inject: the floor is off there
# (ours, not tuned; the floors were calibrated on stores of 200 to 2,300 entries)
MIN_ENTRIES = 50
_MODEL_OF_ID = {"minilm-l6-v2-int8": "minilm", "use-multilingual-v3": "use"}


@dataclass(frozen=True)
class Relevance:
    """The best candidates' evidence: ``cosine`` (the best semantic cosine) and the ``model`` whose scale it is on,
    ``bm25`` (the best full text over the query's ideal), and ``score``: max(cosine / the model's floor, bm25 /
    BM25_FLOOR), what ``Config.min_score`` is compared with (1.0: the calibrated floor). 0.0 where a signal found
    nothing."""

    cosine: float = 0.0
    bm25: float = 0.0
    model: str = ""
    entries: int = 0  # the store's entries (the index's): below MIN_ENTRIES the floor holds nothing back

    def holds_back(self, min_score: float) -> bool:
        """Whether a floor of ``min_score`` holds this recovery back: its ``score`` is below it, in a store of at
        least ``MIN_ENTRIES`` entries."""
        return self.entries >= MIN_ENTRIES and self.score < min_score

    @property
    def score(self) -> float:
        floor = COSINE_FLOORS.get(self.model, DEFAULT_COSINE_FLOOR)
        return max(self.cosine / floor, self.bm25 / BM25_FLOOR)

    def to_json(self) -> dict:
        return {
            "score": self.score,  # unrounded: the eval's floor sweep compares it with each floor as recover does
            "cosine": round(self.cosine, 4),
            "bm25": round(self.bm25, 4),
            "model": self.model,
            "entries": self.entries,
        }


def cosine_model(embedder_id: str, summary: str) -> str:
    """The model whose cosine an entry's semantic score is: the embedder's, or for a routed embedder the one its
    summary was routed to (embed.RoutedEmbedder.route: USE when a third of it is CJK, else MiniLM)."""
    if embedder_id.startswith("routed-"):
        return "use" if cjk_share(summary) >= RoutedEmbedder.CJK_THRESHOLD else "minilm"
    return _MODEL_OF_ID.get(embedder_id, "")


def ideal_bm25(fractions: dict[str, float], terms: Iterable[str], rows: int) -> float:
    """Σ idf(t) over ``terms``: the FTS5 BM25 of a row of average length holding each term once (tf = 1 makes a
    term's saturation factor 1; Robertson & Zaragoza 2009). ``fractions``: each quoted term's share of the rows
    (``Store.term_fractions``); idf clamped at 1e-6, as FTS5 does."""
    total = 0.0
    for t in terms:
        n = fractions.get(signals.quote(t), 0.0) * rows
        total += max(math.log((rows - n + 0.5) / (n + 0.5)), 1e-6)
    return total


def assess(
    store: StoreProtocol,
    index: MemoryIndex,
    embedder_id: str,
    terms: list[str],
    found: dict[str, tuple[np.ndarray, np.ndarray]],
    entries: dict[int, Entry],
    excluded: set[int],
) -> Relevance:
    """The ``Relevance`` of the rankings ``found`` (rank.py's, masked, best first) for a query of ``terms``,
    read on the candidates still allowed: ``entries`` (the pool's, with their summaries), minus ``excluded``. A
    store whose full-text scores are not BM25 (``fulltext_scores``: the PostgreSQL store's ts_rank) gives no
    lexical evidence: the cosine alone is read."""

    def best(name: str) -> tuple[float, int | None]:
        positions, scores = found.get(name, (np.empty(0, np.int64), np.empty(0)))
        for p, s in zip(positions.tolist(), scores.tolist()):
            entry_id = int(index.ids[p])
            if entry_id in entries and entry_id not in excluded:
                return float(s), entry_id
        return 0.0, None

    cosine, top = best("semantic")
    model = cosine_model(embedder_id, entries[top].summary) if top is not None else ""
    bm25, _ = best("fulltext")
    if getattr(store, "fulltext_scores", "bm25") != "bm25":  # PostgreSQL's ts_rank: no BM25 scale to read it on
        bm25 = 0.0
    if bm25 > 0:
        searched = [t for t in terms if signals.has_word(t)]
        fractions = store.term_fractions([signals.quote(t) for t in searched], signals.FTS_SAMPLE_ROWS)
        kept = signals.select_terms(searched, fractions, len(index.ids))  # the terms fulltext searched
        ideal = ideal_bm25(fractions, kept, max(len(index.ids), 1))
        bm25 = bm25 / ideal if ideal > 0 else 0.0
    return Relevance(cosine=max(cosine, 0.0), bm25=bm25, model=model, entries=len(index.ids))
