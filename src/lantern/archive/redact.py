"""Redact secrets and drop private spans before anything is stored (docs/architecture.md §2.2; docs/privacy.md).

A stage of the write path between **parse** and **chunk**: ``Lantern`` runs every parsed message through
``redact_messages`` before turns are chunked, so the full text, summary, FTS index, tags, embeddings' input and
content hash are all built from the redacted text; a secret never reaches SQLite (nor its WAL) in clear.

    policy = load_policy(store, config)                  # once per Lantern (salt and opt-out from the meta table)
    messages, n = redact_messages(messages, policy)      # n = secrets replaced + private spans removed
    text, n = redact_text(text, policy)                  # one string
    value, n = redact_json(value, policy)                # every string of a JSON value (an imported record)
    find_secrets(text, policy)                           # the findings, for tests and tuning

**Private spans.** Text between ``<private>`` and ``</private>`` (case-insensitive; more marker pairs via
``Config.private_markers``) is removed with its markers, in message text, tool-call arguments, tool results and
file lists. An unclosed marker removes everything to the end of that field; nested markers are counted. Private
spans are removed even when secret redaction is switched off for the database: they are the user's explicit
request, not a guess.

**Detectors**, highest priority first (an overlap keeps the higher-priority finding):

1. private-key blocks: ``-----BEGIN … PRIVATE KEY-----`` through the matching ``END`` line (real or ``\\n``-escaped
   newlines, e.g. in a service-account JSON); an unterminated block is cut at the end of its base64 lines;
2. provider tokens (archive/secret_tokens.py, our patterns; its ``TOKENS`` table, one row per format with its
   source, sample generators and look-alikes): a fixed-format credential found by a literal it holds — the
   providers of gitleaks' and betterleaks' default rule sets, of detect-secrets' plugins and of the providers'
   own documentation (AWS, GitHub, GitLab, Slack, Stripe, OpenAI, Anthropic, Google, Groq, Hugging Face, Docker,
   Supabase, Tailscale, webhooks, JWT, … 147 rows); a match is widened to the whole token so a key longer than
   its format is not left half in clear; ``Config.redact_patterns`` (user patterns, same priority); and by
   context (archive/secret_context.py, whose ``CONTEXTS`` table lists the forms): a provider's name in an
   assignment's key (``DATADOG_API_KEY=…``, ``heroku_api_key: <uuid>``), ``.pgpass`` lines, ``.netrc`` entries,
   ``<add key="…Password" value="…"/>``, ``<password>…</password>``, the ``data:`` of a Kubernetes Secret,
   cookies, pre-signed URL signatures (``sig=``), PHP ``define( 'AUTH_KEY', '…' )``;
3. credentials in URLs (``postgres://user:PASS@host:5433/db``: only the password is replaced; scheme, user, host
   and port stay, since a port is exactly what Lantern brings back; a password holding ``# / ? @`` runs to the
   first ``@`` a host follows), ``Authorization: Bearer|Basic|token …`` and ``Proxy-Authorization`` headers,
   ``curl -u user:PASS``;
4. command-line flags: ``--password X``, ``--token=X``, ``--api-key X``, ``mysql … -pX``, a command's own
   password flag (secret_context.COMMAND_FLAGS: ``sshpass -p``, ``redis-cli -a``, ``docker login -p``, …) and
   Oracle's ``user/PASS@db``; a quoted value also in backslash-escaped quotes (``--password \\"X\\"`` inside a
   JSON tool argument);
5. keyword assignments: ``KEY = value`` / ``key: value`` / ``"key": "value"`` / ``key := value`` / ``'key' =>
   'value'`` where the key's last word is a secret word. *Strong* keys (detect-secrets' ``KeywordDetector``
   denylist: password, passwd, pwd, secret, api_key, private_key, …) take any value that is not a reference
   (``$VAR``, ``${…}``, ``{{…}}``, ``<…>``, ``os.environ[…]``), a code expression (``self.api_key``, ``getpass()``,
   the key's own name), a type (``str``), a path or a documentation placeholder (``your-key-here``, ``...abcd``).
   *Weak* keys (``…_token``, ``auth``, ``credentials``, ``…_key``) take only values that look random:
   detect-secrets' high-entropy measure (Shannon entropy over its base64 charset ≥ 3.0 bits/char) on a 16+
   character token with letters and digits; under a plain ``…_key`` (``cache_key``, ``LICENSE_KEY``) the value
   must also mix upper and lower case and not be pure hex or a UUID (a hash, an id or ``deps-<hash>`` is kept).
   A quote or backtick before the key that does not close after it encloses the whole assignment (``run
   `PASSWORD=X` first``, ``"password: X"``), so the value is still found. A quoted value (here and in flags)
   ends at its own closing quote: a quote of another kind inside it (``password: `Hunt'er2` ``) or a
   backslash-escaped one of its kind (JSON ``"Hunt\\"er2"``) is part of it, and so is a ``'`` followed by a
   letter or digit inside single quotes (``'Hunt'er2'``, an apostrophe) when a later ``'`` closes the value.
   Typographic quotes after the operator
   (``password: “X!”``, ``«X»``, ``「X」``, as in prose below) delimit the value as ASCII ones do: it is all they
   enclose, spaces included, and its fingerprint leaves them out. An unquoted value under a strong key
   runs to the next space, quote, backslash or placeholder, wherever it stands (``ok DB_PASSWORD=Tr0ub4dor&3;x
   then``): ``, ; & ( ) [ ] { } < >`` are legal in a password. It is judged on the part before the first of them
   (so ``password=config[key]`` stays code) unless that part is shorter than 4 characters. Our choice, redact
   more: a shell ``;`` (``export DB_PASSWORD=X; run``), a closing ``)`` or the rest of a URL query
   (``?password=X&next=/home``) goes into the placeholder with it; weak keys (tokens, whose values must look
   random) still stop at ``&`` ``;`` ``,``.
   This is the only place the high-entropy detector runs: used naively
   (every quoted string) it flags git hashes and sha256 checksums, which are the facts Lantern exists to recover
   (``benchmarks/bench_redact.py`` measures both);
6. prose: ``password is X`` / ``password was X`` / ``密码是X`` / ``密码：X`` / ``口令为X``; after ``is`` / ``was`` /
   ``是`` an optional colon (``is: X``, ``是：X``) or a dash and a space (``is - X``), and in English at most one of
   ``now``, ``still``, ``currently``, ``always``, ``again`` and one ``set|changed|reset|updated to`` (``is now set
   to X``), in Chinese at most two adverbs (现在, 目前, 还, 仍然, 已经, 已, 被, 应该, …) before one verb (是, 为,
   改成(了), 改为, 设为, 设置为, 重置为, 换成(了), 变成(了), 更改为, 修改为, 设定为: ``密码现在是X``,
   ``密码已经改成了X``): short lists, so "the password is in the vault" stays prose. A Chinese value needs 4
   ASCII characters (``密码现在是错的``, ``密码改成了更长的`` are kept). An unquoted English value needs the
   character mix of a secret: a digit or a symbol, but not only as English words use them — a hyphenated word of
   2 or 3 parts, a word with an apostrophe or a length range stay prose ("the password is weak", "... is re-used",
   "... is up-to-date", "... is 8-64 chars"; 4+ hyphenated words are a passphrase). A value in quotes — ASCII,
   backticks, curly ``“…”`` ``‘…’``, guillemets ``«…»`` (also ``« … »``), ``„…“``, ``「…」`` ``『…』`` — is all
   that the quotes enclose, spaces included (a passphrase: ``the password is "correct horse battery staple"``,
   ``密码是「Hunter2 Secret!」``), its trailing ``!`` too, when they close within 128 characters on the same line
   (a ``'`` or ``’`` followed by a letter or digit is an apostrophe, not the closing quote); else the value is the
   unquoted run after the quote.
   A quoted English value that is one word of letters is kept ("the password is “weak”"); several words are a
   passphrase; a quoted Chinese value needs 4 ASCII characters (``密码是「正确的」`` is kept). The quotes stay
   around the placeholder.

**Escaped JSON.** The JSON string literals of a JSON text that hold escapes (tool-call arguments written by
``json.dumps``: ``\\n``, ``\\"``, ``\\uXXXX``) are also decoded and read by every detector, the findings
mapped back to their raw span: an ``Authorization: Basic …`` line after an escaped newline, ``密码是 …``
written in ``\\u`` escapes. A span never breaks the JSON it sits in: it never starts or ends inside an escape
sequence nor runs past the quote that closes its string (``json_safe``).

**Linear time.** Every detector reads each character a bounded number of times (bounded quantifiers; a
candidate inside a run already judged is skipped; ``benchmarks/bench_worst_case.py`` measures adversarial
inputs of 100, 200 and 400 KB).

**Placeholder.** A secret becomes ``[secret:KIND …TAIL#FP]`` or, without a tail, ``[secret:KIND #FP]``:

- ``KIND``: ``openai-key``, ``anthropic-key``, ``github-token``, ``aws-access-key-id``, ``url-password``,
  ``bearer-token``, ``password``, ``secret``, ``token``, ``rsa-private-key``, …;
- ``FP``: the first 4 hex digits of HMAC-SHA256(salt, secret), where ``salt`` is 16 random bytes made once per
  database and kept in its ``meta`` table (key ``redact_salt``). Stable: the same secret gives the same
  placeholder in every turn of a database, so "which key did we rotate?" has an answer (two fingerprints), and
  re-archiving a turn deduplicates. 16 bits cannot be reversed, and the per-database salt means fingerprints
  cannot be matched across databases or against a table precomputed for a list of common passwords. Someone who
  holds the database holds the salt too: for them the fingerprint confirms a guess with 1/65,536 false-positive
  odds, which matters only for guessable (dictionary) passwords — the reason passwords never show a tail.
  (Our choice: HMAC with a per-database salt rather than plain sha256, for the cross-database property.)
- ``TAIL``: the secret's last 4 characters, shown only for provider tokens (fixed-format, machine-generated,
  high entropy) of at least 24 characters: 4 characters of ≥ 20 random ones leave ≥ 96 bits unknown, and it is
  how providers themselves display keys (``sk-…3f9a``), so a user recognises the key. Never for passwords, URL
  passwords, keyword values, bearer tokens of unknown format or private keys.

The placeholder holds no quote or backslash, so a JSON tool argument stays valid JSON. Redaction is idempotent:
text already holding placeholders is left as is.

**Cost.** About 0.1 ms per real turn on average (0.07 ms per 1,000 characters; ``benchmarks/bench_redact.py``):
every pattern starts with a literal so the regex engine skips to its candidates; case-insensitive ones run on the
lower-cased text; slow plugin regexes run only near a match of a cheap literal-led gate; detectors whose trigger
strings are absent are skipped.

**Configuration** (``lantern.config.Config``): ``redact_patterns`` — extra ``(kind, regex)`` pairs (group
``secret`` or group 1 is the secret, else the whole match); ``redact_allow`` — strings that are never redacted
(exact values, or ``re:``-prefixed regexes matched against the whole value); ``private_markers`` — ``(open,
close)`` pairs. Per database: ``set_secret_redaction(lantern, False)`` stores ``redact_secrets = off`` in the
meta table (an explicit opt-out; private spans are still removed).

Of detect-secrets only the keyword denylist and the entropy function are used: never ``scan_line`` nor
``verify``, so it makes no network request (its verification calls provider APIs).
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import hmac
import re
import secrets as _random
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lantern import lazy_re
from lantern.archive.secret_context import escaped_strings, json_safe
from lantern.archive.secret_findings import (  # the context-form rules; their public names stay importable here
    P_BLOCK,  # noqa: F401
    P_CRED,  # noqa: F401
    P_FLAG,  # noqa: F401
    P_KEYWORD,  # noqa: F401
    P_PROSE,  # noqa: F401
    P_TOKEN,
    PROSE_END,  # noqa: F401
    PUBLIC_KEY_PREFIXES,  # noqa: F401
    QUOTED_MAX,  # noqa: F401
    VALUE_END,  # noqa: F401
    Finding,
    _context_findings,
    _credential_findings,
    _flag_findings,
    _keyword_findings,
    _lower,
    _private_key_blocks,
    _prose_findings,
    _slug,
)
from lantern.archive.secret_tokens import find_tokens
from lantern.model import Message, ToolCall, ToolResult

__all__ = [
    "Finding",
    "RedactionPolicy",
    "find_secrets",
    "load_policy",
    "make_policy",
    "placeholder",
    "redact_json",
    "redact_messages",
    "redact_name",
    "names_form",
    "redact_text",
    "remove_private",
    "set_secret_redaction",
    "PLACEHOLDER_RE",
]

META_SALT = "redact_salt"
META_SWITCH = "redact_secrets"  # "off" = explicit per-database opt-out of secret redaction
DEFAULT_PRIVATE_MARKERS: tuple[tuple[str, str], ...] = (("<private>", "</private>"),)
TAIL_MIN_LEN = 24  # a provider token shows its last 4 characters only from this length on (see module doc)
ESCAPED_DEPTH = 2  # JSON strings decoded inside decoded strings down to this depth (arguments holding JSON text)

PLACEHOLDER_RE = lazy_re.compile(r"\[secret:[a-z0-9][a-z0-9-]* (?:…[!-~]{4})?#[0-9a-f]{4}\]")

MEMO_MAX_TEXT = 65_536  # ours: texts up to this many characters have their redaction remembered (RedactionMemo)
MEMO_BYTES = 16_000_000  # ours: memory of the remembered texts per policy (keys, results, entries), LRU dropped first
MEMO_ENTRY_BYTES = 200  # ours: what one remembered text costs besides its strings (dict slot, tuple, int)


# ---------------------------------------------------------------------------------------------- policy
class RedactionMemo:
    """The redactions of recently seen texts (text -> (redacted text, count)), least recently used dropped first
    once they take ``MEMO_BYTES`` (their strings' own sizes, ``sys.getsizeof``, plus ``MEMO_ENTRY_BYTES`` each);
    texts over ``MEMO_MAX_TEXT`` characters are not remembered. The proxy redacts the live context on every
    request, and a conversation resends the same messages each time (ours; bench_proxy). Thread-safe. A copy or
    a pickle of it is a new, empty memo (``clear`` empties this one: ``Lantern.forget`` calls it, so forgotten
    text does not stay in memory)."""

    def __init__(self) -> None:
        self._items: OrderedDict[str, tuple[str, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple:
        return (RedactionMemo, ())

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0

    @staticmethod
    def _cost(text: str, result: tuple[str, int]) -> int:
        return sys.getsizeof(text) + (sys.getsizeof(result[0]) if result[0] is not text else 0) + MEMO_ENTRY_BYTES

    def get(self, text: str) -> tuple[str, int] | None:
        with self._lock:
            hit = self._items.get(text)
            if hit is not None:
                self._items.move_to_end(text)
            return hit

    def put(self, text: str, result: tuple[str, int]) -> None:
        if len(text) > MEMO_MAX_TEXT:
            return
        with self._lock:
            if text in self._items:
                return
            self._items[text] = result
            self._bytes += self._cost(text, result)
            while self._bytes > MEMO_BYTES:
                old, old_result = self._items.popitem(last=False)
                self._bytes -= self._cost(old, old_result)


@dataclass(frozen=True)
class RedactionPolicy:
    """What to redact and how to fingerprint it. ``secrets``: False when the database opted out. ``salt``: the
    HMAC key of fingerprints. ``extra``: user detectors ``(kind, compiled regex)``. ``allow``: exact values and
    compiled regexes never redacted. ``private``: marker pairs, lower-cased. ``memo``: this policy's own
    ``RedactionMemo`` (a new policy, or a ``replace``d one, starts empty)."""

    secrets: bool = True
    salt: bytes = b""
    extra: tuple[tuple[str, re.Pattern[str]], ...] = ()
    allow_values: frozenset[str] = frozenset()
    allow_patterns: tuple[re.Pattern[str], ...] = ()
    private: tuple[tuple[str, str], ...] = DEFAULT_PRIVATE_MARKERS
    memo: RedactionMemo = field(default_factory=RedactionMemo, init=False, compare=False, hash=False, repr=False)

    def allowed(self, value: str) -> bool:
        return value in self.allow_values or any(p.fullmatch(value) for p in self.allow_patterns)


def make_policy(
    salt: bytes = b"",
    *,
    secrets: bool = True,
    patterns: Iterable[tuple[str, str]] = (),
    allow: Iterable[str] = (),
    private_markers: Iterable[tuple[str, str]] = DEFAULT_PRIVATE_MARKERS,
) -> RedactionPolicy:
    """A policy from plain values (``load_policy`` reads them from a database and a Config)."""
    extra = tuple((_slug(kind), re.compile(rx)) for kind, rx in patterns)
    values, regexes = set(), []
    for a in allow:
        if a.startswith("re:"):
            regexes.append(re.compile(a[3:]))
        else:
            values.add(a)
    markers = tuple((o.lower(), c.lower()) for o, c in private_markers if o and c)
    return RedactionPolicy(secrets, salt, extra, frozenset(values), tuple(regexes), markers)


def load_policy(store: Any, config: Any = None) -> RedactionPolicy:
    """The policy of a database: its salt (created on first use, 16 random bytes in ``meta.redact_salt``), its
    opt-out switch (``meta.redact_secrets``), and the Config's patterns, allow-list and private markers."""
    salt = store.get_meta(META_SALT)
    if salt is None:  # another process may win the race: its salt is the one used
        salt = store.meta_default(META_SALT, _random.token_hex(16))
    return make_policy(
        bytes.fromhex(salt),
        secrets=(store.get_meta(META_SWITCH) or "on") != "off",
        patterns=getattr(config, "redact_patterns", ()),
        allow=getattr(config, "redact_allow", ()),
        private_markers=getattr(config, "private_markers", DEFAULT_PRIVATE_MARKERS),
    )


def set_secret_redaction(lantern: Any, enabled: bool) -> None:
    """Switch secret redaction on or off for the database of ``lantern`` (a ``Lantern``): stored in its meta table,
    so every later ``Lantern`` on that file follows it. Private spans are removed either way. Switched off, the
    record of the names' form goes in the same transaction: names written from then on are stored as given, and
    are rewritten when redaction is switched on again (store/migrations.py ``rewrite_names``)."""
    from lantern.store.migrations import NAMES_FORM

    lantern.store.put_meta({META_SWITCH: "on" if enabled else "off", **({} if enabled else {NAMES_FORM: None})})
    lantern.redaction = replace(lantern.redaction, secrets=enabled)


def _token_findings(text: str, low: str, policy: RedactionPolicy, out: list[Finding]) -> None:
    for kind, s, e in find_tokens(text, low):
        out.append(Finding(kind, s, e, text[s:e], P_TOKEN, tail=e - s >= TAIL_MIN_LEN))
    for kind, rx in policy.extra:
        for m in rx.finditer(text):
            g = "secret" if "secret" in rx.groupindex else (1 if rx.groups else 0)
            s, e = m.span(g)
            if e > s:
                out.append(Finding(kind, s, e, text[s:e], P_TOKEN))


def find_secrets(text: str, policy: RedactionPolicy) -> list[Finding]:
    """The secrets of ``text``, non-overlapping, in text order (an overlap keeps the higher-priority finding:
    private-key block > provider token / user pattern > URL or header credential > flag > keyword > prose).
    Findings whose value or span is on the policy's allow-list and spans inside existing placeholders are
    skipped."""
    if not text or not policy.secrets:
        return []
    return _find(text, policy, 0)


def _find(text: str, policy: RedactionPolicy, depth: int) -> list[Finding]:
    low = _lower(text)
    found: list[Finding] = []
    _private_key_blocks(text, found)
    _token_findings(text, low, policy, found)
    _context_findings(text, low, found)
    _credential_findings(text, low, found)
    _flag_findings(text, low, found)
    _keyword_findings(text, low, found)
    _prose_findings(text, low, found)
    if depth < ESCAPED_DEPTH and "\\" in text and text.lstrip()[:1] in ("{", "[", '"'):
        _escaped_findings(text, policy, found, depth)  # JSON (a tool call's arguments): its strings decoded
    if not found:
        return []
    taken = _Spans(m.span() for m in PLACEHOLDER_RE.finditer(text)) if "[secret:" in text else _Spans()
    kept: list[Finding] = []
    for f in sorted(found, key=lambda f: (f.priority, f.start, f.start - f.end)):
        span_allowed = f.end - f.start != len(f.value) and policy.allowed(text[f.start : f.end])
        if policy.allowed(f.value) or span_allowed or not taken.add(f.start, f.end):
            continue
        kept.append(f)
    out = []
    for f in sorted(kept, key=lambda f: f.start):  # a placeholder never breaks the JSON it sits in
        s, e = json_safe(text, f.start, f.end)
        e = separated_end(text, s, e)
        if e > s and (s, e) == (f.start, f.end):
            out.append(f)
        elif e > s:  # the span lost characters it may not take: a value that was the raw span loses them too
            raw = f.value == text[f.start : f.end]
            out.append(replace(f, start=s, end=e, value=text[s:e] if raw else f.value))
    return out


SEPARATORS = ";,&|"  # end an unquoted value when a space, a line end or the text's end follows them


def separated_end(text: str, start: int, end: int) -> int:
    """The end of the span ``text[start:end]`` without the separators it ends with (``SEPARATORS``) when a space, a
    line end or the end of the text follows them: in ``password=S3cr3t!; ls`` or ``token=X, then`` the ``;`` and
    ``,`` end a shell command or a clause and stay in the text, where ``password=Tr0ub4dor&3;x`` keeps its ``&`` and
    ``;`` (followed by more of the value). A span that is all separators is kept whole."""
    e = end
    if e < len(text) and not text[e].isspace():
        return end
    while e - 1 > start and text[e - 1] in SEPARATORS:
        e -= 1
    return e


def _escaped_findings(text: str, policy: RedactionPolicy, out: list[Finding], depth: int) -> None:
    """Findings in the decoded content of the text's escaped JSON strings (a tool call's arguments: a header after
    ``\\n``, Chinese written as ``\\uXXXX``), mapped back to the raw span; the value is the decoded secret (its
    fingerprint is that of the same secret written plainly)."""
    view = escaped_strings(text)
    if view is None:
        return
    for f in _find(view.text, policy, depth + 1):
        if view.literal(f.start) != view.literal(max(f.start, f.end - 1)):
            continue  # across two literals: not one secret
        s, e = view.raw(f.start), view.raw(f.end, end=True)
        if e > s:
            out.append(replace(f, start=s, end=e))


class _Spans:
    """Disjoint spans, sorted: ``add`` takes a span unless it overlaps one already taken (binary search: the
    overlap test of a text's k findings costs O(k log k), not O(k²))."""

    def __init__(self, spans: Iterable[tuple[int, int]] = ()) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        for s, e in spans:
            self.add(s, e)

    def add(self, s: int, e: int) -> bool:
        i = bisect.bisect_right(self.starts, s)
        if (i and self.ends[i - 1] > s) or (i < len(self.starts) and self.starts[i] < e):
            return False
        self.starts.insert(i, s)
        self.ends.insert(i, e)
        return True


def placeholder(finding: Finding, salt: bytes) -> str:
    """``[secret:KIND …TAIL#FP]`` (tail for long provider tokens) or ``[secret:KIND #FP]``."""
    fp = hmac.new(salt, finding.value.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:4]
    tail = finding.value.rstrip("=")[-4:] if finding.tail and len(finding.value) >= TAIL_MIN_LEN else ""
    if tail and all(c.isascii() and c.isprintable() and c not in "\"'\\[]" for c in tail):
        return f"[secret:{finding.kind} …{tail}#{fp}]"
    return f"[secret:{finding.kind} #{fp}]"


# ---------------------------------------------------------------------------------------------- private spans
def remove_private(text: str, markers: Sequence[tuple[str, str]] = DEFAULT_PRIVATE_MARKERS) -> tuple[str, int]:
    """``text`` without its private spans (markers included; case-insensitive; nested spans counted; an
    unclosed span runs to the end). Returns (text, spans removed)."""
    if not text or not markers:
        return text, 0
    low = text.lower()
    n = 0
    for opener, closer in markers:
        if opener not in low and closer not in low:
            continue
        pieces: list[str] = []
        depth, pos, keep_from = 0, 0, 0
        i = j = -2  # the next opener / closer at or after pos (-1: none left); found again only once passed
        while True:
            if i != -1 and i < pos:
                i = low.find(opener, pos)
            if j != -1 and j < pos:
                j = low.find(closer, pos)
            if i < 0 and j < 0:
                break
            if i >= 0 and (j < 0 or i < j):  # an opener
                if depth == 0:
                    pieces.append(text[keep_from:i])
                    n += 1
                depth += 1
                pos = i + len(opener)
            else:  # a closer
                if depth == 0:  # stray closer: drop the marker itself
                    pieces.append(text[keep_from:j])
                else:
                    depth -= 1
                pos = j + len(closer)
                if depth == 0:
                    keep_from = pos
        if depth == 0:
            pieces.append(text[keep_from:])
        text = "".join(pieces)
        low = text.lower()
    return text, n


# ---------------------------------------------------------------------------------------------- apply
def redact_text(text: str, policy: RedactionPolicy) -> tuple[str, int]:
    """``text`` with private spans removed and secrets replaced by placeholders. Returns (text, count). A text
    redacted recently under the same policy is answered from ``policy.memo``."""
    if not text:
        return text, 0
    hit = policy.memo.get(text)
    if hit is None:
        hit = _redact(text, policy)
        policy.memo.put(text, hit)
    return hit


FACT_JOIN = ": "  # a fact is redacted as the line "key: value" (a value alone has lost the key that marks it secret)


def redact_derived(value: str, source: str, redacted_source: str, policy: RedactionPolicy, key: str = "") -> str:
    """A value derived from a text when it was archived in clear (a tag, a hint, a fact's field) redacted as that
    text now is: redacted alone, and, with ``key`` (a fact's key), as the line ``key: value``, which the value alone
    is not (``db password`` / ``Tr0ub4dor&3x``). A value the text held in clear (``source``) that its redaction
    removed (not in ``redacted_source``) was a secret there, wherever the rule that saw it looked: it becomes one
    placeholder of kind ``derived`` (``placeholder``), so no derived copy outlives the text's redaction."""
    if not value:
        return value
    alone, _ = redact_text(value, policy)
    if key:
        line, _ = redact_text(key + FACT_JOIN + value, policy)
        if line.startswith(key + FACT_JOIN) and line[len(key) + len(FACT_JOIN) :] != value:
            return line[len(key) + len(FACT_JOIN) :]
    if alone == value and value in source and value not in redacted_source:
        return placeholder(Finding("derived", 0, len(value), value, 0), policy.salt)
    return alone


def redact_name(name: str, policy: RedactionPolicy) -> str:
    """``name`` (a session, user, agent, project, speaker or tool name) with its secrets replaced by placeholders,
    as ``redact_text`` does, but with no private span removed: a name is a key, matched on reads in this same form
    (``Scope.name``), and never becomes empty. Deterministic for a database (its salt) and idempotent."""
    if not name or not policy.secrets:
        return name
    hit = policy.memo.get("\x00name\x00" + name)
    if hit is None:
        hit = _redact(name, policy, private=False)
        policy.memo.put("\x00name\x00" + name, hit)
    return hit[0]


@functools.lru_cache(maxsize=1)
def _rules_digest() -> str:
    """sha256 of the source of the modules whose rules decide a redaction (this one, the finders it calls and the
    token table's modules)."""
    from lantern.archive import secret_context, secret_findings, secret_tokens, token_formats

    h = hashlib.sha256()
    for module in (sys.modules[__name__], secret_findings, secret_tokens, secret_context):
        h.update(Path(module.__file__).read_bytes())
    for path in sorted(Path(token_formats.__file__).parent.glob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()


def names_form(policy: RedactionPolicy) -> str:
    """An id of the form ``redact_name`` gives names under ``policy``: the redaction rules (their source) and the
    policy's own patterns, allow-list and salt. A store whose names were written in another form has them
    rewritten once (store/migrations.py ``rewrite_names``)."""
    h = hashlib.sha256(_rules_digest().encode())
    h.update(policy.salt)
    h.update(repr([(k, p.pattern) for k, p in policy.extra]).encode("utf-8", "surrogatepass"))
    h.update(repr(sorted(policy.allow_values)).encode("utf-8", "surrogatepass"))
    h.update(repr([p.pattern for p in policy.allow_patterns]).encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:32]


def _redact(text: str, policy: RedactionPolicy, private: bool = True) -> tuple[str, int]:
    text, n = remove_private(text, policy.private) if private else (text, 0)
    # to a fixpoint (at most 3 passes; the second finds something only in contrived text): a lower-priority
    # candidate cut short by a higher-priority finding may be a match of its own once that one is replaced, and
    # redacting must be idempotent
    for _ in range(3):
        found = find_secrets(text, policy)
        if not found:
            break
        parts, pos = [], 0
        made: dict[tuple[str, str, bool], str] = {}  # one HMAC per distinct secret of the text
        for f in found:
            parts.append(text[pos : f.start])
            key = (f.kind, f.value, f.tail)
            if key not in made:
                made[key] = placeholder(f, policy.salt)
            parts.append(made[key])
            pos = f.end
        parts.append(text[pos:])
        text = "".join(parts)
        n += len(found)
    return text, n


def redact_json(value: Any, policy: RedactionPolicy) -> tuple[Any, int]:
    """``value`` (a JSON value: str, list, dict, number, bool, None) with every string in it redacted
    (``redact_text``; object keys stay as they are). Returns (value, count); an unchanged value (or container) is
    returned as it is. Iterative, so any nesting the JSON parser allowed (a message's ``meta`` 900 deep) is read
    without Python's recursion limit; linear in the number of values."""

    def leaf(v: Any) -> tuple[Any, int]:
        return redact_text(v, policy) if isinstance(v, str) else (v, 0)

    def children(node: Any) -> Any:
        return iter(node.items()) if isinstance(node, dict) else enumerate(node)

    if not isinstance(value, (list, dict)):
        return leaf(value)
    # a frame: [container, its children's iterator, (key, new value, count) of each child read, the key pending]
    stack: list[list[Any]] = [[value, children(value), [], None]]
    while True:
        frame = stack[-1]
        node, items, done = frame[0], frame[1], frame[2]
        for key, child in items:
            if isinstance(child, (list, dict)):
                frame[3] = key
                stack.append([child, children(child), [], None])
                break
            done.append((key, *leaf(child)))
        else:
            stack.pop()
            n = sum(k for _, _, k in done)
            if n:
                node = {k: v for k, v, _ in done} if isinstance(node, dict) else [v for _, v, _ in done]
            if not stack:
                return node, n
            stack[-1][2].append((stack[-1][3], node, n))


def _redact_each(
    items: Sequence, get: Callable, rebuild: Callable, policy: RedactionPolicy, redact: Callable = redact_text
) -> tuple[list, int]:
    """``items`` with ``get(item)`` of each redacted by ``redact``; an item is rebuilt only when something was
    found."""
    out, total = [], 0
    for item in items:
        value, n = redact(get(item) or "", policy)
        total += n
        out.append(rebuild(item, value) if n else item)
    return out, total


def redact_messages(messages: Sequence[Message], policy: RedactionPolicy) -> tuple[list[Message], int]:
    """Every text a message carries to the store, redacted: its text, tool-call names and arguments, tool-result
    names and contents and file list (``redact_text``), its speaker name and session (``redact_name``) and every
    string of its ``meta`` (``redact_json``). Unchanged messages are returned as they are; changed ones are copies.
    Returns (messages, total count). ``tests/test_secret_coverage.py`` puts a secret in each field of ``Message``
    and of ``NewEntry`` (store/base.py) and fails on a field that reaches the database in clear."""
    out: list[Message] = []
    total = 0

    def name(value: str | None) -> tuple[str | None, int]:
        new = redact_name(value, policy) if value else value
        return new, int(new != value)

    for m in messages:
        text, n_text = redact_text(m.text or "", policy)
        calls, n_calls = _redact_each(m.tool_calls, lambda c: c, lambda c, v: v, policy, _redact_call)
        results, n_results = _redact_each(m.tool_results, lambda r: r, lambda r, v: v, policy, _redact_result)
        files, n_files = _redact_each(m.files, lambda f: f, lambda f, v: v, policy)
        files = [f for f in files if f]
        speaker, n_name = name(m.name)
        session, n_session = name(m.session)
        meta, n_meta = redact_json(m.meta, policy) if m.meta else (m.meta, 0)
        changed = n_text + n_calls + n_results + n_files + n_name + n_session + n_meta
        total += changed
        if changed:
            m = replace(
                m,
                text=text,
                tool_calls=calls,
                tool_results=results,
                files=files,
                name=speaker,
                session=session,
                meta=meta,
            )
        out.append(m)
    return out, total


def _redact_call(call: ToolCall, policy: RedactionPolicy) -> tuple[ToolCall, int]:
    arguments, n = redact_text(call.arguments or "", policy)
    name = redact_name(call.name, policy) if call.name else call.name
    n += name != call.name
    return (ToolCall(name, arguments, call.id) if n else call), n


def _redact_result(result: ToolResult, policy: RedactionPolicy) -> tuple[ToolResult, int]:
    content, n = redact_text(result.content or "", policy)
    name = redact_name(result.name, policy) if result.name else result.name
    n += name != result.name
    return (ToolResult(content, result.call_id, name) if n else result), n
