"""A snapshot beside a SQLite database (store/snapshot.py) that is not exactly the snapshot of this database's current
state is never used: damaged bytes in any file, a ``meta.json`` of another shape, the snapshot of another store or
of a copy moved in place, a file where the folder should be. It is discarded with one warning and the index reloads
from the database; a forget through any path to the database (a symlink) removes it; a full disk while writing it
leaves nothing behind and the command succeeds. Real SQLite stores, the fake embedder, a real tmpfs for the full
disk."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import uuid
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from budget import examples
from lantern import Lantern
from lantern.config import Config
from lantern.embed import FakeEmbedder, embed_query
from lantern.recover import signals
from lantern.store import snapshot

EXCERPT = Path(__file__).resolve().parents[1] / "src" / "lantern" / "data" / "demo" / "aider-chat-excerpt.md"
FORCED = Config(ann_min_rows=0)  # graphs even for a small store
EMBEDDER, DIM = "fake", FakeEmbedder.dim  # what the files hold is the test, not what the vectors mean
SECRET = "zqvault-7f3e9.yaml"
SLOW = settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def make_store(path: Path, *, user: str | None = None, extra: str = "", snapshot_too: bool = True) -> Path:
    with Lantern(path, embedder=EMBEDDER, config=FORCED, user=user) as lt:
        lt.ingest(EXCERPT, session="aider", format="aider")
        lt.archive([{"role": "user", "content": f"the vault config moved to conf/{SECRET} {extra}"}], session="v")
        lt.index.refresh()
        lt.index.wait_ann()
        if snapshot_too:
            lt.index.save()
        lt.index.close = lambda: None
    return path


def folder_of(db: Path) -> Path:
    return Path(os.path.realpath(db) + snapshot.SUFFIX)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".index." in p.name)


def index_state(index) -> dict:
    """What a MemoryIndex holds, by entry id (comparable across two indexes of one database)."""
    names = {v: k for k, v in index.labels.items()}
    terms = index.postings.csr()[0]
    return dict(
        ids=index.ids.tolist(),
        columns=index.columns.tolist(),
        matrix=np.asarray(index.matrix).tobytes(),
        numbers=[getattr(index, n).tolist() for n in ("time", "archived", "prior", "tool_count", "hint_count")],
        sessions=[index.session_names[c] for c in index.session],
        users=[names[c] for c in index.user],
        postings={t: sorted(index.ids[list(index.postings.get(t))].tolist()) for t in terms},
        used=index.used_blocks,
    )


def from_database(db: Path) -> dict:
    """The index read from every row (no snapshot in the way)."""
    folder = folder_of(db)
    aside = db.parent / f"aside-{uuid.uuid4().hex[:6]}"
    if folder.exists():
        folder.rename(aside)
    try:
        with Lantern(db, embedder=EMBEDDER, config=FORCED) as lt:
            lt.index.refresh()
            lt.index.close = lambda: None
            return index_state(lt.index)
    finally:
        if aside.exists():
            aside.rename(folder)


def open_and_search(db: Path, caplog) -> tuple[dict, bool, list[str]]:
    """A new handle's index (refresh plus one semantic search through the graphs): its state, whether it came from
    the snapshot, and the warnings logged."""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lantern"), Lantern(db, embedder=EMBEDDER, config=FORCED) as lt:
        lt.index.refresh()
        used = lt.index._unsaved == 0
        lt.index.wait_ann()  # the graph files' check (a worker thread) has ended
        v = embed_query(lt.embedder, ["how do I run the tests?"])[0]
        signals.semantic(lt.index, v, None, 5)
        lt.index.close = lambda: None
        state = index_state(lt.index)
    return state, used, [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A store with its snapshot (graphs included), the snapshot kept aside, and the index read from every row."""
    base = tmp_path_factory.mktemp("pristine")
    db = make_store(base / "s.db")
    shutil.copytree(folder_of(db), base / "kept")
    return db, base / "kept", from_database(db)


def restore(db: Path, kept: Path) -> Path:
    folder = folder_of(db)
    snapshot.remove(db)
    shutil.copytree(kept, folder)
    return folder


FILES = [
    "meta.json",
    "matrix.npy",
    f"graph-0-{DIM}.usearch",
    "ids.npy",
    "user.npy",
    "session.npy",
    "time.npy",
    "columns.npy",
    f"with-0-{DIM}.npy",
    "post_rows.npy",
    "post_offsets.npy",
    "post_terms.json",
]


