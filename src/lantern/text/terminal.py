"""Archived text printed on a terminal: control, bidi and separator characters shown as escapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lantern import lazy_re

__all__ = ["TERMINAL_UNSAFE", "shown"]

# what can act on a terminal in a text block: C0 controls but newline and tab, DEL, C1 controls (ESC sequences, BEL,
# CR overwriting a line ...), bidirectional controls (LRM/RLM/ALM, embeddings, overrides, isolates) reordering it,
# the line and paragraph separators U+2028 / U+2029 (a line break to some terminals, none to others)
TERMINAL_UNSAFE = lazy_re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def shown(text: Path | str, *, keep_lines: bool = False) -> str:
    """``text`` safe to print on a terminal, the unsafe characters written as ``\\x1b`` / ``\\n`` / ``\\u202e``
    escapes, so hostile text cannot break, reorder or drive the terminal. A name (a path, a session:
    ``keep_lines`` False) becomes one printable line: every non-printable character is escaped, newline included.
    A text block (a recovered block: ``keep_lines`` True) keeps its newlines and tabs and every other printable
    or invisible character (spaces of any width, joiners of emoji): only control characters (C0, DEL, C1),
    bidirectional controls and the line / paragraph separators U+2028 / U+2029 are escaped."""
    text = str(text)
    if keep_lines:
        return TERMINAL_UNSAFE.sub(
            lambda m: m.group().encode("unicode_escape", "backslashreplace").decode("ascii"), text
        )
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


PIPED_WIDTH = 160  # the width of the tables printed to a pipe or a file, unless $COLUMNS says otherwise


def console(stderr: bool = False) -> Any:
    """A rich console on stdout (or stderr). On a terminal, the terminal's width, lines wrapped to it. To a pipe or
    a file, lines are never wrapped (``soft_wrap``: a reader or a ``grep`` gets each line whole, where rich would
    break it at 80 columns, mid-phrase) and tables are laid out ``$COLUMNS`` wide when set, else ``PIPED_WIDTH``
    (rich would take 80, or the width of whatever terminal another stream is on)."""
    import os
    import sys

    from rich.console import Console

    if (sys.stderr if stderr else sys.stdout).isatty():
        return Console(stderr=stderr)
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_WIDTH
    return Console(stderr=stderr, width=width, soft_wrap=True)
