"""A deadline for every wait on the database's locks in this process (store/sqlite.py reads it): a process that must
finish within a host's timeout (a hook: integrations/claude_code.py ``HOOK_DB_WAIT_S``) bounds its waits all
together. Kept apart from the store so that a hook sets it without importing the store (a hook that ends before
opening the database loads none of it)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["lock_deadline", "seconds_left"]

_DEADLINE: list[float] = []  # monotonic times, innermost last


@contextmanager
def lock_deadline(seconds: float) -> Iterator[None]:
    """Bound every wait for the database's locks in the block, all together, to ``seconds`` from now (store/sqlite.py:
    a connection opened waits at most the time left, a write transaction takes the lock once, waiting at most the
    time left, and past the deadline raises sqlite3.OperationalError "database is locked" at once, its
    transaction rolled back whole)."""
    _DEADLINE.append(time.monotonic() + seconds)
    try:
        yield
    finally:
        _DEADLINE.pop()


def seconds_left() -> float | None:
    """Seconds until the innermost ``lock_deadline`` ends (0 when past it), or None outside any."""
    if not _DEADLINE:
        return None
    return max(0.0, _DEADLINE[-1] - time.monotonic())
