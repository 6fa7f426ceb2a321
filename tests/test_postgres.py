"""What only the PostgreSQL backend has: migrations under an advisory lock, the HNSW index, the SQL translation of the
shared modules, the operations it refuses, and its connection errors. A real server (pgserver, conftest.py
``pg_server``) and the fake embedder (tests/conftest.py); tests/test_backends.py runs the shared behaviour on both
backends."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from clirun import lantern as cli
from lantern import Lantern, LanternError, UnsupportedBackendError
from lantern.api import copy_store
from lantern.config import redact_url
from lantern.store.postgres import PostgresStore, fts_document
from lantern.store.postgres.schema import MIGRATION_LOCK, MIGRATIONS
from lantern.store.postgres.sql import translate
from lantern.store.postgres.store import IDLE_CHECK_S
from lantern.store.protocol import require

SRC = str(Path(__file__).resolve().parents[1] / "src")
TURNS = [
    {"role": "user", "content": "Which port did we give the staging Redis?"},
    {"role": "assistant", "content": "Staging Redis listens on port 6380, set in deploy/staging/redis.conf."},
    {"role": "user", "content": "And the log level?"},
    {"role": "assistant", "content": "LOG_LEVEL=debug in .env.staging."},
]


def test_two_processes_migrating_at_once_leave_one_schema(pg_url):
    url = pg_url()
    code = f"import sys; sys.path.insert(0, {SRC!r}); from lantern.store.postgres import PostgresStore; " + (
        "s = PostgresStore(sys.argv[1]); print(s.schema_version); s.close()"
    )
    with psycopg.connect(url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))  # both must queue behind it
        procs = [subprocess.Popen([sys.executable, "-c", code, url], stdout=subprocess.PIPE) for _ in range(2)]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            waiting = holder.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            ).fetchone()[0]
            if waiting == 2:
                break
            time.sleep(0.05)
        assert waiting == 2, "both processes should wait for the migration lock"
        holder.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
        outs = [p.communicate(timeout=60)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert [o.decode().split() for o in outs] == [[str(len(MIGRATIONS))]] * 2
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(len(MIGRATIONS),)]
        assert conn.execute("SELECT count(*) FROM pg_class WHERE relname = 'entries'").fetchone()[0] == 1


def test_hnsw_index_finds_what_exact_search_finds(pg_url):
    with Lantern(pg_url(), embedder="fake") as lt:
        lt.archive(TURNS, session="chat")
        lt.archive([{"role": "user", "content": f"note {i}: the nightly job {i} ran fine"} for i in range(20)], "n")
        query = lt.embedder.embed(["which port does staging redis use"])[0]
        lt.index.refresh()
        exact = int(lt.index.ids[np.argmax(lt.index.cosines(query))])
        found = lt.store.nearest(query, 3)
        assert found[0][0] == exact
        assert found[0][1] == pytest.approx(float(np.max(lt.index.cosines(query))), abs=1e-4)
        with lt.store.pool.connection() as conn, conn.transaction():
            conn.execute("SET LOCAL enable_seqscan = off")
            plan = " ".join(
                r[0]
                for r in conn.execute(
                    "EXPLAIN SELECT entry_id FROM embeddings ORDER BY vector <=> %s LIMIT 3", (query,)
                )
            )
        assert "embeddings_hnsw" in plan
        assert lt.store.nearest(query, 3, scope=lt.scope.__class__(user="nobody")) == []


def test_full_text_splits_like_unicode61_and_bigrams_cjk():
    assert fts_document("config in src/billing/db_config.py.") == "config in src billing db config py"
    assert fts_document("数据库端口是5433") == "数据 据库 库端 端口 口是 5433"


def test_shared_sql_is_translated_and_sqlite_only_sql_is_refused():
    assert translate("SELECT id FROM t WHERE a IS ? AND b = '?%' AND c LIKE ?") == (
        "SELECT id FROM t WHERE a IS NOT DISTINCT FROM %s AND b = '?%%' AND c LIKE %s",
        False,
    )
    assert translate("SELECT 1 WHERE v IS NOT ? AND w IS NOT NULL")[0] == (
        "SELECT 1 WHERE v IS DISTINCT FROM %s AND w IS NOT NULL"
    )
    assert translate("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)")[0].endswith("ON CONFLICT DO NOTHING")
    assert translate("INSERT INTO facts(a) VALUES (?)") == ("INSERT INTO facts(a) VALUES (%s) RETURNING id", True)
    assert translate("SELECT id FROM entries INDEXED BY entries_archived_at WHERE x = ?")[0] == (
        "SELECT id FROM entries WHERE x = %s"
    )
    assert translate("SELECT count(*), total(id) FROM entries")[0] == (
        "SELECT count(*), coalesce(sum(id), 0)::float8 FROM entries"
    )
    with pytest.raises(LanternError, match="PRAGMA"):
        translate("PRAGMA table_info(events)")


def test_the_inspector_is_refused_with_one_line_naming_it(pg_url):
    url = pg_url()
    with Lantern(url) as lt:
        lt.archive(TURNS, session="chat")
        with pytest.raises(UnsupportedBackendError) as info:
            require(lt.store, "lantern ui")
        assert (info.value.operation, info.value.backend) == ("lantern ui", "postgresql")
        assert "docs/postgres.md" in str(info.value)
    proc = cli("ui", db=url)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "Traceback" not in err
    assert err.count("\n") == 1 and "lantern ui is not supported on the postgresql backend" in err


def test_copy_sqlite_to_postgres_and_back_keeps_entries_vectors_facts_and_events(pg_url, tmp_path):
    url, first, back = pg_url(), tmp_path / "a.db", tmp_path / "b.db"
    with Lantern(first, user="alice") as lt:
        chat = lt.archive(TURNS, session="chat").entry_ids
        lt.archive([{"role": "user", "content": "The staging database port is 5433."}], session="ops")
        recovery = lt.recover("staging redis port", session="chat", budget=2000)
        recovery.loss = lt.recover_compaction(None, session="chat", budget=2000).loss  # a loss report to copy
        lt.record_compaction(recovery, session="chat", reason="summary", lost=chat, source="proxy", latency_ms=12.5)
        lt.feedback([chat[0]], useful=True)
        reinforced = [  # the content hash as hex, as the server stores it (SQLite stores its digest)
            (lt.store.entry_value("content_hash", h), *state)
            for h, *state in lt.store.db.execute(
                "SELECT content_hash, confidence, success, access_count FROM entries ORDER BY content_hash"
            )
        ]
    with Lantern(first, user="bob") as lt:
        lt.archive([{"role": "user", "content": "报销系统由王丽负责，分机号8721。"}], session="zh")
        lt.fill_vectors()  # every deferred block computed now: a recovery on the server has none left to fill
    counts = {"entries": 4, "added": 4, "grown": 0, "duplicates": 0, "events": 1, "events_added": 1}
    assert copy_store(first, url) == counts
    again = {"entries": 4, "added": 0, "grown": 0, "duplicates": 4, "events": 1, "events_added": 0}
    assert copy_store(first, url) == again  # a re-run resumes: adds nothing
    with psycopg.connect(url) as conn:  # reinforcement state as it was (before the recoveries below)
        assert [c for c in reinforced if c] == conn.execute(
            "SELECT content_hash, confidence, success, access_count FROM entries WHERE user_id = 'alice' "
            "ORDER BY content_hash"
        ).fetchall()
    with Lantern(url, user="alice") as lt:
        (event,) = lt.events()
        by_hash = dict(lt.store.db.execute("SELECT id, content_hash FROM entries").fetchall())
        assert event.session == "chat" and event.source == "proxy" and event.reason == "summary"
        assert event.query == "staging redis port" and len(event.lost) == len(chat)
        assert all(by_hash[i] for i in event.lost) and {i for i, _, _ in event.injected} <= set(event.lost)
        assert event.latency_ms == 12.5 and event.loss["lost"] > 0  # the receipt and the loss report copied
        assert {i["entry"] for i in event.loss["items"] + event.loss["cut"]} <= set(event.lost)
    with Lantern(url, user="bob") as lt:
        assert "8721" in lt.recover("王丽的分机号", budget=500).text
        assert "6380" not in lt.recover("staging redis port", budget=2000).text  # alice's, not bob's
    with Lantern(url, user="alice") as lt:
        assert "6380" in lt.recover("staging redis port", budget=2000).text
        assert [f.value for f in lt.facts() if f.value == "5433"] == ["5433"]
    proc = cli("copy", url, str(back), "--json")
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout) == counts
    blobs = {}
    for path in (first, back):  # int8 -> float32 on the server -> int8 again: the same bytes
        with Lantern(path) as lt:
            rows = lt.store.db.execute(
                "SELECT e.content_hash, v.vector, e.user_id FROM entries e JOIN embeddings v ON v.entry_id = e.id"
            )
            blobs[path] = sorted(rows)
    assert blobs[first] == blobs[back] and len(blobs[back]) == 4


def test_cli_round_trip_on_a_server(pg_url, tmp_path):
    url = pg_url()
    transcript = tmp_path / "chat.jsonl"
    transcript.write_text("\n".join(json.dumps(t) for t in TURNS) + "\n", encoding="utf-8")
    first = json.loads(cli("ingest", str(transcript), "--json", db=url).stdout)
    again = json.loads(cli("ingest", str(transcript), "--json", db=url).stdout)
    assert (first["added"], again["added"], again["duplicates"]) == (2, 0, 2)
    rec = json.loads(cli("recover", "redis port for staging", "--json", db=url).stdout)
    assert "6380" in rec["text"]
    stats = json.loads(cli("stats", "--json", db=url).stdout)
    assert stats["entries"] == 2 and stats["backend"] == "postgresql"
    empty = cli("recover", "redis port for staging", "--user", "nobody", db=url)  # says why it is empty
    assert b"Traceback" not in empty.stderr and b"internal error" not in empty.stderr
    assert "nobody" in (empty.stdout + empty.stderr).decode()
    vacuumed = cli("vacuum", db=url)  # VACUUM FULL of Lantern's tables; the URL shown without its password
    assert vacuumed.returncode == 0 and " bytes" in vacuumed.stdout.decode(), vacuumed.stderr
    assert json.loads(cli("stats", "--json", db=url).stdout)["entries"] == 2


def test_connection_errors_are_one_line_without_the_password(tmp_path):
    url = f"postgresql://ann:s3cret-pw@{'127.0.0.1'}:1/lantern"  # nothing listens on port 1
    with pytest.raises(LanternError) as info:
        PostgresStore(url)
    message = str(info.value)
    assert "s3cret-pw" not in message and "ann:***@127.0.0.1:1" in message and "cannot connect" in message
    proc = cli("stats", db=url)
    assert proc.returncode == 1 and b"s3cret-pw" not in proc.stderr and b"Traceback" not in proc.stderr
    assert redact_url("postgresql://u:p@h/db?password=x&sslmode=require") == (
        "postgresql://u:***@h/db?password=***&sslmode=require"
    )


# a password over what a URL parser splits at, quotes, brackets, bad %-escapes and non-ASCII, around three
# markers: no marker (no piece of the password between those characters) may reach an error line
HOSTILE = "?#/@:% []\"'\\é€😀\u00a0"
MARKERS = ("Qx7kA", "Qx7kB", "Qx7kC")
URL_SHAPES = (
    "postgresql://ann:{pw}@127.0.0.1:1/lantern",  # host and port (nothing listens on port 1)
    "POSTGRES://ann:{pw}@127.0.0.1:1/lantern",  # the scheme in upper case
    "postgres://ann:{pw}@/lantern?host=/nonexistent-lantern-socket-dir",  # a socket folder in the query
    "postgresql://ann@127.0.0.1:1/lantern?password={pw}",  # the password in the query
    "postgresql://ann:{pw}@[::1:1/lantern",  # a host libpq cannot parse: it quotes the whole URI
)


@st.composite
def hostile_passwords(draw) -> str:
    between = draw(st.lists(st.text(alphabet=HOSTILE, max_size=4), min_size=4, max_size=4))
    return between[0] + "".join(m + b for m, b in zip(MARKERS, between[1:], strict=True))


def _leaks(text: str, password: str) -> list[str]:
    """The parts of ``password`` found in ``text``: itself, percent-decoded, or any of its markers."""
    from urllib.parse import unquote

    return [s for s in (password, unquote(password), *MARKERS) if s and s in text]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(password=hostile_passwords(), shape=st.sampled_from(URL_SHAPES))
def test_a_password_of_any_characters_never_reaches_an_error_line(password, shape):
    """F6 (breaker-23): whatever a password holds, and wherever the URL puts it, neither the Python API's error nor
    redact_url shows any of it, against an unreachable server (no server needed)."""
    url = shape.format(pw=password)
    assert not _leaks(redact_url(url), password), redact_url(url)
    with pytest.raises(LanternError) as info:
        PostgresStore(url)
    message = str(info.value)
    assert not _leaks(message, password), message
    assert len(message.splitlines()) == 1


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(password=hostile_passwords(), shape=st.sampled_from(URL_SHAPES))
def test_a_password_of_any_characters_never_reaches_the_commands_error_line(password, shape, tmp_path_factory):
    """The same through the command line: the global --db, $LANTERN_DB and both ends of ``lantern copy``."""
    url = shape.format(pw=password)
    store = tmp_path_factory.mktemp("copy") / "a.db"
    store.touch()
    for proc in (
        cli("stats", db=url),
        cli("stats", env={"LANTERN_DB": url}),
        cli("copy", str(store), url),
        cli("copy", url, str(store.with_name("b.db"))),
    ):
        err = proc.stderr.decode() + proc.stdout.decode()
        assert proc.returncode == 1 and "Traceback" not in err, err
        assert not _leaks(err, password), err


@settings(max_examples=examples(200), deadline=None)
@given(password=hostile_passwords(), shape=st.sampled_from(URL_SHAPES), split=st.sampled_from("@/?#: "))
def test_scrub_leaves_nothing_of_the_password_in_what_a_driver_may_quote(password, shape, split):
    """config.scrub, what every message quoting a driver's words goes through (store, copy, the CLI's _guard, the
    MCP server): the URL as given or lower-cased, the password as written or decoded, and any quoted part of it as
    a parser that split it elsewhere would quote it, are all gone."""
    from urllib.parse import unquote

    from lantern.config import scrub, server_url

    url = shape.format(pw=password)
    part = password.split(split)[-1] or password
    said = (
        f'in URI: "{url}"; {server_url(url)}; invalid token: "{password}" ({unquote(password)}); '
        f"failed to resolve host '{part}'; option \"{part}@127.0.0.1\""
    )
    assert not _leaks(scrub(said, url), password), scrub(said, url)
    assert scrub("nothing secret here: port 1", url) == "nothing secret here: port 1"


def test_a_wrong_password_of_any_characters_is_never_shown_by_the_real_server(pg_server):
    """A few hostile passwords against the real server: a role that must give one (scram-sha-256), the wrong one
    given in each URL shape the server accepts: the login is refused with one line showing none of it."""
    import uuid

    name, role = "t_" + uuid.uuid4().hex[:12], "pw_" + uuid.uuid4().hex[:8]
    with psycopg.connect(pg_server.get_uri(), autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'right-{uuid.uuid4().hex}'")
        admin.execute(f"CREATE DATABASE {name} OWNER {role}")
    socket = pg_server.get_uri(name).split("?host=", 1)[1]
    hba = Path(pg_server.pgdata) / "pg_hba.conf"
    original = hba.read_text()
    hba.write_text(f"local all {role} scram-sha-256\n" + original)
    wrong = ["Qx7kA:Qx7kB", "Qx7kA%3FQx7kB%23", "Qx7kA%40Qx7kB%2F", "Qx7kAé€Qx7kB"]  # as a URL must carry them
    try:
        with psycopg.connect(pg_server.get_uri(), autocommit=True) as admin:
            admin.execute("SELECT pg_reload_conf()")
        for password in wrong:
            for url in (
                f"postgresql://{role}:{password}@/{name}?host={socket}",
                f"POSTGRESQL://{role}:{password}@/{name}?host={socket}",
                f"postgresql://{role}@/{name}?host={socket}&password={password}",
            ):
                with pytest.raises(LanternError) as info:
                    Lantern(url)
                message = str(info.value)
                assert "refused the login" in message and not _leaks(message, password), message
                proc = cli("stats", db=url)
                err = proc.stderr.decode()
                assert proc.returncode == 1 and "refused the login" in err and not _leaks(err, password), err
    finally:
        hba.write_text(original)
        with psycopg.connect(pg_server.get_uri(), autocommit=True) as admin:
            admin.execute("SELECT pg_reload_conf()")


def test_a_url_whose_scheme_is_upper_case_is_used(pg_url):
    """URI schemes are case-insensitive: ``POSTGRESQL://`` names the same server (libpq itself wants lower case)."""
    url = pg_url()
    with Lantern("POSTGRESQL" + url[len("postgresql") :]) as lt:
        assert lt.archive(TURNS, session="chat").added == 2
    assert json.loads(cli("stats", "--json", db="Postgres" + url[len("postgresql") :]).stdout)["entries"] == 2


