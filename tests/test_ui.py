"""The inspector (``lantern ui``, integrations/ui) over HTTP: every page, its security headers, escaping of archived
text, forget behind a CSRF token and a same-origin check, the loopback / token rule. The real app (TestClient) over
a real SQLite file with the fake embedder (tests/conftest.py); the browser tests are in test_ui_browser.py."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("jinja2")
from fastapi.testclient import TestClient  # noqa: E402

from lantern import Lantern  # noqa: E402
from lantern.compaction import detect  # noqa: E402
from lantern.integrations.ui import build_app  # noqa: E402
from lantern.integrations.ui.app import CSP  # noqa: E402

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
CHINESE = "部署端口是多少？预发布环境的端口是 8443，数据库在 10.0.3.7 上。"
LONG_TOKEN = "sha256:" + "ab12" * 60
ORIGIN = "http://127.0.0.1"


def conversation() -> list[dict]:
    msgs = [
        {"role": "user", "content": "Start postgres for the billing service."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"cmd": "docker run -p 5433:5432 postgres:16"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "listening on 127.0.0.1:5433\n" + "log line\n" * 40},
        {"role": "user", "content": f"Keep this snippet verbatim: {SCRIPT} and {IMG}"},
        {"role": "assistant", "content": f"Stored it. Also the image digest {LONG_TOKEN}."},
        {"role": "user", "content": CHINESE},
        {"role": "assistant", "content": "好的，端口 8443 已记录。We switched the database to port 5434 now."},
    ]
    for i in range(6):
        msgs += [
            {"role": "user", "content": f"Refactor module number {i} of the invoice renderer."},
            {"role": "assistant", "content": f"Refactored renderer module {i}; all {10 + i} tests pass."},
        ]
    return msgs


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("ui") / "ui.db"
    with Lantern(path) as lt:
        msgs = conversation()
        lt.archive(msgs, session="billing")
        lt.archive([{"role": "user", "content": "alice's note: the cron runs at 02:00"}], session="notes", user="alice")
        summary = {
            "role": "system",
            "content": "This session is being continued from a previous conversation that "
            "ran out of context. Summary: postgres set up, renderer refactored.",
        }
        live = [summary, *msgs[-4:], {"role": "user", "content": "Which port does the billing database listen on?"}]
        detect(lt, "billing", live).recover(lt, budget=3000)
    return path


@pytest.fixture(scope="module")
def client(db):
    with TestClient(build_app(db), base_url=ORIGIN) as c:
        yield c


PAGES = [
    "/",
    "/?q=postgres",
    "/?q=端口",
    "/session?s=billing",
    "/session?s=notes&user=alice",
    "/events",
    "/event/1",
    "/explain",
    "/explain?q=which+port+does+postgres+use",
    "/explain?event=1",
    "/explain?q=alert&all=1",
    "/facts",
    "/facts?as_of=2020-01-01T00:00",
    "/stats",
    "/forget?s=billing",
    "/static/ui.css",
]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_is_served_with_the_security_headers(client, path):
    r = client.get(path)
    assert r.status_code == 200, r.text[:2000]
    assert r.headers["content-security-policy"] == CSP
    assert "script-src 'none'" in CSP and "default-src 'none'" in CSP and "frame-ancestors 'none'" in CSP
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["x-frame-options"] == "DENY"
    assert r.headers["cache-control"] == "no-store"
    if path.startswith("/static"):
        assert r.headers["content-type"].startswith("text/css")
        assert "WenQuanYi" in r.text and "overflow-wrap: anywhere" in r.text
        return
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    tags, attributes = _markup(r.text)
    assert "script" not in tags and "iframe" not in tags  # no script at all, archived or ours
    assert not [a for a, _ in attributes if a.startswith("on")]  # nor an event handler
    links = [v for a, v in attributes if a in ("src", "href", "action")]
    assert links and all(v.startswith(("/", "#")) for v in links), links  # nothing from another origin


def _markup(text: str) -> tuple[set[str], list[tuple[str, str]]]:
    """The element names and the (attribute, value) pairs of an HTML page, as a browser's parser reads them."""
    from html.parser import HTMLParser

    tags, attributes = set(), []

    class Reader(HTMLParser):
        def handle_starttag(self, tag, attrs):
            tags.add(tag)
            attributes.extend((a, v or "") for a, v in attrs)

    Reader().feed(text)
    return tags, attributes


def test_archived_markup_is_shown_as_text(client):
    for path, params in (
        ("/session", {"s": "billing"}),
        ("/explain", {"q": "snippet verbatim alert", "all": 1}),
        ("/", {"q": f"{SCRIPT} and {IMG}"}),
    ):  # the search box keeps the query, escaped
        text = client.get(path, params=params).text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text, path
        assert "&lt;img src=x onerror=alert(1)&gt;" in text, path
        assert SCRIPT not in text and IMG not in text
    errors = client.get("/session", params={"s": SCRIPT}).text  # a name in an error page, escaped too
    assert SCRIPT not in errors and "&lt;script&gt;" in errors


