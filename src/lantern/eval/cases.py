"""A dataset archived (cached per dataset checksum and embedder id), compacted into cases, and systems run over them.

history --archive (cached)--> store; compaction -> lost facts -> one Case each; per system, per case -> a metrics row
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from lantern.archive.chunk import chunk
from lantern.config import Config
from lantern.eval import metrics
from lantern.eval.compaction import compact, lost_turns
from lantern.eval.datasets import LOADER_VERSIONS, Dataset, History
from lantern.eval.lookahead import recovery_query
from lantern.eval.outcome import Pool, System
from lantern.eval.systems import MemoEmbedder, failure_cause, memo_embedder, run_system
from lantern.model import Turn

ARCHIVE_BATCH = 64  # turns per archive() call when building the cache (ours)


@dataclass
class Prepared:
    history: History
    turns: list[Turn]
    entry_ids: list[int]  # per turn (a deduplicated turn shares the id of its first copy)
    turn_of: dict[str, int]  # evidence id -> turn index
    lantern: Any = None  # the history's own store
    entry_sessions: dict[int, set[str]] = field(default_factory=dict)  # entry id -> session labels of its turns


def turn_session(history: History, turn: Turn) -> str:
    """A turn's session label for session-level metrics: ``History.sessions`` of its first message id, else the
    turn's session, else the history id."""
    for m in turn.messages:
        label = history.sessions.get(m.meta.get("dia_id"))
        if label:
            return label
    return turn.session or history.id


def entry_sessions(history: History, turns: Sequence[Turn], entry_ids: Sequence[int]) -> dict[int, set[str]]:
    """entry id -> the session labels of every turn archived as it (a deduplicated copy adds its own session)."""
    out: dict[int, set[str]] = {}
    for turn, eid in zip(turns, entry_ids):
        out.setdefault(eid, set()).add(turn_session(history, turn))
    return out


def history_turns(history: History) -> list[Turn]:
    turns = chunk(history.messages, None)
    for i, t in enumerate(turns):
        t.index = i
    return turns


#: The modules that decide what an archived row holds (its text, summary, tags, class, redaction, facts, schema,
#: full-text windows and vector): a cached database built by other versions of them is stale.
WRITE_PATH_MODULES = (
    "archive/pipeline.py",
    "archive/fill.py",
    "store/vectors.py",
    "archive/chunk.py",
    "archive/summarize.py",
    "text/tags.py",
    "text/cjk.py",
    "text/windows.py",
    "archive/classify.py",
    "archive/redact.py",
    "archive/facts.py",
    "text/fact_keys.py",
    "store/facts.py",
    "store/migrations.py",
    "store/fulltext.py",
    "embed/__init__.py",
)


def write_path_version(root: Path | None = None, modules: Sequence[str] = WRITE_PATH_MODULES) -> str:
    """12 hex digits of the sha256 of the ``modules`` (paths under the ``lantern`` package ``root``): part of the
    cache key, so a change to fact extraction or tagging re-archives the histories instead of scoring stores built
    by other versions of them (the embedder id and the loader version alone would not see such a change)."""
    import hashlib

    root = root or Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for name in modules:
        h.update(name.encode() + b"\0" + (root / name).read_bytes())
    return h.hexdigest()[:12]


def cache_folder(dataset: Dataset, cache_dir: Path, embedder_id: str) -> Path:
    """The folder of ``dataset``'s cached databases for one embedder: (name, sha256, embedder id, loader version,
    ``write_path_version``)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", embedder_id)
    return (
        cache_dir
        / f"{dataset.name}-{dataset.sha256[:16]}-{safe}-v{LOADER_VERSIONS.get(dataset.name, 1)}-w{write_path_version()}"
    )


def history_paths(folder: Path, history: History) -> tuple[Path, Path]:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", history.id)
    return folder / f"{name}.db", folder / f"{name}.json"


def open_history(h: History, folder: Path, memo: MemoEmbedder) -> Prepared:
    """A history's cached database (built by ``prepare``), opened with ``memo`` as its read-path embedder."""
    from lantern.api import Lantern

    turns = history_turns(h)
    db, side = history_paths(folder, h)
    ids: list[int] = json.loads(side.read_text())
    if len(ids) != len(turns) or not db.exists():
        raise RuntimeError(f"{h.id}: the cached database in {folder} is missing or stale; run prepare first")
    lantern = Lantern(db, memo.inner)
    lantern.embedder = memo
    turn_of = {d: i for i, t in enumerate(turns) for m in t.messages if (d := m.meta.get("dia_id")) is not None}
    return Prepared(h, turns, ids, turn_of, lantern, entry_sessions(h, turns, ids))


