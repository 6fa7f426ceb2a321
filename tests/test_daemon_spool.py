"""The daemon's spool drain (integrations/daemon.py ``_drain_spool``) trusts nothing the spool holds: whatever
entries it finds (jobs, FIFOs, links, folders, files too large or another user's, temporary files old and new) and
whether the spool itself is a link, it returns promptly, runs exactly the regular job files of this user, removes
what is not one, removes only the left-over temporary files, and never touches a file outside the spool."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from lantern.integrations import daemon

KINDS = ("job", "fifo", "link", "folder", "too_large", "other_user", "stale_tmp", "fresh_tmp")
LIMIT = 4096  # MAX_REQUEST_BYTES for the test: a job over it is refused without writing 16 MiB


class _Recording(daemon.Daemon):
    """A daemon whose hook runs are recorded, not run: what the drain hands on is the contract tested here."""

    def __init__(self) -> None:
        super().__init__()
        self.ran: list[dict] = []

    def run_hook(self, job):
        self.ran.append(job)


@pytest.fixture
def runtime(monkeypatch):
    run = tempfile.mkdtemp(prefix="lw", dir="/tmp")
    monkeypatch.setenv("XDG_RUNTIME_DIR", run)
    monkeypatch.setattr(daemon, "MAX_REQUEST_BYTES", LIMIT)
    yield Path(run)
    shutil.rmtree(run, ignore_errors=True)


def _job(n: int) -> bytes:
    return json.dumps({"host": "claude-code", "input": json.dumps({"n": n}), "db": None}).encode()


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(st.sampled_from(KINDS), max_size=8), spool_is_link=st.booleans())
def test_the_drain_runs_only_this_users_regular_jobs_and_touches_nothing_outside_the_spool(
    runtime, kinds, spool_is_link
):
    folder = Path(daemon.spool_dir())
    shutil.rmtree(folder.parent, ignore_errors=True)
    daemon.secure_dir(str(folder.parent), create=True)
    outside = Path(tempfile.mkdtemp(prefix="lw-outside", dir="/tmp"))
    try:
        victim = outside / "victim.job"  # a file a link in (or as) the spool points at
        victim.write_bytes(_job(-1))
        if spool_is_link:
            target = outside / "elsewhere"
            target.mkdir(mode=0o700)
            (target / "zz-outside.job").write_bytes(_job(-2))
            folder.symlink_to(target)
            spool = target
        else:
            folder.mkdir(mode=0o700)
            spool = folder
        old = time.time() - 2 * daemon.SPOOL_TMP_MAX_AGE_S
        expected, kept = [], set()
        for i, kind in enumerate(kinds):
            path = spool / (f".{i:02d}-1.tmp" if kind.endswith("tmp") else f"{i:02d}-1.job")
            if kind == "job":
                path.write_bytes(_job(i))
                expected.append(i)
            elif kind == "fifo":
                os.mkfifo(path, 0o600)
            elif kind == "link":
                path.symlink_to(victim)
            elif kind == "folder":
                path.mkdir()
            elif kind == "too_large":
                path.write_bytes(b" " * (LIMIT + 1))
            elif kind == "other_user":
                path.write_bytes(_job(i))
                os.chown(path, os.getuid() + 1, -1)  # the tests run as root (unprivileged: skipped below)
            elif kind == "stale_tmp":
                path.write_bytes(b"{")
                os.utime(path, (old, old))
            else:
                path.write_bytes(b"{")
                kept.add(path.name)
        served = _Recording()
        done = threading.Thread(target=served._drain_spool, daemon=True)
        done.start()
        done.join(10)
        hung = done.is_alive()
        for fifo in (p for p in spool.iterdir() if p.is_fifo()):  # a blocked open() is released
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)) if hung else None
        assert not hung, "the drain blocked"
        assert victim.exists() and json.loads(victim.read_bytes())  # never touched through a link
        if spool_is_link:
            assert served.ran == [] and (spool / "zz-outside.job").exists()  # a spool that is a link is not read
            return
        assert [json.loads(j["input"])["n"] for j in served.ran] == expected
        assert {p.name for p in spool.iterdir()} == kept  # every job removed, every left-over, no fresh .tmp
    finally:
        shutil.rmtree(outside, ignore_errors=True)


@pytest.fixture(autouse=True)
def _root_only():
    if os.geteuid() != 0:
        pytest.skip("another user's file can be made only as root")


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ticks=st.integers(2, 6), stuck=st.integers(1, 3), jobs=st.lists(st.integers(0, 2), min_size=6, max_size=6))
def test_an_entry_the_drain_cannot_remove_is_logged_once_and_counted_whatever_the_ticks(
    runtime, capsys, ticks, stuck, jobs
):
    """``*.job`` folders holding files (never walked, never removed) met on every idle tick, with jobs coming in
    between: each folder is logged the first time only, counted in ``spool_stuck`` (and at exit), and left as it
    was; every job runs once (before: one log line per folder per tick, every 2 s)."""
    folder = Path(daemon.spool_dir())
    shutil.rmtree(folder.parent, ignore_errors=True)
    daemon.secure_dir(str(folder.parent), create=True)
    folder.mkdir(mode=0o700)
    for k in range(stuck):
        (folder / f"{k:02d}-stuck.job").mkdir()
        (folder / f"{k:02d}-stuck.job" / "inside").write_text("x")
    served = _Recording()
    capsys.readouterr()
    n = 0
    for tick in range(ticks):
        for _ in range(jobs[tick]):
            (folder / f"{50 + n:02d}-1.job").write_bytes(_job(n))
            n += 1
        served._drain_spool()
    log = capsys.readouterr().err
    assert [json.loads(j["input"])["n"] for j in served.ran] == list(range(n))
    for k in range(stuck):
        assert log.count(f"{k:02d}-stuck.job") == 1, log
        assert (folder / f"{k:02d}-stuck.job" / "inside").read_text() == "x"
    assert len(served.spool_stuck) == stuck
    served.close()
    assert f"{stuck} spool entr" in capsys.readouterr().err
