"""Summary, tags and content hash stored in fewer bytes (store/packed.py, migration m009; issue #23) and read back
exactly: any unicode through the store byte for byte, a store written in the previous format (schema 8) migrated in
one transaction to the same entries, the same export and the same recoveries, never left half converted; the space
the rewrite frees shown by ``stats --all-users`` and given back by ``lantern vacuum``."""

from __future__ import annotations

import io
import json
import sqlite3
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from budget import examples
from lantern import Lantern
from lantern.cli import app
from lantern.embed import MiniLMEmbedder
from lantern.model import Tag, content_hash
from lantern.store import migrations, packed
from lantern.store.sqlite import NewEntry, Store

AIDER_EXCERPT = Path(__file__).resolve().parents[1] / "src" / "lantern" / "data" / "demo" / "aider-chat-excerpt.md"
MODEL = MiniLMEmbedder()
PREVIOUS = 8  # the schema version before m009

# any unicode SQLite can hold (no lone surrogates), with CJK, emoji, JSON escapes and very long runs mixed in
plain = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300)
pieces = st.sampled_from(["数据库端口", "🙂🚀👩‍💻", '"\\n\\t', "naïve café", "\x00", " ", "[]", "{}", "a" * 50])
long_runs = st.tuples(pieces, st.integers(1, 3_000)).map(lambda p: p[0] * p[1])
texts = st.one_of(plain, long_runs, st.lists(st.one_of(plain, pieces), max_size=20).map("".join))


@settings(max_examples=examples(300), deadline=None)
@given(texts)
def test_pack_then_unpack_gives_the_text_back_and_never_grows_it(text):
    stored = packed.pack(text)
    assert packed.unpack(stored) == text
    assert packed.pack(stored) == stored  # packing twice changes nothing (the migration may meet packed rows)
    if isinstance(stored, bytes):
        assert len(stored) < len(text.encode("utf-8"))
        assert zlib.decompress(stored, -15) == text.encode("utf-8")  # plain raw deflate: any zlib reads it
    else:
        assert stored == text


