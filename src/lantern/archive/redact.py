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
import hashlib
import hmac
import re
import secrets as _random
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

from lantern.archive.secret_context import (
    command_passwords,
    cookie_is_secret,
    cookie_values,
    escaped_strings,
    json_safe,
    kubernetes_secret_values,
    netrc_passwords,
    pgpass_lines,
    php_defines,
    provider_assignments,
    signed_url_params,
    xml_add_values,
    xml_elements,
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
    "redact_text",
    "remove_private",
    "set_secret_redaction",
    "PLACEHOLDER_RE",
]

META_SALT = "redact_salt"
META_SWITCH = "redact_secrets"  # "off" = explicit per-database opt-out of secret redaction
DEFAULT_PRIVATE_MARKERS: tuple[tuple[str, str], ...] = (("<private>", "</private>"),)
VALUE_END = ".,;:!?)]}"  # stripped from an unquoted keyword value for its fingerprint (the span still covers it)
PROSE_END = ".,;:!?)」”\"'"  # the same for a prose value ("the password is X).")
TAIL_MIN_LEN = 24  # a provider token shows its last 4 characters only from this length on (see module doc)
ESCAPED_DEPTH = 2  # JSON strings decoded inside decoded strings down to this depth (arguments holding JSON text)

PLACEHOLDER_RE = re.compile(r"\[secret:[a-z0-9][a-z0-9-]* (?:…[!-~]{4})?#[0-9a-f]{4}\]")

MEMO_MAX_TEXT = 65_536  # ours: texts up to this many characters have their redaction remembered (RedactionMemo)
MEMO_BYTES = 16_000_000  # ours: memory of the remembered texts per policy (keys, results, entries), LRU dropped first
MEMO_ENTRY_BYTES = 200  # ours: what one remembered text costs besides its strings (dict slot, tuple, int)

# priorities (lower wins an overlap)
P_BLOCK, P_TOKEN, P_CRED, P_FLAG, P_KEYWORD, P_PROSE = 0, 1, 2, 3, 4, 5


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
    if salt is None:
        with store.transaction() as db:
            db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (META_SALT, _random.token_hex(16)))
        salt = store.get_meta(META_SALT)  # another process may have won the race: use the stored one
    return make_policy(
        bytes.fromhex(salt),
        secrets=(store.get_meta(META_SWITCH) or "on") != "off",
        patterns=getattr(config, "redact_patterns", ()),
        allow=getattr(config, "redact_allow", ()),
        private_markers=getattr(config, "private_markers", DEFAULT_PRIVATE_MARKERS),
    )


def set_secret_redaction(lantern: Any, enabled: bool) -> None:
    """Switch secret redaction on or off for the database of ``lantern`` (a ``Lantern``): stored in its meta table,
    so every later ``Lantern`` on that file follows it. Private spans are removed either way."""
    with lantern.store.transaction() as db:
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (META_SWITCH, "on" if enabled else "off"))
    lantern.redaction = replace(lantern.redaction, secrets=enabled)


# ---------------------------------------------------------------------------------------------- findings
@dataclass(frozen=True, slots=True)
class Finding:
    """A secret found in a text: ``text[start:end]`` is the span its placeholder replaces (only the password of a
    URL, only the value of an assignment); ``value`` is the secret the fingerprint sees: the span itself, or, for
    an unquoted keyword or prose value, the span without its trailing sentence punctuation (``password:
    Hunter2Secret!`` — the ``!`` may be the password's last character, so the span covers it, but
    "Hunter2Secret." and "Hunter2Secret" get one fingerprint). The rule is the same for a value at the start of a
    line that runs to the line's end (``PASSWORD=Hunter2Secret!`` in a .env, ``password: Hunter2Secret!`` in
    YAML) and for a password mid-line that runs to the next space (``(password=Hunter2Secret);``): the span is the
    whole value, so nothing of it stays in clear, and the fingerprint of a keyword value leaves out its final
    ``.,;:!?)]}`` (``VALUE_END``), so it matches the same password written elsewhere (our choice: a consistent
    fingerprint over telling ``abc!`` from ``abc``, which share one, as they do mid-line). A quoted value is exactly
    what its quotes
    enclose. The allow-list sees both ``value`` and the span. ``kind`` names it in the placeholder; ``tail`` says
    whether its last 4 characters may be shown."""

    kind: str
    start: int
    end: int
    value: str
    priority: int
    tail: bool = False


