"""Session-wide test settings."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _use_load_cache(tmp_path_factory):
    """The USE load cache (lantern/embed/use_cache.py) of this test run lives in a temporary folder, never in the
    user's ~/.cache; subprocesses started with a copy of os.environ share it."""
    before = os.environ.get("LANTERN_USE_CACHE")
    os.environ["LANTERN_USE_CACHE"] = str(tmp_path_factory.mktemp("use-cache"))
    yield
    if before is None:
        os.environ.pop("LANTERN_USE_CACHE", None)
    else:
        os.environ["LANTERN_USE_CACHE"] = before


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
