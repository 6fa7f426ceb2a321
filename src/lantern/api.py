"""``Lantern``: the public Python API. Each method is a short pipeline over the stages of docs/architecture.md §2–3.

Write path (``archive``):  parse -> redact -> chunk -> summarize/tag/classify/facts -> embed -> store (one transaction)
Read path  (``recover``):  signals -> RRF -> MMR -> pack          (see recover/pipeline.py)
"""

from __future__ import annotations

import functools
import logging
import math
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lantern import lazy_re, reinforce
from lantern.archive.chunk import chunk
from lantern.archive.pipeline import INGEST_BATCH_TURNS, Progress, Writer, clean_message
from lantern.archive.redact import load_policy, names_form, redact_name, redact_text, set_secret_redaction
from lantern.archive.subagents import parent_session
from lantern.config import (
    DEFAULT,
    DEFAULT_SESSION,
    Config,
    default_db_path,
    is_server_url,
    location_error,
)
from lantern.errors import LanternError
from lantern.llm import LLMClient, LLMSettings
from lantern.llm import settings as llm_settings
from lantern.model import ArchiveResult, Forgotten, Hit, Message, Recovery, content_hash
from lantern.recover.loss_recovery import recover_compaction
from lantern.scope import Scope, check_length, clean_name, resolve, scope_where
from lantern.store import events as event_store
from lantern.store import facts as fact_store
from lantern.store.migrations import NAMES_FORM, rewrite_names
from lantern.store.open import open_store
from lantern.store.sqlite import BUSY_TIMEOUT_MS, Erasure, entry_count, is_unwritable, write_error_words
from lantern.store.times import to_epoch
from lantern.store.undo import creation_undo
from lantern.text.clean import clean_text, normalize_space
from lantern.text.names import file_name_text, given_name

if TYPE_CHECKING:
    import numpy as np

    from lantern.archive.directory import DirectoryResult
    from lantern.embed import Embedder
    from lantern.recover.query_vectors import QueryVectors
    from lantern.store.index import MemoryIndex

# The read path, the index and the embedders load numpy and the models: they are imported by the calls that use them
# (``_models``, ``_recover``, ...), so a handle that only archives text-first and recovers what a compaction lost
# (a hook's cold start, docs/daemon.md) loads neither.

# the faces' way to what lies below: the Lantern handle, the store copy, and for a command that may create a SQLite
# database, what it undoes when it fails and the words for a write that failed
__all__ = ["Lantern", "copy_store", "creation_undo", "entry_count", "write_error_words"]

log = logging.getLogger("lantern")

# ours: a query is read up to its first 16,000 characters (about 4,000 words). The models read less already
# (MiniLM 128 tokens, USE 8,192 characters) and full text keeps 64 terms; past that a 600,000-character query only
# costs time (4 s). The integrations' queries are a question, or a tail and a 2,000-character
# summary.
MAX_QUERY_CHARS = 16_000
_WORDS = lazy_re.compile(r"\w")  # a query without a word character searches nothing
FILL_WAIT_S = 0.2  # seconds a recovery waits for the write lock of its vector fill before skipping it (ours)


def _is_int(x: Any) -> bool:
    """An int (not a bool), or numpy's integer scalar (numpy is loaded when a value can be one)."""
    np = sys.modules.get("numpy")
    return not isinstance(x, bool) and (isinstance(x, int) or (np is not None and isinstance(x, np.integer)))


def _is_number(x: Any) -> bool:
    """An int or a float (not a bool), or numpy's scalar of either."""
    np = sys.modules.get("numpy")
    return not isinstance(x, bool) and (
        isinstance(x, (int, float)) or (np is not None and isinstance(x, (np.integer, np.floating)))
    )


def _query_text(query: Any) -> str:
    """The query as the read path reads it: its first ``MAX_QUERY_CHARS`` characters, cleaned (``clean_text``)."""
    return clean_text(query[:MAX_QUERY_CHARS] if isinstance(query, str) else query)


def _last_user_text(messages: Sequence[Any]) -> str:
    """The text of the last user message among ``messages`` (dicts or ``Message``; entry ids skipped), "" if none."""
    from lantern.compaction import is_summary, message_text

    for m in reversed(messages):
        if isinstance(m, Message) and m.role == "user" and m.text.strip():
            return m.text
        if isinstance(m, dict) and m.get("role") == "user" and not is_summary(m) and message_text(m).strip():
            return message_text(m)
    return ""


