"""Secrets known by their context rather than their shape, and the JSON-escaped view of a text (ours; used by
archive/redact.py, which owns the findings, their priorities and the placeholders).

- ``provider_assignments``: a provider's name in the key of an assignment (``DATADOG_API_KEY=…``,
  ``"heroku": "…"``, ``sendbird.token: …``): the value is that provider's credential when it looks random. The
  provider words are those of gitleaks' keyword-led rules (config/gitleaks.toml: a credential without a prefix
  of its own, known by the name before it), written here as a word list.
- ``pgpass_lines``: ``host:port:database:user:password`` lines (PostgreSQL's ``.pgpass``).
- ``xml_add_values``: ``<add key="…Password" value="…"/>`` (NuGet, .NET app.config).
- ``kubernetes_secret_values``: the base64 values under ``data:`` of a ``kind: Secret`` manifest (``stringData:``
  is plain text: its keys are judged as any assignment's).
- ``escaped_strings``: the JSON string literals of a text that hold escapes (``\\n``, ``\\"``, ``\\uXXXX``),
  decoded, with a map back to raw offsets, so every detector also reads what a tool call's arguments mean
  (``Authorization: Basic …`` after an escaped newline, 密码是 … written as ``\\u5bc6\\u7801\\u662f``).
- ``json_safe``: a span trimmed so that its placeholder never breaks the JSON around it.

Every function is linear in the text: each literal is found with ``str.find`` or a literal-led regex, each
candidate reads a bounded window, and the string lexer reads each character once.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator

from lantern.archive.secret_tokens import trie_regex

__all__ = [
    "PROVIDER_WORDS",
    "Escaped",
    "escaped_strings",
    "json_safe",
    "kubernetes_secret_values",
    "pgpass_lines",
    "provider_assignments",
    "xml_add_values",
]

# word (as it appears in a key, lower case) -> the provider named in the placeholder
PROVIDER_WORDS: dict[str, str] = {
    **{
        w: w
        for w in (
            "adafruit adobe airtable algolia alibaba asana atlassian beamer bitbucket bittrex meraki cloudflare "
            "codecov cohere coinbase confluent contentful datadog discord droneci dropbox etsy facebook fastly "
            "finicity finnhub flickr freshbooks gitter gocardless heroku hubspot intercom jfrog kraken kucoin "
            "launchdarkly linkedin mailchimp mailgun mapbox mattermost messagebird netlify newrelic nytimes "
            "okta plaid privateai rapidapi sendbird sentry snyk sonar squarespace travis twitch twitter "
            "typeform yandex zendesk contribsys sumologic telegram"
        ).split()
    },
    "confluence": "atlassian",
    "jira": "atlassian",
    "artifactory": "jfrog",
    "bintray": "jfrog",
    "co_api_key": "cohere",
    "linked_in": "linkedin",
    "linked-in": "linkedin",
    "message_bird": "messagebird",
    "message-bird": "messagebird",
    "new_relic": "newrelic",
    "new-relic": "newrelic",
    "private_ai": "privateai",
    "private-ai": "privateai",
    "sumo_": "sumologic",
}
# a key ending in one of these names a public attribute of the account, not its credential
_BENIGN_KEY_END = re.compile(
    r"(?:handle|user|username|name|url|uri|host|hostname|domain|region|email|org|team|channel|version|enabled|"
    r"timeout|port|path|dir|file|site|page|env|environment|level|mode|type|tag|tags|count|size|limit)$"
)


_PROVIDER_HIT = trie_regex(sorted(PROVIDER_WORDS))
_KEY_BACK = re.compile(r"[a-z0-9_.\-]{0,50}")  # matched in the reversed lower-cased text
# after the provider word: the rest of the key, a closing quote or bracket, the operator, an opening quote
_PROVIDER_ASSIGN = re.compile(
    r"(?P<rest>[a-z0-9_.\-]{0,40})\\?[\"'`]?\]?[ \t]*(?::=|=>|=(?![=>])|:(?![:/])|：)[ \t]*(?P<vq>\\?[\"'`])?"
)
_PROVIDER_VALUE = re.compile(r"[A-Za-z0-9_\-=+/.~%|:]{14,200}")
_HEXISH = re.compile(r"[0-9a-fA-F\-]+")


def provider_assignments(text: str, low: str, looks_random, is_reference) -> Iterator[tuple[str, int, int]]:
    """``(provider, start, end)`` of each value assigned to a key naming a provider. ``looks_random(v)`` and
    ``is_reference(v)`` are redact.py's judgements of a value."""
    rev = ""
    done = -1
    for hit in _PROVIDER_HIT.finditer(low):
        if hit.start() < done or (hit.start() and low[hit.start() - 1].isalnum()):
            continue  # inside a value just found, or inside a word ("blob_", "mytwitter")
        m = _PROVIDER_ASSIGN.match(low, hit.end())
        if m is None:
            continue
        rev = rev or low[::-1]
        key_start = hit.start() - _KEY_BACK.match(rev, len(low) - hit.start()).end()
        key = low[key_start : m.end("rest")]
        v = _PROVIDER_VALUE.match(text, m.end())
        if v is None or _BENIGN_KEY_END.search(key):
            continue
        value = v.group().rstrip(".,;:")
        if m.group("vq"):  # quoted: the value is what the quotes enclose
            quote = m.group("vq")[-1]
            close = text.find(quote, m.end(), m.end() + 201)
            if close < 0:
                continue
            value = text[m.end() : close]
        digits = sum(c.isdigit() for c in value)
        if is_reference(value) or "://" in value or value.startswith(("/", "~", ".")):
            continue
        shaped = (
            looks_random(value)
            or (_HEXISH.fullmatch(value) is not None and len(value.replace("-", "")) >= 16 and digits >= 2)
            or (value.isdigit() and len(value) >= 15)
        )
        if not shaped or (digits < 2 and not value.isdigit()):
            continue
        done = m.end() + len(value)
        yield PROVIDER_WORDS[hit.group()], m.end(), m.end() + len(value)