def _slug(kind: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-")
    return s or "custom"


def _has_letter_and_digit(s: str) -> bool:
    return any(c.isdigit() for c in s) and any(c.isalpha() for c in s)


@lru_cache(maxsize=1)
def _entropy() -> Callable[[str], float]:
    """detect-secrets' Shannon entropy over the base64 charset (bits per character)."""
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

    return Base64HighEntropyString().calculate_shannon_entropy


@lru_cache(maxsize=1)
def _strong_words() -> frozenset[str]:
    """Last words of a key that make it a *strong* secret context: detect-secrets' KeywordDetector denylist
    (``api_?key`` -> ``apikey``, ``password``, …) plus ours."""
    from detect_secrets.plugins.keyword import DENYLIST

    words = {w.replace("_?", "") for w in DENYLIST}
    return frozenset(
        words
        | {
            "pass",
            "passphrase",
            "passcode",
            "secretkey",
            "accesskey",
            "privatekey",
            "clientsecret",
            "masterkey",
            "signingkey",
            "encryptionkey",
            "密码",
            "口令",
            "密钥",
            "私钥",
        }
    )


# key words before "key" that make ``..._key`` strong (detect-secrets' denylist prefixes, plus ours)
_KEY_QUALIFIERS = frozenset(
    {
        "api",
        "auth",
        "service",
        "account",
        "db",
        "database",
        "priv",
        "private",
        "client",
        "secret",
        "access",
        "signing",
        "encryption",
        "master",
        "license",
        "webhook",
        "app",
    }
)
_TYPE_NAMES = frozenset(
    {
        "str",
        "string",
        "int",
        "bool",
        "bytes",
        "any",
        "none",
        "null",
        "nil",
        "optional",
        "text",
        "secretstr",
        "varchar",
        "dict",
        "list",
        "object",
        "number",
        "boolean",
        "float",
        "uuid",
        "required",
        "true",
        "false",
        "undefined",
        "empty",
        "char",
        "password",
        "secret",
        "token",
        "redacted",
        "hidden",
        "masked",
        "unset",
        "notset",
        "dummy",
        "placeholder",
        "example",
        "pass",
        "pwd",
        "passwd",
        "xxx",
        "todo",
        "tbd",
        "default",
        "auto",
        "env",
        "file",
        "prompt",
        "environment",
        "omitted",
    }
)
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+|[^\W\d_]+")
_SPLIT = re.compile(r"[_.\-\s]+")
_BARE_IDENT = re.compile(r"[a-z_][a-z0-9_]*")
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_ATTR = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_HEXISH = re.compile(r"[0-9a-fA-F]{7,128}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_\-+/=.~]+")


def _key_words(key: str) -> list[str]:
    return [w.lower() for part in _SPLIT.split(key) for w in _CAMEL.findall(part)]


def _key_class(key: str) -> str:
    """``strong``, ``weak-token``, ``weak-key`` or ``""`` (not a secret context) from the key's last word."""
    words = _key_words(key)
    if not words:
        return ""
    last, prev = words[-1], words[-2] if len(words) > 1 else ""
    strong = _strong_words()
    if last in strong or last.endswith(("password", "passwd", "secret")):
        return "strong"
    if last == "key" and prev in _KEY_QUALIFIERS:
        return "strong"
    if words[-3:] == ["secret", "key", "base"]:  # Ruby on Rails' secret_key_base
        return "strong"
    if last in ("token", "auth", "credential", "credentials", "authtoken", "accesstoken", "apikey") or last.endswith(
        "token"
    ):
        return "weak-token"
    if last == "key" and prev:  # a bare "key" is a dictionary key, never a secret context
        return "weak-key"
    return ""


# a value that starts with "%" names a variable only as %NAME% (Windows) or %(name)s / %s (format strings)
_PERCENT_VAR = re.compile(r"%(?:[A-Za-z_][A-Za-z0-9_]*%|\([A-Za-z_]\w*\)[sdr]|[sdr])")
# keys documented as public, published in web pages and apps (Stripe's and Clerk's publishable keys, Supabase's
# publishable keys): no secret under a weak key (an "…_KEY" or "…_TOKEN"); a strong key ("…_SECRET") still hides them
PUBLIC_KEY_PREFIXES = ("pk_live_", "pk_test_", "sb_publishable_")


def _is_reference(v: str) -> bool:
    """A value that names a secret instead of holding it: a variable, a template, a documentation placeholder,
    an already masked value."""
    low = v.lower()
    if (
        v[0] in "$<{["
        or v.startswith("**")
        or _PERCENT_VAR.fullmatch(v)
        or low.startswith(
            (
                "...",
                "…",
                "xxx",
                "os.",
                "process.env",
                "env(",
                "getenv",
                "secrets.",
                "env[",
                "env.",
                "[secret:",
                "sha256:",
                "sha512:",
                "file:",
                "vault:",
            )
        )
    ):
        return True
    if ("your" in low and any(w in low for w in ("key", "token", "pass", "secret"))) or "unique phrase" in low:
        return True  # "your-api-key-here", WordPress's "put your unique phrase here"
    if "****" in v or "example" in low or "{{" in v or "${" in v:
        return True
    return len(set(v)) == 1  # "xxxxxxxx", "********"


def _is_path(v: str) -> bool:
    return (
        v.startswith(("/", "~/", "./", "../", "\\\\")) or (len(v) > 2 and v[1] == ":" and v[2] in "\\/") or "://" in v
    )


def _looks_random(v: str, min_len: int = 16, min_entropy: float = 3.0) -> bool:
    return (
        len(v) >= min_len
        and _TOKEN_CHARS.fullmatch(v) is not None
        and _has_letter_and_digit(v)
        and not _is_path(v)
        and _entropy()(v) >= min_entropy
    )


# base64 of 30+ characters with upper case, lower case and digits: an AWS secret key may start with "/" or "+", a path
# (letters, digits, "/" alone) under a secret's key is one too
_RANDOM_B64 = re.compile(r"(?=.*[A-Z])(?=.*[a-z])(?=.*\d)[A-Za-z0-9+/]{30,512}={0,2}")


def _strong_value_ok(v: str, key: str, quoted: bool, code_like: bool) -> bool:
    if len(v) < 4 or _is_reference(v) or (_is_path(v) and not _RANDOM_B64.fullmatch(v)):
        return False
    low = v.lower()
    if low in _TYPE_NAMES or low == key.lower() or low in _key_words(key):
        return False
    if quoted:
        return not v.isspace()
    if "(" in v or _ATTR.fullmatch(v) or _ENV_NAME.fullmatch(v):
        return False  # getpass(), self.api_key, settings.SECRET_KEY, OPENAI_API_KEY (a variable's name)
    if code_like and _BARE_IDENT.fullmatch(v):
        return False  # api_key = api_key / password = input  (a Python/JS variable)
    return True


# ---------------------------------------------------------------------------------------------- regexes
_BEGIN_KEY = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----")
_KEY_TAIL = re.compile(
    r"(?:(?:\r?\n|(?:\\r)?\\n)(?:[A-Za-z0-9+/=]+|(?:Proc-Type|DEK-Info|Comment|Version): ?[^\n\\]*|[ \t]*))*"
)

# Every pattern below starts with a literal, so that the regex engine can skip to its candidates (a pattern
# that starts with a look-behind or an IGNORECASE alternation is tried at every position: 10x slower on a 300 KB
# log). Case-insensitive ones run on ``low``, the lower-cased text (same length, same offsets); the boundary a
# look-behind would check is checked in Python.
_URL_RUN = re.compile(r"[^\s\"'<>\\`]*")  # a URL's characters after its "://"
_URL_USER = re.compile(r"[^/?#@\[\]]*")  # a userinfo's user: no delimiter of RFC 3986's authority
# what follows the "@" of a userinfo: a host (name, IPv4, [IPv6]) and an optional port, then the end of the authority
# (unambiguous and bounded: a run of host characters not followed by a delimiter is given back at most 253 times)
_URL_HOST = re.compile(r"(?:\[[0-9A-Fa-f:.]{2,64}\]|[A-Za-z0-9.\-_]{1,253})(?::\d{1,5})?(?=[/?#\s\"'<>,;)\]\\`]|$)")
_HOSTLIKE = re.compile(r"[.:\[]")  # a host name with a dot, a port or an IPv6 address (not a password's "@D2#")
_PORT_PATH = re.compile(r"\d{1,5}[/?#]")  # "host:8443/path?mail=a@b": a port and a path, not a password


def _url_passwords(text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of the password of each ``scheme://user:password@host`` (RFC 3986 userinfo). The password
    runs from the first ``:`` after ``://`` to the first ``@`` that a host name with a dot, a port or an IPv6
    address follows (else to the last ``@`` that any host follows: ``@db/app``), so a password holding ``#``,
    ``/``, ``?`` or ``@`` unencoded (as people write them) is covered whole; one that is a port and a path
    (``host:8443/x?to=a@b.org``) is not a password. Linear: each URL (the run after ``://`` to the next ``://`` or
    white space) is read a bounded number of times."""
    run_end = -1
    i = text.find("://")
    while i >= 0:
        a = i + 3
        if a > run_end:
            run_end = _URL_RUN.match(text, a).end()
        nxt = text.find("://", a, run_end)
        seg_end = nxt if nxt >= 0 else run_end
        colon = text.find(":", a, seg_end)
        if colon >= 0 and _URL_USER.match(text, a, colon).end() == colon:
            at, end = text.find("@", colon + 1, seg_end), -1
            while at >= 0:
                host = _URL_HOST.match(text, at + 1)
                if host is not None and host.end() > at + 1:
                    end = at
                    if _HOSTLIKE.search(host.group()) or host.group().startswith("localhost"):
                        break
                at = text.find("@", at + 1, seg_end)
            v = text[colon + 1 : end] if end > colon else ""
            if v and not _PORT_PATH.match(v):
                yield colon + 1, end
        i = nxt if nxt >= 0 else text.find("://", max(run_end, a))


_AUTH_HEADER = re.compile(  # on low
    r"authorization\\?[\"']?\s*[:=]\s*\\?[\"']?\s*"
    r"(?P<scheme>bearer|basic|token|apikey|api-key|digest|key)?\s*(?P<secret>[a-z0-9\-._~+/]{8,}=*)"
)
_BEARER = re.compile(r"bearer\s+(?P<secret>[a-z0-9\-._~+/]{16,}=*)")  # on low
_CURL_USER = re.compile(r"-(?:u|-user)\s+[\"']?(?P<user>[^\s:\"'$]+):(?P<secret>[^\s\"'\\]+)")
_FLAG = re.compile(  # on low
    r"--(?P<key>password|passwd|pass|passphrase|token|api-key|apikey|secret|client-secret|"
    r"auth-token|access-token|secret-key|access-key)(?:=|\s+)(?:(?P<q>\\?[\"'])(?P<qsecret>(?:(?!(?P=q))(?:\\[^\n]|[^\\\n])|'(?=[a-z0-9])){1,512})(?P=q)"
    r"|(?P<secret>[^\s\"'\\]+))"
)
_MYSQL_P = re.compile(
    r"mysql(?:dump|admin|sh)?\b[^\n|;&]{0,200}?\s-p(?P<secret>[^\s\"'\\]{3,})"
)  # case matters: -P is the port
_KEYWORD_HIT = re.compile(  # on low: a secret word ending an identifier, then an assignment operator
    r"(?:pass|pwd|secret|token|auth|credential|key|contrase)[a-z0-9_\-]{0,64}\\?[\"'`]?\]?[ "
    r"\t]*(?::=|=>|=(?![=>])|:(?![:/])|：)"
)
_IDENT_RUN = re.compile(r"[A-Za-z0-9_.\-]*")  # matched in the reversed text: the identifier before a keyword hit
# what may stand between a line's start and a config line's key: indentation, a YAML dash, export / set / env
_CONFIG_LEAD = re.compile(r"(?:^|\n)[ \t\-]*(?:(?:export|set|env)[ \t]+)?\Z", re.I)
_ASSIGN = re.compile(
    r"(?P<kq>\\?[\"'`]?)"
    r"(?P<key>[A-Za-z0-9_.\-]{0,80}?(?:pass|pwd|secret|token|auth|credential|key|contrase)[A-Za-z0-9_\-]{0,64})"
    r"(?P=kq)\]?[ \t]*(?P<op>:=|=>|=(?![=>])|:(?![:/])|：)[ \t]*"
    r"(?:(?P<vq>\\?[\"'`])(?P<qval>(?:(?!(?P=vq))(?:\\[^\n]|[^\\\n])|'(?=[A-Za-z0-9])){1,512})(?P=vq)|(?P<val>[^\s\"'`\\,;&<>(){}\[\]]{1,512}))",
    re.I,
)
_VALUE_TAIL = re.compile(r"(?:(?!\[secret:)[^\s\"'`\\]){0,512}")  # the rest of an unquoted password (_keyword_findings)
_KEYWORD_TRIGGER = ("pass", "pwd", "secret", "token", "auth", "credential", "key", "contrase")
# between "password is" and its value (ours): at most one adverb and one "set to" from short lists, so that "the
# password is in the vault" stays prose; then an optional separator, a colon (ASCII or full-width) or a dash that
# a space follows (a value may start with "-")
_PROSE_ADVERB = (
    r"(?:\s+(?:now|still|currently|always|again)(?=[\s:：]))?(?:\s+(?:set|changed|reset|updated)\s+to(?=[\s:：]))?"
)
_PROSE_SEP = r"(?:\s*(?:[:：]|[-–—]{1,2}(?=\s)))?"
# an opening quote -> the characters that close it (ours): ASCII, backticks, curly, guillemets (also with French
# spacing, « X »), German „…“, CJK corner brackets
_QUOTES = {'"': '"', "'": "'", "`": "`", "“": "”“", "‘": "’‘", "«": "»", "‹": "›", "„": "“”", "「": "」", "『": "』"}
_QUOTE_SPACE = " \u00a0\u202f"
_TYPO_QUOTES = "“‘«‹„「『"  # the openers above that are not ASCII (a keyword value's regex takes them as its own)
_PROSE_QUOTE = r"(?:(?P<q>[\"'`“‘«‹„「『])[ \u00a0\u202f]?)?"
# the value itself is read in Python from the match's end (_prose_value): a quoted one runs to its closing quote
_PROSE_EN = re.compile(  # on low
    r"pass(?:word|wd|phrase)\s+(?:is|was)(?![a-z0-9_])" + _PROSE_ADVERB + _PROSE_SEP + r"\s*" + _PROSE_QUOTE
)
# Chinese (ours): at most two adverbs (现在 now, 还 still, 已经 already, 被 passive, 应该 should, …) before the verb
# (是, 为, 改成(了), 设置为, 换成(了), …), short lists as in English; a value needs 4 ASCII characters (see below),
# so 密码现在是错的 / 密码改成了更长的 stay prose
_PROSE_ZH_ADVERB = (
    r"(?:(?:现在|現在|目前|当前|當前|还|還|仍然|仍|依然|已经|已經|已|也|就|都|一直|又|被|应该|應該|可能)"
    r"\s*){0,2}"
)
_PROSE_ZH_VERB = r"(?:是|为|為|(?:改|换|換|变|變|设|設|设置|設置|重置|更改|修改|更新)(?:成|为|為)了?|设定为|設定為)"
_PROSE_ZH = re.compile(
    r"(?:密码|口令|密钥|私钥)\s*(?:[:：=]|" + _PROSE_ZH_ADVERB + _PROSE_ZH_VERB + _PROSE_SEP + r")"
    r"\s*" + _PROSE_QUOTE
)
_WORD_PART = r"(?:[A-Z]?[a-z]+|[A-Z]+)"
_WORD_SHAPE = re.compile(
    _WORD_PART + r"(?:(?:-" + _WORD_PART + r"){1,2}|['’][a-z]{1,2})"
)  # re-used, up-to-date, user's
_LENGTH_RANGE = re.compile(r"(\d{1,3})-(\d{1,3})")  # "the password is 8-64 chars"
_PROSE_RUN = re.compile(r"[!-~]{4,128}")  # an unquoted prose value: printable ASCII up to the next space
QUOTED_MAX = 128  # a quoted value is at most this many characters, on one line (else the quote is not its own)
_PROSE_ZH_TRIGGER = ("密码", "口令", "密钥", "私钥")
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _after_word(text: str, i: int, extra: str = "") -> bool:
    """True when position ``i`` does not continue an ASCII word (``extra``: more characters that count as word)."""
    return i == 0 or (text[i - 1] not in _WORD_CHARS and text[i - 1] not in extra)


def _lower(text: str) -> str:
    """``text`` lower-cased with the same length (offsets shared): ``str.lower`` unless a character changes length
    (``İ``), then ASCII only."""
    low = text.lower()
    return low if len(low) == len(text) else text.translate(_ASCII_LOWER)


_ASCII_LOWER = {c: c + 32 for c in range(65, 91)}


def _private_key_blocks(text: str, out: list[Finding]) -> None:
    if "PRIVATE KEY" not in text:
        return
    pos = 0
    ends: dict[str, int] = {}  # END marker -> its next position from the last search (-1: none after it)
    while (m := _BEGIN_KEY.search(text, pos)) is not None:
        label, block = m.group(1), m.group(2) or ""
        end_marker = f"-----END {label}PRIVATE KEY{block}-----"
        end = ends.get(end_marker, -2)
        if end == -2 or 0 <= end < m.end():  # not looked for yet, or the one found is behind us: each END is
            end = ends[end_marker] = text.find(end_marker, m.end())  # searched for once, and "none" stays none
        if end >= 0:
            stop = end + len(end_marker)
        else:  # a truncated block (a tool output cut short): up to the end of its base64 lines
            stop = _KEY_TAIL.match(text, m.end()).end()
            while stop > m.end() and text[stop - 1] in " \t\r\n":
                stop -= 1
        kind = (label.strip().lower().replace(" ", "-") + "-private-key") if label.strip() else "private-key"
        out.append(Finding(kind, m.start(), stop, text[m.start() : stop], P_BLOCK))
        pos = stop


def _token_findings(text: str, low: str, policy: RedactionPolicy, out: list[Finding]) -> None:
    for kind, s, e in find_tokens(text, low):
        out.append(Finding(kind, s, e, text[s:e], P_TOKEN, tail=e - s >= TAIL_MIN_LEN))
    for kind, rx in policy.extra:
        for m in rx.finditer(text):
            g = "secret" if "secret" in rx.groupindex else (1 if rx.groups else 0)
            s, e = m.span(g)
            if e > s:
                out.append(Finding(kind, s, e, text[s:e], P_TOKEN))


def _rest_of_line(text: str, end: int) -> str:
    le = text.find("\n", end)
    return text[end : le if le >= 0 else len(text)]


def _credential_findings(text: str, low: str, out: list[Finding]) -> None:
    if "://" in text:
        for s, e in _url_passwords(text):
            v = text[s:e]
            if (v.isdigit() and len(v) <= 5) or _is_reference(v) or v.lower() in _TYPE_NAMES:
                continue  # host:port, ${DB_PASSWORD}, a documentation "password"
            out.append(Finding("url-password", s, e, v, P_CRED))
    if "authorization" in low:
        for m in _AUTH_HEADER.finditer(low):
            if not _after_word(low, m.start()):  # Authorization, Proxy-Authorization, X-Authorization
                continue
            v = text[m.start("secret") : m.end("secret")]
            scheme = (m.group("scheme") or "").lower()
            if _is_reference(v) or _ENV_NAME.fullmatch(v) or (not scheme and not _looks_random(v, 12, 2.5)):
                continue
            kind = "basic-auth" if scheme == "basic" else "bearer-token"
            out.append(Finding(kind, m.start("secret"), m.end("secret"), v, P_CRED))
    if "bearer" in low:
        for m in _BEARER.finditer(low):
            if not _after_word(low, m.start()):
                continue
            v = text[m.start("secret") : m.end("secret")]
            if not _is_reference(v) and _looks_random(v, 16, 2.5):
                out.append(Finding("bearer-token", m.start("secret"), m.end("secret"), v, P_CRED))
    if "-u" in text:
        for m in _CURL_USER.finditer(text):
            if not _after_word(text, m.start(), "-"):
                continue
            v = m.group("secret")
            if not (_is_reference(v) or (v.isdigit() and len(v) <= 5)):
                out.append(Finding("basic-auth", m.start("secret"), m.end("secret"), v, P_CRED))


def _flag_findings(text: str, low: str, out: list[Finding]) -> None:
    if "--" in text:
        for m in _FLAG.finditer(low):
            if not _after_word(low, m.start(), "-"):
                continue
            g = "qsecret" if m.group("qsecret") is not None else "secret"
            v = text[m.start(g) : m.end(g)]
            if _strong_value_ok(v, m.group("key"), g == "qsecret", code_like=False):
                kind = "password" if "pass" in m.group("key").lower() else "secret"
                out.append(Finding(kind, m.start(g), m.end(g), v, P_FLAG))
    if "mysql" in text:
        for m in _MYSQL_P.finditer(text):
            if not _after_word(text, m.start(), "-"):
                continue
            v = m.group("secret")
            if not _is_reference(v):
                out.append(Finding("password", m.start("secret"), m.end("secret"), v, P_FLAG))


def _kind_of_key(key: str, cls: str) -> str:
    words = _key_words(key)
    if any("pass" in w or w in ("pwd", "密码", "口令") for w in words):
        return "password"
    if cls == "weak-token" or (words and words[-1].endswith("token")):
        return "token"
    if "aws" in words:
        return "aws-secret-key"
    if "api" in words or (words and words[-1] == "apikey"):
        return "api-key"
    return "secret"


def _keyword_findings(text: str, low: str, out: list[Finding]) -> None:
    if not any(t in low for t in _KEYWORD_TRIGGER):
        return
    done = -1
    rev = ""  # the text reversed, made at the first hit: the identifier before a hit is a forward match in it
    for hit in _KEYWORD_HIT.finditer(low):
        if hit.start() <= done or (
            hit.start() and text[hit.start() - 1] == "[" and low.startswith("secret:", hit.start())
        ):
            continue  # inside the assignment (or the value) just found, or a placeholder's "[secret:"
        # back to the start of the identifier (and its opening quote), then the full pattern anchored there
        rev = rev or text[::-1]
        back = _IDENT_RUN.match(rev, len(text) - hit.start()).end() - (len(text) - hit.start())
        start = hit.start() - min(back, 80)
        if start <= done:
            continue
        ident = start
        if start > 0 and text[start - 1] in "\"'`":
            start -= 1
            if start > 0 and text[start - 1] == "\\":
                start -= 1
        if start > 0 and (text[start - 1] in _WORD_CHARS or text[start - 1] in ".-"):
            continue
        m = _ASSIGN.match(text, start)
        if m is None and ident != start:  # the quote does not close after the key: it encloses the whole
            m = _ASSIGN.match(text, ident)  # assignment (run `PASSWORD=X` first, "password: X")
        if m is None:
            continue
        done = m.end()
        key = m.group("key")
        cls = _key_class(key)
        if not cls:
            continue
        quoted = m.group("qval") is not None
        g = "qval" if quoted else "val"
        s = m.start(g)
        v = raw = m.group(g)
        if not quoted and raw[0] in _TYPO_QUOTES:  # password: “X!” / «X» / 「X」: the value regex took the quote
            span = _quoted_value(text, raw[0], s + 1)
            if span is not None:  # all that the quotes enclose, as in ASCII quotes (spaces too: see _closing_quote)
                s, e = span
                v = raw = text[s:e]
                quoted = True
            else:  # not closed: the value after the quote
                s, raw = s + 1, raw[1:]
                v = raw
        if not quoted:
            v = v.rstrip(VALUE_END)  # the fingerprinted value; the span covers ``raw`` (see Finding)
        if not v:
            continue
        cover = len(raw)
        config_line = _CONFIG_LEAD.search(text, max(0, m.start() - 40), m.start()) is not None
        after = _rest_of_line(text, s + len(v)) if config_line else ""  # only a config line reads it: linear
        if config_line and not quoted and after and not after[0].isspace():
            # a .env / YAML / INI value runs to the end of its line: "DB_PASSWORD=Tr0ub4dor&3;x" (the value regex
            # stops at & ; , for URL queries and shell lists; a strong key's value is extended below wherever it
            # stands, this is for the others); a trailing " # comment" is not part of it
            rest = after.split(" #", 1)[0].split("[secret:", 1)[0].rstrip()  # nor is a placeholder glued to it
            if rest and not any(ch.isspace() for ch in rest):
                v, after = v + after[: len(rest)], after[len(rest) :]
                cover = len(v)
                v = v.rstrip(VALUE_END)  # the fingerprint as mid-line (see Finding); the span covers all of it
        full = v
        if cls == "strong" and not quoted:
            # a password runs to the next space (or quote, backslash, placeholder) wherever it stands: the value regex
            # stops at , ; & ( ) [ ] { } < > (URL queries, shell lists, code), all legal in a password (stopping there,
            # "ok DB_PASSWORD=Tr0ub4dor&3;x then" would leave "&3;x" in clear); the span covers the rest, the
            # fingerprint leaves out its trailing VALUE_END (see Finding)
            e = _VALUE_TAIL.match(text, s + cover).end()
            if e > s + cover:
                cover = e - s
                full = text[s:e].rstrip(VALUE_END) or v
        if cls == "strong":
            op = m.group("op")
            yaml_or_env = config_line and (not after.strip() or after.lstrip().startswith("#"))
            code_like = not (key.isupper() and op == "=") and not yaml_or_env
            if (
                not quoted
                and op in (":", "：")
                and not yaml_or_env
                and not (_has_letter_and_digit(full) or not full.isalnum())
            ):
                continue  # "Secret: always cache" / "password: required" in prose
            # judged on the value the regex took (code: "password=config[key]" is a variable), or, when that is
            # too short to be a password, on all of it ("password=ab;cd!")
            if not _strong_value_ok(v if len(v) >= 4 else full, key, quoted, code_like):
                continue
            v = full
        elif cls == "weak-token":
            if _is_reference(v) or v.startswith(PUBLIC_KEY_PREFIXES) or not _looks_random(v):
                continue
        else:  # weak-key: a cache key "deps-<hash>" or an id is not a secret; a key has mixed case
            if (
                _is_reference(v)
                or v.startswith(PUBLIC_KEY_PREFIXES)
                or not _looks_random(v, 20, 3.5)
                or _HEXISH.fullmatch(v)
                or v.lower() == v
                or v.upper() == v
            ):
                continue
        out.append(Finding(_kind_of_key(key, cls), s, s + cover, v, P_KEYWORD))
        done = max(done, s + cover)


def _closing_quote(text: str, opener: str, s: int) -> int:
    """Where the quote ``opener`` that opens at ``s - 1`` (or before one space, ``« X »``) closes: the first of its
    closing characters within ``QUOTED_MAX`` characters of ``s`` on the same line, except that a ``'`` or ``’``
    followed by a letter or digit is an apostrophe (``'don't panic'``, ``'Hunt'er2'``) unless no other closes it.
    -1 when none does (then the value is unquoted)."""
    closers = _QUOTES[opener]
    stop = min(len(text), s + QUOTED_MAX + 1)
    nl = text.find("\n", s, stop)
    if nl >= 0:
        stop = nl
    first = -1
    for i in range(s, stop):
        c = text[i]
        if c in closers:
            if c not in "'’" or i + 1 >= len(text) or not text[i + 1].isalnum():
                return i
            if first < 0:
                first = i
    return first


def _quoted_value(text: str, opener: str, s: int) -> tuple[int, int] | None:
    """The span of the value that the quote ``opener`` encloses from ``s`` on (the spaces of ``« X »`` left out),
    or None when the quote does not close (see ``_closing_quote``) or encloses only spaces."""
    close = _closing_quote(text, opener, s)
    if close < 0:
        return None
    a, b = s, close
    while a < b and text[a] in _QUOTE_SPACE:
        a += 1
    while b > a and text[b - 1] in _QUOTE_SPACE:
        b -= 1
    return (a, b) if b > a else None


def _is_english_word(v: str) -> bool:
    """An unquoted English prose value that is a word, not a password: a hyphenated word of 2 or 3 parts
    (``re-used``, ``up-to-date``), a word with an apostrophe (``user's``) or a length range (``8-64``). A secret's
    mix has a digit among letters, another symbol, 4+ hyphenated words (``correct-horse-battery-staple``, a
    passphrase) or digits that are not a range (``1234-5678``)."""
    if _WORD_SHAPE.fullmatch(v):
        return True
    r = _LENGTH_RANGE.fullmatch(v)
    return r is not None and int(r[1]) < int(r[2])


def _prose_findings(text: str, low: str, out: list[Finding]) -> None:
    hits = []
    if "pass" in low:
        hits += [(m, True) for m in _PROSE_EN.finditer(low) if _after_word(low, m.start())]
    if any(t in text for t in _PROSE_ZH_TRIGGER):
        hits += [(m, False) for m in _PROSE_ZH.finditer(text)]
    for m, english in hits:
        pos = m.end()
        q = m.group("q")
        span = _quoted_value(text, q, pos) if q else None
        if span is not None:  # "password is 'Hunter2 Secret!'." / «Hunter2!»: all that the quotes enclose is the secret
            s, e = span
            v = text[s:e]
            cover = len(v)
            if not english and sum("!" <= c <= "~" for c in v) < 4:
                continue  # 密码是「正确的」: a Chinese value needs 4 ASCII characters, quoted or not
        else:  # unquoted (or a quote that does not close): printable ASCII to the next space
            run = _PROSE_RUN.match(text, pos)
            if run is None:
                continue
            s, e = run.span()
            raw = text[s:e]
            v = raw.rstrip(PROSE_END)  # the span covers trailing punctuation, the fingerprint leaves it out (Finding)
            cover = len(raw)
        if len(v) < 4 or _is_reference(v) or v.lower() in _TYPE_NAMES or _is_path(v) or "(" in v or _ATTR.fullmatch(v):
            continue
        if english and (v.isalpha() or (span is None and _is_english_word(v))):
            continue  # "the password is incorrect", "... is re-used", "... is 8-64 chars", "... is “weak”"
        out.append(Finding("password", s, s + cover, v, P_PROSE))


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
        if e > s and (s, e) == (f.start, f.end):
            out.append(f)
        elif e > s:  # the span lost characters it may not take: a value that was the raw span loses them too
            raw = f.value == text[f.start : f.end]
            out.append(replace(f, start=s, end=e, value=text[s:e] if raw else f.value))
    return out


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


def _context_findings(text: str, low: str, out: list[Finding]) -> None:
    """Credentials known by their context (archive/secret_context.py): a provider's name in a key, .pgpass lines,
    ``<add key= value=>`` settings, Kubernetes Secret data, ``<password>`` elements, .netrc entries, a command's
    password flag, cookies, pre-signed URL signatures, PHP ``define()`` constants."""
    for provider, s, e in provider_assignments(text, low, _looks_random, _is_reference):
        out.append(Finding(f"{provider}-key", s, e, text[s:e], P_TOKEN, tail=True))
    for s, e in pgpass_lines(text):
        out.append(Finding("password", s, e, text[s:e], P_CRED))
    for key, s, e in xml_add_values(text, low):
        v, cls = text[s:e], _key_class(key)
        if (cls == "strong" and _strong_value_ok(v, key, True, False)) or (cls and _looks_random(v)):
            out.append(Finding(_kind_of_key(key, cls), s, e, v, P_KEYWORD))
    for s, e in kubernetes_secret_values(text, low):
        out.append(Finding("kubernetes-secret", s, e, text[s:e], P_CRED))
    for name, s, e in xml_elements(text, low):
        v, cls = text[s:e].strip(), _key_class(name)
        if (cls == "strong" and _strong_value_ok(v, name, True, False)) or (cls and _looks_random(v)):
            out.append(Finding(_kind_of_key(name, cls), s, e, text[s:e], P_KEYWORD))
    for s, e in netrc_passwords(text, low):
        if _strong_value_ok(text[s:e], "password", False, False):
            out.append(Finding("password", s, e, text[s:e], P_CRED))
    for s, e, quoted in command_passwords(text, low):
        if _strong_value_ok(text[s:e], "password", quoted, False):
            out.append(Finding("password", s, e, text[s:e], P_FLAG))
    for name, s, e, _ in cookie_values(text, low):
        v = text[s:e]
        if not _is_reference(v) and cookie_is_secret(name, v, _looks_random):
            out.append(Finding("cookie", s, e, v, P_CRED))
    for s, e in signed_url_params(text, low):
        v = text[s:e]
        if not _is_reference(v) and _looks_random(unquote(v), 16, 3.0):
            out.append(Finding("url-signature", s, e, v, P_CRED))
    for name, s, e in php_defines(text, low):
        v = text[s:e]
        if (_key_class(name) or name.upper().endswith("_SALT")) and _strong_value_ok(v, name, True, False):
            out.append(Finding(_kind_of_key(name, "strong"), s, e, v, P_KEYWORD))


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
