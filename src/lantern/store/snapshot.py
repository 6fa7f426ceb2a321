"""The in-process index saved beside a SQLite database (``DB.index/``), so a new process opens a large store without
reading every row into Python: the ``MemoryIndex`` arrays as ``.npy`` files (the vector matrix memory-mapped
copy-on-write, with room for rows added later), the hint postings as CSR arrays, and the HNSW graphs (store/ann.py)
as usearch files, opened as views.

A snapshot is valid only for the state it was taken from: ``meta.json`` records the database's ``generation``
(the ``meta`` key every delete, move, re-embedding and re-encoding bumps in its own transaction:
``store.sqlite.bump_generation``), the rows it holds (count and largest id) and the embedder. On open, a snapshot
whose generation, rows or embedder differ, or whose files are missing, short or unreadable, is ignored and the
index reloads from SQLite; a valid one is loaded and the rows added or stamped since (a grown turn, a filled
block: ``stamps_since``) are applied as at any refresh. The entries left out for an undecodable vector
(``MemoryIndex.undecodable``) are recorded with their stamps, so they are not read again at each open. Written
atomically (a temporary folder renamed into place) and re-checked after the rename: a generation bumped meanwhile
removes it. It holds vectors and hint terms of the text, so every delete removes it (``remove``: ``Store.delete``),
before the next snapshot is written.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from pathlib import Path

import numpy as np

from lantern.store.ann import BlockGraphs

log = logging.getLogger(__name__)

FORMAT = 1
SUFFIX = ".index"
MIN_ROWS = 10_000  # smaller stores load from the database (ours: ~0.4 s at 10k entries, BENCHMARKS.md §2)
# per-row arrays of MemoryIndex saved as they are
_ARRAYS = (
    "ids",
    "session",
    "time",
    "archived",
    "prior",
    "tool_count",
    "file_count",
    "hint_count",
    "user",
    "agent",
    "project",
)


def location(store) -> Path | None:
    """``DB.index`` beside a SQLite store's file; None for a store in memory or on a server."""
    path = getattr(store, "path", None)
    if not isinstance(path, str) or path == ":memory:" or "://" in path or not hasattr(store, "db"):
        return None
    return Path(path + SUFFIX)


def remove(db_path: str | os.PathLike[str]) -> None:
    """Delete the snapshot of the database at ``db_path`` and any half-written one (their vectors and hint terms
    may hold deleted entries)."""
    folder = Path(str(db_path) + SUFFIX)
    for p in [folder, *folder.parent.glob(folder.name + ".tmp-*"), *folder.parent.glob(folder.name + ".old-*")]:
        shutil.rmtree(p, ignore_errors=True)


def generation(store) -> int:
    """The database's generation (0 before any delete, move or re-embedding)."""
    value = store.get_meta("generation")
    return int(value) if value else 0


