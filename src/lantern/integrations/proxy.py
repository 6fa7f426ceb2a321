"""Lantern over HTTP (FastAPI + uvicorn, extra ``proxy``): ``lantern --db PATH serve [--host] [--port] [--token]``.

The memory REST API, JSON in and out, with its OpenAPI schema at ``/openapi.json`` (docs at ``/docs``):

    POST /v1/memory/archive   {messages, session}                -> {session, added, duplicates, skipped, ...}
    POST /v1/memory/recover   {query, session, budget, exclude}  -> {text, chars, entries}
    POST /v1/memory/search    {query, k, session}                -> {hits}
    POST /v1/memory/forget    {entry | session, confirm}         -> {forgotten} (no confirm: a preview only)
    GET  /v1/memory/stats                                        -> {entries, sessions, embedder, ...}

Binds 127.0.0.1 by default. Every request first passes the local servers' rule against web pages
(integrations/origin.py): without a token a Host that is not a loopback name or an IP address gets 421 (DNS
rebinding); a request a browser marks as cross-site (``Origin``, ``Sec-Fetch-Site``) gets 403; a body sent to a JSON
endpoint without ``Content-Type: application/json`` gets 415. With a token (``--token`` or ``LANTERN_TOKEN``) every
request needs ``Authorization: Bearer TOKEN`` (else 401). Request bodies above ``max_body_bytes`` (default 8 MiB)
get 413 before anything is parsed. Bad input is a 400 or 422 with ``{"error": ...}`` (422: the schema's own
validation); a read of a database that does not exist yet is a 404; a database server that cannot be reached
(stopped, connection lost) is a 503 naming why; an internal error is a 500 without a traceback.

With an upstream (``lantern serve --upstream URL``), it is also an OpenAI-compatible (and Anthropic Messages) chat
proxy: integrations/forward.py, whose routes ``build_app`` adds (``/v1/chat/completions``, ``/v1/messages``, any
other ``/v1/*`` path passed through).
"""

from __future__ import annotations

import logging
import os
import secrets
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from lantern.errors import DatabaseUnavailableError, LanternError
from lantern.integrations.forward import _add_forwarding
from lantern.integrations.origin import OriginGuard
from lantern.integrations.schemas import (
    ArchiveRequest,
    ArchiveResponse,
    CompactionRecoverRequest,
    CompactionRecoverResponse,
    ErrorResponse,
    FeedbackRequest,
    FeedbackResponse,
    ForgetRequest,
    ForgetResponse,
    RecoverRequest,
    RecoverResponse,
    SearchRequest,
    SearchResponse,
    StatsResponse,
)
from lantern.integrations.service import MemoryService, NoDatabaseError
from lantern.integrations.tokens import FailureLimit

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8765
JSON_PATHS = ("/v1/memory/", "/v1/chat/completions", "/v1/messages")  # their bodies are JSON (integrations/origin.py)
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024  # ours: a long agent transcript with tool output fits
DEFAULT_UPSTREAM_TIMEOUT = 600.0  # seconds; ours: a long completion streams for minutes
log = logging.getLogger("lantern.proxy")


# ---------------------------------------------------------------------------------------------- request bodies
BODIES = {
    "archive": ArchiveRequest,
    "recover": RecoverRequest,
    "search": SearchRequest,
    "feedback": FeedbackRequest,
    "forget": ForgetRequest,
}


def invalid_body_message(path: str, errors: list[dict]) -> str:
    """The one line of a 422 (``messages.py``, the MCP server's wording): unknown fields (``unknown argument for
    recover: 'sesion' (recover takes query, session, ...)``), else each field and its problem (``invalid
    arguments for search: k: should be greater than or equal to 1 (got 0)``); a body that is not JSON says so."""
    from lantern.integrations.messages import unknown_arguments_message, validation_message

    endpoint = path.rstrip("/").rsplit("/", 1)[-1]
    body = [{**x, "loc": tuple(x.get("loc", ()))[1:]} for x in errors if tuple(x.get("loc", ()))[:1] == ("body",)]
    if any(x.get("type") == "json_invalid" for x in body) or not body:
        first = errors[0] if errors else {}
        return (
            f"request body is not valid JSON: {first.get('msg', 'invalid request')}"
            if body
            else str(first.get("msg", "invalid request"))
        )
    unknown = [str(x["loc"][0]) for x in body if x.get("type") == "extra_forbidden" and x["loc"]]
    if unknown and endpoint in BODIES:
        return unknown_arguments_message(endpoint, unknown, list(BODIES[endpoint].model_fields))
    return validation_message(endpoint, [x for x in body if x.get("type") != "extra_forbidden"] or body)