def test_copying_a_server_database_onto_itself_is_refused_by_any_url(pg_url, tmp_path):
    """F12 (breaker-23): `lantern copy URL URL2` where both name the same database of the same server (the same
    URL, the scheme in another case, another spelling of the socket folder, extra options) is refused with one
    line, exit 1, nothing written; another database of the same server is copied into."""
    url = pg_url()
    with Lantern(url) as lt:
        lt.archive(TURNS, session="chat")
    base, socket = url.split("?host=", 1)
    spellings = [
        url,
        "POSTGRES" + url[len("postgresql") :],
        f"{base}?host={socket}/&application_name=lantern-copy",
        f"{base}?host={socket}&connect_timeout=5",
    ]
    with psycopg.connect(url) as conn:
        before = conn.execute("SELECT count(*), max(id) FROM entries").fetchone()
    for other in spellings:
        proc = cli("copy", url, other)
        err = proc.stderr.decode()
        assert proc.returncode == 1 and err.count("\n") == 1 and "the same database" in err, (other, err)
        with pytest.raises(LanternError, match="the same database"):
            copy_store(other, url)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*), max(id) FROM entries").fetchone() == before
    assert copy_store(url, pg_url())["added"] == 2  # another database on the same server


def test_copy_errors_name_the_server_or_the_file_that_failed(pg_url, tmp_path):
    """F9 (breaker-23) with a server at one end: the line names the URL (without its password) or the file that
    failed, never ~/.lantern/lantern.db nor None."""
    url = pg_url()
    with Lantern(url) as lt:
        lt.archive(TURNS, session="chat")
    (tmp_path / "adir").mkdir()
    proc = cli("copy", url, str(tmp_path / "adir"))
    err = proc.stderr.decode()
    assert proc.returncode == 1 and err.startswith(f"error: DST {tmp_path / 'adir'} is a directory"), err
    dead = "postgresql://ann:s3cret-pw@127.0.0.1:1/lantern"
    proc = cli("copy", url, dead)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "ann:***@127.0.0.1:1" in err and "s3cret-pw" not in err, err
    assert "lantern.db" not in err and "None" not in err


