"""Web pages in the user's own browser cannot use Lantern's local servers (issue 38, item 2): the requests a
browser sends for a DNS-rebinding page (a foreign ``Host``), a page on another origin (``Origin``,
``Sec-Fetch-Site``) and a CORS-simple POST (``text/plain``, form types, no type: no preflight), generated with
hypothesis and played over real sockets against ``lantern serve`` (memory API + chat proxy) and ``lantern ui``
under uvicorn on 127.0.0.1, with the real SQLite store. Refused requests archive nothing and reach no upstream;
the same requests as a non-browser client (or a same-origin page) sends them are served. Before: ``serve``
answered any Host and archived a ``text/plain`` chat body and forwarded it upstream with the user's key."""

from __future__ import annotations

import json
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")

from lantern import Lantern  # noqa: E402
from lantern.integrations import origin  # noqa: E402
from lantern.integrations.proxy import build_app  # noqa: E402
from lantern.integrations.ui.app import CSP  # noqa: E402
from serving import start_server  # noqa: E402

SETTINGS = settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
CHAT = {"model": "m", "messages": [{"role": "user", "content": "The heron canary listens on port 7419."}]}
ARCHIVE = {"messages": [{"role": "user", "content": "The ibis canary listens on port 8533."}], "session": "web"}


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    """``lantern serve --upstream`` on a free loopback port; the upstream an in-process mock that counts calls."""
    tmp = tmp_path_factory.mktemp("origin")
    db = tmp / "serve.db"
    forwarded: list[bytes] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        forwarded.append(request.content)
        return httpx.Response(200, json={"choices": [{"message": {"role": "assistant", "content": "Noted."}}]})

    mp = pytest.MonkeyPatch()
    mp.setenv("HOME", str(tmp / "home"))
    app = build_app(db, upstream="http://upstream.invalid/v1", upstream_timeout=10.0, upstream_key="sk-user-key")
    app.app.state.forwarder.client = httpx.AsyncClient(transport=httpx.MockTransport(upstream))
    port, server, thread = start_server(app)
    yield port, db, forwarded
    server.should_exit = True
    thread.join(timeout=10)
    mp.undo()


def _count(db) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as c:
        return c.execute("SELECT count(*) FROM entries").fetchone()[0]


def _http(method: str, url: str, **kw) -> httpx.Response:
    """One request as a page sends it: a client of its own (no cookie carried over from another request), plain
    HTTP on loopback (``verify=False``: there is no TLS here, and httpx would otherwise build an SSL context for
    each request, ~30 ms of CPU, most of a hypothesis example's cost)."""
    return httpx.request(method, url, verify=False, timeout=60, **kw)


