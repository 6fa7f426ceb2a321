"""Evaluation datasets: conversations (``History``) with questions whose evidence is a set of message ids (``Fact``).

Every loader returns a ``Dataset`` of histories. Each message carries its evidence id in ``meta["dia_id"]`` (the
chunker merges it into the archived entry's ``meta["dia_ids"]``), so evidence resolves to archived turns the
same way for every dataset.

- LoCoMo (Maharana et al., ACL 2024; ``locomo10.json``): one history per sample; QA with turn-level ``evidence``
  dia ids. Multi-id strings (``"D8:6; D9:17"``) are split on ``;``, ``,`` and whitespace; ids that resolve to no
  turn are counted (``unresolved``), never fatal. Categories 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
  5 adversarial (no answer; reported separately). Split: samples 1–5 of the file = ``tune``, 6–10 = ``report``.
- MemDaily (Zhang et al. 2024, MemSim; ``messages_and_QAs/*.json``): one history per file, all trajectories
  concatenated into one session (ids ``"<tid>:<mid>"``; a message repeated verbatim in several trajectories is
  archived once, so retrieving that one entry counts for every copy); for session-level metrics each trajectory is a
  session (``History.sessions``; an entry shared by copies belongs to each copy's trajectory); each question's
  evidence is its own trajectory's ``target_step_id``; its four options (``choices``) and correct letter
  (``ground_truth``) are kept for the answer-accuracy evaluation (eval/qa.py), when the letter is one of them.
  ``[ERRORQ]``/``[ERRORA]`` items are dropped, as upstream ``post_process.py`` does. Split: type 01 = ``tune``.
- aider chat history (``chat-history.md`` or a folder of aider ``.md`` logs): label-free look-ahead facts
  (``lookahead.py``, the demo's protocol). One history per session of at least ``MIN_TURNS`` turns, holding the
  turns before its compaction point t*; each fact is a token the ``LOOKAHEAD`` turns after t* use again and some
  earlier turn holds (evidence: those turns' messages), typed path / number / identifier / error / name / date /
  decision. A fact is recovered when its token is in the block (``match="answer"``); the query is the compacted
  context's tail. Default compaction: gist, ``KEEP`` = 4 turns kept. Split: the first half of the sessions (in
  log order) = ``tune``, the rest = ``report`` (ours).
- Generic JSONL fact sets (``docs/eval-format.md``): one history per line.

A file of the wrong kind (not JSON, JSON of another dataset, a JSON file given to the aider loader) or a dataset that
yields no history raises ``DatasetError`` (a ValueError): one line naming the file and the dataset, before any work.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from lantern import lazy_re
from lantern.archive.parse.locomo import parse_locomo_date
from lantern.model import Message
from lantern.text.names import plural

LOADER_VERSIONS = {"locomo": 3, "memdaily": 3, "jsonl": 3, "aider": 1}  # part of the archive cache key: bump a
# dataset's version when its loader changes what is archived
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
SEPARATE_CATEGORIES = {"adversarial"}  # reported apart from the headline (no answerable evidence)
LOCOMO_TUNE = 5  # the first five samples of locomo10.json are the tune split
MEMDAILY_TUNE_TYPES = {"01"}
_ID_SPLIT = lazy_re.compile(r"[;,\s]+")
_SESSION_KEY = lazy_re.compile(r"session_(\d+)")
_CN_TIME = lazy_re.compile(r"(\d{4})年(\d{1,2})月(\d{1,2})日\D*?(\d{1,2}):(\d{2})")


class DatasetError(ValueError):
    """``--data`` is not a file of the dataset asked for, or the dataset yields no history: the message is one
    line naming the file and the dataset (``lantern eval`` prints it and exits 1, writing no report)."""


def _json(path: Path, kind: str) -> Any:
    """The JSON value in ``path``; DatasetError ``PATH is not KIND JSON (line N: reason)`` when it is not JSON."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DatasetError(f"{path} is not {kind} JSON (not UTF-8 text: byte {e.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DatasetError(f"{path} is not {kind} JSON (line {e.lineno}: {e.msg})") from None


def _kind(value: Any) -> str:
    """The JSON name of a loaded value's type, for an error message."""
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _objects(data: Any, path: Path, kind: str, items: str) -> list[dict]:
    """``data`` when it is a JSON array of objects (``items``: what they are, for the message), else DatasetError."""
    if not isinstance(data, list):
        raise DatasetError(f"{path} is not {kind} JSON (it holds {_kind(data)}, not an array of {items})")
    for i, item in enumerate(data, 1):
        if not isinstance(item, dict):
            raise DatasetError(f"{path} is not {kind} JSON (item {i} is {_kind(item)}, not one of its {items})")
    return data


def _wrong_file(name: str, path: Path, what: str, noun: str = "file") -> DatasetError:
    return DatasetError(f"no {what} found in {path}: is --data the {noun} for dataset {name!r}?")


@dataclass
class Fact:
    """A question whose answer lives in the messages ``evidence`` (message ids). ``unresolved``: evidence ids
    of the source that name no message (dropped from ``evidence``, counted)."""

    id: str
    question: str
    answer: str
    evidence: list[str]
    category: str
    unresolved: int = 0
    match: str = "all"  # "all": every lost evidence turn must be packed; "answer": the answer text must be in the block
    choices: dict[str, str] = field(default_factory=dict)  # multiple choice (MemDaily): letter -> option text
    gold_choice: str = ""  # the correct letter, when ``choices`` are given


@dataclass
class History:
    """One conversation to archive. ``messages`` carry ``meta["dia_id"]``; ``summaries`` maps a session name (as in
    ``Message.session``) to an LLM-written summary of it (LoCoMo's ``session_summary``), when the data has one."""

    id: str
    messages: list[Message]
    facts: list[Fact]
    split: str = "report"
    summaries: dict[str, str] = field(default_factory=dict)
    query: str = "question"  # "question": each fact's question; "context": the compacted context's tail (look-ahead)
    sessions: dict[str, str] = field(default_factory=dict)  # message id -> session label for session-level metrics,
    # when the archived session does not carry it (MemDaily: the trajectory)


@dataclass
class Dataset:
    name: str
    path: str
    sha256: str
    histories: list[History]
    unresolved_ids: int = 0
    dropped: int = 0  # items dropped by the loader (error placeholders, facts without any evidence)
    notes: list[str] = field(default_factory=list)
    keep: int | None = None  # the dataset's own compaction window (turns kept), when it defines one
    compaction: str | None = None  # the dataset's own compaction method, when it defines one

    def select(self, split: str = "all", limit: int | None = None) -> Dataset:
        """The histories of ``split`` (``tune``, ``report`` or ``all``), at most ``limit`` of them."""
        if split not in ("tune", "report", "all"):
            raise ValueError(f"split must be tune, report or all, got {split!r}")
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be at least 1 history, got {limit}")
        hs = [h for h in self.histories if split == "all" or h.split == split]
        if not hs:
            splits = ", ".join(f"{n} {s}" for s, n in sorted(Counter(h.split for h in self.histories).items()))
            raise DatasetError(
                f"no history of {self.path} is in the {split} split (its {self.name} histories: {splits}): "
                f"use --split all or --split {'report' if split == 'tune' else 'tune'}"
            )
        if limit is not None:
            hs = hs[:limit]
        return replace(self, histories=hs, notes=list(self.notes))

    @property
    def n_facts(self) -> int:
        return sum(len(h.facts) for h in self.histories)


def sha256_of(path: Path) -> str:
    """sha256 of a file, or of a directory's ``*.json``/``*.jsonl`` files (relative names and bytes, sorted)."""
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix in (".json", ".jsonl"))
    for f in files:
        if path.is_dir():
            h.update(str(f.relative_to(path)).encode() + b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()


def split_evidence(items: Any) -> list[str]:
    """LoCoMo evidence list -> ids: each string split on ``;``, ``,`` and whitespace; empty parts dropped."""
    out: list[str] = []
    for item in items if isinstance(items, list) else [items]:
        if item is None:
            continue
        out.extend(p for p in _ID_SPLIT.split(str(item)) if p)
    return out


# ---------------------------------------------------------------- LoCoMo
def load_locomo(path: str | Path) -> Dataset:
    """LoCoMo's ``locomo10.json`` -> one history per sample (samples 1–5: the tune split). What does not have the
    format is skipped and counted, never fatal: a sample that is not an object or whose ``conversation`` is not one
    (with its questions), a session that is not a list, a turn without text or repeating a ``dia_id``, a question
    that is not an object or has no text, a ``qa`` that is not a list — each in ``Dataset.dropped`` and named in
    ``Dataset.notes``. A file with no turn at all raises DatasetError."""
    path = Path(path)
    data = _json(path, "LoCoMo")
    if not isinstance(data, list):
        raise DatasetError(f"{path} is not LoCoMo JSON (it holds {_kind(data)}, not an array of samples)")
    ds = Dataset("locomo", str(path), sha256_of(path), [])
    bad_turns: Counter[str] = Counter()
    for i, sample in enumerate(data, 1):
        if not isinstance(sample, dict):
            ds.dropped += 1
            ds.notes.append(f"sample {i} skipped: {_kind(sample)}, not an object")
            continue
        sid = str(sample.get("sample_id", f"sample-{i}"))
        conv, qas = sample.get("conversation"), sample.get("qa")
        if qas is not None and not isinstance(qas, list):
            ds.dropped += 1
            ds.notes.append(f"{sid} questions skipped: its qa is {_kind(qas)}, not an array")
        qas = qas if isinstance(qas, list) else []
        if not isinstance(conv, dict):
            ds.dropped += 1 + len(qas)
            ds.notes.append(
                f"sample {sid} skipped: its conversation is {_kind(conv)}, not an object "
                f"({plural(len(qas), 'question')} with it)"
            )
            continue
        sessions = []
        for k, v in conv.items():
            if m := _SESSION_KEY.fullmatch(k):
                if isinstance(v, list):
                    sessions.append((int(m.group(1)), k))
                else:
                    ds.dropped += 1
                    ds.notes.append(f"{sid} {k} skipped: {_kind(v)}, not a list of turns")
        messages: list[Message] = []
        known: set[str] = set()
        for n, key in sorted(sessions):
            when = parse_locomo_date(conv.get(f"{key}_date_time"))
            for j, turn in enumerate(conv[key], 1):
                text = turn.get("text") if isinstance(turn, dict) else None
                dia_id = str(turn.get("dia_id", f"D{n}:{j}")) if isinstance(turn, dict) else ""
                if not isinstance(text, str) or not text.strip() or dia_id in known:
                    bad_turns[sid] += 1
                    continue
                known.add(dia_id)
                if isinstance(turn.get("blip_caption"), str):
                    text += f" [image: {turn['blip_caption']}]"
                speaker = turn.get("speaker")
                messages.append(
                    Message(
                        role="user",
                        text=text,
                        name=speaker if isinstance(speaker, str) else None,
                        session=f"session_{n}",
                        time=when,
                        meta={"dia_id": dia_id},
                    )
                )
        facts: list[Fact] = []
        for q, qa in enumerate(qas, 1):
            question = qa.get("question") if isinstance(qa, dict) else None
            if not isinstance(question, str) or not question.strip():
                ds.dropped += 1
                ds.notes.append(
                    f"{sid} question {q} skipped: "
                    + (f"{_kind(qa)}, not an object" if not isinstance(qa, dict) else "no question text")
                )
                continue
            ids = split_evidence(qa.get("evidence") or [])
            good = [e for e in ids if e in known]
            bad = len(ids) - len(good)
            ds.unresolved_ids += bad
            cat = qa.get("category")
            category = LOCOMO_CATEGORIES.get(cat, str(cat)) if isinstance(cat, (int, str)) else str(cat)
            answer = qa.get("answer", "")
            facts.append(
                Fact(
                    f"{sid}#q{q}",
                    question,
                    "" if answer is None else str(answer),
                    list(dict.fromkeys(good)),
                    category,
                    bad,
                )
            )
        summaries = {}
        for key, text in (
            (sample.get("session_summary") or {}).items() if isinstance(sample.get("session_summary"), dict) else ()
        ):
            m = re.fullmatch(r"session_(\d+)_summary", key)
            if m and isinstance(text, str):
                summaries[f"session_{int(m.group(1))}"] = text
        ds.histories.append(History(sid, messages, facts, "tune" if i <= LOCOMO_TUNE else "report", summaries))
    if bad_turns:
        ds.dropped += sum(bad_turns.values())
        ds.notes.append(
            "turns without text or with a repeated dia_id skipped: "
            + ", ".join(f"{sid} {n}" for sid, n in bad_turns.items())
        )
    if not any(h.messages for h in ds.histories):
        raise _wrong_file("locomo", path, "LoCoMo conversations")
    return ds


# ---------------------------------------------------------------- MemDaily
def _cn_time(s: Any) -> datetime | None:
    m = _CN_TIME.search(s) if isinstance(s, str) else None
    if not m:
        return None
    try:
        return datetime(*(int(g) for g in m.groups()))
    except ValueError:
        return None


def load_memdaily_file(path: Path) -> tuple[History, int, int]:
    """One MemDaily file -> (history of every trajectory concatenated, unresolved ids, dropped error items)."""
    data = _objects(_json(path, "MemDaily"), path, "MemDaily", "trajectories")
    if not any(isinstance(traj.get("message_list"), list) for traj in data):
        raise DatasetError(f"{path} is not MemDaily JSON (no trajectory with a message_list)")
    parts = path.stem.split("_")
    split = "tune" if parts[0] in MEMDAILY_TUNE_TYPES else "report"
    category = parts[1] if len(parts) > 1 else "all"  # the question type (simple ... noisy): MemDaily's stratum
    messages: list[Message] = []
    facts: list[Fact] = []
    sessions: dict[str, str] = {}
    unresolved = dropped = 0
    for traj in data:
        tid = traj.get("tid")
        mids = set()
        for m in traj.get("message_list") or []:
            text = m.get("message")
            if not isinstance(text, str) or not text.strip():
                continue
            mids.add(m.get("mid"))
            sessions[f"{tid}:{m.get('mid')}"] = f"trajectory {tid}"
            messages.append(
                Message(role="user", text=text, time=_cn_time(m.get("time")), meta={"dia_id": f"{tid}:{m.get('mid')}"})
            )
        for q in traj.get("question_list") or []:
            question, answer = str(q.get("question", "")), str(q.get("answer", ""))
            if question.strip() == "[ERRORQ]" or answer.strip() == "[ERRORA]":
                dropped += 1
                continue
            targets = q.get("target_step_id") or []
            good = [f"{tid}:{t}" for t in targets if t in mids]
            unresolved += len(targets) - len(good)
            choices = q.get("choices") if isinstance(q.get("choices"), dict) else {}
            choices = {str(k): str(v) for k, v in choices.items()}
            gold = str(q.get("ground_truth", ""))
            facts.append(
                Fact(
                    f"{path.stem}#t{tid}q{q.get('qid', 0)}",
                    question,
                    answer,
                    good,
                    category,
                    choices=choices if gold in choices else {},
                    gold_choice=gold if gold in choices else "",
                )
            )
    return History(path.stem, messages, facts, split, sessions=sessions), unresolved, dropped


def load_memdaily(path: str | Path) -> Dataset:
    """``path``: the MemDaily folder (``messages_and_QAs/`` inside it is used when present), or one file."""
    path = Path(path)
    folder = path / "messages_and_QAs" if (path / "messages_and_QAs").is_dir() else path
    files = [folder] if folder.is_file() else sorted(folder.glob("*.json"))
    if not files:
        raise _wrong_file("memdaily", path, "MemDaily files (*.json)", "folder")
    ds = Dataset("memdaily", str(path), sha256_of(folder), [])
    for f in files:
        history, unresolved, dropped = load_memdaily_file(f)
        ds.histories.append(history)
        ds.unresolved_ids += unresolved
        ds.dropped += dropped
    if not any(h.messages for h in ds.histories):
        raise _wrong_file("memdaily", path, "MemDaily messages", "folder" if path.is_dir() else "file")
    return ds


# ---------------------------------------------------------------- generic JSONL
def load_jsonl(path: str | Path) -> Dataset:
    """The generic fact-set format (docs/eval-format.md): one history per line,
    ``{"id", "split"?, "messages": [{"id", "role", "content", "session"?, "time"?}], "facts": [{"id"?, "question",
    "answer"?, "evidence": [message id, ...], "category"?}]}``."""
    path = Path(path)
    ds = Dataset("jsonl", str(path), sha256_of(path), [])
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DatasetError(f"{path} is not a JSONL fact set (not UTF-8 text: byte {e.start})") from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DatasetError(f"{path} is not a JSONL fact set (line {n}: {e.msg})") from None
        if not isinstance(obj, dict):
            raise DatasetError(f"{path} is not a JSONL fact set (line {n} holds {_kind(obj)}, not a history object)")
        hid = str(obj.get("id", f"history-{n}"))
        messages = []
        session = None  # a message without "session" continues the previous message's session
        for j, m in enumerate(obj.get("messages") or [], 1):
            session = m.get("session", session)
            when = None
            if isinstance(m.get("time"), str):
                try:
                    when = datetime.fromisoformat(m["time"])
                except ValueError:
                    when = None
            messages.append(
                Message(
                    role=str(m.get("role", "user")),
                    text=str(m.get("content", "")),
                    session=session,
                    time=when,
                    meta={"dia_id": str(m.get("id", j))},
                )
            )
        known = {m.meta["dia_id"] for m in messages}
        facts = []
        for k, f in enumerate(obj.get("facts") or [], 1):
            ids = [str(e) for e in f.get("evidence") or []]
            good = [e for e in ids if e in known]
            ds.unresolved_ids += len(ids) - len(good)
            facts.append(
                Fact(
                    str(f.get("id", f"{hid}#f{k}")),
                    str(f.get("question", "")),
                    str(f.get("answer", "")),
                    good,
                    str(f.get("category", "all")),
                    len(ids) - len(good),
                )
            )
        ds.histories.append(
            History(hid, messages, facts, str(obj.get("split", "report")), dict(obj.get("summaries") or {}))
        )
    if not any(h.messages for h in ds.histories):
        raise _wrong_file("jsonl", path, "histories with messages")
    return ds


# ---------------------------------------------------------------- aider (look-ahead facts)
def _aider_sessions(path: Path) -> list[tuple[str, list]]:
    """(history id, turns) per session of the aider log(s) at ``path`` (a file or a folder of ``*.md``)."""
    from lantern.archive.chunk import chunk
    from lantern.archive.parse import parse

    files = [path] if path.is_file() else sorted(p for p in path.rglob("*.md") if p.name.lower() != "readme.md")
    out: list[tuple[str, list]] = []
    for f in files:
        by_session: dict[str | None, list] = {}
        for turn in chunk(parse(f, "aider").messages, None):
            by_session.setdefault(turn.session, []).append(turn)
        for n, (session, turns) in enumerate(by_session.items()):
            out.append((f"{f.stem}#{n:04d}" + (f" {session}" if session else ""), turns))
    return out


def load_aider(path: str | Path) -> Dataset:
    """aider chat log(s) -> look-ahead fact sets (module docstring; protocol in ``lookahead.py``)."""
    from lantern.eval.lookahead import KEEP, LOOKAHEAD, MIN_TURNS, fact_type, future_tags, t_star

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no aider chat history at {path}")
    ds = Dataset("aider", str(path), _sha256_md(path), [], keep=KEEP, compaction="gist")
    sessions = [
        (hid, turns)
        for hid, turns in _aider_sessions(path)
        if any(m.role == "user" for turn in turns for m in turn.messages)
    ]  # `#### ` lines: aider's user
    if not sessions:  # markdown without them (or JSON, read as markdown) is no aider log
        raise _wrong_file("aider", path, "aider sessions", "folder" if path.is_dir() else "file")
    eligible = [(hid, turns, t) for hid, turns in sessions if (t := t_star(len(turns))) is not None]
    if not eligible:
        longest = max(len(turns) for _, turns in sessions)
        raise DatasetError(
            f"no aider session in {path} is long enough to compact: a look-ahead fact set needs "
            f"{MIN_TURNS} turns, "
            + (
                f"its only session has {longest}"
                if len(sessions) == 1
                else f"the longest of its {len(sessions)} sessions has {longest}"
            )
        )
    for n, (hid, turns, t) in enumerate(eligible):
        before = turns[:t]
        messages: list[Message] = []
        for i, turn in enumerate(before):
            for j, m in enumerate(turn.messages):
                m.meta = {**m.meta, "dia_id": f"{i}:{j}"}
                messages.append(m)
        facts: list[Fact] = []
        for value, kind in future_tags(turns[t : t + LOOKAHEAD]):
            holders = [turn for turn in before if value in turn.text]
            if not holders:
                continue
            evidence = [m.meta["dia_id"] for turn in holders for m in turn.messages if value in m.text]
            evidence = evidence or [m.meta["dia_id"] for turn in holders for m in turn.messages]
            facts.append(Fact(f"{hid}#{value}", "", value, evidence, fact_type(value, kind, holders), match="answer"))
        split = "tune" if n < (len(eligible) + 1) // 2 else "report"
        ds.histories.append(History(hid, messages, facts, split, query="context"))
    return ds


def _sha256_md(path: Path) -> str:
    if path.is_file():
        return sha256_of(path)
    h = hashlib.sha256()
    for f in sorted(path.rglob("*.md")):
        h.update(str(f.relative_to(path)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


LOADERS = {"locomo": load_locomo, "memdaily": load_memdaily, "jsonl": load_jsonl, "aider": load_aider}
# every DATASET `lantern eval` takes: realcompact runs its own protocol (eval/realcompact.py), the others load here
DATASETS = ("realcompact", *LOADERS)


def load(name: str, path: str | Path) -> Dataset:
    """Load dataset ``name`` (locomo, memdaily, jsonl, aider) from ``path``."""
    if name not in LOADERS:
        raise ValueError(f"unknown dataset {name!r}; one of {', '.join(LOADERS)}")
    return LOADERS[name](path)
