"""The JSON shapes the integrations take and return (pydantic), written once for both faces: each argument of a
tool or endpoint as an annotated type (its bounds and description), the REST API's request bodies built from them
and the MCP tools' parameters declared with them; the REST API's response schemas are the MCP tools' output
schemas."""

from __future__ import annotations

from typing import Annotated, Any, Optional

from pydantic import BaseModel, Field, StrictBool, StrictInt, StrictStr  # strict: true is no entry id, "2" no count

from lantern.integrations.service import MAX_BUDGET, MAX_K

# ---------------------------------------------------------------------------------------------- arguments
Message = dict[str, Any]
# the scope of every call (lantern/scope.py): the user is an isolation boundary, agent and project filter
User = Annotated[str | None, Field(description='User id: only this user\'s entries are read or written (default "").')]
Agent = Annotated[str | None, Field(description="Agent id: a filter on reads (default any), a label on writes.")]
Project = Annotated[str | None, Field(description="Project: a filter on reads (default any), a label on writes.")]
Messages = Annotated[
    list[Message],
    Field(
        min_length=1,
        description=(
            "Chat messages in OpenAI ({role, content, tool_calls}; role tool with tool_call_id), Anthropic "
            "(content blocks text/tool_use/tool_result) or plain {role, content} form."
        ),
    ),
]
ArchiveSession = Annotated[str | None, Field(description='Session id (default "default").')]
Query = Annotated[str, Field(description="The live context's tail plus the compaction summary, or a question.")]
SessionFilter = Annotated[str | None, Field(description="Only this session (default: every session).")]
Budget = Annotated[
    Optional[StrictInt],
    Field(ge=0, le=MAX_BUDGET, description="Characters of the block (default: the configured budget)."),
]
Exclude = Annotated[
    list[Message | StrictInt] | None,
    Field(description="The live context (messages) and/or entry ids: turns still in it are never re-injected."),
]
Summary = Annotated[
    str | None, Field(description="The compaction's summary (null or empty: none, e.g. an encrypted one).")
]
CompactedSession = Annotated[str | None, Field(description="The compacted session (default: the default session).")]
Live = Annotated[
    list[Message | StrictInt] | None,
    Field(description="The live context after the compaction (messages) and/or entry ids still in it."),
]
SearchQuery = Annotated[str, Field(description="What to look for.")]
K = Annotated[StrictInt, Field(ge=1, le=MAX_K, description="Number of results.")]
EntryIds = Annotated[
    list[StrictInt], Field(min_length=1, description="Ids of recovered entries (recover's entries[].id).")
]
Useful = Annotated[StrictBool, Field(description="Whether they helped answer.")]
FeedbackUser = Annotated[str | None, Field(description='User id: only this user\'s entries are updated (default "").')]
ForgetEntry = Annotated[StrictInt | None, Field(description="Entry id to delete.")]
ForgetSession = Annotated[
    str | None, Field(description='Session whose entries to delete ("": the default session, as in archive).')
]
ForgetUser = Annotated[str | None, Field(description='User whose entries to delete (alone: all of them; default "").')]
ForgetConfirm = Annotated[
    StrictBool | StrictStr | None,
    Field(
        description="Omit to see what would be deleted (nothing is): the reply gives would_forget and a confirm token. "
        "Call again with the same arguments and that token to delete them, or true to delete without the preview."
    ),
]


# ---------------------------------------------------------------------------------------------- REST request bodies
class _Body(BaseModel):
    model_config = {"extra": "forbid"}  # a misspelt field is an error, as over MCP ("sesion" would widen the read)


class ArchiveRequest(_Body):
    messages: Messages
    session: ArchiveSession = None
    user: User = None
    agent: Agent = None
    project: Project = None


class RecoverRequest(_Body):
    query: Query
    session: SessionFilter = None
    budget: Budget = None
    exclude: Exclude = None
    user: User = None
    agent: Agent = None
    project: Project = None


class CompactionRecoverRequest(_Body):
    summary: Summary
    session: CompactedSession = None
    budget: Budget = None
    live: Live = None
    user: User = None
    agent: Agent = None
    project: Project = None


class SearchRequest(_Body):
    query: SearchQuery
    k: K = 10
    session: SessionFilter = None
    user: User = None
    agent: Agent = None
    project: Project = None


class FeedbackRequest(_Body):
    entry_ids: EntryIds
    useful: Useful
    user: FeedbackUser = None
    agent: Agent = None
    project: Project = None


class ForgetRequest(_Body):
    entry: ForgetEntry = None
    session: ForgetSession = None
    user: ForgetUser = None
    agent: Agent = None
    project: Project = None
    confirm: ForgetConfirm = None


# ---------------------------------------------------------------------------------------------- responses


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
    # "erased": false and "remaining_bytes" are added only when a reader kept the deleted text's pages in the file;
    # a preview (no confirm) adds "would_forget", "confirm" and "selection" and deletes nothing
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
