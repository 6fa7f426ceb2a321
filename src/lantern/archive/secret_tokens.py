"""Provider tokens: credentials with a fixed format, found by a literal that every token of the format holds (its
prefix, or a fixed piece inside it), in time linear in the text (ours; used by archive/redact.py).

``TOKENS`` is the table of formats, one row (``TokenRule``) per format, each citing its ``source``: a rule of
gitleaks' default configuration (config/gitleaks.toml of github.com/gitleaks/gitleaks) or of its successor
betterleaks (config/betterleaks.toml), a plugin of Yelp's detect-secrets 1.5.0, or the provider's documentation of
the format (its prefix and length); the patterns are written here for this scanner. Each row also carries
``samples``, generators of realistic tokens of the format written from that documentation, and ``lookalikes``,
generators of texts that resemble the format and hold no secret (the prefix as a word, a shorter or longer run, a
public key or an identifier of the same provider: Twilio's account SIDs, Supabase's publishable keys). ``sample``
expands one (the spec language is in its docstring); tests/test_secret_coverage.py generates both for every row and
checks that each sample is redacted on every entry path and each look-alike stays as written. Credentials without
a fixed format are found by context in redact.py and secret_context.py (whose ``CONTEXTS`` table is the same for
them: ``KEY=value``, ``password is …``, URLs, headers, flags, config files).

    find_tokens(text, low) -> [(kind, start, end)]     # ``low`` = text lower-cased, same length

**Rules.** A row: (kind, triggers, pattern, options). A long token behind a distinctive prefix (``ATATT3``,
``ops_eyJ``, ``hvb.``) is taken from 40 characters on, shorter than its documented length: a token cut short (a
preview, a truncated log line) still holds most of the secret. A trigger is a literal; the pattern is matched at the
trigger (prefix rules) or ``back`` characters before it (a fixed piece inside the token: ``-us`` of a Mailchimp
key, ``Q~`` of an Azure AD secret), every quantifier bounded. A match is then widened to the right over the
token's characters (``chars``) so a token longer than its documented length is not left half in clear, unless
the rule is ``exact`` (a longer run is something else: an upper-case identifier is no AWS key id). A token never
starts inside a word (after an ASCII letter or digit). Case-insensitive triggers (``icase``) are looked for in
``low``. A rule without a literal has a ``gate``: a bounded regex that starts with a literal.

**Linear time.** Each trigger is found with ``str.find``; per rule, a candidate inside the run of token
characters that the rule already examined is skipped (a later start in the same run is a suffix of a token
already judged: a whole prefix-repeating run such as ``sk-sk-sk-…`` is examined once), and every pattern is
bounded, so each character is read a bounded number of times per rule. ``benchmarks/bench_worst_case.py``
measures it.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from lantern import lazy_re

__all__ = ["TOKENS", "TokenRule", "find_tokens", "jwt_ok", "sample", "trie_regex"]

_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_HAS_DIGIT = lazy_re.compile(r"\d")
_HAS_LETTER = lazy_re.compile(r"[A-Za-z]")
W = "A-Za-z0-9_\\-"  # the usual token characters
B64 = "A-Za-z0-9+/="


def mixed(token: str) -> bool:
    """A letter and a digit somewhere in the token (a run of one word, or of one repeated letter, is no key)."""
    return _HAS_DIGIT.search(token) is not None and _HAS_LETTER.search(token) is not None


def _b64json(part: str) -> bool:
    """Whether ``part`` is base64url of a JSON object (a JWT's header or payload). The JSON is foreign text: read
    by the one bounded parse (llm.parse_answer: a payload nested 30,000 deep is no JWT, not a RecursionError)."""
    from lantern.llm import parse_answer

    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        return isinstance(parse_answer(raw.decode("utf-8")), dict)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return False


def _b64head(token: str) -> bytes:
    """The bytes the first 80 base64 characters of ``token`` decode to (b"" when they do not)."""
    head = token[:80]
    try:
        return base64.b64decode(head[: len(head) // 4 * 4])
    except (ValueError, binascii.Error):
        return b""


def jwt_ok(token: str) -> bool:
    """A JSON Web Token: 2 or 3 dot-separated base64url parts (the third may be empty), the first two JSON
    objects once decoded (ours)."""
    parts = token.split(".", 3)
    return len(parts) in (2, 3) and all(parts[:2]) and _b64json(parts[0]) and _b64json(parts[1])


@dataclass(frozen=True)
class TokenRule:
    kind: str
    triggers: tuple[str, ...]
    pattern: re.Pattern[str]
    chars: str = W  # the token's characters (a character class body)
    exact: bool = False
    icase: bool = False  # triggers looked for in the lower-cased text
    back: tuple[str, int, int] | None = None  # (characters, min, max) before the trigger where the token starts
    validate: Callable[[str], bool] | None = None
    keep_prefix: bool = False  # the trigger stays in clear, the rest is the secret (a webhook URL's host and path)
    gate: re.Pattern[str] | None = None  # instead of a literal: a bounded, literal-led regex (a Discord token's dots)
    source: str = ""  # where the format is documented (see the module doc)
    samples: tuple[str, ...] = ()  # ``sample`` specs of tokens of the format, each a text that holds one
    lookalikes: tuple[str, ...] = ()  # ``sample`` specs of texts that resemble the format and hold no secret

    @property
    def run(self) -> re.Pattern[str]:
        return _run(self.chars)


@cache
def _run(chars: str) -> re.Pattern[str]:
    return re.compile(f"[{chars}]*")


def _rule(kind: str, triggers: str, pattern: str, *, src: str, ex: tuple, no: tuple, **kw) -> TokenRule:
    """A rule found by ``triggers`` (space-separated literals; none with a ``gate``); ``pattern`` matched where the
    token starts. ``src``: its source; ``ex`` / ``no``: its samples and look-alikes (``sample`` specs)."""
    pattern = lazy_re.compile(pattern)  # compiled when a trigger of the rule is first found (lazy_re.py)
    return TokenRule(kind, tuple(triggers.split()), pattern, source=src, samples=ex, lookalikes=no, **kw)


def _prefixed(kind: str, prefixes: str, body: str, *, src: str, ex: tuple, no: tuple, **kw) -> TokenRule:
    """A rule whose token starts with one of ``prefixes`` (space-separated) followed by ``body``."""
    alts = "|".join(re.escape(p) for p in sorted(prefixes.split(), key=len, reverse=True))
    flags = "(?i)" if kw.get("icase") else ""
    pattern = lazy_re.compile(f"{flags}(?:{alts}){body}")
    return TokenRule(kind, tuple(prefixes.split()), pattern, source=src, samples=ex, lookalikes=no, **kw)


# ---------------------------------------------------------------------------------------------- samples
CLASSES = {
    "A": string.ascii_letters + string.digits,
    "a": string.ascii_lowercase + string.digits,
    "U": string.ascii_uppercase + string.digits,
    "h": "0123456789abcdef",
    "H": "0123456789ABCDEF",
    "d": string.digits,
    "L": string.ascii_letters,
    "l": string.ascii_lowercase,
    "w": string.ascii_letters + string.digits + "_-",
    "b": string.ascii_letters + string.digits + "+/",
    "B": "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",  # bech32
    "p": string.ascii_letters + string.digits + "!#%&*+-=?@^_~",  # a password's characters (no quote, $, space)
}
_SPEC = lazy_re.compile(r"\{\{|\}\}|\{(?:(\d+)(?:-(\d+))?:([A-Za-z])|([a-z0-9]+))\}")


def _chars(rng: random.Random, n: int, alphabet: str) -> str:
    letters, digits = any(c.isalpha() for c in alphabet), any(c.isdigit() for c in alphabet)
    while True:  # a token of 8+ characters of an alphabet with both has a letter and a digit (as real ones do)
        s = "".join(rng.choice(alphabet) for _ in range(n))
        if n < 8 or ((not letters or any(c.isalpha() for c in s)) and (not digits or any(c.isdigit() for c in s))):
            return s


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _pem(rng: random.Random, label: str) -> str:
    lines = "\n".join(_chars(rng, 64, CLASSES["b"]) for _ in range(6))
    return f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----\n"


def _jwt(rng: random.Random) -> str:
    def part(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    claims = {"sub": _chars(rng, 10, CLASSES["a"]), "iat": rng.randrange(10**9, 2 * 10**9)}
    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}.{_chars(rng, 43, CLASSES['w'])}"


def _uuid4(rng: random.Random) -> str:
    import uuid  # a generator for tests and docs: never imported by a redaction

    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


_NAMED: dict[str, Callable[[random.Random], str]] = {
    "uuid": _uuid4,
    "jwt": _jwt,
    "jwtb64": lambda rng: _b64(_jwt(rng).encode()).rstrip("="),
    "pem64": lambda rng: _b64(_pem(rng, rng.choice(("RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY"))).encode()),
    "cert64": lambda rng: _b64(_pem(rng, "CERTIFICATE").encode()),
    "basic": lambda rng: _b64(f"{_chars(rng, 8, CLASSES['l'])}:{_chars(rng, 16, CLASSES['p'])}".encode()),
    "cftunnel": lambda rng: _b64(
        json.dumps(
            {
                "a": _chars(rng, 32, CLASSES["h"]),
                "t": _uuid4(rng),
                "s": _b64(rng.randbytes(32)),
            },
            separators=(",", ":"),
        ).encode()
    ),
}


def sample(spec: str, rng: random.Random, parts: list[str] | None = None) -> str:
    """A text made from ``spec``: its literal characters, and for each ``{N:C}`` (``{N-M:C}``: N to M) that many
    random characters of class ``C`` (``CLASSES``: A alphanumeric, a lower-case alphanumeric, U upper-case
    alphanumeric, h / H hex, d digits, L / l letters, w base64url, b base64, B bech32, p a password's characters;
    8 or more of a class with letters and digits hold both), and for ``{uuid}``, ``{jwt}``, ``{jwtb64}`` (a JWT in
    base64), ``{pem64}`` / ``{cert64}`` (a PEM private key / certificate in base64, as kubeconfig holds them),
    ``{basic}`` (HTTP Basic credentials: base64 of ``user:password``) and ``{cftunnel}`` (a Cloudflare tunnel
    token) one such value; ``{{`` and ``}}`` are braces. ``parts``: a list the random pieces drawn are appended
    to (what a test looks for after redaction). Raises KeyError for an unknown class or name."""

    def one(m: re.Match[str]) -> str:
        if m.group() in ("{{", "}}"):
            return m.group()[0]
        if m.group(4):
            piece = _NAMED[m.group(4)](rng)
        else:
            lo = int(m.group(1))
            n = rng.randint(lo, int(m.group(2))) if m.group(2) else lo
            piece = _chars(rng, n, CLASSES[m.group(3)])
        if parts is not None:
            parts.append(piece)
        return piece

    return _SPEC.sub(one, spec)


HEX = "[0-9a-fA-F]"
UUID = f"{HEX}{{8}}-{HEX}{{4}}-{HEX}{{4}}-{HEX}{{4}}-{HEX}{{12}}"
GL = "gitleaks "  # a rule id of gitleaks' default configuration (config/gitleaks.toml)
BL = "betterleaks "  # a rule id of betterleaks' default configuration (config/betterleaks.toml, gitleaks' successor)
DS = "detect-secrets "  # a plugin of Yelp's detect-secrets 1.5.0

# Order matters where two rules find the same start: the first one names the token (specific before generic).
TOKENS: tuple[TokenRule, ...] = (
    # AI providers
    _prefixed(
        "anthropic-key",
        "sk-ant-",
        f"[{W}]{{20,300}}",
        src=GL + "anthropic-api-key, anthropic-admin-api-key",
        ex=("sk-ant-api03-{93:w}AA", "sk-ant-admin01-{93:w}AA"),
        no=("keys start with sk-ant-api03 and are shown once",),
    ),
    _prefixed(
        "openai-key",
        "sk-",
        f"[{W}]{{20,300}}",
        validate=lambda t: not t.startswith("sk-ant-") and mixed(t[3:]),
        src=GL + "openai-api-key; DeepSeek and OpenRouter documentation (sk- keys)",
        ex=("sk-{48:A}", "sk-{32:h}", "sk-or-v1-{64:h}", "sk-admin-{58:w}T3BlbkFJ{58:w}"),
        no=(
            "pip install scikit-learn (sk-learn) and sk-image",
            "the sk-ant- and sk-proj- prefixes",
            "OpenAI-Organization: org-{24:A}",
        ),
    ),
    _rule(
        "openai-key",
        "T3BlbkFJ",
        f"[{W}]{{0,120}}T3BlbkFJ[{W}]{{16,120}}",
        back=(W, 3, 120),
        src=GL + "openai-api-key",
        ex=("sk-proj-{74:w}T3BlbkFJ{74:w}", "sk-{20:A}T3BlbkFJ{20:A}", "sk-svcacct-{58:w}T3BlbkFJ{58:w}"),
        no=("T3BlbkFJ is base64 of OpenAI",),
    ),
    _prefixed(
        "huggingface-token",
        "hf_",
        "[A-Za-z0-9]{30,64}",
        validate=lambda t: len(t) == 37 or mixed(t),
        src=GL + "huggingface-access-token (hf_ and 34 letters)",
        ex=("hf_{34:L}", "hf_{34:A}"),
        no=("hf_hub_download(repo_id='gpt2', filename='config.json')", "HF_HOME=/data/hf_cache"),
    ),
    _prefixed(
        "huggingface-token",
        "api_org_",
        "[A-Za-z]{34}",
        exact=True,
        src=GL + "huggingface-organization-api-token",
        ex=("api_org_{34:L}",),
        no=("the api_org_chart table",),
    ),
    _prefixed(
        "perplexity-key",
        "pplx-",
        "[A-Za-z0-9]{48}",
        src=GL + "perplexity-api-key",
        ex=("pplx-{48:A}",),
        no=("pplx-api docs",),
    ),
    _prefixed(
        "groq-key",
        "gsk_",
        "[A-Za-z0-9]{48,60}",
        src=GL + "groq-api-key (gsk_ and 48 or more letters and digits)",
        ex=("gsk_{52:A}", "gsk_{48:A}"),
        no=("gsk_config.yaml and gsk_utils", "GSK_API_KEY is read from the environment"),
    ),
    _prefixed(
        "xai-key",
        "xai-",
        "[A-Za-z0-9]{70,100}",
        src=BL + "xai-api-key (xai- and 80 letters and digits)",
        ex=("xai-{80:A}",),
        no=("pip install xai-sdk; model xai-grok-3-mini",),
    ),
    _prefixed(
        "nvidia-key",
        "nvapi-",
        f"[{W}]{{60,72}}",
        src=BL + "nvidia-api-key (nvapi- and 64 characters)",
        ex=("nvapi-{64:w}",),
        no=("NVIDIA keys look like nvapi-... (from build.nvidia.com)",),
    ),
    _prefixed(
        "replicate-token",
        "r8_",
        "[A-Za-z0-9]{37}",
        exact=True,
        src=BL + "replicate-api-token (r8_ and 37 letters and digits)",
        ex=("r8_{37:A}",),
        no=("the r8_usr banked register",),
    ),
    _prefixed(
        "langsmith-key",
        "lsv2_pt_ lsv2_sk_",
        "[a-f0-9]{32}_[a-f0-9]{10}",
        src=GL + "langsmith-api-key",
        ex=("lsv2_pt_{32:h}_{10:h}", "lsv2_sk_{32:h}_{10:h}"),
        no=("LangSmith personal tokens start with lsv2_pt_",),
    ),
    _prefixed(
        "pinecone-key",
        "pcsk_",
        "[A-Za-z0-9]{4,8}_[A-Za-z0-9]{50,90}",
        src=BL + "pinecone-api-key (pcsk_ keys)",
        ex=("pcsk_{6:A}_{63:A}",),
        no=("pcsk_ is the Pinecone key prefix",),
    ),
    _prefixed(
        "cerebras-key",
        "csk-",
        "[a-z0-9]{48}",
        exact=True,
        src=BL + "cerebras-api-key (csk- and 48 characters)",
        ex=("csk-{48:a}",),
        no=("csk-linux-amd64.tar.gz",),
    ),
    _prefixed(
        "fireworks-key",
        "fw_",
        "[A-Za-z0-9]{24}",
        exact=True,
        src=BL + "fireworks-api-key (fw_ and 24 characters)",
        ex=("fw_{24:A}",),
        no=("fw_version 2.4.1 and fw_update_2024.bin",),
    ),
    _prefixed(
        "together-key",
        "tgp_v1_",
        f"[{W}]{{43}}",
        src="docs: Together AI API keys (tgp_v1_ and 43 characters)",
        ex=("tgp_v1_{43:w}",),
        no=("the tgp_v1_ prefix",),
    ),
    _prefixed(
        "elevenlabs-key",
        "sk_",
        "[a-f0-9]{48}",
        exact=True,
        src=BL + "elevenlabs-api-key (sk_ and 48 hex digits)",
        ex=("sk_{48:h}",),
        no=("sk_buff and sk_{40:h}_v2 in the kernel log",),
    ),
    # cloud and infrastructure
    _rule(
        "aws-access-key-id",
        "AKIA ASIA ABIA ACCA A3T",
        "(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}",
        exact=True,
        src=GL + "aws-access-token",
        ex=("AKIA{16:U}", "ASIA{16:U}"),
        no=("ASIA_PACIFIC and ACCADEMIA_ITALIANA", "AKIA{20:U} is longer than a key id"),
    ),
    _prefixed(
        "google-api-key",
        "AIza",
        f"[{W}]{{35}}",
        src=GL + "gcp-api-key",
        ex=("AIza{35:w}",),
        no=("AIzaSy is how Google API keys begin",),
    ),
    _prefixed(
        "google-oauth-client-secret",
        "GOCSPX-",
        f"[{W}]{{28}}",
        src=BL + "gcp-oauth-client-secret (Google OAuth client secrets: GOCSPX- and 28 characters)",
        ex=("GOCSPX-{28:w}",),
        no=("client secrets created since 2021 start with GOCSPX-",),
    ),
    _prefixed(
        "google-oauth-token",
        "ya29.",
        f"[{W}.]{{30,2048}}",
        chars=W + ".",
        src=BL + "gcp-oauth-access-token (ya29. access tokens)",
        ex=("ya29.a0{150:w}", "ya29.c.{200:w}"),
        no=("access tokens begin with ya29.",),
    ),
    _prefixed(
        "google-oauth-token",
        "1//0",
        f"[{W}]{{40,512}}",
        src=BL + "gcp-oauth-refresh-token (1//0 refresh tokens)",
        ex=("1//0{99:w}",),
        no=("ratio 1//0 is undefined",),
    ),
    _rule(
        "firebase-server-key",
        ":APA91b",
        f"AAAA[{W}]{{7}}:APA91b[{W}]{{134,200}}",
        back=(W, 11, 11),
        src=BL + "gcp-firebase-cloud-messaging-server-key",
        ex=("AAAA{7:w}:APA91b{134:w}",),
        no=("device token cXy{8:w}:APA91b{140:w} registered",),
    ),
    _prefixed(
        "azure-storage-key",
        "AccountKey=",
        "[A-Za-z0-9+/]{86}==",
        chars=B64,
        src=GL + "azure-storage-account-key; Azure connection strings (AccountKey=)",
        ex=("DefaultEndpointsProtocol=https;AccountName=x;AccountKey={86:b}==;",),
        no=("DefaultEndpointsProtocol=https;AccountName=x;AccountKey=${STORAGE_KEY};",),
    ),
    _rule(
        "azure-ad-client-secret",
        "Q~",
        r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}",
        chars=W + "~.",
        back=("A-Za-z0-9_~.", 4, 4),
        src=GL + "azure-ad-client-secret",
        ex=("{3:A}7Q~{32:w}",),
        no=("press Q~ to quit",),
    ),
    _prefixed(
        "alibaba-access-key-id",
        "LTAI",
        "[A-Za-z0-9]{20}",
        exact=True,
        src=GL + "alibaba-access-key-id",
        ex=("LTAI{20:A}",),
        no=("LTAI is the AccessKey prefix",),
    ),
    _prefixed(
        "tencent-secret-id",
        "AKID",
        "[A-Za-z0-9]{32}",
        exact=True,
        src=BL + "tencent-cloud-secret-id (AKID and 32 characters)",
        ex=("AKID{32:A}",),
        no=("AKIDO training schedule",),
    ),
    _prefixed(
        "digitalocean-token",
        "dop_v1_ doo_v1_ dor_v1_",
        "[a-f0-9]{64}",
        src=GL + "digitalocean-pat, digitalocean-access-token, digitalocean-refresh-token",
        ex=("dop_v1_{64:h}", "doo_v1_{64:h}", "dor_v1_{64:h}"),
        no=("dop_v1_ tokens are personal",),
    ),
    _prefixed(
        "cloudflare-origin-ca-key",
        "v1.0-",
        "[a-f0-9]{24}-[a-f0-9]{146}",
        src=GL + "cloudflare-origin-ca-key",
        ex=("v1.0-{24:h}-{146:h}",),
        no=("released v1.0-rc2 and v1.0-{12:h}",),
    ),
    _prefixed(
        "cloudflare-tunnel-token",
        "eyJhIjoi",
        "[A-Za-z0-9+/]{100,600}={0,3}",
        chars=B64,
        src="docs: cloudflared service install TOKEN (base64 of a JSON object with a, t, s)",
        ex=("{cftunnel}",),
        no=("eyJhIjoi alone",),
    ),
    _prefixed(
        "databricks-token",
        "dapi",
        "[a-f0-9]{32}(?:-\\d)?",
        exact=True,
        src=GL + "databricks-api-token",
        ex=("dapi{32:h}",),
        no=("the dapi{8:h} prefix",),
    ),
    _prefixed(
        "doppler-token",
        "dp.pt. dp.st. dp.ct. dp.sa. dp.scim. dp.audit.",
        "[A-Za-z0-9]{40,44}",
        src=GL + "doppler-api-token; Doppler token formats (dp.pt., dp.st., dp.ct., dp.sa., dp.scim., dp.audit.)",
        ex=("dp.pt.{43:A}", "dp.st.{43:A}", "dp.sa.{43:A}"),
        no=("dp.pt.example and dp.st.config",),
    ),
    _prefixed(
        "dynatrace-token",
        "dt0c01.",
        "[A-Za-z0-9]{24}\\.[A-Za-z0-9]{64}",
        chars=W + ".",
        src=GL + "dynatrace-api-token",
        ex=("dt0c01.{24:U}.{64:U}",),
        no=("dt0c01.sample",),
    ),
    _prefixed(
        "flyio-token",
        "fo1_",
        f"[{W}]{{43}}",
        src=GL + "flyio-access-token",
        ex=("fo1_{43:w}",),
        no=("fo1_ prefix",),
    ),
    _prefixed(
        "flyio-token",
        "fm1a_ fm1r_ fm2_",
        "[A-Za-z0-9+/]{40,1000}={0,3}",
        chars=B64,
        src=GL + "flyio-access-token",
        ex=("fm2_{120:b}==",),
        no=("fm2_ macaroons",),
    ),
    _prefixed(
        "heroku-key",
        "HRKU-AA",
        f"[{W}]{{58}}",
        src=GL + "heroku-api-key-v2",
        ex=("HRKU-AA{58:w}",),
        no=("HRKU-AA prefix",),
    ),
    _rule(
        "terraform-token",
        ".atlasv1.",
        "[A-Za-z0-9]{14}\\.atlasv1\\.[A-Za-z0-9_=\\-]{60,70}",
        chars=W + "=.",
        back=("A-Za-z0-9", 14, 14),
        src=GL + "hashicorp-tf-api-token",
        ex=("{14:a}.atlasv1.{67:a}",),
        no=("tokens hold .atlasv1. in the middle",),
    ),
    _prefixed(
        "vault-token",
        "hvs.",
        f"[{W}]{{90,120}}",
        src=GL + "vault-service-token",
        ex=("hvs.{100:w}",),
        no=("hvs.CAESIJ is how service tokens begin",),
    ),
    _prefixed(
        "vault-token",
        "hvb.",
        f"[{W}]{{40,300}}",
        src=GL + "vault-batch-token",
        ex=("hvb.{150:w}",),
        no=("hvb. prefix",),
    ),
    _prefixed(
        "vault-token",
        "s.",
        "[A-Za-z0-9]{24}",
        exact=True,
        validate=lambda t: mixed(t[2:]),
        src=GL + "vault-service-token (legacy s. tokens)",
        ex=("s.{24:A}",),
        no=("see s.{24:L} and s.json",),
    ),
    _prefixed(
        "openshift-token",
        "sha256~",
        f"[{W}]{{43}}",
        src=GL + "openshift-user-token",
        ex=("sha256~{43:w}",),
        no=("sha256~ prefix",),
    ),
    _prefixed(
        "pulumi-token",
        "pul-",
        "[a-f0-9]{40}",
        exact=True,
        src=GL + "pulumi-api-token",
        ex=("pul-{40:h}",),
        no=("pul-{32:h} is too short",),
    ),
    _prefixed(
        "infracost-token",
        "ico-",
        "[A-Za-z0-9]{32}",
        exact=True,
        src=GL + "infracost-api-token",
        ex=("ico-{32:A}",),
        no=("ico-{16:a}.png",),
    ),
    _prefixed(
        "scalingo-token",
        "tk-us-",
        f"[{W}]{{48}}",
        src=GL + "scalingo-api-token",
        ex=("tk-us-{48:w}",),
        no=("tk-us-east",),
    ),
    _prefixed(
        "planetscale-token",
        "pscale_tkn_ pscale_oauth_ pscale_pw_",
        f"[{W}=.]{{32,64}}",
        chars=W + "=.",
        src=GL + "planetscale-api-token, planetscale-oauth-token, planetscale-password",
        ex=("pscale_tkn_{43:w}", "pscale_pw_{43:w}"),
        no=("pscale_pw_ prefix",),
    ),
    _prefixed(
        "prefect-token",
        "pnu_",
        "[A-Za-z0-9]{36}",
        src=GL + "prefect-api-token",
        ex=("pnu_{36:A}",),
        no=("pnu_ prefix",),
    ),
    _prefixed(
        "clickhouse-key",
        "4b1d",
        "[A-Za-z0-9]{38}",
        exact=True,
        validate=lambda t: not t.isdigit(),
        src=GL + "clickhouse-cloud-api-secret-key",
        ex=("4b1d{38:A}",),
        no=("4b1d{28:h}",),
    ),
    _prefixed(
        "octopus-deploy-key",
        "API-",
        "[A-Z0-9]{26}",
        exact=True,
        validate=mixed,
        src=GL + "octopus-deploy-api-key",
        ex=("API-{26:U}",),
        no=("API-GATEWAY-PRODUCTION-EU",),
    ),
    _prefixed(
        "harness-token",
        "pat. sat.",
        f"[{W}]{{22}}\\.[A-Za-z0-9]{{24}}\\.[A-Za-z0-9]{{20}}",
        chars=W + ".",
        src=GL + "harness-api-key",
        ex=("pat.{22:w}.{24:A}.{20:A}",),
        no=("pat.tgz and sat.conf",),
    ),
    _prefixed(
        "defined-networking-token",
        "dnkey-",
        "[A-Za-z0-9=_\\-]{26}-[A-Za-z0-9=_\\-]{52}",
        chars=W + "=",
        src=GL + "defined-networking-api-token",
        ex=("dnkey-{26:a}-{52:a}",),
        no=("dnkey- prefix",),
    ),
    _prefixed(
        "age-secret-key",
        "AGE-SECRET-KEY-1",
        "[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
        src=GL + "age-secret-key",
        ex=("AGE-SECRET-KEY-1{58:B}",),
        no=("age public keys start with age1{58:a}",),
    ),
    _prefixed(
        "1password-secret-key",
        "A3-",
        "[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}",
        src=GL + "1password-secret-key",
        ex=("A3-{6:U}-{11:U}-{5:U}-{5:U}-{5:U}",),
        no=("paper size A3-landscape",),
    ),
    _prefixed(
        "1password-token",
        "ops_eyJ",
        "[A-Za-z0-9+/]{40,4000}={0,3}",
        chars=B64,
        src=GL + "1password-service-account-token",
        ex=("ops_eyJ{260:b}",),
        no=("ops_eyJ prefix",),
    ),
    _prefixed(
        "authress-key",
        "sc_ ext_ scauth_ authress_",
        "[A-Za-z0-9]{5,30}\\.[A-Za-z0-9]{4,6}\\.acc[_\\-][A-Za-z0-9\\-]{10,32}\\.[A-Za-z0-9+/_=\\-]{30,120}",
        chars=W + "+/=.",
        src=GL + "authress-service-client-access-key",
        ex=("sc_{12:A}.{5:A}.acc_{16:a}.{40:b}",),
        no=("sc_main.c and ext_modules.py",),
    ),
    _prefixed(
        "sourcegraph-token",
        "sgp_",
        "(?:[a-fA-F0-9]{16}_|local_)?[a-fA-F0-9]{40}",
        src=GL + "sourcegraph-access-token",
        ex=("sgp_{16:h}_{40:h}", "sgp_{40:h}"),
        no=("sgp_local_ prefix",),
    ),
    _rule(
        "maxmind-license-key",
        "_mmk",
        "[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk",
        exact=True,
        back=("A-Za-z0-9_", 36, 36),
        src=GL + "maxmind-license-key",
        ex=("{6:A}_{29:A}_mmk",),
        no=("the _mmk suffix",),
    ),
    _prefixed(
        "supabase-token",
        "sbp_ sbp_oauth_",
        "[a-f0-9]{40}",
        exact=True,
        src="docs: Supabase access tokens (sbp_ and 40 hex digits)",
        ex=("sbp_{40:h}", "sbp_oauth_{40:h}"),
        no=("sbp_ prefix",),
    ),
    _prefixed(
        "supabase-secret-key",
        "sb_secret_",
        f"[{W}]{{28,64}}",
        src="docs: Supabase API keys (sb_secret_ secret keys; sb_publishable_ keys are public)",
        ex=("sb_secret_{31:w}",),
        no=("SUPABASE_KEY=sb_publishable_{31:w}",),
    ),
    _prefixed(
        "neon-key",
        "napi_",
        "[a-z0-9]{64}",
        exact=True,
        src=BL + "neon-api-key (napi_ and 64 characters)",
        ex=("napi_{64:a}",),
        no=("napi_create_function and napi_get_value_string_utf8",),
    ),
    _prefixed(
        "render-key",
        "rnd_",
        "[A-Za-z0-9]{32}",
        exact=True,
        src=BL + "render-api-key (rnd_ and 32 characters)",
        ex=("rnd_{32:A}",),
        no=("rnd_seed = 42; rnd_state",),
    ),
    _prefixed(
        "netlify-token",
        "nfp_ nfc_ nfo_ nfu_",
        "[A-Za-z0-9]{36,40}",
        exact=True,
        src=GL + "netlify-access-token; Netlify token prefixes (nfp_ personal, nfo_ OAuth, nfc_ CLI, nfu_ user)",
        ex=("nfp_{36:A}", "nfc_{40:A}"),
        no=("nfp_ tokens are personal",),
    ),
    _prefixed(
        "tailscale-key",
        "tskey-",
        "[a-z]{3,8}-[A-Za-z0-9]{6,40}-[A-Za-z0-9]{20,80}",
        src=BL + "tailscale-api-key (tskey-auth-, tskey-api-, tskey-client-, ...)",
        ex=("tskey-auth-k{11:A}CNTRL-{33:A}", "tskey-api-k{11:A}CNTRL-{33:A}"),
        no=("tskey-auth- keys register devices",),
    ),
    _prefixed(
        "figma-token",
        "figd_ figu_",
        f"[{W}]{{38,44}}",
        src=BL + "figma-personal-access-token (figd_ tokens)",
        ex=("figd_{40:w}",),
        no=("figd_ prefix",),
    ),
    _prefixed(
        "docker-token",
        "dckr_pat_ dckr_oat_",
        f"[{W}]{{27,80}}",
        src=BL + "dockerhub-pat (dckr_pat_ and 27 characters)",
        ex=("dckr_pat_{27:w}", "dckr_oat_{32:w}"),
        no=("dckr_pat_ tokens replace passwords",),
    ),
    _prefixed(
        "sonarqube-token",
        "squ_ sqp_ sqa_",
        "[a-f0-9]{40}",
        exact=True,
        src=GL + "sonar-api-token; SonarQube token prefixes (squ_ user, sqp_ project, sqa_ global)",
        ex=("squ_{40:h}", "sqp_{40:h}", "sqa_{40:h}"),
        no=("squ_ prefix",),
    ),
    _prefixed(
        "posthog-key",
        "phx_",
        "[A-Za-z0-9]{40,50}",
        src=BL + "posthog-personal-api-key (phx_; phc_ project keys are public)",
        ex=("phx_{43:A}",),
        no=("posthog.init('phc_{43:A}', {{api_host: 'https://eu.posthog.com'}})",),
    ),
    _prefixed(
        "honeycomb-key",
        "hcaik_ hcxik_ hcamk_ hcxmk_",
        "[a-z0-9]{20,80}",
        src=BL + "honeycomb-api-key (ingest keys hcaik_ / hcxik_, management keys hcamk_ / hcxmk_)",
        ex=("hcaik_{58:a}", "hcxik_{58:a}"),
        no=("hcaik_ prefix",),
    ),
    # code hosting, packages, CI
    _prefixed(
        "github-token",
        "ghp_ gho_ ghu_ ghs_ ghr_",
        "[A-Za-z0-9]{36}",
        src=GL + "github-pat, github-oauth, github-app-token, github-refresh-token",
        ex=("ghp_{36:A}", "gho_{36:A}", "ghs_{36:A}", "ghr_{36:A}", "ghu_{36:A}"),
        no=("ghp_ prefix",),
    ),
    _prefixed(
        "github-token",
        "github_pat_",
        "[A-Za-z0-9_]{22,255}",
        src=GL + "github-fine-grained-pat",
        ex=("github_pat_{82:A}",),
        no=("github_pat_ prefix",),
    ),
    _prefixed(
        "gitlab-token",
        "glpat- gldt- glft- glsoat- glrt- glffct-",
        f"[{W}]{{20,300}}",
        chars=W + ".",
        src=GL + "gitlab-pat, gitlab-pat-routable, gitlab-deploy-token, gitlab-feed-token, gitlab-scim-token, "
        "gitlab-runner-authentication-token, gitlab-feature-flag-client-token",
        ex=("glpat-{20:w}", "gldt-{20:w}", "glrt-{20:w}", "glft-{20:w}", "glsoat-{20:w}", "glffct-{20:w}"),
        no=("glpat- prefix",),
    ),
    _prefixed(
        "gitlab-token",
        "glcbt-",
        f"[A-Za-z0-9]{{1,5}}_[{W}]{{20}}",
        src=GL + "gitlab-cicd-job-token",
        ex=("glcbt-{3:A}_{20:w}",),
        no=("glcbt- prefix",),
    ),
    _prefixed(
        "gitlab-token",
        "glimt-",
        f"[{W}]{{25}}",
        src=GL + "gitlab-incoming-mail-token",
        ex=("glimt-{25:w}",),
        no=("glimt- prefix",),
    ),
    _prefixed(
        "gitlab-token",
        "glagent-",
        f"[{W}]{{50}}",
        src=GL + "gitlab-kubernetes-agent-token",
        ex=("glagent-{50:w}",),
        no=("glagent- prefix",),
    ),
    _prefixed(
        "gitlab-token",
        "gloas-",
        f"[{W}]{{64}}",
        src=GL + "gitlab-oauth-app-secret",
        ex=("gloas-{64:w}",),
        no=("gloas- prefix",),
    ),
    _prefixed(
        "gitlab-token",
        "glptt-",
        "[0-9a-f]{40}",
        src=GL + "gitlab-ptt",
        ex=("glptt-{40:h}",),
        no=("glptt- prefix",),
    ),
    _prefixed(
        "gitlab-token",
        "GR1348941",
        f"[{W}]{{20}}",
        src=GL + "gitlab-rrt",
        ex=("GR1348941{20:w}",),
        no=("GR1348941 prefix",),
    ),
    _prefixed(
        "gitlab-session",
        "_gitlab_session=",
        "[0-9a-z]{32}",
        src=GL + "gitlab-session-cookie",
        ex=("_gitlab_session={32:a}",),
        no=("the _gitlab_session= cookie",),
    ),
    _prefixed(
        "npm-token",
        "npm_",
        "[A-Za-z0-9]{36}",
        validate=mixed,
        src=GL + "npm-access-token",
        ex=("npm_{36:A}",),
        no=("npm_config_cache=/tmp/npm_cache and npm_package_version",),
    ),
    _prefixed(
        "pypi-token",
        "pypi-AgEIcHlwaS5vcmc pypi-AgENdGVzdC5weXBpLm9yZw",
        f"[{W}]{{50,1000}}",
        src=GL + "pypi-upload-token",
        ex=("pypi-AgEIcHlwaS5vcmc{70:w}",),
        no=("pypi-AgEIcHlwaS5vcmc prefix",),
    ),
    _prefixed(
        "rubygems-token",
        "rubygems_",
        "[a-f0-9]{48}",
        src=GL + "rubygems-api-token",
        ex=("rubygems_{48:h}",),
        no=("rubygems_version and rubygems_mirror",),
    ),
    _prefixed(
        "crates-io-token",
        "cio",
        "[A-Za-z0-9]{32}",
        exact=True,
        src=BL + "cratesio-api-key (cio and 32 characters)",
        ex=("cio{32:A}",),
        no=("ciocca and cio_{32:A}_v2",),
    ),
    _prefixed(
        "nuget-key",
        "oy2",
        "[a-z0-9]{43}",
        exact=True,
        src=BL + "nuget-api-key (oy2 and 43 characters)",
        ex=("oy2{43:a}",),
        no=("oy2{20:a}",),
    ),
    _prefixed(
        "clojars-token",
        "CLOJARS_",
        "[A-Za-z0-9]{60}",
        icase=True,
        src=GL + "clojars-api-token",
        ex=("CLOJARS_{60:a}",),
        no=("CLOJARS_USERNAME=deploy",),
    ),
    _prefixed(
        "artifactory-token",
        "AKCp",
        "[A-Za-z0-9]{69}",
        exact=True,
        src=GL + "artifactory-api-key",
        ex=("AKCp{69:A}",),
        no=("AKCp prefix",),
    ),
    _prefixed(
        "artifactory-token",
        "cmVmd",
        "[A-Za-z0-9]{59}",
        exact=True,
        src=GL + "artifactory-reference-token",
        ex=("cmVmd{59:A}",),
        no=("cmVmd{20:A}",),
    ),
    _prefixed(
        "readme-token",
        "rdme_",
        "[a-z0-9]{70}",
        src=GL + "readme-api-token",
        ex=("rdme_{70:a}",),
        no=("rdme_ prefix",),
    ),
    _prefixed(
        "postman-key",
        "PMAK-",
        "[a-fA-F0-9]{24}-[a-fA-F0-9]{34}",
        src=GL + "postman-api-token",
        ex=("PMAK-{24:h}-{34:h}",),
        no=("PMAK- prefix",),
    ),
    _prefixed(
        "linear-key",
        "lin_api_",
        "[A-Za-z0-9]{40}",
        src=GL + "linear-api-key",
        ex=("lin_api_{40:A}",),
        no=("lin_api_ prefix",),
    ),
    _prefixed(
        "atlassian-token",
        "ATATT3 ATCTT3",
        "[A-Za-z0-9_\\-=]{40,200}",
        chars=W + "=",
        src=GL + "atlassian-api-token; Atlassian Confluence tokens (ATCTT3)",
        ex=("ATATT3{186:w}", "ATCTT3xFfGN0{180:w}"),
        no=("ATATT3 prefix",),
    ),
    _prefixed(
        "bitbucket-app-password",
        "ATBB",
        "[A-Za-z0-9]{32,40}",
        exact=True,
        src=BL + "bitbucket-app-password (ATBB and 32 characters)",
        ex=("ATBB{28:A}{8:H}",),
        no=("ATBBQ",),
    ),
    _prefixed(
        "trello-token",
        "ATTA",
        "[a-fA-F0-9]{64,72}",
        src=BL + "trello-access-token (ATTA and 64+ hex digits)",
        ex=("ATTA{64:h}{8:H}",),
        no=("ATTACH and ATTACHMENT_ID",),
    ),
    _prefixed(
        "frameio-token",
        "fio-u-",
        "[A-Za-z0-9_\\-=]{64}",
        chars=W + "=",
        src=GL + "frameio-api-token",
        ex=("fio-u-{64:w}",),
        no=("fio-u- prefix",),
    ),
    _prefixed(
        "typeform-token",
        "tfp_",
        "[A-Za-z0-9_\\-.=]{59}",
        chars=W + ".=",
        src=GL + "typeform-api-token",
        ex=("tfp_{59:w}",),
        no=("tfp_ prefix",),
    ),
    _prefixed(
        "sentry-token",
        "sntryu_",
        "[a-f0-9]{64}",
        src=GL + "sentry-user-token",
        ex=("sntryu_{64:h}",),
        no=("sntryu_ prefix",),
    ),
    _prefixed(
        "sentry-token",
        "sntrys_",
        "eyJpYXQiO[A-Za-z0-9+/=_]{60,600}",
        chars=B64 + "_",
        src=GL + "sentry-org-token",
        ex=("sntrys_eyJpYXQiO{80:b}LCJyZWdpb25fdXJs{40:b}_{43:b}",),
        no=("sntrys_ prefix",),
    ),
    _prefixed(
        "notion-token",
        "ntn_",
        "[0-9]{11}[A-Za-z0-9]{35}",
        src=GL + "notion-api-token",
        ex=("ntn_{11:d}{35:A}",),
        no=("ntn_ prefix",),
    ),
    _prefixed(
        "notion-token",
        "secret_",
        "[A-Za-z0-9]{43}",
        exact=True,
        validate=lambda t: mixed(t[7:]),
        src="docs: Notion internal integration secrets (secret_ and 43 characters, before ntn_)",
        ex=("secret_{43:A}",),
        no=("secret_key_base and secret_name", "secret_{43:L}"),
    ),
    _prefixed(
        "easypost-key",
        "EZAK EZTK",
        "[A-Za-z0-9]{54}",
        src=GL + "easypost-api-token, easypost-test-api-token",
        ex=("EZAK{54:A}",),
        no=("EZAK prefix",),
    ),
    _prefixed(
        "duffel-token",
        "duffel_test_ duffel_live_",
        "[A-Za-z0-9_\\-=]{43}",
        chars=W + "=",
        src=GL + "duffel-api-token",
        ex=("duffel_test_{43:w}",),
        no=("duffel_test_ prefix",),
    ),
    _prefixed(
        "settlemint-token",
        "sm_aat_ sm_pat_ sm_sat_",
        "[A-Za-z0-9]{16}",
        src=GL + "settlemint-personal-access-token, -application-access-token, -service-access-token",
        ex=("sm_pat_{16:A}",),
        no=("sm_pat_ prefix",),
    ),
    _prefixed(
        "buildkite-token",
        "bkua_",
        "[a-f0-9]{40}",
        exact=True,
        src=BL + "buildkite-api-token (bkua_ and 40 hex digits)",
        ex=("bkua_{40:h}",),
        no=("bkua_ prefix",),
    ),
    _prefixed(
        "circleci-token",
        "CCIPAT_ CCIPRJ_",
        "[A-Za-z0-9]{22}_[a-f0-9]{40}",
        src=BL + "circleci-personal-access-token, circleci-project-token",
        ex=("CCIPAT_{22:A}_{40:h}",),
        no=("CCIPAT_ prefix",),
    ),
    _prefixed(
        "contentful-token",
        "CFPAT-",
        f"[{W}]{{43}}",
        src="docs: Contentful personal access tokens (CFPAT- and 43 characters)",
        ex=("CFPAT-{43:w}",),
        no=("CFPAT- prefix",),
    ),
    _prefixed(
        "hubspot-token",
        "pat-na1- pat-na2- pat-eu1- pat-ap1-",
        UUID,
        src=BL + "hubspot-private-app-token (pat-<region>- and a UUID)",
        ex=("pat-na1-{uuid}", "pat-eu1-{uuid}"),
        no=("pat-na1- prefix",),
    ),
    _rule(
        "airtable-token",
        "",
        "pat[A-Za-z0-9]{14}\\.[a-f0-9]{64}",
        chars=W + ".",
        gate=lazy_re.compile("pat[A-Za-z0-9]{14}\\.[a-f0-9]{64}"),
        src=BL + "airtable-personnal-access-token",
        ex=("pat{14:A}.{64:h}",),
        no=("pattern.{8:h} and path.join",),
    ),
    # communication
    _prefixed(
        "slack-token",
        "xoxe.xoxb- xoxe.xoxp-",
        "\\d-[A-Za-z0-9]{40,170}",
        chars=W + ".",
        src=GL + "slack-config-access-token",
        ex=("xoxe.xoxp-1-{164:U}",),
        no=("xoxe.xoxp- prefix",),
    ),
    _prefixed(
        "slack-token",
        "xoxb- xoxp- xoxa- xoxr- xoxs- xoxo- xoxe- xoxc- xoxd-",
        f"[{W}]{{10,300}}",
        validate=lambda t: _HAS_DIGIT.search(t) is not None,
        src=GL + "slack-bot-token, slack-user-token, slack-legacy-*, slack-config-refresh-token",
        ex=(
            "xoxb-{12:d}-{12:d}-{24:A}",
            "xoxp-{12:d}-{12:d}-{12:d}-{32:A}",
            "xoxe-1-{146:U}",
        ),
        no=("xoxb-token-goes-here",),
    ),
    _prefixed(
        "slack-token",
        "xapp-",
        "\\d-[A-Za-z0-9\\-]{10,300}",
        src=GL + "slack-app-token",
        ex=("xapp-1-{11:U}-{13:d}-{64:a}",),
        no=("xapp- prefix",),
    ),
    _prefixed(
        "slack-webhook",
        "hooks.slack.com/services/ hooks.slack.com/workflows/ hooks.slack.com/triggers/",
        "[A-Za-z0-9+/_]{20,120}",
        chars=W + "+/",
        keep_prefix=True,
        src=GL + "slack-webhook-url",
        ex=("https://hooks.slack.com/services/T{10:U}/B{10:U}/{24:A}",),
        no=("see https://api.slack.com/messaging/webhooks",),
    ),
    _prefixed(
        "teams-webhook",
        "webhook.office.com/webhookb2/",
        "[A-Za-z0-9@/\\-]{60,300}",
        chars=W + "@/",
        keep_prefix=True,
        src=GL + "microsoft-teams-webhook",
        ex=("https://acme.webhook.office.com/webhookb2/{uuid}@{uuid}/IncomingWebhook/{32:a}/{uuid}",),
        no=("Teams webhooks live under webhook.office.com/webhookb2/",),
    ),
    _prefixed(
        "discord-webhook",
        "discord.com/api/webhooks/ discordapp.com/api/webhooks/",
        f"[0-9]{{17,20}}/[{W}]{{60,80}}",
        chars=W + "/",
        keep_prefix=True,
        src=BL + "discord-webhook-url (discord.com/api/webhooks/<id>/<token>)",
        ex=("https://discord.com/api/webhooks/{18:d}/{68:w}", "https://discordapp.com/api/webhooks/{19:d}/{68:w}"),
        no=("read https://discord.com/developers/docs/resources/webhook",),
    ),
    _prefixed(
        "zapier-webhook",
        "hooks.zapier.com/hooks/catch/",
        "[0-9]{4,12}/[A-Za-z0-9]{5,12}",
        chars=W + "/",
        keep_prefix=True,
        src=BL + "zapier-webhook-url",
        ex=("https://hooks.zapier.com/hooks/catch/{8:d}/{8:a}/",),
        no=("Zapier catch hooks: hooks.zapier.com/hooks/catch/",),
    ),
    _rule(
        "discord-token",
        "",
        f"[MNO][{W}]{{23,27}}\\.[{W}]{{6,7}}\\.[{W}]{{27,38}}",
        chars=W + ".",
        back=(W, 24, 28),
        gate=lazy_re.compile(f"\\.[{W}]{{6,7}}\\.[{W}]{{27}}"),
        src=DS + "DiscordBotTokenDetector",
        ex=("M{25:w}.{6:w}.{38:w}",),
        no=("config.sample.yaml and web.config.template",),
    ),
    _rule(
        "telegram-token",
        ":AA",
        f"\\d{{8,10}}:AA[{W}]{{33}}",
        back=("0-9", 8, 10),
        src=GL + "telegram-bot-api-token; " + DS + "TelegramBotTokenDetector",
        ex=("{10:d}:AA{33:w}",),
        no=("at 12:AA the build ran",),
    ),
    _prefixed(
        "sendgrid-key",
        "SG.",
        f"[{W}]{{22}}\\.[{W}]{{43}}",
        chars=W + ".",
        src=GL + "sendgrid-api-token; " + DS + "SendGridDetector",
        ex=("SG.{22:w}.{43:w}",),
        no=("SG.config and SG.1",),
    ),
    _prefixed(
        "sendinblue-key",
        "xkeysib- xsmtpsib-",
        "[a-f0-9]{64}-[A-Za-z0-9]{16}",
        src=GL + "sendinblue-api-token; Brevo SMTP keys (xsmtpsib-)",
        ex=("xkeysib-{64:h}-{16:A}", "xsmtpsib-{64:h}-{16:A}"),
        no=("xkeysib- prefix",),
    ),
    _rule(
        "mailchimp-key",
        "-us",
        "[0-9a-f]{32}-us\\d{1,2}",
        exact=True,
        back=("0-9a-f", 32, 32),
        src=GL + "mailchimp-api-key; " + DS + "MailchimpDetector",
        ex=("{32:h}-us12",),
        no=("region en-us and {12:h}-us1",),
    ),
    _prefixed(
        "twilio-key",
        "SK",
        "[0-9a-fA-F]{32}",
        exact=True,
        validate=lambda t: mixed(t[2:]),
        src=GL + "twilio-api-key (API key SIDs SK…; account SIDs AC… are identifiers)",
        ex=("SK{32:h}",),
        no=(
            "account AC{32:h} sent message SM{32:h}",
            "call CA{32:h} from number PN{32:h}",
        ),
    ),
    _prefixed(
        "intercom-token",
        "dG9rOm",
        "[A-Za-z0-9+/]{40,70}={0,2}",
        chars=B64,
        src=GL + "intercom-api-key (base64 of tok:)",
        ex=("dG9rOm{54:b}=",),
        no=("dG9rOm prefix",),
    ),
    _prefixed(
        "resend-key",
        "re_",
        "[A-Za-z0-9]{8}_[A-Za-z0-9]{24}",
        exact=True,
        src=BL + "resend-api-key (re_, 8 characters, _, 24 characters)",
        ex=("re_{8:A}_{24:A}",),
        no=("re_path('^api/', include(urls)) and re_compile",),
    ),
    # payments and commerce
    _prefixed(
        "stripe-key",
        "sk_live_ sk_test_ sk_prod_ rk_live_ rk_test_ rk_prod_",
        "[A-Za-z0-9]{10,99}",
        src=GL + "stripe-access-token; " + DS + "StripeDetector; Paystack and Clerk secret keys (sk_live_, sk_test_)",
        ex=("sk_live_{24:A}", "rk_test_{24:A}", "sk_test_{40:h}"),
        no=("publishable pk_test_{24:A} and pk_live_{24:A}", "sk_test_helpers.py"),
    ),
    _prefixed(
        "stripe-webhook-secret",
        "whsec_",
        "[A-Za-z0-9]{24,64}",
        src="docs: Stripe webhook signing secrets (whsec_)",
        ex=("whsec_{32:A}",),
        no=("whsec_ prefix",),
    ),
    _prefixed(
        "square-token",
        "sq0atp-",
        f"[{W}]{{22,60}}",
        src=GL + "square-access-token; " + DS + "SquareOAuthDetector",
        ex=("sq0atp-{22:w}",),
        no=("sq0atp- prefix",),
    ),
    _prefixed(
        "square-secret",
        "sq0csp-",
        f"[{W}]{{40,50}}",
        src=DS + "SquareOAuthDetector",
        ex=("sq0csp-{43:w}",),
        no=("sq0csp- prefix",),
    ),
    _prefixed(
        "square-token",
        "EAAA",
        f"[{W}]{{22,60}}",
        validate=mixed,
        src=GL + "square-access-token",
        ex=("EAAA{60:w}",),
        no=("EAAAH-{8:L}",),
    ),
    _prefixed(
        "facebook-token",
        "EAAM EAAC",
        "[A-Za-z0-9]{40,500}",
        src=GL + "facebook-page-access-token",
        ex=("EAAM{120:A}",),
        no=("EAAC prefix",),
    ),
    _rule(
        "facebook-token",
        "| %7C",
        "\\d{15,16}(?:\\||%7C)[0-9A-Za-z\\-_]{27,40}",
        chars=W + "|%",
        back=("0-9", 15, 16),
        src=GL + "facebook-access-token",
        ex=("{15:d}|{32:a}",),
        no=("| 123 | abc |",),
    ),
    _prefixed(
        "shopify-token",
        "shpat_ shpca_ shppa_ shpss_",
        "[a-fA-F0-9]{32}",
        exact=True,
        src=GL + "shopify-access-token, -custom-access-token, -private-app-access-token, -shared-secret",
        ex=("shpat_{32:h}", "shpss_{32:h}"),
        no=("shpat_ prefix",),
    ),
    _prefixed(
        "shippo-token",
        "shippo_live_ shippo_test_",
        "[a-fA-F0-9]{40}",
        src=GL + "shippo-api-token",
        ex=("shippo_live_{40:h}",),
        no=("shippo_live_ prefix",),
    ),
    _prefixed(
        "flutterwave-key",
        "FLWSECK_TEST- FLWPUBK_TEST- FLWSECK-",
        "[a-hA-H0-9]{12,32}(?:-X)?",
        src=GL + "flutterwave-secret-key, -public-key, -encryption-key",
        ex=("FLWSECK_TEST-{32:h}-X",),
        no=("FLWSECK_TEST- prefix",),
    ),
    _prefixed(
        "adobe-client-secret",
        "p8e-",
        "[A-Za-z0-9]{32}",
        icase=True,
        src=GL + "adobe-client-secret",
        ex=("p8e-{32:A}",),
        no=("p8e- prefix",),
    ),
    _prefixed(
        "plaid-token",
        "access-sandbox- access-development- access-production-",
        UUID,
        src=GL + "plaid-api-token",
        ex=("access-sandbox-{uuid}",),
        no=("access-sandbox-environment",),
    ),
    _prefixed(
        "intra42-secret",
        "s-s4t2ud- s-s4t2af-",
        "[a-f0-9]{64}",
        src=GL + "intra42-client-secret",
        ex=("s-s4t2ud-{64:h}",),
        no=("s-s4t2ud- prefix",),
    ),
    _prefixed(
        "braintree-token",
        "access_token$production$ access_token$sandbox$",
        "[a-z0-9]{16}\\$[a-f0-9]{32}",
        chars=W + "$",
        src=BL + "braintree-access-token; " + DS + "BraintreeDetector",
        ex=("access_token$production${16:a}${32:h}",),
        no=("access_token$production$ prefix",),
    ),
    _prefixed(
        "clickup-token",
        "pk_",
        "[0-9]{6,10}_[A-Z0-9]{32}",
        src=BL + "clickup-personal-access-token (pk_<user id>_ and 32 characters)",
        ex=("pk_{8:d}_{32:U}",),
        no=("pk_live_{24:A} is a publishable key",),
    ),
    # observability, auth, data
    _prefixed(
        "grafana-token",
        "eyJrIjoi",
        "[A-Za-z0-9]{70,400}={0,3}",
        chars=B64,
        src=GL + "grafana-api-key",
        ex=("eyJrIjoi{80:A}",),
        no=("eyJrIjoi prefix",),
    ),
    _prefixed(
        "grafana-token",
        "glc_",
        "[A-Za-z0-9+/]{32,400}={0,3}",
        chars=B64,
        src=GL + "grafana-cloud-api-token",
        ex=("glc_{60:b}",),
        no=("glc_ prefix",),
    ),
    _prefixed(
        "grafana-token",
        "glsa_",
        "[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}",
        src=GL + "grafana-service-account-token",
        ex=("glsa_{32:A}_{8:h}",),
        no=("glsa_ prefix",),
    ),
    _prefixed(
        "newrelic-key",
        "NRAK- NRII- NRJS- NRAA-",
        "[A-Za-z0-9\\-]{19,40}",
        src=GL + "new-relic-user-api-key, -insert-key, -browser-api-token",
        ex=("NRAK-{27:U}", "NRII-{32:a}", "NRJS-{19:h}"),
        no=("NRAK- prefix",),
    ),
    _prefixed(
        "dropbox-token",
        "sl.",
        "[A-Za-z0-9_\\-=]{130,160}",
        chars=W + "=",
        src=GL + "dropbox-short-lived-api-token",
        ex=("sl.{135:w}",),
        no=("sl.txt",),
    ),
    _rule(
        "dropbox-token",
        "AAAAAAAAAA",
        "[A-Za-z0-9]{11}AAAAAAAAAA[A-Za-z0-9_\\-=]{43}",
        chars=W + "=",
        back=("A-Za-z0-9", 11, 11),
        src=GL + "dropbox-long-lived-api-token",
        ex=("{11:a}AAAAAAAAAA{43:a}",),
        no=("AAAAAAAAAA",),
    ),
    _prefixed(
        "twitter-bearer-token",
        "AAAAAAAAAAAAAAAAAAAAA",
        "A{0,3}[A-Za-z0-9%]{80,120}",
        chars=W + "%",
        validate=mixed,
        src=GL + "twitter-bearer-token",
        ex=("AAAAAAAAAAAAAAAAAAAAAA{90:A}",),
        no=("AAAAAAAAAAAAAAAAAAAAAAAA",),
    ),
    _prefixed(
        "yandex-key",
        "AQVN",
        f"[{W}]{{35,38}}",
        exact=True,
        src=GL + "yandex-api-key",
        ex=("AQVN{36:w}",),
        no=("AQVN prefix",),
    ),
    _prefixed(
        "yandex-token",
        "t1.",
        f"[{W}]{{20,400}}={{0,2}}\\.[{W}]{{86}}={{0,2}}",
        chars=W + "=.",
        src=GL + "yandex-access-token",
        ex=("t1.{40:w}.{86:w}",),
        no=("t1.micro and t1.small instances",),
    ),
    _prefixed(
        "mapbox-token",
        "pk.eyJ sk.eyJ",
        f"[{W}]{{40,200}}\\.[{W}]{{20,40}}",
        chars=W + ".",
        src=GL + "mapbox-api-token",
        ex=("pk.eyJ{57:A}.{22:A}",),
        no=("pk.eyJ prefix",),
    ),
    _prefixed(
        "private-key",
        "LS0tLS1CRUdJTi",
        "[A-Za-z0-9+/]{40,20000}={0,3}",
        chars=B64,
        validate=lambda t: b"PRIVATE KEY" in _b64head(t),
        src="kubeconfig client-key-data (base64 of a PEM private key); " + GL + "private-key",
        ex=("{pem64}",),
        no=("client-certificate-data: {cert64}",),
    ),
    _prefixed(
        "jwt",
        "ZXlK",
        "[A-Za-z0-9/+_\\-]{40,4000}={0,2}",
        chars=B64 + "_-",
        validate=mixed,
        src=GL + "jwt-base64",
        ex=("{jwtb64}",),
        no=("ZXlK prefix",),
    ),
    _prefixed(
        "jwt",
        "eyJ",
        f"[{W}=]{{7,2000}}\\.eyJ[{W}=]{{7,8000}}(?:\\.[{W}=+/]{{0,4000}})?",
        chars=W + "=+/.",
        validate=jwt_ok,
        src=GL + "jwt; " + DS + "JwtTokenDetector",
        ex=("{jwt}",),
        no=("eyJhbGciOiJIUzI1NiJ9 alone is a header",),
    ),
)


def trie_regex(words: list[str]) -> re.Pattern[str]:
    """One regex matching any of ``words``, the longest at a position: their trie, written as nested groups
    (``s(?:k(?:-(?:ant-)?|_live_))``), so the engine reads a character once per level, not once per word."""
    root: dict = {}
    for w in words:
        node = root
        for c in w:
            node = node.setdefault(c, {})
        node[""] = {}

    def write(node: dict) -> str:
        alts = [re.escape(c) + write(child) for c, child in sorted(node.items()) if c]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if "" in node else body

    return lazy_re.compile(write(root) if words else "(?!)")


def _scanners() -> list[tuple[bool, re.Pattern[str], dict[str, list[tuple[int, int]]]]]:
    """Per case (exact, folded): the trigger regex and, for each literal it can match, the rules to judge there
    with their own trigger's length (every trigger that is a prefix of the literal: ``sk-`` under ``sk-ant-``)."""
    out = []
    for folded in (False, True):
        triggers: dict[str, list[int]] = {}
        for i, rule in enumerate(TOKENS):
            if rule.icase == folded and rule.gate is None:
                for t in rule.triggers:
                    triggers.setdefault(t.lower() if folded else t, []).append(i)
        dispatch = {
            lit: sorted((i, len(t)) for t, rules in triggers.items() if lit.startswith(t) for i in rules)
            for lit in triggers
        }
        out.append((folded, trie_regex(sorted(triggers)), dispatch))
    return out


_SCANNERS = _scanners()
_GATED = [i for i, rule in enumerate(TOKENS) if rule.gate is not None]


def _start(text: str, rule: TokenRule, at: int) -> int:
    """Where a token of ``rule`` found by its trigger at ``at`` starts (-1: too little before it)."""
    if rule.back is None:
        return at
    chars, lo, hi = rule.back
    members = _members(chars)
    i, stop = at, max(0, at - hi)
    while i > stop and text[i - 1] in members:
        i -= 1
    return i if at - i >= lo else -1


@cache
def _members(chars: str) -> frozenset[str]:
    """The characters of a character-class body (ASCII only: every token character is)."""
    one = re.compile(f"[{chars}]")
    return frozenset(c for c in map(chr, range(128)) if one.match(c))


def find_tokens(text: str, low: str) -> list[tuple[str, int, int]]:
    """The provider tokens of ``text`` as (kind, start, end), in no particular order; at one start only the first
    rule of ``TOKENS`` that accepts it. ``low``: ``text`` lower-cased with the same length."""
    examined = [-1] * len(TOKENS)  # per rule: the end of the run of token characters already judged
    best: dict[int, tuple[int, str, int]] = {}  # start -> (rule index, kind, end)
    for folded, scan, dispatch in _SCANNERS:
        source = low if folded else text
        m = scan.search(source)
        while m is not None:  # overlapping: a trigger may start inside another ("…sl.atlasv1.…")
            at, rules = m.start(), dispatch[m.group()]
            for i, n in rules:
                _judge(text, TOKENS[i], i, at, n, examined, best)
            # on, past what every rule of this trigger has judged (a run of "AAAA…" is not read once per A)
            m = scan.search(source, max(at + 1, min(examined[i] for i, _ in rules)))
    for i in _GATED:
        for m in TOKENS[i].gate.finditer(text):
            _judge(text, TOKENS[i], i, m.start(), 0, examined, best)
    return [(kind, s, e) for s, (_, kind, e) in best.items()]


def _judge(text: str, rule: TokenRule, i: int, at: int, n: int, examined: list[int], best: dict) -> None:
    if at < examined[i]:
        return  # inside a run this rule already judged (see the module doc)
    s = _start(text, rule, at)
    if s < 0 or (s > 0 and text[s - 1] in _ALNUM):
        if rule.back is not None:  # the scan back cost up to ``back``'s max: not again inside this run
            examined[i] = max(rule.run.match(text, at).end(), at + 1)
        return
    m = rule.pattern.match(text, s)
    run_end = rule.run.match(text, s).end()
    examined[i] = max(run_end, at + 1)
    if m is None:
        return
    e = m.end()
    if rule.exact:
        if e < len(text) and rule.run.match(text, e).end() > e:
            return  # the run goes on: not this format
    else:
        e = max(e, run_end)
    if rule.validate is not None and not rule.validate(text[s:e]):
        return
    if rule.keep_prefix:
        s += n
    if s not in best or best[s][0] > i:
        best[s] = (i, rule.kind, e)
