"""HNSW graph builds never block a short-lived process (issue 38, item 8): from 50,000 entries every command waited
~31 s (it started the build, cancelled it at exit, waited for the 20,000-row chunk, never saved). Now a short-lived
handle never starts a build (exact search, or the snapshot's graphs); a long-lived one (serve, mcp: the service)
builds in the background in small steps and saves the graphs as soon as they are built; a cancel waits for one
step at most. The real store, the real embedder, usearch; the store's rows are real turns plus noisy copies of
their vectors (benchmarks/_common.fill_store's scheme) so that a build has work to do."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from lantern import Lantern
from lantern.archive.chunk import chunk
from lantern.archive.parse import parse
from lantern.config import Config
from lantern.model import content_hash
from lantern.store import index as index_module
from lantern.store import snapshot
from lantern.store.ann import AnnParams, BlockGraphs

FIXTURE = Path(__file__).resolve().parents[1] / "src" / "lantern" / "data" / "demo" / "aider-chat-excerpt.md"
CONFIG = Config(ann_min_rows=1_500)  # graphs from 1,500 rows (the shipped threshold is 50,000)


def _fill(lantern: Lantern, copies: int) -> None:
    parsed = parse(FIXTURE.read_text(), "aider")
    rows = [lantern.writer.prepare(t, "aider", lantern.scope) for t in chunk(parsed.messages, None)]
    base = lantern.embedder.embed([r.summary for r in rows])
    rng = np.random.default_rng(0)
    news, vecs = [], []
    for k in range(copies):
        for row, vec in zip(rows, base):
            session, text = f"{row.session}~{k}", f"{row.text}\n[copy {k}]"
            news.append(replace(row, session=session, text=text, content_hash=content_hash(session, text)))
            noisy = vec + (rng.normal(0.0, 0.02, vec.shape) * (vec != 0)).astype(np.float32)
            vecs.append(noisy / np.linalg.norm(noisy))
    lantern.store.add(news, np.asarray(vecs, np.float32))


def _build(path: Path) -> None:
    with Lantern(path, embedder="minilm", config=CONFIG) as lt:
        per_copy = len(chunk(parse(FIXTURE.read_text(), "aider").messages, None))
        _fill(lt, -(-2_000 // per_copy))
        lt.index.close = lambda: None  # no snapshot from the writer: the next handle starts cold


@pytest.fixture
def db(built_db, tmp_path) -> Path:
    """A copy of the ~2,000-row store (built once per test process: conftest.built_db), without graphs or snapshot."""
    return built_db("graph-builds", _build, tmp_path / "g.db")


def _builds() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "lantern-ann-build"]


def test_a_short_lived_handle_never_starts_a_build(db):
    start = time.monotonic()
    with Lantern(db, embedder="minilm", config=CONFIG) as lt:
        lt.recover("how do I run the tests?")
        assert len(lt.index.ids) >= 1_500
        assert lt.index.ann is None and not _builds()  # exact search: nothing to wait for at exit
    assert time.monotonic() - start < 30  # the embedder's load and one exact recover, no build


def test_a_long_lived_handle_builds_in_the_background_and_saves_once_built(db, monkeypatch):
    monkeypatch.setattr(snapshot, "MIN_ROWS", 1_000)  # snapshots from 1,000 rows (shipped: 10,000)
    monkeypatch.setattr(index_module, "ANN_BUILD_AHEAD", 100)  # built in the worker thread, as at 50,000 rows
    with Lantern(db, embedder="minilm", config=CONFIG) as lt:
        lt.build_graphs(background=True)  # what the service of serve and mcp does
        lt.recover("how do I run the tests?")
        assert lt.index.ann is not None
        deadline = time.monotonic() + 300
        while lt.index.ann.building and not lt.index.ann.built and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not lt.index.ann.building or lt.index.ann.built
        lt.recover("which port does the billing database use?")  # takes the finished build, and saves it
        assert lt.index.ann is not None and not lt.index.ann.building
        assert lt.index.ann.saved and snapshot.location(lt.store) is not None
        assert list(snapshot.location(lt.store).glob("graph-*.usearch"))
        lt.index.close = lambda: None  # the graphs must be on disk already, not written at close
    with Lantern(db, embedder="minilm", config=CONFIG) as lt:  # the next command: the saved graphs, no build
        lt.recover("how do I run the tests?")
        ann = lt.index.ann
        assert ann is not None and not _builds()
        deadline = time.monotonic() + 60
        while ann.building and not ann.built and time.monotonic() < deadline:  # the files' checksum check
            time.sleep(0.05)
        lt.recover("how do I run the tests?")
        assert lt.index.ann is not None and lt.index.ann.viewed and lt.index.ann.covered == len(lt.index.ids)


def test_a_cancelled_build_stops_within_one_step():
    """What a process exiting during a build waits for: one step of ``BUILD_CHUNK`` rows, not the rest of a
    20,000-row chunk."""
    n = 6_000
    rng = np.random.default_rng(1)
    m = rng.normal(size=(n, 384)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    graphs = BlockGraphs([(0, 384)], AnnParams(min_rows=0))
    graphs.start_build(np.arange(n), m, np.arange(384), {(0, 384): np.ones(n, bool)}, 0, n)
    time.sleep(0.5)
    start = time.monotonic()
    graphs.cancel()
    assert time.monotonic() - start < 3.0 and graphs.covered < n


def test_the_daemon_builds_and_saves_the_graphs_of_a_store_only_hooks_write_to(db, monkeypatch):
    """Hooks-only users (issue 38): no read ever starts a build in a short-lived hook, so the daemon builds the
    graphs when no request comes (``Daemon.step_graphs``, what its serve loop runs after ``GRAPH_STEP_S`` quiet
    seconds and while a build runs): its handle of the store, opened by an archive hook, gets them built in the
    worker thread and saved with the snapshot; the next short-lived process loads them without building."""
    from lantern.integrations.daemon import Daemon

    monkeypatch.setattr(snapshot, "MIN_ROWS", 1_000)
    monkeypatch.setattr(index_module, "ANN_BUILD_AHEAD", 100)
    d = Daemon(config=CONFIG)
    try:
        handle = d.lantern(str(db), None)  # what an archive hook's request opens
        handle.archive([{"role": "user", "content": "Bump the kestrel port to 7610."}], session="hooks")
        assert handle.index.ann is None  # archiving reads nothing: no build yet
        deadline = time.monotonic() + 300
        building = d.step_graphs()
        assert building or handle.index.ann is not None
        while d.step_graphs() and time.monotonic() < deadline:  # the serve loop's poll
            time.sleep(0.2)
        assert handle.index.ann is not None and handle.index.ann.saved
        assert list(snapshot.location(handle.store).glob("graph-*.usearch"))
        assert d.step_graphs() is False  # nothing left to do
    finally:
        d.close()
    with Lantern(db, embedder="minilm", config=CONFIG) as lt:  # a later hook's process: the saved graphs
        lt.recover("how do I run the tests?")
        assert lt.index.ann is not None and lt.index.ann.viewed and not _builds()


def test_a_request_is_answered_while_the_daemon_steps_a_large_stores_graphs(tmp_path, monkeypatch):
    """The daemon's graph step runs in a worker thread (``Daemon.step_graphs_aside``), off the request path: its
    serve loop ran it on the main thread, so a request arriving during a step (a large store's first full index
    load, ~1 s at 20,000 rows here; the snapshot's write) waited for it. Measured with the real serve loop, the
    real store and the real model: requests on another database sent every 250 ms during the build, each one's
    wait from send to reply against the steps' own durations."""
    from lantern.integrations import daemon as daemon_module

    monkeypatch.setenv(daemon_module.RUNTIME_ENV, str(tmp_path))
    monkeypatch.setenv(daemon_module.SWITCH_ENV, "on")  # the tests run hooks in-process (conftest.py)
    monkeypatch.setattr(snapshot, "MIN_ROWS", 1_000)
    monkeypatch.setattr(index_module, "ANN_BUILD_AHEAD", 100)
    monkeypatch.setattr(daemon_module, "GRAPH_STEP_S", 0.1)
    monkeypatch.setattr(daemon_module, "WARM_UP_DELAY_S", 0.1)
    big, other = tmp_path / "big.db", tmp_path / "other.db"
    with Lantern(big, embedder="minilm", config=CONFIG) as lt:
        per_copy = len(chunk(parse(FIXTURE.read_text(), "aider").messages, None))
        _fill(lt, -(-20_000 // per_copy))
        lt.index.close = lambda: None  # the daemon starts cold: its first step loads the whole index
    with Lantern(other, embedder="minilm"):
        pass
    steps: list[tuple[float, float]] = []
    real_step = daemon_module.Daemon.step_graphs

    def timed(self):
        start = time.monotonic()
        try:
            return real_step(self)
        finally:
            steps.append((start, time.monotonic()))

    monkeypatch.setattr(daemon_module.Daemon, "step_graphs", timed)
    real_daemon = daemon_module.Daemon
    monkeypatch.setattr(daemon_module, "Daemon", lambda: real_daemon(config=CONFIG))
    waits: list[tuple[float, float]] = []
    done = threading.Event()

    def client():
        deadline = time.monotonic() + 90
        first = True
        while time.monotonic() < deadline and not done.is_set():
            sent = time.monotonic()
            # the first request is an archive hook's into the large store (it opens the handle whose graphs the
            # daemon then builds); the next ones go to the other, warm database
            db = big if first else other
            try:
                daemon_module.call(
                    "archive",
                    {"db": str(db), "messages": [{"role": "user", "content": f"ping {sent}"}], "kwargs": {}},
                    timeout=60,
                )
                if not first:
                    waits.append((sent, time.monotonic() - sent))
                first = False
            except daemon_module.Unavailable:
                pass
            if any(e - s >= 0.3 and time.monotonic() > e + 0.5 for s, e in list(steps)):
                return  # past the long step: the daemon may go idle, finish the build and exit
            time.sleep(0.25)  # quiet moments longer than GRAPH_STEP_S: the steps run between requests

    thread = threading.Thread(target=client)
    thread.start()
    try:
        assert daemon_module.serve(idle_s=3.0, preload=str(other)) == 0
    finally:
        done.set()
        thread.join()
    long_steps = [(s, e) for s, e in steps if e - s >= 0.3]
    assert long_steps, steps  # the full load of 20,000 rows: the step a request used to wait for
    during = [w for sent, w in waits if any(s <= sent < e - 0.1 for s, e in long_steps)]
    assert during, (long_steps, waits[:5])
    assert max(during) < 0.2, (max(during), [round(e - s, 2) for s, e in long_steps])
