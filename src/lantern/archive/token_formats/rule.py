"""A row of the provider token table (``TokenRule``; the row format and its options: archive/secret_tokens.py's
module doc), the two ways to write one (``rule``, ``prefixed``), the validators rows name (``mixed``, ``jwt_ok``,
``b64head``), the token character classes and the sources rows cite."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from lantern import lazy_re

HAS_DIGIT = lazy_re.compile(r"\d")
HAS_LETTER = lazy_re.compile(r"[A-Za-z]")
W = "A-Za-z0-9_\\-"  # the usual token characters
B64 = "A-Za-z0-9+/="


def mixed(token: str) -> bool:
    """A letter and a digit somewhere in the token (a run of one word, or of one repeated letter, is no key)."""
    return HAS_DIGIT.search(token) is not None and HAS_LETTER.search(token) is not None


def _b64json(part: str) -> bool:
    """Whether ``part`` is base64url of a JSON object (a JWT's header or payload). The JSON is foreign text: read
    by the one bounded parse (llm.parse_answer: a payload nested 30,000 deep is no JWT, not a RecursionError)."""
    from lantern.llm import parse_answer

    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        return isinstance(parse_answer(raw.decode("utf-8")), dict)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return False


def b64head(token: str) -> bytes:
    """The bytes the first 80 base64 characters of ``token`` decode to (b"" when they do not)."""
    head = token[:80]
    try:
        return base64.b64decode(head[: len(head) // 4 * 4])
    except (ValueError, binascii.Error):
        return b""


def jwt_ok(token: str) -> bool:
    """A JSON Web Token: 2 or 3 dot-separated base64url parts (the third may be empty), the first two JSON
    objects once decoded (ours)."""
    parts = token.split(".", 3)
    return len(parts) in (2, 3) and all(parts[:2]) and _b64json(parts[0]) and _b64json(parts[1])


@dataclass(frozen=True)
class TokenRule:
    kind: str
    triggers: tuple[str, ...]
    pattern: re.Pattern[str]
    chars: str = W  # the token's characters (a character class body)
    exact: bool = False
    icase: bool = False  # triggers looked for in the lower-cased text
    back: tuple[str, int, int] | None = None  # (characters, min, max) before the trigger where the token starts
    validate: Callable[[str], bool] | None = None
    keep_prefix: bool = False  # the trigger stays in clear, the rest is the secret (a webhook URL's host and path)
    gate: re.Pattern[str] | None = None  # instead of a literal: a bounded, literal-led regex (a Discord token's dots)
    source: str = ""  # where the format is documented (see the module doc)
    samples: tuple[str, ...] = ()  # ``sample`` specs of tokens of the format, each a text that holds one
    lookalikes: tuple[str, ...] = ()  # ``sample`` specs of texts that resemble the format and hold no secret

    @property
    def run(self) -> re.Pattern[str]:
        return _run(self.chars)


@cache
def _run(chars: str) -> re.Pattern[str]:
    return re.compile(f"[{chars}]*")


def rule(kind: str, triggers: str, pattern: str, *, src: str, ex: tuple, no: tuple, **kw) -> TokenRule:
    """A rule found by ``triggers`` (space-separated literals; none with a ``gate``); ``pattern`` matched where the
    token starts. ``src``: its source; ``ex`` / ``no``: its samples and look-alikes (``sample`` specs)."""
    pattern = lazy_re.compile(pattern)  # compiled when a trigger of the rule is first found (lantern/lazy_re.py)
    return TokenRule(kind, tuple(triggers.split()), pattern, source=src, samples=ex, lookalikes=no, **kw)


def prefixed(kind: str, prefixes: str, body: str, *, src: str, ex: tuple, no: tuple, **kw) -> TokenRule:
    """A rule whose token starts with one of ``prefixes`` (space-separated) followed by ``body``."""
    alts = "|".join(re.escape(p) for p in sorted(prefixes.split(), key=len, reverse=True))
    flags = "(?i)" if kw.get("icase") else ""
    pattern = lazy_re.compile(f"{flags}(?:{alts}){body}")
    return TokenRule(kind, tuple(prefixes.split()), pattern, source=src, samples=ex, lookalikes=no, **kw)


HEX = "[0-9a-fA-F]"
UUID = f"{HEX}{{8}}-{HEX}{{4}}-{HEX}{{4}}-{HEX}{{4}}-{HEX}{{12}}"
GL = "gitleaks "  # a rule id of gitleaks' default configuration (config/gitleaks.toml)
BL = "betterleaks "  # a rule id of betterleaks' default configuration (config/betterleaks.toml, gitleaks' successor)
DS = "detect-secrets "  # a plugin of Yelp's detect-secrets 1.5.0
