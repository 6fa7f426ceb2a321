"""The chat-completions proxy against a hostile upstream and a client that walks away (breaker findings): a real
upstream (FastAPI under uvicorn in a thread) and the real proxy app under uvicorn in a thread, over real sockets,
a real SQLite file and the fake embedder (tests/conftest.py)."""

from __future__ import annotations

import asyncio
import gzip
import json
import sqlite3
import struct
import threading
import time
import tracemalloc
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")
from fastapi import FastAPI, Request  # noqa: E402
from fastapi.responses import Response, StreamingResponse  # noqa: E402

from lantern.integrations.forward import MAX_REPLY_BYTES  # noqa: E402
from lantern.integrations.proxy import build_app  # noqa: E402
from lantern.integrations.sse import _SSEEvents, _SSEText  # noqa: E402
from serving import start_server  # noqa: E402


def _chunk(text: str) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}).encode() + b"\n\n"


def _gzip_bomb(mib: int) -> bytes:
    """A valid gzip body that inflates to ``mib`` MiB of zeros: one deflate block of 1 MiB after a full flush
    repeated (each such block is the same bytes), an empty final block, and the trailer's CRC and size."""
    zeros = bytes(1 << 20)
    c = zlib.compressobj(1, zlib.DEFLATED, 31)
    first = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    again = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(mib):
        crc = zlib.crc32(zeros, crc)
    return first + again * (mib - 1) + b"\x03\x00" + struct.pack("<II", crc, (mib << 20) & 0xFFFFFFFF)


_BOMB = _gzip_bomb(1024)
_BOMB_TWICE = gzip.compress(_BOMB, 9)  # "Content-Encoding: gzip, gzip": a few KB whose second layer is the bomb


def _layered(data: bytes, n: int) -> bytes:
    """``data`` gzipped ``n`` times (``Content-Encoding`` of ``n`` gzip layers): 1,100 layers are ~25 KB."""
    for _ in range(n):
        data = gzip.compress(data, 1)
    return data


_LAYERS = 1100  # the breaker's answer (issue 38): one nested generator per layer overflowed the stack


def _upstream_app() -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = json.loads(await request.body())

        async def slow():  # a long answer: the client stops reading after the first piece
            yield _chunk("The canary lives on port 7419. ")
            for i in range(300):
                await asyncio.sleep(0.05)
                yield _chunk(f"more {i} ")

        async def no_newline():  # not SSE at all: 64 MiB without a single newline
            for _ in range(64):
                yield b"x" * (1 << 20)

        if body["model"] == "bomb":  # 4.6 MB of gzip that inflates to 1 GiB
            media = "text/event-stream" if body.get("stream") else "application/json"
            return Response(_BOMB, media_type=media, headers={"content-encoding": "gzip"})
        if body["model"] == "bomb-twice":  # the same bomb gzipped again: a few KB on the wire
            media = "text/event-stream" if body.get("stream") else "application/json"
            return Response(_BOMB_TWICE, media_type=media, headers={"content-encoding": "gzip, gzip"})
        if body["model"] == "layers":  # a valid answer under 1,100 stacked gzip layers
            answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]}
            return Response(
                _layered(json.dumps(answer).encode(), _LAYERS),
                media_type="text/event-stream" if body.get("stream") else "application/json",
                headers={"content-encoding": ", ".join(["gzip"] * _LAYERS)},
            )
        gen = {"slow": slow, "nonl": no_newline}[body["model"]]
        return StreamingResponse(gen(), media_type="text/event-stream")

    return app


def _serve(app) -> tuple[str, uvicorn.Server, threading.Thread]:
    port, server, thread = start_server(app, wait_s=15)
    return f"http://127.0.0.1:{port}/v1", server, thread


