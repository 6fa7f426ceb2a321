"""The fake embedder (embed.FakeEmbedder, "fake"): deterministic, unit-length, language-agnostic enough for the tests
that test something other than embeddings, and chosen through the same registry as the real ones (its name, its
recorded id, ``$LANTERN_EMBEDDER`` for a new database), never by default."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from lantern import EmbedderMismatchError, Lantern
from lantern.embed import (
    DEFAULT_EMBEDDER,
    EMBEDDERS,
    FakeEmbedder,
    default_embedder_name,
    embedder_class,
    embedder_name,
    get_embedder,
)


@given(st.lists(st.text(max_size=300), max_size=8))
@settings(max_examples=examples(100))
def test_any_texts_give_unit_rows_the_same_in_any_batch(texts):
    """Any text (empty, punctuation only, lone surrogates, NUL, CJK, emoji) gives one row of L2 norm 1, float32, and a
    text's row does not depend on the batch it is embedded in."""
    fake = FakeEmbedder()
    out = fake.embed(texts)
    assert out.shape == (len(texts), fake.dim) and out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    for text, row in zip(texts, out):
        assert np.array_equal(fake.embed([text])[0], row)


def test_the_same_vector_in_another_process():
    """Deterministic across processes: no salted ``hash``, no random state (a database written by one test process is
    read by another, and by the CLI subprocesses a test starts)."""
    texts = ["Postgres is up on port 5433", "数据库端口是5433", ""]
    script = "import sys; from lantern.embed import FakeEmbedder as F; sys.stdout.write(F().embed(%r).tobytes().hex())"
    other = subprocess.run([sys.executable, "-c", script % texts], capture_output=True, text=True, check=True).stdout
    assert bytes.fromhex(other) == FakeEmbedder().embed(texts).tobytes()


def test_shared_words_score_above_unrelated_text_in_english_and_chinese():
    """What the tests that use it rely on: a query sharing words (or CJK bigrams) with a text is closer to it than to
    unrelated text, in English and in Chinese; a word's inflection shares its trigrams."""
    fake = FakeEmbedder()
    q_en, hit_en, miss_en, q_zh, hit_zh, miss_zh = fake.embed(
        [
            "which port does the postgres database listen on",
            "Postgres is up on port 5433; the database config is in db_config.py",
            "Renamed format_money to format_amount in the billing utils",
            "数据库的端口是多少",
            "数据库端口是5433，配置在db_config.py里",
            "我昨天去了咖啡馆，天气很好",
        ]
    )
    assert q_en @ hit_en > 0.3 > q_en @ miss_en
    assert q_zh @ hit_zh > 0.3 > q_zh @ miss_zh
    ports, port, tea = fake.embed(["ports", "port", "tea"])
    assert ports @ port > 0.3 > abs(ports @ tea)


def test_type_errors_as_the_real_embedders():
    with pytest.raises(TypeError, match="sequence of strings"):
        FakeEmbedder().embed("one string")
    with pytest.raises(TypeError, match="takes strings"):
        FakeEmbedder().embed([b"bytes"])
    assert FakeEmbedder().embed([]).shape == (0, FakeEmbedder.dim)


def test_registered_by_name_and_id_and_never_the_default(monkeypatch):
    """The registry knows it by name (any case) and by the id a database records, and maps the id back to the name;
    the default embedder is a real one, and only ``$LANTERN_EMBEDDER`` makes ``fake`` the embedder of a new
    database."""
    assert EMBEDDERS["fake"] is FakeEmbedder is embedder_class("FAKE") is embedder_class(FakeEmbedder.id)
    assert embedder_name(FakeEmbedder.id) == "fake" and DEFAULT_EMBEDDER != "fake"
    monkeypatch.delenv("LANTERN_EMBEDDER", raising=False)
    assert default_embedder_name() == DEFAULT_EMBEDDER
    monkeypatch.setenv("LANTERN_EMBEDDER", "fake")
    assert type(get_embedder(None)) is FakeEmbedder and type(get_embedder("minilm")) is not FakeEmbedder
    monkeypatch.setenv("LANTERN_EMBEDDER", "bogus")
    with pytest.raises(ValueError, match=r"\$LANTERN_EMBEDDER: unknown embedder 'bogus'"):
        get_embedder(None)


def test_a_database_keeps_the_fake_embedder_it_was_created_with(tmp_path, monkeypatch):
    """Through the real API: ``$LANTERN_EMBEDDER`` picks the embedder of a new database only; the database records
    the fake's id, reopens with it whatever the variable says later, refuses another embedder by name, and a
    recovery finds the turn that shares the query's words."""
    path = tmp_path / "m.db"
    monkeypatch.setenv("LANTERN_EMBEDDER", "fake")
    with Lantern(path) as lt:
        lt.archive(
            [
                {"role": "user", "content": "Start the postgres container for billing."},
                {"role": "assistant", "content": "Postgres is up on port 5433."},
            ],
            session="s",
        )
        assert lt.stats()["embedder"] == FakeEmbedder.id
    monkeypatch.setenv("LANTERN_EMBEDDER", "minilm")
    with Lantern(path) as lt:
        assert lt.embedder.id == FakeEmbedder.id
        assert "5433" in lt.recover("postgres port").text
    with pytest.raises(EmbedderMismatchError):
        Lantern(path, embedder="minilm")
