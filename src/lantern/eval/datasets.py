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
  archived once, so retrieving that one entry counts for every copy; session-level metrics are trivial here); each question's evidence is its own trajectory's ``target_step_id``.
  ``[ERRORQ]``/``[ERRORA]`` items are dropped, as upstream ``post_process.py`` does. Split: type 01 = ``tune``.
- Generic JSONL fact sets (``docs/eval-format.md``): one history per line.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..archive.parse.locomo import parse_locomo_date
from ..model import Message

LOADER_VERSION = 3  # part of the archive cache key: bump when a loader changes what is archived
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
SEPARATE_CATEGORIES = {"adversarial"}  # reported apart from the headline (no answerable evidence)
LOCOMO_TUNE = 5  # the first five samples of locomo10.json are the tune split
MEMDAILY_TUNE_TYPES = {"01"}
_ID_SPLIT = re.compile(r"[;,\s]+")
_SESSION_KEY = re.compile(r"session_(\d+)")
_CN_TIME = re.compile(r"(\d{4})年(\d{1,2})月(\d{1,2})日\D*?(\d{1,2}):(\d{2})")


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


@dataclass
class History:
    """One conversation to archive. ``messages`` carry ``meta["dia_id"]``; ``summaries`` maps a session name (as in
    ``Message.session``) to an LLM-written summary of it (LoCoMo's ``session_summary``), when the data has one."""

    id: str
    messages: list[Message]
    facts: list[Fact]
    split: str = "report"
    summaries: dict[str, str] = field(default_factory=dict)


@dataclass
class Dataset:
    name: str
    path: str
    sha256: str
    histories: list[History]
    unresolved_ids: int = 0
    dropped: int = 0  # items dropped by the loader (error placeholders, facts without any evidence)
    notes: list[str] = field(default_factory=list)

    def select(self, split: str = "all", limit: int | None = None) -> Dataset:
        """The histories of ``split`` (``tune``, ``report`` or ``all``), at most ``limit`` of them."""
        if split not in ("tune", "report", "all"):
            raise ValueError(f"split must be tune, report or all, got {split!r}")
        hs = [h for h in self.histories if split == "all" or h.split == split]
        if limit is not None:
            hs = hs[:limit]
        return Dataset(self.name, self.path, self.sha256, hs, self.unresolved_ids, self.dropped, list(self.notes))

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
    path = Path(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    ds = Dataset("locomo", str(path), sha256_of(path), [])
    for i, sample in enumerate(data, 1):
        sid = str(sample.get("sample_id", f"sample-{i}"))
        conv = sample.get("conversation") or {}
        messages: list[Message] = []
        numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY.fullmatch(k)) and isinstance(conv[k], list))
        for n in numbers:
            when = parse_locomo_date(conv.get(f"session_{n}_date_time"))
            for j, turn in enumerate(conv[f"session_{n}"], 1):
                text = turn.get("text") if isinstance(turn, dict) else None
                if not isinstance(text, str) or not text.strip():
                    continue
                if isinstance(turn.get("blip_caption"), str):
                    text += f" [image: {turn['blip_caption']}]"
                messages.append(Message(
                    role="user", text=text, name=turn.get("speaker"), session=f"session_{n}", time=when,
                    meta={"dia_id": str(turn.get("dia_id", f"D{n}:{j}"))},
                ))
        known = {m.meta["dia_id"] for m in messages}
        facts: list[Fact] = []
        for q, qa in enumerate(sample.get("qa") or [], 1):
            ids = split_evidence(qa.get("evidence") or [])
            good = [e for e in ids if e in known]
            bad = len(ids) - len(good)
            ds.unresolved_ids += bad
            category = LOCOMO_CATEGORIES.get(qa.get("category"), str(qa.get("category")))
            answer = qa.get("answer", "")
            facts.append(Fact(f"{sid}#q{q}", str(qa.get("question", "")), "" if answer is None else str(answer),
                              list(dict.fromkeys(good)), category, bad))
        summaries = {}
        for key, text in (sample.get("session_summary") or {}).items():
            m = re.fullmatch(r"session_(\d+)_summary", key)
            if m and isinstance(text, str):
                summaries[f"session_{m.group(1)}"] = text
        ds.histories.append(History(sid, messages, facts, "tune" if i <= LOCOMO_TUNE else "report", summaries))
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
    data = json.loads(path.read_text(encoding="utf-8"))
    parts = path.stem.split("_")
    split = "tune" if parts[0] in MEMDAILY_TUNE_TYPES else "report"
    category = parts[1] if len(parts) > 1 else "all"  # the question type (simple ... noisy): MemDaily's stratum
    messages: list[Message] = []
    facts: list[Fact] = []
    unresolved = dropped = 0
    for traj in data:
        tid = traj.get("tid")
        mids = set()
        for m in traj.get("message_list") or []:
            text = m.get("message")
            if not isinstance(text, str) or not text.strip():
                continue
            mids.add(m.get("mid"))
            messages.append(Message(role="user", text=text, time=_cn_time(m.get("time")), meta={"dia_id": f"{tid}:{m.get('mid')}"}))
        for q in traj.get("question_list") or []:
            question, answer = str(q.get("question", "")), str(q.get("answer", ""))
            if question.strip() == "[ERRORQ]" or answer.strip() == "[ERRORA]":
                dropped += 1
                continue
            targets = q.get("target_step_id") or []
            good = [f"{tid}:{t}" for t in targets if t in mids]
            unresolved += len(targets) - len(good)
            facts.append(Fact(f"{path.stem}#t{tid}q{q.get('qid', 0)}", question, answer, good, category))
    return History(path.stem, messages, facts, split), unresolved, dropped


