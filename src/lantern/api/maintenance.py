"""The facade's maintenance calls: forget, abandon, export / import, reindex, vacuum, feedback and stats. Part of
``Lantern`` (api/__init__.py)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from lantern import reinforce
from lantern.api.calls import is_int, one_at_a_time
from lantern.archive.pipeline import INGEST_BATCH_TURNS, Progress
from lantern.archive.redact import set_secret_redaction
from lantern.config import DEFAULT_SESSION
from lantern.model import Forgotten
from lantern.scope import check_length, clean_name, resolve, scope_where
from lantern.store.sqlite import BUSY_TIMEOUT_MS, Erasure

if TYPE_CHECKING:
    import numpy as np

    from lantern.embed import Embedder

log = logging.getLogger("lantern")


class Maintenance:
    """The maintenance calls of ``Lantern`` (a mixin: ``self`` is the handle)."""

    # ------------------------------------------------------------------ maintenance
    @one_at_a_time
    def forget_count(
        self,
        *,
        entry: int | None = None,
        session: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
    ) -> int:
        """How many entries ``forget`` with these arguments would delete now (one COUNT; nothing deleted): what the
        non-interactive faces (MCP, REST: integrations/service.py ``forget``) show before they delete. Raises
        ValueError as ``forget`` does."""
        names, scope = self._forget_selection(entry, session, user, agent, project)
        return sum(self.store.count_selected(entry=entry, session=name, scope=scope) for name in names)

    def _forget_selection(
        self, entry: int | None, session: str | None, user: str | None, agent: str | None, project: str | None
    ) -> tuple[list[str | None], Any]:
        """The session names (stored form and as given) and the scope ``forget`` deletes in. Raises ValueError
        when nothing selects, or for both an entry and a session."""
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
        return names, resolve(self.scope, user, agent, project)

    @one_at_a_time
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
        names, scope = self._forget_selection(entry, session, user, agent, project)
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

    @one_at_a_time
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

    @one_at_a_time
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

    @one_at_a_time
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

    @one_at_a_time
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

    @one_at_a_time
    def set_secret_redaction(self, enabled: bool) -> None:
        """Switch secret redaction on (default) or off for this database; recorded in its meta table so every
        later handle follows it. Private spans are removed either way (archive/redact.py). Switched on, the names
        stored meanwhile are rewritten in their redacted form (``rewrite_names``)."""
        set_secret_redaction(self, enabled)
        self._redact_stored_names()

    @one_at_a_time
    def redact_stored(self, *, progress: Callable[[int, int], None] | None = None) -> tuple[int, int]:
        """Re-apply this database's redaction rules to every archived text in place (``lantern redact``): text,
        summary, tags, hints, meta and facts of every entry, and the compaction events' queries and loss reports,
        as ``archive`` redacts a turn today (store/migrations.py ``rewrite_texts``: one transaction per 256
        entries, resumed after the last one committed when run again; a rewritten entry is re-embedded from its
        redacted text as a text-first one is, ``fill_unembedded``). The old text's bytes are erased from the file
        as a forget's are (``vacuum``, or the next open, close or forget). Names are rewritten on open already
        (``rewrite_names``). Does nothing with secret redaction off, or when every text was checked under these
        rules. ``progress(done, total)`` after each batch. Returns (entries checked, entries rewritten or dropped
        as the duplicate of one already stored redacted)."""
        import json

        from lantern.archive.redact import names_form, redact_derived, redact_json, redact_text
        from lantern.store.migrations import rewrite_texts

        if not self.redaction.secrets:
            return 0, 0
        policy = self.redaction

        def text(value: str | None) -> str | None:
            return None if value is None else redact_text(value, policy)[0]

        def redact(rec: dict[str, Any]) -> dict[str, Any]:
            source = rec["text"] or ""
            redacted = text(source) or ""

            def derived(value: Any, key: str = "") -> Any:  # JSON strings at any depth, each one rule
                if isinstance(value, str):
                    return redact_derived(value, source, redacted, policy, key)
                if isinstance(value, list):
                    return [derived(v) for v in value]
                if isinstance(value, dict):
                    return {k: derived(v) for k, v in value.items()}
                return value

            def as_json(stored: str) -> str:
                original = json.loads(stored)
                value = derived(redact_json(original, policy)[0])
                return json.dumps(value, ensure_ascii=False) if value != original else stored

            return {
                "text": text(rec["text"]),
                "summary": text(rec["summary"]),
                **{column: as_json(rec[column]) for column in ("tags", "hints", "meta")},
                "facts": [
                    (f[0], text(f[1]), text(f[2]), derived(f[3], f[2] or f[1]), derived(f[4], f[2] or f[1]))
                    for f in rec["facts"]
                ],
            }

        done = rewrite_texts(self.store, redact, names_form(policy), progress=progress)
        if done[1]:
            self._reset_index()
            self.redaction.memo.clear()
        return done

    @one_at_a_time
    def count(self) -> int:
        """How many entries the database holds, every user's."""
        return self.store.count()

    @one_at_a_time
    def vacuum(self, *, wait: float | None = None, on_wait: Callable[[Erasure], None] | None = None) -> tuple:
        """Rewrite the database without its free space (SQLite: VACUUM, then a checkpoint that empties the WAL;
        PostgreSQL: VACUUM FULL), waiting up to ``wait`` seconds (None: the store's default) for a process still
        reading old pages; ``on_wait(erasure)`` when it starts waiting. Returns (bytes before, the ``Erasure``:
        ``complete``, ``holders``, ``remaining_bytes``; bytes after)."""
        before = self.store.file_bytes()
        erasure = self.store.erase_free_space(wait=wait, on_wait=on_wait)
        return before, erasure, self.store.file_bytes()

    @one_at_a_time
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

    @one_at_a_time
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
        if any(not is_int(i) for i in ids):
            raise TypeError("entry_ids must be integers")
        ids = [int(i) for i in ids if -(2**63) <= i < 2**63]
        scope = resolve(self.scope, user, agent, project)
        updated = reinforce.apply_feedback(self.store, ids, useful, self.config.success_alpha, scope_where("", scope))
        self.index.set_reinforcement(updated)
        return len(updated)

    @one_at_a_time
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
