"""Query vectors computed ahead (ours; the paper does not specify).

``QueryVectors`` stands in for the embedder on the read path (it has the ``Embedder`` shape: ``id``, ``dim``,
``embed``, ``embed_query``). ``prefetch(text)`` starts embedding a query in a worker thread (onnxruntime releases the
GIL), so a
caller that knows the query before it can run the recovery — the proxy, which knows a compaction summary's query
as soon as the request arrives — overlaps it with the work in between (detection, waiting for the previous
request's archive). The next one-text ``embed_query([text])`` of that text (keyed by ``embed.query_key``) takes the
prefetched vector, waiting for it if it is still running; it is handed out once, then forgotten, so a query
asked again is embedded again (no cache: a repeated query costs one embedding each time). At most ``size``
prefetched vectors wait to be taken (the oldest dropped). ``embed`` (stored entries) goes straight to the embedder.

The vector is the one ``embed.embed_query(embedder, [text], occupied)[0]`` returns (same call, same text): no
quality change. An error of a prefetched embedding is raised, unchanged, to the call that takes it.

An embedder that embeds in stages (``embed.embed_query_stages``: the routed embedder's main part, then e5) hands out
its first stage as soon as it is ready (``first_stage``), so the read path ranks the main part while e5 runs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from lantern.embed import embed_query, embed_query_stages, query_key, signal_blocks

PREFETCH_KEPT = 8  # prefetched query vectors waiting to be taken, per Lantern handle (ours)

__all__ = ["QueryVectors", "PREFETCH_KEPT"]


class QueryVectors:
    """The read path's embedder: ``embedder_of()`` gives the current embedder (it may change: ``reindex``).
    ``embed_query(texts)`` -> float32 ``(len(texts), dim)``, rows of norm 1; one prefetched text is taken from the
    prefetch. Thread-safe."""

    def __init__(
        self,
        embedder_of: Callable[[], Any],
        size: int = PREFETCH_KEPT,
        occupied: Callable[[int, int], bool] | None = None,
    ):
        self._embedder_of, self.size = embedder_of, size
        self._occupied = (
            occupied  # MemoryIndex.block_occupied: which blocks a block embedder's query fills (embed.embed_query)
        )
        self._done: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._running: dict[tuple, Future] = {}
        self._first: dict[tuple, Future] = {}  # a running prefetch's first stage (embed.embed_query_stages)
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    @property
    def id(self) -> str:
        return self._embedder_of().id

    @property
    def dim(self) -> int:
        return self._embedder_of().dim

    @property
    def signal_blocks(self) -> dict[str, tuple[int, int]]:
        """The current embedder's blocks ranked apart (embed.signal_blocks)."""
        return signal_blocks(self._embedder_of())

    @property
    def blocks(self) -> dict[str, tuple[int, int]] | None:
        """The current embedder's models' dims (embed.RoutedEmbedder.blocks), None for one model."""
        return getattr(self._embedder_of(), "blocks", None)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Stored-entry vectors: the current embedder's ``embed``, never a prefetched query vector."""
        return self._embedder_of().embed(texts)

    def embed_query(self, texts: Sequence[str], occupied: Callable[[int, int], bool] | None = None) -> np.ndarray:
        """Query vectors (``embed.embed_query`` of the current embedder) -> float32 ``(len(texts), dim)``; one text
        is taken from the prefetch when it was embedded for the same block occupancy. ``occupied`` defaults to the
        one given at construction."""
        texts = list(texts) if not isinstance(texts, str) else texts
        occupied = occupied or self._occupied
        if isinstance(texts, list) and len(texts) == 1 and isinstance(texts[0], str):
            return self.vector(texts[0], occupied)[None, :]
        return embed_query(self._embedder_of(), texts, occupied)

    def vector(self, text: str, occupied: Callable[[int, int], bool] | None = None) -> np.ndarray:
        """The (read-only) query vector of ``text``, shape ``(dim,)``: the prefetched one (taken; waited for while
        it is being computed), else computed now in the calling thread."""
        embedder = self._embedder_of()
        occupied = occupied or self._occupied
        key = query_key(embedder, text, occupied)
        with self._lock:
            found = self._done.pop(key, None)
            future = self._running.pop(key, None) if found is None else None
        if isinstance(found, _Failed):
            raise found.error
        if found is not None:
            return found
        if future is not None:
            return future.result()
        return embed_query(embedder, [text], occupied)[0]

    def first_stage(self, text: str, occupied: Callable[[int, int], bool] | None = None) -> np.ndarray | None:
        """The first stage of ``text``'s prefetched query vector (``embed.embed_query_stages``), shape ``(dim,)``,
        read-only, waited for while it is being computed; None when ``text`` was not prefetched for ``occupied``. It
        is not taken: :meth:`vector` still gives the whole vector. For an embedder of one stage, the whole vector."""
        key = query_key(self._embedder_of(), text, occupied or self._occupied)
        with self._lock:
            found = self._done.get(key)
            future = (self._first.get(key) or self._running.get(key)) if found is None else None
        if found is not None:
            return None if isinstance(found, _Failed) else found
        if future is None:
            return None
        try:
            return future.result()
        except Exception:  # noqa: BLE001 - raised again, unchanged, by the vector() call that takes it
            return None

    def prefetch(self, text: str) -> None:
        """Start embedding ``text`` in the worker thread (unless it is already prefetched, or ``size`` prefetches
        are running); the next ``embed_query([text])`` takes the vector."""
        embedder = self._embedder_of()
        key = query_key(embedder, text, self._occupied)
        with self._lock:
            if key in self._done or key in self._running:
                return
            if len(self._running) >= self.size:  # never more than size embeddings queued
                return
            future = self._running[key] = Future()
            self._first[key] = Future()
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lantern-query")
        self._pool.submit(self._compute, embedder, key, future)

    def _compute(self, embedder: Any, key: tuple, future: Future) -> None:
        first = self._first[key]
        try:
            for stage in embed_query_stages(embedder, [key[1]], self._occupied):
                vec = np.asarray(stage[0], dtype=np.float32)
                vec.flags.writeable = False
                if not first.done():
                    first.set_result(vec)
        except BaseException as e:  # noqa: BLE001 - handed to the embed call that takes this text
            with self._lock:
                self._first.pop(key, None)
                if self._running.get(key) is future:
                    del self._running[key]
                    self._done[key] = _Failed(e)
                    self._trim()
            if not first.done():
                first.set_exception(e)
            future.set_exception(e)
            return
        with self._lock:
            self._first.pop(key, None)
            if self._running.get(key) is future:  # not taken while it ran: keep it for the embed that takes it
                del self._running[key]
                self._done[key] = vec
                self._trim()
        future.set_result(vec)

    def _trim(self) -> None:
        while len(self._done) > self.size:
            self._done.popitem(last=False)

    def close(self) -> None:
        """Stop the worker thread (a prefetch still running finishes first)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


class _Failed:
    """A prefetched embedding that raised: its error, raised to the embed call that takes it."""

    def __init__(self, error: BaseException):
        self.error = error