def prepare(
    dataset: Dataset,
    cache_dir: Path,
    embedder: str | None = None,
    progress: Callable[[str, int, int], None] | None = None,
):
    """Open (building what is missing) the cached databases of ``dataset``: a folder per (dataset sha256, embedder
    id) holding one database per history (a store per conversation, as in real use: recovery searches the whole
    store), each with a sidecar JSON of its per-turn entry ids. Returns ({history id: Prepared}, archive latencies
    in ms per turn, measured on the batches archived by this call)."""

    memo = memo_embedder(embedder)
    folder = build(dataset, cache_dir, memo, progress, archive_ms := [])
    return {h.id: open_history(h, folder, memo) for h in dataset.histories}, archive_ms


def build(
    dataset: Dataset,
    cache_dir: Path,
    memo: MemoEmbedder,
    progress: Callable[[str, int, int], None] | None,
    archive_ms: list[float],
) -> Path:
    """Archive every history of ``dataset`` whose cached database is missing or stale (``memo``'s embedder);
    appends the per-turn archive latency (ms) of each batch to ``archive_ms``. Returns the cache folder."""
    from lantern.api import Lantern

    emb = memo.inner
    folder = cache_folder(dataset, cache_dir, emb.id)
    folder.mkdir(parents=True, exist_ok=True)
    for h in dataset.histories:
        turns = history_turns(h)
        db, side = history_paths(folder, h)
        built = side.exists() and db.exists()  # a history without turns has a database too (and "[]")
        ids: list[int] = json.loads(side.read_text()) if built else []
        if built and len(ids) == len(turns):
            continue
        for f in (db, side):
            f.unlink(missing_ok=True)  # an interrupted or stale build: start this history over
        ids = []
        with Lantern(db, emb) as lantern:
            for start in range(0, len(turns), ARCHIVE_BATCH):
                batch = turns[start : start + ARCHIVE_BATCH]
                t0 = time.perf_counter()
                res = lantern.archive([m for t in batch for m in t.messages], session=h.id)
                archive_ms.append((time.perf_counter() - t0) * 1000 / max(len(batch), 1))
                if len(res.entry_ids) != len(batch):
                    raise RuntimeError(f"{h.id}: archive returned {len(res.entry_ids)} entries for {len(batch)} turns")
                ids.extend(res.entry_ids)
                if progress:
                    progress(h.id, len(ids), len(turns))
            lantern.fill_vectors()  # every deferred block (archive/fill.py): the store as a user's would be by then
        side.write_text(json.dumps(ids))
    return folder


@dataclass
class Case:
    """One lost fact of one history: what every system is asked."""

    history: str
    fact_id: str
    category: str
    question: str
    relevant: list[int]  # entry ids of the lost evidence turns
    relevant_sessions: list[str]
    match: str = "all"  # Fact.match
    answer: str = ""  # the reference answer (the reinforce+answers system's next assistant message)


def cases_for(p: Prepared, method: str, keep: int, summarizer=None) -> tuple[list[Case], Pool, dict[str, int]]:
    """The lost facts of one history under a compaction, the candidate pool (live window excluded), and counts.
    A history with ``query="context"`` asks every fact with the compacted context's tail (look-ahead protocol)."""
    comp = compact(method, p.turns, keep, p.history.summaries, summarizer)
    tail = recovery_query([p.turns[i] for i in comp.kept], comp.summary) if p.history.query == "context" else None
    excluded = sorted({p.entry_ids[i] for i in comp.kept})
    counts = {"facts": len(p.history.facts), "no_evidence": 0, "kept": 0, "lost": 0}
    cases: list[Case] = []
    for f in p.history.facts:
        if not any(e in p.turn_of for e in f.evidence):
            counts["no_evidence"] += 1
            continue
        turns = lost_turns(f, p.turn_of, comp)
        relevant = [p.entry_ids[t] for t in turns if p.entry_ids[t] not in excluded]
        if not relevant:
            counts["kept"] += 1
            continue
        counts["lost"] += 1
        sessions = list(dict.fromkeys(turn_session(p.history, p.turns[t]) for t in turns))
        cases.append(
            Case(
                p.history.id,
                f.id,
                f.category,
                f.question if tail is None else tail,
                list(dict.fromkeys(relevant)),
                sessions,
                f.match,
                f.answer,
            )
        )
    return cases, Pool(None, excluded, [], question=tail is None), counts


