"""The inspector's web app (FastAPI, server-rendered Jinja2 templates, extra ``ui``): ``lantern --db DB ui``.

Pages (all GET, read only, except forget):

    /                     sessions per user, searchable (name or text), counts and time spans; recent events
    /session?s=S&user=U   a session's timeline: turns, tool calls (long output folded), labels, compaction events
    /event/ID             one compaction: the lost turns beside what was injected, recovered or not
    /explain?q=...        Lantern.explain: ranks per signal, RRF, MMR order, verdicts, the block as injected
    /facts                fact versions on a time axis, as of a time
    /stats                counts; entries per day, bytes per table, recoveries per day
    /forget?entry=ID | /forget?s=S&user=U    a confirmation page; POST /forget does it (Lantern.forget)

Security: loopback only unless a token is given (``lantern serve``'s rule, integrations/service.py ``is_loopback``).
Every request first passes the local servers' rule (integrations/origin.py): without a token a Host that is not a
loopback name or an IP address is refused (421: a DNS-rebinding page cannot read the archive), and a request the
browser marks as cross-site is refused (403). With a token, every request needs it: ``Authorization: Bearer TOKEN``,
or the cookie a visit of ``/?token=TOKEN`` (or the login form) sets (HttpOnly, SameSite=Strict). The one write,
forget, is a POST that must carry this process's random CSRF token (a hidden form field) and come from the same
origin (Origin, else Referer). Every page is rendered with Jinja2 autoescaping: archived text is text, never markup.
Every response carries ``CSP``: no script at all, nothing from another origin; and ``Cache-Control: no-store``.
"""

from __future__ import annotations

import os
import secrets
import threading
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader
from starlette.exceptions import HTTPException as StarletteHTTPException

from lantern.errors import LanternError
from lantern.integrations import origin
from lantern.integrations.origin import OriginGuard
from lantern.integrations.service import is_loopback
from lantern.integrations.tokens import FailureLimit
from lantern.integrations.ui import charts, views

HERE = Path(__file__).parent
CSP = (
    "default-src 'none'; script-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # same-origin POSTs keep their Origin; nothing leaks to other sites
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",  # archived text is not kept in the browser's disk cache
}
COOKIE = "lantern_ui_token"
PAGE_TURNS = 200  # turns per timeline page (ours)
PAGE_SESSIONS = 50  # sessions per page of the sessions list (ours)
PAGE_EVENTS = 100  # compactions per page of the compactions list (ours)
PAGE_FACT_KEYS = 40  # fact keys per page of the facts page: its time axis has one row per key (ours)
MAX_PAGE_NO = 10**9  # ours: a page number past it is that page (an OFFSET SQLite can hold), not an error
EXPLAIN_ROWS = 60  # candidates listed by explain unless all=1 (ours): packed ones come first
MAX_FORM_BYTES = 64 * 1024

_env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True, trim_blocks=True, lstrip_blocks=True)


def _when(value: datetime | None, seconds: bool = False) -> str:
    if value is None:
        return "–"
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def _span(first: datetime | None, last: datetime | None) -> str:
    if first is None or last is None:
        return ""
    s = (last - first).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= size:
            return f"{s / size:.1f} {unit}".replace(".0 ", " ")
    return f"{s:.0f} s"


def _url(path: str, **params: Any) -> str:
    kept = {k: v for k, v in params.items() if v is not None}
    return path + ("?" + urlencode(kept) if kept else "")


_env.filters["when"] = _when
_env.globals.update(span=_span, url=_url, charts=charts, scope_id=views.scope_id)


class _State:
    """One inspector's state (``app.state.ui``): its database (opened on the first page), the lock every page holds
    while it reads, the CSRF token of its forms, the token every request needs (None: loopback only) and the
    limit on wrong tokens."""

    def __init__(self, path: Path, embedder: str | None, token: str | None = None, failures: Any = None):
        self.path, self.embedder = path, embedder
        self.token, self.failures = token, failures or FailureLimit()
        self.lock = threading.RLock()
        self.csrf = secrets.token_urlsafe(32)
        self._lantern = None

    def lantern(self):
        if self._lantern is None:
            from lantern.api import Lantern
            from lantern.config import is_server_url

            if not is_server_url(self.path) and not Path(self.path).exists():
                raise LanternError(f"no database at {self.path}: archive something first (lantern ingest FILE)")
            lantern = Lantern(self.path, embedder=self.embedder)
            try:
                lantern.require("lantern ui")  # its pages read SQLite-only views (store/overview.py)
            except LanternError:
                lantern.close()
                raise
            self._lantern = lantern
        return self._lantern

    def close(self) -> None:
        with self.lock:
            if self._lantern is not None:
                self._lantern.close()
                self._lantern = None


