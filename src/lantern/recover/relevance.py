"""The injection decision (docs/architecture.md §3.6): how much of a recovery's block does the evidence justify?

A question whose answer was never said still gets a full block from the ranking: RRF (recover/fusion.py) sums
1 / (k + rank) over the rankings, so its value depends on ranks and on how many rankings are fused, never on how
well anything matched. The decision reads the raw evidence of the best candidates instead, on scales that mean the
same for every query, every store size and both backends (no backend's full-text scorer is read: SQLite's BM25 and
PostgreSQL's ts_rank are on different scales):

- ``cosine``: the best semantic cosine between the query and a candidate (the main vector, clipped at 0, in
  [0, 1]). Its scale is the model's (MiniLM and USE give different cosines to equally good matches), so it is read
  against that model's floor ``COSINE_FLOORS`` (the model of the candidate it came from: ``cosine_model``);
- ``coverage``: the largest share of the query's term weight that one of the best candidates holds, in [0, 1]:
  Σ idf(t) over the query's terms found in the candidate's text, over Σ idf(t) over all of them, computed here from
  the candidates' texts (``covered``). idf is BM25's as Lucene computes it, ln(1 + (N - n + 0.5) / (n + 0.5))
  (Robertson & Zaragoza 2009; always > 0, so it still weighs terms in a store of one turn), n the term's
  document frequency estimated by ``Store.term_fractions``. A term the store never holds weighs the most: another
  conversation's question names people and things this archive never saw. The best candidates read: the top
  ``READ_TOP`` of the semantic, full-text and keyword rankings.

``Relevance.score`` = max(cosine / COSINE_FLOORS[model], coverage / COVERAGE_FLOOR): no unit, in multiples of the
calibrated floors (~0 to ~2.5 in practice). ``decide`` grades it (query performance prediction by post-retrieval
evidence; the score threshold of a ranked list, Arampatzis, Kamps & Robertson 2009, "Where to stop reading a ranked
list?"): at or above ``Config.clear_score`` the full budget, from ``Config.min_score`` up to it a short block of the
best evidence (``Config.short_budget`` characters), below ``Config.min_score`` nothing. Every empty or shortened
decision carries a ``reason`` word and the figures behind it.

A question about someone the archive never met gets at most the short block, whatever its score: when the query
names people or things (``query_names``: capitalized words inside a sentence, "What did Gina design for her
store?") and none of the best candidates holds any of them (``Relevance.unheld_names``). The semantic cosine reads
what is asked, not of whom: another conversation's "When did Gina open her clothing store?" finds a turn about
someone else's shop as close as an answer's (LoCoMo's other-conversation questions, docs/results/injection.md).

The floors and thresholds were chosen on the tune parts of the labelled sets of benchmarks/injection_calibration.py
(docs/results/injection.md): written conversations in English and Chinese (tests/injection_sets.py) in stores of one
conversation and in a store of thousands of real aider turns, and LoCoMo's tune conversations asked their own and
another conversation's questions.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from lantern import lazy_re
from lantern.embed import RoutedEmbedder, cjk_share
from lantern.model import Entry
from lantern.recover import signals
from lantern.store.index import MemoryIndex
from lantern.store.protocol import StoreProtocol
from lantern.text.cjk import CJK_RUN, bigram_list
from lantern.text.tags import STOPWORDS

__all__ = [
    "COSINE_FLOORS",
    "COVERAGE_FLOOR",
    "Decision",
    "Relevance",
    "assess",
    "cosine_model",
    "covered",
    "decide",
    "idf",
    "query_names",
]

# the best cosine at which a semantic match counts as clear, per model (ours; tune split, docs/results/injection.md).
# A model not listed (e5 alone) gets MiniLM's; e5's cosines are high for unrelated text too (its model card: they
# cluster around 0.7-1.0), so there the decision holds back little
COSINE_FLOORS = {"minilm": 0.46, "use": 0.34}
DEFAULT_COSINE_FLOOR = COSINE_FLOORS["minilm"]
COVERAGE_FLOOR = 1.0  # the coverage at which a lexical match counts as clear on its own: all of it (ours; tune split)
READ_TOP = 4  # the best candidates of each of the semantic, full-text and keyword rankings whose text is read
TEXT_CHARS = 20_000  # of each, its first characters are read (a 115 KB log is matched on its head)
_MODEL_OF_ID = {"minilm-l6-v2-int8": "minilm", "use-multilingual-v3": "use"}
_TOKEN = lazy_re.compile(r"\w+")
# a name: a capitalized word (Latin letters, then lower case: "Gina", "Kafka", not "I", "PR" or "SIWE")
_NAME = lazy_re.compile(r"\b[A-Z][a-z]+\b")
# a word after one of these (or at the start) may be capitalized as a first word is
_SENTENCE_END = frozenset(".?!:;\n\"'“‘(¿¡")
_SUFFIXES = ("ing", "ed", "es", "s")  # stripped from a query word before its prefix is looked up (porter-like)
# words of the act of asking back, not of what is asked for ("remind me, what was the exact error again?"): no
# evidence either way, left out of the weighed terms (the query's own stopwords are already out: text/tags.py). A
# stopword list of verbose queries (Bendersky & Croft 2008 weigh a verbose query's key concepts; these are the
# request words of ours, English)
REQUEST_WORDS = frozenset(
    "remind reminder remember recall earlier previously mention mentioned exact exactly talked discussed "
    "again asked gave".split()
)
# Chinese characters of function words, particles and the act of asking back: a query bigram holding one is no
# content ("刚才那个报错是什么" weighs 报错 only; its other bigrams 刚才, 才那, 那个, 个报, 错是, 是什, 什么 are
# the request and the seams between words, which a bigram index cannot tell from words). Ours
FUNCTION_CHARS = frozenset(
    "的了是吗呢吧啊着么什那这个哪谁几说来过得把被给就都也和与在我你他她它们刚才之前次记还曾吧嘛呀"
)

# reason words of an empty or shortened recovery (Recovery.reason)
EMPTY_QUERY = "empty_query"  # nothing to search: an empty or whitespace query, or one with no word
NOTHING_ARCHIVED = "nothing_archived"  # no entry to recover from (in the scope, session and time asked)
NO_MATCH = "no_match"  # no candidate: every signal came back empty, or every candidate is still in the context
BELOW_FLOOR = "below_floor"  # the best evidence is below Config.min_score: nothing injected
UNCERTAIN = "uncertain"  # the best evidence is below Config.clear_score: a short block of the best evidence
BUDGET = "budget"  # the budget holds nothing (or less than the short block)


@dataclass(frozen=True)
class Relevance:
    """The best candidates' evidence: ``cosine`` (the best semantic cosine, in [0, 1]) and the ``model`` whose
    scale it is on; ``coverage`` (the largest share of the query's idf weight one best candidate's text holds, in
    [0, 1]); ``terms`` (the query terms weighed) and ``entries`` (the store's entries, the index's);
    ``unheld_names`` (the names the query holds, ``query_names``, when none of them is in a best candidate's text;
    else empty). ``score``: max(cosine / the model's floor, coverage / COVERAGE_FLOOR), what ``decide`` grades.
    0.0 where nothing was found."""

    cosine: float = 0.0
    coverage: float = 0.0
    model: str = ""
    entries: int = 0
    terms: int = 0
    unheld_names: tuple[str, ...] = ()

    @property
    def score(self) -> float:
        floor = COSINE_FLOORS.get(self.model, DEFAULT_COSINE_FLOOR)
        return max(self.cosine / floor, self.coverage / COVERAGE_FLOOR)

    def to_json(self) -> dict:
        return {
            "score": self.score,  # unrounded: the eval's floor sweep compares it with each floor as recover does
            "cosine": round(self.cosine, 4),
            "coverage": round(self.coverage, 4),
            "model": self.model,
            "entries": self.entries,
            "terms": self.terms,
            "unheld_names": list(self.unheld_names),
        }


@dataclass(frozen=True)
class Decision:
    """What a recovery injects: ``tier`` "full" (the whole budget), "short" (at most ``budget`` characters, the
    short block) or "none"; ``budget`` the characters the block may take; ``reason`` None for a full block, else
    one of the reason words above; ``detail`` the figures behind it, in words."""

    tier: str
    budget: int
    reason: str | None = None
    detail: str = ""
    figures: dict = field(default_factory=dict)


def decide(
    evidence: Relevance | None,
    budget: int,
    *,
    min_score: float,
    clear_score: float,
    short_budget: int,
    candidates: int = 1,
) -> Decision:
    """The one injection decision for a question-style recovery of ``budget`` characters, from ``evidence`` (None:
    no evidence was gathered, an empty query) and the count of ``candidates`` ranked. ``min_score`` 0 turns it
    off: every recovery with a candidate gets its full budget (a compaction's block; ``--min-score 0``). Otherwise:
    score >= ``clear_score``: full; ``min_score`` <= score < ``clear_score``: at most ``short_budget``
    characters; below ``min_score``: nothing. A query whose names no best candidate holds
    (``Relevance.unheld_names``) gets at most the short block. The cheap checks come first (no query, no entry, no
    candidate)."""
    if evidence is None:
        return Decision("none", 0, EMPTY_QUERY, "the query has no word to search")
    figures = {**evidence.to_json(), "min_score": min_score, "clear_score": clear_score}
    if evidence.entries == 0:
        return Decision("none", 0, NOTHING_ARCHIVED, "the archive holds no entry", figures)
    if candidates == 0:
        return Decision("none", 0, NO_MATCH, "no archived turn was found for the query", figures)
    if budget <= 0:
        return Decision("none", 0, BUDGET, f"budget {budget}", figures)
    if min_score <= 0:
        return Decision("full", budget, None, "", figures)
    score = evidence.score
    if score < min_score:
        detail = f"best relevance {score:.2f} < min_score {min_score:g}"
        return Decision("none", 0, BELOW_FLOOR, detail, figures)
    if score < clear_score and short_budget < budget:
        detail = f"best relevance {score:.2f} < clear_score {clear_score:g}: {short_budget} of {budget} characters"
        return Decision("short", short_budget, UNCERTAIN, detail, figures)
    if evidence.unheld_names and short_budget < budget:
        names = ", ".join(evidence.unheld_names)
        detail = f"no archived turn found names {names}: {short_budget} of {budget} characters"
        return Decision("short", short_budget, UNCERTAIN, detail, figures)
    return Decision("full", budget, None, "", figures)


def cosine_model(embedder_id: str, summary: str) -> str:
    """The model whose cosine an entry's semantic score is: the embedder's, or for a routed embedder the one its
    summary was routed to (embed.RoutedEmbedder.route: USE when a third of it is CJK, else MiniLM)."""
    if embedder_id.startswith("routed-"):
        return "use" if cjk_share(summary) >= RoutedEmbedder.CJK_THRESHOLD else "minilm"
    return _MODEL_OF_ID.get(embedder_id, "")


def idf(fraction: float, rows: int) -> float:
    """BM25's idf as Lucene computes it, ln(1 + (N - n + 0.5) / (n + 0.5)), for a term in ``fraction`` of
    ``rows`` entries (n = fraction × rows): > 0 for every n <= N, largest for a term no entry holds."""
    n = min(max(fraction, 0.0), 1.0) * rows
    return math.log(1.0 + (rows - n + 0.5) / (n + 0.5))


def _stem(word: str) -> str:
    """A query word's prefix to look up among a text's tokens: the word less one English inflection ending when
    4 characters or more are left ("databases" -> "databas", "pinned" -> "pinn"), else the word."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


class _Vocabulary:
    """The tokens of one text, lowercased, sorted for prefix look-ups, and the bigrams of its CJK runs: built in
    one pass, so matching a query against it costs O(terms × log tokens)."""

    def __init__(self, text: str):
        lowered = text.lower()
        self.tokens = sorted(set(_TOKEN.findall(lowered)))
        self.bigrams = set(bigram_list(lowered))

    def has_prefix(self, prefix: str) -> bool:
        i = bisect_left(self.tokens, prefix)
        return i < len(self.tokens) and self.tokens[i].startswith(prefix)

    def holds(self, term: str) -> bool:
        """Whether the text holds ``term``: a CJK bigram among its bigrams, a word by its stem as a token prefix,
        a hint term (a path, a flag, an identifier) by each of its word parts."""
        if CJK_RUN.fullmatch(term):
            return term in self.bigrams or (len(term) == 1 and any(term in b for b in self.bigrams))
        parts = _TOKEN.findall(term.lower())
        if not parts:
            return False
        if len(parts) == 1:
            return self.has_prefix(_stem(parts[0]))
        return all(self.has_prefix(p) for p in parts)

    def covered(self, weights: dict[str, float]) -> float:
        """The share of ``weights`` (term -> idf) this text holds, in [0, 1]; 0.0 for no weight."""
        total = sum(weights.values())
        if total <= 0:
            return 0.0
        return sum(w for t, w in weights.items() if self.holds(t)) / total


def covered(text: str, weights: dict[str, float]) -> float:
    """The share of ``weights`` (term -> idf) that ``text`` holds (``_Vocabulary.holds``), in [0, 1]; 0.0 for no
    weight. Linear in the text's length."""
    return _Vocabulary(text).covered(weights)


def query_names(query: str) -> list[str]:
    """The names ``query`` holds: capitalized words (``Gina``, ``Kafka``; not ``I``, ``PR``) that do not open a
    sentence (after the start, ``.?!:;``, a line break, a quote or a parenthesis the first word may be capitalized
    as any word is), less stopwords (text/tags.py ``STOPWORDS``: "Which", "Will") and request words; in order,
    once each. English and other Latin-script queries; none in CJK."""
    out: list[str] = []
    for m in _NAME.finditer(query):
        before = query[: m.start()].rstrip()
        if not before or before[-1] in _SENTENCE_END:
            continue
        word = m.group()
        if word.lower() not in STOPWORDS and word.lower() not in REQUEST_WORDS and word not in out:
            out.append(word)
    return out


def content_term(term: str) -> bool:
    """Whether a query term carries content the evidence can weigh: not a request word (``REQUEST_WORDS``), and
    for a CJK bigram, no function character (``FUNCTION_CHARS``)."""
    if CJK_RUN.fullmatch(term):
        return not any(c in FUNCTION_CHARS for c in term)
    return term not in REQUEST_WORDS


def term_weights(store: StoreProtocol, terms: Iterable[str], rows: int) -> dict[str, float]:
    """Each searchable content term's idf (``idf``; ``content_term``), its document frequency from
    ``Store.term_fractions`` (both backends estimate it in their newest entries)."""
    searched = list(dict.fromkeys(t for t in terms if signals.has_word(t) and content_term(t)))
    if not searched:
        return {}
    fractions = store.term_fractions([signals.quote(t) for t in searched], signals.FTS_SAMPLE_ROWS)
    return {t: idf(fractions.get(signals.quote(t), 0.0), max(rows, 1)) for t in searched}


def assess(
    store: StoreProtocol,
    index: MemoryIndex,
    embedder_id: str,
    terms: list[str],
    found: dict[str, tuple[np.ndarray, np.ndarray]],
    entries: dict[int, Entry],
    excluded: set[int],
    query: str = "",
) -> Relevance:
    """The ``Relevance`` of the rankings ``found`` (rank.py's, masked, best first) for ``query`` and its
    ``terms``, read on the candidates still allowed: ``entries`` (the pool's, with their summaries), minus
    ``excluded``. The same on every backend: the cosine comes from the in-process index, the coverage and the
    names held from the best candidates' texts."""

    def allowed(name: str, top: int | None = None) -> list[tuple[int, float]]:
        positions, scores = found.get(name, (np.empty(0, np.int64), np.empty(0)))
        out = []
        for p, s in zip(positions.tolist(), scores.tolist()):
            entry_id = int(index.ids[p])
            if entry_id in entries and entry_id not in excluded:
                out.append((entry_id, float(s)))
                if top is not None and len(out) >= top:
                    break
        return out

    rows = len(index.ids)
    best_semantic = allowed("semantic", 1)
    cosine, model = 0.0, ""
    if best_semantic:
        top, cosine = best_semantic[0]
        model = cosine_model(embedder_id, entries[top].summary)
    weights = term_weights(store, terms, rows)
    names = query_names(query)
    coverage, held = 0.0, not names
    if weights or names:
        read = list(
            dict.fromkeys(i for name in ("semantic", "fulltext", "keyword") for i, _ in allowed(name, READ_TOP))
        )
        texts = store.text_heads(read, TEXT_CHARS) if read else {}
        for i in read:
            vocabulary = _Vocabulary(f"{entries[i].summary}\n{texts.get(i, '')}")
            coverage = max(coverage, vocabulary.covered(weights))
            held = held or any(vocabulary.holds(n) for n in names)
    return Relevance(
        cosine=max(cosine, 0.0),
        coverage=coverage,
        model=model,
        entries=rows,
        terms=len(weights),
        unheld_names=() if held else tuple(names),
    )
