"""The PostgreSQL server going away under long-lived handles (breaker findings F10, issue #23): every call of the
Python API, the CLI and the REST API on a stopped server is one ``DatabaseUnavailableError`` (a LanternError)
naming the lost server, within seconds (never psycopg_pool's 30 s wait), and the next call once the server is back
works. A real server (pgserver, conftest.py ``pg_server``), stopped and started again within the test."""

from __future__ import annotations

import shlex
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from clirun import lantern as cli
from lantern import DatabaseUnavailableError, Lantern
from lantern.store.postgres.store import CONNECT_TIMEOUT_S, IDLE_CHECK_S

TURNS = [
    {"role": "user", "content": "Which port did we give the staging Redis?"},
    {"role": "assistant", "content": "Staging Redis listens on port 6380, set in deploy/staging/redis.conf."},
]
FAST_S = CONNECT_TIMEOUT_S + 2  # the longest a call may take to say the server is gone (the pool's wait: 10 s)


@contextmanager
def server_stopped(pg_server) -> Iterator[None]:
    """The test server stopped (``pg_ctl stop -m fast``: every session ends, new connections are refused) for the
    block, then started again with the options it ran with (its socket directory: the same URLs)."""
    import pgserver

    opts = shlex.split((pg_server.pgdata / "postmaster.opts").read_text())[1:]
    kept = [a for i, a in enumerate(opts) if a != "-D" and (i == 0 or opts[i - 1] != "-D")]
    pgserver.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pg_server.pgdata, user=pg_server.system_user)
    try:
        yield
    finally:
        pgserver.pg_ctl(
            ["-w", "-o", " ".join(shlex.quote(a) for a in kept), "start"],
            pgdata=pg_server.pgdata,
            user=pg_server.system_user,
        )


def _unavailable(call, *args) -> str:
    """The message of the DatabaseUnavailableError ``call(*args)`` raises, checked to come within ``FAST_S``."""
    start = time.monotonic()
    with pytest.raises(DatabaseUnavailableError) as info:
        call(*args)
    took = time.monotonic() - start
    assert took < FAST_S, f"{took:.1f} s to say the server is gone"
    message = str(info.value)
    assert len(message.splitlines()) == 1 and "PostgreSQL server" in message, message
    return message


def test_every_call_on_a_stopped_server_says_so_at_once_and_the_next_after_it_is_back_works(pg_server, pg_url):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from lantern.integrations.proxy import build_app

    url = pg_url()
    database = url.split("?")[0].rsplit("/", 1)[1]  # t_...
    calls = {
        "archive": lambda lt: lt.archive([{"role": "user", "content": "The deploy key rotates monthly."}], "chat"),
        "recover": lambda lt: lt.recover("staging redis port", budget=2000),
        "search": lambda lt: lt.search("redis", k=3),
        "stats": lambda lt: lt.stats(),
        "reindex": lambda lt: lt.reindex(),
        "forget": lambda lt: lt.forget(session="chat"),
    }
    with (
        Lantern(url) as lt,
        TestClient(build_app(url), raise_server_exceptions=False, base_url="http://127.0.0.1") as client,
    ):
        lt.archive(TURNS, session="chat")
        assert client.get("/v1/memory/stats").json()["entries"] == 1
        other = Lantern(url)
        other.recover("staging redis port")
        with server_stopped(pg_server):
            start = time.monotonic()
            other.close()  # closing a handle whose server is gone: quiet, at once
            assert time.monotonic() - start < FAST_S
            time.sleep(IDLE_CHECK_S + 0.2)  # the pool's connections now idle long enough to be checked before use
            for name, call in calls.items():
                for _ in range(2):  # the first call meets the dead connections, the second a server refusing
                    message = _unavailable(call, lt)
                    assert database in message and "@" in message, (name, message)  # the URL, redacted
            r = client.get("/v1/memory/stats")
            assert r.status_code == 503 and "PostgreSQL server" in r.json()["error"], r.text
            r = client.post("/v1/memory/recover", json={"query": "staging redis port"})
            assert r.status_code == 503 and "PostgreSQL server" in r.json()["error"], r.text
            proc = cli("stats", db=url)
            err = proc.stderr.decode().strip()
            assert proc.returncode == 1 and len(err.splitlines()) == 1 and "Traceback" not in err, err
            assert "PostgreSQL server" in err and database in err, err
            _unavailable(Lantern, url)  # a new handle: the same error
        start = time.monotonic()
        assert lt.archive([{"role": "user", "content": "The deploy key rotates monthly."}], "chat").added == 1
        assert time.monotonic() - start < FAST_S
        assert "6380" in lt.recover("staging redis port", budget=2000).text
        assert lt.stats()["entries"] == 2
        assert client.get("/v1/memory/stats").json()["entries"] == 2
