"""Names holding what neither backend stores as given (NUL: PostgreSQL text refuses it; lone surrogates: no
UTF-8), as session, user, agent, project and fact key: each is taken in one form on every path
(``scope.clean_name``), so what is written under a raw name is searched, recovered, exported, listed and forgotten
by that same raw name, on SQLite and on PostgreSQL, and no driver error (psycopg DataError, UnicodeEncodeError)
ever surfaces. Generated names, the real stores (pgserver, conftest.py), the fake embedder."""

from __future__ import annotations

import io
import json
import uuid

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from lantern import Lantern
from lantern.scope import clean_name

# a few ordinary characters and every kind of unstorable one, mixed
ALPHABET = st.sampled_from(["a", "b", "é", "数", " ", "\x00", "\ud800", "\udbff", "\udc00", "\udfff", "\r\n", "/"])
NAMES = st.lists(ALPHABET, min_size=1, max_size=8).map("".join).filter(str.strip)
UNSTORABLE = st.lists(st.sampled_from(["\x00", "\ud800", "\udfff"]), min_size=1, max_size=3).map("".join)


@st.composite
def names(draw) -> str:
    """A name that holds at least one unstorable character, somewhere."""
    base, bad = draw(NAMES), draw(UNSTORABLE)
    at = draw(st.integers(0, len(base)))
    return base[:at] + bad + base[at:]


@given(st.lists(st.sampled_from(["a", "\r", "\n", "\r\n", "\x00", "\ud800", "数", " "]), max_size=12).map("".join))
def test_clean_name_is_idempotent_on_any_mix_of_line_ends(raw):
    """Breaker finding: "x\r\r\ny" cleaned to "x\r\ny", which cleaned again to "x\ny", so a read path cleaning a
    stored name again missed it. Any mix of CR, LF, NUL and surrogates: cleaning twice is cleaning once."""
    from lantern.text.clean import clean_text

    once = clean_name(raw)
    assert clean_name(once) == once and "\r\n" not in once
    assert clean_text(raw) == clean_text(once)


def test_a_name_with_carriage_returns_before_a_line_feed_is_found_by_either_spelling(tmp_path):
    with Lantern(tmp_path / "cr.db", embedder="fake") as lt:
        stored = lt.archive([{"role": "user", "content": "alpha beta port 5432"}], session="x\r\r\ny").session
        for name in ("x\r\r\ny", stored, "x\ny"):
            assert lt.recover("alpha beta port 5432", session=name, min_score=0).entries, name
            assert lt.search("alpha beta port 5432", session=name), name


def test_clean_name_is_what_clean_text_does_to_a_name_and_is_idempotent():
    from lantern.text.clean import clean_text

    for raw in ("a\x00b", "\ud800x", "x\udfff", "a\r\nb", "plain", "数\x00据"):
        assert clean_name(raw) == clean_text(raw) == clean_name(clean_name(raw))
        assert "\x00" not in clean_name(raw) and clean_name(raw).encode("utf-8")