def _one_at_a_time(method):
    """Run ``method`` holding the handle's lock: a handle is one SQLite connection (or pool) and one in-process index,
    so its calls run one at a time, whichever threads make them (a recovery ranks on the index it masked; a write
    transaction never opens inside another). Reentrant: a call may make another (``recover`` reads ``explain``'s
    path). Threads wanting parallel reads open a handle each, as processes do."""

    @functools.wraps(method)
    def serialized(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    return serialized


class Lantern:
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
        self._lock = threading.RLock()  # one call at a time per handle (_one_at_a_time)
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

    @_one_at_a_time
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
        ``_one_at_a_time``): a caller with other work to do (the daemon between requests) passes it by instead of
        waiting. False for the thread holding it."""
        if not self._lock.acquire(blocking=False):
            return True
        self._lock.release()
        return False

    @_one_at_a_time
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
        try:
            if self.store.deferred is not None and self.writer.fills and self.store.pending_vectors(1):
                self.writer.fill(self.config.fill_on_recover, wait=FILL_WAIT_S)
        except _write_errors(self.store) as e:
            if not _unwritable(self.store, e):
                raise

    def _fill_unembedded(self) -> None:
        """At most ``Config.fill_on_recover`` entries stored text-first get their vector (archive/fill.py
        ``fill_unembedded``), in a process that has loaded the models anyway (a recovery, an archive with vectors).
        Skipped with no error when the write cannot be made (a read-only file, another process's write lock)."""
        try:
            if self.config.fill_on_recover and self.store.unembedded(1):
                self.writer.fill_unembedded(self.config.fill_on_recover, wait=FILL_WAIT_S)
        except _write_errors(self.store) as e:
            if not _unwritable(self.store, e):
                raise

    def require(self, operation: str) -> None:
        """Raise UnsupportedBackendError naming ``operation`` (a command, "lantern ui") when this database's backend
        does not support it yet (store/protocol.py ``require``), before anything is read or written."""
        from lantern.store.protocol import require

        require(self.store, operation)

    @_one_at_a_time
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

    @_one_at_a_time
    def step_graphs(self) -> bool:
        """For a long-lived process between requests (the daemon): bring the index up to the store and a large
        store's HNSW graphs a step further: their build started in a worker thread, or a finished build taken and
        saved with the index snapshot, so that short-lived processes (the hooks, the CLI) load them instead of
        searching exactly (store/index.py ``step_graphs``). Returns whether a build is still running."""
        return self.index.step_graphs()

    @_one_at_a_time
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
    @_one_at_a_time
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

    @_one_at_a_time
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

    @_one_at_a_time
    def turn_hash(
        self, session: str, text: str, *, user: str | None = None, agent: str | None = None, project: str | None = None
    ) -> str:
        """The content hash (dedup key) a turn of ``text`` archived in ``session`` gets within the scope."""
        name = self.scope.name(clean_name(session))  # its stored form
        return content_hash(name, text, *resolve(self.scope, user, agent, project).write_values)

    # ------------------------------------------------------------------ read path
    @_one_at_a_time
    def recover(
        self,
        query: str,
        session: str | None = None,
        budget: int | None = None,
        exclude: Iterable[int] | Sequence[Message | dict] | None = None,
        *,
        as_of: datetime | None = None,
        proactive: bool = False,
        rerank: bool = False,
        llm: LLMSettings | LLMClient | None = None,
        top_k: int | None = None,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        min_score: float | None = None,
    ) -> Recovery:
        """Recover archived turns relevant to ``query`` as a block of at most ``budget`` characters (default 6,000).
        ``query`` is read up to its first ``MAX_QUERY_CHARS`` (16,000) characters (also in ``explain`` and ``search``).

        ``session``: restrict to one session (and its sub-sessions); None searches every session. ``exclude``: entry
        ids, or the live context as messages (Message or dicts): entries whose full text is still in it are never
        re-injected. ``as_of``: answer as of a past time (naive = UTC): turns whose event time is later are not
        candidates, and fact values valid then count as current (docs/architecture.md §5.4). A packed turn stating a
        value changed since is marked in the block ("port: 5433 until 14 Mar 2026, now 5434"; ``.facts``).
        ``proactive``: a recovery nobody asked for (at a compaction): pruned entries are left out unless the query names
        one of their lookup hints. ``user``: only that user's entries (default: the handle's user); ``agent`` /
        ``project``: only entries with that agent / project when given (default: the handle's, else any). Returns
        ``Recovery`` (``.text``, ``.entries``, ``.chars``, ``.facts``, ``.candidates`` for explain). Access counts of
        packed entries are incremented (F(e), paper eq. 2) and, with ``Config.reinforce`` (default), c and σ are
        reinforced in the same transaction (reinforce.py; paper Appendix D). When that write cannot be made (a read-only
        database file or directory, the write lock not obtained within ``reinforce.WRITE_WAIT_S`` seconds, a full disk)
        it is skipped with a warning logged on the ``lantern`` logger: the recovery is returned all the same.
        ``rerank``: LANTERN-Rerank (recover/rerank.py): one LLM call over the fused top ``Config.rerank_top_n``, the
        block packed in the LLM's order; ``llm``: its settings or client (default: the settings in force, see
        ``llm_client``). If the LLM fails (no answer, a malformed one, a timeout, an HTTP error) the fused order is
        kept, one warning is logged and ``.rerank.warning`` says why. ``.reranked`` tells which happened.
        ``top_k``: at most that many entries in the block (None: as many as the budget holds).
        ``min_score``: the injection decision's floor (default ``Config.min_score``; none for a ``proactive``
        recovery: a compaction's block restores the session it compacted; 0 turns the decision off). The decision
        (recover/relevance.py ``decide``; docs/architecture.md §3.6) reads ``Recovery.relevance.score`` (the best
        cosine over its model's floor, or the best candidate's coverage of the query's terms): below the floor the
        block is empty, below ``Config.clear_score`` it is a short one (``Config.short_budget`` characters).
        ``.reason`` says why a block is empty or shortened (empty_query, nothing_archived, no_match, below_floor,
        uncertain, budget) and ``.detail`` gives the figures; a query with no word is not searched."""
        session = self._stored_session(session)  # its stored form, for the reinforcement row as for the read
        result = self._recover(
            query,
            session,
            budget,
            exclude,
            as_of=as_of,
            proactive=proactive,
            user=user,
            agent=agent,
            project=project,
            complete=False,
            rerank=rerank,
            llm=llm,
            top_k=top_k,
            min_score=min_score,
        )
        try:
            reinforce.record_use(
                self.store, self.index, self.config, result, session or None, resolve(self.scope, user, agent, project)
            )
        except _write_errors(self.store) as e:
            if not _unwritable(self.store, e):
                raise
            log.warning(
                "%s: access counts and confidence not updated (%s); the recovery is returned all the same", self.path, e
            )
        return result

    @_one_at_a_time
    def recover_compaction(
        self,
        summary: str | None,
        *,
        live: Iterable[int] | Sequence[Message | dict] | None = None,
        session: str | None = None,
        budget: int | None = None,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        record: bool = False,
        source: str = "api",
        reason: str = "summary",
        rerank: bool = False,
        llm: LLMSettings | LLMClient | None = None,
    ) -> Recovery:
        """What a compaction lost, as the block to inject after it (docs/architecture.md §3.8; recover/loss.py).

        ``summary``: the runtime's compaction summary (None or "": an encrypted or absent summary, so everything
        not in the live context is lost). ``live``: the live context after the compaction (messages as dicts or
        ``Message``, and/or entry ids still in it), excluding the summary itself. ``session``: the compacted session
        (default ``"default"``) within the scope (default: the handle's). ``budget``: characters (default
        ``Config.budget``). The block lists the specifics (paths, identifiers, commands, flags, hashes, URLs,
        numbers, errors) the archived turns hold and neither the summary nor the live context states, heaviest
        first by the chance the next turns use them, each on the line of the turn it was last seen in, then the
        lines they were seen in. ``Recovery.loss`` reports every lost item, packed or cut, by type;
        ``Recovery.reason`` says why a block is empty (nothing_archived, nothing_lost, budget). Zero LLM calls;
        never withheld by the relevance floor. ``rerank``: one LLM call (``llm``, as ``recover``'s) puts first the lost
        items the task needs most (``Recovery.rerank``; a failure keeps the weight order, with one warning). With
        ``record`` the compaction is stored as one event (``record_compaction``; ``source``, ``reason`` as there).
        The summary and the last user message are cleaned and redacted as archived text is (a secret they quote
        never comes back in ``Recovery.query`` and never reaches the rerank's LLM). Raises ValueError for a bad
        budget or a summary over ``compaction.MAX_SUMMARY_CHARS`` characters, TypeError for a bad ``live`` or
        ``summary``."""
        from lantern.compaction import summary_text

        text = summary_text(summary)
        scope = resolve(self.scope, user, agent, project)
        budget = self._budget(budget)
        one_pass = isinstance(live, Iterable) and not isinstance(live, (str, bytes, dict, Message, Sequence))
        live = list(live) if one_pass else live  # an iterator is read once, for both uses below
        ids, live_text = self._exclusions(live, "live")
        live_list = list(live or [])
        session_name = self._stored_session(session) or DEFAULT_SESSION
        started = time.perf_counter()

        def as_archived(t: str) -> str:  # compared with archived text, so cleaned and redacted as it is
            return redact_text(clean_text(t), self.redaction)[0]

        result = recover_compaction(
            self.store,
            as_archived(text),
            live_text=live_text,
            exclude_ids=ids,
            task=as_archived(_last_user_text(live_list)),
            session=session_name,
            scope=scope,
            budget=budget,
            llm=self.llm_client(llm) if rerank else None,
            rerank_top_n=self.config.rerank_top_n,
            rerank_prompt_chars=self.config.rerank_prompt_chars,
            prune_below=self.config.prune_below,
        )
        if result.rerank is not None and result.rerank.warning:
            log.warning("%s", result.rerank.warning)
        if record:
            lost = sorted({s.entry_id for it in (result.loss.items if result.loss else []) for s in it.seen})
            self.record_compaction(
                result,
                session=session_name,
                reason=reason,
                lost=lost,
                source=source,
                user=user,
                agent=agent,
                project=project,
                latency_ms=1000 * (time.perf_counter() - started),
            )
        return result

    @_one_at_a_time
    def explain(
        self,
        query: str,
        session: str | None = None,
        budget: int | None = None,
        exclude: Any = None,
        *,
        as_of: datetime | None = None,
        proactive: bool = False,
        rerank: bool = False,
        llm: LLMSettings | LLMClient | None = None,
        top_k: int | None = None,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        extra_rankings: dict[str, list[int]] | None = None,
        min_score: float | None = None,
    ) -> Recovery:
        """``recover`` without its side effects (access counts, reinforcement): the same Recovery, whose
        ``candidates`` give every candidate's rank per signal, RRF score, MMR order and verdict (packed, excerpt,
        cut:budget, cut:duplicate, cut:floor, excluded:live, excluded:pruned) with its reason; each candidate's entry
        carries its category, confidence and success. Scope and ``min_score`` as ``recover``. ``extra_rankings``:
        further signals fused with the others (signal name -> entry ids best first; the evaluation's second-embedder
        signal). Raises ValueError for a bad budget or ``min_score``, TypeError for a bad ``exclude``, ``as_of`` or
        scope name. Each candidate's
        entry carries its tags, as a ``search`` hit's does (read in one batched query: the read path ranks without
        them)."""
        result = self._recover(
            query,
            session,
            budget,
            exclude,
            as_of=as_of,
            proactive=proactive,
            user=user,
            agent=agent,
            project=project,
            extra_rankings=extra_rankings,
            complete=True,
            rerank=rerank,
            llm=llm,
            top_k=top_k,
            min_score=min_score,
        )
        tags = self.store.tags(c.entry.id for c in result.candidates)
        for c in result.candidates:
            c.entry.tags = tags.get(c.entry.id, [])
        return result

    def _recover(
        self,
        query: str,
        session: str | None,
        budget: int | None,
        exclude: Any,
        *,
        as_of: datetime | None,
        proactive: bool,
        user: str | None,
        agent: str | None,
        project: str | None,
        extra_rankings: dict[str, list[int]] | None = None,
        complete: bool,
        rerank: bool = False,
        llm: LLMSettings | LLMClient | None = None,
        top_k: int | None = None,
        min_score: float | None = None,
    ) -> Recovery:
        """The read path shared by ``recover`` and ``explain``; ``complete``: MMR order and duplicate verdicts for
        every candidate, not only as far as packing read (recover/pipeline.py)."""
        from lantern.embed import load_ahead
        from lantern.recover import empty, facts_note, pipeline, relevance

        scope = resolve(self.scope, user, agent, project)
        budget = self._budget(budget)
        self._follow_reindex()
        ids, live = self._exclusions(exclude)
        at = _epoch(as_of)
        query, session = _query_text(query), self._stored_session(session)
        if not _WORDS.search(query):  # the cheap check first: nothing to search (recover/relevance.py)
            return Recovery(
                query=query,
                text="",
                entries=[],
                chars=0,
                budget=budget,
                reason=relevance.EMPTY_QUERY,
                detail="the query is empty or has no word" if query.strip() else "the query is empty",
            )
        if "semantic" in self.config.signals:  # the query's model loads while the read path loads its index
            load_ahead(self.embedder, query)
        self._fill_before_recovery()
        asked = list(ids)  # the caller's exclusions, without the turns after ``as_of``
        if at is not None:  # turns after the asked time did not exist yet
            self.index.refresh()
            ids += self.index.ids[self.index.time > at].tolist()
        notes = facts_note.notes_for(self.store, at, *self._fact_filter(scope)) if self.config.fact_notes else None
        result = pipeline.recover(
            self.store,
            self.index,
            self.queries,
            self.config,
            query,
            budget=budget,
            session=session,
            exclude_ids=ids,
            live_text=live,
            now=at,
            notes=notes,
            proactive=proactive,
            scope=scope,
            extra_rankings=extra_rankings,
            complete=complete,
            llm=self.llm_client(llm) if rerank else None,
            top_k=top_k,
            min_score=self._min_score(min_score, proactive),
        )
        if result.rerank is not None and result.rerank.warning:
            log.warning("%s", result.rerank.warning)
        if at is not None and all(c.verdict.startswith("excluded:") for c in result.candidates):
            result.later_from = empty.earliest_after(self.index, session, scope, asked, at)
        return result

    @_one_at_a_time
    def why_empty(
        self,
        recovery: Recovery,
        *,
        session: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        as_of: str | None = None,
    ) -> str:
        """Why the empty block of ``recovery`` (``recover`` or ``explain``, asked with these ``session`` / scope
        arguments, and as of the time ``as_of`` as the caller wrote it) is empty, in the words ``lantern recover``
        prints after "nothing recovered" (recover/empty.py): read off the recovery's verdicts and figures, never by
        running it again; with no candidate at all, one COUNT query names the filter that left the entries out."""
        from lantern.recover import empty

        scope = resolve(self.scope, user, agent, project)
        name = self._stored_session(session)

        def counts() -> empty.ScopeCounts:
            found = self.store.scope_counts(scope, name)
            near = self.sessions_like(session, user=user, agent=agent, project=project) if name and not found[3] else []
            return empty.ScopeCounts(*found, scope=scope, session=name, near=tuple(near))

        return empty.why_empty(recovery, counts, as_of)

    def _min_score(self, min_score: Any, proactive: bool = False) -> float:
        """The relevance floor of one recovery or search: ``min_score`` if given, else none for a proactive recovery,
        else ``Config.min_score``. Raises ValueError for a negative, infinite or non-numeric floor."""
        if min_score is None:
            return 0.0 if proactive else float(self.config.min_score)
        if not _is_number(min_score):
            raise ValueError(f"min_score must be a number >= 0, got {min_score!r}")
        if not math.isfinite(min_score) or min_score < 0:
            raise ValueError(f"min_score must be a finite number >= 0, got {min_score!r}")
        return float(min_score)

    @_one_at_a_time
    def facts(
        self,
        key: str | None = None,
        as_of: datetime | None = None,
        *,
        history: bool = False,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
    ) -> list[fact_store.FactRecord]:
        """Versioned facts (docs/architecture.md §5.4): the value of each key valid now or at ``as_of`` (naive = UTC),
        or with ``history`` every version stated up to then (``.current`` marks the valid one). ``key`` is normalized
        (text/fact_keys.py ``normalize_key``) and matched exactly. Scope as ``recover`` (facts of other users are never
        seen). Returns ``FactRecord`` rows ordered by key, then event time. Raises TypeError when ``as_of`` is not a
        datetime."""
        where, params = self._fact_filter(resolve(self.scope, user, agent, project))
        return self.store.fact_records(key=key, as_of=_epoch(as_of), history=history, where=where, params=params)

    @_one_at_a_time
    def record_compaction(
        self,
        recovery: Recovery,
        *,
        session: str | None,
        reason: str,
        lost: Iterable[int],
        source: str = "api",
        rerank: bool | None = None,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        latency_ms: float | None = None,
        empty_reason: str | None = None,
    ) -> int | None:
        """Record one compaction event (store/events.py): when, which ``session`` within the scope (default: the
        handle's), how it was detected (``reason``: compaction.py's summary / dropped / size_drop, or the
        integration's own), by whom (``source``: api, proxy, claude-code, codex, mcp, demo), the ``lost`` entry
        ids, the recovery's query (redacted as archived text is, first 4,000 characters), the injected entries (id,
        characters, excerpt), whether a rerank ran (``rerank``; default ``recovery.reranked``), the receipt: the
        recovery's wall time (``latency_ms``, milliseconds) and why nothing was injected (``empty_reason``; default
        ``recovery.reason`` when the block is empty, else None; events.EMPTY_REASONS names the integrations' own),
        and the loss report (``recovery.loss``, bounded: events.bound_loss). Called by
        ``compaction.Compaction.recover`` and the hooks. Returns the event id, or None when the database
        cannot be written now (a read-only file, the write lock not obtained within ``reinforce.WRITE_WAIT_S``, a
        full disk: logged on the ``lantern`` logger; the recovery stands all the same)."""
        if empty_reason is None and not recovery.text:
            empty_reason = recovery.reason or "nothing_relevant"
        scope = resolve(self.scope, user, agent, project)
        query = redact_text(recovery.query or "", self.redaction)[0][: event_store.QUERY_CHARS]
        # labels a caller names (integrations use fixed words): stored as names are, a secret in one redacted
        source, reason = redact_name(source, self.redaction), redact_name(reason, self.redaction)
        empty_reason = empty_reason and redact_name(empty_reason, self.redaction)
        try:
            with self.store.transaction(wait=reinforce.WRITE_WAIT_S) as db:
                return event_store.add_event(
                    db,
                    time=time.time(),
                    session=self._stored_session(session) or DEFAULT_SESSION,
                    scope=scope,
                    source=source,
                    reason=reason,
                    lost=list(lost),
                    query=query,
                    injected=[(e.id, len(e.text), e.excerpt) for e in recovery.entries],
                    chars=recovery.chars,
                    budget=recovery.budget,
                    rerank=recovery.reranked if rerank is None else rerank,
                    empty_reason=empty_reason,
                    latency_ms=latency_ms,
                    loss=recovery.loss.to_json(items=event_store.LOSS_PACKED) if recovery.loss is not None else None,
                )
        except _write_errors(self.store) as e:
            if not _unwritable(self.store, e):
                raise
            log.warning("%s: compaction event not recorded (%s)", self.path, e)
            return None

    @_one_at_a_time
    def events(
        self,
        session: str | None = None,
        *,
        limit: int | None = 100,
        event_id: int | None = None,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
    ) -> list[event_store.EventRecord]:
        """Recorded compaction events (``record_compaction``), newest first: of ``session`` (and of the sessions it
        is a sub-session of) when given, else of every session; at most ``limit`` (None: all). Scope as
        ``recover``, except that ``agent`` / ``project`` match the scope the event was detected in exactly."""
        scope = resolve(self.scope, user, agent, project)
        return self.store.events(scope=scope, session=self._stored_session(session), event_id=event_id, limit=limit)

    def _fact_filter(self, scope: Scope) -> tuple[str, tuple]:
        """The SQL condition on the source entries ``e`` of every facts read, with its parameters: the scope."""
        sql, params = scope_where("e", scope)
        return sql, tuple(params)

    @_one_at_a_time
    def search(
        self,
        query: str,
        k: int = 10,
        session: str | None = None,
        *,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        min_score: float | None = None,
    ) -> list[Hit]:
        """Top ``k`` entries by fused (RRF) score, with per-signal ranks. No MMR, no budget, no side effects.
        Scope as ``recover``. ``min_score``: a relevance floor as ``recover``'s (recover/relevance.py), but none by
        default: a search is a lookup someone asked for, whose scores they read; with one, nothing is returned when
        the best candidates' ``Relevance.score`` is below it. Raises ValueError when ``k`` is not a positive integer
        or ``min_score`` not a finite number >= 0."""
        scope = resolve(self.scope, user, agent, project)
        if not _is_int(k) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        floor = self._min_score(0.0 if min_score is None else min_score)
        query, session = _query_text(query), self._stored_session(session)
        if not query.strip():
            return []
        self._follow_reindex()
        from lantern.recover import pipeline

        return pipeline.search(
            self.store, self.index, self.queries, self.config, query, k=k, session=session, scope=scope, min_score=floor
        )

    def should_recover(self, question: str, draft: str | None = None) -> Any:
        """Whether ``question`` (or the model's ``draft`` answer) calls for a recovery:
        ``memory.triggers.should_recover``."""
        from lantern.memory.triggers import should_recover

        return should_recover(question, draft)

    @_one_at_a_time
    def sessions_like(
        self,
        session: str,
        *,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        n: int = 3,
    ) -> list[str]:
        """The ``n`` stored sessions of the scope (the call's, else the handle's; never another user's) whose names
        are closest to ``session`` (difflib ratio >= 0.6 against its stored form, best first), for the words of a
        ``--session`` that matched nothing. Names come back as stored (redacted)."""
        import difflib

        name = self._stored_session(session)
        if name is None:
            return []
        stored = self.store.sessions(resolve(self.scope, user, agent, project))
        return [s for s in difflib.get_close_matches(name, stored, n=n, cutoff=0.6) if s != name]

    def _stored_session(self, session: str | None) -> str | None:
        """A session name a call gives, in the form it is stored and matched in (``given_name``, then the
        database's name redaction, ``Scope.name``), or None when it is blank."""
        name = given_name(session)
        return self.scope.name(name) if name else None

    def _budget(self, budget: Any) -> int:
        if budget is None:
            return self.config.budget
        if (
            not _is_number(budget) or budget < 0 or (not _is_int(budget) and not math.isfinite(budget))
        ):  # an int past int64 is finite
            raise ValueError(f"budget must be a finite number of characters >= 0, got {budget!r}")
        return int(budget)

    def _exclusions(self, exclude: Any, name: str = "exclude") -> tuple[list[int], str]:
        """Split ``exclude`` into entry ids and the live context's text. Items may be entry ids (int) and
        messages (Message or dict), mixed; anything else raises TypeError naming the argument (``name``)."""
        if exclude is None:
            return [], ""
        if isinstance(exclude, (str, bytes, dict, Message)) or not isinstance(exclude, Iterable):
            raise TypeError(
                f"{name} must be a list of entry ids and/or messages, not a single {type(exclude).__name__}"
            )
        ids: list[int] = []
        messages: list[Any] = []
        for x in exclude:
            if _is_int(x):
                ids.append(int(x))
            elif isinstance(x, (Message, dict)):
                messages.append(x)
            else:
                raise TypeError(
                    f"{name} items must be entry ids (int) or messages (Message or dict), got {type(x).__name__}"
                )
        ids = [i for i in ids if -(2**63) <= i < 2**63]  # larger ids cannot exist in SQLite
        return ids, self.live_text(messages)

    @_one_at_a_time
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

    # ------------------------------------------------------------------ maintenance
    @_one_at_a_time
    def forget(
        self,
        *,
        entry: int | None = None,
        session: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        vacuum: bool = True,
        wait: float | None = None,
        on_wait: Callable[[Any], None] | None = None,
    ) -> Forgotten:
        """Delete an entry, every entry of a session (and its sub-sessions), of a user, or of an agent / project,
        from every table (entries, FTS5, embeddings, every table referencing entries) and from the in-process
        index, in one transaction. The selectors combine with AND and always stay inside one user (the call's
        ``user``, else the handle's): ``forget(user="alice")`` deletes all of alice, ``forget(entry=7)`` deletes
        entry 7 only if it belongs to the handle's user. At least one of entry, session, user, agent, project must
        be given in the call (ValueError). With ``vacuum`` (default) the file is then rewritten so the deleted
        text is not left in free pages, old FTS5 segments or the WAL (cost grows with the database size); deleted
        rows are zeroed in the pages written either way (``secure_delete``). A reader in a read transaction
        (another process or connection) pins the old pages until it ends: the erase then waits up to ``wait``
        seconds (default 10), calling ``on_wait(erasure)`` first (``store.sqlite.Erasure``: who holds the file),
        and when the reader is still there the result says so (``erased`` False, ``remaining_bytes``,
        ``holders``; a warning is logged) and the erase finishes at the first open, close or forget after it ends.
        ``session=""`` is the default session ``"default"``, as for ``archive`` (which stores a turn given the
        session ``""`` there), so the MCP tools and the REST API's ``forget`` undo their ``archive``.
        Returns ``Forgotten``: the number of entries deleted (an int) and whether their text is gone from the
        file."""
        if all(x is None for x in (entry, session, user, agent, project)):
            raise ValueError("give entry=, session=, user=, agent= or project=")
        if entry is not None and session is not None:
            raise ValueError("give entry= or session=, not both")
        names: list[str | None] = [None]
        if session == "":
            names = [DEFAULT_SESSION]
        elif session is not None:
            given = check_length(clean_name(session), "session")
            # its stored form, and the name as given: a session stored before names were redacted keeps it
            names = list(dict.fromkeys((self.scope.name(given), given)))
        scope = resolve(self.scope, user, agent, project)
        n = sum(self.store.delete(entry=entry, session=name, scope=scope, erase=vacuum) for name in names)
        self._reset_index()
        if n:  # forgotten text does not stay in this process's caches either
            from lantern.recover import speaker

            self.redaction.memo.clear()
            speaker.speakers_of.cache_clear()
        if n and vacuum:
            erasure = self.store.erase_free_space(wait, on_wait)
        elif vacuum:  # nothing deleted now: finish the erase of an earlier forget a reader held up, if any
            erasure = self.store.finish_pending_erase(BUSY_TIMEOUT_MS / 1000 if wait is None else wait, on_wait)
        else:
            erasure = Erasure(n == 0, self.store.file_bytes() if n else 0)
        if not erasure.complete and vacuum:
            who = ", ".join(f"process {pid} ({name})" for pid, name in erasure.holders) or "another connection"
            log.warning(
                "%s: forgotten from the index; %d bytes of the file remain unerased until %s ends its read",
                self.path,
                erasure.remaining_bytes,
                who,
            )
        return Forgotten(n, erasure.complete, erasure.remaining_bytes, erasure.holders)

    @_one_at_a_time
    def abandon(
        self,
        entries: dict[int, str],
        *,
        keep: bool,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
    ) -> int:
        """Take archived turns off their session's history: they belonged to a branch the conversation abandoned
        (a Claude Code rewind; a proxy client that resent the conversation with its last turns edited away).
        ``entries``: entry id -> the branch's sub-session name (``abandoned-<id>``). ``keep`` False (``Config.rewound
        = "skip"``): deleted from every table, without the vacuum of ``forget``; True (``"mark"``): moved into
        ``<their session>/<name>``, their facts deleted (a turn off the live branch states no current fact).
        Only entries of the call's user are touched. Returns how many were."""
        scope = resolve(self.scope, user, agent, project)
        owned = {i: place[3] for i, place in self.store.places(sorted(entries), scope).items()}
        if not owned:
            return 0
        if keep:
            n = self.store.move_entries(
                [(i, scope.name(f"{owned[i]}/{entries[i]}")) for i in sorted(owned)], drop_facts=True
            )
        else:
            n = sum(self.store.delete(entry=i) for i in sorted(owned))
        self._reset_index()
        return n

    def _reset_index(self) -> None:
        """After entries were deleted or moved: the index, when this handle has made one, reads the store again."""
        if self.writer.index is not None:
            self.writer.index.reset()

    @_one_at_a_time
    def export(
        self,
        dest: str | os.PathLike[str] | Any,
        *,
        session: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        embeddings: bool = True,
    ) -> int:
        """Write entries as JSONL to ``dest`` (a path or a text file): a header (format version, embedder id), then
        one ``{"type": "entry", ...}`` record per entry with its embedding (base64 float32) unless ``embeddings``
        is False. Export is a database-level operation: with no user in the call nor the handle it writes EVERY
        user's entries (a backup; each record keeps its scope), else only that user's; ``agent`` / ``project`` /
        ``session`` filter. Returns the number of entries written. Format: lantern/portability.py."""
        from lantern.portability import export_jsonl

        scope = (
            None
            if user is None
            and not self.scope.user
            and agent is None
            and project is None
            and self.scope.agent is None
            and self.scope.project is None
            else resolve(self.scope, user, agent, project)
        )
        session = None if session is None else check_length(clean_name(session), "session")
        return export_jsonl(self, dest, scope=scope, session=session, embeddings=embeddings)

    @_one_at_a_time
    def import_(
        self,
        src: str | os.PathLike[str] | Any,
        *,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        embeddings: bool = True,
        progress: Callable[[int], None] | None = None,
    ) -> Any:
        """Read a JSONL export (``export``) from ``src`` (a path or a text file), one transaction per 256 lines;
        entries already stored (same content hash) are counted as duplicates, so importing twice adds nothing.
        Records keep their recorded scope, unless a user is given (in the call, or the handle's): then every
        record goes into that user (and into ``agent`` / ``project`` when given). ``embeddings=False`` recomputes
        the embeddings. Returns ``ImportResult`` (added, duplicates, grown, lines, entry_ids). Raises
        ``ExportFormatError`` (bad line, with ``.line``: nothing of its batch written) and
        ``EmbedderMismatchError`` (exported with another embedder: use ``embeddings=False``)."""
        from lantern.portability import import_jsonl

        rehome = (
            user is not None
            or self.scope.user
            or agent is not None
            or project is not None
            or self.scope.agent is not None
            or self.scope.project is not None
        )
        scope = resolve(self.scope, user, agent, project) if rehome else None
        self._follow_reindex()
        return import_jsonl(self, src, scope=scope, embeddings=embeddings, progress=progress)

    @_one_at_a_time
    def reindex(self, embedder: str | Embedder | None = None, progress: Progress | None = None) -> int:
        """Re-embed every entry with ``embedder`` (default: the current one) in one transaction, and record it
        as the database's embedder. Returns the number of entries re-embedded. A handle that follows its database
        (opened without naming an embedder) first takes up a reindex made by another process, so ``reindex()`` does
        not undo it."""
        from lantern.embed import get_embedder, store_record

        if embedder is None:
            self._follow_reindex()
        new = get_embedder(embedder) if embedder is not None else self.embedder
        rows = list(self.store.texts())
        vectors: list[np.ndarray] = []
        for start in range(0, len(rows), INGEST_BATCH_TURNS):
            batch = rows[start : start + INGEST_BATCH_TURNS]
            vectors.extend(new.embed([summary for _, summary in batch]))
            if progress:
                progress(start + len(batch), len(rows))
        n = self.store.replace_vectors(
            ((i, v) for (i, _), v in zip(rows, vectors)),
            *store_record(new),
        )
        self._use_embedder(new)
        return n

    @_one_at_a_time
    def set_secret_redaction(self, enabled: bool) -> None:
        """Switch secret redaction on (default) or off for this database; recorded in its meta table so every
        later handle follows it. Private spans are removed either way (archive/redact.py). Switched on, the names
        stored meanwhile are rewritten in their redacted form (``rewrite_names``)."""
        set_secret_redaction(self, enabled)
        self._redact_stored_names()

    @property
    def backend(self) -> str:
        """The store's backend: "sqlite" or "postgresql"."""
        return getattr(self.store, "backend", "sqlite")

    @_one_at_a_time
    def count(self) -> int:
        """How many entries the database holds, every user's."""
        return self.store.count()

    @_one_at_a_time
    def vacuum(self, *, wait: float | None = None, on_wait: Callable[[Erasure], None] | None = None) -> tuple:
        """Rewrite the database without its free space (SQLite: VACUUM, then a checkpoint that empties the WAL;
        PostgreSQL: VACUUM FULL), waiting up to ``wait`` seconds (None: the store's default) for a process still
        reading old pages; ``on_wait(erasure)`` when it starts waiting. Returns (bytes before, the ``Erasure``:
        ``complete``, ``holders``, ``remaining_bytes``; bytes after)."""
        before = self.store.file_bytes()
        erasure = self.store.erase_free_space(wait=wait, on_wait=on_wait)
        return before, erasure, self.store.file_bytes()

    @_one_at_a_time
    def outside_scope(
        self,
        entry_ids: Iterable[int],
        *,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
    ) -> list[int]:
        """Which of ``entry_ids`` name no entry inside the scope (default: the handle's): unknown ids and other
        users' entries alike, in the order given; one query. The ids ``feedback`` leaves alone."""
        ids = list(entry_ids)
        valid = [int(i) for i in ids if -(2**63) <= i < 2**63]
        inside = self.store.places(valid, resolve(self.scope, user, agent, project))
        return [i for i in ids if i not in inside]

    @_one_at_a_time
    def feedback(
        self,
        entry_ids: Iterable[int],
        useful: bool,
        *,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
    ) -> int:
        """Explicit usefulness of recovered entries: σ ← (1 − α)·σ + α·[useful] for each id, one transaction
        (reinforce.py; paper Appendix D). Only entries inside the scope (default: the handle's user; lantern/scope.py)
        are updated: unknown ids and other users' entries are ignored alike. Returns the number of entries updated.
        Raises TypeError when ``useful`` is not a bool or an id is not an int."""
        if not isinstance(useful, bool):
            raise TypeError(f"useful must be True or False, got {useful!r}")
        ids = list(entry_ids)
        if any(not _is_int(i) for i in ids):
            raise TypeError("entry_ids must be integers")
        ids = [int(i) for i in ids if -(2**63) <= i < 2**63]
        scope = resolve(self.scope, user, agent, project)
        updated = reinforce.apply_feedback(self.store, ids, useful, self.config.success_alpha, scope_where("", scope))
        self.index.set_reinforcement(updated)
        return len(updated)

    @_one_at_a_time
    def stats(
        self,
        *,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        all_users: bool = False,
        by_table: bool = True,
    ) -> dict[str, Any]:
        """Counts and sizes, scoped like every read: ``entries``, ``sessions``, ``text_chars``, ``pruned``
        (entries with c below the prune threshold) and ``pending_recoveries`` (waiting for the next assistant
        message) count only the scope's (``user``, default the handle's; ``agent`` / ``project`` filter), named in
        ``user`` (and ``agent`` / ``project`` when given). The file's own figures: path, embedder id and
        dimension, schema version (each backend has its own migration series: SQLite's is at 10 where
        PostgreSQL's is at 1), ``database_bytes`` (pages in use, every user's entries included: whoever holds the
        handle holds the file), ``bytes_per_turn`` (database_bytes over every user's archived turns) and
        ``bytes_per_turn_by_table`` (unless ``by_table`` is false: on SQLite a pass over every page of the file).
        ``all_users=True`` (an administrator's view; not with a scope): every user's
        counts, ``users`` (how many) and ``free_bytes``."""
        if all_users:
            if user is not None or agent is not None or project is not None:
                raise ValueError("all_users=True counts every user: give no user, agent or project with it")
            out = self.store.stats(None, by_table)
            out["pruned"] = reinforce.pruned_count(self.store, self.config.prune_below)
            out["pending_recoveries"] = reinforce.pending_count(self.store)
            return self._without_unused(out)
        scope = resolve(self.scope, user, agent, project)
        out = {"path": self.path, "user": scope.user}
        if scope.agent is not None:
            out["agent"] = scope.agent
        if scope.project is not None:
            out["project"] = scope.project
        out.update(self.store.stats(scope, by_table))
        out["pruned"] = reinforce.pruned_count(self.store, self.config.prune_below, scope_where("", scope))
        out["pending_recoveries"] = reinforce.pending_count(self.store, scope.user)
        return self._without_unused(out)

    def _without_unused(self, stats: dict[str, Any]) -> dict[str, Any]:
        """``stats`` without ``vectors_pending`` while English e5 is off (``Config.e5_english_weight`` 0): those
        blocks are then never computed, and a count that never falls reads as work left undone."""
        if not self.writer.fills:
            stats.pop("vectors_pending", None)
        return stats


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


def _write_errors(store: Any) -> tuple[type[BaseException], ...]:
    """The errors a skippable write may raise on ``store``'s backend (sqlite3.OperationalError for SQLite; the
    PostgreSQL store names its own: ``PostgresStore.write_errors``)."""
    return getattr(store, "write_errors", (sqlite3.OperationalError,))


def _unwritable(store: Any, e: BaseException) -> bool:
    """Whether ``e`` means ``store`` cannot be written now (store/sqlite.py ``is_unwritable``, or the backend's)."""
    check = getattr(store, "is_unwritable", None)
    return check(e) if check is not None else is_unwritable(e)


def _epoch(as_of: Any) -> float | None:
    """Unix seconds of an ``as_of`` datetime (naive = UTC); None stays None; anything else is a TypeError."""
    if as_of is None:
        return None
    if not isinstance(as_of, datetime):
        raise TypeError(f"as_of must be a datetime, got {type(as_of).__name__}")
    try:
        ts = to_epoch(as_of)
        datetime.fromtimestamp(ts, tz=timezone.utc)  # e.g. 0001-01-01 at +05:00 is before year 1 in UTC
    except (OverflowError, ValueError, OSError):
        raise ValueError(f"as_of {as_of.isoformat()} is outside the years 1..9999 in UTC") from None
    return ts
