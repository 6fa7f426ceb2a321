"""The LLM judge of the answer-accuracy evaluation (eval/qa.py), and the calibration that decides whether its
column is reported.

The judge: given question, gold answer and answer, CORRECT or WRONG, generous about wording and date formats (the
LoCoMo judge of the mem0 paper, Chhikara et al. 2025, on LoCoMo, Maharana et al. 2024). One call per answer,
temperature 0, at most ``JUDGE_TOKENS``, the answer constrained to ``{"label": "CORRECT" | "WRONG"}`` where the
endpoint supports it; ``parse_judge`` reads any shape. Prompts (ours; English or Chinese by the question's script,
recover/rerank.py ``language``): system ``JUDGE[lang]``; user ``Question: ... / Gold answer: ... / Answer: ...``.

Calibration (ours): before a judge column is reported, the same judge call grades answers whose verdict is known
by construction, built from the evaluated dataset's own questions (so in the dataset's language):

    known right   gold         the gold answer itself
                  paraphrase   the gold inside a sentence ("The answer is: {gold}." / "答案是{gold}。")
    known wrong   other_gold   the gold of another question of the dataset that shares no token with this gold
                  changed      the gold with its value changed (``changed``): yes <-> no, else every number + 1
                               (digits, or an English number word), else one name swapped for a name the dataset's
                               questions use (never in a list, whose other items would stay right); none when the
                               gold has no such value (a Chinese gold without digits)
                  abstention   "I don't know." / "我不知道。" (an empty answer is never sent to the judge: it scores
                               WRONG without a call, so it would test nothing)

A known-wrong answer that still holds every token of its gold is dropped (it might be right).

The column is reported when the judge calls at most ``MAX_FALSE_CORRECT`` of the known-wrong answers CORRECT and it
tells the two apart better than chance: the one-sided Fisher exact test (Fisher 1922) of known right / known wrong
× called CORRECT / not gives p < ``CHANCE_P``. A judge that says CORRECT to everything fails the first; one that
says WRONG to everything, or cannot be read, fails the second. An unreadable verdict or a failed call counts as not
CORRECT, as it scores in the answer table.
"""

from __future__ import annotations

import calendar
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lantern import lazy_re
from lantern.eval import stats
from lantern.eval.answers import abstained, enum_schema, json_string, tokens
from lantern.eval.datasets import SEPARATE_CATEGORIES, Fact
from lantern.llm import LLMClient, LLMError, Usage
from lantern.recover.rerank import language

__all__ = [
    "CALIBRATION_QUESTIONS",
    "CHANCE_P",
    "JUDGE",
    "KINDS",
    "MAX_FALSE_CORRECT",
    "Item",
    "calibrate",
    "calibration_set",
    "changed",
    "decide",
    "gradable",
    "judge_messages",
    "parse_judge",
    "render_calibration",
    "verdict",
]

JUDGE_TOKENS = 16  # {"label": "CORRECT"}
CALIBRATION_QUESTIONS = 10  # questions drawn for the calibration: up to 5 known answers each
MAX_FALSE_CORRECT = 0.2  # the largest share of known-wrong answers the judge may call CORRECT
CHANCE_P = 0.05  # the one-sided Fisher p below which the judge tells right from wrong better than chance

JUDGE = {
    "en": (
        "You grade an answer to a question about a conversation against the gold answer. Be generous: the answer "
        "is CORRECT when it names the same thing as the gold answer, even if longer or worded differently (a date "
        'in another format counts); otherwise it is WRONG. Answer with JSON only: {"label": "CORRECT"} or '
        '{"label": "WRONG"}.'
    ),
    "zh": (
        "你要对照标准答案给一个关于对话的问题的回答打分。请宽松判断：回答与标准答案指的是同一件事就是 CORRECT，"
        "即使更长或说法不同（日期格式不同也算）；否则是 WRONG。"
        '只用 JSON 回答：{"label": "CORRECT"} 或 {"label": "WRONG"}。'
    ),
}
_USER = {
    "en": "Question: {q}\nGold answer: {gold}\nAnswer: {answer}",
    "zh": "问题：{q}\n标准答案：{gold}\n回答：{answer}",
}
PARAPHRASE = {
    "en": ("The answer is: {gold}.", "{gold}, as the conversation says."),
    "zh": ("答案是{gold}。", "对话里说的是{gold}。"),
}
ABSTENTION = {"en": "I don't know.", "zh": "我不知道。"}
KINDS = {  # kind -> its verdict by construction (True: CORRECT), in the order the report names them
    "gold": True,
    "paraphrase": True,
    "other_gold": False,
    "changed": False,
    "abstention": False,
}


