"""Text-first archiving (archive/pipeline.py, docs/daemon.md "Cold start"): turns stored with their text, full-text
rows, tags and facts but no vector, so that a hook with no warm daemon answers SessionStart(compact) without loading
a model; their vectors filled later by the daemon or by the next process that loads the models. On the real SQLite
store: one entry per turn whichever way each write came (text-first or with vectors, a turn that grew in between),
found by full text before the fill and by meaning after it; and the cold hook itself as a real process, for Claude
Code and Codex, importing no model module and no numpy."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from lantern import Config, Lantern
from lantern.errors import UnsupportedBackendError

REPO = Path(__file__).resolve().parents[1]
CLAUDE = Path(__file__).parent / "fixtures" / "claude_code_session.jsonl"
CLAUDE_SID = "7f3c2a10-5b1e-4c8e-9d2a-1e6f0b7c9a41"
CODEX = Path(__file__).parent / "fixtures" / "codex"
CODEX_SID = "019b0c3e-7a21-7d40-9a55-3c1f0e8d2b64"
# the modules a cold SessionStart(compact) must not load: numpy, the embedding models and their runtime, the read
# path's ranking, the CLI
HEAVY = ("numpy", "onnxruntime", "tokenizers", "lantern.embed", "lantern.store.index", "lantern.recover.rank")
TURNS = [
    ("Start postgres for billing on port 5433.", "Started: docker run -p 5433:5432 postgres:16."),
    ("Put the pool size in config/db.yaml.", "Done: the pool size is 20 now, in config/db.yaml."),
    ("What does flaky_cron_guard do?", "flaky_cron_guard skips a cron run while the last one still holds the lock."),
]


def _messages(turns) -> list[dict]:
    out: list[dict] = []
    for user, reply in turns:
        out.append({"role": "user", "content": user})
        if reply is not None:
            out.append({"role": "assistant", "content": reply})
    return out


def _vector_state(db: Path) -> dict[int, tuple[int, bool]]:
    """entry id -> (e5_pending, has a stored vector), read with plain SQL."""
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "SELECT e.id, e.e5_pending, v.entry_id IS NOT NULL FROM entries e "
            "LEFT JOIN embeddings v ON v.entry_id = e.id ORDER BY e.id"
        ).fetchall()
    return {i: (pending, bool(has)) for i, pending, has in rows}


def test_a_text_first_archive_stores_text_tags_and_facts_and_no_vector(tmp_path):
    db = tmp_path / "m.db"
    with Lantern(db) as lt:
        lt.archive(_messages(TURNS[:1]), session="s")
        result = lt.archive(_messages(TURNS), session="s", text_first=True)
        assert (result.added, result.duplicates) == (2, 1)
        stats = lt.stats()
        assert stats["entries"] == 3 and stats["vectors_missing"] == 2
        new = result.entry_ids[1:]
        entries = lt.store.entries(new)
        assert any(t.value == "config/db.yaml" for t in entries[new[0]].tags)
        assert [(f.key, f.value) for f in lt.facts()] == [("pool size", "20")]  # stored with its turn
    state = _vector_state(db)
    assert [state[i] for i in new] == [(2, False), (2, False)]
    assert state[result.entry_ids[0]][1]  # the turn stored with its vector before keeps it


def test_before_the_fill_full_text_finds_a_text_first_turn_and_after_it_meaning_does_too(tmp_path):
    db = tmp_path / "m.db"
    with Lantern(db, config=Config(fill_on_recover=0)) as lt:  # no fill before the recovery
        lt.archive(_messages(TURNS[:2]), session="s")
        entry = lt.archive(_messages(TURNS), session="s", text_first=True).entry_ids[-1]
        before = lt.recover("flaky_cron_guard", session="s", min_score=0)
        found = {c.entry.id: c for c in before.candidates}
        assert entry in {e.id for e in before.entries} and "fulltext" in found[entry].ranks
        assert lt.stats()["vectors_missing"] == 1  # a recovery that does not fill leaves it missing, and says so
        assert lt.fill_unembedded() == 1
        assert lt.stats()["vectors_missing"] == 0
        after = lt.recover("which guard skips overlapping cron runs?", session="s", min_score=0)
        ranked = {c.entry.id: c for c in after.candidates}
        assert ranked[entry].scores.get("semantic", 0) > 0
    assert _vector_state(db)[entry] == (0, True)


def test_a_recovery_fills_the_text_first_turns_before_it_ranks(tmp_path):
    db = tmp_path / "m.db"
    with Lantern(db) as lt:
        lt.archive(_messages(TURNS[:1]), session="s")
    with Lantern(db) as lt:
        lt.archive(_messages(TURNS), session="s", text_first=True)
    with Lantern(db) as lt:  # the next process that loads the models
        lt.recover("pool size", session="s")
        assert lt.stats()["vectors_missing"] == 0
    assert all(has for _, has in _vector_state(db).values())


def test_an_archive_with_vectors_fills_the_text_first_turns_too(tmp_path):
    db = tmp_path / "m.db"
    with Lantern(db) as lt:
        lt.archive(_messages(TURNS[:2]), session="s", text_first=True)
        lt.archive(_messages(TURNS), session="other")
        assert lt.stats()["vectors_missing"] == 0


@settings(max_examples=examples(40), deadline=None)
@given(
    writes=st.lists(
        st.tuples(st.integers(1, 2 * len(TURNS)), st.booleans()),  # (messages archived so far, text-first)
        min_size=1,
        max_size=6,
    ),
    fill_between=st.booleans(),
)
def test_one_entry_per_turn_whichever_way_each_write_came_and_every_vector_filled_in_the_end(
    tmp_path_factory, writes, fill_between
):
    """A session archived as it grows (a hook per event: each write the messages so far, a turn's user message
    before its reply), each write text-first or with vectors (the cold hook and the daemon archiving the same
    lines): one entry per turn, a grown turn replaced in place, its stored vector always its own text's or none;
    none stays without one once filled."""
    db = tmp_path_factory.mktemp("tf") / "m.db"
    flat = _messages(TURNS)
    with Lantern(db) as lt:
        lt.archive([{"role": "user", "content": "warm"}], session="other")  # the database records its embedder
        sizes = sorted(upto for upto, _ in writes)  # the session only grows
        for upto, (_, text_first) in zip(sizes, writes):
            lt.archive(flat[:upto], session="s", text_first=text_first)
            if fill_between:
                lt.fill_unembedded()
        turns = lt.store.session_turns("s")
        assert len(turns) == (sizes[-1] + 1) // 2  # one entry per user message archived
        assert [t[1] for t in turns] == list(range(len(turns)))
        for i, (pending, has) in _vector_state(db).items():
            assert (pending == 2) == (not has), (i, pending, has)
        lt.fill_vectors()
        assert lt.stats()["vectors_missing"] == 0
        # every stored vector is the one its own summary gives (a grown turn's old vector is never kept)
        rows = lt.store.rows_by_id([t[0] for t in turns])
        summaries = lt.store.entries([t[0] for t in turns], text=False, tags=False)
        for row, vec in zip(rows, lt.store.decode_vectors([r[8] for r in rows])):
            expected = lt.embedder.embed([summaries[row[0]].summary])[0]
            assert float(vec @ expected) > 0.99


def test_a_text_first_archive_is_refused_where_the_backend_cannot_hold_it(tmp_path):
    from lantern.store.base import BaseStore, Dialect

    class NoTextFirst(BaseStore):
        dialect = Dialect(text_first=False)

    with pytest.raises(UnsupportedBackendError, match="text-first"):
        NoTextFirst().add([], None)


# ------------------------------------------------------------------------------------------- the cold hook process
# The hook command as an agent runs it (lantern.__main__, the installed entry point's code), in a new process with
# no daemon to reach; the modules it loaded, on stderr.
_HOOK = (
    "import sys, json\n"
    "host = sys.argv[2]\n"
    "sys.argv = ['lantern', '--db', sys.argv[1], 'hook', host]\n"
    "from lantern.__main__ import main\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    "sys.stderr.write(json.dumps(sorted(sys.modules)))\n"
)


def _cold_hook(tmp_path: Path, db: Path, host: str, payload: dict) -> tuple[str, set[str]]:
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(REPO / "src"),
        "LANTERN_DAEMON": "off",  # no daemon to reach (the warm path's own tests: test_daemon.py)
    }
    (tmp_path / "home").mkdir(exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", _HOOK, str(db), host],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, set(json.loads(done.stderr[done.stderr.rindex("[") :]))


def _store_with_another_session(db: Path) -> None:
    """The user's database as a hook meets it: it exists (its embedder recorded) and holds other work."""
    with Lantern(db) as lt:
        lt.archive(_messages(TURNS[:1]), session="another-project")


