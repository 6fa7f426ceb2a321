"""LLM-summary compaction for the evaluation: the LLM half's client (lantern/llm.py, ``LLMClient``) writes the
summary that replaces the compacted-away turns (what a coding agent's own ``/compact`` does). Used only when
``lantern eval --llm-base-url URL --llm-model NAME`` is given (key from the environment variable
``LANTERN_LLM_API_KEY``, optional, read at each request); Lantern's retrieval itself never calls an LLM.

The compacted turns are sent in pieces of at most ``chunk_chars`` characters (whole turns; a longer turn is cut),
one request each, temperature 0, at most ``MAX_TOKENS`` tokens; the summary is the pieces' answers joined. Every
answer is cached on disk under ``cache_dir`` by sha256 of (chat-completions URL, model, prompt, piece), so a rerun
makes no call. Request format: the OpenAI Chat Completions API (``model``, ``messages``, ``temperature``; the
answer is ``choices[0].message.content``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

from lantern.llm import LLMClient, LLMError, LLMSettings
from lantern.model import Turn

__all__ = ["HEADER", "PROMPT", "LLMError", "Summarizer", "chunks"]

PROMPT = (
    "You compact a conversation for a context window. Summarize the conversation below in at most 200 words. "
    "Keep the decisions, names, numbers, dates, file paths, identifiers and errors that later turns may need."
)
HEADER = "[Summary of the earlier conversation]"
MAX_TOKENS = 512  # an answer's cap: 200 words are about 270 tokens (ours)


def chunks(turns: Sequence[Turn], chunk_chars: int) -> list[str]:
    """The turns' texts grouped in order into pieces of at most ``chunk_chars`` characters (a longer turn alone,
    cut to ``chunk_chars``)."""
    pieces: list[str] = []
    cur: list[str] = []
    size = 0
    for t in turns:
        text = t.text[:chunk_chars]
        if cur and size + len(text) + 1 > chunk_chars:
            pieces.append("\n".join(cur))
            cur, size = [], 0
        cur.append(text)
        size += len(text) + 1
    if cur:
        pieces.append("\n".join(cur))
    return pieces


class Summarizer:
    """Callable ``turns -> summary text`` through an OpenAI-compatible endpoint (``LLMClient``). ``calls``:
    requests made; ``cached``: pieces answered from the disk cache. ``settings``: the LLM settings to use (then
    ``base_url`` / ``model`` / ``timeout`` are taken from them); ``transport``: an httpx transport (tests)."""

    def __init__(
        self,
        base_url: str = "",
        model: str = "",
        *,
        settings: LLMSettings | None = None,
        cache_dir: Path | None = None,
        chunk_chars: int = 12_000,
        timeout: float = 120.0,
        transport=None,
    ):
        if settings is None:
            if not base_url or not model:
                raise ValueError("the LLM summary needs both --llm-base-url and --llm-model")
            settings = LLMSettings(base_url, model, timeout_s=timeout, max_tokens=MAX_TOKENS, json_mode="off")
        self.client = LLMClient(settings, transport=transport)
        self.url, self.model = settings.url, settings.model
        self.timeout, self.chunk_chars = settings.timeout_s, chunk_chars
        self.cache_dir = cache_dir
        self.calls = self.cached = 0

    def describe(self) -> dict:
        return {
            "url": self.url,
            "model": self.model,
            "calls": self.calls,
            "cached": self.cached,
            "chunk_chars": self.chunk_chars,
        }

    def __call__(self, turns: Sequence[Turn]) -> str:
        return HEADER + "\n" + "\n".join(self.complete(p) for p in chunks(turns, self.chunk_chars))

    def complete(self, piece: str) -> str:
        """The endpoint's summary of one piece (from the cache when present). Raises ``LLMError``
        (lantern/llm.py: unreachable, timeout, an HTTP status, or no text in the answer)."""
        key = hashlib.sha256(
            json.dumps([self.url, self.model, PROMPT, piece]).encode("utf-8", "surrogatepass")
        ).hexdigest()
        path = self.cache_dir / f"{key}.txt" if self.cache_dir else None
        if path is not None and path.exists():
            self.cached += 1
            return path.read_text(encoding="utf-8")
        messages = [{"role": "system", "content": PROMPT}, {"role": "user", "content": piece}]
        try:
            text = self.client.chat(messages, max_tokens=MAX_TOKENS).text
        finally:
            self.calls = self.client.usage.calls
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        return text
