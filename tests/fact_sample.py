"""The labelled sample of fact extraction on real turns (issue #19, item 6): where each turn comes from, and the facts
``extract_facts`` finds in it. tests/fixtures/fact_labels.jsonl holds our labels; tests/test_fact_precision.py
measures precision and recall against them; this module also prints new candidates to label:

    PYTHONPATH=src python tests/fact_sample.py [--new]   # every fact of the sampled turns, the unlabelled ones marked

The turns, read in place from ../shared/data (never copied here): aider's chat history (Apache-2.0), SWE-agent
trajectories (MIT) and MemoryBank (MIT), whose short excerpts the fixture may quote, and LoCoMo (CC BY-NC 4.0) and
MemDaily (no license), of which the fixture keeps only ids and labels. A label is keyed by (source, turn id, key
as written, value): a fact found again after a change keeps its label; a new one is printed for labelling.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
LABELS = REPO / "tests" / "fixtures" / "fact_labels.jsonl"
QUOTABLE = {"aider", "swe_agent", "memorybank_en", "memorybank_cn"}  # permissive licenses: short excerpts allowed

# how many turns of each source the sample takes (every k-th turn, so the sample spans the file)
SAMPLE = {
    "aider": 90,
    "swe_agent": 120,
    "memorybank_en": 600,
    "memorybank_cn": 600,
    "locomo": 1500,
    "memdaily": 120,
}


def _spread(items: list, n: int) -> list:
    if len(items) <= n:
        return items
    step = len(items) / n
    return [items[int(i * step)] for i in range(n)]


def turns() -> Iterator[tuple[str, str, list[str], list[str]]]:
    """(source, turn id, texts, tool results) of every sampled turn whose source is present."""
    from lantern.archive.chunk import chunk
    from lantern.archive.facts import fact_texts
    from lantern.archive.parse import parse

    aider = DATA / "aider_chat_history" / "chat-history.md"
    if aider.is_file():
        all_turns = chunk(parse(aider, "aider").messages, None)
        for i, t in _spread(list(enumerate(all_turns)), SAMPLE["aider"]):
            yield ("aider", f"turn {i}", *fact_texts(t))
    swe = sorted((DATA / "swe_agent_trajectories").rglob("*.traj"))
    if swe:
        pool = []
        for path in swe:
            for i, t in enumerate(chunk(parse(path, "swe_agent").messages, None)):
                pool.append((f"{path.relative_to(DATA / 'swe_agent_trajectories')} turn {i}", t))
        for tid, t in _spread(pool, SAMPLE["swe_agent"]):
            yield ("swe_agent", tid, *fact_texts(t))
    for lang in ("en", "cn"):
        path = DATA / "memorybank" / lang / f"memory_bank_{lang}.json"
        if not path.is_file():
            continue
        pool = []
        for name, person in json.loads(path.read_text(encoding="utf-8")).items():
            for day, items in (person.get("history") or {}).items():
                for j, item in enumerate(items):
                    pool.append((f"{name} {day} {j}", [item.get("query") or "", item.get("response") or ""]))
        for tid, texts in _spread(pool, SAMPLE[f"memorybank_{lang}"]):
            yield (f"memorybank_{lang}", tid, [t for t in texts if t], [])
    locomo = DATA / "locomo" / "locomo10.json"
    if locomo.is_file():
        pool = []
        for sample in json.loads(locomo.read_text(encoding="utf-8")):
            conv = sample["conversation"]
            for key in sorted(k for k in conv if k.startswith("session_") and not k.endswith("date_time")):
                for turn in conv[key] or []:
                    pool.append((f"{sample['sample_id']} {turn['dia_id']}", [turn.get("text") or ""]))
        for tid, texts in _spread(pool, SAMPLE["locomo"]):
            yield ("locomo", tid, texts, [])
    memdaily = sorted((DATA / "memdaily" / "messages_and_QAs").glob("*.json"))
    if memdaily:
        pool = []
        for path in memdaily:
            for traj in json.loads(path.read_text(encoding="utf-8")):
                for m in traj.get("message_list") or []:
                    pool.append((f"{path.stem} {traj['tid']} {m['mid']}", [m.get("message") or ""]))
        for tid, texts in _spread(pool, SAMPLE["memdaily"]):
            yield ("memdaily", tid, texts, [])


def excerpt(texts: list[str], code: list[str], value: str | None, key_text: str, width: int = 110) -> str:
    """The words around the fact in its turn (at most ``width`` characters), for labelling and for the fixture."""
    whole = "\n".join(texts + code)
    at = whole.find(value) if value else -1
    if at < 0 and key_text:
        at = whole.find(key_text)
    at = max(at, 0)
    start = max(0, at - width // 2)
    return " ".join(whole[start : start + width].split())


def facts() -> Iterator[dict]:
    """Every fact ``extract_facts`` finds in the sampled turns: {source, turn, key, value, family, excerpt}."""
    from lantern.archive.facts import extract_facts

    for source, tid, texts, code in turns():
        for f in extract_facts(texts, code):
            yield {
                "source": source,
                "turn": tid,
                "key": f.key_text or f.key,
                "value": f.value,
                "replaces": f.replaces,
                "family": f.family,
                "excerpt": excerpt(texts, code, f.value or f.replaces, f.key_text),
            }


def fact_id(row: dict) -> str:
    """How the fixture names a fact: "key = value" where the source's license lets us quote it, else the first 16
    hex digits of its sha1 (LoCoMo, MemDaily: ids and labels only)."""
    text = f"{row['key']} = {row['value']}"
    return text if row["source"] in QUOTABLE else hashlib.sha1(text.encode()).hexdigest()[:16]


def ident(row: dict) -> tuple:
    """(source, turn, fact) of a fact found now (``facts``) or of a fixture row."""
    fact = row.get("fact") or row.get("fact_sha1") or fact_id(row)
    return row["source"], row["turn"], fact


def labels() -> dict[tuple, dict]:
    if not LABELS.is_file():
        return {}
    rows = [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {ident(r): r for r in rows}


if __name__ == "__main__":
    known = labels()
    only_new = "--new" in sys.argv
    for row in facts():
        mark = "" if ident(row) in known else "NEW "
        if only_new and not mark:
            continue
        print(json.dumps({"mark": mark.strip(), **row}, ensure_ascii=False))
