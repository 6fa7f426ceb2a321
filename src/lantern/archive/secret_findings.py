"""The findings of secrets known by what stands around them, for archive/redact.py (which runs them with the
provider tokens and user patterns, settles their overlaps by priority and writes the placeholders; its module
docstring gives the rules and their sources):

- ``_private_key_blocks``: PEM private-key blocks (a truncated one up to the end of its base64 lines).
- ``_credential_findings``: a URL's userinfo password, an ``Authorization`` header's credentials, curl's ``-u``.
- ``_flag_findings``: a password given on a command line (``--password X``, ``mysql -pX``).
- ``_keyword_findings``: the value of an assignment whose key names a secret (``password=…``, ``"api_key": "…"``),
  judged by the key's class (``_key_class``: strong, weak or none) and the value's shape.
- ``_prose_findings``: a password stated in English or Chinese prose (``the password is X``, ``密码是 X``).
- ``_context_findings``: the context forms of archive/secret_context.py, judged by the same key and value rules.

``Finding`` is what each appends to its ``out`` list; ``P_*`` are the priorities (lower wins an overlap). Every
finder is linear in the text (literal-led regexes, each position scanned once)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import unquote

from lantern import lazy_re
from lantern.archive.secret_context import (
    command_passwords,
    cookie_is_secret,
    cookie_values,
    kubernetes_secret_values,
    netrc_passwords,
    pgpass_lines,
    php_defines,
    provider_assignments,
    signed_url_params,
    xml_add_values,
    xml_elements,
)

VALUE_END = ".,;:!?)]}&|"  # stripped from an unquoted keyword value for its fingerprint (the span still covers it)
PROSE_END = ".,;:!?)」”\"'&|"  # the same for a prose value ("the password is X).")

# priorities (lower wins an overlap)
P_BLOCK, P_TOKEN, P_CRED, P_FLAG, P_KEYWORD, P_PROSE = 0, 1, 2, 3, 4, 5


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
    ``.,;:!?)]}&`` (``VALUE_END``), so it matches the same password written elsewhere (our choice: a consistent
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
_CAMEL = lazy_re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+|[^\W\d_]+")
_SPLIT = lazy_re.compile(r"[_.\-\s]+")
_BARE_IDENT = lazy_re.compile(r"[a-z_][a-z0-9_]*")
_SHELL_LIST = lazy_re.compile(r"[ \t]*(?:;|&&|\|\|)(?=\s|$)")  # a shell list operator ending a command
_ENV_NAME = lazy_re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_ATTR = lazy_re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_HEXISH = lazy_re.compile(
    r"[0-9a-fA-F]{7,128}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
_TOKEN_CHARS = lazy_re.compile(r"[A-Za-z0-9_\-+/=.~]+")


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
_PERCENT_VAR = lazy_re.compile(r"%(?:[A-Za-z_][A-Za-z0-9_]*%|\([A-Za-z_]\w*\)[sdr]|[sdr])")
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
_RANDOM_B64 = lazy_re.compile(r"(?=.*[A-Z])(?=.*[a-z])(?=.*\d)[A-Za-z0-9+/]{30,512}={0,2}")


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
_BEGIN_KEY = lazy_re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----")
_KEY_TAIL = lazy_re.compile(
    r"(?:(?:\r?\n|(?:\\r)?\\n)(?:[A-Za-z0-9+/=]+|(?:Proc-Type|DEK-Info|Comment|Version): ?[^\n\\]*|[ \t]*))*"
)

# Every pattern below starts with a literal, so that the regex engine can skip to its candidates (a pattern
# that starts with a look-behind or an IGNORECASE alternation is tried at every position: 10x slower on a 300 KB
# log). Case-insensitive ones run on ``low``, the lower-cased text (same length, same offsets); the boundary a
# look-behind would check is checked in Python.
_URL_RUN = lazy_re.compile(r"[^\s\"'<>\\`]*")  # a URL's characters after its "://"
_URL_USER = lazy_re.compile(r"[^/?#@\[\]]*")  # a userinfo's user: no delimiter of RFC 3986's authority
# what follows the "@" of a userinfo: a host (name, IPv4, [IPv6]) and an optional port, then the end of the authority
# (unambiguous and bounded: a run of host characters not followed by a delimiter is given back at most 253 times)
_URL_HOST = lazy_re.compile(
    r"(?:\[[0-9A-Fa-f:.]{2,64}\]|[A-Za-z0-9.\-_]{1,253})(?::\d{1,5})?(?=[/?#\s\"'<>,;)\]\\`]|$)"
)
_HOSTLIKE = lazy_re.compile(r"[.:\[]")  # a host name with a dot, a port or an IPv6 address (not a password's "@D2#")
_PORT_PATH = lazy_re.compile(r"\d{1,5}[/?#]")  # "host:8443/path?mail=a@b": a port and a path, not a password


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


_AUTH_HEADER = lazy_re.compile(  # on low
    r"authorization\\?[\"']?\s*[:=]\s*\\?[\"']?\s*"
    r"(?P<scheme>bearer|basic|token|apikey|api-key|digest|key)?\s*(?P<secret>[a-z0-9\-._~+/]{8,}=*)"
)
_BEARER = lazy_re.compile(r"bearer\s+(?P<secret>[a-z0-9\-._~+/]{16,}=*)")  # on low
_CURL_USER = lazy_re.compile(r"-(?:u|-user)\s+[\"']?(?P<user>[^\s:\"'$]+):(?P<secret>[^\s\"'\\]+)")
_FLAG = lazy_re.compile(  # on low: a flag named by a secret word, with hyphenated words or a joined prefix before it
    # (--db-password, --admin-token, redis' --requirepass, keytool's --storepass); never --no-password
    r"--(?P<key>(?!no-)(?:[a-z0-9]+-){0,3}(?:require|store|key|master|root|admin|auth)?"
    r"(?:password|passwd|pass|passphrase|token|api-key|apikey|secret|client-secret|"
    r"auth-token|access-token|secret-key|access-key))(?:=|\s+)(?:(?P<q>\\?[\"'])(?P<qsecret>(?:(?!(?P=q))(?:\\[^\n]|[^\\\n])|'(?=[a-z0-9])){1,512})(?P=q)"
    r"|(?P<secret>(?!-)[^\s\"'\\]+))"  # an unquoted value never starts with "-": that is the next flag
)
_MYSQL_P = lazy_re.compile(
    r"mysql(?:dump|admin|sh)?\b[^\n|;&]{0,200}?\s-p(?P<secret>[^\s\"'\\]{3,})"
)  # case matters: -P is the port
_KEYWORD_HIT = lazy_re.compile(  # on low: a secret word ending an identifier, then an assignment operator
    r"(?:pass|pwd|secret|token|auth|credential|key|contrase)[a-z0-9_\-]{0,64}\\?[\"'`]?\]?[ "
    r"\t]*(?::=|=>|=(?![=>])|:(?![:/])|：)"
)
_IDENT_RUN = lazy_re.compile(r"[A-Za-z0-9_.\-]*")  # matched in the reversed text: the identifier before a keyword hit
# what may stand between a line's start and a config line's key: indentation, a YAML dash, export / set / env
_CONFIG_LEAD = lazy_re.compile(r"(?:^|\n)[ \t\-]*(?:(?:export|set|env)[ \t]+)?\Z", re.I)
_ASSIGN = lazy_re.compile(
    r"(?P<kq>\\?[\"'`]?)"
    r"(?P<key>[A-Za-z0-9_.\-]{0,80}?(?:pass|pwd|secret|token|auth|credential|key|contrase)[A-Za-z0-9_\-]{0,64})"
    r"(?P=kq)\]?[ \t]*(?P<op>:=|=>|=(?![=>])|:(?![:/])|：)[ \t]*"
    r"(?:(?P<vq>\\?[\"'`])(?P<qval>(?:(?!(?P=vq))(?:\\[^\n]|[^\\\n])|'(?=[A-Za-z0-9])){1,512})(?P=vq)|(?P<val>[^\s\"'`\\,;&<>(){}\[\]]{1,512}))",
    re.I,
)
_VALUE_TAIL = lazy_re.compile(
    r"(?:(?!\[secret:)[^\s\"'`\\]){0,512}"
)  # the rest of an unquoted password (_keyword_findings)
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
_PROSE_EN = lazy_re.compile(  # on low
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
_PROSE_ZH = lazy_re.compile(
    r"(?:密码|口令|密钥|私钥)\s*(?:[:：=]|" + _PROSE_ZH_ADVERB + _PROSE_ZH_VERB + _PROSE_SEP + r")"
    r"\s*" + _PROSE_QUOTE
)
_WORD_PART = r"(?:[A-Z]?[a-z]+|[A-Z]+)"
_WORD_SHAPE = lazy_re.compile(
    _WORD_PART + r"(?:(?:-" + _WORD_PART + r"){1,2}|['’][a-z]{1,2})"
)  # re-used, up-to-date, user's
_LENGTH_RANGE = lazy_re.compile(r"(\d{1,3})-(\d{1,3})")  # "the password is 8-64 chars"
_PROSE_RUN = lazy_re.compile(r"[!-~]{4,128}")  # an unquoted prose value: printable ASCII up to the next space
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
            # a shell assignment ("password=hunter2; make", no space at the "=", a list operator after the value) is
            # not code, whatever follows the operator: judged as the same assignment alone on its line is
            shell = op == "=" and text[s - 1 : s] == "=" and _SHELL_LIST.match(text, s + len(full)) is not None
            code_like = not (key.isupper() and op == "=") and not yaml_or_env and not shell
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
