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
import re
import threading
import time
from collections import Counter
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


def schema_of(request: dict) -> dict | None:
    """The JSON schema a request constrains its answer to, in any JSON mode (lantern/llm.py: ``schema`` sends
    ``{"type": "json_schema", "json_schema": {"schema": ...}}``, ``object`` ``{"type": "json_object", "schema":
    ...}``, ``off`` none), or None."""
    fmt = request.get("response_format") or {}
    return fmt.get("schema") or (fmt.get("json_schema") or {}).get("schema")


def sensible_judge(request: dict) -> dict:
    """The reply of a sensible judge (lantern/eval/judge.py's request): CORRECT when the answer holds every token of
    the gold (what a careful grader checks first), else WRONG."""
    from lantern.eval.answers import tokens

    user = request["messages"][-1]["content"]
    m = re.search(r"(?:Gold answer: |标准答案：)(.*)\n(?:Answer: |回答：)(.*)", user, re.S)
    assert m, user
    right = not Counter(tokens(m.group(1))) - Counter(tokens(m.group(2)))
    return answer(json.dumps({"label": "CORRECT" if right else "WRONG"}))


def shaped(judge_reply, text: str = "Pixel"):
    """A reply for a whole ``lantern eval --qa`` run: each request answered in the shape it asks for, read from its
    schema when it sends one (a rerank's ``{"ids": [...]}``: the first three ids it may name; MemGPT's
    ``{"memories": [...]}``: the first 60 characters of the turn; ``{"queries": [...]}``: the question; a letter's
    ``{"choice": ...}``: the first letter), else from its system prompt (the judge's: ``judge_reply``, a reply or a
    callable of the request). Any other request (a free-text answer) gets ``text``. The shapes only, never the
    content a model would find: a run's wiring and counts, not its figures."""
    from lantern.eval import judge

    def reply(request: dict) -> dict:
        if request["messages"][0]["content"] in judge.JUDGE.values():
            return judge_reply(request) if callable(judge_reply) else judge_reply
        props = (schema_of(request) or {}).get("properties", {})
        user = request["messages"][-1]["content"]
        if "ids" in props:
            return answer(json.dumps({"ids": props["ids"]["items"]["enum"][:3]}))
        if "memories" in props:
            return answer(json.dumps({"memories": [" ".join(user.split())[:60]]}))
        if "queries" in props:
            return answer(json.dumps({"queries": [user.strip().splitlines()[-1][:80]]}))
        if "choice" in props:
            return answer(json.dumps({"choice": props["choice"]["enum"][0]}))
        return answer(text)

    return reply


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
