"""Session-wide test settings."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _use_load_cache(tmp_path_factory):
    """The USE load cache (lantern/use_cache.py) of this test run lives in a temporary folder, never in the
    user's ~/.cache; subprocesses started with a copy of os.environ share it."""
    before = os.environ.get("LANTERN_USE_CACHE")
    os.environ["LANTERN_USE_CACHE"] = str(tmp_path_factory.mktemp("use-cache"))
    yield
    if before is None:
        os.environ.pop("LANTERN_USE_CACHE", None)
    else:
        os.environ["LANTERN_USE_CACHE"] = before
