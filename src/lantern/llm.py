"""The LLM half's one client: an OpenAI-compatible ``POST {base_url}/chat/completions`` endpoint
(docs/architecture.md §8).

Off unless configured. Every LLM use of Lantern — the rerank stage (recover/rerank.py), the memory agent
(memory/agent.py), the LLM gist (memory/context.py), the evaluation's answer accuracy and LLM summaries — goes
through ``LLMClient`` with the settings of one place, ``LLMSettings``:

=============  ===================================  ======================  ===============================
setting        Config field                         environment variable    CLI option
=============  ===================================  ======================  ===============================
base URL       ``llm_base_url`` (``.../v1``)        ``LANTERN_LLM_BASE_URL``  ``--llm-base-url URL``
model          ``llm_model``                        ``LANTERN_LLM_MODEL``     ``--llm-model NAME``
API key        never stored: read at each request   ``LANTERN_LLM_API_KEY``   —
timeout        ``llm_timeout_s`` (seconds)          ``LANTERN_LLM_TIMEOUT``   —
max tokens     ``llm_max_tokens`` (per answer)      —                         —
JSON mode      ``llm_json_mode``                    ``LANTERN_LLM_JSON_MODE`` —
=============  ===================================  ======================  ===============================

An option given beats the environment, which beats the Config. The endpoint receives conversation text (already
redacted at archive time); the key is sent only as ``Authorization: Bearer`` to that endpoint and appears in no
repr, log line or error message. Network use: the configured URL only.

JSON mode: how an answer is constrained to a JSON schema (the rerank stage's ``{"ids": [...]}``). ``schema``: the
OpenAI API's ``response_format: {"type": "json_schema", ...}`` (OpenAI, vLLM, recent llama.cpp servers);
``object``: ``{"type": "json_object", "schema": ...}`` (llama-cpp-python's server); ``off``: none, the answer is
parsed as it comes. An endpoint that refuses a format (HTTP 400/422, or a 500 whose message names
``response_format``, ``json_schema`` or ``json_object``: llama-cpp-python's server answers ``json_schema`` with a 500)
is asked again with the next one (``schema`` -> ``object`` -> ``off``); the mode that worked is remembered for the
process's life per endpoint and model, and one warning line on the ``lantern.llm`` logger says so (never the
server's traceback).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from lantern import lazy_re
from lantern.errors import LanternError

KEY_ENV = "LANTERN_LLM_API_KEY"
URL_ENV = "LANTERN_LLM_BASE_URL"
MODEL_ENV = "LANTERN_LLM_MODEL"
TIMEOUT_ENV = "LANTERN_LLM_TIMEOUT"
JSON_MODE_ENV = "LANTERN_LLM_JSON_MODE"
JSON_MODES = ("schema", "object", "off")

log = logging.getLogger("lantern.llm")

__all__ = [
    "Completion",
    "LLMClient",
    "LLMError",
    "LLMSettings",
    "Usage",
    "endpoint",
    "parse_answer",
    "settings",
    "shown_url",
]


class LLMError(LanternError):
    """The LLM endpoint failed. ``kind``: ``"unreachable"`` (connection refused, DNS), ``"timeout"``, ``"http"``
    (a 4xx/5xx status, in ``status``) or ``"malformed"`` (no ``choices[0].message.content`` text in the answer).
    ``detail``: the endpoint's own error message (``error.message`` of an OpenAI-shaped error body, at most
    ``DETAIL_CHARS`` characters; "" when it sent none), also appended to the message; ``code``: its
    ``error.code`` ("" when none)."""

    def __init__(self, message: str, kind: str, status: int | None = None, detail: str = "", code: str = ""):
        super().__init__(f"{message}: {detail}" if detail else message)
        self.kind, self.status, self.detail, self.code = kind, status, detail, code

    @property
    def context_too_long(self) -> bool:
        """Whether the endpoint refused the request for its size: HTTP 413, or a 400 whose error is OpenAI's
        ``context_length_exceeded`` or whose message speaks of the context or the prompt's length (the wording of
        OpenAI, llama.cpp, vLLM and Anthropic: "maximum context length", "prompt is too long", "exceeds the
        context window"; a field's own limit, "string too long", is not one). The memory agent then asks again
        with a smaller context (memory/agent.py)."""
        if self.status == 413:
            return True
        return self.status == 400 and (self.code == "context_length_exceeded" or bool(_TOO_LONG.search(self.detail)))

    @property
    def refuses_format(self) -> bool:
        """Whether the endpoint refused the request's ``response_format``: HTTP 400 or 422 not about size, or a 500
        whose message names ``response_format``, ``json_schema`` or ``json_object`` (llama-cpp-python's server
        answers a ``json_schema`` format with a 500 and its validation error)."""
        if self.status in (400, 422):
            return not self.context_too_long
        return self.status == 500 and bool(_FORMAT.search(self.detail))


DETAIL_CHARS = 300  # characters of an endpoint's error message kept in LLMError (ours)
MAX_ANSWER_BYTES = 16 << 20  # ours: an endpoint's answer body read at most (a chat completion is kilobytes)
MAX_ANSWER_DEPTH = 64  # ours: JSON nesting of an answer (OpenAI's and Anthropic's shapes nest under 10)


def parse_answer(data: str | bytes, *, max_bytes: int = MAX_ANSWER_BYTES, max_depth: int = MAX_ANSWER_DEPTH) -> Any:
    """The JSON value of an answer that came over the network (an LLM's, an upstream's): the one parse of such
    text in Lantern, bounded in size and depth. Raises ValueError (never RecursionError or MemoryError) when
    ``data`` is over ``max_bytes`` bytes (characters for ``str``), is not JSON, or nests arrays/objects deeper
    than ``max_depth``. Linear in the size: the standard parser, then one walk over the containers."""
    if len(data) > max_bytes:
        raise ValueError(f"answer over {max_bytes} bytes")
    try:
        value = json.loads(data)
    except RecursionError:  # deeper than the interpreter's recursion limit
        raise ValueError(f"answer nested deeper than {max_depth} levels") from None
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > max_depth:
                    raise ValueError(f"answer nested deeper than {max_depth} levels")
                stack.append((child, depth + 1))
    return value


_TOO_LONG = lazy_re.compile(  # "too long" alone also names other fields' limits ("'messages[1].name': string too long")
    r"context (?:length|window|size)|(?:prompt|input|request|messages?|conversation) (?:is |are )?too (?:long|large)"
    r"|too many tokens|exceeds? the (?:context|max)",
    re.I,
)

_FORMAT = lazy_re.compile(r"response_format|json_schema|json_object", re.I)
# where a server's error message turns into its traceback (Python's, or the location lines FastAPI servers append)
_TRACEBACK = lazy_re.compile(r"Traceback \(most recent call last\)|\n\s*File \"")
_FORMAT_NAMES = {"schema": "json_schema", "object": "json_object", "off": "none"}
# (chat-completions URL, model) -> the JSON mode that endpoint accepted, once it refused the one configured
_MODES_IN_USE: dict[tuple[str, str], str] = {}
_MODES_LOCK = threading.Lock()


@dataclass(frozen=True)
class LLMSettings:
    """Where and how to call the LLM. ``base_url``: an OpenAI-compatible API root (``http://127.0.0.1:8080/v1``);
    ``timeout_s``: seconds per request; ``max_tokens``: the answer's cap; ``api_key_env``: the environment variable
    the key is read from at request time (the key itself is never held here)."""

    base_url: str
    model: str
    timeout_s: float = 30.0
    max_tokens: int = 256
    api_key_env: str = KEY_ENV
    json_mode: str = "schema"

    def __post_init__(self) -> None:
        if self.json_mode not in JSON_MODES:
            raise ValueError(f"json_mode must be one of {', '.join(JSON_MODES)}, got {self.json_mode!r}")

    @property
    def url(self) -> str:
        """The chat-completions URL: ``/chat/completions`` joined under the base URL's path (``endpoint``), unless
        that path already ends with it; the base URL's query kept (Azure's ``?api-version=...``)."""
        return endpoint(self.base_url, "chat/completions", once=True)

    def describe(self) -> dict[str, str]:
        """What a report may name: the endpoint and the model (never the key)."""
        return {"base_url": self.base_url, "model": self.model}


def settings(config: Any = None, base_url: str | None = None, model: str | None = None) -> LLMSettings | None:
    """The LLM settings in force: ``base_url`` / ``model`` given (CLI options), else ``$LANTERN_LLM_BASE_URL`` /
    ``$LANTERN_LLM_MODEL``, else the Config's ``llm_base_url`` / ``llm_model``. None when no base URL is set (the LLM
    half is off). Raises ValueError when a base URL is set without a model, or the timeout variable is no number."""
    url = base_url or os.environ.get(URL_ENV) or getattr(config, "llm_base_url", None)
    if not url:
        return None
    name = model or os.environ.get(MODEL_ENV) or getattr(config, "llm_model", None)
    if not name:
        raise ValueError(f"an LLM base URL is set ({url}) but no model: give --llm-model or ${MODEL_ENV}")
    timeout = getattr(config, "llm_timeout_s", 30.0)
    if os.environ.get(TIMEOUT_ENV):
        try:
            timeout = float(os.environ[TIMEOUT_ENV])
        except ValueError:
            raise ValueError(f"${TIMEOUT_ENV} must be a number of seconds, got {os.environ[TIMEOUT_ENV]!r}") from None
    mode = os.environ.get(JSON_MODE_ENV) or getattr(config, "llm_json_mode", "schema")
    return LLMSettings(url, name, timeout, getattr(config, "llm_max_tokens", 256), json_mode=mode)


@dataclass
class Usage:
    """What calls cost so far: ``calls`` made (failed ones included), ``tokens_in`` / ``tokens_out`` as the endpoint
    reported them (``usage.prompt_tokens`` / ``completion_tokens``; 0 when it reports none), wall ``ms``."""

    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    ms: float = 0.0

    def add(self, other: Usage) -> None:
        self.calls += other.calls
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out
        self.ms += other.ms

    def since(self, before: Usage) -> Usage:
        """What was spent after ``before`` (a copy of this running total taken earlier)."""
        return Usage(
            self.calls - before.calls,
            self.tokens_in - before.tokens_in,
            self.tokens_out - before.tokens_out,
            self.ms - before.ms,
        )


@dataclass
class Completion:
    """One answer: its ``text``, and its ``usage`` (one call)."""

    text: str
    usage: Usage = field(default_factory=Usage)


@functools.cache
def tls_context() -> Any:
    """The ``ssl.SSLContext`` every client of an endpoint verifies TLS with: httpx's default (certifi's CA bundle,
    hostnames checked; ``httpx.create_ssl_context``, environment ignored as the clients' ``trust_env=False``), built
    once per process and shared (a context that only wraps client sockets may serve several): building one loads the
    whole CA bundle, ~28 ms of CPU, too much to pay per client. Raises what ``ssl`` raises for an unreadable
    bundle."""
    import httpx

    return httpx.create_ssl_context(trust_env=False)


class LLMClient:
    """Chat completions against one endpoint (httpx). ``usage`` adds up every call made through this client.

    ``transport``: an ``httpx`` transport (tests may pass one); default the network. ``authorization``: an
    ``Authorization`` header value to send when the key variable is unset (the proxy's rerank through its own
    upstream sends what it forwards there); held by this client only, never logged."""

    def __init__(self, settings: LLMSettings, transport: Any = None, *, authorization: str | None = None):
        import httpx

        self.settings = settings
        self._authorization = authorization
        self.usage = Usage()
        tls = tls_context()
        self._http = httpx.Client(timeout=settings.timeout_s, transport=transport, trust_env=False, verify=tls)

    def __repr__(self) -> str:
        return f"LLMClient({self.settings.base_url!r}, model={self.settings.model!r})"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def chat(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        json_schema: dict | None = None,
    ) -> Completion:
        """One completion of ``messages`` (OpenAI chat shape), at most ``max_tokens`` (default the settings'),
        constrained to ``json_schema`` as the settings' JSON mode says. Raises ``LLMError``."""
        body: dict[str, Any] = {
            "model": self.settings.model,
            "messages": messages,
            "temperature": temperature,
            "max_tokens": max_tokens or self.settings.max_tokens,
        }
        if json_schema is None:
            return self._post(body)
        key = (self.settings.url, self.settings.model)
        first = mode = _MODES_IN_USE.get(key, self.settings.json_mode)
        while True:
            constraint = _response_format(json_schema, mode)
            try:
                answer = self._post({**body, "response_format": constraint} if constraint else body)
                break
            except LLMError as e:
                if constraint is None or not e.refuses_format:
                    raise
                mode = JSON_MODES[JSON_MODES.index(mode) + 1]
        if mode != first:
            with _MODES_LOCK:
                told = key in _MODES_IN_USE
                _MODES_IN_USE[key] = mode
            if not told:
                log.warning(
                    "LLM endpoint %s refuses response_format %s; using %s from now on (set %s=%s to skip the probe)",
                    shown_url(self.settings.url),
                    _FORMAT_NAMES[first],
                    _FORMAT_NAMES[mode],
                    JSON_MODE_ENV,
                    mode,
                )
        return answer

    def _post(self, body: dict[str, Any]) -> Completion:
        import httpx

        headers = {"content-type": "application/json", "accept-encoding": ACCEPTED_ENCODINGS}
        key = os.environ.get(self.settings.api_key_env)
        if key:
            headers["authorization"] = f"Bearer {key}"
        elif self._authorization:
            headers["authorization"] = self._authorization
        url = shown_url(self.settings.url)  # in messages; the request goes to self.settings.url
        start = time.perf_counter()
        usage = Usage(calls=1)
        try:
            request = self._http.build_request(
                "POST", self.settings.url, content=json.dumps(body, ensure_ascii=False).encode(), headers=headers
            )
            response = self._http.send(request, stream=True)
            try:
                content = _read_capped(response, MAX_ANSWER_BYTES)
            finally:
                response.close()
        except httpx.TimeoutException:
            raise self._fail(
                usage, start, f"LLM endpoint {url} timed out after {self.settings.timeout_s:g} s", "timeout"
            ) from None
        except httpx.DecodingError as e:  # an encoding not asked for, too many layers, a corrupt body
            raise self._fail(usage, start, f"LLM endpoint {url}: answer not decoded: {e}", "malformed") from None
        except httpx.HTTPError as e:
            raise self._fail(
                usage, start, f"LLM endpoint {url} unreachable: {type(e).__name__}", "unreachable"
            ) from None
        usage.ms = (time.perf_counter() - start) * 1000
        if content is None:
            raise self._fail(usage, start, f"LLM endpoint {url}: answer over {MAX_ANSWER_BYTES} bytes", "malformed")
        if response.status_code >= 400:
            # an endpoint that echoes the credential: never shown, masked before the message is cut
            detail, code = _error_of(content, [s for s in (key, self._authorization) if s])
            raise self._fail(
                usage,
                start,
                f"LLM endpoint {url} answered HTTP {response.status_code}",
                "http",
                response.status_code,
                detail,
                code,
            )
        try:
            data = parse_answer(content)
            text = data["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise self._fail(
                usage, start, f"LLM endpoint {url}: no choices[0].message.content in the answer", "malformed"
            ) from None
        if not isinstance(text, str):
            raise self._fail(usage, start, f"LLM endpoint {url}: choices[0].message.content is not text", "malformed")
        reported = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        usage.tokens_in = _count(reported.get("prompt_tokens"))
        usage.tokens_out = _count(reported.get("completion_tokens"))
        self.usage.add(usage)
        return Completion(text, usage)

    def _fail(
        self,
        usage: Usage,
        start: float,
        message: str,
        kind: str,
        status: int | None = None,
        detail: str = "",
        code: str = "",
    ) -> LLMError:
        usage.ms = (time.perf_counter() - start) * 1000
        self.usage.add(usage)
        return LLMError(message, kind, status, detail, code)


ACCEPTED_ENCODINGS = "gzip, deflate"  # what Lantern asks for when it reads a body (an answer, a proxied reply)
DECODE_STEP = 1 << 16  # ours: bytes one decoding layer hands on at a time
# the most stacked Content-Encoding layers decoded, as curl's MAX_ENCODE_STACK (CVE-2022-32206) and urllib3's
# max_decode_links: one or two are legitimate, a thousand in a 25 KB body are an attack
MAX_CONTENT_CODINGS = 5


class _Inflater:
    """One ``Content-Encoding`` layer (gzip, x-gzip or deflate: zlib-wrapped as RFC 9110 §8.4.1.2 says, or raw as
    some servers send it): ``put`` its input, ``pull`` at most ``DECODE_STEP`` bytes of output at a time (zlib's
    ``max_length``), b"" when it needs more input or has ended."""

    def __init__(self, name: str):
        self.d = zlib.decompressobj(zlib.MAX_WBITS | 16) if name in ("gzip", "x-gzip") else None
        self.tail = b""  # input not yet taken by zlib
        self.pending = False  # the last pull filled a step: zlib may hold more output

    def put(self, data: bytes) -> None:
        if self.d is None or not self.d.eof:  # after the end of the stream: trailing bytes, dropped
            self.tail += data

    def pull(self) -> bytes:
        if self.d is None:  # deflate: zlib-wrapped or raw, told by the first two bytes (RFC 1950 §2.2)
            if len(self.tail) < 2:
                return b""
            head = self.tail
            wrapped = (head[0] & 0x0F) == 8 and ((head[0] << 8) | head[1]) % 31 == 0
            self.d = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        if self.d.eof or not (self.tail or self.pending):
            return b""
        try:
            out = self.d.decompress(self.tail, DECODE_STEP)
        except zlib.error as e:
            import httpx

            raise httpx.DecodingError(f"body not decodable: {e}") from None
        self.tail = self.d.unconsumed_tail
        self.pending = len(out) == DECODE_STEP
        return out


class BodyDecoder:
    """Decodes a body sent with ``content_encoding`` (a comma list, the last applied decoded first; gzip, x-gzip,
    deflate, identity), fed its raw bytes as they arrive: ``feed(raw)`` yields the decoded pieces, at most
    ``DECODE_STEP`` bytes each, each inflated only when the reader asks for it. Whatever the ratio, a layer holds
    no more than a step of output, so stacked layers (``gzip, gzip``: a few KB that inflate to GBs in one call of
    httpx's own decoders) cost no more memory than one, and a reader that stops at its cap has inflated at most a
    step more. The layers are pulled in one loop (no nesting per layer). Raises httpx.DecodingError for another
    encoding (Lantern asks for ``ACCEPTED_ENCODINGS`` only), more than ``MAX_CONTENT_CODINGS`` layers, or a body
    that does not decode."""

    def __init__(self, content_encoding: str):
        import httpx

        names = [n.strip().lower() for n in content_encoding.split(",") if n.strip()]
        names = [n for n in names if n != "identity"]
        unknown = [n for n in names if n not in ("gzip", "x-gzip", "deflate")]
        if unknown:
            raise httpx.DecodingError(f"a body in an encoding Lantern did not ask for: {unknown[0][:40]}")
        if len(names) > MAX_CONTENT_CODINGS:
            raise httpx.DecodingError(
                f"a body in {len(names)} stacked Content-Encoding layers: Lantern decodes at most {MAX_CONTENT_CODINGS}"
            )
        self.layers = [_Inflater(n) for n in reversed(names)]

    def feed(self, raw: bytes) -> Iterator[bytes]:
        if not self.layers:  # an identity body's raw pieces in steps too: every reader gets the same bound
            for start in range(0, len(raw), DECODE_STEP):
                yield raw[start : start + DECODE_STEP]
            return
        self.layers[0].put(raw)
        last = len(self.layers) - 1
        while True:
            # the layer nearest the output that has some: its piece goes on one layer (each holds at most a step)
            for i in range(last, -1, -1):
                out = self.layers[i].pull()
                if out:
                    break
            else:
                return  # every layer waits for more raw bytes (or has ended)
            if i == last:
                yield out
            else:
                self.layers[i + 1].put(out)


def _read_capped(response: Any, limit: int) -> bytes | None:
    """The decoded body of a streamed httpx response (``BodyDecoder``), or None once it passes ``limit`` bytes: a
    compressed answer that inflates without end is never held whole, nor inflated further."""
    parts, size = [], 0
    if response.is_stream_consumed:  # a body given whole (a transport that read it, tests' mocks): as it is
        chunks: Iterable[bytes] = response.iter_bytes()
    else:
        decoder = BodyDecoder(response.headers.get("content-encoding", ""))
        chunks = (chunk for raw in response.iter_raw() for chunk in decoder.feed(raw))
    for chunk in chunks:
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
    return b"".join(parts)


def _error_of(content: bytes, secrets: Sequence[str] = ()) -> tuple[str, str]:
    """(message, code) of an error answer's body: OpenAI's ``{"error": {"message", "code"}}`` (llama.cpp, vLLM and
    Anthropic's ``{"error": {"message", "type"}}`` alike), or ``{"detail": "..."}`` (FastAPI), else the body's
    first line; the message ends before a traceback it carries (llama-cpp-python's server appends one), is cut to
    ``DETAIL_CHARS`` characters, control characters as spaces. Each of ``secrets``
    (an ``Authorization`` value or key, with or without ``Bearer``) is replaced by ``***`` in both, before the cut
    (a key straddling it would otherwise leave its prefix). A body that ``parse_answer`` refuses (too deep, too
    large) reads as no JSON."""
    try:
        data = parse_answer(content)
    except ValueError:
        data = None
    message, code = "", ""
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict):
            message = error.get("message") if isinstance(error.get("message"), str) else ""
            code = error.get("code") if isinstance(error.get("code"), str) else ""
        elif isinstance(error, str):
            message = error
        elif isinstance(data.get("detail"), str):
            message = data["detail"]
    elif data is None:
        text = content[: 64 * DETAIL_CHARS].decode("utf-8", "replace")
        message = text.strip().split("\n", 1)[0] if text else ""
    for secret in secrets:
        for form in (secret, secret.removeprefix("Bearer ")):
            if form:
                message, code = message.replace(form, "***"), code.replace(form, "***")
    message = _TRACEBACK.split(message, 1)[0]
    message = "".join(" " if ch < " " or ch == "\x7f" else ch for ch in message).strip()
    return message[:DETAIL_CHARS], code[:100]


