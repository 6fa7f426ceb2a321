"""A server URL's secrets never reach what Lantern prints: libpq percent-decodes query parameter NAMES as well as
values (``?pass%77ord=x`` passes a password), and several parameters hold secrets (config.SECRET_PARAMETERS).
config.redact_url is checked against libpq's own reading of each generated URL (psycopg's ``conninfo_to_dict``),
then every place that prints a URL is checked on the real server (pgserver, conftest.py ``pg_server``)."""

from __future__ import annotations

import itertools
import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from clirun import _cwd
from clirun import lantern as cli
from lantern.config import SECRET_PARAMETERS, redact_url, scrub, url_secrets

psycopg = pytest.importorskip("psycopg")
from psycopg.conninfo import conninfo_to_dict  # noqa: E402

MARKER = "Qx7kSecret"


def _spellings(name: str, hex_case: str) -> list[str]:
    """Every percent-encoding of ``name``: each character as itself or as %XX (hex digits in ``hex_case``)."""
    forms = [(c, f"%{ord(c):02X}" if hex_case == "upper" else f"%{ord(c):02x}") for c in name]
    return ["".join(chosen) for chosen in itertools.product(*forms)]


def _libpq_secrets(url: str) -> dict[str, str]:
    """The secret parameters libpq itself reads from ``url`` (the password from the userinfo included)."""
    return {k: v for k, v in conninfo_to_dict(url).items() if k in SECRET_PARAMETERS and v}


def test_the_secret_parameters_include_every_one_libpq_hides():
    """Every keyword the installed libpq marks as a password field ("*" in PQconndefaults) is one whose value is
    hidden; so a libpq that adds one fails here rather than leaking it."""
    from psycopg import pq

    hidden = {o.keyword.decode() for o in pq.Conninfo.get_defaults() if o.dispchar == b"*"}
    assert hidden and hidden <= SECRET_PARAMETERS, hidden - SECRET_PARAMETERS


@pytest.mark.parametrize("hex_case", ["upper", "lower"])
def test_every_percent_encoding_of_password_is_hidden(hex_case):
    """All 256 spellings of ``password`` (each letter plain or %-encoded), in each hex case, first or after
    another parameter: libpq reads a password from each, and redact_url hides it."""
    for spelled in _spellings("password", hex_case):
        for url in (
            f"postgresql://ann@db:5432/lantern?{spelled}={MARKER}",
            f"postgresql://ann@db:5432/lantern?sslmode=disable&{spelled}={MARKER}&application_name=x",
        ):
            assert _libpq_secrets(url) == {"password": MARKER}, url
            shown = redact_url(url)
            assert MARKER not in shown and f"{spelled}=***" in shown, shown
            assert MARKER in url_secrets(url)
            assert MARKER not in scrub(f'could not connect: "{url}" said {MARKER}', url)


# what a secret value may hold once percent-encoded (libpq decodes it): URL delimiters, quotes, non-ASCII
VALUE_CHARS = st.text(alphabet="abc?#/@:=& %'\"é€😀", max_size=6)


@st.composite
def secret_urls(draw) -> tuple[str, dict[str, str]]:
    """A URL with one to three secret parameters, each name in a random percent-encoding (random hex case), each
    value a marker and random characters (percent-encoded as a URL must carry them), among ordinary parameters in
    random order; the userinfo password present, empty or absent. Returns the URL and the markers by name."""
    from urllib.parse import quote

    names = draw(st.lists(st.sampled_from(sorted(SECRET_PARAMETERS)), min_size=1, max_size=3, unique=True))
    params, markers = [], {}
    for i, name in enumerate(names):
        encode = draw(st.lists(st.booleans(), min_size=len(name), max_size=len(name)))
        upper = draw(st.booleans())
        spelled = "".join(
            (f"%{ord(c):02X}" if upper else f"%{ord(c):02x}") if e else c for c, e in zip(name, encode, strict=True)
        )
        markers[name] = f"Qx7k{i}{draw(st.sampled_from('ABCDEF'))}"
        value = draw(VALUE_CHARS) + markers[name] + draw(VALUE_CHARS)
        params.append(f"{spelled}={quote(value, safe='')}")
    params += draw(st.lists(st.sampled_from(["sslmode=disable", "connect_timeout=3", "application_name=a"])))
    params = draw(st.permutations(params))
    userinfo = draw(st.sampled_from(["ann@", "ann:@", "ann:Qx7kU@", ""]))
    if userinfo == "ann:Qx7kU@":
        markers["userinfo"] = "Qx7kU"
    return f"postgresql://{userinfo}db:5432/lantern?{'&'.join(params)}", markers


@settings(max_examples=examples(300), deadline=None)
@given(case=secret_urls())
def test_no_secret_libpq_reads_from_a_generated_url_is_shown(case):
    url, markers = case
    read = _libpq_secrets(url)  # the query's password, when there is one, overrides the userinfo's
    assert set(read) == {"password" if n == "userinfo" else n for n in markers}, (url, read)
    shown = redact_url(url)
    for value in (*read.values(), *markers.values()):
        assert value not in shown, (url, shown)
    assert not re.search(r"Qx7k", shown), shown
    assert not re.search(r"Qx7k", scrub(f"failed: {url} ({' '.join(read.values())})", url))


