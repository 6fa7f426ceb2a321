"""Rewound branches (issue #19, item 2): turns a Claude Code user rewound away are never recovered as if they had
happened on the live branch. Built from session files in Claude Code's real record shape
(tests/claude_code_sessions.py): one rewind, several, a rewind inside the region a compaction summarized, a rewind
of the very last turn; through ``lantern ingest``, the hooks (archiving as the session grows, so the abandoned turn
is archived before the rewind shows), and ``Config.rewound`` = skip (default) or mark."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from claude_code_sessions import SID, Session, cache_session
from lantern import Lantern
from lantern.archive.parse.claude_code import read_claude_code
from lantern.config import Config
from lantern.integrations import claude_code

# ---------------------------------------------------------------------------------------------- the sessions


def several_rewinds() -> Session:
    """A /health endpoint (parallel Read + Grep, both results on the live branch), then the server choice tried
    three times: gunicorn with 2 workers, rewound; gunicorn with 4, rewound; uvicorn with 4 workers, kept."""
    s = Session()
    s.turn(
        "Add a /health endpoint to the API.",
        "Reading the app and its routes.",
        tools=[
            ("Read", {"file_path": "/home/dev/shop/app.py"}, "app = FastAPI()\n"),
            ("Grep", {"pattern": "@app.get", "path": "/home/dev/shop"}, "app.py:12:@app.get('/products')"),
        ],
        after="Added GET /health returning {'status': 'ok'} in app.py.",
    )
    s.turn("Serve it with gunicorn.", "Wrote a Procfile: gunicorn app:app --workers 2 --bind 0.0.0.0:8081.")
    s.rewind(1)
    s.turn("Serve it with gunicorn, 4 workers.", "Wrote a Procfile: gunicorn app:app --workers 4 --bind 0.0.0.0:8082.")
    s.rewind(1)
    s.turn("Serve it with uvicorn and 4 workers.", "Wrote a Procfile: uvicorn app:app --workers 4 --port 8083.")
    s.turn("Add a Dockerfile.", "Added a Dockerfile: python:3.12-slim, CMD from the Procfile, EXPOSE 8083.")
    return s


SUMMARY = (
    "Analysis:\nThe user set up the shop's payments database and its cache.\n\nSummary:\n1. Primary Request: local "
    "services for the shop.\n2. Work done: started the payments database, configured the cache.\n3. Pending: none."
)


def compacted_rewind(s: Session | None = None) -> Session:
    """The payments database: first started on 5434 (rewound: the user wanted it next to the other one), then on
    5433; then the cache; then /compact, whose summary keeps none of the ports."""
    s = s or Session()
    s.turn("Start postgres for the payments service.", "Started postgres for payments on port 5434.")
    s.rewind(0)
    s.turn(
        "Start postgres for the payments service, on the port after the orders database (5432).",
        "Started postgres for payments on port 5433: docker run -p 5433:5432 postgres:16.",
    )
    s.turn("Now start redis for the cache.", "Started redis on port 6380.")
    s.compact(SUMMARY)
    return s


def texts(db: Path, session: str | None = None) -> dict[str, list[str]]:
    """Session -> its archived turn texts."""
    with Lantern(db) as memory:
        rows = memory.store.db.execute("SELECT session, text FROM entries ORDER BY session, turn").fetchall()
    out: dict[str, list[str]] = {}
    for name, text in rows:
        out.setdefault(name, []).append(text)
    return out


# ---------------------------------------------------------------------------------------------- the parser


def test_the_live_branch_is_the_chain_from_the_last_record_and_parallel_results_stay_on_it():
    t = read_claude_code(several_rewinds().text())
    abandoned = [m for m in t.messages if m.meta.get("abandoned")]
    live = [m for m in t.messages if not m.meta.get("abandoned")]
    said = " ".join(m.text for m in abandoned)
    assert "--workers 2" in said and "--workers 4 --bind" in said and "uvicorn" not in said
    assert any("Dockerfile" in m.text for m in live) and any("uvicorn" in m.text for m in live)
    # both results of the parallel Read + Grep are live: a one-parent walk skips all but the last of them
    results = [r.content for m in live for r in m.tool_results]
    assert "app = FastAPI()\n" in results and any("@app.get" in r for r in results)
    # each abandoned branch is its own sub-session, named after its first record
    assert len({m.session for m in abandoned}) == 2 and all(m.session.startswith("abandoned-") for m in abandoned)
    assert t.last_user_text() == "Add a Dockerfile."


def test_a_rewind_to_the_first_prompt_abandons_everything_before_the_new_root():
    s = Session()
    s.turn("Use MySQL for the shop.", "Configured MySQL 8 on port 3306.")
    s.rewind(0)  # the new first prompt has no parent: a second root
    s.turn("Use SQLite for the shop.", "Configured SQLite at data/shop.db.")
    t = read_claude_code(s.text())
    assert [m.text for m in t.messages if m.meta.get("abandoned") and m.role == "user"] == ["Use MySQL for the shop."]


def test_what_cannot_be_trusted_marks_nothing():
    s = cache_session()
    # a loop in the parent links: no branch can be trusted
    looped = [dict(r) for r in s.records]
    first = next(r for r in looped if r.get("uuid"))
    first["parentUuid"] = looped[-1]["uuid"]
    assert not read_claude_code("".join(json.dumps(r) + "\n" for r in looped)).abandoned
    # a transcript without uuids (older or hand-written files): nothing is abandoned
    bare = [{k: v for k, v in r.items() if k not in ("uuid", "parentUuid")} for r in s.records]
    assert not read_claude_code("".join(json.dumps(r) + "\n" for r in bare)).abandoned
    # a file that starts mid-conversation (a resumed session's file: its first parent is in another file) still
    # knows the branches after its start
    resumed = s.records[2:]
    t = read_claude_code("".join(json.dumps(r) + "\n" for r in resumed))
    assert t.joins is not None and any("PRODUCT_TTL = 300" in m.text for m in t.messages if m.meta.get("abandoned"))


# ---------------------------------------------------------------------------------------------- ingest


@pytest.mark.parametrize("mode", ["skip", "mark"])
def test_ingest_skips_or_marks_a_rewound_turn_and_takes_no_fact_from_it(tmp_path, mode):
    path = cache_session().write(tmp_path / f"{SID}.jsonl")
    db = tmp_path / "m.db"
    with Lantern(db, config=replace(Config(), rewound=mode)) as memory:
        memory.ingest(path)
        facts = {f.key: f.value for f in memory.facts()}
        rec = memory.recover("what TTL did we give product pages?", session=SID, budget=3000)
    stored = texts(db)
    main = " ".join(stored[SID])
    assert "PRODUCT_TTL = 900" in main and "PRODUCT_TTL = 300" not in main
    gone = {name: t for name, t in stored.items() if "/abandoned-" in name}
    if mode == "skip":
        assert not gone and "300" not in rec.text
    else:
        ((name, turns),) = gone.items()
        assert name.startswith(f"{SID}/abandoned-") and "PRODUCT_TTL = 300" in turns[0]
        assert "/abandoned-" in rec.text or "300" not in rec.text  # if it is recovered, it is under its branch
    assert "300" not in {str(v) for v in facts.values()}  # the abandoned value is no fact, current or past
    assert "900" in {str(v) for v in facts.values()}


def test_ingest_default_is_skip_and_reingest_adds_nothing(tmp_path):
    path = several_rewinds().write(tmp_path / f"{SID}.jsonl")
    with Lantern(tmp_path / "m.db") as memory:
        first = memory.ingest(path)
        again = memory.ingest(path)
    stored = texts(tmp_path / "m.db")
    assert list(stored) == [SID] and len(stored[SID]) == 3 and first.added == 3 and again.added == 0
    assert "gunicorn" not in " ".join(stored[SID])


# ---------------------------------------------------------------------------------------------- hooks


def payload(event: str, transcript: Path, **extra) -> str:
    return json.dumps(
        {"session_id": SID, "transcript_path": str(transcript), "cwd": "/home/dev/shop", "hook_event_name": event}
        | extra
    )


class Hooks:
    """Claude Code's hook calls around a growing transcript, in-process (claude_code.run), one database."""

    def __init__(self, tmp_path: Path, mode: str, monkeypatch):
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        self.db, self.mode = tmp_path / "hooks.db", mode
        self.offsets = claude_code.Offsets(tmp_path / "offsets.json")
        self.transcript = tmp_path / f"{SID}.jsonl"
        self.transcript.write_text("")
        self.written = 0

    def grow(self, s: Session) -> None:
        self.written = s.append(self.transcript, self.written)

    def __call__(self, event: str, **extra) -> str:
        out = claude_code.run(payload(event, self.transcript, **extra), self.db, self.offsets, rewound=self.mode)
        return json.loads(out)["hookSpecificOutput"]["additionalContext"] if out else ""


