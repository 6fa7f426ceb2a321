"""Recall improvements of the read path on real stores: Porter-stemmed full text (m005), the neighbour signal,
RM3 feedback (prf), the time signal and the session-grouped block (recover/neighbours.py, prf.py, timeframe.py,
pack.py)."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from lantern import Lantern
from lantern.config import Config
from lantern.model import Entry, Message
from lantern.recover import prf, timeframe
from lantern.recover.neighbours import NEIGHBOUR
from lantern.recover.pack import TITLE, pack
from lantern.store import migrations

pytestmark = pytest.mark.real_models  # recall by meaning: the real models

LOCOMO = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo" / "locomo10.json"
BASE = Config()
ONLY_NEIGHBOUR_OFF = replace(BASE, signals=tuple(s for s in BASE.signals if s != NEIGHBOUR))


def chat(*lines: tuple[str, str, str]) -> list[Message]:
    """(speaker, text, ISO time) -> user messages, one turn each (two people talking, as in LoCoMo)."""
    return [Message(role="user", text=text, name=who, time=datetime.fromisoformat(when)) for who, text, when in lines]


DAY1 = "2023-05-08T13:56:00+00:00"
DAY2 = "2023-07-07T18:29:00+00:00"
TALK = chat(
    ("Maria", "Hey John, how was the weekend?", DAY1),
    ("John", "Busy! I repaired the fence and then read a novel.", DAY1),
    ("Maria", "What activities do you all enjoy doing together as a family?", DAY1),
    ("John", "We love hiking, picnics at the park and board games at home.", DAY1),
    ("Maria", "Sounds lovely. I adopted a puppy named Coco last week.", DAY1),
    ("John", "The flood last week ruined homes in my old area: the drains failed, we must fix the drains.", DAY2),
    ("Maria", "Agreed, the council has to hear about the drains.", DAY2),
    ("John", "I finished writing my first screenplay yesterday.", DAY2),
)


@pytest.fixture()
def talk(tmp_path, built_db):
    """A handle on a copy of the database of ``TALK`` (session "chat"), built once per test process (conftest.py
    ``built_db``)."""
    with Lantern(built_db("recall-quality-talk", _build_talk, tmp_path / "talk.db")) as lt:
        yield lt


def _build_talk(path):
    with Lantern(path) as lt:
        lt.archive(TALK, session="chat")


def ids_by_text(lt: Lantern) -> dict[str, int]:
    rows = lt.store.db.execute("SELECT id, text FROM entries").fetchall()
    return {text: i for i, text in rows}


def find(lt: Lantern, fragment: str) -> int:
    return next(i for text, i in ids_by_text(lt).items() if fragment in text)


# ---------------------------------------------------------------- m005: Porter-stemmed full text
def test_fulltext_index_is_porter_stemmed(talk):
    sql = talk.store.db.execute("SELECT sql FROM sqlite_master WHERE name = 'entries_fts'").fetchone()[0]
    assert "porter unicode61" in sql
    # "screenplays" / "writes" match "screenplay" / "writing" only through the stemmer
    hits = talk.store.fulltext('"screenplays" OR "writes"', 10)
    assert [i for i, _ in hits] == [find(talk, "first screenplay")]


def test_migration_m005_keeps_every_row_of_an_older_store(tmp_path):
    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    for number, fn in enumerate(migrations.MIGRATIONS[:4], start=1):  # a store as schema 4 left it
        db.execute("BEGIN")
        fn(db)
        db.execute(f"PRAGMA user_version = {number}")
        db.execute("COMMIT")
    db.execute("INSERT INTO entries_fts(rowid, body, tags) VALUES (7, 'She visited two cities', 'travel')")
    db.execute("INSERT INTO entries_fts(rowid, body, tags) VALUES (9, '端口 5433 visit', '')")
    assert db.execute("SELECT count(*) FROM entries_fts WHERE entries_fts MATCH 'city'").fetchone()[0] == 0
    db.execute("BEGIN")
    migrations.MIGRATIONS[4](db)  # m005 alone: m008 rebuilds the index from entries rows, which this store lacks
    db.execute("COMMIT")
    assert db.execute("SELECT rowid FROM entries_fts WHERE entries_fts MATCH 'city'").fetchall() == [(7,)]
    assert sorted(r[0] for r in db.execute("SELECT rowid FROM entries_fts WHERE entries_fts MATCH 'visits'")) == [7, 9]
    assert db.execute("SELECT body FROM entries_fts WHERE rowid = 9").fetchone()[0] == "端口 5433 visit"
    db.close()


# ---------------------------------------------------------------- neighbour signal
def test_neighbour_signal_brings_the_answer_that_shares_no_query_word(talk):
    answer = find(talk, "hiking, picnics")
    question = find(talk, "What activities do you all enjoy")
    on = talk.explain("What activities does the family enjoy doing together?", budget=6000)
    by_id = {c.entry.id: c for c in on.candidates}
    assert by_id[question].ranks.get("fulltext") == 1
    assert by_id[answer].ranks.get(NEIGHBOUR) == 1  # the turn after the best hit
    assert answer in [e.id for e in on.entries]
    talk.config = ONLY_NEIGHBOUR_OFF
    off = talk.explain("What activities does the family enjoy doing together?", budget=6000)
    assert all(NEIGHBOUR not in c.ranks for c in off.candidates)


def test_neighbour_never_adds_an_excluded_turn(talk):
    answer = find(talk, "hiking, picnics")
    rec = talk.explain("What activities does the family enjoy doing together?", budget=6000, exclude=[answer])
    assert answer not in {c.entry.id for c in rec.candidates}


# ---------------------------------------------------------------- RM3 feedback
def test_relevance_model_weights_by_document_score_and_length():
    model = prf.relevance_model(["alpha beta beta", "beta gamma"], [3.0, 1.0], exclude={"alpha"})
    # p(beta|R) = 0.75 * 2/3 + 0.25 * 1/2; gamma = 0.25 * 1/2; alpha excluded
    assert model == pytest.approx({"beta": 0.75 * 2 / 3 + 0.25 / 2, "gamma": 0.25 / 2})
    assert prf.relevance_model([], [], set()) == {}


def test_prf_signal_finds_a_turn_through_an_expansion_term(talk):
    # a longer history, so that the expanded query's terms are rare enough to be kept (signals.select_terms)
    talk.archive(
        chat(
            *[
                ("Maria" if i % 2 else "John", f"Small talk number {i} about the weather and {w}.", DAY1)
                for i, w in enumerate(["tea", "cats", "rain", "music", "bikes", "clouds"] * 6)
            ]
        ),
        session="filler",
    )
    talk.config = replace(BASE, prf_docs=2, prf_terms=5)
    drains = find(talk, "council has to hear about the drains")
    rec = talk.explain("flood ruined homes", budget=6000)
    by_id = {c.entry.id: c for c in rec.candidates}
    # shares no word with the query; "drains" comes from the flood turn, the best BM25 hit
    assert "fulltext" not in by_id[drains].ranks and by_id[drains].ranks.get(prf.PRF)


# ---------------------------------------------------------------- time signal
def test_query_windows_read_days_and_months():
    def days(q):
        return [
            (datetime.fromtimestamp(a, timezone.utc).date().isoformat(), (b - a) / 86400)
            for a, b in timeframe.query_windows(q)
        ]

    assert days("What did we decide on 7 July, 2023?") == [("2023-07-07", 1.0)]
    assert days("on October 13th, 2023 and 2024-02-29") == [("2023-10-13", 1.0), ("2024-02-29", 1.0)]
    assert days("What happened in January 2022?") == [("2022-01-01", 31.0)]
    assert days("2023年5月8日说了什么") == [("2023-05-08", 1.0)]
    assert days("in June, as you may recall") == [] and days("in 2023") == []


def test_time_signal_ranks_the_turns_of_the_named_day(talk):
    talk.config = replace(BASE, time_slack_days=0.0)
    rec = talk.explain("What did John and Maria talk about on 7 July, 2023?", budget=6000)
    timed = {c.entry.id for c in rec.candidates if timeframe.TIME in c.ranks}
    assert timed == {find(talk, "flood last week"), find(talk, "council has"), find(talk, "first screenplay")}
    assert not any(timeframe.TIME in c.ranks for c in talk.explain("What did John fix?", budget=6000).candidates)


# ---------------------------------------------------------------- grouped packing
def entry(i: int, session: str, turn: int, text: str, when: str | None) -> Entry:
    t = datetime.fromisoformat(when) if when else None
    return Entry(
        id=i,
        session=session,
        turn=turn,
        text=text,
        summary=text[:40],
        tags=[],
        memory_type="episodic",
        importance=0.5,
        content_hash=str(i),
        time=t,
    )


ENTRIES = [
    entry(1, "s/2", 5, "Answer five " * 4, "2023-07-07 18:29"),
    entry(2, "s/1", 3, "Question three " * 5, "2023-05-08 13:56"),
    entry(3, "s/2", 4, "Question four " * 3, "2023-07-07 18:29"),
    entry(4, "s/2", 9, "Later that day " * 3, "2023-07-07 21:05"),
    entry(5, "s/2", 12, "Next morning " * 3, "2023-07-08 08:00"),
    entry(6, "s/3", 0, "No clock " * 3, None),
]


def test_grouped_block_names_each_session_once_with_turns_in_order():
    res = pack(iter(ENTRIES), 6000, [], group=True)
    assert res.text.startswith(TITLE + "\n\n[session s/2 · 2023-07-07 18:29]\n[turn 4]\n")  # three sessions
    one = pack(iter(ENTRIES[:1]), 6000, [], group=True)
    assert one.text.startswith(TITLE + "\n\n[session s/2")  # one title, whatever the sessions
    side = entry(7, "s/2/sidechain-a1", 0, "Subagent found it " * 3, "2023-07-07 18:30")
    assert pack(iter([ENTRIES[0], side]), 6000, [], group=True).text.startswith(TITLE + "\n")  # its sub-session too
    assert res.text.count("[session s/2") == 1 and "[session s/1 · 2023-05-08 13:56]\n[turn 3]\n" in res.text
    assert res.text.index("[turn 4]") < res.text.index("[turn 5]") < res.text.index("[turn 9 · 21:05]")
    assert "[turn 12 · 2023-07-08 08:00]" in res.text and "[session s/3]\n[turn 0]\n" in res.text
    assert [p.entry.id for p in res.packed] == [1, 2, 3, 4, 5, 6] and len(res.text) <= 6000
    plain = pack(iter(ENTRIES), 6000, [])
    assert len(res.text) < len(plain.text)


@pytest.mark.parametrize("budget", [150, 200, 260, 333, 400, 517, 640])
def test_grouped_block_never_exceeds_the_budget(budget):
    res = pack(iter(ENTRIES), budget, ["answer"], min_excerpt=20, group=True)
    assert len(res.text) <= budget
    assert {p.entry.id for p in res.packed} == {i for i, (v, _) in res.verdicts.items() if v in ("packed", "excerpt")}
    for p in res.packed:
        assert p.text in res.text


# ---------------------------------------------------------------- on a real LoCoMo conversation
@pytest.mark.skipif(not LOCOMO.exists(), reason="../shared/data/locomo not present")
def test_locomo_answer_turn_recovered_by_neighbour_and_stemming(tmp_path):
    from lantern.eval.datasets import load_locomo

    history = load_locomo(LOCOMO).histories[0]  # conv-26, sessions 1-4
    messages = [m for m in history.messages if m.session in {f"session_{n}" for n in range(1, 5)}]
    with Lantern(tmp_path / "locomo.db") as lt:
        lt.archive(messages, session=history.id)
        rec = lt.explain("What did Melanie paint recently?", budget=2000)
        texts = [e.text for e in rec.entries]
        assert any("sunrise" in t for t in texts)  # "I painted that lake sunrise": "paint" -> "painted" by the stemmer
        assert rec.chars <= 2000 and rec.text.count("[session ") <= len(rec.entries)
