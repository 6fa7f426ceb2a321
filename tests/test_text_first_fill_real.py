"""``lantern reindex --fill`` on a store holding text-first turns, with the real routed embedder (its deferred e5
block): each entry is counted once, whether it got its whole vector, then its deferred block, or the block alone."""

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
