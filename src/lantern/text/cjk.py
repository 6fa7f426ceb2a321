"""CJK text for the index and the keyword signal: overlapping character bigrams.

unicode61 (FTS5's tokenizer) keeps a CJK run as one token and trigram misses two-character words, so both the
indexed text and the query are rewritten with each CJK run as its overlapping bigrams (our choice; the standard
treatment of unsegmented scripts in full-text search).
"""

from __future__ import annotations

from lantern import lazy_re

__all__ = ["CJK_CLASS", "CJK_RUN", "bigram_list", "cjk_bigrams"]

CJK_CLASS = (
    "\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af\U00020000-\U0002ebef"
)
CJK_RUN = lazy_re.compile(f"[{CJK_CLASS}]+")


def cjk_bigrams(text: str) -> str:
    """Rewrite each CJK run as space-separated overlapping bigrams, with spaces around it; other text unchanged.

    >>> cjk_bigrams("数据库端口是5433")
    '数据 据库 库端 端口 口是 5433'
    """
    if not text or CJK_RUN.search(text) is None:
        return text
    out: list[str] = []
    pos = 0
    n = len(text)
    for m in CJK_RUN.finditer(text):
        s, e = m.span()
        out.append(text[pos:s])
        run = m.group()
        if s > 0 and not text[s - 1].isspace():
            out.append(" ")
        out.append(run if len(run) == 1 else " ".join(run[i : i + 2] for i in range(len(run) - 1)))
        if e < n and not text[e].isspace():
            out.append(" ")
        pos = e
    out.append(text[pos:])
    return "".join(out)


def bigram_list(text: str) -> list[str]:
    """The bigrams of every CJK run of ``text``, in order (a one-character run is itself)."""
    out: list[str] = []
    for m in CJK_RUN.finditer(text):
        run = m.group()
        if len(run) == 1:
            out.append(run)
        else:
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
    return out
