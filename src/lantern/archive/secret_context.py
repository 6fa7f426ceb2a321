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
- ``xml_elements``: ``<password>…</password>`` (Maven settings.xml, any element whose name is a secret key).
- ``netrc_passwords``: ``machine H login U password P`` (.netrc, as curl, ftp and git read it).
- ``command_passwords``: a password given to a command by a short flag of its own (``COMMAND_FLAGS``:
  ``sshpass -p``, ``redis-cli -a``, ``docker login -p``, ``ldapsearch -w``, ``keytool -storepass``, ``openssl
  … pass:``, ``smbclient -U user%pass``, …) or as ``user/password@`` (Oracle's ``sqlplus``, ``jdbc:oracle:thin:``).
- ``cookie_values``: the values of ``Cookie:`` / ``Set-Cookie:`` headers and of curl's ``-b`` / ``--cookie``.
- ``signed_url_params``: the signature of a pre-signed URL (Azure SAS ``sig=``, ``X-Amz-Signature=``,
  ``X-Goog-Signature=``) and an AWS session token in a query.
- ``php_defines``: ``define( 'AUTH_KEY', '…' );`` (WordPress's wp-config.php; the caller judges the name).

``CONTEXTS`` is the table of the config contexts the detectors here and in redact.py read, one row per form, each
citing its source and holding a template, a ``sample`` spec of its secret and look-alikes
(tests/test_secret_coverage.py generates them, as for secret_tokens.TOKENS).

Every function is linear in the text: each literal is found with ``str.find`` or a literal-led regex, each
candidate reads a bounded window, and the string lexer reads each character once.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from urllib.parse import unquote

from lantern import lazy_re
from lantern.archive.secret_tokens import trie_regex

__all__ = [
    "COMMAND_FLAGS",
    "CONTEXTS",
    "PROVIDER_WORDS",
    "ContextForm",
    "Escaped",
    "command_passwords",
    "cookie_values",
    "escaped_strings",
    "json_safe",
    "kubernetes_secret_values",
    "netrc_passwords",
    "pgpass_lines",
    "php_defines",
    "provider_assignments",
    "signed_url_params",
    "xml_add_values",
    "xml_elements",
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
# a key ending in one of these names a public attribute of the account, not its credential (an ``…_id``: an OAuth
# client id is public, gitleaks' discord-client-id and linkedin-client-id notwithstanding)
_BENIGN_KEY_END = lazy_re.compile(
    r"(?:handle|user|username|name|url|uri|host|hostname|domain|region|email|org|team|channel|version|enabled|"
    r"timeout|port|path|dir|file|site|page|env|environment|level|mode|type|tag|tags|count|size|limit)$|[_.\-]id$"
)


_PROVIDER_HIT = trie_regex(sorted(PROVIDER_WORDS))
_KEY_BACK = lazy_re.compile(r"[a-z0-9_.\-]{0,50}")  # matched in the reversed lower-cased text
# after the provider word: the rest of the key, a closing quote or bracket, the operator, an opening quote
_PROVIDER_ASSIGN = lazy_re.compile(
    r"(?P<rest>[a-z0-9_.\-]{0,40})\\?[\"'`]?\]?[ \t]*(?::=|=>|=(?![=>])|:(?![:/])|：)[ \t]*(?P<vq>\\?[\"'`])?"
)
_PROVIDER_VALUE = lazy_re.compile(r"[A-Za-z0-9_\-=+/.~%|:]{14,200}")
_HEXISH = lazy_re.compile(r"[0-9a-fA-F\-]+")


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
_PGPASS = lazy_re.compile(  # a line, or a quoted string (a tool call's argument); a ":" in the password is written "\:"
    r"(?m)(?:^|(?<=[\"']))[ \t]*(?P<host>[A-Za-z0-9.\-_*\[\]]+):(?:\d{1,5}|\*):[^:\s\"']+:[^:\s\"']+:"
    r"(?P<secret>(?:[^\s:\\\"']|\\.){1,256})[ \t]*(?=\r?$|[\"'])"
)


_PGPASS_PORT = lazy_re.compile(r":(?:\d{1,5}|\*):[^:\s\"']+:[^:\s\"']+:")


def pgpass_lines(text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of the password of each .pgpass-style line (its host has a letter or is ``*``)."""
    if text.count(":") < 4 or _PGPASS_PORT.search(text) is None:  # a literal-led test first: the line regex
        return  # is tried at every position
    for m in _PGPASS.finditer(text):
        host = m.group("host")
        if host == "*" or any(c.isalpha() for c in host):
            yield m.start("secret"), m.end("secret")


_XML_ADD = lazy_re.compile(
    r"<add\s+key=\\?[\"'](?P<key>[^\"'\\<>]{1,80})\\?[\"']\s+value=\\?(?P<q>[\"'])(?P<value>[^\"'\\<>]{1,512})\\?(?P=q)",
    re.I,
)


def xml_add_values(text: str, low: str) -> Iterator[tuple[str, int, int]]:
    """``(key, start, end)`` of each ``<add key="K" value="V"/>`` value (the caller judges K)."""
    if "<add" not in low:
        return
    for m in _XML_ADD.finditer(text):
        yield m.group("key"), m.start("value"), m.end("value")


_KIND_SECRET = lazy_re.compile(r"kind:[ \t]*[\"']?secret\b", re.I)
_DATA_LINE = lazy_re.compile(r"(?m)^(?P<indent>[ \t]*)data:[ \t]*$")
_BASE64_VALUE = lazy_re.compile(r"[\"']?(?P<b64>[A-Za-z0-9+/]{8,}={0,3})[\"']?")
_ITEM_LINE = lazy_re.compile(r"(?P<indent>[ \t]+)[\w.\-]+:[ \t]*(?P<value>[^\s#][^\n]*)")


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


_XML_ELEMENT = lazy_re.compile(r"<(?P<name>[A-Za-z_][\w.\-]{0,60})>(?P<value>[^<>\n]{1,512})</(?P=name)>")


def xml_elements(text: str, low: str) -> Iterator[tuple[str, int, int]]:
    """``(name, start, end)`` of the text of each one-line XML element ``<name>value</name>`` (the caller judges
    the name: ``<password>``, ``<apiKey>``, ``<passphrase>``). Each ``<`` reads up to the next ``<``."""
    if "</" not in low:
        return
    for m in _XML_ELEMENT.finditer(text):
        yield m.group("name"), m.start("value"), m.end("value")


# machine H [login U | account A | port N]{1,3} password P (a .netrc entry; tokens separated by any white space)
_NETRC = lazy_re.compile(
    r"(?:machine[ \t\r\n]+[^\s]{1,256}|default)(?:[ \t\r\n]+(?:login|account|port)[ \t\r\n]+[^\s]{1,256}){1,3}"
    r"[ \t\r\n]+password[ \t\r\n]+(?P<secret>[^\s]{1,256})"
)


def netrc_passwords(text: str, low: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of the password of each .netrc entry (``machine`` or ``default``, then ``login`` /
    ``account`` / ``port`` tokens, then ``password``)."""
    if "password" not in low or ("machine" not in low and "default" not in low):
        return
    for m in _NETRC.finditer(low):
        if m.start() == 0 or not low[m.start() - 1].isalnum():
            yield m.start("secret"), m.end("secret")


@dataclass(frozen=True)
class CommandFlag:
    """A command that takes a password by a flag of its own: ``commands`` (the words that start it, lower case),
    ``flags`` (exact, case-sensitive), whether the value may be glued to the flag (``-pSECRET``), a ``prefix`` the
    secret follows inside the value (``pass:`` of OpenSSL, the ``%`` of ``user%password``), and the source."""

    commands: tuple[str, ...]
    flags: tuple[str, ...]
    source: str
    glued: bool = False
    prefix: str = ""


COMMAND_FLAGS: tuple[CommandFlag, ...] = (
    CommandFlag(("sshpass",), ("-p",), "sshpass(1): -p password", glued=True),
    CommandFlag(("redis-cli", "valkey-cli", "keydb-cli"), ("-a",), "redis-cli --help: -a <password>"),
    CommandFlag(
        ("docker login", "podman login", "nerdctl login", "buildah login", "helm registry login", "oras login"),
        ("-p",),
        "docker login --help: -p, --password",
    ),
    CommandFlag(
        ("ldapsearch", "ldapadd", "ldapmodify", "ldapdelete", "ldapwhoami", "ldappasswd", "ldapcompare", "ldapmodrdn"),
        ("-w",),
        "ldapsearch(1): -w passwd",
    ),
    CommandFlag(("sqlcmd", "bcp", "osql"), ("-P",), "sqlcmd utility: -P password"),
    CommandFlag(("zip",), ("-P",), "zip(1): -P password"),
    CommandFlag(("7z", "7za", "7zz"), ("-p",), "7-Zip -p (set password) switch", glued=True),
    CommandFlag(
        ("keytool",),
        ("-storepass", "-keypass", "-srcstorepass", "-deststorepass", "-srckeypass", "-destkeypass", "-new"),
        "keytool documentation: -storepass, -keypass, ...",
    ),
    CommandFlag(
        ("openssl",),
        ("-passin", "-passout", "-pass", "-password"),
        "openssl-passphrase-options(1): pass:password",
        prefix="pass:",
    ),
    CommandFlag(("openssl",), ("-k",), "openssl-enc(1): -k password"),
    CommandFlag(
        ("smbclient", "rpcclient", "smbcacls", "smbget"), ("-U", "--user"), "smbclient(1): -U user%password", prefix="%"
    ),
    CommandFlag(("ssh-keygen",), ("-N", "-P"), "ssh-keygen(1): -N new_passphrase, -P passphrase"),
    CommandFlag(
        ("mongo", "mongosh", "mongodump", "mongorestore", "mongoexport", "mongoimport"),
        ("-p",),
        "mongosh --help: -p, --password",
    ),
)
_COMMAND_WORDS: dict[str, list[int]] = {}  # command word -> the rows it starts
for _i, _row in enumerate(COMMAND_FLAGS):
    for _c in _row.commands:
        _COMMAND_WORDS.setdefault(_c, []).append(_i)
_COMMAND_HIT = trie_regex(sorted({c for row in COMMAND_FLAGS for c in row.commands}))
_COMMAND_SPAN = 512  # a command's arguments are read up to this many characters, to the end of its line or pipe


def _command_end(text: str, start: int, stop: int) -> int:
    """Where the command whose arguments start at ``start`` ends, at most ``stop``: its line's end, a backtick, or
    a ``|`` ``;`` ``&`` outside quotes that separates (white space or another of them after it: ``a | b``,
    ``a; b``, ``a && b``); one inside a word is a password's character (``-pP&ss;w0rd``, ``-w &Pass``)."""
    quote = ""
    for i in range(start, stop):
        c = text[i]
        if quote:
            if c == quote or c == "\n":
                quote = ""
        elif c in "\"'":
            quote = c
        elif c in "\n`":
            return i
        elif c in "|;&" and text[i + 1 : i + 2] in ("", " ", "\t", "\n", "|", "&"):
            return i
    return stop


_ARG_VALUE = r"(?P<v>\"[^\"\n]{1,256}\"|'[^'\n]{1,256}'|[^\s\"'`]{1,256})"
_BEFORE_COMMAND = frozenset(" \t\n\r;|&(`\"'$")


@cache
def _flag_regex(i: int) -> re.Pattern[str]:
    row = COMMAND_FLAGS[i]
    flags = "|".join(re.escape(f) for f in sorted(row.flags, key=len, reverse=True))
    gap = "(?:[ \\t]+|=|)" if row.glued else "(?:[ \\t]+|=)"
    return re.compile(f"[ \\t](?:{flags}){gap}{_ARG_VALUE}")


def command_passwords(text: str, low: str) -> Iterator[tuple[int, int, bool]]:
    """``(start, end, quoted)`` of each password given to a command of ``COMMAND_FLAGS`` by its flag, read in the
    command's arguments (to the end of its line, pipe or list, at most ``_COMMAND_SPAN`` characters; one command
    read once), and of each ``user/password@`` of Oracle's tools (``oracle_connect``). The caller judges the value
    (a ``$VAR`` is a reference)."""
    done = -1
    for hit in _COMMAND_HIT.finditer(low):
        s, e = hit.span()
        if s < done or (s and low[s - 1] not in _BEFORE_COMMAND) or (e < len(low) and low[e] not in " \t"):
            continue
        stop = done = _command_end(text, e, min(len(text), e + _COMMAND_SPAN))
        for j in _COMMAND_WORDS[hit.group()]:
            row = COMMAND_FLAGS[j]
            for m in _flag_regex(j).finditer(text, e - 1, stop):
                a, b = m.span("v")
                quoted = text[a] in "\"'"
                if quoted:
                    a, b = a + 1, b - 1
                if row.prefix:
                    k = text.find(row.prefix, a, b)
                    if k < 0:
                        continue
                    a = k + len(row.prefix)
                if b > a:
                    yield a, b, quoted
    yield from oracle_connect(text, low)


# sqlplus user/password@connect (Oracle SQL*Plus and its tools; jdbc:oracle:thin:user/password@host)
_ORACLE = lazy_re.compile(
    r"(?:(?:sqlplus|sqlldr|expdp|impdp|rman|dgmgrl)(?:[ \t]+-[a-z]+){0,3}[ \t]+[\"']?|jdbc:oracle:thin:)"
    r"[A-Za-z0-9_$#.]{1,128}/(?P<secret>[^\s@/\"']{1,256})@"
)


_ORACLE_WORDS = ("sqlplus", "sqlldr", "expdp", "impdp", "rman", "dgmgrl", "jdbc:oracle")


def oracle_connect(text: str, low: str) -> Iterator[tuple[int, int, bool]]:
    """``(start, end, False)`` of the password of ``user/password@`` after an Oracle tool or ``jdbc:oracle:thin:``."""
    if "/" not in text or "@" not in text or not any(w in low for w in _ORACLE_WORDS):
        return
    for m in _ORACLE.finditer(low):
        if m.start() and low[m.start() - 1].isalnum():
            continue
        yield m.start("secret"), m.end("secret"), False


_COOKIE_HEADERS = (  # on low, each led by a literal (an alternation first is tried at every position)
    lazy_re.compile(r"cookie\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?"),  # Cookie: / Set-Cookie:, also a JSON or dict key
    lazy_re.compile(r"-b[ \t]+[\"']?"),  # curl -b
    lazy_re.compile(r"--cookie[ \t=]+[\"']?"),  # curl --cookie
)
_COOKIE_PAIR = lazy_re.compile(r"(?P<name>[!#$%&*+\-.^_|~0-9A-Za-z]{1,64})=(?P<value>[^;\s\"',\\]{1,4096})")
_COOKIE_SEP = lazy_re.compile(r"[ \t]*;[ \t]*")
_COOKIE_ATTRS = frozenset(
    {"path", "domain", "expires", "max-age", "samesite", "priority", "partitioned", "version", "comment"}
)
_SESSION_NAME = lazy_re.compile(r"sess|sid|token|auth|jwt|remember|login|csrf|xsrf|secret|key|_at$|_rt$", re.I)


def cookie_values(text: str, low: str) -> Iterator[tuple[str, int, int, bool]]:
    """``(name, start, end, header)`` of each cookie value of a ``Cookie:`` / ``Set-Cookie:`` header or a curl
    ``-b`` / ``--cookie`` argument (RFC 6265: ``name=value`` pairs separated by ``;``; a ``Set-Cookie``'s
    attributes left out); the caller judges the value. Each header reads its own line once."""
    if "cookie" not in low and "-b" not in low:
        return
    hits = sorted((h for rx in _COOKIE_HEADERS for h in rx.finditer(low)), key=lambda h: h.start())
    done = -1
    for h in hits:
        lead = h.start() - 4 if low.startswith("set-", h.start() - 4) else h.start()
        if h.start() < done or (lead and (low[lead - 1].isalnum() or low[lead - 1] in "_-")):
            continue
        setter = lead < h.start()
        pos = h.end()
        first = True
        while True:
            m = _COOKIE_PAIR.match(text, pos)
            if m is None:
                break
            name = m.group("name")
            if (first or not setter) and name.lower() not in _COOKIE_ATTRS:
                yield name, m.start("value"), m.end("value"), True
            first = False
            sep = _COOKIE_SEP.match(text, m.end())
            if sep is None or sep.end() == m.end():
                pos = m.end()
                break
            pos = sep.end()
        done = pos


def cookie_is_secret(name: str, value: str, looks_random) -> bool:
    """A cookie value worth redacting: a session-like name (``sessionid``, ``connect.sid``, ``auth_token``) with 8+
    characters, or a value that looks random (``looks_random``, redact.py's judgement) once %-decoded."""
    if len(value) < 8:
        return False
    return _SESSION_NAME.search(name) is not None or looks_random(unquote(value))


# the signature of a pre-signed URL (Azure SAS: sig=; AWS SigV4: X-Amz-Signature=; GCS V4: X-Goog-Signature=)
# and a session token carried in a query (X-Amz-Security-Token=)
_SIGNED_PARAM = lazy_re.compile(
    r"[?&;](?:sig|signature|x-amz-signature|x-goog-signature|x-amz-security-token)=(?P<v>[^&\s\"'#<>\\]{16,4096})"
)


def signed_url_params(text: str, low: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each signature (or session token) in a URL query or a connection string."""
    if "sig" not in low and "x-amz-security-token" not in low:
        return
    for m in _SIGNED_PARAM.finditer(low):
        yield m.start("v"), m.end("v")


_PHP_DEFINE = lazy_re.compile(
    r"define[ \t]*\([ \t]*(?P<kq>[\"'])(?P<key>[A-Za-z0-9_]{2,64})(?P=kq)[ \t]*,[ \t]*"
    r"(?P<vq>[\"'])(?P<value>[^\"'\n]{1,512})(?P=vq)"
)


def php_defines(text: str, low: str) -> Iterator[tuple[str, int, int]]:
    """``(name, start, end)`` of each string constant ``define( 'NAME', 'value' )`` (wp-config.php's keys, salts
    and database password); the caller judges the name."""
    if "define" not in low:
        return
    for m in _PHP_DEFINE.finditer(text):
        yield m.group("key"), m.start("value"), m.end("value")


@dataclass(frozen=True)
class ContextForm:
    """A config context in which a secret appears: ``template`` holds ``{s}`` where a secret made from the
    ``sample`` spec ``secret`` goes (secret_tokens.sample); ``lookalikes``: ``sample`` specs of texts of the same
    context that hold no secret; ``source``: where the form is documented."""

    id: str
    source: str
    template: str
    secret: str
    lookalikes: tuple[str, ...]


CONTEXTS: tuple[ContextForm, ...] = (
    ContextForm(
        "private-key-pem",
        "RFC 7468 (PEM); gitleaks private-key",
        "{s}",
        "-----BEGIN PRIVATE KEY-----\n{64:b}\n{64:b}\n{20:b}==\n-----END PRIVATE KEY-----",
        ("-----BEGIN CERTIFICATE-----\n{64:b}\n{20:b}==\n-----END CERTIFICATE-----",),
    ),
    ContextForm(
        "private-key-openssh",
        "OpenSSH PROTOCOL.key",
        "{s}",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n{70:b}\n{70:b}\n-----END OPENSSH PRIVATE KEY-----",
        ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{43:b} dev@laptop",),
    ),
    ContextForm(
        "service-account-json",
        "Google Cloud service account key files (private_key, JSON-escaped PEM)",
        '{{"type": "service_account", "private_key": "{s}", "client_email": "ci@proj.iam.gserviceaccount.com"}}',
        "-----BEGIN PRIVATE KEY-----\\n{64:b}\\n{40:b}==\\n-----END PRIVATE KEY-----\\n",
        ('{{"type": "service_account", "client_email": "ci@proj.iam.gserviceaccount.com", "client_id": "{21:d}"}}',),
    ),
    ContextForm(
        "pgpass-line",
        "PostgreSQL documentation, The Password File (.pgpass)",
        "db.internal:5432:billing:svc_billing:{s}",
        "{16:p}",
        ("db.internal:5432 is up since 12:30:45",),
    ),
    ContextForm(
        "nuget-add-password",
        "gitleaks nuget-config-password; NuGet config packageSourceCredentials",
        '<add key="ClearTextPassword" value="{s}" />',
        "{14:p}",
        ('<add key="Username" value="deploy-bot" />',),
    ),
    ContextForm(
        "xml-password-element",
        "Apache Maven settings.xml (servers/server/password)",
        "<server>\n  <id>nexus</id>\n  <username>deploy</username>\n  <password>{s}</password>\n</server>",
        "{16:p}",
        (
            "<server><id>nexus</id><password>${{env.NEXUS_PASSWORD}}</password></server>",
            "<passwordPolicy>strict</passwordPolicy><keyAlias>release</keyAlias>",
        ),
    ),
    ContextForm(
        "xml-secret-element",
        "XML configuration elements named after a secret (apiKey, clientSecret, passphrase)",
        "<config><apiKey>{s}</apiKey></config>",
        "{32:A}",
        ("<config><apiVersion>2024-06-01</apiVersion><keyName>primary</keyName></config>",),
    ),
    ContextForm(
        "xml-password-attribute",
        "Apache Tomcat tomcat-users.xml",
        '<user username="admin" password="{s}" roles="manager-gui"/>',
        "{14:p}",
        ('<user username="admin" roles="manager-gui"/>',),
    ),
    ContextForm(
        "netrc",
        "GNU inetutils ftp(1) and curl: the .netrc file",
        "machine api.example.net login deploy password {s}",
        "{16:p}",
        (
            "machine api.example.net login deploy",
            "the machine learning password manager login page",
        ),
    ),
    ContextForm(
        "netrc-multiline",
        "GNU inetutils ftp(1): .netrc tokens on separate lines",
        "machine git.example.org\n  login ci-bot\n  password {s}\n",
        "{20:A}",
        ("machine git.example.org\n  login ci-bot\n",),
    ),
    ContextForm(
        "sshpass",
        "sshpass(1)",
        "sshpass -p '{s}' ssh deploy@10.0.0.5 uptime",
        "{14:p}",
        ("sshpass -f ~/.ssh/pw ssh deploy@10.0.0.5", 'sshpass -p "$SSHPASS" ssh deploy@10.0.0.5'),
    ),
    ContextForm(
        "sshpass-unquoted",
        "sshpass(1)",
        "sshpass -p {s} scp build.tgz deploy@10.0.0.5:/srv",
        "{14:A}",
        ("sshpass -e scp build.tgz deploy@10.0.0.5:/srv",),
    ),
    ContextForm(
        "redis-cli",
        "redis-cli --help (-a <password>)",
        "redis-cli -h cache.internal -p 6380 -a {s} ping",
        "{20:A}",
        ("redis-cli -h cache.internal -p 6380 --askpass ping", "redis-cli -a $REDIS_PASSWORD info"),
    ),
    ContextForm(
        "docker-login",
        "docker login --help (-p, --password)",
        "docker login -u deploy -p {s} registry.example.net",
        "{20:A}",
        ("docker run -p 8080:80 -p 5433:5432 nginx", "docker login -u deploy --password-stdin registry.example.net"),
    ),
    ContextForm(
        "ldapsearch",
        "ldapsearch(1) (-w passwd)",
        "ldapsearch -x -H ldap://ldap.internal -D cn=admin,dc=example,dc=org -w {s} -b dc=example,dc=org",
        "{14:p}",
        ("ldapsearch -x -W -D cn=admin,dc=example,dc=org -b dc=example,dc=org",),
    ),
    ContextForm(
        "sqlcmd",
        "sqlcmd utility (-P password)",
        "sqlcmd -S db.internal -U sa -P {s} -Q 'SELECT 1'",
        "{14:A}",
        ("sqlcmd -S db.internal -E -Q 'SELECT 1'",),
    ),
    ContextForm(
        "keytool",
        "keytool documentation (-storepass)",
        "keytool -list -keystore app.jks -storepass {s}",
        "{14:A}",
        ("keytool -list -keystore app.jks -storepass:env STOREPASS",),
    ),
    ContextForm(
        "openssl-pass",
        "openssl-passphrase-options(1) (pass:password)",
        "openssl pkcs12 -export -in a.crt -inkey a.key -out a.p12 -passout pass:{s}",
        "{14:A}",
        ("openssl pkcs12 -export -in a.crt -out a.p12 -passout env:P12_PASS", "openssl req -passin file:pw.txt"),
    ),
    ContextForm(
        "smbclient",
        "smbclient(1) (-U user%password)",
        "smbclient //fs.internal/share -U deploy%{s} -c ls",
        "{14:A}",
        ("smbclient //fs.internal/share -U deploy -c ls",),
    ),
    ContextForm(
        "zip-password",
        "zip(1) (-P password)",
        "zip -P {s} backup.zip db.sql",
        "{14:A}",
        ("zip -r backup.zip db.sql -x '*.log'",),
    ),
    ContextForm(
        "sqlplus",
        "Oracle SQL*Plus user/password@connect_identifier",
        "sqlplus scott/{s}@//db.internal:1521/ORCL",
        "{14:A}",
        ("sqlplus /nolog", "sqlplus / as sysdba", "jdbc:oracle:thin:@db.internal:1521/ORCL"),
    ),
    ContextForm(
        "mysql-p",
        "mysql(1) (-ppassword)",
        "mysqldump -u root -p{s} billing > dump.sql",
        "{14:A}",
        ("mysql -u root -P 3307 -h db.internal billing",),
    ),
    ContextForm(
        "cookie-header",
        "RFC 6265 (Cookie header)",
        "GET /account HTTP/1.1\nCookie: sessionid={s}; theme=dark",
        "{32:a}",
        ("Cookie: theme=dark; lang=en-US; tz=Europe%2FParis", "the Cookie: header carries a session"),
    ),
    ContextForm(
        "set-cookie-header",
        "RFC 6265 (Set-Cookie header)",
        "Set-Cookie: connect.sid=s%3A{32:w}.{s}; Path=/; HttpOnly; Secure",
        "{43:b}",
        ("Set-Cookie: theme=dark; Path=/; Max-Age=31536000; SameSite=Lax",),
    ),
    ContextForm(
        "cookie-header-dict",
        "RFC 6265 Cookie header, as a JSON object's or a Python dict's key (HAR files, requests' headers=)",
        'requests.get(url, headers={{"Cookie": "sessionid={s}; theme=dark"}})',
        "{32:a}",
        ('requests.get(url, headers={{"Accept": "application/json", "Cookie": "theme=dark"}})',),
    ),
    ContextForm(
        "curl-cookie",
        "curl(1) (-b, --cookie)",
        "curl -b 'auth_token={s}' https://app.example.net/api/me",
        "{40:A}",
        ("curl -b cookies.txt -c cookies.txt https://app.example.net/login",),
    ),
    ContextForm(
        "gitlab-session-cookie",
        "gitleaks gitlab-session-cookie",
        "Cookie: {s}",
        "_gitlab_session={32:a}",
        ("Cookie: _gitlab_session_id_is_not_set=1",),
    ),
    ContextForm(
        "azure-sas",
        "Azure Storage shared access signatures (sig=)",
        "https://acct.blob.core.windows.net/backups/db.bak?sv=2022-11-02&ss=b&srt=co&sp=rl"
        "&se=2026-01-01T00:00:00Z&spr=https&sig={s}",
        "{30:A}%2B{10:A}%2F{2:A}%3D",
        ("https://acct.blob.core.windows.net/backups/db.bak?sv=2022-11-02&sp=rl&se=2026-01-01T00:00:00Z",),
    ),
    ContextForm(
        "azure-sas-connection-string",
        "Azure Storage connection strings (SharedAccessSignature=)",
        "BlobEndpoint=https://acct.blob.core.windows.net/;SharedAccessSignature=sv=2022-11-02&ss=b&sig={s}",
        "{40:A}%3D",
        ("BlobEndpoint=https://acct.blob.core.windows.net/;AccountName=acct",),
    ),
    ContextForm(
        "aws-presigned-url",
        "AWS Signature Version 4 query parameters (X-Amz-Signature)",
        "https://bucket.s3.amazonaws.com/report.pdf?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20260101T000000Z"
        "&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature={s}",
        "{64:h}",
        ("https://bucket.s3.amazonaws.com/report.pdf?versionId={32:A}&X-Amz-Expires=3600",),
    ),
    ContextForm(
        "kubeconfig-client-key-data",
        "kubectl kubeconfig files (users[].user.client-key-data)",
        "users:\n- name: admin\n  user:\n    client-certificate-data: {cert64}\n    client-key-data: {s}\n",
        "{pem64}",
        ("clusters:\n- cluster:\n    certificate-authority-data: {cert64}\n    server: https://10.0.0.1:6443\n",),
    ),
    ContextForm(
        "kubeconfig-token",
        "kubectl kubeconfig files (users[].user.token)",
        "users:\n- name: ci\n  user:\n    token: {s}\n",
        "{jwt}",
        ("users:\n- name: ci\n  user:\n    tokenFile: /var/run/secrets/token\n",),
    ),
    ContextForm(
        "k8s-secret-data",
        "Kubernetes Secret manifests (data:)",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: x\ndata:\n  token: {s}\n",
        "{20:A}",  # the base64 value; any 8+ base64 characters
        ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  mode: cHJvZHVjdGlvbg==\n",),
    ),
    ContextForm(
        "wp-config-key",
        "WordPress wp-config.php (authentication unique keys and salts)",
        "define( 'AUTH_KEY',         '{s}' );",
        "{64:p}",
        ("define( 'AUTH_KEY',         'put your unique phrase here' );", "define( 'WP_DEBUG', false );"),
    ),
    ContextForm(
        "wp-config-salt",
        "WordPress wp-config.php (authentication unique keys and salts)",
        "define('LOGGED_IN_SALT', '{s}');",
        "{64:p}",
        ("define('DB_NAME', 'wordpress'); define('DB_CHARSET', 'utf8mb4');",),
    ),
    ContextForm(
        "wp-config-db-password",
        "WordPress wp-config.php (DB_PASSWORD)",
        "define( 'DB_PASSWORD', '{s}' );",
        "{16:p}",
        ("define( 'DB_PASSWORD', getenv('WORDPRESS_DB_PASSWORD') );",),
    ),
    ContextForm(
        "rails-secret-key-base",
        "Ruby on Rails credentials (secret_key_base)",
        "production:\n  secret_key_base: {s}\n",
        "{128:h}",
        ('production:\n  secret_key_base: <%= ENV["SECRET_KEY_BASE"] %>\n',),
    ),
    ContextForm(
        "rails-secret-key-base-env",
        "Ruby on Rails (SECRET_KEY_BASE environment variable)",
        "SECRET_KEY_BASE={s} bin/rails server",
        "{128:h}",
        ("SECRET_KEY_BASE=$(bin/rails secret) bin/rails server",),
    ),
    ContextForm(
        "url-password",
        "RFC 3986 userinfo (scheme://user:password@host)",
        "postgres://svc:{s}@db.internal:5433/billing",
        "{18:p}",
        ("postgres://svc@db.internal:5433/billing", "https://db.internal:5433/billing?contact=ops@example.org"),
    ),
    ContextForm(
        "url-password-reserved",
        "RFC 3986 userinfo, as people write it: a password holding # / ? unencoded",
        "DATABASE_URL=postgres://svc:{s}@db.internal:5433/billing",
        "{6:A}#{4:A}/{4:A}?{3:A}",
        ("see https://example.com:8443/#/login?next=/home and mailto:ops@example.org",),
    ),
    ContextForm(
        "url-password-at",
        "RFC 3986 userinfo, as people write it: a password holding @ unencoded",
        "redis://:{s}@cache.internal:6380/0",
        "{6:A}@{8:A}",
        ("redis://cache.internal:6380/0",),
    ),
    ContextForm(
        "proxy-authorization",
        "RFC 9110 Proxy-Authorization",
        "Proxy-Authorization: Basic {s}",
        "{basic}",
        ("Proxy-Authorization: required by the corporate proxy",),
    ),
    ContextForm(
        "authorization-basic",
        "RFC 7617 Basic authentication",
        "curl -s https://api.example.net/v2\n-H 'Authorization: Basic {s}'",
        "{basic}",
        ("curl -s https://api.example.net/v2 -H 'Accept: application/json'",),
    ),
    ContextForm(
        "authorization-bearer",
        "RFC 6750 Bearer tokens",
        "Authorization: Bearer {s}",
        "{40:w}",
        ("Authorization: Bearer <token>", "Authorization: Bearer $TOKEN"),
    ),
    ContextForm(
        "api-key-header",
        "HTTP API key headers (X-API-Key)",
        "X-API-Key: {s}",
        "{32:A}",
        ("X-API-Key: <your key>", "X-API-Version: 2024-06-01"),
    ),
    ContextForm(
        "curl-user",
        "curl(1) (-u user:password)",
        "curl -u deploy:{s} https://ci.example.net/api",
        "{14:p}",
        ("curl -u deploy https://ci.example.net/api",),
    ),
    ContextForm(
        "flag-password",
        "GNU-style long options (--password=)",
        "mysqladmin --password={s} status",
        "{16:p}",
        ("psql --no-password -h db.internal billing", "docker login --password-stdin"),
    ),
    ContextForm(
        "flag-qualified-password",
        "wget(1) (--http-password, --ftp-password)",
        "wget --http-user=deploy --http-password={s} https://files.example.net/a.tgz",
        "{16:A}",
        ("ansible-playbook site.yml --ask-pass --ask-become-pass",),
    ),
    ContextForm(
        "env-password",
        "dotenv files (KEY=value)",
        "DB_PASSWORD={s}",
        "{1:A}{15:p}",
        ("DB_PASSWORD_FILE=/run/secrets/db_password",),
    ),
    ContextForm(
        "yaml-secret",
        "YAML configuration (client_secret: value)",
        "client_secret: {s}",
        "{24:A}",
        ("client_secret: ${{CLIENT_SECRET}}", "client_secret_name: prod-oauth"),
    ),
    ContextForm(
        "terraform-tfvars",
        'Terraform .tfvars (db_password = "value")',
        'db_password = "{s}"',
        "{16:p}",
        ("db_password = var.db_password",),
    ),
    ContextForm(
        "odbc-connection-string",
        "ADO.NET / ODBC connection strings (Password=; Pwd=)",
        "Server=db.internal;Database=app;User Id=sa;Password={s};Encrypt=true",
        "{14:A}",
        ("Server=db.internal;Database=app;Integrated Security=true;Encrypt=true",),
    ),
    ContextForm(
        "jdbc-query-password",
        "JDBC URLs (user= and password= properties)",
        "jdbc:mysql://db.internal:3306/app?user=app&password={s}&useSSL=true",
        "{14:A}",
        ("jdbc:mysql://db.internal:3306/app?user=app&useSSL=true",),
    ),
    ContextForm(
        "aws-credentials-file",
        "AWS CLI credentials file (aws_secret_access_key)",
        "[default]\naws_access_key_id = AKIA{16:U}\naws_secret_access_key = {s}\n",
        "{40:b}",
        ("[default]\nregion = eu-west-1\noutput = json\n",),
    ),
    ContextForm(
        "aws-session-token",
        "AWS CLI credentials file (aws_session_token)",
        "aws_session_token = {s}",
        "IQoJb3JpZ2luX2Vj{200:b}",
        ("aws_session_token_duration = 3600",),
    ),
    ContextForm(
        "docker-config-auth",
        "Docker config.json (auths.*.auth: base64 of user:password)",
        '{{"auths": {{"registry.example.net": {{"auth": "{s}"}}}}}}',
        "{basic}",
        ('{{"auths": {{"registry.example.net": {{}}}}, "credsStore": "desktop"}}',),
    ),
    ContextForm(
        "npmrc-auth-token",
        "npm config (.npmrc: //registry/:_authToken=)",
        "//registry.npmjs.org/:_authToken={s}",
        "{uuid}",
        ("//registry.npmjs.org/:_authToken=${{NPM_TOKEN}}",),
    ),
    ContextForm(
        "azure-storage-connection-string",
        "Azure Storage connection strings (AccountKey=)",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={s};EndpointSuffix=core.windows.net",
        "{86:b}==",
        ("DefaultEndpointsProtocol=https;AccountName=acct;EndpointSuffix=core.windows.net",),
    ),
    ContextForm(
        "heroku-api-key-uuid",
        "gitleaks heroku-api-key (a UUID under a heroku key)",
        "heroku_api_key: {s}",
        "{uuid}",
        ("heroku_app_name: billing-prod",),
    ),
    ContextForm(
        "snyk-token-uuid",
        "gitleaks snyk-api-token",
        "SNYK_TOKEN={s}",
        "{uuid}",
        ("SNYK_ORG=acme-platform",),
    ),
    ContextForm(
        "codecov-token-uuid",
        "gitleaks codecov-access-token",
        "CODECOV_TOKEN={s}",
        "{uuid}",
        ("CODECOV_URL=https://codecov.io",),
    ),
    ContextForm(
        "okta-token",
        "gitleaks okta-access-token (00 and 40 characters)",
        "OKTA_API_TOKEN={s}",
        "00{40:w}",
        ("OKTA_DOMAIN=acme.okta.com",),
    ),
    ContextForm(
        "mailgun-key",
        "gitleaks mailgun-private-api-token (key- and 32 hex digits)",
        "MAILGUN_API_KEY={s}",
        "key-{32:h}",
        ("MAILGUN_DOMAIN=mg.example.org",),
    ),
    ContextForm(
        "gocardless-token",
        "gitleaks gocardless-api-token (live_ and 40 characters)",
        "GOCARDLESS_ACCESS_TOKEN={s}",
        "live_{40:w}",
        ("GOCARDLESS_ENVIRONMENT=live",),
    ),
    ContextForm(
        "launchdarkly-token",
        "gitleaks launchdarkly-access-token",
        "LAUNCHDARKLY_ACCESS_TOKEN={s}",
        "api-{uuid}",
        ("LAUNCHDARKLY_PROJECT=default",),
    ),
    ContextForm(
        "sonar-login",
        "gitleaks sonar-api-token (sonar.login)",
        "sonar.login={s}",
        "{40:a}",
        ("sonar.host.url=https://sonarcloud.io",),
    ),
    ContextForm(
        "jira-token",
        "gitleaks atlassian-api-token (24 characters under a jira key)",
        "JIRA_API_TOKEN={s}",
        "{24:a}",
        ("JIRA_BASE_URL=https://acme.atlassian.net",),
    ),
    ContextForm(
        "travis-token",
        "gitleaks travisci-access-token",
        "travis_token: {s}",
        "{22:A}",
        ("travis_branch: main",),
    ),
    ContextForm(
        "datadog-key",
        "gitleaks datadog-access-token (40 characters)",
        "DATADOG_API_KEY={s}",
        "{40:a}",
        ("DATADOG_SITE=datadoghq.eu",),
    ),
    ContextForm(
        "twilio-auth-token",
        "Twilio auth tokens (32 hex digits under a twilio key)",
        "TWILIO_AUTH_TOKEN={s}",
        "{32:h}",
        ("TWILIO_ACCOUNT_SID=AC{32:h}",),
    ),
    ContextForm(
        "alibaba-secret-key",
        "gitleaks alibaba-secret-key (30 characters)",
        "alibaba_secret_key: {s}",
        "{30:a}",
        ("alibaba_region: cn-hangzhou",),
    ),
    ContextForm(
        "cloudflare-api-key",
        "gitleaks cloudflare-api-key (40 characters)",
        "CLOUDFLARE_API_KEY={s}",
        "{40:a}",
        ("CLOUDFLARE_ZONE_ID_FILE=/run/secrets/zone",),
    ),
    ContextForm(
        "discord-client-secret",
        "gitleaks discord-client-secret (32 characters)",
        "DISCORD_CLIENT_SECRET={s}",
        "{32:w}",
        ("DISCORD_CLIENT_ID={18:d}",),
    ),
    ContextForm(
        "cohere-key",
        "gitleaks cohere-api-token (40 characters)",
        "CO_API_KEY={s}",
        "{40:A}",
        ("CO_API_URL=https://api.cohere.ai",),
    ),
    ContextForm(
        "aws-secret-access-key-env",
        "AWS CLI environment variables (AWS_SECRET_ACCESS_KEY)",
        "export AWS_SECRET_ACCESS_KEY={s}",
        "{40:b}",
        ("export AWS_DEFAULT_REGION=eu-west-1",),
    ),
    ContextForm(
        "prose-password",
        "ours: a password told in a sentence",
        "the password is {s} until Friday",
        "{12:p}",
        ("the password is in the vault", "the password is 8-64 characters long"),
    ),
    ContextForm(
        "prose-password-zh",
        "ours: a password told in a Chinese sentence",
        "数据库的密码是 {s}，周五之前别改",
        "{12:A}",
        ("数据库的密码现在是错的，需要重置",),
    ),
)


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


_SEGMENT = lazy_re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}|\\[^u]|\\|[^\\]+", re.S
)
_ESCAPE = lazy_re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}|\\[^u]|\\", re.S
)
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


_CONTENT = lazy_re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.S)  # a string's content: no backtracking, one pass


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