def test_a_newer_schema_and_a_foreign_database_are_refused(pg_url):
    url = pg_url()
    PostgresStore(url).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE schema_version SET version = 99")
    with pytest.raises(LanternError, match="newer than this Lantern"):
        PostgresStore(url)
    other = pg_url()
    with psycopg.connect(other, autocommit=True) as conn:
        conn.execute("CREATE TABLE entries (id int)")
    with pytest.raises(LanternError, match="not a Lantern database"):
        PostgresStore(other)


def test_connections_the_server_dropped_are_replaced_and_nothing_committed_is_lost(pg_url):
    url = pg_url()
    with Lantern(url) as lt:
        first = lt.archive(TURNS, session="chat").entry_ids
        with psycopg.connect(url, autocommit=True) as admin:  # what a server restart does to every client
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        time.sleep(IDLE_CHECK_S + 0.2)  # a connection idle this long is checked before use, and replaced
        more = lt.archive([{"role": "user", "content": "The deploy key rotates every 30 days."}], session="chat")
        assert more.added == 1 and lt.store.count() == len(first) + 1
        assert "6380" in lt.recover("staging redis port", budget=2000).text


def test_a_user_who_may_not_create_pgvector_is_told_to_create_it(pg_server):
    import uuid

    name = "t_" + uuid.uuid4().hex[:12]
    role = "r_" + uuid.uuid4().hex[:8]
    with psycopg.connect(pg_server.get_uri(), autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")  # not a superuser: pgvector 0.6.2 is not a trusted extension
        admin.execute(f"CREATE DATABASE {name} OWNER {role}")
    url = pg_server.get_uri(name).replace("postgresql://postgres:", f"postgresql://{role}:", 1)
    with pytest.raises(LanternError) as info:
        Lantern(url)
    assert "pgvector extension is not available" in str(info.value) and "CREATE EXTENSION vector" in str(info.value)
    with psycopg.connect(pg_server.get_uri(name), autocommit=True) as admin:
        admin.execute("CREATE EXTENSION vector")  # what docs/postgres.md tells the administrator to run
    with Lantern(url) as lt:  # now the owner creates the tables and works without further privileges
        assert lt.archive(TURNS, session="chat").added == 2
        assert lt.stats()["schema_version"] == len(MIGRATIONS)


def test_a_recovery_while_another_writer_locks_the_table_skips_reinforcement_after_the_wait(pg_url, caplog):
    import lantern.reinforce as reinforce

    url = pg_url()
    with Lantern(url) as lt:
        ids = lt.archive(TURNS, session="chat").entry_ids
        before = lt.store.db.execute("SELECT id, access_count, confidence FROM entries ORDER BY id").fetchall()
        with psycopg.connect(url) as holder:  # writes wait behind it; reads do not (EXCLUSIVE allows SELECT)
            holder.execute("LOCK TABLE entries IN EXCLUSIVE MODE")
            t0 = time.monotonic()
            with caplog.at_level("WARNING", logger="lantern"):
                rec = lt.recover("staging redis port", budget=2000)
            took = time.monotonic() - t0
            holder.rollback()
        assert "6380" in rec.text and ids[0] in [e.id for e in rec.entries]
        assert reinforce.WRITE_WAIT_S - 0.5 < took < reinforce.WRITE_WAIT_S + 20
        assert "not updated" in caplog.text
        assert lt.store.db.execute("SELECT id, access_count, confidence FROM entries ORDER BY id").fetchall() == before


def test_lantern_db_holding_a_url_opens_the_server(pg_url, monkeypatch):
    url = pg_url()
    monkeypatch.setenv("LANTERN_DB", url)
    with Lantern() as lt:  # no path: $LANTERN_DB
        assert lt.store.backend == "postgresql" and lt.path == redact_url(url)
        assert lt.archive(TURNS, session="chat").added == 2


def test_the_claude_code_hooks_refuse_a_server_url_without_breaking_the_session(pg_url, tmp_path, monkeypatch):
    from lantern.integrations import claude_code
    from lantern.integrations.claude_code_settings import hook_command

    url = pg_url()
    monkeypatch.setenv("HOME", str(tmp_path))  # the hook log goes to ~/.lantern/logs
    payload = {
        "hook_event_name": "UserPromptSubmit",
        "prompt": "which port was it?",
        "session_id": "s",
        "transcript_path": str(tmp_path / "t.jsonl"),
    }
    assert claude_code.run(json.dumps(payload), db=url) == ""  # never an error in the user's session
    log = (claude_code.lantern_home() / "logs" / "claude-code.log").read_text(encoding="utf-8")
    assert "lantern hook claude-code is not supported on the postgresql backend" in log
    monkeypatch.setenv("LANTERN_DB", url)  # the same through $LANTERN_DB
    assert claude_code.run(json.dumps(payload)) == ""
    assert (claude_code.lantern_home() / "logs" / "claude-code.log").read_text(encoding="utf-8").count("skipped") == 2
    with pytest.raises(UnsupportedBackendError, match="lantern hook claude-code"):
        hook_command("claude-code", url)


def test_the_rest_api_on_a_server(pg_url):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from lantern.integrations.proxy import build_app

    with TestClient(build_app(pg_url()), raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
        r = client.post("/v1/memory/archive", json={"messages": TURNS, "session": "chat"})
        assert r.status_code == 200, r.text
        ids = r.json()["entry_ids"]
        rec = client.post("/v1/memory/recover", json={"query": "staging redis port", "budget": 2000}).json()
        assert "6380" in rec["text"]
        hits = client.post("/v1/memory/search", json={"query": "LOG_LEVEL", "k": 3}).json()["hits"]
        assert "LOG_LEVEL" in hits[0]["summary"]
        assert client.post("/v1/memory/feedback", json={"entry_ids": ids[:1], "useful": True}).json() == {"updated": 1}
        assert client.get("/v1/memory/stats").json()["entries"] == 2
        assert client.post("/v1/memory/forget", json={"session": "chat", "confirm": True}).json() == {"forgotten": 2}
        assert client.post("/v1/memory/recover", json={"query": "staging redis port"}).json()["text"] == ""


def test_an_erase_a_reader_holds_up_is_reported_then_finished_when_it_ends(pg_url):
    url = pg_url()
    with Lantern(url) as lt:
        lt.archive(TURNS, session="secret")
        reader = psycopg.connect(url)  # a transaction that read the table: its lock keeps VACUUM FULL out
        reader.execute("SELECT count(*) FROM entries").fetchone()
        pid = reader.info.backend_pid
        told = []
        try:
            forgotten = lt.forget(session="secret", wait=0.3, on_wait=told.append)
            assert forgotten == 2 and not forgotten.erased and forgotten.remaining_bytes > 0
            assert pid in [p for p, _ in forgotten.holders] and told and pid in [p for p, _ in told[0].holders]
            assert lt.store.get_meta("erase_pending") is not None
            assert lt.store.count() == 0  # the rows are deleted all the same
        finally:
            reader.rollback()
            reader.close()
        finished = lt.forget(session="secret")  # nothing more to delete: the pending erase is finished
        assert finished == 0 and finished.erased and lt.store.get_meta("erase_pending") is None


def test_the_cli_says_which_server_session_holds_up_the_erase(pg_url, tmp_path):
    url = pg_url()
    transcript = tmp_path / "chat.jsonl"
    transcript.write_text("\n".join(json.dumps(t) for t in TURNS) + "\n", encoding="utf-8")
    cli("ingest", str(transcript), "--session", "secret", db=url)
    with psycopg.connect(url) as reader:
        reader.execute("SELECT count(*) FROM entries").fetchone()
        out = cli("forget", "--yes", "--session", "secret", "--wait", "0.2", db=url)
        said = out.stderr.decode()
        assert out.returncode == 3 and f"server session {reader.info.backend_pid}" in said and "-wal" not in said
        reader.rollback()
    assert "0 entries forgotten" in cli("forget", "--yes", "--session", "secret", db=url).stdout.decode()


LOAD_WRITER = """
import sys
sys.path.insert(0, sys.argv[1])
from lantern import Lantern
url, k, n = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with Lantern(url, embedder="fake", user=f"u{k // 2}") as lt:
    prev = []
    for i in range(n):
        turn = [
            {"role": "user", "content": f"[w{k} t{i}] which port does service {i} of worker {k} listen on?"},
            {"role": "assistant", "content": f"Service {i} of worker {k} listens on port {5000 + 10 * k + i}."},
        ]
        lt.archive(prev + turn, session="load")  # the previous turn is sent again, as a proxy re-sends it
        prev = turn
"""
LOAD_READER = """
import sys
sys.path.insert(0, sys.argv[1])
from lantern import Lantern
url, n = sys.argv[2], int(sys.argv[3])
with Lantern(url, embedder="fake", user="u0") as lt:
    for i in range(n):
        lt.recover(f"which port does service {i} listen on?", budget=1000)  # pending recoveries the writers judge
"""


def test_writers_and_a_reader_in_parallel_processes_lose_and_repeat_no_turn(pg_url):
    """Three writer processes (two of them appending to one conversation) and one recovering process on one
    server: every turn stored exactly once, each conversation's turn numbers 0..n-1, no process fails. The
    reader's recoveries leave pending recoveries that the writers' archives resolve (reinforce.py) at the same
    time: the deadlock those row updates met is retried (``PostgresStore.add``)."""
    import re
    from collections import Counter

    url, writers, turns = pg_url(), 3, 30
    with Lantern(url, embedder="fake") as lt:  # the schema and embedder recorded once, before the race
        lt.archive([{"role": "user", "content": "which port does the first service listen on?"}], session="load")
    procs = [
        subprocess.Popen([sys.executable, "-c", LOAD_WRITER, SRC, url, str(k), str(turns)], stderr=subprocess.PIPE)
        for k in range(writers)
    ]
    procs.append(subprocess.Popen([sys.executable, "-c", LOAD_READER, SRC, url, "15"], stderr=subprocess.PIPE))
    errors = [p.communicate(timeout=600)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs), errors
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT user_id, turn, text FROM entries WHERE session = 'load'").fetchall()
    found = Counter(m for _, _, text in rows for m in re.findall(r"\[w\d+ t\d+\]", text))
    assert set(found) == {f"[w{k} t{i}]" for k in range(writers) for i in range(turns)}  # none lost
    assert max(found.values()) == 1  # none stored twice
    by_user: dict[str, list[int]] = {}
    for user, turn, _ in rows:
        by_user.setdefault(user, []).append(turn)
    assert {u: sorted(t) for u, t in by_user.items()} == {u: list(range(len(t))) for u, t in by_user.items()}


def test_term_fractions_read_the_servers_statistics_once_analyzed(pg_url):
    """Before ANALYZE the shares are counted in the newest rows; after it they come from ``pg_stats`` (a term's
    rarest lexeme), and agree with the count: ANALYZE reads every row of a table this small."""
    from lantern.recover.signals import quote

    url = pg_url()
    with Lantern(url) as lt:
        lt.archive(
            [
                {
                    "role": "user",
                    "content": f"note {i}: " + ("the deploy key rotates" if i % 4 == 0 else "lunch at noon"),
                }
                for i in range(40)
            ],
            session="chat",
        )
        terms = [quote(t) for t in ("deploy", "lunch", "deploy key", "nowhere-word")]
        store = lt.store
        counted = store.term_fractions(terms, 2000)
        assert store._fractions[2] is None  # no statistics yet: counted
        assert counted[quote("deploy")] == pytest.approx(10 / 40) and counted[quote("lunch")] == pytest.approx(30 / 40)
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("ANALYZE entries")
        store._fractions = None
        read = store.term_fractions(terms, 2000)
        assert store._fractions[2] is not None
        for t in terms:
            assert read[t] == pytest.approx(counted[t], abs=0.02), t


def test_a_wrong_password_is_one_line_naming_it_and_the_password_is_never_shown(pg_server, tmp_path):
    """A role that must give a password (a pg_hba.conf line for it alone, scram-sha-256): the wrong one is refused
    with one line naming the login, the password shown as ***, nothing created; the right one works."""
    import uuid

    name, role, right = "t_" + uuid.uuid4().hex[:12], "pw_" + uuid.uuid4().hex[:8], "right-Pw-" + uuid.uuid4().hex[:6]
    with psycopg.connect(pg_server.get_uri(), autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{right}'")
        admin.execute(f"CREATE DATABASE {name} OWNER {role}")
    with psycopg.connect(pg_server.get_uri(name), autocommit=True) as admin:
        admin.execute("CREATE EXTENSION vector")
    hba = Path(pg_server.pgdata) / "pg_hba.conf"
    original = hba.read_text()
    hba.write_text(f"local all {role} scram-sha-256\nhost all {role} 127.0.0.1/32 scram-sha-256\n" + original)
    try:
        with psycopg.connect(pg_server.get_uri(), autocommit=True) as admin:
            admin.execute("SELECT pg_reload_conf()")
        wrong = pg_server.get_uri(name).replace("postgresql://postgres:", f"postgresql://{role}:not-the-Pw-42", 1)
        with pytest.raises(LanternError) as info:
            Lantern(wrong)
        message = str(info.value)
        assert "refused the login: wrong user or password" in message and "not-the-Pw-42" not in message
        assert f"{role}:***@" in message and len(message.splitlines()) == 1
        proc = cli("stats", db=wrong)
        err = proc.stderr.decode()
        assert proc.returncode == 1 and "refused the login" in err and "not-the-Pw-42" not in err + proc.stdout.decode()
        assert "Traceback" not in err
        with psycopg.connect(pg_server.get_uri(name)) as conn:
            assert conn.execute("SELECT to_regclass('entries')").fetchone()[0] is None  # nothing created
        with Lantern(wrong.replace("not-the-Pw-42", right)) as lt:
            assert lt.archive(TURNS, session="chat").added == 2
    finally:
        hba.write_text(original)
        with psycopg.connect(pg_server.get_uri(), autocommit=True) as admin:
            admin.execute("SELECT pg_reload_conf()")


TURNS_MID_INGEST = 1536  # 6 batches: the restart lands before the last one even on a quiet machine


def test_a_server_restarted_mid_ingest_loses_no_committed_batch_and_the_rerun_completes_it(pg_server, pg_url, tmp_path):
    """`lantern ingest` of a 1,536-turn transcript (6 batches of 256, one transaction each) while the server is
    restarted (pg_ctl restart -m fast, after the first batch is committed): the command fails with one line and no
    traceback, the entries on the server are whole batches, and running the same ingest again stores the rest,
    each turn once."""
    import pgserver

    url = pg_url()
    path = tmp_path / "chat.jsonl"
    lines = []
    for i in range(TURNS_MID_INGEST):
        lines.append(json.dumps({"role": "user", "content": f"question {i}: which port does service {i} use?"}))
        lines.append(json.dumps({"role": "assistant", "content": f"service {i} listens on port {10_000 + i}."}))
    path.write_text("\n".join(lines) + "\n")
    with Lantern(url) as lt:  # schema and embedder first: the race is the ingest's, not the migration's
        lt.archive([{"role": "user", "content": "hello"}], session="other")
    proc = subprocess.Popen(
        [sys.executable, "-m", "lantern.cli", "--db", url, "ingest", str(path), "--session", "big"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**__import__("os").environ, "PYTHONPATH": SRC},
    )
    deadline = time.monotonic() + 300
    count = 0
    while time.monotonic() < deadline and proc.poll() is None:
        with psycopg.connect(url) as conn:
            count = conn.execute("SELECT count(*) FROM entries WHERE session = 'big'").fetchone()[0]
        if count:
            break
        time.sleep(0.05)
    assert count, "the first batch should commit before the ingest ends"
    pgserver.pg_ctl(["-w", "-m", "fast", "restart"], pgdata=pg_server.pgdata, user=pg_server.system_user)
    out, err = proc.communicate(timeout=300)
    with psycopg.connect(url) as conn:
        stored = conn.execute("SELECT count(*) FROM entries WHERE session = 'big'").fetchone()[0]
    if proc.returncode == 0:  # the ingest ended between our poll and the restart: nothing to check but the count
        assert stored == TURNS_MID_INGEST
        pytest.skip("the ingest finished before the server restarted")
    message = err.decode().strip()
    assert proc.returncode == 1 and "Traceback" not in message and len(message.splitlines()) == 1, message
    assert "postgresql://" in message and "administrator command" in message or "server was lost" in message
    assert stored % 256 == 0 and 256 <= stored < TURNS_MID_INGEST  # whole batches: nothing half-written
    rerun = cli("ingest", str(path), "--session", "big", db=url)
    assert rerun.returncode == 0, rerun.stderr
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT count(*), count(DISTINCT content_hash), min(turn), max(turn) FROM entries WHERE session = 'big'"
        ).fetchone()
    assert rows == (TURNS_MID_INGEST, TURNS_MID_INGEST, 0, TURNS_MID_INGEST - 1)


def test_a_copy_the_server_refuses_names_the_server_not_the_default_database(pg_url, tmp_path):
    """F9 (breaker-23): a statement of `lantern copy` the server refuses (here a trigger on DST's entries, as a
    policy or a full disk would) fails with one line naming the server DST is (before: `database None: ...`), and
    so does the Python API's copy_store."""
    url = pg_url()
    src = tmp_path / "a.db"
    with Lantern(src) as lt:
        lt.archive(TURNS, session="chat")
    Lantern(url).close()  # Lantern's tables, then a trigger that refuses every new entry
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'refused by the test trigger'; END $$"
        )
        conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON entries FOR EACH ROW EXECUTE FUNCTION refuse()")
    proc = cli("copy", str(src), url)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"error: DST {redact_url(url)}: ") and "refused by the test trigger" in err, err
    with pytest.raises(LanternError, match="refused by the test trigger") as info:
        copy_store(src, url)
    assert redact_url(url) in str(info.value)


