"""The evaluation's work, cut into jobs that run in worker processes (or one after another in this process).

A job is one history and every phase to run on it, in the order of the plain path: the main table (every system),
each point of the robustness curves (the curve systems at another budget or compaction ratio) and each other
compaction method (the compaction systems). Jobs share nothing but the read-only cached stores (``run.build``
makes them first), so any split gives the per-fact rows of running everything in one process: a job opens its
history's store once, computes the lost facts of each phase's compaction and runs the phase's systems over them
in dataset order (the reinforce systems carry their state from question to question, as in one process).
``run.evaluate`` concatenates the rows in dataset order.

Why per history (ours): each process memoizes query vectors (``MemoEmbedder``), and a history's questions are
asked in every phase; finer (history, phase) jobs spread over two processes would embed each question about twice,
and a USE query vector is expensive. BLAS runs at one thread in the eval (``threadpoolctl``): on a loaded 2-core
machine OpenBLAS's two threads make MMR's (candidates x candidates) similarity product slower, not faster. The
figures: BENCHMARKS.md, Engineering notes.
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queue_mod
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lantern.eval.cases import Case, cases_of, open_history, run_cases
from lantern.eval.datasets import History
from lantern.eval.outcome import System
from lantern.eval.systems import memo_embedder

Progress = Callable[[str, int, int], None]  # (task label, total to add, steps done to add)
NO_ANSWER = "no-answer"  # the phase and category of the questions asked of another history's store


@dataclass
class Phase:
    """One table or curve point: ``phase`` "main", "budget", "ratio" or "method"; ``point`` the budget, ratio or
    method (None for main); ``keep`` turns kept, or None to keep ``round(turns * (1 - ratio))``."""

    phase: str
    point: Any
    systems: list[System]
    method: str
    keep: int | None
    ratio: float | None
    budget: int
    label: str = ""
    second: bool = False  # give the pools the second embedder's store (the main table's dual system)


@dataclass
class Job:
    """One history and every phase to run on it, in order, on one handle of its cached store(s)."""

    history: History
    phases: list[Phase]
    folder: str
    embedder: str | None
    second_folder: str | None = None
    second_embedder: str | None = None
    summarizer: Any = None
    foreign: list[tuple[str, str]] = field(default_factory=list)  # (fact id, question) of another history: the
    # "no-answer" phase asks them of this history's store, where their answer was never said


@dataclass
class JobResult:
    phase: str
    point: Any
    history: str
    rows: dict[str, list[dict]]
    cases: list = field(default_factory=list)  # run.Case, in dataset order
    counts: dict[str, int] = field(default_factory=dict)


_REPORT: Any = None  # worker processes: the queue progress events go to


@contextmanager
def one_blas_thread():
    """BLAS (numpy's OpenBLAS) at one thread inside the block, when ``threadpoolctl`` is installed."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # only slower
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _init_worker(report) -> None:
    global _REPORT
    _REPORT = report
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the parent alone handles it
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")  # for this worker's lifetime
    except ImportError:
        pass


def _queue_progress(label: str, total: int, done: int) -> None:
    _REPORT.put((label, total, done))


# ---------------------------------------------------------------- one job
def run_job(job: Job, progress: Progress | None = None) -> list[JobResult]:
    """Open the history's cached store(s) and run every phase: its lost facts under the phase's compaction, its
    systems over them. ``progress`` (default: the worker's queue, if any) gets (label, total added, steps done)."""
    progress = progress or (_queue_progress if _REPORT is not None else None)
    hid = job.history.id
    p = open_history(job.history, Path(job.folder), memo_embedder(job.embedder))
    second = {}
    out = []
    try:
        if job.second_folder:
            second = {hid: open_history(job.history, Path(job.second_folder), memo_embedder(job.second_embedder))}
        for ph in job.phases:
            keep = ph.keep if ph.keep is not None else max(0, round(len(p.turns) * (1 - ph.ratio)))
            cases, pools, counts = cases_of(
                {hid: p},
                [job.history],
                ph.method,
                lambda _, keep=keep: keep,
                job.summarizer,
                second if ph.second and second else None,
            )
            if ph.phase == NO_ANSWER:  # questions of another history: nothing in this store answers them
                cases = [Case(hid, f"{fid}@{hid}", NO_ANSWER, q, [], []) for fid, q in job.foreign]
            rows = run_cases(ph.systems, cases, pools, {hid: p}, ph.budget, progress, ph.label)
            out.append(JobResult(ph.phase, ph.point, hid, rows, cases, counts[hid]))
    finally:
        for q in [p, *second.values()]:
            q.lantern.close()
    return out


MAX_DEFAULT_WORKERS = 8  # ours: each worker holds its own embedding model(s) and stores (~0.3 GB)


def default_workers() -> int:
    """Worker processes by default: the CPUs this process may use, at most ``MAX_DEFAULT_WORKERS``."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_DEFAULT_WORKERS))


def run_jobs(jobs: Sequence[Job], workers: int, progress: Progress | None = None) -> list[JobResult]:
    """Every job's phase results, in ``jobs`` order. ``workers`` <= 1: one after another in this process (BLAS at one
    thread); else a pool of that many spawned processes (at most one per job), fed the jobs in order, progress
    relayed through a queue. Ctrl-C (KeyboardInterrupt in this process; the workers ignore SIGINT) terminates the
    workers at once, running jobs included, and is raised again: nothing the jobs computed is kept (they only read
    the cached stores)."""
    if workers <= 1 or len(jobs) <= 1:
        with one_blas_thread():
            return [r for j in jobs for r in run_job(j, progress)]
    ctx = multiprocessing.get_context("spawn")  # no fork of a process holding onnxruntime / OpenBLAS threads
    events = ctx.Queue()
    results: dict[int, list[JobResult]] = {}
    with _ignoring_ctrl_c():  # the workers start with SIGINT ignored (inherited through exec): a Ctrl-C while one
        # is still importing would print its KeyboardInterrupt traceback; the parent alone handles Ctrl-C
        pool = ProcessPoolExecutor(
            min(workers, len(jobs)), mp_context=ctx, initializer=_init_worker, initargs=(events,)
        )
        pending = {pool.submit(run_job, j): i for i, j in enumerate(jobs)}
    with pool:
        try:
            while pending:
                done, _ = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                _drain(events, progress)
                for f in done:
                    results[pending.pop(f)] = f.result()  # a job's exception is raised here
        except BaseException:
            for f in pending:
                f.cancel()
            _terminate(pool)
            raise
        _drain(events, progress)
    return [r for i in range(len(jobs)) for r in results[i]]


@contextmanager
def _ignoring_ctrl_c():
    """SIGINT ignored in this process while the block runs (main thread only; elsewhere nothing changes). The
    processes it starts keep SIGINT ignored: an ignored signal stays ignored across exec, and Python then installs
    no KeyboardInterrupt handler of its own. A Ctrl-C inside the block (a few milliseconds) is lost."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _terminate(pool: ProcessPoolExecutor) -> None:
    """Stop ``pool``'s worker processes now (ProcessPoolExecutor's shutdown waits for running jobs; Python < 3.14
    has no public way to stop them, so its process table is read)."""
    for proc in list(getattr(pool, "_processes", {}).values()):
        if proc.is_alive():
            proc.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


def _drain(events, progress: Progress | None) -> None:
    while True:
        try:
            label, total, done = events.get_nowait()
        except queue_mod.Empty:
            return
        if progress:
            progress(label, total, done)


__all__ = [
    "NO_ANSWER",
    "Job",
    "JobResult",
    "Phase",
    "default_workers",
    "memo_embedder",
    "one_blas_thread",
    "run_job",
    "run_jobs",
]
