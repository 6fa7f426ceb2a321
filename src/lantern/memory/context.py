"""Layered context (docs/architecture.md §5): working memory, core gist, long-term archive, assembled in a budget.

    session = Session(lantern, "chat-7", system_prompt="You are a helpful assistant.")
    session.add([{"role": "user", "content": "the staging DB port is 5433"},
                 {"role": "assistant", "content": "Noted."}])
    ctx = session.build_context("which port did we use before?", budget=8000)
    client.chat.completions.create(model=..., messages=ctx.messages)

- **Working memory**: the last ``Config.working_turns`` (3) turns, verbatim (as archived: secrets redacted).
- **Core gist**: refreshed every ``Config.gist_every`` (5) turns from the turns that have left working memory; a
  turn that left it since the last refresh is shown as its extractive line after the gist until then.
  Extractive by default (ours: one line per turn, the first sentence of the user's message and of the reply,
  oldest lines rolling off past ``Config.gist_max_chars``); an LLM summary when ``Config.gist_base_url`` (an
  OpenAI-compatible ``.../v1``, called with ``POST /chat/completions``) is set — the previous gist and the new
  turns are sent to it, so only configure one you trust with the conversation. A failed call keeps the extractive gist
  (``gist_error`` says why).
- **Long-term**: the user's whole archive (every session; ``session_only`` keeps to this one), reached by
``Lantern.recover`` when ``memory.triggers.should_recover`` fires on the
  question (or the caller forces it); the query is the question plus the gist (architecture §5.3).

``build_context`` fills the budget in this order of priority (ours): system prompt and question (required), working
memory (newest turn first, whole turns only), gist (oldest lines dropped first), recovered block (whatever is
left). No turn appears in two layers: working-memory turns are excluded from recovery (the live-context
exclusion, by entry id and text), recovery packs each entry once, and an extractive gist line whose turn was
recovered verbatim is dropped. An LLM gist is one text with no per-turn lines, so it may restate a recovered fact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from lantern import lazy_re
from lantern.archive.chunk import chunk
from lantern.llm import LLMSettings
from lantern.memory.triggers import Trigger, recovery_query, should_recover
from lantern.model import ArchiveResult, Recovery, Turn

__all__ = ["Context", "Session", "GIST_PROMPT"]

DEFAULT_CONTEXT_BUDGET = 16_000  # characters for the whole assembled context (ours)
GIST_LINE_CHARS = 140  # each side of an extractive gist line (ours)
LLM_TURN_CHARS = 2_000  # each new turn sent to the gist LLM is cut to this (ours)
SEPARATOR = "\n\n"  # between the parts of ``Context.text``
GIST_TITLE = "[Core gist of this conversation so far]"
GIST_PROMPT = (
    "You maintain the running summary of a conversation. Update the current summary with the new turns. Keep "
    "names, decisions, exact values (ports, paths, versions, numbers) and open tasks; drop chit-chat. Answer with "
    "the summary only, at most {max_chars} characters."
)


@dataclass
class Context:
    """An assembled context. ``messages``: OpenAI chat shape (system prompt, gist and recovered block as system
    messages; working memory as user/assistant messages; the question last as a user message). ``text``: the same
    contents joined by blank lines; ``len(text) <= budget``. ``recovery``: the Recovery when one ran (its
    ``entries`` cite session, turn and time). ``trigger``: why it ran or not. ``dropped``: what the budget cut."""

    system: str
    gist: str
    working: list[dict[str, str]]
    recovered: str
    question: str
    budget: int
    trigger: Trigger
    recovery: Recovery | None = None
    messages: list[dict[str, str]] = field(default_factory=list)
    text: str = ""
    dropped: list[str] = field(default_factory=list)

    @property
    def chars(self) -> int:
        return len(self.text)


@dataclass
class _WorkingTurn:
    entry_id: int
    turn: Turn


class Session:
    """One conversation's layered memory over a ``Lantern`` store (docs/architecture.md §5).

    ``lantern``: the store; ``session``: the session id the turns are archived under; ``system_prompt``: the first
    message of every context. The LLM gist uses ``lantern.config.gist_base_url`` / ``gist_model`` /
    ``gist_timeout_s`` and the key in ``$LANTERN_GIST_API_KEY`` (never stored).
    """

    def __init__(self, lantern: Any, session: str, *, system_prompt: str = "", llm: Any = None):
        self.lantern = lantern
        self.llm = llm  # LLMSettings or LLMClient of the LLM gist; None: Config.gist_base_url, else extractive
        self.session = session
        self.system_prompt = system_prompt
        cfg = lantern.config
        self.working_turns, self.gist_every, self.gist_max_chars = cfg.working_turns, cfg.gist_every, cfg.gist_max_chars
        if self.working_turns < 0 or self.gist_every < 1 or self.gist_max_chars < 0:
            raise ValueError("working_turns must be >= 0, gist_every >= 1 and gist_max_chars >= 0")
        self.working: list[_WorkingTurn] = []
        self.turns = 0  # turns added so far (a grown turn counts once)
        self.refreshes = 0  # gist refreshes so far
        self.gist_source = "extractive"
        self.gist_error: str | None = None
        self._pending: list[_WorkingTurn] = []  # left working memory, not yet in the gist
        self._lines: list[tuple[int, str]] = []  # extractive gist: (entry id, line), oldest first
        self._llm_gist: str | None = None
        self._since_refresh = 0
        self._place_of: dict[
            int, tuple
        ] = {}  # entry id -> (session, turn) when added: a forgotten id reused is not ours

    # ------------------------------------------------------------------ write
    def add(self, messages: Any) -> ArchiveResult:
        """Archive ``messages`` (any format ``Lantern.archive`` takes; best one complete exchange or a growing
        prefix of one) and update working memory; every ``gist_every`` new turns the gist is refreshed.
        Raises TranscriptFormatError like ``archive`` (nothing stored, working memory unchanged)."""
        self._drop_forgotten()  # before archiving: a new turn may reuse a forgotten turn's id
        result = self.lantern.archive(messages, session=self.session)
        msgs = self.lantern.writer.messages(messages).messages  # the same parse + redaction as archive's
        turns = chunk(msgs, None)
        self._place_of.update(self._places(result.entry_ids))
        for entry_id, turn in zip(result.entry_ids, turns):
            same = next((w for w in (*self.working, *self._pending) if w.entry_id == entry_id), None)
            if same is not None:  # a live turn that grew, or the same turn sent again
                same.turn = turn
                continue
            self.working.append(_WorkingTurn(entry_id, turn))
            self.turns += 1
            self._since_refresh += 1
        while len(self.working) > self.working_turns:
            self._pending.append(self.working.pop(0))
        if self._since_refresh >= self.gist_every:
            self.refresh_gist()
        return result

    def refresh_gist(self) -> str:
        """Fold the turns that left working memory into the gist (normally called by ``add``). Returns the gist."""
        self._since_refresh = 0
        self.refreshes += 1
        if not self._pending:
            return self.gist
        lines = self._pending_lines()  # a forgotten turn leaves no line
        pending, self._pending = self._pending, []
        self._lines = _roll(self._lines + lines, self.gist_max_chars)
        tracked = {w.entry_id for w in self.working} | {i for i, _ in self._lines}
        self._place_of = {i: v for i, v in self._place_of.items() if i in tracked}  # lines rolled off: no longer ours
        if self._llm_configured():
            alive = {i for i, _ in lines}
            new = "\n\n".join(p.turn.text[:LLM_TURN_CHARS] for p in pending if p.entry_id in alive)
            try:
                self._llm_gist = self._call_llm(new)[: self.gist_max_chars].strip()
                self.gist_source, self.gist_error = "llm", None
            except Exception as e:  # noqa: BLE001 - any failure of the optional LLM keeps the extractive gist
                self.gist_source, self.gist_error = "extractive", f"{type(e).__name__}: {e}"
        return self.gist

    @property
    def gist(self) -> str:
        """The core gist: the LLM's when the last LLM refresh succeeded, else the extractive lines."""
        if self.gist_source == "llm" and self._llm_gist:
            return self._llm_gist
        return "\n".join(line for _, line in self._lines)

    def _pending_lines(self) -> list[tuple[int, str]]:
        """Extractive lines of the turns that left working memory since the last refresh (those still stored):
        the refresh folds them into the gist, and until then the context shows them after it, so no turn is in
        neither layer between refreshes (without them, after 6 turns the third would be in neither)."""
        if not self._pending:
            return []
        numbers = {
            e.id: e.turn
            for e in self.lantern.store.entries([p.entry_id for p in self._pending], text=False, tags=False).values()
        }
        return [(p.entry_id, gist_line(p.turn, numbers[p.entry_id])) for p in self._pending if p.entry_id in numbers]

    def _drop_forgotten(self) -> None:
        """``forget`` reaches a live Session: turns whose entries were deleted leave working memory, the pending
        turns and the extractive gist; an LLM gist that may have read them is dropped (the extractive one stays)."""
        ids = {w.entry_id for w in self.working} | {p.entry_id for p in self._pending} | {i for i, _ in self._lines}
        if not ids:
            return
        now = self._places(ids)  # an id forgotten and reused by a new turn is gone too; a turn that
        # grew in place (another handle archived its reply) keeps its session and turn number, so it stays
        gone = {i for i in ids if now.get(i) is None or now[i] != self._place_of.get(i, now[i])}
        if not gone:
            return
        self.working = [w for w in self.working if w.entry_id not in gone]
        self._pending = [p for p in self._pending if p.entry_id not in gone]
        self._lines = [(i, line) for i, line in self._lines if i not in gone]
        if self._llm_gist is not None:
            self._llm_gist, self.gist_source = None, "extractive"

    def _places(self, ids: Any) -> dict[int, tuple]:
        return {i: place[3:] for i, place in self.lantern.store.places(ids).items()}

    # ------------------------------------------------------------------ LLM gist
    def _gist_llm(self) -> Any:
        """The client the gist is written with: ``llm`` when given, else one of ``Config.gist_base_url`` (key in
        ``$LANTERN_GIST_API_KEY``), else None (extractive gist)."""
        if self.llm is not None:
            return self.lantern.llm_client(self.llm)
        cfg = self.lantern.config
        if not cfg.gist_base_url:
            return None
        return self.lantern.llm_client(
            LLMSettings(cfg.gist_base_url, cfg.gist_model, cfg.gist_timeout_s, api_key_env="LANTERN_GIST_API_KEY")
        )

    def _llm_configured(self) -> bool:
        return self.llm is not None or bool(self.lantern.config.gist_base_url)

    def _call_llm(self, new_turns: str) -> str:
        messages = [
            {"role": "system", "content": GIST_PROMPT.format(max_chars=self.gist_max_chars)},
            {
                "role": "user",
                "content": f"Current summary:\n{self._llm_gist or self.gist or '(none)'}\n\nNew turns:\n{new_turns}",
            },
        ]
        text = self._gist_llm().chat(messages, max_tokens=max(64, self.gist_max_chars // 3)).text
        if not text.strip():
            raise ValueError("the gist LLM returned no text")
        return text

    # ------------------------------------------------------------------ read
    def min_budget(self, question: str) -> int:
        """The smallest ``build_context`` budget (characters) for ``question``: the system prompt and the question
        with their separator."""
        return _joined([p for p in (self.system_prompt.strip(), question) if p])

    def build_context(
        self,
        question: str,
        budget: int = DEFAULT_CONTEXT_BUDGET,
        *,
        draft: str | None = None,
        recover: bool | None = None,
        session_only: bool = False,
        rerank: bool = False,
        top_k: int | None = None,
        recovery_title: str | None = None,
        empty_note: str | None = None,
    ) -> Context:
        """Assemble system prompt, gist, working memory, recovered block and ``question`` in at most ``budget``
        characters (``len(Context.text)``). Recovery runs when ``should_recover(question, draft)`` fires, or as
        ``recover`` forces (True/False). It reads the user's whole archive (every session of the handle's user, as
        ``Lantern.recover`` without ``session``: what was said in another conversation comes back too);
        ``session_only`` restricts it to this session and its sub-sessions (``recover(session=...)``). Raises
        ValueError when the budget cannot hold the system prompt and the question. ``rerank`` / ``top_k``: as
        ``Lantern.recover`` (the rerank with this session's ``llm``); ``recovery_title``: a line put above the
        recovered block (the agent's "Recovered history" / 【相关历史记录】 marker), counted in the budget;
        ``empty_note``: a line put where the block goes when the recovery injects nothing (the agent's "nothing
        found" note, so the model says so instead of guessing), when it fits."""
        if budget is None:
            raise ValueError("budget must be a finite number of characters >= 0, got None")
        budget = self.lantern._budget(budget)  # ValueError unless a finite number >= 0; 8000.0 -> 8000
        self._drop_forgotten()
        system = self.system_prompt.strip()
        fixed = [p for p in (system, question) if p]
        used = _joined(fixed)
        if used > budget:
            raise ValueError(f"budget {budget} cannot hold the system prompt and the question ({used} characters)")
        dropped: list[str] = []
        working: list[list[dict[str, str]]] = []
        included: list[_WorkingTurn] = []
        for w in reversed(self.working):  # newest first; whole turns only
            msgs = turn_messages(w.turn)
            cost = sum(len(m["content"]) + len(SEPARATOR) for m in msgs)
            if used + cost > budget:
                dropped.append(f"working turn entry {w.entry_id}")
                continue
            working.insert(0, msgs)
            included.insert(0, w)
            used += cost
        if self.gist_source != "llm":  # the pending lines count against the cap, oldest lines rolling off first
            lines = _roll([*self._lines, *self._pending_lines()], self.gist_max_chars)
        else:  # an LLM gist is one summary: it is kept whole, the pending lines capped on their own
            lines = [(None, line) for line in self.gist.splitlines()] + _roll(
                self._pending_lines(), self.gist_max_chars
            )
        lines = _fit(lines, budget - used - len(SEPARATOR) - len(GIST_TITLE) - 1, dropped)
        gist = _gist_text(GIST_TITLE, lines)
        used += len(gist) + len(SEPARATOR) if gist else 0

        trigger = should_recover(question, draft)
        fire = trigger.fire if recover is None else recover
        recovery, block = None, ""
        room = budget - used - len(SEPARATOR) - (len(recovery_title) + 1 if recovery_title else 0)
        if fire and room > 0:
            live = [m for w in included for m in w.turn.messages]  # the live-context exclusion: by id and by text
            recovery = self.lantern.recover(
                recovery_query(question, self.gist),
                session=self.session if session_only else None,
                budget=room,
                exclude=[*(w.entry_id for w in included), *live],
                rerank=rerank,
                llm=self.llm if rerank else None,
                top_k=top_k,
            )
            block = f"{recovery_title}\n{recovery.text}" if recovery_title and recovery.text else recovery.text
            if not block and empty_note and len(empty_note) + len(SEPARATOR) <= budget - used:
                block = empty_note
            recovered_ids = {e.id for e in recovery.entries}
            if recovered_ids:  # the verbatim turn replaces its gist line (an LLM gist's lines have no turn)
                gist = _gist_text(GIST_TITLE, [(i, line) for i, line in lines if i not in recovered_ids])
        elif fire:
            dropped.append("recovery (no room left)")

        flat_working = [m for msgs in working for m in msgs]
        messages = [{"role": "system", "content": system}] if system else []
        if gist:
            messages.append({"role": "system", "content": gist})
        messages += flat_working
        if block:
            messages.append({"role": "system", "content": block})
        messages.append({"role": "user", "content": question})
        text = SEPARATOR.join(m["content"] for m in messages if m["content"])
        return Context(
            system=system,
            gist=gist,
            working=flat_working,
            recovered=block,
            question=question,
            budget=budget,
            trigger=trigger,
            recovery=recovery,
            messages=messages,
            text=text,
            dropped=dropped,
        )


# ---------------------------------------------------------------------------------------------- pure helpers
_FIRST_SENTENCE = lazy_re.compile(r"^(.+?(?:[.!?](?=\s|$)|[。！？]|\n|$))", re.S)


def first_sentence(text: str, limit: int = GIST_LINE_CHARS) -> str:
    """The first sentence (or line) of ``text``, whitespace collapsed, cut to ``limit`` characters with ``…``."""
    m = _FIRST_SENTENCE.match(text.strip())
    s = " ".join((m.group(1) if m else text).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def gist_line(turn: Turn, number: int) -> str:
    """One extractive gist line: ``turn N: <user's first sentence> → <reply's first sentence>``."""
    user = next((m.text for m in turn.messages if m.role == "user" and m.text.strip()), "")
    reply = next((m.text for m in turn.messages if m.role == "assistant" and m.text.strip()), "")
    tools = [c.name for m in turn.messages for c in m.tool_calls if c.name]
    parts = [first_sentence(user)] if user else []
    if reply:
        parts.append(first_sentence(reply))
    elif tools:
        parts.append("tools: " + ", ".join(dict.fromkeys(tools)))
    return f"turn {number}: " + " → ".join(parts)


def turn_messages(turn: Turn) -> list[dict[str, str]]:
    """A turn as OpenAI chat messages: user text as ``user``; assistant text, tool calls and tool results as one
    ``assistant`` message per run (tool traffic written inline, so no ``tool_call_id`` pairing is needed)."""
    out: list[dict[str, str]] = []
    for m in turn.messages:
        role = "user" if m.role == "user" else "system" if m.role == "system" else "assistant"
        parts = [m.text] if m.text else []
        parts += [f"[tool call {c.name}({c.arguments})]" for c in m.tool_calls]
        parts += [f"[tool result{' ' + r.name if r.name else ''}: {r.content}]" for r in m.tool_results]
        content = "\n".join(parts)
        if not content:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"] += "\n" + content
        else:
            out.append({"role": role, "content": content})
    return out


def _fit(lines: list[tuple[Any, str]], room: int, dropped: list[str]) -> list[tuple[Any, str]]:
    """The newest gist lines that fit in ``room`` characters (newline-joined); each line left out is noted."""
    kept = _roll(lines, room) if room >= 0 else []
    dropped.extend(["oldest gist line"] * (len(lines) - len(kept)))
    return kept


def _roll(lines: list[tuple[int, str]], max_chars: int) -> list[tuple[int, str]]:
    """Keep the newest lines whose total (with newlines) is at most ``max_chars``."""
    kept: list[tuple[int, str]] = []
    total = 0
    for item in reversed(lines):
        total += len(item[1]) + 1
        if total - 1 > max_chars:
            break
        kept.insert(0, item)
    return kept


def _gist_text(title: str, lines: list[tuple[Any, str]]) -> str:
    return title + "\n" + "\n".join(line for _, line in lines) if lines else ""


def _joined(parts: list[str]) -> int:
    return sum(len(p) for p in parts) + len(SEPARATOR) * max(0, len(parts) - 1)
