"""The fills with the real routed embedder (its deferred e5 block): ``lantern reindex --fill`` counts each entry once,
whether it got its whole vector, then its deferred block, or the block alone; and a deferred block computed while
the turn grew is never stored on the grown entry (SQLite and PostgreSQL)."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from clirun import lantern as cli
from lantern import Lantern

pytestmark = pytest.mark.real_models  # the routed embedder's deferred block: the real models

TURNS = [
    ("Start postgres for billing on port 5433.", "Started: docker run -p 5433:5432 postgres:16."),
    ("Put the pool size in config/db.yaml.", "Done: the pool size is 20 now, in config/db.yaml."),
    ("What does flaky_cron_guard do?", "flaky_cron_guard skips a cron run while the last one still holds the lock."),
    ("Rotate the staging TLS certificate.", "Rotated: the new certificate expires on 2027-03-01."),
    ("Why did the nightly export fail?", "A UnicodeDecodeError in exporter/writer.py broke the nightly export."),
]


def _messages(turns) -> list[dict]:
    return [
        m for user, reply in turns for m in ({"role": "user", "content": user}, {"role": "assistant", "content": reply})
    ]


@settings(max_examples=examples(4), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text_first=st.integers(1, len(TURNS)), with_vectors=st.integers(0, 2))
def test_reindex_fill_counts_each_entry_once(tmp_path_factory, text_first, with_vectors):
    db = tmp_path_factory.mktemp("count") / "m.db"
    with Lantern(db) as lt:
        lt.archive(_messages(TURNS[:with_vectors] or [("warm", "up")]), session="vectors")
        lt.archive(_messages(TURNS[:text_first]), session="text-first", text_first=True)
    with sqlite3.connect(db) as con:
        lacking = con.execute("SELECT count(*) FROM entries WHERE e5_pending > 0").fetchone()[0]
    assert lacking >= text_first
    done = cli("reindex", "--fill", db=db)
    assert done.returncode == 0, done.stderr
    assert f"{lacking} {'entry' if lacking == 1 else 'entries'} given their missing vector part" in done.stdout.decode()
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM entries WHERE e5_pending > 0").fetchone()[0] == 0


def test_a_deferred_block_is_never_the_one_of_a_text_the_entry_no_longer_holds(db_location, monkeypatch):
    """The e5 block of an English turn is filled after the commit (archive/fill.py ``fill_pending``); while it is
    computed, another handle archives the session with its last turn grown (its reply arrived), replacing the entry
    in place, again without its e5 block. The fill then writes no block of the old text: the entry stays pending,
    and the next fill gives it its own text's block. On SQLite and PostgreSQL."""
    import numpy as np

    from lantern.archive import fill
    from lantern.config import Config
    from lantern.embed import embed_deferred

    on = Config(e5_english_weight=0.5, fill_on_recover=0)
    user_only = [{"role": "user", "content": TURNS[0][0]}]
    grown = _messages(TURNS[:1])
    with Lantern(db_location, config=on) as lt, Lantern(db_location, config=on) as other:
        (entry,) = lt.archive(user_only, session="s").entry_ids
        raced: list = []

        def racing(embedder, texts):
            if not raced:  # the other handle's write comes while the block is computed
                raced.append(other.archive(grown, session="s"))
            return embed_deferred(embedder, texts)

        monkeypatch.setattr(fill, "embed_deferred", racing)
        lt.fill_vectors()
        monkeypatch.setattr(fill, "embed_deferred", embed_deferred)
        assert raced and raced[0].entry_ids == [entry]  # the turn grew in place

        def block() -> np.ndarray:
            (row,) = lt.store.rows_by_id([entry])
            a, b = lt.store.deferred
            return lt.store.decode_vectors([row[8]])[0][a:b]

        summary = lt.store.entries([entry], text=False, tags=False)[entry].summary
        expected = embed_deferred(lt.embedder, [summary])[0]
        assert not block().any() or float(block() @ expected) > 0.99  # none yet, or its own text's
        lt.fill_vectors()
        assert float(block() @ expected) > 0.99
