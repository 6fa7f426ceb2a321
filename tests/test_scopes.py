"""Scopes (issue 6, part 6): the user is a hard isolation boundary for every signal and every read path; agent and
project filter. Real SQLite file, the fake embedder (tests/conftest.py)."""

from __future__ import annotations

import hashlib
import sqlite3

import numpy as np
import pytest

from lantern import Lantern
from lantern.compaction import detect
from lantern.integrations.service import MemoryService
from lantern.model import content_hash
from lantern.recover import signals
from lantern.recover.signals import fts_query
from lantern.scope import Scope, scope_where
from lantern.store.migrations import MIGRATIONS
from lantern.text.tags import query_terms

SECRET = "the staging port is 5433 and the API key name is zebra-quartz"
SECRET_TURN = [
    {"role": "user", "content": SECRET},
    {"role": "assistant", "content": "Noted: staging on 5433, key zebra-quartz."},
]
BOB_TURNS = [
    {"role": "user", "content": "Bob here: the build uses gradle 8 with the kotlin DSL."},
    {"role": "assistant", "content": "Okay, gradle 8 and build.gradle.kts."},
    {"role": "user", "content": "Our CI runs on buildkite agents."},
    {"role": "assistant", "content": "Buildkite pipeline in .buildkite/pipeline.yml."},
]
QUERIES = [
    SECRET,
    "zebra-quartz",
    "5433",
    "staging port",
    "what is the API key name?",
    "staging 5433 zebra-quartz port key",
]


@pytest.fixture()
def db(tmp_path, built_db):
    """Alice's secret turn and note, bob's turns, a default user's note: built once per test process (conftest.py
    ``built_db``), a copy per test."""
    return built_db("scopes", _build_scoped, tmp_path / "scoped.db")


def _build_scoped(path):
    with Lantern(path) as lt:
        lt.archive(SECRET_TURN, session="s", user="alice")
        lt.archive(
            [{"role": "user", "content": "alice also likes the deploy window on tuesdays"}], session="s", user="alice"
        )
        lt.archive(BOB_TURNS, session="s", user="bob")
        lt.archive([{"role": "user", "content": "default user notes: docs live in docs/index.md"}], session="s")


def alice_ids(path) -> set[int]:
    con = sqlite3.connect(path)
    ids = {r[0] for r in con.execute("SELECT id FROM entries WHERE user_id = 'alice'")}
    con.close()
    assert len(ids) == 2
    return ids


def test_alice_finds_her_entry_by_every_signal(db):
    """The control: the same queries DO reach alice's entry through each signal when alice asks, so the
    isolation tests below can fail."""
    with Lantern(db, user="alice") as lt:
        cands = lt.explain(SECRET).candidates
        hit = next(c for c in cands if "zebra-quartz" in c.entry.summary)
        assert {"semantic", "fulltext", "keyword", "importance"} <= set(hit.ranks)
        assert "zebra-quartz" in lt.recover("zebra-quartz").text
        assert lt.search("zebra-quartz")[0].entry.user == "alice"


@pytest.mark.parametrize("who", ["bob", "", "carol"])
def test_no_signal_surfaces_another_users_entries(db, who):
    secret_ids = alice_ids(db)
    with Lantern(db) as lt:
        lt.index.refresh()
        scope = Scope(user=who)
        mask = lt.index.scope_mask(scope)
        assert mask is not None  # three users in the file: the mask is never "everything"
        assert not mask[lt.index.positions(sorted(secret_ids))].any()
        for query in QUERIES:
            terms = query_terms(query)
            # each signal on its own
            pos, _ = signals.semantic(lt.index, lt.embedder.embed([query])[0], mask, 50)
            assert not secret_ids & set(lt.index.ids[pos].tolist())
            assert not secret_ids & {i for i, _ in lt.store.fulltext(fts_query(terms), 50, None, scope)}
            pos, _ = signals.keyword(lt.index, terms, mask, 50)
            assert not secret_ids & set(lt.index.ids[pos].tolist())
            # the whole read path: candidates (importance ranks their pool), search, recover
            cands = lt.explain(query, user=who).candidates
            assert all(c.entry.user == who for c in cands)
            assert not secret_ids & {c.entry.id for c in cands}
            assert not secret_ids & {h.entry.id for h in lt.search(query, k=50, user=who)}
            rec = lt.recover(query, user=who, budget=100_000)
            assert "zebra-quartz" not in rec.text and "5433" not in rec.text
            assert not secret_ids & {e.id for e in rec.entries}
            # the session name is shared by every user: a session filter does not open the boundary
            assert not secret_ids & {c.entry.id for c in lt.explain(query, session="s", user=who).candidates}