def _post(port: int, path: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return _http("POST", f"http://127.0.0.1:{port}{path}", content=body, headers=headers)


def _unchanged(call, db, forwarded) -> httpx.Response:
    before, sent = _count(db), len(forwarded)
    r = call()
    assert _count(db) == before, "a refused request was archived"
    assert len(forwarded) == sent, "a refused request was forwarded upstream"
    return r


# ---------------------------------------------------------------------------------------------- what browsers send
FOREIGN_NAMES = st.from_regex(r"[a-z][a-z0-9-]{0,15}(\.[a-z][a-z0-9-]{0,10}){1,2}", fullmatch=True).filter(
    lambda h: h != "localhost" and not h.endswith(".localhost")
)
SIMPLE_TYPES = st.one_of(  # the CORS-safelisted content types (Fetch standard), and none at all (a Blob body)
    st.sampled_from(["text/plain", "text/plain;charset=UTF-8", "TEXT/PLAIN; charset=utf-8", "multipart/form-data"]),
    st.just("application/x-www-form-urlencoded"),
    st.just(None),
)
PATHS = st.sampled_from(["/v1/chat/completions", "/v1/memory/archive", "/v1/memory/search", "/v1/memory/forget"])


def _body(path: str) -> bytes:
    if path == "/v1/chat/completions":
        return json.dumps(CHAT).encode()
    if path == "/v1/memory/archive":
        return json.dumps(ARCHIVE).encode()
    if path == "/v1/memory/search":
        return json.dumps({"query": "canary port"}).encode()
    return json.dumps({"session": "web"}).encode()


@SETTINGS
@given(name=FOREIGN_NAMES, port_suffix=st.booleans(), path=PATHS)
def test_a_rebinding_page_gets_421_and_changes_nothing(serve, name, port_suffix, path):
    port, db, forwarded = serve
    host = f"{name}:{port}" if port_suffix else name
    headers = {"host": host, "content-type": "application/json", "origin": f"http://{host}"}  # same-origin to it
    r = _unchanged(lambda: _post(port, path, _body(path), headers), db, forwarded)
    assert r.status_code == 421 and "Host not allowed" in r.json()["error"]
    assert _http("GET", f"http://127.0.0.1:{port}/v1/memory/stats", headers={"host": host}).status_code == 421


@SETTINGS
@given(
    scheme=st.sampled_from(["http", "https"]),
    name=st.one_of(FOREIGN_NAMES, st.sampled_from(["127.0.0.1", "localhost", "[::1]"])),
    other_port=st.integers(1, 65535),
    site=st.sampled_from([None, "cross-site", "same-site"]),
    path=PATHS,
)
def test_a_page_on_another_origin_gets_403_and_changes_nothing(serve, scheme, name, other_port, site, path):
    port, db, forwarded = serve
    page = f"{scheme}://{name}:{other_port}"
    if page == f"http://127.0.0.1:{port}":
        page = "null"  # a sandboxed frame or a file: page
    headers = {"content-type": "application/json", "origin": page}
    if site:
        headers["sec-fetch-site"] = site
    r = _unchanged(lambda: _post(port, path, _body(path), headers), db, forwarded)
    assert r.status_code == 403 and "cross-origin" in r.json()["error"]


@SETTINGS
@given(site=st.sampled_from(["cross-site", "same-site"]), mode=st.sampled_from(["no-cors", "cors"]), path=PATHS)
def test_fetch_metadata_alone_refuses_a_cross_site_request(serve, site, mode, path):
    """A browser that sends ``Sec-Fetch-Site`` without ``Origin`` (a no-cors GET or an old POST): refused."""
    port, db, forwarded = serve
    headers = {"content-type": "application/json", "sec-fetch-site": site, "sec-fetch-mode": mode}
    r = _unchanged(lambda: _post(port, path, _body(path), headers), db, forwarded)
    assert r.status_code == 403
    r = _http(
        "GET", f"http://127.0.0.1:{port}/v1/memory/stats", headers={"sec-fetch-site": site, "sec-fetch-mode": mode}
    )
    assert r.status_code == 403


@SETTINGS
@given(content_type=SIMPLE_TYPES, path=PATHS)
def test_a_cors_simple_post_gets_415_and_changes_nothing(serve, content_type, path):
    """No Origin (a browser that omits it, a form, a Blob body): the JSON endpoints need a JSON content type."""
    port, db, forwarded = serve
    headers = {} if content_type is None else {"content-type": content_type}
    r = _unchanged(lambda: _post(port, path, _body(path), headers), db, forwarded)
    assert r.status_code == 415 and "application/json" in r.json()["error"]


def test_clients_and_same_origin_pages_are_served(serve):
    """The control: an SDK (no Origin, no Sec-Fetch-*), a same-origin page, a link followed from another site."""
    port, db, forwarded = serve
    json_type = {"content-type": "application/json"}
    before = _count(db)
    r = _post(port, "/v1/memory/archive", json.dumps(ARCHIVE).encode(), json_type)
    assert r.status_code == 200 and _count(db) == before + 1
    r = _post(
        port, "/v1/chat/completions", json.dumps(CHAT).encode(), {"content-type": "application/json; charset=utf-8"}
    )
    assert r.status_code == 200 and forwarded and b"heron canary" in forwarded[-1]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", "127.0.0.1"):
        same = {**json_type, "host": host, "origin": f"http://{host}", "sec-fetch-site": "same-origin"}
        assert _post(port, "/v1/memory/search", b'{"query": "canary port"}', same).status_code == 200, host
    link = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate", "sec-fetch-dest": "document"}
    assert _http("GET", f"http://127.0.0.1:{port}/v1/memory/stats", headers=link).status_code == 200
    assert (
        _post(port, "/v1/memory/search", b'{"query": "x"}', {"content-type": "application/vnd.api+json"}).status_code
        == 200
    )


def test_with_a_token_the_host_is_not_checked_but_cross_site_still_is(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    port, server, thread = start_server(build_app(tmp_path / "t.db", token="s3cret"))
    try:
        auth = {"authorization": "Bearer s3cret", "content-type": "application/json"}
        body = json.dumps(ARCHIVE).encode()
        assert _post(port, "/v1/memory/archive", body, {**auth, "host": "lantern.lan:8765"}).status_code == 200
        assert _post(port, "/v1/memory/archive", body, {**auth, "origin": "http://evil.example"}).status_code == 403
        assert _post(port, "/v1/memory/archive", body, {"host": "lantern.lan"}).status_code == 415
    finally:
        server.should_exit = True
        thread.join(timeout=10)


# ---------------------------------------------------------------------------------------------- the inspector
@pytest.fixture(scope="module")
def inspector(tmp_path_factory):
    from lantern.integrations.ui import build_app as build_ui

    db = tmp_path_factory.mktemp("origin-ui") / "ui.db"
    with Lantern(db) as lt:
        ids = lt.archive([{"role": "user", "content": "The ibis canary listens on port 8533."}], session="s").entry_ids
    port, server, thread = start_server(build_ui(db))
    yield port, db, ids[0]
    server.should_exit = True
    thread.join(timeout=10)


@SETTINGS
@given(name=FOREIGN_NAMES)
def test_the_inspector_refuses_a_rebinding_host(inspector, name):
    port, _, _ = inspector
    r = _http("GET", f"http://127.0.0.1:{port}/", headers={"host": f"{name}:{port}"})
    assert r.status_code == 421 and r.headers["content-security-policy"] == CSP


@SETTINGS
@given(
    page=st.one_of(FOREIGN_NAMES.map(lambda n: f"http://{n}"), st.just("null")),
    site=st.sampled_from(["cross-site", "same-site"]),
)
def test_the_inspector_refuses_a_cross_site_forget_and_fetch(inspector, page, site):
    port, db, entry = inspector
    r = _http(
        "POST",
        f"http://127.0.0.1:{port}/forget",
        content=f"entry={entry}&csrf=x".encode(),
        headers={"content-type": "application/x-www-form-urlencoded", "origin": page, "sec-fetch-site": site},
    )
    assert r.status_code == 403
    r = _http(
        "GET",
        f"http://127.0.0.1:{port}/session?s=s",
        headers={"origin": page, "sec-fetch-site": site, "sec-fetch-mode": "cors"},
    )
    assert r.status_code == 403 and "8533" not in r.text
    assert _count(db) == 1
    link = {"sec-fetch-site": site, "sec-fetch-mode": "navigate"}
    assert _http("GET", f"http://127.0.0.1:{port}/session?s=s", headers=link).status_code == 200


def test_the_rule_is_one_function():
    """Both servers refuse with ``origin.refusal``; spot-check its table."""
    json_path = lambda p: p.startswith("/v1/")  # noqa: E731
    ok = {"host": "127.0.0.1:8765", "content-type": "application/json"}
    assert origin.refusal("POST", "/v1/x", ok, "http", token=False, json_path=json_path) is None
    assert (
        origin.refusal("POST", "/v1/x", {**ok, "host": "a.example"}, "http", token=False, json_path=json_path)[0] == 421
    )
    assert origin.refusal("POST", "/v1/x", {**ok, "host": "a.example"}, "http", token=True, json_path=json_path) is None
    assert (
        origin.refusal("POST", "/v1/x", {**ok, "host": "10.0.0.2:8765"}, "http", token=False, json_path=json_path)
        is None
    )
    assert (
        origin.refusal(
            "POST", "/v1/x", {**ok, "origin": "http://127.0.0.1:8765"}, "http", token=False, json_path=json_path
        )
        is None
    )
    assert (
        origin.refusal(
            "POST", "/v1/x", {**ok, "origin": "http://127.0.0.1:9"}, "http", token=False, json_path=json_path
        )[0]
        == 403
    )
    assert origin.refusal("POST", "/form", {"host": "127.0.0.1"}, "http", token=False, json_path=json_path) is None


_NAMES = st.sampled_from(
    ["localhost", "127.0.0.1", "127.4.5.6", "10.0.0.2", "[::1]", "[::ffff:127.0.0.1]", "a.example"]
)
_PORTS = st.sampled_from(["", ":80", ":8765", ":"])
_TAILS = st.text(alphabet=st.sampled_from(list("@/.#?[]:%\\ ae1")), max_size=8)


@given(name=_NAMES, port=_PORTS, tail=_TAILS, case=st.booleans())
def test_a_host_value_is_a_host_and_an_optional_port_and_nothing_else(name, port, tail, case):
    """``origin.host_name`` parses ``Host`` strictly (RFC 9110 §7.2: uri-host [":" port]): the name back only when
    the value is exactly one, in any case, with an optional port; anything after it (``localhost:80@evil``,
    ``[::ffff:127.0.0.1].evil``) makes it no host, "" (before: the first accepted as ``localhost``, the second as
    ``::ffff:127.0.0.1``). And a value that is no host is refused without a token."""
    import re

    value = (name.upper() if case else name) + port + tail
    got = origin.host_name(value)
    host = rf"(\[{re.escape(got)}\]|{re.escape(got)})" if ":" in got else re.escape(got)  # IPv6 in brackets
    if got:  # the value is exactly that host and an optional port
        assert re.fullmatch(host + r"(:[0-9]*)?", value.strip().lower()), f"{value!r} read as {got!r}"
    else:
        assert tail != "" and origin.foreign_host(value, token=False)
    if tail == "":
        assert got == name.strip("[]")


@pytest.mark.parametrize(
    "value", ["localhost:80@evil", "[::ffff:127.0.0.1].evil", "127.0.0.1/x", "[127.0.0.1]", "localhost:80:80", "a b"]
)
def test_the_breakers_hosts_are_refused(value):
    assert origin.host_name(value) == "" and origin.foreign_host(value, token=False)