# ---------------------------------------------------------------- the judge call
_LABEL_WORD = lazy_re.compile(r"\b(CORRECT|INCORRECT|WRONG)\b")
_LABEL_WORD_ANY = lazy_re.compile(r"\b(correct|incorrect|wrong)\b", re.IGNORECASE)


def parse_judge(text: str) -> bool | None:
    """The judge's verdict: True for CORRECT, False for WRONG (or INCORRECT), None when unreadable. Reads
    ``{"label": "CORRECT"}`` (any key, any case), a bare word, a word inside prose (upper-case words first, as the
    prompt asks for them; then any case), 正确 / 错误 / 不正确. Both verdicts named (``CORRECT or WRONG``): None."""
    stripped = text.strip()
    stripped = json_string(stripped) or stripped
    for pattern in (_LABEL_WORD, _LABEL_WORD_ANY):
        found = {w.upper() != "CORRECT" for w in pattern.findall(stripped)}  # True = a WRONG word
        if len(found) == 1:
            return not found.pop()
        if len(found) > 1:
            return None
    zh = stripped.replace("不正确", "错误")
    if "正确" in zh and "错误" not in zh:
        return True
    if "错误" in zh and "正确" not in zh:
        return False
    return None


def judge_messages(question: str, gold: str, answer: str) -> list[dict[str, str]]:
    """The chat messages asking the judge about ``answer`` to ``question`` against ``gold``."""
    lang = language(question)
    user = _USER[lang].format(q=question, gold=gold, answer=answer)
    return [{"role": "system", "content": JUDGE[lang]}, {"role": "user", "content": user}]


def verdict(client: LLMClient, question: str, gold: str, answer: str) -> tuple[bool | None, str | None]:
    """One judge call: (True for CORRECT, False for WRONG, None when unreadable or failed; the error when the call
    failed)."""
    try:
        text = client.chat(
            judge_messages(question, gold, answer),
            max_tokens=JUDGE_TOKENS,
            json_schema=enum_schema("label", ["CORRECT", "WRONG"]),
        ).text
    except LLMError as e:
        return None, str(e)
    return parse_judge(text), None


# ---------------------------------------------------------------- answers whose verdict is known
@dataclass(frozen=True)
class Item:
    """One calibration answer: ``answer`` to ``question`` (gold ``gold``), built as ``kind`` (a key of ``KINDS``)."""

    question: str
    gold: str
    answer: str
    kind: str

    @property
    def right(self) -> bool:
        """Its verdict by construction: True when a fair judge calls it CORRECT."""
        return KINDS[self.kind]


_YES_NO = lazy_re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)
_DIGITS = lazy_re.compile(r"\d+")
_NUMBER_WORDS = "zero one two three four five six seven eight nine ten eleven twelve thirteen".split()
_NUMBER_WORD = lazy_re.compile(r"\b(" + "|".join(_NUMBER_WORDS[2:-1]) + r")\b", re.IGNORECASE)  # "one" is a pronoun too
_NOT_NAMES = {"The", "A", "An", "And", "Of", "In", "On", "At", "For", "To", "With", "Dr", "Mr", "Mrs", "Ms", "Mx"}
_NOT_NAMES |= set(calendar.month_name[1:]) | set(calendar.day_name)  # a month is a date, not a name
_LIST = lazy_re.compile(r"[,;、，；]| and | & ")
_NAME = lazy_re.compile(r"\b[A-Z][a-z]+\b")


def _same_case(word: str, like: str) -> str:
    return word.capitalize() if like[:1].isupper() else word


