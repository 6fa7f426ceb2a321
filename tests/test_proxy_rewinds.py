"""The proxy never deletes archived turns on a guess (issue 38, item 1). Generated client behaviour through the real
proxy app, the real SQLite store and the real embedder; only the upstream is a stand-in (an httpx mock transport
whose replies differ on every call, as a sampling LLM's do):

- ``continue``: the conversation goes on (the last reply and a new question);
- ``title``: a side request carrying the first exchange and a new instruction (a chat UI's "Generate a title");
- ``retry``: the same request again (an SDK retry, a double submit); the client keeps the last reply;
- ``edit``: the user edits an earlier question (a rewind), and the conversation goes on from the edit.

Properties, whatever the sequence: no archived text ever leaves the store; every question the client still holds
is in the session; after the conversation went on twice, no question is held by two of the session's entries (a
retry or a duplicate is archived once); nothing is injected (none of these is a compaction). Before: a title
request deleted every archived turn after the first exchange, and a retry stored the question again."""

from __future__ import annotations

import itertools
import json
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
from fastapi.testclient import TestClient  # noqa: E402

from lantern.integrations.proxy import build_app  # noqa: E402

SYSTEM = {"role": "system", "content": "You are a helpful coding assistant."}
TITLE = "Generate a short title for this conversation. Answer with the title only."
_sessions = itertools.count()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    """The proxy app over one store (each example its own session); the upstream an in-process mock."""
    tmp = tmp_path_factory.mktemp("rewinds")
    db = tmp / "p.db"
    sent: list[dict] = []
    calls = itertools.count()

    def upstream(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        last = body["messages"][-1]["content"]
        reply = f"Reply {next(calls)} to: {last}"  # a sampling model: never twice the same
        return httpx.Response(200, json={"choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}]})

    mp = pytest.MonkeyPatch()
    mp.setenv("HOME", str(tmp / "home"))
    app = build_app(db, upstream="http://upstream.invalid/v1", upstream_timeout=10.0)
    app.app.state.forwarder.client = httpx.AsyncClient(transport=httpx.MockTransport(upstream))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield client, db, sent
    mp.undo()


def _rows(db) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as c:
        return c.execute("SELECT session, text FROM entries ORDER BY id").fetchall()


ACTIONS = st.lists(
    st.one_of(
        st.just(("continue",)),
        st.just(("title",)),
        st.just(("retry",)),
        st.tuples(st.just("edit"), st.integers(1, 6)),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(exchanges=st.integers(2, 4), actions=ACTIONS)
def test_no_guess_deletes_or_duplicates_an_archived_turn(proxy, exchanges, actions):
    client, db, sent = proxy
    n = next(_sessions)
    session = f"chat-{n}"
    head = {"X-Lantern-Session": session}
    asked = itertools.count()

    def question() -> dict:
        return {"role": "user", "content": f"Question {next(asked)} of session {n}: which port for service {n}?"}

    def send(messages: list[dict]) -> dict:
        r = client.post("/v1/chat/completions", json={"model": "m", "messages": messages}, headers=head)
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["message"]

    conv = [SYSTEM, question()]
    reply = send(conv)
    for _ in range(exchanges - 1):
        conv += [reply, question()]
        reply = send(conv)
    ever: set[str] = {t for _, t in _rows(db)}
    sent.clear()
    for action in [*actions, ("continue",), ("continue",)]:
        if action[0] == "continue":
            conv += [reply, question()]
            reply = send(conv)
        elif action[0] == "title":
            send([*conv[:3], {"role": "user", "content": TITLE}])  # the side request; the client's reply is kept
        elif action[0] == "retry":
            reply = send(conv)
        else:  # edit question j (1 = the second question: the first exchange stays), then go on from there
            users = [i for i, m in enumerate(conv) if m["role"] == "user"]
            j = users[min(action[1], len(users) - 1)] if len(users) > 1 else None
            if j is not None:
                conv = [*conv[:j], {"role": "user", "content": conv[j]["content"] + " (edited: and which host?)"}]
                reply = send(conv)
        now = {t for _, t in _rows(db)}
        assert ever <= now, f"archived text left the store after {action}"
        ever = now
    rows = _rows(db)
    main = [t for s, t in rows if s == session]
    for m in conv:
        if m["role"] == "user":
            holders = [t for t in main if m["content"] in t]
            assert len(holders) == 1, (m["content"], len(holders), actions)
    assert not any("Recovered from Lantern" in str(m.get("content")) for body in sent for m in body["messages"]), (
        "a side request, retry or edit was taken for a compaction"
    )


def test_a_title_request_deletes_nothing_and_moves_only_itself_off_the_session(proxy):
    """The breaker's case: 5 archived exchanges, then a "Generate a title" request with the first exchange. Before:
    4 of 5 turns deleted (``--rewound skip``). Now: the 5 stay; once the conversation goes on, the title request's
    own turn is moved into ``SESSION/abandoned-ID`` (kept, not the session's history)."""
    client, db, _ = proxy
    head = {"X-Lantern-Session": "titled"}
    conv = [SYSTEM]
    for i in range(5):
        conv.append({"role": "user", "content": f"Step {i}: configure the heron service on port 74{i}0."})
        conv.append(client.post("/v1/chat/completions", json={"model": "m", "messages": conv}, headers=head).json())
        conv[-1] = conv[-1]["choices"][0]["message"]
    before = [t for s, t in _rows(db) if s == "titled"]
    assert len(before) == 6  # the system message, then the five exchanges
    client.post(
        "/v1/chat/completions",
        json={"model": "m", "messages": [*conv[:3], {"role": "user", "content": TITLE}]},
        headers=head,
    )
    assert [t for s, t in _rows(db) if s == "titled"][:6] == before
    for i in range(2):
        conv.append({"role": "user", "content": f"Next {i}: restart the heron service."})
        r = client.post("/v1/chat/completions", json={"model": "m", "messages": conv}, headers=head)
        conv.append(r.json()["choices"][0]["message"])
    rows = _rows(db)
    main = [t for s, t in rows if s == "titled"]
    assert main[:6] == before and len(main) == 8 and not any(TITLE in t for t in main)
    titles = [s for s, t in rows if TITLE in t and s.startswith("titled")]
    assert len(titles) == 1 and titles[0].startswith("titled/abandoned-")


def _proxy_app(db, sent: list[dict], calls):
    """A proxy over ``db`` with the mock upstream: each call a new run of ``lantern serve`` (a restart)."""

    def upstream(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        reply = f"Reply {next(calls)} to: {body['messages'][-1]['content']}"
        return httpx.Response(200, json={"choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}]})

    app = build_app(db, upstream="http://upstream.invalid/v1", upstream_timeout=10.0)
    app.app.state.forwarder.client = httpx.AsyncClient(transport=httpx.MockTransport(upstream))
    return TestClient(app, base_url="http://127.0.0.1")


@settings(max_examples=examples(6), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(exchanges=st.integers(3, 5), edit=st.integers(1, 2), restart_after_confirm=st.booleans())
def test_a_rewind_suggested_before_a_restart_is_settled_after_it(
    tmp_path_factory, exchanges, edit, restart_after_confirm
):
    """The user edits question ``edit`` (a rewind: the proxy sees the later turns left out), the proxy restarts,
    and the conversation goes on from the edit. The rewind is confirmed from the candidates the store kept: the
    rewound turns move into ``SESSION/abandoned-ID`` and nothing is injected. Before, the restarted proxy had
    forgotten the candidate and read the rewound turns, older than the new ones, as dropped by a compaction: it
    recovered them into the context they were edited out of. A second restart after the confirmation finds no
    candidate left (its turns have left the session)."""
    tmp = tmp_path_factory.mktemp("restart")
    db, sent, calls = tmp / "p.db", [], itertools.count()
    head = {"X-Lantern-Session": "s"}
    mp = pytest.MonkeyPatch()
    mp.setenv("HOME", str(tmp / "home"))
    try:
        conv = [SYSTEM]
        with _proxy_app(db, sent, calls) as client:

            def send(c: TestClient) -> None:
                r = c.post("/v1/chat/completions", json={"model": "m", "messages": conv}, headers=head)
                assert r.status_code == 200, r.text
                conv.append(r.json()["choices"][0]["message"])

            for i in range(exchanges):
                conv.append({"role": "user", "content": f"Step {i}: set the kestrel service to port 75{i}0."})
                send(client)
            users = [i for i, m in enumerate(conv) if m["role"] == "user"]
            rewound = [t for s, t in _rows(db) if s == "s"][edit + 1 :]  # the system turn, then one per step
            del conv[users[edit] :]
            conv.append({"role": "user", "content": f"Step {edit} again: use port 76{edit}0 instead."})
            send(client)  # the rewind's first request: a candidate only
        with _proxy_app(db, sent, calls) as client:  # restarted
            for k in range(2):
                conv.append({"role": "user", "content": f"Then {k}: restart the kestrel service."})
                send(client)
        if restart_after_confirm:
            with _proxy_app(db, sent, calls) as client:
                conv.append({"role": "user", "content": "Finally: check the kestrel logs."})
                send(client)
    finally:
        mp.undo()
    rows = _rows(db)
    main = [t for s, t in rows if s == "s"]
    moved = [t for s, t in rows if s.startswith("s/abandoned-")]
    assert sorted(moved) == sorted(rewound) and not any(t in main for t in rewound)
    assert not any("Recovered from Lantern" in str(m.get("content")) for body in sent for m in body["messages"])
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT count(*) FROM meta WHERE key LIKE 'rewinds %'").fetchone()[0] == 0


# ---------------------------------------------------------------------------------------------- side requests
# A chat UI's side requests on the conversation's session (issue 38, item 1, second run): each holds part of the
# conversation and a new instruction, is sent once or twice, and its reply is never built on.
SIDE_SHAPES = ("first", "first-question", "first-regenerated", "last", "whole")
INSTRUCTIONS = ("Generate a short title for this chat.", "Suggest 3 follow-up questions.", "Summarize in 5 words.")


def _side(shape: str, view: list[dict], instruction: str) -> list[dict]:
    """The side request of ``shape`` over the client's ``view`` (system message first)."""
    ask = {"role": "user", "content": instruction}
    if shape == "first":  # the first exchange
        return [*view[:3], ask]
    if shape == "first-question":  # the first question without its reply
        return [*view[:2], ask]
    if shape == "first-regenerated":  # the first exchange with another reply (a regenerate in another tab)
        return [*view[:2], {"role": "assistant", "content": f"Another answer to: {view[1]['content']}"}, ask]
    if shape == "last":
        return [view[0], *view[-2:], ask]
    return [*view, ask]


STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("continue")),
        st.tuples(st.just("retry")),
        st.tuples(st.just("duplicate")),
        st.tuples(st.just("side"), st.sampled_from(SIDE_SHAPES), st.sampled_from(INSTRUCTIONS), st.integers(1, 2)),
        st.tuples(st.just("compact"), st.booleans()),
        st.tuples(st.just("edit"), st.integers(0, 8)),
    ),
    min_size=1,
    max_size=10,
)


@pytest.fixture(scope="module")
def busy_proxy(tmp_path_factory):
    """The proxy app over one store; the upstream an async mock that holds a request marked ``X-Test-Pair`` until
    its twin arrives, so two copies of a request are both in flight (both detected before either is archived)."""
    import asyncio

    tmp = tmp_path_factory.mktemp("side")
    db = tmp / "p.db"
    calls = itertools.count()
    waiting: dict[str, int] = {}

    async def upstream(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        pair = request.headers.get("x-test-pair")
        if pair:
            waiting[pair] = waiting.get(pair, 0) + 1
            for _ in range(500):
                if waiting[pair] >= 2:
                    break
                await asyncio.sleep(0.01)
        reply = f"Reply {next(calls)} to: {body['messages'][-1]['content']}"
        return httpx.Response(200, json={"choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}]})

    mp = pytest.MonkeyPatch()
    mp.setenv("HOME", str(tmp / "home"))
    app = build_app(db, upstream="http://upstream.invalid/v1", upstream_timeout=10.0)
    app.app.state.forwarder.client = httpx.AsyncClient(transport=httpx.MockTransport(upstream))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield client, db
    mp.undo()


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(exchanges=st.integers(2, 5), steps=STEPS)
def test_only_a_rewind_the_client_goes_on_from_moves_turns_off_the_session(busy_proxy, exchanges, steps):
    """Generated client behaviour: the conversation goes on (``continue``); the last request is sent again and its
    new reply kept (``retry``, a regenerate); sent twice at once (``duplicate``); side requests of five shapes, once
    or twice; a compaction (the client sends a summary and the last exchange with its next question; recognised
    summary markup or not); an edit of a question of the client's view, and the conversation goes on from it.
    Properties: no exchange the client still holds, in its view or behind its summary, is anywhere but in the
    session; every exchange the client rewound away (edited or regenerated, then went on) has left the session for
    ``SESSION/abandoned-ID``; nothing archived ever leaves the store. Before: a side request sent twice (the first
    question alone, or the first exchange with another reply) confirmed its own rewind: every exchange after the
    first moved off the session, for good after a compaction."""
    import threading

    client, db = busy_proxy
    n = next(_sessions)
    session = f"side-{n}"
    asked = itertools.count()
    sent: list[list[dict]] = []

    def post(messages: list[dict], pair: str | None = None) -> dict:
        head = {"X-Lantern-Session": session, **({"X-Test-Pair": pair} if pair else {})}
        r = client.post("/v1/chat/completions", json={"model": "m", "messages": messages}, headers=head)
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["message"]

    def send(messages: list[dict]) -> dict:
        sent.append(messages)
        return post(messages)

    def question(what: str = "Question") -> dict:
        return {"role": "user", "content": f"{what} {next(asked)} of {session}: which port for service {n}?"}

    view = [SYSTEM]
    behind: list[tuple[str, str]] = []  # exchanges the client compacted: held as its summary
    rewound: list[tuple[str, str]] = []  # exchanges the client edited or regenerated away

    def exchanges_of(messages: list[dict]) -> list[tuple[str, str]]:
        return [
            (a["content"], b["content"])
            for a, b in zip(messages, messages[1:])
            if a["role"] == "user" and b["role"] == "assistant" and "Summary" not in a["content"]
        ]

    def go_on(messages: list[dict]) -> list[dict]:
        return [*messages, send(messages)]

    for _ in range(exchanges):
        view = go_on([*view, question()])
    ever = {t for _, t in _rows(db)}
    for step in [*steps, ("continue",), ("continue",)]:
        kind = step[0]
        if kind == "continue":
            view = go_on([*view, question()])
        elif kind == "retry":
            last = sent[-1]
            rewound += [x for x in exchanges_of(view) if x not in exchanges_of(last)]
            view = go_on(last)
        elif kind == "duplicate":
            request = [*view, question()]
            sent.append(request)
            pair = f"{session}-{len(sent)}"
            twin = threading.Thread(target=post, args=(request, pair))
            twin.start()
            mine = post(request, pair)
            twin.join()
            view = [*request, mine]
        elif kind == "side":
            _, shape, instruction, times = step
            for _ in range(times):
                post(_side(shape, view, instruction))
        elif kind == "compact":
            if len(view) < 5:
                continue
            behind += [x for x in exchanges_of(view[:-2])]
            text = f"Summary of the conversation so far: {len(behind)} services configured."
            summary = {"role": "system", "content": text} if step[1] else {"role": "user", "content": text[11:]}
            view = go_on([view[0], summary, *view[-2:], question()])
        else:  # edit a question of the view, then the conversation goes on from the edit
            users = [i for i, m in enumerate(view) if m["role"] == "user" and "Summary" not in m["content"]]
            j = users[step[1] % len(users)]
            rewound += [x for x in exchanges_of(view) if x not in exchanges_of(view[:j])]
            view = go_on([*view[:j], question("Edited question")])
            view = go_on([*view, question()])
        now = {t for _, t in _rows(db)}
        assert ever <= now, f"archived text left the store after {step}"
        ever = now
    rows = _rows(db)
    held = [*behind, *exchanges_of(view)]
    for u, a in held:
        places = {s for s, t in rows if u in t and a in t}
        assert places == {session}, (u, places, steps)
    if any(step[0] == "side" for step in steps):
        # a side request sent twice may look like a compaction (a compacted client regenerating its last reply
        # sends the same shape): the turns it seems to drop stay in the session, and a later rewind of them is
        # missed (integrations.md, rewinds)
        return
    for u, a in rewound:
        if (u, a) in held or not any(u in t and a in t for t in ever):
            continue  # held again, or never archived (a retry's reply is archived once a request holds it)
        places = {s for s, t in rows if u in t and a in t}
        assert places and all(s.startswith(f"{session}/abandoned-") for s in places), (u, a, places, steps)


def test_after_a_compaction_side_requests_sent_twice_leave_every_turn_recoverable(busy_proxy):
    """The breaker's case (break38, item 1): six exchanges, a compaction that keeps the last one, then a title
    request holding the first question without its reply, sent twice, and the conversation goes on. Before: the
    second title request confirmed the first one's rewind; all six exchanges moved to ``SESSION/abandoned-ID`` and
    the compacted client never got them back. Now: they stay in the session, recoverable."""
    client, db = busy_proxy
    session = "compacted-side"
    sent: list[dict] = []

    def send(messages: list[dict]) -> dict:
        sent.append(messages)
        r = client.post(
            "/v1/chat/completions", json={"model": "m", "messages": messages}, headers={"X-Lantern-Session": session}
        )
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["message"]

    conv = [SYSTEM]
    for i in range(6):
        conv.append({"role": "user", "content": f"Question {i}: the billing service {i} listens on port {5400 + i}."})
        conv.append(send(conv))
    summary = {"role": "system", "content": "Summary of the conversation so far: we configured billing services."}
    compacted = [SYSTEM, summary, *conv[-2:], {"role": "user", "content": "Next: what about the cache?"}]
    compacted.append(send(compacted))
    title = [SYSTEM, conv[1], {"role": "user", "content": TITLE}]
    send(title)
    send(title)
    for k in range(2):
        compacted += [{"role": "user", "content": f"Continue {k}."}]
        compacted.append(send(compacted))
    rows = _rows(db)
    for i in range(6):
        places = {s for s, t in rows if f"listens on port {5400 + i}." in t and "assistant:" in t}
        assert places == {session}, (i, places)
    moved = [t for s, t in rows if s.startswith(f"{session}/abandoned-")]
    assert len(moved) <= 2  # only the title request's own turns (its lone question, its instruction and reply)
    query = {"query": "Which port does billing service 2 listen on?", "session": session}
    r = client.post("/v1/memory/recover", json=query)
    assert r.status_code == 200 and "port 5402" in r.json()["text"], r.text
