"""The in-process index saved beside a SQLite database (``DB.index/``), so a new process opens a large store without
reading every row into Python: the ``MemoryIndex`` arrays as ``.npy`` files (the vector matrix memory-mapped
copy-on-write, with room for rows added later), the hint postings as CSR arrays, and the HNSW graphs (store/ann.py)
as usearch files, opened as views.

A snapshot is used only when it is exactly the snapshot of this database's current state; anything else is never
used: discarded with one warning (removed) and the index reloads from the database.

- Tied to its database: ``meta.json`` records the store id (a random ``store_id`` in the database's ``meta``
  table, written when the database is created, or by the first snapshot of an older store; a store that cannot be
  written and has none never gets a snapshot) and the identity (device, inode) of the database file. A snapshot of
  another store, or of a copy of this one, moved beside it is foreign. The folder is named after the database's
  resolved path (symlinks followed), so every path to one database finds the same snapshot. A store's snapshots
  are found by its identity (``owned``: named after its path, or recording its store id and file, or a temporary
  folder named with its file's device and inode), so a forget removes every one of them beside the file, whatever
  name wrote it (a hard link, the name before a rename), and an open removes those no process will use again
  (``tidy``: an earlier name's, a killed save's). One left in a folder the file was moved out of is not found.
- Whole: every file's size and CRC-32 are recorded in ``meta.json``, whose own CRC-32 ends it, and
  ``meta.json``'s shape is checked entirely (each key, type and length). The row files and the matrix are verified
  before the index takes them (a damaged matrix changes the ranking); the usearch graph files in a worker thread
  (``BlockGraphs.verified_view``: exact search answers until it is done), before usearch opens them (a damaged
  graph file crashes the process); one that fails is removed with the snapshot, with one warning, and the graphs
  are built anew from the rows. At 100k entries the matrix (163 MB) costs ~50 ms, the graph (104 MB) ~30 ms
  beside it. The files are read through one open directory, and usearch is handed the very file checked
  (``/proc/self/fd``), so a snapshot another process renames into place meanwhile is not mixed in.
- Current: ``meta.json`` records the database's ``generation`` (the ``meta`` key every delete, move, re-embedding
  and re-encoding bumps in its own transaction: ``store.sqlite.bump_generation``), the rows it holds (count and
  largest id) and the embedder. A snapshot of an earlier generation, or whose largest row is gone, or of another
  embedder is ignored silently (it is the database's own older state; the next save replaces it). A valid one is
  loaded and the rows added or stamped since (a grown turn, a filled block: ``stamps_since``) are applied as at
  any refresh. The entries left out for an undecodable vector (``MemoryIndex.undecodable``) are recorded with
  their stamps, so they are not read again at each open.

Written into a temporary folder by plain file writes (no memory-mapped writes: a full disk raises OSError, never
SIGBUS), renamed into place, and re-checked after the rename: a generation bumped meanwhile removes it. A write
that fails (a full disk, a read-only folder) removes what it wrote and raises OSError (``MemoryIndex.save`` logs
one warning; the command goes on). It holds vectors and hint terms of the text, so every delete removes it and
every other snapshot of the store it finds (``remove``: ``Store.delete``), before the next snapshot is written.
"""

from __future__ import annotations

import io
import json
import logging
import mmap
import os
import re
import sqlite3
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from lantern import lazy_re

if TYPE_CHECKING:  # numpy and the graphs load where a snapshot is saved or read: opening a store needs neither
    import numpy as np

log = logging.getLogger(__name__)

FORMAT = 2  # 2: store id, file identity, CRC-32 of every file
SUFFIX = ".index"
STORE_ID = "store_id"  # meta key: the random id of this database, written once
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
_CHUNK = 1 << 22  # bytes per write and per checksum step
_NAME = lazy_re.compile(r"[a-z_]+(-\d+-\d+)?\.(npy|json|usearch)")  # the file names a snapshot holds (no path parts)


class Unreadable(ValueError):
    """A snapshot that is not exactly one this code wrote for this database (damaged, foreign, wrong shape)."""


def location(store) -> Path | None:
    """``DB.index`` beside a SQLite store's file, named after its resolved path (symlinks followed); None for a store
    in memory or on a server."""
    path = getattr(store, "path", None)
    if not isinstance(path, str) or path == ":memory:" or "://" in path or not hasattr(store, "db"):
        return None
    return Path(os.path.realpath(path) + SUFFIX)


