"""Forgetting and portability (issue 6, part 7): a forgotten secret is gone from every path, raw file bytes
included; JSONL export / import round-trips. Real SQLite file, the fake embedder (tests/conftest.py)."""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
import sys
from datetime import datetime, timezone

import numpy as np
import pytest

from clirun import lantern
from lantern import EmbedderMismatchError, Lantern, portability
from lantern.errors import ExportFormatError
from lantern.recover import signals
from lantern.recover.signals import fts_query
from lantern.text.tags import query_terms

PHRASE = "the vault unlock phrase is marmalade_osprey_quintet on port 4411"
FILLER = [
    ("Rename the helper in utils.", "Renamed format_money to format_amount in src/billing/utils.py."),
    ("Which linter do we use?", "ruff, configured in pyproject.toml."),
    ("部署端口是多少？", "预发布环境的端口是 8443。"),
    ("When does the cron job run?", "Nightly at 02:00 UTC, exporting invoices to the bucket billing-exports."),
]


def filler(n=len(FILLER), start=0):
    out = []
    for q, a in FILLER[start : start + n]:
        out += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    return out


def raw_bytes(path) -> bytes:
    """The database file and its WAL / shared-memory files, as a thief with the disk would read them."""
    return b"".join(p.read_bytes() for p in path.parent.iterdir() if p.name.startswith(path.name))


def every_path_finds(lt: Lantern, path, entry_id: int | None, vector: bytes) -> dict[str, bool]:
    """Whether each path surfaces the phrase (or, for vectors, the entry / its embedding bytes)."""
    lt.index.refresh()
    terms = query_terms(PHRASE)
    present = set(lt.index.ids.tolist())
    pos, _ = signals.semantic(lt.index, lt.embedder.embed([PHRASE])[0], lt.index.scope_mask(lt.scope), 50)
    kw, _ = signals.keyword(lt.index, ["4411", "marmalade"], None, 50)
    con = sqlite3.connect(path)
    fts_raw = con.execute("SELECT count(*) FROM entries_fts WHERE entries_fts MATCH 'marmalade'").fetchone()[0]
    con.close()
    raw = raw_bytes(path)
    return {
        "fts": bool({i for i, _ in lt.store.fulltext(fts_query(terms), 50, None, lt.scope)} & {entry_id})
        or fts_raw > 0,
        "semantic": entry_id in set(lt.index.ids[pos].tolist()),
        "keyword": bool(lt.index.postings.get("4411")) or entry_id in set(lt.index.ids[kw].tolist()),
        "index": entry_id in present,
        "search": any("marmalade" in h.entry.text for h in lt.search(PHRASE, k=50)),
        "recover": "marmalade" in lt.recover(PHRASE, budget=100_000).text,
        "explain": any("marmalade" in c.entry.summary for c in lt.explain(PHRASE).candidates),
        "raw text": b"marmalade_osprey_quintet" in raw,
        # its first 1 KB (MiniLM's part): a 1280-d vector (5,120 bytes) is longer than a page, SQLite stores its
        # tail on an overflow page elsewhere in the file
        "raw vector": vector[:1024] in raw,
    }


@pytest.mark.parametrize("how", ["entry", "session", "user"])
def test_forgotten_secret_is_gone_from_every_path(tmp_path, how):
    path = tmp_path / "f.db"
    with Lantern(path, user="alice") as lt:
        lt.archive(filler(), session="keep")
        r = lt.archive(
            [{"role": "user", "content": PHRASE}, {"role": "assistant", "content": "Stored 4411."}], session="vault"
        )
        lt.archive(filler(2), session="keep", user="bob")
        entry_id = r.entry_ids[0]
        vector = lt.store.db.execute("SELECT vector FROM embeddings WHERE entry_id = ?", (entry_id,)).fetchone()[0]
        # a table a later migration adds (facts, reinforcement state) referring to entries is cleared too
        with lt.store.transaction() as db:
            db.execute(
                "CREATE TABLE notes_of_entries(id INTEGER PRIMARY KEY, entry_id INTEGER REFERENCES entries(id), note "
                "TEXT)"
            )
            db.execute(
                "INSERT INTO notes_of_entries(entry_id, note) VALUES (?, 'marmalade_osprey_quintet')", (entry_id,)
            )
        before = every_path_finds(lt, path, entry_id, vector)
        assert all(before.values()), before  # the control: each path does find it before

        selector = {"entry": {"entry": entry_id}, "session": {"session": "vault"}, "user": {"user": "alice"}}[how]
        from lantern.recover.speaker import speakers_of

        assert lt.redaction.memo.get(PHRASE) is not None and speakers_of.cache_info().currsize > 0
        n = lt.forget(**selector)
        assert n == {"entry": 1, "session": 1, "user": 5}[how]
        # nor in the process's caches: the remembered redactions and the speaker names of summaries
        assert lt.redaction.memo.get(PHRASE) is None and speakers_of.cache_info().currsize == 0
        after = every_path_finds(lt, path, entry_id, vector)
        assert not any(after.values()), after
        assert lt.store.db.execute("SELECT count(*) FROM notes_of_entries").fetchone()[0] == 0
        assert lt.store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert lt.store.count() == {"entry": 6, "session": 6, "user": 2}[how]  # bob's two turns always stay
    with Lantern(path, user="bob") as lt:
        assert {h.entry.user for h in lt.search("ruff linter", k=50)} == {"bob"}