@pytest.mark.parametrize("mode", ["skip", "mark"])
def test_hooks_take_an_archived_turn_off_the_session_once_a_rewind_shows(tmp_path, monkeypatch, mode):
    hooks, s = Hooks(tmp_path, mode, monkeypatch), Session()
    s.turn("Start postgres for the payments service.", "Postgres is up. The payments db port is 5434.")
    hooks.grow(s)
    hooks("Stop")  # the turn on port 5434 is archived: nothing says yet that it will be rewound
    assert "5434" in " ".join(texts(hooks.db)[SID])
    s.rewind(0)
    s.turn("Start postgres for payments on port 5433.", "Postgres is up. The payments db port is 5433.")
    s.turn("Now start redis for the cache.", "Started redis on port 6380.")
    hooks.grow(s)
    hooks("Stop")
    stored = texts(hooks.db)
    assert "5434" not in " ".join(stored[SID]) and len(stored[SID]) == 2
    gone = [t for name, ts in stored.items() if "/abandoned-" in name for t in ts]
    assert (len(gone), "5434" in " ".join(gone)) == ((0, False) if mode == "skip" else (1, True))
    with Lantern(hooks.db) as memory:
        assert {str(f.value) for f in memory.facts()} >= {"5433"} and "5434" not in {
            str(f.value) for f in memory.facts()
        }
    hooks("Stop")  # nothing new: nothing changes
    assert texts(hooks.db) == stored


