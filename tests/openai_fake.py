"""A local HTTP server that speaks the OpenAI chat-completions API, for the failure shapes a real model will not
produce on demand: malformed JSON, 4xx/5xx, a timeout, an answer naming ids that were never shown. The real
model (SmolLM2 through llama-cpp-python, tests/llm_server.py) covers the working path.

    with FakeLLM([answer("{\"ids\": [3, 1]}"), status(503)]) as fake:   # one reply per request, the last repeats;
                                                                        # a callable reply gets the request's JSON
        settings = fake.settings()                                      # LLMSettings pointing at it
        ...
        fake.requests                                                   # the JSON bodies it received
        fake.paths                                                      # their request targets (path?query)
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from lantern.llm import LLMSettings


def answer(text: str, tokens_in: int = 11, tokens_out: int = 7) -> dict:
    """A well-formed completion whose content is ``text``."""
    body = {
        "id": "fake",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out},
    }
    return {"status": 200, "body": json.dumps(body).encode()}


def status(code: int) -> dict:
    return {"status": code, "body": b'{"error": {"message": "fake failure"}}'}


def raw(body: bytes, code: int = 200) -> dict:
    """Any bytes as the response body (not JSON, JSON without choices, ...)."""
    return {"status": code, "body": body}


def slow(seconds: float, then: dict | None = None) -> dict:
    """Wait ``seconds`` before answering (a client with a shorter timeout gives up)."""
    return {**(then or answer('{"ids": []}')), "delay": seconds}


class FakeLLM:
    def __init__(self, replies: list[dict]):
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                length = int(self.headers.get("content-length") or 0)
                data = self.rfile.read(length)
                try:
                    fake.requests.append(json.loads(data))
                except ValueError:
                    fake.requests.append({"unparsed": data.decode("utf-8", "replace")})
                fake.headers.append(dict(self.headers))
                fake.paths.append(self.path)
                reply = fake.replies[min(len(fake.requests), len(fake.replies)) - 1]
                if callable(reply):  # a reply computed from the request (e.g. refused past a context size)
                    reply = reply(fake.requests[-1])
                if reply.get("delay"):
                    time.sleep(reply["delay"])
                try:
                    self.send_response(reply["status"])
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(reply["body"])))
                    self.end_headers()
                    self.wfile.write(reply["body"])
                except OSError:  # the client gave up (timeout)
                    pass

            def log_message(self, *args):  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        # serve_forever checks for shutdown() every poll_interval (0.5 s by default): each fake's exit waited up to
        # that long, about a minute of idle wall time over the suite's few hundred fakes
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def settings(self, timeout_s: float = 5.0) -> LLMSettings:
        return LLMSettings(self.base_url, "fake-model", timeout_s=timeout_s)

    def __enter__(self) -> FakeLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
