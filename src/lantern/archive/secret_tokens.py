"""Provider tokens: credentials with a fixed format, found by a literal that every token of the format holds (its
prefix, or a fixed piece inside it), in time linear in the text (ours; used by archive/redact.py).

The formats cover the providers of gitleaks' default rule set (config/gitleaks.toml of github.com/gitleaks/gitleaks,
read for its list of rule ids and the prefixes and lengths their providers document) and those of Yelp's
detect-secrets 1.5.0 plugins; the patterns are written here for this scanner. Credentials without a fixed
format are found by context in redact.py (``KEY=value``, ``password is …``, URLs, headers, flags) and, for a
provider's name before an assignment (``DATADOG_API_KEY=…``, ``heroku: …``), by ``PROVIDER_WORDS`` there.

    find_tokens(text, low) -> [(kind, start, end)]     # ``low`` = text lower-cased, same length

**Rules.** ``TOKENS``: (kind, triggers, pattern, options). A trigger is a literal; the pattern is matched at the
trigger (prefix rules) or ``back`` characters before it (a fixed piece inside the token: ``-us`` of a Mailchimp
key, ``Q~`` of an Azure AD secret), every quantifier bounded. A match is then widened to the right over the
token's characters (``chars``) so a token longer than its documented length is not left half in clear, unless
the rule is ``exact`` (a longer run is something else: an upper-case identifier is no AWS key id). A token never
starts inside a word (after an ASCII letter or digit). Case-insensitive triggers (``icase``) are looked for in
``low``.

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
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

__all__ = ["TOKENS", "TokenRule", "find_tokens", "jwt_ok", "trie_regex"]

_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_HAS_DIGIT = re.compile(r"\d")
_HAS_LETTER = re.compile(r"[A-Za-z]")
W = "A-Za-z0-9_\\-"  # the usual token characters
B64 = "A-Za-z0-9+/="


def mixed(token: str) -> bool:
    """A letter and a digit somewhere in the token (a run of one word, or of one repeated letter, is no key)."""
    return _HAS_DIGIT.search(token) is not None and _HAS_LETTER.search(token) is not None


def _b64json(part: str) -> bool:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        return isinstance(json.loads(raw.decode("utf-8")), dict)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return False


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

    @property
    def run(self) -> re.Pattern[str]:
        return _run(self.chars)


@cache
def _run(chars: str) -> re.Pattern[str]:
    return re.compile(f"[{chars}]*")


def _rule(kind: str, triggers: str, pattern: str, **kw) -> TokenRule:
    """A rule found by ``triggers`` (space-separated literals; none with a ``gate``); ``pattern`` matched where the
    token starts."""
    return TokenRule(kind, tuple(triggers.split()), re.compile(pattern), **kw)


def _prefixed(kind: str, prefixes: str, body: str, **kw) -> TokenRule:
    """A rule whose token starts with one of ``prefixes`` (space-separated) followed by ``body``."""
    alts = "|".join(re.escape(p) for p in sorted(prefixes.split(), key=len, reverse=True))
    flags = "(?i)" if kw.get("icase") else ""
    return TokenRule(kind, tuple(prefixes.split()), re.compile(f"{flags}(?:{alts}){body}"), **kw)


HEX = "[0-9a-fA-F]"
UUID = f"{HEX}{{8}}-{HEX}{{4}}-{HEX}{{4}}-{HEX}{{4}}-{HEX}{{12}}"

# Order matters where two rules find the same start: the first one names the token (specific before generic).
TOKENS: tuple[TokenRule, ...] = (
    # AI providers
    _prefixed("anthropic-key", "sk-ant-", f"[{W}]{{20,300}}"),
    _prefixed("openai-key", "sk-", f"[{W}]{{20,300}}", validate=lambda t: not t.startswith("sk-ant-") and mixed(t[3:])),
    _rule("openai-key", "T3BlbkFJ", f"[{W}]{{0,120}}T3BlbkFJ[{W}]{{16,120}}", back=(W, 3, 120)),
    _prefixed("huggingface-token", "hf_", "[A-Za-z0-9]{30,64}", validate=mixed),
    _prefixed("huggingface-token", "api_org_", "[A-Za-z]{34}", exact=True),
    _prefixed("perplexity-key", "pplx-", "[A-Za-z0-9]{48}"),
    # cloud and infrastructure
    _rule(
        "aws-access-key-id", "AKIA ASIA ABIA ACCA A3T", "(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}", exact=True
    ),
    _prefixed("google-api-key", "AIza", f"[{W}]{{35}}"),
    _prefixed("azure-storage-key", "AccountKey=", "[A-Za-z0-9+/]{86}==", chars=B64),
    _rule(
        "azure-ad-client-secret",
        "Q~",
        r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}",
        chars=W + "~.",
        back=("A-Za-z0-9_~.", 4, 4),
    ),
    _prefixed("alibaba-access-key-id", "LTAI", "[A-Za-z0-9]{20}", exact=True),
    _prefixed("digitalocean-token", "dop_v1_ doo_v1_ dor_v1_", "[a-f0-9]{64}"),
    _prefixed("cloudflare-origin-ca-key", "v1.0-", "[a-f0-9]{24}-[a-f0-9]{146}"),
    _prefixed("databricks-token", "dapi", "[a-f0-9]{32}(?:-\\d)?", exact=True),
    _prefixed("doppler-token", "dp.pt.", "[A-Za-z0-9]{43}"),
    _prefixed("dynatrace-token", "dt0c01.", "[A-Za-z0-9]{24}\\.[A-Za-z0-9]{64}", chars=W + "."),
    _prefixed("flyio-token", "fo1_", f"[{W}]{{43}}"),
    _prefixed("flyio-token", "fm1a_ fm1r_ fm2_", "[A-Za-z0-9+/]{100,1000}={0,3}", chars=B64),
    _prefixed("heroku-key", "HRKU-AA", f"[{W}]{{58}}"),
    _rule(
        "terraform-token",
        ".atlasv1.",
        "[A-Za-z0-9]{14}\\.atlasv1\\.[A-Za-z0-9_=\\-]{60,70}",
        chars=W + "=.",
        back=("A-Za-z0-9", 14, 14),
    ),
    _prefixed("vault-token", "hvs.", f"[{W}]{{90,120}}"),
    _prefixed("vault-token", "hvb.", f"[{W}]{{138,300}}"),
    _prefixed("vault-token", "s.", "[A-Za-z0-9]{24}", exact=True, validate=lambda t: mixed(t[2:])),
    _prefixed("openshift-token", "sha256~", f"[{W}]{{43}}"),
    _prefixed("pulumi-token", "pul-", "[a-f0-9]{40}", exact=True),
    _prefixed("infracost-token", "ico-", "[A-Za-z0-9]{32}", exact=True),
    _prefixed("scalingo-token", "tk-us-", f"[{W}]{{48}}"),
    _prefixed("planetscale-token", "pscale_tkn_ pscale_oauth_ pscale_pw_", f"[{W}=.]{{32,64}}", chars=W + "=."),
    _prefixed("prefect-token", "pnu_", "[A-Za-z0-9]{36}"),
    _prefixed("clickhouse-key", "4b1d", "[A-Za-z0-9]{38}", exact=True, validate=lambda t: not t.isdigit()),
    _prefixed("octopus-deploy-key", "API-", "[A-Z0-9]{26}", exact=True, validate=mixed),
    _prefixed("harness-token", "pat. sat.", f"[{W}]{{22}}\\.[A-Za-z0-9]{{24}}\\.[A-Za-z0-9]{{20}}", chars=W + "."),
    _prefixed("defined-networking-token", "dnkey-", "[A-Za-z0-9=_\\-]{26}-[A-Za-z0-9=_\\-]{52}", chars=W + "="),
    _prefixed("age-secret-key", "AGE-SECRET-KEY-1", "[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    _prefixed(
        "1password-secret-key",
        "A3-",
        "[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}",
    ),
    _prefixed("1password-token", "ops_eyJ", "[A-Za-z0-9+/]{250,4000}={0,3}", chars=B64),
    _prefixed(
        "authress-key",
        "sc_ ext_ scauth_ authress_",
        "[A-Za-z0-9]{5,30}\\.[A-Za-z0-9]{4,6}\\.acc[_\\-][A-Za-z0-9\\-]{10,32}\\.[A-Za-z0-9+/_=\\-]{30,120}",
        chars=W + "+/=.",
    ),
    _prefixed("sourcegraph-token", "sgp_", "(?:[a-fA-F0-9]{16}_|local_)?[a-fA-F0-9]{40}"),
    _rule("maxmind-license-key", "_mmk", "[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk", exact=True, back=("A-Za-z0-9_", 36, 36)),
    # code hosting, packages, CI
    _prefixed("github-token", "ghp_ gho_ ghu_ ghs_ ghr_", "[A-Za-z0-9]{36}"),
    _prefixed("github-token", "github_pat_", "[A-Za-z0-9_]{22,255}"),
    _prefixed("gitlab-token", "glpat- gldt- glft- glsoat- glrt- glffct-", f"[{W}]{{20,300}}", chars=W + "."),
    _prefixed("gitlab-token", "glcbt-", f"[A-Za-z0-9]{{1,5}}_[{W}]{{20}}"),
    _prefixed("gitlab-token", "glimt-", f"[{W}]{{25}}"),
    _prefixed("gitlab-token", "glagent-", f"[{W}]{{50}}"),
    _prefixed("gitlab-token", "gloas-", f"[{W}]{{64}}"),
    _prefixed("gitlab-token", "glptt-", "[0-9a-f]{40}"),
    _prefixed("gitlab-token", "GR1348941", f"[{W}]{{20}}"),
    _prefixed("gitlab-session", "_gitlab_session=", "[0-9a-z]{32}"),
    _prefixed("npm-token", "npm_", "[A-Za-z0-9]{36}", validate=mixed),
    _prefixed("pypi-token", "pypi-AgEIcHlwaS5vcmc pypi-AgENdGVzdC5weXBpLm9yZw", f"[{W}]{{50,1000}}"),
    _prefixed("rubygems-token", "rubygems_", "[a-f0-9]{48}"),
    _prefixed("clojars-token", "CLOJARS_", "[A-Za-z0-9]{60}", icase=True),
    _prefixed("artifactory-token", "AKCp", "[A-Za-z0-9]{69}", exact=True),
    _prefixed("artifactory-token", "cmVmd", "[A-Za-z0-9]{59}", exact=True),
    _prefixed("readme-token", "rdme_", "[a-z0-9]{70}"),
    _prefixed("postman-key", "PMAK-", "[a-fA-F0-9]{24}-[a-fA-F0-9]{34}"),
    _prefixed("linear-key", "lin_api_", "[A-Za-z0-9]{40}"),
    _prefixed("atlassian-token", "ATATT3", "[A-Za-z0-9_\\-=]{186}", chars=W + "="),
    _prefixed("frameio-token", "fio-u-", "[A-Za-z0-9_\\-=]{64}", chars=W + "="),
    _prefixed("typeform-token", "tfp_", "[A-Za-z0-9_\\-.=]{59}", chars=W + ".="),
    _prefixed("sentry-token", "sntryu_", "[a-f0-9]{64}"),
    _prefixed("sentry-token", "sntrys_", "eyJpYXQiO[A-Za-z0-9+/=_]{60,600}", chars=B64 + "_"),
    _prefixed("notion-token", "ntn_", "[0-9]{11}[A-Za-z0-9]{35}"),
    _prefixed("easypost-key", "EZAK EZTK", "[A-Za-z0-9]{54}"),
    _prefixed("duffel-token", "duffel_test_ duffel_live_", "[A-Za-z0-9_\\-=]{43}", chars=W + "="),
    _prefixed("settlemint-token", "sm_aat_ sm_pat_ sm_sat_", "[A-Za-z0-9]{16}"),
    # communication
    _prefixed("slack-token", "xoxe.xoxb- xoxe.xoxp-", "\\d-[A-Za-z0-9]{160,170}", chars=W + "."),
    _prefixed(
        "slack-token",
        "xoxb- xoxp- xoxa- xoxr- xoxs- xoxo- xoxe- xoxc- xoxd-",
        f"[{W}]{{10,300}}",
        validate=lambda t: _HAS_DIGIT.search(t) is not None,
    ),
    _prefixed("slack-token", "xapp-", "\\d-[A-Za-z0-9\\-]{10,300}"),
    _prefixed(
        "slack-webhook",
        "hooks.slack.com/services/ hooks.slack.com/workflows/ hooks.slack.com/triggers/",
        "[A-Za-z0-9+/_]{20,120}",
        chars=W + "+/",
        keep_prefix=True,
    ),
    _prefixed(
        "teams-webhook", "webhook.office.com/webhookb2/", "[A-Za-z0-9@/\\-]{60,300}", chars=W + "@/", keep_prefix=True
    ),
    _rule(
        "discord-token",
        "",
        f"[MNO][{W}]{{23,27}}\\.[{W}]{{6,7}}\\.[{W}]{{27,38}}",
        chars=W + ".",
        back=(W, 24, 28),
        gate=re.compile(f"\\.[{W}]{{6,7}}\\.[{W}]{{27}}"),
    ),
    _rule("telegram-token", ":AA", f"\\d{{8,10}}:AA[{W}]{{33}}", back=("0-9", 8, 10)),
    _prefixed("sendgrid-key", "SG.", f"[{W}]{{22}}\\.[{W}]{{43}}", chars=W + "."),
    _prefixed("sendinblue-key", "xkeysib-", "[a-f0-9]{64}-[A-Za-z0-9]{16}"),
    _rule("mailchimp-key", "-us", "[0-9a-f]{32}-us\\d{1,2}", exact=True, back=("0-9a-f", 32, 32)),
    _prefixed("twilio-key", "SK AC", "[0-9a-fA-F]{32}", exact=True, validate=lambda t: mixed(t[2:])),
    _prefixed("intercom-token", "dG9rOm", "[A-Za-z0-9+/]{40,70}={0,2}", chars=B64),
    # payments and commerce
    _prefixed("stripe-key", "sk_live_ sk_test_ sk_prod_ rk_live_ rk_test_ rk_prod_", "[A-Za-z0-9]{10,99}"),
    _prefixed("stripe-webhook-secret", "whsec_", "[A-Za-z0-9]{24,64}"),
    _prefixed("square-token", "sq0atp-", f"[{W}]{{22,60}}"),
    _prefixed("square-secret", "sq0csp-", f"[{W}]{{40,50}}"),
    _prefixed("square-token", "EAAA", f"[{W}]{{22,60}}", validate=mixed),
    _prefixed("facebook-token", "EAAM EAAC", "[A-Za-z0-9]{100,500}"),
    _rule(
        "facebook-token", "| %7C", "\\d{15,16}(?:\\||%7C)[0-9A-Za-z\\-_]{27,40}", chars=W + "|%", back=("0-9", 15, 16)
    ),
    _prefixed("shopify-token", "shpat_ shpca_ shppa_ shpss_", "[a-fA-F0-9]{32}", exact=True),
    _prefixed("shippo-token", "shippo_live_ shippo_test_", "[a-fA-F0-9]{40}"),
    _prefixed("flutterwave-key", "FLWSECK_TEST- FLWPUBK_TEST- FLWSECK-", "[a-hA-H0-9]{12,32}(?:-X)?"),
    _prefixed("adobe-client-secret", "p8e-", "[A-Za-z0-9]{32}", icase=True),
    _prefixed("plaid-token", "access-sandbox- access-development- access-production-", UUID),
    _prefixed("intra42-secret", "s-s4t2ud- s-s4t2af-", "[a-f0-9]{64}"),
    # observability, auth, data
    _prefixed("grafana-token", "eyJrIjoi", "[A-Za-z0-9]{70,400}={0,3}", chars=B64),
    _prefixed("grafana-token", "glc_", "[A-Za-z0-9+/]{32,400}={0,3}", chars=B64),
    _prefixed("grafana-token", "glsa_", "[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"),
    _prefixed("newrelic-key", "NRAK- NRII- NRJS-", "[A-Za-z0-9\\-]{19,40}"),
    _prefixed("dropbox-token", "sl.", "[A-Za-z0-9_\\-=]{130,160}", chars=W + "="),
    _rule(
        "dropbox-token",
        "AAAAAAAAAA",
        "[A-Za-z0-9]{11}AAAAAAAAAA[A-Za-z0-9_\\-=]{43}",
        chars=W + "=",
        back=("A-Za-z0-9", 11, 11),
    ),
    _prefixed(
        "twitter-bearer-token", "AAAAAAAAAAAAAAAAAAAAA", "A{0,3}[A-Za-z0-9%]{80,120}", chars=W + "%", validate=mixed
    ),
    _prefixed("yandex-key", "AQVN", f"[{W}]{{35,38}}", exact=True),
    _prefixed("mapbox-token", "pk.eyJ sk.eyJ", f"[{W}]{{40,200}}\\.[{W}]{{20,40}}", chars=W + "."),
    _prefixed("jwt", "ZXlK", "[A-Za-z0-9/+_\\-]{40,4000}={0,2}", chars=B64 + "_-", validate=mixed),
    _prefixed(
        "jwt",
        "eyJ",
        f"[{W}=]{{7,2000}}\\.eyJ[{W}=]{{7,8000}}(?:\\.[{W}=+/]{{0,4000}})?",
        chars=W + "=+/.",
        validate=jwt_ok,
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

    return re.compile(write(root) if words else "(?!)")


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
