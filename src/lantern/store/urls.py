"""Store locations: a PostgreSQL server URL or a SQLite file path, and URLs as shown (never with a password)."""

from __future__ import annotations

import os
import re

__all__ = ["is_server_url", "redact_url"]

_SERVER_URL = re.compile(r"^postgres(?:ql)?://", re.IGNORECASE)


def is_server_url(location: str | os.PathLike[str] | None) -> bool:
    """Whether ``location`` names a PostgreSQL server (``postgresql://...`` or ``postgres://...``) rather than a
    SQLite file."""
    return isinstance(location, str) and bool(_SERVER_URL.match(location))


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (``postgresql://ann:***@db:5432/lantern``), and a
    ``password=`` query parameter too: what errors, logs and ``stats`` show. A URL without one is unchanged."""
    out = re.sub(r"^(postgres(?:ql)?://[^:/@?#]*):[^@/?#]*@", r"\1:***@", url, flags=re.IGNORECASE)
    return re.sub(r"([?&]password=)[^&#]*", r"\1***", out, flags=re.IGNORECASE)