def test_handle_scope_is_the_default_and_calls_override_it(db):
    with Lantern(db, user="bob") as lt:
        assert "zebra-quartz" not in lt.recover(SECRET, budget=100_000).text
        assert {h.entry.user for h in lt.search(SECRET)} == {"bob"}
        assert "zebra-quartz" in lt.recover(SECRET, user="alice").text
    with Lantern(db) as lt:  # no user anywhere: the default user "", nobody else
        assert {h.entry.user for h in lt.search(SECRET, k=50)} == {""}


def test_compaction_detection_and_service_stay_inside_the_user(db):
    with Lantern(db) as lt:
        messages = [
            {"role": "system", "content": "[Summary] we talked about staging and the API key name"},
            {"role": "user", "content": "so what was the staging port and the key name?"},
        ]
        found = detect(lt, "s", messages, user="bob")
        assert found is not None and found.reason == "summary"
        assert not alice_ids(db) & set(found.lost_entry_ids)
        assert "zebra-quartz" not in found.recover(lt, budget=100_000).text
        found_alice = detect(lt, "s", messages, user="alice")
        assert set(found_alice.lost_entry_ids) == alice_ids(db)
        assert "zebra-quartz" in found_alice.recover(lt).text
    service = MemoryService(db)  # the REST API and the MCP tools call this
    try:
        assert all(h["id"] not in alice_ids(db) for h in service.search(SECRET, k=50, user="bob")["hits"])
        assert "zebra-quartz" not in service.recover(SECRET, user="bob", budget=100_000)["text"]
        assert "zebra-quartz" not in service.recover(SECRET, budget=100_000)["text"]
        assert "zebra-quartz" in service.recover(SECRET, user="alice")["text"]
        with pytest.raises(ValueError, match="user must be a string"):
            service.search(SECRET, user=5)
    finally:
        service.close()


def test_same_text_two_users_two_entries_and_default_hashes_unchanged(tmp_path):
    with Lantern(tmp_path / "h.db") as lt:
        a = lt.archive(SECRET_TURN, session="s", user="alice")
        b = lt.archive(SECRET_TURN, session="s", user="bob")
        d = lt.archive(SECRET_TURN, session="s")
        again = lt.archive(SECRET_TURN, session="s", user="alice")
        assert (a.added, b.added, d.added, again.added, again.duplicates) == (1, 1, 1, 0, 1)
        assert len({a.entry_ids[0], b.entry_ids[0], d.entry_ids[0]}) == 3
        entries = lt.store.entries([a.entry_ids[0], d.entry_ids[0]])
        text = entries[d.entry_ids[0]].text
        # a default-scope entry keeps the hash it had before scopes existed: sha256(session NUL text)
        assert entries[d.entry_ids[0]].content_hash == hashlib.sha256(b"s\x00" + text.encode()).hexdigest()
        assert entries[a.entry_ids[0]].content_hash == content_hash("s", text, "alice") != content_hash("s", text)
        # each user's session numbers its own turns
        assert [lt.store.entries(x.entry_ids)[x.entry_ids[0]].turn for x in (a, b, d)] == [0, 0, 0]
        # and is a session of its own in the counts: "s" of alice, of bob and of the default user
        assert lt.stats(all_users=True)["sessions"] == 3
        lt.archive(SECRET_TURN, session="t", user="alice")
        assert lt.stats(all_users=True)["sessions"] == 4


def test_another_users_turn_never_grows_into_mine(tmp_path):
    """A live turn that grew replaces the session's latest entry, but only within the same scope."""
    with Lantern(tmp_path / "g.db") as lt:
        first = lt.archive([{"role": "user", "content": "start the db"}], session="s", user="alice")
        grown = lt.archive(
            [{"role": "user", "content": "start the db"}, {"role": "assistant", "content": "bob's reply"}],
            session="s",
            user="bob",
        )
        assert grown.added == 1 and grown.entry_ids != first.entry_ids
        assert lt.store.entries(first.entry_ids)[first.entry_ids[0]].text == "user: start the db"


