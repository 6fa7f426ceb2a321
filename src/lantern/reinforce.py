"""Reinforcement: confidence c and success rate σ learned from recoveries (paper Appendix D; docs/architecture.md §4).

After each recovery (``Lantern.recover`` with ``Config.reinforce``), in ONE transaction with its access bump:

==================================  ===================================================  ====================
what                                update                                               source
==================================  ===================================================  ====================
recovered (packed) entry            c ← min(1, c + 0.15)                                 paper Appendix D
candidate examined, not recovered   c ← max(0, c − 0.02)                                 paper Appendix D
recovered entry, judged useful      σ ← (1 − α)·σ + α·1,  α = 0.2                        EMA: paper; α ours
recovered entry, judged not useful  σ ← (1 − α)·σ + α·0                                  EMA: paper; α ours
c < 0.15                            pruned                                               paper Appendix D
==================================  ===================================================  ====================

A candidate counts as examined when packing reached it in MMR order (it has an MMR turn) and cut it, for the budget
or as a near-duplicate (ours: the paper says "candidates not selected"). The lower-ranked candidates packing never
reached are left alone: with 100 candidates per signal, ~300 per recovery, decaying all of them would prune an
entry after ~40 recoveries in which it was merely a low-ranked candidate, and rewrite ~300 rows per recovery.

Usefulness (ours; the paper says "proved useful" without a test): a recovery is kept as *pending* (table
``recoveries``) until the next assistant message archived in its session (any session when it was unscoped);
each recovered entry is useful when that message reuses one of the entry's lookup hints (the specific tokens
of text/tags.py: paths, ports, identifiers, versions, ...), i.e. a hint term of the entry is among the
``query_terms`` of the message. An entry with no hints is not judged. ``Lantern.feedback(ids, useful)`` sets
usefulness explicitly. The pending table lives in the database, so the recovering process and the archiving
process may differ.

Pruned entries (c < 0.15) are never deleted. They leave the importance signal (no importance rank) and
proactive recovery at compaction (``recover(..., proactive=True)``, as ``Compaction.recover`` does), except
when the query names one of their lookup hints exactly (keyword signal): a port or path asked for by name is
still found. Explicit queries (``recover``, ``search``) still find them through the semantic, full-text and
keyword signals. c and σ enter I(e) = R·F·D·c·σ (paper eq. 2; recover/signals.py).
"""

from __future__ import annotations

import json
import sqlite3
import time as _time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lantern.store import reinforcement as rows
from lantern.text.tags import query_terms

if TYPE_CHECKING:  # numpy is imported by the reads that rank: a text-first archive judges replies without it
    import numpy as np

CONFIDENCE_GAIN = 0.15  # paper Appendix D
CONFIDENCE_DECAY = 0.02  # paper Appendix D
PRUNE_BELOW = 0.15  # paper Appendix D
SUCCESS_ALPHA = 0.2  # ours (paper: an EMA, α unspecified): about the last 5 judgements carry most weight
MAX_PENDING = 256  # pending recoveries kept; older ones are dropped unjudged (ours: bounds the table and the scan)
WRITE_WAIT_S = 2.0  # ours: seconds a recovery waits for the write lock of its reinforcement before skipping it

__all__ = [
    "CONFIDENCE_DECAY",
    "CONFIDENCE_GAIN",
    "PRUNE_BELOW",
    "SUCCESS_ALPHA",
    "WRITE_WAIT_S",
    "Rates",
    "apply_feedback",
    "decayed",
    "is_useful",
    "pending_count",
    "pruned",
    "pruned_count",
    "record_recovery",
    "record_use",
    "reinforced",
    "resolve_pending",
    "success_ema",
    "useful_entries",
]


@dataclass(frozen=True)
class Rates:
    """The reinforcement parameters (``Config`` carries them): gain and decay of c, α of the σ EMA, prune
    threshold."""

    gain: float = CONFIDENCE_GAIN
    decay: float = CONFIDENCE_DECAY
    alpha: float = SUCCESS_ALPHA
    prune_below: float = PRUNE_BELOW


# ---------------------------------------------------------------- the rules (pure)
def reinforced(c: float, gain: float = CONFIDENCE_GAIN) -> float:
    """c of a recovered entry: min(1, c + 0.15) (paper Appendix D)."""
    return min(1.0, c + gain)