@pytest.fixture(scope="module")
def stores(tmp_path_factory, request):
    """One store per backend for the module (a new server database per test would cost more than the test)."""
    out = {"sqlite": Lantern(tmp_path_factory.mktemp("names") / "n.db", embedder="fake")}
    try:
        pg_server = request.getfixturevalue("pg_server")
    except pytest.skip.Exception:
        pg_server = None
    if pg_server is not None:
        import psycopg

        db = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(pg_server.get_uri(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {db}")
        out["postgres"] = Lantern(pg_server.get_uri(db), embedder="fake")
    yield out
    for lt in out.values():
        lt.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(session=names(), user=names(), agent=names(), project=names(), key=names())
def test_a_turn_written_under_raw_names_is_found_and_forgotten_by_them(
    stores, backend, session, user, agent, project, key
):
    if backend not in stores:
        pytest.skip("no PostgreSQL server")
    lt = stores[backend]
    try:
        _round_trip(lt, session, user, agent, project, key)
    finally:  # what a failed example left, out of the next one's way
        lt.forget(user=user, vacuum=False)


def _round_trip(lt: Lantern, session: str, user: str, agent: str, project: str, key: str) -> None:
    scope = {"user": user, "agent": agent, "project": project}
    text = f"the {key} port is 5433 for the billing service (note {uuid.uuid4().hex[:8]})"
    written = lt.archive([{"role": "user", "content": text}], session=session, **scope)
    assert written.added == 1
    assert lt.archive([{"role": "user", "content": text}], session=session, **scope).duplicates == 1
    hits = lt.search("billing service port", session=session, **scope)
    ours = [h.entry for h in hits if h.entry.id == written.entry_ids[0]]
    assert ours and all(h.entry.session == clean_name(session) for h in hits), hits
    assert (ours[0].user, ours[0].agent, ours[0].project) == tuple(clean_name(v) for v in (user, agent, project))
    assert "5433" in lt.recover(f"which {key} port does billing use", session=session, **scope).text
    facts = lt.facts(**scope)
    assert all(f.session == clean_name(session) for f in facts)
    assert lt.facts(key, **scope) == lt.facts(clean_name(key), **scope)
    assert lt.facts(f"{key} port", history=True, **scope) == lt.facts(f"{clean_name(key)} port", history=True, **scope)
    out = io.StringIO()
    assert lt.export(out, session=session, **scope) >= 1
    records = [json.loads(line) for line in out.getvalue().splitlines()[1:]]
    assert [r for r in records if clean_name(text) in r["text"]], records
    assert all(r["session"] == clean_name(session) and r["user_id"] == clean_name(user) for r in records)
    assert lt.turn_hash(session, text, **scope) == lt.turn_hash(clean_name(session), text, **scope)
    assert lt.forget(session=session, vacuum=False, **scope) == len(records)
    assert lt.search("billing service port", session=session, **scope) == []


@pytest.mark.parametrize("name", ["a\x00b", "\ud800", "x\udfffy", "数\x00"])
def test_the_rest_api_takes_unstorable_names_on_a_server(pg_url, name):
    """The REST API on PostgreSQL: archive, search, recover and forget under a session and user holding NUL or a
    lone surrogate answer 200, never a driver's 500."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from lantern.integrations.proxy import build_app

    turn = [{"role": "user", "content": "the staging redis port is 6380"}]
    body = {"session": name, "user": name}

    def post(client, path: str, doc: dict):  # JSON escapes (\u0000, \ud800), as a client sends them
        return client.post(path, content=json.dumps(doc), headers={"content-type": "application/json"})

    with TestClient(build_app(pg_url()), raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
        r = post(client, "/v1/memory/archive", {"messages": turn, **body})
        assert r.status_code == 200, r.text
        r = post(client, "/v1/memory/search", {"query": "staging redis port", **body})
        assert r.status_code == 200 and len(r.json()["hits"]) == 1, r.text
        r = post(client, "/v1/memory/recover", {"query": "staging redis port", **body})
        assert r.status_code == 200 and "6380" in r.json()["text"], r.text
        r = post(client, "/v1/memory/forget", {**body, "confirm": True})
        assert r.status_code == 200 and r.json() == {"forgotten": 1}, r.text


@pytest.mark.parametrize("bad", ["port\x00", "\ud800", "a\udfffb"])
@pytest.mark.parametrize("field", ["key", "value", "key_text"])
def test_an_imported_fact_holding_nul_or_a_lone_surrogate_is_a_bad_line_on_both_backends(
    db_location, tmp_path, bad, field
):
    """An export's fact strings follow the import's rule for every string field: NUL and lone surrogates make the
    line an ExportFormatError naming it (never a driver's DataError), nothing of its batch written."""
    from lantern.errors import ExportFormatError

    dump = tmp_path / "dump.jsonl"
    with Lantern(tmp_path / "src.db", embedder="fake") as src:
        src.archive([{"role": "user", "content": "the staging port is 6380"}], session="s")
        src.export(dump)
    header, entry = dump.read_text().splitlines()
    record = json.loads(entry)
    assert record["facts"], record
    record["facts"][0][field] = bad
    dump.write_text(header + "\n" + json.dumps(record) + "\n")
    with Lantern(db_location, embedder="fake") as lt:
        with pytest.raises(ExportFormatError, match="NUL") as info:
            lt.import_(dump)
        assert info.value.line == 2
        assert lt.stats()["entries"] == 0


@st.composite
def bad_vectors(draw, dim: int) -> np.ndarray:
    """A float32 vector no Lantern embedder writes: all zero, subnormal, tiny, or huge (whose float32 norm is inf)."""
    scale = draw(st.sampled_from([0.0, 1e-45, 1e-40, 1e-8, 1e-5, 1e5, 1e20, 3e38]))
    signs = draw(st.lists(st.sampled_from([-1.0, 1.0]), min_size=dim, max_size=dim))
    return (np.array(signs) * scale).astype("<f4")


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_imported_vector_no_embedder_writes_is_a_bad_line_without_warnings(data, tmp_path_factory):
    """An export line whose embedding is all zero, subnormal or huge is an ExportFormatError naming the line and the
    field, raised before any arithmetic warns (divide by zero, overflow), nothing of its batch written; the same
    line with its own vector imports."""
    import base64
    import warnings

    from lantern.errors import ExportFormatError

    tmp = tmp_path_factory.mktemp("vectors")
    dump = tmp / "dump.jsonl"
    with Lantern(tmp / "src.db", embedder="fake") as src:
        src.archive([{"role": "user", "content": "the staging port is 6380"}], session="s")
        src.export(dump)
    header, entry = dump.read_text().splitlines()
    record = json.loads(entry)
    vector = data.draw(bad_vectors(len(np.frombuffer(base64.b64decode(record["embedding"]), "<f4"))))
    bad = dict(record, embedding=base64.b64encode(vector.tobytes()).decode("ascii"))
    (tmp / "bad.jsonl").write_text(f"{header}\n{json.dumps(bad)}\n")
    with Lantern(tmp / "dst.db", embedder="fake") as lt, warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ExportFormatError, match="norm") as info:
            lt.import_(tmp / "bad.jsonl")
        assert (info.value.line, info.value.field) == (2, "embedding")
        assert lt.stats()["entries"] == 0
        assert lt.import_(dump).added == 1


LONG_PIECES = st.sampled_from(["a", "数", "😀", "é", " "])  # 1, 3, 4 and 2 bytes in UTF-8


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(piece=LONG_PIECES, field=st.sampled_from(["key", "key_text", "value", "replaces"]), over=st.integers(1, 400))
def test_a_fact_field_is_bounded_the_same_on_both_backends(stores, tmp_path_factory, piece, field, over):
    """A fact key or value up to MAX_FACT_BYTES in UTF-8 imports on both backends under the longest user id (a
    PostgreSQL index row holds at most 2,704 bytes); one past it is an ExportFormatError naming the line and the
    ``facts`` field on both, nothing of its batch written."""
    from lantern.errors import ExportFormatError
    from lantern.scope import MAX_ID_CHARS
    from lantern.store.facts import MAX_FACT_BYTES

    tmp = tmp_path_factory.mktemp("facts")
    dump = tmp / "dump.jsonl"
    with Lantern(tmp / "src.db", embedder="fake") as src:
        src.archive([{"role": "user", "content": "The staging port is 6380."}], session="s")
        src.export(dump)
    header, entry = dump.read_text().splitlines()
    record = json.loads(entry)
    assert record["facts"], "the turn states a fact"
    fits = piece * (MAX_FACT_BYTES // len(piece.encode()))
    user = "数" * MAX_ID_CHARS  # the longest user id, 3 bytes a character
    for name, text in (("fits", fits), ("over", fits + piece * over)):
        fact = dict(record["facts"][0], **{field: text})
        line = dict(record, facts=[fact], user_id=user, session=f"s-{uuid.uuid4().hex[:8]}", text=f"{name} {over}")
        (tmp / f"{name}.jsonl").write_text(f"{header}\n{json.dumps(line)}\n")
    for backend, lt in stores.items():
        before = lt.stats(all_users=True)["entries"]
        with pytest.raises(ExportFormatError) as info:
            lt.import_(tmp / "over.jsonl")
        assert (info.value.line, info.value.field) == (2, "facts"), backend
        assert lt.stats(all_users=True)["entries"] == before
        assert lt.import_(tmp / "fits.jsonl").added == 1, backend
