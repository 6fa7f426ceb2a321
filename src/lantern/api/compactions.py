"""The facade's compaction calls: what a compaction lost (``recover_compaction``, recover/loss_recovery.py) and the
compaction events (``record_compaction``, ``events``; store/events.py). Part of ``Lantern`` (api/__init__.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence

from lantern import reinforce
from lantern.api.calls import one_at_a_time
from lantern.archive.redact import redact_name, redact_text
from lantern.compaction import last_user_text
from lantern.config import DEFAULT_SESSION
from lantern.llm import LLMClient, LLMSettings
from lantern.model import Message, Recovery
from lantern.recover.loss_recovery import recover_compaction
from lantern.scope import resolve
from lantern.store import events as event_store
from lantern.store.protocol import unless_unwritable
from lantern.text.clean import clean_text

log = logging.getLogger("lantern")


class Compactions:
    """The compaction calls of ``Lantern`` (a mixin: ``self`` is the handle)."""

    @one_at_a_time
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
        never comes back in ``Recovery.query`` and never reaches the rerank's LLM). A summary over
        ``compaction.MAX_SUMMARY_CHARS`` characters is read up to there (``compaction.summary_text``): the block is
        still made, its ``reason`` ``summary_cut`` (unless it is empty for its own reason) and ``detail`` saying
        where the summary was cut. Raises ValueError for a bad budget, TypeError for a bad ``live`` or
        ``summary``."""
        from lantern.compaction import SUMMARY_CUT, summary_text

        text, cut = summary_text(summary)
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
            task=as_archived(last_user_text(live_list)),
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
        if cut:  # a full block says why it may hold more than the summary lost; an empty one keeps its own reason
            log.warning("%s", cut)
            result.reason = result.reason or SUMMARY_CUT
            result.detail = f"{result.detail}; {cut}" if result.detail else cut
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

    @one_at_a_time
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
        with unless_unwritable(
            self.store, lambda e: log.warning("%s: compaction event not recorded (%s)", self.path, e)
        ):
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
        return None

    @one_at_a_time
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
