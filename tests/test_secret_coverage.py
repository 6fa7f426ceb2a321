"""Secret coverage by generator (issue 20, item 1): formats with random bodies, archived through ``Lantern`` on a real
database file, then looked for in the raw bytes of the ``.db`` and ``-wal`` files; look-alikes with random bodies
must come out unchanged.

``FORMATS``: one generator per credential format: the providers of gitleaks' default rule set
(config/gitleaks.toml, its rule ids and the prefixes and lengths of their providers), those of detect-secrets'
plugins, and context formats (``.pgpass`` lines, ``<add key= value=>``, Kubernetes Secret data, curl and
``Authorization`` headers, keyword assignments, prose). Each secret is placed in a message, a tool result or
tool-call arguments written by ``json.dumps`` (``\\n``, ``\\"`` and ``\\uXXXX`` escapes), in turn.
``LOOKALIKES``: hashes, ids, versions, ports, digests, paths, data URIs... that no detector may touch.

The random bodies come from ``random.Random(SEED)`` (``$LANTERN_SECRET_SEED`` picks another run).
"""

from __future__ import annotations

import base64
import json
import os
import random
import string
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from lantern import Lantern
from lantern.archive.redact import PLACEHOLDER_RE, find_secrets, make_policy, redact_text

SEED = int(os.environ.get("LANTERN_SECRET_SEED", "20"))
R = random.Random(SEED)
AL = string.ascii_letters + string.digits
LOW = string.ascii_lowercase + string.digits
UP = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64 = AL + "+/"
W = AL + "_-"


def rnd(n: int, alphabet: str = AL) -> str:
    """``n`` random characters of ``alphabet``, with a letter and a digit when the alphabet has both."""
    while True:
        s = "".join(R.choice(alphabet) for _ in range(n))
        letters, digits = any(c.isalpha() for c in alphabet), any(c.isdigit() for c in alphabet)
        if n < 4 or ((not letters or any(c.isalpha() for c in s)) and (not digits or any(c.isdigit() for c in s))):
            return s


