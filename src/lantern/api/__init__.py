"""``Lantern``: the public Python API. Each method is a short pipeline over the stages of docs/architecture.md §2–3.

Write path (``archive``):  parse -> redact -> chunk -> summarize/tag/classify/facts -> embed -> store (one transaction)
Read path  (``recover``):  signals -> RRF -> MMR -> pack          (see recover/pipeline.py)

This module holds the handle (its store, models and lock) and the write path; the other calls are written by room
and mixed in: api/read.py (recover, explain, search, facts), api/compactions.py (recover_compaction, the compaction
events), api/maintenance.py (forget, abandon, export / import, reindex, vacuum, feedback, stats); api/calls.py holds
what they share (one call at a time per handle, the arguments' checks).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lantern.api.calls import FILL_WAIT_S, MAX_QUERY_CHARS, one_at_a_time
from lantern.api.compactions import Compactions
from lantern.api.maintenance import Maintenance
from lantern.api.read import ReadPath
from lantern.archive.chunk import chunk
from lantern.archive.pipeline import Progress, Writer, clean_message
from lantern.archive.redact import load_policy, names_form, redact_name
from lantern.archive.subagents import parent_session
from lantern.config import DEFAULT, Config, default_db_path, is_server_url, location_error
from lantern.errors import LanternError
from lantern.llm import LLMClient, LLMSettings
from lantern.llm import settings as llm_settings
from lantern.model import ArchiveResult, Message, content_hash
from lantern.scope import Scope, clean_name, resolve
from lantern.store.migrations import NAMES_FORM, rewrite_names
from lantern.store.open import open_store
from lantern.store.protocol import unless_unwritable
from lantern.store.sqlite import entry_count, write_error_words
from lantern.store.undo import creation_undo
from lantern.text.clean import normalize_space
from lantern.text.names import file_name_text, given_name

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from lantern.archive.directory import DirectoryResult
    from lantern.embed import Embedder
    from lantern.recover.query_vectors import QueryVectors
    from lantern.store.index import MemoryIndex

# The read path, the index and the embedders load numpy and the models: they are imported by the calls that use them
# (``_models``, ``_recover``, ...), so a handle that only archives text-first and recovers what a compaction lost
# (a hook's cold start, docs/daemon.md) loads neither.

# the faces' way to what lies below: the Lantern handle, the store copy, and for a command that may create a SQLite
# database, what it undoes when it fails and the words for a write that failed
__all__ = ["MAX_QUERY_CHARS", "Lantern", "copy_store", "creation_undo", "entry_count", "write_error_words"]


class Lantern(ReadPath, Compactions, Maintenance):
    """A Lantern memory store in one SQLite file, or in a PostgreSQL database.

    ``path``: database file (default ``$LANTERN_DB`` or ``~/.lantern/lantern.db``; created 0600 in a 0700 directory),
    or a ``postgresql://user:password@host:5432/db`` URL (the PostgreSQL + pgvector backend, docs/postgres.md: what
    it does not support yet raises ``UnsupportedBackendError`` naming the operation).
    ``embedder``: ``"minilm"``, ``"use"``, ``"routed"``, an ``Embedder`` instance, or None for the one the database was
    created
    with (``"routed"`` for a new database: embed.DEFAULT_EMBEDDER). Raises ``EmbedderMismatchError`` when the database
    was created with another
    embedder (``reindex`` re-embeds), ``ModelNotFoundError`` when the model cannot be loaded. With None on a database
    that records its embedder, the embedder, the in-process index and numpy are loaded at the first call that needs
    them (``_models``): a handle that only archives text-first (``archive(..., text_first=True)``), recovers what a
    compaction lost or reads events never loads them.
    ``user`` / ``agent`` / ``project``: the handle's scope (lantern/scope.py), which every call may override with
    its own ``user=`` / ``agent=`` / ``project=``. The user is a hard isolation boundary (default ``""``); agent
    and project filter reads when given and label writes (``""`` when not given).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        embedder: str | Embedder | None = None,
        *,
        config: Config = DEFAULT,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
    ):
        self._lock = threading.RLock()  # one call at a time per handle (one_at_a_time)
        location = default_db_path() if path is None else path
        if (why := location_error(location)) is not None:
            raise LanternError(why)
        location = location if is_server_url(location) else Path(location)
        server = is_server_url(location)
        resolve(Scope(), user, agent, project)  # a bad name is refused before the store is opened
        self.store = open_store(location)
        self.path = self.store.path if server else location  # a server's URL as shown: without its password
        self._follows = embedder is None  # no embedder named: the handle follows the database's (``_follow_reindex``)
        self._asked = embedder
        self.writer = Writer(self.store, None, None, config, load_policy(self.store, config), self._follow_reindex)
        # every name a call gives is read and written in its redacted form (archive/redact.py ``redact_name``)
        self.scope = resolve(Scope(names=lambda name: redact_name(name, self.redaction)), user, agent, project)
        self._redact_stored_names()
        self._queries: QueryVectors | None = None
        self._llm_clients: dict[LLMSettings, LLMClient] = {}
        # loaded now when named (checked at once), for a store that holds vectors but records no embedder, or to
        # convert an old store's vectors; else at first use, the store reading the recorded layout meanwhile. A new
        # database (no vector yet) records its embedder when the models are first loaded: a hook that creates it
        # text-first loads neither numpy nor a model.
        recorded = self.store.use_recorded_embedder()
        if embedder is not None or (self.store.holds_vectors() if not recorded else not self.store.vectors_compacted()):
            self._models()

    def _redact_stored_names(self) -> None:
        """The names a store holds in the form reads look them up in: rewritten once through ``redact_name`` when
        they were written by an older version or under other redaction rules (store/migrations.py
        ``rewrite_names``, one transaction; a store opened read-only, or with secret redaction off, is left as
        it is). One meta read when they already are."""
        if not self.redaction.secrets or getattr(self.store, "readonly", False):
            return
        form = names_form(self.redaction)
        if self.store.get_meta(NAMES_FORM) != form:
            rewrite_names(self.store, lambda name: redact_name(name, self.redaction), form)

    # the handle's state the write path reads (archive/pipeline.py); assigning one here is seen by both paths
    config = property(lambda self: self.writer.config, lambda self, v: setattr(self.writer, "config", v))
    redaction = property(lambda self: self.writer.redaction, lambda self, v: setattr(self.writer, "redaction", v))

    @property
    def embedder(self) -> Embedder:
        """The handle's embedder (loaded at first use: ``_models``)."""
        if self.writer.embedder is None:
            self._models()
        return self.writer.embedder

    @embedder.setter
    def embedder(self, value: Embedder) -> None:
        self.writer.embedder = value

    @property
    def index(self) -> MemoryIndex:
        """The in-process index of the store's vectors (made at first use: ``_models``)."""
        if self.writer.index is None:
            self._models()
        return self.writer.index

    @index.setter
    def index(self, value: MemoryIndex) -> None:
        self.writer.index = value

    @property
    def queries(self) -> QueryVectors:
        """The read path's query embedder (made at first use: ``_models``)."""
        if self._queries is None:
            self._models()
        return self._queries

    def _models(self) -> None:
        """Load the embedder (the one named at open, else the database's, else the default) and check it against
        the store (``check_embedder``: recorded for a new database; EmbedderMismatchError, ModelNotFoundError as
        the constructor says), convert vectors of the old format (``compact_vectors``, once per database), and
        make the index and the query cache."""
        from lantern.embed import get_embedder, store_record

        chosen = get_embedder(self._asked if self._asked is not None else self.store.get_meta("embedder") or None)
        self.store.check_embedder(*store_record(chosen))
        self.store.compact_vectors()  # once per database: vectors written before the int8 format
        self._use_embedder(chosen)

    def _use_embedder(self, embedder: Embedder) -> None:
        """Make ``embedder`` the handle's: a fresh index of its dims and a fresh query-vector cache."""
        from lantern.embed import model_blocks
        from lantern.recover.query_vectors import QueryVectors
        from lantern.store.ann import ann_params
        from lantern.store.index import MemoryIndex

        if self._queries is not None:
            self._queries.close()
        self.writer.embedder = embedder
        if self.writer.index is not None:
            self.writer.index.close()
        self.writer.index = MemoryIndex(
            self.store, embedder.dim, model_blocks(embedder), lambda: ann_params(self.config)
        )
        self._queries = QueryVectors(
            lambda: self.embedder, occupied=lambda a, b: self.index.block_occupied(a, b)
        )  # the read path's embedder: queries can be embedded ahead

    def _follow_reindex(self) -> None:
        """A handle opened without naming an embedder follows its database: when another process has re-embedded
        it (``lantern reindex``), the handle loads the recorded embedder and a fresh index before the call (one
        meta read per call), instead of raising EmbedderMismatchError on every later call. A handle that named its
        embedder still raises: it asked for that one. Raises ModelNotFoundError like the constructor."""
        if self.writer.embedder is None:  # not loaded yet: it loads the recorded one
            self._models()
            return
        if not self._follows:
            return
        recorded = self.store.get_meta("embedder")
        if recorded and recorded != self.embedder.id:
            from lantern.embed import get_embedder, store_record

            new = get_embedder(recorded)
            self.store.check_embedder(*store_record(new))
            self._use_embedder(new)

    # ------------------------------------------------------------------ lifecycle
    def llm_client(self, llm: LLMSettings | LLMClient | None = None) -> LLMClient:
        """The client of the LLM half (lantern/llm.py): ``llm`` when a client, a client of ``llm`` when settings,
        else of the settings in force (``$LANTERN_LLM_BASE_URL`` / ``_MODEL``, then ``Config.llm_base_url`` /
        ``llm_model``); one client per settings, kept by the handle. Raises ValueError when no LLM is configured."""
        if isinstance(llm, LLMClient):
            return llm
        chosen = llm or llm_settings(self.config)
        if chosen is None:
            raise ValueError(
                "no LLM configured: give --llm-base-url URL --llm-model NAME, set $LANTERN_LLM_BASE_URL and "
                "$LANTERN_LLM_MODEL, or Config(llm_base_url=..., llm_model=...)"
            )
        if chosen not in self._llm_clients:
            self._llm_clients[chosen] = LLMClient(chosen)
        return self._llm_clients[chosen]

    @one_at_a_time
    def fill_vectors(self, limit: int | None = None, progress: Progress | None = None) -> int:
        """Compute the vectors of up to ``limit`` entries stored text-first (None: every one), then the vectors'
        deferred block (the e5 part of English turns: archive/fill.py) for up to ``limit`` entries still missing it,
        newest first, ``progress(done, total)`` after each batch of the latter. An ingest, the daemon, the
        long-lived servers, every recovery and every archive with vectors do this on their own; call it to fill a
        whole store at once (``lantern reindex --fill``). Returns how many entries were given a vector or its
        missing part, each counted once."""
        self._follow_reindex()
        return self.writer.fill(limit, progress)

    def busy(self) -> bool:
        """Whether another thread is inside a call of this handle now (its calls run one at a time,
        ``one_at_a_time``): a caller with other work to do (the daemon between requests) passes it by instead of
        waiting. False for the thread holding it."""
        if not self._lock.acquire(blocking=False):
            return True
        self._lock.release()
        return False

    @one_at_a_time
    def fill_unembedded(self, limit: int | None = None) -> int:
        """Compute the vectors of up to ``limit`` (None: every one) entries stored text-first (``archive(...,
        text_first=True)``), newest first (archive/fill.py ``fill_unembedded``); the daemon calls it once warm and
        between requests. Returns how many were written."""
        self._follow_reindex()
        return self.writer.fill_unembedded(limit)

    def _fill_before_recovery(self) -> None:
        """At most ``Config.fill_on_recover`` of the entries stored text-first get their vector, and as many of the
        newest entries still without their deferred block get it, before a recovery ranks (bounded: the rest wait
        for the next recovery, the daemon or the background worker). Skipped with no error when the write cannot be
        made (a read-only file, another process's write lock held)."""
        if not self.config.fill_on_recover:
            return
        self._fill_unembedded()
        with unless_unwritable(self.store):
            if self.store.deferred is not None and self.writer.fills and self.store.pending_vectors(1):
                self.writer.fill(self.config.fill_on_recover, wait=FILL_WAIT_S)

    def _fill_unembedded(self) -> None:
        """At most ``Config.fill_on_recover`` entries stored text-first get their vector (archive/fill.py
        ``fill_unembedded``), in a process that has loaded the models anyway (a recovery, an archive with vectors).
        Skipped with no error when the write cannot be made (a read-only file, another process's write lock)."""
        with unless_unwritable(self.store):
            if self.config.fill_on_recover and self.store.unembedded(1):
                self.writer.fill_unembedded(self.config.fill_on_recover, wait=FILL_WAIT_S)

    def require(self, operation: str) -> None:
        """Raise UnsupportedBackendError naming ``operation`` (a command, "lantern ui") when this database's backend
        does not support it yet (store/protocol.py ``require``), before anything is read or written."""
        from lantern.store.protocol import require

        require(self.store, operation)

    @one_at_a_time
    def build_graphs(self, background: bool = False) -> None:
        """Let this handle build the HNSW graphs of a large store (store/ann.py; ``Config.ann_min_rows`` rows or
        more), which a short-lived handle never does (store/index.py ``build_graphs``): ``background`` True (a
        long-lived process: serve, mcp) builds them in a worker thread at the next read, exact search answering
        meanwhile, and saves them with the index snapshot once built; False (``lantern reindex``) builds them now
        and waits, saved at ``close``."""
        if background:
            self.index.build_graphs = True
            return
        self.index.refresh()
        self.index.wait_ann()

    @one_at_a_time
    def step_graphs(self) -> bool:
        """For a long-lived process between requests (the daemon): bring the index up to the store and a large
        store's HNSW graphs a step further: their build started in a worker thread, or a finished build taken and
        saved with the index snapshot, so that short-lived processes (the hooks, the CLI) load them instead of
        searching exactly (store/index.py ``step_graphs``). Returns whether a build is still running."""
        return self.index.step_graphs()

    @one_at_a_time
    def close(self) -> None:
        for client in self._llm_clients.values():
            client.close()
        if self._queries is not None:
            self._queries.close()
        if self.writer.index is not None:
            self.writer.index.close()
        self.store.close()

    def __enter__(self) -> Lantern:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ write path (archive/pipeline.py)
    @one_at_a_time
    def archive(
        self,
        messages: Any,
        session: str | None = None,
        *,
        format: str = "auto",
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        text_first: bool = False,
    ) -> ArchiveResult:
        """Archive a conversation or its new turns, in ONE transaction (all or nothing).

        ``messages``: a list of ``Message`` or of dicts in any supported chat format (OpenAI, Anthropic, plain
        ``{role, content}``), or a transcript path / text (``format`` auto-detected or named). ``session``: the
        session id (default ``"default"``; formats with several sessions per file become ``session/<theirs>``).
        A turn already archived (same scope, session and text) is counted in ``duplicates``, not stored twice.
        ``user`` / ``agent`` / ``project``: the scope written (default: the handle's).
        ``text_first``: store the turns with their text, full-text rows, tags and facts but no vector, loading no
        model (a hook that must answer at once: docs/daemon.md); their vectors are computed later, by the daemon or
        by the next handle that loads the models (``fill_vectors``, and bounded before each recovery and after each
        archive with vectors). Until then every signal but the semantic ones finds them, and
        ``recover_compaction`` reads them as any other. SQLite only (UnsupportedBackendError elsewhere).
        Raises ``TranscriptFormatError`` for unreadable input; nothing is written then.
        """
        scope = resolve(self.scope, user, agent, project)
        result = self.writer.archive(messages, session, scope, format, text_first=text_first)
        if not text_first:
            self._fill_unembedded()
        return result

    @one_at_a_time
    def ingest(
        self,
        path: str | os.PathLike[str],
        session: str | None = None,
        *,
        format: str = "auto",
        progress: Progress | None = None,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
    ) -> ArchiveResult | DirectoryResult:
        """Archive a transcript file. Same as ``archive`` but one transaction per batch of 256 turns, reporting
        ``progress(done, total)`` in turns after each (``total`` is an estimate from the bytes read until the file
        is read to its end). JSONL files are streamed line by line (bounded memory: archive/ingest.py); re-ingesting
        a file, or resuming an interrupted ingest, adds no duplicates. ``session`` defaults to the file name without
        extension. Warnings past the first 1,000 are counted in one last warning. ``user`` / ``agent`` /
        ``project`` as ``archive``. A Claude Code session transcript brings its subagent transcripts
        (``<session-id>/subagents/agent-<id>.jsonl``) into ``<session>/sidechain-<id>``; such a subagent file given
        alone goes to the same place (session default: its parent session id) (archive/subagents.py).
        A directory: every regular file under it, each ingested as above (format detected per file, its own
        transactions); files that are not transcripts are skipped with their reason; ``session`` prefixes each
        file's session; ``progress`` counts bytes. Returns ``DirectoryResult`` then (archive/directory.py)."""
        scope = resolve(self.scope, user, agent, project)
        path = Path(path)
        if path.is_dir():
            from lantern.archive.directory import ingest_directory

            return ingest_directory(
                lambda p, s, **kw: self.ingest(p, s, **kw, user=user, agent=agent, project=project),
                path,
                session,
                format=format,
                progress=progress,
            )
        # a subagent file: its parent session
        session = self.scope.name(given_name(session) or parent_session(path) or file_name_text(path.stem))
        return self.writer.ingest(path, session, scope, format, progress)

    @one_at_a_time
    def turn_hash(
        self, session: str, text: str, *, user: str | None = None, agent: str | None = None, project: str | None = None
    ) -> str:
        """The content hash (dedup key) a turn of ``text`` archived in ``session`` gets within the scope."""
        name = self.scope.name(clean_name(session))  # its stored form
        return content_hash(name, text, *resolve(self.scope, user, agent, project).write_values)

    def _stored_session(self, session: str | None) -> str | None:
        """A session name a call gives, in the form it is stored and matched in (``given_name``, then the
        database's name redaction, ``Scope.name``), or None when it is blank."""
        name = given_name(session)
        return self.scope.name(name) if name else None

    @one_at_a_time
    def live_text(self, messages: Sequence[Message | dict]) -> str:
        """The live context (Message objects and/or message dicts) rendered as archived turns are — cleaned,
        redacted, chunked — with whitespace collapsed. An archived entry whose whitespace-collapsed text lies
        inside it is still live (never re-injected; compaction.detect counts it present). Empty for no messages."""
        if not messages:
            return ""
        objects = [clean_message(m) for m in messages if isinstance(m, Message)]
        dicts = [m for m in messages if isinstance(m, dict)]
        msgs = self.writer.redact(objects)[0] if objects else []
        if dicts:
            msgs += self.writer.messages(dicts).messages  # parsed and redacted like archived input
        return normalize_space("\n".join(turn.text for turn in chunk(msgs, None)))

    @property
    def backend(self) -> str:
        """The store's backend: "sqlite" or "postgresql"."""
        return getattr(self.store, "backend", "sqlite")


def copy_store(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, int]:
    """Copy every entry, its facts and the compaction events of the store at ``src`` into the store at ``dst``
    (SQLite paths or ``postgresql://`` URLs), ``dst`` opened as a ``Lantern`` with ``src``'s embedder:
    portability.py ``copy_store`` (what is copied, verified and refused; the counts returned; the errors)."""
    from lantern.portability import copy_store as copy

    return copy(src, dst, open_target=lambda embedder: Lantern(dst, embedder=embedder), progress=progress)