def changed(gold: str, names: Sequence[str] = ()) -> str | None:
    """``gold`` with its value changed, so it is wrong by construction, or None when it has no value to change.
    Tried in order: a leading yes / no flipped; every number + 1 (a digit run keeps its width: ``07`` -> ``08``;
    ``two`` to ``twelve`` -> the next word); the first name replaced by the first of ``names`` that the gold does
    not hold. A name is a capitalized word that does not open the gold, or any word of a gold whose every word is
    capitalized (``Lisbon``, ``Matt Patterson``): the opening word of ``Read a book`` is not one. No name of a list
    (``Spain, England``, ``Bach and Mozart``) is swapped: the other items would still be right."""
    m = _YES_NO.match(gold)
    if m:
        word = m.group(1)
        flipped = _same_case("no" if word.lower() == "yes" else "yes", word)
        return gold[: m.start(1)] + flipped + gold[m.end(1) :]
    if _DIGITS.search(gold):
        return _DIGITS.sub(lambda d: str(int(d.group()) + 1).zfill(len(d.group())), gold)
    if _NUMBER_WORD.search(gold):
        return _NUMBER_WORD.sub(
            lambda w: _same_case(_NUMBER_WORDS[_NUMBER_WORDS.index(w.group().lower()) + 1], w.group()), gold
        )
    if _LIST.search(gold):
        return None
    titled = all(w[:1].isupper() for w in gold.split())
    m = next((m for m in _NAME.finditer(gold) if titled or gold[: m.start()].strip()), None)
    if m:
        held = set(tokens(gold))
        for name in names:
            if name.lower() not in held:
                return gold[: m.start()] + name + gold[m.end() :]
    return None


def gradable(f: Fact) -> bool:
    """A free-text question with a real answer: one the judge grades in the answer table."""
    return (
        not f.choices and f.category not in SEPARATE_CATEGORIES and bool(tokens(f.answer)) and not abstained(f.answer)
    )


def _names(pool: Sequence[Fact]) -> list[str]:
    """The names the pool's questions use: capitalized words after a question's first word, at least twice in the
    pool, not an article, preposition, title, month, weekday or number word (LoCoMo's questions name its speakers),
    most used first."""
    counts: Counter[str] = Counter()
    for f in pool:
        rest = f.question.strip().split(maxsplit=1)
        counts.update(_NAME.findall(rest[1] if len(rest) > 1 else ""))
    return [w for w, n in counts.most_common() if n >= 2 and w not in _NOT_NAMES and w.lower() not in _NUMBER_WORDS]


def calibration_set(questions: Sequence[Fact], pool: Sequence[Fact]) -> list[Item]:
    """The known answers to ``questions`` (the gradable ones: free text, a gold that is not an abstention, not
    LoCoMo's adversarial category): per question the ``gold`` and a ``paraphrase`` (known right), and the
    ``other_gold`` (the next gradable question of ``pool`` after it, cyclically, whose gold shares no token with
    this one), the ``changed`` gold and the ``abstention`` (known wrong) when they exist. A known-wrong answer that
    holds every token of the gold (the abstention to the gold ``know``) is left out: it might be right. ``pool``:
    the dataset's questions, in dataset order."""
    pool = [f for f in pool if gradable(f)]
    names = _names(pool)
    items: list[Item] = []
    for k, q in enumerate(f for f in questions if gradable(f)):
        lang = language(q.question)
        gold = q.answer.strip()
        held = Counter(tokens(gold))
        items.append(Item(q.question, gold, gold, "gold"))
        said = PARAPHRASE[lang][k % 2].format(gold=gold.rstrip(".。!！?？ "))
        items.append(Item(q.question, gold, said, "paraphrase"))
        start = next((i for i, f in enumerate(pool) if f is q), -1) + 1
        other = next(
            (f.answer.strip() for f in pool[start:] + pool[:start] if not held.keys() & set(tokens(f.answer))), None
        )
        asked = held.keys() | set(tokens(q.question))
        turn = k % min(3, len(names) or 1)  # alternate among the most used names
        wrong = {
            "other_gold": other,
            "changed": changed(gold, [n for n in names[turn:] + names[:turn] if n.lower() not in asked]),
            "abstention": ABSTENTION[lang],
        }
        for kind, answer in wrong.items():
            if answer is not None and held - Counter(tokens(answer)):  # some gold token is missing: wrong
                items.append(Item(q.question, gold, answer, kind))
    return items


# ---------------------------------------------------------------- the check
def decide(right_correct: int, n_right: int, wrong_correct: int, n_wrong: int) -> tuple[bool, str, float]:
    """Whether the judge's column is reported, from how many of ``n_right`` known-right and ``n_wrong`` known-wrong
    answers it called CORRECT: (reported, the reason when not, the one-sided Fisher p)."""
    if n_right == 0 or n_wrong == 0:
        return False, "the dataset has no question with a gold answer to calibrate the judge on", float("nan")
    p = stats.fisher_greater_p(right_correct, n_right - right_correct, wrong_correct, n_wrong - wrong_correct)
    if wrong_correct > MAX_FALSE_CORRECT * n_wrong:
        return False, f"the judge called {wrong_correct} of {n_wrong} known-wrong answers CORRECT", p
    if not p < CHANCE_P:
        return (
            False,
            f"the judge is no better than chance: it called {right_correct} of {n_right} known-right and "
            f"{wrong_correct} of {n_wrong} known-wrong answers CORRECT (one-sided Fisher p = {p:.2g})",
            p,
        )
    return True, "", p


