"""The write path's embedding stage (archive/embed_ahead.py): the overlapped ingest stores the same entries and
the same vectors, bit for bit, as the serial path; stored turns are not embedded again; identical summaries are
embedded once; errors of the worker thread reach the caller unchanged; nothing half written."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import numpy as np
import pytest

import lantern.archive.pipeline as api_mod
from lantern import Lantern
from lantern.archive import embed_ahead
from lantern.archive.ingest import Slices, TurnBatches
from lantern.archive.redact import redact_messages
from lantern.embed import FakeEmbedder, MiniLMEmbedder
from lantern.errors import ModelNotFoundError
from lantern.model import ArchiveResult
from lantern.store.packed import unpack
from lantern.store.vectors import encode

AIDER_EXCERPT = Path(__file__).resolve().parents[1] / "src" / "lantern" / "data" / "demo" / "aider-chat-excerpt.md"
MODEL = MiniLMEmbedder()  # the real model, loaded once for this file: the bit-for-bit tests of real batches
FAKE = FakeEmbedder()  # the tests of what is embedded when, and of errors: what the vectors are does not matter


class Counting:
    """An embedder counting the texts it is asked to embed (and optionally failing on call n)."""

    def __init__(self, inner, fail_on_call: int | None = None, error: BaseException | None = None):
        self.inner, self.id, self.dim = inner, inner.id, inner.dim
        self.texts: list[str] = []
        self.calls = 0
        self.threads: set[int] = set()
        self.fail_on_call, self.error = fail_on_call, error

    def embed(self, texts):
        self.calls += 1
        self.threads.add(threading.get_ident())
        if self.fail_on_call is not None and self.calls == self.fail_on_call:
            raise self.error
        self.texts.extend(texts)
        return self.inner.embed(texts)


def _chat(path: Path, n: int, *, start: int = 0) -> Path:
    lines = []
    for i in range(start, start + n):
        lines.append({"role": "user", "content": f"Question {i}: which port does service-{i} use, and why {i % 7}?"})
        lines.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": json.dumps({"svc": i})},
                    }
                ],
            }
        )
        lines.append(
            {
                "role": "tool",
                "tool_call_id": f"c{i}",
                "content": f"service-{i} port {10000 + i}\n" + "log line " * (i % 40),
            }
        )
        lines.append({"role": "assistant", "content": f"service-{i} listens on {10000 + i}."})
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def _stored(vector) -> bytes:
    """What the store writes for a vector of a one-block embedder (store/vectors.py: int8, one block)."""
    return encode(vector, [(0, len(vector))])


def _rows(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as con:
        return con.execute(
            "SELECT e.session, e.turn, e.text, e.summary, e.tags, e.hints, e.content_hash, e.category, v.vector "
            "FROM entries e JOIN embeddings v ON v.entry_id = e.id ORDER BY e.id"
        ).fetchall()


def _serial_ingest(lt: Lantern, path: Path, session: str) -> ArchiveResult:
    """The write path before the overlap: each batch prepared, embedded and stored in turn, one thread."""
    result = ArchiveResult(session=session)
    batches = TurnBatches(
        Slices(path, "auto"),
        lambda m: redact_messages(m, lt.redaction),
        api_mod.INGEST_BATCH_TURNS,
        lambda piece, redacted: None,
    )
    for turns in batches:
        rows = [lt.writer.prepare(t, session, lt.scope) for t in turns]
        vectors = lt.embedder.embed([r.summary for r in rows])
        for _entry_id, added in lt.store.add(rows, vectors):
            result.added += added
    lt.index.mark_dirty()
    return result


@pytest.mark.real_models  # the real MiniLM's batches (MODEL): the real tier, run first
def test_overlapped_ingest_equals_serial_path_bit_for_bit(tmp_path, monkeypatch):
    monkeypatch.setattr(api_mod, "INGEST_BATCH_TURNS", 16)  # 7 batches: the pipeline fills, runs and drains
    path = _chat(tmp_path / "chat.jsonl", 100)
    counting = Counting(MODEL)
    with Lantern(tmp_path / "a.db", embedder=counting) as a:
        res = a.ingest(path, session="s")
    with Lantern(tmp_path / "b.db", embedder=MODEL) as b:
        serial = _serial_ingest(b, path, "s")
    assert res.added == serial.added == 100
    assert threading.get_ident() not in counting.threads  # embedded in the worker thread
    ra, rb = _rows(tmp_path / "a.db"), _rows(tmp_path / "b.db")
    assert [r[:-1] for r in ra] == [r[:-1] for r in rb]
    assert [r[-1] for r in ra] == [r[-1] for r in rb]  # same stored bytes
    # and each vector is the summary embedded alone: a batch's other texts change nothing
    alone = np.stack([MODEL.embed([unpack(r[3])])[0] for r in ra[:20]])  # r[3]: the stored summary
    assert [r[-1] for r in ra[:20]] == [_stored(v) for v in alone]


@pytest.mark.real_models  # the real MiniLM's batches (MODEL): the real tier, run first
def test_real_aider_turns_same_vectors_as_serial(tmp_path, monkeypatch):
    src = AIDER_EXCERPT  # real aider turns, shipped with the package
    monkeypatch.setattr(api_mod, "INGEST_BATCH_TURNS", 32)
    with Lantern(tmp_path / "a.db", embedder=MODEL) as a:
        res = a.ingest(src, session="aider")
    with Lantern(tmp_path / "b.db", embedder=MODEL) as b:
        serial = _serial_ingest(b, src, "aider")
    assert res.added == serial.added > 50
    assert _rows(tmp_path / "a.db") == _rows(tmp_path / "b.db")


def test_resume_embeds_only_the_turns_not_stored(tmp_path, monkeypatch):
    monkeypatch.setattr(api_mod, "INGEST_BATCH_TURNS", 16)
    full = _chat(tmp_path / "full.jsonl", 60)
    head = tmp_path / "head.jsonl"
    head.write_text("".join(full.read_text().splitlines(keepends=True)[: 4 * 37]))  # an ingest cut after 37 turns
    with Lantern(tmp_path / "r.db", embedder=FAKE) as lt:
        assert lt.ingest(head, session="s").added == 37
    counting = Counting(FAKE)
    with Lantern(tmp_path / "r.db", embedder=counting) as lt:
        res = lt.ingest(full, session="s")
        assert (res.added, res.duplicates) == (23, 37)
        assert len(counting.texts) == 23  # the 37 stored turns were not embedded again
        again = lt.ingest(full, session="s")
        assert (again.added, again.duplicates) == (0, 60) and len(counting.texts) == 23
    with Lantern(tmp_path / "clean.db", embedder=FAKE) as clean:
        clean.ingest(full, session="s")
    assert _rows(tmp_path / "r.db") == _rows(tmp_path / "clean.db")


def test_identical_summaries_are_embedded_once(tmp_path):
    long_head = "Please refactor the connection pool so that it retries. " * 12  # > 500 chars: the summary cuts it
    msgs = []
    for tail in ("first variant of the ending", "second variant of the ending"):
        msgs += [{"role": "user", "content": long_head + tail}, {"role": "assistant", "content": "Done."}]
    counting = Counting(FAKE)
    with Lantern(tmp_path / "d.db", embedder=counting) as lt:
        res = lt.archive(msgs, session="s")
        summaries = [unpack(s) for (s,) in lt.store.db.execute("SELECT summary FROM entries ORDER BY id")]
    assert res.added == 2 and summaries[0] == summaries[1]
    assert counting.texts == [summaries[0]]
    rows = _rows(tmp_path / "d.db")
    assert rows[0][-1] == rows[1][-1] == _stored(FAKE.embed([summaries[0]])[0])


def test_a_row_deleted_after_the_plan_is_embedded_and_written(tmp_path):
    msgs = [
        {"role": "user", "content": "Which port does the cache use?"},
        {"role": "assistant", "content": "Port 6380."},
        {"role": "user", "content": "And the queue?"},
        {"role": "assistant", "content": "Port 5672."},
    ]
    with Lantern(tmp_path / "m.db", embedder=FAKE) as lt:
        lt.archive(msgs[:2], session="s")
        from lantern.archive.chunk import chunk

        turns = chunk(lt.writer.messages(msgs).messages, None)
        batch = lt.writer.prepare_batch(turns, "s", lt.scope)
        rows, plan = batch.rows, batch.plan
        assert plan.slot[0] is None and plan.slot[1] is not None  # the first turn is stored: no vector planned
        vectors = embed_ahead.embed_plan(lt.embedder, plan)
        with Lantern(tmp_path / "m.db", embedder=FAKE) as other:  # another handle forgets it before the write
            assert other.forget(session="s", vacuum=False) == 1
        result = ArchiveResult(session="s")
        lt.writer.store_batch(batch, vectors, result)
        assert result.added == 2
    direct = [_stored(FAKE.embed([r.summary])[0]) for r in rows]
    assert [r[-1] for r in _rows(tmp_path / "m.db")] == direct


class Boom(RuntimeError):
    pass


def test_worker_error_reaches_the_caller_unchanged_and_whole_batches_stay(tmp_path, monkeypatch):
    monkeypatch.setattr(api_mod, "INGEST_BATCH_TURNS", 10)
    path = _chat(tmp_path / "chat.jsonl", 50)
    error = Boom("embedding failed on the third batch")
    counting = Counting(FAKE, fail_on_call=3, error=error)
    with Lantern(tmp_path / "e.db", embedder=counting) as lt:
        with pytest.raises(Boom) as info:
            lt.ingest(path, session="s")
        assert info.value is error
        assert lt.store.count() == 20  # batches 1 and 2 committed, nothing of batch 3 or later
        counting.fail_on_call = None
        res = lt.ingest(path, session="s")  # resume
        assert (res.added, res.duplicates) == (30, 20)


def test_missing_model_raises_model_not_found_from_the_worker(tmp_path):
    path = _chat(tmp_path / "chat.jsonl", 5)
    with Lantern(tmp_path / "n.db", embedder=MiniLMEmbedder(model_path=tmp_path / "no-model.onnx")) as lt:
        with pytest.raises(ModelNotFoundError):
            lt.ingest(path, session="s")
        assert lt.store.count() == 0


def test_overlapped_order_errors_and_lookahead():
    made: list[int] = []

    def produce(n):
        for i in range(n):
            made.append(i)
            yield i

    seen = []
    for item, out in embed_ahead.overlapped(produce(6), lambda i: (i * i, threading.get_ident())):
        seen.append((item, out[0]))
        assert out[1] != threading.get_ident()
        assert len(made) <= item + 2  # at most one item made ahead of the one being worked on
    assert seen == [(i, i * i) for i in range(6)]
    assert list(embed_ahead.overlapped(iter([]), lambda i: i)) == []

    def work(i):
        if i == 3:
            raise KeyError(i)
        return i

    got = []
    with pytest.raises(KeyError):
        for item, _ in embed_ahead.overlapped(iter(range(6)), work):
            got.append(item)
    assert got == [0, 1, 2]  # the items before the failed one were handed out first

    def bad_producer():
        yield 1
        raise ValueError("parse error")

    with pytest.raises(ValueError, match="parse error"):
        list(embed_ahead.overlapped(bad_producer(), lambda i: i))


def test_interrupt_in_the_loop_body_stops_the_pipeline():
    started = []

    def work(i):
        started.append(i)
        return i

    with pytest.raises(KeyboardInterrupt):
        for item, _ in embed_ahead.overlapped(iter(range(100)), work):
            if item == 2:
                raise KeyboardInterrupt
    assert len(started) <= 5  # the queued work was cancelled, not run to the end


def test_plan_skips_known_and_shares_identical():
    p = embed_ahead.plan(["a", "b", "a", "c"], ["h1", "h2", "h3", "h4"], {"h2"})
    assert p.texts == ["a", "c"] and p.slot == [0, None, 0, 1]


def test_summaries_seen_in_earlier_batches_reuse_their_vector(tmp_path, monkeypatch):
    """The same turn in several chat sessions of one file (different content hashes, one summary): embedded once
    for the whole ingest, stored once per session with the same vector as a serial ingest."""
    monkeypatch.setattr(api_mod, "INGEST_BATCH_TURNS", 8)  # 3 batches: each session's turns cross a batch boundary

    lines = []
    for session in range(4):  # ShareGPT-style JSONL: one conversation per line, the same 6 turns in each
        conv = []
        for i in range(6):
            conv += [
                {"from": "human", "value": f"Run step {i} of the release checklist."},
                {"from": "gpt", "value": f"Step {i} done: tagged v1.{i} and pushed."},
            ]
        lines.append(json.dumps({"id": f"chat-{session}", "conversations": conv}))
    path = tmp_path / "chats.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    counting = Counting(FAKE)
    with Lantern(tmp_path / "a.db", embedder=counting) as a:
        res = a.ingest(path, session="s")
    assert res.added == 24 and res.duplicates == 0
    assert sorted(counting.texts) == sorted(set(counting.texts)) and len(counting.texts) == 6
    with Lantern(tmp_path / "b.db", embedder=FAKE) as b:
        _serial_ingest(b, path, "s")
    assert _rows(tmp_path / "a.db") == _rows(tmp_path / "b.db")


def test_remembered_is_bounded_and_copies():
    r = embed_ahead.Remembered(size=2)
    counting = Counting(FAKE)
    first = embed_ahead.embed_plan(counting, embed_ahead.plan(["a", "b", "c"], ["1", "2", "3"], set()), r)
    assert list(r.vectors) == ["b", "c"] and r.vectors["c"].base is None  # a copy, not a view of the batch
    again = embed_ahead.embed_plan(counting, embed_ahead.plan(["c", "d", "c"], ["4", "5", "6"], set()), r)
    assert counting.texts == ["a", "b", "c", "d"]  # "c" was remembered
    assert np.array_equal(again[0], first[2]) and np.array_equal(again[2], first[2])
    assert np.array_equal(again[1], FAKE.embed(["d"])[0])
