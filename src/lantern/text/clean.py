"""Text as every stage reads it: ``clean_text`` (lone surrogates, NUL, CRLF, inline base64 data)."""

from __future__ import annotations

from lantern.scope import clean_name
from lantern.text.media import scrub_inline_data

__all__ = ["clean_text", "normalize_space"]


def clean_text(s: str) -> str:
    """Return ``s`` with lone surrogates and NUL replaced by U+FFFD, CRLF normalized to LF (lone CR is kept) and
    inline base64 data (data URLs, markdown data images, long base64 runs) replaced by placeholders
    (``media.scrub_inline_data``: never base64 in the index).

    Everything else is kept verbatim. Non-str input is converted with ``str()``.
    """
    if not isinstance(s, str):
        s = str(s)
    return scrub_inline_data(clean_name(s))  # NUL and surrogates are no base64: the order changes no run


# --- roles, times, content ------------------------------------------------------------------------------------


def normalize_space(text: str) -> str:
    """Whitespace runs collapsed to one space: how archived texts are compared with the live context."""
    return " ".join(text.split())
