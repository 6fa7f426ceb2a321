"""Lantern over HTTP (FastAPI + uvicorn, extra ``proxy``): ``lantern --db PATH serve [--host] [--port] [--token]``.

The memory REST API, JSON in and out, with its OpenAPI schema at ``/openapi.json`` (docs at ``/docs``):

    POST /v1/memory/archive   {messages, session}                -> {session, added, duplicates, skipped, ...}
    POST /v1/memory/recover   {query, session, budget, exclude}  -> {text, chars, entries}
    POST /v1/memory/search    {query, k, session}                -> {hits}
    POST /v1/memory/forget    {entry | session}                  -> {forgotten}
    GET  /v1/memory/stats                                        -> {entries, sessions, embedder, ...}

Binds 127.0.0.1 by default. With a token (``--token`` or ``LANTERN_TOKEN``) every request needs
``Authorization: Bearer TOKEN`` (else 401). Request bodies above ``max_body_bytes`` (default 8 MiB) get 413 before
anything is parsed. Bad input is a 400 or 422 with ``{"error": ...}`` (422: the schema's own validation); a read
of a database that does not exist yet is a 404; an internal error is a 500 without a traceback.

Not yet here (issue 4): the OpenAI-compatible ``/v1/chat/completions`` forwarding with compaction detection.
"""

from __future__ import annotations

import logging
import os
import secrets
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from starlette.exceptions import HTTPException as StarletteHTTPException
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field

from ..errors import LanternError
from .schemas import (ArchiveResponse, ErrorResponse, ForgetResponse, RecoverResponse, SearchResponse,
                      StatsResponse)
from .service import MAX_BUDGET, MAX_K, MemoryService, NoDatabaseError

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8765
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024  # ours: a long agent transcript with tool output fits
log = logging.getLogger("lantern.proxy")

Message = dict[str, Any]


# ---------------------------------------------------------------------------------------------- request / response
class ArchiveRequest(BaseModel):
    messages: list[Message] = Field(..., min_length=1, description=(
        "Chat messages: OpenAI ({role, content, tool_calls}; role tool with tool_call_id), Anthropic (content "
        "blocks) or plain {role, content}."))
    session: str | None = Field(None, description="Session id (default \"default\").")


class RecoverRequest(BaseModel):
    query: str = Field(..., description="The live context's tail plus the compaction summary, or a question.")
    session: str | None = Field(None, description="Only this session (default: every session).")
    budget: int = Field(6000, ge=0, le=MAX_BUDGET, description="Characters of the block.")
    exclude: list[Message | int] | None = Field(None, description=(
        "The live context (messages) and/or entry ids: turns still in it are never re-injected."))


class SearchRequest(BaseModel):
    query: str
    k: int = Field(10, ge=1, le=MAX_K)
    session: str | None = None


class ForgetRequest(BaseModel):
    entry: int | None = Field(None, description="Entry id to delete.")
    session: str | None = Field(None, description="Session whose entries to delete.")


ERRORS = {400: {"model": ErrorResponse}, 401: {"model": ErrorResponse}, 413: {"model": ErrorResponse},
          422: {"model": ErrorResponse}, 500: {"model": ErrorResponse}}