def load_memdaily(path: str | Path) -> Dataset:
    """``path``: the MemDaily folder (``messages_and_QAs/`` inside it is used when present), or one file."""
    path = Path(path)
    folder = path / "messages_and_QAs" if (path / "messages_and_QAs").is_dir() else path
    files = [folder] if folder.is_file() else sorted(folder.glob("*.json"))
    ds = Dataset("memdaily", str(path), sha256_of(folder), [])
    for f in files:
        history, unresolved, dropped = load_memdaily_file(f)
        ds.histories.append(history)
        ds.unresolved_ids += unresolved
        ds.dropped += dropped
    return ds


# ---------------------------------------------------------------- generic JSONL
def load_jsonl(path: str | Path) -> Dataset:
    """The generic fact-set format (docs/eval-format.md): one history per line,
    ``{"id", "split"?, "messages": [{"id", "role", "content", "session"?, "time"?}], "facts": [{"id"?, "question",
    "answer"?, "evidence": [message id, ...], "category"?}]}``."""
    path = Path(path)
    ds = Dataset("jsonl", str(path), sha256_of(path), [])
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        obj = json.loads(line)
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
            messages.append(Message(
                role=str(m.get("role", "user")), text=str(m.get("content", "")), session=session, time=when,
                meta={"dia_id": str(m.get("id", j))},
            ))
        known = {m.meta["dia_id"] for m in messages}
        facts = []
        for k, f in enumerate(obj.get("facts") or [], 1):
            ids = [str(e) for e in f.get("evidence") or []]
            good = [e for e in ids if e in known]
            ds.unresolved_ids += len(ids) - len(good)
            facts.append(Fact(str(f.get("id", f"{hid}#f{k}")), str(f.get("question", "")), str(f.get("answer", "")),
                              good, str(f.get("category", "all")), len(ids) - len(good)))
        ds.histories.append(History(hid, messages, facts, str(obj.get("split", "report")), dict(obj.get("summaries") or {})))
    return ds


LOADERS = {"locomo": load_locomo, "memdaily": load_memdaily, "jsonl": load_jsonl}


def load(name: str, path: str | Path) -> Dataset:
    """Load dataset ``name`` (locomo, memdaily, jsonl) from ``path``."""
    if name not in LOADERS:
        raise ValueError(f"unknown dataset {name!r}; one of {', '.join(LOADERS)}")
    return LOADERS[name](path)
