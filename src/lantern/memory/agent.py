"""The memory agent loop (LongContextMemoryAgent of the layered-memory write-up; docs/architecture.md §8).

    question  -> block = recover(question + core gist, top-k, budget[, rerank])   every question is a candidate:
                 the injection decision (recover/relevance.py) gives a full block, a short one or nothing
       block  -> answer = LLM(system, gist, working memory, marked block, question)
       none   -> answer = LLM(system, gist, working memory, question), with a note that the archive was searched
                 and holds nothing that answers it when the question refers back (memory/triggers.py), so the
                 model says so instead of guessing
    archive (question, answer): working memory, gist (every 5 turns, by the LLM), long-term archive

One generation per turn, plus the optional rerank call. The recovered block is inserted after working memory and
before the question, under "Recovered history" or 【相关历史记录】 (by the question's script). Archiving the answer
judges the recovery (reinforce.py): a recovered entry whose lookup hints the answer reuses is "referenced by the
next answer" (the paper's usefulness, σ).

Seed parameters (the write-up's): working memory 3 turns, gist every 5 turns, top-k 2; ``Config.working_turns``,
``Config.gist_every`` and the ``top_k`` argument change them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from lantern import reinforce
from lantern.llm import LLMClient, LLMError, LLMSettings, Usage
from lantern.memory.context import DEFAULT_CONTEXT_BUDGET, Context, Session
from lantern.memory.triggers import back_references
from lantern.recover.rerank import language

SHORT_DRAFT_CHARS = (
    12  # a draft with fewer non-space characters counts as low-confidence (ours; write-up: "very short")
)
TOP_K = 2  # recovered entries per turn (the write-up's seed)
TITLES = {"en": "Recovered history", "zh": "【相关历史记录】"}
# put where the block goes when a question that refers back gets nothing: the model says so instead of guessing
NOTHING_FOUND = {
    "en": "Recovered history: the archive of earlier conversation was searched for this question and holds nothing "
    "that answers it. Say that you do not find it; do not guess.",
    "zh": "【相关历史记录】已检索之前的对话记录，没有找到能回答这个问题的内容。请如实说明没有找到，不要猜测。",
}
SYSTEM_PROMPT = (
    "You are a helpful assistant with a long memory. Earlier parts of the conversation may appear under "
    '"Recovered history": use them when they answer the question, and say so when nothing you have answers it.'
)

PROBE_AFTER = 8  # answered asks at the remembered size before one ask tries a larger context (ours)
PROBE_STOP = 8  # no probe once the refused size is within 1/PROBE_STOP of the answered one (ours)

__all__ = ["AgentTurn", "ContextWindow", "MemoryAgent", "NOTHING_FOUND", "SYSTEM_PROMPT", "TITLES", "short_draft"]


@dataclass
class ContextWindow:
    """What one endpoint and model took, in characters of context (``Context.chars``) sent by one agent: ``fits``
    the largest context it answered, ``refused`` the smallest it refused for its size (``LLMError.context_too_long``);
    None until seen. ``answered``: asks answered at the remembered size since the last probe.

    The rule (ours; tokens per character vary with the text, so each is evidence, not a bound): before any refusal
    an ask starts at the agent's budget. After one, it starts at ``fits`` (or half of ``refused`` while none
    fitted), so the refusals are not paid again at each ask. A refusal retries at ``fits`` when that is smaller,
    else at half the budget. Growing back is careful: after ``PROBE_AFTER`` asks answered at the remembered size,
    asks start halfway between ``fits`` and ``refused`` until one sends a context larger than ``fits`` (answered, it
    raises ``fits``; refused, it costs that ask one call and lowers ``refused``); once the two are within
    ``1/PROBE_STOP`` of ``refused``, such a probe comes after ``PROBE_AFTER * PROBE_STOP`` asks, at ``refused``
    itself (the endpoint may have been given a larger window). A refusal at or below ``fits``
    (a denser text) forgets ``fits``; an answer at or above ``refused`` forgets ``refused``, and the next ask
    starts at the agent's budget again."""

    fits: int | None = None
    refused: int | None = None
    answered: int = 0

    def start(self, budget: int) -> int:
        """The budget (characters) an ask starts at, for an agent whose budget is ``budget``."""
        if self.refused is None:
            return budget
        if self.fits is None:
            return min(budget, self.refused // 2)
        close = self.refused - self.fits <= self.refused // PROBE_STOP
        if self.answered >= PROBE_AFTER * (PROBE_STOP if close else 1):  # a probe, until a context tests it
            return min(budget, self.refused if close else (self.fits + self.refused) // 2)
        return min(budget, self.fits)

    def retry(self, budget: int) -> int:
        """The budget to ask again at after a refusal at ``budget``."""
        return self.fits if self.fits is not None and self.fits < budget else budget // 2

    def answer(self, chars: int) -> None:
        """The endpoint answered a context of ``chars`` characters."""
        grew = self.fits is not None and chars > self.fits  # a probe tested (a smaller context tells nothing new)
        self.fits = chars if self.fits is None else max(self.fits, chars)
        if self.refused is not None and self.refused <= self.fits:
            self.refused = None
        self.answered = 0 if grew else self.answered + 1

    def refusal(self, chars: int) -> None:
        """The endpoint refused a context of ``chars`` characters for its size."""
        self.refused = chars if self.refused is None else min(self.refused, chars)
        if self.fits is not None and self.fits >= self.refused:
            self.fits = None
        self.answered = 0


@dataclass
class AgentTurn:
    """One turn of the loop. ``answer``: what the user gets; ``draft``: None (no draft is generated: every
    question is recovered for first); ``reasons``: the back-reference cues of the question and the evidence's
    verdict ("evidence: clear", "evidence: uncertain", "evidence: below_floor", ...); ``recovery``: the Recovery
    (None when none ran: no room left); ``used``: ids of recovered entries whose lookup hints the answer reuses;
    ``generations``: LLM answers generated (1); ``usage``: every LLM call of the turn, rerank included; ``ms``:
    wall time of the turn; ``context``: the messages the answer was generated from."""

    question: str
    answer: str
    draft: str | None
    reasons: list[str]
    recovery: Any = None
    used: list[int] = field(default_factory=list)
    generations: int = 1
    usage: Usage = field(default_factory=Usage)
    ms: float = 0.0
    context: Context | None = None

    @property
    def recovered(self) -> bool:
        return self.recovery is not None and bool(self.recovery.entries)

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answer": self.answer,
            "recovered": self.recovered,
            "reasons": self.reasons,
            "reason": self.recovery.reason if self.recovery is not None else None,
            "entries": [e.id for e in self.recovery.entries] if self.recovery is not None else [],
            "used": self.used,
            "reranked": bool(self.recovery is not None and self.recovery.reranked),
            "generations": self.generations,
            "llm_calls": self.usage.calls,
            "tokens_in": self.usage.tokens_in,
            "tokens_out": self.usage.tokens_out,
            "ms": round(self.ms, 1),
        }


def short_draft(draft: str, min_chars: int = SHORT_DRAFT_CHARS) -> bool:
    """Whether ``draft`` is too short to be an answer (fewer than ``min_chars`` non-space characters)."""
    return len("".join(draft.split())) < min_chars


class MemoryAgent:
    """A chat over one ``Lantern`` store and an OpenAI-compatible LLM, with layered memory and recovery.

    ``lantern``: the store (turns are archived in ``session``); ``llm``: LLMSettings or LLMClient (default: the
    settings in force, ``Lantern.llm_client``); ``budget``: characters of the whole context sent to the LLM;
    ``top_k``: recovered entries per turn; ``rerank``: LANTERN-Rerank on each recovery; ``max_tokens``: each
    answer's cap (default the settings'). Raises ValueError when no LLM is configured."""

    def __init__(
        self,
        lantern: Any,
        session: str,
        llm: LLMSettings | LLMClient | None = None,
        *,
        system_prompt: str = SYSTEM_PROMPT,
        budget: int = DEFAULT_CONTEXT_BUDGET,
        top_k: int = TOP_K,
        rerank: bool = False,
        max_tokens: int | None = None,
    ):
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        self.lantern = lantern
        self.client = lantern.llm_client(llm)
        self.memory = Session(lantern, session, system_prompt=system_prompt, llm=self.client)
        self.budget, self.top_k, self.rerank, self.max_tokens = budget, top_k, rerank, max_tokens
        self.windows: dict[tuple[str, str], ContextWindow] = {}  # (base URL, model) -> what its window took

    @property
    def window(self) -> ContextWindow:
        """The ``ContextWindow`` of the endpoint and model this agent's client calls."""
        key = (self.client.settings.base_url, self.client.settings.model)
        return self.windows.setdefault(key, ContextWindow())

    @property
    def session(self) -> str:
        return self.memory.session

    def ask(self, question: str) -> AgentTurn:
        """One turn: recover (the evidence decides what is injected), answer, archive. Raises ``LLMError`` when the
        answer cannot be generated (nothing archived then); a failed rerank only falls back to the fused order."""
        start = time.perf_counter()
        before = Usage(**vars(self.client.usage))
        cues = back_references(question)
        budget = max(self.window.start(self.budget), self.memory.min_budget(question))
        context = self._context(question, budget, cues)
        context, answer = self._generate_fitted(context, question, cues)
        generations = 1
        recovery = context.recovery
        reasons = cues + ([f"evidence: {recovery.reason or 'clear'}"] if recovery is not None else [])
        draft = None
        self.memory.add([{"role": "user", "content": question}, {"role": "assistant", "content": answer}])
        usage = Usage(
            self.client.usage.calls - before.calls,
            self.client.usage.tokens_in - before.tokens_in,
            self.client.usage.tokens_out - before.tokens_out,
            self.client.usage.ms - before.ms,
        )
        return AgentTurn(
            question=question,
            answer=answer,
            draft=draft,
            reasons=reasons,
            recovery=context.recovery,
            used=_used(self.lantern, context.recovery, answer),
            generations=generations,
            usage=usage,
            ms=(time.perf_counter() - start) * 1000,
            context=context,
        )

    def _context(self, question: str, budget: int, cues: list[str]) -> Context:
        """The context of one ask at ``budget`` characters: recovered for (every question is a candidate), with the
        nothing-found note when the question refers back (``cues``) and the recovery injected nothing."""
        lang = language(question)
        return self.memory.build_context(
            question,
            budget,
            recover=True,
            rerank=self.rerank,
            top_k=self.top_k,
            recovery_title=TITLES[lang],
            empty_note=NOTHING_FOUND[lang] if cues else None,
        )

    def _generate(self, context: Context) -> str:
        return self.client.chat(context.messages, max_tokens=self.max_tokens).text.strip()

    def _generate_fitted(self, context: Context, question: str, reasons: list[str]) -> tuple[Context, str]:
        """The answer to ``context``, and the context it was generated from. When the endpoint refuses the request
        for its size (``LLMError.context_too_long``: the model's window is smaller than ``budget`` characters
        take), the context is built again smaller (the oldest working turns and the recovered block's
        lowest-ranked entries go first: Session.build_context): at the largest size that endpoint answered before,
        else at half the budget, and asked once more, down to the smallest budget that holds the system prompt and
        the question; then the endpoint's error is raised. Budgets are in characters and the endpoint's window in
        tokens, so halving is the only assumption made about the ratio (ours). What fitted and what was refused is
        remembered per endpoint and model (``ContextWindow``): the next ask starts from what fitted. Raises
        ``LLMError``."""
        budget = context.budget
        window = self.window
        while True:
            try:
                answer = self._generate(context)
            except LLMError as e:
                if not e.context_too_long:
                    raise
                window.refusal(context.chars)
                floor = self.memory.min_budget(question)
                if budget <= floor:
                    raise
                budget = max(window.retry(budget), floor)
                context = self._context(question, budget, reasons)
            else:
                window.answer(context.chars)
                return context, answer


def _used(lantern: Any, recovery: Any, answer: str) -> list[int]:
    """The recovered entries whose lookup hints ``answer`` reuses (reinforce.py's usefulness test)."""
    if recovery is None or not recovery.entries:
        return []
    return reinforce.useful_entries(lantern.store, [e.id for e in recovery.entries], answer)