# host:port:database:user:password, one per line (PostgreSQL's .pgpass; * for any)
_PGPASS = re.compile(  # a line, or a quoted string (a tool call's argument); a ":" in the password is written "\:"
    r"(?m)(?:^|(?<=[\"']))[ \t]*(?P<host>[A-Za-z0-9.\-_*\[\]]+):(?:\d{1,5}|\*):[^:\s\"']+:[^:\s\"']+:"
    r"(?P<secret>(?:[^\s:\\\"']|\\.){1,256})[ \t]*(?=\r?$|[\"'])"
)


_PGPASS_PORT = re.compile(r":(?:\d{1,5}|\*):[^:\s\"']+:[^:\s\"']+:")


def pgpass_lines(text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of the password of each .pgpass-style line (its host has a letter or is ``*``)."""
    if text.count(":") < 4 or _PGPASS_PORT.search(text) is None:  # a literal-led test first: the line regex
        return  # is tried at every position
    for m in _PGPASS.finditer(text):
        host = m.group("host")
        if host == "*" or any(c.isalpha() for c in host):
            yield m.start("secret"), m.end("secret")


_XML_ADD = re.compile(
    r"<add\s+key=\\?[\"'](?P<key>[^\"'\\<>]{1,80})\\?[\"']\s+value=\\?(?P<q>[\"'])(?P<value>[^\"'\\<>]{1,512})\\?(?P=q)",
    re.I,
)


def xml_add_values(text: str, low: str) -> Iterator[tuple[str, int, int]]:
    """``(key, start, end)`` of each ``<add key="K" value="V"/>`` value (the caller judges K)."""
    if "<add" not in low:
        return
    for m in _XML_ADD.finditer(text):
        yield m.group("key"), m.start("value"), m.end("value")


_KIND_SECRET = re.compile(r"kind:[ \t]*[\"']?secret\b", re.I)
_DATA_LINE = re.compile(r"(?m)^(?P<indent>[ \t]*)data:[ \t]*$")
_BASE64_VALUE = re.compile(r"[\"']?(?P<b64>[A-Za-z0-9+/]{8,}={0,3})[\"']?")
_ITEM_LINE = re.compile(r"(?P<indent>[ \t]+)[\w.\-]+:[ \t]*(?P<value>[^\s#][^\n]*)")


def kubernetes_secret_values(text: str, low: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each base64 value under ``data:`` in a YAML document holding ``kind: Secret``
    (documents split at ``---`` lines)."""
    if "kind" not in low or "secret" not in low or "data:" not in low:
        return
    seen = -1
    for k in _KIND_SECRET.finditer(text):
        start = text.rfind("\n---", 0, k.start())
        start = 0 if start < 0 else start + 4
        if start <= seen:
            continue
        end = text.find("\n---", k.end())
        end = len(text) if end < 0 else end
        seen = end
        for d in _DATA_LINE.finditer(text, start, end):
            pos = d.end() + 1
            while pos < end:
                line_end = text.find("\n", pos, end)
                line_end = end if line_end < 0 else line_end
                item = _ITEM_LINE.fullmatch(text, pos, line_end)
                if item is None or len(item.group("indent")) <= len(d.group("indent")):
                    break
                value = item.group("value").rstrip()
                b64 = _BASE64_VALUE.fullmatch(value)
                if b64 is not None:
                    yield item.start("value") + b64.start("b64"), item.start("value") + b64.end("b64")
                pos = line_end + 1


class Escaped:
    """The decoded content of a text's escaped JSON string literals, joined by newlines (one detector pass reads
    them all), and the map from decoded offsets back to raw ones. ``literal(d)`` tells which literal a decoded
    offset belongs to (a finding never spans two)."""

    def __init__(self, text: str, spans: list[tuple[int, int]]):
        self._source, self._spans = text, spans
        # the decoded text now (a substitution per escape); the offset map only when a finding asks for it
        self.text = "\n".join(_decode(text[a:b]) for a, b in spans)
        self._dec: list[int] = []  # decoded offset where each segment starts
        self._raw: list[int] = []  # its raw offset
        self._plain: list[bool] = []  # a plain run (1:1), or one escape
        self._lits: list[int] = []  # decoded offset where each literal starts
        self._ends: list[int] = []  # raw end of each literal (its closing quote)

    def _map(self) -> None:
        if self._lits:
            return
        text, d = self._source, 0
        for start, end in self._spans:
            if self._lits:  # the newline between literals: maps to the end of the previous one
                self._dec.append(d)
                self._raw.append(self._ends[-1])
                self._plain.append(False)
                d += 1
            self._lits.append(d)
            self._ends.append(end)
            r = start
            for piece in _SEGMENT.findall(text, start, end):
                plain = piece[0] != "\\"
                self._dec.append(d)
                self._raw.append(r)
                self._plain.append(plain)
                d += len(piece) if plain else len(_unescape(piece))
                r += len(piece)

    def literal(self, d: int) -> int:
        self._map()
        return bisect.bisect_right(self._lits, d) - 1

    def raw(self, d: int, end: bool = False) -> int:
        """The raw offset of decoded offset ``d`` (``end``: of the end of decoded character ``d - 1``)."""
        self._map()
        if end:
            if d <= 0:
                return self._raw[0] if self._raw else 0
            i = bisect.bisect_right(self._dec, d - 1) - 1  # the segment holding the last character
            if self._plain[i]:
                return self._raw[i] + (d - self._dec[i])
            nxt = i + 1
            return self._raw[nxt] if nxt < len(self._raw) else self._ends[-1]
        i = bisect.bisect_right(self._dec, d) - 1
        if self._plain[i]:
            return self._raw[i] + (d - self._dec[i])
        return self._raw[i]


_SEGMENT = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}|\\[^u]|\\|[^\\]+", re.S
)
_ESCAPE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}|\\[^u]|\\", re.S)
_SIMPLE = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _unescape_match(m: re.Match[str]) -> str:
    return _unescape(m.group())


