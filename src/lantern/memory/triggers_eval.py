"""A labelled set for the retrieval trigger (``memory/triggers.py``), built from the shared datasets, and its scores.

Labels come from where a text sits, not from reading it (our choice):

- positive (asks about earlier conversation): LoCoMo QA questions (about past sessions; most are third-person and
  carry no back-reference word, so a cue-based trigger misses them by construction), MemDaily questions (Chinese,
  about earlier messages), MemoryBank probing questions (en + cn);
- negative (an ordinary turn): LoCoMo dialogue utterances, MemDaily trajectory messages, MemoryBank user queries
  (en + cn), aider user messages (``#### `` lines of chat-history.md). Some ordinary turns do refer back ("remember
  when we ..."): such a turn counts as a false positive here, so measured precision is a lower bound.
- drafts (the low-confidence path): MemoryBank assistant responses (en + cn) are ordinary answers, all negative; the
  datasets hold no labelled low-confidence drafts, so the draft path reports only how often it fires on ordinary
  answers (its false-fire rate); its positives are the hand-written cases of tests/test_triggers.py.

Every text is deduplicated within its source and assigned to the ``tune`` or ``report`` half by a fixed hash of
the text (blake2b, 8 bytes, even = tune), so the split never changes between runs or machines.
The data is read from ``../shared/data`` (read-only) and never copied.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lantern.memory.triggers import back_references, low_confidence, should_recover

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "data"

# source -> (dataset, language, label, kind)
SOURCES: dict[str, tuple[str, str, bool, str]] = {
    "locomo-qa": ("LoCoMo", "en", True, "question"),
    "locomo-turns": ("LoCoMo", "en", False, "question"),
    "memorybank-probe-en": ("MemoryBank-en", "en", True, "question"),
    "memorybank-user-en": ("MemoryBank-en", "en", False, "question"),
    "aider-user": ("aider", "en", False, "question"),
    "memdaily-q": ("MemDaily", "zh", True, "question"),
    "memdaily-msgs": ("MemDaily", "zh", False, "question"),
    "memorybank-probe-cn": ("MemoryBank-cn", "zh", True, "question"),
    "memorybank-user-cn": ("MemoryBank-cn", "zh", False, "question"),
    "memorybank-reply-en": ("MemoryBank-en", "en", False, "draft"),
    "memorybank-reply-cn": ("MemoryBank-cn", "zh", False, "draft"),
}


@dataclass(frozen=True)
class Item:
    source: str
    text: str

    @property
    def dataset(self) -> str:
        return SOURCES[self.source][0]

    @property
    def lang(self) -> str:
        return SOURCES[self.source][1]

    @property
    def label(self) -> bool:
        return SOURCES[self.source][2]

    @property
    def kind(self) -> str:
        return SOURCES[self.source][3]

    @property
    def split(self) -> str:
        return split_of(self.text)


def split_of(text: str) -> str:
    """``tune`` or ``report``, by a fixed hash of the text."""
    h = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return "tune" if h[-1] % 2 == 0 else "report"


def available(root: Path = SHARED) -> bool:
    return (root / "locomo" / "locomo10.json").is_file() and (root / "memdaily" / "messages_and_QAs").is_dir()


def _raw(root: Path) -> Iterator[tuple[str, str]]:
    locomo = root / "locomo" / "locomo10.json"
    if locomo.is_file():
        for sample in json.loads(locomo.read_text(encoding="utf-8")):
            for qa in sample.get("qa", []):
                yield "locomo-qa", str(qa.get("question", ""))
            conv = sample.get("conversation", {})
            for key, turns in conv.items():
                if re.fullmatch(r"session_\d+", key) and isinstance(turns, list):
                    for t in turns:
                        yield "locomo-turns", str(t.get("text", ""))
    memdaily = root / "memdaily" / "messages_and_QAs"
    if memdaily.is_dir():
        for path in sorted(memdaily.glob("*.json")):
            for traj in json.loads(path.read_text(encoding="utf-8")):
                for m in traj.get("message_list", []):
                    yield "memdaily-msgs", str(m.get("message", ""))
                for q in traj.get("question_list", []):
                    yield "memdaily-q", str(q.get("question", ""))
    for lang in ("en", "cn"):
        probe = root / "memorybank" / lang / f"probing_questions_{lang}.jsonl"
        if probe.is_file():
            for line in probe.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    for questions in json.loads(line).values():
                        for q in questions:
                            yield f"memorybank-probe-{lang}", str(q)
        bank = root / "memorybank" / lang / f"memory_bank_{lang}.json"
        if bank.is_file():
            for user in json.loads(bank.read_text(encoding="utf-8")).values():
                for day in (user.get("history") or {}).values():
                    for turn in day:
                        yield f"memorybank-user-{lang}", str(turn.get("query", ""))
                        yield f"memorybank-reply-{lang}", str(turn.get("response", ""))
    aider = root / "aider_chat_history" / "chat-history.md"
    if aider.is_file():
        for line in aider.read_text(encoding="utf-8").splitlines():
            if line.startswith("#### "):
                yield "aider-user", line[5:]


def load_items(root: Path = SHARED) -> list[Item]:
    """Every labelled text, deduplicated within its source (a text that is both a positive and a negative somewhere
    keeps both labels: it is ambiguous in the data, and counted as such)."""
    seen: set[tuple[str, str]] = set()
    items: list[Item] = []
    for source, text in _raw(root):
        text = text.strip()
        if not text or (source, text) in seen:
            continue
        seen.add((source, text))
        items.append(Item(source, text))
    return items


def fires(item: Item) -> list[str]:
    """The reasons the trigger gives for this item on its own path (question or draft)."""
    return back_references(item.text) if item.kind == "question" else low_confidence(item.text)


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    def add(self, label: bool, fired: bool) -> None:
        if label and fired:
            self.tp += 1
        elif label:
            self.fn += 1
        elif fired:
            self.fp += 1
        else:
            self.tn += 1

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else float("nan")

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else float("nan")

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r and p == p and r == r else float("nan")

    @property
    def fire_rate(self) -> float:
        return (self.tp + self.fp) / self.n if self.n else float("nan")


@dataclass
class Evaluation:
    split: str
    by_source: dict[str, Score]
    by_dataset: dict[str, Score]
    by_lang: dict[str, Score]
    overall: Score
    by_cue: dict[str, Score]  # per cue: tp = fired on a positive, fp = fired on a negative
    latency_us: list[float]
    examples: dict[str, list[str]]  # "fp:<cue>" / "fn:<source>" -> texts


def evaluate(items: list[Item], split: str = "report", timing: bool = True, examples: int = 0) -> Evaluation:
    """Score the question path (back-reference cues) over ``items`` of ``split`` (``tune``, ``report``, ``all``).
    Draft items are scored in ``by_source`` only (their false-fire rate), not in the P/R/F1 aggregates."""
    ev = Evaluation(split, {}, {}, {}, Score(), {}, [], {})
    for item in items:
        if split != "all" and item.split != split:
            continue
        if timing:  # fastest of 3 calls, to drop scheduler noise
            best = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                if item.kind == "question":
                    should_recover(item.text)
                else:
                    should_recover("", draft=item.text)
                best = min(best, time.perf_counter() - t0)
            ev.latency_us.append(best * 1e6)
        reasons = fires(item)
        fired = bool(reasons)
        ev.by_source.setdefault(item.source, Score()).add(item.label, fired)
        if item.kind != "question":
            for r in reasons:
                ev.by_cue.setdefault(r, Score()).add(False, True)
            if examples and fired:
                _example(ev, f"fp:{reasons[0]}", item.text, examples)
            continue
        ev.by_dataset.setdefault(item.dataset, Score()).add(item.label, fired)
        ev.by_lang.setdefault(item.lang, Score()).add(item.label, fired)
        ev.overall.add(item.label, fired)
        for r in reasons:
            ev.by_cue.setdefault(r, Score()).add(item.label, True)
        if examples and fired and not item.label:
            _example(ev, f"fp:{reasons[0]}", item.text, examples)
        if examples and item.label and not fired:
            _example(ev, f"fn:{item.source}", item.text, examples)
    return ev


def _example(ev: Evaluation, key: str, text: str, limit: int) -> None:
    bucket = ev.examples.setdefault(key, [])
    if len(bucket) < limit:
        bucket.append(text if len(text) <= 160 else text[:157] + "...")