@pytest.mark.real_models
@pytest.mark.parametrize("existing", [True, False], ids=["existing-database", "missing-database"])
def test_a_cold_claude_code_session_start_compact_answers_with_no_model_loaded(tmp_path, existing):
    """On the user's database, and on one that does not exist yet (the hook creates it: a new store records its
    embedder when the models are first loaded, not when it is made)."""
    db = tmp_path / "m.db"
    if existing:
        _store_with_another_session(db)
    transcript = tmp_path / "session.jsonl"
    transcript.write_bytes(CLAUDE.read_bytes())  # compacted at its end; none of it archived yet
    payload = {
        "session_id": CLAUDE_SID,
        "transcript_path": str(transcript),
        "hook_event_name": "SessionStart",
        "source": "compact",
        "cwd": "/home/dev/billing",
    }
    out, loaded = _cold_hook(tmp_path, db, "claude-code", payload)
    block = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "5433" in block  # what the fixture's summary dropped
    for heavy in HEAVY:
        assert heavy not in loaded, heavy
    with Lantern(db) as lt:
        missing = lt.stats()["vectors_missing"]
        assert missing > 0 and lt.stats()["entries"] == missing + existing  # the session stored text-first
        assert [e.reason for e in lt.events(CLAUDE_SID)] == ["compact_boundary"]
        # the next process that loads the models gives them their vectors; the same hook then adds nothing, and
        # injects nothing again for the same compaction (one compaction, one injection, one event)
        assert lt.fill_unembedded() == missing
    again, _ = _cold_hook(tmp_path, db, "claude-code", payload)
    assert again == ""
    with Lantern(db) as lt:
        assert lt.stats()["vectors_missing"] == 0 and lt.stats()["entries"] == missing + existing
        assert [e.reason for e in lt.events(CLAUDE_SID)] == ["compact_boundary"]


