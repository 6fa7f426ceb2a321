"""Reinforcement in the evaluation (docs/architecture.md §4; reinforce.py): Lantern with ``recover``'s side effects on.

The other pipeline systems call ``explain`` (no side effects), so every question sees the store as archived. Here
each history's questions are asked in their dataset order through ``recover`` on a private copy of that history's
store (SQLite backup into a temporary file, made at its first question), so access counts, confidence c and — in
the ``+answers`` variant — success σ carry over from one question to the next, as they would for a user asking
them one after another.

- ``lantern+reinforce``: c (recovered +0.15, cut candidates −0.02), pruning and access counts; σ stays at 0.5
  (no assistant message is archived, so no pending recovery is judged).
- ``lantern+reinforce+answers``: the same, and the dataset's reference answer plays the next assistant message
  (``reinforce.resolve_pending``): σ of recovered entries moves by whether the answer reuses one of their lookup
  hints. This simulates an assistant that answers correctly; it is an upper bound for the σ path, not a
  realistic one.
"""

from __future__ import annotations

import tempfile
import time
import weakref
from pathlib import Path

from lantern import reinforce
from lantern.eval.outcome import Outcome, Pool, System, outcome_of

_COPIES: weakref.WeakKeyDictionary[object, dict[str, object]] = weakref.WeakKeyDictionary()


def copy_of(lantern, name: str):
    """The private copy of ``lantern``'s store for system ``name``, made once per (handle, system)."""
    from lantern.api import Lantern

    per = _COPIES.setdefault(lantern, {})
    if name not in per:
        tmp = tempfile.TemporaryDirectory(prefix="lantern-reinforce-")
        path = Path(tmp.name) / "copy.db"
        lantern.store.backup(path)
        copy = Lantern(path, lantern.embedder, config=lantern.config)
        copy._tmpdir = tmp  # removed with the copy
        per[name] = copy
    return per[name]


def run(system: System, lantern, query: str, pool: Pool, budget: int, reply: str | None = None) -> Outcome:
    """``recover`` (side effects on) on the history's copy, then, for ``+answers``, ``reply`` judged as the next
    assistant message. Only the recovery is timed."""
    copy = copy_of(lantern, system.name)
    copy.config = system.config
    start = time.perf_counter()
    rec = copy.recover(
        query, session=pool.session, budget=budget, exclude=pool.excluded, as_of=pool.as_of, min_score=pool.min_score
    )
    ms = (time.perf_counter() - start) * 1000
    if system.kind == "reinforce+answers" and reply:
        with copy.store.transaction() as db:
            judged = reinforce.resolve_pending(
                db, [(pool.session or "", reply, lantern.scope.user)], system.config.success_alpha
            )
        copy.index.set_reinforcement(judged)
    return outcome_of(rec, ms)
