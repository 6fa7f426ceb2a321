"""Failed token attempts on Lantern's local servers (``lantern ui --token``, ``lantern serve --token``): the one
limit both apply.

A client address may present a wrong token at most ``LIMIT`` times in ``WINDOW_S`` seconds. Past that, every
request of that address that presents a token (right or wrong: a guess is never checked) gets 429 with
``Retry-After`` until its oldest failure leaves the window. Requests that present no token (a first visit, the
login page) are not counted. Guessing a ``secrets.token_urlsafe`` token at 10 tries a minute is hopeless; an
address that only mistyped waits a minute at most. Other addresses are unaffected (an attacker cannot lock the
user out from their own). Memory is bounded: at most ``MAX_CLIENTS`` addresses are remembered, the least recent
dropped first. Our rule (OWASP's Authentication Cheat Sheet advises throttling failed attempts per source).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

LIMIT = 10  # failed attempts per address per window (ours)
WINDOW_S = 60.0  # seconds (ours)
MAX_CLIENTS = 10_000  # addresses remembered (ours)


class FailureLimit:
    """Per-address failed-attempt counts in a sliding window (module docstring). ``clock``: seconds, monotonic."""

    def __init__(
        self,
        limit: int = LIMIT,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = MAX_CLIENTS,
    ):
        self.limit, self.window_s, self.clock, self.max_clients = limit, window_s, clock, max_clients
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def wait(self, client: str) -> float:
        """Seconds ``client`` must wait before a token it presents is checked again; 0.0 when it may try now."""
        with self._lock:
            times = self._recent(client)
            if times is None or len(times) < self.limit:
                return 0.0
            return max(0.001, times[0] + self.window_s - self.clock())

    def failed(self, client: str) -> None:
        """Count a wrong token presented by ``client``."""
        with self._lock:
            times = self._recent(client)
            if times is None:
                times = self._failures[client] = deque()
                while len(self._failures) > self.max_clients:
                    self._failures.popitem(last=False)
            self._failures.move_to_end(client)
            times.append(self.clock())
            while len(times) > self.limit:
                times.popleft()

    def _recent(self, client: str) -> deque[float] | None:
        times = self._failures.get(client)
        if times is None:
            return None
        now = self.clock()
        while times and times[0] <= now - self.window_s:
            times.popleft()
        if not times:
            del self._failures[client]
            return None
        return times