def decayed(c: float, decay: float = CONFIDENCE_DECAY) -> float:
    """c of a candidate that was not recovered: max(0, c − 0.02) (paper Appendix D; the floor at 0 is ours)."""
    return max(0.0, c - decay)


def success_ema(sigma: float, useful: bool, alpha: float = SUCCESS_ALPHA) -> float:
    """σ ← (1 − α)·σ + α·[useful]: the exponential moving average of usefulness (paper Appendix D; α = 0.2 ours).
    Stays in [0, 1] for σ in [0, 1] and α in [0, 1]."""
    return (1.0 - alpha) * sigma + alpha * (1.0 if useful else 0.0)


def pruned(confidence: np.ndarray | float, prune_below: float = PRUNE_BELOW) -> np.ndarray | bool:
    """Whether c < 0.15 (paper Appendix D): elementwise for an array."""
    if getattr(confidence, "ndim", 0) == 0:  # a number (numpy's scalars too)
        return confidence < prune_below
    import numpy as np

    return np.asarray(confidence) < prune_below


def is_useful(hints: Iterable[str], reply_terms: set[str]) -> bool | None:
    """Whether a reply reuses one of an entry's lookup hints: some hint term is among the reply's
    ``query_terms``. None when the entry has no hints (nothing specific to reuse: not judged). Ours."""
    hints = list(hints)
    if not hints:
        return None
    return any(h in reply_terms for h in hints)


# ---------------------------------------------------------------- applied to the store (SQL: store/reinforcement.py)
def record_recovery(
    store,
    session: str | None,
    recovered: Sequence[int],
    missed: Sequence[int],
    rates: Rates = Rates(),
    now: float | None = None,
    user: str = "",
    wait: float | None = None,
) -> dict[int, tuple[float, float]]:
    """Apply one recovery in ONE transaction: access_count + 1 and c ← min(1, c + gain) for ``recovered``,
    c ← max(0, c − decay) for ``missed`` (candidates examined and cut), and a pending row in ``recoveries`` for the
    usefulness check, kept for the next assistant message of the same ``user`` (lantern/scope.py) and session.
    ``wait``: seconds to wait for the write lock (``Store.transaction``; default its usual retries). Returns
    {entry id: (c, σ)} as stored, for the in-process index. Raises sqlite3 errors (read-only database, lock not
    obtained); nothing is written then."""
    recovered = list(dict.fromkeys(int(i) for i in recovered))
    gained = set(recovered)
    missed = [i for i in dict.fromkeys(int(i) for i in missed) if i not in gained]
    if not recovered and not missed:
        return {}
    out: dict[int, tuple[float, float]] = {}
    with store.transaction(wait) as db:
        store.bump_access(recovered, db)
        for entry_id, c, sigma in rows.read_columns(db, recovered + missed, "confidence, success"):
            out[entry_id] = (reinforced(c, rates.gain) if entry_id in gained else decayed(c, rates.decay), sigma)
        rows.write_confidence(db, {i: c for i, (c, _) in out.items()})
        if recovered:
            rows.add_pending(db, session, recovered, now if now is not None else _time.time(), user, MAX_PENDING)
    return out


def record_use(store, index, config, recovery, session: str | None, scope) -> None:
    """What one recovery (``Lantern.recover``) writes, in one transaction: with ``config.reinforce``,
    ``record_recovery`` of its packed entries and of the candidates packing examined and cut (an MMR turn, a
    ``cut:`` verdict), at ``config``'s rates, pending for ``scope``'s user in ``session``; without it, only the
    packed entries' access counts. The in-process ``index`` then takes the new (c, σ) and the access. Waits
    ``WRITE_WAIT_S`` seconds for the write lock; raises the store's write errors (nothing written, the index
    untouched)."""
    packed = [e.id for e in recovery.entries]
    if config.reinforce:
        missed = [c.entry.id for c in recovery.candidates if c.verdict.startswith("cut:") and c.mmr_order is not None]
        rates = Rates(config.confidence_gain, config.confidence_decay, config.success_alpha, config.prune_below)
        index.set_reinforcement(
            record_recovery(store, session, packed, missed, rates, user=scope.user, wait=WRITE_WAIT_S)
        )
    elif packed:
        store.bump_access(packed, wait=WRITE_WAIT_S)
    if packed:
        index.note_access(packed)


