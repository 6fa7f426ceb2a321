"""What the evaluation asks a system and what it gets back: ``System``, ``Pool``, ``Outcome``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lantern.config import Config
from lantern.model import Entry

PACKED = ("packed", "excerpt")


@dataclass(frozen=True)
class System:
    name: str
    kind: str  # "lantern" (the pipeline with ``config``), "dual" (the pipeline plus a second store's semantic
    # ranking as a fifth signal, ``second_semantic``), or a baseline: recency, grep, overlap, random
    config: Config | None = None
    note: str = ""


@dataclass
class Pool:
    """One history's candidates: the session to search (None: the whole store), the excluded (live) entry ids,
    and the other entries with their full text in conversation order (oldest first). ``as_of``: the moment of the
    compaction, one second after the history's latest turn (None when no turn has a time): recovery measures
    recency from it instead of the wall clock, so every run of the evaluation gives the same scores."""

    session: str | None
    excluded: list[int]
    entries: list[Entry]
    second: Any = None  # the history's store built with a second embedder (same turns, same entry ids), or None
    as_of: datetime | None = None
    question: bool = True  # False: each fact is asked with the compacted context's tail, a compaction's recovery,
    # which the relevance floor never holds back (docs/architecture.md §3.6)

    @property
    def min_score(self) -> float | None:
        """The ``recover(min_score=...)`` of this pool's recoveries: the configured floor for questions, none for
        a compaction's tail."""
        return None if self.question else 0.0


@dataclass
class Outcome:
    ranking: list[int]  # entry ids in the order handed to packing
    packed: list[int]  # entry ids inside the block
    chars: int
    ms: float
    text: str = ""  # the injected block
    fused: list[int] = field(default_factory=list)  # pipeline systems: the fused order before MMR
    verdicts: dict[int, str] = field(default_factory=dict)  # pipeline systems: every candidate's verdict
    relevance: dict | None = None  # pipeline systems: Recovery.relevance (recover/relevance.py), as JSON
    reason: str | None = None  # pipeline systems: Recovery.reason (None: a full block)
    # pipeline systems: the packed entries, in MMR order, whose characters sum to at most Config.short_budget: an
    # estimate (block headers not counted) of what the injection decision's short block would hold, for its
    # calibration (benchmarks/injection_calibration.py)
    short_packed: list[int] = field(default_factory=list)


def outcome_of(rec, ms: float, short_budget: int = 800) -> Outcome:
    """The Outcome of a pipeline Recovery: MMR order, packed ids, fused order, verdicts, the decision's reason and
    the packed prefix a short block of ``short_budget`` characters would hold (``short_prefix``)."""
    ranked = [c for c in rec.candidates if not c.verdict.startswith("excluded:")]
    order = sorted(ranked, key=lambda c: c.mmr_order if c.mmr_order is not None else 1 << 30)
    return Outcome(
        ranking=[c.entry.id for c in order],
        packed=[e.id for e in rec.entries],
        chars=rec.chars,
        ms=ms,
        text=rec.text,
        fused=[c.entry.id for c in ranked],
        verdicts={c.entry.id: c.verdict for c in ranked},
        relevance=rec.relevance.to_json() if rec.relevance is not None else None,
        reason=rec.reason,
        short_packed=short_prefix(order, short_budget),
    )


def short_prefix(order: list, budget: int) -> list[int]:
    """The ids of the packed candidates of ``order`` (MMR order) while their packed characters sum to at most
    ``budget``."""
    out, used = [], 0
    for c in order:
        if c.verdict in ("packed", "excerpt"):
            used += c.chars
            if used > budget:
                break
            out.append(c.entry.id)
    return out
