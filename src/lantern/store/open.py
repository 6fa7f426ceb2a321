"""``open_store``: the backend for a location (store/protocol.py)."""

from __future__ import annotations

import os

from lantern.config import is_server_url, location_error, redact_url
from lantern.errors import LanternError, install_command
from lantern.store.protocol import StoreProtocol

__all__ = ["open_store"]


def open_store(location: str | os.PathLike[str], readonly: bool = False) -> StoreProtocol:
    """The store at ``location``: a PostgreSQL server for a ``postgresql://`` URL (needs the ``postgres`` extra,
    else LanternError naming ``errors.install_command("postgres")``), else the SQLite file at that path. Raises what
    the backend's constructor raises (LanternError naming the cause: unreachable server, bad password, missing
    pgvector extension, a file that is not a Lantern database). ``readonly``: opened to be read only, nothing created,
    migrated or written; a location that is not a Lantern store of this schema version raises LanternError, as does
    one that names no database either way (``config.location_error``: a URL with white space around it, a libpq
    key=value string)."""
    if (why := location_error(location)) is not None:
        raise LanternError(why)
    if is_server_url(location):
        try:
            from lantern.store.postgres import PostgresStore
        except ImportError as e:
            raise LanternError(
                f"{redact_url(str(location))}: the PostgreSQL backend needs psycopg 3, psycopg-pool and pgvector "
                f"({e.name or e} is missing). Install it into this environment: {install_command('postgres')}"
            ) from None
        return PostgresStore(str(location), readonly=readonly)
    from lantern.store.sqlite import Store

    return Store(location, readonly=readonly)