def test_an_archive_the_server_rolls_back_to_break_a_deadlock_is_run_again(pg_url):
    """Another session and the archive's transaction lock two rows in opposite orders: the server aborts the
    archive's transaction (deadlock_detected, found by the session that waited first); ``add`` runs it again whole
    and it commits once."""
    import threading

    from lantern.archive.chunk import chunk
    from lantern.model import Message

    url = pg_url()
    with Lantern(url) as lt:
        p, q = lt.archive(TURNS, session="chat").entry_ids
        (turn,) = chunk([Message("user", "The deploy key rotates every 30 days.")], None)
        row = lt.writer.prepare(turn, "ops", lt.scope)
        vectors = lt.embedder.embed([row.summary])
        a_holds_p, b_holds_q, attempts = threading.Event(), threading.Event(), []

        def after(db, written):
            attempts.append(written)
            db.execute("UPDATE entries SET success = 0.9 WHERE id = ?", (p,))
            if len(attempts) == 1:
                a_holds_p.set()
                assert b_holds_q.wait(30)
            db.execute("UPDATE entries SET success = 0.9 WHERE id = ?", (q,))  # waits for the other session

        def other():
            with psycopg.connect(url) as conn:  # one transaction until the commit
                assert a_holds_p.wait(30)
                conn.execute("UPDATE entries SET success = 0.1 WHERE id = %s", (q,))
                b_holds_q.set()
                time.sleep(0.3)  # the archive waits first, so its deadlock check (after 1 s) finds the cycle
                conn.execute("UPDATE entries SET success = 0.1 WHERE id = %s", (p,))
                conn.commit()

        thread = threading.Thread(target=other)
        thread.start()
        out = lt.store.add([row], vectors, after=after)
        thread.join(30)
        assert len(attempts) == 2 and out[0][1] is True
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*) FROM entries WHERE session = 'ops'").fetchone()[0] == 1
            assert conn.execute("SELECT success FROM entries WHERE id = ANY(%s)", ([p, q],)).fetchall() == [
                (0.9,),
                (0.9,),
            ]