_PAIRS = (('\\"', '"'), ("\\n", "\n"), ("\\t", "\t"), ("\\r", "\r"), ("\\/", "/"), ("\\b", "\b"), ("\\f", "\f"))


def _decode(raw: str) -> str:
    """A JSON string's content decoded as ``_unescape`` does each escape, with ``str`` methods where they can:
    escaped backslashes pair from the left, so the text between them holds no ``\\\\``."""
    parts = raw.split("\\\\")
    for i, part in enumerate(parts):
        if "\\" in part:
            for a, b in _PAIRS:
                part = part.replace(a, b)
            if "\\u" in part:
                part = _ESCAPE.sub(_unescape_match, part)
            parts[i] = part
    return "\\".join(parts)


def _unescape(piece: str) -> str:
    if len(piece) == 2:
        return _SIMPLE.get(piece[1], piece)  # an escape JSON does not know (\d in a regex) stays as written
    if len(piece) == 12:  # a surrogate pair
        hi, lo = int(piece[2:6], 16), int(piece[8:12], 16)
        return chr(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
    if len(piece) == 6 and piece[1] == "u":
        return chr(int(piece[2:], 16))
    return piece


def escaped_strings(text: str) -> Escaped | None:
    """The JSON string literals of ``text`` (from a ``"`` to the next unescaped ``"``, or to the end of the text)
    whose content holds a backslash, decoded into one ``Escaped``; None when there is none. Each character of the
    text is read once."""
    spans = []
    i = text.find('"')
    n = len(text)
    while 0 <= i < n:
        close = _CONTENT.match(text, i + 1).end()  # to the closing quote, or to the end of an unterminated one
        if text.find("\\", i + 1, close) >= 0:
            spans.append((i + 1, close))
        i = text.find('"', close + 1) if close < n else -1
    return Escaped(text, spans) if spans else None


_CONTENT = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.S)  # a string's content: no backtracking, one pass


