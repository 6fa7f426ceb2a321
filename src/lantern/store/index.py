"""The in-process index of the read path: a numpy view of the store, kept in step with SQLite.

The vectors in ``embeddings`` (store/vectors.py: int8 per block) are the source of truth; this holds them decoded, as
one L2-normalized float32 matrix for
cosine search (our choice: this Python cannot load SQLite extensions, so no sqlite-vec), holding only the columns
of the embedder's blocks that some stored row uses (a block embedder's English-only store: MiniLM's 384 of 896;
``cosines`` cuts a query vector the same way, so every dot product is the same), the per-entry numbers the
importance signal needs, and an inverted index of lookup hints for the keyword signal (precomputed at archive time,
never re-tokenized per query). ``refresh()`` picks up rows added or grown by this or any other process
(``PRAGMA data_version`` + the ``archived_at`` index) and reloads everything after a deletion.
"""

from __future__ import annotations

import gc
import json
import logging
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from lantern.scope import Scope
from lantern.store import snapshot
from lantern.store.ann import AnnParams, BlockGraphs, GraphFileError
from lantern.store.protocol import StoreProtocol


def cosines(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector`` for L2-normalized float32 rows (n, d) and a vector (d,): the cosine of each row, shape
    (n,), float32. Computed by numpy's own einsum loop, on one thread, not by the BLAS: a multi-threaded BLAS
    matrix-vector product on a busy 2-core machine waits for its threads (ours; BENCHMARKS.md, Engineering notes)."""
    return np.einsum("ij,j->i", matrix, vector.astype(np.float32, copy=False))


log = logging.getLogger(__name__)

# rows the graphs take in the calling thread; more (a first build, a large import) go to a worker thread (ours: a
# few hundred ms of HNSW inserts on the 2-core benchmark machine)
ANN_BUILD_AHEAD = 5_000

# rows archived up to this many seconds before the newest row seen are re-read on refresh (clock granularity and
# concurrent writers committing out of archived_at order); re-reading a row is idempotent.
_OVERLAP_S = 5.0


class Postings:
    """Hint term -> row positions (the keyword signal's inverted index): a CSR base (``load_csr``: terms, offsets
    (T + 1,) and rows (int32), as a snapshot holds them) plus the rows added or rewritten since, kept per term in
    lists. A base row rewritten is masked out of the base (``_dead``) and its new terms go to the lists."""

    def __init__(self) -> None:
        self._terms: dict[str, int] = {}
        self._offsets = np.zeros(1, np.int64)
        self._rows = np.empty(0, np.int32)
        self._base = 0  # rows 0.._base-1 are (or were) in the CSR base
        self._dead: np.ndarray | None = None
        self._extra: dict[str, list[int]] = defaultdict(list)
        self._hints: dict[int, list[str]] = {}  # the terms of each row in the lists, to rewrite it

    def load_csr(self, terms: list[str], offsets: np.ndarray, rows: np.ndarray, n_rows: int) -> None:
        self.__init__()
        self._terms = {t: i for i, t in enumerate(terms)}
        self._offsets, self._rows, self._base = offsets, rows, n_rows

    def get(self, term: str, default=()):
        """The row positions holding ``term`` (a list; the base's first, ascending), or ``default``."""
        i = self._terms.get(term)
        extra = self._extra.get(term)
        if i is None:
            return list(extra) if extra else default
        base = np.asarray(self._rows[self._offsets[i] : self._offsets[i + 1]])
        if self._dead is not None:
            base = base[~self._dead[base]]
        out = base.tolist() + (extra or [])
        return out if out else default

    def rows(self, term: str) -> np.ndarray:
        """The row positions holding ``term``: int64 (k,), the base's first (ascending), then the rows added
        since; empty when none. ``get`` as an array, without a Python list in between (a common hint of a large
        store is in hundreds of thousands of rows)."""
        i = self._terms.get(term)
        extra = self._extra.get(term)
        if i is None:
            return np.asarray(extra or (), np.int64)
        base = self._rows[self._offsets[i] : self._offsets[i + 1]]
        if self._dead is not None:
            base = base[~self._dead[base]]
        base = base.astype(np.int64)
        return np.concatenate([base, np.asarray(extra, np.int64)]) if extra else base

    def add(self, pos: int, terms: list[str]) -> None:
        """Row ``pos`` (new) holds ``terms``."""
        self._hints[pos] = terms
        extra = self._extra
        for term in terms:
            extra[term].append(pos)

    def rewrite(self, pos: int, terms: list[str]) -> None:
        """Row ``pos`` now holds ``terms`` instead of its old ones."""
        old = self._hints.pop(pos, None)
        if old is not None:
            for term in old:
                if pos in self._extra[term]:
                    self._extra[term].remove(pos)
        elif pos < self._base:
            if self._dead is None:
                self._dead = np.zeros(self._base, bool)
            self._dead[pos] = True
        self.add(pos, terms)

    def csr(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """(terms sorted, offsets int64 (T + 1,), rows int32): every term's positions, as ``load_csr`` takes them."""
        terms = sorted(t for t in set(self._terms) | set(self._extra) if self.get(t, None))
        parts = [np.asarray(self.get(t), np.int32) for t in terms]
        offsets = np.zeros(len(terms) + 1, np.int64)
        np.cumsum([len(x) for x in parts], out=offsets[1:])
        rows = np.concatenate(parts) if parts else np.empty(0, np.int32)
        return terms, offsets, rows


# store handle -> ids of the undecodable vectors warned about through it (``MemoryIndex._decoded``)
_WARNED: weakref.WeakKeyDictionary[Any, set[int]] = weakref.WeakKeyDictionary()


class MemoryIndex:
    """Arrays aligned by position: ``ids`` (int64, ascending), ``matrix`` (float32 (n, len(columns)): the stored
    L2-normalized vectors restricted to ``columns``, the dims of the blocks some row uses; ``cosines(v)`` restricts
    a query vector alike; the pair is replaced whole, so a reader in another thread never sees one widened without
    the other),
    ``session`` (int32 codes into ``session_names``), ``time`` (unix seconds), ``prior``, ``tool_count``,
    ``file_count``, ``confidence``, ``success``, ``access_count``; ``user``, ``agent``, ``project`` (int32 codes
    into ``labels``: the scope, lantern/scope.py); ``postings`` maps a hint term to row positions, ``hint_count``
    the number of hints per row."""

    def __init__(
        self,
        store: StoreProtocol,
        dim: int,
        blocks: Sequence[tuple[int, int]] | None = None,
        ann: AnnParams | Callable[[], AnnParams | None] | None = None,
    ):
        """``blocks``: the embedder's disjoint dims ``(start, stop)`` (embed.RoutedEmbedder.blocks); None: one
        block of all ``dim`` dims. A block no stored row uses has no columns in ``matrix``. ``ann``: when the
        semantic signal searches HNSW graphs (store/ann.py) instead of every row, or a callable giving them at each
        refresh (the handle's config may change); None: always exact."""
        self.store = store
        self.dim = dim
        self._ann_params = ann
        # whether this process builds HNSW graphs it has none of: a long-lived one (serve, mcp; ``wait_ann``). A
        # short-lived command (search, recover, a hook) never starts a build: it searches the snapshot's graphs, if
        # any, else every row exactly (~10 ms per 100k rows), and exits without waiting for a build it cannot finish
        self.build_graphs = False
        self.blocks = sorted(blocks) if blocks else [(0, dim)]
        if (
            self.blocks[0][0] < 0
            or self.blocks[-1][1] > dim
            or any(a[1] > b[0] for a, b in zip(self.blocks, self.blocks[1:]))
        ):
            raise ValueError(f"blocks must be disjoint ranges inside 0..{dim}, got {blocks!r}")
        self.reset()

    def reset(self) -> None:
        """Forget everything; the next ``refresh`` reloads from SQLite."""
        if getattr(self, "ann", None) is not None:
            self.ann.cancel()
        self.ids = np.empty(0, np.int64)
        self._used: list[tuple[int, int]] = []  # the blocks some row has a nonzero value in, in dim order
        self._nonzero = {b: 0 for b in self.blocks}  # per block: rows with a nonzero value in it (block_occupied)
        self._with = {b: np.empty(0, bool) for b in self.blocks}  # per block: which rows have it (rows_with)
        self._embedded: tuple[int, np.ndarray | None] | None = None  # (rows, embedded()) until _with changes
        self._matrix_buf = np.empty((0, 0), np.float32)  # capacity grows 1.5x: appends copy amortized O(1)
        # (columns, matrix): the dims of the used blocks (matrix column j holds dim columns[j]) and the rows in use,
        # a view of the buffer; always replaced as one tuple
        self._view: tuple[np.ndarray, np.ndarray] = (np.empty(0, np.intp), self._matrix_buf[:0])
        self.session = np.empty(0, np.int32)
        self.time = np.empty(0, np.float64)
        self.archived = np.empty(0, np.float64)  # archived_at per row: a changed one means the row was rewritten
        self.prior = np.empty(0, np.float32)
        self.tool_count = np.empty(0, np.float32)
        self.file_count = np.empty(0, np.float32)
        self.confidence = np.empty(0, np.float32)
        self.success = np.empty(0, np.float32)
        self.access_count = np.empty(0, np.float32)
        self.hint_count = np.empty(0, np.float32)
        self.user = np.empty(0, np.int32)
        self.agent = np.empty(0, np.int32)
        self.project = np.empty(0, np.int32)
        self.labels: dict[str, int] = {}  # user, agent and project names -> one shared code space
        self.session_names: list[str] = []
        self._session_code: dict[str, int] = {}
        self.postings = Postings()
        self._seen_archived_at = float("-inf")
        # entries whose stored vector cannot be decoded (store ``vector_decodable``), left out of the index: id ->
        # the stamp read, so the row is read again only when its vector changes (``lantern reindex`` repairs it)
        self.undecodable: dict[int, float] = {}
        self._version: int | None = None
        self._generation: int | None = None  # the database's generation the rows were read at (store/snapshot.py)
        self._unsaved = 0  # rows read from the database since the snapshot was loaded or written
        self._dirty = True
        self.ann: BlockGraphs | None = None  # HNSW graphs over the rows (store/ann.py), built past ann_params.min_rows

    @property
    def matrix(self) -> np.ndarray:
        """float32 (n, len(columns)): the stored vectors restricted to ``columns``."""
        return self._view[1]

    @property
    def columns(self) -> np.ndarray:
        """The dims (of ``dim``) that ``matrix`` holds, ascending: those of the blocks some row uses."""
        return self._view[0]

    def mark_dirty(self) -> None:
        """Called after this process wrote: the next ``refresh`` reads the new rows."""
        self._dirty = True

    # ------------------------------------------------------------------ sync with SQLite
    def refresh(self) -> None:
        if self.ann is not None and self.ann.built:  # a worker-thread build of the graphs has ended: use them
            self._sync_ann()
        version = self.store.data_version()
        if not self._dirty and version == self._version:
            return
        # one read transaction: the embedder check and the rows see one snapshot, so a reindex committed in between
        # cannot hand this index vectors of another width
        try:
            with self.store.snapshot():
                self.store.verify_embedder()  # another process may have re-embedded the store (reindex)
                generation = snapshot.generation(self.store)
                if self._generation is not None and generation != self._generation:
                    self.reset()  # another process deleted, moved or re-embedded rows: start over
                if not len(self.ids) and snapshot.load(self, generation):
                    self._unsaved = 0
                self._generation = generation
                self._apply(self._changed_rows())
                if len(self.ids) + len(self.undecodable) != self.store.count():  # something was deleted: start over
                    self.reset()
                    self._generation = generation
                    self._apply(self.store.rows_since(float("-inf")))
            self._sync_ann()
        except BaseException:
            self.reset()  # never keep a half-applied refresh: the next one reloads every row
            raise
        self._version = version
        self._dirty = False

    @property
    def ann_params(self) -> AnnParams | None:
        """The graphs' parameters in force (None: exact search only)."""
        p = self._ann_params
        return p() if callable(p) else p

    def _sync_ann(self) -> None:
        """Bring the HNSW graphs up to the rows loaded: built once the store holds ``ann_params.min_rows`` rows,
        then given each refresh's new rows (rows rewritten in place are marked stale by ``_overwrite``). More than
        ``ANN_BUILD_AHEAD`` rows to take are added in a worker thread; exact search answers until it is done."""
        p = self.ann_params
        n = len(self.ids)
        if self.ann is not None and (p is None or p.graph_key() != self.ann.params.graph_key()):
            self.ann.cancel()
            self.ann = None  # graphs built with other parameters
        elif self.ann is not None:
            self.ann.params = p  # the search parameters in force
        if p is None or n < p.min_rows or n == 0:
            if self.ann is not None:  # below the threshold (a snapshot's graphs, a lowered store): exact search
                self.ann.cancel()
                self.ann = None
            return
        if self.ann is None:
            if not self.build_graphs:
                return  # a short-lived process: exact search (``build_graphs``)
            self.ann = BlockGraphs(self.blocks, p)
        if self.ann.building:
            if not self.ann.built:
                return
            building = not self.ann.viewed and self.ann.covered > 0  # a build ended, not a snapshot's check
            self._finish_ann_build()
            if self.ann is None:  # the snapshot's graphs failed their check
                if not self.build_graphs:
                    return
                self.ann = BlockGraphs(self.blocks, p)
            elif building and self.save_pays():
                self.save()  # built once: saved at once, so no other process builds them again
        if self.ann.viewed and (n - self.ann.covered <= ANN_BUILD_AHEAD or not self.build_graphs):
            return  # the snapshot's graphs, read-only: the rows added since are scored exactly
        if self.ann.covered < n:
            columns, matrix = self._view
            try:
                self.ann.materialize()
            except (OSError, RuntimeError) as e:  # the snapshot was removed meanwhile (a forget): build anew
                log.info("HNSW graphs of %s rebuilt: %s", self.store.path, e)
                self.ann = BlockGraphs(self.blocks, p)
            if n - self.ann.covered > ANN_BUILD_AHEAD:
                self.ann.start_build(self.ids, matrix, columns, self._with, self.ann.covered, n)
            else:
                first = self.ann.covered == 0
                self.ann.add_rows(self.ids, matrix, columns, self._with, self.ann.covered, n)
                if first and self.save_pays():
                    self.save()  # built here at once: saved at once

    def _finish_ann_build(self) -> None:
        """Take a finished worker-thread build (rows rewritten while it ran are in ``ann.stale``)."""
        try:
            self.ann.finish_build()
        except GraphFileError as e:  # the snapshot's graph file failed its check: built anew from the rows
            log.warning("%s: HNSW graphs of the index snapshot unreadable (%s); rebuilding them", self.store.path, e)
            snapshot.remove(self.store.path, snapshot.store_id(self.store))
            self.ann = None
            self._unsaved = len(self.ids)  # its rows were good: written again on close (save_pays)
        except BaseException:
            self.ann = None
            raise

    def wait_ann(self) -> None:
        """Build the graphs of the rows loaded now, if the store is large enough, and wait for them (``reindex``,
        benchmarks, tests): this process builds graphs from now on (``build_graphs``)."""
        self.build_graphs = True
        if self.ann is None or not self.ann.building:
            self._sync_ann()
        if self.ann is not None and self.ann.building:
            self._finish_ann_build()
            self._sync_ann()

    def step_graphs(self) -> bool:
        """A step of a long-lived process with nothing else to do (the daemon between requests): this process
        builds graphs from now on (``build_graphs``); the index is brought up to the store, a large store's graph
        build started in the worker thread when none runs, a finished one taken and saved (``_sync_ann``: saved at
        once when ``save_pays``). Returns whether a build is still running: step again later. Cheap when there is
        nothing to do (the store's ``data_version`` and a few comparisons)."""
        self.build_graphs = True
        self.refresh()
        if self.ann is None or self.ann.built or (not self.ann.building and self.ann.covered < len(self.ids)):
            self._sync_ann()
        return self.ann is not None and self.ann.building

    def close(self) -> None:
        """The handle is closing: a worker-thread build is stopped, and the index is saved beside the database when
        that pays (``save_pays``)."""
        if self.ann is not None and self.ann.building:
            self.ann.cancel()
            self.ann = None
        if self.save_pays():
            self.save()

    def save_pays(self) -> bool:
        """Whether a new snapshot is worth writing: a store of ``snapshot.MIN_ROWS`` rows or more whose index read
        at least a twentieth of its rows from the database (a full load, a large import) or built graphs since the
        snapshot it opened (if any). A short-lived process of a small store never writes one."""
        n = len(self.ids)
        if n < snapshot.MIN_ROWS or self._generation is None or snapshot.location(self.store) is None:
            return False
        graphs = self.ann is not None and not self.ann.building and not self.ann.saved
        return graphs or self._unsaved >= max(1, n // 20)

    def save(self) -> None:
        """Write the snapshot now (store/snapshot.py; ``lantern reindex`` and ``close``). Errors writing it (a full
        disk) are logged, never raised: the database is the source of truth and the next open reloads from it."""
        try:
            if snapshot.save(self, self._generation) is not None:
                self._unsaved = 0
                if self.ann is not None:
                    self.ann.saved = True
        except OSError as e:
            log.warning("index snapshot of %s not written: %s", self.store.path, e)

    def _changed_rows(self) -> list[tuple]:
        """The rows archived (or grown) since the last refresh: the (id, archived_at) stamps of the overlap window are
        read first, and full rows (vector, hints) only for ids that are new or whose archived_at changed. A bulk write
        leaves thousands of rows inside the window; re-reading them all would cost ~250 ms per refresh at 10k."""
        after = int(self.ids[-1]) if len(self.ids) else None
        stamps = self.store.stamps_since(self._seen_archived_at - _OVERLAP_S, after)
        if not stamps:
            return []
        ids = np.fromiter((s[0] for s in stamps), np.int64, len(stamps))
        at = np.fromiter((s[1] for s in stamps), np.float64, len(stamps))
        if len(self.ids):
            pos = np.minimum(np.searchsorted(self.ids, ids), len(self.ids) - 1)
            known = self.ids[pos] == ids
            same = known & (self.archived[pos] == at)
            ids, at = ids[~same], at[~same]
        if self.undecodable:  # left out, and not changed since: not read again
            bad = self.undecodable
            unchanged = np.fromiter((bad.get(int(i)) == a for i, a in zip(ids, at)), bool, len(ids))
            ids = ids[~unchanged]
        return self.store.rows_by_id(ids.tolist()) if len(ids) else []

    def _apply(self, rows: list[tuple]) -> None:
        if not rows:
            return
        gc_was_enabled = gc.isenabled()
        gc.disable()  # millions of small objects at a full load: the cyclic GC would rescan them repeatedly
        try:
            self._apply_rows(rows)
        finally:
            if gc_was_enabled:
                gc.enable()

    def _apply_rows(self, rows: list[tuple]) -> None:
        seen = max(r[3] for r in rows)
        rows, vectors = self._decoded(rows)
        ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
        if len(self.ids) and self.undecodable and (self.positions_of(list(self.undecodable)) >= 0).any():
            return self._reload()  # a row loaded before lost its vector: start over, without it
        if len(self.ids):
            pos = np.minimum(np.searchsorted(self.ids, ids), len(self.ids) - 1)
            present = self.ids[pos] == ids
            for i in np.flatnonzero(present):
                self._overwrite(int(pos[i]), rows[i], vectors[i])
            new = np.flatnonzero(~present)
            new_rows, vecs = [rows[i] for i in new], vectors[new]
        else:
            new_rows, vecs = rows, vectors
        if new_rows:
            new_ids = np.fromiter((r[0] for r in new_rows), np.int64, len(new_rows))
            if len(self.ids) and new_ids[0] < self.ids[-1]:  # an entry left out before, its vector repaired since
                return self._reload()
            start = len(self.ids)
            n = len(new_rows)
            self.ids = np.concatenate([self.ids, new_ids])
            self._append_vectors(start, vecs)
            self.session = np.concatenate([self.session, np.asarray([self._code(r[1]) for r in new_rows], np.int32)])
            for name, column in (("user", 9), ("agent", 10), ("project", 11)):
                codes = np.asarray([self._label(r[column]) for r in new_rows], np.int32)
                setattr(self, name, np.concatenate([getattr(self, name), codes]))
            columns = np.asarray([(r[2], r[4], r[5], r[6]) for r in new_rows], np.float64).reshape(n, 4)
            self.time = np.concatenate([self.time, columns[:, 0]])
            self.archived = np.concatenate([self.archived, np.fromiter((r[3] for r in new_rows), np.float64, n)])
            self.prior = np.concatenate([self.prior, columns[:, 1].astype(np.float32)])
            self.tool_count = np.concatenate([self.tool_count, columns[:, 2].astype(np.float32)])
            self.file_count = np.concatenate([self.file_count, columns[:, 3].astype(np.float32)])
            self.confidence = np.concatenate([self.confidence, np.full(n, 0.5, np.float32)])
            self.success = np.concatenate([self.success, np.full(n, 0.5, np.float32)])
            self.access_count = np.concatenate([self.access_count, np.zeros(n, np.float32)])
            hints = json.loads("[" + ",".join(r[7] for r in new_rows) + "]")  # one parse for the whole batch
            self.hint_count = np.concatenate([self.hint_count, np.fromiter(map(len, hints), np.float32, n)])
            add = self.postings.add
            for offset, terms in enumerate(hints, start):
                add(offset, terms)
            self._unsaved += n
        self._seen_archived_at = max(self._seen_archived_at, seen)

    def _reload(self) -> None:
        """Start over from every row (within the refresh's read transaction), at the same generation."""
        generation = self._generation
        self.reset()
        self._generation = generation
        self._apply_rows(self.store.rows_since(float("-inf")))

    def _decoded(self, rows: list[tuple]) -> tuple[list[tuple], np.ndarray]:
        """(the rows whose vector decodes, their vectors float32 (k, dim)). A row whose stored vector has a byte
        length of no layout (store ``vector_decodable``: cut short by a disk fault, written by another tool) is left
        out, remembered in ``undecodable`` with its stamp, and named in one warning, once per store handle
        (``_WARNED``: an index started over, or the handle's next index, reads it again): a recovery works on the
        rest, and ``lantern reindex`` recomputes it. A row with no vector yet (NULL: stored text-first, filled
        later) gets an all-zero one: every signal but the semantic ones ranks it (a cosine of 0 with any query)."""
        if any(r[8] is None for r in rows):
            vectors = np.zeros((len(rows), self.dim), np.float32)
            held = [i for i, r in enumerate(rows) if r[8] is not None]
            keep: set[int] = set()
            if held:
                kept, decoded = self._decoded([rows[i] for i in held])
                keep = {r[0] for r in kept}
                vectors[[i for i in held if rows[i][0] in keep]] = decoded
            out = [i for i, r in enumerate(rows) if r[8] is None or r[0] in keep]
            return [rows[i] for i in out], vectors[out]
        try:
            return rows, self.store.decode_vectors([r[8] for r in rows])
        except ValueError:
            pass
        good = [r for r in rows if self.store.vector_decodable(r[8])]
        bad = [r for r in rows if not self.store.vector_decodable(r[8])]
        warned = _WARNED.setdefault(self.store, set())
        new = [r[0] for r in bad if r[0] not in self.undecodable and r[0] not in warned]
        warned.update(new)
        for r in bad:
            self.undecodable[r[0]] = r[3]
        for r in good:
            self.undecodable.pop(r[0], None)
        if new:
            shown = ", ".join(map(str, new[:5])) + (f" and {len(new) - 5} more" if len(new) > 5 else "")
            log.warning(
                "%s: %d stored vector(s) cannot be decoded (their byte length fits no layout of the store): entry "
                "id(s) %s left out of the index, so no recovery finds them; `lantern --db %s reindex` recomputes them",
                self.store.path,
                len(new),
                shown,
                self.store.path,
            )
        return good, self.store.decode_vectors([r[8] for r in good])

    def _append_vectors(self, start: int, vecs: np.ndarray) -> None:
        """Rows ``start..`` of the matrix <- ``vecs`` (full-width, (k, dim)). Copying the whole matrix on every append
        would cost ~7 ms per new turn at 10k entries of 896-d (bench_proxy profile); a buffer grown by half its size
        makes appends amortized O(1)."""
        present = [(b, int(np.count_nonzero(np.any(vecs[:, b[0] : b[1]], axis=1)))) for b in self.blocks]
        for b, n in present:
            self._nonzero[b] += n
        for a, b in self.blocks:
            self._with[(a, b)] = np.concatenate([self._with[(a, b)][:start], np.any(vecs[:, a:b], axis=1)])
        self._embedded = None
        self._use_blocks([b for b, n in present if n])
        columns, matrix = self._view
        need = start + len(vecs)
        if need > len(self._matrix_buf):
            buf = np.empty((max(need, len(self._matrix_buf) * 3 // 2 + 1024), len(columns)), np.float32)
            buf[:start] = matrix
            self._matrix_buf = buf
        self._matrix_buf[start:need] = vecs[:, columns]
        self._view = (columns, self._matrix_buf[:need])

    def _use_blocks(self, blocks: list[tuple[int, int]]) -> None:
        """Widen ``matrix`` to ``blocks`` not yet in it: a new block's columns are zero for the rows stored before
        (they had none there). One copy of the matrix, when a block is first used."""
        new = [b for b in blocks if b not in self._used]
        if not new:
            return
        used = sorted(self._used + new)
        columns = np.concatenate([np.arange(a, b, dtype=np.intp) for a, b in used])
        old_columns, matrix = self._view
        buf = np.zeros((len(self._matrix_buf), len(columns)), np.float32)
        buf[:, np.searchsorted(columns, old_columns)] = self._matrix_buf
        self._used, self._matrix_buf = used, buf
        self._view = (columns, buf[: len(matrix)])

    def cosines(self, vector: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """The cosine of each row (or of ``rows``, positions) to ``vector``, a full-width L2-normalized query vector
        (dim,): shape (n,) or (len(rows),), float32. The vector is cut to ``columns`` as the matrix is (the dims
        dropped are zero in every row, so each dot product is the one with the stored vector); one snapshot of the
        pair, so a refresh in another thread cannot mix a widened matrix with the old columns."""
        columns, matrix = self._view
        v = vector if len(columns) == self.dim else vector[columns]
        return cosines(matrix if rows is None else matrix[rows], v)

    def vectors(self, positions: np.ndarray, drop: Iterable[tuple[int, int]] = ()) -> np.ndarray:
        """The stored vectors of rows ``positions``, as ``matrix`` holds them (float32 ``(len(positions), k)``, the
        ``columns`` dims), without the dims of the ``drop`` blocks (a block embedder's blocks ranked apart:
        embed.signal_blocks); one snapshot of columns and matrix."""
        columns, matrix = self._view
        keep = np.ones(len(columns), bool)
        for start, stop in drop:
            keep &= (columns < start) | (columns >= stop)
        return matrix[positions] if keep.all() else matrix[positions][:, keep]

    def _overwrite(self, pos: int, row: tuple, vec: np.ndarray) -> None:
        columns, matrix = self._view
        old = np.zeros(self.dim, np.float32)
        old[columns] = matrix[pos]
        for a, b in self.blocks:
            self._nonzero[(a, b)] += int(vec[a:b].any()) - int(old[a:b].any())
            self._with[(a, b)][pos] = bool(vec[a:b].any())
        self._embedded = None
        self._use_blocks([(a, b) for a, b in self.blocks if vec[a:b].any()])
        columns, matrix = self._view
        matrix[pos] = vec[columns]
        if self.ann is not None:  # its graph vectors are old: scored exactly from now on
            self.ann.stale.add(int(self.ids[pos]))
            if len(self.ann.stale) > ANN_BUILD_AHEAD:  # many rewritten: the graphs are rebuilt
                self.ann.cancel()
                self.ann = None
        self.session[pos] = self._code(row[1])
        self.user[pos], self.agent[pos], self.project[pos] = (self._label(v) for v in row[9:12])
        self.time[pos], self.prior[pos] = row[2], row[4]
        self.archived[pos] = row[3]
        self.tool_count[pos], self.file_count[pos] = row[5], row[6]
        terms = json.loads(row[7])
        self.postings.rewrite(pos, terms)
        self.hint_count[pos] = len(terms)
        self._unsaved += 1

    def note_mutable(self, entries: dict) -> None:
        """Take c, σ and the access count of ``entries`` ({entry id: Entry}, as the read path fetches its candidate
        pool: ``Store.entries``) into the arrays. Reading them for every row at each refresh scanned the whole
        table (~3 s at 100k entries: the columns have no index), and only the pool's rows are ever read (importance,
        pruning); another process's reinforcement is seen here, on the rows it concerns."""
        if not entries or not len(self.ids):
            return
        ids = np.fromiter(entries, np.int64, len(entries))
        pos = self.positions_of(ids)
        keep = pos >= 0
        values = np.asarray([(e.confidence, e.success, e.access_count) for e in entries.values()], np.float64).reshape(
            -1, 3
        )
        self.confidence[pos[keep]] = values[keep, 0]
        self.success[pos[keep]] = values[keep, 1]
        self.access_count[pos[keep]] = values[keep, 2]

    def _code(self, session: str) -> int:
        code = self._session_code.get(session)
        if code is None:
            code = self._session_code[session] = len(self.session_names)
            self.session_names.append(session)
        return code

    def _label(self, name: str) -> int:
        return self.labels.setdefault(name, len(self.labels))

    # ------------------------------------------------------------------ queries
    def block_occupied(self, start: int, stop: int) -> bool:
        """Whether any row has a nonzero value in dims ``start..stop-1`` (a block embedder's block in use,
        embed.RoutedEmbedder): for one of ``blocks``, its count of such rows, kept as rows are written (never an
        index into the matrix, so a query embedded in another thread during a refresh reads a plain number); any
        other range is computed from one snapshot of the matrix."""
        count = self._nonzero.get((start, stop))
        if count is not None:
            return count > 0
        columns, matrix = self._view
        inside = (columns >= start) & (columns < stop)
        return bool(inside.any()) and bool(np.any(matrix[:, inside]))

    def rows_with(self, start: int, stop: int) -> np.ndarray | None:
        """Boolean (n,): which rows have a nonzero value in the block ``start..stop`` (one of ``blocks``), kept as
        rows are written; None for a range that is not one of ``blocks``."""
        has = self._with.get((start, stop))
        return None if has is None else has[: len(self.ids)]

    def embedded(self) -> np.ndarray | None:
        """Boolean (n,): which rows have a vector (a row stored text-first has none until it is filled: every block
        zero, as no L2-normalized vector is); None when every row has one (the common case, no mask to apply).
        Computed once per change of the rows, not per signal of each query (three signals ask for it)."""
        n = len(self.ids)
        if self._embedded is not None and self._embedded[0] == n:
            return self._embedded[1]
        has = np.zeros(n, bool)
        for block in self.blocks:
            has |= self._with[block][:n]
        has.setflags(write=False)  # shared by the signals of every query until the rows change
        self._embedded = (n, None if has.all() else has)
        return self._embedded[1]

    def block_occupied_among(self, start: int, stop: int, rows: np.ndarray | None) -> bool:
        """``block_occupied`` restricted to the rows where the boolean mask ``rows`` is true (None: every row):
        whether a block can match any candidate of a recovery limited to a session or scope."""
        if rows is None or not self.block_occupied(start, stop):
            return self.block_occupied(start, stop)
        columns, matrix = self._view
        inside = (columns >= start) & (columns < stop)
        if not inside.any():
            return False
        n = min(len(rows), len(matrix))
        picked = np.flatnonzero(rows[:n])
        return bool(picked.size) and bool(np.any(matrix[np.ix_(picked, np.flatnonzero(inside))]))

    def scope_mask(self, scope: Scope) -> np.ndarray | None:
        """Boolean mask of the rows inside ``scope`` (its user; its agent and project when given), or None when
        every row is inside it (a database with one user and no filter: the common case costs nothing)."""
        mask = None
        for name, value in (("user", scope.user), ("agent", scope.agent), ("project", scope.project)):
            if value is None:
                continue
            codes = getattr(self, name)
            code = self.labels.get(value)
            if code is None:
                return np.zeros(len(self.ids), bool)
            inside = codes == code
            if not inside.all():
                mask = inside if mask is None else mask & inside
        return mask

    @property
    def used_blocks(self) -> list[tuple[int, int]]:
        """The blocks some row has a nonzero value in, in dim order (their dims are ``columns``)."""
        return list(self._used)

    def positions_of(self, ids: np.ndarray) -> np.ndarray:
        """Row positions (int64) of entry ids, -1 for an id not loaded."""
        ids = np.asarray(ids, np.int64)
        if not len(self.ids) or not len(ids):
            return np.full(len(ids), -1, np.int64)
        pos = np.minimum(np.searchsorted(self.ids, ids), len(self.ids) - 1)
        return np.where(self.ids[pos] == ids, pos, -1)

    def positions(self, ids) -> np.ndarray:
        """Row positions of entry ids (all must be present)."""
        return np.searchsorted(self.ids, np.asarray(ids, np.int64))

    def session_mask(self, session: str | None) -> np.ndarray | None:
        """Boolean mask of rows in ``session`` or its sub-sessions (``session/...``); None means every row."""
        if session is None:
            return None
        codes = [c for name, c in self._session_code.items() if name == session or name.startswith(session + "/")]
        return np.isin(self.session, np.asarray(codes, np.int32))

    def sessions_matching(self, session: str | None) -> list[str] | None:
        if session is None:
            return None
        return [name for name in self.session_names if name == session or name.startswith(session + "/")]

    def set_reinforcement(self, updates: dict[int, tuple[float, float]]) -> None:
        """Mirror this process's own c and σ writes ({entry id: (c, σ)}, reinforce.py); ids not loaded yet are
        skipped (their row is read with its stored values at the next refresh)."""
        if not updates or not len(self.ids):
            return
        ids = np.fromiter(updates, np.int64, len(updates))
        pos = np.minimum(np.searchsorted(self.ids, ids), len(self.ids) - 1)
        present = self.ids[pos] == ids
        values = np.asarray([updates[int(i)] for i in ids], np.float64).reshape(-1, 2)
        self.confidence[pos[present]] = values[present, 0]
        self.success[pos[present]] = values[present, 1]

    def note_access(self, ids) -> None:
        """Mirror ``Store.bump_access`` in memory (this process's own write)."""
        if len(ids):
            self.access_count[self.positions(ids)] += 1