@pytest.fixture
def live_proxy(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    up_url, up_server, up_thread = _serve(_upstream_app())
    url, server, thread = _serve(build_app(tmp_path / "p.db", upstream=up_url, upstream_timeout=30.0))
    yield url, tmp_path / "p.db"
    for s, t in ((server, thread), (up_server, up_thread)):
        s.should_exit = True
        t.join(timeout=10)


def _texts(db, session: str) -> list[str]:
    if not db.exists():
        return []
    with sqlite3.connect(db) as c:
        return [t for (t,) in c.execute("SELECT text FROM entries WHERE session = ?", (session,))]


def test_client_disconnect_mid_stream_still_archives_the_turn(live_proxy):
    """A user pressing "stop generating": the client closes the stream after the first piece. The request's turn
    and the part of the reply that was relayed are archived anyway (before: nothing at all was archived, the
    archive in the relay's ``finally`` was cancelled with the response)."""
    url, db = live_proxy
    payload = {
        "model": "slow",
        "stream": True,
        "messages": [{"role": "user", "content": "Where does the heron canary listen?"}],
    }
    with httpx.stream(
        "POST", url + "/chat/completions", json=payload, headers={"X-Lantern-Session": "stop"}, timeout=30
    ) as r:
        assert r.status_code == 200
        for piece in r.iter_raw():
            if b"7419" in piece:
                break  # the client walks away mid-stream
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not _texts(db, "stop"):
        time.sleep(0.2)
    texts = _texts(db, "stop")
    assert texts, "nothing archived after the client disconnected"
    assert "heron canary" in texts[0] and "port 7419" in texts[0]


def test_stream_without_newlines_is_relayed_at_full_speed(live_proxy):
    """An upstream that streams 64 MiB with no newline (not SSE, or one giant event): the proxy's SSE parser
    buffered it with ``bytes +=`` and re-scanned the whole buffer per chunk, quadratic and on the event loop
    (200 MB took over a minute and stalled every other request). Now it is relayed unchanged in seconds."""
    url, db = live_proxy
    payload = {"model": "nonl", "stream": True, "messages": [{"role": "user", "content": "Dump the blob."}]}
    start = time.monotonic()
    size = 0
    with httpx.stream("POST", url + "/chat/completions", json=payload, timeout=60) as r:
        for piece in r.iter_raw():
            size += len(piece)
    assert size == 64 << 20
    assert time.monotonic() - start < 20


def test_sse_parser_buffers_linearly_and_caps_a_line():
    sse = _SSEEvents()
    for _ in range(200):
        assert sse.events(b"y" * (1 << 20)) == []
    assert len(sse.buffer) <= _SSEEvents.MAX_LINE_BYTES  # a line over the cap is dropped, not kept growing
    assert sse.events(b"\n" + _chunk("after the junk")) == [
        {"choices": [{"index": 0, "delta": {"content": "after the junk"}}]}
    ]


def test_sse_parser_reads_cr_and_crlf_line_endings():
    """SSE allows CR, LF and CRLF line ends (WHATWG HTML, server-sent events §9.2.5); a CR-only stream's reply
    was not archived."""
    text = _SSEText()
    stream = _chunk("one ").replace(b"\n", b"\r") + _chunk("two ").replace(b"\n", b"\r\n") + _chunk("three")
    for i in range(0, len(stream), 7):  # chunk boundaries anywhere, also between a CR and its LF
        text.feed(stream[i : i + 7])
    text.feed(b"\r")
    assert text.text == "one two three"


@pytest.mark.parametrize("model", ["bomb", "bomb-twice"])
@pytest.mark.parametrize("stream", [False, True])
def test_a_decompression_bomb_is_cut_at_the_cap_not_held(live_proxy, stream, model):
    """An upstream reply of 4.6 MB gzip that inflates to 1 GiB (issue 38, item 7): before, the proxy read it whole
    (2.2 GB peak). Now it decodes at most ``MAX_REPLY_BYTES`` (64 MiB): a 502 naming the cap when not streamed, the
    stream ended there when streamed; the request's turn is archived all the same; Python's allocations in the
    process (both servers run in it) stay far below the inflated size."""
    url, db = live_proxy
    payload = {"model": model, "stream": stream, "messages": [{"role": "user", "content": "Inflate the egret."}]}
    tracemalloc.start()
    try:
        with httpx.stream("POST", url + "/chat/completions", json=payload, timeout=120) as r:
            size = sum(len(piece) for piece in r.iter_raw())
            status = r.status_code
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    if stream:
        assert status == 200 and size <= MAX_REPLY_BYTES
    else:
        assert status == 502 and size < 1000
    assert peak < 400 << 20, f"peak {peak >> 20} MiB of Python allocations for a 1 GiB bomb"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not _texts(db, "default"):
        time.sleep(0.2)
    assert any("Inflate the egret" in t for t in _texts(db, "default"))


class _Raw:
    is_stream_consumed = False

    """A streamed response as ``_decoded`` reads it: headers and the raw body in the given pieces."""

    def __init__(self, encoding: str, pieces: list[bytes]):
        self.headers = {"content-encoding": encoding} if encoding else {}
        self.pieces = pieces

    async def aiter_raw(self):
        for p in self.pieces:
            yield p


def _encode(data: bytes, name: str) -> bytes:
    if name == "gzip":
        return gzip.compress(data, 6)
    if name == "deflate-zlib":
        return zlib.compress(data, 6)
    if name == "deflate-raw":
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush()
    return data


def _decode_all(resp) -> list[bytes]:
    from lantern.integrations.forward import _decoded  # llm.BodyDecoder, as the proxy reads a reply

    async def run():
        return [p async for p in _decoded(resp)]

    return asyncio.run(run())


@given(
    data=st.binary(max_size=200_000) | st.integers(0, 3_000_000).map(lambda n: b"z" * n),
    layers=st.lists(st.sampled_from(["gzip", "deflate-zlib", "deflate-raw", "identity"]), min_size=0, max_size=3),
    cut=st.integers(1, 70_000),
)
@settings(max_examples=examples(60), deadline=None)
def test_every_stack_of_encodings_decodes_to_the_body_in_bounded_pieces(data, layers, cut):
    """Any body under any stack of gzip / deflate (zlib-wrapped or raw) / identity layers, its wire bytes cut in
    any pieces: decoded to the very body, in pieces of at most ``DECODE_STEP`` bytes."""
    from lantern.llm import DECODE_STEP

    wire = data
    for name in layers:
        wire = _encode(wire, name)
    header = ", ".join("deflate" if n.startswith("deflate") else n for n in layers)
    pieces = [wire[i : i + cut] for i in range(0, len(wire), cut)] or [b""]
    out = _decode_all(_Raw(header, pieces))
    assert b"".join(out) == data and all(len(p) <= DECODE_STEP for p in out)


@given(
    n=st.integers(0, 3000),
    names=st.lists(st.sampled_from(["gzip", "x-gzip", "deflate", "identity", "GZIP"]), min_size=1, max_size=4),
)
@settings(max_examples=examples(60), deadline=None)
def test_any_number_of_stacked_encodings_decodes_or_is_refused_naming_the_bound(n, names):
    """A ``Content-Encoding`` of ``n`` layers (any mix of names, identity not counted): up to
    ``MAX_CONTENT_CODINGS`` decoded to the body; more refused before any inflation with a DecodingError naming the
    bound, never a RecursionError (before: one nested generator per layer, RecursionError from ~1,000 layers)."""
    from lantern.llm import MAX_CONTENT_CODINGS

    header = ", ".join(names[i % len(names)] for i in range(n))
    coded = [names[i % len(names)] for i in range(n) if names[i % len(names)] != "identity"]
    data = b"the redis port is 6001 " * 50
    wire = data
    for name in coded:  # in the order listed: the last listed applied last (RFC 9110 §8.4)
        wire = _encode(wire, "gzip" if name.lower() in ("gzip", "x-gzip") else "deflate-zlib")
    if len(coded) <= MAX_CONTENT_CODINGS:
        assert b"".join(_decode_all(_Raw(header, [wire]))) == data
    else:
        with pytest.raises(httpx.DecodingError, match=f"{len(coded)} stacked Content-Encoding layers.*at most"):
            _decode_all(_Raw(header, [wire]))


@given(n=st.integers(0, 1500), cut=st.integers(2048, 8192))
@settings(max_examples=examples(10), deadline=None)
def test_the_decoder_is_iterative_whatever_the_depth(n, cut):
    """With the bound lifted, ``n`` gzip layers (up to 1,500, past Python's recursion limit) still decode to the
    body, fed in pieces: the layers are pulled in one loop, no stack frame per layer. The pieces are of 2–8 KB: each
    piece costs a pass over every layer, so 1-byte pieces through 1,500 layers would take minutes (a depth the bound,
    ``MAX_CONTENT_CODINGS``, never lets through; small pieces are the bounded decoder's tests above)."""
    import lantern.llm as llm

    data = bytes(range(256)) * 40
    wire = _layered(data, n)
    pieces = [wire[i : i + cut] for i in range(0, len(wire), cut)]
    bound = getattr(llm, "MAX_CONTENT_CODINGS", None)
    llm.MAX_CONTENT_CODINGS = 10_000
    try:
        decoder = llm.BodyDecoder(", ".join(["gzip"] * n))
        out = [piece for raw in pieces for piece in decoder.feed(raw)]
    finally:
        llm.MAX_CONTENT_CODINGS = bound
    assert b"".join(out) == data and all(len(p) <= llm.DECODE_STEP for p in out)


@pytest.mark.parametrize("stream", [False, True])
def test_an_upstream_reply_in_a_thousand_layers_is_a_502_and_the_turn_archived(live_proxy, stream):
    """An upstream reply under 1,100 stacked gzip layers (a 25 KB body): a 502 naming the bound, streamed or not
    (before: a 500 "internal error RecursionError", the user's turn not archived), the user's turn archived."""
    url, db = live_proxy
    payload = {"model": "layers", "stream": stream, "messages": [{"role": "user", "content": "Stack the heron."}]}
    r = httpx.post(url + "/chat/completions", json=payload, timeout=60)
    assert r.status_code == 502 and "1100 stacked Content-Encoding layers" in r.json()["error"], r.text
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not _texts(db, "default"):
        time.sleep(0.2)
    assert any("Stack the heron" in t for t in _texts(db, "default"))


def test_an_llm_answer_in_a_thousand_layers_is_a_malformed_llm_error():
    """The LLM client (rerank, chat, memory agent) refuses an answer under 1,100 gzip layers as an ``LLMError``
    (malformed, naming the bound), so its callers keep their fallback (before: RecursionError, "internal error")."""
    from lantern.llm import LLMClient, LLMError, LLMSettings

    answer = json.dumps({"choices": [{"message": {"content": '{"ids": []}'}}]}).encode()

    def reply(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            stream=httpx.ByteStream(_layered(answer, _LAYERS)),
            headers={"content-encoding": ", ".join(["gzip"] * _LAYERS)},
        )

    client = LLMClient(LLMSettings("http://llm.invalid/v1", "m"), transport=httpx.MockTransport(reply))
    try:
        with pytest.raises(LLMError, match="stacked Content-Encoding layers") as caught:
            client.chat([{"role": "user", "content": "Rank these."}])
    finally:
        client.close()
    assert caught.value.kind == "malformed"


def test_an_encoding_not_asked_for_is_refused():
    with pytest.raises(httpx.DecodingError, match="did not ask for"):  # brotli, zstd: not asked for, not decoded
        _decode_all(_Raw("br", [b"\x0b\x02\x80hello\x03"]))


@pytest.mark.parametrize("encoding, body", [("gzip", "bomb"), ("gzip, gzip", "twice")])
def test_an_llm_answer_that_inflates_to_a_gib_is_refused_having_inflated_a_step_past_the_cap(encoding, body):
    """The LLM client (rerank, memory agent, judge) reads its answers through the same ``llm.BodyDecoder``: a
    stacked bomb is an ``LLMError`` (malformed, "answer over"), with Python's allocations far below the inflated
    size (before: 2.1 GB for ``gzip, gzip``). It asks for ``gzip, deflate`` only."""
    from lantern.llm import LLMClient, LLMError, LLMSettings

    asked = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request.headers.get("accept-encoding"))
        content = _BOMB if body == "bomb" else _BOMB_TWICE
        return httpx.Response(200, stream=httpx.ByteStream(content), headers={"content-encoding": encoding})

    client = LLMClient(LLMSettings("http://llm.invalid/v1", "m"), transport=httpx.MockTransport(answer))
    tracemalloc.start()
    try:
        with pytest.raises(LLMError, match="answer over"):
            client.chat([{"role": "user", "content": "Rank these."}])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        client.close()
    assert asked == ["gzip, deflate"] and peak < 200 << 20, f"peak {peak >> 20} MiB"
