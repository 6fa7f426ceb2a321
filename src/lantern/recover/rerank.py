"""LANTERN-Rerank (docs/architecture.md §8; the paper's headline system): one listwise LLM call over the fused top N.

    shown  = the top ``rerank_top_n`` candidates by RRF, each as ``[id] excerpt`` (its most query-relevant window,
             at most ``rerank_excerpt_chars``; the prompt at most ``rerank_prompt_chars`` in all)
    answer = the LLM's ids, most useful first: ``{"ids": [12, 7, 31]}`` (a JSON schema constrains endpoints that
             support it; the answer is parsed either way)
    order  = the ids named, in the LLM's order, then the other shown candidates, then the rest, each in fused order

Packing follows that order within the budget; the duplicate check still runs (recover/diversify.py), MMR's
reordering does not (the LLM's order is the relevance). Never worse than no rerank when the LLM misbehaves: an
answer with no id list, an id that was not shown, an id named twice, a timeout, an HTTP error or a refused
connection keep the fused order, with one warning; the block is returned all the same. The prompt is English or
Chinese by the query's script. Listwise prompting after Sun et al. 2023 (RankGPT); the prompt wording is ours.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lantern import lazy_re
from lantern.llm import LLMClient, LLMError, Usage, parse_answer
from lantern.model import Candidate
from lantern.recover.pack import excerpt

__all__ = ["PROMPTS", "RerankResult", "parse_ids", "prompt", "rerank", "rerank_shown"]

_CJK = lazy_re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
QUESTION_CHARS = 1_000  # the query shown to the LLM is cut to this (ours: a compaction tail can be long)

PROMPTS = {
    "en": (
        "You rank archived turns of a conversation by how useful each is for answering a question. "
        'Answer with JSON only, {"ids": [...]}: the ids of the turns that help answer it, most useful first. '
        "Leave out turns that do not help."
    ),
    "zh": (
        "你要根据每条已存档的对话记录对回答问题的帮助程度进行排序。"
        '只用 JSON 回答，格式为 {"ids": [...]}：列出有助于回答问题的记录编号，最有用的排在最前面。'
        "不相关的记录不要列出。"
    ),
}
_USER = {
    "en": 'Question: {question}\n\nTurns:\n{turns}\n\nAnswer with {{"ids": [...]}}.',
    "zh": '问题：{question}\n\n记录：\n{turns}\n\n请用 {{"ids": [...]}} 回答。',
}


@dataclass
class RerankResult:
    """What the rerank stage did. ``order``: candidate ids, most useful first (the LLM's ids, then the other shown
    candidates in fused order), or None when it fell back to the fused order; ``named``: the ids the LLM gave;
    ``warning``: why it fell back; ``usage``: calls, tokens in/out, milliseconds; ``prompt_chars``: prompt size."""

    order: list[int] | None
    named: list[int] = field(default_factory=list)
    warning: str | None = None
    usage: Usage = field(default_factory=Usage)
    prompt_chars: int = 0

    @property
    def reranked(self) -> bool:
        return self.order is not None


def language(query: str) -> str:
    """``"zh"`` when a sixth or more of the query's non-space characters are CJK, else ``"en"`` (ours)."""
    chars = [c for c in query if not c.isspace()]
    return "zh" if chars and 6 * len(_CJK.findall(query)) >= len(chars) else "en"


