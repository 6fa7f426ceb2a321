"""The chat proxy of ``lantern serve --upstream URL`` (integrations/proxy.py's app adds these routes with
``_add_forwarding``): an OpenAI-compatible (and Anthropic Messages) proxy in front of the user's endpoint.

    POST /v1/chat/completions   detect a compaction (compaction.Tracker), inject the recovered block as a system
                                message, forward; after the response, archive the request's new turns and the
                                reply (streamed or not, tool calls assembled) in one transaction
    POST /v1/messages           the same for Anthropic Messages (the block appended to ``system``)
    any other /v1/* path        passed through to the upstream unchanged (never a /v1/memory/ path)

The session is the ``X-Lantern-Session`` header (default ``default``); the scope (lantern/scope.py) the
``X-Lantern-User``, ``X-Lantern-Agent`` and ``X-Lantern-Project`` headers (default: user ``""``, any agent/project).
No ``X-Lantern-*`` header is forwarded upstream. A body that does not parse as JSON (or is nested too deep to
parse) is forwarded untouched and nothing of it is archived. Upstream errors come back with their status
and body; an upstream timeout is a 504 ``{"error": ...}``; an unreachable upstream a 502. Archiving or recovery
failing never fails the request: it is logged (without message text) to ``~/.lantern/logs/proxy.log``.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse

from lantern.integrations.schemas import Message
from lantern.integrations.service import MemoryService
from lantern.integrations.sse import _AnthropicSSE, _SSEText
from lantern.llm import ACCEPTED_ENCODINGS, BodyDecoder, parse_answer

# ours: an upstream chat reply, decoded (gzip, deflate, br), is read or relayed up to this size: a compressed reply
# that inflates without end (a 1 MB gzip of 1 GiB) is cut there, not held; a chat reply is kilobytes
MAX_REPLY_BYTES = 64 << 20
log = logging.getLogger("lantern.proxy")  # the server's logger (integrations/proxy.py logs to it too)

SESSION_HEADER = "x-lantern-session"
UPSTREAM = "upstream"  # build_app(rerank=UPSTREAM): rerank through the upstream with each request's model
RERANK_TIMEOUT = 30.0  # ours, seconds: with UPSTREAM, a recovery waits at most this (or the upstream timeout, if
# shorter) for the rerank answer, then keeps the weight order; the client's request waits on it
LANTERN_HEADERS = "x-lantern-"  # ours (session, user, agent, project, ...): never forwarded upstream
RECOVERED_HEADER = (
    "Recovered from Lantern memory: earlier turns of this conversation that a compaction dropped. "
    "Use them for specifics (names, numbers, paths, commands) the summary lost.\n\n"
)
_HOP_BY_HOP = {
    "host",
    "content-length",
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
    SESSION_HEADER,
}
_PASS_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


def _note_failure(what: str, session: str, e: BaseException) -> None:
    """Log a failure that must not fail the request to ``~/.lantern/logs/proxy.log`` (0700 directory, 0600 file):
    the operation, session and exception type, never message text (an exception's message may quote it)."""
    import time
    from pathlib import Path

    log.warning("%s failed for session %r: %s", what, session, type(e).__name__)
    try:
        folder = Path.home() / ".lantern" / "logs"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(folder / "proxy.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(
                f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {what} failed for session {session!r}: "
                f"{type(e).__name__} (request served without it)\n"
            )
    except OSError:
        pass  # no writable home: never fail the request over the log


def _request_headers(
    request: Request, strip_authorization: bool, *, keep_encoding: bool, upstream_key: str | None = None
) -> dict[str, str]:
    drop = set(_HOP_BY_HOP)
    if strip_authorization or upstream_key:  # with --token the client's Authorization is ours, not the upstream's
        drop.add("authorization")
    if not keep_encoding:  # we read the body: only the encodings ``llm.BodyDecoder`` decodes, bounded
        drop.add("accept-encoding")
    headers = {
        k: v for k, v in request.headers.items() if k.lower() not in drop and not k.lower().startswith(LANTERN_HEADERS)
    }
    if not keep_encoding:
        headers["accept-encoding"] = ACCEPTED_ENCODINGS
    if upstream_key:
        headers["authorization"] = f"Bearer {upstream_key}"
    return headers


def _response_headers(headers: Any, *, keep_encoding: bool) -> dict[str, str]:
    drop = {"content-length", "transfer-encoding", "connection", "keep-alive"}
    if not keep_encoding:
        drop.add("content-encoding")
    return {k: v for k, v in headers.items() if k.lower() not in drop}


def _inject(messages: list[Message], block: str, header: str = RECOVERED_HEADER) -> list[Message]:
    """``messages`` with a system message holding ``header + block`` right after the leading system message(s),
    or first."""
    i = 0
    while i < len(messages) and isinstance(messages[i], dict) and messages[i].get("role") in ("system", "developer"):
        i += 1
    return [*messages[:i], {"role": "system", "content": header + block}, *messages[i:]]


def _all_exist(lantern: Any, ids: set[int]) -> bool:
    """Whether every entry of ``ids`` is still stored: a kept block holding a forgotten entry (forgotten here, over
    REST, or by another process) is never injected again. One query on the store."""
    if not ids:
        return True
    return len(lantern.store.places(sorted(ids))) == len(ids)


def _scope_headers(request: Request) -> dict[str, str | None]:
    """The scope of a proxied request: X-Lantern-User / -Agent / -Project (absent: None)."""
    return {name: request.headers.get(f"x-lantern-{name}") for name in ("user", "agent", "project")}


def _archive_new(lantern: Any, session: str, messages: list[Any], scope: dict[str, str | None] | None = None) -> None:
    """Archive the turns of ``messages`` not yet in ``session`` (by content hash), in one transaction: a long
    conversation resent on every request is not re-summarized and re-embedded, nor are the turns a compacted
    context kept. A runtime's compaction summary message (``compaction.is_runtime_summary``) is not archived: it
    is the runtime's lossy rewrite of turns already archived, not a turn of the conversation (Claude Code ingest
    keeps its compact summaries out of the store too), and neither is a user message opening the conversation
    with a summary's markup (``runtime_summaries``); a user message that merely looks like a summary is."""
    from lantern.archive.chunk import chunk
    from lantern.archive.pipeline import session_name
    from lantern.compaction import runtime_summaries
    from lantern.model import ArchiveResult
    from lantern.scope import resolve

    scope = scope or {}
    messages = [m for m, summary in zip(messages, runtime_summaries(messages)) if not summary]
    if not messages:
        return
    parsed = lantern.writer.messages(messages)
    turns = chunk(parsed.messages, None)
    hashes = [lantern.turn_hash(session_name(session, turn.session), turn.text, **scope) for turn in turns]
    known = lantern.store.known_hashes(hashes)
    new = [turn for turn, h in zip(turns, hashes) if h not in known]
    if new:
        result = ArchiveResult(
            session=session, skipped=parsed.skipped, warnings=parsed.warnings, redacted=parsed.redacted
        )
        lantern.writer.archive_turns(new, session, resolve(lantern.scope, **scope), result)


ANSWERED_REQUESTS = 4096  # ours: requests remembered for idempotent archiving (a retry comes seconds later)


def _request_key(session: str, scope: dict[str, str | None] | None, messages: list[Message]) -> str:
    """The identity of a chat request for archiving: its session, scope and messages (sha256 of their canonical
    JSON). A retried or duplicated request has the same key: its turns and a second reply are archived once."""
    import hashlib
    import json

    canonical = json.dumps([session, sorted((scope or {}).items()), messages], sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def _abandon(lantern: Any, tracker: Any, key: tuple, session: str, scope: dict[str, str | None]) -> None:
    """Take the archived turns of a rewind this request confirmed (``compaction.confirmed_rewinds``: an earlier
    request left them out, and this one holds none of them and that request's reply) off the session: moved
    to ``<session>/abandoned-<first 8 of the first one's content hash>``, whatever ``Config.rewound`` says. The
    rewind is inferred from what a client sends, so nothing is deleted on it; ``lantern forget`` deletes."""
    state = tracker.seen.get(key)
    ids = list(state.abandoned) if state is not None else []
    if not ids:
        return
    name = f"abandoned-{state.archive.hash[ids[0]][:8]}"
    n = lantern.abandon({i: name for i in ids}, keep=True, **scope)
    log.info("rewind in session %r: %d archived turns moved to %s/%s", session, n, session, name)


class _Forwarder:
    """The chat-completions proxy's per-request work; memory work runs in the threadpool under the service lock."""

    def __init__(
        self,
        service: MemoryService,
        upstream: str,
        timeout: float,
        strip_authorization: bool,
        upstream_key: str | None = None,
        rerank: Any = None,
    ):
        import httpx

        self.upstream_key = upstream_key
        self.rerank = rerank  # build_app's: LLMSettings, UPSTREAM or None
        self.service, self.upstream, self.strip_authorization = service, upstream.rstrip("/"), strip_authorization
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(timeout))
        self.max_reply_bytes = MAX_REPLY_BYTES
        self.timeout = timeout
        self.tracker: Any = None  # compaction.Tracker over the service's Lantern
        self.blocks: dict[tuple, tuple[str, set[int]]] = {}  # (session, scope) -> (injected block, its entry ids)
        self.summaries: dict[tuple, str | None] = {}  # (session, scope) -> the summary its last request held
        self.answered: OrderedDict[str, None] = OrderedDict()  # _request_key of requests archived with a reply

    async def aclose(self) -> None:
        await self.client.aclose()

    # ------------------------------------------------------------------ memory (sync, threadpool)
    def prepare(
        self,
        session: str,
        messages: list[Message],
        scope: dict[str, str | None] | None = None,
        llm: Any = None,
    ) -> str:
        """Detect (against the archive before this request) and return the recovered block to inject ("" for
        none) while the live context is compacted. The request's turns are archived later, with
        the reply, after the response is sent (``archive``): one embedding batch, off the client's path. The block
        is recovered at each NEW compaction (``compaction.Tracker``) and injected again, unchanged, on the
        requests that follow while the compaction lasts (the client never sees it); it is recovered anew when
        one of its entries is back in the live context. ``scope``: user / agent / project (the X-Lantern-* headers).
        ``llm``: the request's rerank endpoint (``rerank_llm``), None for none."""
        from lantern.compaction import Tracker
        from lantern.scope import resolve

        scope = scope or {}

        self._prefetch_query(session, messages, scope)
        event = current = None
        block, why = "", ""
        with self.service._lock:
            try:
                lantern = self.service._open(create=True)
            except Exception as e:  # noqa: BLE001 - memory must never fail the request
                _note_failure("open", "?", e)  # the session's stored form needs the store: not logged
                return ""
            session = lantern.scope.name(session)  # its stored form, in the log lines too (a secret in it redacted)
            if self.tracker is None or self.tracker.lantern is not lantern:
                self.tracker, self.blocks, self.summaries = Tracker(lantern), {}, {}
            try:
                key = Tracker.key(session, resolve(lantern.scope, **scope))
                event, current = self.tracker.observe(session, messages, **scope)
            except Exception as e:  # noqa: BLE001
                _note_failure("detect", session, e)
                return ""
            try:
                _abandon(lantern, self.tracker, key, session, scope)
            except Exception as e:  # noqa: BLE001
                _note_failure("abandon", session, e)
            for gone in [k for k in self.blocks if k not in self.tracker.seen]:
                del self.blocks[gone]  # bounded like the tracker: a session it dropped starts over
            for gone in [k for k in self.summaries if k not in self.tracker.seen]:
                del self.summaries[gone]
            if key in self.tracker.seen:
                self.summaries[key] = self.tracker.seen[key].summary
            kept = self.blocks.get(key)
            if current is None:
                self.blocks.pop(key, None)
            elif (
                event is None
                and kept is not None
                and not kept[1] & self.tracker.seen[key].present
                and _all_exist(lantern, kept[1])
            ):
                block = kept[0]
            else:
                event = event or current
                try:
                    recovery = event.recover(lantern, source="proxy", rerank=llm is not None, llm=llm)
                    block = recovery.text
                    why = (
                        f" ({recovery.reason}{f': {recovery.detail}' if recovery.detail else ''})"
                        if recovery.reason
                        else ""
                    )
                    self.blocks[key] = (block, {e.id for e in recovery.entries})
                except Exception as e:  # noqa: BLE001
                    _note_failure("recover", session, e)
        if event is not None:
            log.info(
                "compaction (%s) in session %r: %d turns lost, %d chars recovered%s",
                event.reason,
                session,
                len(event.lost_entry_ids),
                len(block),
                why,
            )
        return block

    def _prefetch_query(self, session: str, messages: list[Message], scope: dict[str, str | None]) -> None:
        """When the request holds a compaction summary its session's last request did not, start embedding the
        query its recovery will use (``compaction.summary_query``; the very text ``Lantern.recover`` embeds) in a
        worker thread, before taking the lock: it runs while the previous request's archive finishes and the
        detection runs (recover/query_vectors.py). The recovery takes the vector; same vector, same result.
        A summary seen before (an ongoing compaction, whose block is reused) is not embedded ahead."""
        from lantern.compaction import Tracker, summary_query
        from lantern.scope import resolve
        from lantern.text.clean import clean_text

        tracker = self.tracker
        if tracker is None:  # the first request: the handle is opened under the lock, nothing to embed ahead with
            return
        try:
            found = summary_query(messages)
            if found is None or not found[1].strip():
                return
            lantern = tracker.lantern
            if self.summaries.get(Tracker.key(session, resolve(lantern.scope, **scope))) == found[0]:
                return
            lantern.queries.prefetch(clean_text(found[1]))
        except Exception as e:  # noqa: BLE001 - an optimization must never fail the request
            _note_failure("prefetch", session, e)

    def archive(
        self,
        session: str,
        messages: list[Message] | None,
        reply: Message | None = None,
        scope: dict[str, str | None] | None = None,
    ) -> None:
        """Archive the request's new turns and the reply (when it has content or tool calls) in one transaction.
        Runs after the response was sent (a background task; at the end of a stream)."""
        if messages is None:
            return
        answered = bool(reply and (reply.get("content") or reply.get("tool_calls")))
        lantern = None
        with self.service._lock:
            try:
                lantern = self.service._open(create=True)
                session = lantern.scope.name(session)  # its stored form, in the log line too
                request = _request_key(session, scope, messages)
                if request in self.answered:  # a retry or a duplicate of a request archived with its reply
                    self.answered.move_to_end(request)
                    return
                turns = [*messages, reply] if answered else messages
                _archive_new(lantern, session, turns, scope)
            except Exception as e:  # noqa: BLE001
                _note_failure("archive", session if lantern is not None else "?", e)
                return
            if answered:
                self.answered[request] = None
                while len(self.answered) > ANSWERED_REQUESTS:
                    self.answered.popitem(last=False)

    # ------------------------------------------------------------------ HTTP
    def url(self, rest: str, query: str) -> str:
        """The upstream URL of a forwarded request: ``rest`` under the upstream's path, the upstream's own query
        (Azure's ``?api-version=``) kept with the request's after it (lantern/llm.py ``endpoint``)."""
        from lantern.llm import endpoint

        return endpoint(self.upstream, rest, query)

    def upstream_error(self, e: Exception, background: Any = None) -> JSONResponse:
        import httpx

        if isinstance(e, httpx.TimeoutException):
            return JSONResponse(
                {"error": f"upstream timed out after {self.timeout:g} s"}, status_code=504, background=background
            )
        if isinstance(e, httpx.DecodingError):  # an encoding not asked for, too many layers, a corrupt body
            return JSONResponse(
                {"error": f"upstream reply not decoded: {e}"[:300]}, status_code=502, background=background
            )
        return JSONResponse(
            {"error": f"upstream unreachable: {type(e).__name__}"}, status_code=502, background=background
        )

    def rerank_llm(self, api: Any, body: Any, headers: dict[str, str]) -> Any:
        """The rerank endpoint of one request: the configured ``LLMSettings``; with ``UPSTREAM``, a client of the
        upstream with the request's ``model`` and the Authorization it forwards there (OpenAI-path requests that
        name a model; None for the others, which recover without a rerank); None when rerank is off."""
        if self.rerank != UPSTREAM:
            return self.rerank
        model = body.get("model") if isinstance(body, dict) else None
        if api is not OPENAI or not isinstance(model, str) or not model:
            return None
        from lantern.llm import JSON_MODE_ENV, LLMClient, LLMSettings

        mode = os.environ.get(JSON_MODE_ENV) or "schema"
        return LLMClient(
            LLMSettings(self.upstream, model, timeout_s=min(self.timeout, RERANK_TIMEOUT), json_mode=mode),
            authorization=headers.get("authorization"),
        )

    async def chat(self, request: Request, api: Any = None) -> Any:
        """Forward one chat request of ``api`` (``OPENAI`` or ``ANTHROPIC``): detect and inject, then archive the
        request's turns and the reply after the response."""
        import json

        import anyio
        import httpx
        from fastapi.responses import Response, StreamingResponse
        from starlette.background import BackgroundTask
        from starlette.concurrency import run_in_threadpool

        api = api or OPENAI
        raw = await request.body()
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, or nested too deep to parse: forwarded untouched
            body = None
        messages = api.messages(body)
        session = request.headers.get(SESSION_HEADER) or "default"
        scope = _scope_headers(request)
        headers = _request_headers(
            request, self.strip_authorization, keep_encoding=False, upstream_key=self.upstream_key
        )
        if messages is not None:
            llm = self.rerank_llm(api, body, headers)
            try:
                block = await run_in_threadpool(self.prepare, session, messages, scope, llm)
            finally:
                if llm is not None and llm is not self.rerank:  # a client made for this request
                    llm.close()
            injected = api.inject(body, RECOVERED_HEADER + block) if block else None
            if injected is not None:
                raw = json.dumps(injected).encode()
                headers["content-type"] = "application/json"
        stream = isinstance(body, dict) and body.get("stream") is True
        req = self.client.build_request("POST", self.url(api.path, request.url.query), headers=headers, content=raw)
        try:
            resp = await self.client.send(req, stream=True)
        except httpx.HTTPError as e:
            return self.upstream_error(e, BackgroundTask(self.archive, session, messages, None, scope))
        if not stream or resp.status_code >= 400:
            try:
                content = await _read_capped(resp, self.max_reply_bytes)
            except httpx.HTTPError as e:
                return self.upstream_error(e, BackgroundTask(self.archive, session, messages, None, scope))
            finally:
                await resp.aclose()
            if content is None:
                return JSONResponse(
                    {"error": f"upstream reply over {self.max_reply_bytes} bytes decoded: not relayed"},
                    status_code=502,
                    background=BackgroundTask(self.archive, session, messages, None, scope),
                )
            reply = None
            if messages is not None and resp.status_code < 400:
                try:
                    reply = api.reply(parse_answer(content))
                except Exception:  # noqa: BLE001 - not the shape we know: archive the request only
                    reply = None
            return Response(
                content,
                status_code=resp.status_code,
                headers=_response_headers(resp.headers, keep_encoding=False),
                background=BackgroundTask(
                    self.archive, session, messages, reply if isinstance(reply, dict) else None, scope
                ),
            )

        try:  # an encoding refused before the stream's status is sent: a 502 like a reply not streamed
            decoder = BodyDecoder(resp.headers.get("content-encoding", ""))
        except httpx.DecodingError as e:
            await resp.aclose()
            return self.upstream_error(e, BackgroundTask(self.archive, session, messages, None, scope))

        async def relay():
            parser = api.parser()
            size = 0
            try:
                async for chunk in _decoded(resp, decoder):
                    size += len(chunk)
                    if size > self.max_reply_bytes:  # decoded past the cap: the stream ends here
                        _note_failure("upstream stream", session, ReplyTooLarge(self.max_reply_bytes))
                        break
                    parser.feed(chunk)
                    yield chunk
            except httpx.HTTPError as e:
                _note_failure("upstream stream", session, e)
            finally:
                # shielded: a client that disconnects mid-stream ("stop generating") cancels this generator, and
                # an unshielded await here would be cancelled too: the turn and the reply relayed so far would
                # never be archived
                with anyio.CancelScope(shield=True):
                    await resp.aclose()
                    await run_in_threadpool(self.archive, session, messages, parser.reply, scope)

        return StreamingResponse(
            relay(), status_code=resp.status_code, headers=_response_headers(resp.headers, keep_encoding=False)
        )

    async def passthrough(self, request: Request, rest: str) -> Any:
        import httpx
        from fastapi.responses import StreamingResponse

        headers = _request_headers(
            request, self.strip_authorization, keep_encoding=True, upstream_key=self.upstream_key
        )
        req = self.client.build_request(
            request.method, self.url(rest, request.url.query), headers=headers, content=await request.body()
        )
        try:
            resp = await self.client.send(req, stream=True)
        except httpx.HTTPError as e:
            return self.upstream_error(e)

        async def relay():
            try:
                async for chunk in resp.aiter_raw():
                    yield chunk
            finally:
                await resp.aclose()

        return StreamingResponse(
            relay(), status_code=resp.status_code, headers=_response_headers(resp.headers, keep_encoding=True)
        )


class ReplyTooLarge(Exception):
    """An upstream reply decoded past ``MAX_REPLY_BYTES`` (logged by type, like every upstream failure)."""


async def _decoded(resp: Any, decoder: BodyDecoder | None = None) -> AsyncIterator[bytes]:
    """The body of a streamed httpx response, decoded from its ``Content-Encoding`` by ``llm.BodyDecoder`` (at most
    ``DECODE_STEP`` bytes inflated per layer before the reader takes them), so a reader that stops at its cap has
    inflated at most a step more; ``decoder``: one already made for it. Raises httpx.DecodingError as
    ``BodyDecoder`` does."""
    if resp.is_stream_consumed:  # a body given whole (a transport that read it, tests' mocks): as it is
        async for piece in resp.aiter_bytes():
            yield piece
        return
    decoder = decoder or BodyDecoder(resp.headers.get("content-encoding", ""))
    async for raw in resp.aiter_raw():
        for piece in decoder.feed(raw):
            yield piece


async def _read_capped(resp: Any, limit: int) -> bytes | None:
    """The decoded body of a streamed httpx response (``_decoded``), or None once it passes ``limit`` bytes (read
    and inflated no further)."""
    parts, size = [], 0
    async for chunk in _decoded(resp):
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
    return b"".join(parts)


def _chat_messages(body: Any) -> list[Message] | None:
    messages = body.get("messages") if isinstance(body, dict) else None
    ok = isinstance(messages, list) and messages and all(isinstance(m, dict) for m in messages)
    return messages if ok else None  # not a chat request we understand: forwarded untouched, nothing archived


class _OpenAI:
    """OpenAI chat completions: the block is a system message after the leading system message(s)."""

    path = "chat/completions"
    parser = _SSEText

    @staticmethod
    def messages(body: Any) -> list[Message] | None:
        return _chat_messages(body)

    @staticmethod
    def inject(body: dict[str, Any], block: str) -> dict[str, Any] | None:
        return {**body, "messages": _inject(body["messages"], block, header="")}

    @staticmethod
    def reply(response: Any) -> Any:
        return response["choices"][0]["message"]


class _Anthropic:
    """Anthropic Messages (``POST /v1/messages``): the live context is the top-level ``system`` (as a system
    message) and ``messages``; the block is appended to ``system`` (a string, or a list of text blocks)."""

    path = "messages"
    parser = _AnthropicSSE

    @staticmethod
    def messages(body: Any) -> list[Message] | None:
        messages = _chat_messages(body)
        if messages is None:
            return None
        system = body.get("system")
        ok = isinstance(system, (str, list)) and system
        return ([{"role": "system", "content": system}] if ok else []) + messages

    @staticmethod
    def inject(body: dict[str, Any], block: str) -> dict[str, Any] | None:
        """``body`` with the block appended to ``system``; None (forward the body untouched) when ``system`` is
        neither absent/null, a string nor a list: we never replace what we do not understand."""
        system = body.get("system")
        if isinstance(system, list):
            return {**body, "system": [*system, {"type": "text", "text": block}]}
        if system is not None and not isinstance(system, str):
            return None
        return {**body, "system": f"{system}\n\n{block}" if system else block}

    @staticmethod
    def reply(response: Any) -> Any:
        return {"role": "assistant", "content": response["content"]}


OPENAI, ANTHROPIC = _OpenAI(), _Anthropic()


def _add_forwarding(
    app: FastAPI,
    service: MemoryService,
    upstream: str,
    timeout: float,
    *,
    strip_authorization: bool,
    upstream_key: str | None = None,
    rerank: Any = None,
) -> None:
    forwarder = _Forwarder(service, upstream, timeout, strip_authorization, upstream_key, rerank)
    app.state.forwarder = forwarder

    @app.post("/v1/chat/completions", tags=["proxy"], include_in_schema=True)
    async def chat_completions(request: Request) -> Any:
        """OpenAI chat completions, forwarded to the upstream: the request's turns are archived, a compaction
        is detected and the recovered block injected as a system message; the reply (streamed or not) is archived.
        Session: header ``X-Lantern-Session`` (default ``default``)."""
        return await forwarder.chat(request, OPENAI)

    @app.post("/v1/messages", tags=["proxy"], include_in_schema=True)
    async def anthropic_messages(request: Request) -> Any:
        """Anthropic Messages, forwarded to the upstream (``--upstream https://api.anthropic.com/v1``) like chat
        completions; the recovered block is appended to the ``system`` field. Session: ``X-Lantern-Session``."""
        return await forwarder.chat(request, ANTHROPIC)

    @app.api_route("/v1/{rest:path}", methods=_PASS_METHODS, include_in_schema=False)
    async def passthrough(request: Request, rest: str) -> Any:
        if rest == "memory" or rest.startswith("memory/"):
            raise HTTPException(404, "Not Found")  # ours: an unknown memory path is never sent upstream
        return await forwarder.passthrough(request, rest)
