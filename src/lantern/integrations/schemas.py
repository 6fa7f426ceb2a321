"""The JSON shapes the integrations return (pydantic models): the REST API's response schemas and the MCP tools'
output schemas are the same."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ArchiveResponse(BaseModel):
    session: str
    added: int
    duplicates: int
    skipped: int
    redacted: int
    entry_ids: list[int]
    warnings: list[str]


class RecoveredEntryOut(BaseModel):
    id: int
    session: str
    turn: int
    score: float
    text: str


class RelevanceOut(BaseModel):
    score: float = Field(..., description="The best evidence in multiples of the calibrated floors (1: clear).")
    cosine: float
    coverage: float = Field(..., description="Share of the query's idf weight the best candidate holds, 0..1.")
    model: str
    entries: int = Field(..., description="Entries in the store.")
    terms: int
    unheld_names: list[str] = Field(
        default_factory=list,
        description="The names the query holds when no best candidate holds any of them (at most the short block).",
    )
    min_score: float = Field(..., description="The floor below which nothing is injected (0: none).")


class RecoverResponse(BaseModel):
    text: str = Field(..., description="The block to inject (at most budget characters).")
    chars: int
    reason: str | None = Field(
        None,
        description="Why the block is empty or shortened: empty_query, nothing_archived, no_match, below_floor, "
        "uncertain (a short block of the best evidence) or budget; null for a full block.",
    )
    detail: str = Field("", description="The figures behind the reason, in words.")
    relevance: RelevanceOut | None = None
    entries: list[RecoveredEntryOut]


class LossOut(BaseModel):
    lost: int = Field(
        ..., description="Specifics of the replaced turns that neither the summary nor the live context states."
    )
    kept: int = Field(..., description="Specifics of the archived turns the summary or the live context still states.")
    packed: int = Field(..., description="Lost specifics in the block (packed, or held by a packed one).")
    by_type: dict[str, dict[str, int]] = Field(..., description="Per type (path, command, flag, ...): lost, packed.")
    items: list[dict[str, Any]] = Field(..., description="The packed items: value, type, weight, turn, entry, seen.")
    cut: list[dict[str, Any]] = Field(..., description="The heaviest items not packed.")


class CompactionRecoverResponse(RecoverResponse):
    loss: LossOut | None = Field(
        None, description="What the compaction lost, by type (zero counts when nothing was archived)."
    )


class HitOut(BaseModel):
    id: int
    session: str
    turn: int
    score: float = Field(..., description="Fused (RRF) score.")
    ranks: dict[str, int] = Field(..., description="Rank of the entry in each signal that found it.")
    summary: str


class SearchResponse(BaseModel):
    hits: list[HitOut]


class ForgetResponse(BaseModel):
    # "erased": false and "remaining_bytes" are added only when a reader kept the deleted text's pages in the file
    model_config = {"extra": "allow"}
    forgotten: int


class FeedbackResponse(BaseModel):
    updated: int


class StatsResponse(BaseModel):
    model_config = {"extra": "allow"}
    path: str
    entries: int
    sessions: int
    embedder: str | None
    dim: int
    user: str = ""


class ErrorResponse(BaseModel):
    error: str
