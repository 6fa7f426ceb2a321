"""SQLite store and its in-process index."""

from .sqlite import NewEntry, Store

__all__ = ["NewEntry", "Store"]
