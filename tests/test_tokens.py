"""Tokens of the local servers (issue 38, item 9): wrong tokens are limited per client address (before: 1,200 to
2,000 guesses a second were answered), and the secrets can come from files or the environment instead of the
command line that ``ps`` shows (with a warning when they are on it)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
from fastapi.testclient import TestClient  # noqa: E402

from lantern import Lantern  # noqa: E402
from lantern.integrations.tokens import FailureLimit  # noqa: E402

TOKEN = "s3cret-Token-7f1"
LANTERN = [sys.executable, "-m", "lantern.cli"]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


ADDRESSES = ["10.0.0.1", "10.0.0.2", "127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.2", "192.168.1.7"]


@settings(max_examples=examples(300), deadline=None)
@given(
    attempts=st.lists(
        st.tuples(st.floats(0, 20, allow_nan=False), st.booleans(), st.sampled_from(ADDRESSES)), max_size=120
    ),
    max_clients=st.integers(1, 4),
)
def test_no_window_ever_checks_more_than_the_limits_of_wrong_tokens(attempts, max_clients):
    """The property: in every 60 s window, at most 10 wrong tokens of one client are checked, every loopback
    address being one client (this host), and at most ``GLOBAL_LIMIT`` of all clients together, however few
    addresses are remembered (an evicted address gets no new guesses); a right token of a client that is not
    blocked is always accepted; a client blocks another only once all together reach the global limit."""
    from lantern.integrations.tokens import GLOBAL_LIMIT, client_of

    clock = Clock()
    limit = FailureLimit(clock=clock, max_clients=max_clients)
    checked: dict[str, list[float]] = {}
    for dt, right, address in attempts:
        clock.now += dt
        who = client_of(address)
        recent = [t for t in checked.get(who, []) if t > clock.now - 60]
        everyone = [t for ts in checked.values() for t in ts if t > clock.now - 60]
        if limit.wait(address) > 0:
            assert len(recent) >= 10 or len(everyone) >= GLOBAL_LIMIT  # blocked only past a limit
            continue
        if not right:
            checked.setdefault(who, []).append(clock.now)
            limit.failed(address)
        assert len([t for t in checked.get(who, []) if t > clock.now - 60]) <= 10
        assert len([t for ts in checked.values() for t in ts if t > clock.now - 60]) <= GLOBAL_LIMIT
    assert client_of("127.3.2.1") == client_of("::1") == client_of("::ffff:127.0.0.1") != client_of("10.0.0.1")


def test_the_inspector_answers_429_after_ten_wrong_tokens_even_to_the_right_one(tmp_path):
    from lantern.integrations.ui import build_app

    db = tmp_path / "t.db"
    with Lantern(db) as lt:
        lt.archive([{"role": "user", "content": "The ibis canary listens on port 8533."}], session="s")
    clock = Clock()
    app = build_app(db, token=TOKEN, failures=FailureLimit(clock=clock))
    with TestClient(app, base_url="http://127.0.0.1") as c:
        for i in range(10):
            assert c.get("/", params={"token": f"guess-{i}"}).status_code == 401
        r = c.get("/", params={"token": TOKEN}, follow_redirects=False)
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 59
        r = c.post("/login", data={"token": TOKEN}, headers={"origin": "http://127.0.0.1"})
        assert r.status_code == 429
        assert c.get("/").status_code == 401  # no token presented: the login page, nothing counted
        clock.now += 61
        r = c.get("/", params={"token": TOKEN}, follow_redirects=False)
        assert r.status_code == 303


def test_the_rest_api_answers_429_after_ten_wrong_bearer_tokens(tmp_path, monkeypatch):
    from lantern.integrations.proxy import build_app

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with TestClient(build_app(tmp_path / "r.db", token=TOKEN), base_url="http://127.0.0.1") as c:
        for i in range(10):
            r = c.get("/v1/memory/stats", headers={"authorization": f"Bearer guess-{i}"})
            assert r.status_code == 401
        r = c.get("/v1/memory/stats", headers={"authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 429 and "retry-after" in r.headers
        assert c.get("/v1/memory/stats").status_code == 401  # no token: refused, not counted, not limited


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("command", ["ui", "serve"])
def test_neither_x_forwarded_for_nor_another_loopback_source_buys_more_guesses(tmp_path, command):
    """The real servers (``lantern ui`` and ``lantern serve`` with ``--token-file``), guessed at over real sockets,
    each guess with a new ``X-Forwarded-For`` and from a new source address in 127.0.0.0/8: after 10 wrong tokens
    every token presented, the right one too, is a 429 (before: uvicorn's ``proxy_headers`` made the header the
    client's address, and every guess was checked)."""
    db = tmp_path / "t.db"
    with Lantern(db) as lt:
        lt.archive([{"role": "user", "content": "The ibis canary listens on port 8533."}], session="s")
    secret = tmp_path / "token"
    secret.write_text(TOKEN)
    port = _free_port()
    proc = subprocess.Popen(
        [*LANTERN, "--db", str(db), command, "--port", str(port), "--token-file", str(secret)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    path = "/" if command == "ui" else "/v1/memory/stats"

    def guess(i: int, token: str) -> int:
        transport = httpx.HTTPTransport(local_address=f"127.0.{i // 250}.{i % 250 + 2}")
        with httpx.Client(transport=transport, base_url=f"http://127.0.0.1:{port}") as c:
            return c.get(
                path,
                headers={"authorization": f"Bearer {token}", "x-forwarded-for": f"203.0.113.{i % 250 + 1}"},
                follow_redirects=False,
            ).status_code

    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{port}{path}")
                break
            except httpx.TransportError:
                time.sleep(0.2)
        codes = [guess(i, f"guess-{i}") for i in range(30)]
        assert codes[:10] == [401] * 10 and set(codes[10:]) == {429}, codes
        assert guess(99, TOKEN) == 429
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_a_token_file_keeps_the_token_out_of_the_command_line(tmp_path):
    db = tmp_path / "t.db"
    with Lantern(db) as lt:
        lt.archive([{"role": "user", "content": "The ibis canary listens on port 8533."}], session="s")
    secret = tmp_path / "token"
    secret.write_text(TOKEN + "\n")
    port = _free_port()
    proc = subprocess.Popen(
        [*LANTERN, "--db", str(db), "ui", "--port", str(port), "--token-file", str(secret)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/", params={"token": TOKEN}, follow_redirects=False)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        assert r.status_code == 303  # the file's token, its line break dropped
        cmdline = open(f"/proc/{proc.pid}/cmdline", "rb").read()
        assert TOKEN.encode() not in cmdline
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "visible" not in err


def test_secrets_on_the_command_line_are_warned_about_and_files_checked(tmp_path):
    env = {**os.environ, "COLUMNS": "300"}
    env.pop("LANTERN_TOKEN", None)
    run = lambda *a: subprocess.run([*LANTERN, *a], capture_output=True, text=True, env=env, timeout=120)  # noqa: E731
    r = run("--db", str(tmp_path / "none.db"), "ui", "--token", TOKEN)
    assert r.returncode != 0 and "--token on the command line is visible" in r.stderr
    r = run("serve", "--token", TOKEN, "--upstream-key", "sk-x", "--upstream", "ftp://x")
    assert "--token on the command line is visible" in r.stderr
    assert "--upstream-key on the command line is visible" in r.stderr
    r = subprocess.run(
        [*LANTERN, "--db", str(tmp_path / "none.db"), "ui"],
        capture_output=True,
        text=True,
        env={**env, "LANTERN_UI_TOKEN": TOKEN},
        timeout=120,
    )
    assert "visible" not in r.stderr  # from the environment: no warning
    empty = tmp_path / "empty"
    empty.write_text("\n")
    r = run("serve", "--token-file", str(empty))
    assert r.returncode == 2 and "is empty" in r.stderr
    r = run("serve", "--token", TOKEN, "--token-file", str(empty))
    assert r.returncode == 2 and "not both" in r.stderr


_PASSWORDS = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=8, max_size=24)


def _stats(args: list[str], env: dict[str, str]):
    from typer.testing import CliRunner

    from lantern.cli import app

    return CliRunner().invoke(app, [*args, "stats"], env={"LANTERN_EMBEDDER": "fake", **env})


DB_WARNING = (
    "warning: the password of a --db URL on the command line is visible to other users in ps; use $LANTERN_DB, "
    "$PGPASSWORD or ~/.pgpass (docs/cli.md#secrets)"
)


@settings(max_examples=examples(10), deadline=None)
@given(password=_PASSWORDS, form=st.sampled_from(["userinfo", "encoded", "query", "encoded-query"]))
def test_a_db_password_on_the_command_line_is_warned_once_and_never_shown(password, form):
    """``--db`` with a password (in the userinfo or a ``password=`` parameter, as written or percent-encoded): one
    warning line on stderr; the password in no output, the connection error included."""
    from urllib.parse import quote

    pw = quote(password, safe="") if form.startswith("encoded") else password
    url = (
        f"postgresql://ann:{pw}@127.0.0.1:1/x"
        if form in ("userinfo", "encoded")
        else f"postgresql://ann@127.0.0.1:1/x?password={pw.replace('&', '%26')}"
    )
    r = _stats(["--db", url], {})
    out = r.stdout + r.stderr
    assert r.exit_code != 0 and password not in out and pw not in out, out
    assert [line for line in r.stderr.splitlines() if "visible to other users" in line] == [DB_WARNING]


def test_no_db_warning_from_the_environment_or_without_a_password():
    url = "postgresql://ann:s3cr3t-PW-9x@127.0.0.1:1/x"
    r = _stats([], {"LANTERN_DB": url})
    assert r.exit_code != 0 and "visible" not in r.stderr and "s3cr3t-PW-9x" not in r.stdout + r.stderr
    for quiet in ("postgresql://ann@127.0.0.1:1/x", "postgresql://ann:@127.0.0.1:1/x"):
        assert "visible" not in _stats(["--db", quiet], {}).stderr


def _invoke(args: list[str], env: dict[str, str] | None = None):
    from typer.testing import CliRunner

    from lantern.cli import app

    return CliRunner().invoke(app, args, env={"LANTERN_EMBEDDER": "fake", **(env or {})})


@settings(max_examples=examples(12), deadline=None)
@given(
    password=_PASSWORDS,
    place=st.sampled_from(["--db", "SRC", "DST", "--upstream", "--llm-base-url"]),
    form=st.sampled_from(["userinfo", "query"]),
)
def test_every_url_with_a_password_on_the_command_line_gets_the_one_warning(tmp_path_factory, password, place, form):
    """Wherever the command line takes a URL (the global ``--db``, ``copy``'s SRC and DST, ``serve --upstream``,
    ``--llm-base-url``), one with a password gets the one warning line, naming the alternatives (the option's
    environment variable; ``$PGPASSWORD`` or ``~/.pgpass`` for PostgreSQL), and the password is in no output
    (before: only ``--db`` warned)."""
    from urllib.parse import quote

    pw = quote(password, safe="")
    here = tmp_path_factory.mktemp("urls")
    if place in ("--db", "SRC", "DST"):
        url = (
            f"postgresql://ann:{pw}@127.0.0.1:1/x"
            if form == "userinfo"
            else f"postgresql://ann@127.0.0.1:1/x?password={pw}"
        )
    else:  # an http(s) URL's password is its user info (sent as basic auth)
        url = f"http://ann:{pw}@127.0.0.1:1/v1"
    args = {
        "--db": ["--db", url, "stats"],
        "SRC": ["copy", url, str(here / "dst.db")],
        "DST": ["copy", str(here / "missing.db"), url],
        "--upstream": ["serve", "--upstream", url, "--max-body-bytes", "0"],  # refused after the warning
        "--llm-base-url": ["--db", str(here / "none.db"), "recover", "q", "--llm-base-url", url, "--llm-model", "m"],
    }[place]
    r = _invoke(args)
    out = r.stdout + r.stderr
    assert r.exit_code != 0 and password not in out and pw not in out, out
    warnings = [line for line in r.stderr.splitlines() if "visible to other users" in line]
    shown = {"SRC": "SRC", "DST": "DST"}.get(place, place)
    envvar = {"--db": "$LANTERN_DB, ", "--upstream": "$LANTERN_UPSTREAM", "--llm-base-url": "$LANTERN_LLM_BASE_URL"}
    instead = envvar.get(place, "") + ("$PGPASSWORD or ~/.pgpass" if url.startswith("postgresql") else "")
    assert warnings == [
        f"warning: the password of a {shown} URL on the command line is visible to other users in ps; "
        f"use {instead} (docs/cli.md#secrets)"
    ], r.stderr


def test_no_url_warning_from_the_environment_or_without_a_password(tmp_path):
    r = _invoke(["serve", "--max-body-bytes", "0"], {"LANTERN_UPSTREAM": "http://ann:pw-9x@127.0.0.1:1/v1"})
    assert "visible" not in r.stderr and "pw-9x" not in r.stdout + r.stderr
    r = _invoke(["copy", str(tmp_path / "missing.db"), "postgresql://ann@127.0.0.1:1/x"])
    assert r.exit_code != 0 and "visible" not in r.stderr
