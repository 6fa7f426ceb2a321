"""Every parameter of the pipeline, with its default and its source (docs/architecture.md §2–5).

Where the paper (LANTERN, arXiv 2606.05182) is silent, the value is ours and says so. The tune-split figures that
chose our values are in docs/results/recall-tuning.md ("Parameter choices in config.py").
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from lantern import lazy_re

DEFAULT_SESSION = "default"  # the session of turns archived without one


def default_db_path() -> Path | str:
    """``$LANTERN_DB`` or ``~/.lantern/lantern.db``; a ``postgresql://`` URL in ``$LANTERN_DB`` is returned as the
    string it is (``is_server_url``), as is a value ``location_error`` refuses (a Path would fold its ``//``)."""
    env = os.environ.get("LANTERN_DB")
    if is_server_url(env) or location_error(env) is not None:  # a URL, or a value refused as it was written
        return env
    return Path(env) if env else Path.home() / ".lantern" / "lantern.db"


# ---------------------------------------------------------------- store locations (store/open.py picks the backend)
_SERVER_URL = lazy_re.compile(r"^postgres(?:ql)?://", re.IGNORECASE)


def is_server_url(location: str | os.PathLike[str] | None) -> bool:
    """Whether ``location`` names a PostgreSQL server (``postgresql://...`` or ``postgres://...``) rather than a
    SQLite file."""
    return isinstance(location, str) and bool(_SERVER_URL.match(location))


# a libpq keyword=value connection string: two or more "keyword=" pairs of libpq's connection keywords


def empty_file(path: Path) -> bool:
    """Whether ``path`` (or the file a symlink points to) is a zero-byte regular file: no database yet, though
    SQLite would take it for a new one. A WAL beside it does not make it a database: SQLite deletes the WAL of a
    zero-page database when it opens it."""
    try:
        return path.is_file() and path.resolve().stat().st_size == 0
    except OSError:
        return False


def location_error(location: str | os.PathLike[str] | None) -> str | None:
    """Why ``location`` (a ``--db`` value, a ``Lantern(path)``) names no database Lantern opens, None when it may
    name one: a server URL after white space (``" postgresql://..."``: that white space would make it a file path),
    or a libpq ``keyword=value`` connection string (two of libpq's keywords, or one secret keyword such as
    ``password=``: taken as a file name, it would be created under that name, password and all). The reason shows
    the value redacted (``redact_url``)."""
    if location is None:
        return None
    location = os.fspath(location)
    if not isinstance(location, str) or is_server_url(location):
        return None
    if location != location.strip() and is_server_url(location.strip()):
        return f"{redact_url(location.strip())!r} has white space before or after it: give the URL alone"
    named = _CONNINFO_KEYWORD.findall(location)
    if len(named) >= 2 or any(k.lower() in SECRET_PARAMETERS for k in named):  # a secret keyword: never a file name
        return (
            f"{redact_url(location)!r} is a libpq key=value connection string: give a SQLite file path or a URL, "
            "postgresql://USER:PASSWORD@HOST:PORT/DBNAME"
        )
    return None


def has_password(location: str | os.PathLike[str] | None) -> bool:
    """Whether ``location`` is a server URL that holds a secret: a non-empty userinfo password or the value of a
    secret query parameter (``SECRET_PARAMETERS``), as ``redact_url`` hides them."""
    return is_server_url(location) and any(end > start for start, end in _password_spans(str(location)))


def server_url(url: str) -> str:
    """``url`` with its scheme in lower case (``POSTGRES://`` -> ``postgres://``): URI schemes are case-insensitive
    (RFC 3986 §3.1) and ``is_server_url`` takes any case, but libpq recognizes only lower case. Any other string is
    returned unchanged."""
    found = _SERVER_URL.match(url)
    return found.group(0).lower() + url[found.end() :] if found else url


# every libpq connection parameter whose value is a secret: those PQconndefaults() marks "*" (password, sslpassword,
# oauth_client_secret; libpq 18) and the SCRAM keys it hides as debug options ("D"), which log in as a password does
SECRET_PARAMETERS = frozenset(
    {"password", "sslpassword", "oauth_client_secret", "scram_client_key", "scram_server_key"}
)

# userinfo: everything between ``scheme://`` and the LAST ``@`` (a password may hold ``@ / ? # :`` and spaces)
_USERINFO = lazy_re.compile(r"^(postgres(?:ql)?://)(.*)@", re.IGNORECASE | re.DOTALL)
# a query parameter's start: ``?`` or ``&``, its name (no ``? & =``), ``=``; overlapping starts are all found, so a
# ``?`` inside the userinfo does not hide the query's own ``?`` from the search
_QUERY_PARAMETER = lazy_re.compile(r"(?=[?&]([^?&=]*)=)")
_PARAMETER_NAME = lazy_re.compile(r"[A-Za-z_]\w*")


def _parameter_name(raw: str) -> str:
    """A query parameter's name as libpq reads it: percent-decoded (libpq decodes names as well as values, so
    ``pass%77ord`` is ``password``), then, for the comparison with ``SECRET_PARAMETERS``, stripped and lower-cased
    (libpq compares names exactly; hiding the value of ``PASSWORD=`` too costs nothing)."""
    from urllib.parse import unquote

    return unquote(raw, errors="replace").strip().lower()


def _password_spans(url: str) -> list[tuple[int, int]]:
    """Where ``url``'s secrets are, as (start, end) offsets: the userinfo password (after the userinfo's first
    ``:``, up to the last ``@``; empty for ``ann:@``) and the value of each query parameter in
    ``SECRET_PARAMETERS`` under any percent-encoding of its name (up to the next ``&name=`` whose decoded name is a
    parameter name, so a value holding ``&`` is hidden whole). Each is read on the URL as written (a password may
    hold what ends the other: ``?password=`` in a userinfo, ``@`` in a query value), so that masking all of them
    hides both. An empty value is a span too: a shown URL never tells an empty password from another."""
    spans = []
    found = _USERINFO.match(url)
    if found and ":" in found.group(2):
        spans.append((found.start(2) + found.group(2).index(":") + 1, found.end(2)))
    starts = [(m.start(), m.group(1)) for m in _QUERY_PARAMETER.finditer(url)]
    ends = [at for at, name in starts if url[at] == "&" and _PARAMETER_NAME.fullmatch(_parameter_name(name))]
    for at, name in starts:
        if _parameter_name(name) in SECRET_PARAMETERS:
            value = at + 1 + len(name) + 1
            spans.append((value, min((e for e in ends if e >= value), default=len(url))))
    return spans


# a keyword of a libpq key=value connection string (the common ones and every secret one), before its "="
_CONNINFO_KEYWORD = lazy_re.compile(
    r"(?:^|\s)("
    + "|".join(
        sorted(
            {"host", "hostaddr", "port", "dbname", "user", "sslmode", "options", "service", "connect_timeout"}
            | SECRET_PARAMETERS
        )
    )
    + r")\s*=",
    re.IGNORECASE,
)
# a secret keyword of a libpq key=value connection string and its value: single-quoted (backslash escapes), or up
# to the next white space (libpq, "Parameter Key Words")
_CONNINFO_SECRET = lazy_re.compile(
    r"((?:^|(?<=\s))(?:" + "|".join(sorted(SECRET_PARAMETERS)) + r")\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)",
    re.IGNORECASE,
)


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (``postgresql://ann:***@db:5432/lantern``), and the value of
    every secret query parameter too (``SECRET_PARAMETERS``, its name under any percent-encoding:
    ``?pass%77ord=***``): what errors, logs and ``stats`` show. An empty password shows as ``***`` as well. The
    userinfo is everything between ``scheme://`` (any case) and the last ``@``, so a password holding
    ``@ / ? # :``, spaces, brackets or a bad %-escape is hidden whole (an ``@`` in the query makes more of the URL
    hidden, never less; overlapping readings are hidden together). A server URL after leading white space is read
    as one; any other string (a file path, a libpq ``key=value`` connection string that ``--db`` does not take)
    has the value of each ``SECRET_PARAMETERS`` keyword hidden (``password=***``, a quoted value whole). A URL
    without a password, or a path without such a keyword, is unchanged."""
    if not is_server_url(url):
        stripped = url.lstrip()
        if stripped != url and is_server_url(stripped):
            return url[: len(url) - len(stripped)] + redact_url(stripped)
        return _CONNINFO_SECRET.sub(lambda m: m.group(1) + "***", url)
    merged: list[list[int]] = []
    for start, end in sorted(_password_spans(url)):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    for start, end in reversed(merged):
        url = url[:start] + "***" + url[end:]
    return url


def url_secrets(url: str) -> list[str]:
    """The secrets in a server ``url`` (the userinfo password, the values of its ``SECRET_PARAMETERS``), each as
    written and percent-decoded, longest first; [] for a URL without one or a path. Empty ones are left out."""
    if not is_server_url(url):
        return []
    from urllib.parse import unquote

    raw = [url[start:end] for start, end in _password_spans(url)]
    secrets = {v for r in raw for v in (r, unquote(r)) if v}
    return sorted(secrets, key=len, reverse=True)


_PIECE_SEPARATORS = lazy_re.compile(r"[@/?#:&=,;%\[\]\s\"'\\\0]+")
_QUOTED_TOKEN = lazy_re.compile(r'"[^"]*"|\'[^\']*\'')
LONG_PIECE = 4  # a piece of a password this long is removed wherever it appears in a driver's message (ours)


def scrub(text: str, *urls: str | os.PathLike[str] | None) -> str:
    """``text`` (a driver's error message: psycopg, libpq) with nothing of the passwords of ``urls`` left: each URL
    as written or as handed to the driver (``server_url``) becomes its ``redact_url`` form; each password, as
    written and percent-decoded, becomes ``***``; so does every quoted token (``"..."``, ``'...'``) that holds a
    piece of one (the text between the separators a URL parser may split it at: ``@ / ? # : & =`` ...; libpq
    quotes what it could not parse, e.g. ``invalid percent-encoded token: "s3cr%zzet"``) and every piece of
    ``LONG_PIECE`` characters or more anywhere. Paths and URLs without a password leave ``text`` unchanged."""
    for url in (str(u) for u in urls if u is not None and is_server_url(str(u))):
        secrets = url_secrets(url)
        if not secrets:
            continue
        text = text.replace("\0", "")  # the URL's place below; a driver's message holds no NUL
        for form in sorted({url, server_url(url)}, key=len, reverse=True):
            text = text.replace(form, "\0")
        pieces = {p for s in secrets for p in _PIECE_SEPARATORS.split(s) if p}
        for secret in (s for s in secrets if "\0" not in s):
            text = text.replace(secret, "***")
        text = _QUOTED_TOKEN.sub(
            lambda m, pieces=pieces: '"***"' if any(p in m.group(0) for p in pieces) else m.group(0), text
        )
        for piece in sorted(pieces, key=len, reverse=True):
            if len(piece) >= LONG_PIECE:
                text = text.replace(piece, "***")
        text = text.replace("\0", redact_url(url))
    return text


@dataclass(frozen=True)
class Config:
    # --- write path ---
    summary_message_chars: int = 500  # each message cut to 500 chars (docs/architecture.md §2.4)
    summary_max_chars: int = 1200  # whole summary capped (docs/architecture.md §2.4)
    # turns off the live branch of a Claude Code session file (the parentUuid chain: a rewind leaves the abandoned
    # attempt in the file). "skip" (default): never archived, and removed from the archive when the rewind is seen
    # after they were archived; "mark": kept in the sub-session <session>/abandoned-<id>, never as the session's
    # own history and with no facts (ours; archive/parse/claude_code.py, integrations/claude_code.py). The proxy
    # infers rewinds from what a client resends, so it always marks (compaction.py confirmed_rewinds)
    rewound: str = "skip"
    embed_max_tokens: int = 128  # embedder input cap (ours: MiniLM was trained on 128-token inputs; 256 costs 2x)
    # --- read path ---
    budget: int = 6000  # characters injected (docs/architecture.md §3.5)
    rrf_k: int = 60  # Cormack et al. 2009; paper eq. 3
    # MMR trade-off (Carbonell & Goldstein 1998; the paper's 0.7). 0.85 is ours: MemDaily repeats look-alike turns
    # once per trajectory, and at 0.7 the redundancy term buries the right one; 0.85 keeps some diversification.
    # Measured on the tune split: docs/results/recall-tuning.md, "Parameter choices in config.py"
    mmr_lambda: float = 0.85
    # candidates taken from each query signal (ours, tune split; the paper does not specify)
    signal_top_n: int = 100
    prf_docs: int = (
        10  # "prf" signal: RM3 feedback from the top 10 BM25 hits (recover/prf.py; Abdul-Jaleel et al. 2004)
    )
    prf_terms: int = 10  # "prf" signal: expansion terms added to the full-text query (recover/prf.py; tune split)
    # "time" signal: a date the query names, widened by 3 days each side (recover/timeframe.py; ours; tune split)
    time_slack_days: float = 3.0
    neighbour_seeds: int = 20  # "neighbour" signal: the turns next to the best 20 fused hits (ours; tune split)
    # "local" signal: the turns within 8 of the best 5 fused hits, same session (recover/local.py; ours; tune split)
    local_seeds: int = 5
    local_turns: int = 8
    # a multi-part question ("上司是做什么工作的？另外，论坛在哪里？") ranks the local window by each part's own vector,
    # interleaved, the local ranking fused with one vote per part (recover/decompose.py; ours; tune split, MemDaily 01)
    decompose: bool = True
    half_life_days: float = 7.0  # recency half-life T½ (paper eq. 2)
    min_excerpt_chars: int = 200  # smallest excerpt worth packing (ours)
    # the block grouped by session, one session line each, turns in order (recover/pack.py; ours): short chat turns
    # would spend a third of the budget on full headers (tune split)
    pack_group_sessions: bool = True
    entry_share: float = 1.0  # largest share of the budget one entry may take; longer ones are excerpted (ours)
    # length-aware packing (recover/pack.py; ours): before an entry is excerpted into what is left, the next 3 in MMR
    # order that fit whole in a quarter of that room are packed first (a short answer before a 4 KB statement's
    # excerpt); 0 turns it off
    pack_lookahead: int = 3
    max_query_terms: int = 64  # full-text/keyword query terms kept from a long query (ours)
    # the injection decision (recover/relevance.py decide; docs/architecture.md §3.6; ours, tune split,
    # docs/results/injection.md). Relevance.score: the best cosine over its model's floor (MiniLM 0.46, USE 0.34), or
    # the best candidate's idf-weighted coverage of the query's terms, whichever is larger. At or above clear_score
    # recover injects the full budget; from min_score up to it a short block of at most short_budget characters;
    # below min_score nothing. A compaction's proactive recovery is never held back. min_score 0 turns it off.
    # Tune split: answers withheld 1.4% (written sets, English and Chinese), LoCoMo facts 599 of 599 (estimate)
    min_score: float = 0.4
    clear_score: float = 0.8
    short_budget: int = 800
    # the paper's four signals, plus ours (each kept for what it added on the tune split): "prf" (RM3 feedback on the
    # full-text query, recover/prf.py), "time" (a date the query names, recover/timeframe.py), "neighbour" (the turns
    # next to the best hits, recover/neighbours.py), "local" (recover/local.py), "speaker" (recover/speaker.py) and
    # "semantic_e5": the multilingual-e5-small cosine ranking of the default embedder's CJK entries
    # (embed/__init__.py RoutedE5Embedder; absent with other embedders)
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
    # weighted RRF (ours; the paper weighs every signal 1), every weight chosen on the tune split. Importance at 0.25
    # keeps most of the gain of a lower weight and leaves reinforcement (c, σ) a voice in the ranking; neighbour at
    # 0.75, as a reply ranks on its question's merit and a higher weight costs recall@10
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
    # keyword signal: "jaccard" (docs/architecture.md §3.2), "overlap" or "idf" (recover/signals.py). The tune split
    # cannot choose between them (too few questions name a lookup hint), so the paper's jaccard stays
    keyword_score: str = "jaccard"
    use_mmr: bool = True
    # approximate nearest neighbours for the semantic signal (store/ann.py; HNSW, Malkov & Yashunin 2018, via usearch):
    # from this many rows on, candidates come from per-block HNSW graphs and are rescored exactly; 0: always, for
    # every query the graphs can answer (no exact search for a small mask). The threshold is ours, measured where
    # exact search stops being cheap (BENCHMARKS.md §19); $LANTERN_ANN_MIN_ROWS sets the default
    ann_min_rows: int = field(default_factory=lambda: int(os.environ.get("LANTERN_ANN_MIN_ROWS") or 50_000))
    ann_oversample: float = 4.0  # candidates asked of a graph per result wanted, before a mask's share (ours)
    # HNSW M, edges per node, and efConstruction (the paper's M 5-48). Ours: near-duplicate turns (a copied turn, a
    # retried command) form tight clusters that M 16 / ef 64 leave poorly linked: recall@10 0.77 vs 0.93 at 32 / 128
    # on 31k synthetic copies of real turns (BENCHMARKS.md §19), for a build 1.8x slower
    ann_connectivity: int = 32
    ann_expansion_add: int = 128
    ann_expansion_search: int = 64  # HNSW ef at search, raised to the candidates asked (usearch's default 64)
    # --- privacy (archive/redact.py; docs/privacy.md; ours) ---
    redact_patterns: tuple = ()  # extra secret patterns: (kind, regex) pairs; group "secret" or 1 is the secret
    redact_allow: tuple = ()  # values never redacted: exact strings, or "re:<regex>" matched on the whole value
    private_markers: tuple = (("<private>", "</private>"),)  # (open, close) spans removed before archiving
    # --- facts and layered context (docs/architecture.md §5; archive/facts.py, memory/context.py; ours) ---
    extract_facts: bool = True  # key/value facts by pattern at archive time, versioned in the facts table
    fact_notes: bool = True  # recovery marks superseded values in the block ("5433 until 14 Mar, now 5434")
    working_turns: int = 3  # Session working memory: last 3 turns verbatim (docs/architecture.md §5.1)
    # --- the LLM half (lantern/llm.py; off unless llm_base_url or $LANTERN_LLM_BASE_URL is set) ---
    llm_base_url: str | None = None  # OpenAI-compatible API root (".../v1"); receives conversation text (redacted)
    llm_model: str | None = None  # model name sent to llm_base_url (key: $LANTERN_LLM_API_KEY, never stored)
    llm_timeout_s: float = 30.0  # seconds per LLM request
    llm_max_tokens: int = 256  # the cap of each LLM answer, in tokens
    llm_json_mode: str = "schema"  # how JSON answers are constrained: schema | object (llama-cpp-python) | off
    rerank_top_n: int = 20  # candidates shown to the rerank call: the fused top N (ours)
    rerank_excerpt_chars: int = 300  # each shown as its most query-relevant window of this many characters (ours)
    rerank_prompt_chars: int = 8_000  # the whole rerank prompt at most this long (ours: ~2k tokens)
    # --- vectors filled after the archive commit (archive/fill.py) ---
    fill_on_recover: int = 32  # pending e5 blocks a recovery fills first, newest first (ours: ~0.3 s at most)
    # above 0: English turns get their e5 block after the commit (archive/fill.py) and semantic_e5 has this RRF
    # weight for a query not routed to USE; 0: English turns get none, e5 ranks CJK turns only (for any query, at
    # semantic_e5's weight). 0 because no weight cleared the tune split's margin (docs/results/e5-english.md)
    e5_english_weight: float = 0.0
    gist_every: int = 5  # Session core gist refreshed every 5 turns (docs/architecture.md §5.2)
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

    def without_models(self) -> Config:
        """This configuration for a recovery that loads no embedding model (a cold hook's answer, docs/daemon.md
        "Cold start"): the signals that rank by the query's vector (``MODEL_SIGNALS``) off, so the query is not
        embedded, and no vector filled before it ranks (``fill_on_recover`` 0). The injection decision then reads
        the coverage of the query's terms alone (recover/relevance.py: the best cosine is 0)."""
        return replace(self, signals=tuple(s for s in self.signals if s not in MODEL_SIGNALS), fill_on_recover=0)


# the signals that rank by the query's vector (recover/rank.py ``QueryPlan.needs_vector``): semantic, the blocks ranked
# apart, a named date's window (ranked by cosine inside it) and local (by cosine near the best hits)
MODEL_SIGNALS = frozenset({"semantic", "semantic_e5", "time", "local"})
DEFAULT = Config()