def endpoint(base_url: str, path: str, query: str | bytes = b"", *, once: bool = False) -> str:
    """``path`` joined under ``base_url``'s path by httpx's URL handling: the base's trailing slashes dropped, its
    query kept with ``query`` (a raw query string, e.g. a forwarded request's) appended after it, its fragment dropped
    (a fragment is never sent), its scheme, user info (sent as HTTP basic auth), host and port and its
    percent-escapes unchanged. ``once``: ``path`` is not added again to a base path that already ends with it.
    ``https://x/openai/deployments/d?api-version=2024-06-01`` + ``chat/completions`` ->
    ``https://x/openai/deployments/d/chat/completions?api-version=2024-06-01``."""
    import httpx

    base = httpx.URL(base_url)
    head = base.raw_path.split(b"?", 1)[0].rstrip(b"/")
    tail = httpx.URL("/" + path.lstrip("/")).raw_path.split(b"?", 1)[0]
    if not (once and head.endswith(tail)):
        head += tail
    extra = query.encode("latin-1") if isinstance(query, str) else query  # a query string as an ASGI server decoded it
    queries = [q for q in (base.query, extra) if q]
    raw = (head or b"/") + (b"?" + b"&".join(queries) if queries else b"")
    return str(base.copy_with(raw_path=raw, fragment=None))


def shown_url(url: str) -> str:
    """``url`` as error messages show it: credentials in its user info (``https://user:key@host``) and its query
    (``?api-key=...``) as ``***``, the rest unchanged."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    netloc = f"***@{host}" if "@" in parts.netloc else host
    return urlunsplit((parts.scheme, netloc, parts.path, "***" if parts.query else "", ""))


def _response_format(schema: dict | None, mode: str) -> dict | None:
    if schema is None or mode == "off":
        return None
    if mode == "object":
        return {"type": "json_object", "schema": schema}
    return {"type": "json_schema", "json_schema": {"name": "answer", "strict": True, "schema": schema}}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
