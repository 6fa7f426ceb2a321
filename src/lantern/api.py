"""``Lantern``: the public Python API. Each method is a short pipeline over the stages of DESIGN §2–3.

Write path (``archive``):  parse -> redact -> chunk -> summarize -> tag -> classify -> embed -> store (one transaction)
Read path  (``recover``):  signals -> RRF -> MMR -> pack          (see recover/pipeline.py)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from .archive.chunk import chunk
from .archive.classify import classify
from .archive.parse import clean_text, parse
from .archive.redact import load_policy, redact_messages, set_secret_redaction
from .archive.summarize import summarize
from .archive.tags import extract_tags, hint_terms
from .config import DEFAULT, Config, default_db_path
from .embed import Embedder, get_embedder
from .model import ArchiveResult, Hit, Message, Recovery, ToolCall, ToolResult, Turn, content_hash
from .recover import pipeline
from .store.index import MemoryIndex
from .store.sqlite import NewEntry, Store

Progress = Callable[[int, int], None]  # (done, total) in turns

INGEST_BATCH_TURNS = 256  # turns per transaction when ingesting a file (ours)
TAG_HEAD_CHARS, TAG_TAIL_CHARS = 48_000, 16_000  # tags of a huge turn come from its head and tail (ours)
DEFAULT_SESSION = "default"


class Lantern:
    """A Lantern memory store in one SQLite file.

    ``path``: database file (default ``$LANTERN_DB`` or ``~/.lantern/lantern.db``; created 0600 in a 0700 directory).
    ``embedder``: ``"minilm"``, ``"use"``, an ``Embedder`` instance, or None for the one the database was created
    with (MiniLM for a new database). Raises ``EmbedderMismatchError`` when the database was created with another
    embedder (``reindex`` re-embeds), ``ModelNotFoundError`` when the model cannot be loaded.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, embedder: str | Embedder | None = None, *, config: Config = DEFAULT):
        self.path = Path(path) if path is not None else default_db_path()
        self.config = config
        self.store = Store(self.path)
        self.embedder = get_embedder(embedder if embedder is not None else self.store.get_meta("embedder") or None)
        self.store.check_embedder(self.embedder.id, self.embedder.dim)
        self.redaction = load_policy(self.store, config)  # secrets and private spans (archive/redact.py)
        self.index = MemoryIndex(self.store, self.embedder.dim)

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Lantern:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ write path
    def archive(self, messages: Any, session: str | None = None, *, format: str = "auto") -> ArchiveResult:
        """Archive a conversation or its new turns, in ONE transaction (all or nothing).

        ``messages``: a list of ``Message`` or of dicts in any supported chat format (OpenAI, Anthropic, plain
        ``{role, content}``), or a transcript path / text (``format`` auto-detected or named). ``session``: the
        session id (default ``"default"``; formats with several sessions per file become ``session/<theirs>``).
        A turn already archived (same session and text) is counted in ``duplicates``, not stored twice.
        Raises ``TranscriptFormatError`` for unreadable input; nothing is written then.
        """
        parsed_skipped, warnings, msgs, redacted = self._messages(messages, format)
        turns = chunk(msgs, None)
        result = ArchiveResult(session=session or DEFAULT_SESSION, skipped=parsed_skipped, warnings=warnings, redacted=redacted)
        self._archive_turns(turns, session, result)
        return result

    def ingest(
        self, path: str | os.PathLike[str], session: str | None = None, *, format: str = "auto", progress: Progress | None = None
    ) -> ArchiveResult:
        """Archive a transcript file. Same as ``archive`` but one transaction per batch of 256 turns, reporting
        ``progress(done, total)``; re-ingesting a file (or resuming an interrupted ingest) adds no duplicates.
        ``session`` defaults to the file name without extension."""
        path = Path(path)
        parsed = parse(path, format)
        session = session or path.stem
        msgs, redacted = redact_messages(parsed.messages, self.redaction)
        turns = chunk(msgs, None)
        result = ArchiveResult(session=session, skipped=parsed.skipped, warnings=list(parsed.warnings), redacted=redacted)
        for start in range(0, len(turns), INGEST_BATCH_TURNS):
            self._archive_turns(turns[start : start + INGEST_BATCH_TURNS], session, result)
            if progress:
                progress(min(start + INGEST_BATCH_TURNS, len(turns)), len(turns))
        return result

    def _messages(self, messages: Any, format: str) -> tuple[int, list[str], list[Message], int]:
        """Parsed (or cleaned) and redacted messages: (skipped, warnings, messages, secrets/private spans redacted)."""
        if isinstance(messages, Sequence) and not isinstance(messages, (str, bytes)) and messages and all(
            isinstance(m, Message) for m in messages
        ):
            return 0, [], *redact_messages([_clean(m) for m in messages], self.redaction)
        parsed = parse(messages, format)
        return parsed.skipped, list(parsed.warnings), *redact_messages(parsed.messages, self.redaction)

    def _archive_turns(self, turns: list[Turn], session: str | None, result: ArchiveResult) -> None:
        rows = [self._prepare(turn, session) for turn in turns]  # summarize, tag, classify
        vectors = self.embedder.embed([r.summary for r in rows]) if rows else np.empty((0, self.embedder.dim))
        for entry_id, added in self.store.add(rows, vectors):  # one transaction
            result.entry_ids.append(entry_id)
            result.added += added
            result.duplicates += not added
        self.index.mark_dirty()

    def _prepare(self, turn: Turn, session: str | None) -> NewEntry:
        name = _session_name(session, turn.session)
        text = turn.text
        tags = extract_tags(_tag_window(text))
        memory_type, prior = classify(turn)
        return NewEntry(
            session=name,
            text=text,
            summary=summarize(turn, self.config.summary_message_chars, self.config.summary_max_chars),
            tags=tags,
            hints=hint_terms(tags, turn.tool_names),
            memory_type=memory_type,
            importance=prior,
            content_hash=content_hash(name, text),
            time=turn.time,
            tool_count=sum(len(m.tool_calls) for m in turn.messages),
            file_count=len(turn.files),
            meta=turn.meta,
        )

    # ------------------------------------------------------------------ read path
    def recover(
        self,
        query: str,
        session: str | None = None,
        budget: int | None = None,
        exclude: Iterable[int] | Sequence[Message | dict] | None = None,
    ) -> Recovery:
        """Recover archived turns relevant to ``query`` as a block of at most ``budget`` characters (default 6,000).

        ``session``: restrict to one session (and its sub-sessions); None searches every session.
        ``exclude``: entry ids, or the live context as messages (Message or dicts): entries whose full text is
        still in it are never re-injected. Returns ``Recovery`` (``.text``, ``.entries``, ``.chars``,
        ``.candidates`` for explain). Access counts of packed entries are incremented (F(e), paper eq. 2).
        """
        result = self.explain(query, session, budget, exclude)
        packed = [e.id for e in result.entries]
        if packed:
            self.store.bump_access(packed)
            self.index.note_access(packed)
        return result

    def explain(self, query: str, session: str | None = None, budget: int | None = None, exclude: Any = None,
                extra_rankings: dict[str, list[int]] | None = None) -> Recovery:
        """``recover`` without its side effect (access counts): the same Recovery, whose ``candidates`` give every
        candidate's rank per signal, RRF score, MMR order and verdict (packed, excerpt, cut:budget, cut:duplicate,
        excluded:live) with its reason. ``extra_rankings``: further signals fused with the others (signal name ->
        entry ids best first; the evaluation's second-embedder signal). Raises ValueError for a bad budget,
        TypeError for a bad ``exclude``."""
        budget = self._budget(budget)
        ids, live = self._exclusions(exclude)
        query, session = clean_text(query), session or None
        if not query.strip():
            return Recovery(query=query, text="", entries=[], chars=0, budget=budget)
        return pipeline.recover(
            self.store, self.index, self.embedder, self.config, query,
            budget=budget, session=session, exclude_ids=ids, live_text=live, extra_rankings=extra_rankings,
        )

    def search(self, query: str, k: int = 10, session: str | None = None) -> list[Hit]:
        """Top ``k`` entries by fused (RRF) score, with per-signal ranks. No MMR, no budget, no side effects.
        Raises ValueError when ``k`` is not a positive integer."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        query, session = clean_text(query), session or None
        if not query.strip():
            return []
        return pipeline.search(self.store, self.index, self.embedder, self.config, query, k=k, session=session)

    def should_recover(self, question: str, draft: str | None = None) -> Any:
        """Whether ``question`` (or the model's ``draft`` answer) calls for a recovery: ``memory.triggers.should_recover``."""
        from .memory.triggers import should_recover

        return should_recover(question, draft)

    def _budget(self, budget: Any) -> int:
        if budget is None:
            return self.config.budget
        if isinstance(budget, bool) or not isinstance(budget, (int, float, np.integer, np.floating)) or not np.isfinite(budget) or budget < 0:
            raise ValueError(f"budget must be a finite number of characters >= 0, got {budget!r}")
        return int(budget)

    def _exclusions(self, exclude: Any) -> tuple[list[int], str]:
        """Split ``exclude`` into entry ids and the live context's text. Items may be entry ids (int) and
        messages (Message or dict), mixed; anything else raises TypeError."""
        if exclude is None:
            return [], ""
        if isinstance(exclude, (str, bytes, dict, Message)):
            raise TypeError("exclude must be a list of entry ids and/or messages, not a single " + type(exclude).__name__)
        ids: list[int] = []
        messages: list[Any] = []
        for x in exclude:
            if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
                ids.append(int(x))
            elif isinstance(x, (Message, dict)):
                messages.append(x)
            else:
                raise TypeError(f"exclude items must be entry ids (int) or messages (Message or dict), got {type(x).__name__}")
        ids = [i for i in ids if -(2**63) <= i < 2**63]  # larger ids cannot exist in SQLite
        return ids, self.live_text(messages)

    def live_text(self, messages: Sequence[Message | dict]) -> str:
        """The live context (Message objects and/or message dicts) rendered as archived turns are — cleaned,
        redacted, chunked — with whitespace collapsed. An archived entry whose whitespace-collapsed text lies
        inside it is still live (never re-injected; compaction.detect counts it present). Empty for no messages."""
        if not messages:
            return ""
        objects = [_clean(m) for m in messages if isinstance(m, Message)]
        dicts = [m for m in messages if isinstance(m, dict)]
        msgs = redact_messages(objects, self.redaction)[0] if objects else []
        if dicts:
            msgs += self._messages(dicts, "auto")[2]  # parsed and redacted like archived input
        return pipeline.normalize_space("\n".join(turn.text for turn in chunk(msgs, None)))

    # ------------------------------------------------------------------ maintenance
    def forget(self, *, entry: int | None = None, session: str | None = None, vacuum: bool = True) -> int:
        """Delete an entry, or every entry of a session (and its sub-sessions), from every table and from the
        in-process index, in one transaction. With ``vacuum`` (default) the file is then rewritten so the deleted
        text is not left in free pages, old FTS5 segments or the WAL (cost grows with the database size).
        Returns the number of entries deleted."""
        n = self.store.delete(entry=entry, session=session)
        self.index.reset()
        if n and vacuum:
            self.store.erase_free_space()
        return n

    def reindex(self, embedder: str | Embedder | None = None, progress: Progress | None = None) -> int:
        """Re-embed every entry with ``embedder`` (default: the current one) in one transaction, and record it
        as the database's embedder. Returns the number of entries re-embedded."""
        new = get_embedder(embedder) if embedder is not None else self.embedder
        rows = list(self.store.texts())
        vectors: list[np.ndarray] = []
        for start in range(0, len(rows), INGEST_BATCH_TURNS):
            batch = rows[start : start + INGEST_BATCH_TURNS]
            vectors.extend(new.embed([summary for _, summary in batch]))
            if progress:
                progress(start + len(batch), len(rows))
        n = self.store.replace_vectors(((i, v) for (i, _), v in zip(rows, vectors)), new.id, new.dim)
        self.embedder = new
        self.index = MemoryIndex(self.store, new.dim)
        return n

    def set_secret_redaction(self, enabled: bool) -> None:
        """Switch secret redaction on (default) or off for this database; recorded in its meta table so every
        later handle follows it. Private spans are removed either way (archive/redact.py)."""
        set_secret_redaction(self, enabled)

    def stats(self) -> dict[str, Any]:
        """Counts and sizes: entries, sessions, embedder id and dimension, schema version, database bytes (pages in use)."""
        return self.store.stats()


def _tag_window(text: str) -> str:
    """The part of a turn that is tagged: all of it up to 64,000 characters, else its head and tail (a 300 KB
    tool log costs ~100 ms to tag; its head and tail keep the command, the error and the summary line). The full
    text is still stored verbatim and indexed by FTS5."""
    if len(text) <= TAG_HEAD_CHARS + TAG_TAIL_CHARS:
        return text
    return text[:TAG_HEAD_CHARS] + "\n…\n" + text[-TAG_TAIL_CHARS:]


def _session_name(given: str | None, from_transcript: str | None) -> str:
    given = clean_text(given) if given else given
    from_transcript = clean_text(from_transcript) if from_transcript else from_transcript
    if given and from_transcript:
        return f"{given}/{from_transcript}"
    return given or from_transcript or DEFAULT_SESSION


def _clean(m: Message) -> Message:
    """A copy of a caller's Message with every text field passed through ``clean_text`` (lone surrogates, NUL)."""
    return replace(
        m,
        text=clean_text(m.text or ""),
        tool_calls=[ToolCall(clean_text(c.name or ""), clean_text(c.arguments or ""), c.id) for c in m.tool_calls],
        tool_results=[ToolResult(clean_text(r.content or ""), r.call_id, r.name) for r in m.tool_results],
    )