def test_an_empty_password_shows_as_any_other():
    """A shown URL does not tell an empty password from a set one, in the userinfo or the query."""
    assert redact_url("postgresql://ann:@db/l") == redact_url("postgresql://ann:pw@db/l") == "postgresql://ann:***@db/l"
    for name in ("password", "pass%77ord", "sslpassword"):
        empty, full = redact_url(f"postgresql://ann@db/l?{name}="), redact_url(f"postgresql://ann@db/l?{name}=pw")
        assert empty == full == f"postgresql://ann@db/l?{name}=***"
    assert redact_url("postgresql://ann@db/l?sslmode=disable") == "postgresql://ann@db/l?sslmode=disable"


# ---------------------------------------------------------------- every place that prints a URL, on the real server
ENCODED_NAMES = ("pass%77ord", "%70assword", "%70%61%73%73%77%6F%72%64", "sslpass%77ord", "oauth_client_%73ecret")


@pytest.mark.parametrize("name", ENCODED_NAMES)
def test_no_command_shows_a_secret_given_under_an_encoded_name(name, pg_url, tmp_path):
    """stats (text and JSON), copy's success line both ways, ingest, an error line naming the database, the Python
    API's ``path`` and the REST API's stats: none shows the secret. The test server trusts local logins, so the
    password is given and ignored, and every command succeeds and prints its URL."""
    url = f"{pg_url()}&{name}={MARKER}"
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"role": "user", "content": "the staging port is 6380"}) + "\n")
    sqlite = tmp_path / "a.db"
    missing = re.sub(r"/t_[0-9a-f]+\?", "/t_missing_db?", url)  # a database the server does not have
    runs = [
        cli("ingest", str(transcript), db=url),
        cli("stats", db=url),
        cli("stats", "--json", db=url),
        cli("copy", url, str(sqlite)),
        cli("copy", str(sqlite), url),
        cli("stats", db=missing),
        cli("stats", env={"LANTERN_DB": missing}),
    ]
    for i, proc in enumerate(runs):
        out = proc.stdout.decode() + proc.stderr.decode()
        assert "Traceback" not in out and MARKER not in out, out
        assert i == 0 or f"{name}=***" in out, out  # each but ingest's line names the database
    assert [p.returncode for p in runs] == [0, 0, 0, 0, 0, 1, 1]
    from lantern import Lantern

    with Lantern(url) as lt:
        assert MARKER not in lt.path and MARKER not in json.dumps(lt.stats())
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from lantern.integrations.proxy import build_app

    with TestClient(build_app(url), raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
        r = client.get("/v1/memory/stats")
        assert r.status_code == 200 and MARKER not in r.text, r.text


@settings(max_examples=examples(10), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=secret_urls())
def test_an_unreachable_server_named_by_a_generated_url_shows_none_of_its_secrets(case):
    """The error lines of the command line for a server nothing listens on, the URL from the generator above."""
    url, _ = case
    url = url.replace("db:5432", "127.0.0.1:1")
    for proc in (cli("stats", db=url), cli("copy", url, "/nonexistent-dir/x.db")):
        out = proc.stdout.decode() + proc.stderr.decode()
        assert proc.returncode == 1 and "Traceback" not in out, out
        assert "Qx7k" not in out, out


CONNINFO_VALUES = st.sampled_from([MARKER, f"'{MARKER} with space'", f"'{MARKER}\\'quote'", f"{MARKER}=x"])


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    keyword=st.sampled_from(sorted(SECRET_PARAMETERS) + ["PASSWORD", "Password"]),
    value=CONNINFO_VALUES,
    before=st.sampled_from(["host=/tmp/nowhere ", "dbname=x host=db ", ""]),
    after=st.sampled_from([" dbname=postgres", " user=ann port=5432", ""]),
    spaces=st.sampled_from(["", " "]),
)
def test_a_libpq_key_value_string_or_a_padded_url_is_refused_without_its_secret(
    keyword, value, before, after, spaces, tmp_path_factory
):
    """Breaker finding: ``--db "host=h password=s dbname=d"`` was taken as a file path and printed whole, and so was
    a URL with a space before it. Any secret keyword, quoted or not, among other keywords, and a padded URL: the
    command line and the Python API refuse it with one line that holds no secret, and create no file."""
    from lantern import Lantern
    from lantern.errors import LanternError

    conninfo = f"{before}{keyword}{spaces}={spaces}{value}{after}"
    padded = f" postgresql://ann:{MARKER}@127.0.0.1:1/db "
    cwd = tmp_path_factory.mktemp("cwd")
    for location in (conninfo, padded):
        for proc in (cli("stats", db=location, cwd=cwd), cli("stats", env={"LANTERN_DB": location}, cwd=cwd)):
            out = proc.stdout.decode() + proc.stderr.decode()
            assert proc.returncode != 0 and MARKER not in out and "Traceback" not in out, out
        with _cwd(cwd), pytest.raises(LanternError) as info:  # a relative file would land in cwd, not the checkout
            Lantern(location)
        assert MARKER not in str(info.value)
        assert list(cwd.iterdir()) == []
