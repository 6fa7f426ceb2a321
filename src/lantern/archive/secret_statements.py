"""Passwords known by the statement, call or sentence that carries them (ours; used by archive/secret_findings.py,
which judges each value and writes the findings; archive/secret_context.py holds the config forms):

- ``argument_passwords``: a password a command takes as a positional argument (``ARGUMENT_COMMANDS``:
  ``rabbitmqctl add_user U P``, ``net user U P``, redis' ``AUTH P`` and ``requirepass P``, ``aws configure set
  aws_secret_access_key V``, ``htpasswd -b F U P``, ``dotnet user-secrets set K V``), or reads on its standard
  input from an ``echo`` / ``printf`` before the pipe (``STDIN_COMMANDS``: ``sudo -S``, ``chpasswd``,
  ``passwd --stdin``, ``docker login --password-stdin``).
- ``sql_passwords``: SQL's ``PASSWORD '…'`` (PostgreSQL ``CREATE|ALTER ROLE|USER``), ``IDENTIFIED BY …`` (MySQL,
  Oracle) and ``SET PASSWORD … = '…'``.
- ``call_passwords``: a string literal passed as the password argument of a call (``CALLS``: ``auth=("u", "p")``,
  ``HTTPBasicAuth("u", "p")``, ``.login("u", "p")``, ``setPassword("p")``, ``ConvertTo-SecureString 'p'``).
- ``block_scalars``: a YAML block scalar (``key: |`` / ``key: >-``) whose lines are the value of the key before it.
- ``prose_passwords``: a password stated in a sentence in another language (``PROSE_WORDS``: "Das Passwort ist X",
  "le mot de passe est X", "la contraseña es X", "Пароль: X", "パスワードは X", …) or in English forms the keyword
  rules do not read ("my pw is X", "the API token is X", "creds are admin:X", "use X as the password", "changed
  the password to X").

``CONTEXTS`` lists these forms as secret_context.CONTEXTS does (source, template, a ``sample`` spec of the secret,
look-alikes); tests/test_secret_coverage.py generates both tables on every entry path.

Every function is linear in the text: each trigger is a literal found by one trie regex or ``str.find``, each
candidate reads a bounded window (a command's line up to ``_SPAN`` characters, a call's arguments up to
``_SPAN``, a block scalar up to ``_BLOCK_LINES`` lines)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from lantern import lazy_re
from lantern.archive.secret_context import ContextForm
from lantern.archive.secret_tokens import trie_regex

__all__ = [
    "ARGUMENT_COMMANDS",
    "CALLS",
    "CONTEXTS",
    "PROSE_WORDS",
    "STDIN_COMMANDS",
    "argument_passwords",
    "block_scalars",
    "call_passwords",
    "properties_entries",
    "prose_passwords",
    "sql_passwords",
]

_SPAN = 512  # a command's line or a call's arguments are read up to this many characters


@dataclass(frozen=True)
class ArgumentCommand:
    """A command that takes a secret as its ``position``-th argument (1-based; -1: the last) after the words
    ``command`` (lower case; ``case_sensitive``: as written, e.g. redis' ``AUTH``), options (``-x``) not counted;
    ``needs``: an option that must be present (htpasswd's ``-b``); ``line_start``: only at a line's start (a
    config file's directive); ``source``: its documentation."""

    command: str
    position: int
    source: str
    needs: str = ""
    line_start: bool = False
    case_sensitive: bool = False


ARGUMENT_COMMANDS: tuple[ArgumentCommand, ...] = (
    ArgumentCommand("rabbitmqctl add_user", 2, "rabbitmqctl(8): add_user username password"),
    ArgumentCommand("rabbitmqctl change_password", 2, "rabbitmqctl(8): change_password username newpassword"),
    ArgumentCommand("net user", 2, "Microsoft: net user username password /add"),
    ArgumentCommand("AUTH", -1, "Redis command reference: AUTH [username] password", case_sensitive=True),
    ArgumentCommand("requirepass", 1, "redis.conf: requirepass <password>", line_start=True),
    ArgumentCommand("masterauth", 1, "redis.conf: masterauth <master-password>", line_start=True),
    ArgumentCommand("aws configure set aws_secret_access_key", 1, "AWS CLI: aws configure set varname value"),
    ArgumentCommand("aws configure set aws_session_token", 1, "AWS CLI: aws configure set varname value"),
    ArgumentCommand("htpasswd", 3, "htpasswd(1): htpasswd -b [-c] passwdfile username password", needs="-b"),
    ArgumentCommand("dotnet user-secrets set", 2, "Microsoft: dotnet user-secrets set <KEY> <VALUE>"),
    ArgumentCommand("vncpasswd -f", 1, "vncpasswd(1): -f reads the password from its arguments"),
)


@dataclass(frozen=True)
class StdinCommand:
    """A command that reads a password on its standard input (``command``: the words after the ``|``, lower
    case); ``after``: the secret follows this character of the echoed text (chpasswd's ``user:password``)."""

    command: str
    source: str
    after: str = ""


STDIN_COMMANDS: tuple[StdinCommand, ...] = (
    StdinCommand("sudo -s", "sudo(8): -S, --stdin: read the password from standard input"),
    StdinCommand("sudo --stdin", "sudo(8): -S, --stdin"),
    StdinCommand("chpasswd", "chpasswd(8): user_name:password pairs on standard input", after=":"),
    StdinCommand("passwd --stdin", "passwd(1) (Red Hat): --stdin"),
    StdinCommand("docker login", "docker login --password-stdin"),
    StdinCommand("podman login", "podman-login(1): --password-stdin"),
    StdinCommand("helm registry login", "helm registry login --password-stdin"),
    StdinCommand("kinit", "kinit(1): the password read from standard input"),
)

_ARG = lazy_re.compile(r"\"(?:[^\"\\\n]|\\.){1,256}\"|'[^'\n]{1,256}'|[^\s\"'`|;&]{1,256}")
_NOT_WORD = lazy_re.compile(r"[\"'\\\[\]{}(),]")
_BEFORE = frozenset(" \t\n\r;|&(`\"'$>")
_ARG_HIT = trie_regex(sorted({c.command.lower() for c in ARGUMENT_COMMANDS}))
_ARG_ROWS: dict[str, list[ArgumentCommand]] = {}
for _row in ARGUMENT_COMMANDS:
    _ARG_ROWS.setdefault(_row.command.lower(), []).append(_row)


def _line_end(text: str, start: int) -> int:
    """The end of the command that starts at ``start``: its line's end, a ``|`` ``;`` ``&`` or a backtick, at most
    ``_SPAN`` characters on (quotes not followed: a command's arguments are read as words)."""
    stop = min(len(text), start + _SPAN)
    for i in range(start, stop):
        c = text[i]
        if c in "\n|;&`" or (c == "\\" and text[i + 1 : i + 2] in ("n", '"')):
            return i  # an escaped line break or quote: the raw JSON around a command (its decoded view is read too)
    return stop


def _unquote(text: str, a: int, b: int) -> tuple[int, int, bool]:
    if b - a >= 2 and text[a] in "\"'" and text[b - 1] == text[a]:
        return a + 1, b - 1, True
    return a, b, False


def argument_passwords(text: str, low: str) -> Iterator[tuple[int, int, bool]]:
    """``(start, end, quoted)`` of each secret a command of ``ARGUMENT_COMMANDS`` takes as an argument, and of
    each echoed into a command of ``STDIN_COMMANDS``. The caller judges the value (a ``$VAR`` is a reference)."""
    done = -1
    for hit in _ARG_HIT.finditer(low):
        s, e = hit.span()
        if s < done or (s and low[s - 1] not in _BEFORE) or (e < len(low) and low[e] not in " \t"):
            continue
        rows = [r for r in _ARG_ROWS[hit.group()] if not r.case_sensitive or text[s:e] == r.command]
        if rows and rows[0].line_start:
            lead = text[max(text.rfind("\n", 0, s) + 1, s - _SPAN) : s].rstrip(" \t#")
            if lead and lead[-1] not in "\"':>$":
                continue  # a directive starts its line, a string ({"command": "requirepass X"}), a label or prompt
        if not rows:
            continue  # "auth" in code is not redis' AUTH
        stop = done = _line_end(text, e)  # one command read once
        for row in rows:
            args = []
            for m in _ARG.finditer(text, e, stop):
                if text[m.start()] not in "\"'" and _NOT_WORD.search(text, m.start(), m.end()):
                    break  # a JSON or code delimiter ends the command's words
                args.append(m.span())
            words = [(a, b) for a, b in args if text[a] != "-"]
            if row.needs and not any(text[a:b] == row.needs for a, b in args):
                continue
            if len(words) < max(row.position, 1):
                continue
            a, b = words[row.position - 1] if row.position > 0 else words[-1]
            if text[a] == "/" or text[a:b] == "*":
                continue  # net user U /add, net user U * (prompts)
            yield _unquote(text, a, b)
    if "|" in text and ("echo" in low or "printf" in low):
        yield from _stdin_passwords(text, low)


_STDIN_HIT = trie_regex(sorted({c.command for c in STDIN_COMMANDS}))
_STDIN_ROWS = {c.command: c for c in STDIN_COMMANDS}
_ECHO = lazy_re.compile(
    r"(?:echo|printf)(?:[ \t]+-[a-z]{1,3})?[ \t]+"
    r"(?P<v>\"[^\"\n]{1,256}\"|'[^'\n]{1,256}'|[^\s|;&]{1,256})[ \t]*\|[ \t]*\Z"
)


def _stdin_passwords(text: str, low: str) -> Iterator[tuple[int, int, bool]]:
    for hit in _STDIN_HIT.finditer(low):
        s, e = hit.span()
        if (e < len(low) and (low[e].isalnum() or low[e] in "_-")) or (s and low[s - 1] not in " \t|"):
            continue
        if hit.group().startswith(("docker", "podman", "helm")) and "password-stdin" not in low[e : e + _SPAN]:
            continue
        line = max(text.rfind("\n", 0, s) + 1, s - _SPAN)
        m = _ECHO.search(text, line, s)
        if m is None:
            continue
        a, b, quoted = _unquote(text, *m.span("v"))
        after = _STDIN_ROWS[hit.group()].after
        if after:
            k = text.find(after, a, b)
            if k < 0:
                continue
            a = k + 1
        if text[b - 2 : b] == "\\n":  # printf 'P\n'
            b -= 2
        if b > a:
            yield a, b, quoted


# PostgreSQL CREATE|ALTER ROLE|USER … [ENCRYPTED] PASSWORD 'p'; MySQL / Oracle IDENTIFIED BY ['p' | p];
# MySQL SET PASSWORD [FOR u] = 'p' | PASSWORD('p') (on low)
_SQL_HEADS = {  # the statement's word -> the rest up to the value (on low, matched at the word's end)
    "password": lazy_re.compile(r"[ \t]+(?P<q>')"),
    "identified": lazy_re.compile(r"[ \t]+(?:with[ \t]+[a-z_]{1,40}[ \t]+)?by[ \t]+(?:password[ \t]+)?(?P<q>['\"])?"),
    "set password": lazy_re.compile(
        r"[ \t]+(?:for[ \t]+[^=\n]{1,200}?[ \t]*)?=[ \t]*(?:password[ \t]*\([ \t]*)?(?P<q>')?"
    ),
}
_SQL_HIT = trie_regex(sorted(_SQL_HEADS))
_SQL_BARE = lazy_re.compile(r"[^\s'\";]{1,256}")


def sql_passwords(text: str, low: str) -> Iterator[tuple[int, int, bool]]:
    """``(start, end, quoted)`` of each password of a SQL statement (a ``'…'`` literal; ``''`` inside it is a quote;
    after ``IDENTIFIED BY`` also an unquoted word, as Oracle writes it)."""
    if "password" not in low and "identified" not in low:
        return
    for hit in _SQL_HIT.finditer(low):
        if hit.start() and (low[hit.start() - 1].isalnum() or low[hit.start() - 1] == "_"):
            continue
        m = _SQL_HEADS[hit.group()].match(low, hit.end())
        if m is None:
            continue
        q = m.group("q")
        pos = m.end()
        if q:
            end = pos
            while end < min(len(text), pos + 256):
                if text[end] == q and text[end + 1 : end + 2] != q:
                    break
                end += 2 if text[end] == q else 1
            else:
                continue
            if end > pos:
                yield pos, end, True
        elif hit.group() == "identified":
            w = _SQL_BARE.match(text, pos)
            if w is not None:
                yield pos, w.end(), False


@dataclass(frozen=True)
class Call:
    """A call whose ``position``-th argument (1-based) is a password when it is a string literal: ``name`` (lower
    case, as written before the ``(``; ``paren=False``: a PowerShell cmdlet whose arguments follow a space)."""

    name: str
    position: int
    source: str
    paren: bool = True


CALLS: tuple[Call, ...] = (
    Call("auth=", 2, "requests: auth=(user, password), a tuple for HTTP Basic authentication"),
    Call("httpbasicauth", 2, "requests.auth.HTTPBasicAuth(username, password)"),
    Call("httpdigestauth", 2, "requests.auth.HTTPDigestAuth(username, password)"),
    Call("basicauth", 2, "aiohttp.BasicAuth(login, password) / httpx.BasicAuth(username, password)"),
    Call(".login", 2, "smtplib.SMTP.login(user, password), imaplib.IMAP4.login, ftplib.FTP.login"),
    Call(".setpassword", 1, "java.sql / javax.sql DataSource setPassword(String); Spring setPassword"),
    Call("convertto-securestring", 1, "PowerShell ConvertTo-SecureString [-String] <String> -AsPlainText", paren=False),
    Call("passwordauthentication", 2, "java.net.PasswordAuthentication(String userName, char[] password)"),
    Call("usernamepasswordcredentials", 2, "Apache HttpClient UsernamePasswordCredentials(user, password)"),
)
_CALL_HIT = trie_regex(sorted(c.name for c in CALLS))
_CALL_ROWS = {c.name: c for c in CALLS}
_LITERAL = lazy_re.compile(r"\"((?:[^\"\\\n]|\\.){1,256})\"|'((?:[^'\\\n]|\\.){1,256})'")
_OTHER_ARG = lazy_re.compile(r"[^,()\"'\n]{0,256}")


def call_passwords(text: str, low: str) -> Iterator[tuple[int, int, bool]]:
    """``(start, end, True)`` of each string literal at a password's position in a call of ``CALLS``."""
    for hit in _CALL_HIT.finditer(low):
        row = _CALL_ROWS[hit.group()]
        s, pos = hit.start(), hit.end()
        if row.name[0] not in "." and s and (low[s - 1].isalnum() or low[s - 1] == "_"):
            continue
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if row.paren:
            if text[pos : pos + 1] != "(":
                continue
            pos += 1
        for k in range(1, row.position + 1):
            while pos < len(text) and text[pos] in " \t":
                pos += 1
            lit = _LITERAL.match(text, pos)
            if k == row.position:
                if lit is not None:
                    g = 1 if lit.group(1) is not None else 2
                    yield lit.start(g), lit.end(g), True
                break
            other = lit or _OTHER_ARG.match(text, pos)
            pos = other.end()
            while pos < len(text) and text[pos] in " \t":
                pos += 1
            if text[pos : pos + 1] != ",":
                break
            pos += 1


_BLOCK_LINES = 50  # a block scalar's value is read up to this many lines
_BLOCK_HEAD = lazy_re.compile(r":[ \t]*(?:!!str[ \t]+)?[|>][+-]?[1-9]?[+-]?[ \t]*(?:#[^\n]*)?\n")
_BLOCK_KEY = lazy_re.compile(r"[ \t]*-?[ \t]*[\"']?(?P<key>[A-Za-z0-9_.\-]{1,120})[\"']?\Z")


def block_scalars(text: str) -> Iterator[tuple[str, int, int]]:
    """``(key, start, end)`` of the value of each YAML block scalar (``key: |`` / ``key: >-``, its more-indented
    lines, up to ``_BLOCK_LINES``; the line breaks between them included). An Ansible ``!vault |`` is encrypted
    and not read (the tag stands between the colon and the ``|``). The caller judges the key."""
    if ": |" not in text and ": >" not in text and ":|" not in text and ":>" not in text:
        return
    for m in _BLOCK_HEAD.finditer(text):
        line = text.rfind("\n", 0, m.start()) + 1
        k = _BLOCK_KEY.match(text, line, m.start())
        if k is None:
            continue
        indent = len(text[line : m.start()]) - len(text[line : m.start()].lstrip(" \t-"))
        pos, start, end = m.end(), -1, -1
        for _ in range(_BLOCK_LINES):
            nl = text.find("\n", pos)
            nl = len(text) if nl < 0 else nl
            row = text[pos:nl]
            body = row.lstrip(" \t")
            if body and len(row) - len(body) <= indent:
                break
            if body:
                start = pos + len(row) - len(body) if start < 0 else start
                end = nl
            if nl >= len(text):
                break
            pos = nl + 1
        if start >= 0:
            yield k.group("key"), start, end


_ENTRY = lazy_re.compile(r"<entry[ \t]+key=\"(?P<key>[A-Za-z0-9_.\-]{1,120})\"[ \t]*>(?P<value>[^<>\n]{1,512})</entry>")


def properties_entries(text: str) -> Iterator[tuple[str, int, int]]:
    """``(key, start, end)`` of each ``<entry key="…">value</entry>`` (java.util.Properties' XML form,
    ``loadFromXML``). The caller judges the key."""
    if "<entry" not in text:
        return
    for m in _ENTRY.finditer(text):
        yield m.group("key"), m.start("value"), m.end("value")


# a password's name in other languages (lower case), each with the words that may link it to its value (ours,
# from the languages' own words: German ist, French est, Spanish/Portuguese es/é, Italian è, Dutch is, Polish
# jest, Swedish/Danish/Norwegian är/er, Turkish; Japanese は, Korean 는/은); a colon or "=" always links
PROSE_WORDS: dict[str, tuple[str, ...]] = {
    "passwort": ("ist", "lautet", "war"),
    "kennwort": ("ist", "lautet", "war"),
    "mot de passe": ("est", "était"),
    "contraseña": ("es", "era"),
    "contrasena": ("es", "era"),
    "clave": ("es", "era"),
    "senha": ("é", "e", "era"),
    "password": ("è", "era"),
    "wachtwoord": ("is", "was"),
    "hasło": ("to", "jest"),
    "haslo": ("to", "jest"),
    "lösenord": ("är", "var"),
    "adgangskode": ("er", "var"),
    "passord": ("er", "var"),
    "salasana": ("on", "oli"),
    "heslo": ("je", "bylo"),
    "şifre": ("şu", "olarak"),
    "parola": ("è", "este"),
    "пароль": ("это", "—", "-"),
    "パスワード": ("は", "が"),
    "暗証番号": ("は",),
    "비밀번호": ("는", "은", "가"),
    "암호": ("는", "가"),
    "mật khẩu": ("là",),
    "ｐａｓｓｗｏｒｄ": (),
}
# English forms the keyword and prose rules do not read: an abbreviation or a token's name before "is", the
# credentials of a "user:password" pair, a password named after its value ("use X as the password", matched at
# "use"), "password to"; each head word -> (kind, the rest up to the value, matched at the word's end on low)
_IS = lazy_re.compile(r"[ \t]+(?:is|was)[ \t]*:?[ \t]+")
_ARE = lazy_re.compile(r"[ \t]+(?:are|is|were|was)[ \t]*:?[ \t]+")
_TO = lazy_re.compile(r"[ \t]+to[ \t]+")
_COLON = lazy_re.compile(r"[ \t]*[:=][ \t]*|[ \t]+(?:is|was)[ \t]*:?[ \t]+")
_EN_HEADS: dict[str, tuple[str, lazy_re.LazyPattern]] = {
    **{w: ("password", _IS) for w in ("pw", "pwd", "passcode")},
    **{w: ("password", _TO) for w in ("password", "passphrase")},
    **{
        w: ("token", _IS)
        for w in ("api key", "api token", "access token", "auth token", "secret key", "secret", "token", "key")
    },
    **{w: ("credentials", _ARE) for w in ("creds", "credentials", "login")},
    "use": ("use", lazy_re.compile("")),
    # a wallet's recovery words (BIP-39 mnemonic): judged as a password, so only a quoted phrase or a mixed word
    **{w: ("password", _COLON) for w in ("seed phrase", "mnemonic", "recovery phrase", "seed words")},
}
_EN_USE = lazy_re.compile(
    r"[ \t]+(?P<v>[!-\[\]-~]{4,128})[ \t]+as[ \t]+(?:the[ \t]+|your[ \t]+|my[ \t]+|a[ \t]+)?"
    r"(?:[a-z\-]{1,20}[ \t]+)?(?:password|passphrase|pw)(?![a-z])"
)
_RUN = lazy_re.compile(r"[!#-&(-\[\]-~]{4,128}")  # printable ASCII but quotes and backslash (JSON around it)
_QUOTED_RUN = lazy_re.compile(r"\"([^\"\n]{4,128})\"|'([^'\n]{4,128})'|“([^”\n]{4,128})”|「([^」\n]{4,128})」")


def _prose_tail(word: str, links: tuple[str, ...]) -> lazy_re.LazyPattern:
    link = "|".join(re.escape(w) for w in links)
    linked = f"[ \\t]*(?:{link})[ \\t]*[:：]?[ \\t]*"
    if word.isascii() and word.startswith("pass"):  # "password=…" is an assignment, judged by its rules
        return lazy_re.compile(linked)
    return lazy_re.compile(f"(?:[ \\t]*[:：=＝][ \\t]*|{linked})" if links else "[ \\t]*[:：=＝][ \\t]*")


_PROSE_TAILS = {word: _prose_tail(word, links) for word, links in PROSE_WORDS.items()}
_PROSE_HIT = trie_regex(sorted(PROSE_WORDS))
_EN_HIT = trie_regex(sorted(_EN_HEADS))


def _value_after(text: str, pos: int) -> tuple[int, int, bool] | None:
    q = _QUOTED_RUN.match(text, pos)
    if q is not None:
        g = next(i for i in range(1, 5) if q.group(i) is not None)
        return q.start(g), q.end(g), True
    r = _RUN.match(text, pos)
    if r is None:
        return None
    e = r.end()
    while e > r.start() and text[e - 1] in ".,;:!?)」”\"'":
        e -= 1
    return r.start(), e, False


def _word_start(low: str, i: int) -> bool:
    return i == 0 or not ((low[i - 1].isalnum() and low[i - 1].isascii()) or low[i - 1] == "_")


def prose_passwords(text: str, low: str) -> Iterator[tuple[str, int, int, bool]]:
    """``(kind, start, end, quoted)`` of each value stated in a sentence of ``PROSE_WORDS`` or of the English forms
    above. ``kind``: ``password`` (judged as a prose password), ``token`` (must look random); the credentials of
    ``user:password`` are the part after the first ``:``. Each head word is found once by a trie regex."""
    for hit in _PROSE_HIT.finditer(low):
        if not _word_start(low, hit.start()):
            continue
        m = _PROSE_TAILS[hit.group()].match(low, hit.end())
        v = _value_after(text, m.end()) if m is not None else None
        if v is not None:
            yield ("password", *v)
    use_as = " as " in low
    for hit in _EN_HIT.finditer(low):
        # every English form has a space (or a colon) after its head: "keys", "user", "token_id" are read no further
        if low[hit.end() : hit.end() + 1] not in (" ", "\t", ":", "=") or not _word_start(low, hit.start()):
            continue
        kind, tail = _EN_HEADS[hit.group()]
        if kind == "use" and not use_as:
            continue
        if kind == "use":
            u = _EN_USE.match(low, hit.end())
            if u is not None:
                yield ("password", u.start("v"), u.end("v"), False)
            continue
        m = tail.match(low, hit.end())
        v = _value_after(text, m.end()) if m is not None else None
        if v is None:
            continue
        if kind != "credentials":
            yield (kind, *v)
            continue
        a, b, quoted = v
        k = text.find(":", a, b)
        if k > a and b > k + 1:
            yield ("password", k + 1, b, quoted)


CONTEXTS: tuple[ContextForm, ...] = (
    ContextForm(
        "sql-create-role-password",
        "PostgreSQL CREATE ROLE: [ ENCRYPTED ] PASSWORD 'password'",
        "CREATE USER app WITH LOGIN PASSWORD '{s}';",
        "{16:p}",
        ("CREATE USER app WITH LOGIN NOSUPERUSER;", "ALTER ROLE app PASSWORD NULL;"),
    ),
    ContextForm(
        "sql-identified-by",
        "MySQL CREATE USER … IDENTIFIED BY 'auth_string'; Oracle CREATE USER … IDENTIFIED BY password",
        "ALTER USER 'app'@'%' IDENTIFIED BY '{s}';\nCREATE USER scott IDENTIFIED BY {s};",
        "{14:A}",
        ("CREATE USER ops IDENTIFIED WITH auth_socket;", "the user is identified by its e-mail"),
    ),
    ContextForm(
        "sql-set-password",
        "MySQL SET PASSWORD [FOR user] = 'auth_string'",
        "SET PASSWORD FOR 'app'@'localhost' = '{s}';",
        "{16:p}",
        ("SET PASSWORD FOR 'app'@'localhost' = @new_password;",),
    ),
    ContextForm(
        "command-argument-password",
        "rabbitmqctl(8) add_user; Microsoft net user; redis AUTH; htpasswd(1) -b; AWS CLI configure set",
        "rabbitmqctl add_user admin {s}\nnet user administrator {s} /add\n127.0.0.1:6379> AUTH {s}\n"
        "htpasswd -b -c /etc/nginx/.htpasswd admin {s}\naws configure set aws_secret_access_key {s}",
        "{18:A}",
        (
            "rabbitmqctl add_user admin\nnet user administrator /add\nnet user guest *",
            "the AUTH command of redis takes a password; htpasswd -c /etc/nginx/.htpasswd admin",
            "aws configure set region eu-west-1",
        ),
    ),
    ContextForm(
        "redis-conf-password",
        "redis.conf: requirepass, masterauth",
        "# redis.conf\nrequirepass {s}\nmasterauth {s}\nmaxmemory 2gb\nout: masterauth {s}",
        "{20:A}",
        ("# requirepass is commented out by default\nmaxmemory 2gb", "set the requirepass directive first"),
    ),
    ContextForm(
        "stdin-password",
        "sudo(8) -S; chpasswd(8); docker login --password-stdin",
        "echo \"{s}\" | sudo -S apt-get update\necho 'root:{s}' | chpasswd\necho {s} | docker login -u ci "
        "--password-stdin",
        "{16:p}",
        ("echo $DOCKER_TOKEN | docker login -u ci --password-stdin\necho hello | sudo tee /etc/motd",),
    ),
    ContextForm(
        "call-password-argument",
        "requests auth=(user, password), HTTPBasicAuth; smtplib SMTP.login; JDBC setPassword; PowerShell "
        "ConvertTo-SecureString",
        "requests.post(url, auth=(\"deploy\", \"{s}\"))\nHTTPBasicAuth('deploy', '{s}')\n"
        "server.login('ops@example.org', '{s}')\nds.setPassword(\"{s}\");\n"
        "$pw = ConvertTo-SecureString '{s}' -AsPlainText -Force",
        "{16:p}",
        (
            "requests.post(url, auth=(user, password))\nserver.login(user, os.environ['SMTP_PASSWORD'])",
            "ds.setPassword(secret);\n$pw = Read-Host -AsSecureString",
        ),
    ),
    ContextForm(
        "yaml-block-scalar",
        "YAML 1.2 §8.1 block scalars (| literal, > folded) under a secret's key",
        "database:\n  password: >-\n    {s}\n  host: db",
        "{16:p}",
        (
            "database:\n  password: !vault |\n    $ANSIBLE_VAULT;1.1;AES256\n    {64:h}\n  host: db",
            "description: |\n  The password rotates weekly.\n",
        ),
    ),
    ContextForm(
        "http-digest-response",
        "RFC 7616 HTTP Digest Access Authentication: the Authorization header's response parameter",
        'Authorization: Digest username="ops", realm="api", nonce="{16:h}", uri="/v1", response="{s}"',
        "{32:h}",
        ('WWW-Authenticate: Digest realm="api", qop="auth", nonce="{16:h}", opaque="{16:h}"',),
    ),
    ContextForm(
        "java-properties-xml",
        "java.util.Properties: loadFromXML (the properties DTD's <entry key=…>)",
        '<properties>\n  <entry key="db.user">app</entry>\n  <entry key="db.password">{s}</entry>\n</properties>',
        "{16:p}",
        ('<properties><entry key="db.password.min-length">12</entry></properties>',),
    ),
    ContextForm(
        "public-and-encrypted-values",
        "WireGuard wg(8) config (PrivateKey / PublicKey); Web Push VAPID; Supabase API keys (anon key is public); "
        "Ansible Vault (!vault); SOPS (ENC[…])",
        "[Interface]\nPrivateKey = {s}\nAddress = 10.8.0.2/24",
        "{43:b}=",
        (
            "[Peer]\nPublicKey = {43:b}=\nAllowedIPs = 0.0.0.0/0",
            "public_key: {43:b}=\nvapid_public_key: B{86:w}\nanon_key: {jwtanon}",
            "password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  {64:h}\n"
            "db_password: ENC[AES256_GCM,data:{24:b},iv:{16:b}]",
        ),
    ),
    ContextForm(
        "prose-other-language",
        "ours: the word for password in German, French, Spanish, Portuguese, Russian, Japanese, Korean, …",
        "Das Passwort ist {s} bis Freitag.\nLe mot de passe est {s} jusqu'à vendredi.\n"
        "La contraseña es {s} hasta el viernes.\nA senha é {s} até sexta.\nПароль: {s}\n"
        "パスワードは {s} です\n비밀번호는 {s} 입니다",
        "{16:p}",
        (
            "Das Passwort ist falsch.\nLe mot de passe est expiré.\nLa contraseña es demasiado corta.",
            "Пароль: неверный\nパスワードは 忘れました",
        ),
    ),
    ContextForm(
        "prose-english-forms",
        "ours: abbreviations and forms of English prose (my pw is X, the API token is X, creds are user:X); "
        "BIP-39 (a wallet's mnemonic seed phrase)",
        "my pw is {s}\nthe API token is {s}\ncreds are admin:{s}\nuse {s} as the password for staging\n"
        'I changed the root password to {s} yesterday\nseed phrase: "{s} abandon ability able"',
        "{20:A}",
        (
            "my pw is wrong\nthe API token is expired\nthe key is in the drawer\ncreds are in the vault",
            "use it as the password manager says; change the password to something longer",
            "the seed phrase is written on paper; mnemonic: see the BIP-39 word list",
        ),
    ),
)
