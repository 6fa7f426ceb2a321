"""Speaker focus: when the query names a speaker of the conversation, that speaker's candidates as one more ranked
signal (ours).

In a conversation between named people (LoCoMo, a group chat), a question about a person ("What activities does
Melanie partake in?", "What books has John read?") is answered by that person's own turns ("I'm off to go
swimming with the kids"), which often share no other word with the question; the name itself is in about half of
the store (every turn of that speaker carries it in its ``user (Melanie):`` prefix), so BM25 gives it almost no
weight and the other speaker's turns compete on equal terms. The ``speaker`` ranking lists the candidates already
gathered by the query signals whose turn has a message by a speaker the query names, in the order of the
fusion of the other signals (RRF), and is fused with its own weight: it re-orders the candidates, it never adds
one. Speakers are the names archived turns carry (``role (Name): text`` lines of the summary, as
``archive/summarize.py`` writes them); role labels alone (``user``, ``assistant``) are not names, so an ordinary
user/assistant transcript never triggers it.

On the tune split (LoCoMo conversations 1-5) 257 of the 266 evidence turns missing from unrecovered facts were
said by the speaker the question names. Tune-split numbers: ``docs/results/recall-tuning.md``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

from lantern import lazy_re
from lantern.model import Entry
from lantern.recover.fusion import rrf

SPEAKER = "speaker"  # the signal's name in rankings, weights and explain output
_LINE = lazy_re.compile(r"^(?:user|assistant|system|tool) \(([^()\n]{1,64})\):", re.MULTILINE)
_WORD = lazy_re.compile(r"\w+", re.UNICODE)


@lru_cache(maxsize=16_384)  # the same candidates' summaries come back query after query (~2 ms a recovery at 10k turns)
def speakers_of(summary: str) -> frozenset[str]:
    """The speaker names (lowercased) of an entry's summary lines ``role (Name): …``; empty for unnamed roles."""
    return frozenset(m.group(1).strip().lower() for m in _LINE.finditer(summary))


_CJK = lazy_re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def named_in(query: str, names: set[str]) -> set[str]:
    """The ``names`` (lowercased; one or several words) that ``query`` contains, case-insensitive: as whole words,
    or, for a name written in CJK characters (Chinese has no spaces between words: "梅兰妮喜欢什么"), as a substring.
    A name of fewer than two word characters ("C++" is the word "c") never matches."""
    lowered = query.lower()
    text = " " + " ".join(_WORD.findall(lowered)) + " "
    found = set()
    for n in names:
        words = " ".join(_WORD.findall(n))
        if len(words.replace(" ", "")) < 2:
            continue
        if _CJK.search(n) and n in lowered or " " + words + " " in text:
            found.add(n)
    return found


def speaker_ranking(
    query: str,
    rankings: Mapping[str, Sequence[int]],
    entries: Mapping[int, Entry],
    k: int,
    weights: Mapping[str, float] | None,
) -> list[int]:
    """Entry ids of the candidates (``entries``: id -> Entry with its summary) that have a message by a speaker
    ``query`` names, in the RRF order of ``rankings`` (signal name -> entry ids, best first; ties: the lower id
    first). Empty when the query names no speaker of the candidates."""
    said = {i: speakers_of(e.summary) for i, e in entries.items()}
    named = named_in(query, set().union(*said.values()) if said else set())
    if not named:
        return []
    fused = rrf(rankings, k, weights)
    order = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))
    return [i for i, _ in order if said.get(i, frozenset()) & named]