# ---------------------------------------------------------------------------------------------- export / import
@pytest.fixture()
def source(tmp_path, built_db):
    """A database of several sessions, users and a time, with a gap in its ids and access counts: built once per
    test process (conftest.py ``built_db``), a copy of it per test."""
    return built_db("forget-export-source", _build_source, tmp_path / "src.db")


def _build_source(path):
    with Lantern(path) as lt:
        t0 = datetime(2026, 3, 14, 9, 30, tzinfo=timezone.utc)
        lt.archive(
            [
                {"role": "user", "content": "Start postgres for billing."},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "bash", "arguments": '{"cmd": "docker run -p 5433:5432 postgres:16"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "listening on 127.0.0.1:5433"},
            ],
            session="ops",
        )
        lt.archive(filler(), session="ops")
        gone = lt.archive([{"role": "user", "content": "temporary note to delete"}], session="tmp")
        lt.archive(filler(3), session="alice-chat", user="alice", agent="coder", project="billing")
        lt.archive([{"role": "user", "content": "a message with a time", "timestamp": t0.isoformat()}], session="t")
        lt.forget(entry=gone.entry_ids[0])  # a gap in the ids: the import renumbers
        lt.recover("postgres port")  # access counts are exported too


def export_text(path, **kw) -> str:
    buf = io.StringIO()
    with Lantern(path) as lt:
        lt.export(buf, **kw)
    return buf.getvalue()