# ---------------------------------------------------------------------------------------------- the app
def build_app(
    path: str | os.PathLike[str] | None = None,
    embedder: str | None = None,
    *,
    token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    service: MemoryService | None = None,
) -> BodyLimit:
    """The ASGI app (the FastAPI app inside ``BodyLimit``; ``.app`` is the FastAPI app) over the database at
    ``path`` (default ``$LANTERN_DB`` or ``~/.lantern/lantern.db``)."""
    service = service or MemoryService(path, embedder)
    bearer = HTTPBearer(auto_error=False)

    def authorize(creds: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
        if token is None:
            return
        if creds is None or not secrets.compare_digest(creds.credentials.encode(), token.encode()):
            raise HTTPException(401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        service.close()

    app = FastAPI(
        lifespan=lifespan,
        title="Lantern memory API",
        version=_version(),
        description="Archive conversation turns; recover the specifics a compaction lost.",
        dependencies=[Depends(authorize)],
    )
    app.state.service = service

    @app.exception_handler(StarletteHTTPException)  # ours (401) and the router's (404 unknown path, 405)
    async def _http_error(request: Request, e: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(e.detail)}, status_code=e.status_code, headers=e.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, e: RequestValidationError) -> JSONResponse:
        errors = e.errors()
        first = errors[0] if errors else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return JSONResponse({"error": f"{where}: {first.get('msg', 'invalid request')}" if where else
                             first.get("msg", "invalid request")}, status_code=422)

    @app.exception_handler(NoDatabaseError)
    async def _no_db(request: Request, e: NoDatabaseError) -> JSONResponse:
        return JSONResponse({"error": str(e)}, status_code=404)

    @app.exception_handler(LanternError)
    async def _lantern(request: Request, e: LanternError) -> JSONResponse:
        return JSONResponse({"error": str(e)}, status_code=400)

    @app.exception_handler(ValueError)
    async def _value(request: Request, e: ValueError) -> JSONResponse:
        return JSONResponse({"error": str(e)}, status_code=400)

    @app.exception_handler(TypeError)
    async def _type(request: Request, e: TypeError) -> JSONResponse:
        return JSONResponse({"error": str(e)}, status_code=400)

    @app.exception_handler(Exception)
    async def _internal(request: Request, e: Exception) -> JSONResponse:
        log.exception("internal error on %s", request.url.path)
        return JSONResponse({"error": f"internal error {type(e).__name__}"}, status_code=500)

    # plain `def` endpoints run in the threadpool; MemoryService serializes them with its lock
    @app.post("/v1/memory/archive", response_model=ArchiveResponse, responses=ERRORS, tags=["memory"])
    def archive(req: ArchiveRequest) -> dict[str, Any]:
        """Archive conversation turns in one transaction (already archived turns count as duplicates).
        Secrets are redacted before anything is stored."""
        return service.archive(req.messages, req.session)

    @app.post("/v1/memory/recover", response_model=RecoverResponse, responses={**ERRORS, 404: {"model": ErrorResponse}}, tags=["memory"])
    def recover(req: RecoverRequest) -> dict[str, Any]:
        """The block of archived turns to inject after a compaction."""
        return service.recover(req.query, req.session, req.budget, req.exclude)

    @app.post("/v1/memory/search", response_model=SearchResponse, responses={**ERRORS, 404: {"model": ErrorResponse}}, tags=["memory"])
    def search(req: SearchRequest) -> dict[str, Any]:
        """Top k archived turns by fused score, with each signal's rank."""
        return service.search(req.query, req.k, req.session)

    @app.post("/v1/memory/forget", response_model=ForgetResponse, responses={**ERRORS, 404: {"model": ErrorResponse}}, tags=["memory"])
    def forget(req: ForgetRequest) -> dict[str, Any]:
        """Delete one entry or a whole session from every table (exactly one of entry or session)."""
        return service.forget(req.entry, req.session)

    @app.get("/v1/memory/stats", response_model=StatsResponse, responses={**ERRORS, 404: {"model": ErrorResponse}}, tags=["memory"])
    def stats() -> dict[str, Any]:
        """Entries, sessions, embedder, database size."""
        return service.stats()

    return BodyLimit(app, max_body_bytes)


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
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("lantern-memory")
    except Exception:
        return "0"


def serve(path: str | os.PathLike[str] | None = None, embedder: str | None = None, *, host: str = DEFAULT_HOST,
          port: int = DEFAULT_PORT, token: str | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
    """Run the REST API with uvicorn until interrupted."""
    import uvicorn

    app = build_app(path, embedder, token=token, max_body_bytes=max_body_bytes)
    uvicorn.run(app, host=host, port=port, log_level="warning")
