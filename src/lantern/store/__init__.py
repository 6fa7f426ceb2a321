"""SQLite store and its in-process index."""

from lantern.store.sqlite import NewEntry, Store

__all__ = ["NewEntry", "Store"]
