"""The write path's embedding stage, made cheaper without changing a single vector (ours; the paper does not
specify). Three things:

* **Only what will be stored is embedded.** A turn whose content hash is already in the store (a re-ingest, the
  resume of an interrupted ingest) is a duplicate the store will skip: it gets no embedding (``plan``).
* **Identical summaries are embedded once** and the vector is shared: within a batch, and across the batches of
  one ingest for the last 4,096 distinct summaries (``Remembered``; the real aider log repeats many: "/ex",
  "/clear", the same tool output in several chat sessions — 2,000 turns have 1,231 distinct summaries). MiniLM's
  vector of a text does not depend on the other texts of its batch (padding is masked; checked bit for bit in
  tests/test_embed_ahead.py), so this gives the very vectors a one-by-one embedding gives.
* **Embedding overlaps the rest** (``overlapped``): while one worker thread embeds batch k (onnxruntime releases
  the GIL), the calling thread stores batch k-1 (one transaction) and parses, redacts, chunks and summarizes batch
  k+1. SQLite is only ever touched by the calling thread; the worker runs ``embed`` and nothing else.

A row the plan skipped as stored may have been deleted by another process before the store's transaction: the
store raises ``MissingVectorError`` (its transaction rolls back) and the caller embeds that batch in full and
writes it again (``Writer.store_batch``, archive/pipeline.py).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # numpy and the worker pool are imported where used: planning (``plan``) needs neither
    from concurrent.futures import Future

    import numpy as np

T = TypeVar("T")
R = TypeVar("R")

REMEMBERED_SUMMARIES = 4096  # distinct summaries whose vectors an ingest keeps for later batches (ours; ~11 MB)

__all__ = ["EmbedPlan", "Remembered", "embed_plan", "overlapped", "plan"]


@dataclass
class EmbedPlan:
    """What a batch of rows needs embedded: ``texts``, the distinct summaries to embed, and ``slot``, per row the
    index of its summary in ``texts``, or None for a row already stored (no vector needed)."""

    texts: list[str]
    slot: list[int | None]


class Remembered:
    """The vectors of the last ``size`` distinct summaries an ingest embedded, by summary text (LRU): a summary
    seen again in a later batch reuses its vector (the very vector: MiniLM's vector of a text does not depend on
    its batch). Memory: ``size`` x (summary <= 1,200 chars + 1.5 KB vector). Used by one thread at a time (the
    embedding worker, which takes the batches in order)."""

    def __init__(self, size: int = REMEMBERED_SUMMARIES):
        self.size = size
        self.vectors: OrderedDict[str, np.ndarray] = OrderedDict()

    def get(self, summary: str) -> np.ndarray | None:
        vec = self.vectors.get(summary)
        if vec is not None:
            self.vectors.move_to_end(summary)
        return vec

    def add(self, summary: str, vector: np.ndarray) -> None:
        import numpy as np

        self.vectors[summary] = np.array(vector, dtype=np.float32)  # a copy: never a view of a whole batch
        self.vectors.move_to_end(summary)
        while len(self.vectors) > self.size:
            self.vectors.popitem(last=False)


def plan(summaries: Sequence[str], hashes: Sequence[str], known: set[str]) -> EmbedPlan:
    """The ``EmbedPlan`` of rows with these ``summaries`` and content ``hashes`` when the hashes in ``known`` are
    already stored: stored rows get no slot, identical summaries share one."""
    texts: list[str] = []
    where: dict[str, int] = {}
    slot: list[int | None] = []
    for summary, h in zip(summaries, hashes):
        if h in known:
            slot.append(None)
            continue
        if summary not in where:
            where[summary] = len(texts)
            texts.append(summary)
        slot.append(where[summary])
    return EmbedPlan(texts, slot)


def embed_plan(embedder: Any, p: EmbedPlan, remembered: Remembered | None = None) -> list[np.ndarray | None]:
    """Per row of the plan, its float32 vector (shape ``(dim,)``, norm 1), or None for a row already stored.
    Texts ``remembered`` reuse their vector; the others are embedded in one ``embedder.embed`` call (then
    remembered); its errors propagate unchanged."""
    found: list[np.ndarray | None] = [remembered.get(t) if remembered is not None else None for t in p.texts]
    todo = [j for j, v in enumerate(found) if v is None]
    if todo:
        out = embedder.embed([p.texts[j] for j in todo])
        for k, j in enumerate(todo):
            found[j] = out[k]
            if remembered is not None:
                remembered.add(p.texts[j], out[k])
    return [None if s is None else found[s] for s in p.slot]


def overlapped(items: Iterator[T], work: Callable[[T], R]) -> Iterator[tuple[T, R]]:
    """``(item, work(item))`` for each of ``items``, in order, with ``work`` running in one worker thread: while
    it works on item k, the caller handles item k-1 (the loop body) and the producer makes item k+1 (``next``).

    At most two items are ahead of the caller (one being worked on, one queued). An exception raised by ``work``
    is re-raised here, unchanged, when its item's turn comes (items before it are yielded first); an exception of
    the producer or the caller (KeyboardInterrupt included) cancels the queued work and leaves at once (the item
    being worked on finishes in the background and is dropped)."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lantern-embed")
    pending: tuple[T, Future] | None = None
    try:
        for item in items:
            future = pool.submit(work, item)
            if pending is not None:
                yield pending[0], pending[1].result()
            pending = (item, future)
        if pending is not None:
            last, pending = pending, None
            yield last[0], last[1].result()
    finally:
        if pending is not None:
            pending[1].cancel()
        pool.shutdown(wait=False, cancel_futures=True)
