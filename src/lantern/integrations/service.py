"""``MemoryService``: the operations the integrations expose (archive, recover, search, forget, stats), each taking
and returning plain JSON-able values, over one lazily opened ``Lantern``.

Every operation takes an optional scope (``user``, ``agent``, ``project``; lantern/scope.py): the user is an
isolation boundary (default ``""``), agent and project filter reads and label writes.

Bad input raises ``LanternError``, ``ValueError`` or ``TypeError``; each integration turns those into its own error
(an MCP tool error, an HTTP 400/404) and never into a crash. Calls are serialized by a lock: one SQLite handle,
one in-process index.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from lantern.errors import LanternError
from lantern.text.names import plural

MAX_K = 1000  # search results per call (ours)
MAX_BUDGET = 1_000_000  # characters per recovery (ours)
FILL_INTERVAL_S = 2.0  # seconds between background fill steps (ours)
FILL_BATCH = 16  # entries per background fill step: the lock is held ~0.5 s at most on 2 cores (ours)


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")  # the interfaces `lantern serve` and `lantern ui` bind by default


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an interface to bind, or a request's Host name) is the loopback one: ``LOOPBACK_HOSTS``,
    any 127.0.0.0/8 address, ``[::1]``. A server on any other interface serves the archive to whoever reaches it,
    so it needs a token (``lantern serve`` warns, ``lantern ui`` refuses)."""
    import ipaddress

    host = host.strip().lower().removeprefix("[").removesuffix("]")
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class NoDatabaseError(LanternError):
    """A read was asked of a database file that does not exist yet."""