@pytest.mark.parametrize("mode", ["skip", "mark"])
def test_a_rewind_inside_the_compacted_region_is_not_injected_as_history(tmp_path, monkeypatch, mode):
    hooks, s = Hooks(tmp_path, mode, monkeypatch), Session()
    s.turn("Start postgres for the payments service.", "Started postgres for payments on port 5434.")
    hooks.grow(s)
    hooks("Stop")
    compacted_rewind_tail(s)
    hooks.grow(s)
    hooks("PreCompact", trigger="manual")
    s.compact(SUMMARY)
    hooks.grow(s)
    block = hooks("SessionStart", source="compact")
    assert "5433" in block and "6380" in block
    if mode == "skip":
        assert "5434" not in block
    else:  # kept, but only under its branch's own session line, never among the session's turns
        main = block.split("/abandoned-")[0]
        assert "5434" not in main


def compacted_rewind_tail(s: Session) -> None:
    s.rewind(0)
    s.turn(
        "Start postgres for the payments service, on the port after the orders database (5432).",
        "Started postgres for payments on port 5433: docker run -p 5433:5432 postgres:16.",
    )
    s.turn("Now start redis for the cache.", "Started redis on port 6380.")


def test_a_whole_compacted_session_ingested_at_once_is_the_same(tmp_path):
    path = compacted_rewind().write(tmp_path / f"{SID}.jsonl")
    with Lantern(tmp_path / "m.db") as memory:
        memory.ingest(path)
    main = " ".join(texts(tmp_path / "m.db")[SID])
    assert "5433" in main and "6380" in main and "5434" not in main


