"""MemGPT-Faithful: the LLM-based memory baseline of the answer-accuracy evaluation (eval/qa.py, condition (e)).

MemGPT (Packer et al. 2023, "MemGPT: Towards LLMs as Operating Systems") lets the LLM manage its own memory: it
writes what is worth keeping into an archival memory as the conversation goes, and searches that memory with
queries it writes itself when a question needs it. Faithful to that, with every LLM call counted:

    write time     per archived turn: one LLM call -> up to 3 memories (short standalone sentences)
                   (cached on disk, so a rerun makes no call; the cost measured when the call was made is kept)
    question time  one LLM call -> up to ``N_QUERIES`` search queries
                   hits = Lantern's own hybrid search (``Lantern.search``: RRF of its signals) over a store holding
                          the memories of the turns outside the kept window (one archived entry per memory), top
                          ``HITS_PER_QUERY`` per query
                   block = the union of the hits, round-robin over the queries (first hit of each query, then the
                           second, ...), one line ``- [date] memory`` each, until the eval's character budget is full

Using Lantern's search (not BM25) gives the baseline the same retrieval machinery as condition (b): what differs
is what is searched (LLM-written memories instead of the raw turns) and who writes the queries (the LLM instead
of the question itself). When the query call fails or gives no query, the question is the one query (counted).

Prompts (ours; English or Chinese by the script of the turn / question, as recover/rerank.py decides):

- extraction, system: ``EXTRACT["en"]`` / ``EXTRACT["zh"]``; user: ``[YYYY-MM-DD HH:MM] speaker: text``; answer
  ``{"memories": ["...", ...]}`` (a JSON schema constrains endpoints that support one; parsed either way).
- queries, system: ``QUERIES["en"]`` / ``QUERIES["zh"]``; user: ``Question: ...``; answer ``{"queries": [...]}``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lantern import lazy_re
from lantern.llm import LLMClient, LLMError, Usage, parse_answer
from lantern.model import Turn
from lantern.recover.rerank import language

__all__ = [
    "EXTRACT",
    "QUERIES",
    "Extractor",
    "memory_block",
    "parse_memories",
    "parse_queries",
    "round_robin",
    "turn_line",
]

N_MEMORIES = 3  # memories per turn at most (ours)
N_QUERIES = 3  # search queries per question at most (ours; the brief's "several, e.g. 3")
HITS_PER_QUERY = 20  # Lantern.search hits per query (ours: more than a budget's worth of one-line memories)
EXTRACT_TOKENS = 96  # max tokens of one extraction answer
QUERY_TOKENS = 64  # max tokens of one query-writing answer
TURN_CHARS = 2_000  # a turn is shown to the extraction call cut to this many characters (ours)

EXTRACT = {
    "en": (
        "You keep the long-term memory of a conversation. From the message below, write the facts worth "
        "remembering (who did what, names, dates, places, plans, preferences, numbers) as at most 3 short "
        'sentences that name the person. Answer with JSON only: {"memories": ["..."]}; '
        '{"memories": []} when nothing is worth remembering.'
    ),
    "zh": (
        "你负责保存一段对话的长期记忆。从下面的消息中写出值得记住的事实（谁做了什么、名字、日期、地点、计划、喜好、数字），"
        '最多 3 条简短的句子，写明是谁。只用 JSON 回答：{"memories": ["..."]}；'
        '没有值得记住的内容时回答 {"memories": []}。'
    ),
}
QUERIES = {
    "en": (
        "You search a memory archive to answer a question. Write at most 3 short search queries (keywords, "
        'names, dates) that find what answers it. Answer with JSON only: {"queries": ["..."]}.'
    ),
    "zh": (
        "你要在记忆库中搜索来回答一个问题。写出最多 3 条简短的搜索词（关键词、名字、日期），用来找到答案。"
        '只用 JSON 回答：{"queries": ["..."]}。'
    ),
}
_QUESTION = {"en": "Question: {q}", "zh": "问题：{q}"}

_STRING = lazy_re.compile(r'"((?:[^"\\]|\\.)*)(?:"|$)')
_BULLET = lazy_re.compile(r"^\s*(?:[-*•]|\d+[.)、]|[（(]?\d+[)）])\s*")


def _schema(key: str, n: int) -> dict:
    return {
        "type": "object",
        "properties": {key: {"type": "array", "items": {"type": "string"}, "maxItems": n}},
        "required": [key],
    }


def turn_line(turn: Turn, chars: int = TURN_CHARS) -> str:
    """One turn as the extraction call sees it: ``[YYYY-MM-DD HH:MM] text`` (the time when the turn has one; the
    text as archived, e.g. ``user (Ada): ...``), whitespace runs folded, cut to ``chars`` characters."""
    text = " ".join(turn.text.split())[:chars]
    when = turn.time.strftime("%Y-%m-%d %H:%M") if turn.time else None
    return f"[{when}] {text}" if when else text


def _strings(text: str, key: str, n: int) -> list[str]:
    """The strings of an answer that should be ``{key: [strings]}``: that JSON object, a bare JSON list, the quoted
    strings of a cut-off JSON answer (the key itself left out), else the non-empty lines (bullets and numbers
    stripped). At most ``n``, stripped, empty and repeated ones dropped."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.strip("`").removeprefix("json").strip()
    try:  # an LLM's answer: the one bounded parse (nested too deep is not JSON here)
        value, parsed = parse_answer(stripped), True
    except ValueError:
        value, parsed = None, False
    if isinstance(value, dict):
        value = value.get(key)
    if isinstance(value, list):
        items = [v for v in value if isinstance(v, str)]
    elif isinstance(value, str):
        items = [value]
    elif parsed:  # JSON, but no list of strings under the key: nothing usable
        items = []
    elif stripped.startswith("{") or stripped.startswith("["):  # JSON cut off by the token cap
        items = []
        for s in _STRING.findall(stripped):
            try:
                s = json.loads(f'"{s}"')
            except ValueError:
                pass
            if s != key:
                items.append(s)
    else:
        items = [_BULLET.sub("", line) for line in stripped.splitlines()]
    out: list[str] = []
    for s in items:
        s = " ".join(s.split())
        if s and s not in out:
            out.append(s)
    return out[:n]


def parse_memories(text: str, n: int = N_MEMORIES) -> list[str]:
    """The memories of an extraction answer (``{"memories": [...]}`` or any shape ``_strings`` reads); [] when
    the model wrote none."""
    return _strings(text, "memories", n)


def parse_queries(text: str, n: int = N_QUERIES) -> list[str]:
    """The search queries of a query-writing answer (``{"queries": [...]}`` or any shape ``_strings`` reads)."""
    return _strings(text, "queries", n)


@dataclass
class Extracted:
    """One turn's memories; ``usage``: the cost of the call when it was made (also when read from the cache);
    ``cached``: read from the disk cache (no call now); ``error``: why the call failed (no memories then)."""

    memories: list[str]
    usage: Usage = field(default_factory=Usage)
    cached: bool = False
    error: str | None = None


class Extractor:
    """Write-time memory extraction, one LLM call per turn, cached on disk under ``cache_dir`` by the sha256 of
    (model name, prompt, turn line, token cap): the endpoint's URL is not part of the key (a local server's port
    changes from run to run). A failed call is not cached. ``made`` / ``cached`` / ``failed``: turns so far;
    ``usage``: the calls' cost as measured when made (cached turns included), ``usage_now``: calls made by this
    object only."""

    def __init__(self, client: LLMClient, cache_dir: Path | None):
        self.client, self.cache_dir = client, cache_dir
        self.made = self.cached = self.failed = 0
        self.usage, self.usage_now = Usage(), Usage()

    def key(self, line: str, lang: str) -> str:
        return hashlib.sha256(
            json.dumps([self.client.settings.model, EXTRACT[lang], line, EXTRACT_TOKENS]).encode(
                "utf-8", "surrogatepass"
            )
        ).hexdigest()

    def __call__(self, turn: Turn) -> Extracted:
        line = turn_line(turn)
        lang = language(line)
        path = self.cache_dir / f"{self.key(line, lang)}.json" if self.cache_dir else None
        if path is not None and path.exists():
            data = json.loads(path.read_text(encoding="utf-8"))
            used = Usage(1, data.get("tokens_in", 0), data.get("tokens_out", 0), data.get("ms", 0.0))
            self.cached += 1
            self.usage.add(used)
            return Extracted(parse_memories(data["text"]), used, cached=True)
        messages = [{"role": "system", "content": EXTRACT[lang]}, {"role": "user", "content": line}]
        try:
            answer = self.client.chat(messages, max_tokens=EXTRACT_TOKENS, json_schema=_schema("memories", N_MEMORIES))
        except LLMError as e:
            self.failed += 1
            failed = Usage(1)
            self.usage.add(failed)
            self.usage_now.add(failed)
            return Extracted([], failed, error=str(e))
        self.made += 1
        self.usage.add(answer.usage)
        self.usage_now.add(answer.usage)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            u = answer.usage
            path.write_text(
                json.dumps({"text": answer.text, "tokens_in": u.tokens_in, "tokens_out": u.tokens_out, "ms": u.ms}),
                encoding="utf-8",
            )
        return Extracted(parse_memories(answer.text), answer.usage)

    def describe(self) -> dict:
        u = self.usage
        return {
            "turns": self.made + self.cached + self.failed,
            "calls_made_now": self.made + self.failed,
            "from_cache": self.cached,
            "failed": self.failed,
            "calls": u.calls,
            "tokens_in": u.tokens_in,
            "tokens_out": u.tokens_out,
            "ms": u.ms,
        }


def write_queries(client: LLMClient, question: str) -> tuple[list[str], Usage, str | None]:
    """The search queries the LLM writes for ``question`` (one call), its usage, and why it fell back to the
    question itself (None when it did not): a failed call or an answer without a query."""
    lang = language(question)
    messages = [
        {"role": "system", "content": QUERIES[lang]},
        {"role": "user", "content": _QUESTION[lang].format(q=question)},
    ]
    try:
        answer = client.chat(messages, max_tokens=QUERY_TOKENS, json_schema=_schema("queries", N_QUERIES))
    except LLMError as e:
        return [question], Usage(1), f"query call failed: {e}"
    queries = parse_queries(answer.text)
    if not queries:
        return [question], answer.usage, "the answer held no query"
    return queries, answer.usage, None


def round_robin(rankings: Sequence[Sequence[int]]) -> list[int]:
    """The union of ``rankings`` (ids, best first), interleaved: every ranking's first id, then every second, ...;
    an id already taken is skipped."""
    out: list[int] = []
    seen: set[int] = set()
    for depth in range(max((len(r) for r in rankings), default=0)):
        for r in rankings:
            if depth < len(r) and r[depth] not in seen:
                seen.add(r[depth])
                out.append(r[depth])
    return out


def memory_block(order: Sequence[int], memories: dict[int, tuple[str, str]], budget: int) -> tuple[str, int]:
    """The block of memories ``order`` (ids into ``memories``: id -> (date or "", text)), one line
    ``- [date] text`` each, whole lines only, at most ``budget`` characters. Returns (block, memories packed)."""
    lines: list[str] = []
    size = 0
    for i in order:
        when, text = memories[i]
        line = f"- [{when}] {text}" if when else f"- {text}"
        if size + len(line) + (1 if lines else 0) > budget:
            continue  # a shorter memory further down may still fit
        lines.append(line)
        size += len(line) + (1 if len(lines) > 1 else 0)
    return "\n".join(lines), len(lines)


class MemoryStore:
    """The memories of one history's turns outside the kept window, archived one entry per memory into a Lantern
    store at ``db`` (built with ``embedder``, the eval's): ``search(queries, budget)`` gives the block."""

    def __init__(self, db: Path, embedder, extracted: Sequence[tuple[Turn, list[str]]], session: str):
        from lantern.api import Lantern
        from lantern.model import Message

        self.lantern = Lantern(db, embedder)
        self.memories: dict[int, tuple[str, str]] = {}
        messages: list[Message] = []
        texts: list[tuple[str, str]] = []
        for turn, mems in extracted:
            when = turn.time.strftime("%Y-%m-%d") if turn.time else ""
            for m in mems:
                messages.append(Message(role="user", text=m, time=turn.time, session=session))
                texts.append((when, m))
        self.count = len(messages)
        if messages:
            res = self.lantern.archive(messages, session=session)
            if len(res.entry_ids) != len(messages):
                raise RuntimeError(f"{session}: {len(messages)} memories archived as {len(res.entry_ids)} entries")
            for eid, t in zip(res.entry_ids, texts):
                self.memories.setdefault(eid, t)

    def search(self, queries: Sequence[str], budget: int) -> tuple[str, int]:
        """(block, memories packed) for ``queries``: the round-robin union of each query's top hits."""
        rankings = [[h.entry.id for h in self.lantern.search(q, k=HITS_PER_QUERY)] for q in queries if q.strip()]
        order = [i for i in round_robin(rankings) if i in self.memories]
        return memory_block(order, self.memories, budget)

    def close(self) -> None:
        self.lantern.close()
