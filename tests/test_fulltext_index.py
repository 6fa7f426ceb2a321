"""The contentless full-text index (store/fulltext.py) stays exactly what a rebuild from ``entries`` gives, whatever
sequence of writes, grown turns, long windowed turns, deletes, moves and forgets ran: FTS5 deletes from a contentless
table with the values it is given, so a delete that sent other values than the insert would leave terms behind or
corrupt the counts bm25 reads. Compared term by term, position by position (``fts5vocab`` 'instance'), row sizes
(``_docsize``) and bm25 scores; a forgotten turn's terms are gone from the index after the erase."""

from __future__ import annotations

import io
import json
import sqlite3

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from lantern.errors import LanternError
from lantern.model import Tag, content_hash
from lantern.scope import Scope
from lantern.store import fulltext, migrations
from lantern.store.packed import unpack
from lantern.store.sqlite import NewEntry, Store
from lantern.text.windows import WINDOWED_FROM

DIM = 4
# words with CJK runs, JSON escapes, stems and punctuation: what fts_rows rewrites
WORDS = ["port", "ports", "visited", "数据库", "端口", "db\\nhost", "a\\tb", "cron", "naïve", "x.py", "5433", "alpha"]


def marker(n: int) -> str:
    return f"mk{n}q"  # one token no other turn holds (unicode61 keeps it whole; Porter leaves it)


def new_entry(session: str, text: str, summary: str, user: str = "", tags: tuple[str, ...] = ()) -> NewEntry:
    return NewEntry(
        session=session,
        text=text,
        summary=summary,
        tags=[Tag("topic", t) for t in tags],
        hints=[],
        memory_type="episodic",
        importance=0.5,
        content_hash=content_hash(session, text, user),
        user=user,
    )


def open_store() -> Store:
    store = Store(":memory:")
    store.check_embedder("test", DIM)
    return store


def instances(db: sqlite3.Connection) -> list[tuple]:
    """Every (term, rowid, column, token offset) of the index."""
    db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.vocab USING fts5vocab(main, entries_fts, instance)")
    return db.execute("SELECT term, doc, col, offset FROM temp.vocab ORDER BY 1, 2, 3, 4").fetchall()


def rebuilt(db: sqlite3.Connection) -> sqlite3.Connection:
    """A fresh database holding only the index built from ``db``'s entries rows."""
    fresh = sqlite3.connect(":memory:", isolation_level=None)
    fresh.execute(fulltext.CREATE_TABLE)
    for entry_id, summary, text, tags in db.execute("SELECT id, summary, text, tags FROM entries"):
        values = [v for _, v in json.loads(unpack(tags))]  # stored deflated when that is shorter (store/packed.py)
        fulltext.index_entry(fresh, entry_id, unpack(summary), text, values)
    return fresh


def assert_index_is_a_rebuild(db: sqlite3.Connection) -> None:
    fresh = rebuilt(db)
    assert instances(db) == instances(fresh)
    size = "SELECT id, sz FROM entries_fts_docsize ORDER BY id"
    assert db.execute(size).fetchall() == fresh.execute(size).fetchall()
    terms = sorted({t for t, *_ in instances(fresh)})[:12]
    for term in terms:  # bm25 reads the row count and token totals: equal only if every delete was exact
        q = "SELECT rowid, round(bm25(entries_fts), 9) FROM entries_fts WHERE entries_fts MATCH ? ORDER BY rowid"
        assert db.execute(q, (f'"{term}"',)).fetchall() == fresh.execute(q, (f'"{term}"',)).fetchall()
    db.execute("INSERT INTO entries_fts(entries_fts) VALUES ('integrity-check')")


# ---------------------------------------------------------------- operations
sessions = st.sampled_from(["s1", "s2", "s3/sub"])
words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)
operations = st.one_of(
    st.tuples(st.just("archive"), sessions, words, st.booleans(), st.sampled_from(["", "bob"])),
    st.tuples(st.just("grow"), sessions, words),
    st.tuples(st.just("long"), sessions, words),
    st.tuples(st.just("delete_entry"), st.integers(0, 30)),
    st.tuples(st.just("delete_session"), sessions),
    st.tuples(st.just("delete_scope"), st.sampled_from(["", "bob"])),
    st.tuples(st.just("move"), st.integers(0, 30), sessions),
    st.tuples(st.just("forget"), st.integers(0, 30)),
)


