"""The PostgreSQL + pgvector backend (docs/postgres.md). Needs the ``postgres`` extra (psycopg 3, psycopg-pool,
pgvector); importing this package without them raises ImportError, which ``store.protocol.open_store`` turns into
one LanternError line."""

from lantern.store.postgres.store import UNSUPPORTED, PostgresStore, fts_document

__all__ = ["UNSUPPORTED", "PostgresStore", "fts_document"]