def test_agent_and_project_filter_within_the_user(tmp_path):
    with Lantern(tmp_path / "ap.db", user="alice") as lt:
        lt.archive(SECRET_TURN, session="s", agent="coder", project="billing")
        lt.archive([{"role": "user", "content": "the search service port is 9200"}], session="s", agent="reviewer")
        assert {h.entry.agent for h in lt.search("port")} == {"coder", "reviewer"}  # None: any agent
        assert {h.entry.agent for h in lt.search("port", agent="coder")} == {"coder"}
        assert {h.entry.project for h in lt.search("port", project="billing")} == {"billing"}
        assert lt.search("port", agent="coder", project="other") == []
        assert "zebra-quartz" not in lt.recover(SECRET, agent="reviewer", budget=100_000).text
        assert lt.forget(agent="reviewer") == 1
        assert {h.entry.agent for h in lt.search("port")} == {"coder"}
    with Lantern(tmp_path / "ap.db") as lt:
        assert lt.search("port", agent="coder") == []  # agent filters inside the default user, never across


def test_forget_never_crosses_users(db):
    secret_ids = alice_ids(db)
    with Lantern(db, user="bob") as lt:
        assert lt.forget(entry=min(secret_ids)) == 0
        assert lt.forget(session="s") == 2  # bob's own two turns
        with pytest.raises(ValueError):
            lt.forget()  # the handle's user alone never selects anything
    with Lantern(db) as lt:
        assert lt.store.count() == 3
        assert lt.forget(user="alice") == 2
        assert lt.store.count() == 1 and lt.search(SECRET, user="alice") == []


def test_bad_scope_names_are_clear_errors(db):
    with Lantern(db) as lt:
        with pytest.raises(TypeError, match="user must be a string"):
            lt.recover("x", user=3)
        # NUL is no error: the name's stored form has U+FFFD there (scope.clean_name; test_unstorable_names.py)
        assert lt.archive([{"role": "user", "content": "x"}], user="a\x00b").added == 1
        assert lt.stats(user="a\ufffdb")["entries"] == 1
    with pytest.raises(TypeError, match="agent must be a string"):
        Lantern(db, agent=["x"])


def test_scope_where_fragment_for_joined_tables(db):
    sql, params = scope_where("e", Scope("alice", project="p"))
    assert (sql, params) == ("e.user_id = ? AND e.project = ?", ["alice", "p"])
    with Lantern(db) as lt:
        where, args = lt.store.scope_where("e", Scope("alice"))
        rows = lt.store.db.execute(f"SELECT e.id FROM entries e WHERE {where}", args).fetchall()
        assert {r[0] for r in rows} == alice_ids(db)


def test_a_version_1_database_migrates_into_the_default_user(tmp_path):
    """A database written before scopes (schema 1) opens: its entries belong to the default user "", keep their
    hashes (re-archiving the same turn adds nothing) and stay invisible to other users."""
    path = tmp_path / "v1.db"
    with Lantern(tmp_path / "donor.db") as donor:
        vector = donor.embedder.embed(["user: the legacy cron runs at 02:00 UTC"])[0]
        embedder_id, dim = donor.embedder.id, donor.embedder.dim
    text = "user: the legacy cron runs at 02:00 UTC"
    con = sqlite3.connect(path, isolation_level=None)
    MIGRATIONS[0](con)
    con.execute("PRAGMA user_version = 1")
    con.executemany("INSERT INTO meta VALUES (?, ?)", [("embedder", embedder_id), ("dim", str(dim))])
    con.execute(
        "INSERT INTO entries(id, session, turn, archived_at, text, summary, tags, hints, memory_type, importance, "
        "content_hash, confidence, success) VALUES (1, 'old', 0, 1.7e9, ?, ?, '[]', '[]', 'episodic', 0.5, ?, 0.5, "
        "0.5)",
        (text, text, content_hash("old", text)),
    )
    con.execute("INSERT INTO embeddings VALUES (1, ?)", (np.asarray(vector, "<f4").tobytes(),))
    con.execute("INSERT INTO entries_fts(rowid, body, tags) VALUES (1, ?, '')", (text + "\n" + text,))
    con.close()
    with Lantern(path) as lt:
        assert lt.stats()["schema_version"] >= 2
        assert (
            lt.archive([{"role": "user", "content": "the legacy cron runs at 02:00 UTC"}], session="old").duplicates
            == 1
        )
        assert lt.search("legacy cron")[0].entry.user == ""
        assert lt.search("legacy cron", user="alice") == []


