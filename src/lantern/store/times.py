"""Times as stored: unix seconds (float, UTC)."""

from __future__ import annotations

from datetime import datetime, timezone

__all__ = ["from_epoch", "to_epoch"]


def to_epoch(dt: datetime | None) -> float | None:
    """Unix seconds of ``dt`` (naive = UTC); None stays None."""
    if dt is None:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def from_epoch(ts: float | None) -> datetime | None:
    """UTC datetime of a unix time; None when absent or outside what ``datetime`` can hold (year 1..9999)."""
    if ts is None:
        return None
    try:
        return datetime.fromtimestamp(ts, tz=timezone.utc)
    except (ValueError, OverflowError, OSError):
        return None