def _escape_start(text: str, i: int) -> int:
    """The start of the escape sequence that position ``i`` is inside of (``i`` itself when none)."""
    for back in range(1, 6):  # \uXXXX: the backslash at most 5 characters before
        b = i - back
        if b < 0:
            break
        if text[b] == "\\":
            run = b
            while run > 0 and text[run - 1] == "\\":
                run -= 1
            if (b - run) % 2 == 0 and (back == 1 or (text[b + 1 : b + 2] == "u" and back <= 5)):
                return b
            break
    return i


def json_safe(text: str, s: int, e: int) -> tuple[int, int]:
    """``[s, e)`` adjusted so that replacing it keeps the JSON around it valid: it starts and ends outside escape
    sequences (a ``\\`` never left escaping the placeholder, a ``\\"`` never cut in two) and stops before an
    unescaped ``"`` that closes a string (followed by ``,`` ``}`` ``]`` ``:`` or the end). (s, s) when nothing
    is left."""
    if text.find('"', s, e) < 0 and text.find("\\", max(0, s - 5), min(len(text), e + 1)) < 0:
        return s, e  # no quote inside, no escape near either end: nothing to adjust (the common case)
    s = _escape_start(text, s)
    q = text.find('"', s, e)
    while q >= 0:
        b = q
        while b > s and text[b - 1] == "\\":
            b -= 1
        if (q - b) % 2 == 0:  # unescaped
            after = q + 1
            while after < len(text) and text[after] in " \t\r\n":
                after += 1
            if after >= len(text) or text[after] in ",}]:":
                e = q
                break
        q = text.find('"', q + 1, e)
    if e < len(text):
        e = _escape_start(text, e)
    return (s, e) if e > s else (s, s)