ERRORS = {
    400: {"model": ErrorResponse},
    401: {"model": ErrorResponse},
    413: {"model": ErrorResponse},
    422: {"model": ErrorResponse},
    500: {"model": ErrorResponse},
}


# ---------------------------------------------------------------------------------------------- the app
def build_app(
    path: str | os.PathLike[str] | None = None,
    embedder: str | None = None,
    *,
    token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    service: MemoryService | None = None,
    upstream: str | None = None,
    upstream_timeout: float = DEFAULT_UPSTREAM_TIMEOUT,
    upstream_key: str | None = None,
    rewound: str = "skip",
    rerank: Any = None,
) -> BodyLimit:
    """The ASGI app (the FastAPI app inside ``BodyLimit``; ``.app`` is the FastAPI app) over the database at
    ``path`` (default ``$LANTERN_DB`` or ``~/.lantern/lantern.db``). With ``upstream`` (an OpenAI-compatible base
    URL such as ``https://api.openai.com/v1``), ``/v1/chat/completions`` and every other ``/v1/*`` path are
    forwarded to it (see the module docstring); ``upstream_timeout`` is in seconds. ``upstream_key``: sent upstream
    as ``Authorization: Bearer KEY`` instead of the client's Authorization (needed with ``token``, whose
    Authorization header is ours and is never forwarded). ``rewound``: "skip" or "mark", what becomes of archived
    turns a client's request rewound away (``Config.rewound``; compaction.py). ``rerank``: LANTERN-Rerank for the
    proxy's compaction recoveries — ``lantern.llm.LLMSettings`` of an endpoint, or ``UPSTREAM`` for the upstream
    itself with each request's own model and forwarded Authorization (OpenAI-path requests only); None: off."""
    if service is None:
        from lantern.config import Config

        service = MemoryService(path, embedder, Config(rewound=rewound), source="proxy")
    service.start_filler()
    app = FastAPI(
        lifespan=_lifespan,
        title="Lantern memory API",
        version=_version(),
        description="Archive conversation turns; recover the specifics a compaction lost.",
        dependencies=[Depends(_authorize)],
        # with a token every path needs it: the interactive docs and the schema are not served then
        docs_url=None if token else "/docs",
        redoc_url=None if token else "/redoc",
        openapi_url=None if token else "/openapi.json",
    )
    app.state.service = service
    app.state.token = token
    app.state.failures = FailureLimit()  # wrong tokens per client address (integrations/tokens.py)
    _add_guards(app, token is not None)
    app.include_router(memory_routes)
    if upstream:
        _add_forwarding(
            app,
            service,
            upstream,
            upstream_timeout,
            strip_authorization=token is not None,
            upstream_key=upstream_key,
            rerank=rerank,
        )
    else:  # the memory API alone: a chat-completions client pointed here learns why nothing answers
        app.add_api_route("/v1/chat/completions", no_upstream, methods=["POST"], include_in_schema=False)
    return BodyLimit(app, max_body_bytes)


def _add_guards(app: FastAPI, token: bool) -> None:
    """The origin guard (integrations/origin.py; ``token``: whether a bearer token is required), and the error
    handlers: every error becomes ``{"error": one line}``: 400 bad input, 401 / 404 / 405 / 429 from the router or
    ``_authorize``, 404 no database, 422 an invalid body, 503 the database unavailable, 500 anything else."""
    app.add_middleware(
        OriginGuard,
        token=token,
        json_path=lambda path: path.startswith(JSON_PATHS),
        respond=lambda status, message: JSONResponse({"error": message}, status_code=status),
    )
    app.add_exception_handler(StarletteHTTPException, _http_error)  # ours (401) and the router's (404 path, 405)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(NoDatabaseError, _no_db)
    app.add_exception_handler(DatabaseUnavailableError, _unavailable)  # the server down or the connection lost
    for bad_input in (LanternError, ValueError, TypeError):  # the caller's input, said in one line
        app.add_exception_handler(bad_input, _bad_input)
    app.add_exception_handler(Exception, _internal)


