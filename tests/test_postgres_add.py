"""``PostgresStore.add`` writes a batch in a fixed number of round trips (one look-up of the stored hashes, one of
the conversations' last turns, one INSERT of every new row, one COPY of their vectors): whatever mix of new turns,
repeats (stored before or earlier in the batch), grown turns and conversations a batch holds, it stores what the
SQLite store stores, with the same ``(id, added)`` answers, turn numbers, texts, vectors and full-text rows. A real
server (conftest.py ``pg_server``)."""

from __future__ import annotations

import itertools
import json
import threading
import time

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from lantern.model import Tag, content_hash
from lantern.store.postgres import PostgresStore
from lantern.store.sqlite import NewEntry, Store

DIM = 4
WORDS = ["port", "5433", "redis", "数据库端口", "db_host", "cron", "naïve", "x.py"]
CONVERSATIONS = [("s0", ""), ("s1", ""), ("s0", "ann")]  # (session, user): one session name under two users
_examples = itertools.count()


def entry(session: str, user: str, text: str, tag: str) -> NewEntry:
    return NewEntry(
        session=session,
        text=text,
        summary=text.split("\n")[-1][:40],
        tags=[Tag("topic", tag)],
        hints=[],
        memory_type="episodic",
        importance=0.5,
        content_hash=content_hash(session, text, user),
        user=user,
    )


@pytest.fixture(scope="module")
def pg_store(pg_server):
    import uuid

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_server.get_uri(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    store = PostgresStore(pg_server.get_uri(name))
    store.check_embedder("test", DIM)
    yield store
    store.close()


# one step: (conversation, what: 0 a new text, 1 the conversation's last text grown, 2 an earlier text again, word)
steps = st.lists(
    st.tuples(st.integers(0, len(CONVERSATIONS) - 1), st.integers(0, 2), st.sampled_from(WORDS)),
    min_size=1,
    max_size=14,
)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(steps, min_size=1, max_size=4), seed=st.integers(0, 2**16))
def test_any_batch_is_stored_as_the_sqlite_store_stores_it(pg_store, batches, seed):
    prefix = f"ex{next(_examples)}-"  # every example in new conversations of the shared database
    rng = np.random.default_rng(seed)
    sqlite = Store(":memory:")
    sqlite.check_embedder("test", DIM)
    texts: dict[int, list[str]] = {c: [] for c in range(len(CONVERSATIONS))}
    pairs = []  # (sqlite answer, postgres answer) per row
    last_vector: dict[int, np.ndarray] = {}  # postgres entry id -> the vector last written
    for batch in batches:
        rows = []
        for c, what, word in batch:
            session, user = CONVERSATIONS[c]
            mine = texts[c]
            if what == 1 and mine:
                text = mine[-1] + "\n" + word
            elif what == 2 and mine:
                text = mine[int(rng.integers(len(mine)))]
            else:
                text = f"{word} {len(mine)} {word}"
            mine.append(text)
            rows.append(entry(prefix + session, user, text, word))
        vectors = rng.normal(size=(len(rows), DIM)).astype(np.float32)
        got_sqlite = sqlite.add(rows, vectors)
        got_pg = pg_store.add(rows, vectors)
        pairs += list(zip(got_sqlite, got_pg))
        for (entry_id, added), vec in zip(got_pg, vectors):
            if added:
                last_vector[entry_id] = vec
    assert [a for (_, a), _ in pairs] == [a for _, (_, a) in pairs]  # stored anew, or a repeat, alike
    ids = {}
    for (s_id, _), (p_id, _) in pairs:  # the same rows share an entry on both backends
        assert ids.setdefault(s_id, p_id) == p_id
    assert len(set(ids.values())) == len(ids)

    columns = ("user_id", "session", "turn", "text", "summary", "tags")
    stored_sqlite = [  # decoded as the store reads them (store/packed.py: summary and tags may be deflated)
        tuple(sqlite.entry_value(c, v) for c, v in zip(columns, row))
        for row in sqlite.db.execute(f"SELECT {', '.join(columns)} FROM entries ORDER BY user_id, session, turn")
    ]
    stored_pg = pg_store.db.execute(
        "SELECT user_id, session, turn, text, summary, tags FROM entries WHERE session LIKE ? "
        "ORDER BY user_id, session, turn",
        (prefix + "%",),
    ).fetchall()
    assert [(*r[:5], json.loads(r[5])) for r in stored_pg] == [(*r[:5], json.loads(r[5])) for r in stored_sqlite]
    vectors_pg = pg_store.rows_by_id(sorted(ids.values()))
    assert len(vectors_pg) == len(ids)
    for row in vectors_pg:  # each entry holds the vector of the row that last wrote it
        np.testing.assert_allclose(np.asarray(row[8].to_numpy()), last_vector[row[0]], rtol=1e-6)
    for entry_id, summary, text, tags in pg_store.db.execute(
        "SELECT id, summary, text, tags FROM entries WHERE id = ANY(?)", (sorted(ids.values()),)
    ):  # the full-text row is what an import or reindex builds from the stored columns
        sql, params = PostgresStore._fts(summary, text, [v for _, v in json.loads(tags)])
        assert pg_store.db.execute(
            f"SELECT fts = ({sql.replace('%s', '?')}) FROM entries WHERE id = ?", (*params, entry_id)
        ).fetchone()[0]
    sqlite.close()


def test_a_row_another_writer_commits_meanwhile_is_read_as_stored_and_the_batch_is_run_again(pg_store):
    """A writer that takes no conversation lock (an import) commits one of the batch's rows while the batch's
    INSERT waits on it: the batch is rolled back and run again, that row answered as stored, no turn number
    skipped."""
    rows = [entry("raced", "", f"turn {i} about cron", "cron") for i in range(3)]
    vectors = np.eye(3, DIM, dtype=np.float32)
    url = pg_store.url
    with psycopg.connect(url) as other:  # holds the row with the middle turn's hash, uncommitted
        other.execute(
            "INSERT INTO entries(session, turn, archived_at, text, summary, tags, hints, memory_type, importance, "
            "content_hash, confidence, success) VALUES ('raced', 0, 0, 'x', 'x', '[]', '[]', 'episodic', 0.5, %s, "
            "0.5, 0.5)",
            (rows[1].content_hash,),
        )
        got: list = []
        writer = threading.Thread(target=lambda: got.append(pg_store.add(rows, vectors)))
        writer.start()
        with psycopg.connect(url, autocommit=True) as watcher:  # the batch's INSERT waits for that row's lock
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                waiting = watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT%'"
                ).fetchone()[0]
                if waiting:
                    break
                time.sleep(0.02)
        assert waiting == 1
        other.commit()
        writer.join(30)
    assert not writer.is_alive()
    (answer,) = got
    other_id = pg_store.db.execute("SELECT id FROM entries WHERE content_hash = ?", (rows[1].content_hash,)).fetchone()
    assert answer[1] == (other_id[0], False)
    assert [added for _, added in answer] == [True, False, True]
    turns = pg_store.db.execute("SELECT turn, text FROM entries WHERE session = 'raced' ORDER BY turn").fetchall()
    assert [t for t, _ in turns] == [0, 1, 2]  # the other writer's turn 0, then the batch's two after it
    assert [text for _, text in turns] == ["x", rows[0].text, rows[2].text]
