"""Approximate nearest neighbours for the semantic signal of a large store: HNSW graphs (Malkov & Yashunin 2018,
"Efficient and robust approximate nearest neighbor search using Hierarchical Navigable Small World graphs") from
``usearch``, one graph per embedder block, over the rows of a ``MemoryIndex``.

Why per block: a block embedder's rows fill one block of the main vector each (embed.RoutedEmbedder: MiniLM or
USE, the other block zero; the e5 block is ranked apart), so a row's cosine to a query is the dot product within
that row's block. One graph per block, searched with the query's part in that block, finds each row's true
neighbours; rows holding several of the query's blocks (none for the shipped embedders) are scored exactly.

The graphs only propose candidates: every candidate is rescored with the stored float32 rows of the matrix
(``MemoryIndex.cosines``), so fusion sees the same cosines as exact search, and the result equals exact search up
to the graphs' recall (benchmarks/bench_ann.py measures recall@10 against exact search). Exact search is used
instead whenever it is cheaper or the graphs cannot answer: a store or a block under ``min_rows`` rows, a
scope/session mask keeping few rows (cost proportional to the mask), too few allowed candidates after
oversampling, or a top-n that reaches non-positive cosines (where rows outside every graph, cosine 0, would rank).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from lantern.store.vectors import distinct

Block = tuple[int, int]
# rows a build adds per step (ours): a search or a cancel waits for one step at most (~0.3 s on 2 busy cores)
BUILD_CHUNK = 500


class GraphFileError(Exception):
    """A saved graph file failed its check before use (``BlockGraphs.verified_view``)."""


@dataclass(frozen=True)
class AnnParams:
    """When and how the semantic signal uses HNSW graphs (Config.ann_*). ``min_rows``: rows a store (and a block)
    must hold before its graph is built (exact search below; 0 forces the graphs on, even for a small mask);
    ``oversample``: candidates
    asked of a graph per result wanted, divided by the share of rows a mask allows; ``exact_share``: when the
    candidates asked would exceed this share of the allowed rows, exact search over those rows is cheaper;
    ``connectivity`` (HNSW M), ``expansion_add`` (efConstruction), ``expansion_search`` (ef, raised to the
    candidates asked) and ``dtype`` (the graph's copy of the vectors: "f16", "i8" or "f32") as usearch takes them."""

    min_rows: int = 50_000
    oversample: float = 4.0
    exact_share: float = 0.25
    connectivity: int = 32
    expansion_add: int = 128
    expansion_search: int = 64
    dtype: str = "f16"

    def graph_key(self) -> tuple:
        """The parameters a built graph depends on (the others only change how it is searched)."""
        return (self.connectivity, self.expansion_add, self.dtype)


def usearch_index():
    """usearch's ``Index`` class, imported on first use (a small store never pays for it). onnxruntime is imported
    first: imported after usearch's extension, onnxruntime's own crashes the process in libstdc++ (segfault;
    onnxruntime 1.32 and usearch 2.26 wheels, found 2026-12-04: a LoCoMo eval worker whose first recover built graphs
    before the embedder loaded)."""
    import onnxruntime  # noqa: F401
    from usearch.index import Index

    return Index


def ann_params(config) -> AnnParams:
    """The ``AnnParams`` of a ``Config`` (its ``ann_*`` fields)."""
    return AnnParams(
        min_rows=config.ann_min_rows,
        oversample=config.ann_oversample,
        connectivity=config.ann_connectivity,
        expansion_add=config.ann_expansion_add,
        expansion_search=config.ann_expansion_search,
    )


class BlockGraphs:
    """The HNSW graphs of one ``MemoryIndex``: ``graphs[block]`` holds, keyed by entry id, the block's part of every
    row in positions ``0..covered-1`` that has a nonzero value in that block (rows after ``covered`` are scored
    exactly until ``add_rows`` takes them). A lock serializes graph changes and searches (usearch's growth of a
    graph is not safe beside a search in another thread)."""

    def __init__(self, blocks: Sequence[Block], params: AnnParams):
        self.params = params
        self.blocks = list(blocks)
        self.graphs: dict[Block, object] = {}
        self.covered = 0
        self.lock = threading.RLock()
        # a build in a worker thread (start_build): the graphs are not searched until finish_build
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()
        self._error: BaseException | None = None
        # ids of rows rewritten in place since they entered the graphs (a grown turn, a filled block): their graph
        # vectors are old, so they are always candidates and scored exactly (never removed and re-added in a graph)
        self.stale: set[int] = set()
        self.saved = False  # the graphs are those of the snapshot on disk (store/snapshot.py)
        self._files: dict[Block, str] = {}  # graphs opened as views of these files: read-only until materialize

    @classmethod
    def view(cls, blocks: Sequence[Block], params: AnnParams, files: dict[Block, str], covered: int) -> BlockGraphs:
        """Graphs saved by a snapshot (usearch files), memory-mapped read-only; rows ``0..covered-1`` are in them.
        The first change (new rows past ``ANN_BUILD_AHEAD``) copies them into memory (``materialize``)."""
        index_class = usearch_index()
        out = cls(blocks, params)
        out.graphs = {b: index_class.restore(path, view=True) for b, path in files.items()}
        if any(g is None for g in out.graphs.values()):
            raise ValueError("a graph file is not a usearch index")
        out._files, out.covered, out.saved = dict(files), covered, True
        return out

    @classmethod
    def verified_view(
        cls,
        blocks: Sequence[Block],
        params: AnnParams,
        verify: Callable[[], dict[Block, str]],
        covered: int,
        release: Callable[[], None] | None = None,
    ) -> BlockGraphs:
        """``view`` of the files ``verify()`` returns once it has checked them (store/snapshot.py: their checksums),
        in a worker thread: until it is done the graphs are ``building`` (exact search answers, never a file not yet
        checked), and ``finish_build`` raises ``GraphFileError`` when a file fails the check or is not a usearch
        index (the caller builds the graphs anew). ``release()`` is called once the views are open (or failed)."""
        out = cls(blocks, params)

        def run() -> None:
            try:
                files = verify()
                index_class = usearch_index()
                graphs = {b: index_class.restore(path, view=True) for b, path in files.items()}
                if any(g is None for g in graphs.values()):
                    raise ValueError("a graph file is not a usearch index")
                with out.lock:
                    out.graphs, out._files, out.covered, out.saved = graphs, dict(files), covered, True
            except BaseException as e:  # noqa: BLE001 - raised to the thread that calls finish_build
                out._error = e if isinstance(e, GraphFileError) else GraphFileError(str(e))
            finally:
                if release is not None:
                    release()

        out._thread = threading.Thread(target=run, name="lantern-ann-verify", daemon=True)
        out._thread.start()
        return out

    @property
    def viewed(self) -> bool:
        """The graphs are read-only views of their snapshot files."""
        return bool(self._files)

    def materialize(self) -> None:
        """Copy viewed graphs into memory, so they can change. A copy of the view, not a new read of the file: another
        process may have replaced the snapshot meanwhile, and the view still maps the files this index opened."""
        with self.lock:
            if self._files:
                self.graphs = {b: graph.copy() for b, graph in self.graphs.items()}
                self._files = {}

    @property
    def building(self) -> bool:
        """A build was started and not finished yet (``finish_build``): the graphs are not to be searched."""
        return self._thread is not None

    @property
    def built(self) -> bool:
        """The worker thread's build has ended (``finish_build`` takes it)."""
        return self._thread is not None and not self._thread.is_alive()

    def start_build(self, ids, matrix, columns, with_block, start: int, stop: int, chunk: int = BUILD_CHUNK) -> None:
        """``add_rows(start, stop)`` in a worker thread, ``chunk`` rows at a time (the lock is held per chunk; a
        ``cancel`` waits for one chunk at most), usearch's inserts on every core. The arrays are the caller's at this
        moment: they are never written in place for these rows except by a rewrite, which ``MemoryIndex``
        records in ``stale``."""
        with_block = {b: has[:stop] for b, has in with_block.items()}
        self.saved = False

        def run() -> None:
            try:
                for lo in range(start, stop, chunk):
                    if self._cancel.is_set():
                        return
                    self.add_rows(ids, matrix, columns, with_block, lo, min(lo + chunk, stop), threads=0)
            except BaseException as e:  # noqa: BLE001 - raised to the thread that calls finish_build
                self._error = e

        self._thread = threading.Thread(target=run, name="lantern-ann-build", daemon=True)
        self._thread.start()

    def finish_build(self) -> None:
        """Wait for the worker thread's build; raise its error, if any."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def cancel(self) -> None:
        """Stop a running build after its current chunk (the graphs are left incomplete: drop them)."""
        self._cancel.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _new_graph(self, ndim: int):
        p = self.params
        return usearch_index()(
            ndim=ndim,
            metric="cos",
            dtype=p.dtype,
            connectivity=p.connectivity,
            expansion_add=p.expansion_add,
            expansion_search=p.expansion_search,
        )

    def add_rows(
        self,
        ids: np.ndarray,
        matrix: np.ndarray,
        columns: np.ndarray,
        with_block: dict[Block, np.ndarray],
        start: int,
        stop: int,
        threads: int = 1,
    ) -> None:
        """Take rows ``start..stop-1`` (positions; ``ids`` int64 entry ids, ``matrix`` float32 (n, len(columns)))
        into the graphs: a block whose graph exists gets its new rows; a block without one gets a graph of all its
        rows once it holds ``min_rows`` of them. ``with_block``: per block, boolean (n,) of the rows having it."""
        with self.lock:
            self.materialize()
            for block in self.blocks:
                has = with_block[block][:stop]
                if block not in self.graphs:
                    if int(np.count_nonzero(has)) < max(self.params.min_rows, 1):
                        continue
                    lo = 0
                else:
                    lo = start
                rows = lo + np.flatnonzero(has[lo:stop])
                if not len(rows):
                    continue
                a, b = np.searchsorted(columns, block)
                if block not in self.graphs:
                    self.graphs[block] = self._new_graph(int(b - a))
                graph = self.graphs[block]
                graph.add(ids[rows].astype(np.uint64), np.ascontiguousarray(matrix[rows, a:b]), threads=threads)
            self.covered = stop

    def search(self, block: Block, query: np.ndarray, count: int) -> np.ndarray:
        """Entry ids (uint64) of up to ``count`` rows of ``block``'s graph nearest ``query`` (the query's part in
        that block) by cosine, nearest first."""
        with self.lock:
            graph = self.graphs[block]
            count = min(count, len(graph))
            if count <= 0:
                return np.empty(0, np.uint64)
            graph.expansion_search = max(self.params.expansion_search, count)
            return np.asarray(graph.search(np.ascontiguousarray(query, np.float32), count).keys)

    def size(self, block: Block) -> int:
        graph = self.graphs.get(block)
        return 0 if graph is None else len(graph)


def nearest(
    index, vector: np.ndarray, allowed: np.ndarray | None, n: int, skip_blank: bool
) -> tuple[np.ndarray, np.ndarray] | None:
    """The semantic signal's top ``n`` through the graphs of ``index`` (a MemoryIndex with ``ann`` built): row
    positions best first and their exact cosines (float32), as ``signals.semantic`` returns them; None when exact
    search is the one to run (no graph for a block the query fills, a small mask, too few candidates)."""
    ann: BlockGraphs | None = index.ann
    total = len(index.ids)
    if ann is None or ann.building or not total:
        return None
    params = ann.params
    query_blocks = [b for b in index.used_blocks if vector[b[0] : b[1]].any()]
    if not query_blocks:
        return None
    allowed_n = total if allowed is None else int(np.count_nonzero(allowed[:total]))
    if allowed_n == 0:
        return np.empty(0, np.int64), np.empty(0, np.float32)
    # never fewer than ef: the search visits that many nodes whatever it returns, so a small n costs nothing more
    count = max(math.ceil(n * params.oversample * total / allowed_n), params.expansion_search)
    if params.min_rows > 0 and count >= params.exact_share * allowed_n:
        return None  # the mask keeps few rows: exact over them costs about as much as the graphs
    with ann.lock:
        covered = min(ann.covered, total)
        parts = []
        for block in query_blocks:
            if ann.size(block) == 0:
                return None  # a block below min_rows: exact search
            keys = ann.search(block, vector[block[0] : block[1]], count)
            parts.append(index.positions_of(keys.astype(np.int64)))
            if covered < total:  # rows not yet in the graphs
                has = index.rows_with(*block)
                parts.append(covered + np.flatnonzero(has[covered:total]))
        if ann.stale:  # rows rewritten since they entered the graphs
            parts.append(index.positions_of(np.fromiter(ann.stale, np.int64, len(ann.stale))))
    if len(query_blocks) > 1:  # rows holding two or more of the query's blocks: scored exactly
        held = np.zeros(total, np.int8)
        for block in query_blocks:
            held += index.rows_with(*block)[:total]
        parts.append(np.flatnonzero(held > 1))
    candidates = distinct(np.concatenate(parts))
    candidates = candidates[candidates >= 0]
    if allowed is not None:
        candidates = candidates[allowed[candidates]]
    cos = index.cosines(vector, candidates)
    if skip_blank:
        keep = cos != 0.0
        candidates, cos = candidates[keep], cos[keep]
    if len(candidates) < min(n, allowed_n):
        return None  # fewer allowed candidates than wanted: exact search finds the rest
    order = np.argsort(-cos, kind="stable")[:n]
    if not skip_blank and len(order) and cos[order[-1]] <= 0.0 and len(candidates) < allowed_n:
        return None  # the top n reaches cosines <= 0, where rows outside the candidates (cosine 0) would rank
    return candidates[order], cos[order]


__all__ = ["AnnParams", "BlockGraphs", "GraphFileError", "ann_params", "nearest"]