@pytest.mark.parametrize("mode", ["skip", "mark"])
def test_a_rewind_of_the_very_last_turn_then_compact(tmp_path, monkeypatch, mode):
    """The last turn is archived by its Stop hook; the user rewinds it and runs /compact at once: no new prompt ever
    shows the rewind, only the compact boundary, whose logical parent is the turn before."""
    hooks, s = Hooks(tmp_path, mode, monkeypatch), Session()
    s.turn("Start postgres for the payments service.", "Started postgres for payments on port 5433.")
    s.turn("Now start redis for the cache.", "Started redis on port 6380.")
    hooks.grow(s)
    hooks("Stop")
    s.turn("Drop the orders table to start clean.", "Dropped table orders (12,408 rows) in the payments database.")
    hooks.grow(s)
    hooks("Stop")
    assert len(texts(hooks.db)[SID]) == 3
    s.rewind(2)
    hooks("PreCompact", trigger="manual")  # the rewind wrote nothing: nothing to see yet
    s.compact(SUMMARY)
    hooks.grow(s)
    block = hooks("SessionStart", source="compact")
    stored = texts(hooks.db)
    assert len(stored[SID]) == 2 and "Dropped table orders" not in " ".join(stored[SID])
    assert "5433" in block
    if mode == "skip":
        assert "Dropped" not in block and not any("/abandoned-" in name for name in stored)
    else:
        assert any("/abandoned-" in name for name in stored) and "Dropped" not in block.split("/abandoned-")[0]


def test_a_rewound_last_prompt_is_not_the_query_after_compaction(tmp_path, monkeypatch):
    """A prompt interrupted and rewound just before /compact is still the last user text in the file; the query
    of the recovery is the live branch's last prompt."""
    hooks, s = Hooks(tmp_path, "skip", monkeypatch), Session()
    s.turn("Start postgres for the payments service.", "Started postgres for payments on port 5433.")
    s.turn("Now start redis for the cache.", "Started redis on port 6380.")
    s.prompt("Delete every docker volume on this machine.")  # interrupted: no reply, then rewound
    s.rewind(2)
    s.compact(SUMMARY)
    hooks.grow(s)
    parsed = claude_code.read_since_last_compaction(hooks.transcript)
    full = read_claude_code(hooks.transcript.read_text())
    assert full.last_user_text() == "Now start redis for the cache."
    assert parsed is not None


# ---------------------------------------------------------------------------------------------- the command line


def test_the_rewound_option_reaches_ingest_and_refuses_other_values(tmp_path):
    from clirun import lantern as cli

    path = cache_session().write(tmp_path / f"{SID}.jsonl")
    db = tmp_path / "c.db"
    assert cli("--db", db, "--rewound", "mark", "ingest", path).returncode == 0
    assert any("/abandoned-" in name for name in texts(db))
    bad = cli("--db", db, "--rewound", "keep", "ingest", path)
    assert bad.returncode == 2 and b"expected skip or mark" in bad.stderr


def test_the_hook_command_line_runs_without_the_cli_and_keeps_its_options():
    from lantern.__main__ import hook_options

    assert hook_options(["hook", "claude-code"]) == {}
    assert hook_options(["--db", "/x/m.db", "--rewound=mark", "hook", "claude-code"]) == {
        "--db": "/x/m.db",
        "--rewound": "mark",
    }
    assert hook_options(["--embedder", "minilm", "hook", "claude-code"]) is None  # the CLI parses that one
    assert hook_options(["--db", "hook", "claude-code"]) is None
    assert hook_options(["ingest", "x.jsonl"]) is None


def test_install_pins_the_rewound_mode_in_the_hook_command(tmp_path):
    from lantern.integrations import claude_code_settings

    path, changed = claude_code_settings.install("project", project_dir=tmp_path, rewound="mark")
    commands = {
        h["command"] for groups in json.loads(path.read_text())["hooks"].values() for g in groups for h in g["hooks"]
    }
    (command,) = commands
    assert command.endswith("--rewound mark hook claude-code") and changed
    assert claude_code_settings.install("project", project_dir=tmp_path, uninstall=True)[1]  # still found as ours
