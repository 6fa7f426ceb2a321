"""An entry id names one entry for good (issue 38, "forms post back opaque ids"): SQLite gave a new row the largest
rowid + 1, so forgetting the newest entry handed its id to the next turn, and a held id (the inspector's forget
form in a second tab or a stale confirmation, ``forget --entry``, REST and MCP forget, ``feedback``) then reached
that newer, unrelated turn. Random sequences of archives and forgets on both backends (the real SQLite file, a real
PostgreSQL server); the inspector's stale confirmation played as a browser posts it; the migration of a store
written before."""

from __future__ import annotations

import re
import sqlite3
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from lantern import Lantern

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("archive"), st.integers(1, 3)),
        st.tuples(st.just("forget newest"), st.just(0)),
        st.tuples(st.just("forget one"), st.integers(0, 10**6)),
        st.tuples(st.just("forget session"), st.integers(0, 10**6)),
    ),
    min_size=1,
    max_size=12,
)


def _location(backend: str, tmp_path, pg_url) -> str:
    return str(tmp_path / f"{uuid.uuid4().hex}.db") if backend == "sqlite" else pg_url()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_no_entry_id_is_ever_given_twice(backend, ops, tmp_path, request):
    """Whatever archives and forgets (the newest entry, any one, a whole session) came before, a new turn's id is
    one no entry ever had."""
    pg_url = request.getfixturevalue("pg_url") if backend == "postgres" else None
    given_ids: set[int] = set()
    with Lantern(_location(backend, tmp_path, pg_url)) as lt:
        for step, (op, n) in enumerate([("archive", 2), *ops]):
            live = sorted(given_ids & {i for (i,) in lt.store.db.execute("SELECT id FROM entries").fetchall()})
            if op == "archive":
                turns = [{"role": "user", "content": f"step {step} turn {k}: {uuid.uuid4().hex}"} for k in range(n)]
                ids = lt.archive(turns, session=f"s{step % 3}").entry_ids
                assert not set(ids) & given_ids, f"ids {set(ids) & given_ids} given again after {ops}"
                given_ids.update(ids)
            elif live and op == "forget newest":
                lt.forget(entry=live[-1], vacuum=False)
            elif live and op == "forget one":
                lt.forget(entry=live[n % len(live)], vacuum=False)
            elif live:
                lt.forget(session=f"s{n % 3}", vacuum=False)


def test_a_store_written_before_is_migrated_and_keeps_its_ids(tmp_path):
    """A store of the schema before (no floor, no triggers, user_version 12) opened: migrated in one cheap step
    (a ``max(id)``), and forgetting its newest entry no longer hands that id on."""
    path = tmp_path / "old.db"
    with Lantern(path) as lt:
        ids = lt.archive([{"role": "user", "content": f"old turn {k}"} for k in range(3)], session="s").entry_ids
    with sqlite3.connect(path) as db:
        db.execute("DROP TRIGGER entries_id_floor")
        db.execute("DROP TRIGGER entries_id_once")
        db.execute("DELETE FROM meta WHERE key = 'entry_id_floor'")
        db.execute("PRAGMA user_version = 12")
    with Lantern(path) as lt:
        assert lt.store.get_meta("entry_id_floor") == str(ids[-1])
        lt.forget(entry=ids[-1], vacuum=False)
        new = lt.archive([{"role": "user", "content": "a new turn"}], session="t").entry_ids
    assert new[0] > ids[-1]


def test_an_insert_at_a_given_id_is_refused_by_the_store_itself(tmp_path):
    """Any insert that does not take its id from ``Store.new_entry_id`` (a path written later, raw SQL) is refused
    rather than given a forgotten entry's id."""
    path = tmp_path / "raw.db"
    with Lantern(path) as lt:
        ids = lt.archive([{"role": "user", "content": f"turn {k}"} for k in range(2)], session="s").entry_ids
        lt.forget(entry=ids[-1], vacuum=False)
    with sqlite3.connect(path) as db, pytest.raises(sqlite3.IntegrityError, match="never given twice"):
        db.execute(
            "INSERT INTO entries(session, turn, archived_at, text, summary, tags, hints, memory_type, importance, "
            "content_hash, confidence, success) SELECT session, turn + 9, archived_at, text || '!', summary, tags, "
            "hints, memory_type, importance, content_hash || '!', confidence, success FROM entries"
        )


def test_a_stale_inspector_confirmation_deletes_nothing_newer(tmp_path):
    """The breaker's sequence: two tabs confirm "forget entry N"; the first does it; the agent archives a new
    turn; the second tab's confirmation then finds no entry N (before: it deleted the new turn, which had id N)."""
    pytest.importorskip("fastapi")
    pytest.importorskip("jinja2")
    from fastapi.testclient import TestClient

    from lantern.integrations.ui import build_app

    path = tmp_path / "ui.db"
    with Lantern(path) as lt:
        ids = lt.archive(
            [{"role": "user", "content": "keep: the deploy key lives in vault"}, {"role": "user", "content": "typo"}],
            session="s",
        ).entry_ids
    origin = "http://127.0.0.1"
    with TestClient(build_app(path), base_url=origin) as c:

        def confirmation() -> dict[str, str]:
            page = c.get("/forget", params={"entry": ids[-1]}).text
            return {k: re.search(rf'name="{k}" value="([^"]*)"', page).group(1) for k in ("csrf", "entry")}

        tab_a, tab_b = confirmation(), confirmation()
        headers = {"origin": origin}
        assert c.post("/forget", data=tab_a, headers=headers, follow_redirects=False).status_code == 303
        with Lantern(path) as lt:
            new = lt.archive([{"role": "user", "content": "NEW turn: the release is on Friday"}], session="later")
        c.post("/forget", data=tab_b, headers=headers, follow_redirects=False)
    with Lantern(path) as lt:
        left = {i for (i,) in lt.store.db.execute("SELECT id FROM entries").fetchall()}
    assert left == {ids[0], *new.entry_ids}
