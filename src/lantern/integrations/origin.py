"""The one rule every local HTTP server of Lantern (``lantern serve``: the memory REST API and the chat proxy;
``lantern ui``: the inspector) applies to every request before anything else: a web page open in the user's own
browser must not read or write the memory through it.

Two attacks, refused by the rule:

- **DNS rebinding**: a page on ``attacker.example`` re-points its name at 127.0.0.1 and talks to the server as
  "same-origin"; its requests carry ``Host: attacker.example``. Without a token, a request's Host must be a
  loopback name (``localhost``, 127.0.0.0/8, ``[::1]``) or an IP address: a rebinding page always names its own
  domain (an IP literal cannot be rebound). 421 Misdirected Request otherwise. With a token the Host is not checked:
  a rebound page has neither the token nor its cookie (cookies are kept per host name).
- **Cross-site requests** (CSRF): a page on another origin can send a POST without a CORS preflight when its
  content type is ``text/plain``, ``multipart/form-data``, ``application/x-www-form-urlencoded`` or absent. Refused
  (403) when the browser says the request is cross-site: an ``Origin`` header other than this server's own
  (``null`` included), or ``Sec-Fetch-Site: cross-site | same-site``. A GET or HEAD that is a top-level navigation
  (``Sec-Fetch-Mode: navigate``: a link the user followed) is served: its answer goes to the user, not the page.
  And a POST, PUT or PATCH to a JSON endpoint must say ``Content-Type: application/json`` (or ``application/*+json``),
  else 415: no CORS-simple request reaches a JSON endpoint, whatever the browser sends.

Clients that are not browsers (the OpenAI and Anthropic SDKs, curl, the MCP and hook processes) send neither
``Origin`` nor ``Sec-Fetch-*`` and are unaffected. Sources: the Fetch standard's CORS-safelisted request headers
(https://fetch.spec.whatwg.org/#cors-safelisted-request-header), Fetch Metadata
(https://www.w3.org/TR/fetch-metadata/), RFC 9110 §15.5.20 (421).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from typing import Any

from lantern.integrations.service import is_loopback

CROSS_SITE = ("cross-site", "same-site")  # Sec-Fetch-Site values of a request from another origin
JSON_TYPES = ("application/json",)  # and any application/*+json (RFC 6839)


# RFC 9110 §7.2: Host = uri-host [ ":" port ]; uri-host an IP literal in brackets (RFC 3986 §3.2.2), an IPv4
# address or a DNS name (letters, digits, "-", "_" and dots: what a browser sends; the rest of reg-name is refused),
# the port digits only. Nothing else may follow: ``localhost:80@evil``, ``[::1].evil`` are no host.
_HOST = re.compile(r"(?:\[(?P<literal>[0-9a-f:.]+)\]|(?P<name>[a-z0-9_.-]+))(?::[0-9]{0,5})?")


def host_name(host: str) -> str:
    """The name of a ``Host`` header value, without its port, lower-cased: ``[::1]:8765`` -> ``::1``,
    ``localhost:80`` -> ``localhost``; "" for a value that is not exactly a host and an optional port (``_HOST``:
    anything after them, user info, a bracketed literal that is not an IPv6 address), which no check accepts."""
    found = _HOST.fullmatch(host.strip().lower())
    if found is None:
        return ""
    literal = found.group("literal")
    if literal is not None:
        try:
            return literal if ipaddress.ip_address(literal).version == 6 else ""
        except ValueError:
            return ""
    return found.group("name")


def is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def foreign_host(host: str, token: bool) -> bool:
    """Whether a request's ``Host`` value is refused: without a token, anything but a loopback name or an IP
    address (an empty or missing Host included)."""
    if token:
        return False
    name = host_name(host)
    return not (is_loopback(name) or is_ip(name))


def same_origin(headers: Mapping[str, str], scheme: str) -> bool:
    """Whether ``Origin`` (else ``Referer``) is this server's own origin (``scheme://Host``). A request with
    neither is not known to be same-origin (the inspector's forms require one of them)."""
    expected = f"{scheme}://{headers.get('host', '')}".lower()
    origin = headers.get("origin")
    if origin is not None:
        return origin.strip().lower() == expected
    referer = headers.get("referer")
    return referer is not None and (referer.lower() == expected or referer.lower().startswith(expected + "/"))


def cross_site(method: str, headers: Mapping[str, str], scheme: str) -> bool:
    """Whether the browser marks the request as coming from another origin (see the module docstring): a foreign or
    ``null`` ``Origin``, or ``Sec-Fetch-Site`` cross-site / same-site; a GET or HEAD navigation is not refused."""
    if method in ("GET", "HEAD") and headers.get("sec-fetch-mode", "").lower() == "navigate":
        return False
    if headers.get("origin") is not None and not same_origin(headers, scheme):
        return True
    return headers.get("sec-fetch-site", "").strip().lower() in CROSS_SITE


def is_json(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` value is JSON: ``application/json`` or ``application/*+json``, any parameters."""
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media in JSON_TYPES or (media.startswith("application/") and media.endswith("+json"))


def refusal(
    method: str, path: str, headers: Mapping[str, str], scheme: str, *, token: bool, json_path: Callable[[str], bool]
) -> tuple[int, str] | None:
    """``(status, message)`` when the rule refuses the request, else None. ``headers``: lower-case names;
    ``json_path(path)``: whether the path's POST / PUT / PATCH body is JSON."""
    if foreign_host(headers.get("host", ""), token):
        return 421, (
            "Host not allowed: without a token this server answers only to a loopback name (127.0.0.1, "
            "localhost, [::1]) or an IP address."
        )
    if cross_site(method, headers, scheme):
        return 403, "cross-origin request refused: a page on another site may not use this server"
    if method in ("POST", "PUT", "PATCH") and json_path(path) and not is_json(headers.get("content-type")):
        return 415, "this endpoint takes a JSON body: send Content-Type: application/json"
    return None


class OriginGuard:
    """ASGI middleware applying ``refusal`` to every HTTP request (``app.add_middleware(OriginGuard, token=...,
    json_path=..., respond=...)``). ``respond(status, message)``: the refusal's response (a Starlette
    ``Response``: JSON for the REST API, an HTML page for the inspector)."""

    def __init__(
        self,
        app: Any,
        *,
        token: bool,
        respond: Callable[[int, str], Any],
        json_path: Callable[[str], bool] = lambda path: False,
    ):
        self.app, self.token, self.respond, self.json_path = app, token, respond, json_path

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            headers: dict[str, str] = {}
            for k, v in scope.get("headers") or []:
                name = k.decode("latin-1").lower()
                # a repeated Host or Origin is ambiguous: keep a value that cannot match
                headers[name] = "\x00" if name in headers and name in ("host", "origin") else v.decode("latin-1")
            refused = refusal(
                scope["method"],
                scope.get("path", ""),
                headers,
                scope.get("scheme", "http"),
                token=self.token,
                json_path=self.json_path,
            )
            if refused is not None:
                response = self.respond(*refused)
                return await response(scope, receive, send)
        return await self.app(scope, receive, send)
