"""Fact keys and values in their exact-match form (the key of a versioned fact; docs/architecture.md §5)."""

from __future__ import annotations

import re

from lantern import lazy_re

__all__ = [
    "DETERMINERS",
    "IDEOGRAPHS",
    "DETERMINER_WORDS",
    "LEAD_EN",
    "normalize_key",
    "normalize_value",
    "strip_quotes",
]

IDEOGRAPHS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
DETERMINER_WORDS = ("the", "a", "an", "our", "my", "your", "their", "its", "this", "that")
DETERMINERS = "(?:" + "|".join(DETERMINER_WORDS) + ")"
LEAD_EN = lazy_re.compile(rf"^(?:{DETERMINERS}\s+)+", re.I)
_LEAD_ZH = lazy_re.compile(r"^(?:我们的|我的|你的|你们的|他的|她的|咱们的|这个|那个)")
_SEPARATORS = lazy_re.compile(r"[\s_.\-]+")
_CJK_SPACE = lazy_re.compile(rf"\s*([{IDEOGRAPHS}])\s*")


def strip_quotes(s: str) -> str:
    return s.strip().strip("`'\"“”‘’「」『』").strip()


def normalize_key(key: str) -> str:
    """The exact-match form of a fact key: "The staging DB_Port" -> "staging db port",
    "数据库的 端口" -> "数据库端口"."""
    k = key.strip().strip("`'\"“”‘’「」").casefold()
    k = LEAD_EN.sub("", k)
    k = _LEAD_ZH.sub("", k)
    k = k.replace("的", "")
    k = _SEPARATORS.sub(" ", k).strip()
    return _CJK_SPACE.sub(r"\1", k)


def normalize_value(value: str | None) -> str | None:
    """Values compare case-insensitively without surrounding quotes ("PostgreSQL" = "postgresql")."""
    return None if value is None else strip_quotes(value).casefold()