def calibrate(
    client: LLMClient,
    items: Sequence[Item],
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Judge every item with ``verdict`` and decide (``decide``). Returns the ``judge_calibration`` section of
    results.json: ``reported``, ``reason`` ("" when reported), ``known_right`` / ``known_wrong`` (``n``,
    ``called_correct``), ``by_kind`` (the same per kind), ``accuracy`` (share judged as constructed),
    ``fisher_p``, ``unparsed``, ``errors``, the thresholds, the judge's cost (``calls``, ``tokens_in``,
    ``tokens_out``, ``ms``) and every ``items`` row (question, gold, answer, kind, right, verdict, error)."""
    before = Usage(**vars(client.usage))
    rows = []
    if progress:
        progress("qa: judge calibration", len(items), 0)
    for it in items:
        said, error = verdict(client, it.question, it.gold, it.answer)
        rows.append({**vars(it), "right": it.right, "verdict": said, "error": error})
        if progress:
            progress("qa: judge calibration", 0, 1)
    used = client.usage.since(before)
    by_kind = {
        kind: {
            "n": sum(1 for r in rows if r["kind"] == kind),
            "called_correct": sum(1 for r in rows if r["kind"] == kind and r["verdict"] is True),
        }
        for kind in KINDS
    }
    side = {
        name: {
            "n": sum(by_kind[k]["n"] for k in KINDS if KINDS[k] is right),
            "called_correct": sum(by_kind[k]["called_correct"] for k in KINDS if KINDS[k] is right),
        }
        for name, right in (("known_right", True), ("known_wrong", False))
    }
    kr, kw = side["known_right"], side["known_wrong"]
    reported, reason, p = decide(kr["called_correct"], kr["n"], kw["called_correct"], kw["n"])
    return {
        "reported": reported,
        "reason": reason,
        "questions": len({r["question"] for r in rows}),
        **side,
        "by_kind": by_kind,
        "accuracy": (kr["called_correct"] + kw["n"] - kw["called_correct"]) / len(rows) if rows else 0.0,
        "fisher_p": p,
        "unparsed": sum(1 for r in rows if r["verdict"] is None and not r["error"]),
        "errors": sum(1 for r in rows if r["error"]),
        "max_false_correct": MAX_FALSE_CORRECT,
        "chance_p": CHANCE_P,
        "calls": used.calls,
        "tokens_in": used.tokens_in,
        "tokens_out": used.tokens_out,
        "ms": used.ms,
        "items": rows,
    }


def render_calibration(cal: dict[str, Any] | None) -> str:
    """The report's one line on the judge's calibration: what it was tried on, what it called, and whether its
    column is reported (and why not). ``None``: a run made before the calibration existed (not reported)."""
    if cal is None:
        return "- Judge column not reported: this run predates the judge's calibration check."
    kr, kw, k = cal["known_right"], cal["known_wrong"], cal["by_kind"]
    tried = (
        f"{kw['n']} known-wrong answers (another question's gold {k['other_gold']['n']}, a changed number, date or "
        f'name {k["changed"]["n"]}, "I don\'t know" {k["abstention"]["n"]}) and {kr["n"]} known-right ones (the '
        f"gold {k['gold']['n']}, a paraphrase {k['paraphrase']['n']}) from {cal['questions']} of the dataset's "
        f"questions; {cal['calls']} calls, {cal['ms'] / 1000:.1f} s"
    )
    if not cal["reported"]:
        return f"- Judge column not reported: {cal['reason']}. Calibration: {tried}."
    return (
        f"- Judge calibration: {tried}. The judge called {kw['called_correct']} of {kw['n']} known-wrong and "
        f"{kr['called_correct']} of {kr['n']} known-right answers CORRECT (accuracy {100 * cal['accuracy']:.1f}%, "
        f"one-sided Fisher p = {cal['fisher_p']:.2g}; {cal['unparsed']} unreadable, {cal['errors']} failed): "
        "reported."
    )