def compaction_time(p: Prepared) -> datetime | None:
    """When the history is compacted: one second after its latest archived turn (UTC), or None when no turn has a
    time. Recovery measures recency from it (``as_of``), not from the wall clock: runs are reproducible (ours)."""
    index = p.lantern.index
    index.refresh()
    times = index.time[index.positions(sorted(set(p.entry_ids)))] if p.entry_ids else np.empty(0)
    times = times[np.isfinite(times) & (times > 0)]
    return datetime.fromtimestamp(float(times.max()) + 1.0, tz=timezone.utc) if len(times) else None


def _pool_entries(lantern, p: Prepared, excluded: list[int]):
    ex = set(excluded)
    order = list(dict.fromkeys(i for i in p.entry_ids if i not in ex))
    found = lantern.store.entries(order, tags=False)
    return [found[i] for i in order if i in found]


def cases_of(
    prepared: dict[str, Prepared],
    histories: Sequence[History],
    method: str,
    keep_of: Callable[[Prepared], int],
    summarizer=None,
    second: dict[str, Prepared] | None = None,
) -> tuple[list[Case], dict[str, Pool], dict[str, dict[str, int]]]:
    """Every history's lost facts under one compaction (``keep_of``: turns kept per history), pools and counts."""
    all_cases: list[Case] = []
    pools: dict[str, Pool] = {}
    counts: dict[str, dict[str, int]] = {}
    for h in histories:
        p = prepared[h.id]
        cases, pool, c = cases_for(p, method, keep_of(p), summarizer)
        pool.entries = _pool_entries(p.lantern, p, pool.excluded)
        pool.as_of = compaction_time(p)
        pool.second = second[h.id].lantern if second else None
        pools[h.id], counts[h.id] = pool, c
        all_cases.extend(cases)
    return all_cases, pools, counts


def run_cases(
    systems: Sequence[System],
    cases: Sequence[Case],
    pools: dict[str, Pool],
    prepared: dict[str, Prepared],
    budget: int,
    progress: Callable[[str, int, int], None] | None = None,
    label: str = "",
) -> dict[str, list[dict]]:
    """Per system, one metrics row per case; ``progress(task label, total added, steps done)`` per system."""
    rows: dict[str, list[dict]] = {}
    for system in systems:
        task = f"{label}{system.name:>16}"
        if progress:
            progress(task, len(cases), 0)
        rows[system.name] = []
        for case in cases:
            p = prepared[case.history]
            pool = pools[case.history]
            o = run_system(system, p.lantern, case.question, pool, budget, reply=case.answer)
            row = case_row(case, o, system, p)
            if not pool.question:  # a compaction's recovery: the relevance floor never applies (run.floor_sweep)
                row["relevance"] = None
            rows[system.name].append(row)
            if progress:
                progress(task, 0, 1)
    return rows


def config_json(config: Config | None) -> dict | None:
    if config is None:
        return None
    d = asdict(config)
    d["signals"] = list(d["signals"])
    return d


def case_row(case: Case, o, system: System, p: Prepared) -> dict:
    """One metrics row. ``match="all"`` facts: recovered when every lost evidence turn is packed, turn recall
    over those turns. ``match="answer"`` facts (look-ahead tokens): recovered when the token is inside the block,
    the evidence turns are alternatives (recall@k = hit@k, nDCG with an ideal of one)."""
    packed = set(o.packed)
    sessions = [p.entry_sessions.get(i, set()) for i in o.ranking[:10]]
    alternatives = case.match == "answer"
    recall = metrics.hit_at_k if alternatives else metrics.recall_at_k
    recovered = case.answer in o.text if alternatives else metrics.fact_recovered(packed, case.relevant)
    return {
        "history": case.history,
        "fact": case.fact_id,
        "category": case.category,
        "recovered": recovered,
        "recall@5": recall(o.ranking, case.relevant, 5),
        "recall@10": recall(o.ranking, case.relevant, 10),
        "session_recall@5": metrics.session_recall_at_k(sessions[:5], case.relevant_sessions, 5),
        "session_recall@10": metrics.session_recall_at_k(sessions, case.relevant_sessions, 10),
        "ndcg@10": metrics.ndcg_at_k(o.ranking, case.relevant, 10, alternatives),
        "mrr": metrics.reciprocal_rank(o.ranking, case.relevant),
        "chars": o.chars,
        "ms": o.ms,
        "cause": None if recovered else failure_cause(o, case.relevant, system, alternatives),
        "relevance": o.relevance,
        "reason": o.reason,
        # what the injection decision's short block would recover (an estimate: eval/outcome.py short_prefix)
        "recovered_short": (
            recovered and any(i in case.relevant for i in o.short_packed)
            if alternatives
            else metrics.fact_recovered(set(o.short_packed), case.relevant)
        ),
    }
