"""An ASGI app served by uvicorn on 127.0.0.1 in a daemon thread, for the tests that need a real HTTP server."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(app, port: int | None = None, wait_s: float = 15.0) -> tuple[int, uvicorn.Server, threading.Thread]:
    """Serve ``app`` on ``port`` (default: a free one); returns once it accepts (AssertionError after ``wait_s``)."""
    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + wait_s
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    return port, server, thread


def stop_server(server: uvicorn.Server, thread: threading.Thread) -> None:
    server.should_exit = True
    thread.join(timeout=5)
