"""Regular expressions compiled on their first use, once, instead of at import.

Lantern's rule modules (the redaction rules of ``archive/secret_*.py``, the tag and fact patterns of
``text/tags.py`` and ``archive/facts.py``) hold about 300 module-level patterns. Compiled at import they cost a
short-lived process (a CLI command, a cold hook) 60-120 ms of CPU before it does anything (``re``'s parser and
compiler are Python code; BENCHMARKS.md §27), and most processes use a few of them: a ``recover`` redacts nothing,
and a redaction judges only the rules whose trigger it found. ``compile(pattern, flags)`` returns a
:class:`LazyPattern` that compiles on the first attribute a caller reads (``match``, ``search``, ``sub``, ...),
under one lock, so concurrent first uses compile once and every thread gets the same ``re.Pattern``; afterwards
its methods are the compiled pattern's own bound methods (no extra call per use). ``pattern`` (the source string)
is there without compiling. A pattern with a syntax error raises ``re.error`` at its first use, not at import:
tests/test_lazy_re.py compiles every module-level pattern of the rule modules.
"""

from __future__ import annotations

import re
import threading
from typing import Any

__all__ = ["LazyPattern", "compile"]

_LOCK = threading.Lock()
# the methods bound once compiled: afterwards ``p.search`` is the compiled pattern's own bound method
_METHODS = ("match", "fullmatch", "search", "finditer", "findall", "sub", "subn", "split", "scanner")


class LazyPattern:
    """``re.compile(pattern, flags)`` on first use (see the module doc). ``pattern``: the source string, readable
    without compiling; every other attribute is the compiled ``re.Pattern``'s. ``compiled()`` returns that
    pattern (for an API that needs a real ``re.Pattern``)."""

    def __init__(self, pattern: str, flags: int = 0):
        self.pattern = pattern
        self._flags = flags

    def compiled(self) -> re.Pattern[str]:
        done = self.__dict__.get("_compiled")
        if done is None:
            with _LOCK:
                done = self.__dict__.get("_compiled")
                if done is None:
                    done = re.compile(self.pattern, self._flags)
                    for name in _METHODS:
                        self.__dict__[name] = getattr(done, name)
                    self.__dict__["_compiled"] = done
        return done

    def __getattr__(self, name: str) -> Any:  # only for what is not in the instance yet: the first use of a method
        if name.startswith("__") or name in ("pattern", "_flags", "_compiled"):
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __repr__(self) -> str:
        return f"lazy_re.compile({self.pattern!r}, {self._flags})"


def compile(pattern: str, flags: int = 0) -> LazyPattern:  # noqa: A001 - re.compile's name, for a drop-in use
    """A :class:`LazyPattern` of ``pattern`` and ``flags`` (``re`` flags), compiled at its first use."""
    return LazyPattern(pattern, flags)
