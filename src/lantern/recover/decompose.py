"""Query decomposition: a question that asks two things at once, split into its parts (ours).

Users (and MemDaily's hybrid questions) often ask two questions in one message: "我上司是做什么工作的呢？另外，
金融科技精英论坛的地点是什么？" / "Where does my boss work? Also, when is the fintech forum?". One query vector
for both parts sits between them: the distinctive part (an event name) dominates it and ranks its own turn first
on every signal, while the generic part's turn ("my boss is a builder") is one of many look-alikes and, even
inside the ``local`` window around the best hit (recover/local.py), ranks below turns about the event. Each part
gets its own query vector, and the ``local`` window is ranked by every part (recover/local.py: round-robin over
the parts' cosine orders), so each part's best turn near the best hits gets an early rank.

Splitting rule (ours): a part ends at a question mark (``？`` / ``?``) or full stop followed by more text, or
before a connective that opens a new question (Chinese 另外 / 此外 / 还有 / 以及 / 顺便 after punctuation;
English "Also," / "Additionally," / "And also" after a sentence end); a part shorter than ``MIN_PART_CHARS``
word characters (a greeting, "thanks") is dropped. A query with fewer than two parts is not decomposed (one
embedding, as any query). Closest published practice: question decomposition for multi-hop retrieval (Min et al.
2019, "Multi-hop Reading Comprehension through Question Decomposition"; Perez et al. 2020), here by rule, with
zero model calls.
"""

from __future__ import annotations

import re

from lantern import lazy_re

MIN_PART_CHARS = 4  # word characters a part needs to be a question of its own (ours)
MAX_PARTS = 4  # at most this many parts get their own vector (ours: bounds the extra embeddings)

# a sentence end followed by more text; or a connective that starts a new question after a comma/semicolon
_BREAK = lazy_re.compile(
    r"(?<=[？?。！!])\s*"  # after a sentence end
    r"|[，,；;]\s*(?=(?:另外|此外|还有|以及|顺便|再问一下)[，,\s]?)"  # Chinese connective after a comma
    r"|(?<=[.;])\s+(?=(?:also|additionally|and also|plus)\b)",  # English connective after a sentence end
    re.IGNORECASE,
)
_LEAD = lazy_re.compile(
    r"^\s*(?:另外|此外|还有|以及|顺便问一下|顺便|再问一下|(?:also|additionally|and also|and|plus)\b)[，,:：\s]*",
    re.IGNORECASE,
)
_WORD = lazy_re.compile(r"\w", re.UNICODE)


def parts(query: str) -> list[str]:
    """The parts of a multi-part question, each without its leading connective, in order; ``[]`` when the query
    has fewer than two parts. A part is a piece that ends with a question mark, that a connective opens, or
    that a connective follows after a comma ("Answer yes or no." after a question is an instruction, not a second
    question), with at least
    ``MIN_PART_CHARS`` word characters; at most ``MAX_PARTS`` are kept.

    >>> parts("上司是做什么工作的呢？另外，金融科技精英论坛的地点是什么？")
    ['上司是做什么工作的呢？', '金融科技精英论坛的地点是什么？']
    >>> parts("Where does my boss work? Also, when is the fintech forum?")
    ['Where does my boss work?', 'when is the fintech forum?']
    >>> parts("Was August a good month for Nate? Answer yes or no.")
    []
    >>> parts("Where is Andrew? Andrew said he would come.")
    []
    >>> parts("What books has John read?")
    []
    """
    pieces = [p.strip() for p in _BREAK.split(query or "") if p and p.strip()]
    bodies = [_LEAD.sub("", p).strip() for p in pieces]
    opened = [b != p for b, p in zip(bodies, pieces)]  # a connective opens the piece
    out = []
    for i, rest in enumerate(bodies):
        is_question = (
            rest.endswith(("？", "?"))
            or opened[i]  # ends with a question mark, or a connective opens it,
            or i + 1 < len(bodies)
            and opened[i + 1]
            and not rest.endswith((".", "。", "!", "！"))
        )  # or one follows it
        if is_question and len(_WORD.findall(rest)) >= MIN_PART_CHARS:
            out.append(rest)
    return out[:MAX_PARTS] if len(out) >= 2 else []
