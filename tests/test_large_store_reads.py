"""What keeps a recovery's cost bounded on a large store (issue #23): the ``entries`` text stored last (the
migration ``*_text_last``) and the full-text query's postings counted with the window rows of long texts
(``Store.term_postings``)."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from lantern import Lantern
from lantern.recover import signals
from lantern.store import fulltext, migrations
from lantern.store.index import Postings

ENTRY = (
    "INSERT INTO entries(id, session, turn, archived_at, text, summary, tags, hints, memory_type, importance, "
    "content_hash, confidence, success, user_id, category, meta) VALUES (?, 's', ?, 1.7e9, ?, ?, '[]', ?, "
    "'episodic', 0.5, ?, 0.5, 0.25, 'u', 'fact', '{\"k\": 1}')"
)


TEXT_LAST = next(i for i, fn in enumerate(migrations.MIGRATIONS) if fn.__name__.endswith("_text_last"))


def before_text_last(path) -> sqlite3.Connection:
    """A store as the migrations before the text-last one left it, foreign keys on as the store opens them."""
    db = sqlite3.connect(path, isolation_level=None)
    for number, fn in enumerate(migrations.MIGRATIONS[:TEXT_LAST], start=1):
        db.execute("BEGIN")
        fn(db)
        db.execute(f"PRAGMA user_version = {number}")
        db.execute("COMMIT")
    db.execute("PRAGMA foreign_keys = ON")
    return db


def fill(db: sqlite3.Connection, n: int) -> None:
    db.execute("BEGIN")
    for i in range(1, n + 1):
        text = f"turn {i} " + "x" * (i * 997 % 9000)  # some rows spill into overflow pages
        db.execute(ENTRY, (i, i, text, text[:30], f'["h{i}"]', f"hash{i}"))
        db.execute("INSERT INTO embeddings(entry_id, vector) VALUES (?, ?)", (i, bytes([i % 256]) * 8))
        db.execute(
            "INSERT INTO facts(entry_id, key, key_text, value, valid_from, recorded_at) VALUES (?, 'port', 'port', ?, "
            "1.7e9, 1.7e9)",
            (i, str(5000 + i)),
        )
    db.execute("COMMIT")


def rows(db: sqlite3.Connection, table: str) -> list[dict]:
    cursor = db.execute(f"SELECT * FROM {table} ORDER BY rowid")
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, r)) for r in cursor]


def test_text_last_migration_puts_the_text_last_and_keeps_every_row_of_every_table(tmp_path):
    db = before_text_last(tmp_path / "old.db")
    fill(db, 40)
    before = {t: rows(db, t) for t in ("entries", "embeddings", "facts")}
    assert migrations.migrate(db) == len(migrations.MIGRATIONS)
    columns = [r[1] for r in db.execute("PRAGMA table_info(entries)")]
    assert columns[-1] == "text" and sorted(columns) == sorted(before["entries"][0])
    # a DROP TABLE with foreign keys on would have deleted the embeddings and facts (ON DELETE CASCADE)
    assert {t: rows(db, t) for t in before} == before
    assert db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    indexes = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'entries'")}
    assert {"entries_archived_at", "entries_user_session_turn", "entries_vector_at", "entries_e5_pending"} <= indexes
    with pytest.raises(sqlite3.IntegrityError):  # content_hash is still unique
        db.execute(ENTRY, (99, 99, "t", "t", "[]", "hash1"))
    db.close()


def test_text_last_migration_rolls_back_whole_when_a_reference_dangles(tmp_path):
    db = before_text_last(tmp_path / "old.db")
    fill(db, 5)
    db.execute("PRAGMA foreign_keys = OFF")  # a foreign tool left a fact of an entry that is not there
    db.execute(
        "INSERT INTO facts(entry_id, key, key_text, value, valid_from, recorded_at) VALUES (77, 'k', 'k', 'v', 1, 1)"
    )
    db.execute("PRAGMA foreign_keys = ON")
    before = rows(db, "entries")
    with pytest.raises(sqlite3.IntegrityError, match="text last"):
        migrations.migrate(db)
    assert db.execute("PRAGMA user_version").fetchone()[0] == TEXT_LAST
    assert rows(db, "entries") == before and [r[1] for r in db.execute("PRAGMA table_info(entries)")][-1] != "text"
    assert db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    db.close()


def long_turn(i: int, common: str, rare: str, lines: int) -> list[dict]:
    """A user turn and a tool-like reply long enough to be indexed in windows (text/windows.py), ``common`` on
    every line of it."""
    body = "\n".join(f"{common} line {k} of run {i} {rare if k == lines // 2 else ''}" for k in range(lines))
    return [{"role": "user", "content": f"run {i}"}, {"role": "assistant", "content": body}]


@pytest.fixture(scope="module")
def windowed(tmp_path_factory):
    path = tmp_path_factory.mktemp("w") / "w.db"
    with Lantern(path, embedder="minilm") as memory:
        messages = []
        for i in range(30):
            messages += long_turn(i, "traceback" if i % 2 else "warning", f"zq{i}x", 900 if i % 3 == 0 else 40)
        memory.archive(messages, session="s")
        memory.index.refresh()
        yield memory


def test_term_postings_count_the_window_rows_of_long_texts(windowed):
    store = windowed.store
    q = signals.quote("traceback")
    matched = store.db.execute("SELECT count(*) FROM entries_fts WHERE entries_fts MATCH ?", (q,)).fetchone()[0]
    entries = len(windowed.index.ids)
    assert store.db.execute("SELECT count(*) FROM entries_fts WHERE rowid < 0").fetchone()[0] > 0
    # the whole store is the sample: both estimates are exact
    assert store.term_postings([q], 2000)[q] * entries == pytest.approx(matched)
    assert store.term_fractions([q], 2000)[q] * entries < matched  # first rows only: an entry's share


@settings(max_examples=examples(40), deadline=None)
@given(
    terms=st.lists(st.sampled_from(["traceback", "warning", "line", "run", "zq3x", "zq9x", "zq12x"]), min_size=1),
    cap=st.integers(1, 200),
)
def test_the_or_query_never_matches_more_rows_than_the_postings_bound(windowed, terms, cap):
    """With every entry in the sample, the estimate is the doclist length: the kept terms' OR query matches at most
    ``FTS_MAX_POSTINGS`` rows (window rows included), unless it keeps a single term that alone is over it."""
    store = windowed.store
    quoted = [signals.quote(t) for t in terms]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(signals, "FTS_MAX_POSTINGS", cap)
        kept = signals.select_terms(
            terms, store.term_fractions(quoted, 2000), len(windowed.index.ids), store.term_postings(quoted, 2000)
        )
    if kept:
        match = signals.fts_query(kept)
        matched = store.db.execute("SELECT count(*) FROM entries_fts WHERE entries_fts MATCH ?", (match,)).fetchone()
        assert matched[0] <= cap


@settings(max_examples=examples(200), deadline=None)
@given(
    hits=st.lists(st.integers(0, 49), max_size=300),
    weighted=st.booleans(),
)
def test_count_hits_is_the_same_by_sort_or_by_bincount(hits, weighted):
    """The keyword signal counts each row's hits by np.unique for a few hits, by one bincount over the rows past an
    eighth of them: the same positions and counts either way."""
    h = np.asarray(hits, np.int64)
    w = np.linspace(0.5, 2.0, len(h)) if weighted else None
    small = signals.count_hits(h, 10_000, w)  # few hits for the rows: np.unique
    large = signals.count_hits(h, 50, w)  # many: bincount
    assert np.array_equal(small[0], large[0]) and np.allclose(small[1], large[1])


@settings(max_examples=examples(100), deadline=None)
@given(
    base=st.lists(st.lists(st.sampled_from("abcd"), max_size=3), max_size=12),
    changes=st.lists(st.tuples(st.integers(0, 20), st.lists(st.sampled_from("abcde"), max_size=3)), max_size=8),
)
def test_posting_rows_are_the_posting_lists_as_arrays(base, changes):
    """``Postings.rows`` (the keyword signal's read) holds what ``get`` holds, after a CSR base, rows added
    and rows rewritten."""
    lists = Postings()
    for pos, terms in enumerate(base):
        lists.add(pos, terms)
    lists.load_csr(*lists.csr(), len(base))
    n = len(base)
    for pos, terms in changes:
        if pos < n:
            lists.rewrite(pos, terms)
        else:
            lists.add(n, terms)
            n += 1
    for term in "abcdez":
        assert lists.rows(term).dtype == np.int64
        assert lists.rows(term).tolist() == list(lists.get(term, []))


@settings(max_examples=examples(200), deadline=None)
@given(st.text(alphabet="abcXYZ019²é中文_./-: '\"\t", max_size=40))
def test_fts_tokens_are_the_tokens_fts5_makes(term):
    """``signals.fts_tokens`` splits a term as the store's tokenizer does (store/fulltext.py TOKENIZE): as many
    tokens as FTS5 indexes for the same text, so a phrase is charged for each of its tokens."""
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize = '{fulltext.TOKENIZE}')")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    db.execute("INSERT INTO t(body) VALUES (?)", (term,))
    assert db.execute("SELECT count(*) FROM v").fetchone()[0] == len(signals.fts_tokens(term))


PHRASE_WORDS = ["traceback", "warning", "line", "run", "of", "zq3x", "zq12x", "7"]


@settings(max_examples=examples(40), deadline=None)
@given(
    terms=st.lists(
        st.tuples(
            st.lists(st.sampled_from(PHRASE_WORDS), min_size=1, max_size=4), st.sampled_from(["_", ".", "/"])
        ).map(lambda t: t[1].join(t[0])),
        min_size=1,
        max_size=6,
    ),
    cap=st.integers(1, 400),
)
def test_a_phrase_is_charged_the_doclists_of_its_tokens(windowed, terms, cap):
    """A term the tokenizer splits (``line_7``, ``run.of``) is a phrase, which FTS5 finds by walking the doclist of
    every token: ``read_costs`` charges the rows it matches plus ``FTS_TOKEN_SCAN`` times its tokens' rows (exact
    here, every entry in the sample), and the kept terms' cost counted in the index itself stays under the bound."""
    store = windowed.store

    def rows(match: str) -> int:
        return store.db.execute("SELECT count(*) FROM entries_fts WHERE entries_fts MATCH ?", (match,)).fetchone()[0]

    def cost(term: str) -> float:
        tokens = signals.fts_tokens(term)
        scan = sum(rows(signals.quote(t)) for t in tokens) if len(tokens) > 1 else 0
        return rows(signals.quote(term)) + signals.FTS_TOKEN_SCAN * scan

    entries = len(windowed.index.ids)
    costs = signals.read_costs(store, terms)
    for term in terms:
        assert costs[signals.quote(term)] * entries == pytest.approx(cost(term))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(signals, "FTS_MAX_POSTINGS", cap)
        quoted = [signals.quote(t) for t in terms]
        kept = signals.select_terms(terms, store.term_fractions(quoted, 2000), entries, costs)
    assert sum(cost(t) for t in dict.fromkeys(kept)) <= cap * (1 + 1e-9)