@settings(max_examples=examples(20), deadline=None)
@given(
    inflated=st.integers(packed.MAX_UNPACKED_BYTES + 1, 4 * packed.MAX_UNPACKED_BYTES),
    byte=st.sampled_from([b"a", b"\x00", b"{"]),
    cut=st.booleans(),
)
def test_a_deflate_bomb_or_a_cut_stream_is_refused_having_inflated_at_most_the_bound(inflated, byte, cut):
    """A stored BLOB that inflates past ``MAX_UNPACKED_BYTES`` (a few KB deflated to tens of MB: a database from
    elsewhere, ``lantern copy``'s source) or ends inside its stream is a damaged row (zlib.error), not memory;
    every value ``pack`` writes reads back (the property above)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    bomb = packer.compress(byte * inflated) + packer.flush()
    assert len(bomb) < inflated // 500
    with pytest.raises(zlib.error, match="inflates past"):
        packed.unpack(bomb)
    small = packed.pack("the kestrel service listens on port 7510 " * 20)
    assert isinstance(small, bytes)
    if cut:
        with pytest.raises(zlib.error):
            packed.unpack(small[: len(small) // 2])


@settings(max_examples=examples(200), deadline=None)
@given(st.binary(min_size=32, max_size=32))
def test_a_content_hash_is_stored_as_its_digest_and_read_as_hex(digest):
    hex_hash = digest.hex()
    assert packed.pack_hash(hex_hash) == digest and packed.unpack_hash(digest) == hex_hash
    assert packed.pack_hash(digest) == digest
    others = [hex_hash[:-1], hex_hash + "0", "h1", ""] + ([hex_hash.upper()] if hex_hash.upper() != hex_hash else [])
    for other in others:  # not a model.content_hash (64 lowercase hex characters): kept as it is
        assert packed.pack_hash(other) == other and packed.unpack_hash(other) == other


@settings(max_examples=examples(40), deadline=None)
@given(
    st.lists(
        st.tuples(texts, st.lists(st.tuples(st.sampled_from(["file", "topic", "端口"]), texts), max_size=6)),
        min_size=1,
        max_size=5,
    )
)
def test_any_unicode_summary_and_tags_come_back_byte_identical_through_the_store(rows):
    store = Store(":memory:")
    store.check_embedder("test", 4)
    new = [
        NewEntry(
            session="s",
            text=f"turn {i}",
            summary=summary,
            tags=[Tag(k, v) for k, v in tags],
            hints=[],
            memory_type="episodic",
            importance=0.5,
            content_hash=content_hash("s", f"turn {i}"),
        )
        for i, (summary, tags) in enumerate(rows)
    ]
    vectors = np.random.default_rng(0).normal(size=(len(new), 4)).astype("float32")
    ids = [i for i, _ in store.add(new, vectors)]
    got = store.entries(ids)
    tags_only = store.tags(ids)
    summaries = dict(store.texts())
    for entry_id, row in zip(ids, new):
        e = got[entry_id]
        assert e.summary.encode("utf-8") == row.summary.encode("utf-8")
        assert [(t.kind, t.value) for t in e.tags] == [(t.kind, t.value) for t in row.tags]
        assert tags_only[entry_id] == e.tags and summaries[entry_id] == row.summary
        assert e.content_hash == row.content_hash
    assert store.known_hashes([r.content_hash for r in new] + ["0" * 64]) == {r.content_hash for r in new}
    assert [added for _, added in store.add(new, vectors)] == [False] * len(new)  # dedup by the stored digest
    store.close()


# ---------------------------------------------------------------- a store in the previous format
def _backup(src: Path, dst: Path) -> None:
    """A consistent copy of a WAL database (the WAL's pages included)."""
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    a.backup(b)
    a.close()
    b.close()


def _to_previous_format(path: Path) -> None:
    """Rewrite a store's entries in the form schema 8 wrote them (summary and tags as TEXT, the content hash as 64 hex
    characters) and set its schema version back: what a Lantern from before m009 leaves on disk."""
    db = sqlite3.connect(path, isolation_level=None)
    db.create_function("unpack", 1, packed.unpack)
    db.create_function("unpack_hash", 1, packed.unpack_hash)
    db.execute("BEGIN")
    db.execute(
        "UPDATE entries SET summary = unpack(summary), tags = unpack(tags), content_hash = unpack_hash(content_hash)"
    )
    db.execute(f"PRAGMA user_version = {PREVIOUS}")
    db.execute("COMMIT")
    db.close()


def _blobs(path: Path) -> tuple[int, int, int, int]:
    """(entries, packed summaries, packed tags, digest hashes) in the file."""
    db = sqlite3.connect(path)
    row = db.execute(
        "SELECT count(*), total(typeof(summary) = 'blob'), total(typeof(tags) = 'blob'), "
        "total(typeof(content_hash) = 'blob') FROM entries"
    ).fetchone()
    db.close()
    return tuple(int(x) for x in row)


def _rows(path: Path) -> list[tuple]:
    db = sqlite3.connect(path)
    rows = db.execute("SELECT * FROM entries ORDER BY id").fetchall()
    db.close()
    return rows


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """``new.db``: real aider turns (the shipped excerpt) archived by this Lantern; ``old.db``: the same file in the
    previous format, as a Lantern before m009 would have left it."""
    tmp = tmp_path_factory.mktemp("packed")
    new, old = tmp / "new.db", tmp / "old.db"
    with Lantern(new, embedder=MODEL) as lt:
        assert lt.ingest(AIDER_EXCERPT, session="aider").added > 50
    _backup(new, old)
    _to_previous_format(old)
    return new, old


def _queries(lt: Lantern) -> list[str]:
    """Questions taken from the archive itself: the head of every fourth turn's summary."""
    ids = sorted(lt.store.entries(range(1, 10_000), text=False, tags=False))
    summaries = lt.store.entries(ids[::4], text=False, tags=False)
    return [" ".join(summaries[i].summary.split()[:8]) for i in ids[::4]]


def _answers(lt: Lantern, queries: list[str]) -> list[tuple]:
    """Everything a recovery shows per query: the block, and per candidate its id, ranks, verdict, reason, summary
    and tags (explain loads them), and the search hits with their scores."""
    out = []
    for q in queries:
        r = lt.explain(q, budget=2_000)
        cands = [
            (c.entry.id, c.ranks, c.verdict, c.reason, c.entry.summary, c.entry.tags, c.entry.content_hash)
            for c in r.candidates
        ]
        hits = [(h.entry.id, round(h.score, 12), h.ranks) for h in lt.search(q, k=10)]
        out.append((r.text, cands, hits))
    return out


def test_a_store_in_the_previous_format_migrates_to_the_same_entries_export_and_recoveries(stores, tmp_path):
    new, old = stores
    n = _blobs(new)[0]
    assert _blobs(old) == (n, 0, 0, 0)  # the previous format: every value TEXT
    work = tmp_path / "old.db"
    _backup(old, work)
    with Lantern(new, embedder=MODEL) as a, Lantern(work, embedder=MODEL) as b:
        assert b.store.schema_version == len(migrations.MIGRATIONS) > PREVIOUS
        ids = sorted(a.store.entries(range(1, 10_000), text=False, tags=False))
        assert len(ids) == n and a.store.entries(ids) == b.store.entries(ids)
        with_tags = [e for e in a.store.entries(ids).values() if e.tags]
        assert len(with_tags) > 10  # real turns name files, commands, ports: tags to carry
        ea, eb = io.StringIO(), io.StringIO()
        a.export(ea)
        b.export(eb)
        assert ea.getvalue() == eb.getvalue()
        queries = _queries(a)
        assert len(queries) > 10
        assert _answers(a, queries) == _answers(b, queries)
    entries, summaries, tags, hashes = _blobs(work)
    assert entries == n and hashes == n and summaries > 0 and tags > 0
    assert _rows(work) == _rows(new)  # converted exactly to what this Lantern writes


def test_the_migration_is_one_transaction_and_idempotent(stores, tmp_path, monkeypatch):
    _, old = stores
    work = tmp_path / "half.db"
    _backup(old, work)
    before = _rows(work)
    calls = {"n": 0}
    real = packed.pack

    def failing(value):  # the disk fills or the process is killed in the middle of the rewrite
        calls["n"] += 1
        if calls["n"] == 40:
            raise OSError("no space left on device")
        return real(value)

    monkeypatch.setattr(packed, "pack", failing)
    with pytest.raises(sqlite3.Error):
        Store(work)
    db = sqlite3.connect(work)
    assert db.execute("PRAGMA user_version").fetchone()[0] == PREVIOUS
    db.close()
    assert _rows(work) == before and _blobs(work)[1:] == (0, 0, 0)  # wholly the previous format
    monkeypatch.setattr(packed, "pack", real)
    Store(work).close()  # the next open migrates
    after = _rows(work)
    db = sqlite3.connect(work, isolation_level=None)
    db.execute("BEGIN")
    migrations.m009_packed_columns(db)  # run again over packed rows: nothing changes
    db.execute("COMMIT")
    db.close()
    assert _rows(work) == after and _blobs(work)[3] == len(after)


def test_export_import_round_trip_keeps_summaries_tags_and_hashes(stores, tmp_path):
    new, _ = stores
    buf = io.StringIO()
    with Lantern(new, embedder=MODEL) as lt:
        lt.export(buf)
    records = [json.loads(line) for line in buf.getvalue().splitlines()[1:]]
    assert all(len(r["content_hash"]) == 64 and isinstance(r["summary"], str) for r in records)
    assert any(r["tags"] for r in records)
    with Lantern(tmp_path / "copy.db", embedder=MODEL) as lt:
        result = lt.import_(io.StringIO(buf.getvalue()))
        assert result.added == len(records)
        assert lt.import_(io.StringIO(buf.getvalue())).duplicates == len(records)  # found by the stored digest
        again = io.StringIO()
        lt.export(again)
    got = [json.loads(line) for line in again.getvalue().splitlines()[1:]]
    keys = ("session", "turn", "text", "summary", "tags", "hints", "content_hash")
    assert [{k: r[k] for k in keys} for r in got] == [{k: r[k] for k in keys} for r in records]
    assert _blobs(tmp_path / "copy.db")[3] == len(records)


def test_stats_shows_the_space_the_migration_frees_and_vacuum_gives_it_back(stores, tmp_path):
    _, old = stores
    work = tmp_path / "vac.db"
    _backup(old, work)
    runner = CliRunner()
    before = json.loads(runner.invoke(app, ["--db", str(work), "stats", "--all-users", "--json"]).output)
    assert before["schema_version"] == len(migrations.MIGRATIONS) and before["free_bytes"] > 0
    out = runner.invoke(app, ["--db", str(work), "vacuum"])
    assert out.exit_code == 0, out.output
    size_before, size_after = (
        int(x.replace(",", "")) for x in out.output.split(": ")[1].split(" bytes")[0].split(" -> ")
    )
    assert size_after < size_before
    after = json.loads(runner.invoke(app, ["--db", str(work), "stats", "--all-users", "--json"]).output)
    assert after["database_bytes"] < before["database_bytes"] and after["free_bytes"] < before["free_bytes"]
    assert after["entries"] == before["entries"]