def test_chinese_and_long_tokens_render_as_utf8(client):
    r = client.get("/session?s=billing")
    assert CHINESE in r.content.decode("utf-8") and "好的，端口 8443 已记录。" in r.text
    assert LONG_TOKEN in r.text
    assert '<meta charset="utf-8">' in r.text
    assert "端口" in client.get("/", params={"q": "端口"}).text  # searchable by Chinese text


def test_the_timeline_shows_turn_labels_folded_output_and_the_compaction(client, db):
    text = client.get("/session?s=billing").text
    with Lantern(db) as lt:
        (ev,) = lt.events("billing")
    assert "turn 0" in text and "importance" in text and "confidence" in text
    assert "⚙ bash" in text  # the tool call
    assert "<details><summary>" in text and "41 lines" in text  # the long tool result is folded
    assert f'id="ev{ev.id}"' in text and f"Compaction #{ev.id}" in text
    for i in ev.lost:
        assert f'id="e{i}"' in text
    assert ev.recovered and text.count(f"lost in #{ev.id} · recovered") == len(ev.recovered)
    assert text.count(f"lost in #{ev.id} · not recovered") == len(ev.not_recovered)
    page = client.get(f"/event/{ev.id}").text
    assert page.count("✓ recovered") == len(ev.recovered) and page.count("✗ not recovered") == len(ev.not_recovered)
    assert f"{len(ev.injected)} entries" in page


def test_the_compaction_page_shows_what_the_summary_lost_by_type_each_traced_to_its_turn(client, db):
    """The loss report of the event (issue 34 item 3): counts by type, the specifics that came back and the best
    ones cut, each linking to the turn of the session it was seen in; the receipt's latency."""
    import html

    with Lantern(db) as lt:
        (ev,) = lt.events("billing")
    assert ev.loss and ev.loss["lost"] > 0 and ev.latency_ms is not None
    page = client.get(f"/event/{ev.id}").text
    assert f"{ev.loss['lost']} specifics the archived turns hold" in page and " ms</dd>" in page
    for kind, row in ev.loss["by_type"].items():
        assert f"<tr><td>{kind}</td><td>{row['lost']}</td><td>{row['packed']}</td></tr>" in page
    shown = ev.loss["items"] + ev.loss["cut"]
    assert shown
    for item in shown:
        link = f'<a href="/session?s=billing&amp;user=#e{item["entry"]}">turn {item["turn"]}</a>'
        assert f"<code>{html.escape(item['value'])}</code> · {link}" in page
    text = client.get("/session?s=billing").text
    assert all(f'id="e{item["entry"]}"' in text for item in shown)  # each traceable: the turn is on the timeline
    listing = client.get("/events").text
    assert f"{ev.loss['lost']} / {ev.loss['packed']}" in listing


def test_explain_shows_ranks_rrf_mmr_verdicts_and_the_block(client, db):
    text = client.get("/explain", params={"q": "which port does the billing database listen on", "s": "billing"}).text
    assert 'class="ranks"' in text and "semantic" in text and "fulltext" in text
    assert "RRF" in text and "packed" in text and "The block, exactly as it would be injected" in text
    with Lantern(db) as lt:
        rec = lt.explain("which port does the billing database listen on", session="billing")
    block = re.search(r'<pre class="block">(.*?)</pre>', text, re.S).group(1)
    import html

    assert html.unescape(block) == rec.text


def test_facts_and_stats_draw_server_side_svg(client):
    facts = client.get("/facts").text
    assert "<svg" in facts and "fact versions on a time axis" in facts
    stats = client.get("/stats").text
    assert stats.count("<svg") >= 3 and "entries per day" in stats and "recoveries per day" in stats
    assert "Bytes per table" in stats


def test_the_stats_page_lists_bytes_per_table_as_a_table(client, db):
    """The store's ``table_bytes`` rows, each a table row with its exact bytes and its share of the file, largest
    first; the file's own size below."""
    import html

    page = client.get("/stats").text
    with Lantern(db) as lt:
        sizes = lt.store.table_bytes()
        file_bytes = lt.stats()["database_bytes"]
    assert sizes and any(name == "embeddings" for name, _ in sizes)
    table = page[page.index('<table class="bytes">') : page.index("</table>", page.index('<table class="bytes">'))]
    rows = re.findall(r'<tr><td class="name">(.*?)</td><td class="num">([\d,]+)</td>', table)
    assert [(html.unescape(n), int(b.replace(",", ""))) for n, b in rows] == [(n, int(b)) for n, b in sizes]
    shares = [float(x) for x in re.findall(r'<td class="num">([\d.]+) %</td>', table)]
    assert len(shares) == len(sizes) and abs(sum(shares) - 100 * sum(b for _, b in sizes) / file_bytes) < 0.1 * len(
        sizes
    )
    assert f"{file_bytes:,}" in table


