"""The facade's read path: ``recover``, ``explain``, ``search``, ``facts`` and their argument checks, as calls of
recover/pipeline.py (docs/architecture.md §3). Part of ``Lantern`` (api/__init__.py)."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from lantern import reinforce
from lantern.api.calls import WORDS, epoch, is_int, is_number, one_at_a_time, query_text
from lantern.llm import LLMClient, LLMSettings
from lantern.model import Hit, Message, Recovery
from lantern.scope import Scope, resolve, scope_where
from lantern.store import facts as fact_store
from lantern.store.protocol import unless_unwritable

log = logging.getLogger("lantern")


class ReadPath:
    """The read calls of ``Lantern`` (a mixin: ``self`` is the handle)."""

    # ------------------------------------------------------------------ read path
    @one_at_a_time
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

        def skipped(e: BaseException) -> None:
            log.warning(
                "%s: access counts and confidence not updated (%s); the recovery is returned all the same", self.path, e
            )

        with unless_unwritable(self.store, skipped):
            reinforce.record_use(
                self.store, self.index, self.config, result, session or None, resolve(self.scope, user, agent, project)
            )
        return result

    @one_at_a_time
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
        at = epoch(as_of)
        query, session = query_text(query), self._stored_session(session)
        if not WORDS.search(query):  # the cheap check first: nothing to search (recover/relevance.py)
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

    @one_at_a_time
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
        arguments, and as of the time ``as_of`` as the caller wrote it) is empty: one sentence, the words ``lantern
        recover`` prints after "nothing recovered: " (recover/empty.py), "" when the verdicts say nothing more; read
        off the recovery's verdicts and figures, never by running it again; with no candidate at all, one COUNT
        query names the filter that left the entries out."""
        from lantern.recover import empty

        return empty.why_empty(recovery, lambda: self._scope_counts(session, user, agent, project), as_of)

    @one_at_a_time
    def why_none(
        self,
        *,
        session: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
    ) -> str:
        """Why a read of ``session`` in this scope (``search``, ``events``, ``export``) found nothing, in the words
        ``why_empty`` gives for a recovery with no candidate (recover/empty.py ``filtered_out``): the filter that
        left every entry out, a session that matched none with the scope's sessions named closest to it; "" when
        the scope and session hold entries. One COUNT query, and one listing of the scope's sessions when the
        session holds none."""
        from lantern.recover import empty

        return empty.filtered_out(self._scope_counts(session, user, agent, project)).strip()

    def _scope_counts(self, session: str | None, user: str | None, agent: str | None, project: str | None) -> Any:
        """``recover.empty.ScopeCounts`` of ``session`` in the scope (the call's, else the handle's)."""
        from lantern.recover import empty

        scope = resolve(self.scope, user, agent, project)
        name = self._stored_session(session)
        found = self.store.scope_counts(scope, name)
        near = self.sessions_like(session, user=user, agent=agent, project=project) if name and not found[3] else []
        return empty.ScopeCounts(*found, scope=scope, session=name, near=tuple(near))

    def _min_score(self, min_score: Any, proactive: bool = False) -> float:
        """The relevance floor of one recovery or search: ``min_score`` if given, else none for a proactive recovery,
        else ``Config.min_score``. Raises ValueError for a negative, infinite or non-numeric floor."""
        if min_score is None:
            return 0.0 if proactive else float(self.config.min_score)
        if not is_number(min_score):
            raise ValueError(f"min_score must be a number >= 0, got {min_score!r}")
        if not math.isfinite(min_score) or min_score < 0:
            raise ValueError(f"min_score must be a finite number >= 0, got {min_score!r}")
        return float(min_score)

    @one_at_a_time
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
        return self.store.fact_records(key=key, as_of=epoch(as_of), history=history, where=where, params=params)

    def _fact_filter(self, scope: Scope) -> tuple[str, tuple]:
        """The SQL condition on the source entries ``e`` of every facts read, with its parameters: the scope."""
        sql, params = scope_where("e", scope)
        return sql, tuple(params)

    @one_at_a_time
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
        if not is_int(k) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        floor = self._min_score(0.0 if min_score is None else min_score)
        query, session = query_text(query), self._stored_session(session)
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

    @one_at_a_time
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

    def _budget(self, budget: Any) -> int:
        if budget is None:
            return self.config.budget
        if (
            not is_number(budget) or budget < 0 or (not is_int(budget) and not math.isfinite(budget))
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
            if is_int(x):
                ids.append(int(x))
            elif isinstance(x, (Message, dict)):
                messages.append(x)
            else:
                raise TypeError(
                    f"{name} items must be entry ids (int) or messages (Message or dict), got {type(x).__name__}"
                )
        ids = [i for i in ids if -(2**63) <= i < 2**63]  # larger ids cannot exist in SQLite
        return ids, self.live_text(messages)