def b64url(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def jwt() -> str:
    return f"{b64url({'alg': 'HS256', 'typ': 'JWT'})}.{b64url({'sub': rnd(8), 'iat': R.randrange(10**9)})}.{rnd(43, W)}"


def pem(label: str) -> str:
    lines = "\n".join(rnd(64, B64) for _ in range(4))
    return f"-----BEGIN {label}-----\n{lines}\n{rnd(20, B64)}==\n-----END {label}-----"


# (format id, secret generator, template holding {s}); a neutral template for a token known by its shape, the
# context itself for a credential known by it
Fmt = tuple[str, Callable[[], str], str]
NEUTRAL = "Here it is, {s} , rotate it next week."
FORMATS: list[Fmt] = [
    # AI providers
    ("openai-project", lambda: f"sk-proj-{rnd(74, W)}T3BlbkFJ{rnd(74, W)}", NEUTRAL),
    ("openai-legacy", lambda: f"sk-{rnd(20)}T3BlbkFJ{rnd(20)}", NEUTRAL),
    ("openai-svcacct", lambda: f"sk-svcacct-{rnd(58, W)}T3BlbkFJ{rnd(58, W)}", NEUTRAL),
    ("anthropic-api", lambda: f"sk-ant-api03-{rnd(93, W)}AA", NEUTRAL),
    ("anthropic-admin", lambda: f"sk-ant-admin01-{rnd(93, W)}AA", NEUTRAL),
    ("huggingface", lambda: f"hf_{rnd(34)}", NEUTRAL),
    ("huggingface-org", lambda: f"api_org_{rnd(34, string.ascii_letters)}", NEUTRAL),
    ("perplexity", lambda: f"pplx-{rnd(48)}", NEUTRAL),
    ("cohere", lambda: rnd(40), "COHERE_API_KEY={s}"),
    # cloud and infrastructure
    ("aws-access-key-id", lambda: f"AKIA{rnd(16, UP)}", NEUTRAL),
    ("aws-session-key-id", lambda: f"ASIA{rnd(16, UP)}", NEUTRAL),
    ("aws-secret-key", lambda: rnd(40, B64), "aws_secret_access_key = {s}"),
    ("gcp-api-key", lambda: f"AIza{rnd(35, W)}", NEUTRAL),
    ("azure-storage-key", lambda: rnd(86, B64) + "==", "DefaultEndpointsProtocol=https;AccountName=x;AccountKey={s};"),
    ("azure-ad-client-secret", lambda: f"{rnd(3)}{R.randrange(10)}Q~{rnd(32, W + '.~')}", NEUTRAL),
    ("alibaba-access-key", lambda: f"LTAI{rnd(20)}", NEUTRAL),
    ("alibaba-secret", lambda: rnd(30, LOW), "alibaba_secret_key: {s}"),
    ("digitalocean-pat", lambda: f"dop_v1_{rnd(64, HEX)}", NEUTRAL),
    ("digitalocean-oauth", lambda: f"doo_v1_{rnd(64, HEX)}", NEUTRAL),
    ("digitalocean-refresh", lambda: f"dor_v1_{rnd(64, HEX)}", NEUTRAL),
    ("cloudflare-origin-ca", lambda: f"v1.0-{rnd(24, HEX)}-{rnd(146, HEX)}", NEUTRAL),
    ("cloudflare-api-key", lambda: rnd(40, LOW + "_-"), "CLOUDFLARE_API_KEY={s}"),
    ("databricks", lambda: f"dapi{rnd(32, HEX)}", NEUTRAL),
    ("doppler", lambda: f"dp.pt.{rnd(43)}", NEUTRAL),
    ("dynatrace", lambda: f"dt0c01.{rnd(24, UP)}.{rnd(64, UP)}", NEUTRAL),
    ("flyio-fo1", lambda: f"fo1_{rnd(43, W)}", NEUTRAL),
    ("flyio-fm2", lambda: f"fm2_{rnd(120, B64)}==", NEUTRAL),
    ("heroku-v2", lambda: f"HRKU-AA{rnd(58, W)}", NEUTRAL),
    ("heroku-uuid", lambda: str(uuid.UUID(int=R.getrandbits(128))), "heroku_api_key: {s}"),
    ("terraform-cloud", lambda: f"{rnd(14, LOW)}.atlasv1.{rnd(67, LOW)}", NEUTRAL),
    ("vault-service", lambda: f"hvs.{rnd(100, W)}", NEUTRAL),
    ("vault-batch", lambda: f"hvb.{rnd(150, W)}", NEUTRAL),
    ("openshift", lambda: f"sha256~{rnd(43, W)}", NEUTRAL),
    ("pulumi", lambda: f"pul-{rnd(40, HEX)}", NEUTRAL),
    ("infracost", lambda: f"ico-{rnd(32)}", NEUTRAL),
    ("scalingo", lambda: f"tk-us-{rnd(48, W)}", NEUTRAL),
    ("planetscale-token", lambda: f"pscale_tkn_{rnd(43, W)}", NEUTRAL),
    ("planetscale-password", lambda: f"pscale_pw_{rnd(43, W)}", NEUTRAL),
    ("prefect", lambda: f"pnu_{rnd(36)}", NEUTRAL),
    ("clickhouse", lambda: f"4b1d{rnd(38)}", NEUTRAL),
    ("octopus-deploy", lambda: f"API-{rnd(26, UP)}", NEUTRAL),
    ("harness", lambda: f"pat.{rnd(22, W)}.{rnd(24)}.{rnd(20)}", NEUTRAL),
    ("defined-networking", lambda: f"dnkey-{rnd(26, LOW)}-{rnd(52, LOW)}", NEUTRAL),
    ("age-secret-key", lambda: "AGE-SECRET-KEY-1" + rnd(58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"), NEUTRAL),
    ("1password-secret-key", lambda: f"A3-{rnd(6, UP)}-{rnd(11, UP)}-{rnd(5, UP)}-{rnd(5, UP)}-{rnd(5, UP)}", NEUTRAL),
    ("1password-service", lambda: f"ops_eyJ{rnd(260, B64)}", NEUTRAL),
    ("authress", lambda: f"sc_{rnd(12)}.{rnd(5)}.acc_{rnd(16, LOW)}.{rnd(40, B64)}", NEUTRAL),
    ("sourcegraph", lambda: f"sgp_{rnd(16, HEX)}_{rnd(40, HEX)}", NEUTRAL),
    ("maxmind", lambda: f"{rnd(6)}_{rnd(29)}_mmk", NEUTRAL),
    # code hosting, packages, CI
    ("github-pat", lambda: f"ghp_{rnd(36)}", NEUTRAL),
    ("github-oauth", lambda: f"gho_{rnd(36)}", NEUTRAL),
    ("github-app", lambda: f"ghs_{rnd(36)}", NEUTRAL),
    ("github-refresh", lambda: f"ghr_{rnd(36)}", NEUTRAL),
    ("github-fine-grained", lambda: f"github_pat_{rnd(82, AL + '_')}", NEUTRAL),
    ("gitlab-pat", lambda: f"glpat-{rnd(20, W)}", NEUTRAL),
    ("gitlab-deploy", lambda: f"gldt-{rnd(20, W)}", NEUTRAL),
    ("gitlab-runner", lambda: f"glrt-{rnd(20, W)}", NEUTRAL),
    ("gitlab-cicd-job", lambda: f"glcbt-{rnd(3)}_{rnd(20, W)}", NEUTRAL),
    ("gitlab-kubernetes-agent", lambda: f"glagent-{rnd(50, W)}", NEUTRAL),
    ("gitlab-oauth-app", lambda: f"gloas-{rnd(64, W)}", NEUTRAL),
    ("gitlab-pipeline-trigger", lambda: f"glptt-{rnd(40, HEX)}", NEUTRAL),
    ("gitlab-runner-registration", lambda: f"GR1348941{rnd(20, W)}", NEUTRAL),
    ("gitlab-incoming-mail", lambda: f"glimt-{rnd(25, W)}", NEUTRAL),
    ("gitlab-feed", lambda: f"glft-{rnd(20, W)}", NEUTRAL),
    ("gitlab-scim", lambda: f"glsoat-{rnd(20, W)}", NEUTRAL),
    ("gitlab-feature-flag", lambda: f"glffct-{rnd(20, W)}", NEUTRAL),
    ("gitlab-session", lambda: f"_gitlab_session={rnd(32, LOW)}", "Cookie: {s}"),
    ("npm", lambda: f"npm_{rnd(36)}", NEUTRAL),
    ("pypi", lambda: f"pypi-AgEIcHlwaS5vcmc{rnd(70, W)}", NEUTRAL),
    ("rubygems", lambda: f"rubygems_{rnd(48, HEX)}", NEUTRAL),
    ("clojars", lambda: f"CLOJARS_{rnd(60, LOW)}", NEUTRAL),
    ("artifactory-api-key", lambda: f"AKCp{rnd(69)}", NEUTRAL),
    ("artifactory-reference", lambda: f"cmVmd{rnd(59)}", NEUTRAL),
    ("readme", lambda: f"rdme_{rnd(70, LOW)}", NEUTRAL),
    ("postman", lambda: f"PMAK-{rnd(24, HEX)}-{rnd(34, HEX)}", NEUTRAL),
    ("linear", lambda: f"lin_api_{rnd(40)}", NEUTRAL),
    ("atlassian", lambda: f"ATATT3{rnd(186, W)}", NEUTRAL),
    ("jira-token", lambda: rnd(24, LOW), "JIRA_API_TOKEN={s}"),
    ("frameio", lambda: f"fio-u-{rnd(64, W)}", NEUTRAL),
    ("typeform", lambda: f"tfp_{rnd(59, W)}", NEUTRAL),
    ("sentry-user", lambda: f"sntryu_{rnd(64, HEX)}", NEUTRAL),
    ("sentry-org", lambda: f"sntrys_eyJpYXQiO{rnd(80, B64)}LCJyZWdpb25fdXJs{rnd(40, B64)}_{rnd(43, B64)}", NEUTRAL),
    ("notion", lambda: f"ntn_{rnd(11, string.digits)}{rnd(35)}", NEUTRAL),
    ("easypost", lambda: f"EZAK{rnd(54)}", NEUTRAL),
    ("duffel", lambda: f"duffel_test_{rnd(43, W)}", NEUTRAL),
    ("settlemint", lambda: f"sm_pat_{rnd(16)}", NEUTRAL),
    ("travis", lambda: rnd(22), "travis_token: {s}"),
    ("droneci", lambda: rnd(32), "DRONECI_TOKEN={s}"),
    ("codecov", lambda: str(uuid.UUID(int=R.getrandbits(128))), "CODECOV_TOKEN={s}"),
    ("snyk", lambda: str(uuid.UUID(int=R.getrandbits(128))), "SNYK_TOKEN={s}"),
    ("sonar", lambda: rnd(40, LOW), "sonar.login={s}"),
    # communication
    ("slack-bot", lambda: f"xoxb-{rnd(12, string.digits)}-{rnd(12, string.digits)}-{rnd(24)}", NEUTRAL),
    (
        "slack-user",
        lambda: f"xoxp-{rnd(12, string.digits)}-{rnd(12, string.digits)}-{rnd(12, string.digits)}-{rnd(32)}",
        NEUTRAL,
    ),
    ("slack-app", lambda: f"xapp-1-{rnd(11, UP)}-{rnd(13, string.digits)}-{rnd(64, LOW)}", NEUTRAL),
    ("slack-config-refresh", lambda: f"xoxe-1-{rnd(146, UP)}", NEUTRAL),
    ("slack-webhook", lambda: f"T{rnd(10, UP)}/B{rnd(10, UP)}/{rnd(24)}", "https://hooks.slack.com/services/{s}"),
    (
        "teams-webhook",
        lambda: (
            f"{uuid.UUID(int=R.getrandbits(128))}@{uuid.UUID(int=R.getrandbits(128))}"
            f"/IncomingWebhook/{rnd(32, LOW)}/{uuid.UUID(int=R.getrandbits(128))}"
        ),
        "https://acme.webhook.office.com/webhookb2/{s}",
    ),
    ("discord-bot", lambda: f"M{rnd(25, W)}.{rnd(6, W)}.{rnd(38, W)}", NEUTRAL),
    ("discord-client-secret", lambda: rnd(32, W), "DISCORD_CLIENT_SECRET={s}"),
    ("telegram-bot", lambda: f"{rnd(10, string.digits)}:AA{rnd(33, W)}", NEUTRAL),
    ("sendgrid", lambda: f"SG.{rnd(22, W)}.{rnd(43, W)}", NEUTRAL),
    ("sendinblue", lambda: f"xkeysib-{rnd(64, HEX)}-{rnd(16)}", NEUTRAL),
    ("mailchimp", lambda: f"{rnd(32, HEX)}-us{R.randrange(1, 30)}", NEUTRAL),
    ("mailgun-private", lambda: f"key-{rnd(32, HEX)}", "MAILGUN_API_KEY={s}"),
    ("twilio-api-key", lambda: f"SK{rnd(32, HEX)}", NEUTRAL),
    ("twilio-auth-token", lambda: rnd(32, HEX), "TWILIO_AUTH_TOKEN={s}"),
    ("intercom", lambda: f"dG9rOm{rnd(54, B64)}=", NEUTRAL),
    ("mattermost", lambda: rnd(26, LOW), "MATTERMOST_TOKEN={s}"),
    ("messagebird", lambda: rnd(25), "messagebird_api_key: {s}"),
    ("sendbird", lambda: rnd(40, HEX), "SENDBIRD_API_TOKEN={s}"),
    ("twitch", lambda: rnd(30, LOW), "TWITCH_CLIENT_SECRET={s}"),
    ("twitter-bearer", lambda: "A" * 22 + rnd(90, AL + "%"), NEUTRAL),
    ("twitter-secret", lambda: rnd(50), "twitter_api_secret = {s}"),
    ("zendesk", lambda: rnd(40), "ZENDESK_API_TOKEN={s}"),
    # payments and commerce
    ("stripe-secret-live", lambda: f"sk_live_{rnd(24)}", NEUTRAL),
    ("stripe-restricted", lambda: f"rk_test_{rnd(24)}", NEUTRAL),
    ("stripe-webhook", lambda: f"whsec_{rnd(32)}", NEUTRAL),
    ("square-access", lambda: f"sq0atp-{rnd(22, W)}", NEUTRAL),
    ("square-oauth-secret", lambda: f"sq0csp-{rnd(43, W)}", NEUTRAL),
    ("square-eaaa", lambda: f"EAAA{rnd(60, W)}", NEUTRAL),
    ("facebook-page", lambda: f"EAAM{rnd(120)}", NEUTRAL),
    ("facebook-access", lambda: f"{rnd(15, string.digits)}|{rnd(32, LOW + '_-')}", NEUTRAL),
    ("facebook-secret", lambda: rnd(32, HEX), "facebook_app_secret = {s}"),
    ("shopify-access", lambda: f"shpat_{rnd(32, HEX)}", NEUTRAL),
    ("shopify-shared-secret", lambda: f"shpss_{rnd(32, HEX)}", NEUTRAL),
    ("shippo", lambda: f"shippo_live_{rnd(40, HEX)}", NEUTRAL),
    ("flutterwave", lambda: f"FLWSECK_TEST-{rnd(32, 'abcdefgh0123456789')}-X", NEUTRAL),
    ("adobe-client-secret", lambda: f"p8e-{rnd(32)}", NEUTRAL),
    ("plaid-access", lambda: f"access-sandbox-{uuid.UUID(int=R.getrandbits(128))}", NEUTRAL),
    ("plaid-secret", lambda: rnd(30, LOW), "PLAID_SECRET={s}"),
    ("coinbase", lambda: rnd(64, LOW), "COINBASE_ACCESS_TOKEN={s}"),
    ("gocardless", lambda: f"live_{rnd(40, W)}", "GOCARDLESS_ACCESS_TOKEN={s}"),
    ("kraken", lambda: rnd(86, B64), "KRAKEN_PRIVATE_KEY={s}"),
    ("intra42", lambda: f"s-s4t2ud-{rnd(64, HEX)}", NEUTRAL),
    # observability, auth, data
    ("grafana-api-key", lambda: f"eyJrIjoi{rnd(80)}", NEUTRAL),
    ("grafana-cloud", lambda: f"glc_{rnd(60, B64)}", NEUTRAL),
    ("grafana-service-account", lambda: f"glsa_{rnd(32)}_{rnd(8, HEX)}", NEUTRAL),
    ("newrelic-user", lambda: f"NRAK-{rnd(27, UP)}", NEUTRAL),
    ("newrelic-insert", lambda: f"NRII-{rnd(32, LOW + '-')}", NEUTRAL),
    ("newrelic-browser", lambda: f"NRJS-{rnd(19, HEX)}", NEUTRAL),
    ("datadog", lambda: rnd(40, LOW), "DATADOG_API_KEY={s}"),
    ("dropbox-short-lived", lambda: f"sl.{rnd(135, W)}", NEUTRAL),
    ("dropbox-long-lived", lambda: f"{rnd(11, LOW)}AAAAAAAAAA{rnd(43, LOW)}", NEUTRAL),
    ("yandex-api-key", lambda: f"AQVN{rnd(36, W)}", NEUTRAL),
    ("mapbox", lambda: f"pk.eyJ{rnd(57)}.{rnd(22)}", NEUTRAL),
    ("okta", lambda: f"00{rnd(40, W)}", "OKTA_API_TOKEN={s}"),
    ("launchdarkly", lambda: f"api-{uuid.UUID(int=R.getrandbits(128))}", "LAUNCHDARKLY_ACCESS_TOKEN={s}"),
    ("algolia", lambda: rnd(32, LOW), "ALGOLIA_ADMIN_KEY={s}"),
    ("airtable", lambda: rnd(17), "AIRTABLE_API_KEY={s}"),
    ("contentful", lambda: rnd(43, W), "CONTENTFUL_DELIVERY_TOKEN={s}"),
    ("netlify", lambda: rnd(43, W), "NETLIFY_AUTH_TOKEN={s}"),
    ("sumologic", lambda: rnd(64, LOW), "SUMO_ACCESS_KEY={s}"),
    ("jwt", jwt, NEUTRAL),
    ("jwt-base64", lambda: base64.b64encode(jwt().encode()).decode().rstrip("="), NEUTRAL),
    # context: keys, headers, URLs, files
    ("private-key-pkcs8", lambda: pem("PRIVATE KEY"), "{s}"),
    ("private-key-openssh", lambda: pem("OPENSSH PRIVATE KEY"), "{s}"),
    ("pgpass-line", lambda: rnd(16, AL + "!#%"), "db.internal:5432:billing:svc_billing:{s}"),
    ("nuget-password", lambda: rnd(14, AL + "!@#"), '<add key="ClearTextPassword" value="{s}" />'),
    (
        "k8s-secret-data",
        lambda: base64.b64encode(rnd(20).encode()).decode(),
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: x\ndata:\n  token: {s}\n",
    ),
    (
        "authorization-basic",
        lambda: base64.b64encode(f"svc:{rnd(16)}".encode()).decode(),
        "curl -s https://api.example.net/v2\n-H 'Authorization: Basic {s}'",
    ),
    ("authorization-bearer", lambda: rnd(40, W + "."), "Authorization: Bearer {s}"),
    ("curl-user", lambda: rnd(14, AL + "!%"), "curl -u deploy:{s} https://ci.example.net/api"),
    ("url-password", lambda: rnd(18, AL + "!%"), "postgres://svc:{s}@db.internal:5433/billing"),
    ("flag-password", lambda: rnd(16, AL + "!#"), "mysqladmin --password={s} status"),
    ("env-password", lambda: rnd(16, AL + "!#&;"), "DB_PASSWORD={s}"),
    ("yaml-secret", lambda: rnd(24), "client_secret: {s}"),
    ("prose-password", lambda: rnd(12, AL + "!#"), "the password is {s} until Friday"),
    ("prose-password-zh", lambda: rnd(12, AL + "!#"), "数据库的密码是 {s}，周五之前别改"),
]
PLACES = ("user", "tool-result", "arguments", "assistant")


def turn(text: str, place: str, i: int) -> list[dict]:
    """A conversation turn holding ``text`` in ``place`` (tool-call arguments: json.dumps, ASCII escapes)."""
    if place == "user":
        return [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]
    if place == "assistant":
        return [{"role": "user", "content": "What is configured?"}, {"role": "assistant", "content": text}]
    call = {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"cmd": "cat x"})}}
    if place == "arguments":
        call["function"]["arguments"] = json.dumps({"cmd": f"echo start\n{text}\necho done"})
    msgs = [
        {"role": "user", "content": "Check the settings."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    result = text if place == "tool-result" else "ok"
    return msgs + [
        {"role": "tool", "tool_call_id": f"c{i}", "content": result},
        {"role": "assistant", "content": "Done."},
    ]


def generated() -> list[tuple[str, str, str, str]]:
    """(format id, place, secret, text) for every format, each in one of the places in turn."""
    out = []
    for i, (fid, make, template) in enumerate(FORMATS):
        secret = make()
        out.append((fid, PLACES[i % len(PLACES)], secret, template.format(s=secret)))
    return out


def forms(secret: str) -> set[bytes]:
    """The byte forms a secret may take in the file: as is, JSON-escaped (with and without ASCII escapes), and
    pieces of it (a secret redacted only in part leaves some of them)."""
    whole = {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
    body = max(secret.replace("\n", " ").split(), key=len)
    pieces = (
        {body[j : j + 12] for j in (0, max(0, len(body) // 2 - 6), max(0, len(body) - 12))}
        if len(body) >= 16
        else set()
    )
    return {s.encode() for s in whole | pieces if s}


def raw_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())


def test_every_generated_format_is_absent_from_the_raw_database_file(tmp_path):
    cases = generated()
    assert len(FORMATS) >= 100 and len({fid for fid, *_ in FORMATS}) == len(FORMATS)
    path = tmp_path / "coverage.db"
    lantern = Lantern(path)
    try:
        for i, (fid, place, _, text) in enumerate(cases):
            r = lantern.archive(turn(text, place, i), session=fid)
            assert r.added == 1, fid
        noise = [
            lantern.store.entry_value("content_hash", h)  # a digest: its hex form is what could match a hex secret
            for (h,) in lantern.store.db.execute("SELECT content_hash FROM entries")
        ]
        raw = raw_bytes(path)  # the WAL not checkpointed: every page written is in it
        for h in noise:
            raw = raw.replace(h.encode(), b" ")
        found = [(fid, place) for fid, place, secret, _ in cases if any(f in raw for f in forms(secret))]
        print(f"\n[coverage] {len(cases)} formats, {len(found)} found in the raw .db/-wal bytes: {found}")
        assert not found
        texts = [t for (t,) in lantern.store.db.execute("SELECT text FROM entries")]
        assert all(PLACEHOLDER_RE.search(t) for t in texts)
    finally:
        lantern.close()


def test_redacted_tool_arguments_stay_valid_json():
    policy = make_policy(b"k")
    for i, (fid, _, _secret, text) in enumerate(generated()):
        for args in (json.dumps({"cmd": text}), json.dumps({"cmd": text}, ensure_ascii=False), json.dumps([text, i])):
            out, n = redact_text(args, policy)
            assert n >= 1, fid
            assert json.loads(out) is not None, (fid, out)


# look-alikes: (category, generator of the text, the values that must survive)
def _lookalikes() -> list[tuple[str, str, list[str]]]:
    out = []

    def add(cat: str, text: str, *keep: str) -> None:
        out.append((cat, text, list(keep) or [text]))

    for _ in range(4):
        sha = rnd(40, HEX)
        add("git-sha", f"commit {sha}\nAuthor: dev", sha)
        short = rnd(R.randrange(7, 13), HEX)
        add("git-short-sha", f"{short} fix: retry on ECONNREFUSED", short)
        s256 = rnd(64, HEX)
        add("sha256", f"{s256}  dist/app-1.4.2.tar.gz", s256)
        u = str(uuid.UUID(int=R.getrandbits(128)))
        add("uuid", f"request_id={u} status=200", u)
        add("uuid-json", json.dumps({"id": u, "trace_id": u.replace("-", "")}), u)
        port = str(R.randrange(1024, 65535))
        add("port", f"postgres listens on port {port} (localhost:{port})", port)
        v = f"{R.randrange(0, 20)}.{R.randrange(0, 40)}.{R.randrange(0, 99)}"
        add("version", f"upgraded numpy=={v} and v{v}-rc.1", v)
    for _ in range(3):
        add("docker-digest", f"image@sha256:{rnd(64, HEX)}")
        add("npm-integrity", f'"integrity": "sha512-{rnd(86, B64)}=="')
        add("data-uri", f"![x](data:image/png;base64,iVBORw0KGgo{rnd(120, B64)}=)")
        add("pod-name", f"api-{rnd(10, HEX)}-{rnd(5, LOW)} 1/1 Running")
        add("aws-arn", f"arn:aws:iam::{rnd(12, string.digits)}:role/deploy-{rnd(6, LOW)}")
        add("ipv6", f"inet6 fe80::{rnd(4, HEX)}:{rnd(4, HEX)}:{rnd(4, HEX)}:{rnd(4, HEX)}/64")
        add("hashed-asset", f"static/js/main.{rnd(8, HEX)}.chunk.js")
        add("cache-key", f"key: deps-{rnd(40, HEX)}")
        add("css-color", f"color: #{rnd(6, HEX)}; background: #{rnd(6, HEX)};")
        add("github-url", f"https://github.com/acme/api/commit/{rnd(40, HEX)}")
        add("epoch-ms", f"ts={rnd(13, string.digits)} dur=250ms")
        add("ulid", f"order {rnd(26, '0123456789ABCDEFGHJKMNPQRSTVWXYZ')} shipped")
        add("mac", ":".join(rnd(2, HEX) for _ in range(6)))
        add("stripe-publishable", f"pk_test_{rnd(24)}")
        add("semver-build", f"1.{R.randrange(9)}.{R.randrange(9)}+build.{rnd(7, HEX)}")
    add("prefix-words", "scikit-learn==1.4.2 (sk-learn), key-value store, the api_org_chart table, s.json")
    add("code-names-a-secret", "api_key = os.environ['OPENAI_API_KEY']\npassword = getpass()")
    add("env-reference", "GITHUB_TOKEN=${{ secrets.GITHUB_TOKEN }}")
    return out


LOOKALIKES = _lookalikes()


def test_lookalikes_come_out_unchanged():
    assert len(LOOKALIKES) >= 50
    policy = make_policy(b"k")
    changed = [(cat, text) for cat, text, _ in LOOKALIKES if find_secrets(text, policy)]
    print(f"\n[coverage] {len(LOOKALIKES)} look-alikes, {len(changed)} changed: {changed}")
    assert not changed


def test_lookalikes_are_stored_verbatim(tmp_path):
    with Lantern(tmp_path / "look.db") as lt:
        for i, (cat, text, keep) in enumerate(LOOKALIKES):
            r = lt.archive(turn(text, PLACES[i % len(PLACES)], i), session=f"{cat}-{i}")
            stored = lt.store.entries(r.entry_ids)[r.entry_ids[0]].text
            assert r.redacted == 0, (cat, text)
            assert all(k in stored or json.dumps(k)[1:-1] in stored for k in keep), (cat, text)


@pytest.mark.parametrize(
    "fid",
    [
        "square-access",
        "linear",
        "grafana-service-account",
        "postman",
        "dropbox-short-lived",
        "pgpass-line",
        "authorization-basic",
        "prose-password-zh",
    ],
)
def test_the_eight_formats_of_issue_20_in_json_escaped_arguments(fid):
    make, template = next((m, t) for f, m, t in FORMATS if f == fid)
    secret = make()
    args = json.dumps({"cmd": f"echo start\n{template.format(s=secret)}"})  # \n and \uXXXX escapes
    out, n = redact_text(args, make_policy(b"k"))
    assert n >= 1 and not any(f.decode() in out for f in forms(secret)), (fid, out)
    json.loads(out)
