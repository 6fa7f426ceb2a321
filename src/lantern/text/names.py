"""Names as given by users and file systems: sessions, file names, counted nouns."""

from __future__ import annotations

from lantern.scope import check_length, clean_name

__all__ = ["file_name_text", "given_name", "plural"]


def given_name(name: str | None) -> str | None:
    """A session name as given, in its stored form (``scope.clean_name``: NUL and lone surrogates as U+FFFD), or
    None when it is blank (empty or only whitespace: ``--session "  "`` means no session was given, as an empty
    one does). Raises TypeError for a name that is not a string (as ``scope.resolve`` for a user, agent or
    project) and NameTooLongError for one over ``MAX_SESSION_CHARS`` (lantern/scope.py)."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"session must be a string, got {type(name).__name__}")
    return check_length(clean_name(name), "session") if name and name.strip() else None


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 file``, ``2 files``; ``1 entry``, ``2 entries`` (``many``: the plural when it is not ``word`` + s)."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def file_name_text(name: str) -> str:
    """A file name as text: bytes that are not UTF-8 (kept by Python as lone surrogates, PEP 383) written as
    ``\\xNN`` escapes, so ``caf\\xe9`` and ``na\\xefve`` stay two sessions instead of both becoming U+FFFD."""
    try:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file system gave (a caller's own str): U+FFFD, as clean_text does
        return name.encode("utf-8", "replace").decode("utf-8")