class MemoryService:
    """``path``: the database (default ``$LANTERN_DB`` or ``~/.lantern/lantern.db``); ``embedder``: as ``Lantern``.
    The database is opened at the first call; only ``archive`` creates it (a read of a missing file is an error,
    as in the CLI). ``source``: who serves (mcp, proxy), named in the receipt each ``recover`` records."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        embedder: str | None = None,
        config: Any = None,
        *,
        warm: bool = False,
        source: str = "service",
    ):
        from lantern.config import default_db_path, is_server_url

        self.source = source
        self._forget_key = os.urandom(32)  # signs this process's forget confirmations (``forget``)
        self.path = path if is_server_url(path) else Path(path) if path is not None else default_db_path()
        self.embedder = embedder
        self.config = config  # a lantern.config.Config for the handle (None: the default)
        # archive and recover through the warm daemon when one of this identity runs (integrations/daemon.py): the
        # one writer of the store; only with the store's own embedder and the default Config, which it uses
        self.warm = warm and embedder is None and config is None
        self._lantern = None
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._filler: threading.Thread | None = None

    def _open(self, create: bool = False):
        if self._lantern is None:
            if not create and isinstance(self.path, Path) and not self.path.exists():  # a URL: the server says
                raise NoDatabaseError(f"no database at {self.path}: archive something first")
            from lantern.api import Lantern

            if self.config is not None:
                self._lantern = Lantern(self.path, embedder=self.embedder, config=self.config)
            else:
                self._lantern = Lantern(self.path, embedder=self.embedder)
            self._lantern.build_graphs(background=True)  # a long-lived process: it builds and saves the graphs
        return self._lantern

    # ------------------------------------------------------------------ vectors filled in the background
    def start_filler(self, interval_s: float = FILL_INTERVAL_S, batch: int = FILL_BATCH) -> None:
        """Fill the deferred vector blocks (archive/fill.py: the e5 part of English turns) in a background thread of
        this long-lived process: ``batch`` entries per step, a step every ``interval_s`` seconds while some remain,
        each step under the service lock (the embedding models and the SQLite handle are not shared across
        threads). A failed step (the write lock held elsewhere, a read-only file) is retried at the next one.
        Stopped by ``close``."""
        if self._filler is not None:
            return

        def run() -> None:
            while not self._stop.wait(interval_s):
                try:
                    while self.fill_step(batch) and not self._stop.is_set():
                        self._stop.wait(0.05)  # let a waiting request take the lock between batches
                except Exception:  # noqa: BLE001 - a background step never takes the server down; retried later
                    continue

        self._filler = threading.Thread(target=run, name="lantern-fill", daemon=True)
        self._filler.start()

    def fill_step(self, batch: int = FILL_BATCH) -> int:
        """One background step: the deferred block of up to ``batch`` entries, newest first. Returns how many."""
        with self._lock:
            if self._lantern is None or not self._lantern.writer.fills:
                return 0
            return self._lantern.writer.fill(batch, wait=0.5)

    def close(self) -> None:
        self._stop.set()
        if self._filler is not None:
            self._filler.join(timeout=10)
            self._filler = None
        with self._lock:
            if self._lantern is not None:
                self._lantern.close()
                self._lantern = None

    # ------------------------------------------------------------------ operations
    def archive(
        self,
        messages: Any,
        session: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
    ) -> dict[str, Any]:
        """Archive a list of chat messages (OpenAI, Anthropic or ``{role, content}`` dicts) in one transaction."""
        if not isinstance(messages, list) or not messages:
            raise ValueError("messages must be a non-empty list of message objects")
        if not all(isinstance(m, dict) for m in messages):
            raise ValueError('every message must be an object such as {"role": "user", "content": "..."}')
        session = _optional_str(session, "session")
        scope = _scope(user, agent, project)
        warm = self._warm("archive", {"messages": messages}, {"session": session, **scope}, create=True)
        if warm is not None:
            return warm
        with self._lock:
            r = self._open(create=True).archive(messages, session=session, **scope)
        return {
            "session": r.session,
            "added": r.added,
            "duplicates": r.duplicates,
            "skipped": r.skipped,
            "redacted": r.redacted,
            "entry_ids": r.entry_ids,
            "warnings": r.warnings,
        }

    def recover(
        self,
        query: str,
        session: str | None = None,
        budget: int | None = None,
        exclude: list[Any] | None = None,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
    ) -> dict[str, Any]:
        """The block to inject (at most ``budget`` characters) and its entries. ``exclude``: the live context
        (messages) and/or entry ids never to re-inject. Leaves a receipt: one event (``Lantern.record_compaction``,
        reason ``query``, source ``self.source``) with the latency and why nothing was injected."""
        query = _str(query, "query")
        session = _optional_str(session, "session")
        if budget is not None:
            _int(budget, "budget", 0, MAX_BUDGET)
        if exclude is not None and not isinstance(exclude, list):
            raise ValueError("exclude must be a list of messages and/or entry ids")
        scope = _scope(user, agent, project)
        kwargs = {"session": session, "budget": budget, "exclude": exclude, **scope}
        warm = self._warm("recover", {"query": query, "receipt": self.source}, kwargs)
        if warm is not None:
            return warm
        with self._lock:
            lantern = self._open()
            started = time.perf_counter()
            r = lantern.recover(query, session=session, budget=budget, exclude=exclude, **scope)
            lantern.record_compaction(
                r,
                session=session,
                reason="query",
                lost=[],
                source=self.source,
                latency_ms=1000 * (time.perf_counter() - started),
                **scope,
            )
        return r.to_json()

    def recover_compaction(
        self,
        summary: str | None,
        session: str | None = None,
        budget: int | None = None,
        live: list[Any] | None = None,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
    ) -> dict[str, Any]:
        """What a compaction lost (``Lantern.recover_compaction``): the block, its entries, ``reason`` when empty and
        ``loss`` (by type, packed and cut). ``live``: the live context (messages) and/or entry ids."""
        if summary is not None:
            summary = _str(summary, "summary")
        session = _optional_str(session, "session")
        if budget is not None:
            _int(budget, "budget", 0, MAX_BUDGET)
        if live is not None and not isinstance(live, list):
            raise ValueError("live must be a list of messages and/or entry ids")
        scope = _scope(user, agent, project)
        with self._lock:
            r = self._open().recover_compaction(summary, live=live, session=session, budget=budget, **scope)
        return r.to_json()

    def _warm(self, op: str, args: dict[str, Any], kwargs: dict[str, Any], create: bool = False) -> Any:
        """The warm daemon's answer to ``op`` (``kwargs``' ``user`` picks its handle), or None: do it here (the
        daemon is off, absent or failed; a read of a database not there yet is refused here, in our words)."""
        if not self.warm or (not create and isinstance(self.path, Path) and not self.path.exists()):
            return None
        from lantern.integrations import daemon

        kw = {k: v for k, v in kwargs.items() if k != "user"}
        db = str(self.path.resolve()) if isinstance(self.path, Path) else self.path
        try:
            return daemon.call(op, {**args, "db": db, "user": kwargs.get("user"), "kwargs": kw})
        except daemon.Unavailable:
            return None

    def search(
        self,
        query: str,
        k: int = 10,
        session: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
    ) -> dict[str, Any]:
        """Top ``k`` entries by fused score, with each signal's rank."""
        query = _str(query, "query")
        session = _optional_str(session, "session")
        _int(k, "k", 1, MAX_K)
        scope = _scope(user, agent, project)
        with self._lock:
            hits = self._open().search(query, k=k, session=session, **scope)
        return {
            "hits": [
                {
                    "id": h.entry.id,
                    "session": h.entry.session,
                    "turn": h.entry.turn,
                    "score": round(h.score, 6),
                    "ranks": h.ranks,
                    "summary": h.entry.summary,
                }
                for h in hits
            ]
        }

    def forget(
        self,
        entry: int | None = None,
        session: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        confirm: bool | str | None = None,
    ) -> dict[str, Any]:
        """Delete one entry, every entry of a session, or of a user / agent / project, from every table (always
        inside one user: ``user``, default ``""``), once confirmed: a deletion has no undo, and these faces have no
        terminal to ask on (the CLI asks, or takes ``--yes``).

        Without ``confirm`` (or ``false``) nothing is deleted: ``{"forgotten": 0, "would_forget": n, "confirm":
        TOKEN, "selection": {...}}`` says how many entries these arguments select now. The same call with
        ``confirm`` TOKEN deletes them, provided they are still ``n`` (the token signs the selection and its count
        with this process's key: a selection that grew or shrank since, or a token of another call or process, is a
        ValueError and deletes nothing; ask again); ``confirm`` true deletes without the preview (a script, as
        ``--yes``). Deleted: ``{"forgotten": n}``; when a reader kept the deleted text's old pages in the file
        (``Lantern.forget``), also ``"erased": false`` and ``"remaining_bytes"``."""
        if entry is not None and session is not None:
            raise ValueError("give exactly one of entry or session")
        if all(x is None for x in (entry, session, user, agent, project)):
            raise ValueError("give entry, session, user, agent or project")
        if entry is not None:
            _int(entry, "entry", -(2**63), 2**63 - 1)
        if confirm is not None and not isinstance(confirm, (bool, str)):
            raise TypeError("confirm must be the token a forget without confirm returned, or true")
        session = _optional_str(session, "session")
        scope = _scope(user, agent, project)
        selection = {"entry": entry, "session": session, **scope}
        with self._lock:
            handle = self._open()
            if confirm is not True:
                count = handle.forget_count(entry=entry, session=session, **scope)
                token = self._forget_token(selection, count)
                if confirm is None or confirm is False:
                    return {"forgotten": 0, "would_forget": count, "confirm": token, "selection": selection}
                import hmac

                if not hmac.compare_digest(confirm.encode("utf-8", "surrogatepass"), token.encode()):
                    raise ValueError(
                        f"confirm does not match these arguments, which select {plural(count, 'entry', 'entries')} "
                        "now: the token is not one this server gave for them (another call's, another process's, "
                        "or the selection changed since its preview); nothing forgotten: call forget without "
                        "confirm for a new token"
                    )
            n = handle.forget(entry=entry, session=session, **scope)
        if n.erased:
            return {"forgotten": int(n)}
        return {"forgotten": int(n), "erased": False, "remaining_bytes": n.remaining_bytes}

    def _forget_token(self, selection: dict[str, Any], count: int) -> str:
        """The confirmation of a forget preview: an HMAC-SHA256 (this process's key) of the selection and its
        count, 32 hex digits."""
        import hashlib
        import hmac
        import json

        text = json.dumps([selection, count], sort_keys=True, ensure_ascii=False)
        return hmac.new(self._forget_key, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:32]

    def feedback(
        self, entry_ids: Any, useful: Any, user: str | None = None, agent: str | None = None, project: str | None = None
    ) -> dict[str, Any]:
        """Whether recovered entries were useful (their success rate σ; lantern/reinforce.py); only the caller's
        user's entries are updated."""
        if not isinstance(entry_ids, list) or not entry_ids:
            raise ValueError("entry_ids must be a non-empty list of entry ids")
        for i in entry_ids:
            _int(i, "entry id", -(2**63), 2**63 - 1)
        if not isinstance(useful, bool):
            raise ValueError("useful must be true or false")
        with self._lock:
            return {"updated": self._open().feedback(entry_ids, useful, **_scope(user, agent, project))}

    def stats(self, user: str | None = None, agent: str | None = None, project: str | None = None) -> dict[str, Any]:
        """Entries, sessions, text characters, pruned entries and pending recoveries of the scope (default: the
        default user), embedder, schema version. The file's size, its bytes per turn and free bytes are left out:
        they count every user's entries (``Lantern.stats`` keeps them for whoever holds the file; an all-users view
        is the CLI's ``stats --all-users``)."""
        scope = _scope(user, agent, project)
        with self._lock:
            s = self._open().stats(**scope, by_table=False)
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in s.items() if k not in FILE_WIDE}


# the stats that count every user's entries, whatever the scope asked for
FILE_WIDE = ("database_bytes", "free_bytes", "bytes_per_turn", "bytes_per_turn_by_table")


def _str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string")
    return value


def _optional_str(value: Any, name: str) -> str | None:
    return None if value is None else _str(value, name)


def _scope(user: Any, agent: Any, project: Any) -> dict[str, str | None]:
    return {
        "user": _optional_str(user, "user"),
        "agent": _optional_str(agent, "agent"),
        "project": _optional_str(project, "project"),
    }


def _int(value: Any, name: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")
    return value
