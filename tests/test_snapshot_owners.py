"""Every index snapshot of a store is found by the store's identity, whatever name of the file wrote it: after a
rename (the old name's snapshot), through a hard link (the other name's), a save killed half way (its temporary
folder, named by a process that is gone). An open removes those no process will use again; a forget removes every
one it finds, and no file beside the store holds the forgotten text's terms. Another store's snapshot, and a copy's,
are left alone. Real SQLite stores and the fake embedder (store/snapshot.py ``owned``, ``tidy``, ``remove``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lantern import Lantern
from lantern.store import snapshot

SECRET = "zqvault-7f3e9.yaml"  # a hint only one turn names


def _store(path: Path) -> int:
    """A store at ``path`` with a snapshot beside it; returns the id of the turn that names ``SECRET``."""
    with Lantern(path, embedder="fake") as lt:
        for i in range(4):
            lt.archive([{"role": "user", "content": f"service {i} listens on port {7000 + i}"}], session="s")
        (secret,) = lt.archive([{"role": "user", "content": f"the vault config moved to conf/{SECRET}"}]).entry_ids
        _save(lt)
    return secret


def _save(lt: Lantern) -> None:
    lt.index.refresh()
    lt.index.save()


def _snapshots(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if snapshot.SUFFIX in p.name)


def _holding(folder: Path, needle: bytes) -> list[str]:
    return sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and snapshot.SUFFIX in str(p) and needle in p.read_bytes()
    )


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    return int(proc.stdout)


@pytest.mark.parametrize("how", ["rename", "hard link", "rename then hard link"])
def test_a_store_known_by_another_name_keeps_no_snapshot_behind(tmp_path, how):
    first = tmp_path / "mv1.db"
    secret = _store(first)
    other = tmp_path / "other.db"  # another store's snapshot, beside it: never touched
    _store(other)
    copy = tmp_path / "copy.db"  # a copy: the same store id, another file
    shutil.copyfile(first, copy)
    with Lantern(copy, embedder="fake") as lt:
        _save(lt)
    untouched = {p: _snapshots(tmp_path).count(p) for p in ("other.db.index", "copy.db.index")}
    second = tmp_path / "mv2.db"
    if how.startswith("rename"):
        first.rename(second)
        with Lantern(second, embedder="fake") as lt:  # an open: the old name's snapshot is no one's now
            assert "mv1.db.index" not in _snapshots(tmp_path)
            _save(lt)
        if how == "rename then hard link":
            os.link(second, first)
    else:
        os.link(first, second)
    with Lantern(second, embedder="fake") as lt:
        _save(lt)
    names = _snapshots(tmp_path)
    assert "mv2.db.index" in names
    assert ("mv1.db.index" in names) == (how == "hard link"), names  # a link's snapshot is valid until a forget
    assert len(_holding(tmp_path, SECRET.encode())) >= 2  # its terms are in the snapshots, and in copy's

    with Lantern(first if os.path.exists(first) else second, embedder="fake") as lt:
        assert lt.forget(entry=secret) == 1
    names = _snapshots(tmp_path)
    assert not [n for n in names if n.startswith(("mv1.db", "mv2.db"))], names
    assert {p: names.count(p) for p in untouched} == untouched
    assert all(p.startswith(("copy.db.index", "other.db.index")) for p in _holding(tmp_path, SECRET.encode()))


def test_the_folders_of_a_killed_save_are_removed_on_open_and_by_a_forget(tmp_path):
    db = tmp_path / "a.db"
    secret = _store(db)
    st = os.stat(db)
    dead, live = _dead_pid(), os.getpid()
    planted = {
        f"a.db.index.tmp-{dead}-{st.st_dev}-{st.st_ino}-0badf00d": dead,  # as save names them
        f"a.db.index.tmp-{dead}-deadbeef": dead,  # as earlier versions named them
        f"a.db.index.old-{dead}-cafe0123": dead,
        f"a.db.index.tmp-{live}-{st.st_dev}-{st.st_ino}-1badf00d": live,  # a save in progress: left to it
    }
    for name in planted:
        (tmp_path / name).mkdir()
        (tmp_path / name / "post_terms.json").write_text(f'["{SECRET}"]')
    elsewhere = tmp_path / "b.db.index.tmp-1-deadbeef"  # another store's: not this one's to remove
    elsewhere.mkdir()
    with Lantern(db, embedder="fake") as lt:
        left = _snapshots(tmp_path)
        assert [n for n in planted if n in left] == [n for n, pid in planted.items() if pid == live]
        assert lt.forget(entry=secret) == 1
    assert _snapshots(tmp_path) == [elsewhere.name]
    assert _holding(tmp_path, SECRET.encode()) == []


def test_a_stale_snapshot_of_an_earlier_name_is_never_used(tmp_path, caplog):
    """A snapshot renamed along with its file (the identity it records is the file's) is used; one written for
    another file that takes the name later is foreign: not loaded, removed with one warning."""
    a = tmp_path / "a.db"
    _store(a)
    (tmp_path / "a.db").rename(tmp_path / "b.db")
    (tmp_path / "a.db.index").rename(tmp_path / "b.db.index")
    with Lantern(tmp_path / "b.db", embedder="fake") as lt:
        lt.index.refresh()
        assert lt.index._unsaved == 0  # loaded from the snapshot, nothing read from the rows
    shutil.copyfile(tmp_path / "b.db", tmp_path / "c.db")  # another file, the same store id
    os.replace(tmp_path / "c.db", tmp_path / "b.db")
    with Lantern(tmp_path / "b.db", embedder="fake") as lt:
        lt.index.refresh()
        assert lt.index._unsaved == len(lt.index.ids)  # read from the rows
    assert "another database" in caplog.text