def without_ids(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        rec = json.loads(line)
        rec.pop("id", None)
        out.append(json.dumps(rec, ensure_ascii=False))
    return out


def test_round_trip_is_identical_and_recovers_the_same(source, tmp_path):
    first = export_text(source)
    header = json.loads(first.splitlines()[0])
    assert header["type"] == "header" and header["version"] == portability.VERSION and header["embedder"]
    records = [json.loads(x) for x in first.splitlines()[1:]]
    assert len(records) == 9 and {r["type"] for r in records} == {"entry"}
    assert {r["user_id"] for r in records} == {"", "alice"}
    assert [r["time"] for r in records if r["session"] == "t"] == [
        datetime(2026, 3, 14, 9, 30, tzinfo=timezone.utc).timestamp()
    ]
    assert "预发布环境的端口是 8443" in first and any(r["access_count"] for r in records)
    with Lantern(tmp_path / "copy.db") as lt:
        r = lt.import_(io.StringIO(first))
        assert (r.added, r.duplicates) == (9, 0)
        again = lt.import_(io.StringIO(first))
        assert (again.added, again.duplicates) == (0, 9) and lt.store.count() == 9
    second = export_text(tmp_path / "copy.db")
    assert second != first  # the ids were renumbered (the source has a gap) ...
    assert without_ids(second) == without_ids(first)  # ... and nothing else differs
    for query, kw in [("postgres port", {}), ("cron job time", {}), ("linter", {"user": "alice"})]:
        with Lantern(source) as a, Lantern(tmp_path / "copy.db") as b:
            ra, rb = a.explain(query, **kw), b.explain(query, **kw)
            assert ra.text == rb.text and ra.text
            assert [(e.session, e.turn) for e in ra.entries] == [(e.session, e.turn) for e in rb.entries]


def test_export_filters_and_no_embeddings_recomputes(source, tmp_path):
    alice = [json.loads(x) for x in export_text(source, user="alice").splitlines()[1:]]
    assert len(alice) == 3 and {r["user_id"] for r in alice} == {"alice"}
    assert [json.loads(x)["session"] for x in export_text(source, session="t").splitlines()[1:]] == ["t"]
    bare = export_text(source, embeddings=False)
    assert '"embedding":' not in bare and json.loads(bare.splitlines()[0])["embeddings"] is False
    with Lantern(tmp_path / "bare.db") as lt:
        assert lt.import_(io.StringIO(bare)).added == 9
        lt.fill_vectors()  # the source's e5 parts were filled by its recoveries: fill these too
    with Lantern(source) as lt:
        lt.fill_vectors()
    con_a, con_b = sqlite3.connect(source), sqlite3.connect(tmp_path / "bare.db")
    q = "SELECT e.content_hash, v.vector FROM entries e JOIN embeddings v ON v.entry_id = e.id ORDER BY e.content_hash"
    va, vb = con_a.execute(q).fetchall(), con_b.execute(q).fetchall()
    assert [h for h, _ in va] == [h for h, _ in vb]
    from lantern.embed import get_embedder
    from lantern.store import vectors as codec

    embedder = get_embedder()
    blocks = sorted((getattr(embedder, "blocks", None) or {"one": (0, embedder.dim)}).values())  # one model: one
    for (_, x), (_, y) in zip(va, vb):
        # recomputed: the same blocks, the same vector up to the float noise of another batch (padding, threads)
        assert codec.present(x, blocks) == codec.present(y, blocks)
        a, b = codec.decode(x, embedder.dim, blocks), codec.decode(y, embedder.dim, blocks)
        assert float(a @ b) >= 0.999 * float(np.linalg.norm(a) * np.linalg.norm(b))


def test_import_into_a_user_rehomes_every_record(source, tmp_path):
    text = export_text(source)
    with Lantern(tmp_path / "carol.db", user="carol") as lt:
        assert lt.import_(io.StringIO(text)).added == 9
        assert {h.entry.user for h in lt.search("postgres", k=50)} == {"carol"}
        assert lt.search("postgres", user="") == []
    with Lantern(tmp_path / "carol.db") as lt:  # the same text in the same user again: nothing added
        assert lt.import_(io.StringIO(text), user="carol").added == 0


def test_bad_line_names_its_line_and_writes_nothing(source, tmp_path, monkeypatch):
    lines = export_text(source).splitlines()
    bad = json.loads(lines[5])
    bad["turn"] = "three"
    broken = "\n".join([*lines[:5], json.dumps(bad), *lines[6:]]) + "\n"
    monkeypatch.setattr(portability, "BATCH_LINES", 2)  # lines 2-3 and 4-5 would be batches before the bad one
    with Lantern(tmp_path / "bad.db") as lt:
        with pytest.raises(ExportFormatError) as e:
            lt.import_(io.StringIO(broken))
        assert (e.value.line, e.value.field) == (6, "turn") and "line 6" in str(e.value)
        assert lt.store.count() == 0  # the whole file is checked before anything is written
        con = sqlite3.connect(tmp_path / "bad.db")
        assert con.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM entries_fts").fetchone()[0] == 0
        con.close()
        fixed = lt.import_(io.StringIO("\n".join(lines) + "\n"))
        assert (fixed.added, fixed.duplicates) == (9, 0)
    cases = [
        ("{not json", 3, None),
        (json.dumps({"type": "fact", "key": "port"}), 3, "type"),
        (json.dumps({**json.loads(lines[1]), "embedding": "AAAA"}), 3, "embedding"),
        (json.dumps({**json.loads(lines[1]), "colour": "red"}), 3, "colour"),
        (json.dumps({k: v for k, v in json.loads(lines[1]).items() if k != "text"}), 3, "text"),
    ]
    for line, number, field in cases:
        with Lantern(tmp_path / "cases.db") as lt:
            with pytest.raises(ExportFormatError) as e:
                lt.import_(io.StringIO("\n".join([lines[0], lines[2], line]) + "\n"))
            assert (e.value.line, e.value.field) == (number, field)
            assert lt.store.count() == 0  # the good line 2 shares the bad line's batch
    with Lantern(tmp_path / "cases.db") as lt:
        with pytest.raises(ExportFormatError, match="header"):
            lt.import_(io.StringIO(lines[1] + "\n"))
        newer = json.dumps({**json.loads(lines[0]), "version": portability.VERSION + 1})
        with pytest.raises(ExportFormatError, match="newer"):
            lt.import_(io.StringIO(newer + "\n"))


def test_truncated_or_non_utf8_export_imports_nothing_into_an_existing_database(source, tmp_path, monkeypatch):
    """An export cut short (a copy interrupted) or with a byte that is not UTF-8, imported into a database that
    already holds entries: the batches before the bad line were committed (512 of 541 records of a 600-entry
    export cut at 90 %) while the command said only "error: ..., line 542"; a byte that was not UTF-8 was
    "'utf-8' codec can't decode byte 0xff in position 5804", no file, no line. Now the whole file is checked first:
    nothing is written, the error names the file and line, from a path and from a pipe (stdin) alike."""
    monkeypatch.setattr(portability, "BATCH_LINES", 2)
    text = export_text(source)
    truncated = text[: len(text) * 9 // 10]
    target = tmp_path / "existing.db"
    with Lantern(target) as lt:
        lt.archive([{"role": "user", "content": "已有的条目：端口 6543"}], session="mine")
        with pytest.raises(ExportFormatError) as e:
            lt.import_(io.StringIO(truncated))
        assert e.value.line == len(truncated.splitlines()) and lt.store.count() == 1
    data = text.encode("utf-8")
    third = data.index(b"\n", data.index(b"\n") + 1) + 1  # the start of line 3
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_bytes(data[: third + 10] + b"\xff" + data[third + 11 :])
    with Lantern(target) as lt:
        with pytest.raises(ExportFormatError) as e:
            lt.import_(corrupt)
        assert e.value.line == 3 and "not UTF-8" in str(e.value) and lt.store.count() == 1
    # the truncated export in-process (tests/clirun.py), the corrupt one through a real process's stdin pipe
    p = lantern("import", "-", db=target, input=truncated.encode("utf-8"))
    err = p.stderr.decode()
    assert p.returncode == 1 and f"<stdin>, line {len(truncated.splitlines())}:" in err and "Traceback" not in err, err
    p = subprocess.run(
        [sys.executable, "-m", "lantern.cli", "--db", str(target), "import", "-"],
        input=corrupt.read_bytes(),
        capture_output=True,
        timeout=300,
    )
    err = p.stderr.decode()
    assert p.returncode == 1 and "<stdin>, line 3:" in err and "Traceback" not in err, err
    with Lantern(target) as lt:
        assert lt.store.count() == 1
        assert lt.import_(io.StringIO(text)).added == 9


def test_embedder_mismatch_suggests_no_embeddings(source, tmp_path):
    lines = export_text(source).splitlines()
    lines[0] = json.dumps({**json.loads(lines[0]), "embedder": "some-other-model"})
    text = "\n".join(lines) + "\n"
    with Lantern(tmp_path / "m.db") as lt:
        with pytest.raises(EmbedderMismatchError, match="--no-embeddings"):
            lt.import_(io.StringIO(text))
        assert lt.store.count() == 0
        assert lt.import_(io.StringIO(text), embeddings=False).added == 9


def test_cli_export_import(source, tmp_path):
    def cli(*args: str, env: dict | None = None):
        return lantern(*args, env={"LANTERN_USER": None, **(env or {})})

    out = tmp_path / "dump.jsonl"
    p = cli("--db", str(source), "export", str(out))
    assert p.returncode == 0, p.stderr.decode()
    assert "9 entries exported" in p.stderr.decode()
    assert out.stat().st_mode & 0o777 == 0o600
    p = cli("--db", str(source), "export", "-", "--no-embeddings", env={"LANTERN_USER": "alice"})
    assert p.returncode == 0 and len(p.stdout.decode().splitlines()) == 4 and b'embedding"' not in p.stdout
    copy = tmp_path / "copy.db"
    p = cli("--db", str(copy), "import", str(out))
    assert p.returncode == 0 and "9 entries imported, 0 already stored" in p.stdout.decode(), p.stderr.decode()
    out.write_text(out.read_text() + "{oops\n")
    p = cli("--db", str(copy), "import", str(out))
    assert p.returncode == 1 and "line 11" in p.stderr.decode() and "Traceback" not in p.stderr.decode()
    p = cli("--db", str(copy), "forget", "--yes", "--user", "alice")
    assert p.returncode == 0 and "3 entries forgotten" in p.stdout.decode()
    p = cli("--db", str(copy), "forget", "--yes", "--entry", "999")
    assert p.returncode == 0 and "0 entries forgotten" in p.stdout.decode()  # a mistyped id is named (newcomer finding)
    assert "no entry 999 matched" in p.stderr.decode()
    p = cli("--db", str(copy), "forget")
    assert p.returncode == 1 and "give --entry" in p.stderr.decode()


def test_round_trip_keeps_versioned_facts(tmp_path):
    """Facts travel with their entries: the copy has the same current value, the same history (superseded
    version included) and the same as-of answer; export -> import -> export is identical apart from ids."""
    day = lambda d: datetime(2026, 3, d, 9, 0, tzinfo=timezone.utc)  # noqa: E731
    path = tmp_path / "facts.db"
    with Lantern(path) as lt:
        lt.archive(
            [{"role": "user", "content": "The staging DB port is 5433.", "timestamp": day(1).isoformat()}], session="d1"
        )
        lt.archive(
            [{"role": "user", "content": "I changed the staging DB port to 5434.", "timestamp": day(2).isoformat()}],
            session="d2",
        )
        history = [(f.value, f.current) for f in lt.facts("staging db port", history=True)]
    assert history == [("5433", False), ("5434", True)]
    first = export_text(path)
    assert any(rec.get("facts") for rec in map(json.loads, first.splitlines()[1:]))
    with Lantern(tmp_path / "copy.db") as lt:
        lt.import_(io.StringIO(first))
        assert [(f.value, f.current) for f in lt.facts("staging db port", history=True)] == history
        assert [f.value for f in lt.facts("staging db port", as_of=day(1))] == ["5433"]
    assert without_ids(export_text(tmp_path / "copy.db")) == without_ids(first)


@pytest.mark.parametrize(
    "field,value",
    [
        ("turn", -1),
        ("turn", 2**53),
        ("turn", 1.5),
        ("access_count", -3),
        ("tool_count", 2**60),
        ("file_count", -1),
        ("confidence", 1.5),
        ("confidence", -0.1),
        ("success", 2),
        ("importance", -1),
        ("importance", 1e308),
        ("time", 1e300),
        ("time", -1e15),
        ("archived_at", 253402300800 * 2),
        ("archived_at", -62135596801),
    ],
)
def test_import_rejects_values_that_poison_the_store(source, tmp_path, field, value):
    lines = export_text(source).splitlines()
    bad = {**json.loads(lines[2]), field: value}
    with Lantern(tmp_path / "poison.db") as lt:
        with pytest.raises(ExportFormatError) as e:
            lt.import_(io.StringIO("\n".join([lines[0], lines[1], json.dumps(bad)]) + "\n"))
        assert (e.value.line, e.value.field) == (3, field) and "line 3" in str(e.value)
        assert lt.store.count() == 0
    # the edges are accepted
    edge = {
        **json.loads(lines[2]),
        "turn": 2**53 - 1,
        "confidence": 1,
        "success": 0.0,
        "importance": 0,
        "access_count": 0,
        "time": -62135596800.0,
    }
    with Lantern(tmp_path / "edge.db") as lt:
        assert lt.import_(io.StringIO("\n".join([lines[0], json.dumps(edge)]) + "\n")).added == 1


def test_cli_failed_import_into_a_new_database_leaves_no_file(source, tmp_path):
    """A new database whose import fails is removed again: it would otherwise stay tied to an embedder (and empty)."""
    from typer.testing import CliRunner

    from lantern.cli import app

    bad = tmp_path / "bad.jsonl"
    lines = export_text(source).splitlines()
    bad.write_text("\n".join([lines[0], '{"type": "entry", "session": 5}']) + "\n", encoding="utf-8")
    new = tmp_path / "new.db"
    out = CliRunner().invoke(app, ["--db", str(new), "import", str(bad)])
    assert out.exit_code == 1 and "line 2" in out.output
    assert not new.exists() and not (tmp_path / "new.db-wal").exists()
