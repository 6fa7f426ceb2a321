"""Scopes: who an entry belongs to (ours — the paper has one user and one conversation).

Every entry carries ``user_id``, ``agent_id`` and ``project`` besides its ``session`` (all TEXT, ``""`` by default).

- ``user`` is a hard isolation boundary: every read and write works inside exactly one user. A call that names no
  user works in the handle's user (``Lantern(path, user=...)``), which defaults to ``""``; it can never see,
  change or delete another user's entries — no signal (semantic, full text, keyword, importance), no search, no
  recovery, no compaction detection.
- ``agent`` and ``project`` are filters when given. On a read, None means any agent / any project of the user; on
  a write, None means ``""``.
- ``session`` is unchanged (a filter on reads, the conversation's name on writes); a conversation is identified by
  its full scope and session, so two users' sessions of the same name never share turn numbers.

The content hash (the dedup key) includes the scope when it is not the default one, so the same text said by two
users is two entries, while hashes of entries archived before scopes existed stay valid.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lantern import lazy_re
from lantern.errors import NameTooLongError

__all__ = ["MAX_ID_CHARS", "MAX_SESSION_CHARS", "Scope", "check_length", "clean_name", "resolve", "scope_where"]

# The longest ids Lantern stores, in characters, on both backends (ours). PostgreSQL indexes (user_id, session,
# turn) in one B-tree, whose index row holds at most 2,704 bytes (8 KB page / 3, PostgreSQL's BTMaxItemSize); in
# UTF-8's worst case of 4 bytes a character, 256 + 384 characters are 2,560 bytes of text, and the row's headers,
# the turn number and the 19 characters Lantern may append to a session later (``/abandoned-1234abcd``,
# ``Lantern.abandon``) fit in the rest (256 + 403 characters were measured to fit: tests/test_id_limits.py). The
# SQLite store takes the same limits, so a store copies to either backend.
MAX_ID_CHARS = 256  # user, agent, project
MAX_SESSION_CHARS = 384  # a session name as given or stored (``given/from-transcript`` when both are named)


# what neither backend can store or match as given: NUL (PostgreSQL text refuses it) and lone surrogates (no UTF-8)
_UNSTORABLE = lazy_re.compile("[\x00\ud800-\udfff]")


_CR_LF = lazy_re.compile(r"\r+\n")


def clean_name(value: str) -> str:
    """``value`` (a user, agent, project, session, fact key: any name a call passes) in the one form it is stored
    and matched in, on every path and both backends: NUL and lone surrogates (U+D800..U+DFFF) each become U+FFFD,
    CRLF becomes LF (as ``text.clean.clean_text`` does to archived text). So a name written with any of them is
    found, listed and forgotten by the same name as given; two names differing only there are one name. Idempotent:
    a run of carriage returns before a line feed goes whole (``"\r\r\n"`` becomes ``"\n"``, not ``"\r\n"``)."""
    if "\r\n" in value:
        value = _CR_LF.sub("\n", value)
    if value.isascii() and "\x00" not in value:
        return value
    return _UNSTORABLE.sub("\ufffd", value)


@dataclass(frozen=True)
class Scope:
    """A user (always one; ``""`` is the default user) and optional agent / project filters (None: any).

    ``names``: the database's form of a name (a ``Lantern`` handle installs archive/redact.py ``redact_name``:
    a secret inside a name is replaced by its placeholder), applied by ``resolve`` to the user, agent and project
    a call gives and by ``name`` to a session, on reads as on writes, so a name is matched in the form it is stored
    in. None: names as given. Not part of a scope's identity (equality, hash)."""

    user: str = ""
    agent: str | None = None
    project: str | None = None
    names: Callable[[str], str] | None = field(default=None, compare=False, repr=False)

    def name(self, value: str, what: str = "session") -> str:
        """``value`` (a ``what`` name: session, user, agent or project, in its ``clean_name`` form) as the database
        stores it: ``names(value)``, or as is without ``names``. Raises NameTooLongError when the stored form is
        over ``what``'s limit (``check_length``: a placeholder is longer than a short secret it replaces)."""
        if self.names is None or not value:
            return value
        stored = self.names(value)
        return value if stored == value else check_length(stored, what)

    @property
    def write_values(self) -> tuple[str, str, str]:
        """(user_id, agent_id, project) as stored by a write: None becomes ``""``."""
        return self.user, self.agent or "", self.project or ""


def _name(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__}")
    return check_length(clean_name(value), what)


def check_length(value: str, what: str) -> str:
    """``value`` (a ``what`` id: user, agent, project or session) when it is at most ``MAX_SESSION_CHARS`` (a
    session) or ``MAX_ID_CHARS`` (the others) characters long; else NameTooLongError (a LanternError and a
    ValueError) saying both lengths."""
    limit = MAX_SESSION_CHARS if what == "session" else MAX_ID_CHARS
    if len(value) > limit:
        raise NameTooLongError(
            f"{what} is {len(value):,} characters long; at most {limit} are stored (the same limit on both backends: "
            "a PostgreSQL index row holds at most 2,704 bytes)"
        )
    return value


def resolve(base: Scope, user: Any = None, agent: Any = None, project: Any = None) -> Scope:
    """``base`` (the handle's scope) with the fields given in a call overriding it, each in its ``clean_name``
    form and then ``base.name``'s (its stored form). Raises TypeError for a non-string name, NameTooLongError for
    one over ``MAX_ID_CHARS``."""
    given = ((_name(user, "user"), "user"), (_name(agent, "agent"), "agent"), (_name(project, "project"), "project"))
    user, agent, project = (None if v is None else base.name(v, what) for v, what in given)
    return Scope(
        user=base.user if user is None else user,
        agent=base.agent if agent is None else agent,
        project=base.project if project is None else project,
        names=base.names,
    )


def scope_where(alias: str, scope: Scope) -> tuple[str, list[str]]:
    """The SQL condition confining rows of ``entries AS alias`` to ``scope``, and its parameters:
    ``("e.user_id = ? AND e.agent_id = ?", ["alice", "coder"])``. The user is always constrained; agent and
    project only when given. Tables joined to ``entries`` (facts, ...) use it as ``... JOIN entries e ... WHERE``
    + the fragment."""
    prefix = f"{alias}." if alias else ""
    parts, params = [f"{prefix}user_id = ?"], [scope.user]
    if scope.agent is not None:
        parts.append(f"{prefix}agent_id = ?")
        params.append(scope.agent)
    if scope.project is not None:
        parts.append(f"{prefix}project = ?")
        params.append(scope.project)
    return " AND ".join(parts), params


def selection_where(entry: int | None, session: str | None, scope: Scope | None) -> tuple[str, list]:
    """The WHERE clause and arguments of the ``entries`` a forget selects (``Store.delete``, ``count_selected``):
    the AND of entry id, session (with its sub-sessions ``session/...``, as ingest names them) and ``scope``.
    Raises ValueError when nothing selects."""
    if entry is None and session is None and scope is None:
        raise ValueError("give entry=, session= or a scope")
    parts, args = [], []
    if entry is not None:
        parts.append("id = ?")
        args.append(entry)
    if session is not None:
        parts.append("(session = ? OR substr(session, 1, length(?) + 1) = ? || '/')")
        args += [session, session, session]
    if scope is not None:
        sql, params = scope_where("", scope)
        parts.append(sql)
        args += params
    return " AND ".join(parts), args
