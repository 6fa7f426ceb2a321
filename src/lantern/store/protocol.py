"""The store protocol: what the write path (archive/), the read path (recover/, store/index.py) and ``Lantern`` ask
of a store, whichever backend holds the rows (docs/architecture.md §2.9).

Two implementations: ``lantern.store.sqlite.Store`` (one SQLite file, the default) and
``lantern.store.postgres.PostgresStore`` (a PostgreSQL server with pgvector; docs/postgres.md). ``store/open.py``
``open_store`` picks one from the location: a ``postgresql://`` (or ``postgres://``) URL is a server, anything
else a file path.

Shapes and units are the SQLite store's, documented on its methods: ids are int, times unix seconds (float, UTC),
vectors float32 of the embedder's ``dim``. ``db`` is a connection-shaped object (``execute(sql, params)`` with
``?`` placeholders, rows as tuples) for the SQL the shared modules run (store/facts.py, store/reinforcement.py,
store/events.py, recover/neighbours.py, recover/local.py); PostgreSQL's translates the few SQLite spellings
those use (store/postgres/sql.py). A backend names the operations it does not support yet in ``unsupported``;
``require`` raises ``UnsupportedBackendError`` for them before anything is read or written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

import numpy as np

from lantern.errors import UnsupportedBackendError
from lantern.model import Entry, Tag
from lantern.scope import Scope

__all__ = ["Connection", "StoreProtocol", "require"]


class Connection(Protocol):
    """The part of ``sqlite3.Connection`` the shared SQL modules use."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Any: ...

    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /) -> Any: ...


@runtime_checkable
class StoreProtocol(Protocol):
    """The operations of a Lantern store; see ``lantern.store.sqlite.Store`` for each one's contract."""

    path: str  # what to show for the store: a file path, or a server URL without its password
    embedder_id: str | None
    dim: int
    blocks: list[tuple[int, int]]
    deferred: tuple[int, int] | None
    schema_version: int
    db: Any  # Connection

    # plumbing
    def transaction(self, wait: float | None = None) -> AbstractContextManager[Any]: ...
    def snapshot(self) -> AbstractContextManager[Any]: ...
    def data_version(self) -> int: ...
    def close(self) -> None: ...

    # meta and embedder
    def get_meta(self, key: str) -> str | None: ...
    def check_embedder(
        self,
        embedder_id: str,
        dim: int,
        name: str | None = None,
        blocks: Sequence[tuple[int, int]] | None = None,
        deferred: tuple[int, int] | None = None,
    ) -> None: ...
    def verify_embedder(self, db: Any = None) -> None: ...
    def set_embedder(self, db: Any, embedder_id: str, dim: int) -> None: ...

    # write
    def add(
        self, rows: Sequence[Any], vectors: Any, after: Callable[[Any, list[tuple[int, bool]]], None] | None = None
    ) -> list[tuple[int, bool]]: ...
    def delete(self, *, entry: int | None = None, session: str | None = None, scope: Scope | None = None) -> int: ...
    def erase_free_space(self) -> None: ...
    def replace_vectors(
        self,
        pairs: Iterable[tuple[int, np.ndarray]],
        embedder_id: str,
        dim: int,
        name: str | None = None,
        blocks: Sequence[tuple[int, int]] | None = None,
        deferred: tuple[int, int] | None = None,
    ) -> int: ...
    def fill_vectors(self, parts: Sequence[tuple[int, np.ndarray]], wait: float | None = None) -> int: ...
    def compact_vectors(self, batch: int = 2_000) -> int: ...
    def bump_access(self, ids: Sequence[int], db: Any = None, wait: float | None = None) -> None: ...

    # read
    def decode_vectors(self, blobs: Sequence[Any]) -> np.ndarray: ...
    def pending_vectors(self, limit: int, scope: Scope | None = None) -> list[tuple[int, str]]: ...
    def pending_count(self) -> int: ...
    def known_hashes(self, hashes: Sequence[str], chunk: int = 500) -> set[str]: ...
    def entries(self, ids: Iterable[int], *, text: bool = True, tags: bool = True) -> dict[int, Entry]: ...
    def tags(self, ids: Iterable[int]) -> dict[int, list[Tag]]: ...
    def text_heads(self, ids: Iterable[int], chars: int) -> dict[int, str]: ...
    def texts(self) -> Iterator[tuple[int, str]]: ...
    def rows_since(self, archived_at: float, after_id: int | None = None) -> list[tuple]: ...
    def stamps_since(self, archived_at: float, after_id: int | None = None) -> list[tuple[int, float]]: ...
    def rows_by_id(self, ids: Sequence[int]) -> list[tuple]: ...
    def mutable_columns(self) -> list[tuple[int, float, float, int]]: ...
    def session_turns(self, session: str, scope: Scope | None = None) -> list[tuple[int, int, str]]: ...
    def count(self) -> int: ...
    def fulltext(
        self, match: str, limit: int, sessions: Sequence[str] | None = None, scope: Scope | None = None
    ) -> list[tuple[int, float]]: ...
    def term_fractions(self, match_terms: Sequence[str], sample: int) -> dict[str, float]: ...
    def sessions(self) -> list[str]: ...
    def stats(self) -> dict[str, Any]: ...


def require(store: Any, operation: str) -> None:
    """Raise ``UnsupportedBackendError`` naming ``operation`` when ``store``'s backend lists it in its
    ``unsupported`` mapping ({operation: hint}); a backend without that attribute supports everything."""
    unsupported = getattr(store, "unsupported", None) or {}
    if operation in unsupported:
        raise UnsupportedBackendError(operation, getattr(store, "backend", "this"), unsupported[operation])
