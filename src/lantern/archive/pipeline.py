"""The write path as one pipeline (docs/architecture.md §2). Zero LLM calls; each stage is its own module.

    messages = parse(source)            archive/parse/          any supported format -> Message list
    messages = redact(messages)         archive/redact.py       secrets and private spans out, first of all
    turns    = chunk(messages)          archive/chunk.py        a user message and everything that answers it
    rows     = prepare(turns)           summarize.py, text/tags.py, classify.py, facts.py: one NewEntry per turn
    vectors  = embed(rows)              archive/embed_ahead.py  only rows the store will keep; one vector per summary
    ids      = store(rows, vectors)     store/sqlite.py         ONE transaction; pending recoveries are judged in it
    later:     fill(ids)                archive/fill.py         the deferred block (e5 of English turns), off the call

Text-first (``text_first=True``: a hook that must answer before any model is loaded, docs/daemon.md): stage embed
is skipped and the rows are stored without vectors, with their full-text rows, tags and facts, in the same one
transaction; ``fill`` gives them their vectors later (``fill_unembedded``: the daemon, or the next process that
loads the models). This module imports no numpy and no model for that path.

``Writer.archive`` runs it for a live message list (one transaction); ``Writer.ingest`` for a file, one transaction
per batch of ``INGEST_BATCH_TURNS`` turns, embedding batch k in a worker thread while batch k-1 is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lantern import reinforce
from lantern.archive import embed_ahead
from lantern.archive.chunk import chunk
from lantern.archive.classify import classify_turn
from lantern.archive.ingest import add_warnings, ingest_batches
from lantern.archive.parse import parse
from lantern.archive.parse.claude_code import ABANDONED, apply_rewound
from lantern.archive.parse.objects import check_messages
from lantern.archive.redact import RedactionPolicy, redact_messages
from lantern.archive.summarize import summarize
from lantern.config import DEFAULT_SESSION, Config
from lantern.errors import MissingVectorError
from lantern.model import ArchiveResult, Message, ToolCall, ToolResult, Turn, content_hash
from lantern.scope import Scope, check_length
from lantern.store.base import NewEntry
from lantern.text.clean import clean_text
from lantern.text.names import given_name
from lantern.text.tags import extract_tags, hint_terms, tag_window

if TYPE_CHECKING:
    from lantern.store.index import MemoryIndex
    from lantern.store.protocol import StoreProtocol

Progress = Callable[[int, int], None]  # (done, total) in turns

INGEST_BATCH_TURNS = 256  # turns per transaction when ingesting a file (ours)

__all__ = ["INGEST_BATCH_TURNS", "Parsed", "Writer", "session_name", "tag_window"]


@dataclass
class Parsed:
    """Messages after parse and redaction: how many input items were skipped (and why), how many secrets and
    private spans were redacted."""

    skipped: int
    warnings: list[str]
    messages: list[Message]
    redacted: int


@dataclass
class Batch:
    """Turns prepared for the store: their rows and what must be embedded (``embed_ahead.EmbedPlan``)."""

    turns: list[Turn]
    rows: list[NewEntry]
    plan: embed_ahead.EmbedPlan


class Writer:
    """The write path of one store. ``embedder`` is the handle's current one (``Lantern`` swaps it after a reindex);
    ``before_batch`` runs before each batch is prepared (``Lantern`` follows another process's reindex there)."""

    def __init__(
        self,
        store: StoreProtocol,
        index: MemoryIndex,
        embedder: Any,
        config: Config,
        redaction: RedactionPolicy,
        before_batch: Callable[[], None] = lambda: None,
    ):
        self.store, self.index, self.embedder, self.config = store, index, embedder, config
        self.redaction, self.before_batch = redaction, before_batch

    # ------------------------------------------------------------------ the pipeline
    def archive(
        self, source: Any, session: str | None, scope: Scope, format: str = "auto", text_first: bool = False
    ) -> ArchiveResult:
        """Parse, redact, chunk, prepare, embed and store ``source`` (messages or a transcript) in ONE transaction;
        ``text_first``: no embedding, the rows stored without vectors (the module docstring). Raises
        ``TranscriptFormatError`` for unreadable input; nothing is written then."""
        parsed = self.messages(source, format)
        result = ArchiveResult(
            session=scope.name(session_name(session, None)),
            skipped=parsed.skipped,
            warnings=parsed.warnings,
            redacted=parsed.redacted,
        )
        self.archive_turns(chunk(parsed.messages, None), session, scope, result, text_first)
        return result

    def ingest(
        self, path: Path, session: str, scope: Scope, format: str = "auto", progress: Progress | None = None
    ) -> ArchiveResult:
        """Archive a transcript file in batches of ``INGEST_BATCH_TURNS`` turns, one transaction each (archive/ingest.py
        streams JSONL in bounded memory). ``progress(done, total)`` in turns after each batch; ``total`` is an
        estimate until the file is read to its end. Warnings past the first 1,000 are counted in one last warning."""
        result = ArchiveResult(session=session)
        dropped = [0]

        def on_slice(piece: Any, redacted: int) -> None:
            result.skipped += piece.skipped
            result.redacted += redacted
            add_warnings(result.warnings, piece.warnings, dropped)

        batches = ingest_batches(path, format, lambda ms: self.redact(self.rewound(ms)), INGEST_BATCH_TURNS, on_slice)
        prepared = ((self.prepare_batch(turns, session, scope), total) for turns, total in batches)
        remembered = embed_ahead.Remembered()  # vectors of summaries embedded in earlier batches (worker thread only)
        done = 0
        for (batch, total), vectors in embed_ahead.overlapped(
            prepared, lambda p: embed_ahead.embed_plan(self.embedder, p[0].plan, remembered)
        ):
            self.store_batch(batch, vectors, result)
            if self.fills:  # the deferred block of this batch's rows, after its commit (archive/fill.py)
                self.fill(len(batch.turns))
            done += len(batch.turns)
            if progress:
                progress(done, total)
        if dropped[0]:
            result.warnings.append(f"... {dropped[0]} more warnings")
        return result

    @property
    def fills(self) -> bool:
        """Whether the deferred block (e5 of English turns) is computed on its own — after each ingest batch, by
        the servers' background worker, before a recovery: only when it is used (``Config.e5_english_weight`` >
        0). ``fill`` called directly (``lantern reindex --fill``) computes it whatever the weight."""
        return self.config.e5_english_weight > 0

    def fill(self, limit: int | None = None, progress: Progress | None = None, wait: float | None = None) -> int:
        """Stage fill: the vectors of up to ``limit`` entries stored text-first (``fill_unembedded``), then the
        deferred block (e5 of English turns) of up to ``limit`` pending entries, newest first (archive/fill.py).
        Returns how many were filled."""
        from lantern.archive.fill import fill_pending

        filled = self.fill_unembedded(limit, wait=wait)
        filled += fill_pending(self.store, self.embedder, limit, progress=progress, wait=wait)
        if filled:
            self.index.mark_dirty()
        return filled

    def fill_unembedded(self, limit: int | None = None, wait: float | None = None) -> int:
        """The vectors of up to ``limit`` (None: all) entries stored text-first, oldest first, a batch per
        transaction (archive/fill.py ``fill_unembedded``). Returns how many were written."""
        from lantern.archive.fill import fill_unembedded

        filled = fill_unembedded(self.store, self.embedder, limit, wait=wait)
        if filled and self.index is not None:
            self.index.mark_dirty()
        return filled

    # ------------------------------------------------------------------ the stages
    def messages(self, source: Any, format: str = "auto") -> Parsed:
        """Stages parse and redact. ``source``: Message objects (cleaned and checked like parsed dicts), message
        dicts, or a transcript path / text in ``format``."""
        if (
            isinstance(source, Sequence)
            and not isinstance(source, (str, bytes))
            and source
            and all(isinstance(m, Message) for m in source)
        ):
            checked = check_messages([clean_message(m) for m in source])
            return Parsed(checked.skipped, list(checked.warnings), *self.redact(checked.messages))
        parsed = parse(source, format)
        return Parsed(parsed.skipped, list(parsed.warnings), *self.redact(self.rewound(parsed.messages)))

    def rewound(self, messages: list[Message]) -> list[Message]:
        """Messages of abandoned branches (a Claude Code rewind; ``meta["abandoned"]``) dropped or kept in their
        sub-session, as ``Config.rewound`` says (archive/parse/claude_code.py)."""
        return apply_rewound(messages, self.config.rewound)

    def redact(self, messages: list[Message]) -> tuple[list[Message], int]:
        """Stage redact: (messages with secrets and private spans replaced, how many were)."""
        return redact_messages(messages, self.redaction)

    def archive_turns(
        self, turns: list[Turn], session: str | None, scope: Scope, result: ArchiveResult, text_first: bool = False
    ) -> None:
        """Stages prepare, embed and store for chunked ``turns``, in one transaction; counts go into ``result``.
        ``text_first``: no embed stage, the rows stored without vectors."""
        batch = self.prepare_batch(turns, session, scope, text_first)
        if text_first:
            self._store(batch, None, result)
            return
        self.store_batch(batch, embed_ahead.embed_plan(self.embedder, batch.plan), result)

    def prepare(self, turn: Turn, session: str | None, scope: Scope) -> NewEntry:
        """Stage prepare: summarize, tag, classify and extract facts of one turn into the row the store writes."""
        from lantern.archive.facts import extract_facts, fact_texts  # its patterns: ~20 ms of a cold hook's start

        name = scope.name(session_name(session, turn.session))  # its stored form: secrets in it redacted
        user, agent, project = scope.write_values
        text = turn.text
        tags = extract_tags(tag_window(text))
        memory_type, category, prior = classify_turn(turn)
        return NewEntry(
            session=name,
            text=text,
            summary=summarize(turn, self.config.summary_message_chars, self.config.summary_max_chars),
            tags=tags,
            hints=hint_terms(tags, turn.tool_names),
            memory_type=memory_type,
            importance=prior,
            content_hash=content_hash(name, text, user, agent, project),
            time=turn.time,
            tool_count=sum(len(m.tool_calls) for m in turn.messages),
            file_count=len(turn.files),
            meta=turn.meta,
            # a turn of an abandoned branch states no fact: it did not happen on the conversation's live branch
            facts=extract_facts(*fact_texts(turn))
            if self.config.extract_facts and not turn.meta.get(ABANDONED)
            else [],
            category=category,
            user=user,
            agent=agent,
            project=project,
        )

    def prepare_batch(self, turns: list[Turn], session: str | None, scope: Scope, text_first: bool = False) -> Batch:
        """``prepare`` for each turn, and the embedding plan: rows the store already holds need no vector.
        ``before_batch`` runs first unless the batch is stored ``text_first`` (it writes no vector to check)."""
        if not text_first:
            self.before_batch()
        rows = [self.prepare(turn, session, scope) for turn in turns]
        hashes = [r.content_hash for r in rows]
        return Batch(turns, rows, embed_ahead.plan([r.summary for r in rows], hashes, self.store.known_hashes(hashes)))

    def store_batch(self, batch: Batch, vectors: list[Any], result: ArchiveResult) -> None:
        """Stage store: rows and vectors (None: already stored) in one transaction. A row planned as stored but
        deleted since (another process's forget) makes the store refuse the batch; it is then embedded in full
        and written again."""
        try:
            self._store(batch, vectors, result)
        except MissingVectorError:
            full = embed_ahead.plan([r.summary for r in batch.rows], [r.content_hash for r in batch.rows], set())
            self._store(batch, embed_ahead.embed_plan(self.embedder, full), result)

    def _store(self, batch: Batch, vectors: list[Any] | None, result: ArchiveResult) -> None:
        judged: dict[int, tuple[float, float]] = {}

        def judge(db, written):  # same transaction: new assistant replies judge pending recoveries (reinforce.py)
            replies = [
                (row.session, reinforce.assistant_text(turn), row.user)
                for row, turn, (_, added) in zip(batch.rows, batch.turns, written)
                if added
            ]
            judged.update(reinforce.resolve_pending(db, replies, self.config.success_alpha))

        for entry_id, added in self.store.add(batch.rows, vectors, after=judge):
            result.entry_ids.append(entry_id)
            result.added += added
            result.duplicates += not added
        if self.index is not None:  # a handle that has not loaded its index: it reads the store when it does
            self.index.set_reinforcement(judged)
            self.index.mark_dirty()


def session_name(given: str | None, from_transcript: str | None) -> str:
    """The stored session name: ``given/from_transcript``, either alone, or ``DEFAULT_SESSION``; a blank name
    (empty or only whitespace, e.g. ``ingest --session "  "``) counts as not given. A transcript's name that
    ``given`` already ends with is not repeated: an aider session archived under its own name (its start time)
    is ``2024-08-06 08:47:10``, not ``2024-08-06 08:47:10/2024-08-06 08:47:10``. Raises NameTooLongError for a
    name over ``MAX_SESSION_CHARS`` (lantern/scope.py)."""
    given, from_transcript = given_name(given), given_name(from_transcript)
    if given and from_transcript and (given == from_transcript or given.endswith("/" + from_transcript)):
        return check_length(given, "session")
    if given and from_transcript:
        return check_length(f"{given}/{from_transcript}", "session")
    return check_length(given or from_transcript or DEFAULT_SESSION, "session")


def clean_message(m: Message) -> Message:
    """A copy of a caller's Message with every text field passed through ``clean_text`` (lone surrogates, NUL)."""
    return replace(
        m,
        text=clean_text(m.text or ""),
        tool_calls=[ToolCall(clean_text(c.name or ""), clean_text(c.arguments or ""), c.id) for c in m.tool_calls],
        tool_results=[ToolResult(clean_text(r.content or ""), r.call_id, r.name) for r in m.tool_results],
    )