# a snapshot folder's name: DB.index, a half-written DB.index.tmp-PID-..., or a replaced one set aside, .old-PID-...
_FOLDER = lazy_re.compile(
    r"(?P<base>.+)" + re.escape(SUFFIX) + r"(?:\.(?P<kind>tmp|old)-(?P<pid>\d+)-(?P<rest>[-0-9a-f]+))?"
)


def remove(db_path: str | os.PathLike[str], sid: str | None = None) -> None:
    """Delete every snapshot of the database at ``db_path`` found beside it (``owned``: whole, half-written by a
    live or a dead process, set aside), whatever name of the file it was written under (a hard link, an earlier
    name before a rename): they hold vectors and hint terms of the text, so a forget removes them all. ``sid``: the
    store's id (``store_id``); None recognizes only the snapshots named after ``db_path``."""
    for p, _kind, _pid in owned(db_path, sid):
        _discard(p)


def tidy(db_path: str | os.PathLike[str], sid: str | None) -> None:
    """Delete what of this database's snapshots no process will use again: one named after a path that is no
    longer this database's file (renamed, removed: no later open finds it), and the half-written or set-aside
    folders of processes that ended (killed during a save). On open and before each save."""
    current = {_snapshot_path(db_path).name, Path(os.path.abspath(db_path) + SUFFIX).name}
    identity = _identity(db_path)
    for p, kind, pid in owned(db_path, sid):
        if kind is not None:
            if not _alive(pid):
                _discard(p)
        elif p.name not in current and _identity(str(p)[: -len(SUFFIX)]) != identity:
            _discard(p)


def owned(db_path: str | os.PathLike[str], sid: str | None) -> list[tuple[Path, str | None, int]]:
    """(folder, kind: None for a whole snapshot, "tmp" half-written, "old" set aside; writer's pid) of every snapshot
    of the database at ``db_path`` in the folders of its path and resolved path: one named after either path, one
    whose ``meta.json`` records this store's id and file (device, inode: a hard link, an earlier name), a
    half-written one whose name holds that file's identity (``save``). Another database's, or a copy's (the same
    store id, another file), is not."""
    names = {Path(os.path.realpath(db_path) + SUFFIX), Path(os.path.abspath(db_path) + SUFFIX)}
    identity = _identity(db_path)
    tag = f"{identity[0]}-{identity[1]}-" if identity is not None else None
    out = []
    for parent in {p.parent for p in names}:
        try:
            found = os.listdir(parent)
        except OSError:
            continue
        for name in found:
            m = _FOLDER.fullmatch(name)
            if m is None:
                continue
            p, kind = parent / name, m["kind"]
            pid = int(m["pid"]) if m["pid"] else 0
            if (
                parent / (m["base"] + SUFFIX) in names
                or (kind == "tmp" and tag is not None and m["rest"].startswith(tag))
                or (kind != "tmp" and sid is not None and identity is not None and _recorded(p) == (sid, identity))
            ):
                out.append((p, kind, pid))
    return out


def _snapshot_path(db_path: str | os.PathLike[str]) -> Path:
    return Path(os.path.realpath(db_path) + SUFFIX)