_bearer = HTTPBearer(auto_error=False)


def _authorize(request: Request, creds: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> None:
    """Every request's check of ``app.state.token`` (None: none needed): 401 on a missing or wrong bearer token,
    429 with Retry-After (seconds) while the client address has too many wrong tokens (``app.state.failures``)."""
    token, failures = request.app.state.token, request.app.state.failures
    if token is None:
        return
    client = request.client.host if request.client else ""
    if creds is not None and (wait := failures.wait(client)):
        retry = str(int(wait) + 1)
        raise HTTPException(429, f"too many wrong tokens: try again in {retry} s", headers={"Retry-After": retry})
    if creds is None or not secrets.compare_digest(creds.credentials.encode(), token.encode()):
        if creds is not None:
            failures.failed(client)
        raise HTTPException(401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})


@asynccontextmanager
async def _lifespan(app: FastAPI):
    yield
    forwarder = getattr(app.state, "forwarder", None)
    if forwarder is not None:
        await forwarder.aclose()
    app.state.service.close()


async def _http_error(request: Request, e: StarletteHTTPException) -> JSONResponse:
    return JSONResponse({"error": str(e.detail)}, status_code=e.status_code, headers=e.headers)


async def _invalid(request: Request, e: RequestValidationError) -> JSONResponse:
    return JSONResponse({"error": invalid_body_message(request.url.path, e.errors())}, status_code=422)


async def _no_db(request: Request, e: NoDatabaseError) -> JSONResponse:
    return JSONResponse({"error": str(e)}, status_code=404)


async def _unavailable(request: Request, e: DatabaseUnavailableError) -> JSONResponse:  # retry later
    return JSONResponse({"error": str(e)}, status_code=503)


async def _bad_input(request: Request, e: Exception) -> JSONResponse:
    return JSONResponse({"error": str(e)}, status_code=400)


async def _internal(request: Request, e: Exception) -> JSONResponse:
    log.exception("internal error on %s", request.url.path)
    return JSONResponse({"error": f"internal error {type(e).__name__}"}, status_code=500)


# the memory API's routes, over ``app.state.service``; plain `def` endpoints run in the threadpool, MemoryService
# serializes them with its lock
memory_routes = APIRouter()


def _service(request: Request) -> MemoryService:
    return request.app.state.service


@memory_routes.post("/v1/memory/archive", response_model=ArchiveResponse, responses=ERRORS, tags=["memory"])
def archive(request: Request, req: ArchiveRequest) -> dict[str, Any]:
    """Archive conversation turns in one transaction (already archived turns count as duplicates).
    Secrets are redacted before anything is stored."""
    return _service(request).archive(req.messages, req.session, req.user, req.agent, req.project)


@memory_routes.post(
    "/v1/memory/recover",
    response_model=RecoverResponse,
    responses={**ERRORS, 404: {"model": ErrorResponse}},
    tags=["memory"],
)
def recover(request: Request, req: RecoverRequest) -> dict[str, Any]:
    """The block of archived turns to inject after a compaction."""
    return _service(request).recover(req.query, req.session, req.budget, req.exclude, req.user, req.agent, req.project)


@memory_routes.post(
    "/v1/memory/recover_compaction",
    response_model=CompactionRecoverResponse,
    responses={**ERRORS, 404: {"model": ErrorResponse}},
    tags=["memory"],
)
def recover_compaction(request: Request, req: CompactionRecoverRequest) -> dict[str, Any]:
    """What a compaction lost, as the block to inject after it (Lantern.recover_compaction)."""
    return _service(request).recover_compaction(
        req.summary, req.session, req.budget, req.live, req.user, req.agent, req.project
    )