def run(store: Store, op: tuple, n: int) -> str | None:
    """Apply one operation; returns the marker of a forgotten turn (checked gone from the index) or None."""
    db = store.db
    ids = [r[0] for r in db.execute("SELECT id FROM entries ORDER BY id")]
    kind = op[0]
    vec = np.ones((1, DIM), np.float32)
    if kind == "archive":
        _, session, text, tagged, user = op
        body = f"{marker(n)} {text}"
        summary = body[: len(body) // 2] if tagged else "summary " + body
        store.add([new_entry(session, body, summary, user, tags=("端口 cron",) if tagged else ())], vec)
    elif kind == "grow":  # a live turn that grew: it extends the session's latest turn, which it replaces
        _, session, text = op
        last = db.execute(
            "SELECT text FROM entries WHERE session = ? AND user_id = '' ORDER BY turn DESC LIMIT 1", (session,)
        ).fetchone()
        body = (last[0] if last else "start") + f"\n{marker(n)} {text}"
        store.add([new_entry(session, body, body[:60])], vec)
    elif kind == "long":  # indexed in windows
        _, session, text = op
        lines, k = [], 0
        while sum(map(len, lines)) < WINDOWED_FROM + 3_000:
            lines.append(f"{marker(n)}w{k} {text} line {k}")
            k += 1
        body = "\n".join(lines)
        store.add([new_entry(session, body, f"{marker(n)} tool log\nsecond line")], vec)
    elif kind == "delete_entry" and ids:
        store.delete(entry=ids[op[1] % len(ids)])
    elif kind == "delete_session":
        store.delete(session=op[1])
    elif kind == "delete_scope":
        store.delete(scope=Scope(user=op[1]))
    elif kind == "move" and ids:
        store.move_entries([(ids[op[1] % len(ids)], op[2])])
    elif kind == "forget" and ids:
        entry_id = ids[op[1] % len(ids)]
        text = db.execute("SELECT text FROM entries WHERE id = ?", (entry_id,)).fetchone()[0]
        store.delete(entry=entry_id)
        store.erase_free_space()
        return text
    return None


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operations, min_size=1, max_size=14))
def test_index_equals_a_rebuild_from_entries_after_any_sequence(ops):
    store = open_store()
    try:
        for n, op in enumerate(ops):
            forgotten = run(store, op, n)
            if forgotten is not None:  # its markers (its own tokens) are nowhere in the index once erased
                held = {t for t, *_ in instances(store.db)}
                gone = {w for w in forgotten.replace("\n", " ").split() if w.startswith("mk")}
                remaining = " ".join(
                    f"{t} {unpack(s)}" for t, s in store.db.execute("SELECT text, summary FROM entries")
                )
                assert not {w.lower() for w in gone if w not in remaining} & held
        assert_index_is_a_rebuild(store.db)
    finally:
        store.close()


def test_index_holds_no_copy_of_the_text(tmp_path):
    store = Store(tmp_path / "a.db")
    store.check_embedder("test", DIM)
    store.add([new_entry("s", "the database port is 5433", "port 5433")], np.ones((1, DIM), np.float32))
    names = {r[0] for r in store.db.execute("SELECT name FROM sqlite_master WHERE name LIKE 'entries_fts%'")}
    assert "entries_fts_content" not in names and "entries_fts_data" in names
    assert store.db.execute("SELECT body, tags FROM entries_fts").fetchall() == [(None, None)]
    assert store.fulltext('"5433"', 5)[0][0] == 1
    store.close()


def test_a_store_whose_index_format_differs_is_rebuilt_on_open(tmp_path):
    path = tmp_path / "a.db"
    store = Store(path)
    store.check_embedder("test", DIM)
    store.add([new_entry("s", "the cron runs at 02:00", "cron 02:00")], np.ones((1, DIM), np.float32))
    with store.transaction() as db:  # rows of another format: stale values a delete would send wrong
        db.execute("INSERT INTO entries_fts(entries_fts) VALUES ('delete-all')")
        db.execute("INSERT INTO entries_fts(rowid, body, tags) VALUES (1, 'other words entirely', '')")
        db.execute("UPDATE meta SET value = 'old' WHERE key = ?", (fulltext.FORMAT_KEY,))
    store.close()
    store = Store(path)
    assert store.get_meta(fulltext.FORMAT_KEY) == fulltext.fts_format()
    assert_index_is_a_rebuild(store.db)
    store.delete(entry=1)
    assert instances(store.db) == []
    store.close()


