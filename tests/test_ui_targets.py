"""The inspector's forms post back opaque ids, never names (issue 38, item 6): confirming the forget of a session
named ``x\\ry`` deleted ``x\\ny``, because a browser rewrites names in form fields. Names are generated (CR, LF,
tabs, NUL, CJK, slashes, quotes, markup); each page's form is submitted as a browser submits it: the HTML input
stream's newline normalization (CR and CRLF become LF), NUL in an attribute becoming U+FFFD, a text input's value
losing its line breaks, and the urlencoded form's newline normalization to CRLF (HTML standard, "preprocessing the
input stream", "value sanitization algorithm", "converting an entry list to a list of name-value pairs"). The
session forgotten is exactly the one confirmed; the scope explained is exactly the one shown."""

from __future__ import annotations

import html
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples

pytest.importorskip("fastapi")
pytest.importorskip("jinja2")
from fastapi.testclient import TestClient  # noqa: E402

from lantern import Lantern  # noqa: E402
from lantern.integrations.ui import build_app  # noqa: E402
from lantern.integrations.ui.views import scope_id, scope_of  # noqa: E402
from lantern.scope import clean_name  # noqa: E402

ORIGIN = "http://127.0.0.1"
NAMES = st.text(alphabet=st.sampled_from(list("xy\r\n\t\x00 /é中\"'<>&")), min_size=1, max_size=8).map(clean_name)
_INPUT = re.compile(r"<input\b([^>]*)>", re.S)
_ATTR = re.compile(r'(\w+)="([^"]*)"', re.S)


def browser_submit(page: str, action: str) -> list[tuple[str, str]]:
    """The name-value pairs a browser sends for the form of ``page`` whose action is ``action``."""
    page = page.replace("\r\n", "\n").replace("\r", "\n")  # preprocessing the input stream
    form = page[page.index(f'action="{action}"') :]
    form = form[: form.index("</form>")]
    pairs = []
    for attrs in _INPUT.findall(form):
        a = {k: html.unescape(v).replace("\x00", "\ufffd") for k, v in _ATTR.findall(attrs)}
        if "name" not in a:
            continue
        value = a.get("value", "")
        if a.get("type", "text") in ("text", "search"):
            value = value.replace("\n", "").replace("\r", "")  # value sanitization: strip newlines
        pairs.append((a["name"], value.replace("\n", "\r\n")))  # the form data's newline normalization
    return pairs


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    path = tmp_path_factory.mktemp("targets") / "t.db"
    with Lantern(path):
        pass
    with TestClient(build_app(path), base_url=ORIGIN) as c:
        yield c, path


def _sessions(path, user: str) -> dict[str, int]:
    with Lantern(path) as lt:
        rows = lt.store.db.execute("SELECT session, count(*) FROM entries WHERE user_id = ? GROUP BY session", (user,))
        return dict(rows.fetchall())


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(session=NAMES, user=NAMES | st.just(""), n=st.integers(0, 10**6))
def test_forget_confirms_and_deletes_exactly_the_session_shown(client, session, user, n):
    c, path = client
    # the session, and the name a browser would turn it into: both archived, only the first is forgotten
    marker = f"turn {n} of {session!r}"
    with Lantern(path) as lt:
        session = lt.archive([{"role": "user", "content": marker}], session=session, user=user).session  # as stored
        twin = clean_name(session.replace("\r", "\n").replace("\x00", "\ufffd"))
        if twin != session:
            lt.archive([{"role": "user", "content": "the twin " + marker}], session=twin, user=user)
    before = _sessions(path, user)
    page = c.get("/forget", params={"s": session, "user": user})
    assert page.status_code == 200, page.text
    data = browser_submit(page.text, "/forget")
    r = c.post("/forget", content=_urlencode(data), headers=_form_headers(), follow_redirects=False)
    assert r.status_code == 303, r.text
    after = _sessions(path, user)
    assert session not in after
    gone_too = {s for s in before if s not in after and s != session and not s.startswith(session + "/")}
    assert not gone_too, f"forgetting {session!r} deleted {gone_too!r}"


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(session=NAMES, user=NAMES | st.just(""))
def test_explain_and_facts_forms_keep_the_scope_they_show(client, session, user):
    c, _ = client
    page = c.get("/explain", params={"s": session, "user": user})
    data = dict(browser_submit(page.text, "/explain"))
    assert scope_of(data["scope"]) == (session, user) and "s" not in data and "user" not in data
    again = c.get("/explain?" + _urlencode([*data.items(), ("q", "port")]).decode())
    assert again.status_code == 200
    assert scope_of(dict(browser_submit(again.text, "/explain"))["scope"]) == (session, user)
    if user:
        page = c.get("/facts", params={"user": user})
        assert scope_of(dict(browser_submit(page.text, "/facts"))["scope"]) == (None, user)


@given(session=st.text() | st.none(), user=st.text())
def test_scope_ids_are_opaque_and_lossless(session, user):
    sid = scope_id(session, user)
    assert re.fullmatch(r"[A-Za-z0-9_-]*", sid) and scope_of(sid) == (session, user)


@pytest.mark.parametrize("bad", ["", "!!", "bm90IGpzb24", "WzEsMl0", "WyJhIl0"])
def test_a_forged_or_damaged_id_is_a_clear_400(client, bad):
    c, _ = client
    csrf = c.app.state.ui.csrf  # the page's token: only the id is wrong
    r = c.post("/forget", content=_urlencode([("csrf", csrf), ("scope", bad)]), headers=_form_headers())
    assert r.status_code == 400


def _urlencode(pairs) -> bytes:
    from urllib.parse import urlencode

    return urlencode(list(pairs)).encode()


def _form_headers() -> dict[str, str]:
    return {"content-type": "application/x-www-form-urlencoded", "origin": ORIGIN}