@memory_routes.post(
    "/v1/memory/search",
    response_model=SearchResponse,
    responses={**ERRORS, 404: {"model": ErrorResponse}},
    tags=["memory"],
)
def search(request: Request, req: SearchRequest) -> dict[str, Any]:
    """Top k archived turns by fused score, with each signal's rank."""
    return _service(request).search(req.query, req.k, req.session, req.user, req.agent, req.project)


@memory_routes.post(
    "/v1/memory/forget",
    response_model=ForgetResponse,
    responses={**ERRORS, 404: {"model": ErrorResponse}},
    tags=["memory"],
)
def forget(request: Request, req: ForgetRequest) -> dict[str, Any]:
    """Delete one entry, a whole session, or everything of a user / agent / project from every table, once
    confirmed: without ``confirm`` nothing is deleted and the reply gives ``would_forget`` and a ``confirm`` token
    (integrations/service.py ``MemoryService.forget``)."""
    return _service(request).forget(req.entry, req.session, req.user, req.agent, req.project, req.confirm)


@memory_routes.post(
    "/v1/memory/feedback",
    response_model=FeedbackResponse,
    responses={**ERRORS, 404: {"model": ErrorResponse}},
    tags=["memory"],
)
def feedback(request: Request, req: FeedbackRequest) -> dict[str, Any]:
    """Whether recovered entries were useful (their success rate σ)."""
    return _service(request).feedback(req.entry_ids, req.useful, req.user, req.agent, req.project)


@memory_routes.get(
    "/v1/memory/stats",
    response_model=StatsResponse,
    responses={**ERRORS, 404: {"model": ErrorResponse}},
    tags=["memory"],
)
def stats(
    request: Request, user: str | None = None, agent: str | None = None, project: str | None = None
) -> dict[str, Any]:
    """Entries, sessions, text characters, pruned entries and pending recoveries of one user (query ``user``,
    default the default user; ``agent`` / ``project`` filter), embedder, schema version."""
    return _service(request).stats(user, agent, project)


def no_upstream() -> JSONResponse:
    """``/v1/chat/completions`` without an upstream: 404 saying this server has only the memory API."""
    return JSONResponse(
        {
            "error": "no upstream: this server has only the memory API (/v1/memory/...); start "
            "lantern serve --upstream URL to proxy chat completions"
        },
        status_code=404,
    )


class BodyLimit:
    """ASGI middleware: a request body over ``limit`` bytes gets 413 before the app sees it, whether announced by
    Content-Length or sent chunked. The body (at most ``limit`` bytes) is buffered and replayed to the app."""

    def __init__(self, app: FastAPI, limit: int):
        self.app, self.limit = app, limit

    def __getattr__(self, name: str) -> Any:  # .state, .openapi(), .routes ... of the wrapped app
        return getattr(self.app, name)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                too_big = int(declared) > self.limit
            except ValueError:
                return await _reply(send, 400, "bad Content-Length")
            if too_big:
                return await _reply(send, 413, f"request body over {self.limit} bytes")
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                return await _reply(send, 413, f"request body over {self.limit} bytes")
            chunks.append(chunk)
            more = message.get("more_body", False)
        body, replayed = b"".join(chunks), False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _reply(send, status: int, error: str) -> None:
    import json

    payload = json.dumps({"error": error}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("lantern-memory")
    except Exception:
        return "0"


def serve(
    path: str | os.PathLike[str] | None = None,
    embedder: str | None = None,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    upstream: str | None = None,
    upstream_timeout: float = DEFAULT_UPSTREAM_TIMEOUT,
    upstream_key: str | None = None,
    rewound: str = "skip",
    rerank: Any = None,
) -> None:
    """Run the REST API (and, with ``upstream``, the chat-completions proxy) with uvicorn until interrupted;
    arguments as ``build_app``'s."""
    import uvicorn

    app = build_app(
        path,
        embedder,
        token=token,
        max_body_bytes=max_body_bytes,
        upstream=upstream,
        upstream_timeout=upstream_timeout,
        upstream_key=upstream_key,
        rewound=rewound,
        rerank=rerank,
    )
    uvicorn.run(app, host=host, port=port, log_level="warning", proxy_headers=False)  # no trusted proxy
