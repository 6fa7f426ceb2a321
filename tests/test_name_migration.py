"""Names stored in clear by an older Lantern are rewritten in their redacted form (store/migrations.py
``rewrite_names``, run once by the facade when the store's names are not in the form of the redaction rules in force),
on both backends: in one transaction, every table that holds names, conversations that collapse into one merged with
no entry lost and no turn number repeated, the old names gone from the file (SQLite)."""

from __future__ import annotations

import sqlite3
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from lantern import Lantern
from lantern.archive.redact import names_form
from lantern.store.migrations import NAMES_FORM

_ALNUM = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
# secrets of three detectors: a keyword assignment, a provider token, a flag
SECRETS = st.one_of(
    st.text(alphabet=_ALNUM, min_size=8, max_size=14).map(lambda s: f"password=Q7{s}!"),
    st.text(alphabet=_ALNUM, min_size=36, max_size=36).map(lambda s: "ghp_" + s),
    st.text(alphabet=_ALNUM, min_size=10, max_size=14).map(lambda s: f"--token Zx9{s}"),
)
PLAIN = st.from_regex(r"[a-z][a-z0-9-]{2,12}", fullmatch=True)


def _names(draw_secret: str, plain: str, where: str) -> dict[str, str]:
    """session, user, agent, project: the one named by ``where`` holds the secret."""
    names = {"session": f"{plain}-s", "user": f"{plain}-u", "agent": f"{plain}-a", "project": f"{plain}-p"}
    names[where] = f"{plain} {draw_secret}"
    return names


def _turns(prefix: str, n: int) -> list[dict]:
    return [
        m
        for i in range(n)
        for m in (
            {"role": "user", "content": f"{prefix} question {i}: which port does service {i} use?"},
            {"role": "assistant", "content": f"{prefix} answer {i}: service {i} listens on port {8000 + i}."},
        )
    ]


def _location(backend: str, request) -> str | Path:
    if backend == "sqlite":
        return Path(tempfile.mkdtemp()) / "old.db"
    return request.getfixturevalue("pg_url")()


def _rows(lt: Lantern, sql: str) -> list[tuple]:
    with lt.store.transaction() as db:
        return [tuple(r) for r in db.execute(sql).fetchall()]


def _old_store(location, names: dict[str, str], before: int, after: int) -> None:
    """A store as an older Lantern left it: ``before`` turns archived with their names in clear (a compaction event
    and a pending recovery too), then ``after`` more turns of the same conversation under the names' redacted form
    (a newer Lantern continuing it), with no record of the names' form."""
    with Lantern(location, "fake") as lt:
        lt.set_secret_redaction(False)
        lt.archive(_turns("old", before), **names)
        recovery = lt.recover("which port does service 0 use?", session=names["session"], user=names["user"])
        lt.record_compaction(
            recovery, session=names["session"], user=names["user"], lost=[], source="api", reason="summary"
        )
        on = replace(lt.redaction, secrets=True)
        with lt.store.transaction() as db:  # redaction back on, as if the names were already in this form
            db.execute("UPDATE meta SET value = 'on' WHERE key = 'redact_secrets'")
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (NAMES_FORM, names_form(on)))
    with Lantern(location, "fake") as lt:
        if after:
            lt.archive(_turns("new", after), **names)
        with lt.store.transaction() as db:  # an older version: no record of the form
            db.execute("DELETE FROM meta WHERE key = ?", (NAMES_FORM,))


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_names_in_clear_are_rewritten_and_merged(backend, request):
    @given(
        secret=SECRETS,
        plain=PLAIN,
        where=st.sampled_from(["session", "user", "agent", "project"]),
        before=st.integers(1, 3),
        after=st.integers(0, 3),
    )
    @settings(
        max_examples=examples(12) if backend == "sqlite" else 4,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    def check(secret, plain, where, before, after):
        location = _location(backend, request)
        names = _names(secret, plain, where)
        _old_store(location, names, before, after)
        with Lantern(location, "fake") as lt:
            assert lt.store.get_meta(NAMES_FORM) == names_form(lt.redaction)
            entries = _rows(lt, "SELECT user_id, agent_id, project, session, turn FROM entries")
            assert len(entries) == before + after, entries  # none lost
            assert len({e[:4] for e in entries}) == 1, entries  # one conversation
            assert len({e[4] for e in entries}) == len(entries), entries  # no turn number twice
            held = [
                *(v for e in entries for v in e[:4]),
                *(v for r in _rows(lt, "SELECT session, user_id, agent_id, project, source FROM events") for v in r),
                *(v for r in _rows(lt, "SELECT session, user_id FROM recoveries") for v in r),
                *(r[0] for r in _rows(lt, "SELECT scope FROM facts")),
            ]
            assert not [v for v in held if v and secret in v], held
            # found and forgotten by the names as given
            user = {k: names[k] for k in ("user", "agent", "project")}
            assert lt.search("which port does service 0 use", session=names["session"], **user)
            assert lt.forget(session=names["session"], **user) == before + after
            assert lt.stats(user=names["user"])["entries"] == 0
        if isinstance(location, Path):
            raw = b"".join(p.read_bytes() for p in location.parent.iterdir() if p.name.startswith(location.name))
            assert secret.encode() not in raw

    check()


def test_the_rewrite_is_one_transaction_and_runs_once(tmp_path, monkeypatch):
    """A failure half-way leaves every name as it was (the transaction rolls back, nothing recorded), the next open
    does it whole; after that an open reads one meta row and rewrites nothing."""
    from lantern.store import migrations

    location = tmp_path / "once.db"
    names = _names("password=Q7abcdefgh!", "svc", "session")
    _old_store(location, names, 2, 2)
    calls = []
    real = migrations._move_rewinds

    def failing(*args):
        calls.append(args)
        raise RuntimeError("killed half-way")

    monkeypatch.setattr(migrations, "_move_rewinds", failing)
    with pytest.raises(RuntimeError):
        Lantern(location, "fake")
    assert calls
    monkeypatch.setattr(migrations, "_move_rewinds", real)
    con = sqlite3.connect(location)  # nothing of it stored: the names as they were, no record of the form
    assert names["session"] in {r[0] for r in con.execute("SELECT session FROM entries")}
    assert con.execute("SELECT value FROM meta WHERE key = ?", (NAMES_FORM,)).fetchone() is None
    con.close()
    with Lantern(location, "fake") as lt:
        sessions = {r[0] for r in _rows(lt, "SELECT session FROM entries")}
        assert len(sessions) == 1 and "Q7abcdefgh" not in sessions.pop()
    rewrites = []
    monkeypatch.setattr(migrations, "rewrite_names", lambda *a: rewrites.append(a))
    import lantern.api

    monkeypatch.setattr(lantern.api, "rewrite_names", lambda *a: rewrites.append(a))
    with Lantern(location, "fake"):
        pass
    assert rewrites == []