@pytest.mark.real_models
@pytest.mark.parametrize("compaction", ["compacted-local.jsonl", "compacted-remote.jsonl"])
def test_a_cold_codex_session_start_compact_answers_with_no_model_loaded(tmp_path, compaction):
    db = tmp_path / "m.db"
    _store_with_another_session(db)
    rollout = tmp_path / "rollout-2026-11-24T14-10-00-019b0c3e.jsonl"
    rollout.write_bytes((CODEX / "rollout-before-compaction.jsonl").read_bytes() + (CODEX / compaction).read_bytes())
    payload = {
        "session_id": CODEX_SID,
        "transcript_path": str(rollout),
        "cwd": "/home/dev/payments",
        "hook_event_name": "SessionStart",
        "model": "gpt-5.1-codex",
        "permission_mode": "default",
        "source": "compact",
    }
    out, loaded = _cold_hook(tmp_path, db, "codex", payload)
    block = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "RETRY_BACKOFF_MS" in block  # a specific of the archived turns the summary does not state
    for heavy in HEAVY:
        assert heavy not in loaded, heavy
    with Lantern(db) as lt:
        assert lt.stats()["vectors_missing"] > 0
        lt.recover("retry backoff", session=CODEX_SID)  # a recovery fills them first
        assert lt.stats()["vectors_missing"] == 0


@pytest.mark.real_models
@pytest.mark.parametrize("host", ["claude-code", "codex"])
def test_a_cold_prompt_is_answered_with_no_model_and_its_receipt_says_so(tmp_path, monkeypatch, host):
    """A prompt after a compaction with no daemon up (``no_model``, lantern/__main__.py): its new lines archived
    text-first, the recovery ranked with no query vector (Config.without_models), a block injected all the same,
    and its receipt's source ``<host>:text-first``; every model load would raise here. With the models the same
    prompt is answered too (the warm answer), with the host's own source."""
    from lantern import embed
    from lantern.integrations import claude_code, codex

    db = tmp_path / "m.db"
    offsets = tmp_path / "offsets.json"
    if host == "claude-code":
        module, sid, prompt = claude_code, CLAUDE_SID, "as I said earlier, which port does the billing db use?"
        transcript = tmp_path / "session.jsonl"
        lines = CLAUDE.read_text(encoding="utf-8").splitlines(keepends=True)
        cut = next(i for i, x in enumerate(lines) if "compact_boundary" in x)
        transcript.write_text("".join(lines[:cut]), encoding="utf-8")
        before = {"hook_event_name": "PreCompact", "trigger": "manual"}
        after = "".join(lines[cut:])
        expect = "5433"
    else:
        module, sid, prompt = codex, CODEX_SID, "why did the payments retry give up with LedgerTimeout?"
        transcript = tmp_path / "rollout-2026-11-24T14-10-00-019b0c3e.jsonl"
        transcript.write_bytes((CODEX / "rollout-before-compaction.jsonl").read_bytes())
        before = {"hook_event_name": "PreCompact", "trigger": "auto", "turn_id": "3"}
        after = (CODEX / "compacted-local.jsonl").read_text(encoding="utf-8")
        expect = "RETRY_BACKOFF_MS"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    base = {"session_id": sid, "transcript_path": str(transcript), "cwd": "/x"}
    offs = claude_code.Offsets(offsets)
    assert module.run(json.dumps({**base, **before}), db, offsets=offs) == ""  # archived with the models
    with open(transcript, "a", encoding="utf-8") as f:
        f.write(after)
    ask = json.dumps({**base, "hook_event_name": "UserPromptSubmit", "prompt": prompt})

    def no_load(self):
        raise AssertionError("a model was loaded")

    with monkeypatch.context() as m:
        for cls in (embed.MiniLMEmbedder, embed.USEEmbedder, embed.E5Embedder):
            m.setattr(cls, "load", no_load)
        cold = module.run(ask, db, offsets=offs, no_model=True)
    assert expect in json.loads(cold)["hookSpecificOutput"]["additionalContext"]
    warm = module.run(ask, db, offsets=offs)
    assert expect in json.loads(warm)["hookSpecificOutput"]["additionalContext"]
    with Lantern(db) as lt:
        assert [e.source for e in lt.events(sid)][:2] == [host, f"{host}:text-first"]
