"""Reading and scoring an LLM's answers, no LLM call (the answer-accuracy evaluation, eval/qa.py, and its judge,
eval/judge.py).

Scoring (``normalize``): Unicode NFKC, lower case, punctuation and symbols (Unicode categories P*, S*) removed, the
English articles a / an / the removed, whitespace folded (SQuAD's normalization, Rajpurkar et al. 2016, extended to
Unicode); tokens are the whitespace-separated words, and every CJK character is a token of its own (the
character-level F1 of Chinese reading comprehension, CMRC 2018, Cui et al. 2019). ``exact_match``: the normalized
strings are equal; ``token_f1``: SQuAD's bag-of-tokens F1. ``abstained``: the answer declines to answer.
``parse_letter`` reads a multiple-choice answer; ``enum_schema`` is the JSON schema that asks for one.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence

from lantern import lazy_re
from lantern.llm import parse_answer

__all__ = ["abstained", "enum_schema", "exact_match", "normalize", "parse_letter", "token_f1", "tokens"]

_CJK_CHAR = lazy_re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])")
_ARTICLES = lazy_re.compile(r"\b(a|an|the)\b")


def normalize(text: str) -> str:
    """SQuAD's answer normalization (Rajpurkar et al. 2016, the official evaluation script), for any script: NFKC
    (full-width ``２０２３`` -> ``2023``), lower case, every punctuation or symbol character (Unicode category P* or
    S*: ``.,!?'"$``, ``，。？！：“”``) removed, the articles a / an / the removed, whitespace folded to one space."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(c for c in text if unicodedata.category(c)[0] not in "PS")
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def tokens(text: str) -> list[str]:
    """The tokens of ``normalize(text)``: whitespace-separated words, each CJK character (Han, kana) a token of its
    own (CMRC 2018, Cui et al. 2019, scores Chinese by character)."""
    return _CJK_CHAR.sub(r" \1 ", normalize(text)).split()


def exact_match(prediction: str, gold: str) -> bool:
    """SQuAD exact match: the normalized answer equals the normalized gold (CJK spacing ignored)."""
    return tokens(prediction) == tokens(gold)


def token_f1(prediction: str, gold: str) -> float:
    """SQuAD token F1 (Rajpurkar et al. 2016): the harmonic mean of precision and recall of the multiset of shared
    tokens (``tokens``). When either side has no token: 1.0 if both have none, else 0.0 (SQuAD 2.0's rule)."""
    p, g = tokens(prediction), tokens(gold)
    if not p or not g:
        return float(p == g)
    same = sum((Counter(p) & Counter(g)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


_ABSTAIN = lazy_re.compile(
    r"\b(?:no answer|not mentioned|not (?:stated|specified|said|given|known|provided|clear)|no information|"
    r"not enough information|(?:does|do|did) ?n[o']?t (?:say|mention|know)|i dont know|i do not know|unknown|"
    r"cannot be determined|can ?not (?:be )?(?:determine|answer|tell)|none)\b"
    r"|没有答案|不知道|没有提到|未提及|没有提及|无法确定|无法回答|没有相关|不清楚"
)


def abstained(answer: str) -> bool:
    """True when ``answer`` declines to answer: empty after normalization, or holding a phrase such as "no answer",
    "not mentioned", "I don't know", "unknown", "cannot be determined", 没有答案, 不知道, 没有提到, 无法确定 (ours).
    The score of a question whose gold is no answer (LoCoMo adversarial)."""
    norm = normalize(answer)
    return not norm or bool(_ABSTAIN.search(norm.replace("don t", "dont").replace("doesn t", "doesnt")))


_LETTER_FIRST = lazy_re.compile(r"^[\s(\[*\"'“（【]*([A-Z])(?=$|[)\].:：、,，*\"'”）】]|\s+(?![a-z]))")
_LETTER_SAID = lazy_re.compile(
    r"(?:(?i:answer|option|choice)\s*(?:(?i:is)\s*)?[:：]?\s*|(?:答案|选项|选择|选)\s*(?:是|为|[:：])?\s*)"
    r"[(\[（【\"'“]?([A-Z])(?![A-Za-z])"
)
_LETTER_ALONE = lazy_re.compile(r"(?<![A-Za-z])([A-Z])(?![A-Za-z])")


def json_string(text: str) -> str | None:
    """The one string an LLM answered as JSON: ``"B"``, or ``{"any key": "B"}`` with a single string value; None
    otherwise. Parsed by ``llm.parse_answer`` (bounded in size and depth, as every LLM answer is)."""
    try:
        value = parse_answer(text)
    except ValueError:
        return None
    if isinstance(value, dict):
        strings = [v for v in value.values() if isinstance(v, str)]
        value = strings[0] if len(strings) == 1 else None
    return value if isinstance(value, str) else None


def parse_letter(text: str, choices: dict[str, str]) -> str | None:
    """The option an answer chose (one of ``choices``' letters), or None. Tried in order: JSON
    ``{"choice": "B"}`` (any key) or ``"B"``; a letter opening the answer (``B``, ``B.``, ``(B)``, ``**B**``,
    ``B) text``; not ``A dog``); a letter after answer / option / choice / 答案 / 选项 / 选; the one option letter
    standing alone in the text; the one option whose text the answer contains (the longest when one option's text
    holds another's)."""
    letters = set(choices)
    stripped = text.strip()
    value = json_string(stripped)
    if isinstance(value, str):
        if value.strip().upper().rstrip(".") in letters:
            return value.strip().upper().rstrip(".")
        stripped = value
    m = _LETTER_FIRST.match(stripped)
    if m and m.group(1) in letters:
        return m.group(1)
    said = [x for x in _LETTER_SAID.findall(stripped) if x in letters]
    if said and len(set(said)) == 1:
        return said[0]
    found = [m for m in _LETTER_ALONE.finditer(stripped) if m.group(1) in letters]
    alone = {m.group(1) for m in found}
    article = all(m.group(1) == "A" and re.match(r"\s+[a-z]", stripped[m.end() :]) for m in found)  # "A cat"
    if len(alone) == 1 and not article:
        return alone.pop()
    answer = normalize(stripped)
    hits = {k: normalize(v) for k, v in choices.items() if normalize(v) and normalize(v) in answer}
    widest = [k for k, v in hits.items() if not any(v != w and v in w for w in hits.values())]
    return widest[0] if len(widest) == 1 else None


def enum_schema(key: str, values: Sequence[str]) -> dict:
    """The JSON schema of an answer ``{key: one of values}`` (the constrained shape of a letter or a verdict)."""
    return {
        "type": "object",
        "properties": {key: {"type": "string", "enum": list(values)}},
        "required": [key],
        "additionalProperties": False,
    }