def test_facts_and_fact_notes_stay_inside_the_user(tmp_path):
    """Issue 6 part 6: the facts signal too. Bob's "port is 6000" neither supersedes alice's 5433 nor shows in her
    facts or her recovery's notes, and each user's history holds only their own versions."""
    with Lantern(tmp_path / "f.db") as lt:
        lt.archive([{"role": "user", "content": "The staging port is 5433."}], session="s", user="alice")
        lt.archive([{"role": "user", "content": "The staging port is 6000."}], session="s", user="bob")
        alice = lt.facts("staging port", history=True, user="alice")
        bob = lt.facts("staging port", history=True, user="bob")
        assert [(f.value, f.current) for f in alice] == [("5433", True)]
        assert [(f.value, f.current) for f in bob] == [("6000", True)]
        assert lt.facts(history=True) == []  # the default user has none
        block = lt.recover("what is the staging port?", user="alice")
        assert "5433" in block.text and "6000" not in block.text
        assert all("6000" not in str(f) for f in block.facts)


def test_feedback_and_pending_recoveries_stay_inside_the_user(db):
    """Bob can neither move the success rate of alice's entries by feedback nor by archiving a reply in a
    session of the same name after alice's recovery (reinforce.py)."""
    alice = sorted(alice_ids(db))
    with Lantern(db) as lt:

        def sigma():
            return dict(lt.store.db.execute("SELECT id, success FROM entries WHERE user_id = 'alice'").fetchall())

        before = sigma()
        assert lt.feedback(alice, False, user="bob") == 0 and lt.feedback(alice, False) == 0
        assert sigma() == before
        rec = lt.recover("what is the staging port?", session="s", user="alice")
        assert rec.entries
        lt.archive(
            [{"role": "user", "content": "hm"}, {"role": "assistant", "content": "no: port 5433, key zebra-quartz"}],
            session="s",
            user="bob",
        )
        assert sigma() == before  # bob's reply does not judge alice's recovery
        assert lt.stats(user="alice")["pending_recoveries"] == 1
        lt.archive(
            [{"role": "user", "content": "so?"}, {"role": "assistant", "content": "It was 5433 with zebra-quartz."}],
            session="s",
            user="alice",
        )
        assert sigma() != before and lt.stats(user="alice")["pending_recoveries"] == 0  # her own reply does
        assert lt.feedback(alice, True, user="alice") == len(alice)


def test_cli_scope_of_forget_facts_and_feedback(db, monkeypatch):
    """`forget --user ""` is the default user even with $LANTERN_USER set; `facts` and `feedback` take --user."""
    from typer.testing import CliRunner

    from lantern.cli import app

    runner = CliRunner()
    monkeypatch.setenv("LANTERN_USER", "alice")
    ids = sorted(alice_ids(db))
    with Lantern(db) as lt:
        lt.archive([{"role": "user", "content": "The deploy region is eu-west-3."}], session="f", user="alice")
    out = runner.invoke(app, ["--db", str(db), "facts", "--json"])
    assert out.exit_code == 0 and "eu-west-3" in out.output  # $LANTERN_USER is alice
    out = runner.invoke(app, ["--db", str(db), "facts", "--json", "--user", "bob"])
    assert out.exit_code == 0 and "eu-west-3" not in out.output
    out = runner.invoke(app, ["--db", str(db), "feedback", *map(str, ids), "--not-useful", "--user", "bob"])
    assert out.exit_code == 0 and "0 entries marked" in out.output and "2 of the ids are not entries" in out.output
    out = runner.invoke(app, ["--db", str(db), "forget", "--yes", "--user", ""])
    assert out.exit_code == 0, out.output
    con = sqlite3.connect(db)
    users = {u for (u,) in con.execute("SELECT DISTINCT user_id FROM entries")}
    con.close()
    assert users == {"alice", "bob"}  # the default user's entry went; alice's stayed