def _forget_form(client, **params) -> dict:
    page = client.get("/forget", params=params).text
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', page))
    assert fields["csrf"]
    return fields


def test_forget_needs_the_csrf_token_and_the_same_origin(tmp_path):
    path = tmp_path / "f.db"
    with Lantern(path) as lt:
        ids = lt.archive(conversation(), session="billing").entry_ids
    with TestClient(build_app(path), base_url=ORIGIN) as c:
        fields = _forget_form(c, entry=ids[1])
        assert fields["entry"] == str(ids[1])
        bad = [
            ({**fields, "csrf": "nope"}, {"origin": ORIGIN}),
            ({k: v for k, v in fields.items() if k != "csrf"}, {"origin": ORIGIN}),
            (fields, {"origin": "http://evil.example"}),
            (fields, {}),  # neither Origin nor Referer
            (fields, {"referer": "http://evil.example/forget"}),
        ]
        for data, headers in bad:
            r = c.post("/forget", data=data, headers=headers, follow_redirects=False)
            assert r.status_code == 403, (data, headers)
        assert c.get("/forget", params={"entry": ids[1]}).status_code == 200  # still there
        assert c.get("/forget", params={"entry": ids[1]}).status_code == 200
        r = c.post(
            "/forget", data=fields, headers={"referer": f"{ORIGIN}/forget?entry={ids[1]}"}, follow_redirects=False
        )
        assert r.status_code == 303 and r.headers["location"] == "/?forgotten=1"
        assert "1 entry forgotten" in c.get(r.headers["location"]).text
        assert c.get("/forget", params={"entry": ids[1]}).status_code == 404
        r = c.post("/forget", data=_forget_form(c, s="billing"), headers={"origin": ORIGIN}, follow_redirects=False)
        assert r.headers["location"] == f"/?forgotten={len(ids) - 1}"
    with Lantern(path) as lt:
        assert lt.stats()["entries"] == 0
        assert b"invoice renderer" not in path.read_bytes()  # forgotten as the CLI forgets: vacuumed


def test_without_a_token_only_loopback_host_names_are_served(db):
    with TestClient(build_app(db), base_url="http://attacker.example") as c:  # a DNS-rebinding page
        r = c.get("/")
        assert r.status_code == 421 and "loopback" in r.text and r.headers["content-security-policy"] == CSP
    for host in ("http://localhost:8766", "http://[::1]:8766", "http://127.0.0.1:8766"):
        with TestClient(build_app(db), base_url=host) as c:
            assert c.get("/").status_code == 200, host


def test_a_token_is_required_of_every_request(db):
    token = "s3cret-token"
    with TestClient(build_app(db, token=token), base_url="http://192.0.2.10:8766") as c:
        r = c.get("/session?s=billing")
        assert r.status_code == 401 and "needs its token" in r.text and "postgres" not in r.text
        assert c.get("/?token=wrong").status_code == 401
        assert c.get("/static/ui.css").status_code == 200
        r = c.get("/session?s=billing&token=" + token, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/session?s=billing"
        assert "httponly" in r.headers["set-cookie"].lower() and "samesite=strict" in r.headers["set-cookie"].lower()
        assert c.get("/session?s=billing").status_code == 200  # the cookie now
    with TestClient(build_app(db, token=token), base_url="http://192.0.2.10:8766") as c:
        assert c.get("/", headers={"authorization": f"Bearer {token}"}).status_code == 200
        r = c.post(
            "/login", data={"token": token}, headers={"origin": "http://192.0.2.10:8766"}, follow_redirects=False
        )
        assert r.status_code == 303 and c.get("/").status_code == 200


def test_lantern_ui_refuses_another_interface_without_a_token(db):
    r = subprocess.run(
        [sys.executable, "-m", "lantern.cli", "--db", str(db), "ui", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode != 0 and "needs --token" in r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "lantern.cli", "--db", str(db.parent / "missing.db"), "ui"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode != 0 and "no database" in r.stderr and not (db.parent / "missing.db").exists()


@pytest.mark.parametrize(
    "path, status",
    [
        ("/event/abc", 400),
        ("/?forgotten=x", 400),
        ("/nowhere", 404),
        ("/event/999", 404),
        ("/session?s=nope", 404),
        ("/forget", 400),
    ],
)
def test_bad_requests_get_an_html_error_page(client, path, status):
    r = client.get(path)
    assert r.status_code == status and r.headers["content-type"] == "text/html; charset=utf-8"
    assert r.headers["content-security-policy"] == CSP and "Back to the sessions" in r.text


def test_is_loopback():
    from lantern.integrations.service import is_loopback

    assert all(map(is_loopback, ["127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2", "LOCALHOST"]))
    assert not any(map(is_loopback, ["0.0.0.0", "192.168.1.2", "example.com", "", "::"]))