def _identity(path: str | os.PathLike[str]) -> list[int] | None:
    """[device, inode] of the file at ``path`` (symlinks followed); None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino]


def _recorded(folder: Path) -> tuple[str, list[int]] | None:
    """(store id, file identity) a snapshot folder's ``meta.json`` records; None when it cannot be read."""
    try:
        with open(folder / "meta.json", "rb") as f:
            meta = json.loads(f.readline())
        return meta["store"], meta["file"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` runs (another user's too); a reused pid counts as alive: its folder waits."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _discard(p: Path) -> None:
    """Remove ``p``, a folder (its files) or anything else; gone already is fine."""
    if p.is_dir() and not p.is_symlink():
        import shutil

        shutil.rmtree(p, ignore_errors=True)
    else:
        try:
            p.unlink()
        except FileNotFoundError:
            pass
        except OSError as e:
            log.warning("%s not removed: %s", p, e)


def generation(store) -> int:
    """The database's generation (0 before any delete, move or re-embedding)."""
    value = store.get_meta("generation")
    return int(value) if value else 0


def store_id(store, create: bool = False) -> str | None:
    """The database's random id (meta ``store_id``); with ``create``, written first when it has none (its own
    transaction; never inside an open one). None when it has none and it cannot be written (a read-only file)."""
    value = store.get_meta(STORE_ID)
    if value or not create or store.db.in_transaction:
        return value
    try:
        with store.transaction() as db:
            db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (STORE_ID, os.urandom(16).hex()))
    except sqlite3.Error as e:
        log.info("%s: no store id written (%s); no index snapshot", store.path, e)
        return None
    return store.get_meta(STORE_ID)


def _file_identity(store) -> list[int]:
    st = os.stat(os.path.realpath(store.path))
    return [st.st_dev, st.st_ino]


class _Writer:
    """A file written in order through ``write``, its CRC-32 kept as it goes (np.save writes into it)."""

    def __init__(self, path: Path):
        self.f = open(path, "xb")  # noqa: SIM115 - closed by close()
        self.crc = 0
        self.size = 0

    def write(self, data) -> int:
        data = memoryview(data).cast("B")
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)
        return self.f.write(data)

    def close(self) -> list[int]:
        self.f.close()
        return [self.size, self.crc]


def _save_array(tmp: Path, name: str, array: np.ndarray, files: dict[str, list[int]]) -> None:
    import numpy as np

    w = _Writer(tmp / name)
    try:
        np.save(w, np.ascontiguousarray(array))
    finally:
        files[name] = w.close()


def _save_matrix(tmp: Path, matrix: np.ndarray, n: int, room: int, files: dict[str, list[int]]) -> None:
    """``matrix.npy``: float32 (n + room, columns), the rows then ``room`` zero rows, by plain writes."""
    import numpy as np

    cols = matrix.shape[1]
    w = _Writer(tmp / "matrix.npy")
    try:
        header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)), "fortran_order": False}
        np.lib.format.write_array_header_1_0(w, {**header, "shape": (n + room, cols)})
        step = max(1, _CHUNK // max(cols * 4, 1))
        for lo in range(0, n, step):
            w.write(np.ascontiguousarray(matrix[lo : min(lo + step, n)], dtype=np.float32))
        zeros = np.zeros((min(step, room), cols), np.float32)
        for lo in range(0, room, step):
            w.write(zeros[: min(step, room - lo)])
    finally:
        files["matrix.npy"] = w.close()


def _crc_of(path: Path) -> list[int]:
    crc, size = 0, 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            crc, size = zlib.crc32(chunk, crc), size + len(chunk)
    return [size, crc]


def save(index, gen: int) -> Path | None:
    """Write ``index`` (a MemoryIndex loaded at generation ``gen``) to its store's ``DB.index``; returns the folder,
    or None when the store has none, the index is empty, the store has no id and cannot be given one, or the
    generation moved on meanwhile (nothing is left behind then). Raises OSError when a file cannot be written (a
    full disk): nothing of the new snapshot is left, the one before (if any) stays."""
    folder = location(index.store)
    n = len(index.ids)
    if folder is None or n == 0:
        return None
    sid = store_id(index.store, create=True)
    if sid is None:
        return None
    identity = _file_identity(index.store)
    tidy(index.store.path, sid)
    # the file's identity in the name: a folder a killed save leaves is found as this database's (``owned``)
    tmp = folder.parent / f"{folder.name}.tmp-{os.getpid()}-{identity[0]}-{identity[1]}-{os.urandom(4).hex()}"
    old = folder.parent / f"{folder.name}.old-{os.getpid()}-{os.urandom(4).hex()}"
    tmp.mkdir(mode=0o700)
    try:
        columns, matrix = index._view
        files: dict[str, list[int]] = {}
        for name in _ARRAYS:
            _save_array(tmp, f"{name}.npy", getattr(index, name)[:n], files)
        for b, has in index._with.items():
            _save_array(tmp, f"with-{b[0]}-{b[1]}.npy", has[:n], files)
        _save_array(tmp, "columns.npy", columns, files)
        room = max(1024, n // 16)  # rows appended after the open go to copy-on-write pages, not a copy of the matrix
        _save_matrix(tmp, matrix, n, room, files)
        terms, offsets, rows = index.postings.csr()
        _save_array(tmp, "post_offsets.npy", offsets, files)
        _save_array(tmp, "post_rows.npy", rows, files)
        w = _Writer(tmp / "post_terms.json")
        try:
            w.write(json.dumps(terms).encode("utf-8"))
        finally:
            files["post_terms.json"] = w.close()
        graphs = {}
        ann = index.ann
        if ann is not None and not ann.building:
            with ann.lock:
                for b, graph in ann.graphs.items():
                    name = f"graph-{b[0]}-{b[1]}.usearch"
                    try:
                        graph.save(str(tmp / name))
                    except RuntimeError as e:  # usearch's own error for a failed write (a full disk)
                        raise OSError(f"{name}: {e}") from e
                    files[name] = _crc_of(tmp / name)
                    graphs[name] = list(b)
                covered = min(ann.covered, n)
                params = list(ann.params.graph_key())
                stale = sorted(ann.stale)
        else:
            covered, params, stale = 0, None, []
        meta = dict(
            format=FORMAT,
            store=sid,
            file=identity,
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
        body = json.dumps(meta).encode("utf-8")
        with open(tmp / "meta.json", "xb") as f:
            f.write(body + b"\n" + f"crc32 {zlib.crc32(body):08x}\n".encode())
        if os.path.lexists(folder):
            folder.rename(old)
        tmp.rename(folder)
    except BaseException:
        _discard(tmp)
        if os.path.lexists(old) and not os.path.lexists(folder):
            old.rename(folder)  # the one before stays
        raise
    finally:
        _discard(old)
    if generation(index.store) != gen:  # a delete committed meanwhile: what was just written may hold its rows
        remove(index.store.path, sid)
        return None
    return folder


def _shape_error(meta) -> str | None:
    """What is wrong with the shape of a ``meta.json`` body (None: every key there with the right type)."""

    def ints(v, k: int | None = None) -> bool:
        return isinstance(v, list) and (k is None or len(v) == k) and all(type(x) is int for x in v)

    def number(v) -> bool:
        return type(v) in (int, float)

    if not isinstance(meta, dict):
        return "not an object"
    checks = {
        "format": lambda v: v == FORMAT,
        "store": lambda v: isinstance(v, str),
        "file": lambda v: ints(v, 2),
        "generation": lambda v: type(v) is int,
        "count": lambda v: type(v) is int and v > 0,
        "max_id": lambda v: type(v) is int,
        "room": lambda v: type(v) is int and v >= 0,
        "embedder": lambda v: v is None or isinstance(v, str),
        "dim": lambda v: type(v) is int,
        "blocks": lambda v: isinstance(v, list) and all(ints(b, 2) for b in v),
        "used": lambda v: isinstance(v, list) and all(ints(b, 2) for b in v),
        "nonzero": lambda v: isinstance(v, list) and all(ints(b, 3) for b in v),
        "labels": lambda v: isinstance(v, dict) and all(type(c) is int for c in v.values()),
        "session_names": lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v),
        "seen_archived_at": number,
        "undecodable": lambda v: (
            isinstance(v, list)
            and all(isinstance(p, list) and len(p) == 2 and type(p[0]) is int and number(p[1]) for p in v)
        ),
        "graphs": lambda v: isinstance(v, dict) and all(ints(b, 2) for b in v.values()),
        "covered": lambda v: type(v) is int and v >= 0,
        "stale": ints,
        "ann_params": lambda v: (
            v is None
            or (
                isinstance(v, list)
                and len(v) == 3
                and type(v[0]) is int
                and type(v[1]) is int
                and isinstance(v[2], str)
            )
        ),
        "files": lambda v: (
            isinstance(v, dict) and all(isinstance(k, str) and _NAME.fullmatch(k) and ints(s, 2) for k, s in v.items())
        ),
    }
    for key, ok in checks.items():
        if key not in meta:
            return f"no {key}"
        if not ok(meta[key]):
            return f"{key} of the wrong type or value"
    if not set(meta["graphs"]) <= set(meta["files"]):
        return "a graph file not listed"
    return None


def _read_meta(dfd: int) -> dict:
    data = _read(dfd, "meta.json")
    body, sep, tail = data.rstrip(b"\n").rpartition(b"\n")
    if not sep or tail != f"crc32 {zlib.crc32(body):08x}".encode():
        raise Unreadable("meta.json damaged or of an older format (checksum)")
    try:
        meta = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise Unreadable(f"meta.json: {e}") from None
    problem = _shape_error(meta)
    if problem:
        raise Unreadable(f"meta.json: {problem}")
    return meta


def _read(dfd: int, name: str) -> bytes:
    fd = os.open(name, os.O_RDONLY, dir_fd=dfd)
    with os.fdopen(fd, "rb") as f:
        return f.read()


class _Opened:
    """The snapshot's files, opened through its folder's descriptor and verified against ``meta["files"]`` before
    use. Closing it closes every descriptor (memory maps taken from them stay valid)."""

    def __init__(self, folder: Path, dfd: int, files: dict[str, list[int]]):
        self.folder, self.dfd, self.files, self.fds = folder, dfd, files, {}

    def fd(self, name: str) -> int:
        if name not in self.files:
            raise Unreadable(f"{name} not listed")
        if name not in self.fds:
            self.fds[name] = os.open(name, os.O_RDONLY, dir_fd=self.dfd)
        return self.fds[name]

    def verify(self, name: str) -> None:
        """Raise Unreadable unless ``name`` has the recorded size and CRC-32 (read through a memory map)."""
        fd = self.fd(name)
        size, crc = self.files[name]
        if os.fstat(fd).st_size != size:
            raise Unreadable(f"{name}: {size} bytes expected")
        found = 0
        if size:
            with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as m:
                if hasattr(m, "madvise"):
                    m.madvise(mmap.MADV_SEQUENTIAL)
                with memoryview(m) as view:
                    found = zlib.crc32(view)  # zlib releases the GIL: a second file is verified beside
        if found != crc:
            raise Unreadable(f"{name} damaged (checksum)")

    def array(self, name: str) -> np.ndarray:
        """A verified small ``.npy`` file, read into memory."""
        fd = self.fd(name)
        size, crc = self.files[name]
        os.lseek(fd, 0, os.SEEK_SET)
        data = b"".join(iter(lambda: os.read(fd, _CHUNK), b""))
        if len(data) != size or zlib.crc32(data) != crc:
            raise Unreadable(f"{name} damaged (checksum)")
        import numpy as np

        return np.load(io.BytesIO(data), allow_pickle=False)

    def text(self, name: str) -> str:
        fd = self.fd(name)
        size, crc = self.files[name]
        os.lseek(fd, 0, os.SEEK_SET)
        data = b"".join(iter(lambda: os.read(fd, _CHUNK), b""))
        if len(data) != size or zlib.crc32(data) != crc:
            raise Unreadable(f"{name} damaged (checksum)")
        return data.decode("utf-8")

    def mapped(self, name: str) -> np.ndarray:
        """A verified ``.npy`` file memory-mapped copy-on-write (call ``verify`` first)."""
        import numpy as np

        with os.fdopen(os.dup(self.fd(name)), "rb") as f:
            version = np.lib.format.read_magic(f)
            if version != (1, 0):
                raise Unreadable(f"{name}: .npy version {version}")
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            if fortran or dtype != np.float32 or len(shape) != 2:
                raise Unreadable(f"{name}: {dtype} {shape}")
            return np.memmap(f, dtype=np.float32, mode="c", offset=f.tell(), shape=shape)

    def path(self, name: str) -> str:
        """A path to the open (verified) file itself: ``/proc/self/fd/N`` where there is one."""
        proc = f"/proc/self/fd/{self.fd(name)}"
        return proc if os.path.exists(proc) else str(self.folder / name)

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}


def _graph_check(folder: Path, opened: _Opened, names: dict[str, list[int]]) -> tuple[Callable[[], dict], Callable]:
    """A check of the graph files ``names`` (file name -> block) for ``BlockGraphs.verified_view``, run in its worker
    thread, and the call that releases its descriptors after: each file verified through its own descriptor
    (duplicated now: the snapshot may be replaced meanwhile), then handed over as a path to that very file."""
    from lantern.store.ann import GraphFileError

    mine = _Opened(folder, opened.dfd, opened.files)
    mine.fds = {name: os.dup(opened.fd(name)) for name in names}

    def check() -> dict:
        try:
            for name in names:
                mine.verify(name)
            return {tuple(b): mine.path(name) for name, b in names.items()}
        except (OSError, ValueError) as e:
            raise GraphFileError(str(e)) from None

    return check, mine.close


def load(index, gen: int) -> bool:
    """Fill the empty ``index`` from its store's snapshot when it is this database's and valid for generation
    ``gen`` and the store's rows; False (the index untouched) otherwise. A snapshot that is damaged, of another
    shape or of another database is logged (one warning) and removed."""
    import numpy as np

    from lantern.store.ann import BlockGraphs

    folder = location(index.store)
    if folder is None:
        return False
    beside = Path(os.path.abspath(index.store.path) + SUFFIX)
    if beside != folder and os.path.lexists(beside):  # written by an older version beside a symlink: never used
        _discard(beside)
    if not os.path.lexists(folder):
        return False
    dfd = None
    opened = None
    try:
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        meta = _read_meta(dfd)
        if meta["store"] != store_id(index.store) or meta["file"] != _file_identity(index.store):
            raise Unreadable("the snapshot of another database")
        if (
            meta["generation"] != gen
            or meta["embedder"] != index.store.embedder_id
            or meta["dim"] != index.dim
            or [tuple(b) for b in meta["blocks"]] != list(index.blocks)
        ):
            return False  # an earlier state of this database: the next save replaces it
        n, max_id = meta["count"], meta["max_id"]
        # rows up to max_id change only by a delete (a new generation) or in place (stamped: applied after the load);
        # a count over the id range would read the whole table (the rows hold the text)
        if index.store.db.execute("SELECT 1 FROM entries WHERE id = ?", (max_id,)).fetchone() is None:
            return False
        opened = _Opened(folder, dfd, meta["files"])
        params = index.ann_params
        use_graphs = bool(meta["graphs"]) and params is not None and meta["ann_params"] == list(params.graph_key())
        opened.verify("matrix.npy")  # before a cosine reads it (the graph files: in a worker thread, below)
        arrays = {name: opened.array(f"{name}.npy") for name in _ARRAYS}
        if any(a.ndim != 1 or len(a) != n for a in arrays.values()) or int(arrays["ids"][-1]) != max_id:
            raise Unreadable("row arrays of the wrong length")
        matrix = opened.mapped("matrix.npy")
        columns = opened.array("columns.npy")
        if matrix.shape != (n + meta["room"], len(columns)):
            raise Unreadable(f"matrix of shape {matrix.shape}")
        with_block = {}
        for b in index.blocks:
            has = opened.array(f"with-{b[0]}-{b[1]}.npy")
            if has.shape != (n,):
                raise Unreadable("block rows of the wrong length")
            with_block[b] = has
        terms = json.loads(opened.text("post_terms.json"))
        offsets = opened.array("post_offsets.npy")
        rows = opened.array("post_rows.npy")
        if not isinstance(terms, list) or len(offsets) != len(terms) + 1 or int(offsets[-1]) != len(rows):
            raise Unreadable("postings of the wrong length")
        graphs = None
        if use_graphs:  # checked in a worker thread, searched once checked (exact search until then)
            check, release = _graph_check(folder, opened, meta["graphs"])
            graphs = BlockGraphs.verified_view(index.blocks, params, check, meta["covered"], release)
            graphs.stale = set(meta["stale"])
    except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
        log.warning("%s: index snapshot unreadable (%s); rebuilding it from the database", folder, e)
        _remove_if_same(folder, dfd)
        return False
    finally:
        if opened is not None:
            opened.close()
        if dfd is not None:
            os.close(dfd)
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
    index.undecodable = {int(i): float(t) for i, t in meta["undecodable"]}
    index.confidence = np.full(n, 0.5, np.float32)
    index.success = np.full(n, 0.5, np.float32)
    index.access_count = np.zeros(n, np.float32)
    index.ann = graphs
    return True


def _remove_if_same(folder: Path, dfd: int | None) -> None:
    """Remove a bad snapshot: the whole of ``remove`` unless the folder was replaced since it was opened (another
    process's new snapshot, then kept)."""
    try:
        if dfd is not None and os.stat(folder).st_ino != os.fstat(dfd).st_ino:
            return
    except OSError:
        pass
    _discard(folder)


__all__ = [
    "FORMAT",
    "STORE_ID",
    "SUFFIX",
    "generation",
    "load",
    "location",
    "owned",
    "remove",
    "save",
    "store_id",
    "tidy",
]
