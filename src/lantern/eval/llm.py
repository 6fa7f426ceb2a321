"""LLM-summary compaction for the evaluation: an OpenAI-compatible ``POST {base_url}/chat/completions`` call writes the
summary that replaces the compacted-away turns (what a coding agent's own ``/compact`` does). Used only when
``lantern eval --llm-base-url URL --llm-model NAME`` is given (key from the environment variable
``LANTERN_LLM_API_KEY``, optional); Lantern itself never calls an LLM.

The compacted turns are sent in pieces of at most ``chunk_chars`` characters (whole turns; a longer turn is cut),
one request each, temperature 0; the summary is the pieces' answers joined. Every answer is cached on disk under
``cache_dir`` by sha256 of (base URL, model, prompt, piece), so a rerun makes no call. Standard library only
(``urllib.request``). Request format: the OpenAI Chat Completions API (``model``, ``messages``, ``temperature``;
the answer is ``choices[0].message.content``).
"""

from __future__ import annotations

import hashlib
import json
import os
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from lantern.errors import LanternError
from lantern.model import Turn

KEY_ENV = "LANTERN_LLM_API_KEY"
PROMPT = (
    "You compact a conversation for a context window. Summarize the conversation below in at most 200 words. "
    "Keep the decisions, names, numbers, dates, file paths, identifiers and errors that later turns may need."
)
HEADER = "[Summary of the earlier conversation]"


class LLMError(LanternError):
    """The LLM endpoint failed (network, HTTP status, or an answer without ``choices[0].message.content``)."""


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
    """Callable ``turns -> summary text`` through an OpenAI-compatible endpoint. ``calls``: requests made;
    ``cached``: pieces answered from the disk cache."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        cache_dir: Path | None = None,
        chunk_chars: int = 12_000,
        timeout: float = 120.0,
    ):
        if not base_url or not model:
            raise ValueError("the LLM summary needs both --llm-base-url and --llm-model")
        self.url = base_url.rstrip("/")
        if not self.url.endswith("/chat/completions"):
            self.url += "/chat/completions"
        self.model, self.timeout, self.chunk_chars = model, timeout, chunk_chars
        self.api_key = api_key if api_key is not None else os.environ.get(KEY_ENV)
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
        """The endpoint's summary of one piece (from the cache when present). Raises LLMError."""
        key = hashlib.sha256(
            json.dumps([self.url, self.model, PROMPT, piece]).encode("utf-8", "surrogatepass")
        ).hexdigest()
        path = self.cache_dir / f"{key}.txt" if self.cache_dir else None
        if path is not None and path.exists():
            self.cached += 1
            return path.read_text(encoding="utf-8")
        body = {
            "model": self.model,
            "temperature": 0,
            "messages": [{"role": "system", "content": PROMPT}, {"role": "user", "content": piece}],
        }
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(
            self.url, data=json.dumps(body).encode("utf-8", "surrogatepass"), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                answer = json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            raise LLMError(f"LLM endpoint {self.url} answered HTTP {e.code}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            raise LLMError(f"LLM endpoint {self.url} unreachable: {getattr(e, 'reason', e)}") from None
        except json.JSONDecodeError:
            raise LLMError(f"LLM endpoint {self.url} answered with something other than JSON") from None
        try:
            text = answer["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise LLMError(f"LLM endpoint {self.url}: no choices[0].message.content in the answer") from None
        if not isinstance(text, str):
            raise LLMError(f"LLM endpoint {self.url}: choices[0].message.content is not text")
        self.calls += 1
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        return text