def save(index, gen: int) -> Path | None:
    """Write ``index`` (a MemoryIndex loaded at generation ``gen``) to its store's ``DB.index``; returns the folder,
    or None when the store has none, the index is empty, or the generation moved on meanwhile (nothing is left
    behind then)."""
    folder = location(index.store)
    n = len(index.ids)
    if folder is None or n == 0:
        return None
    tmp = folder.parent / f"{folder.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(mode=0o700)
    try:
        columns, matrix = index._view
        files: dict[str, int] = {}
        for name in _ARRAYS:
            np.save(tmp / f"{name}.npy", getattr(index, name)[:n])
        for b, has in index._with.items():
            np.save(tmp / f"with-{b[0]}-{b[1]}.npy", has[:n])
        np.save(tmp / "columns.npy", columns)
        room = max(1024, n // 16)  # rows appended after the open go to copy-on-write pages, not a copy of the matrix
        out = np.lib.format.open_memmap(tmp / "matrix.npy", mode="w+", dtype=np.float32, shape=(n + room, len(columns)))
        out[:n] = matrix[:n]
        out.flush()
        del out
        terms, offsets, rows = index.postings.csr()
        np.save(tmp / "post_offsets.npy", offsets)
        np.save(tmp / "post_rows.npy", rows)
        (tmp / "post_terms.json").write_text(json.dumps(terms), encoding="utf-8")
        graphs = {}
        ann = index.ann
        if ann is not None and not ann.building:
            with ann.lock:
                for b, graph in ann.graphs.items():
                    name = f"graph-{b[0]}-{b[1]}.usearch"
                    graph.save(str(tmp / name))
                    graphs[name] = list(b)
                covered = min(ann.covered, n)
                params = list(ann.params.graph_key())
                stale = sorted(ann.stale)
        else:
            covered, params, stale = 0, None, []
        for p in tmp.iterdir():
            files[p.name] = p.stat().st_size
        meta = dict(
            format=FORMAT,
            generation=gen,
            count=n,
            max_id=int(index.ids[n - 1]),
            room=room,
            embedder=index.store.embedder_id,
            dim=index.dim,
            blocks=[list(b) for b in index.blocks],
            used=[list(b) for b in index._used],
            nonzero=[[b[0], b[1], c] for b, c in index._nonzero.items()],
            labels=index.labels,
            session_names=index.session_names,
            seen_archived_at=index._seen_archived_at,
            undecodable=[[i, t] for i, t in index.undecodable.items()],  # left out: read again only when stamped
            graphs=graphs,
            covered=covered,
            stale=stale,
            ann_params=params,
            files=files,
        )
        (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
        old = folder.parent / f"{folder.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        if folder.exists():
            folder.rename(old)
        tmp.rename(folder)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if generation(index.store) != gen:  # a delete committed meanwhile: what was just written may hold its rows
        remove(index.store.path)
        return None
    return folder


def load(index, gen: int) -> bool:
    """Fill the empty ``index`` from its store's snapshot when one exists and is valid for generation ``gen`` and the
    store's rows; False (the index untouched) otherwise. A damaged snapshot is logged and removed."""
    folder = location(index.store)
    if folder is None or not (folder / "meta.json").is_file():
        return False
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        if (
            meta.get("format") != FORMAT
            or meta["generation"] != gen
            or meta["embedder"] != index.store.embedder_id
            or meta["dim"] != index.dim
            or [tuple(b) for b in meta["blocks"]] != list(index.blocks)
        ):
            return False
        n, max_id = meta["count"], meta["max_id"]
        # rows up to max_id change only by a delete (a new generation) or in place (stamped: applied after the load);
        # a count over the id range would read the whole table (the rows hold the text)
        if index.store.db.execute("SELECT 1 FROM entries WHERE id = ?", (max_id,)).fetchone() is None:
            return False
        for name, size in meta["files"].items():
            if (folder / name).stat().st_size != size:
                raise ValueError(f"{name}: {size} bytes expected")
        arrays = {name: np.load(folder / f"{name}.npy") for name in _ARRAYS}
        if any(len(a) != n for a in arrays.values()) or int(arrays["ids"][-1]) != max_id:
            raise ValueError("row arrays of the wrong length")
        matrix = np.load(folder / "matrix.npy", mmap_mode="c")
        columns = np.load(folder / "columns.npy")
        if matrix.shape != (n + meta["room"], len(columns)):
            raise ValueError(f"matrix of shape {matrix.shape}")
        with_block = {}
        for b in index.blocks:
            has = np.load(folder / f"with-{b[0]}-{b[1]}.npy")
            if len(has) != n:
                raise ValueError("block rows of the wrong length")
            with_block[b] = has
        terms = json.loads((folder / "post_terms.json").read_text(encoding="utf-8"))
        offsets = np.load(folder / "post_offsets.npy")
        rows = np.load(folder / "post_rows.npy", mmap_mode="r")
        if len(offsets) != len(terms) + 1 or int(offsets[-1]) != len(rows):
            raise ValueError("postings of the wrong length")
        graphs = {}
        for name, b in meta["graphs"].items():
            graphs[tuple(b)] = str(folder / name)
    except (OSError, ValueError, KeyError, TypeError) as e:
        log.warning("%s: index snapshot unreadable (%s); rebuilding it from the database", folder, e)
        remove(index.store.path)
        return False
    for name, a in arrays.items():
        setattr(index, name, a)
    index._matrix_buf = matrix
    index._view = (columns, matrix[:n])
    index._used = [tuple(b) for b in meta["used"]]
    index._nonzero = {(a, b): c for a, b, c in meta["nonzero"]}
    index._with = with_block
    index.labels = dict(meta["labels"])
    index.session_names = list(meta["session_names"])
    index._session_code = {s: i for i, s in enumerate(index.session_names)}
    index.postings.load_csr(terms, offsets, rows, n)
    index._seen_archived_at = float(meta["seen_archived_at"])
    index.undecodable = {int(i): float(t) for i, t in meta.get("undecodable", [])}
    index.confidence = np.full(n, 0.5, np.float32)
    index.success = np.full(n, 0.5, np.float32)
    index.access_count = np.zeros(n, np.float32)
    params = index.ann_params
    if graphs and params is not None and meta["ann_params"] == list(params.graph_key()):
        try:
            index.ann = BlockGraphs.view(index.blocks, params, graphs, meta["covered"])
            index.ann.stale = set(meta.get("stale", []))
        except (OSError, RuntimeError, ValueError) as e:
            log.warning("%s: HNSW graphs unreadable (%s); rebuilding them", folder, e)
            index.ann = None
    return True


__all__ = ["FORMAT", "SUFFIX", "generation", "load", "location", "remove", "save"]
