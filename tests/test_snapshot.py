"""The in-process index saved beside the database (store/snapshot.py) on the real store with the fake embedder: a new
process's index opened from it equals one read from every row, rows added or grown since are applied, anything
else (a delete, a move, a re-encoding, a damaged file) falls back to the database, and a forgotten entry's hint
terms and vectors are in no file afterwards."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from lantern import Lantern
from lantern.config import Config
from lantern.embed import FakeEmbedder, embed_query
from lantern.recover import signals
from lantern.store import snapshot

EXCERPT = Path(__file__).resolve().parents[1] / "src" / "lantern" / "data" / "demo" / "aider-chat-excerpt.md"
FORCED = Config(ann_min_rows=0)
SECRET_HINT = "zqvault-7f3e9.yaml"  # a path only one turn names: one hint term, one posting


def files_holding(folder_glob: list[Path], needle: bytes) -> list[Path]:
    return [p for f in folder_glob for p in f.rglob("*") if p.is_file() and needle in p.read_bytes()]


def snapshots(db: Path) -> list[Path]:
    return [p for p in db.parent.iterdir() if p.name.startswith(db.name + snapshot.SUFFIX)]


def assert_same_index(a, b) -> None:
    """Two MemoryIndex of the same database hold the same rows, vectors, numbers, scopes, sessions and postings."""
    np.testing.assert_array_equal(a.ids, b.ids)
    np.testing.assert_array_equal(a.columns, b.columns)
    np.testing.assert_array_equal(a.matrix, b.matrix)
    for name in ("time", "archived", "prior", "tool_count", "file_count", "hint_count", "confidence", "access_count"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert [a.session_names[c] for c in a.session] == [b.session_names[c] for c in b.session]
    labels = lambda idx, codes: [{v: k for k, v in idx.labels.items()}[c] for c in codes]  # noqa: E731
    assert labels(a, a.user) == labels(b, b.user) and labels(a, a.project) == labels(b, b.project)
    terms = set(a.postings.csr()[0]) | set(b.postings.csr()[0])
    assert terms and all(sorted(a.postings.get(t)) == sorted(b.postings.get(t)) for t in terms)
    assert a.used_blocks == b.used_blocks


@pytest.fixture()
def db(tmp_path) -> Path:
    path = tmp_path / "s.db"
    with Lantern(path, embedder="fake", config=FORCED) as lt:
        lt.ingest(EXCERPT, session="aider", format="aider")
        lt.archive([{"role": "user", "content": f"the vault config moved to conf/{SECRET_HINT}"}], session="v")
        lt.index.refresh()
        lt.index.wait_ann()
        lt.index.save()
    return path


def fresh(path: Path, config: Config = FORCED) -> Lantern:
    return Lantern(path, embedder="fake", config=config)


def from_database(path: Path):
    """The index read from every row (the snapshot moved aside meanwhile)."""
    aside = path.parent / "aside"
    Path(str(path) + snapshot.SUFFIX).rename(aside)
    try:
        with fresh(path) as lt:
            lt.index.refresh()
            lt.index.wait_ann()
            lt.index.close = lambda: None  # never write its own
            return lt.index
    finally:
        aside.rename(str(path) + snapshot.SUFFIX)


def test_an_index_opened_from_the_snapshot_equals_one_read_from_every_row(db):
    with fresh(db) as lt:
        lt.index.refresh()
        lt.index.wait_ann()  # the graph files are checked in a worker thread before usearch opens them
        assert lt.index._unsaved == 0 and lt.index.ann.viewed  # opened from the files, graphs memory-mapped
        assert_same_index(lt.index, from_database(db))
        block = lt.recover("how do I run the tests?").text
        assert lt.index.ann.viewed  # searching a view needs no load
    with fresh(db) as other:
        other.index.refresh()
        assert other.recover("how do I run the tests?").text == block


def test_rows_added_and_grown_since_are_applied(db):
    with fresh(db) as writer:  # another process archives after the snapshot
        writer.archive([{"role": "user", "content": "the nightly build runs on ci-runner-7"}], session="live")
        writer.archive(
            [
                {"role": "user", "content": "the nightly build runs on ci-runner-7"},
                {"role": "assistant", "content": "noted; ci-runner-7 also hosts the GPU tests"},
            ],
            session="live",
        )
        writer.index.close = lambda: None  # leave the old snapshot in place
    with fresh(db) as lt:
        lt.index.refresh()
        assert 0 < lt.index._unsaved <= 2  # the snapshot's rows plus the one new row
        assert_same_index(lt.index, from_database(db))
        v = embed_query(lt.embedder, ["noted; ci-runner-7 also hosts the GPU tests"])[0]
        top = signals.semantic(lt.index, v, None, 1)[0]  # the grown row, read since the snapshot
        assert lt.store.entries([int(lt.index.ids[top[0]])])[int(lt.index.ids[top[0]])].session == "live"


@pytest.mark.parametrize("change", ["move", "delete"])
def test_a_move_or_delete_elsewhere_makes_the_snapshot_stale(db, change):
    before = snapshot.generation(fresh(db).store)
    with fresh(db) as lt:
        lt.index.refresh()
        some = int(lt.index.ids[3])
        if change == "move":
            lt.abandon({some: "abandoned-1"}, keep=True)
        else:
            lt.abandon({some: "abandoned-1"}, keep=False)
        lt.index.close = lambda: None
    with fresh(db) as lt:
        assert snapshot.generation(lt.store) > before
        lt.index.refresh()
        assert lt.index._unsaved == len(lt.index.ids)  # read from the database, not the stale snapshot
        moved = some in lt.index.ids.tolist()
        assert moved == (change == "move")
        if moved:
            pos = int(lt.index.positions([some])[0])
            assert lt.index.session_names[lt.index.session[pos]].endswith("/abandoned-1")


def test_forget_leaves_no_file_holding_the_forgotten_hint(db):
    needle = SECRET_HINT.encode()
    assert files_holding(snapshots(db), needle)  # the snapshot held the hint term
    with fresh(db) as lt:
        lt.index.refresh()
        entry = next(i for i in lt.index.postings.get(SECRET_HINT))
        lt.forget(entry=int(lt.index.ids[entry]))
        assert snapshots(db) == []  # removed with the delete's commit
        lt.index.refresh()
        lt.index.save()  # a new snapshot, written after the forget
    assert snapshots(db) and not files_holding(snapshots(db), needle)


def test_a_snapshot_saved_while_a_delete_commits_is_removed(db, monkeypatch):
    with fresh(db) as lt:
        lt.index.refresh()
        real = snapshot.generation
        monkeypatch.setattr(snapshot, "generation", lambda store: real(store) + 1)  # bumped under the writer
        assert snapshot.save(lt.index, lt.index._generation) is None
        assert snapshots(db) == []
        lt.index.close = lambda: None


@pytest.mark.parametrize("damage", ["truncate", "meta", "missing"])
def test_a_damaged_snapshot_is_ignored_and_the_index_read_from_the_database(db, damage, caplog):
    folder = Path(str(db) + snapshot.SUFFIX)
    if damage == "truncate":
        with open(folder / "matrix.npy", "r+b") as f:
            f.truncate(1000)
    elif damage == "meta":
        (folder / "meta.json").write_text("{not json", encoding="utf-8")
    else:
        (folder / "post_rows.npy").unlink()
    with caplog.at_level(logging.WARNING), fresh(db) as lt:
        lt.index.refresh()
        assert lt.index._unsaved == len(lt.index.ids)
        assert "how" in lt.recover("how do I run the tests?").text.lower()
        lt.index.close = lambda: None
    assert "unreadable" in caplog.text or damage == "meta"


def test_close_writes_only_when_it_pays(tmp_path, monkeypatch):
    path = tmp_path / "p.db"
    with Lantern(path, embedder="fake") as lt:  # a small store: never
        lt.ingest(EXCERPT, session="aider", format="aider")
        lt.recover("how do I run the tests?")
    assert snapshots(path) == []
    monkeypatch.setattr(snapshot, "MIN_ROWS", 10)
    with Lantern(path, embedder="fake") as lt:  # past MIN_ROWS after a full load: written on close
        lt.recover("how do I run the tests?")
        assert lt.index.save_pays()
    assert snapshots(path)
    with Lantern(path, embedder="fake") as lt:  # opened from it, one row added: not rewritten
        lt.archive([{"role": "user", "content": "one more turn"}], session="x")
        lt.recover("one more turn")
        assert not lt.index.save_pays()


def test_graphs_opened_from_a_snapshot_another_process_replaces_stay_those_of_this_index(db, monkeypatch):
    from lantern.store import index as index_module

    monkeypatch.setattr(index_module, "ANN_BUILD_AHEAD", 0)  # any new row: the viewed graphs are copied and grown
    with fresh(db) as mine, fresh(db) as other:
        mine.index.refresh()
        mine.index.wait_ann()
        assert mine.index.ann.viewed
        other.archive([{"role": "user", "content": "the staging cluster runs on k3s-node-4"}], session="o")
        other.index.refresh()
        other.index.save()  # the snapshot replaced under mine's views
        other.index.close = lambda: None
        mine.archive([{"role": "user", "content": "the canary deploy waits for the smoke tests"}], session="m")
        mine.index.refresh()
        mine.index.wait_ann()
        idx = mine.index
        assert not idx.ann.viewed and idx.ann.covered == len(idx.ids)
        graph = idx.ann.graphs[(0, FakeEmbedder.dim)]
        assert len(graph) == len(idx.ids) and all(int(i) in graph for i in idx.ids[-2:])
        v = embed_query(mine.embedder, ["canary deploy smoke tests"])[0]
        top = signals.semantic(idx, v, None, 1)[0]
        assert mine.store.entries([int(idx.ids[top[0]])])[int(idx.ids[top[0]])].session == "m"
        mine.index.close = lambda: None
