"""What every call of the facade (``Lantern``, api/) shares: one call at a time per handle, and the checks of the
arguments the calls take (numbers, a query, a time), each raising the precise error the methods' docstrings name."""

from __future__ import annotations

import functools
import sys
from datetime import datetime, timezone
from typing import Any

from lantern import lazy_re
from lantern.store.times import to_epoch
from lantern.text.clean import clean_text

# ours: a query is read up to its first 16,000 characters (about 4,000 words). The models read less already
# (MiniLM 128 tokens, USE 8,192 characters) and full text keeps 64 terms; past that a 600,000-character query only
# costs time (4 s). The integrations' queries are a question, or a tail and a 2,000-character
# summary.
MAX_QUERY_CHARS = 16_000
WORDS = lazy_re.compile(r"\w")  # a query without a word character searches nothing
FILL_WAIT_S = 0.2  # seconds a recovery waits for the write lock of its vector fill before skipping it (ours)


def is_int(x: Any) -> bool:
    """An int (not a bool), or numpy's integer scalar (numpy is loaded when a value can be one)."""
    np = sys.modules.get("numpy")
    return not isinstance(x, bool) and (isinstance(x, int) or (np is not None and isinstance(x, np.integer)))


def is_number(x: Any) -> bool:
    """An int or a float (not a bool), or numpy's scalar of either."""
    np = sys.modules.get("numpy")
    return not isinstance(x, bool) and (
        isinstance(x, (int, float)) or (np is not None and isinstance(x, (np.integer, np.floating)))
    )


def query_text(query: Any) -> str:
    """The query as the read path reads it: its first ``MAX_QUERY_CHARS`` characters, cleaned (``clean_text``)."""
    return clean_text(query[:MAX_QUERY_CHARS] if isinstance(query, str) else query)


def one_at_a_time(method):
    """Run ``method`` holding the handle's lock: a handle is one SQLite connection (or pool) and one in-process index,
    so its calls run one at a time, whichever threads make them (a recovery ranks on the index it masked; a write
    transaction never opens inside another). Reentrant: a call may make another (``recover`` reads ``explain``'s
    path). Threads wanting parallel reads open a handle each, as processes do."""

    @functools.wraps(method)
    def serialized(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    return serialized


def epoch(as_of: Any) -> float | None:
    """Unix seconds of an ``as_of`` datetime (naive = UTC); None stays None; anything else is a TypeError."""
    if as_of is None:
        return None
    if not isinstance(as_of, datetime):
        raise TypeError(f"as_of must be a datetime, got {type(as_of).__name__}")
    try:
        ts = to_epoch(as_of)
        datetime.fromtimestamp(ts, tz=timezone.utc)  # e.g. 0001-01-01 at +05:00 is before year 1 in UTC
    except (OverflowError, ValueError, OSError):
        raise ValueError(f"as_of {as_of.isoformat()} is outside the years 1..9999 in UTC") from None
    return ts