def _session_matches(pending: str | None, archived: str) -> bool:
    return pending is None or archived == pending or archived.startswith(pending + "/")


def resolve_pending(
    db: sqlite3.Connection, replies: Sequence[tuple[str, str, str]], alpha: float = SUCCESS_ALPHA
) -> dict[int, tuple[float, float]]:
    """Judge the pending recoveries answered by ``replies`` — (session, assistant text, user) of newly archived
    turns, in order — inside the caller's open transaction ``db``. The first reply of the same user in a matching
    session resolves a pending recovery: σ of each recovered entry with hints moves by ``success_ema``; the judged
    recovery is deleted (its only use is this judgement). Returns {entry id: (c, σ)} of the entries updated."""
    replies = [(s, t, u) for s, t, u in replies if t and t.strip()]
    if not replies:
        return {}
    waiting = rows.pending(db)
    if not waiting:
        return {}
    terms_of: dict[int, set[str]] = {}
    judged: list[tuple[int, bool]] = []
    done: list[int] = []
    for rec_id, session, ids, user in waiting:
        reply = next((i for i, (s, _, u) in enumerate(replies) if u == user and _session_matches(session, s)), None)
        if reply is None:
            continue
        if reply not in terms_of:
            terms_of[reply] = set(query_terms(replies[reply][1]))
        for entry_id, hints_json in rows.read_columns(db, ids, "hints"):
            useful = is_useful(json.loads(hints_json), terms_of[reply])
            if useful is not None:
                judged.append((entry_id, useful))
        done.append(rec_id)
    rows.delete_pending(db, done)
    return _apply_usefulness(db, judged, alpha)


def _apply_usefulness(
    db: sqlite3.Connection, judged: Sequence[tuple[int, bool]], alpha: float
) -> dict[int, tuple[float, float]]:
    """σ EMA for each (entry id, useful) in order (an entry judged twice moves twice)."""
    if not judged:
        return {}
    ids = list(dict.fromkeys(i for i, _ in judged))
    state = {i: (c, s) for i, c, s in rows.read_columns(db, ids, "confidence, success")}
    for entry_id, useful in judged:
        if entry_id in state:
            c, s = state[entry_id]
            state[entry_id] = (c, success_ema(s, useful, alpha))
    rows.write_success(db, {i: s for i, (_, s) in state.items()})
    return state


def apply_feedback(
    store,
    entry_ids: Sequence[int],
    useful: bool,
    alpha: float = SUCCESS_ALPHA,
    where: tuple[str, Sequence] | None = None,
) -> dict[int, tuple[float, float]]:
    """Explicit usefulness for ``entry_ids`` (``Lantern.feedback``), one transaction: σ ← EMA(σ, useful).
    ``where``: an SQL condition on ``entries`` and its parameters (the caller's scope, lantern/scope.py
    ``scope_where``);
    ids outside it are ignored like unknown ones. Returns {entry id: (c, σ)} of the entries updated."""
    ids = list(dict.fromkeys(int(i) for i in entry_ids))
    with store.transaction() as db:
        if where is not None and ids:
            ids = rows.in_scope(db, ids, where)
        return _apply_usefulness(db, [(i, bool(useful)) for i in ids], alpha)


def useful_entries(store, entry_ids: Sequence[int], reply: str) -> list[int]:
    """The entries among ``entry_ids`` that ``reply`` uses by the usefulness test (``is_useful``), in order."""
    terms = set(query_terms(reply))
    hints = dict(store.read_columns(list(entry_ids), "hints"))
    return [i for i in entry_ids if i in hints and is_useful(json.loads(hints[i]), terms)]


def pruned_count(store, prune_below: float = PRUNE_BELOW, where: tuple[str, list] = ("1 = 1", [])) -> int:
    """How many entries are pruned (c below the threshold), among those ``where`` (a ``scope_where``) selects."""
    return store.pruned_count(prune_below, where)


def pending_count(store, user: str | None = None) -> int:
    """How many recoveries still wait for the next assistant message of their session (of ``user``; None: any)."""
    return store.pending_recovery_count(user)


def assistant_text(turn) -> str:
    """The assistant messages' text of a turn: what the usefulness check reads."""
    return "\n".join(m.text for m in turn.messages if m.role == "assistant" and m.text)
