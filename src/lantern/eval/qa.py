"""Answer accuracy (``lantern eval DATASET --qa --llm-base-url URL --llm-model NAME``): does an LLM answer the
questions better after a compaction when Lantern's block is added?

The questions are the main table's lost facts (evidence outside the kept window, answer not in the compacted
context), at most ``--qa-limit`` per history, picked evenly spaced in dataset order (``pick``). Each is answered
once per condition, one LLM call each, temperature 0:

    (a) compacted   the compacted context: the compaction's summary (none for truncation) + the kept turns
    (b) lantern     (a) + Lantern's recovered block (the question as query, the eval's budget; ``Lantern.explain``,
                    as the main table's ``lantern`` row)
    (c) rerank      (a) + LANTERN-Rerank's block (recover/rerank.py: one more LLM call per question)
    (d) full        the whole history, when its transcript has at most ``--qa-context-chars`` characters; else the
                    question is "not applicable" for (d) (counted, never dropped from the other conditions)
    (e) memgpt      (a) + the MemGPT-Faithful block (eval/memgpt.py: memories extracted per turn at write time, LLM-
                    written search queries, Lantern's search over the memories; same budget)

A transcript shows each turn as ``[YYYY-MM-DD HH:MM] text`` (``transcript``); a block sits after the kept turns and
before the question, under "Recovered history" / 【相关历史记录】 (as memory/agent.py places it).

Scoring, no LLM (eval/answers.py): exact match and token F1 after SQuAD's normalization (CJK per character). An
LLM judge (eval/judge.py: given question, gold answer and answer, CORRECT or WRONG; an unreadable verdict counts as
WRONG and is counted) gives a separate column, and only when it passed its calibration first: the same judge call on
answers built from the dataset's own questions whose verdict is known (the gold, a paraphrase; another question's
gold, a changed number, date or name, "I don't know"). A judge that calls known-wrong answers CORRECT, or is no better
than chance, grades no answer: the report says why in one line and keeps EM and F1.

Questions without an answer (LoCoMo category 5, adversarial: the gold is empty) are reported apart: an answer
counts as correct when it abstains (``abstained``: "no answer", "not mentioned", "I don't know", 没有答案, ...),
and they get no judge call. Multiple-choice questions (MemDaily: four options, a gold letter) ask the LLM to choose a
letter (a JSON ``{"choice": "B"}``; ``parse_letter`` reads any shape) and are scored by the letter: no EM/F1, no
judge. An LLM call that fails (timeout, HTTP error, a prompt longer than the model's context) scores wrong and is
counted in the ``errors`` column.

Statistics (eval/stats.py): for each pair of conditions, on the questions where both apply, the difference in
percentage points with its cluster bootstrap 95% CI (histories resampled), the paired Wilcoxon signed-rank test
and Cohen's d over the per-history means, the exact McNemar test per question (binary scores), Holm-corrected
across the pairs of one table. Costs per condition: LLM calls, tokens in / out as the endpoint reports them, and
wall time (retrieval + its LLM calls; the judge's cost is reported apart).

Prompts (ours; English or Chinese by the question's script, recover/rerank.py ``language``):

- answer, system ``ANSWER[lang]``; user: the context sections, then ``Question: ...`` and ``Short answer:``
- choice, system ``CHOICE[lang]``; user: the context sections, the question and the lines ``A. ...`` to ``D. ...``
- judge: eval/judge.py
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lantern.eval import judge as judging
from lantern.eval import stats
from lantern.eval.answers import abstained, enum_schema, exact_match, parse_letter, token_f1
from lantern.eval.datasets import SEPARATE_CATEGORIES, Fact, History
from lantern.llm import LLMClient, LLMError, LLMSettings, Usage
from lantern.model import Turn
from lantern.recover.rerank import language

__all__ = [
    "ANSWER",
    "CHOICE",
    "CONDITIONS",
    "QAOptions",
    "compare_qa",
    "pick",
    "render_qa",
    "summarize_qa",
    "transcript",
]

CONDITIONS = ("compacted", "lantern", "rerank", "full", "memgpt")
LABELS = {
    "compacted": "(a) compacted only",
    "lantern": "(b) compacted + Lantern",
    "rerank": "(c) compacted + LANTERN-Rerank",
    "full": "(d) full history",
    "memgpt": "(e) compacted + MemGPT-Faithful",
}
PAIRS = (  # (x, y): x − y
    ("lantern", "compacted"),
    ("rerank", "lantern"),
    ("rerank", "compacted"),
    ("lantern", "memgpt"),
    ("rerank", "memgpt"),
    ("memgpt", "compacted"),
    ("full", "lantern"),
    ("full", "compacted"),
)
ANSWER_TOKENS = 32  # max tokens of a free-text answer ("a few words")
CHOICE_TOKENS = 16  # {"choice": "B"} and some room
DEFAULT_CONTEXT_CHARS = 12_000  # (d) applies when the transcript fits: ~3k tokens of English (a 4k-token model)
DEFAULT_TIMEOUT_S = 120.0  # a local model on a busy machine takes seconds per answer

ANSWER = {
    "en": (
        "Answer the question about the conversation below in a few words, using only what the conversation says. "
        'If it does not say, answer "no answer".'
    ),
    "zh": "根据下面的对话内容，用几个字回答问题，只用对话中说过的内容。如果对话中没有提到，回答“没有答案”。",
}
CHOICE = {
    "en": (
        "Answer the question about the conversation below by choosing one of the options. "
        'Answer with JSON only: {"choice": "A"}.'
    ),
    "zh": '根据下面的对话内容，从选项中选出问题的答案。只用 JSON 回答：{"choice": "A"}。',
}
_SECTIONS = {
    "en": {
        "conversation": "Conversation (latest turns):",
        "full": "Conversation:",
        "recovered": "Recovered history:",
        "question": "Question: {q}",
        "options": "Options:",
        "short": "Short answer:",
    },
    "zh": {
        "conversation": "对话（最近的轮次）：",
        "full": "对话：",
        "recovered": "【相关历史记录】",
        "question": "问题：{q}",
        "options": "选项：",
        "short": "简短回答：",
    },
}


# ---------------------------------------------------------------- prompts
def transcript(turns: Sequence[Turn]) -> str:
    """The turns as the model reads them, one per line: ``[YYYY-MM-DD HH:MM] text`` (no time: the text alone),
    whitespace runs inside a turn folded."""
    lines = []
    for t in turns:
        text = " ".join(t.text.split())
        lines.append(f"[{t.time.strftime('%Y-%m-%d %H:%M')}] {text}" if t.time else text)
    return "\n".join(lines)


def context_text(lang: str, summary: str, kept: str, block: str | None = None, full: bool = False) -> str:
    """The context sections of one prompt: the compaction's ``summary`` (when any), the ``kept`` transcript under
    its title (the "full" title for condition (d)), then the recovered ``block`` under its title (when given)."""
    s = _SECTIONS[lang]
    parts = [summary.strip()] if summary.strip() else []
    parts.append(f"{s['full' if full else 'conversation']}\n{kept}")
    if block is not None:
        parts.append(f"{s['recovered']}\n{block}")
    return "\n\n".join(parts)


def answer_messages(question: str, context: str, choices: dict[str, str] | None = None) -> list[dict[str, str]]:
    """The chat messages asking ``question`` over ``context``: free text, or a letter among ``choices``."""
    lang = language(question)
    s = _SECTIONS[lang]
    if choices:
        options = "\n".join(f"{k}. {v}" for k, v in sorted(choices.items()))
        user = f"{context}\n\n{s['question'].format(q=question)}\n{s['options']}\n{options}"
        return [{"role": "system", "content": CHOICE[lang]}, {"role": "user", "content": user}]
    user = f"{context}\n\n{s['question'].format(q=question)}\n{s['short']}"
    return [{"role": "system", "content": ANSWER[lang]}, {"role": "user", "content": user}]


def pick(n: int, limit: int | None) -> list[int]:
    """Indices of at most ``limit`` of ``n`` items, evenly spaced from the first (``floor(i * n / limit)``), so a
    slice spans the whole history rather than its first questions (LoCoMo lists its questions by category)."""
    if limit is None or limit >= n:
        return list(range(n))
    return sorted({math.floor(i * n / limit) for i in range(limit)})


# ---------------------------------------------------------------- one question
@dataclass
class QAOptions:
    """What ``--qa`` runs with: the LLM ``settings``, ``limit`` questions per history (None: all),
    ``context_chars`` for condition (d), the ``command`` to name in the report, and ``calibration``: how many of
    the dataset's questions the judge's calibration is built from (eval/judge.py; up to 5 known answers each)."""

    settings: LLMSettings
    limit: int | None = None
    context_chars: int = DEFAULT_CONTEXT_CHARS
    command: str = ""
    calibration: int = judging.CALIBRATION_QUESTIONS


def ask(client: LLMClient, question: str, context: str, choices: dict[str, str] | None) -> tuple[str, str | None]:
    """One answer: (its text, the error when the call failed: then the text is "")."""
    messages = answer_messages(question, context, choices)
    try:
        if choices:
            return client.chat(
                messages, max_tokens=CHOICE_TOKENS, json_schema=enum_schema("choice", sorted(choices))
            ).text, None
        return client.chat(messages, max_tokens=ANSWER_TOKENS).text, None
    except LLMError as e:
        return "", str(e)


def score(row: dict, fact: Fact, choices: dict[str, str] | None) -> None:
    """Fill a row's scores from its ``answer``: ``letter`` and ``correct`` (choice); ``em``, ``f1`` and, for a
    question without answer, ``correct`` = abstained (free text; the judge fills ``correct`` for the others)."""
    answer = row["answer"]
    if choices:
        row["letter"] = parse_letter(answer, choices) if not row["error"] else None
        row["correct"] = row["letter"] is not None and row["letter"] == fact.gold_choice
        return
    row["em"] = not row["error"] and exact_match(answer, fact.answer)
    row["f1"] = 0.0 if row["error"] else token_f1(answer, fact.answer)
    if not fact.answer.strip():
        row["correct"] = not row["error"] and abstained(answer)


def judge(client: LLMClient, row: dict, fact: Fact, question: str) -> None:
    """The LLM judge's verdict on a free-text row with a gold answer (``judge.verdict``): ``judge`` (True / False /
    None unreadable or failed), ``correct``, ``judge_unparsed`` or ``judge_error``, and its cost (``judge_calls``,
    ``judge_tokens_in`` / ``_out``, ``judge_ms``). No call for an empty or failed answer (WRONG)."""
    before = Usage(**vars(client.usage))
    verdict: bool | None = False
    if row["answer"].strip() and not row["error"]:
        verdict, error = judging.verdict(client, question, fact.answer, row["answer"])
        if error:
            row["judge_error"] = error
        else:
            row["judge_unparsed"] = verdict is None
    used = client.usage.since(before)
    row.update(
        judge=verdict,
        correct=bool(verdict),
        judge_calls=used.calls,
        judge_tokens_in=used.tokens_in,
        judge_tokens_out=used.tokens_out,
        judge_ms=used.ms,
    )


# ---------------------------------------------------------------- a history
def run_history(
    client: LLMClient,
    p,
    cases: Sequence,
    pool,
    comp,
    system,
    budget: int,
    options: QAOptions,
    extractor,
    embedder,
    progress: Callable[[str, int, int], None] | None = None,
    judged: bool = True,
) -> tuple[list[dict], dict]:
    """Every condition for ``cases`` (one history's picked lost facts): rows (one per question and condition) and
    the history's notes (MemGPT memories, rerank fallbacks). ``p``: the eval's Prepared history; ``pool``: its
    candidates; ``comp``: its Compaction; ``system``: the main table's ``lantern`` System. ``judged``: the judge
    passed its calibration and grades the free-text answers (else their ``correct`` is None)."""
    from lantern.eval.memgpt import MemoryStore, write_queries
    from lantern.eval.systems import run_system

    history: History = p.history
    facts = {f.id: f for f in history.facts}
    kept = set(comp.kept)
    kept_text = transcript([p.turns[i] for i in comp.kept])
    full_text = transcript(p.turns)
    full_fits = len(full_text) <= options.context_chars
    if progress:
        progress("qa: MemGPT write-time extraction", len(p.turns), 0)
    extracted = []
    for t in p.turns:
        extracted.append((t, extractor(t).memories))
        if progress:
            progress("qa: MemGPT write-time extraction", 0, 1)
    note: dict[str, Any] = {
        "memories": 0,
        "turns_outside": len(p.turns) - len(kept),
        "rerank_fallbacks": 0,
        "query_fallbacks": 0,
        "full_chars": len(full_text),
    }
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="lantern-memgpt-") as tmp:
        store = MemoryStore(
            Path(tmp) / "memories.db", embedder, [x for i, x in enumerate(extracted) if i not in kept], history.id
        )
        note["memories"] = store.count
        try:
            for case in cases:
                fact = facts[case.fact_id]
                choices = fact.choices or None
                lang = language(case.question)
                base = {
                    "history": history.id,
                    "fact": case.fact_id,
                    "category": case.category,
                    "question": case.question,
                    "gold": fact.gold_choice if choices else fact.answer,
                }
                for condition in CONDITIONS:
                    row = {**base, "condition": condition, "applicable": True, "error": None, "block_chars": 0}
                    before = Usage(**vars(client.usage))
                    start = time.perf_counter()
                    block = None
                    if condition == "lantern":
                        block = run_system(system, p.lantern, case.question, pool, budget).text
                    elif condition == "rerank":
                        p.lantern.config = system.config
                        rec = p.lantern.explain(
                            case.question,
                            session=pool.session,
                            budget=budget,
                            exclude=pool.excluded,
                            as_of=pool.as_of,
                            rerank=True,
                            llm=client,
                        )
                        block = rec.text
                        row["reranked"] = rec.reranked
                        note["rerank_fallbacks"] += 0 if rec.reranked else 1
                    elif condition == "memgpt":
                        queries, _, fallback = write_queries(client, case.question)
                        block, row["memories_packed"] = store.search(queries, budget)
                        row["queries"] = queries
                        note["query_fallbacks"] += 1 if fallback else 0
                    if condition == "full" and not full_fits:
                        row.update(applicable=False, answer="", correct=False)
                    else:
                        context = (
                            context_text(lang, "", full_text, full=True)
                            if condition == "full"
                            else context_text(lang, comp.summary, kept_text, block)
                        )
                        row["answer"], row["error"] = ask(client, case.question, context, choices)
                        row["context_chars"] = len(context)
                    row["block_chars"] = len(block or "")
                    used = client.usage.since(before)
                    row.update(calls=used.calls, tokens_in=used.tokens_in, tokens_out=used.tokens_out)
                    row["ms"] = (time.perf_counter() - start) * 1000
                    if row["applicable"]:
                        score(row, fact, choices)
                        if not choices and fact.answer.strip():
                            if judged:
                                judge(client, row, fact, case.question)
                            else:
                                row["correct"] = None  # the judge failed its calibration: no verdict
                    rows.append(row)
                if progress:
                    progress("qa: questions", 0, 1)
        finally:
            store.close()
    return rows, note


# ---------------------------------------------------------------- tables
def kind_of(rows: Sequence[dict]) -> str:
    """``"choice"`` when the rows are multiple-choice questions (they carry a ``letter``), else ``"free"``."""
    return "choice" if any("letter" in r for r in rows) else "free"


def judged(rows: Sequence[dict]) -> bool:
    """False when the judge graded no free-text answer because it failed its calibration (``correct`` is None)."""
    return not any(r.get("correct", False) is None for r in rows)


def _headline(r: dict) -> bool:
    return r["category"] not in SEPARATE_CATEGORIES


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def summarize_qa(rows: Sequence[dict]) -> dict[str, dict]:
    """Per condition over the headline questions where it applies: ``n``, ``not_applicable`` (questions of any
    category it does not apply to), ``correct`` (the judge's share for free text, None when the judge failed its
    calibration; the letter's share for choices), ``em`` / ``f1`` (free text), ``unparsed`` (judge or letter
    unreadable), ``errors`` (failed answer calls), and its costs (``calls``, ``tokens_in``, ``tokens_out``, ``ms``;
    the judge's apart: ``judge_calls`` ...); plus the questions reported apart (``separate``: n and the share that
    abstained, per category)."""
    out: dict[str, dict] = {}
    choice = kind_of(rows) == "choice"
    graded = judged(rows)
    for c in CONDITIONS:
        mine = [r for r in rows if r["condition"] == c]
        head = [r for r in mine if _headline(r) and r["applicable"]]
        s: dict[str, Any] = {
            "n": len(head),
            "not_applicable": sum(1 for r in mine if not r["applicable"]),
            "correct": _mean([float(r["correct"]) for r in head]) if graded else None,
            "errors": sum(1 for r in mine if r["error"]),
            "block_chars": _mean([r["block_chars"] for r in mine if r["applicable"]]),
        }
        if choice:
            s["unparsed"] = sum(1 for r in head if r.get("letter") is None and not r["error"])
        else:
            s["em"] = _mean([float(r["em"]) for r in head])
            s["f1"] = _mean([r["f1"] for r in head])
            s["unparsed"] = sum(1 for r in head if r.get("judge_unparsed"))
        for k in ("calls", "tokens_in", "tokens_out", "ms"):
            s[k] = sum(r.get(k, 0) for r in mine)
        for k in ("judge_calls", "judge_tokens_in", "judge_tokens_out", "judge_ms"):
            s[k] = sum(r.get(k, 0) for r in mine)
        if c == "rerank":
            s["reranked"] = sum(1 for r in mine if r.get("reranked"))
        separate: dict[str, dict] = {}
        for cat in sorted({r["category"] for r in mine if not _headline(r)}):
            rs = [r for r in mine if r["category"] == cat and r["applicable"]]
            separate[cat] = {"n": len(rs), "abstained": _mean([float(r["correct"]) for r in rs])}
        s["separate"] = separate
        out[c] = s
    return out


def metrics_of(kind: str, graded: bool = True) -> list[tuple[str, str, bool]]:
    """(table name, row key, binary) of the compared metrics: the judge (when ``graded``: it passed its
    calibration), F1 and EM for free text; the letter for multiple choice."""
    if kind == "choice":
        return [("choice accuracy", "correct", True)]
    return ([("judge", "correct", True)] if graded else []) + [("F1", "f1", False), ("EM", "em", True)]


def compare_qa(rows: Sequence[dict], pairs: Sequence[tuple[str, str]] = PAIRS) -> dict[str, list[dict]]:
    """Per metric (``metrics_of``), one table: each pair (x, y) of conditions on the headline questions where both
    apply: x − y in percentage points with its cluster bootstrap 95% CI, Wilcoxon p and Cohen's d over the
    per-history means, exact McNemar (x only / y only / p) for binary metrics; Holm across the pairs of the table.
    A pair with no common question is left out."""
    by = {(r["condition"], r["fact"]): r for r in rows if _headline(r) and r["applicable"]}
    tables: dict[str, list[dict]] = {}
    for name, key, binary in metrics_of(kind_of(rows), judged(rows)):
        table = []
        for x, y in pairs:
            facts = [f for (c, f) in by if c == x and (y, f) in by]
            if not facts:
                continue
            a = [float(by[(x, f)][key]) for f in facts]
            b = [float(by[(y, f)][key]) for f in facts]
            groups = [by[(x, f)]["history"] for f in facts]
            histories = list(dict.fromkeys(groups))
            ha = [_mean([v for v, g in zip(a, groups) if g == h]) for h in histories]
            hb = [_mean([v for v, g in zip(b, groups) if g == h]) for h in histories]
            diff, low, high = stats.bootstrap_ci_clustered(a, b, groups)
            row = {
                "x": x,
                "y": y,
                "n_questions": len(facts),
                "n_histories": len(histories),
                "x_mean": _mean(a),
                "y_mean": _mean(b),
                "diff_pp": diff,
                "ci_low_pp": low,
                "ci_high_pp": high,
                "wilcoxon_p": stats.wilcoxon_p(ha, hb),
                "cohens_d": stats.cohens_d_paired(ha, hb),
                "min_wilcoxon_p": 2.0 / 2 ** len(histories),
            }
            if binary:
                row["mcnemar_x_only"], row["mcnemar_y_only"], row["mcnemar_p"] = stats.mcnemar_exact(
                    [bool(v) for v in a], [bool(v) for v in b]
                )
            table.append(row)
        for k in ("wilcoxon_p", "mcnemar_p"):
            if table and k in table[0]:
                for row, adj in zip(table, stats.holm([r[k] for r in table])):
                    row[k + "_holm"] = adj
        tables[name] = table
    return tables


# ---------------------------------------------------------------- report
def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _p(p: float) -> str:
    if p != p:
        return "—"
    return f"{p:.2g}" if p >= 0.001 else f"{p:.1e}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def render_qa(qa: dict[str, Any]) -> list[str]:
    """The report's answer-accuracy section, from ``results["qa"]`` alone."""
    run, llm, cond = qa["run"], qa["llm"], qa["conditions"]
    choice = qa["kind"] == "choice"
    calibration = qa.get("judge_calibration")  # absent: a run made before the calibration check (not reported)
    graded = not choice and bool(calibration and calibration["reported"])
    n_q = qa["questions"]
    out = [
        "",
        "## Answer accuracy (--qa)",
        "",
        f"- Model `{llm['model']}` at `{llm['base_url']}` (JSON mode {llm['json_mode']}; answers at most "
        f"{llm['answer_tokens']} tokens; temperature 0). Ran {run['date']} on {run['cpus']} CPUs, load average "
        f"{run['load_start']} at the start and {run['load_end']} at the end; {run['wall_s']:.0f} s in all.",
        f"- Command: `{run['command']}`" if run.get("command") else "- Command: not recorded.",
        f"- Questions: {n_q} lost facts, at most {qa['limit'] if qa['limit'] else 'all'} per history, evenly "
        f"spaced in dataset order ({', '.join(f'{h} {n}' for h, n in qa['per_history'].items())}). Budget "
        f"{qa['budget']:,} characters for (b), (c) and (e); (d) applies when the history's transcript has at most "
        f"{qa['context_chars']:,} characters (" + ", ".join(f"{h}: {c:,}" for h, c in qa["full_chars"].items()) + ").",
        "- "
        + (
            "Multiple choice: the model picks a letter (JSON), scored by the letter; no judge."
            if choice
            else "Free text: EM and F1 after SQuAD normalization (CJK per character), and an LLM judge (CORRECT / "
            "WRONG, the same model) as a separate column when it passes its calibration on known answers; an "
            "unreadable verdict counts as WRONG."
        )
        + " A failed call scores wrong (errors column). Prompts: `lantern.eval.qa` and `lantern.eval.memgpt`.",
        "",
    ]
    head = ["condition", "n", "n/a"]
    head += ["accuracy", "unparsed"] if choice else (["judge"] if graded else []) + ["EM", "F1"]
    head += ["judge unparsed"] if graded else []
    head += ["errors", "LLM calls", "tokens in", "tokens out", "wall s", "block chars"]
    rows = []
    for c in CONDITIONS:
        s = cond[c]
        r = [LABELS[c], str(s["n"]), str(s["not_applicable"])]
        r += (
            [_pct(s["correct"]), str(s["unparsed"])]
            if choice
            else ([_pct(s["correct"])] if graded else [])
            + [_pct(s["em"]), f"{s['f1']:.3f}"]
            + ([str(s["unparsed"])] if graded else [])
        )
        r += [str(s["errors"]), str(s["calls"]), f"{s['tokens_in']:,}", f"{s['tokens_out']:,}", f"{s['ms'] / 1000:.1f}"]
        r.append(f"{s['block_chars']:,.0f}")
        rows.append(r)
    out += _table(head, rows)
    out += [""]
    rr = cond["rerank"]
    out.append(
        f"- (c): {rr['reranked']} of {rr['n'] + sum(v['n'] for v in rr['separate'].values())} blocks packed in the "
        "LLM's order; the others kept the fused order (the rerank answer was unusable). Its LLM calls include the "
        "rerank call."
    )
    mem = qa["memgpt"]
    out.append(
        f"- (e): {mem['memories']:,} memories from the {mem['turns_outside']:,} turns outside the kept windows, "
        "searched with Lantern's hybrid search (`Lantern.search`); write-time extraction over all "
        f"{mem['turns']:,} archived turns, {mem['calls']:,} calls ({mem['from_cache']:,} read from the cache now, "
        f"{mem['failed']} failed), "
        f"{mem['tokens_in']:,} tokens in, {mem['tokens_out']:,} out, {mem['ms'] / 1000:.0f} s as measured when made "
        f"(not in the table); {mem['query_fallbacks']} questions searched with the question itself (no query "
        "written). Its LLM calls include the query-writing call."
    )
    if not choice:
        out.append(judging.render_calibration(calibration))
    if graded:
        j = {
            k: sum(cond[c][k] for c in CONDITIONS)
            for k in ("judge_calls", "judge_tokens_in", "judge_tokens_out", "judge_ms")
        }
        out.append(
            f"- Judge: {j['judge_calls']} calls, {j['judge_tokens_in']:,} tokens in, {j['judge_tokens_out']:,} out, "
            f"{j['judge_ms'] / 1000:.1f} s (not in the table)."
        )
    separate = sorted({cat for c in CONDITIONS for cat in cond[c]["separate"]})
    if separate:
        out += [
            "",
            f"Questions without an answer ({', '.join(separate)}), reported apart: the share of answers that "
            'abstained ("no answer", "not mentioned", ...), which is the correct answer to them.',
            "",
        ]
        out += _table(
            ["condition"] + [f"{cat} abstained" for cat in separate] + ["n"],
            [
                [LABELS[c]]
                + [_pct(cond[c]["separate"].get(cat, {}).get("abstained", 0.0)) for cat in separate]
                + [str(sum(v["n"] for v in cond[c]["separate"].values()))]
                for c in CONDITIONS
            ],
        )
    for metric, table in qa["comparisons"].items():
        if not table or (metric == "judge" and not graded):
            continue
        n_h = max(r["n_histories"] for r in table)
        out += [
            "",
            f"### Paired comparisons: {metric}",
            "",
            f"x − y in percentage points{' (F1 × 100)' if metric == 'F1' else ''} on the headline questions where "
            "both apply, cluster bootstrap 95% CI (histories resampled); Wilcoxon signed-rank and Cohen's d over "
            f"the per-history means (smallest attainable p with {n_h} "
            f"histor{'y' if n_h == 1 else 'ies'}: {_p(2.0 / 2**n_h)})"
            + ("; exact McNemar per question" if "mcnemar_p" in table[0] else "")
            + "; Holm-corrected across this table.",
            "",
        ]
        header = ["x − y", "n", "x", "y", "Δ pp", "95% CI", "Wilcoxon p", "Holm p", "Cohen's d"]
        if "mcnemar_p" in table[0]:
            header += ["x only / y only", "McNemar p", "Holm p"]
        body = []
        for r in table:
            fmt = (lambda v: f"{v:.3f}") if metric == "F1" else _pct
            line = [
                f"{r['x']} − {r['y']}",
                str(r["n_questions"]),
                fmt(r["x_mean"]),
                fmt(r["y_mean"]),
                f"{r['diff_pp']:+.1f}",
                f"[{r['ci_low_pp']:+.1f}, {r['ci_high_pp']:+.1f}]",
                _p(r["wilcoxon_p"]),
                _p(r["wilcoxon_p_holm"]),
                f"{r['cohens_d']:+.2f}",
            ]
            if "mcnemar_p" in r:
                line += [f"{r['mcnemar_x_only']}/{r['mcnemar_y_only']}", _p(r["mcnemar_p"]), _p(r["mcnemar_p_holm"])]
            body.append(line)
        out += _table(header, body)
    return out


# ---------------------------------------------------------------- the whole run
def run(
    dataset,
    folder: Path,
    memo,
    system,
    compaction: str,
    keep: int,
    budget: int,
    options: QAOptions,
    cache_dir: Path,
    summarizer=None,
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[list[dict], dict[str, Any]]:
    """Answer accuracy over every history of ``dataset`` (the eval's selection): its cached stores in ``folder``
    (opened with ``memo``), its compaction (``compaction``, ``keep`` turns), the main table's ``lantern``
    ``system`` and ``budget``. MemGPT memories are cached under ``cache_dir / "memgpt"``. Returns (rows, the
    ``qa`` section of results.json)."""
    import os
    from datetime import datetime, timezone

    from lantern.eval.cases import cases_of, open_history
    from lantern.eval.compaction import compact
    from lantern.eval.memgpt import Extractor

    start = time.perf_counter()
    load_start = [round(x, 2) for x in os.getloadavg()]
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rows: list[dict] = []
    per_history: dict[str, int] = {}
    notes: dict[str, dict] = {}
    calibration = None
    with LLMClient(options.settings) as client:
        facts = [f for h in dataset.histories for f in h.facts]
        if any(not f.choices for f in facts):  # free text: calibrate the judge before it grades any answer
            gradable = [f for f in facts if judging.gradable(f)]
            drawn = [gradable[i] for i in pick(len(gradable), options.calibration)]
            calibration = judging.calibrate(client, judging.calibration_set(drawn, facts), progress)
        graded = calibration is None or calibration["reported"]
        extractor = Extractor(client, cache_dir / "memgpt")
        for h in dataset.histories:
            p = open_history(h, folder, memo)
            try:
                cases, pools, _ = cases_of({h.id: p}, [h], compaction, lambda _: keep, summarizer)
                picked = [cases[i] for i in pick(len(cases), options.limit)]
                per_history[h.id] = len(picked)
                if not picked:
                    continue
                if progress:
                    progress("qa: questions", len(picked), 0)
                comp = compact(compaction, p.turns, keep, h.summaries, summarizer)
                rs, notes[h.id] = run_history(
                    client,
                    p,
                    picked,
                    pools[h.id],
                    comp,
                    system,
                    budget,
                    options,
                    extractor,
                    memo.inner,
                    progress,
                    judged=graded,
                )
                rows.extend(rs)
            finally:
                p.lantern.close()
        extraction = extractor.describe()
    settings = options.settings
    section = {
        "kind": kind_of(rows),
        "llm": {
            **settings.describe(),
            "json_mode": settings.json_mode,
            "answer_tokens": ANSWER_TOKENS if kind_of(rows) == "free" else CHOICE_TOKENS,
            "timeout_s": settings.timeout_s,
        },
        "run": {
            "date": date,
            "command": options.command,
            "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "load_start": load_start,
            "load_end": [round(x, 2) for x in os.getloadavg()],
            "wall_s": time.perf_counter() - start,
        },
        "limit": options.limit,
        "context_chars": options.context_chars,
        "budget": budget,
        "questions": sum(per_history.values()),
        "per_history": per_history,
        "full_chars": {h: n["full_chars"] for h, n in notes.items()},
        "conditions": summarize_qa(rows),
        **({"judge_calibration": calibration} if calibration is not None else {}),
        "comparisons": compare_qa(rows),
        "memgpt": {
            **extraction,
            "memories": sum(n["memories"] for n in notes.values()),
            "turns_outside": sum(n["turns_outside"] for n in notes.values()),
            "query_fallbacks": sum(n["query_fallbacks"] for n in notes.values()),
            "search": "Lantern.search (hybrid RRF) over a store of the memories",
        },
    }
    return rows, section
