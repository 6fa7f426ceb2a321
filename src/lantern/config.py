"""Every parameter of the pipeline, with its default and its source (DESIGN §2–4).

Where the paper (LANTERN, arXiv 2606.05182) is silent, the value is ours and says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_SESSION = "default"  # the session of turns archived without one


def default_db_path() -> Path:
    """``$LANTERN_DB`` or ``~/.lantern/lantern.db``."""
    env = os.environ.get("LANTERN_DB")
    return Path(env) if env else Path.home() / ".lantern" / "lantern.db"


@dataclass(frozen=True)
class Config:
    # --- write path ---
    summary_message_chars: int = 500  # each message cut to 500 chars (DESIGN §2.3)
    summary_max_chars: int = 1200  # whole summary capped (DESIGN §2.3)
    embed_max_tokens: int = 128  # embedder input cap (ours: MiniLM was trained on 128-token inputs; 256 costs 2x)
    # --- read path ---
    budget: int = 6000  # characters injected (DESIGN §3.5)
    rrf_k: int = 60  # Cormack et al. 2009; paper eq. 3
    # MMR trade-off (Carbonell & Goldstein 1998; the paper's 0.7). Tune split (LoCoMo 1-5): 0.5 lost 2.7 points of
    # facts recovered; 0.85 gained 1.2 with neighbour + grouping alone, nothing once prf and time were on (77.3% at
    # 0.7, 77.2% at 0.85). Round 3 (with local, speaker, decomposition; LoCoMo 1-5 / MemDaily 01): 0.7 gives 82.1% /
    # 82.4%, 0.85 82.3% / 83.9%, 0.95 82.1% / 84.4%: MemDaily repeats "my boss's e-mail is ..." once per trajectory,
    # and at 0.7 the redundancy term buries the right trajectory's turn under its look-alikes (fused 51st -> MMR
    # 139th); 0.85 (ours) keeps most of the gain and some diversification (docs/results/recall-tuning.md, Round 3)
    mmr_lambda: float = 0.85
    # candidates taken from each query signal (ours; paper does not specify). Tune split (LoCoMo 1-5): 50 -> 100 -> 200
    # raise recall@10 0.593 -> 0.611 -> 0.623; with the neighbour signal and grouped packing 100 gives 75.1% vs 74.3%
    signal_top_n: int = 100
    prf_docs: int = (
        10  # "prf" signal: RM3 feedback from the top 10 BM25 hits (recover/prf.py; Abdul-Jaleel et al. 2004)
    )
    prf_terms: int = 10  # "prf" signal: expansion terms added to the full-text query (recover/prf.py; tune split: 20
    # terms 78.0% / R@10 0.717, 10 terms 78.0% / 0.711; 5 feedback hits instead of 10: 77.2%)
    time_slack_days: float = (
        3.0  # "time" signal: a date the query names, widened by 3 days each side (recover/timeframe.py;
    )
    # ours; tune split: 0 / 3 / 7 days gave 78.0 / 78.0 / 77.9% facts recovered)
    neighbour_seeds: int = 20  # "neighbour" signal: the turns next to the best 20 fused hits (ours; 10: 77.5% vs 78.3%
    # at weight 1.0; 50 seeds lost 1.6 points at weight 0.5 in an earlier round)
    # "local" signal: the turns within 8 of the best 5 fused hits, same session (recover/local.py; ours). Tune split
    # (LoCoMo 1-5 / MemDaily 01): 5 and 8 give 82.1% / 79.1% facts recovered; 3 seeds 82.3 / 77.5; 4 turns 82.6 / 74.4
    local_seeds: int = 5
    local_turns: int = 8
    # a multi-part question ("上司是做什么工作的？另外，论坛在哪里？") ranks the local window by each part's own vector,
    # interleaved, the local ranking fused with one vote per part (recover/decompose.py; ours). Tune split, MemDaily 01
    # (LoCoMo 1-5: no question splits): 79.1% -> 79.7% facts recovered with one vote, 82.4% / R@10 0.589 with one per
    # part
    decompose: bool = True
    half_life_days: float = 7.0  # recency half-life T½ (paper eq. 2)
    min_excerpt_chars: int = 200  # smallest excerpt worth packing (ours)
    # the block grouped by session, one session line each, turns in order (recover/pack.py; ours). Tune split (LoCoMo
    # 1-5, Porter): facts recovered 69.8% -> 71.2% (short chat turns spent a third of the budget on headers)
    pack_group_sessions: bool = True
    entry_share: float = 1.0  # largest share of the budget one entry may take; longer ones are excerpted (ours)
    max_query_terms: int = 64  # full-text/keyword query terms kept from a long query (ours)
    # the paper's four signals, plus ours: "prf" (RM3 feedback on the full-text query, recover/prf.py), "time" (a
    # date the query names, recover/timeframe.py), "neighbour" (the turns next to the best hits, recover/neighbours.py).
    # Tune split (LoCoMo 1-5, categories 1-4; before: 67.0% facts recovered, recall@10 0.593): neighbour + grouped
    # block + Porter 74.9% / 0.659; + prf + time 77.2% / 0.710 (MemDaily 01: 50.4% / 0.468 -> 54.0% / 0.491)
    # semantic_e5 (ours): the multilingual-e5-small cosine ranking of the default embedder's CJK entries (embed.py
    # RoutedE5Embedder; absent with other embedders). Tune split, weight 1: MemDaily 01 facts recovered 84.1% -> 85.7%,
    # recall@10 0.609 -> 0.661; LoCoMo unchanged (no CJK entry); docs/results/recall-tuning.md, round 6
    signals: tuple[str, ...] = (
        "semantic",
        "fulltext",
        "keyword",
        "importance",
        "prf",
        "time",
        "neighbour",
        "local",
        "speaker",
        "semantic_e5",
    )
    # weighted RRF (ours; the paper weighs every signal 1). Importance at 0.25, chosen on the tune split (LoCoMo
    # conversations 1-5): all-evidence-in-budget 0.650 at 1.0, 0.672 at 0.5, 0.675 at 0.25, 0.682 at 0 — 0.25 keeps
    # most of the gain and leaves reinforcement (c, sigma) a voice in the ranking
    # prf 0.5, time 1.0, neighbour 0.75 (ours), on the tune split with every other default: neighbour 0.5 / 0.75 / 1.0 /
    # 1.5 gave facts recovered 77.3 / 78.0 / 78.3 / 78.6% but recall@10 0.714 / 0.711 / 0.707 / 0.677 (a reply ranks
    # on its question's merit); prf 0.25 / 0.5 / 1.0: 78.4 / 78.0 / 75.3%; semantic 0.5: -2.7 points; importance 0: no
    # change
    # local 1.0, speaker 1.0 (ours; tune split: local 0.5 gave 81.9 / 77.5%, 1.5 gave 79.3% on MemDaily; speaker 0.5
    # gave 81.5% on LoCoMo; without local 80.8 / 71.8%, without speaker 80.2% on LoCoMo; docs/results/recall-tuning.md)
    signal_weights: dict = field(
        default_factory=lambda: {
            "semantic": 1.0,
            "fulltext": 1.0,
            "keyword": 1.0,
            "importance": 0.25,
            "neighbour": 0.75,
            "prf": 0.5,
            "time": 1.0,
            "local": 1.0,
            "speaker": 1.0,
            "semantic_e5": 1.0,
        }
    )
    fusion: str = "rrf"  # "rrf" or "sum" (ablation)
    # keyword signal: "jaccard" (DESIGN §3.2), "overlap" or "idf" (recover/signals.py). Tune split: nearly inert on
    # the QA data (LoCoMo 1-5: 37 of 999 questions share any term with any hint, all three and no keyword signal
    # give 65.9%; MemDaily 01: none, all give 73.8% with USE); aider sessions (first half) 75.3% / 76.4% / 77.5% of 89
    # facts: too few to choose; kept jaccard
    keyword_score: str = "jaccard"
    use_mmr: bool = True
    # --- privacy (issue 5; archive/redact.py; ours) ---
    redact_patterns: tuple = ()  # extra secret patterns: (kind, regex) pairs; group "secret" or 1 is the secret
    redact_allow: tuple = ()  # values never redacted: exact strings, or "re:<regex>" matched on the whole value
    private_markers: tuple = (("<private>", "</private>"),)  # (open, close) spans removed before archiving
    # --- facts and layered context (DESIGN §5; issue 6 parts 3-4; memory/facts.py, memory/context.py; ours) ---
    extract_facts: bool = True  # key/value facts by pattern at archive time, versioned in the facts table
    fact_notes: bool = True  # recovery marks superseded values in the block ("5433 until 14 Mar, now 5434")
    working_turns: int = 3  # Session working memory: last 3 turns verbatim (DESIGN §5)
    # --- the LLM half (lantern/llm.py; off unless llm_base_url or $LANTERN_LLM_BASE_URL is set) ---
    llm_base_url: str | None = None  # OpenAI-compatible API root (".../v1"); receives conversation text (redacted)
    llm_model: str | None = None  # model name sent to llm_base_url (key: $LANTERN_LLM_API_KEY, never stored)
    llm_timeout_s: float = 30.0  # seconds per LLM request
    llm_max_tokens: int = 256  # the cap of each LLM answer, in tokens
    llm_json_mode: str = "schema"  # how JSON answers are constrained: schema | object (llama-cpp-python) | off
    rerank_top_n: int = (
        20  # candidates shown to the rerank call, fused top N (ours; the paper reranks "top candidates")
    )
    rerank_excerpt_chars: int = 300  # each shown as its most query-relevant window of this many characters (ours)
    rerank_prompt_chars: int = 8_000  # the whole rerank prompt at most this long (ours: ~2k tokens)
    gist_every: int = 5  # Session core gist refreshed every 5 turns (DESIGN §5)
    gist_max_chars: int = 1500  # rolling gist cap; the oldest lines roll off (ours)
    gist_base_url: str | None = None  # OpenAI-compatible base URL (".../v1") for an LLM gist; None: extractive
    gist_model: str = "gpt-4o-mini"  # model name sent to gist_base_url (key: $LANTERN_GIST_API_KEY, never stored)
    gist_timeout_s: float = 30.0  # an LLM gist call slower than this falls back to the extractive gist
    # --- reinforcement (paper Appendix D) ---
    initial_confidence: float = 0.5
    initial_success: float = 0.5
    reinforce: bool = True  # recover() updates c and σ (reinforce.py); explain() never does
    confidence_gain: float = 0.15  # recovered: c <- min(1, c + 0.15)
    confidence_decay: float = 0.02  # candidate not recovered: c <- max(0, c - 0.02)
    prune_below: float = 0.15  # c below this: pruned (out of importance and proactive recovery; never deleted)
    success_alpha: float = 0.2  # α of the σ EMA of usefulness (ours; the paper does not give it)
    extra: dict = field(default_factory=dict)


DEFAULT = Config()