@SLOW
@given(
    name=st.sampled_from(FILES),
    kind=st.sampled_from(["random", "zeros", "nan", "truncate"]),
    where=st.floats(0.0, 1.0),
    length=st.integers(1, 4096),
    seed=st.integers(0, 2**32 - 1),
)
def test_damaged_bytes_in_any_file_are_never_used(pristine, caplog, name, kind, where, length, seed):
    db, kept, truth = pristine
    folder = restore(db, kept)
    path = folder / name
    before = path.read_bytes()
    at = int(where * len(before))
    if kind == "truncate":
        after = before[:at]
    else:
        fill = {
            "random": np.random.default_rng(seed).integers(0, 256, length, dtype=np.uint8).tobytes(),
            "zeros": bytes(length),
            "nan": (np.full(length // 4 + 1, np.nan, np.float32).tobytes())[:length],
        }[kind]
        after = (before[:at] + fill + before[at + length :])[: len(before)]  # same size: a size check misses it
    path.write_bytes(after)
    state, used, warnings = open_and_search(db, caplog)
    assert state == truth  # whatever was damaged, the index is the database's
    if after == before:
        assert used and not warnings
    else:
        # the rows' files are checked before the index takes them; the graph files before usearch opens them (in a
        # worker thread: the rows are kept, the graphs built anew from them)
        assert not used or name.startswith("graph-"), f"{name} damaged ({kind} at {at}) and used"
        assert len([w for w in warnings if "unreadable" in w]) == 1, warnings
        assert not folder.exists()  # discarded


def _meta_body(folder: Path) -> tuple[dict, bool]:
    """meta.json's object, and whether it is framed with a checksum line (as the writer frames it)."""
    raw = (folder / "meta.json").read_bytes()
    try:
        return json.loads(raw), False
    except ValueError:
        return json.loads(raw.rstrip(b"\n").rpartition(b"\n")[0]), True


def _write_meta(folder: Path, body, framed: bool) -> None:
    """Write ``body`` as the writer would (its checksum line included): only the shape is wrong."""
    text = json.dumps(body).encode()
    (folder / "meta.json").write_bytes(text + b"\n" + f"crc32 {zlib.crc32(text):08x}\n".encode() if framed else text)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


def _kind(value) -> str:
    return "number" if type(value) in (int, float) else type(value).__name__


@SLOW
@given(data=st.data())
def test_a_meta_json_of_another_shape_is_discarded_with_one_warning(pristine, caplog, data):
    db, kept, truth = pristine
    folder = restore(db, kept)
    meta, framed = _meta_body(folder)
    how = data.draw(st.sampled_from(["whole", "drop", "retype"]))
    if how == "whole":  # not an object of these keys at all: '[1]', 5, "x", {}
        body = data.draw(JSON)
    else:
        key = data.draw(st.sampled_from(sorted(meta)))
        body = dict(meta)
        if how == "drop":
            del body[key]
        else:  # a value of another JSON type
            body[key] = data.draw(JSON.filter(lambda v, old=meta[key]: _kind(v) != _kind(old) and v is not None))
    _write_meta(folder, body, framed)
    state, used, warnings = open_and_search(db, caplog)
    assert state == truth and not used
    assert len([w for w in warnings if "unreadable" in w]) == 1, warnings
    assert not folder.exists()


def test_the_snapshot_of_another_store_moved_in_place_is_never_used(tmp_path, caplog):
    """F1: bob's store's snapshot beside another store of as many rows (same generation, embedder, largest id)."""
    mine = make_store(tmp_path / "c.db", snapshot_too=False)
    bobs = make_store(tmp_path / "b.db", user="bob", extra="and bob's deploy key rotated")
    truth = from_database(mine)
    shutil.move(folder_of(bobs), folder_of(mine))
    state, used, warnings = open_and_search(mine, caplog)
    assert state == truth and not used and "bob" not in state["users"]
    assert len([w for w in warnings if "another database" in w]) == 1
    assert not folder_of(mine).exists()


def test_the_snapshot_of_a_copied_file_is_not_used_by_the_copy(tmp_path, caplog):
    """A file copy keeps the store id; the two diverge (a different row deleted in each, one generation each): the
    original's snapshot put beside the copy holds a row the copy deleted and lacks one it kept."""
    a = make_store(tmp_path / "a.db", snapshot_too=False)
    b = tmp_path / "b.db"
    shutil.copyfile(a, b)
    for db, pos in ((a, 3), (b, 4)):
        with Lantern(db, embedder=EMBEDDER, config=FORCED) as lt:
            lt.index.refresh()
            lt.forget(entry=int(lt.index.ids[pos]))
            lt.index.refresh()
            lt.index.save()
            lt.index.close = lambda: None
    truth = from_database(b)
    snapshot.remove(b)
    shutil.copytree(folder_of(a), folder_of(b))
    state, used, warnings = open_and_search(b, caplog)
    assert state == truth and not used
    assert len([w for w in warnings if "another database" in w]) == 1


def files_holding(directory: Path, needle: bytes) -> list[str]:
    return sorted(
        str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file() and needle in p.read_bytes()
    )


@pytest.mark.parametrize(("written", "forgotten"), [("link", "real"), ("real", "link"), ("link", "link")])
def test_forget_through_any_path_removes_the_snapshot(tmp_path, written, forgotten):
    """F2: one database, two paths (a symlink): a forget through either leaves no file holding the forgotten hint,
    the snapshot an older version wrote beside the link included."""
    real = make_store(tmp_path / "data" / "real.db", snapshot_too=False)
    link = tmp_path / "link.db"
    link.symlink_to(real)
    paths = {"real": real, "link": link}
    with Lantern(paths[written], embedder=EMBEDDER, config=FORCED) as lt:
        lt.index.refresh()
        lt.index.save()
        lt.index.close = lambda: None
    written_to = [p for p in (Path(str(real) + ".index"), Path(str(link) + ".index")) if p.exists()]
    assert written_to and files_holding(tmp_path, SECRET.encode())
    legacy = Path(str(link) + snapshot.SUFFIX)  # where an older version wrote it when opened through the link
    if forgotten == "link" and not legacy.exists():  # (found only through the link: nothing names the links)
        shutil.copytree(written_to[0], legacy)
    with Lantern(paths[forgotten], embedder=EMBEDDER, config=FORCED) as lt:
        lt.index.refresh()
        entry = int(lt.index.ids[next(iter(lt.index.postings.get(SECRET)))])
        lt.forget(entry=entry)
        lt.index.close = lambda: None
    assert not any(".index" in p for p in files_holding(tmp_path, SECRET.encode()))
    assert not legacy.exists() and not folder_of(real).exists()


def test_a_file_where_the_folder_should_be_leaves_nothing_behind(pristine, tmp_path, monkeypatch, caplog):
    """F12: DB.index a regular file: discarded with one warning, and the next save leaves no DB.index.old-*."""
    db = tmp_path / "s.db"
    shutil.copyfile(pristine[0], db)
    Path(str(db) + snapshot.SUFFIX).write_bytes(b"not a folder")
    monkeypatch.setattr(snapshot, "MIN_ROWS", 10)
    state, used, warnings = open_and_search(db, caplog)
    assert not used and len([w for w in warnings if "unreadable" in w]) == 1
    # its graphs were built (wait_ann) and saved at once, in place of the file
    assert folder_of(db).is_dir() and leftovers(tmp_path) == []
    state, used, _ = open_and_search(db, caplog)
    assert used and state == pristine[2]


@pytest.fixture(scope="module")
def small_disk(tmp_path_factory):
    """A real 24 MB tmpfs (root only): skipped where it cannot be mounted."""
    where = tmp_path_factory.mktemp("tmpfs")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(where)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"no tmpfs: {done.stderr.decode().strip()}")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def _free(path: Path) -> int:
    s = os.statvfs(path)
    return s.f_bavail * s.f_frsize


# the files in the order the writer writes them (store/snapshot.py save)
WRITE_ORDER = [
    *(f"{n}.npy" for n in snapshot._ARRAYS),
    f"with-0-{DIM}.npy",
    "columns.npy",
    "matrix.npy",
    "post_offsets.npy",
    "post_rows.npy",
    "post_terms.json",
    f"graph-0-{DIM}.usearch",
    "meta.json",
]


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(filling=st.sampled_from(WRITE_ORDER), share=st.floats(0.0, 1.0))
@example(filling="matrix.npy", share=0.05)  # within the matrix's rows
@example(filling=f"graph-0-{DIM}.usearch", share=0.5)
def test_a_full_disk_while_saving_leaves_nothing_and_the_command_succeeds(
    pristine, small_disk, monkeypatch, caplog, filling, share
):
    """F5: the disk fills while the file ``filling`` is written (the files before it fit, ``share`` of it too):
    no crash (a memory-mapped write hitting a full tmpfs is SIGBUS; usearch's failed save a RuntimeError), at most
    one warning, no DB.index.tmp-* or .old-*, and the store still takes writes once space is back."""
    page = 4096
    sizes = {p.name: p.stat().st_size for p in pristine[1].iterdir()}
    before = sum(-(-sizes[n] // page) * page for n in WRITE_ORDER[: WRITE_ORDER.index(filling)])
    free = before + int(share * sizes[filling])
    for p in small_disk.iterdir():
        p.unlink() if p.is_file() else shutil.rmtree(p)
    db = small_disk / "s.db"
    shutil.copyfile(pristine[0], db)
    monkeypatch.setattr(snapshot, "MIN_ROWS", 10)
    filler = small_disk / "filler"
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lantern"), Lantern(db, embedder=EMBEDDER, config=FORCED) as lt:
        lt.index.refresh()
        assert lt.index.save_pays()
        with open(filler, "wb") as f:
            left = _free(small_disk) - free
            while left > 0:
                left -= f.write(bytes(min(left, 1 << 20)))
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert leftovers(small_disk) == []
    if not folder_of(db).exists():
        assert len([w for w in warnings if "not written" in w]) == 1, warnings
    filler.unlink()
    with Lantern(db, embedder=EMBEDDER, config=FORCED) as lt:
        lt.archive([{"role": "user", "content": "after the disk was full"}], session="after")
        lt.index.refresh()
        assert lt.index.ids[-1] == max(lt.index.ids)
        lt.index.close = lambda: None