def test_migration_m008_rebuilds_the_index_of_an_older_store_without_its_copy(tmp_path):
    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    for number, fn in enumerate(migrations.MIGRATIONS[:7], start=1):  # a store as schema 7 left it
        db.execute("BEGIN")
        fn(db)
        db.execute(f"PRAGMA user_version = {number}")
        db.execute("COMMIT")
    long_text = "\n".join(f"line {i} 数据库端口 visited" for i in range(400))
    for i, (text, tags) in enumerate([("She visited two cities", '[["topic", "travel"]]'), (long_text, "[]")], 1):
        db.execute(
            "INSERT INTO entries(id, session, turn, archived_at, text, summary, tags, hints, memory_type, importance, "
            "content_hash, confidence, success) VALUES (?, 's', ?, 1.7e9, ?, ?, ?, '[]', 'episodic', 0.5, ?, 0.5, "
            "0.5)",
            (i, i, text, text[:40], tags, f"h{i}"),
        )
        for rowid, body, tag in fulltext.fts_rows(i, text[:40], text, ["travel"] if i == 1 else []):
            db.execute("INSERT INTO entries_fts(rowid, body, tags) VALUES (?, ?, ?)", (rowid, body, tag))
    before = instances(db)
    assert migrations.migrate(db) == len(migrations.MIGRATIONS)
    assert "content = ''" in db.execute("SELECT sql FROM sqlite_master WHERE name = 'entries_fts'").fetchone()[0]
    assert db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'entries_fts_content'").fetchone()[0] == 0
    db.execute("DROP TABLE temp.vocab")  # it was made over the table m008 dropped
    assert instances(db) == before
    assert_index_is_a_rebuild(db)
    assert db.execute("SELECT value FROM meta WHERE key = ?", (fulltext.FORMAT_KEY,)).fetchone()[0] == (
        fulltext.fts_format()
    )
    db.close()


def test_imported_entries_are_indexed_as_archived_ones_and_delete_cleanly(tmp_path):
    """``lantern import`` writes entries rows with SQL of its own (portability.py) and indexes them through
    ``Store.index_fulltext``: the index equals a rebuild, and forgetting every entry leaves it empty."""
    from lantern import Lantern

    long_tool_log = "\n".join(f"PASSED tests/test_{i}.py::test_case 数据库 ok" for i in range(300))
    with Lantern(tmp_path / "a.db") as lt:
        lt.archive([{"role": "user", "content": "预发布环境的端口是 8443, see `deploy/staging.yaml`"}], session="s")
        run = [{"role": "user", "content": "run the tests"}, {"role": "assistant", "content": long_tool_log}]
        lt.archive(run, session="s")
        lt.archive([{"role": "user", "content": "alice's note: the cron runs at 02:00"}], session="n", user="alice")
        buf = io.StringIO()
        lt.export(buf)
    with Lantern(tmp_path / "b.db") as lt:
        assert lt.import_(io.StringIO(buf.getvalue())).added == 3
        assert lt.store.has_windows()
        assert_index_is_a_rebuild(lt.store.db)
        lt.store.delete(session="s")
        lt.store.delete(scope=Scope(user="alice"))
        lt.store.erase_free_space()
        assert instances(lt.store.db) == []


@settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(op=st.sampled_from(["archive", "grow", "delete_entry", "delete_session", "forget", "import"]))
def test_a_process_whose_index_format_another_version_rebuilt_writes_nothing(tmp_path_factory, op):
    """Two processes on one database, of Lantern versions whose ``fts_rows`` differ (an upgrade while a proxy runs):
    the newer one rebuilds the index on open. Every later write of the older handle that would insert or delete
    index rows raises LanternError and changes nothing (it deleted with its own rows, so a forgotten turn's terms
    stayed findable and the recorded format hid it from every later open)."""
    path = tmp_path_factory.mktemp("skew") / "a.db"
    vec = np.ones((1, DIM), np.float32)
    old = Store(path)  # the running process
    old.check_embedder("test", DIM)
    old.add([new_entry("s", "数据库端口 is 5433 mk1q", "port")], vec)
    ours_rows, ours_format = fulltext.fts_rows, fulltext.fts_format
    try:  # the other version: CJK as single characters, another format
        fulltext.fts_rows = lambda *a: [(r, b.replace("数据", "数 据"), t) for r, b, t in ours_rows(*a)]
        fulltext.fts_format = lambda: "another-version"
        other = Store(path)
        other.check_embedder("test", DIM)
        other.close()
    finally:
        fulltext.fts_rows, fulltext.fts_format = ours_rows, ours_format
    before = instances(old.db), old.db.execute("SELECT id, text FROM entries").fetchall()
    with pytest.raises(LanternError, match="another Lantern version"):
        if op == "archive":
            old.add([new_entry("s2", "a new turn mk2q", "new")], vec)
        elif op == "grow":
            old.add([new_entry("s", "数据库端口 is 5433 mk1q\nand it grew", "port")], vec)
        elif op == "delete_entry":
            old.delete(entry=1)
        elif op == "delete_session":
            old.delete(session="s")
        elif op == "forget":
            old.delete(scope=Scope(user=""))
        else:  # lantern import indexes its rows through Store.index_fulltext
            with old.transaction() as db:
                old.index_fulltext(db, 99, "imported", "imported text", [])
    assert (instances(old.db), old.db.execute("SELECT id, text FROM entries").fetchall()) == before
    old.close()
    again = Store(path)  # a handle of this version opened since: rebuilt, and deletes cleanly
    again.check_embedder("test", DIM)
    assert_index_is_a_rebuild(again.db)
    again.delete(entry=1)
    again.erase_free_space()
    assert instances(again.db) == []
    again.close()