def build_app(
    path: str | os.PathLike[str] | None = None,
    embedder: str | None = None,
    *,
    token: str | None = None,
    failures: FailureLimit | None = None,
) -> FastAPI:
    """The inspector over the database at ``path`` (default ``$LANTERN_DB`` or ``~/.lantern/lantern.db``; never
    created). ``token``: required of every request (see the module docstring); without one, only requests to a
    loopback Host name are served. ``failures``: the limit on wrong tokens per client address (default
    ``integrations/tokens.py``'s: 10 a minute, then 429)."""
    from lantern.config import default_db_path

    app = FastAPI(lifespan=_lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.ui = _State(Path(path) if path is not None else default_db_path(), embedder, token, failures)
    app.add_exception_handler(StarletteHTTPException, _http_error)  # an unknown path (404), a wrong method (405)
    app.add_exception_handler(RequestValidationError, _invalid)  # a parameter of the wrong type (/event/abc)
    for bad_input in (LanternError, ValueError, TypeError):  # the request's input, or no database: said in one line
        app.add_exception_handler(bad_input, _bad_input)
    app.middleware("http")(_guard)
    # added last, so outermost: a rebinding or cross-site request is refused before anything else
    app.add_middleware(OriginGuard, token=token is not None, respond=_refused)
    app.include_router(routes)
    return app


@asynccontextmanager
async def _lifespan(app: FastAPI):
    yield
    app.state.ui.close()


routes = APIRouter()


def _ui(request: Request) -> _State:
    return request.app.state.ui


def page(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    """The template ``name`` rendered for ``request`` (with the CSRF token and the nav entry)."""
    html = _env.get_template(name).render(request=request, csrf=_ui(request).csrf, nav=name.split(".")[0], **context)
    return HTMLResponse(html, status_code=status)


def error(request: Request, status: int, message: str) -> HTMLResponse:
    return page(request, "error.html", status=status, status_code=status, message=message)


async def _http_error(request: Request, e: StarletteHTTPException) -> HTMLResponse:
    return error(request, e.status_code, str(e.detail))


async def _invalid(request: Request, e: RequestValidationError) -> HTMLResponse:
    where = ", ".join(".".join(str(x) for x in err.get("loc", ())[1:]) for err in e.errors())
    return error(request, 400, f"bad parameter: {where}")


async def _bad_input(request: Request, e: Exception) -> HTMLResponse:
    return error(request, 400, str(e))


def _refused(status: int, message: str) -> HTMLResponse:  # no request object: a bare page with the headers
    return HTMLResponse(message, status_code=status, headers=HEADERS)


def _authorized(request: Request) -> bool:
    token = _ui(request).token
    if token is None:
        return True
    given = request.cookies.get(COOKIE, "")
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        given = auth[7:].strip()
    return bool(given) and secrets.compare_digest(given.encode(), token.encode())


def _same_origin(request: Request) -> bool:  # the forms' POSTs: Origin, else Referer, must be ours
    return origin.same_origin(request.headers, request.url.scheme)


def _client(request: Request) -> str:
    return request.client.host if request.client else ""


def _presents_token(request: Request) -> bool:
    return bool(
        request.cookies.get(COOKIE)
        or request.headers.get("authorization")
        or request.query_params.get("token")
        or (request.method == "POST" and request.url.path == "/login")
    )


async def _guard(request: Request, call_next):
    """Every request: too many wrong tokens from its address (429), no token where one is needed (the login page,
    401; a right ``?token=`` sets the cookie and redirects), else the page; then the security headers."""
    ui = _ui(request)
    token, failures = ui.token, ui.failures
    wait = failures.wait(_client(request)) if token is not None and _presents_token(request) else 0.0
    if wait:  # too many wrong tokens from this address (integrations/tokens.py): no token is checked
        response: Response = error(request, 429, f"too many wrong tokens: try again in {int(wait) + 1} s")
        response.headers["Retry-After"] = str(int(wait) + 1)
    elif not _authorized(request) and request.url.path not in ("/login", "/static/ui.css"):
        given = request.query_params.get("token")
        if request.method == "GET" and given and secrets.compare_digest(given.encode(), token.encode()):
            rest = {k: v for k, v in request.query_params.multi_items() if k != "token"}
            response = RedirectResponse(_url(request.url.path, **rest), status_code=303)
            _set_cookie(response, token)
        else:
            if _presents_token(request):
                failures.failed(_client(request))
            response = page(request, "login.html", status=401, failed=bool(given))
    else:
        response = await call_next(request)
    for k, v in HEADERS.items():
        response.headers[k] = v
    return response


async def _form(request: Request) -> dict[str, str] | None:
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        return None
    try:
        return {k: v[0] for k, v in parse_qs(body.decode("utf-8"), keep_blank_values=True).items()}
    except UnicodeDecodeError:
        return None


@routes.post("/login")
async def login(request: Request):
    token = _ui(request).token
    if token is None:
        return RedirectResponse("/", status_code=303)
    fields = await _form(request)
    if not _same_origin(request) or fields is None:
        return error(request, 403, "cross-origin request refused")
    given = fields.get("token", "")
    if not secrets.compare_digest(given.encode(), token.encode()):
        _ui(request).failures.failed(_client(request))
        return page(request, "login.html", status=401, failed=True)
    response = RedirectResponse("/", status_code=303)
    _set_cookie(response, token)
    return response


@routes.get("/login")
def login_form(request: Request):
    return RedirectResponse("/", status_code=303) if _authorized(request) else page(request, "login.html")


@routes.get("/static/ui.css")
def css() -> Response:
    return Response((HERE / "static" / "ui.css").read_bytes(), media_type="text/css; charset=utf-8")


@routes.get("/", response_class=HTMLResponse)
def sessions(request: Request, q: str = "", forgotten: int | None = None, page_no: int = 0):
    page_no = _page_no(page_no)
    state = _ui(request)
    with state.lock:
        lt = state.lantern()
        rows = lt.store.session_overview(q.strip() or None, PAGE_SESSIONS + 1, page_no * PAGE_SESSIONS)
        recent = lt.store.events(limit=8)
        stats = lt.store.stats()
    more, rows = len(rows) > PAGE_SESSIONS, rows[:PAGE_SESSIONS]
    users: dict[str, list] = {}
    for r in rows:  # newest first; a page's rows grouped by user in the order their users first appear
        users.setdefault(r.user, []).append(r)
    return page(
        request,
        "sessions.html",
        q=q,
        users=users,
        recent=recent,
        stats=stats,
        forgotten=forgotten,
        paging=_pager("/", page_no, more, page_no * PAGE_SESSIONS, len(rows), q=q or None),
    )


@routes.get("/session", response_class=HTMLResponse)
def session(request: Request, s: str, user: str = "", page_no: int = 0):
    state = _ui(request)
    with state.lock:
        items, events = views.timeline(state.lantern(), s, user)
    if not items:
        return error(request, 404, f"no session {s!r} for user {user!r}")
    pages = max(1, -(-len(items) // PAGE_TURNS))
    page_no = min(max(page_no, 0), pages - 1)
    shown = items[page_no * PAGE_TURNS : (page_no + 1) * PAGE_TURNS]
    turns = sum(1 for i in items if i.entry is not None)
    mixed = len({i.entry.session for i in items if i.entry is not None}) > 1
    return page(
        request,
        "session.html",
        s=s,
        user=user,
        items=shown,
        events=events,
        turns=turns,
        mixed=mixed,
        page_no=page_no,
        pages=pages,
    )


@routes.get("/event/{event_id}", response_class=HTMLResponse)
def event(request: Request, event_id: int):
    state = _ui(request)
    with state.lock:
        view = views.event_view(state.lantern(), event_id)
    if view is None:
        return error(request, 404, f"no compaction event {event_id} (forgotten, or never recorded)")
    return page(request, "event.html", v=view, ev=view.event)


@routes.get("/events", response_class=HTMLResponse)
def events(request: Request, page_no: int = 0):
    page_no = _page_no(page_no)
    state = _ui(request)
    with state.lock:
        store = state.lantern().store
        rows = store.events(limit=PAGE_EVENTS, offset=page_no * PAGE_EVENTS)
        total = store.event_count()
    more = (page_no + 1) * PAGE_EVENTS < total
    paging = _pager("/events", page_no, more, page_no * PAGE_EVENTS, len(rows), total=total)
    return page(request, "events.html", rows=rows, paging=paging)


@routes.get("/explain", response_class=HTMLResponse)
def explain(
    request: Request,
    q: str = "",
    s: str = "",
    user: str = "",
    budget: str = "",
    as_of: str = "",
    event: int | None = None,
    all: int = 0,
    scope: str = "",
    min_score: str = "",
):
    if scope:  # the form's opaque target (views.scope_id): the names as the page had them
        found, user = views.scope_of(scope)
        s = found or ""
    exclude: list[int] = []
    proactive, ev, agent, project = False, None, None, None
    state = _ui(request)
    with state.lock:
        lt = state.lantern()
        if event is not None:
            view = views.event_view(lt, event)
            if view is None:
                return error(request, 404, f"no compaction event {event}")
            ev = view.event
            q, s, user, agent, project = ev.query, ev.session, ev.user, ev.agent, ev.project
            budget = budget or str(ev.budget)
            exclude, proactive = views.live_at(lt, ev), True
        result = None
        if q.strip():
            try:
                n = int(budget) if budget.strip() else None
                when = _as_of(as_of)
                floor = float(min_score) if min_score.strip() else None
            except ValueError as e:
                return error(request, 400, f"bad input: {e}")
            scoped = {"user": user, "agent": agent, "project": project, "min_score": floor}
            rec = lt.explain(q, session=s or None, budget=n, exclude=exclude, as_of=when, proactive=proactive, **scoped)
            result = views.explained(rec, lt.config)
        default_budget, default_floor = lt.config.budget, 0.0 if proactive else lt.config.min_score
    return page(
        request,
        "explain.html",
        q=q,
        s=s,
        user=user,
        budget=budget,
        as_of=as_of,
        ev=ev,
        excluded=len(exclude),
        result=result,
        shown=None if all or result is None else EXPLAIN_ROWS,
        all_url=_url(
            "/explain", q=q, s=s, user=user, budget=budget, as_of=as_of, event=event, min_score=min_score, all=1
        ),
        default_budget=default_budget,
        min_score=min_score,
        default_floor=default_floor,
    )


@routes.get("/facts", response_class=HTMLResponse)
def facts(request: Request, user: str = "", as_of: str = "", key: str = "", scope: str = "", page_no: int = 0):
    if scope:
        user = views.scope_of(scope)[1]
    try:
        when = _as_of(as_of)
    except ValueError as e:
        return error(request, 400, f"bad input: {e}")
    state = _ui(request)
    with state.lock:
        records = state.lantern().facts(key.strip() or None, when, history=True, user=user)
    page_no = _page_no(page_no)
    shown = views.fact_page(records, when, page_no, PAGE_FACT_KEYS)
    more = (page_no + 1) * PAGE_FACT_KEYS < shown.total
    return page(
        request,
        "facts.html",
        user=user,
        as_of=as_of,
        key=key,
        records=shown.records,
        axis=charts.fact_axis(shown.keys, shown.start, shown.end, when),
        paging=_pager(
            "/facts",
            page_no,
            more,
            page_no * PAGE_FACT_KEYS,
            len(shown.keys),
            shown.total,
            user=user or None,
            as_of=as_of or None,
            key=key or None,
        ),
    )


@routes.get("/stats", response_class=HTMLResponse)
def stats(request: Request):
    state = _ui(request)
    with state.lock:
        lt = state.lantern()
        s = lt.stats()
        per_day = lt.store.entries_per_day()
        sizes = lt.store.table_bytes()
        recoveries = lt.store.events_per_day()
        totals = [(e.lost, e.recovered) for e in lt.store.events()]
    return page(
        request,
        "stats.html",
        s=s,
        entries_chart=charts.bar_chart(views.per_day(per_day), "entries per day", width=600),
        sizes=views.table_sizes(sizes, s["database_bytes"]) if sizes is not None else None,
        recoveries_chart=charts.bar_chart(views.per_day(recoveries), "recoveries per day", width=600),
        events=len(totals),
        lost=sum(len(a) for a, _ in totals),
        recovered=sum(len(b) for _, b in totals),
    )


@routes.get("/forget", response_class=HTMLResponse)
def forget_confirm(request: Request, entry: int | None = None, s: str | None = None, user: str = ""):
    state = _ui(request)
    with state.lock:
        lt = state.lantern()
        if entry is not None:
            found = lt.store.entries([entry]).get(entry)
            if found is None:
                return error(request, 404, f"no entry {entry}")
            return page(request, "forget.html", entry=found, s=None, user=found.user, count=1)
        if s:
            count = len(views.session_entries(lt, s, user))
            if not count:
                return error(request, 404, f"no session {s!r} for user {user!r}")
            return page(request, "forget.html", entry=None, s=s, user=user, count=count)
    return error(request, 400, "give entry= or s= (a session)")


@routes.post("/forget")
async def forget(request: Request):
    state = _ui(request)
    fields = await _form(request)
    if fields is None or not _same_origin(request):
        return error(request, 403, "cross-origin request refused")
    if not secrets.compare_digest(fields.get("csrf", "").encode(), state.csrf.encode()):
        return error(request, 403, "missing or stale form token: reload the confirmation page and confirm again")
    from starlette.concurrency import run_in_threadpool

    n = await run_in_threadpool(_forget, state, fields)
    if isinstance(n, str):
        return error(request, 400, n)
    return RedirectResponse(_url("/", forgotten=n), status_code=303)


def _forget(state: _State, fields: dict[str, str]) -> int | str:
    """The confirmed forget of one entry or one session (its opaque scope id): the entries forgotten, or what is
    wrong with the form."""
    with state.lock:
        lt = state.lantern()
        if fields.get("entry"):
            try:
                entry = int(fields["entry"])
            except ValueError:
                return "bad entry id"
            found = lt.store.entries([entry], text=False, tags=False).get(entry)
            return lt.forget(entry=entry, user=found.user) if found is not None else 0
        if fields.get("scope"):  # an opaque id (views.scope_id): never a name a browser may rewrite
            try:
                session, user = views.scope_of(fields["scope"])
            except ValueError as e:
                return str(e)
            if session:
                return lt.forget(session=session, user=user)
        return "give an entry or a session"


def _page_no(page_no: int) -> int:
    """A list page's number from the query, held to [0, ``MAX_PAGE_NO``]."""
    return min(max(page_no, 0), MAX_PAGE_NO)


def _pager(
    path: str, page_no: int, more: bool, first: int, shown: int, total: int | None = None, **params: Any
) -> dict[str, Any] | None:
    """A list page's links (newest first): ``newer`` (the page before, None on the first), ``older`` (None on the
    last), the 1-based range shown and the ``total`` when known; None when everything fits on one page."""
    if page_no == 0 and not more:
        return None
    return ({"total": total} if total is not None else {}) | {
        "newer": _url(path, **params, page_no=page_no - 1 or None) if page_no > 0 else None,
        "older": _url(path, **params, page_no=page_no + 1) if more else None,
        "first": first + 1 if shown else first,
        "last": first + shown,
    }


def _set_cookie(response: Response, token: str) -> None:
    response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")


def _as_of(value: str) -> datetime | None:
    """An as-of field (``datetime-local``: ``YYYY-MM-DDTHH:MM``, or any ISO 8601; naive = UTC); "" is None."""
    value = value.strip()
    if not value:
        return None
    when = datetime.fromisoformat(value)
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def serve(
    path: str | os.PathLike[str] | None = None,
    embedder: str | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8766,
    token: str | None = None,
) -> None:
    """Run the inspector with uvicorn until interrupted. Refuses a host that is not loopback without a token."""
    import uvicorn

    if token is None and not is_loopback(host):
        raise LanternError(f"serving {host} needs --token: the inspector shows the whole archive")
    uvicorn.run(  # no trusted proxy: the client is the socket's peer, X-Forwarded-For is not read
        build_app(path, embedder, token=token), host=host, port=port, log_level="warning", proxy_headers=False
    )
