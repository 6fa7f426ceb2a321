"""The held-out check of the injection decision (issue 35) on a real-size store, SQLite and PostgreSQL.

    .venv/bin/python benchmarks/injection_heldout.py QUESTIONS.jsonl --store DIR [--session S.json ...] \
        [--postgres] [--out ROWS.jsonl]

The questions are not in the repository (a held-out check reads questions nothing was tuned on): one JSON object a
line, ``{"question": str, "answer": str | null, "language": "en" | "zh" | ..., "about": str}``; ``answer`` is a
string the block must hold for the question to count as answered (null: the archive holds no answer). ``about``:
the session the question is asked in (``--in-session``), or a free label.

The store (``DIR/store.db``, built when missing, then reused; archiving is idempotent): aider's whole chat log and
``REALCOMPACT`` real Claude Code sessions from ``../shared/data`` (read, never copied), plus each ``--session`` file
(a JSON list of chat messages, ``{"role", "content"}``; its file name without ``.json`` is its session name).

Each question is asked once through ``Lantern.recover(question)`` with the default decision (``Config.min_score``,
``clear_score``, ``short_budget``), the default budget (6,000) and no session: the call of the MCP and REST
``recover`` and of ``lantern recover``. The ``UserPromptSubmit`` hook makes the same call with the same budget
(``Config.budget``), restricted to the compacted session and with the live messages excluded
(integrations/claude_code.py ``recover_after_compaction``): fewer candidates, the same decision; ``--in-session``
asks that way, each question in its ``about`` session (questions whose ``about`` is no stored session are left
out), nothing live. Before it, the
same question is explained with the decision off (``min_score=0``, read-only), to tell the answers the decision
withholds from those the ranking or the packing misses. Each backend is asked from a fresh copy of the built
store, in the same order (a recovery reinforces what it packed, which moves later rankings).
``--postgres``: the store is copied (``copy_store``, as ``lantern copy``) into a database of a throw-away local
PostgreSQL server (the ``pgserver`` wheel) and asked there too.

Printed: per backend and language, the share of answerable questions whose answer is in the block, and the tiers;
for questions without an answer, the characters injected (mean, p90); the share of questions with the same tier
and reason on both backends.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared/data"
AIDER_LOG = DATA / "aider_chat_history/chat-history.md"
REALCOMPACT = (  # four repositories' sessions, 218-340 turns each
    "FSM1__cipher-box__e8d4e14748",
    "entireio__cli__0520de1813",
    "local-web-services__local-web-services__c6c93d96d3",
    "PackmindHub__context-evaluator__",
)


def realcompact_files() -> list[Path]:
    folder = DATA / "realcompact/sessions"
    return [p for name in REALCOMPACT for p in sorted(folder.glob(f"{name}*.json"))[:1]]


def build(path: Path, sessions: list[Path]) -> None:
    """Archive the aider log, the realcompact sessions (every turn of each: the last event's turns before and
    after it) and each ``sessions`` file into ``path``."""
    from lantern import Lantern
    from lantern.eval.realcompact import messages

    with Lantern(path) as memory:
        started = time.perf_counter()
        memory.ingest(AIDER_LOG, format="aider")
        print(f"aider log: {time.perf_counter() - started:.0f} s", file=sys.stderr)
        for p in realcompact_files():
            doc = json.loads(p.read_text(encoding="utf-8"))
            last = doc["events"][-1]
            memory.archive(messages(last["before"] + last["after"]), session=doc["id"])
            print(f"{doc['id']}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
        for p in sessions:
            memory.archive(json.loads(p.read_text(encoding="utf-8")), session=p.stem)


def ask(location, questions: list[dict], in_session: bool) -> list[dict]:
    """Each question through ``Lantern.recover`` at ``location`` (``in_session``: in its ``about`` session); one
    row each."""
    from lantern import Lantern

    rows = []
    with Lantern(location) as memory:
        sessions = set(memory.store.sessions()) if in_session else set()
        for q in questions:
            session = q.get("about") if in_session else None
            if in_session and session not in sessions:
                continue
            # first the block without the decision (explain: read-only), to tell the decision's misses from the
            # ranking's; then the recovery, which reinforces what it packed
            full = memory.explain(q["question"], session=session, min_score=0)
            started = time.perf_counter()
            r = memory.recover(q["question"], session=session)
            ms = round(1000 * (time.perf_counter() - started))
            rel = r.relevance.to_json() if r.relevance is not None else {}
            rows.append(
                {
                    **q,
                    "answered": q.get("answer") is not None and q["answer"] in r.text,
                    "full_answered": q.get("answer") is not None and q["answer"] in full.text,
                    "full_chars": full.chars,
                    "tier": "none" if not r.text else ("short" if r.reason == "uncertain" else "full"),
                    "reason": r.reason,
                    "chars": r.chars,
                    "score": rel.get("score"),
                    "cosine": rel.get("cosine"),
                    "coverage": rel.get("coverage"),
                    "entries": rel.get("entries"),
                    "ms": ms,
                }
            )
    return rows


def summary(rows: list[dict]) -> dict:
    """Per language: answerable questions answered (count, of; in the block without the decision; withheld by it),
    tiers; without an answer: characters mean, p90."""
    out = {}
    for lang in sorted({r["language"] for r in rows}):
        mine = [r for r in rows if r["language"] == lang]
        ans = [r for r in mine if r.get("answer") is not None]
        una = [r for r in mine if r.get("answer") is None]
        out[lang] = {
            "answered": sum(r["answered"] for r in ans),
            "of": len(ans),
            "in the block without the decision": sum(r["full_answered"] for r in ans),
            "withheld by the decision": sum(r["full_answered"] and not r["answered"] for r in ans),
            "tiers": dict(Counter(r["tier"] for r in ans)),
            "no_answer": len(una),
        }
        if una:
            chars = np.array([r["chars"] for r in una], float)
            out[lang] |= {
                "no_answer_chars_mean": round(float(chars.mean())),
                "no_answer_chars_p90": round(float(np.percentile(chars, 90))),
                "no_answer_tiers": dict(Counter(r["tier"] for r in una)),
            }
    una = [r for r in rows if r.get("answer") is None]
    if una:
        chars = np.array([r["chars"] for r in una], float)
        out["all no-answer"] = {"mean": round(float(chars.mean())), "p90": round(float(np.percentile(chars, 90)))}
    out["ms p50 / p90"] = [round(float(np.percentile([r["ms"] for r in rows], p))) for p in (50, 90)]
    return out


def postgres_copy(db: Path, root: Path):
    """A local PostgreSQL server (pgserver) in ``root`` and a database holding a copy of ``db``: (server, URL)."""
    import pgserver
    import psycopg

    from lantern.api import copy_store

    server = pgserver.get_server(root, cleanup_mode="stop")
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE heldout")
    url = server.get_uri("heldout")
    started = time.perf_counter()
    copy_store(db, url)
    print(f"copied to PostgreSQL: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return server, url


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("questions", type=Path, help="JSONL: question, answer (or null), language, about")
    ap.add_argument("--store", type=Path, required=True, help="folder of the built store (built when missing)")
    ap.add_argument("--session", type=Path, nargs="*", default=[], help="JSON chat sessions to archive too")
    ap.add_argument("--postgres", action="store_true", help="ask a PostgreSQL copy of the store too")
    ap.add_argument("--in-session", action="store_true", help="ask each question in its 'about' session (the hook)")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--out", type=Path, help="write the per-question rows here (JSONL)")
    a = ap.parse_args()
    a.store.mkdir(parents=True, exist_ok=True)
    db = a.store / "store.db"
    if not db.exists() or a.build_only:
        if not AIDER_LOG.exists():
            raise SystemExit(f"{AIDER_LOG} absent: the check needs ../shared/data")
        build(db, a.session)
    if a.build_only:
        return
    questions = [json.loads(line) for line in a.questions.open(encoding="utf-8") if line.strip()]
    results = {}
    with tempfile.TemporaryDirectory(prefix="lantern-heldout-") as tmp:
        copy = Path(tmp) / "store.db"
        shutil.copy(db, copy)  # asked from a copy: recoveries reinforce, the built store stays as built
        results["sqlite"] = ask(copy, questions, a.in_session)
        if a.postgres:
            pg_root = Path(tempfile.mkdtemp(prefix="lantern-heldout-pg-"))  # pgserver's own user must reach it
            server = None
            try:
                server, url = postgres_copy(db, pg_root)
                results["postgresql"] = ask(url, questions, a.in_session)
            finally:
                if server is not None:
                    server.cleanup()
                shutil.rmtree(pg_root, ignore_errors=True)
    report = {backend: summary(rows) for backend, rows in results.items()}
    if len(results) == 2:
        same = [
            (s["tier"], s["reason"]) == (p["tier"], p["reason"])
            for s, p in zip(results["sqlite"], results["postgresql"])
        ]
        report["same decision"] = f"{sum(same)} / {len(same)}"
    print(json.dumps(report, indent=1, ensure_ascii=False))
    if a.out:
        with a.out.open("w", encoding="utf-8") as f:
            for backend, rows in results.items():
                for r in rows:
                    f.write(json.dumps({"backend": backend, **r}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