def prompt(query: str, shown: list[tuple[int, str]], prompt_chars: int) -> list[dict[str, str]]:
    """The chat messages of one listwise call: ``shown`` as (id, excerpt), the excerpts shortened evenly so the
    whole prompt stays within ``prompt_chars`` characters (each keeps at least 40)."""
    lang = language(query)
    question = query if len(query) <= QUESTION_CHARS else query[:QUESTION_CHARS] + "…"
    fixed = len(PROMPTS[lang]) + len(_USER[lang]) + len(question) + sum(len(f"[{i}] \n") for i, _ in shown)
    room = max(40, (prompt_chars - fixed) // max(1, len(shown)))
    turns = "\n".join(f"[{i}] {' '.join(text.split())[:room]}" for i, text in shown)
    return [
        {"role": "system", "content": PROMPTS[lang]},
        {"role": "user", "content": _USER[lang].format(question=question, turns=turns)},
    ]


def schema(ids: list[int]) -> dict:
    """The JSON schema of an answer: ``{"ids": [...]}``, each id one of those shown."""
    return {
        "type": "object",
        "properties": {"ids": {"type": "array", "items": {"type": "integer", "enum": ids}}},
        "required": ["ids"],
        "additionalProperties": False,
    }


_LIST = lazy_re.compile(r"\[[^\[\]]*\]")


def parse_ids(text: str, shown: set[int]) -> list[int]:
    """The ids of an answer: ``{"ids": [...]}``, a bare JSON list, or the first ``[...]`` inside other text; ids may
    be integers or digit strings. Parsed by ``lantern.llm.parse_answer`` (bounded in size and depth). Raises
    ValueError naming what is wrong, and nothing else: no list, an id that was not shown, an id named twice."""
    value = None
    try:
        value = parse_answer(text)
    except ValueError:
        m = _LIST.search(text)
        if m:
            try:
                value = parse_answer(m.group(0))
            except ValueError:
                value = None
    if isinstance(value, dict):
        value = value.get("ids")
    if not isinstance(value, list):
        raise ValueError("the answer holds no list of ids")
    ids: list[int] = []
    for v in value:
        if isinstance(v, str) and v.strip().isdigit():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or v not in shown:
            raise ValueError(f"the answer names {v!r}, which is not a candidate shown")
        if v in ids:
            raise ValueError(f"the answer names {v} twice")
        ids.append(v)
    return ids


def rerank(
    client: LLMClient,
    query: str,
    candidates: list[Candidate],
    texts: dict[int, str],
    terms: list[str],
    *,
    top_n: int = 20,
    excerpt_chars: int = 300,
    prompt_chars: int = 8_000,
) -> RerankResult:
    """One listwise call over the first ``top_n`` of ``candidates`` (fused order). ``texts``: entry id -> full text
    (the summary when absent); each is shown as its ``excerpt_chars`` window richest in the query ``terms``
    (recover/pack.py ``excerpt``). Never raises for the LLM's failures: they come back as ``warning``."""
    top = candidates[:top_n]
    if not top:
        return RerankResult(None, warning="no candidates to rerank")
    shown = [(c.entry.id, excerpt(texts.get(c.entry.id) or c.entry.summary, terms, excerpt_chars)) for c in top]
    return rerank_shown(client, query, shown, prompt_chars)


def rerank_shown(client: LLMClient, query: str, shown: list[tuple[int, str]], prompt_chars: int) -> RerankResult:
    """One listwise call over ``shown`` (id, text), the order of the LLM's answer: the ids it named, then the other
    shown ids in their order. Never raises for the LLM's failures: they come back as ``warning``. Used by ``rerank``
    (archived turns) and by the compaction recovery (lost items, recover/pipeline.py)."""
    if not shown:
        return RerankResult(None, warning="nothing to rerank")
    messages = prompt(query, shown, prompt_chars)
    result = RerankResult(None, prompt_chars=sum(len(m["content"]) for m in messages))
    before = Usage(**vars(client.usage))
    try:
        answer = client.chat(messages, json_schema=schema([i for i, _ in shown]))
        result.named = parse_ids(answer.text, {i for i, _ in shown})
    except LLMError as e:
        result.warning = f"rerank skipped, fused order kept: {e}"
    except ValueError as e:
        result.warning = f"rerank skipped, fused order kept: {e}"
    result.usage = Usage(
        client.usage.calls - before.calls,
        client.usage.tokens_in - before.tokens_in,
        client.usage.tokens_out - before.tokens_out,
        client.usage.ms - before.ms,
    )
    if result.warning is None:
        rest = [i for i, _ in shown if i not in set(result.named)]
        result.order = result.named + rest
    return result
